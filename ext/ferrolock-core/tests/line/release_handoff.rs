//! A background release (after a call cut short) also catches a grant that Redis executes after
//! it: a cancelled call may already have sent its bytes, which Redis still runs. And this
//! process's try_lock does not run ahead of it.

use crate::support::{cmd, until, RedisServer};
use ferrolock_core::client::int;
use ferrolock_core::Interrupt;
use ferrolock_core::{DistMutex, DistMutexOptions};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[test]
fn abandon_also_releases_a_grant_that_lands_after_the_first_cleanup() {
    let server = RedisServer::start();
    let client = server.client("t");
    let opts = DistMutexOptions {
        fair: true,
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

/// As after an interrupted `Mutex#lock`: once the holder unlocks, `try_lock` in this process
/// succeeds at once, even when that release handed the lock to the interrupted waiter before its
/// background give-back ran (try_lock waits for the give-back, unanswered_releases.rs).
#[test]
fn try_lock_right_after_an_interrupted_wait_and_the_unlock_finds_the_lock_free() {
    let server = RedisServer::start();
    let client = server.client("t");
    // A 30 s lease: a hold left on the interrupted waiter would outlive the test.
    let opts = DistMutexOptions {
        fair: true,
        lease: Duration::from_secs(30),
        ..DistMutexOptions::default()
    };
    let m = Arc::new(DistMutex::new(&client, "gone", opts).unwrap());
    let intr = Interrupt::new();
    for round in 0..20 {
        // Bounded: a lock still held from the round before fails the test instead of hanging it.
        let within = Some(Instant::now() + Duration::from_secs(10));
        let held = m.lock(&intr, &DistMutex::new_token(), within).unwrap();
        let cut = Arc::new(Interrupt::new());
        let token = DistMutex::new_token();
        let waiter = {
            let (m, cut, token) = (m.clone(), cut.clone(), token.clone());
            std::thread::spawn(move || m.lock(&cut, &token, None).is_err())
        };
        until("the waiter in line", || {
            int(&cmd(&client, &["LLEN", "t:{gone}:waiters"])).unwrap() >= 1
        });
        cut.cancel();
        assert!(waiter.join().unwrap());
        // What the binding does when a wait was cut short, then the holder leaves at once.
        m.abandon(&token);
        m.unlock(&intr, held).unwrap();
        let again = m.try_lock(&intr, &DistMutex::new_token()).unwrap();
        assert!(
            again.is_some(),
            "round {round}: the lock stayed with the interrupted waiter"
        );
        m.unlock(&intr, again.unwrap()).unwrap();
    }
}
