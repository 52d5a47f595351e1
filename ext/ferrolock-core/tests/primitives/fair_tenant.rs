use crate::support::{cmd, RedisServer};
use ferrolock_core::client::int;
use ferrolock_core::fair_tenant::{check, key, Enqueue, Mode, Rule, Rules};
use ferrolock_core::{Client, Error, Interrupt};
use std::sync::Arc;
use std::time::Duration;

fn rules(list: &[(u64, u64)]) -> Rules {
    let list: Vec<Rule> = list
        .iter()
        .map(|(threshold, per_ms)| Rule {
            threshold: *threshold,
            per: Duration::from_millis(*per_ms),
        })
        .collect();
    Rules::new(&list).unwrap()
}

fn enqueue(c: &Client, r: &Rules, mode: Mode, tenant: &str, jid: &str, record: bool) -> usize {
    let e = Enqueue {
        job_class: "HeavyJob",
        tenant,
        jid,
        mode,
        record,
    };
    check(c, &Interrupt::new(), r, &e).unwrap()
}

fn int_of(c: &Client, args: &[&str]) -> i64 {
    int(&cmd(c, args)).unwrap()
}

#[test]
fn exact_mode_returns_the_last_broken_rule_and_counts_a_jid_once() {
    let server = RedisServer::start();
    let c = server.client("t");
    // Loosest first: >3 within a minute → rule 1; >5 within 10 s → rule 2.
    let r = rules(&[(3, 60_000), (5, 10_000)]);
    let got: Vec<usize> = (0..8)
        .map(|i| enqueue(&c, &r, Mode::Exact, "big", &format!("j{i}"), true))
        .collect();
    assert_eq!(got, vec![0, 0, 0, 1, 1, 2, 2, 2]);

    // The same jid again (a retry) is not counted again, and neither is a check-only call.
    assert_eq!(enqueue(&c, &r, Mode::Exact, "big", "j0", true), 2);
    assert_eq!(enqueue(&c, &r, Mode::Exact, "big", "new", false), 2);
    let k = key(&c, Mode::Exact, "HeavyJob", "big").unwrap();
    assert_eq!(int_of(&c, &["ZCARD", &k]), 8);
    // Expires after the longest window of inactivity.
    let ttl = int_of(&c, &["PTTL", &k]);
    assert!(ttl > 59_000 && ttl <= 60_000, "{ttl}");

    // Another tenant, and the same tenant of another class, are counted apart.
    assert_eq!(enqueue(&c, &r, Mode::Exact, "small", "j0", true), 0);
    let other = Enqueue {
        job_class: "OtherJob",
        tenant: "big",
        jid: "x",
        mode: Mode::Exact,
        record: true,
    };
    assert_eq!(check(&c, &Interrupt::new(), &r, &other).unwrap(), 0);
}

#[test]
fn exact_mode_forgets_enqueues_older_than_the_window() {
    let server = RedisServer::start();
    let c = server.client("t");
    let r = rules(&[(2, 300)]);
    for i in 0..3 {
        enqueue(&c, &r, Mode::Exact, "t", &format!("a{i}"), true);
    }
    assert_eq!(enqueue(&c, &r, Mode::Exact, "t", "a3", true), 1);
    std::thread::sleep(Duration::from_millis(450));
    assert_eq!(enqueue(&c, &r, Mode::Exact, "t", "b0", true), 0);
    // Trimmed to what the window can still see.
    assert_eq!(
        int_of(
            &c,
            &["ZCARD", &key(&c, Mode::Exact, "HeavyJob", "t").unwrap()]
        ),
        1
    );
}

#[test]
fn exact_mode_counts_a_short_window_apart_from_the_longest() {
    let server = RedisServer::start();
    let c = server.client("t");
    // The set holds the longest window; a shorter rule must count only its own window, even when
    // the whole set is over its threshold.
    let r = rules(&[(3, 60_000), (2, 300)]);
    let got: Vec<usize> = (0..3)
        .map(|i| enqueue(&c, &r, Mode::Exact, "t", &format!("a{i}"), true))
        .collect();
    assert_eq!(got, vec![0, 0, 2]);
    std::thread::sleep(Duration::from_millis(450));
    // 4 within the minute (> 3), 1 within 300 ms (not > 2): rule 1 only.
    assert_eq!(enqueue(&c, &r, Mode::Exact, "t", "b0", true), 1);
    assert_eq!(enqueue(&c, &r, Mode::Exact, "t", "b1", true), 1);
    assert_eq!(enqueue(&c, &r, Mode::Exact, "t", "b2", true), 2);
}

#[test]
fn exact_mode_counts_concurrent_enqueues_atomically() {
    let server = RedisServer::start();
    let c = server.client("t");
    let r = Arc::new(rules(&[(100, 60_000)]));
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let (c, r) = (c.clone(), r.clone());
            std::thread::spawn(move || {
                (0..50)
                    .filter(|i| enqueue(&c, &r, Mode::Exact, "t", &format!("{t}-{i}"), true) == 0)
                    .count()
            })
        })
        .collect();
    let kept: usize = threads.into_iter().map(|h| h.join().unwrap()).sum();
    // Exactly the first 100 stay; no two enqueues ever saw the same count.
    assert_eq!(kept, 100);
}

#[test]
fn bounded_mode_keeps_a_fixed_size_per_tenant() {
    let server = RedisServer::start();
    let c = server.client("t");
    // Two rules sharing one window plus a second window.
    let r = rules(&[(10, 60_000), (20, 60_000), (15, 10_000)]);
    let mut got = Vec::new();
    for i in 0..30 {
        got.push(enqueue(
            &c,
            &r,
            Mode::Bounded,
            "big",
            &format!("j{i}"),
            true,
        ));
    }
    // Counts are exact within the first bucket (nothing in the previous one): the shared window
    // counted each enqueue once. 11th → rule 1, 16th → rule 3 (last broken), 21st → still rule 3.
    assert_eq!(&got[..10], &[0; 10]);
    assert_eq!(&got[10..15], &[1; 5]);
    assert_eq!(&got[15..], &[3; 15]);
    assert_eq!(enqueue(&c, &r, Mode::Bounded, "big", "x", false), 3);

    let k = key(&c, Mode::Bounded, "HeavyJob", "big").unwrap();
    // 3 fields per distinct window, whatever the number of enqueues.
    assert_eq!(int_of(&c, &["HLEN", &k]), 6);
    assert_eq!(int_of(&c, &["HGET", &k, "c60000"]), 30);
    let before = int_of(&c, &["MEMORY", "USAGE", &k]);
    for i in 0..1000 {
        enqueue(&c, &r, Mode::Bounded, "big", &format!("more{i}"), true);
    }
    // Only the counters' digits may grow (an exact-mode set would have grown by ~50 kB).
    let after = int_of(&c, &["MEMORY", "USAGE", &k]);
    assert!(after <= before + 16, "{before} -> {after} bytes");
    let ttl = int_of(&c, &["PTTL", &k]);
    assert!(ttl > 119_000 && ttl <= 120_000, "{ttl}");
    // A check-only call on a tenant never seen writes nothing.
    assert_eq!(enqueue(&c, &r, Mode::Bounded, "nobody", "x", false), 0);
    assert_eq!(
        int_of(
            &c,
            &[
                "EXISTS",
                &key(&c, Mode::Bounded, "HeavyJob", "nobody").unwrap()
            ]
        ),
        0
    );
}

#[test]
fn bounded_mode_slides_with_redis_time() {
    let server = RedisServer::start();
    let c = server.client("t");
    let r = rules(&[(3, 400)]);
    for i in 0..5 {
        enqueue(&c, &r, Mode::Bounded, "t", &format!("a{i}"), true);
    }
    // Two windows later both buckets are stale: the tenant starts afresh.
    std::thread::sleep(Duration::from_millis(850));
    assert_eq!(enqueue(&c, &r, Mode::Bounded, "t", "b0", true), 0);
}

#[test]
fn redis_down_is_a_connection_error() {
    let mut server = RedisServer::start();
    let c = server.client("t");
    let r = rules(&[(1, 1000)]);
    server.stop();
    let e = Enqueue {
        job_class: "J",
        tenant: "t",
        jid: "j",
        mode: Mode::Exact,
        record: true,
    };
    let err = check(&c, &Interrupt::new(), &r, &e).unwrap_err();
    assert!(matches!(err, Error::Connection { .. }), "{err:?}");
}
