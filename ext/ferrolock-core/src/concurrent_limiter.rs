//! ConcurrentLimiter: at most `limit` holders at once across processes. Each slot is a member of
//! a sorted set scored by its lease expiry (Redis time), renewed while held, so a block that runs
//! past the lease keeps its slot; an expired member means a crashed holder and counts as free.
//!
//! Contended, waiters form a FIFO line in Redis: a failed attempt enqueues its token, and a
//! release hands its slot straight to the first waiter still waiting
//! (lua/concurrent_limiter/release.lua), which pops the grant from its own list and enters
//! (line/handoff.rs): no second attempt, no barging.
//!
//! Threads of one process waiting for the same name queue in Redis one at a time
//! (line/local/): the others wait in the process, and the next release of any of the process's
//! holders queues the next local waiter at the tail of the Redis line in the same script (when
//! the process has nobody there), so that waiter only pops its grant.
//!
//! A holder whose process has a thread waiting locally for the name passes its slot to it
//! without Redis (the cohort hand-off, line/cohort.rs): at most `local_passes` times in a row and
//! within the cohort window of the slot's Redis acquisition; then the slot goes back through
//! Redis, whose line serves other processes.
//!
//! The wait path is the line's (line/), shared with DistMutex; this file has what is the
//! limiter's own: its scripts, its slots, `status`.
//!
//! Design notes (moved from doc/ARCHITECTURE.md):
//!
//! ConcurrentLimiter and DualLock's EXEC stage hand off the same way (`lua/concurrent_limiter/
//! {acquire,release}.lua`, `lua/dual_lock/{enter,release}.lua`, `handoff::wait_grant`). Limiter: a
//! full attempt that will wait appends `token|deadline ms` to the name's `line` list (not `waiters`:
//! older versions keep a sorted set there; entries split at the LAST `|`); the release pops the first
//! live entry (`LPOP`, dead ones dropped), pushes a grant to that waiter's `grant:<token>` (a `pcall`
//! RPUSH, the first write but the pop: on a migrating cluster slot the entry goes back and TRYAGAIN is
//! answered), ZADDs the waiter's token with the released slot's expiry (a whole lease if under half
//! was left) before ZREMming its own, so the count never exceeds the limit and the key keeps its TTL.
//! One turn's wait is bounded by the earliest live slot's expiry (≥ 1 s) as before; a waiter coming
//! back keeps its place (LPOS + LSET) and asks `ZSCORE` whether a grant raced its timeout; one that
//! gives up (deadline, interrupt, `abandon`) runs the release with "leave the line", which passes on
//! a slot that reached it. Cost, contended (limit 3, 8 workers): 14 commands per block (attempt 5,
//! BLPOP 1, release 8) against 25–27. DualLock: the executor's release sets EXEC to the WAIT
//! holder's token (PX lease), deletes WAIT and pushes the waiter's grant; the waiter pops it and
//! runs with no `enter` (its lease moves to EXEC; `min_replicas_acked` acks the grant as DistMutex
//! does). A waiter whose pop was cut short runs `enter` before blocking again (`exec == token` →
//! running, its grant deleted). The `signal`/`wake` lists are no longer written: an old-version
//! waiter still waiting on them during a deploy re-attempts at its turn's end (slow, not wrong).
//!
//! **A ConcurrentLimiter's limit (`lua/concurrent_limiter/acquire.lua`)**
//!
//! The acquire script that takes a free slot writes the limit in the same ZADD as the slot: member
//! `{limit}` (tokens never hold braces) scored -limit. A negative score is never live, so every
//! count (`ZCOUNT`/`ZRANGEBYSCORE (now +inf`), release and renewal ignores it, older versions
//! included; the `ZREMRANGEBYSCORE -inf now` that drops crashed slots drops it too, just before the
//! ZADD writes it back. So it costs no command (10 per uncontended acquire + release, renewal 6,
//! pinned by `tests/primitives/concurrent_limiter_commands.rs`), has the
//! slots key's TTL, which renewals already extend, and no DEL: after the last release the key stays
//! (only `{limit}`) until that TTL, at most one lease, as a separate `limit` key with the slots'
//! expiry would. Callers passing different limits for one name: the latest to take a free slot
//! wins (a hand-off keeps it). Admin reads it with one `ZSCORE`; "—" when only waiters are left.

pub mod inspect;

use crate::client::{ints, Client};
use crate::error::{Error, Result};
use crate::interrupt::Interrupt;
use crate::lease::Lease;
use crate::line::cohort::{self, Cohort};
use crate::line::primitive::{AcquireArgs, Hold, Line, Primitive, ReleaseArgs};
use crate::lost_leases::LostLease;
use crate::lua_script;
use crate::script::{Script, ScriptCall};
use std::time::{Duration, Instant};

mod limit_override;
pub use limit_override::{Override, OverrideAction, OVERRIDE_TTL};

lua_script!(ACQUIRE = "concurrent_limiter/acquire");
// release.lua hands slots to waiters as override.lua wakes them (line_entry.lua).
lua_script!(RELEASE = "concurrent_limiter/release", after "concurrent_limiter/line_entry");
lua_script!(RENEW = "concurrent_limiter/renew");
lua_script!(STATUS = "concurrent_limiter/status");

/// concurrent_limiter/renew.lua's arguments (also JobConcurrency's: its slots are the same).
pub(crate) struct RenewArgs<'a> {
    /// The slot's token.
    pub token: &'a str,
    /// The slot's lease from now (ms).
    pub lease: u64,
}

impl RenewArgs<'_> {
    /// The renewal of the slot in `slots` (the slots' sorted set).
    pub fn call(&self, slots: &str) -> ScriptCall {
        ScriptCall::new(&RENEW)
            .key(slots)
            .arg(self.token)
            .arg(self.lease)
    }
}

/// Between attempts a waiter blocks at least this long (unless its deadline is nearer): the
/// earliest lease expiry keeps moving while holders renew, and re-checking it more often would
/// cost a waiter more than two commands a second. Only a crashed holder's slot is found later.
const MIN_RECHECK: Duration = Duration::from_secs(1);

#[derive(Clone, Debug)]
pub struct LimiterOptions {
    pub limit: u32,
    /// How long a slot survives without renewal: the crash-recovery bound.
    pub lease: Duration,
    /// Cohort hand-offs in a row (0..=cohort::MAX_SLOT_PASSES; 0: every slot goes back
    /// through Redis).
    pub local_passes: u32,
    /// False: unfair mode: a releasing holder parks its slot for a running thread of its process
    /// (line/local/parked.rs), and its process keeps the slot among its threads for up to
    /// `cohort::unfair_slice(lease)` before it goes back through Redis.
    pub fair: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LimiterStatus {
    pub limit: u32,
    pub in_use: u32,
    pub waiting: u32,
}

pub struct ConcurrentLimiter {
    /// Its wait path's parts; `line.key` is the slots' key.
    line: Line,
    /// The Redis line's key.
    line_key: String,
    /// The operators' override of the limit (paused, another limit): read by the acquire and
    /// release scripts, written by `write_override` (limit_override.rs).
    override_key: String,
    limit: u32,
}

/// A held slot. Dropping it without `release` stops renewal; the slot then expires.
pub struct Slot(Hold);

impl Slot {
    pub fn token(&self) -> &str {
        &self.0.token
    }
}

impl ConcurrentLimiter {
    pub fn new(client: &Client, name: &str, opts: LimiterOptions) -> Result<ConcurrentLimiter> {
        let keys = client.keys(name)?;
        if opts.limit == 0 {
            return Err(Error::argument("count: must be a positive integer"));
        }
        crate::seconds::check_span("lease", opts.lease)?;
        cohort::check_local_passes(opts.local_passes, cohort::MAX_SLOT_PASSES)?;
        // The longest a waiter blocks between two attempts: its entry must cover that.
        let max_block = opts.lease.max(MIN_RECHECK);
        let mut line = Line::new(
            client,
            name,
            keys.part("slots"),
            keys.part("grant:"),
            opts.lease,
            max_block,
            opts.local_passes,
        );
        if !opts.fair {
            line.unfair_slice = Some(cohort::unfair_slice(opts.lease));
        }
        Ok(ConcurrentLimiter {
            line,
            // Not "waiters": older versions keep a sorted set there, DistMutex a list.
            line_key: keys.part("line"),
            override_key: keys.part("override"),
            limit: opts.limit,
        })
    }

    /// Replicas that must hold each slot grant before the caller enters (0: don't wait); see
    /// replicas.rs.
    pub fn with_min_replicas_acked(mut self, n: u32) -> Self {
        self.line.min_replicas_acked = n;
        self
    }

    pub fn name(&self) -> &str {
        &self.line.name
    }

    pub fn limit(&self) -> u32 {
        self.limit
    }

    crate::line::primitive::line_test_hooks!();

    /// A fresh slot token (uuid v4).
    pub fn new_token() -> String {
        crate::token::new_token()
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
        Ok(self
            .line
            .enter(self, intr, token, Some(deadline))?
            .map(Slot))
    }

    /// Unfair mode: a new `acquire` call's slot when a holder of this process parked one (as
    /// `acquire` would take it first), taken without blocking or Redis; `Ok(None)` otherwise (then
    /// `acquire`). The binding calls it with Ruby's GVL held.
    pub fn take_parked(&self, deadline: Instant) -> Result<Option<Slot>> {
        Ok(self.line.take_parked::<Self>(Some(deadline))?.map(Slot))
    }

    /// The TTL every writer gives the line: twice the longest entry a waiter of this name plans
    /// (its longest block + 1 s), so a process that set it at T may queue entries without
    /// setting it again until that long after T (see `local::line_refresh_needed`,
    /// lua/concurrent_limiter/acquire.lua).
    pub fn line_ttl(&self) -> Duration {
        self.line.line_ttl()
    }

    /// Gives the slot back (to the next waiter in line, if any). `Error::LockLost` when the
    /// slot's lease had run out (or Redis lost it) while held: the limit may have been exceeded
    /// meanwhile.
    pub fn release(&self, intr: &Interrupt, slot: Slot) -> Result<()> {
        self.line.release(self, intr, slot.0)
    }

    /// The release when it is a pass to a thread of this process waiting for a slot (the
    /// cohort hand-off: no Redis, no blocking). The slot back otherwise, for `release`.
    pub fn release_locally(&self, slot: Slot) -> Option<Slot> {
        self.line.release_locally::<Self>(slot.0).map(Slot)
    }

    /// After `acquire` failed (Redis unreachable, interrupted): Redis may still have given
    /// `token` a slot with the reply lost, so release it in the background rather than keep
    /// the slot taken for a whole lease. `token` must not be used again. It also takes
    /// the token out of the line, and passes on a hand-off that reached it.
    pub fn abandon(&self, token: &str) {
        self.line.abandon(self, token)
    }

    /// The token-checked release of one slot (handing it to the next waiter), used by
    /// `release` and `abandon` (and admin.rs); `leave_line`: the token also leaves the line.
    pub(crate) fn release_call(&self, token: &str, leave_line: bool) -> ScriptCall {
        self.release_script(token, &ReleaseArgs::plain(leave_line))
    }

    /// Live slots and waiting callers: the live entries of the Redis line (one per waiting
    /// process, and threads that queued themselves) plus this process's threads waiting behind
    /// its entry (other processes' local waiters are not visible in Redis).
    pub fn status(&self, intr: &Interrupt) -> Result<LimiterStatus> {
        self.line.wait_unanswered_releases(intr)?;
        let call = ScriptCall::new(&STATUS)
            .key(&self.line.key)
            .key(&self.line_key);
        match ints(&self.line.client.eval(intr, &call)?)?.as_slice() {
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

impl Primitive for ConcurrentLimiter {
    const KIND: &'static str = "ConcurrentLimiter";
    const HOLD: &'static str = "slot";
    const SLOTS: bool = true;
    const ATTEMPT_AT_DEADLINE: bool = true;

    /// A slot (`_grant` means nothing: slots have no fencing tokens, and a cohort passes them
    /// unfenced).
    fn hold(&self, token: &str, _grant: i64) -> Hold {
        let line = &self.line;
        let report = LostLease::new("concurrent_limiter", &line.name);
        let renew = self.renew_script(token);
        Hold {
            token: token.to_string(),
            fencing_token: 0,
            lease: Some(Lease::start_reporting(
                &line.client,
                renew,
                line.lease,
                report,
            )),
            member: None,
            cohort: Some(Cohort::unfenced(Instant::now())),
        }
    }

    /// Until the earliest live slot expires, at least `MIN_RECHECK`.
    fn retry_in(&self, expires_in_ms: i64) -> Duration {
        Duration::from_millis(expires_in_ms.max(0) as u64).max(MIN_RECHECK)
    }

    fn timeout(&self) -> Option<Error> {
        None
    }

    fn holder_key(&self) -> Option<&str> {
        None
    }

    fn acquire_script(&self, token: &str, a: &AcquireArgs) -> ScriptCall {
        let line = &self.line;
        self.script_call(&ACQUIRE, token)
            .arg(self.limit)
            .arg(crate::seconds::millis(line.lease))
            .arg(a.wait_ms)
            .arg(a.queued.unwrap_or(""))
            .flag(a.maybe_ours)
            .arg(crate::seconds::millis(line.line_ttl()))
            .arg(a.inbox.unwrap_or(""))
    }

    fn release_script(&self, token: &str, r: &ReleaseArgs) -> ScriptCall {
        let line = &self.line;
        self.script_call(&RELEASE, token)
            .arg(crate::seconds::millis(line.lease))
            .arg(line.grant_key(""))
            .flag(r.leave_line)
            .arg(r.successor)
            .arg(r.successor_wait_ms)
            .arg(self.limit)
            .arg(crate::seconds::millis(line.line_ttl()))
            .flag(r.refresh_line)
            .arg(r.successor_inbox.unwrap_or(""))
            .arg(crate::inbox::Inbox::channel(line.client.namespace(), ""))
    }

    fn renew_script(&self, token: &str) -> ScriptCall {
        RenewArgs {
            token,
            lease: crate::seconds::millis(self.line.lease),
        }
        .call(&self.line.key)
    }
}

impl ConcurrentLimiter {
    /// A call of the acquire or release script: both take the same keys (the slots, the line,
    /// `token`'s grant list, the operators' override), then the token.
    fn script_call(&self, script: &'static Script, token: &str) -> ScriptCall {
        ScriptCall::new(script)
            .key(&self.line.key)
            .key(&self.line_key)
            .key(self.line.grant_key(token))
            .key(&self.override_key)
            .arg(token)
    }
}

/// A count Redis reported, as u32: clamped instead of wrapped (a count is never negative or
/// above u32::MAX unless the keys were tampered with).
fn count_u32(n: i64) -> u32 {
    u32::try_from(n.max(0)).unwrap_or(u32::MAX)
}
