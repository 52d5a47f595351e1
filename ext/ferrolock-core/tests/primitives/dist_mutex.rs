use crate::support::{cmd, RedisServer};
use ferrolock_core::{DistMutex, DistMutexOptions};
use ferrolock_core::{Error, Interrupt};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn opts(expire: Option<u64>, auto_release: bool, lease_ms: u64) -> DistMutexOptions {
    DistMutexOptions {
        fair: true,
        expire: expire.map(Duration::from_millis),
        auto_release,
        lease: Duration::from_millis(lease_ms),
        ..DistMutexOptions::default()
    }
}

fn token() -> String {
    DistMutex::new_token()
}

#[test]
fn threads_exclude_each_other() {
    let server = RedisServer::start();
    let client = server.client("t");
    let inside = Arc::new(AtomicUsize::new(0));
    let max_inside = Arc::new(AtomicUsize::new(0));
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let m = DistMutex::new(&client, "x", DistMutexOptions::default()).unwrap();
            let (inside, max_inside) = (inside.clone(), max_inside.clone());
            std::thread::spawn(move || {
                let intr = Interrupt::new();
                for _ in 0..50 {
                    let held = m.lock(&intr, &token(), None).unwrap();
                    let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                    max_inside.fetch_max(now, Ordering::SeqCst);
                    std::thread::sleep(Duration::from_micros(200));
                    inside.fetch_sub(1, Ordering::SeqCst);
                    m.unlock(&intr, held).unwrap();
                }
            })
        })
        .collect();
    threads.into_iter().for_each(|t| t.join().unwrap());
    assert_eq!(max_inside.load(Ordering::SeqCst), 1);
}

#[test]
fn a_block_longer_than_the_lease_keeps_the_lock() {
    let server = RedisServer::start();
    let client = server.client("t");
    let m = DistMutex::new(&client, "long", opts(None, true, 300)).unwrap();
    let intr = Interrupt::new();
    let held = m.lock(&intr, &token(), None).unwrap();
    let until = Instant::now() + Duration::from_millis(1000);
    while Instant::now() < until {
        assert!(
            m.try_lock(&intr, &token()).unwrap().is_none(),
            "second holder got in"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    m.unlock(&intr, held).unwrap();
}

#[test]
fn an_abandoned_lock_frees_after_its_lease() {
    let server = RedisServer::start();
    let client = server.client("t");
    let m = DistMutex::new(&client, "crash", opts(None, true, 300)).unwrap();
    let intr = Interrupt::new();
    let held = m.lock(&intr, &token(), None).unwrap();
    drop(held); // as if the process died: renewal stops, no release
    let t = Instant::now();
    let again = m
        .lock(
            &intr,
            &token(),
            Some(Instant::now() + Duration::from_secs(3)),
        )
        .unwrap();
    assert!(
        t.elapsed() <= Duration::from_millis(300 + 500),
        "{:?}",
        t.elapsed()
    );
    m.unlock(&intr, again).unwrap();
}

#[test]
fn expiry_only_locks_space_their_holders() {
    let server = RedisServer::start();
    let client = server.client("t");
    let starts = Arc::new(Mutex::new(Vec::new()));
    let threads: Vec<_> = (0..5)
        .map(|_| {
            let m = DistMutex::new(&client, "crawl", opts(Some(200), false, 30_000)).unwrap();
            let starts = starts.clone();
            std::thread::spawn(move || {
                let intr = Interrupt::new();
                for _ in 0..3 {
                    let held = m.lock(&intr, &token(), None).unwrap();
                    starts.lock().unwrap().push(Instant::now());
                    m.unlock(&intr, held).unwrap(); // a no-op: the lock expires by itself
                }
            })
        })
        .collect();
    threads.into_iter().for_each(|t| t.join().unwrap());
    let mut starts = starts.lock().unwrap().clone();
    starts.sort();
    assert_eq!(starts.len(), 15);
    for pair in starts.windows(2) {
        let gap = pair[1] - pair[0];
        assert!(
            gap >= Duration::from_millis(190),
            "starts only {gap:?} apart"
        );
    }
}

#[test]
fn fencing_tokens_grow_and_lost_leases_are_reported() {
    let server = RedisServer::start();
    let client = server.client("t");
    let m = DistMutex::new(&client, "fence", DistMutexOptions::default()).unwrap();
    let intr = Interrupt::new();
    let mut last = 0;
    for _ in 0..5 {
        let held = m.lock(&intr, &token(), None).unwrap();
        assert!(held.fencing_token() > last);
        last = held.fencing_token();
        m.unlock(&intr, held).unwrap();
    }
    let held = m.lock(&intr, &token(), None).unwrap();
    cmd(&client, &["DEL", "t:{fence}:lock"]);
    assert!(matches!(m.unlock(&intr, held), Err(Error::LockLost(_))));
}

/// The uncontended release checks the token and deletes in one command (GETDEL): a lock that
/// another owner took meanwhile is put back, with a lease, and the release reports the loss.
#[test]
fn a_release_after_the_lock_was_taken_over_leaves_the_new_holder_in_place() {
    let server = RedisServer::start();
    let client = server.client("t");
    let m = DistMutex::new(&client, "taken", opts(None, true, 10_000)).unwrap();
    let intr = Interrupt::new();
    let held = m.lock(&intr, &token(), None).unwrap();
    cmd(
        &client,
        &["SET", "t:{taken}:lock", "someone-else", "PX", "60000"],
    );
    assert!(matches!(m.unlock(&intr, held), Err(Error::LockLost(_))));
    let value = cmd(&client, &["GET", "t:{taken}:lock"]);
    assert_eq!(value, redis::Value::BulkString(b"someone-else".to_vec()));
    let pttl = cmd(&client, &["PTTL", "t:{taken}:lock"]);
    assert!(
        matches!(pttl, redis::Value::Int(ms) if ms > 0 && ms <= 10_000),
        "{pttl:?}"
    );
    assert!(m.try_lock(&intr, &token()).unwrap().is_none());
}

#[test]
fn a_retried_attempt_recognises_its_own_lock() {
    let server = RedisServer::start();
    let client = server.client("t");
    let m = DistMutex::new(&client, "retry", DistMutexOptions::default()).unwrap();
    let intr = Interrupt::new();
    let tok = token();
    let first = m.lock(&intr, &tok, None).unwrap();
    let again = m
        .try_lock(&intr, &tok)
        .unwrap()
        .expect("same token is the holder");
    // The retry reports the token the lost first reply carried.
    assert_eq!(again.fencing_token(), first.fencing_token());
    let retried_fence = again.fencing_token();
    drop(first);
    m.unlock(&intr, again).unwrap();
    let next = m.try_lock(&intr, &token()).unwrap().expect("free again");
    assert!(next.fencing_token() > retried_fence);
}

#[test]
fn a_release_wakes_a_waiter_at_once_and_waiting_is_quiet() {
    let server = RedisServer::start();
    let client = server.counted_client("t");
    let m = Arc::new(DistMutex::new(&client, "handoff", opts(None, true, 10_000)).unwrap());
    let intr = Interrupt::new();
    let held = m.lock(&intr, &token(), None).unwrap();
    let calls_before = command_calls(&client);
    let waiter = {
        let m = m.clone();
        std::thread::spawn(move || {
            let intr = Interrupt::new();
            let held = m.lock(&intr, &token(), None).unwrap();
            let woke = Instant::now();
            m.unlock(&intr, held).unwrap();
            woke
        })
    };
    std::thread::sleep(Duration::from_millis(1500));
    let calls_while_waiting = command_calls(&client) - calls_before;
    let released = Instant::now();
    m.unlock(&intr, held).unwrap();
    let woke = waiter.join().unwrap();
    let handoff = woke - released;
    assert!(
        handoff < Duration::from_millis(50),
        "hand-off took {handoff:?}"
    );
    // One attempt and one BLPOP in 1.5 s, not a poll loop.
    assert!(
        calls_while_waiting <= 3,
        "{calls_while_waiting} commands while waiting: {}",
        commandstats(&client)
    );
}

#[test]
fn a_deadline_ends_the_wait_with_timeout() {
    let server = RedisServer::start();
    let client = server.client("t");
    let m = DistMutex::new(&client, "deadline", DistMutexOptions::default()).unwrap();
    let intr = Interrupt::new();
    let held = m.lock(&intr, &token(), None).unwrap();
    let t = Instant::now();
    let err = m
        .lock(
            &intr,
            &token(),
            Some(Instant::now() + Duration::from_millis(200)),
        )
        .err()
        .unwrap();
    assert!(matches!(err, Error::Timeout(_)), "{err:?}");
    assert!(
        t.elapsed() >= Duration::from_millis(200) && t.elapsed() < Duration::from_millis(700),
        "{:?}",
        t.elapsed()
    );
    m.unlock(&intr, held).unwrap();
}

#[test]
fn bad_options_name_the_argument() {
    let server = RedisServer::start();
    let client = server.counted_client("t");
    let err = |o| DistMutex::new(&client, "x", o).err().unwrap().to_string();
    assert!(err(opts(None, false, 1000)).starts_with("auto_release"));
    assert!(err(opts(Some(0), true, 1000)).starts_with("expire"));
    assert!(err(opts(None, true, 0)).starts_with("lease"));
    assert!(DistMutex::new(&client, "", DistMutexOptions::default())
        .err()
        .unwrap()
        .to_string()
        .starts_with("name"));
}

/// Commands clients sent (scripts and blocking pops; commands inside scripts don't count).
fn command_calls(client: &ferrolock_core::Client) -> i64 {
    let stats = commandstats(client);
    ["evalsha", "eval", "blpop"]
        .iter()
        .filter_map(|name| {
            let line = stats
                .lines()
                .find(|l| l.starts_with(&format!("cmdstat_{name}:")))?;
            line.split(['=', ',']).nth(1)?.parse::<i64>().ok()
        })
        .sum()
}

fn commandstats(client: &ferrolock_core::Client) -> String {
    match cmd(client, &["INFO", "commandstats"]) {
        redis::Value::BulkString(b) => String::from_utf8(b).unwrap(),
        other => format!("{other:?}"),
    }
}
