pub mod admin;
pub mod client;
pub mod cohort;
pub mod concurrent_limiter;
pub mod dist_mutex;
pub mod dual_lock;
pub mod fair_tenant;
pub mod fork;
pub mod job_concurrency;
pub mod lost_leases;
pub mod message_lock;
pub mod rate_limiter;
pub mod tally;
pub mod unique_lock;

use magnus::{Ruby, TypedData};

/// Looks up the Ruby class of every `#[magnus::wrap]` type once, at `require` (after the classes
/// are defined). magnus otherwise does it on a type's first wrap/unwrap, inside a `OnceLock`
/// whose initializer calls `Object.const_get`: Ruby may switch threads during that call, and a
/// second thread reaching the same lookup then blocks on the `OnceLock` while holding the GVL,
/// so the first never gets it back and the process hangs (seen under 8 threads making their
/// first MessageLease). The lookup also undefines the default allocator, so `.allocate` cannot
/// make an object without Rust data. spec/wrapped_classes_spec.rb checks that no wrapped type
/// is missing here.
pub fn resolve_wrapped_classes(ruby: &Ruby) {
    client::RbClient::class(ruby);
    concurrent_limiter::RbConcurrentLimiter::class(ruby);
    concurrent_limiter::RbLimiterSlot::class(ruby);
    dist_mutex::RbDistMutex::class(ruby);
    dist_mutex::RbMutexHold::class(ruby);
    dual_lock::RbDualLock::class(ruby);
    dual_lock::RbDualTicket::class(ruby);
    fair_tenant::RbRules::class(ruby);
    job_concurrency::RbJobConcurrency::class(ruby);
    job_concurrency::RbJobSlot::class(ruby);
    message_lock::RbMessageLock::class(ruby);
    message_lock::RbMessageLease::class(ruby);
    rate_limiter::RbRateLimiter::class(ruby);
    tally::RbTally::class(ruby);
    unique_lock::RbUniqueLock::class(ruby);
    unique_lock::RbKeyLock::class(ruby);
}
