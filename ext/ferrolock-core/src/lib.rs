//! ferrolock-core: Redis coordination primitives with leases and wake-ups. Holds no Ruby types;
//! the `ferrolock` crate binds it to Ruby.

pub mod admin;
pub mod caller_deadline;
pub mod client;
pub mod cohort;
pub mod concurrent_limiter;
pub mod dist_mutex;
pub mod dual_lock;
mod dual_lock_local;
pub mod error;
pub mod fair_tenant;
pub mod fork;
pub mod handoff;
pub mod holder;
pub mod inbox;
pub mod interrupt;
pub mod keys;
pub mod lease;
pub mod local_line;
pub mod lost_leases;
pub mod lost_reason;
pub mod message_lock;
mod quiet_thread;
pub mod rate_limiter;
pub mod redact;
pub mod replicas;
pub mod script;
pub mod seconds;
pub mod token;
pub mod transport;
pub mod unanswered_releases;
pub mod unique_lock;
pub mod wait;

pub use client::{Client, ClientOptions, SentinelOptions};
pub use error::{Error, Result};
pub use interrupt::Interrupt;
