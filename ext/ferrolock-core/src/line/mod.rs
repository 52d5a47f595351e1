//! The line: how DistMutex and ConcurrentLimiter callers wait for a hold, written once for both.
//!
//! Contended, waiters form a FIFO in Redis: a failed attempt enqueues its token, and a release
//! hands the hold (the lock, a slot) straight to the first waiter still waiting, which pops the
//! grant (or hears it through the client's inbox) and enters: no second attempt, no barging.
//! Threads of one process waiting for the same name queue in Redis one at a time: the others
//! wait in the process, and a release queues the next of them at the tail of the Redis line in
//! the same script; a holder may also pass its hold to such a waiter directly, with no Redis
//! round trip, a bounded number of times (a cohort).
//!
//! * `primitive`: what the wait path needs of a primitive: `Line` (the parts every such
//!   primitive has), the `Primitive` trait (what differs: scripts, holds, slots or one lock),
//!   `Hold`, the scripts' typed arguments, the calls cut short.
//! * `enter`: attempt, queue, wait for the hand-off, give up. `release`: pass on locally, or
//!   release through Redis queueing the next local waiter; abandon a call cut short.
//! * `local`: the process's local line per name; `cohort`: the bounds of local passes.
//! * `handoff`: waiting for a grant; `inbox` + `subscription`: grants published to the
//!   process's subscription instead of popped.
//! * `unanswered_releases`: releases the caller already treats as done, which `try_lock`,
//!   `locked?` and `status` of this process wait for.
//!
//! The primitives call the wait path through `Line`'s methods (enter.rs, release.rs), and
//! implement `Primitive` for what differs.
//!
//! Design notes (moved from doc/ARCHITECTURE.md):
//!
//! One wait path (`line/`, issue 32): DistMutex and ConcurrentLimiter wait for a hold the same way,
//! written once as methods of `line::primitive::Line` (the parts both have: client, name, hold key,
//! grant prefix, lease, longest block, replicas, cohort bounds, calls cut short): `line/enter.rs`
//! (attempt, queue, wait for the hand-off, wait behind the process's Redis waiter, give up) and
//! `line/release.rs` (cohort pass, release queueing the next local waiter, abandon). What differs is
//! the `line::primitive::Primitive` trait each implements: its acquire/release/renew scripts (typed
//! `AcquireArgs`/`ReleaseArgs`), its hold (a fenced lock, possibly expiry-only; a slot), how long a
//! waiter waits after a failed attempt, what a timeout returns, and two flags: `SLOTS` (a hold may
//! pass ahead of the process's Redis waiter; a waiter that found room sends the next local waiter
//! to attempt; a local waiter goes to Redis by itself after `UNQUEUED_GRACE`) and
//! `ATTEMPT_AT_DEADLINE` (the limiter's last attempt at the deadline; DistMutex leaves at once, its
//! leaving release passing on a raced hand-off). The local line, hand-off and cohort live beside
//! them in `line/`; the grant inbox (`inbox.rs`) and the releases not yet answered
//! (`unanswered_releases.rs`) are below the line, as the client, leases and watchdog use them too.

pub mod cohort;
mod enter;
pub(crate) mod handoff;
pub(crate) mod local;
pub(crate) mod primitive;
mod release;
mod subscription;
