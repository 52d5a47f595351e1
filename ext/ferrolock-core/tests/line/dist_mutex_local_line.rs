//! One waiter per process per name (src/line/local/), what DistMutex adds to local_line.rs (run
//! against both primitives): the waiter in Redis interrupted passes its turn on, fencing tokens
//! grow through it all, and a release that lost the lock hands nothing over. A client stands for
//! a process here.

use crate::support::{cmd, until, RedisServer};
use ferrolock_core::client::int;
use ferrolock_core::{Client, Error, Interrupt};
use ferrolock_core::{DistMutex, DistMutexOptions};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn lease(ms: u64) -> DistMutexOptions {
    DistMutexOptions {
        fair: true,
        lease: Duration::from_millis(ms),
        ..DistMutexOptions::default()
    }
}

/// `lease` with every hand-off through Redis (no cohort passes, cohort.rs).
fn through_redis(ms: u64) -> DistMutexOptions {
    DistMutexOptions {
        fair: true,
        local_passes: 0,
        ..lease(ms)
    }
}

fn queued(client: &Client, name: &str) -> i64 {
    int(&cmd(client, &["LLEN", &format!("t:{{{name}}}:waiters")])).unwrap()
}

/// A thread that waits for the lock (no timeout), records its entry and leaves at once.
fn waiter(
    m: &Arc<DistMutex>,
    id: usize,
    entered: &Arc<Mutex<Vec<(usize, i64)>>>,
) -> std::thread::JoinHandle<()> {
    let (m, entered) = (m.clone(), entered.clone());
    std::thread::spawn(move || {
        let intr = Interrupt::new();
        let held = m.lock(&intr, &DistMutex::new_token(), None).unwrap();
        entered.lock().unwrap().push((id, held.fencing_token()));
        m.unlock(&intr, held).unwrap();
    })
}

#[test]
fn the_waiter_in_redis_interrupted_passes_its_turn_to_the_local_waiters() {
    let server = RedisServer::start();
    let client = server.client("t");
    // A 30 s lease: only a passed-on turn explains entering within seconds.
    let m = Arc::new(DistMutex::new(&client, "head", lease(30_000)).unwrap());
    let intr = Interrupt::new();
    // Held by another process (a holder of this one would queue the local waiter at release).
    let holder = DistMutex::new(&server.client("t"), "head", lease(30_000)).unwrap();
    let held = holder.lock(&intr, &DistMutex::new_token(), None).unwrap();
    let cut = Arc::new(Interrupt::new());
    let head_token = DistMutex::new_token();
    let head = {
        let (m, cut, tok) = (m.clone(), cut.clone(), head_token.clone());
        std::thread::spawn(move || matches!(m.lock(&cut, &tok, None), Err(Error::Interrupted)))
    };
    until("the head queued in Redis", || queued(&client, "head") == 1);
    let entered = Arc::new(Mutex::new(Vec::new()));
    let next = waiter(&m, 1, &entered);
    until("the next waiter waits locally", || m.local_waiters() == 1);
    cut.cancel();
    assert!(head.join().unwrap());
    // As the Ruby layer does for a call it gives up: leave the Redis line.
    m.abandon(&head_token);
    // The local waiter queues in Redis by itself.
    until("the next waiter queued in Redis", || {
        m.local_waiters() == 0 && queued(&client, "head") == 1
    });
    let released = Instant::now();
    holder.unlock(&intr, held).unwrap();
    next.join().unwrap();
    assert!(released.elapsed() < Duration::from_secs(10));
    assert_eq!(entered.lock().unwrap().len(), 1);
    assert!(!m.is_locked(&intr).unwrap());
}

#[test]
fn no_thread_starves_and_one_holds_at_a_time_with_growing_fencing_tokens() {
    let server = RedisServer::start();
    let rounds = 40;
    let inside = Arc::new(AtomicUsize::new(0));
    let max_inside = Arc::new(AtomicUsize::new(0));
    let fences = Arc::new(Mutex::new(Vec::new()));
    let line_len = Arc::new(AtomicUsize::new(0));
    let observer_client = server.client("t");
    let mut threads = Vec::new();
    for p in 0..2 {
        let client = server.client("t");
        for t in 0..4 {
            let m = DistMutex::new(&client, "fair", lease(30_000)).unwrap();
            let (inside, max_inside, fences) = (inside.clone(), max_inside.clone(), fences.clone());
            let (observer, line_len) = (observer_client.clone(), line_len.clone());
            threads.push(std::thread::spawn(move || {
                let intr = Interrupt::new();
                for _ in 0..rounds {
                    let held = m.lock(&intr, &DistMutex::new_token(), None).unwrap();
                    let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                    max_inside.fetch_max(now, Ordering::SeqCst);
                    fences.lock().unwrap().push((p, t, held.fencing_token()));
                    // Two processes: never more than two entries in the Redis line.
                    let len = queued(&observer, "fair") as usize;
                    line_len.fetch_max(len, Ordering::SeqCst);
                    inside.fetch_sub(1, Ordering::SeqCst);
                    m.unlock(&intr, held).unwrap();
                }
            }));
        }
    }
    threads.into_iter().for_each(|t| t.join().unwrap());
    assert_eq!(max_inside.load(Ordering::SeqCst), 1);
    assert!(line_len.load(Ordering::SeqCst) <= 2, "{line_len:?}");
    let fences = fences.lock().unwrap();
    assert_eq!(fences.len(), 2 * 4 * rounds);
    for pair in fences.windows(2) {
        assert!(
            pair[1].2 > pair[0].2,
            "fencing tokens {:?} then {:?}",
            pair[0],
            pair[1]
        );
    }
    for p in 0..2 {
        for t in 0..4 {
            let mine = fences.iter().filter(|f| f.0 == p && f.1 == t).count();
            assert_eq!(mine, rounds, "thread {p}.{t}");
        }
    }
}

#[test]
fn a_release_that_lost_the_lock_hands_nothing_over_and_puts_the_line_back() {
    let server = RedisServer::start();
    let (a, b) = (server.client("t"), server.client("t"));
    // Through Redis: a cohort would pass the lock to A2 without looking (its next token check
    // is its own release or renewal; see cohort.rs).
    let ma = Arc::new(DistMutex::new(&a, "lost", through_redis(30_000)).unwrap());
    let mb = Arc::new(DistMutex::new(&b, "lost", through_redis(30_000)).unwrap());
    let intr = Interrupt::new();
    let held = ma.lock(&intr, &DistMutex::new_token(), None).unwrap();
    // A1 queues in Redis, then B1; A2 waits locally behind A1. A2 and B1 give up after 1.5 s.
    let (entered_tx, entered_rx) = std::sync::mpsc::channel();
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    let a1 = {
        let m = ma.clone();
        std::thread::spawn(move || {
            let intr = Interrupt::new();
            let held = m.lock(&intr, &DistMutex::new_token(), None).unwrap();
            entered_tx.send(()).unwrap();
            go_rx.recv().unwrap();
            m.unlock(&intr, held)
        })
    };
    until("A1 queued", || queued(&a, "lost") == 1);
    let impatient = |m: &Arc<DistMutex>| {
        let m = m.clone();
        std::thread::spawn(move || {
            let deadline = Instant::now() + Duration::from_millis(1500);
            matches!(
                m.lock(&Interrupt::new(), &DistMutex::new_token(), Some(deadline)),
                Err(Error::Timeout(_))
            )
        })
    };
    let b1 = impatient(&mb);
    until("B1 queued", || queued(&a, "lost") == 2);
    let a2 = impatient(&ma);
    until("A2 waits locally", || ma.local_waiters() == 1);
    ma.unlock(&intr, held).unwrap();
    entered_rx.recv_timeout(Duration::from_secs(20)).unwrap();
    let line_before = cmd(&a, &["LRANGE", "t:{lost}:waiters", "0", "-1"]);
    // A1's lease is lost: another owner took the lock.
    cmd(&a, &["SET", "t:{lost}:lock", "intruder", "PX", "30000"]);
    go_tx.send(()).unwrap();
    assert!(matches!(a1.join().unwrap(), Err(Error::LockLost(_))));
    // The release handed nothing over and queued nobody: the line is as it was (B1 only).
    assert_eq!(
        cmd(&a, &["GET", "t:{lost}:lock"]),
        cmd(&a, &["ECHO", "intruder"])
    );
    assert!(int(&cmd(&a, &["PTTL", "t:{lost}:lock"])).unwrap() > 0);
    let line_after = cmd(&a, &["LRANGE", "t:{lost}:waiters", "0", "-1"]);
    let redis::Value::Array(entries) = &line_after else {
        panic!("LRANGE: {line_after:?}")
    };
    assert!(!entries.is_empty(), "B1's entry is back");
    assert_eq!(entries[0], {
        let redis::Value::Array(before) = &line_before else {
            panic!("LRANGE: {line_before:?}")
        };
        before[0].clone()
    });
    // Nobody was granted the intruder's lock: both time out, and leave the line.
    assert!(b1.join().unwrap(), "B1 timed out");
    assert!(a2.join().unwrap(), "A2 timed out");
    assert_eq!(queued(&a, "lost"), 0);
    assert_eq!(
        cmd(&a, &["KEYS", "t:{lost}:grant:*"]),
        redis::Value::Array(vec![])
    );
    assert_eq!(
        cmd(&a, &["GET", "t:{lost}:lock"]),
        cmd(&a, &["ECHO", "intruder"])
    );
}
