use crate::support::{cmd, RedisServer};
use ferrolock_core::concurrent_limiter::{ConcurrentLimiter, LimiterOptions, LimiterStatus};
use ferrolock_core::{Client, ClientOptions, Error, Interrupt};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn limiter(client: &Client, name: &str, limit: u32, lease_ms: u64) -> ConcurrentLimiter {
    let opts = LimiterOptions {
        limit,
        lease: Duration::from_millis(lease_ms),
        local_passes: 0,
        fair: true,
    };
    ConcurrentLimiter::new(client, name, opts).unwrap()
}

fn token() -> String {
    ConcurrentLimiter::new_token()
}

fn after(ms: u64) -> Instant {
    Instant::now() + Duration::from_millis(ms)
}

fn status(l: &ConcurrentLimiter) -> LimiterStatus {
    l.status(&Interrupt::new()).unwrap()
}

#[test]
fn threads_never_exceed_the_limit() {
    let server = RedisServer::start();
    let client = server.client("t");
    let inside = Arc::new(AtomicUsize::new(0));
    let max_inside = Arc::new(AtomicUsize::new(0));
    let threads: Vec<_> = (0..12)
        .map(|_| {
            let l = limiter(&client, "x", 3, 5_000);
            let (inside, max_inside) = (inside.clone(), max_inside.clone());
            std::thread::spawn(move || {
                let intr = Interrupt::new();
                for _ in 0..30 {
                    let slot = l
                        .acquire(&intr, &token(), after(20_000))
                        .unwrap()
                        .expect("a slot within 20 s");
                    let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                    max_inside.fetch_max(now, Ordering::SeqCst);
                    std::thread::sleep(Duration::from_millis(2));
                    inside.fetch_sub(1, Ordering::SeqCst);
                    l.release(&intr, slot).unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(
        max_inside.load(Ordering::SeqCst),
        3,
        "never more than 3 inside, and 3 were reached"
    );
    let l = limiter(&client, "x", 3, 5_000);
    assert_eq!(
        status(&l),
        LimiterStatus {
            limit: 3,
            in_use: 0,
            waiting: 0
        }
    );
}

#[test]
fn a_block_running_past_its_lease_keeps_the_slot() {
    let server = RedisServer::start();
    let client = server.client("t");
    let l = limiter(&client, "long", 1, 300);
    let intr = Interrupt::new();
    let slot = l.acquire(&intr, &token(), Instant::now()).unwrap().unwrap();
    let started = Instant::now();
    while started.elapsed() < Duration::from_millis(1_500) {
        assert!(
            l.acquire(&intr, &token(), Instant::now())
                .unwrap()
                .is_none(),
            "a second holder got in"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    l.release(&intr, slot).unwrap();
    assert!(l
        .acquire(&intr, &token(), Instant::now())
        .unwrap()
        .is_some());
}

#[test]
fn a_crashed_holders_slot_frees_after_the_lease() {
    let server = RedisServer::start();
    let client = server.client("t");
    let l = limiter(&client, "crash", 1, 400);
    let intr = Interrupt::new();
    // Dropping a slot stops its renewal, as a killed process would.
    drop(l.acquire(&intr, &token(), Instant::now()).unwrap().unwrap());
    let started = Instant::now();
    let slot = l.acquire(&intr, &token(), after(3_000)).unwrap();
    assert!(slot.is_some(), "the abandoned slot never freed");
    // At most the lease plus one re-check period (the waiter's minimum block), with a margin.
    assert!(
        started.elapsed() < Duration::from_millis(2_000),
        "took {:?}",
        started.elapsed()
    );
}

#[test]
fn releasing_twice_frees_one_slot() {
    let server = RedisServer::start();
    let client = server.client("t");
    let l = limiter(&client, "double", 2, 5_000);
    let intr = Interrupt::new();
    let t = token();
    let a = l.acquire(&intr, &t, Instant::now()).unwrap().unwrap();
    // The same token again (a retried attempt) holds the same slot, not a second one.
    let a_again = l.acquire(&intr, &t, Instant::now()).unwrap().unwrap();
    let _b = l.acquire(&intr, &token(), Instant::now()).unwrap().unwrap();
    assert_eq!(status(&l).in_use, 2);
    l.release(&intr, a).unwrap();
    assert!(matches!(l.release(&intr, a_again), Err(Error::LockLost(_))));
    assert_eq!(
        status(&l).in_use,
        1,
        "the second release must not free the other holder's slot"
    );
    let _c = l.acquire(&intr, &token(), Instant::now()).unwrap().unwrap();
    assert!(l
        .acquire(&intr, &token(), Instant::now())
        .unwrap()
        .is_none());
}

#[test]
fn a_release_wakes_a_waiter_at_once() {
    let server = RedisServer::start();
    let client = server.client("t");
    let l = Arc::new(limiter(&client, "wake", 1, 30_000));
    let intr = Interrupt::new();
    let slot = l.acquire(&intr, &token(), Instant::now()).unwrap().unwrap();
    let waiter = {
        let l = l.clone();
        std::thread::spawn(move || {
            let slot = l
                .acquire(&Interrupt::new(), &token(), after(10_000))
                .unwrap();
            (Instant::now(), slot.is_some())
        })
    };
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        status(&l),
        LimiterStatus {
            limit: 1,
            in_use: 1,
            waiting: 1
        }
    );
    let released_at = Instant::now();
    l.release(&intr, slot).unwrap();
    let (got_at, got) = waiter.join().unwrap();
    assert!(got);
    // The lease is 30 s: only the signal can explain a hand-off this fast.
    assert!(
        got_at - released_at < Duration::from_millis(500),
        "hand-off took {:?}",
        got_at - released_at
    );
}

#[test]
fn a_wait_longer_than_the_read_timeout_ends_in_none_not_an_error() {
    let server = RedisServer::start();
    let mut opts = ClientOptions::new(&server.url());
    opts.read_timeout = Duration::from_millis(200);
    let client = Client::new(opts).unwrap();
    let l = limiter(&client, "slow", 1, 30_000);
    let intr = Interrupt::new();
    let _slot = l.acquire(&intr, &token(), Instant::now()).unwrap().unwrap();
    let started = Instant::now();
    let second = l.acquire(&intr, &token(), after(1_500)).unwrap();
    assert!(second.is_none());
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(1_450) && waited < Duration::from_secs(4),
        "waited {waited:?}"
    );
    assert_eq!(
        status(&l).waiting,
        0,
        "a waiter that gave up is no longer counted"
    );
}

#[test]
fn an_interrupt_ends_a_wait() {
    let server = RedisServer::start();
    let client = server.client("t");
    let l = Arc::new(limiter(&client, "intr", 1, 30_000));
    let _slot = l
        .acquire(&Interrupt::new(), &token(), Instant::now())
        .unwrap()
        .unwrap();
    let intr = Arc::new(Interrupt::new());
    let waiter = {
        let (l, intr) = (l.clone(), intr.clone());
        std::thread::spawn(move || {
            l.acquire(&intr, &token(), after(20_000))
                .map(|s| s.is_some())
        })
    };
    std::thread::sleep(Duration::from_millis(200));
    let cancelled_at = Instant::now();
    intr.cancel();
    assert!(matches!(waiter.join().unwrap(), Err(Error::Interrupted)));
    assert!(cancelled_at.elapsed() < Duration::from_secs(2));
}

#[test]
fn a_slot_lost_in_redis_is_reported_at_release() {
    let server = RedisServer::start();
    let client = server.client("t");
    let l = limiter(&client, "lost", 2, 5_000);
    let intr = Interrupt::new();
    let slot = l.acquire(&intr, &token(), Instant::now()).unwrap().unwrap();
    cmd(
        &client,
        &["DEL", &client.keys("lost").unwrap().part("slots")],
    );
    assert!(matches!(l.release(&intr, slot), Err(Error::LockLost(_))));
}

#[test]
fn keys_expire_with_their_last_lease() {
    let server = RedisServer::start();
    let client = server.client("t");
    let l = limiter(&client, "tidy", 1, 200);
    let intr = Interrupt::new();
    let slot = l.acquire(&intr, &token(), Instant::now()).unwrap().unwrap();
    drop(slot);
    std::thread::sleep(Duration::from_millis(400));
    let slots_key = client.keys("tidy").unwrap().part("slots");
    assert_eq!(cmd(&client, &["EXISTS", &slots_key]), redis::Value::Int(0));
}

#[test]
fn bad_options_are_rejected() {
    let server = RedisServer::start();
    let client = server.client("t");
    let zero = LimiterOptions {
        limit: 0,
        lease: Duration::from_secs(1),
        local_passes: 0,
        fair: true,
    };
    assert!(
        matches!(ConcurrentLimiter::new(&client, "x", zero), Err(Error::Argument(m)) if m.contains("count"))
    );
    let no_lease = LimiterOptions {
        limit: 1,
        lease: Duration::ZERO,
        local_passes: 0,
        fair: true,
    };
    assert!(
        matches!(ConcurrentLimiter::new(&client, "x", no_lease), Err(Error::Argument(m)) if m.contains("lease"))
    );
    let ok = LimiterOptions {
        limit: 1,
        lease: Duration::from_secs(1),
        local_passes: 0,
        fair: true,
    };
    assert!(matches!(
        ConcurrentLimiter::new(&client, "", ok),
        Err(Error::Argument(_))
    ));
}

#[test]
fn an_operators_override_is_read_back_as_written_and_none_once_cleared() {
    use ferrolock_core::concurrent_limiter::{Override, OverrideAction};
    let server = RedisServer::start();
    let client = server.client("t");
    let intr = Interrupt::new();
    let read = |name: &str| ConcurrentLimiter::read_override(&client, &intr, name, false).unwrap();
    assert_eq!(read("x"), None);
    let write = |action| ConcurrentLimiter::write_override(&client, &intr, "x", action).unwrap();
    let set = write(OverrideAction::SetLimit(4));
    assert_eq!(
        set,
        Override {
            limit: Some(4),
            paused: false
        }
    );
    assert_eq!(read("x"), Some(set));
    write(OverrideAction::Pause);
    assert_eq!(
        read("x"),
        Some(Override {
            limit: Some(4),
            paused: true
        })
    );
    // An operator's read leaves its TTL as it was; a reader that obeys the pause keeps it.
    cmd(&client, &["PEXPIRE", "t:{x}:override", "60000"]);
    read("x");
    let ttl = cmd(&client, &["PTTL", "t:{x}:override"]);
    assert!(
        matches!(ttl, redis::Value::Int(ms) if ms <= 60_000),
        "{ttl:?}"
    );
    ConcurrentLimiter::read_override(&client, &intr, "x", true).unwrap();
    let ttl = cmd(&client, &["PTTL", "t:{x}:override"]);
    assert!(
        matches!(ttl, redis::Value::Int(ms) if ms > 60_000),
        "{ttl:?}"
    );
    write(OverrideAction::Clear);
    assert_eq!(read("x"), None);
    // A limits_concurrency key's override, by its stored name.
    assert_eq!(read("concurrency:g/k"), None);
}
