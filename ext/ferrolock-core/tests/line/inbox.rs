//! The grant inbox (src/inbox.rs, subscription.rs): a release tells a waiter of another process its grant by
//! PUBLISHing to that process's inbox, with no key to pop or expire; a grant lost while the
//! inbox was not listening costs an attempt, not a lock TTL; a server that refuses channels,
//! and a waiter of an older version, get grant lists.

use crate::support::{cmd, contend, contend_once, until, RedisServer};
use ferrolock_core::client::int;
use ferrolock_core::concurrent_limiter::{ConcurrentLimiter, LimiterOptions};
use ferrolock_core::{Client, ClientOptions, Interrupt};
use ferrolock_core::{DistMutex, DistMutexOptions};
use redis::Value;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn options() -> DistMutexOptions {
    DistMutexOptions {
        fair: true,
        lease: Duration::from_secs(30),
        ..DistMutexOptions::default()
    }
}

fn line(client: &Client, key: &str) -> Vec<String> {
    match cmd(client, &["LRANGE", key, "0", "-1"]) {
        Value::Array(items) => items
            .into_iter()
            .map(|v| match v {
                Value::BulkString(b) => String::from_utf8(b).unwrap(),
                other => panic!("entry: {other:?}"),
            })
            .collect(),
        other => panic!("LRANGE: {other:?}"),
    }
}

fn keys(client: &Client, pattern: &str) -> usize {
    match cmd(client, &["KEYS", pattern]) {
        Value::Array(items) => items.len(),
        other => panic!("KEYS: {other:?}"),
    }
}

/// A thread of another process (client) that takes the lock, then reports how long it waited.
fn waiter(server_client: Client, name: &'static str) -> std::thread::JoinHandle<Duration> {
    std::thread::spawn(move || {
        let m = DistMutex::new(&server_client, name, options()).unwrap();
        let intr = Interrupt::new();
        let started = Instant::now();
        let held = m.lock(&intr, &DistMutex::new_token(), None).unwrap();
        let waited = started.elapsed();
        m.unlock(&intr, held).unwrap();
        waited
    })
}

#[test]
fn a_waiter_of_another_process_is_granted_through_its_inbox_without_a_grant_key() {
    let server = RedisServer::start();
    let a = server.client("t");
    let m = DistMutex::new(&a, "pub", options()).unwrap();
    let intr = Interrupt::new();
    // The waiter's process was contended before: its inbox listens (its first contended wait
    // pops a grant list, as the next test shows).
    let b = server.client("t");
    contend_once(&a, &b, "t");
    let held = m.lock(&intr, &DistMutex::new_token(), None).unwrap();
    let b = waiter(b, "pub");
    until("the waiter queued", || {
        line(&a, "t:{pub}:waiters").len() == 1
    });
    let entry = line(&a, "t:{pub}:waiters").remove(0);
    let inbox = entry.rsplit_once("|@").expect("the entry names an inbox").1;
    assert_eq!(inbox.len(), 32, "{entry}");
    let subscribed = match cmd(&a, &["PUBSUB", "CHANNELS", "t:inbox:[0-9a-f]*"]) {
        Value::Array(channels) => channels.len(),
        other => panic!("PUBSUB: {other:?}"),
    };
    assert_eq!(subscribed, 1, "the waiter's process listens on its inbox");
    m.unlock(&intr, held).unwrap();
    let waited = b.join().unwrap();
    assert!(waited < Duration::from_secs(10), "waited {waited:?}");
    assert_eq!(keys(&a, "t:*grant*"), 0);
    let left = cmd(&a, &["KEYS", "t:{pub}:*"]);
    assert_eq!(
        left,
        Value::Array(vec![Value::BulkString(b"t:{pub}:fence".to_vec())]),
        "only the fencing counter stays (it expires)"
    );
}

#[test]
fn a_limiter_slot_is_granted_through_the_inbox_too() {
    let server = RedisServer::start();
    let a = server.client("t");
    let b = server.client("t");
    let far = || Instant::now() + Duration::from_secs(60);
    let opts = || LimiterOptions {
        limit: 1,
        lease: Duration::from_secs(30),
        local_passes: 0,
        fair: true,
    };
    let la = ConcurrentLimiter::new(&a, "slots", opts()).unwrap();
    let lb = Arc::new(ConcurrentLimiter::new(&b, "slots", opts()).unwrap());
    let intr = Interrupt::new();
    contend_once(&a, &b, "t");
    let held = la
        .acquire(&intr, &ConcurrentLimiter::new_token(), far())
        .unwrap()
        .unwrap();
    let waiting = {
        let lb = lb.clone();
        std::thread::spawn(move || {
            let intr = Interrupt::new();
            let started = Instant::now();
            let slot = lb
                .acquire(&intr, &ConcurrentLimiter::new_token(), far())
                .unwrap()
                .unwrap();
            let waited = started.elapsed();
            lb.release(&intr, slot).unwrap();
            waited
        })
    };
    let line_key = a.keys("slots").unwrap().part("line");
    until("the waiter queued", || line(&a, &line_key).len() == 1);
    assert!(line(&a, &line_key)[0].contains("|@"));
    // `status` reads the entry's deadline before its inbox.
    assert_eq!(la.status(&intr).unwrap().waiting, 1);
    la.release(&intr, held).unwrap();
    let waited = waiting.join().unwrap();
    assert!(waited < Duration::from_secs(10), "waited {waited:?}");
    assert_eq!(keys(&a, "t:*grant*"), 0);
}

#[test]
fn a_grant_published_while_the_inbox_was_not_listening_is_found_once_it_listens_again() {
    let server = RedisServer::start();
    let mut admin = redis::Client::open(server.url())
        .unwrap()
        .get_connection()
        .unwrap();
    let a = server.client("t");
    // The waiter's process connects as a user of its own, so its connections can be cut alone.
    cmd(
        &a,
        &["ACL", "SETUSER", "bob", "on", ">pw", "~*", "&*", "+@all"],
    );
    let mut opts = ClientOptions::new(&format!("redis://bob:pw@127.0.0.1:{}/0", server.port));
    opts.namespace = "t".into();
    let b = Client::new(opts).unwrap();
    contend_once(&a, &b, "t");
    let m = DistMutex::new(&a, "lost", options()).unwrap();
    let intr = Interrupt::new();
    let held = m.lock(&intr, &DistMutex::new_token(), None).unwrap();
    let b = waiter(b, "lost");
    until("the waiter queued", || {
        line(&a, "t:{lost}:waiters").len() == 1
    });
    // No new connection from now on, and none of the waiter's process left: its inbox cannot
    // subscribe again.
    let config = |admin: &mut redis::Connection, max: i64| {
        let _: () = redis::cmd("CONFIG")
            .arg("SET")
            .arg("maxclients")
            .arg(max)
            .query(admin)
            .unwrap();
    };
    config(&mut admin, 1);
    let _: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("USER")
        .arg("bob")
        .query(&mut admin)
        .unwrap();
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(
        crate::support::inboxes(&a, "t"),
        0,
        "the inbox subscribed again"
    );
    // The release hands over and publishes to nobody (its connection is pooled already).
    m.unlock(&intr, held).unwrap();
    let holder = cmd(&a, &["GET", "t:{lost}:lock"]);
    assert!(
        matches!(holder, Value::BulkString(_)),
        "handed over: {holder:?}"
    );
    std::thread::sleep(Duration::from_millis(300));
    config(&mut admin, 10_000);
    let allowed = Instant::now();
    let waited = b.join().unwrap();
    // Its next attempt came once the inbox listened again, not after the holder's 30 s.
    assert!(
        allowed.elapsed() < Duration::from_secs(10),
        "entered {:?} after the inbox could listen again (waited {waited:?})",
        allowed.elapsed()
    );
}

#[test]
fn a_server_without_channel_rights_gets_grant_lists() {
    let server = RedisServer::start();
    let url = server.acl_user("nochannels", &["resetchannels", "+@all"]);
    let client = || {
        let mut opts = ClientOptions::new(&url);
        opts.namespace = "t".into();
        Client::new(opts).unwrap()
    };
    let a = client();
    let b = client();
    // The first contended wait starts the inbox, which the server refuses.
    contend(&a, &b);
    std::thread::sleep(Duration::from_millis(300));
    let m = DistMutex::new(&a, "acl", options()).unwrap();
    let intr = Interrupt::new();
    let held = m.lock(&intr, &DistMutex::new_token(), None).unwrap();
    let b = waiter(b, "acl");
    until("the waiter queued", || {
        line(&a, "t:{acl}:waiters").len() == 1
    });
    let entry = line(&a, "t:{acl}:waiters").remove(0);
    assert!(
        !entry.contains("|@"),
        "no inbox without channel rights: {entry}"
    );
    m.unlock(&intr, held).unwrap();
    let waited = b.join().unwrap();
    assert!(waited < Duration::from_secs(10), "waited {waited:?}");
}

#[test]
fn a_waiter_without_an_inbox_an_older_versions_is_granted_through_its_list() {
    let server = RedisServer::start();
    let a = server.client("t");
    let m = DistMutex::new(&a, "old", options()).unwrap();
    let intr = Interrupt::new();
    let held = m.lock(&intr, &DistMutex::new_token(), None).unwrap();
    // An older version's waiter: "token|deadline" (Redis time), then BLPOP on its grant list.
    let now_ms = match cmd(&a, &["TIME"]) {
        Value::Array(t) => {
            let secs: i64 = redis::from_redis_value(t[0].clone()).unwrap();
            secs * 1000
        }
        other => panic!("TIME: {other:?}"),
    };
    let entry = format!("oldtoken|{}", now_ms + 60_000);
    cmd(&a, &["RPUSH", "t:{old}:waiters", &entry]);
    m.unlock(&intr, held).unwrap();
    assert_eq!(
        cmd(&a, &["GET", "t:{old}:lock"]),
        Value::BulkString(b"oldtoken".to_vec())
    );
    let fence = cmd(&a, &["LPOP", "t:{old}:grant:oldtoken"]);
    let Value::BulkString(fence) = fence else {
        panic!("no grant in the list: {fence:?}");
    };
    let fence: i64 = String::from_utf8(fence).unwrap().parse().unwrap();
    assert!(fence > 0);
    assert!(int(&cmd(&a, &["PTTL", "t:{old}:lock"])).unwrap() > 0);
}

#[test]
fn a_first_contended_wait_pops_a_grant_list_and_starts_the_inbox() {
    let server = RedisServer::start();
    let a = server.client("t");
    let m = DistMutex::new(&a, "first", options()).unwrap();
    let intr = Interrupt::new();
    let held = m.lock(&intr, &DistMutex::new_token(), None).unwrap();
    assert_eq!(
        crate::support::inboxes(&a, "t"),
        0,
        "an uncontended process never subscribes"
    );
    let b = waiter(server.client("t"), "first");
    until("the waiter queued", || {
        line(&a, "t:{first}:waiters").len() == 1
    });
    let entry = line(&a, "t:{first}:waiters").remove(0);
    assert!(!entry.contains("|@"), "{entry}");
    until("the waiter's inbox listens", || {
        crate::support::inboxes(&a, "t") == 1
    });
    m.unlock(&intr, held).unwrap();
    let waited = b.join().unwrap();
    assert!(waited < Duration::from_secs(10), "waited {waited:?}");
}

#[test]
fn a_process_whose_waiters_are_all_queued_by_its_own_releases_starts_its_inbox() {
    let server = RedisServer::start();
    let a = server.client("t");
    let m = Arc::new(DistMutex::new(&a, "queued", options()).unwrap());
    // T1's uncontended attempt is held up in Redis while T2 joins the process's line, so T2
    // waits behind T1 in the process and never runs a failed attempt of its own: T1's release
    // queues it.
    server.pause();
    let t1 = {
        let m = m.clone();
        std::thread::spawn(move || {
            let intr = Interrupt::new();
            let held = m.lock(&intr, &DistMutex::new_token(), None).unwrap();
            std::thread::sleep(Duration::from_millis(50));
            m.unlock(&intr, held).unwrap();
        })
    };
    std::thread::sleep(Duration::from_millis(50));
    let t2 = {
        let m = m.clone();
        std::thread::spawn(move || {
            let intr = Interrupt::new();
            let held = m.lock(&intr, &DistMutex::new_token(), None).unwrap();
            m.unlock(&intr, held).unwrap();
        })
    };
    until("T2 waits in the process", || m.local_waiters() == 1);
    server.resume();
    t1.join().unwrap();
    t2.join().unwrap();
    // That release started the inbox: the process is contended, its next waiters use it.
    until("the inbox listens", || {
        crate::support::inboxes(&a, "t") == 1
    });
}
