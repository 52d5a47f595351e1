//! RateLimiter reservations: a caller that must wait gets its slot from the script that found
//! the limiter full (first come, first served) and sleeps until it with no second call; an
//! interrupted wait resumes on the same slot; a refund gives a slot back only when that cannot
//! let more than `count` through, and a repeated refund does nothing.

use crate::support::{cmd, RedisServer};
use ferrolock_core::Interrupt;
use ferrolock_core::{Algorithm, Attempt, Grant, RateLimiter};
use std::time::{Duration, Instant};

const FAR: Duration = Duration::from_secs(100);

fn limiter(server: &RedisServer, algorithm: Algorithm, count: u32, secs: u64) -> RateLimiter {
    let client = server.client("t");
    RateLimiter::new(&client, "r", algorithm, count, Duration::from_secs(secs)).unwrap()
}

/// One call with a wait of up to `wait`: its grant (made, not slept for) or None.
fn reserve(rl: &RateLimiter, cost: u32, wait: Duration) -> (Option<Grant>, ferrolock_core::Claim) {
    let mut claim = rl.claim(cost).unwrap();
    match rl.reserve(&Interrupt::new(), &mut claim, wait).unwrap() {
        Attempt::Granted(g) => (Some(g), claim),
        Attempt::Refused { .. } => (None, claim),
    }
}

fn remaining(rl: &RateLimiter) -> u64 {
    rl.status(&Interrupt::new()).unwrap().remaining
}

fn reset_in(rl: &RateLimiter) -> Duration {
    rl.status(&Interrupt::new()).unwrap().reset_in
}

/// Polls (refunds run in the background) until `ok`, for a few seconds.
fn eventually(what: &str, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !ok() {
        assert!(Instant::now() < deadline, "{what}: not met in 5 s");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn every_kind_reserves_slots_in_call_order_within_the_wait_only() {
    let server = RedisServer::start();
    for algorithm in [
        Algorithm::Window,
        Algorithm::SlidingWindow,
        Algorithm::Bucket,
        Algorithm::Leaky { burst: 0 },
        Algorithm::Points,
    ] {
        let rl = limiter(&server, algorithm, 2, 30);
        let mut slots = vec![];
        for _ in 0..6 {
            let (grant, _) = reserve(&rl, 1, Duration::from_secs(75));
            slots.extend(grant.map(|g| g.at_us));
        }
        // 2 per 30 s: within 75 s of waiting, 4 to 6 calls get a slot (the window kind's
        // windows are aligned to Redis time), each no earlier than the one before.
        assert!((4..=6).contains(&slots.len()), "{algorithm:?}: {slots:?}");
        assert!(
            slots.windows(2).all(|w| w[0] <= w[1]),
            "{algorithm:?}: {slots:?}"
        );
        // A call with no wait is refused, with the time to the slot after the reservations.
        let mut claim = rl.claim(1).unwrap();
        match rl
            .reserve(&Interrupt::new(), &mut claim, Duration::ZERO)
            .unwrap()
        {
            Attempt::Refused { retry_after } => assert!(retry_after > Duration::from_secs(30)),
            other => panic!("{algorithm:?}: {other:?}"),
        }
        cmd(&server.client("t"), &["FLUSHALL"]);
    }
}

#[test]
fn an_interrupted_wait_resumes_on_the_slot_it_reserved() {
    let server = RedisServer::start();
    let rl = limiter(&server, Algorithm::Leaky { burst: 0 }, 10, 1);
    let mut first = rl.claim(1).unwrap();
    assert!(matches!(
        rl.acquire(&Interrupt::new(), &mut first, Instant::now() + FAR)
            .unwrap(),
        Attempt::Granted(_)
    ));
    let intr = Interrupt::new();
    intr.cancel();
    let mut claim = rl.claim(1).unwrap();
    let deadline = Instant::now() + FAR;
    // Cancelled before it was sent: nothing reserved, nothing to give back.
    assert!(rl.acquire(&intr, &mut claim, deadline).is_err());
    assert_eq!(remaining(&rl), 0);
    let intr = Interrupt::new();
    let mut claim = rl.claim(1).unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::scope(|s| {
        s.spawn(|| {
            let got = rl.acquire(&intr, &mut claim, deadline);
            tx.send(got.is_err()).unwrap();
            // Resumed with the same claim: the same slot, no second reservation.
            let again = rl.acquire(&Interrupt::new(), &mut claim, deadline).unwrap();
            tx.send(matches!(again, Attempt::Granted(_))).unwrap();
        });
        std::thread::sleep(Duration::from_millis(20));
        intr.cancel();
    });
    assert!(rx.recv().unwrap(), "the cancelled wait ended with an error");
    assert!(rx.recv().unwrap(), "the resumed wait was granted");
    // Two calls counted (100 ms apart), not three.
    let left = reset_in(&rl);
    assert!(left <= Duration::from_millis(200), "{left:?}");
}

#[test]
fn a_refund_takes_back_only_the_latest_call_and_only_once() {
    let server = RedisServer::start();
    for algorithm in [
        Algorithm::Leaky { burst: 0 },
        Algorithm::Window,
        Algorithm::Points,
    ] {
        let rl = limiter(&server, algorithm, 1, 30);
        let (Some(_), _) = reserve(&rl, 1, FAR) else {
            panic!("{algorithm:?}")
        };
        let (Some(_), older) = reserve(&rl, 1, FAR) else {
            panic!("{algorithm:?}")
        };
        let (Some(_), latest) = reserve(&rl, 1, FAR) else {
            panic!("{algorithm:?}")
        };
        let full_for = reset_in(&rl);
        // Not the latest: stays counted (a newcomer would go beside the later reservation).
        rl.refund(&older);
        std::thread::sleep(Duration::from_millis(300));
        assert!(
            reset_in(&rl) + Duration::from_secs(1) >= full_for,
            "{algorithm:?}"
        );
        rl.refund(&latest);
        eventually(&format!("{algorithm:?} refund"), || {
            reset_in(&rl) + Duration::from_secs(20) < full_for
        });
        let after_refund = reset_in(&rl);
        // Someone takes the slot back; repeating the refund (the background repeats) must not
        // give it away a second time.
        let (Some(_), _) = reserve(&rl, 1, FAR) else {
            panic!("{algorithm:?}")
        };
        let taken = reset_in(&rl);
        assert!(
            taken > after_refund + Duration::from_secs(20),
            "{algorithm:?}"
        );
        rl.refund(&latest);
        std::thread::sleep(Duration::from_millis(300));
        assert!(
            reset_in(&rl) + Duration::from_secs(1) >= taken,
            "{algorithm:?}"
        );
        cmd(&server.client("t"), &["FLUSHALL"]);
    }
}

#[test]
fn a_sliding_window_refund_frees_any_reserved_entry() {
    let server = RedisServer::start();
    let rl = limiter(&server, Algorithm::SlidingWindow, 1, 30);
    let client = server.client("t");
    let (Some(_), _) = reserve(&rl, 1, FAR) else {
        panic!()
    };
    let (Some(a), older) = reserve(&rl, 1, FAR) else {
        panic!()
    };
    let (Some(b), _) = reserve(&rl, 1, FAR) else {
        panic!()
    };
    assert!(b.at_us - a.at_us >= 30_000_000);
    rl.refund(&older);
    eventually("zcard", || {
        ferrolock_core::client::int(&cmd(&client, &["ZCARD", rl.key()])).unwrap() == 2
    });
    // The freed place is not reused before the later entry: a newcomer goes after it.
    let (Some(c), _) = reserve(&rl, 1, Duration::from_secs(200)) else {
        panic!()
    };
    assert!(c.at_us >= b.at_us + 30_000_000);
}

#[test]
fn points_spend_their_cost_and_a_cost_above_the_budget_is_refused_as_an_argument() {
    let server = RedisServer::start();
    let rl = limiter(&server, Algorithm::Points, 10, 10);
    let (Some(g), _) = reserve(&rl, 7, Duration::ZERO) else {
        panic!()
    };
    assert_eq!(g.remaining, 3);
    let (None, _) = reserve(&rl, 4, Duration::ZERO) else {
        panic!()
    };
    let (Some(g), _) = reserve(&rl, 3, Duration::ZERO) else {
        panic!()
    };
    assert_eq!(g.remaining, 0);
    // 5 points come back 5 s on: reserved for a caller that may wait that long.
    let (Some(g), _) = reserve(&rl, 5, Duration::from_secs(6)) else {
        panic!()
    };
    assert!(g.opens > Instant::now() + Duration::from_secs(4));
    for cost in [0, 11] {
        let err = rl.claim(cost).unwrap_err().to_string();
        assert!(err.contains("cost"), "{err}");
    }
    let bucket = limiter(&server, Algorithm::Bucket, 10, 10);
    assert!(bucket.claim(2).unwrap_err().to_string().contains("cost"));
}
