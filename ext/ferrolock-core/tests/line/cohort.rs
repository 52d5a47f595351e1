//! The cohort hand-off, for both primitives (src/line/cohort.rs, release.rs): a holder passes
//! the lock (a slot) to a thread of its process waiting for the name without a Redis command, at
//! most `local_passes` times; then it goes back through Redis' line. A lock's passes take the
//! next fencing tokens of its block (the DistMutex tests below), so they are at most 15; a slot's
//! at most 63.

use crate::both::{both, queued, Lined};
use crate::support::{cmd, commands_run, until, RedisServer};
use ferrolock_core::{Client, Interrupt};
use ferrolock_core::{DistMutex, DistMutexOptions};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::time::Duration;

both!(
    a_local_pass_costs_no_redis_command,
    local_passes_past_the_most_are_refused,
    another_process_waits_at_most_two_cohorts,
    a_waiter_passed_over_enters_within_one_cohort,
);

/// A thread that takes the hold, says `name` (with a lock's fencing token) when inside, and
/// leaves when told.
fn enter_gated<P: Lined>(
    p: &Arc<P>,
    name: &'static str,
    tx: &Sender<(&'static str, Option<i64>)>,
) -> (Sender<()>, std::thread::JoinHandle<()>) {
    let (go, go_rx) = channel::<()>();
    let (p, tx) = (p.clone(), tx.clone());
    let thread = std::thread::spawn(move || {
        let intr = Interrupt::new();
        let hold = crate::both::take(&*p);
        tx.send((name, P::fence(&hold))).unwrap();
        go_rx.recv().unwrap();
        p.leave(&intr, hold).unwrap();
    });
    (go, thread)
}

fn next(rx: &Receiver<(&'static str, Option<i64>)>) -> (&'static str, Option<i64>) {
    rx.recv_timeout(Duration::from_secs(20)).unwrap()
}

fn a_local_pass_costs_no_redis_command<P: Lined>() {
    let server = RedisServer::start();
    let client = server.counted_client("t");
    let p = Arc::new(P::make(&client, "pass", 30_000, 8));
    let intr = Interrupt::new();
    let held = crate::both::take(&*p);
    let (tx, rx) = channel();
    // The first waiter queues in Redis; the second waits in the process behind it.
    let (go_first, first) = enter_gated(&p, "first", &tx);
    until("the first waiter queued", || {
        queued::<P>(&client, "pass") == 1
    });
    let (go_second, second) = enter_gated(&p, "second", &tx);
    until("the second waits here", || p.local_waiters() == 1);
    if P::PASSES_AHEAD {
        // A slot goes to the local waiter, without Redis; the Redis waiter keeps its entry
        // (it waits for another slot).
        cmd(&client, &["CONFIG", "RESETSTAT"]);
        p.leave(&intr, held).unwrap();
        assert_eq!(next(&rx).0, "second");
        assert_eq!(commands_run(&client), 0, "a local pass sends nothing");
        assert_eq!(queued::<P>(&client, "pass"), 1);
        // Nobody waits here any more: the next release goes through Redis to the line's head.
        go_second.send(()).unwrap();
        assert_eq!(next(&rx).0, "first");
        go_first.send(()).unwrap();
        second.join().unwrap();
        first.join().unwrap();
    } else {
        // The lock is one: the process's waiter in Redis came first, so it goes there.
        p.leave(&intr, held).unwrap();
        let (who, granted) = next(&rx);
        assert_eq!(who, "first");
        let granted = granted.unwrap();
        assert_eq!(granted % 16, 0, "Redis issues multiples of 16");
        // Then passed to the local waiter, without Redis, with the next fencing token.
        cmd(&client, &["CONFIG", "RESETSTAT"]);
        go_first.send(()).unwrap();
        assert_eq!(next(&rx), ("second", Some(granted + 1)));
        first.join().unwrap();
        assert_eq!(commands_run(&client), 0, "a local pass sends nothing");
        go_second.send(()).unwrap();
        second.join().unwrap();
        // The next acquisition through Redis is above the cohort's block.
        let next = crate::both::take(&*p);
        let fence = P::fence(&next).unwrap();
        assert!(fence >= granted + 16, "{fence}");
        p.leave(&intr, next).unwrap();
    }
    assert_eq!(p.local_waiters(), 0);
    assert!(!p.held());
    assert_eq!(queued::<P>(&client, "pass"), 0);
}

fn local_passes_past_the_most_are_refused<P: Lined>() {
    let server = RedisServer::start();
    let client = server.counted_client("t");
    assert!(P::build(&client, "x", 1_000, P::MAX_PASSES).is_ok());
    let err = P::build(&client, "x", 1_000, P::MAX_PASSES + 1)
        .err()
        .unwrap();
    assert!(err.to_string().contains("local_passes"), "{err}");
}

/// Process P (4 threads) takes the hold over and over; process Q's thread comes once. Returns
/// how many of P's sections ran between Q's arrival and Q's entry.
fn sections_before_other_process<P: Lined>(local_passes: u32) -> usize {
    let server = RedisServer::start();
    let p = Arc::new(P::make(
        &server.counted_client("t"),
        "fair",
        30_000,
        local_passes,
    ));
    let q = Arc::new(P::make(
        &server.counted_client("t"),
        "fair",
        30_000,
        local_passes,
    ));
    let observer = server.counted_client("t");
    let stop = Arc::new(AtomicBool::new(false));
    let p_sections = Arc::new(AtomicUsize::new(0));
    let workers: Vec<_> = (0..4)
        .map(|_| {
            let (p, stop, p_sections) = (p.clone(), stop.clone(), p_sections.clone());
            std::thread::spawn(move || {
                let intr = Interrupt::new();
                while !stop.load(Ordering::SeqCst) {
                    let hold = crate::both::take(&*p);
                    p_sections.fetch_add(1, Ordering::SeqCst);
                    std::thread::sleep(Duration::from_micros(200));
                    p.leave(&intr, hold).unwrap();
                }
            })
        })
        .collect();
    until("P is busy", || p_sections.load(Ordering::SeqCst) > 50);
    let before = Arc::new(Mutex::new(None));
    let q_thread = {
        let (q, before, p_sections) = (q.clone(), before.clone(), p_sections.clone());
        std::thread::spawn(move || {
            *before.lock().unwrap() = Some(p_sections.load(Ordering::SeqCst));
            let hold = crate::both::take(&*q);
            let waited = p_sections.load(Ordering::SeqCst);
            q.leave(&Interrupt::new(), hold).unwrap();
            waited
        })
    };
    let entered_at = q_thread.join().unwrap();
    stop.store(true, Ordering::SeqCst);
    workers.into_iter().for_each(|w| w.join().unwrap());
    assert_eq!(queued::<P>(&observer, "fair"), 0);
    let before = before.lock().unwrap().unwrap();
    entered_at - before
}

fn another_process_waits_at_most_two_cohorts<P: Lined>() {
    // Q's entry may find P's own waiter ahead of it in the Redis line: P's current cohort and
    // that waiter's, each at most local_passes + 1 sections (plus the one section in flight as
    // Q arrives).
    for local_passes in [0u32, 3, 8] {
        let waited = sections_before_other_process::<P>(local_passes);
        let bound = 2 * (local_passes as usize + 1) + 1;
        eprintln!("local_passes {local_passes}: the other process waited {waited} sections");
        assert!(
            waited <= bound,
            "local_passes {local_passes}: {waited} sections of the other process (bound {bound})"
        );
    }
}

/// A holder that comes straight back for the hold after each release keeps it from a waiter of
/// its own process for at most one cohort: its passes go to that waiter, and a cohort's last
/// release queues it in Redis.
fn a_waiter_passed_over_enters_within_one_cohort<P: Lined>() {
    for local_passes in [0u32, 3, 8] {
        let server = RedisServer::start();
        let observer = server.counted_client("t");
        let other = P::make(&server.counted_client("t"), "barge", 30_000, local_passes);
        let p = Arc::new(P::make(
            &server.counted_client("t"),
            "barge",
            30_000,
            local_passes,
        ));
        let other_hold = crate::both::take(&other);
        let entered = Arc::new(AtomicBool::new(false));
        // The holder: the process's waiter in Redis, then in and out as fast as it can.
        let holder = {
            let (p, entered) = (p.clone(), entered.clone());
            std::thread::spawn(move || {
                let intr = Interrupt::new();
                let mut hold = crate::both::take(&*p);
                let mut sections = 1;
                while !entered.load(Ordering::SeqCst) && sections < 1_000 {
                    p.leave(&intr, hold).unwrap();
                    hold = crate::both::take(&*p);
                    sections += 1;
                }
                p.leave(&intr, hold).unwrap();
                sections
            })
        };
        until("the holder queued in Redis", || {
            queued::<P>(&observer, "barge") == 1
        });
        let waiter = {
            let (p, entered) = (p.clone(), entered.clone());
            std::thread::spawn(move || {
                let hold = crate::both::take(&*p);
                entered.store(true, Ordering::SeqCst);
                p.leave(&Interrupt::new(), hold).unwrap();
            })
        };
        until("waits locally", || p.local_waiters() == 1);
        other.leave(&Interrupt::new(), other_hold).unwrap();
        let sections = holder.join().unwrap();
        waiter.join().unwrap();
        // The holder's own section, its cohort's passes, and the one it may start as the waiter
        // enters.
        let bound = local_passes as usize + 2;
        eprintln!("local_passes {local_passes}: the waiter waited {sections} sections");
        assert!(
            sections <= bound,
            "local_passes {local_passes}: the waiter waited {sections} sections (bound {bound})"
        );
    }
}

// DistMutex only: fencing tokens through passes, the exact turns of cohorts, force releases.

fn mutex(client: &Client, name: &str, local_passes: u32) -> Arc<DistMutex> {
    let opts = DistMutexOptions {
        fair: true,
        local_passes,
        ..DistMutexOptions::default()
    };
    // A window no slow machine can miss: these tests check passes, not the window.
    let m = DistMutex::new(client, name, opts).unwrap();
    Arc::new(m.with_cohort_window(Duration::from_secs(60)))
}

fn queued_mutex(client: &Client, name: &str) -> i64 {
    queued::<DistMutex>(client, name)
}

/// Threads of one process (client) each take the lock `sections` times in a row; returns the
/// fencing tokens in the order the sections ran.
fn sections(m: &Arc<DistMutex>, threads: usize, sections: usize) -> Vec<i64> {
    let order = Arc::new(std::sync::Mutex::new(Vec::new()));
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let (m, order) = (m.clone(), order.clone());
            std::thread::spawn(move || {
                let intr = Interrupt::new();
                for _ in 0..sections {
                    let held = m.lock(&intr, &DistMutex::new_token(), None).unwrap();
                    order.lock().unwrap().push(held.fencing_token());
                    m.unlock(&intr, held).unwrap();
                }
            })
        })
        .collect();
    handles.into_iter().for_each(|h| h.join().unwrap());
    let order = order.lock().unwrap().clone();
    order
}

/// A thread that takes the lock, reports (name, fencing token), and releases when told.
fn gated(
    m: &Arc<DistMutex>,
    name: &'static str,
    tx: &std::sync::mpsc::Sender<(&'static str, i64)>,
) -> (std::sync::mpsc::Sender<()>, std::thread::JoinHandle<()>) {
    let (go, go_rx) = channel::<()>();
    let (m, tx) = (m.clone(), tx.clone());
    let thread = std::thread::spawn(move || {
        let intr = Interrupt::new();
        let held = m.lock(&intr, &DistMutex::new_token(), None).unwrap();
        tx.send((name, held.fencing_token())).unwrap();
        go_rx.recv().unwrap();
        m.unlock(&intr, held).unwrap();
    });
    (go, thread)
}

#[test]
fn fencing_tokens_grow_through_passes_and_redis_acquisitions() {
    let server = RedisServer::start();
    let client = server.counted_client("t");
    for passes in [0u32, 3, 15] {
        let m = mutex(&client, &format!("grow{passes}"), passes);
        let order = sections(&m, 4, 40);
        assert!(
            order.windows(2).all(|w| w[1] > w[0]),
            "tokens went back: {order:?}"
        );
        // No cohort longer than its limit: a token's place in its block counts its passes.
        let most = order.iter().map(|f| f % 16).max().unwrap();
        assert!(most <= i64::from(passes), "{most} passes with {passes}");
        if passes > 0 {
            assert!(most > 0, "no local pass at all with {passes}");
        }
    }
}

/// Three processes (clients), three threads each, queued behind a holder of a fourth: the first
/// thread of each in Redis, the others waiting in their process. Returns the order they entered
/// (process p's thread t is 10 * p + t).
fn turns(local_passes: u32) -> Vec<usize> {
    let server = RedisServer::start();
    let holder_client = server.counted_client("t");
    let holder = mutex(&holder_client, "turns", local_passes);
    let intr = Interrupt::new();
    let held = holder.lock(&intr, &DistMutex::new_token(), None).unwrap();
    let entered = Arc::new(std::sync::Mutex::new(Vec::new()));
    let processes: Vec<Arc<DistMutex>> = (0..3)
        .map(|_| mutex(&server.counted_client("t"), "turns", local_passes))
        .collect();
    let mut threads = Vec::new();
    for t in 0..3 {
        for (p, m) in processes.iter().enumerate() {
            let (m, entered) = (m.clone(), entered.clone());
            threads.push(std::thread::spawn(move || {
                let intr = Interrupt::new();
                let held = m.lock(&intr, &DistMutex::new_token(), None).unwrap();
                entered.lock().unwrap().push(10 * p + t);
                m.unlock(&intr, held).unwrap();
            }));
            let m = &processes[p];
            if t == 0 {
                until("queued in Redis", || {
                    queued_mutex(&holder_client, "turns") == p as i64 + 1
                });
            } else {
                until("waits locally", || m.local_waiters() == t);
            }
        }
    }
    holder.unlock(&intr, held).unwrap();
    threads.into_iter().for_each(|t| t.join().unwrap());
    let order = entered.lock().unwrap().clone();
    order
}

#[test]
fn a_cohort_goes_back_through_redis_after_its_local_passes() {
    // Each process's waiter in Redis enters, then passes to its process's next threads (FIFO)
    // up to the limit; the cohort's last release queues the process's next thread at the tail of
    // the Redis line and hands the lock to the next process.
    assert_eq!(turns(8), vec![0, 1, 2, 10, 11, 12, 20, 21, 22]);
    assert_eq!(turns(1), vec![0, 1, 10, 11, 20, 21, 2, 12, 22]);
    assert_eq!(turns(0), vec![0, 10, 20, 1, 11, 21, 2, 12, 22]);
}

#[test]
fn a_force_released_lock_is_not_passed_on_and_its_holder_hears_it_lost() {
    use ferrolock_core::admin::{force_release, Held, ReleaseParams};
    use ferrolock_core::Error;
    let server = RedisServer::start();
    let client = server.counted_client("t");
    // The process's grant inbox listens (it also hears force releases).
    crate::support::contend_once(&client, &client, "t");
    let m = mutex(&client, "revoke", 8);
    let intr = Interrupt::new();
    let held = m.lock(&intr, &DistMutex::new_token(), None).unwrap();
    let (tx, rx) = channel();
    let (go, go_rx) = channel::<()>();
    let second = {
        let (m, tx) = (m.clone(), tx.clone());
        std::thread::spawn(move || {
            let intr = Interrupt::new();
            let held = m.lock(&intr, &DistMutex::new_token(), None).unwrap();
            tx.send(("second", held.fencing_token())).unwrap();
            go_rx.recv().unwrap();
            m.unlock(&intr, held)
        })
    };
    until("the second thread queued", || {
        queued_mutex(&client, "revoke") == 1
    });
    let (go_third, third) = gated(&m, "third", &tx);
    until("the third thread waits here", || m.local_waiters() == 1);
    m.unlock(&intr, held).unwrap();
    let (_, granted) = rx.recv_timeout(Duration::from_secs(20)).unwrap();
    // An operator releases the second thread's hold while the third waits behind it.
    let token = match cmd(&client, &["GET", "t:{revoke}:lock"]) {
        redis::Value::BulkString(b) => String::from_utf8(b).unwrap(),
        other => panic!("GET: {other:?}"),
    };
    let params = ReleaseParams {
        ttl: Duration::from_secs(30),
        limit: 1,
    };
    assert!(force_release(&client, &intr, Held::DistMutex, "revoke", &token, params).unwrap());
    std::thread::sleep(Duration::from_millis(200)); // the notice reaches the inbox
    go.send(()).unwrap();
    assert!(matches!(second.join().unwrap(), Err(Error::LockLost(_))));
    // The third thread was not passed the revoked lock: it took it through Redis.
    let (who, fence) = rx.recv_timeout(Duration::from_secs(20)).unwrap();
    assert_eq!(who, "third");
    assert!(
        fence >= granted + 16 && fence % 16 == 0,
        "{fence} after {granted}"
    );
    go_third.send(()).unwrap();
    third.join().unwrap();
}
