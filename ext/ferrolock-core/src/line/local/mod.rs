//! One waiter per process per name (issue 16). Threads of one process that wait for the same
//! auto-release DistMutex or ConcurrentLimiter (same client, same name) do not each queue in
//! Redis: while one of them waits in the Redis line, the others wait here, in FIFO order, each on
//! a condition variable of its own (a pass wakes only its receiver). When that one is granted the
//! hold, the process has nobody in the Redis line: the next release of one of its holders then pushes the next local waiter's entry at the
//! tail of the line in its own script (release.rs), so that waiter only blocks on its grant. A
//! newcomer while the process only holds goes to Redis itself. A limiter's process may hold
//! several slots: any of its holders' releases queues the next local waiter; a slot freed
//! elsewhere meanwhile is bounded by `unqueued` (the oldest goes to Redis by itself).
//!
//! The lines live in a process-wide map keyed by client and lock key (DistMutex objects are
//! created per call by the Ruby layer, so an instance would not do), reset in a forked child.
//! A line also remembers when this process last set the Redis line's TTL (`line_refreshed`):
//! every writer sets the same line TTL, so a release queueing a local waiter whose entry that
//! covers skips the PEXPIRE (`line_refresh_needed`).
//!
//! Design notes (moved from doc/ARCHITECTURE.md):
//!
//! One DistMutex waiter per process per name (`line/local/`: the line, its wait in `wait.rs`, the Redis line TTL it remembers in `line_ttl.rs`): threads of one process (one
//! client, one lock key: Ruby builds DistMutex objects per call, so not per instance) waiting for
//! the same auto-release name keep one entry in the Redis line; the others wait in a fork-local
//! map on a Condvar, FIFO. A local queue alone saves nothing (each section would still need one
//! attempt that enqueues): the saving comes from the release. When the process has nobody left
//! in the Redis line (its waiter was just granted), the holder's release script takes the next
//! local waiter's token + planned wait and RPUSHes its entry at the TAIL of the line (other
//! processes keep their turns; with nobody else waiting, the next pop hands the lock straight to
//! it), so that waiter never runs an attempt: told "queued as entry", it is exactly where a
//! failed attempt leaves a waiter (BLPOP on its grant; timeout → leave-line release; interrupt →
//! `cut_short`). A newcomer while the process only holds the lock goes to Redis itself, as
//! before. Bounds: a local waiter checks its interrupt every 10 ms (a Condvar cannot be woken by
//! `Interrupt::cancel`) and its own deadline; one never passed on within a lock TTL goes to Redis
//! alone; when the process's waiter in Redis leaves without the lock and nobody of the process
//! holds it, the oldest local waiter goes to Redis by itself. A release that fails (Redis error,
//! interrupt) tells its successor "uncertain": it runs the leave-line release first (an entry or
//! grant may have been written), then attempts; the background repeat of that release is the
//! plain one, so it cannot queue the successor again. Retried calls (cut short before) and
//! `min_replicas_acked` > 0 keep the one-entry-per-thread path (the retry must find its own
//! place; the acked hand-off adds its own round trip); spacers (`auto_release: false`) never
//! queue. The release's token check rides on the SET that hands the lock over (`SET lock
//! <next> PX ttl GET`, no separate GET): when the value was not its token (lease lost), the script
//! puts everything back (the lock's value with a fresh lease of the name's TTL: its remaining TTL
//! was overwritten, so a holder that died may block up to one lease longer; the chosen entry at the
//! head; the local waiter's entry out) and returns 0; a release that finds nobody waiting checks
//! and deletes in one command (LPOP, GETDEL), putting a lock that was not its own back the same
//! way. The line's TTL (issue 16): the process's `Line` remembers
//! when its last write that set the Redis line's TTL was sent (`line_refreshed`: the instant
//! before sending, recorded once the reply came back, from an attempt that queued or a release
//! that was asked to set it); as every writer sets the same `line_ttl`, the line lives at least
//! until then + `line_ttl`, so a queueing release asks the script to set it (ARGV 10) only when
//! now + the new entry's planned wait (≤ lock TTL + 1 s) is past that (`line_refresh_needed`):
//! about once per lock TTL + 1 s per process, or when nothing is known (a `Line` made anew, a
//! forked child). A list the script makes anew (the LPUSH putting an entry back) always gets
//! the TTL. Cost, contended, steady state, with grant lists: 9 commands per section (release 8:
//! EVALSHA, TIME, RPUSH entry, LPOP, SET lock GET, SET fence, RPUSH grant, PEXPIRE grant; BLPOP
//! 1), 10 in the rare section that sets the line's TTL; with the grant inbox (next bullet) 7
//! (release: EVALSHA, TIME, RPUSH entry, LPOP, SET lock GET, SET fence, PUBLISH), 8 when it sets
//! the line's TTL, 12 for a waiter that ran its own attempt.
//!
//! One ConcurrentLimiter waiter per process per name: the same `line/local/`, keyed by client and
//! `slots` key. A process may hold several slots: any holder's release that finds nobody of the process
//! in Redis queues the next local waiter (`lua/concurrent_limiter/release.lua` ARGV 5/6: RPUSH its entry
//! at the tail after the ZSCORE token check, so a lost slot queues nobody; then the usual pop and grant;
//! `{1, entry}` back). Two limiter-only rules, because a semaphore, unlike a mutex, can have room while
//! the process's threads wait locally: a waiter that entered by its own attempt (room) lets the oldest
//! local waiter attempt at once (`Member::acquired_with_room`), and the oldest local waiter attempts by
//! itself once nobody of its process has been in Redis for 100 ms (`unqueued` in `LocalWaiter::wait`; a
//! slot freed by another process's release with an empty line would otherwise wait for a release of this
//! one). Room itself is found by releases: with a limit ≤ 16 the release reads the live slots
//! (`ZRANGEBYSCORE`, in place of the `ZSCORE` token check: same count) and, after handing its own slot
//! on, gives each free slot to the next live entry (grant + `ZADD` with a whole lease); a queueing release
//! returns the room still left (`{1, entry, room}`) and that many local waiters attempt at once
//! (`line::local::pass_room`). A caller out of time (one attempt), a retried call and `min_replicas_acked` > 0 keep the
//! one-entry-per-thread path. A promoted waiter starts with the BLPOP for at most its planned wait (a
//! lease; its entry records it), then attempts keeping its place. `status` adds this process's local
//! waiters to the line's live entries. The line's TTL is set as DistMutex's (every writer the same
//! `line_ttl` = 2 × (max(lease, 1 s) + 1 s); a queueing release only when asked, ARGV 9). Cost,
//! contended, steady state: 10 commands per block between processes (release 9: EVALSHA, TIME,
//! ZRANGEBYSCORE, RPUSH entry, LPOP, RPUSH grant, PEXPIRE grant, ZADD, ZREM; BLPOP 1) with grant
//! lists, 8 with the grant inbox (PUBLISH instead of RPUSH + PEXPIRE + BLPOP), 10 (8) when the
//! line empties (the process alone), 9 (7) when the releaser's process already has its waiter in Redis;
//! the bench reads 8.0 at 32 workers / 4 processes (grant inbox), and 10.0 at 8 / 2, where about 84 %
//! of blocks enter by their own attempt through free room (acquire 5: EVALSHA, TIME, ZRANGEBYSCORE of every
//! member, ZADD, PEXPIRE on the slots; release 5), which the line's TTL does not touch. That attempt
//! (limit ≤ 16) reads all members at once, so it knows whether any expired slot is left to drop
//! (`ZREMRANGEBYSCORE` only then) and the latest live expiry, so one `PEXPIRE` sets the key's TTL to
//! exactly max(lease, latest − now) with no `PTTL` read (a key with more members than that read,
//! crashed holders piled up, or a limit over 16 keep the count + drop + `PTTL` path). The slot changes member (ZADD + ZREM: a release repeated in the background must never free
//! the next holder's slot, so the token cannot be reused).

use crate::fork::ForkLocal;
use crate::interrupt::Interrupt;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Condvar, LazyLock, Mutex, MutexGuard};
use std::time::{Duration, Instant};

mod line_ttl;
mod parked;
mod wait;

pub(crate) use line_ttl::line_refresh_needed;
pub use line_ttl::{forget_line_refresh, line_refreshed};
pub use parked::{park, parked_holds, PARK_TICK};
pub use wait::{Left, LocalWaiter};

/// How often a local waiter looks at its interrupt (a condition variable cannot be woken by
/// `Interrupt::cancel`), so an interrupt ends a local wait within this.
const INTERRUPT_POLL: Duration = Duration::from_millis(10);

/// (client identity, lock key).
type LineKey = (usize, String);

#[derive(Default)]
struct Lines(HashMap<LineKey, Line>);

static LINES: LazyLock<ForkLocal<Mutex<Lines>>> =
    LazyLock::new(|| ForkLocal::new(|| Mutex::new(Lines::default())));

fn lines() -> MutexGuard<'static, Lines> {
    LINES.get().lock().unwrap_or_else(|e| e.into_inner())
}

#[derive(Default)]
struct Line {
    /// Threads of this process that came through this line and wait in the Redis line.
    in_redis: usize,
    /// Threads that came through this line and hold the lock (one, unless a lease was lost).
    holding: usize,
    /// Local waiters still waiting to be passed on, oldest first.
    waiting: VecDeque<u64>,
    slots: HashMap<u64, Slot>,
    next_id: u64,
    /// Each local waiter's own condition variable, so a pass wakes the one thread it concerns
    /// (not every waiter of the name, which would each take the lines' lock to look and sleep
    /// again).
    wakes: HashMap<u64, Arc<Condvar>>,
    /// When this process sent the last write (its reply came back) that set the Redis line's
    /// TTL: taken before sending, so the line lives at least a line TTL past it.
    line_refreshed: Option<Instant>,
    /// Unfair mode: holds a holder of this process released to whichever of its threads asks
    /// first (parked.rs), oldest first.
    parked: VecDeque<parked::Parked>,
    /// Parked holds in a row a waiter had to take (nobody running asked in time), and how many
    /// releases still pass on directly because of them (parked.rs `Backoff`).
    park_backoff: parked::Backoff,
    /// A line of an unfair primitive: its oldest local waiter looks for parked holds this
    /// often (`PARK_TICK` but in tests).
    park_tick: Option<Duration>,
}

enum Slot {
    Waiting {
        token: String,
        deadline: Option<Instant>,
    },
    /// A release is queueing this waiter in Redis right now: it cannot leave until told.
    Promoting,
    Told(Turn),
}

/// What a local waiter does once passed on (it is then the process's waiter in Redis).
#[derive(Debug)]
pub enum Turn {
    /// Its entry is in the Redis line: wait for the grant, as after a failed attempt.
    Queued(String),
    /// Attempt on its own. `uncertain`: a release that failed may have queued it (or even
    /// granted it the lock): leave the Redis line first.
    Attempt { uncertain: bool },
    /// A holder of this process passed it the lock itself (cohort.rs): the primitive's hold,
    /// which `pass_on` was given. The waiter holds from now on.
    Handed(Baton),
}

/// What a holder passes to a local waiter with the lock (a primitive's hold).
pub type Baton = Box<dyn std::any::Any + Send>;

impl Line {
    /// The place in `waiting` of the oldest waiter whose wait has not ended (those out of time
    /// are skipped: they are about to leave by themselves).
    fn first_live_waiter(&self) -> Option<usize> {
        let now = Instant::now();
        self.waiting.iter().position(|id| {
            matches!(self.slots.get(id), Some(Slot::Waiting { deadline, .. })
                if deadline.is_none_or(|d| d > now + Duration::from_millis(1)))
        })
    }

    /// The wake-up of local waiter `id` (it looks at its slot), to send once the lines' lock is
    /// dropped.
    fn wake(&self, id: u64) -> Wake {
        Wake(self.wakes.get(&id).cloned())
    }

    /// Each parked hold is taken by a waiter of this line (parked.rs): waiters are not passed
    /// on, queued or sent to Redis while that would leave fewer than the parked holds.
    fn keeps_last_waiter(&self) -> bool {
        !self.parked.is_empty() && self.waiting.len() <= self.parked.len()
    }

    /// The oldest parked hold (parked.rs), taken by a thread that asks for the name.
    fn take_parked(&mut self) -> Option<Baton> {
        let parked = self.parked.pop_front()?;
        self.park_backoff.hit();
        Some(parked.baton)
    }

    fn is_unused(&self) -> bool {
        self.in_redis == 0
            && self.holding == 0
            && self.waiting.is_empty()
            && self.slots.is_empty()
            && self.parked.is_empty()
    }

    /// A member left its role. Invariant: local waiters wait only while a member will pass them
    /// on (one in Redis, or a holder whose release queues the next): when none is left, the
    /// oldest local waiter goes to Redis by itself.
    fn leave(&mut self, role: Role) -> Option<Wake> {
        match role {
            Role::InRedis => self.in_redis = self.in_redis.saturating_sub(1),
            Role::Holding => self.holding = self.holding.saturating_sub(1),
        }
        if self.in_redis + self.holding == 0 {
            return self.send_oldest_to_redis();
        }
        None
    }

    /// The oldest local waiter attempts on its own now (it then counts as a waiter in Redis):
    /// its wake-up, None when nobody waits here.
    fn send_oldest_to_redis(&mut self) -> Option<Wake> {
        if self.keeps_last_waiter() {
            return None;
        }
        let id = self.waiting.pop_front()?;
        self.slots
            .insert(id, Slot::Told(Turn::Attempt { uncertain: false }));
        self.in_redis += 1;
        Some(self.wake(id))
    }
}

/// A local waiter's wake-up, sent once the lines' lock is dropped: woken under it, the waiter
/// would at once block on that lock again (one more context switch for every pass, on a busy
/// CPU).
#[must_use]
struct Wake(Option<Arc<Condvar>>);

impl Wake {
    fn send(self) {
        if let Some(wake) = self.0 {
            wake.notify_one();
        }
    }
}

#[derive(Clone, Copy, PartialEq, Debug)]
enum Role {
    InRedis,
    Holding,
}

fn drop_if_unused(lines: &mut Lines, key: &LineKey) {
    if lines.0.get(key).is_some_and(Line::is_unused) {
        lines.0.remove(key);
    }
}

/// A thread of the line waiting in Redis, then holding. Dropping it may pass the turn on to
/// the oldest local waiter (see `Line::leave`).
pub struct Member {
    key: LineKey,
    generation: u64,
    role: Role,
}

impl Drop for Member {
    fn drop(&mut self) {
        // A member carried into a forked child belongs to the parent's lines.
        if crate::fork::generation() != self.generation {
            return;
        }
        let mut lines = lines();
        let wake = lines
            .0
            .get_mut(&self.key)
            .and_then(|line| line.leave(self.role));
        drop_if_unused(&mut lines, &self.key);
        drop(lines);
        if let Some(wake) = wake {
            wake.send();
        }
    }
}

impl Member {
    /// The member of a thread that took a parked hold: the holding count stayed with the hold,
    /// so it is ours now (no wake-up).
    fn holding(key: LineKey, generation: u64) -> Member {
        Member {
            key,
            generation,
            role: Role::Holding,
        }
    }

    /// The waiter in Redis got the lock.
    pub fn acquired(&mut self) {
        self.become_holder(false);
    }

    /// The waiter in Redis got a free slot by its own attempt (a limiter with room): the oldest
    /// local waiter, which may find room too, goes to Redis now (attempting), instead of waiting
    /// for a release of this process.
    pub fn acquired_with_room(&mut self) {
        self.become_holder(true);
    }

    fn become_holder(&mut self, room: bool) {
        if self.role == Role::Holding || crate::fork::generation() != self.generation {
            return;
        }
        let mut lines = lines();
        let mut wake = None;
        if let Some(line) = lines.0.get_mut(&self.key) {
            line.in_redis = line.in_redis.saturating_sub(1);
            line.holding += 1;
            if room && line.in_redis == 0 {
                wake = line.send_oldest_to_redis();
            }
        }
        drop(lines);
        if let Some(wake) = wake {
            wake.send();
        }
        self.role = Role::Holding;
    }

    /// For a holder of this fork, when no thread of the process waits in the Redis line (unless
    /// `ahead_of_redis_waiter`): the line and the oldest local waiter whose wait has not ended,
    /// taken out of `waiting`.
    fn next_local_waiter<'a>(
        &self,
        lines: &'a mut Lines,
        ahead_of_redis_waiter: bool,
    ) -> Option<(&'a mut Line, u64)> {
        if self.role != Role::Holding || crate::fork::generation() != self.generation {
            return None;
        }
        let line = lines.0.get_mut(&self.key)?;
        if line.in_redis > 0 && !ahead_of_redis_waiter {
            return None;
        }
        if line.keeps_last_waiter() {
            return None;
        }
        let at = line.first_live_waiter()?;
        let id = line.waiting.remove(at).expect("position found above");
        Some((line, id))
    }

    /// See [`pass_on`].
    fn pass(
        self,
        ahead_of_redis_waiter: bool,
        baton: impl FnOnce() -> Baton,
    ) -> std::result::Result<(), Member> {
        let mut lines = lines();
        let Some((line, id)) = self.next_local_waiter(&mut lines, ahead_of_redis_waiter) else {
            return Err(self);
        };
        line.slots.insert(id, Slot::Told(Turn::Handed(baton())));
        let wake = line.wake(id);
        drop(lines);
        wake.send();
        // Its holding count goes to the waiter, which becomes a holding member.
        std::mem::forget(self);
        Ok(())
    }

    /// When nobody of this process waits in Redis any more: the oldest local waiter whose wait
    /// has not ended, now being queued by this holder's release; `Err(self)` otherwise.
    pub fn take_successor(self) -> std::result::Result<Successor, Member> {
        let mut lines = lines();
        let Some((line, id)) = self.next_local_waiter(&mut lines, false) else {
            return Err(self);
        };
        let Some(Slot::Waiting { token, deadline }) = line.slots.insert(id, Slot::Promoting) else {
            unreachable!("only waiting slots are in `waiting`");
        };
        // From now the successor counts as the process's waiter in Redis (newcomers stay local).
        line.holding = line.holding.saturating_sub(1);
        line.in_redis += 1;
        drop(lines);
        Ok(Successor {
            member: Some(self),
            id,
            token,
            deadline,
            told: false,
        })
    }
}

/// Passes a hold to the oldest local waiter whose wait has not ended, which holds from then on
/// (`Turn::Handed`): `baton` is made only once such a waiter was chosen, under the line's lock,
/// so no waiter can leave (time out, be interrupted) between the choice and the pass. `member` is
/// the holder's (taken when passed). False, `member` left as it was, when there is none, it is
/// not a holder, nobody waits here, or (unless `ahead_of_redis_waiter`) a thread of the process
/// waits in the Redis line: it came before those waiting here and keeps its turn.
pub fn pass_on(
    member: &mut Option<Member>,
    ahead_of_redis_waiter: bool,
    baton: impl FnOnce() -> Baton,
) -> bool {
    let Some(holder) = member.take() else {
        return false;
    };
    match holder.pass(ahead_of_redis_waiter, baton) {
        Ok(()) => true,
        Err(holder) => {
            *member = Some(holder);
            false
        }
    }
}

/// True when `member` is a holder with a live local waiter it may pass to (as `pass_on` would
/// find one now; it may leave before a pass).
pub fn has_live_waiter(member: &Option<Member>, ahead_of_redis_waiter: bool) -> bool {
    let Some(holder) = member else {
        return false;
    };
    if holder.role != Role::Holding || crate::fork::generation() != holder.generation {
        return false;
    }
    let lines = lines();
    lines.0.get(&holder.key).is_some_and(|line| {
        (line.in_redis == 0 || ahead_of_redis_waiter) && line.first_live_waiter().is_some()
    })
}

/// A local waiter being queued in Redis by a release. Told what happened, it goes on as the
/// process's waiter in Redis; dropped untold, it is told to attempt, uncertain.
pub struct Successor {
    member: Option<Member>,
    id: u64,
    pub token: String,
    pub deadline: Option<Instant>,
    told: bool,
}

impl Successor {
    pub fn tell(mut self, turn: Turn) {
        self.told = true;
        self.hand_over(turn);
    }

    fn hand_over(&mut self, turn: Turn) {
        let Some(member) = self.member.take() else {
            return;
        };
        let mut lines = lines();
        let wake = lines.0.get_mut(&member.key).map(|line| {
            // The counts moved at `take_successor`.
            line.slots.insert(self.id, Slot::Told(turn));
            line.wake(self.id)
        });
        drop(lines);
        if let Some(wake) = wake {
            wake.send();
        }
        std::mem::forget(member);
    }
}

impl Drop for Successor {
    fn drop(&mut self) {
        if !self.told {
            self.hand_over(Turn::Attempt { uncertain: true });
        }
    }
}

pub enum Joined {
    /// Nobody of this process waits in Redis nor here: go to Redis yourself.
    Active(Member),
    /// Wait here with [`LocalWaiter::wait`].
    Local(LocalWaiter),
    /// A hold a holder of this process parked (unfair mode): held from now on.
    Parked(Baton, Member),
}

/// Joins the line for `lock_key` of `client_id`. `park_tick` (unfair mode, see parked.rs): a
/// hold parked by a holder of the process is taken at once, and (unless `slots`: a limiter's
/// newcomer may find a free slot) while a thread of the process holds, a newcomer waits here
/// for its pass (barging ahead of other processes) instead of queueing in Redis.
pub fn join(
    client_id: usize,
    lock_key: &str,
    token: &str,
    deadline: Option<Instant>,
    park_tick: Option<Duration>,
    slots: bool,
) -> Joined {
    let unfair = park_tick.is_some();
    let key = (client_id, lock_key.to_string());
    let generation = crate::fork::generation();
    let mut lines = lines();
    let line = lines.0.entry(key.clone()).or_default();
    if park_tick.is_some() {
        line.park_tick = park_tick;
    }
    if let Some(baton) = line.take_parked() {
        return Joined::Parked(baton, Member::holding(key, generation));
    }
    let barge = unfair && !slots && line.holding > 0;
    if line.in_redis == 0 && line.waiting.is_empty() && !barge {
        line.in_redis = 1;
        let role = Role::InRedis;
        return Joined::Active(Member {
            key,
            generation,
            role,
        });
    }
    line.next_id += 1;
    let id = line.next_id;
    line.waiting.push_back(id);
    let slot = Slot::Waiting {
        token: token.to_string(),
        deadline,
    };
    line.slots.insert(id, slot);
    let wake = Arc::new(Condvar::new());
    line.wakes.insert(id, wake.clone());
    Joined::Local(LocalWaiter {
        key,
        id,
        wake,
        generation,
    })
}

/// Unfair mode: a hold a holder of this process parked for `lock_key` of `client_id`, taken
/// as `join` would take it, without joining when there is none (the caller then joins). Never
/// blocks (the lines' lock only), so the binding calls it with Ruby's GVL held.
pub fn take_parked(client_id: usize, lock_key: &str) -> Option<(Baton, Member)> {
    let key = (client_id, lock_key.to_string());
    let mut lines = lines();
    let baton = lines.0.get_mut(&key)?.take_parked()?;
    drop(lines);
    Some((baton, Member::holding(key, crate::fork::generation())))
}

/// A limiter has `room` free slots: up to that many of the oldest local waiters attempt now (each
/// then counts as a waiter in Redis).
pub fn pass_room(client_id: usize, lock_key: &str, room: usize) {
    let mut lines = lines();
    let Some(line) = lines.0.get_mut(&(client_id, lock_key.to_string())) else {
        return;
    };
    let wakes: Vec<Wake> = (0..room)
        .map_while(|_| line.send_oldest_to_redis())
        .collect();
    drop(lines);
    wakes.into_iter().for_each(Wake::send);
}

/// Local waiters of one name (tests: how many threads of this process wait behind the one in Redis).
pub fn local_waiters(client_id: usize, lock_key: &str) -> usize {
    lines()
        .0
        .get(&(client_id, lock_key.to_string()))
        .map_or(0, |l| l.waiting.len())
}
