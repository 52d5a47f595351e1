//! What the wait path (enter.rs, release.rs) needs of a primitive that queues in a Redis line:
//! [`Line`], the parts every such primitive has (client, name, keys, lease, cohort bounds, calls
//! cut short); [`Primitive`], what differs (scripts, holds, how slots differ from one lock);
//! [`Hold`], what a holder holds; and the typed arguments of the acquire and release scripts.

use super::cohort::Cohort;
use super::local::Member;
use crate::client::Client;
use crate::error::{Error, Result};
use crate::interrupt::Interrupt;
use crate::lease::Lease;
use crate::script::ScriptCall;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// A waiter's entry outlives its planned wait by this much, so a release that lands just as the
/// wait ends still hands over (the waiter then finds the hold its own at its next attempt).
pub(crate) const WAIT_MARK_MARGIN: Duration = Duration::from_secs(1);

/// What differs between the primitives that wait in a line (DistMutex, ConcurrentLimiter).
pub(crate) trait Primitive {
    /// Its name in messages.
    const KIND: &'static str;
    /// What it hands out, in messages: "lock" or "slot".
    const HOLD: &'static str;
    /// Its holds are slots, several at once (a limiter), rather than one lock. Then:
    /// - a cohort hand-off may pass a hold ahead of the process's waiter in Redis (which waits
    ///   for another slot; one lock passed there would skip that waiter's turn);
    /// - a waiter that found a free slot by its own attempt sends the next local waiter to
    ///   attempt too (it may find room as well);
    /// - the oldest local waiter attempts by itself once nobody of its process has waited in
    ///   Redis for `UNQUEUED_GRACE` (a slot may free up in another process meanwhile).
    const SLOTS: bool;
    /// A waiter out of time makes one last attempt (at its deadline, and instead of waiting
    /// behind the process's waiter when it comes out of time): it may find the hold a hand-off
    /// raced in. Otherwise it leaves at once; the release that takes it out of the line passes
    /// such a hand-off on.
    const ATTEMPT_AT_DEADLINE: bool;

    /// The acquire script's call for `token`.
    fn acquire_script(&self, token: &str, args: &AcquireArgs) -> ScriptCall;
    /// The token-checked release script's call for `token` (handing over to the next waiter).
    fn release_script(&self, token: &str, args: &ReleaseArgs) -> ScriptCall;
    /// The token-checked renewal of `token`'s hold (its lease's, and a grant's ack write).
    fn renew_script(&self, token: &str) -> ScriptCall;
    /// The hold of `token`, just granted (`grant`: the fencing token of a lock), its lease
    /// started.
    fn hold(&self, token: &str, grant: i64) -> Hold;
    /// How long a waiter waits for a hand-off after a failed attempt, from what the attempt
    /// reported (the holder's TTL, the earliest slot's expiry); never more than `max_block`.
    fn retry_in(&self, reported_ms: i64) -> Duration;
    /// What a wait that ran out of time returns: an error (a Mutex's lock), or none (a
    /// limiter: no slot, `Ok(None)`).
    fn timeout(&self) -> Option<Error>;
    /// The key whose value says who holds it now, for a lost hold's message (lost_reason.rs).
    fn holder_key(&self) -> Option<&str>;
    /// Unfair mode: the token-checked call that keeps `token`'s hold and answers a fresh
    /// fencing block for a new cohort (0: no longer ours). None: the primitive has none.
    fn refence_script(&self, _token: &str) -> Option<ScriptCall> {
        None
    }
}

/// The test hooks of a primitive that waits in a line, written once: each delegates to the
/// primitive's `line` field (a `Line`). Expands inside the primitive's `impl`.
macro_rules! line_test_hooks {
    () => {
        /// Threads of this process waiting for this name behind the one in Redis (for tests).
        pub fn local_waiters(&self) -> usize {
            self.line.local_waiters()
        }

        /// Holds a releasing holder of this process parked for its next thread (unfair mode;
        /// for tests).
        #[doc(hidden)]
        pub fn parked_holds(&self) -> usize {
            self.line.parked_holds()
        }

        /// Tests: how long a parked hold waits for a running thread (a slow test machine may
        /// stall a thread longer than the default between its release and its next call).
        #[doc(hidden)]
        pub fn with_park_tick(mut self, tick: std::time::Duration) -> Self {
            self.line.park_tick = tick;
            self
        }

        /// Tests: another cohort window (a slow test machine may take longer than the default
        /// between an acquisition and the release it checks).
        #[doc(hidden)]
        pub fn with_cohort_window(mut self, window: std::time::Duration) -> Self {
            self.line.cohort_window = window;
            self
        }

        /// Tests: forget when this process last set the line's TTL (its next queueing release
        /// sets it again).
        #[doc(hidden)]
        pub fn forget_line_refresh(&self) {
            self.line.forget_line_refresh()
        }
    };
}
pub(crate) use line_test_hooks;

/// The acquire script's arguments beyond the token.
pub(crate) struct AcquireArgs<'a> {
    /// How long the caller plans to wait for its turn (ms; 0: it won't, and does not queue).
    pub wait_ms: u64,
    /// This token's entry in the line from an earlier attempt.
    pub queued: Option<&'a str>,
    /// The token may hold already (a retried call, a hand-off not taken yet): the script checks.
    pub maybe_ours: bool,
    /// The grant inbox its entry names (None: it pops its grant list).
    pub inbox: Option<&'a str>,
}

/// The release script's arguments beyond the token.
pub(crate) struct ReleaseArgs<'a> {
    /// The token also leaves the line (a waiter giving up).
    pub leave_line: bool,
    /// A local waiter's token to queue at the tail of the line ("" for none), planning to wait
    /// `successor_wait_ms`, granted through `successor_inbox` if given; `refresh_line`: set the
    /// line's TTL after it.
    pub successor: &'a str,
    pub successor_inbox: Option<&'a str>,
    pub successor_wait_ms: u64,
    pub refresh_line: bool,
}

impl ReleaseArgs<'_> {
    /// A release that queues nobody.
    pub fn plain(leave_line: bool) -> ReleaseArgs<'static> {
        ReleaseArgs {
            leave_line,
            successor: "",
            successor_inbox: None,
            successor_wait_ms: 0,
            refresh_line: false,
        }
    }
}

/// How one attempt ended.
pub(crate) enum Attempt {
    /// Held, with its grant (a lock's fencing token).
    Acquired(i64),
    /// Not held: what the script reported (the holder's TTL, the earliest slot's expiry), and
    /// this token's place in the line when it queued.
    Busy {
        reported_ms: i64,
        entry: Option<String>,
    },
}

/// One acquisition: the lock or a slot. Dropping it without a release stops renewal; the hold
/// then expires.
pub(crate) struct Hold {
    pub token: String,
    /// A lock's fencing token (a slot's means nothing).
    pub fencing_token: i64,
    /// Renewal while held (None: a lock that only expires, or the empty shell a cohort hand-off
    /// leaves behind).
    pub lease: Option<Lease>,
    /// This holder's place among its process's threads for the name, when it came through the
    /// local line: its release may queue the next local waiter.
    pub member: Option<Member>,
    /// Its place in its cohort (None: it may not pass the hold on within the process).
    pub cohort: Option<Cohort>,
}

/// The parts of a primitive that waits in a line. Its wait path is in enter.rs (waiting,
/// giving up) and release.rs (releasing, queueing the next local waiter, abandoning).
pub(crate) struct Line {
    pub client: Client,
    pub name: String,
    /// The key the hold lives in (the lock, the slots): this process's unanswered releases for
    /// the name are keyed by it.
    pub key: String,
    /// What this process's local line for the name is keyed by: `key`, but for a DistMutex
    /// made with `fencing: false`, whose threads wait apart from fenced ones (a hold passed
    /// within the process keeps its cohort's tokens, or lack of them).
    pub local_key: String,
    /// `<ns>:{name}:grant:`, followed by a waiter's token.
    grant_prefix: String,
    /// How long a hold lasts unrenewed.
    pub lease: Duration,
    /// The longest a waiter blocks between two attempts (a lock's lease; a limiter's lease, at
    /// least its recheck): its entry covers that, and a local waiter nobody passed on goes to
    /// Redis by itself after it.
    pub max_block: Duration,
    pub min_replicas_acked: u32,
    /// Cohort hand-offs in a row (cohort.rs), and how long after a hold's Redis acquisition.
    pub local_passes: u32,
    pub cohort_window: Duration,
    /// Unfair mode (release.rs `pass_unfairly`): how long the process may keep the hold among
    /// its own threads; None (fair, the default): a cohort's end gives it back through Redis.
    pub unfair_slice: Option<Duration>,
    /// Unfair mode: how long a parked hold waits for a running thread of the process before
    /// the oldest local waiter takes it (local/parked.rs; longer in tests).
    pub park_tick: Duration,
    /// Tokens of calls cut short (interrupted, Redis unreachable), with their place in line if
    /// any: a retry with the same token checks whether the hold is already its own and takes
    /// its place back instead of queueing twice; `abandon` drops it.
    pub cut_short: CutShort,
}

impl Line {
    pub fn new(
        client: &Client,
        name: &str,
        key: String,
        grant_prefix: String,
        lease: Duration,
        max_block: Duration,
        local_passes: u32,
    ) -> Line {
        Line {
            client: client.clone(),
            name: name.to_string(),
            local_key: key.clone(),
            key,
            grant_prefix,
            lease,
            max_block,
            min_replicas_acked: 0,
            local_passes,
            cohort_window: super::cohort::window(lease),
            unfair_slice: None,
            park_tick: super::local::PARK_TICK,
            cut_short: CutShort::default(),
        }
    }

    pub fn grant_key(&self, token: &str) -> String {
        format!("{}{}", self.grant_prefix, token)
    }

    /// The TTL every writer gives the Redis line: twice the longest entry a waiter plans
    /// (`max_block` + `WAIT_MARK_MARGIN`), so a process that set it at T may queue entries
    /// without setting it again until that long after T (see `local::line_refresh_needed`,
    /// the acquire scripts).
    pub fn line_ttl(&self) -> Duration {
        (self.max_block + WAIT_MARK_MARGIN)
            .saturating_mul(2)
            .min(crate::seconds::MAX)
    }

    /// How long a waiter plans to wait for its next turn (ms; 0: it is out of time and won't),
    /// which its entry in the line records.
    pub fn planned_wait_ms(&self, deadline: Option<Instant>) -> u64 {
        let left = match deadline {
            Some(d) => d.saturating_duration_since(Instant::now()),
            None => self.max_block,
        };
        // A caller out of time makes its last attempt without joining the line.
        if left.is_zero() {
            0
        } else {
            crate::seconds::millis(left.min(self.max_block) + WAIT_MARK_MARGIN)
        }
    }

    /// Threads of this process waiting for this name behind the one in Redis (for tests).
    pub fn local_waiters(&self) -> usize {
        super::local::local_waiters(self.client.identity(), &self.local_key)
    }

    /// Holds parked in this process for this name (unfair mode; for tests).
    pub fn parked_holds(&self) -> usize {
        super::local::parked_holds(self.client.identity(), &self.local_key)
    }

    /// Tests: forget when this process last set the line's TTL.
    pub fn forget_line_refresh(&self) {
        super::local::forget_line_refresh(self.client.identity(), &self.local_key)
    }

    /// Announces a release this process's callers already treat as done, until dropped (see
    /// unanswered_releases.rs).
    pub fn announce_release(&self) -> crate::unanswered_releases::Announced {
        crate::unanswered_releases::announce(self.client.identity(), &self.key)
    }

    /// Waits until no release of this name announced by this process is in flight.
    pub fn wait_unanswered_releases(&self, intr: &Interrupt) -> Result<()> {
        crate::unanswered_releases::wait_answered(self.client.identity(), &self.key, intr)
    }
}

/// Waits cut short (interrupted, Redis unreachable), by owner token: whether the waiter had
/// queued, and its line entry. A retry with the same token takes its place back (and may find
/// the lock or slot already granted to it); `abandon` forgets it.
#[derive(Default)]
pub(crate) struct CutShort(Mutex<HashMap<String, Option<String>>>);

impl CutShort {
    /// Runs one wait for `token`: `wait(retried, queued)`, where `retried` says a previous wait
    /// with this token was cut short and `queued` is its line entry (kept up to date by the
    /// wait). When the wait fails, its place is remembered for a retry.
    pub fn resume<T>(
        &self,
        token: &str,
        wait: impl FnOnce(bool, &mut Option<String>) -> Result<T>,
    ) -> Result<T> {
        let (retried, mut queued) = match self.forget(token) {
            Some(entry) => (true, entry),
            None => (false, None),
        };
        let outcome = wait(retried, &mut queued);
        if outcome.is_err() {
            self.map().insert(token.to_string(), queued);
        }
        outcome
    }

    /// Drops `token`'s remembered place (the caller leaves the line itself).
    pub fn forget(&self, token: &str) -> Option<Option<String>> {
        self.map().remove(token)
    }

    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<String, Option<String>>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}
