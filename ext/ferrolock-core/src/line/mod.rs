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

pub mod cohort;
mod enter;
pub(crate) mod handoff;
pub(crate) mod inbox;
pub(crate) mod local;
pub(crate) mod primitive;
mod release;
mod subscription;
pub mod unanswered_releases;
