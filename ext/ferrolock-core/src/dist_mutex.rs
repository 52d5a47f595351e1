//! DistMutex: a Redis mutex. With `auto_release` the lock is a lease renewed while held and
//! released at unlock; without it (the crawler's spacer) the lock simply expires `expire` after
//! it was taken, so successive holders start at least `expire` apart.
//!
//! Contended, waiters form a FIFO in Redis: a failed attempt enqueues its token, and a release
//! hands the lock straight to the first waiter still waiting (lua/dist_mutex/release.lua),
//! which pops the grant from its own list and enters (handoff.rs): no second attempt, no
//! barging.
//!
//! Threads of one process waiting for the same name queue in Redis one at a time (local_line.rs):
//! the others wait in the process, and a release queues the releasing process's next local
//! waiter at the tail of the Redis line in the same script (when the process has nobody there),
//! so that waiter only pops its grant.
//!
//! A holder whose process has such a local waiter may instead pass the lock to it directly,
//! with no Redis round trip, a bounded number of times (cohort.rs).

use crate::client::{int, Client};
use crate::cohort::{self, Cohort};
use crate::error::{Error, Result};
use crate::handoff::{ack_grant, await_grant, Awaiting, CutShort};
use crate::inbox::{Inbox, Waited};
use crate::interrupt::Interrupt;
use crate::lease::Lease;
use crate::local_line::{self, Joined, Member, Turn};
use crate::lost_leases::LostLease;
use crate::lost_reason::why_lost;
use crate::lua_script;
use crate::replicas::{ack_timeout, eval_grant, refuse};
use crate::script::ScriptCall;
use crate::unanswered_releases;
use crate::wait::{retry_after, wait_turn};
use redis::Value;
use std::time::{Duration, Instant};

lua_script!(ACQUIRE = "dist_mutex/acquire");
lua_script!(RELEASE = "dist_mutex/release");
lua_script!(pub(crate) RENEW_KEY = "lease/renew_key");

/// A waiter's entry outlives its planned wait by this much, so a release that lands just as the
/// wait ends still hands over (the waiter then finds the lock its own at its next attempt).
const WAIT_MARK_MARGIN: Duration = Duration::from_secs(1);

/// The fencing counter's TTL in lock TTLs (see `fence_ttl`).
const FENCE_TTL_FACTOR: u32 = 10;

#[derive(Clone, Debug)]
pub struct DistMutexOptions {
    /// `None`: released at unlock, lease of `lease`. `Some(n)`: `n` is the TTL.
    pub expire: Option<Duration>,
    pub auto_release: bool,
    pub lease: Duration,
    /// Passes of the lock to another thread of this process waiting for the name, without
    /// Redis, before it goes back through Redis (0: never; at most `cohort::MAX_LOCAL_PASSES`).
    pub local_passes: u32,
}

impl Default for DistMutexOptions {
    fn default() -> Self {
        DistMutexOptions {
            expire: None,
            auto_release: true,
            lease: Duration::from_secs(30),
            local_passes: cohort::DEFAULT_LOCAL_PASSES,
        }
    }
}

pub struct DistMutex {
    client: Client,
    name: String,
    lock_key: String,
    fence_key: String,
    waiters_key: String,
    /// `<ns>:{name}:grant:`, followed by a waiter's token.
    grant_prefix: String,
    /// How long a hold lasts unrenewed: `expire` when given (the fixed expiry of a hold that
    /// is not released at unlock), else the options' `lease` (renewed while held).
    lease: Duration,
    auto_release: bool,
    min_replicas_acked: u32,
    local_passes: u32,
    /// No local pass later than this after a cohort's Redis acquisition: `cohort::WINDOW`, or a
    /// quarter of a short lease.
    cohort_window: Duration,
    /// Tokens of `lock` calls cut short (interrupted, Redis unreachable), with their place in
    /// line if any: a retry with the same token checks whether the lock is already its own and
    /// takes its place back instead of queueing twice; `abandon` drops it.
    cut_short: CutShort,
}

/// One acquisition. Dropping it without `unlock` stops renewal; the lock then expires.
pub struct Held {
    token: String,
    fencing_token: i64,
    lease: Option<Lease>,
    /// This holder's place among its process's active threads for the name, when it came
    /// through the local line: its release queues the next local waiter.
    member: Option<Member>,
    /// Its place in its cohort (None: it may not pass the lock on within the process).
    cohort: Option<Cohort>,
}

impl Held {
    pub fn fencing_token(&self) -> i64 {
        self.fencing_token
    }
    pub fn token(&self) -> &str {
        &self.token
    }
}

enum Attempt {
    Acquired(i64),
    /// `entry`: this token's place in the waiters list, when it queued.
    Busy {
        pttl_ms: i64,
        entry: Option<String>,
    },
}

impl DistMutex {
    pub fn new(client: &Client, name: &str, opts: DistMutexOptions) -> Result<DistMutex> {
        let keys = client.keys(name)?;
        crate::seconds::check_span("lease", opts.lease)?;
        cohort::check_local_passes(opts.local_passes)?;
        let lease = match opts.expire {
            Some(e) => crate::seconds::check_span("expire", e)?,
            None if !opts.auto_release => {
                return Err(Error::argument(
                    "auto_release: false needs expire: (the lock would never be released)",
                ))
            }
            None => opts.lease,
        };
        Ok(DistMutex {
            client: client.clone(),
            name: name.to_string(),
            lock_key: keys.part("lock"),
            fence_key: keys.part("fence"),
            waiters_key: keys.part("waiters"),
            grant_prefix: keys.part("grant:"),
            lease,
            auto_release: opts.auto_release,
            min_replicas_acked: 0,
            local_passes: opts.local_passes,
            cohort_window: cohort::window(lease),
            cut_short: CutShort::default(),
        })
    }

    /// Replicas that must hold each grant before the caller enters (0, the default: don't
    /// wait). A grant that reaches fewer is released and `Error::Replication` returned; see
    /// replicas.rs.
    pub fn with_min_replicas_acked(mut self, n: u32) -> Self {
        self.min_replicas_acked = n;
        self
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// A fresh owner token (uuid v4).
    pub fn new_token() -> String {
        crate::token::new_token()
    }

    /// How long the fencing counter outlives the name's last acquisition. Any TTL keeps tokens
    /// increasing (acquire.lua falls back on Redis time once it expired); a longer one only
    /// keeps a token that ran ahead of time in memory longer. Ten lock TTLs lets an idle
    /// name's keys vanish soon while a busy name keeps its counter.
    pub fn fence_ttl(&self) -> Duration {
        // Capped like every span, so PX stays far from Redis' limit.
        self.lease
            .saturating_mul(FENCE_TTL_FACTOR)
            .min(crate::seconds::MAX)
    }

    /// The TTL every writer gives the waiters line: twice the longest entry a waiter of this
    /// name plans (a lock TTL + `WAIT_MARK_MARGIN`), so a process that set it at T may queue
    /// entries without setting it again until a lock TTL + 1 s after T (see
    /// `local_line::line_refresh_needed`, lua/dist_mutex/acquire.lua).
    pub fn line_ttl(&self) -> Duration {
        (self.lease + WAIT_MARK_MARGIN)
            .saturating_mul(2)
            .min(crate::seconds::MAX)
    }

    /// One round trip, also on the uncontended path. Queues (as `entry`, or in the place of
    /// `queued`, this token's earlier entry) unless `wait_ms` is 0. `maybe_ours`: the lock may
    /// be this token's already (a retried call, a hand-off not popped yet): the script checks.
    /// `inbox`: the grant inbox its entry names (None: it pops its grant list).
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
            .key(&self.lock_key)
            .key(&self.fence_key)
            .key(&self.waiters_key)
            .key(self.grant_key(token))
            .arg(token)
            .arg(crate::seconds::millis(self.lease))
            .arg(wait_ms)
            .arg(crate::seconds::millis(self.fence_ttl()))
            .arg(queued.unwrap_or(""))
            .arg(if maybe_ours || queued.is_some() {
                "1"
            } else {
                "0"
            })
            .arg(crate::seconds::millis(self.line_ttl()))
            .arg(inbox.unwrap_or(""));
        let wanted = self.min_replicas_acked;
        let sent_at = Instant::now();
        let (reply, acked) = eval_grant(&self.client, intr, &call, wanted, self.lease)?;
        let unexpected = || Error::Redis(format!("dist_mutex/acquire: unexpected reply {reply:?}"));
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
            (Some(Ok(1)), Some(Ok(fence)), None) => Ok(Attempt::Acquired(fence)),
            (Some(Ok(0)), Some(Ok(pttl_ms)), entry) => Ok(Attempt::Busy {
                pttl_ms,
                entry: match entry {
                    None => None,
                    Some(Value::BulkString(b)) => {
                        // Queued: the script set the line's TTL.
                        local_line::line_refreshed(self.client.identity(), &self.lock_key, sent_at);
                        Some(String::from_utf8_lossy(b).into_owned())
                    }
                    Some(_) => return Err(unexpected()),
                },
            }),
            _ => Err(unexpected()),
        }
    }

    /// The token-checked renewal of a held lock (the lease's, and the hand-off's ack write).
    fn renew_call(&self, token: &str) -> ScriptCall {
        ScriptCall::new(&RENEW_KEY)
            .key(&self.lock_key)
            .arg(token)
            .arg(crate::seconds::millis(self.lease))
    }

    fn grant_key(&self, token: &str) -> String {
        format!("{}{}", self.grant_prefix, token)
    }

    fn held(&self, token: &str, fencing_token: i64) -> Held {
        let lease = self.auto_release.then(|| {
            let renew = self.renew_call(token);
            let report = LostLease {
                fencing_token: Some(fencing_token),
                ..LostLease::new("dist_mutex", &self.name)
            };
            Lease::start_reporting(&self.client, renew, self.lease, report)
        });
        Held {
            token: token.to_string(),
            fencing_token,
            lease,
            member: None,
            cohort: Cohort::start(fencing_token, Instant::now()),
        }
    }

    /// Tests: another cohort window (a slow test machine may take longer than the default
    /// between an acquisition and the release it checks).
    #[doc(hidden)]
    pub fn with_cohort_window(mut self, window: Duration) -> Self {
        self.cohort_window = window;
        self
    }

    /// Passes `held` to the oldest live local waiter of its process (the cohort hand-off, no
    /// Redis round trip) when its cohort may pass on once more: true when passed (`held` is then
    /// an empty shell: its token and lease went to the waiter).
    fn pass_locally(&self, held: &mut Held) -> bool {
        let next = held
            .cohort
            .and_then(|c| c.next(self.local_passes, self.cohort_window));
        // The member is taken only to pass: the release below needs it otherwise.
        let Some(next) = next else {
            return false;
        };
        // An operator force-released it: the release through Redis reports it lost.
        if self.client.inbox().was_revoked(&held.token) {
            return false;
        }
        // Not ahead of the process's waiter in Redis: it came before those waiting here, and the
        // lock is one (unlike a limiter's slots), so passing it here would skip that waiter's turn.
        local_line::pass_on(&mut held.member, false, || {
            Box::new(Held {
                token: std::mem::take(&mut held.token),
                fencing_token: next.fencing_token(),
                lease: held.lease.take(),
                member: None,
                cohort: Some(next),
            })
        })
    }

    /// One attempt, never waits (but for a release of this lock in flight, see
    /// unanswered_releases.rs).
    pub fn try_lock(&self, intr: &Interrupt, token: &str) -> Result<Option<Held>> {
        self.wait_unanswered_releases(intr)?;
        // The script also recognises a lock held by this very token (a retried call).
        match self.attempt(intr, token, 0, None, true, None)? {
            Attempt::Acquired(fence) => Ok(Some(self.held(token, fence))),
            Attempt::Busy { .. } => Ok(None),
        }
    }

    /// Waits until acquired or `deadline` passes (`Error::Timeout`). `token` should stay the
    /// same when the call is retried after an interruption, so a lock taken by the interrupted
    /// attempt is recognised as ours.
    pub fn lock(&self, intr: &Interrupt, token: &str, deadline: Option<Instant>) -> Result<Held> {
        if !self.auto_release {
            return self.wait_out_expiry(intr, token, deadline);
        }
        // A retry of a call cut short takes its place in line back (and may be granted already).
        // It, and a grant that replicas must acknowledge (ack_grant's extra round trip), keep
        // the plain path: one Redis entry per thread.
        self.cut_short.resume(token, |retried, queued| {
            if retried || self.min_replicas_acked > 0 {
                self.wait_in_line(intr, token, deadline, retried, queued, None)
            } else {
                self.wait_in_process_line(intr, token, deadline, queued)
            }
        })
    }

    /// Threads of this process waiting for this name behind the one in Redis (for tests).
    pub fn local_waiters(&self) -> usize {
        local_line::local_waiters(self.client.identity(), &self.lock_key)
    }

    /// Tests: forget when this process last set the line's TTL (its next queueing release sets
    /// it again).
    #[doc(hidden)]
    pub fn forget_line_refresh(&self) {
        local_line::forget_line_refresh(self.client.identity(), &self.lock_key)
    }

    /// Waits behind the process's waiter in Redis for this name (if any) until passed on, then
    /// in Redis: with the entry a release queued, or by an attempt of its own.
    fn wait_in_process_line(
        &self,
        intr: &Interrupt,
        token: &str,
        deadline: Option<Instant>,
        queued: &mut Option<String>,
    ) -> Result<Held> {
        // A release may queue this waiter from now on (and publish its grant right after).
        let joined_at = Instant::now();
        let (turn, mut member) =
            match local_line::join(self.client.identity(), &self.lock_key, token, deadline) {
                Joined::Active(member) => (Turn::Attempt { uncertain: false }, member),
                Joined::Local(waiter) => waiter
                    .wait(intr, self.lease, None)
                    .map_err(|why| local_line::left_error(why, &self.name))?,
            };
        if let Turn::Handed(baton) = turn {
            // A holder of this process passed us the lock (cohort.rs): no Redis.
            let Ok(mut held) = baton.downcast::<Held>() else {
                return Err(Error::internal("DistMutex: a foreign hold was passed"));
            };
            held.member = Some(member);
            return Ok(*held);
        }
        // `member` lives until this returns: an error passes the turn on as it drops.
        let queued_by_release = turn.start(queued, || {
            let leave = self.release_call(token, true);
            crate::lease::release_now(&self.client, intr, leave, self.lease).map(drop)
        })?;
        let queued_at = queued_by_release.then_some(joined_at);
        let mut held = self.wait_in_line(intr, token, deadline, false, queued, queued_at)?;
        member.acquired();
        held.member = Some(member);
        Ok(held)
    }

    /// Attempts, queueing on failure, then waits for the hand-off. The wait for one turn never
    /// outlasts the holder's TTL (a holder that died hands over nothing): then it attempts again,
    /// keeping its place in the line. `queued_by_release`: a release already queued this waiter
    /// (as `queued`) no earlier than that instant, so it starts with the wait, for at most a
    /// lock TTL. A grant comes through the client's inbox when the entry names it, else from the
    /// waiter's grant list.
    fn wait_in_line(
        &self,
        intr: &Interrupt,
        token: &str,
        deadline: Option<Instant>,
        retried: bool,
        queued: &mut Option<String>,
        queued_by_release: Option<Instant>,
    ) -> Result<Held> {
        let inbox = self.client.inbox();
        let mut skip_attempt = queued_by_release.is_some();
        let mut queued_at = queued_by_release.unwrap_or_else(Instant::now);
        loop {
            let pttl_ms = if std::mem::take(&mut skip_attempt) {
                -1
            } else {
                let id = inbox.before_attempt(token);
                queued_at = Instant::now();
                match self.turn_attempt(intr, token, deadline, retried, queued, id.as_deref())? {
                    Ok(held) => return Ok(held),
                    Err(pttl_ms) => {
                        if id.is_none() && queued.is_some() {
                            // Contended: the process's next waits are granted through its inbox.
                            inbox.start(&self.client);
                        }
                        pttl_ms
                    }
                }
            };
            // -1 (a release queued this waiter): at most a lock TTL, as for a key without expiry.
            let mut wait = retry_after(pttl_ms, self.lease);
            if let Some(d) = deadline {
                let now = Instant::now();
                if now >= d {
                    return Err(self.give_up(intr, token, queued));
                }
                wait = wait.min(d - now);
            }
            if wait.is_zero() {
                continue;
            }
            let waiter = Awaiting {
                token,
                entry: queued.as_deref(),
                queued_at,
                grant_key: &self.grant_key(token),
            };
            let granted = match await_grant(&self.client, intr, waiter, wait)? {
                Waited::Granted(fence) => Some(fence),
                Waited::Missed => continue,
                Waited::TimedOut => None,
            };
            if let Some(fence) = granted {
                *queued = None;
                let wanted = self.min_replicas_acked;
                if wanted > 0 {
                    let within = ack_timeout(&self.client, self.lease);
                    let acked =
                        ack_grant(&self.client, intr, &self.renew_call(token), wanted, within)?;
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
                return Ok(self.held(token, fence));
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Err(self.give_up(intr, token, queued));
            }
        }
    }

    /// How long a waiter plans to wait for its next turn (ms; 0: it is out of time and won't),
    /// which its entry in the line records.
    fn planned_wait_ms(&self, deadline: Option<Instant>) -> u64 {
        let planned_wait = match deadline {
            Some(d) => d.saturating_duration_since(Instant::now()).min(self.lease),
            None => self.lease,
        };
        // A caller out of time makes its last attempt without joining the line.
        if deadline.is_some_and(|d| d <= Instant::now()) {
            0
        } else {
            crate::seconds::millis(planned_wait + WAIT_MARK_MARGIN)
        }
    }

    /// One attempt of `wait_in_line`: the lock, or the holder's remaining TTL (queued).
    fn turn_attempt(
        &self,
        intr: &Interrupt,
        token: &str,
        deadline: Option<Instant>,
        retried: bool,
        queued: &mut Option<String>,
        inbox: Option<&str>,
    ) -> Result<std::result::Result<Held, i64>> {
        let wait_ms = self.planned_wait_ms(deadline);
        Ok(
            match self.attempt(intr, token, wait_ms, queued.as_deref(), retried, inbox)? {
                Attempt::Acquired(fence) => {
                    *queued = None;
                    Ok(self.held(token, fence))
                }
                Attempt::Busy { pttl_ms, entry } => {
                    *queued = entry;
                    Err(pttl_ms)
                }
            },
        )
    }

    /// The deadline passed: leave the line. A hand-off that raced in is passed on to the next
    /// waiter in the same script, so it never blocks anyone for a lease.
    fn give_up(&self, intr: &Interrupt, token: &str, queued: &mut Option<String>) -> Error {
        if queued.take().is_some() {
            let _ = crate::lease::release_now(
                &self.client,
                intr,
                self.release_call(token, true),
                self.lease,
            );
        }
        Error::Timeout(format!(
            "DistMutex {:?}: not acquired before the timeout",
            self.name
        ))
    }

    /// Expiry-only locks are never released, so nobody hands over: wait out the holder's TTL.
    fn wait_out_expiry(
        &self,
        intr: &Interrupt,
        token: &str,
        deadline: Option<Instant>,
    ) -> Result<Held> {
        loop {
            match self.attempt(intr, token, 0, None, true, None)? {
                Attempt::Acquired(fence) => return Ok(self.held(token, fence)),
                Attempt::Busy { pttl_ms, .. } => {
                    let retry = retry_after(pttl_ms, self.lease);
                    if !wait_turn(&self.client, intr, None, retry, deadline)? {
                        return Err(Error::Timeout(format!(
                            "DistMutex {:?}: not acquired before the timeout",
                            self.name
                        )));
                    }
                }
            }
        }
    }

    /// Releases a held lock. Without auto_release this is a no-op (the lock expires by itself).
    /// `Error::LockLost` when the lock was no longer ours: the section was not exclusive.
    pub fn unlock(&self, intr: &Interrupt, mut held: Held) -> Result<()> {
        if !self.auto_release {
            return Ok(());
        }
        let lost_before = held.lease.as_ref().is_some_and(Lease::is_lost);
        if !lost_before && self.pass_locally(&mut held) {
            return Ok(());
        }
        let token = held.token.clone();
        let member = held.member.take();
        drop(held); // stop renewing before releasing

        // The member is kept until the release is done (a newcomer meanwhile waits locally and
        // is then passed on), or handed to the local successor this release queues.
        let successor = member.map(Member::take_successor);
        let released = match successor {
            Some(Ok(successor)) => self.release_queueing(intr, &token, successor)?,
            _ => {
                crate::client::int(&crate::lease::release_now(
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
            let why = why_lost(&self.client, intr, &self.name, &token, Some(&self.lock_key));
            Err(Error::LockLost(format!(
                "DistMutex {:?}: the lock was lost while held: {}",
                self.name,
                why.text()
            )))
        }
    }

    /// The release that also queues the process's next local waiter for this name (see
    /// local_line.rs). True when the lock was still ours.
    fn release_queueing(
        &self,
        intr: &Interrupt,
        token: &str,
        successor: local_line::Successor,
    ) -> Result<bool> {
        let line = local_line::LineRelease {
            client: &self.client,
            lock_key: &self.lock_key,
            line_ttl: self.line_ttl(),
            lease: self.lease,
            script: "dist_mutex/release",
        };
        let wait_ms = self.planned_wait_ms(successor.deadline);
        let (released, _) = local_line::release_queueing(
            line,
            intr,
            successor,
            wait_ms,
            |next, inbox, refresh| {
                self.release_queueing_call(token, false, next, inbox, wait_ms, refresh)
            },
            || self.release_call(token, false),
        )?;
        Ok(released)
    }

    /// After a lock call failed (Redis unreachable, interrupted, timed out): Redis may still have
    /// granted `token` with the reply lost, so release it in the background rather than let it
    /// block others for a whole lease. `token` must not be used again.
    /// It also takes the token out of the waiters' line, and passes on a hand-off that reached it.
    pub fn abandon(&self, token: &str) {
        self.cut_short.forget(token);
        // The caller is raised into at once: until Redis answers, this process's try_lock and
        // locked? wait for the give-back, as after an interrupted Mutex#lock (nothing is held).
        crate::lease::release_in_background_announced(
            &self.client,
            self.release_call(token, true),
            self.lease,
            &self.lock_key,
        );
    }

    /// The token-checked release (handing over to the next waiter), used by `unlock` and
    /// `abandon`; `leave_line`: the token also leaves the waiters' line.
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
            .key(&self.lock_key)
            .key(&self.fence_key)
            .key(&self.waiters_key)
            .key(self.grant_key(token))
            .arg(token)
            .arg(crate::seconds::millis(self.lease))
            .arg(crate::seconds::millis(self.fence_ttl()))
            .arg(self.grant_prefix.as_str())
            .arg(if leave_line { "1" } else { "0" })
            .arg(if self.client.is_cluster() { "1" } else { "0" })
            .arg(successor)
            .arg(wait_ms)
            .arg(crate::seconds::millis(self.line_ttl()))
            .arg(if refresh_line { "1" } else { "0" })
            .arg(inbox.unwrap_or(""))
            .arg(Inbox::channel(self.client.namespace(), ""))
    }

    /// Announces a release this process's callers already treat as done (a sleeping thread's,
    /// or one of a hold whose owner ended), until the returned value is dropped.
    pub fn announce_release(&self) -> unanswered_releases::Announced {
        unanswered_releases::announce(self.client.identity(), &self.lock_key)
    }

    fn wait_unanswered_releases(&self, intr: &Interrupt) -> Result<()> {
        unanswered_releases::wait_answered(self.client.identity(), &self.lock_key, intr)
    }

    /// True when anyone holds the lock.
    pub fn is_locked(&self, intr: &Interrupt) -> Result<bool> {
        self.wait_unanswered_releases(intr)?;
        let reply = self.client.command(
            intr,
            &[b"EXISTS".to_vec(), self.lock_key.clone().into_bytes()],
        )?;
        Ok(crate::client::int(&reply)? == 1)
    }
}
