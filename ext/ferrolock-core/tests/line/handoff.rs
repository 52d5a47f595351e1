//! The direct hand-off, for both primitives (src/line/enter.rs, release.rs, the release
//! scripts): a release gives the hold to the first waiter of the Redis line still waiting, in
//! the order they queued; waiters that gave up, timed out or died never keep it past their
//! bounds. Each waiter here is on a client of its own (a process), unless said.

use crate::both::{both, exists, key, make, passer, queued, take, until_queued, Lined};
use crate::support::{cmd, grant_keys, keys_without_ttl, until, RedisServer};
use ferrolock_core::{DistMutex, DistMutexOptions};
use ferrolock_core::{Error, Interrupt};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

both!(
    waiters_enter_in_the_order_they_queued,
    a_hold_granted_to_a_waiter_that_gave_up_is_passed_on_at_once,
    waiters_that_time_out_as_the_hold_is_handed_to_them_never_strand_it,
    a_waiter_that_died_is_skipped_once_its_wait_has_ended,
);

fn waiters_enter_in_the_order_they_queued<P: Lined>() {
    let server = RedisServer::start();
    let client = server.client("t");
    let p = make::<P>(&client, "fifo");
    let intr = Interrupt::new();
    let held = take(&*p);
    let first = P::fence(&held);
    let log = Arc::new(Mutex::new(Vec::new()));
    // Threads of one client would wait behind the first in the process (local_line.rs).
    let waiters: Vec<_> = (0..6)
        .map(|i| {
            let waiter = passer(&make::<P>(&server.client("t"), "fifo"), i, &log);
            until_queued::<P>(&client, "fifo", i as i64 + 1);
            waiter
        })
        .collect();
    // The hold passes from waiter to waiter along the line.
    p.leave(&intr, held).unwrap();
    waiters.into_iter().for_each(|w| w.join().unwrap());
    assert_eq!(crate::both::ids(&log), (0..6).collect::<Vec<_>>());
    crate::both::assert_fences_grow(first, &log);
    assert!(!p.held());
    assert_eq!(queued::<P>(&client, "fifo"), 0);
    assert_eq!(grant_keys(&client), redis::Value::Array(vec![]));
    assert_eq!(keys_without_ttl(&client), Vec::<String>::new());
}

fn a_hold_granted_to_a_waiter_that_gave_up_is_passed_on_at_once<P: Lined>() {
    let server = RedisServer::start();
    let client = server.client("t");
    // A 30 s lease: only the hand-off can explain a wait of well under a second.
    let p = make::<P>(&client, "gone");
    let intr = Interrupt::new();
    let held = take(&*p);
    // The first waiter is cut short while waiting and keeps its place (as a call about to be
    // retried does); the second waits behind it.
    let gone = P::token();
    let cut = Arc::new(Interrupt::new());
    let waiter = {
        let (p, cut, gone) = (p.clone(), cut.clone(), gone.clone());
        std::thread::spawn(move || matches!(p.enter(&cut, &gone, None), Err(Error::Interrupted)))
    };
    until_queued::<P>(&client, "gone", 1);
    cut.cancel();
    assert!(waiter.join().unwrap());
    let next = {
        let p = make::<P>(&server.client("t"), "gone");
        std::thread::spawn(move || {
            let hold = take(&*p);
            let entered = Instant::now();
            p.leave(&Interrupt::new(), hold).unwrap();
            entered
        })
    };
    until_queued::<P>(&client, "gone", 2);
    // The release hands the hold to the waiter that was cut short: its grant is in flight.
    p.leave(&intr, held).unwrap();
    assert!(p.held());
    // Giving up for good passes it on to the next in line (a 30 s lease: not by expiry).
    let gave_up = Instant::now();
    p.abandon(&gone);
    let waited = next.join().unwrap() - gave_up;
    assert!(
        waited < Duration::from_secs(2),
        "the next waiter entered {waited:?} after the give-up"
    );
    assert!(!exists(
        &client,
        &key::<P>("gone", &format!("grant:{gone}"))
    ));
    assert!(!p.held());
    assert_eq!(keys_without_ttl(&client), Vec::<String>::new());
}

fn waiters_that_time_out_as_the_hold_is_handed_to_them_never_strand_it<P: Lined>() {
    let server = RedisServer::start();
    let client = server.client("t");
    // A 30 s lease: a hold stranded on a waiter that timed out would keep the patient waiter
    // far beyond its 10 s timeout.
    let p = make::<P>(&client, "race");
    let other = make::<P>(&server.client("t"), "race");
    let intr = Interrupt::new();
    let mut raced = 0;
    for round in 0..24u64 {
        let held = take(&*p);
        // Far enough ahead that a loaded machine still queues the hasty waiter before it.
        let deadline = Instant::now() + Duration::from_millis(200);
        let hasty = {
            let p = p.clone();
            std::thread::spawn(move || {
                let intr = Interrupt::new();
                if let Some(hold) = p.enter(&intr, &P::token(), Some(deadline)).unwrap() {
                    p.leave(&intr, hold).unwrap();
                }
            })
        };
        until("the hasty waiter queued (or gone)", || {
            queued::<P>(&client, "race") >= 1 || hasty.is_finished()
        });
        raced += usize::from(!hasty.is_finished());
        // Every other round the patient waiter is of the hasty one's process (waiting behind
        // it there), else of another (queued in Redis behind it).
        let patient = {
            let p = if round % 2 == 0 {
                p.clone()
            } else {
                other.clone()
            };
            std::thread::spawn(move || {
                let intr = Interrupt::new();
                let deadline = Instant::now() + Duration::from_secs(10);
                let hold = p.enter(&intr, &P::token(), Some(deadline)).unwrap();
                p.leave(&intr, hold.expect("the patient waiter got the hold"))
                    .unwrap();
            })
        };
        // Release about when the hasty waiter's wait runs out, from 8 ms before to 6 ms after.
        let release_at = deadline - Duration::from_millis(8) + Duration::from_micros(round * 600);
        std::thread::sleep(release_at.saturating_duration_since(Instant::now()));
        p.leave(&intr, held).unwrap();
        hasty.join().unwrap();
        patient.join().unwrap();
        assert!(!p.held(), "round {round}");
    }
    assert!(
        raced >= 12,
        "only {raced} of 24 rounds queued the hasty waiter in time"
    );
    assert_eq!(queued::<P>(&client, "race"), 0);
    assert_eq!(grant_keys(&client), redis::Value::Array(vec![]));
    assert_eq!(keys_without_ttl(&client), Vec::<String>::new());
}

fn a_waiter_that_died_is_skipped_once_its_wait_has_ended<P: Lined>() {
    let server = RedisServer::start();
    let client = server.client("t");
    let p = make::<P>(&client, "dead");
    let intr = Interrupt::new();
    let held = take(&*p);
    // Cut short and never retried nor abandoned: as if its process died. It planned to wait
    // 300 ms (time for a loaded machine to queue it), so its place in line ends about a second
    // later (the margin), before the release below.
    let cut = Arc::new(Interrupt::new());
    let dead_token = P::token();
    let dead = {
        let (p, cut, token) = (p.clone(), cut.clone(), dead_token.clone());
        std::thread::spawn(move || {
            let deadline = Instant::now() + Duration::from_millis(300);
            p.enter(&cut, &token, Some(deadline)).is_err()
        })
    };
    until_queued::<P>(&client, "dead", 1);
    cut.cancel();
    assert!(dead.join().unwrap());
    // A live waiter of another process, behind it.
    let live = {
        let p = make::<P>(&server.client("t"), "dead");
        std::thread::spawn(move || {
            let hold = take(&*p);
            let entered = Instant::now();
            p.leave(&Interrupt::new(), hold).unwrap();
            entered
        })
    };
    until_queued::<P>(&client, "dead", 2);
    std::thread::sleep(Duration::from_millis(1600));
    let released = Instant::now();
    p.leave(&intr, held).unwrap();
    let waited = live.join().unwrap() - released;
    // The lease is 30 s: only the hand-off, past the dead entry, explains this.
    assert!(
        waited < Duration::from_secs(2),
        "the live waiter entered {waited:?} after the release"
    );
    assert!(!p.held(), "handed to the dead waiter");
    let grant = key::<P>("dead", &format!("grant:{dead_token}"));
    assert!(!exists(&client, &grant));
    assert_eq!(queued::<P>(&client, "dead"), 0);
    assert_eq!(keys_without_ttl(&client), Vec::<String>::new());
}

// DistMutex only: an older version's mark under the waiters key.

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

fn lease(ms: u64) -> DistMutexOptions {
    DistMutexOptions {
        fair: true,
        lease: Duration::from_millis(ms),
        ..DistMutexOptions::default()
    }
}
