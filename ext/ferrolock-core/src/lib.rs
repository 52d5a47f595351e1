//! ferrolock-core: Redis coordination primitives with leases and wake-ups. Holds no Ruby types;
//! the `ferrolock` crate (ext/ferrolock) binds it to Ruby.
//!
//! The layout, from the bottom up:
//!
//! * `error`: the one error type; the binding maps each variant to a Ruby class.
//! * `transport/`: how a call reaches Redis and its reply comes back (URLs, TLS, connections,
//!   pools, Cluster and Sentinel routing). Knows nothing of locks.
//! * `client`: the `Client` every primitive holds, shared by threads and reset at fork (`fork`):
//!   commands, Lua scripts (`script`: EVALSHA, EVAL on NOSCRIPT), keys of one hash tag (`keys`).
//! * The lease and wait machinery the primitives share: leases (`lease`, `lost_leases`,
//!   `lost_reason`) renewed by the client's `watchdog` thread; owner tokens (`token`, `holder`);
//!   waiting for a turn (`wait`); telling that Redis lost data (`data_loss`); `line/`, the one wait path of DistMutex and ConcurrentLimiter
//!   (enter, release, abandon, written once against the `Primitive` trait each implements), with
//!   the grants pushed to a waiter (`inbox`, `subscription`, `handoff`), one Redis waiter per
//!   process (`local`) and hand-off inside the process (`cohort`, `unanswered_releases`); the
//!   caller's limits (`interrupt`, `wait_timeout`, `seconds`); `replicas` (WAIT before
//!   entering); `quiet_thread` (the core's threads, signals blocked).
//! * The primitives: `dist_mutex`, `dual_lock` (+ `dual_lock_local`), `concurrent_limiter`,
//!   `rate_limiter`, `fair_tenant`, `message_lock`, `unique_lock`, `job_concurrency`; `admin`
//!   inspects and force-releases them.
//! * `inspect`: what operators read. Each primitive reads its own keys in its `inspect`
//!   submodule (one read-only script) into a typed state; `admin::state` picks one by kind, and
//!   `admin::layout` holds the key layout listings go by (prefixes, parts, SCAN patterns).
//! * `redact`: hides secrets in anything shown to people.
//!
//! The binding's facade (issue 40, item 8): the types ext/ferrolock names are re-exported at the
//! root (the `pub use` block below), so it imports `ferrolock_core::{...}`. A module stays `pub`
//! only when the binding calls its free functions (`admin`, `fair_tenant`, `fork`, `holder`,
//! `lost_leases`, `redact`, `replicas`, `seconds`, `wait_timeout`), names a type the root cannot
//! hold twice (`admin::Held` beside `dist_mutex::Held`, `job_concurrency::Running` beside
//! `message_lock::Running`), or the integration tests (tests/) reach into it (`client::int`,
//! `concurrent_limiter::LimiterStatus`, `transport::slot::key_slot`, `script` for `lua_script!`);
//! the rest are internals, `pub(crate)` (the binding reads a rate limiter's and a digest's state
//! through `rate_inspect` and `unique_inspect`, and how many leases the process renews through
//! `renewed_leases`).

pub mod admin;
pub mod client;
pub mod concurrent_limiter;
pub(crate) mod data_loss;
pub(crate) mod dist_mutex;
pub(crate) mod dual_lock;
pub(crate) mod dual_lock_local;
pub(crate) mod error;
pub mod fair_tenant;
pub mod fork;
pub mod holder;
pub(crate) mod inbox;
pub mod inspect;
pub(crate) mod interrupt;
pub mod job_concurrency;
pub(crate) mod keys;
pub(crate) mod lease;
pub(crate) mod line;
pub mod lost_leases;
pub(crate) mod lost_reason;
pub mod message_lock;
pub(crate) mod quiet_thread;
pub(crate) mod rate_limiter;
pub mod redact;
pub mod replicas;
pub mod script;
pub mod seconds;
pub(crate) mod tally;
pub(crate) mod token;
pub mod transport;
pub(crate) mod unanswered_releases;
pub(crate) mod unique_lock;
pub(crate) mod wait;
pub mod wait_timeout;
pub(crate) mod watchdog;

pub use client::{Client, ClientOptions, SentinelOptions};
pub use concurrent_limiter::{ConcurrentLimiter, LimiterOptions, Slot};
pub use dist_mutex::{DistMutex, DistMutexOptions, Held};
pub use dual_lock::{DualLock, DualLockOptions, Stage, Ticket};
pub use error::{Error, Result};
pub use fair_tenant::{Enqueue, Mode, Rule, Rules};
pub use fork::ForkLocal;
pub use holder::Caller;
pub use interrupt::Interrupt;
pub use job_concurrency::{JobConcurrency, OnConflict, Outcome, Promoted, Request};
pub use lease::renewed as renewed_leases;
pub use line::cohort::{DEFAULT_LOCAL_PASSES, MAX_LOCAL_PASSES, MAX_SLOT_PASSES};
pub use lost_leases::{LostLease, Notice};
pub use message_lock::{Begin, Finish, MessageLock, MessageLockOptions};
pub use rate_limiter::inspect as rate_inspect;
pub use rate_limiter::{Algorithm, Attempt, Claim, Grant, RateLimiter};
pub use tally::Tally;
pub use unanswered_releases::Announced;
pub use unique_lock::inspect as unique_inspect;
pub use unique_lock::UniqueLock;
