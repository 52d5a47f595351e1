//! ferrolock-core: Redis coordination primitives with leases and wake-ups. Holds no Ruby types;
//! the `ferrolock` crate binds it to Ruby.

pub mod admin;
pub mod client;
mod cluster;
pub mod concurrent_limiter;
pub mod conn;
pub mod dist_mutex;
pub mod dual_lock;
pub mod endpoint;
pub mod error;
pub mod fair_tenant;
pub mod fork;
pub mod handoff;
pub mod holder;
pub mod interrupt;
pub mod keys;
pub mod lease;
pub mod local_line;
pub mod lost_leases;
pub mod message_lock;
mod pool;
pub mod rate_limiter;
pub mod replicas;
pub mod script;
pub mod seconds;
mod sentinel;
pub mod slot;
pub mod spin;
mod tls;
pub mod token;
mod topology;
pub mod unique_lock;
pub mod wait;

pub use client::{Client, ClientOptions, SentinelOptions};
pub use error::{Error, Result};
pub use interrupt::Interrupt;
