//! Fencing tokens stay strictly increasing per name, also after an idle name's keys expired
//! (the counter has a TTL so Redis is left clean; Redis time takes over once it is gone).

use crate::support::{cmd, RedisServer};
use ferrolock_core::Interrupt;
use ferrolock_core::{DistMutex, DistMutexOptions};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn short(expire: Option<u64>, auto_release: bool) -> DistMutexOptions {
    DistMutexOptions {
        fair: true,
        expire: expire.map(Duration::from_millis),
        auto_release,
        lease: Duration::from_millis(100),
        ..DistMutexOptions::default()
    }
}

fn dbsize(client: &ferrolock_core::Client) -> i64 {
    ferrolock_core::client::int(&cmd(client, &["DBSIZE"])).unwrap()
}

/// Polls until Redis holds no key; generous, as a loaded VM may expire keys late.
fn wait_until_empty(client: &ferrolock_core::Client, within: Duration) {
    let deadline = Instant::now() + within;
    while dbsize(client) != 0 {
        assert!(
            Instant::now() < deadline,
            "keys left: {:?}",
            cmd(client, &["KEYS", "*"])
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn tokens_grow_across_an_idle_period_in_which_every_key_expired() {
    let server = RedisServer::start();
    let client = server.client("t");
    let intr = Interrupt::new();
    for (name, opts) in [
        ("lease", short(None, true)),
        ("spacer", short(Some(100), false)),
    ] {
        let m = DistMutex::new(&client, name, opts).unwrap();
        assert_eq!(m.fence_ttl(), Duration::from_millis(1000));
        let mut last = 0;
        for _ in 0..3 {
            let held = m.lock(&intr, &DistMutex::new_token(), None).unwrap();
            assert!(held.fencing_token() > last, "{name}: token went back");
            last = held.fencing_token();
            m.unlock(&intr, held).unwrap();
            // Everything this name wrote expires (or was deleted): nothing stays behind.
            wait_until_empty(&client, Duration::from_secs(20));
        }
    }
}

#[test]
fn every_key_has_a_ttl_while_idle() {
    let server = RedisServer::start();
    let client = server.client("t");
    let intr = Interrupt::new();
    let m = DistMutex::new(&client, "idle", short(None, true)).unwrap();
    let held = m.lock(&intr, &DistMutex::new_token(), None).unwrap();
    assert!(m
        .try_lock(&intr, &DistMutex::new_token())
        .unwrap()
        .is_none());
    let deadline = Some(Instant::now() + Duration::from_millis(1));
    assert!(m.lock(&intr, &DistMutex::new_token(), deadline).is_err());
    // A waiter cut short (as if killed) stays in line; the release then hands it the lock and
    // leaves a grant nobody pops.
    let m = Arc::new(m);
    let cut = Arc::new(Interrupt::new());
    let waiter = {
        let (m, cut) = (m.clone(), cut.clone());
        std::thread::spawn(move || m.lock(&cut, &DistMutex::new_token(), None).is_err())
    };
    while ferrolock_core::client::int(&cmd(&client, &["LLEN", "t:{idle}:waiters"])).unwrap() == 0 {
        std::thread::sleep(Duration::from_millis(1));
    }
    cut.cancel();
    assert!(waiter.join().unwrap());
    m.unlock(&intr, held).unwrap();
    let keys = cmd(&client, &["KEYS", "*"]);
    let redis::Value::Array(keys) = keys else {
        panic!("KEYS: {keys:?}")
    };
    assert!(keys.len() >= 2, "fence and grant expected: {keys:?}");
    for key in keys {
        let redis::Value::BulkString(key) = key else {
            panic!("key: {key:?}")
        };
        let key = String::from_utf8(key).unwrap();
        let ttl = ferrolock_core::client::int(&cmd(&client, &["PTTL", &key])).unwrap();
        assert!(ttl > 0, "{key} has no TTL ({ttl})");
    }
}

#[test]
fn a_retry_after_the_counter_expired_gets_a_fresh_larger_token() {
    let server = RedisServer::start();
    let client = server.client("t");
    let intr = Interrupt::new();
    let m = DistMutex::new(&client, "retry", DistMutexOptions::default()).unwrap();
    let tok = DistMutex::new_token();
    let first = m.lock(&intr, &tok, None).unwrap();
    cmd(&client, &["DEL", "t:{retry}:fence"]);
    let again = m
        .try_lock(&intr, &tok)
        .unwrap()
        .expect("same token holds it");
    assert!(again.fencing_token() > first.fencing_token());
    drop(first);
    m.unlock(&intr, again).unwrap();
}

#[test]
fn a_counter_left_by_an_older_version_is_overtaken() {
    // Before the counter expired, it was a plain INCR from 1: tokens continue above it.
    let server = RedisServer::start();
    let client = server.client("t");
    let intr = Interrupt::new();
    cmd(&client, &["SET", "t:{old}:fence", "41"]);
    let m = DistMutex::new(&client, "old", DistMutexOptions::default()).unwrap();
    let held = m.lock(&intr, &DistMutex::new_token(), None).unwrap();
    assert!(held.fencing_token() > 41);
    let ttl = ferrolock_core::client::int(&cmd(&client, &["PTTL", "t:{old}:fence"])).unwrap();
    assert!(ttl > 0, "the counter got a TTL");
    m.unlock(&intr, held).unwrap();
}

#[test]
fn tokens_strictly_increase_in_the_order_holders_entered() {
    let server = RedisServer::start();
    let client = server.client("t");
    let order = Arc::new(Mutex::new(Vec::new()));
    let threads: Vec<_> = (0..6)
        .map(|_| {
            let m = DistMutex::new(&client, "busy", DistMutexOptions::default()).unwrap();
            let order = order.clone();
            std::thread::spawn(move || {
                let intr = Interrupt::new();
                for _ in 0..200 {
                    let held = m.lock(&intr, &DistMutex::new_token(), None).unwrap();
                    // Inside the section, so pushes happen in acquisition order.
                    order.lock().unwrap().push(held.fencing_token());
                    m.unlock(&intr, held).unwrap();
                }
            })
        })
        .collect();
    threads.into_iter().for_each(|t| t.join().unwrap());
    let order = order.lock().unwrap();
    assert_eq!(order.len(), 1200);
    for pair in order.windows(2) {
        assert!(pair[1] > pair[0], "token went back: {pair:?}");
    }
}

/// `fencing: false` beside fenced holders of one name, in two processes (clients), fair and
/// unfair: one holder at a time, unfenced holds get no token (a hand-off issues one, which they
/// ignore), and the fenced holds' tokens still strictly increase in the order they entered. The
/// Admin read shows no token for an unfenced holder (its token is marked, token.rs).
#[test]
fn unfenced_holders_beside_fenced_ones_keep_exclusion_and_growing_tokens() {
    let server = RedisServer::start();
    let clients = [server.client("t"), server.client("t")];
    let order = Arc::new(Mutex::new(Vec::new()));
    let inside = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let threads: Vec<_> = (0..8)
        .map(|i| {
            let opts = DistMutexOptions {
                fencing: i % 2 == 0,
                fair: i % 4 < 2,
                ..DistMutexOptions::default()
            };
            let m = DistMutex::new(&clients[i / 4], "mixed", opts).unwrap();
            let (order, inside) = (order.clone(), inside.clone());
            std::thread::spawn(move || {
                let intr = Interrupt::new();
                for _ in 0..100 {
                    let held = m.lock(&intr, &m.token(), None).unwrap();
                    assert_eq!(inside.fetch_add(1, std::sync::atomic::Ordering::SeqCst), 0);
                    order
                        .lock()
                        .unwrap()
                        .push((i % 2 == 0, held.fencing_token()));
                    std::thread::yield_now();
                    inside.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
                    m.unlock(&intr, held).unwrap();
                }
            })
        })
        .collect();
    threads.into_iter().for_each(|t| t.join().unwrap());
    let order = order.lock().unwrap();
    assert_eq!(order.len(), 800);
    assert!(
        order.iter().all(|&(fenced, token)| fenced == (token > 0)),
        "{order:?}"
    );
    let fenced: Vec<i64> = order.iter().filter(|h| h.0).map(|h| h.1).collect();
    for pair in fenced.windows(2) {
        assert!(pair[1] > pair[0], "token went back: {pair:?}");
    }

    let intr = Interrupt::new();
    let unfenced_opts = DistMutexOptions {
        fencing: false,
        ..DistMutexOptions::default()
    };
    let m = DistMutex::new(&clients[0], "mixed", unfenced_opts).unwrap();
    let held = m.lock(&intr, &m.token(), None).unwrap();
    let state = ferrolock_core::admin::state::state(&clients[0], &intr, "dist_mutex", "mixed")
        .unwrap()
        .unwrap();
    let field = |name: &str| {
        state
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, f)| f.clone())
    };
    // The counter holds the last fenced holder's token, which is not this holder's.
    assert!(cmd(&clients[0], &["GET", "t:{mixed}:fence"]) != redis::Value::Nil);
    assert!(matches!(
        field("token"),
        Some(ferrolock_core::inspect::Field::Text(_))
    ));
    assert!(
        matches!(
            field("fencing_token"),
            Some(ferrolock_core::inspect::Field::Nil)
        ),
        "{state:?}"
    );
    m.unlock(&intr, held).unwrap();
}

/// Polls `INFO replication` until `replica` reports its link to the primary up.
fn wait_for_link(replica: &ferrolock_core::Client) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let info = match cmd(replica, &["INFO", "replication"]) {
            redis::Value::BulkString(b) => String::from_utf8_lossy(&b).into_owned(),
            other => format!("{other:?}"),
        };
        if info.contains("master_link_status:up") {
            return;
        }
        assert!(Instant::now() < deadline, "replica never synced: {info}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A failover that loses writes: grants (and fencing counter bumps) the old primary made that
/// never reached the replica, then the old primary dies (kill -9) and the replica serves. The
/// next holder there must still get a larger token than every token the lost writes handed
/// out, or a resource fenced by tokens would accept the stale holder's writes.
///
/// The replica is cut off by promoting it before the lost writes (REPLICAOF NO ONE): a SIGSTOPped
/// replica is not enough, as it reads the writes already sitting in its socket buffer when it
/// resumes. Either way the writes exist only on the old primary, as in a real failover.
#[test]
fn tokens_keep_growing_across_a_failover_that_lost_the_last_grants() {
    let mut primary = RedisServer::start();
    let replica = RedisServer::start();
    let intr = Interrupt::new();
    let on_primary = primary.client("t");
    let on_replica = replica.client("t");
    let port = primary.port.to_string();
    cmd(&on_replica, &["REPLICAOF", "127.0.0.1", &port]);
    wait_for_link(&on_replica);

    let opts = DistMutexOptions {
        fair: true,
        lease: Duration::from_secs(30),
        ..DistMutexOptions::default()
    };
    let m = DistMutex::new(&on_primary, "failover", opts.clone()).unwrap();
    // Replicated history: the replica knows these grants and the counter they left.
    let mut replicated = 0;
    for _ in 0..3 {
        let held = m.lock(&intr, &DistMutex::new_token(), None).unwrap();
        replicated = held.fencing_token();
        m.unlock(&intr, held).unwrap();
    }
    let acked = cmd(&on_primary, &["WAIT", "1", "5000"]);
    assert_eq!(
        acked,
        redis::Value::Int(1),
        "the replica must have the history"
    );

    // The failover begins: the replica stops following (as Sentinel promotes it) while
    // clients still talk to the old primary.
    cmd(&on_replica, &["REPLICAOF", "NO", "ONE"]);
    // Lost history: these writes exist only on the old primary. Many acquisitions in a row
    // push the counter as far past Redis time as it ever gets.
    let mut lost = Vec::new();
    for _ in 0..200 {
        let held = m.lock(&intr, &DistMutex::new_token(), None).unwrap();
        lost.push(held.fencing_token());
        m.unlock(&intr, held).unwrap();
    }
    // The last holder is still inside when the primary dies: its grant is lost too.
    let stale = m.lock(&intr, &DistMutex::new_token(), None).unwrap();
    lost.push(stale.fencing_token());
    assert!(lost.windows(2).all(|w| w[0] < w[1]));
    assert!(lost[0] > replicated);
    primary.stop(); // kill -9: nothing more leaves it
    drop(stale); // (its renewals now fail; nothing to release)

    let max_lost = *lost.last().unwrap();
    // The counter the new primary holds is the replicated one: a plain counter (INCR) would now
    // hand out tokens the lost grants already used.
    let counter = match cmd(&on_replica, &["GET", "t:{failover}:fence"]) {
        redis::Value::BulkString(b) => String::from_utf8_lossy(&b).parse::<i64>().unwrap(),
        other => panic!("the replicated counter is missing: {other:?}"),
    };
    assert!(counter < lost[0], "the lost writes reached the replica");
    let promoted = DistMutex::new(&on_replica, "failover", opts).unwrap();
    // The stale holder's grant was lost with the primary: the lock is free on the new one.
    let next = promoted
        .try_lock(&intr, &DistMutex::new_token())
        .unwrap()
        .expect("the lost grant is not on the promoted replica");
    assert!(
        next.fencing_token() > max_lost,
        "token {} after the failover does not exceed the lost token {max_lost}",
        next.fencing_token()
    );
    promoted.unlock(&intr, next).unwrap();
}
