//! ConcurrentLimiter: at most `limit` holders at once across processes. Each slot is a member of
//! a sorted set scored by its lease expiry (Redis time), renewed while held, so a block that runs
//! past the lease keeps its slot; an expired member means a crashed holder and counts as free.
//!
//! Contended, waiters form a FIFO line in Redis: a failed attempt enqueues its token, and a
//! release hands its slot straight to the first waiter still waiting
//! (lua/concurrent_limiter/release.lua), which pops the grant from its own list and enters
//! (handoff.rs): no second attempt, no barging.
//!
//! Threads of one process waiting for the same name queue in Redis one at a time (local_line.rs,
//! shared with DistMutex): the others wait in the process, and the next release of any of the
//! process's holders queues the next local waiter at the tail of the Redis line in the same
//! script (when the process has nobody there), so that waiter only pops its grant.
//!
//! A holder whose process has a thread waiting locally for the name passes its slot to it
//! without Redis (the cohort hand-off, cohort.rs): at most `local_passes` times in a row and
//! within the cohort window of the slot's Redis acquisition; then the slot goes back through
//! Redis, whose line serves other processes.

use crate::client::{int, ints, Client};
use crate::cohort::{self, Cohort};
use crate::error::{Error, Result};
use crate::handoff::{ack_grant, await_grant, Awaiting, CutShort};
use crate::inbox::{Inbox, Waited};
use crate::interrupt::Interrupt;
use crate::lease::Lease;
use crate::local_line::{self, Joined, Left, Member, Turn};
use crate::lost_leases::LostLease;
use crate::lost_reason::why_lost;
use crate::lua_script;
use crate::replicas::{ack_timeout, eval_grant, refuse};
use crate::script::ScriptCall;
use crate::unanswered_releases;
use redis::Value;
use std::time::{Duration, Instant};

lua_script!(ACQUIRE = "concurrent_limiter/acquire");
lua_script!(RELEASE = "concurrent_limiter/release");
lua_script!(RENEW = "concurrent_limiter/renew");
lua_script!(STATUS = "concurrent_limiter/status");

/// A waiter's entry outlives its planned wait by this much, so a release that lands just as the
/// wait ends still hands over (the waiter then finds the slot its own at its next attempt).
const WAIT_MARK_MARGIN: Duration = Duration::from_secs(1);

/// Between attempts a waiter blocks at least this long (unless its deadline is nearer): the
/// earliest lease expiry keeps moving while holders renew, and re-checking it more often would
/// cost a waiter more than two commands a second. Only a crashed holder's slot is found later.
const MIN_RECHECK: Duration = Duration::from_secs(1);

/// The oldest local waiter attempts by itself once nobody of its process has waited in Redis for
/// this long (local_line.rs, `unqueued`): only releases of this process's holders pass local
/// waiters on, so a slot freed meanwhile by another process (with an empty line) would stay idle
/// until one of them releases. Short, so such a slot idles at most this long; it costs one
/// attempt only when no holder of the process released within it (long blocks), which also puts
/// the process back in the line.
const UNQUEUED_GRACE: Duration = Duration::from_millis(100);

#[derive(Clone, Debug)]
pub struct LimiterOptions {
    pub limit: u32,
    /// How long a slot survives without renewal: the crash-recovery bound.
    pub lease: Duration,
    /// Cohort hand-offs in a row (0..=cohort::MAX_LOCAL_PASSES; 0: every slot goes back
    /// through Redis).
    pub local_passes: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LimiterStatus {
    pub limit: u32,
    pub in_use: u32,
    pub waiting: u32,
}

pub struct ConcurrentLimiter {
    client: Client,
    name: String,
    slots_key: String,
    line_key: String,
    /// `<ns>:{name}:grant:`, followed by a waiter's token.
    grant_prefix: String,
    limit: u32,
    lease: Duration,
    min_replicas_acked: u32,
    local_passes: u32,
    /// No cohort hand-off later than this after the slot's Redis acquisition.
    cohort_window: Duration,
    /// Tokens of `acquire` calls cut short (interrupted, Redis unreachable), with their place in
    /// line if any: a retry with the same token checks whether a slot is already its own and
    /// takes its place back instead of queueing twice; `abandon` drops it.
    cut_short: CutShort,
}

/// A held slot. Dropping it without `release` stops renewal; the slot then expires.
pub struct Slot {
    token: String,
    /// Renewal while held (None only in the empty shell a cohort hand-off leaves behind).
    lease: Option<Lease>,
    /// This holder's place among its process's threads for the name, when it came through the
    /// local line: its release may queue the next local waiter.
    member: Option<Member>,
    /// Cohort hand-offs of this slot since its Redis acquisition.
    cohort: Cohort,
}

impl Slot {
    pub fn token(&self) -> &str {
        &self.token
    }
}

/// How a waiter got its slot.
enum Entered {
    /// A release handed it over: the limiter was full.
    HandedOver,
    /// Its own attempt found room (or a slot granted to it meanwhile).
    FreeSlot,
}

enum Attempt {
    Acquired,
    /// `entry`: this token's place in the line, when it queued.
    Full {
        expires_in_ms: i64,
        entry: Option<String>,
    },
}

impl ConcurrentLimiter {
    pub fn new(client: &Client, name: &str, opts: LimiterOptions) -> Result<ConcurrentLimiter> {
        let keys = client.keys(name)?;
        if opts.limit == 0 {
            return Err(Error::argument("count: must be a positive integer"));
        }
        crate::seconds::check_span("lease", opts.lease)?;
        cohort::check_local_passes(opts.local_passes)?;
        Ok(ConcurrentLimiter {
            client: client.clone(),
            name: name.to_string(),
            slots_key: keys.part("slots"),
            // Not "waiters": older versions keep a sorted set there, DistMutex a list.
            line_key: keys.part("line"),
            grant_prefix: keys.part("grant:"),
            limit: opts.limit,
            lease: opts.lease,
            min_replicas_acked: 0,
            local_passes: opts.local_passes,
            cohort_window: cohort::window(opts.lease),
            cut_short: CutShort::default(),
        })
    }

    /// Replicas that must hold each slot grant before the caller enters (0: don't wait); see
    /// replicas.rs.
    pub fn with_min_replicas_acked(mut self, n: u32) -> Self {
        self.min_replicas_acked = n;
        self
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn limit(&self) -> u32 {
        self.limit
    }

    /// A fresh slot token (uuid v4).
    pub fn new_token() -> String {
        crate::token::new_token()
    }

    fn lease_ms(&self) -> u64 {
        crate::seconds::millis(self.lease)
    }

    fn grant_key(&self, token: &str) -> String {
        format!("{}{}", self.grant_prefix, token)
    }

    /// One round trip. Queues (as a new entry, or in the place of `queued`, this token's earlier
    /// entry) unless `wait_ms` is 0. `maybe_ours`: the script checks whether the token holds a
    /// slot already. `inbox`: the grant inbox its entry names (None: it pops its grant list).
    fn attempt(
        &self,
        intr: &Interrupt,
        token: &str,
        wait_ms: u64,
        queued: Option<&str>,
        maybe_ours: bool,
        inbox: Option<&str>,
    ) -> Result<Attempt> {
        let call = ScriptCall::new(&ACQUIRE)
            .key(&self.slots_key)
            .key(&self.line_key)
            .key(self.grant_key(token))
            .arg(token)
            .arg(self.limit)
            .arg(self.lease_ms())
            .arg(wait_ms)
            .arg(queued.unwrap_or(""))
            .arg(if maybe_ours { "1" } else { "0" })
            .arg(crate::seconds::millis(self.line_ttl()))
            .arg(inbox.unwrap_or(""));
        let wanted = self.min_replicas_acked;
        let sent_at = Instant::now();
        let (reply, acked) = eval_grant(&self.client, intr, &call, wanted, self.lease)?;
        let unexpected = || {
            Error::Redis(format!(
                "concurrent_limiter/acquire: unexpected reply {reply:?}"
            ))
        };
        let Value::Array(items) = &reply else {
            return Err(unexpected());
        };
        match (items.first().map(int), items.get(1).map(int), items.get(2)) {
            (Some(Ok(1)), Some(Ok(_)), None) if acked < i64::from(wanted) => Err(refuse(
                &self.client,
                intr,
                self.release_call(token, false),
                self.lease,
                wanted,
                acked,
            )),
            (Some(Ok(1)), Some(Ok(_)), None) => Ok(Attempt::Acquired),
            (Some(Ok(0)), Some(Ok(expires_in_ms)), entry) => Ok(Attempt::Full {
                expires_in_ms,
                entry: match entry {
                    None => None,
                    Some(Value::BulkString(b)) => {
                        // Queued: the script set the line's TTL.
                        local_line::line_refreshed(
                            self.client.identity(),
                            &self.slots_key,
                            sent_at,
                        );
                        Some(String::from_utf8_lossy(b).into_owned())
                    }
                    Some(_) => return Err(unexpected()),
                },
            }),
            _ => Err(unexpected()),
        }
    }

    /// The token-checked renewal of a held slot (the lease's, and the hand-off's ack write).
    fn renew_call(&self, token: &str) -> ScriptCall {
        ScriptCall::new(&RENEW)
            .key(&self.slots_key)
            .arg(token)
            .arg(self.lease_ms())
    }

    fn slot(&self, token: &str) -> Slot {
        let report = LostLease::new("concurrent_limiter", &self.name);
        Slot {
            token: token.to_string(),
            lease: Some(Lease::start_reporting(
                &self.client,
                self.renew_call(token),
                self.lease,
                report,
            )),
            member: None,
            cohort: Cohort::unfenced(Instant::now()),
        }
    }

    /// Tests: another cohort window (a slow test machine may take longer than the default
    /// between an acquisition and the release it checks).
    #[doc(hidden)]
    pub fn with_cohort_window(mut self, window: Duration) -> Self {
        self.cohort_window = window;
        self
    }

    /// Passes `slot` to the oldest live local waiter of its process (the cohort hand-off, no
    /// Redis round trip) when its cohort may pass on once more: true when passed (`slot` is
    /// then an empty shell: its token and lease went to the waiter).
    fn pass_locally(&self, slot: &mut Slot) -> bool {
        let Some(next) = slot.cohort.next(self.local_passes, self.cohort_window) else {
            return false;
        };
        // Ahead of the process's waiter in Redis: a limiter's process often holds slots while
        // one of its threads waits there for another, and passing this slot takes nothing from
        // that waiter (its entry still waits for a slot released through Redis).
        local_line::pass_on(&mut slot.member, true, || {
            Box::new(Slot {
                token: std::mem::take(&mut slot.token),
                lease: slot.lease.take(),
                member: None,
                cohort: next,
            })
        })
    }

    /// Waits for a slot until `deadline` (one attempt when it has passed already). `Ok(None)`
    /// when none freed in time. `token` should stay the same when the call is repeated after an
    /// interruption, so a slot taken by the interrupted attempt is recognised as ours.
    pub fn acquire(
        &self,
        intr: &Interrupt,
        token: &str,
        deadline: Instant,
    ) -> Result<Option<Slot>> {
        // A retry of a call cut short takes its place in line back (and may be granted already).
        // It, a grant that replicas must acknowledge (ack_grant's extra round trip) and a caller
        // out of time (one attempt: it must not wait behind the process's waiter) keep the
        // plain path: one Redis entry per thread.
        self.cut_short.resume(token, |retried, queued| {
            if retried || self.min_replicas_acked > 0 || deadline <= Instant::now() {
                let entered = self.wait_in_line(intr, token, deadline, retried, queued, None)?;
                Ok(entered.map(|(slot, _)| slot))
            } else {
                self.wait_in_process_line(intr, token, deadline, queued)
            }
        })
    }

    /// Threads of this process waiting for this name behind the one in Redis (for tests).
    pub fn local_waiters(&self) -> usize {
        local_line::local_waiters(self.client.identity(), &self.slots_key)
    }

    /// The longest a waiter blocks between two attempts: its entry must cover that.
    fn max_block(&self) -> Duration {
        self.lease.max(MIN_RECHECK)
    }

    /// The TTL every writer gives the line: twice the longest entry a waiter of this name plans
    /// (`max_block` + `WAIT_MARK_MARGIN`), so a process that set it at T may queue entries
    /// without setting it again until that long after T (see `local_line::line_refresh_needed`,
    /// lua/concurrent_limiter/acquire.lua).
    pub fn line_ttl(&self) -> Duration {
        (self.max_block() + WAIT_MARK_MARGIN)
            .saturating_mul(2)
            .min(crate::seconds::MAX)
    }

    /// Tests: forget when this process last set the line's TTL (its next queueing release sets
    /// it again).
    #[doc(hidden)]
    pub fn forget_line_refresh(&self) {
        local_line::forget_line_refresh(self.client.identity(), &self.slots_key)
    }

    /// How long a waiter plans to wait for its next turn (ms; 0: it is out of time and won't),
    /// which its entry in the line records.
    fn planned_wait_ms(&self, deadline: Instant) -> u64 {
        let left = deadline.saturating_duration_since(Instant::now());
        // A caller out of time makes its last attempt without joining the line.
        if left.is_zero() {
            0
        } else {
            crate::seconds::millis(left.min(self.max_block()) + WAIT_MARK_MARGIN)
        }
    }

    /// Waits behind the process's waiter in Redis for this name (if any) until passed on, then
    /// in Redis: with the entry a release queued, or by an attempt of its own.
    fn wait_in_process_line(
        &self,
        intr: &Interrupt,
        token: &str,
        deadline: Instant,
        queued: &mut Option<String>,
    ) -> Result<Option<Slot>> {
        // A release may queue this waiter from now on (and publish its grant right after).
        let joined_at = Instant::now();
        let joined = local_line::join(
            self.client.identity(),
            &self.slots_key,
            token,
            Some(deadline),
        );
        let (turn, member) = match joined {
            Joined::Active(member) => (Turn::Attempt { uncertain: false }, member),
            // Holders renew, so nobody but a release passes a local waiter on within a lease;
            // a slot freed by another process's release while none of this one waits in Redis
            // is found within UNQUEUED_GRACE (the oldest local waiter then attempts).
            Joined::Local(waiter) => {
                match waiter.wait(intr, self.max_block(), Some(UNQUEUED_GRACE)) {
                    Ok(turned) => turned,
                    Err(Left::Timeout) => return Ok(None),
                    Err(Left::Interrupted) => return Err(Error::Interrupted),
                }
            }
        };
        if let Turn::Handed(baton) = turn {
            // A holder of this process passed us its slot (cohort.rs): no Redis.
            let Ok(mut slot) = baton.downcast::<Slot>() else {
                return Err(Error::internal(
                    "ConcurrentLimiter: a foreign hold was passed",
                ));
            };
            slot.member = Some(member);
            return Ok(Some(*slot));
        }
        let mut member = member;
        // `member` lives until this returns: an error passes the turn on as it drops.
        let queued_by_release = turn.start(queued, || {
            let leave = self.release_call(token, true);
            crate::lease::release_now(&self.client, intr, leave, self.lease).map(drop)
        })?;
        let queued_at = queued_by_release.then_some(joined_at);
        let entered = self.wait_in_line(intr, token, deadline, false, queued, queued_at)?;
        Ok(entered.map(|(mut slot, how)| {
            match how {
                Entered::HandedOver => member.acquired(),
                // The limiter had room: the next local waiter may find some too, so it attempts
                // now instead of waiting for a release of this process.
                Entered::FreeSlot => member.acquired_with_room(),
            }
            slot.member = Some(member);
            slot
        }))
    }

    /// Attempts, queueing on failure, then waits for the hand-off. One turn's wait never
    /// outlasts the earliest live slot's expiry (at least `MIN_RECHECK`): a holder that crashed
    /// hands over nothing, so then it attempts again, keeping its place in the line.
    /// `queued_by_release`: a release already queued this waiter (as `queued`) no earlier than
    /// that instant, so it starts with the wait, for at most its planned wait (a lease). A
    /// grant comes through the client's inbox when the entry names it, else from the waiter's
    /// grant list.
    fn wait_in_line(
        &self,
        intr: &Interrupt,
        token: &str,
        deadline: Instant,
        retried: bool,
        queued: &mut Option<String>,
        queued_by_release: Option<Instant>,
    ) -> Result<Option<(Slot, Entered)>> {
        let mut skip_attempt = queued_by_release.is_some();
        let mut queued_at = queued_by_release.unwrap_or_else(Instant::now);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if std::mem::take(&mut skip_attempt) && !left.is_zero() {
                // As planned by the release's entry: at most a lease (the earliest slot's
                // expiry is not known without an attempt; a crashed holder's slot is found
                // at the next one).
                let wait = left.min(self.max_block());
                if self.await_grant(intr, token, queued, queued_at, wait)? {
                    *queued = None;
                    return Ok(Some((self.granted(intr, token)?, Entered::HandedOver)));
                }
                continue;
            }
            let wait_ms = self.planned_wait_ms(deadline);
            let maybe_ours = retried || queued.is_some();
            let inbox = self.client.inbox().before_attempt(token);
            queued_at = Instant::now();
            let expires_in_ms = match self.attempt(
                intr,
                token,
                wait_ms,
                queued.as_deref(),
                maybe_ours,
                inbox.as_deref(),
            )? {
                Attempt::Acquired => {
                    *queued = None;
                    return Ok(Some((self.slot(token), Entered::FreeSlot)));
                }
                Attempt::Full {
                    expires_in_ms,
                    entry,
                } => {
                    if entry.is_some() {
                        *queued = entry;
                        if inbox.is_none() {
                            // Contended: the process's next waits are granted through its
                            // inbox.
                            self.client.inbox().start(&self.client);
                        }
                    }
                    expires_in_ms
                }
            };
            let now = Instant::now();
            if left.is_zero() || now >= deadline {
                self.give_up(intr, token, queued);
                return Ok(None);
            }
            let wait = Duration::from_millis(expires_in_ms.max(0) as u64)
                .max(MIN_RECHECK)
                .min(deadline - now);
            if self.await_grant(intr, token, queued, queued_at, wait)? {
                *queued = None;
                return Ok(Some((self.granted(intr, token)?, Entered::HandedOver)));
            }
            if Instant::now() >= deadline {
                // One last attempt (it may find the slot a hand-off raced in), then leave.
                continue;
            }
        }
    }

    /// Waits up to `wait` for a slot's grant: true when handed one. A grant the inbox may have
    /// missed counts as none (the next attempt finds the slot if it is ours).
    fn await_grant(
        &self,
        intr: &Interrupt,
        token: &str,
        queued: &Option<String>,
        queued_at: Instant,
        wait: Duration,
    ) -> Result<bool> {
        let waiter = Awaiting {
            token,
            entry: queued.as_deref(),
            queued_at,
            grant_key: &self.grant_key(token),
        };
        Ok(matches!(
            await_grant(&self.client, intr, waiter, wait)?,
            Waited::Granted(_)
        ))
    }

    /// A release handed this waiter a slot. With `min_replicas_acked` the grant's ack is
    /// checked first (see handoff::ack_grant).
    fn granted(&self, intr: &Interrupt, token: &str) -> Result<Slot> {
        let wanted = self.min_replicas_acked;
        if wanted > 0 {
            let within = ack_timeout(&self.client, self.lease);
            let acked = ack_grant(&self.client, intr, &self.renew_call(token), wanted, within)?;
            if acked < i64::from(wanted) {
                return Err(refuse(
                    &self.client,
                    intr,
                    self.release_call(token, false),
                    self.lease,
                    wanted,
                    acked,
                ));
            }
        }
        Ok(self.slot(token))
    }

    /// The deadline passed: leave the line. A hand-off that raced in is passed on to the next
    /// waiter in the same script, so it never keeps a slot idle for a lease.
    fn give_up(&self, intr: &Interrupt, token: &str, queued: &mut Option<String>) {
        if queued.take().is_some() {
            let _ = crate::lease::release_now(
                &self.client,
                intr,
                self.release_call(token, true),
                self.lease,
            );
        }
    }

    /// Gives the slot back (to the next waiter in line, if any). `Error::LockLost` when the
    /// slot's lease had run out (or Redis lost it) while held: the limit may have been exceeded
    /// meanwhile.
    pub fn release(&self, intr: &Interrupt, mut slot: Slot) -> Result<()> {
        let lost_before = slot.lease.as_ref().is_some_and(Lease::is_lost);
        if !lost_before && self.pass_locally(&mut slot) {
            return Ok(());
        }
        let token = slot.token.clone();
        let member = slot.member.take();
        drop(slot); // stop renewing before releasing

        // The member is kept until the release is done (a newcomer meanwhile waits locally and
        // is then passed on), or handed to the local successor this release queues.
        let successor = member.map(Member::take_successor);
        let released = match successor {
            Some(Ok(successor)) => self.release_queueing(intr, &token, successor)?,
            _ => {
                int(&crate::lease::release_now(
                    &self.client,
                    intr,
                    self.release_call(&token, false),
                    self.lease,
                )?)? == 1
            }
        };
        if released && !lost_before {
            Ok(())
        } else {
            let why = why_lost(&self.client, intr, &self.name, &token, None);
            Err(Error::LockLost(format!(
                "ConcurrentLimiter {:?}: the slot was lost while held: {}",
                self.name,
                why.text()
            )))
        }
    }

    /// The release that also queues the process's next local waiter for this name (see
    /// local_line.rs). True when the slot was still ours.
    fn release_queueing(
        &self,
        intr: &Interrupt,
        token: &str,
        successor: local_line::Successor,
    ) -> Result<bool> {
        let line = local_line::LineRelease {
            client: &self.client,
            lock_key: &self.slots_key,
            line_ttl: self.line_ttl(),
            lease: self.lease,
            script: "concurrent_limiter/release",
        };
        let wait_ms = successor.deadline.map_or(0, |d| self.planned_wait_ms(d));
        let (released, room) = local_line::release_queueing(
            line,
            intr,
            successor,
            wait_ms,
            |next, inbox, refresh| {
                self.release_queueing_call(token, false, next, inbox, wait_ms, refresh)
            },
            || self.release_call(token, false),
        )?;
        // Slots still free (one freed earlier while nobody was in line): the next local waiters
        // attempt now instead of waiting for releases of this process.
        if room > 0 {
            local_line::pass_room(self.client.identity(), &self.slots_key, room);
        }
        Ok(released)
    }

    /// After `acquire` failed (Redis unreachable, interrupted): Redis may still have given
    /// `token` a slot with the reply lost, so release it in the background rather than keep
    /// the slot taken for a whole lease. `token` must not be used again. It also takes
    /// the token out of the line, and passes on a hand-off that reached it.
    pub fn abandon(&self, token: &str) {
        self.cut_short.forget(token);
        // Until Redis answers, this process's `status` waits for the give-back (the interrupted
        // caller holds nothing, so its slot must not show as in use).
        crate::lease::release_in_background_announced(
            &self.client,
            self.release_call(token, true),
            self.lease,
            &self.slots_key,
        );
    }

    /// The token-checked release of one slot (handing it to the next waiter), used by
    /// `release` and `abandon`; `leave_line`: the token also leaves the line.
    pub(crate) fn release_call(&self, token: &str, leave_line: bool) -> ScriptCall {
        self.release_queueing_call(token, leave_line, "", None, 0, false)
    }

    /// `release_call` that also queues `successor` (a local waiter's token, planning to wait
    /// `wait_ms`, granted through `inbox` if given) at the tail of the line ("" for none),
    /// setting the line's TTL after it when `refresh_line`.
    fn release_queueing_call(
        &self,
        token: &str,
        leave_line: bool,
        successor: &str,
        inbox: Option<&str>,
        wait_ms: u64,
        refresh_line: bool,
    ) -> ScriptCall {
        ScriptCall::new(&RELEASE)
            .key(&self.slots_key)
            .key(&self.line_key)
            .key(self.grant_key(token))
            .arg(token)
            .arg(self.lease_ms())
            .arg(self.grant_prefix.as_str())
            .arg(if leave_line { "1" } else { "0" })
            .arg(successor)
            .arg(wait_ms)
            .arg(self.limit)
            .arg(crate::seconds::millis(self.line_ttl()))
            .arg(if refresh_line { "1" } else { "0" })
            .arg(inbox.unwrap_or(""))
            .arg(Inbox::channel(self.client.namespace(), ""))
    }

    /// Live slots and waiting callers: the live entries of the Redis line (one per waiting
    /// process, and threads that queued themselves) plus this process's threads waiting behind
    /// its entry (other processes' local waiters are not visible in Redis).
    pub fn status(&self, intr: &Interrupt) -> Result<LimiterStatus> {
        unanswered_releases::wait_answered(self.client.identity(), &self.slots_key, intr)?;
        let call = ScriptCall::new(&STATUS)
            .key(&self.slots_key)
            .key(&self.line_key);
        match ints(&self.client.eval(intr, &call)?)?.as_slice() {
            [in_use, waiting] => Ok(LimiterStatus {
                limit: self.limit,
                in_use: count_u32(*in_use),
                waiting: count_u32(waiting.saturating_add(self.local_waiters() as i64)),
            }),
            other => Err(Error::Redis(format!(
                "concurrent_limiter/status: unexpected reply {other:?}"
            ))),
        }
    }
}

/// A count Redis reported, as u32: clamped instead of wrapped (a count is never negative or
/// above u32::MAX unless the keys were tampered with).
fn count_u32(n: i64) -> u32 {
    u32::try_from(n.max(0)).unwrap_or(u32::MAX)
}
