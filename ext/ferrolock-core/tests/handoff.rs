//! DistMutex's direct hand-off: a release gives the lock to the first waiter still waiting, in
//! the order they queued; waiters that gave up or died never keep it longer than their bounds.
mod support;

use ferrolock_core::client::int;
use ferrolock_core::dist_mutex::{DistMutex, DistMutexOptions};
use ferrolock_core::{Error, Interrupt};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::{cmd, until, RedisServer};

fn lease(ms: u64) -> DistMutexOptions {
    DistMutexOptions {
        lease: Duration::from_millis(ms),
        ..DistMutexOptions::default()
    }
}

fn queued(client: &ferrolock_core::Client, name: &str) -> i64 {
    int(&cmd(client, &["LLEN", &format!("t:{{{name}}}:waiters")])).unwrap()
}

/// Waits (generously) until `n` waiters are in line.
fn until_queued(client: &ferrolock_core::Client, name: &str, n: i64) {
    until(&format!("{n} waiters in line"), || {
        queued(client, name) >= n
    });
}

#[test]
fn waiters_enter_in_the_order_they_queued_with_growing_tokens() {
    let server = RedisServer::start();
    let client = server.client("t");
    let m = Arc::new(DistMutex::new(&client, "fifo", lease(30_000)).unwrap());
    let intr = Interrupt::new();
    let held = m.lock(&intr, &DistMutex::new_token(), None).unwrap();
    let first_fence = held.fencing_token();
    let entered = Arc::new(Mutex::new(Vec::new()));
    // A client per waiter, as in separate processes: threads of one client share one entry in
    // the Redis line (tests/local_line.rs covers their order).
    let waiters: Vec<_> = (0..6)
        .map(|i| {
            let m = DistMutex::new(&server.client("t"), "fifo", lease(30_000)).unwrap();
            let entered = entered.clone();
            let waiter = std::thread::spawn(move || {
                let intr = Interrupt::new();
                let held = m.lock(&intr, &DistMutex::new_token(), None).unwrap();
                entered.lock().unwrap().push((i, held.fencing_token()));
                m.unlock(&intr, held).unwrap();
            });
            until_queued(&client, "fifo", i + 1);
            waiter
        })
        .collect();
    m.unlock(&intr, held).unwrap();
    waiters.into_iter().for_each(|w| w.join().unwrap());
    let entered = entered.lock().unwrap().clone();
    let order: Vec<i64> = entered.iter().map(|(i, _)| *i).collect();
    assert_eq!(order, (0..6).collect::<Vec<_>>());
    let mut last = first_fence;
    for (_, fence) in entered {
        assert!(fence > last, "fencing token {fence} after {last}");
        last = fence;
    }
    assert!(!m.is_locked(&intr).unwrap());
    assert_eq!(queued(&client, "fifo"), 0);
}

#[test]
fn a_grant_to_a_waiter_that_gave_up_is_passed_on_at_once() {
    let server = RedisServer::start();
    let client = server.client("t");
    // A 30 s lease: only the hand-off can explain a wait of well under a second.
    let m = Arc::new(DistMutex::new(&client, "gone", lease(30_000)).unwrap());
    let intr = Interrupt::new();
    let held = m.lock(&intr, &DistMutex::new_token(), None).unwrap();
    // The first waiter is cut short while waiting and keeps its place (as a call about to be
    // retried does); the second waits behind it.
    let gone_token = DistMutex::new_token();
    let cut = Arc::new(Interrupt::new());
    let gone = {
        let (m, cut, tok) = (m.clone(), cut.clone(), gone_token.clone());
        std::thread::spawn(move || matches!(m.lock(&cut, &tok, None), Err(Error::Interrupted)))
    };
    until_queued(&client, "gone", 1);
    cut.cancel();
    assert!(gone.join().unwrap());
    let next = {
        let m = m.clone();
        std::thread::spawn(move || {
            let intr = Interrupt::new();
            let held = m.lock(&intr, &DistMutex::new_token(), None).unwrap();
            let entered = Instant::now();
            m.unlock(&intr, held).unwrap();
            entered
        })
    };
    until_queued(&client, "gone", 2);
    // The release hands the lock to the waiter that was cut short: its grant is in flight.
    m.unlock(&intr, held).unwrap();
    assert!(m.is_locked(&intr).unwrap());
    // Giving up for good passes it on to the next in line.
    let gave_up = Instant::now();
    m.abandon(&gone_token);
    let entered = next.join().unwrap();
    assert!(
        entered - gave_up < Duration::from_secs(2),
        "the next waiter entered {:?} after the give-up",
        entered - gave_up
    );
    let grant = format!("t:{{gone}}:grant:{gone_token}");
    assert_eq!(int(&cmd(&client, &["EXISTS", &grant])).unwrap(), 0);
}

#[test]
fn waiters_that_time_out_as_the_lock_is_handed_to_them_never_strand_it() {
    let server = RedisServer::start();
    let client = server.client("t");
    // A 30 s lease: a grant stranded on a waiter that timed out would block the patient waiter
    // far beyond its 10 s timeout.
    let m = Arc::new(DistMutex::new(&client, "race", lease(30_000)).unwrap());
    let intr = Interrupt::new();
    for round in 0..30u64 {
        let held = m.lock(&intr, &DistMutex::new_token(), None).unwrap();
        let hasty = {
            let m = m.clone();
            std::thread::spawn(move || {
                let intr = Interrupt::new();
                let deadline = Instant::now() + Duration::from_millis(20);
                if let Ok(held) = m.lock(&intr, &DistMutex::new_token(), Some(deadline)) {
                    m.unlock(&intr, held).unwrap();
                }
            })
        };
        until_queued(&client, "race", 1);
        let patient = {
            let m = m.clone();
            std::thread::spawn(move || {
                let intr = Interrupt::new();
                let deadline = Instant::now() + Duration::from_secs(10);
                let held = m.lock(&intr, &DistMutex::new_token(), Some(deadline));
                m.unlock(&intr, held.expect("the patient waiter got the lock"))
                    .unwrap();
            })
        };
        // Release about when the hasty waiter's 20 ms run out, varying around it.
        std::thread::sleep(Duration::from_micros(12_000 + round * 500));
        m.unlock(&intr, held).unwrap();
        hasty.join().unwrap();
        patient.join().unwrap();
    }
    assert!(!m.is_locked(&intr).unwrap());
}

#[test]
fn a_waiter_that_died_is_skipped_once_its_wait_has_ended() {
    let server = RedisServer::start();
    let client = server.client("t");
    let m = Arc::new(DistMutex::new(&client, "dead", lease(30_000)).unwrap());
    let intr = Interrupt::new();
    let held = m.lock(&intr, &DistMutex::new_token(), None).unwrap();
    // Cut short and never retried nor abandoned: as if its process died. It planned to wait
    // 100 ms, so its place in line ends about a second later (the margin).
    let cut = Arc::new(Interrupt::new());
    let dead = {
        let (m, cut) = (m.clone(), cut.clone());
        std::thread::spawn(move || {
            let deadline = Instant::now() + Duration::from_millis(100);
            m.lock(&cut, &DistMutex::new_token(), Some(deadline))
                .is_err()
        })
    };
    until_queued(&client, "dead", 1);
    cut.cancel();
    assert!(dead.join().unwrap());
    std::thread::sleep(Duration::from_millis(1600));
    m.unlock(&intr, held).unwrap();
    assert!(!m.is_locked(&intr).unwrap(), "handed to a dead waiter");
}

#[test]
fn an_older_versions_waiting_mark_neither_breaks_waiting_nor_release() {
    let server = RedisServer::start();
    let client = server.client("t");
    let m = Arc::new(DistMutex::new(&client, "mixed", lease(30_000)).unwrap());
    let intr = Interrupt::new();
    // Before the hand-off, a waiter marked the name with a string under the same key.
    cmd(&client, &["SET", "t:{mixed}:waiters", "1", "PX", "60000"]);
    let held = m.lock(&intr, &DistMutex::new_token(), None).unwrap();
    m.unlock(&intr, held).unwrap();
    let held = m.lock(&intr, &DistMutex::new_token(), None).unwrap();
    let waiter = {
        let m = m.clone();
        std::thread::spawn(move || {
            let intr = Interrupt::new();
            let held = m.lock(&intr, &DistMutex::new_token(), None).unwrap();
            m.unlock(&intr, held).unwrap();
        })
    };
    // The waiter's line replaces the mark.
    let deadline = Instant::now() + Duration::from_secs(20);
    while cmd(&client, &["TYPE", "t:{mixed}:waiters"]) != redis::Value::SimpleString("list".into())
    {
        assert!(Instant::now() < deadline, "the waiter never queued");
        std::thread::sleep(Duration::from_millis(1));
    }
    m.unlock(&intr, held).unwrap();
    waiter.join().unwrap();
    assert!(!m.is_locked(&intr).unwrap());
}
