//! The primitives' own behaviour (one test binary; the wait path DistMutex and ConcurrentLimiter
//! share is tests/line/). Each test starts its own throwaway redis-server (support/).

#[path = "../support/mod.rs"]
mod support;

mod concurrent_limiter;
mod concurrent_limiter_commands;
mod dist_mutex;
mod dist_mutex_commands;
mod dual_lock;
mod dual_lock_local;
mod fair_tenant;
mod fencing;
mod message_lock;
mod rate_limiter;
mod unique_lock;
