//! One waiter per process per name (src/local_line.rs): threads of one client waiting for the
//! same DistMutex name keep one entry in the Redis line; the others wait in the process, in the
//! order they came, and a release queues the next of them. A client stands for a process here.
mod support;

use ferrolock_core::client::int;
use ferrolock_core::dist_mutex::{DistMutex, DistMutexOptions};
use ferrolock_core::{Client, Error, Interrupt};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::{cmd, until, RedisServer};

fn lease(ms: u64) -> DistMutexOptions {
    DistMutexOptions {
        lease: Duration::from_millis(ms),
        ..DistMutexOptions::default()
    }
}

/// `lease` with every hand-off through Redis (no cohort passes, tests/cohort.rs).
fn through_redis(ms: u64) -> DistMutexOptions {
    DistMutexOptions {
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
fn threads_of_one_process_keep_one_entry_in_redis_and_enter_in_the_order_they_came() {
    let server = RedisServer::start();
    let client = server.client("t");
    let m = Arc::new(DistMutex::new(&client, "fifo", lease(30_000)).unwrap());
    let intr = Interrupt::new();
    let held = m.lock(&intr, &DistMutex::new_token(), None).unwrap();
    let first_fence = held.fencing_token();
    let entered = Arc::new(Mutex::new(Vec::new()));
    let mut threads = vec![waiter(&m, 0, &entered)];
    until("the first waiter queued in Redis", || {
        queued(&client, "fifo") == 1
    });
    for i in 1..6 {
        threads.push(waiter(&m, i, &entered));
        until("the waiter waits locally", || m.local_waiters() == i);
    }
    assert_eq!(
        queued(&client, "fifo"),
        1,
        "one entry for the whole process"
    );
    m.unlock(&intr, held).unwrap();
    threads.into_iter().for_each(|t| t.join().unwrap());
    let entered = entered.lock().unwrap().clone();
    let order: Vec<usize> = entered.iter().map(|(i, _)| *i).collect();
    assert_eq!(order, (0..6).collect::<Vec<_>>());
    let mut last = first_fence;
    for (_, fence) in entered {
        assert!(fence > last, "fencing token {fence} after {last}");
        last = fence;
    }
    assert!(!m.is_locked(&intr).unwrap());
    assert_eq!(queued(&client, "fifo"), 0);
    assert_eq!(m.local_waiters(), 0);
}

#[test]
fn redis_sees_one_entry_per_process_and_processes_take_turns() {
    let server = RedisServer::start();
    let holder_client = server.client("t");
    let holder = DistMutex::new(&holder_client, "turns", lease(30_000)).unwrap();
    let intr = Interrupt::new();
    let held = holder.lock(&intr, &DistMutex::new_token(), None).unwrap();
    let entered = Arc::new(Mutex::new(Vec::new()));
    let processes: Vec<Arc<DistMutex>> = (0..3)
        .map(|_| {
            Arc::new(DistMutex::new(&server.client("t"), "turns", through_redis(30_000)).unwrap())
        })
        .collect();
    let mut threads = Vec::new();
    // Process p's thread t has id 10 * p + t; the first thread of each queues in Redis.
    for t in 0..3 {
        for (p, m) in processes.iter().enumerate() {
            threads.push(waiter(m, 10 * p + t, &entered));
            if t == 0 {
                until("queued in Redis", || {
                    queued(&holder_client, "turns") == p as i64 + 1
                });
            } else {
                until("waits locally", || m.local_waiters() == t);
            }
        }
    }
    let line = cmd(&holder_client, &["LRANGE", "t:{turns}:waiters", "0", "-1"]);
    let redis::Value::Array(line) = line else {
        panic!("LRANGE: {line:?}")
    };
    assert_eq!(line.len(), 3, "one entry per process: {line:?}");
    holder.unlock(&intr, held).unwrap();
    threads.into_iter().for_each(|t| t.join().unwrap());
    let order: Vec<usize> = entered.lock().unwrap().iter().map(|(i, _)| *i).collect();
    // Each process's next thread joins the tail of the line when the one before it leaves.
    assert_eq!(order, vec![0, 10, 20, 1, 11, 21, 2, 12, 22]);
    assert_eq!(queued(&holder_client, "turns"), 0);
}

#[test]
fn a_local_waiter_that_times_out_or_is_interrupted_leaves_nothing_stuck() {
    let server = RedisServer::start();
    let client = server.client("t");
    let m = Arc::new(DistMutex::new(&client, "leave", lease(30_000)).unwrap());
    let intr = Interrupt::new();
    let held = m.lock(&intr, &DistMutex::new_token(), None).unwrap();
    let entered = Arc::new(Mutex::new(Vec::new()));
    let first = waiter(&m, 0, &entered);
    until("the first waiter queued in Redis", || {
        queued(&client, "leave") == 1
    });
    let hasty = {
        let m = m.clone();
        std::thread::spawn(move || {
            let deadline = Instant::now() + Duration::from_millis(200);
            let started = Instant::now();
            let outcome = m.lock(&Interrupt::new(), &DistMutex::new_token(), Some(deadline));
            (matches!(outcome, Err(Error::Timeout(_))), started.elapsed())
        })
    };
    until("the hasty waiter waits locally", || m.local_waiters() == 1);
    let cut = Arc::new(Interrupt::new());
    let interrupted = {
        let (m, cut) = (m.clone(), cut.clone());
        std::thread::spawn(move || {
            matches!(
                m.lock(&cut, &DistMutex::new_token(), None),
                Err(Error::Interrupted)
            )
        })
    };
    until("the interrupted waiter waits locally", || {
        m.local_waiters() == 2
    });
    let last = waiter(&m, 3, &entered);
    until("the last waiter waits locally", || m.local_waiters() == 3);
    let (timed_out, took) = hasty.join().unwrap();
    assert!(timed_out);
    // On time while the lock is still held (a 30 s lease): generous for a loaded machine.
    assert!(took < Duration::from_secs(5), "timed out after {took:?}");
    cut.cancel();
    assert!(interrupted.join().unwrap());
    assert_eq!(m.local_waiters(), 1);
    m.unlock(&intr, held).unwrap();
    first.join().unwrap();
    last.join().unwrap();
    let order: Vec<usize> = entered.lock().unwrap().iter().map(|(i, _)| *i).collect();
    assert_eq!(order, vec![0, 3]);
    assert!(!m.is_locked(&intr).unwrap());
    assert_eq!(queued(&client, "leave"), 0);
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
