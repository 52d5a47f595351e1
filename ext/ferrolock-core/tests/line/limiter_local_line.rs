//! One waiter per process per name for ConcurrentLimiter (src/line/local/), what several slots
//! add to local_line.rs (run against both primitives): the next release of any of the process's
//! holders queues its next local waiter, a slot freed elsewhere reaches local waiters, and the
//! limit holds under many threads. A client stands for a process here.

use crate::support::{cmd, grant_keys, keys_without_ttl, spawn_gated, until, Gated, RedisServer};
use ferrolock_core::client::int;
use ferrolock_core::concurrent_limiter::{ConcurrentLimiter, LimiterOptions};
use ferrolock_core::{Client, Error, Interrupt};
use redis::Value;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A 30 s lease everywhere but where said: a waiter entering within seconds was handed over.
fn limiter(client: &Client, name: &str, limit: u32) -> Arc<ConcurrentLimiter> {
    let opts = LimiterOptions {
        limit,
        lease: Duration::from_secs(30),
        local_passes: 0,
        fair: true,
    };
    Arc::new(ConcurrentLimiter::new(client, name, opts).unwrap())
}

fn token() -> String {
    ConcurrentLimiter::new_token()
}

fn after(ms: u64) -> Instant {
    Instant::now() + Duration::from_millis(ms)
}

fn key(name: &str, part: &str) -> String {
    format!("t:{{{name}}}:{part}")
}

fn queued(client: &Client, name: &str) -> i64 {
    int(&cmd(client, &["LLEN", &key(name, "line")])).unwrap()
}

fn in_use(l: &ConcurrentLimiter) -> u32 {
    l.status(&Interrupt::new()).unwrap().in_use
}

/// A thread that takes a slot (waiting up to 20 s), says so with its id, and releases when told.
fn gated(
    l: &Arc<ConcurrentLimiter>,
    id: usize,
    log: &Arc<Mutex<Vec<usize>>>,
) -> Gated<usize, Result<(), Error>> {
    let (l, log) = (l.clone(), log.clone());
    spawn_gated(move |gate| {
        let intr = Interrupt::new();
        let slot = l.acquire(&intr, &token(), after(20_000))?;
        let slot = slot.expect("a slot within 20 s");
        log.lock().unwrap().push(id);
        gate.entered(id);
        gate.wait_go();
        l.release(&intr, slot)
    })
}

#[test]
fn any_holder_of_the_process_queues_its_next_local_waiter() {
    let server = RedisServer::start();
    let (a, b) = (server.client("t"), server.client("t"));
    let (la, lb) = (limiter(&a, "many", 3), limiter(&b, "many", 3));
    let log = Arc::new(Mutex::new(Vec::new()));
    // Process A holds two slots, B one; then A's W1 queues in Redis, W2 and W3 wait locally.
    let h1 = gated(&la, 101, &log);
    h1.wait_entered();
    let h2 = gated(&la, 102, &log);
    h2.wait_entered();
    let hb = gated(&lb, 200, &log);
    hb.wait_entered();
    let w1 = gated(&la, 1, &log);
    until("W1 queued", || queued(&a, "many") == 1);
    let w2 = gated(&la, 2, &log);
    until("W2 waits locally", || la.local_waiters() == 1);
    let w3 = gated(&la, 3, &log);
    until("W3 waits locally", || la.local_waiters() == 2);
    // B's release hands its slot to W1: A holds all three, nobody of it in Redis.
    hb.release().unwrap();
    w1.wait_entered();
    assert_eq!(in_use(&la), 3);
    // The second holder's release (not the first's) queues W2 and hands it its own slot.
    h2.release().unwrap();
    w2.wait_entered();
    assert_eq!(in_use(&la), 3);
    h1.release().unwrap();
    w3.wait_entered();
    assert_eq!(in_use(&la), 3);
    for w in [w1, w2, w3] {
        w.release().unwrap();
    }
    assert_eq!(*log.lock().unwrap(), vec![101, 102, 200, 1, 2, 3]);
    assert_eq!(in_use(&la), 0);
    assert_eq!(queued(&a, "many"), 0);
    assert_eq!(grant_keys(&a), Value::Array(vec![]));
    assert_eq!(keys_without_ttl(&a), Vec::<String>::new());
}

#[test]
fn a_release_that_lost_its_slot_queues_nobody_and_hands_nothing_over() {
    let server = RedisServer::start();
    let (a, b) = (server.client("t"), server.client("t"));
    let (la, lb) = (limiter(&a, "lost", 1), limiter(&b, "lost", 1));
    let intr = Interrupt::new();
    let log = Arc::new(Mutex::new(Vec::new()));
    let held = la.acquire(&intr, &token(), after(20_000)).unwrap().unwrap();
    // A1 queues in Redis, then B1; A2 waits locally behind A1.
    let a1 = gated(&la, 1, &log);
    until("A1 queued", || queued(&a, "lost") == 1);
    let b1 = gated(&lb, 2, &log);
    until("B1 queued", || queued(&a, "lost") == 2);
    let a2 = gated(&la, 3, &log);
    until("A2 waits locally", || la.local_waiters() == 1);
    la.release(&intr, held).unwrap();
    a1.wait_entered();
    let line_before = cmd(&a, &["LRANGE", &key("lost", "line"), "0", "-1"]);
    // A1's slot is lost (as when its lease ran out and an expired member was purged).
    cmd(&a, &["DEL", &key("lost", "slots")]);
    assert!(matches!(a1.release(), Err(Error::LockLost(_))));
    // Nothing handed over nor queued by that release: B1's entry as it was. A2, told to attempt,
    // finds the free slot (a free slot with live entries exists only after a lost lease).
    a2.wait_entered();
    let line_after = cmd(&a, &["LRANGE", &key("lost", "line"), "0", "-1"]);
    assert_eq!(line_after, line_before, "B1's entry alone");
    assert_eq!(*log.lock().unwrap(), vec![1, 3]);
    a2.release().unwrap();
    b1.wait_entered();
    b1.release().unwrap();
    assert_eq!(in_use(&la), 0);
    assert_eq!(queued(&a, "lost"), 0);
    assert_eq!(grant_keys(&a), Value::Array(vec![]));
    assert_eq!(keys_without_ttl(&a), Vec::<String>::new());
}

#[test]
fn waiters_timing_out_or_interrupted_as_a_release_queues_them_never_strand_a_slot() {
    let server = RedisServer::start();
    let (a, b) = (server.client("t"), server.client("t"));
    let (la, lb) = (limiter(&a, "race", 2), limiter(&b, "race", 2));
    let log = Arc::new(Mutex::new(Vec::new()));
    for round in 0..16u64 {
        // A holds one slot (h), B the other; A's W queues in Redis and B's release hands W its
        // slot, so A has nobody in Redis and its hasty local waiter is queued by h's release,
        // released about when the hasty one's wait ends (or it is interrupted).
        let h = gated(&la, 0, &log);
        h.wait_entered();
        let hb = gated(&lb, 0, &log);
        hb.wait_entered();
        let w = gated(&la, 0, &log);
        until("W queued", || queued(&a, "race") == 1);
        let cut = Arc::new(Interrupt::new());
        let hasty = {
            let (l, cut) = (la.clone(), cut.clone());
            let wait_ms = if round % 2 == 0 { 30 } else { 20_000 };
            std::thread::spawn(move || {
                let tok = token();
                match l.acquire(&cut, &tok, after(wait_ms)) {
                    Ok(Some(slot)) => l.release(&Interrupt::new(), slot).map(|_| "entered"),
                    Ok(None) => Ok("timed out"),
                    Err(Error::Interrupted) => {
                        // As the binding does for a call that failed: give the token up.
                        l.abandon(&tok);
                        Ok("interrupted")
                    }
                    Err(e) => Err(e),
                }
            })
        };
        until("the hasty waiter waits locally", || la.local_waiters() == 1);
        // Another process's patient waiter, queued in Redis.
        let patient = {
            let l = lb.clone();
            std::thread::spawn(move || {
                let intr = Interrupt::new();
                let slot = l.acquire(&intr, &token(), after(10_000)).unwrap();
                l.release(&intr, slot.expect("the patient waiter got a slot"))
                    .unwrap();
            })
        };
        hb.release().unwrap();
        w.wait_entered();
        until("the patient waiter queued", || queued(&a, "race") == 1);
        let started = Instant::now();
        let at = Duration::from_micros(20_000 + round * 1_500);
        if round % 2 == 1 {
            let cut = cut.clone();
            std::thread::spawn(move || {
                std::thread::sleep(at);
                cut.cancel();
            });
        }
        std::thread::sleep(at.saturating_sub(started.elapsed()));
        h.release().unwrap();
        let outcome = hasty.join().unwrap().unwrap();
        w.release().unwrap();
        patient.join().unwrap();
        // Every slot is back within moments, not a lease (30 s).
        until(
            &format!("every slot back, round {round}: {outcome}"),
            || in_use(&la) == 0,
        );
        assert_eq!(queued(&a, "race"), 0, "round {round}: {outcome}");
        assert_eq!(la.local_waiters(), 0);
    }
    until("no grant left", || grant_keys(&a) == Value::Array(vec![]));
    assert_eq!(keys_without_ttl(&a), Vec::<String>::new());
}

#[test]
fn a_slot_freed_elsewhere_reaches_local_waiters_without_a_release_of_their_process() {
    let server = RedisServer::start();
    let (a, b) = (server.client("t"), server.client("t"));
    let (la, lb) = (limiter(&a, "idle", 3), limiter(&b, "idle", 3));
    let log = Arc::new(Mutex::new(Vec::new()));
    // A holds one slot for the whole test, B the other two; A's W queues and is handed one of B's
    // slots; A's L waits locally with nobody of A in Redis, and no release of A will come. Then B
    // frees its other slot: L must get it, by going to Redis itself (UNQUEUED_GRACE) whether
    // that is before the release (handed over) or after it (room found by its attempt).
    let h = gated(&la, 0, &log);
    h.wait_entered();
    let hb = gated(&lb, 0, &log);
    hb.wait_entered();
    let hb2 = gated(&lb, 3, &log);
    hb2.wait_entered();
    let w = gated(&la, 1, &log);
    until("W queued", || queued(&a, "idle") == 1);
    let l = gated(&la, 2, &log);
    until("L waits locally", || la.local_waiters() == 1);
    hb.release().unwrap();
    w.wait_entered();
    let freed_at = Instant::now();
    hb2.release().unwrap();
    l.wait_entered();
    // The lease is 30 s, and a waiter in Redis re-checks after at least a second: L was handed
    // the slot or found it by an attempt of its own, not by waiting out a lease.
    assert!(
        freed_at.elapsed() < Duration::from_secs(10),
        "took {:?}",
        freed_at.elapsed()
    );
    for g in [h, w, l] {
        let _ = g.release();
    }
    assert_eq!(in_use(&la), 0);
}

#[test]
fn many_threads_in_three_processes_never_exceed_the_limit_and_all_finish() {
    stress(0);
}

/// The same with the cohort hand-off (cohort.rs): slots also move between a
/// process's threads without Redis.
#[test]
fn many_threads_passing_slots_never_exceed_the_limit_and_all_finish() {
    stress(ferrolock_core::DEFAULT_LOCAL_PASSES);
}

/// 5 threads in each of 3 processes take one limiter's 3 slots 25 times each: never more than 3
/// inside, everyone done, nothing left in Redis.
fn stress(local_passes: u32) {
    let server = RedisServer::start();
    let (limit, rounds) = (3usize, 25usize);
    let inside = Arc::new(AtomicUsize::new(0));
    let max_inside = Arc::new(AtomicUsize::new(0));
    let mut threads = Vec::new();
    for _ in 0..3 {
        let client = server.client("t");
        // A short lease: renewals run while threads hold.
        let opts = LimiterOptions {
            limit: limit as u32,
            lease: Duration::from_millis(3_000),
            local_passes,
            fair: true,
        };
        let l = Arc::new(ConcurrentLimiter::new(&client, "stress", opts).unwrap());
        for _ in 0..5 {
            let (l, inside, max_inside) = (l.clone(), inside.clone(), max_inside.clone());
            threads.push(std::thread::spawn(move || {
                let intr = Interrupt::new();
                for i in 0..rounds {
                    let slot = l.acquire(&intr, &token(), after(30_000)).unwrap();
                    let slot = slot.expect("a slot within 30 s");
                    let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                    max_inside.fetch_max(now, Ordering::SeqCst);
                    if i % 5 == 0 {
                        std::thread::sleep(Duration::from_millis(2));
                    }
                    inside.fetch_sub(1, Ordering::SeqCst);
                    l.release(&intr, slot).unwrap();
                }
            }));
        }
    }
    threads.into_iter().for_each(|t| t.join().unwrap());
    assert_eq!(
        max_inside.load(Ordering::SeqCst),
        limit,
        "never more than {limit} inside, and {limit} reached"
    );
    let observer = server.client("t");
    assert_eq!(in_use(&limiter(&observer, "stress", 3)), 0);
    assert_eq!(queued(&observer, "stress"), 0);
    assert_eq!(grant_keys(&observer), Value::Array(vec![]));
    assert_eq!(keys_without_ttl(&observer), Vec::<String>::new());
}
