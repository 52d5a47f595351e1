//! DistMutex: a Redis mutex. With `auto_release` the lock is a lease renewed while held and
//! released at unlock; without it (the crawler's spacer) the lock simply expires `expire` after
//! it was taken, so successive holders start at least `expire` apart.
//!
//! Contended, waiters form a FIFO in Redis: a failed attempt enqueues its token, and a release
//! hands the lock straight to the first waiter still waiting (lua/dist_mutex/release.lua),
//! which pops the grant from its own list and enters (line/handoff.rs): no second attempt, no
//! barging.
//!
//! Threads of one process waiting for the same name queue in Redis one at a time (line/local/):
//! the others wait in the process, and a release queues the releasing process's next local
//! waiter at the tail of the Redis line in the same script (when the process has nobody there),
//! so that waiter only pops its grant.
//!
//! A holder whose process has such a local waiter may instead pass the lock to it directly,
//! with no Redis round trip, a bounded number of times (line/cohort.rs).
//!
//! The wait path is the line's (line/), shared with ConcurrentLimiter; this file has what is
//! DistMutex's own: its scripts, its holds (fencing tokens, expiry-only locks), `try_lock`.
//!
//! With `fencing: false` a hold gets no token: acquire.lua takes a free lock with one plain
//! `SET NX PX` (no TIME, no counter write), and the hold's cohort passes without tokens, as a
//! limiter slot's. Its threads wait in their own local line (`Line::local_key`), apart from a
//! fenced DistMutex of the same name in the process, so a fenced thread is never passed an
//! unfenced hold.
//!
//! Design notes (moved from doc/ARCHITECTURE.md):
//!
//! **Fencing tokens survive an expired counter**
//!
//! `dist_mutex/acquire.lua` issues `max(last + 1, Redis TIME in µs)`, rounded up to a multiple of 16
//! (the 15 tokens above are the cohort's, see above), and stores it with a TTL of 10 × the lock's
//! TTL. The rounding puts a token at most 15 µs ahead of Redis time; consecutive acquisitions of one
//! name are at least a round trip apart (the new holder must hear its grant and send its release),
//! so the lead does not build up. Once the counter expired, `last` is forgotten, yet the next token is still
//! larger than every earlier one:
//!
//! the key expired at least its TTL after the last token was issued, and Redis expires keys by
//! the same wall clock that `TIME` reads (a clock stepped back delays the expiry as much);
//!
//! a token runs ahead of Redis time only while one name is acquired more than once per µs, and
//! each acquisition costs an acquire and a release script (or a ≥ 1 ms expiry): a few µs at most,
//! far below the counter's TTL.
//! So the TTL's length is not what keeps tokens increasing; ten lock TTLs keeps the counter while a
//! name is busy and lets an idle name vanish soon. A bonus on failover: a counter write lost with
//! the old primary is still overtaken by the new primary's clock. The uncontended path is the same
//! script with "won't wait" (one round trip; uncontended lock + unlock stays at 2). A retried call
//! whose lock is ours returns the stored token, or issues a fresh one if the counter expired during
//! a long hold. Tokens are therefore large (≈ 1.8 × 10^15), fine for 64-bit integers and Lua's exact
//! doubles (< 2^53 until the year 2255).

pub mod inspect;

use crate::client::Client;
use crate::error::{Error, Result};
use crate::interrupt::Interrupt;
use crate::lease::{Lease, RenewKeyArgs};
use crate::line::cohort::{self, Cohort};
use crate::line::primitive::{AcquireArgs, Attempt, Hold, Line, Primitive, ReleaseArgs};
use crate::lost_leases::LostLease;
use crate::lua_script;
use crate::script::{Script, ScriptCall};
use crate::unanswered_releases;
use crate::wait::{retry_after, wait_turn};
use std::time::{Duration, Instant};

lua_script!(ACQUIRE = "dist_mutex/acquire");
lua_script!(RELEASE = "dist_mutex/release");
lua_script!(REFENCE = "dist_mutex/refence");

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
    /// False: unfair mode (line/release.rs `pass_unfairly`): a holder's process keeps the lock
    /// among its own threads for up to `cohort::unfair_slice(lease)` before the Redis line is
    /// served. True (the default): a cohort's end hands it to the line's head.
    pub fair: bool,
    /// False: holds get no fencing token (`Held::fencing_token` 0), and a free lock is taken
    /// with one plain `SET NX PX` in the acquire script (no TIME, no counter write): 5 commands
    /// per uncontended cycle instead of 7. A hand-off still issues a token (the releaser cannot
    /// know the waiter's mode), which such a holder ignores. Needs `auto_release` (a spacer's
    /// spacing counts from its token's Redis time).
    pub fencing: bool,
}

impl Default for DistMutexOptions {
    fn default() -> Self {
        DistMutexOptions {
            expire: None,
            auto_release: true,
            lease: Duration::from_secs(30),
            local_passes: cohort::DEFAULT_LOCAL_PASSES,
            fair: true,
            fencing: true,
        }
    }
}

pub struct DistMutex {
    /// Its wait path's parts; `line.key` is the lock's key.
    line: Line,
    fence_key: String,
    waiters_key: String,
    auto_release: bool,
    fencing: bool,
}

/// One acquisition. Dropping it without `unlock` stops renewal; the lock then expires.
pub struct Held(Hold);

impl Held {
    /// 0 for a hold of a mutex made with `fencing: false`.
    pub fn fencing_token(&self) -> i64 {
        self.0.fencing_token
    }
    pub fn token(&self) -> &str {
        &self.0.token
    }
}

impl DistMutex {
    pub fn new(client: &Client, name: &str, opts: DistMutexOptions) -> Result<DistMutex> {
        let keys = client.keys(name)?;
        crate::seconds::check_span("lease", opts.lease)?;
        cohort::check_local_passes(opts.local_passes, cohort::MAX_LOCAL_PASSES)?;
        // How long a hold lasts unrenewed: `expire` when given (the fixed expiry of a hold that
        // is not released at unlock), else the options' `lease` (renewed while held).
        let lease = match opts.expire {
            Some(e) => crate::seconds::check_span("expire", e)?,
            None if !opts.auto_release => {
                return Err(Error::argument(
                    "auto_release: false needs expire: (the lock would never be released)",
                ))
            }
            None => opts.lease,
        };
        if !opts.fencing && !opts.auto_release {
            return Err(Error::argument(
                "fencing: false needs auto_release (an expiry-only lock's spacing counts from its fencing token)",
            ));
        }
        // A waiter blocks at most a lease between attempts (a holder that died hands over
        // nothing).
        let mut line = Line::new(
            client,
            name,
            keys.part("lock"),
            keys.part("grant:"),
            lease,
            lease,
            opts.local_passes,
        );
        if !opts.fair {
            line.unfair_slice = Some(cohort::unfair_slice(lease));
        }
        if !opts.fencing {
            line.local_key = format!("{}#unfenced", line.key);
        }
        Ok(DistMutex {
            line,
            fence_key: keys.part("fence"),
            waiters_key: keys.part("waiters"),
            auto_release: opts.auto_release,
            fencing: opts.fencing,
        })
    }

    /// Replicas that must hold each grant before the caller enters (0, the default: don't
    /// wait). A grant that reaches fewer is released and `Error::Replication` returned; see
    /// replicas.rs.
    pub fn with_min_replicas_acked(mut self, n: u32) -> Self {
        self.line.min_replicas_acked = n;
        self
    }

    pub fn name(&self) -> &str {
        &self.line.name
    }

    crate::line::primitive::line_test_hooks!();

    /// A fresh owner token (uuid v4).
    pub fn new_token() -> String {
        crate::token::new_token()
    }

    /// A fresh owner token for this mutex: with `fencing: false`, one marked unfenced
    /// (token.rs), so Admin's read shows no fencing token for its hold.
    pub fn token(&self) -> String {
        if self.fencing {
            crate::token::new_token()
        } else {
            crate::token::new_unfenced_token()
        }
    }

    /// How long the fencing counter outlives the name's last acquisition. Any TTL keeps tokens
    /// increasing (acquire.lua falls back on Redis time once it expired); a longer one only
    /// keeps a token that ran ahead of time in memory longer. Ten lock TTLs lets an idle
    /// name's keys vanish soon while a busy name keeps its counter.
    pub fn fence_ttl(&self) -> Duration {
        // Capped like every span, so PX stays far from Redis' limit.
        self.line
            .lease
            .saturating_mul(FENCE_TTL_FACTOR)
            .min(crate::seconds::MAX)
    }

    /// The TTL every writer gives the waiters line: twice the longest entry a waiter of this
    /// name plans (a lock TTL + 1 s), so a process that set it at T may queue entries without
    /// setting it again until a lock TTL + 1 s after T (see `local::line_refresh_needed`,
    /// lua/dist_mutex/acquire.lua).
    pub fn line_ttl(&self) -> Duration {
        self.line.line_ttl()
    }

    /// One attempt, never waits (but for a release of this lock in flight, see
    /// unanswered_releases.rs).
    pub fn try_lock(&self, intr: &Interrupt, token: &str) -> Result<Option<Held>> {
        self.line.wait_unanswered_releases(intr)?;
        // The script also recognises a lock held by this very token (a retried call).
        match self.line.attempt(self, intr, token, &only_once())? {
            Attempt::Acquired(fence) => Ok(Some(Held(self.hold(token, fence)))),
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
        match self.line.enter(self, intr, token, deadline)? {
            Some(hold) => Ok(Held(hold)),
            None => Err(self.timed_out()),
        }
    }

    /// Unfair mode: a new `lock` call's hold when a holder of this process parked one (as
    /// `lock` would take it first), taken without blocking or Redis; `Ok(None)` otherwise (then
    /// `lock`). The binding calls it with Ruby's GVL held.
    pub fn take_parked(&self, deadline: Option<Instant>) -> Result<Option<Held>> {
        if !self.auto_release {
            return Ok(None);
        }
        Ok(self.line.take_parked::<Self>(deadline)?.map(Held))
    }

    fn timed_out(&self) -> Error {
        Error::Timeout(format!(
            "DistMutex {:?}: not acquired before the timeout",
            self.line.name
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
            match self.line.attempt(self, intr, token, &only_once())? {
                Attempt::Acquired(fence) => return Ok(Held(self.hold(token, fence))),
                Attempt::Busy { reported_ms, .. } => {
                    let retry = retry_after(reported_ms, self.line.lease);
                    if !wait_turn(&self.line.client, intr, None, retry, deadline)? {
                        return Err(self.timed_out());
                    }
                }
            }
        }
    }

    /// Releases a held lock. Without auto_release this is a no-op (the lock expires by itself).
    /// `Error::LockLost` when the lock was no longer ours: the section was not exclusive.
    pub fn unlock(&self, intr: &Interrupt, held: Held) -> Result<()> {
        if !self.auto_release {
            return Ok(());
        }
        self.line.release(self, intr, held.0)
    }

    /// The unlock when it is a pass to a thread of this process waiting for the lock (the
    /// cohort hand-off: no Redis, no blocking). The hold back otherwise, for `unlock`.
    pub fn unlock_locally(&self, held: Held) -> Option<Held> {
        if !self.auto_release {
            return Some(held);
        }
        self.line.release_locally::<Self>(held.0).map(Held)
    }

    /// After a lock call failed (Redis unreachable, interrupted, timed out): Redis may still have
    /// granted `token` with the reply lost, so release it in the background rather than let it
    /// block others for a whole lease. `token` must not be used again.
    /// It also takes the token out of the waiters' line, and passes on a hand-off that reached it.
    pub fn abandon(&self, token: &str) {
        self.line.abandon(self, token)
    }

    /// The token-checked release (handing over to the next waiter), used by `unlock` and
    /// `abandon` (and admin.rs); `leave_line`: the token also leaves the waiters' line.
    pub(crate) fn release_call(&self, token: &str, leave_line: bool) -> ScriptCall {
        self.release_script(token, &ReleaseArgs::plain(leave_line))
    }

    /// Announces a release this process's callers already treat as done (a sleeping thread's,
    /// or one of a hold whose owner ended), until the returned value is dropped.
    pub fn announce_release(&self) -> unanswered_releases::Announced {
        self.line.announce_release()
    }

    /// True when anyone holds the lock.
    pub fn is_locked(&self, intr: &Interrupt) -> Result<bool> {
        self.line.wait_unanswered_releases(intr)?;
        let key = self.line.key.clone().into_bytes();
        let reply = self.line.client.command(intr, &[b"EXISTS".to_vec(), key])?;
        Ok(crate::client::int(&reply)? == 1)
    }
}

impl DistMutex {
    /// A call of the acquire or release script: both take the same keys (the lock, the fencing
    /// counter, the waiters' line, `token`'s grant list), then the token and the lease.
    fn script_call(&self, script: &'static Script, token: &str) -> ScriptCall {
        let line = &self.line;
        ScriptCall::new(script)
            .key(&line.key)
            .key(&self.fence_key)
            .key(&self.waiters_key)
            .key(line.grant_key(token))
            .arg(token)
            .arg(crate::seconds::millis(line.lease))
    }
}

/// One attempt that does not queue (the lock may be this token's already: a retried call).
fn only_once() -> AcquireArgs<'static> {
    AcquireArgs {
        wait_ms: 0,
        queued: None,
        maybe_ours: true,
        inbox: None,
    }
}

impl Primitive for DistMutex {
    const KIND: &'static str = "DistMutex";
    const HOLD: &'static str = "lock";
    const SLOTS: bool = false;
    const ATTEMPT_AT_DEADLINE: bool = false;

    fn acquire_script(&self, token: &str, a: &AcquireArgs) -> ScriptCall {
        let line = &self.line;
        self.script_call(&ACQUIRE, token)
            .arg(a.wait_ms)
            // 0: issue no token (fencing: false; see acquire.lua).
            .arg(if self.fencing {
                crate::seconds::millis(self.fence_ttl())
            } else {
                0
            })
            .arg(a.queued.unwrap_or(""))
            .flag(a.maybe_ours || a.queued.is_some())
            .arg(crate::seconds::millis(line.line_ttl()))
            .arg(a.inbox.unwrap_or(""))
    }

    fn release_script(&self, token: &str, r: &ReleaseArgs) -> ScriptCall {
        let line = &self.line;
        let client = &line.client;
        self.script_call(&RELEASE, token)
            .arg(crate::seconds::millis(self.fence_ttl()))
            .arg(line.grant_key(""))
            .flag(r.leave_line)
            .flag(client.is_cluster())
            .arg(r.successor)
            .arg(r.successor_wait_ms)
            .arg(crate::seconds::millis(line.line_ttl()))
            .flag(r.refresh_line)
            .arg(r.successor_inbox.unwrap_or(""))
            .arg(crate::inbox::Inbox::channel(client.namespace(), ""))
    }

    fn renew_script(&self, token: &str) -> ScriptCall {
        RenewKeyArgs {
            token,
            ttl_ms: crate::seconds::millis(self.line.lease),
        }
        .call(&self.line.key)
    }

    fn hold(&self, token: &str, grant: i64) -> Hold {
        let line = &self.line;
        // Unfenced, a grant's token (a hand-off issues one) is not this hold's: it has none, and
        // its cohort passes without tokens, as a limiter's slot's.
        let fencing_token = if self.fencing { grant } else { 0 };
        let lease = self.auto_release.then(|| {
            let report = LostLease {
                fencing_token: self.fencing.then_some(fencing_token),
                ..LostLease::new("dist_mutex", &line.name)
            };
            let renew = self.renew_script(token);
            Lease::start_reporting(&line.client, renew, line.lease, report)
        });
        Hold {
            token: token.to_string(),
            fencing_token,
            lease,
            member: None,
            cohort: if self.fencing {
                Cohort::start(fencing_token, Instant::now())
            } else {
                Some(Cohort::unfenced(Instant::now()))
            },
        }
    }

    /// The holder's TTL (-1: a key without expiry, waited for a lease).
    fn retry_in(&self, pttl_ms: i64) -> Duration {
        retry_after(pttl_ms, self.line.lease)
    }

    fn timeout(&self) -> Option<Error> {
        Some(self.timed_out())
    }

    fn holder_key(&self) -> Option<&str> {
        Some(&self.line.key)
    }

    fn refence_script(&self, token: &str) -> Option<ScriptCall> {
        let call = ScriptCall::new(&REFENCE)
            .key(&self.line.key)
            .key(&self.fence_key)
            .arg(token)
            .arg(crate::seconds::millis(self.line.lease))
            .arg(crate::seconds::millis(self.fence_ttl()));
        Some(call)
    }
}
