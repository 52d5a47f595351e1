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
//! * `redact`: hides secrets in anything shown to people.
//!
//! A module is `pub` only when the binding or the integration tests (tests/) use it; the rest are
//! internals, `pub(crate)`.

pub mod admin;
pub mod client;
pub mod concurrent_limiter;
pub mod data_loss;
pub mod dist_mutex;
pub mod dual_lock;
pub(crate) mod dual_lock_local;
pub(crate) mod error;
pub mod fair_tenant;
pub mod fork;
pub mod holder;
pub(crate) mod inbox;
pub(crate) mod interrupt;
pub mod job_concurrency;
pub(crate) mod keys;
pub(crate) mod lease;
pub mod line;
pub mod lost_leases;
pub(crate) mod lost_reason;
pub mod message_lock;
pub(crate) mod quiet_thread;
pub mod rate_limiter;
pub mod redact;
pub mod replicas;
pub mod script;
pub mod seconds;
pub(crate) mod token;
pub mod transport;
pub mod unanswered_releases;
pub mod unique_lock;
pub(crate) mod wait;
pub mod wait_timeout;
pub(crate) mod watchdog;

pub use client::{Client, ClientOptions, SentinelOptions};
pub use error::{Error, Result};
pub use interrupt::Interrupt;
