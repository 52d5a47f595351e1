//! A background release (after a call cut short) also catches a grant that Redis executes after
//! it: a cancelled call may already have sent its bytes, which Redis still runs.
mod support;

use ferrolock_core::dist_mutex::{DistMutex, DistMutexOptions};
use ferrolock_core::Interrupt;
use std::time::{Duration, Instant};
use support::RedisServer;

#[test]
fn abandon_also_releases_a_grant_that_lands_after_the_first_cleanup() {
    let server = RedisServer::start();
    let client = server.client("t");
    let opts = DistMutexOptions {
        lease: Duration::from_millis(1500),
        ..DistMutexOptions::default()
    };
    let m = DistMutex::new(&client, "late", opts).unwrap();
    let intr = Interrupt::new();
    let token = DistMutex::new_token();
    m.abandon(&token);
    // The first cleanup has run (or will find the grant): now the late grant arrives, and
    // nobody renews or releases it.
    std::thread::sleep(Duration::from_millis(20));
    let held = m
        .try_lock(&intr, &token)
        .unwrap()
        .expect("the lock is free");
    drop(held);
    assert!(m.is_locked(&intr).unwrap());
    // Gone within one renewal tick (lease/3 = 500 ms), long before the 1.5 s lease expires.
    let deadline = Instant::now() + Duration::from_millis(500);
    while m.is_locked(&intr).unwrap() {
        assert!(
            Instant::now() < deadline,
            "the late grant outlived the background release"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}
