pub mod admin;
pub mod client;
pub mod concurrent_limiter;
pub mod dist_mutex;
pub mod dual_lock;
pub mod fair_tenant;
pub mod lost_leases;
pub mod message_lock;
