//! The parked hold (unfair mode, src/line/local/parked.rs), for both primitives: a releasing
//! holder whose process has a thread waiting leaves the hold in the process; the next thread to
//! ask takes it with no Redis command and nobody woken (a lock's with the next fencing token of
//! its block); nobody asking, the oldest waiter takes it; a waiter that leaves takes it with it;
//! another process is passed over for a bounded slice only; the limit holds throughout.

use crate::both::{both, queued, take, Lined};
use crate::support::{all_entered, commands_run, until, RedisServer};
use ferrolock_core::{Client, Interrupt};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::channel;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

both!(
    a_parked_hold_is_taken_back_with_no_command_and_no_wake_up,
    a_parked_hold_nobody_asks_for_goes_to_the_oldest_waiter,
    a_waiter_that_leaves_takes_the_parked_hold_with_it,
    another_process_is_passed_over_for_a_slice_only,
    take_parked_takes_a_parked_hold_as_a_new_call_would_and_nothing_else,
);

/// A thread of `p`'s process waiting in the process's line (a limiter's first waiter queues in
/// Redis, so a second one waits here); each says when it entered, then leaves.
fn local_waiter<P: Lined>(
    p: &Arc<P>,
    client: &Client,
    name: &str,
    deadline: Option<Duration>,
) -> (
    std::sync::mpsc::Receiver<bool>,
    Vec<std::thread::JoinHandle<()>>,
) {
    let (tx, rx) = channel();
    let mut threads = vec![];
    let spawn = |deadline: Option<Duration>| {
        let (p, tx) = (p.clone(), tx.clone());
        std::thread::spawn(move || {
            let intr = Interrupt::new();
            let hold = p
                .enter(&intr, &P::token(), deadline.map(|d| Instant::now() + d))
                .unwrap();
            let entered = hold.is_some();
            if let Some(hold) = hold {
                p.leave(&intr, hold).unwrap();
            }
            let _ = tx.send(entered);
        })
    };
    if P::PASSES_AHEAD {
        // A limiter's newcomer goes to Redis while the process holds; the next waits here.
        threads.push(spawn(None));
        until("the first waiter queued", || queued::<P>(client, name) == 1);
    }
    threads.push(spawn(deadline));
    until("a thread waits in the process", || p.local_waiters() == 1);
    (rx, threads)
}

fn a_parked_hold_is_taken_back_with_no_command_and_no_wake_up<P: Lined>() {
    let server = RedisServer::start();
    let client = server.counted_client("t");
    // A long tick: the waiter must not take the hold while this thread is descheduled.
    let p = Arc::new(P::unfair(&client, "park", 1, Some(Duration::from_secs(2))));
    let intr = Interrupt::new();
    let held = take(&*p);
    let first = P::fence(&held);
    let (entered, threads) = local_waiter(&p, &client, "park", None);
    let before = commands_run(&client);
    p.leave(&intr, held).unwrap();
    assert_eq!(p.parked_holds(), 1, "the release parked the hold");
    assert_eq!(p.local_waiters(), 1, "nobody was woken");
    let again = take(&*p);
    assert_eq!(p.parked_holds(), 0);
    assert_eq!(
        commands_run(&client) - before,
        0,
        "release and retake sent no command"
    );
    if let Some(first) = first {
        assert_eq!(
            P::fence(&again),
            Some(first + 1),
            "a fresh token of the block"
        );
    }
    assert!(entered.try_recv().is_err(), "the waiter still waits");
    p.leave(&intr, again).unwrap();
    // Nobody asks again: the waiters enter (the parked hold goes to the oldest after its tick).
    all_entered(&entered, threads);
    until("released", || !p.held());
}

fn a_parked_hold_nobody_asks_for_goes_to_the_oldest_waiter<P: Lined>() {
    let server = RedisServer::start();
    let client = server.client("t");
    let p = Arc::new(P::unfair(&client, "idle", 1, None));
    let held = take(&*p);
    let (entered, threads) = local_waiter(&p, &client, "idle", None);
    p.leave(&Interrupt::new(), held).unwrap();
    all_entered(&entered, threads);
    assert_eq!(p.parked_holds(), 0);
    until("released", || !p.held());
}

fn a_waiter_that_leaves_takes_the_parked_hold_with_it<P: Lined>() {
    let server = RedisServer::start();
    let client = server.client("t");
    // Nobody takes a parked hold by its tick here: only the leaving waiter can.
    let p = Arc::new(P::unfair(
        &client,
        "leave",
        1,
        Some(Duration::from_secs(600)),
    ));
    let held = take(&*p);
    let (entered, threads) = local_waiter(&p, &client, "leave", Some(Duration::from_millis(300)));
    p.leave(&Interrupt::new(), held).unwrap();
    // The waiter out of time entered with the parked hold (and released it), so it was not
    // left with nobody to take it; a limiter's waiter in Redis then gets the slot.
    all_entered(&entered, threads);
    assert_eq!(p.parked_holds(), 0);
    until("released", || !p.held());
}

fn another_process_is_passed_over_for_a_slice_only<P: Lined>() {
    let server = RedisServer::start();
    let (a, b) = (server.client("t"), server.client("t"));
    let pa = Arc::new(P::unfair(&a, "slice", 1, None));
    let pb = Arc::new(P::unfair(&b, "slice", 1, None));
    let intr = Interrupt::new();
    let held = take(&*pa);
    // Another process waits in Redis; a thread of this one waits in the process.
    let entered_b = Arc::new(AtomicBool::new(false));
    let other = {
        let (pb, entered_b) = (pb.clone(), entered_b.clone());
        std::thread::spawn(move || {
            let hold = take(&*pb);
            entered_b.store(true, Ordering::SeqCst);
            pb.leave(&Interrupt::new(), hold).unwrap();
        })
    };
    until("the other process queued", || queued::<P>(&a, "slice") == 1);
    let (entered, threads) = local_waiter(&pa, &a, "slice", None);
    // This thread takes the hold back again and again: the other process still enters.
    let mut hold = Some(held);
    let started = Instant::now();
    while !entered_b.load(Ordering::SeqCst) {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the other process never entered"
        );
        pa.leave(&intr, hold.take().unwrap()).unwrap();
        hold = Some(take(&*pa));
    }
    pa.leave(&intr, hold.take().unwrap()).unwrap();
    other.join().unwrap();
    all_entered(&entered, threads);
}

/// 8 threads in 2 processes (clients), `sections` each, through an unfair primitive of
/// `limit` slots: never more than `limit` inside at once, every section ran; a lock's fencing
/// tokens grow in the order holders entered.
fn count_unfair<P: Lined>(limit: u32, sections: usize) {
    let server = RedisServer::start();
    let clients = [server.client("t"), server.client("t")];
    let inside = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let ran = Arc::new(AtomicUsize::new(0));
    let fences = Arc::new(Mutex::new(vec![]));
    let mut threads = vec![];
    for client in &clients {
        let p = Arc::new(P::unfair(client, "count", limit, None));
        for _ in 0..4 {
            let (p, inside, most, ran, fences) = (
                p.clone(),
                inside.clone(),
                most.clone(),
                ran.clone(),
                fences.clone(),
            );
            threads.push(std::thread::spawn(move || {
                let intr = Interrupt::new();
                for _ in 0..sections {
                    let hold = take(&*p);
                    let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    if let Some(f) = P::fence(&hold) {
                        fences.lock().unwrap().push(f);
                    }
                    std::thread::yield_now();
                    ran.fetch_add(1, Ordering::SeqCst);
                    inside.fetch_sub(1, Ordering::SeqCst);
                    p.leave(&intr, hold).unwrap();
                }
            }));
        }
    }
    threads.into_iter().for_each(|t| t.join().unwrap());
    assert!(
        most.load(Ordering::SeqCst) <= limit as usize,
        "the limit held"
    );
    assert_eq!(
        ran.load(Ordering::SeqCst),
        8 * sections,
        "every section ran"
    );
    let fences = fences.lock().unwrap();
    assert!(
        fences.windows(2).all(|w| w[0] < w[1]),
        "fencing tokens grow in the order holders entered"
    );
}

#[test]
fn an_unfair_lock_stays_exclusive_across_threads_and_processes() {
    count_unfair::<ferrolock_core::DistMutex>(1, 150);
}

#[test]
fn an_unfair_limiter_never_exceeds_its_limit() {
    count_unfair::<ferrolock_core::concurrent_limiter::ConcurrentLimiter>(3, 150);
}

/// A limiter's process holding two slots with one thread waiting here: the first release parks
/// its slot for that waiter; the second may neither park another (one waiter takes one) nor pass
/// its slot to that waiter (the parked one would be left with nobody to take it): it goes back
/// through Redis. Every slot is free at the end; a stranded parked slot would stay held, renewed.
#[test]
fn a_parked_slot_is_never_left_without_a_waiter_to_take_it() {
    use ferrolock_core::concurrent_limiter::ConcurrentLimiter;
    let server = RedisServer::start();
    let client = server.client("t");
    let p = Arc::new(ConcurrentLimiter::unfair(
        &client,
        "two",
        2,
        Some(Duration::from_secs(600)),
    ));
    let intr = Interrupt::new();
    let (a, b) = (take(&*p), take(&*p));
    let (entered, threads) = local_waiter(&p, &client, "two", Some(Duration::from_millis(500)));
    p.leave(&intr, a).unwrap();
    assert_eq!(p.parked_holds(), 1);
    p.leave(&intr, b).unwrap();
    assert_eq!(p.parked_holds(), 1, "one parked slot for one waiter");
    assert_eq!(p.local_waiters(), 1, "the waiter stays to take it");
    all_entered(&entered, threads);
    assert_eq!(p.parked_holds(), 0);
    until("every slot free", || {
        p.status(&Interrupt::new()).unwrap().in_use == 0
    });
}

/// `take_parked`, the binding's retake with the GVL held: it takes a parked hold as a new call
/// would (no command, nobody woken, a lock's next token of the block) and finds none when
/// nothing is parked, or for a fair primitive (whose releases never park).
fn take_parked_takes_a_parked_hold_as_a_new_call_would_and_nothing_else<P: Lined>() {
    let server = RedisServer::start();
    let client = server.counted_client("t");
    let p = Arc::new(P::unfair(
        &client,
        "retake",
        1,
        Some(Duration::from_secs(2)),
    ));
    let intr = Interrupt::new();
    assert!(p.take_parked().unwrap().is_none(), "nothing parked");
    let held = take(&*p);
    let first = P::fence(&held);
    let (entered, threads) = local_waiter(&p, &client, "retake", None);
    let before = commands_run(&client);
    p.leave(&intr, held).unwrap();
    assert_eq!(p.parked_holds(), 1, "the release parked the hold");
    let again = p.take_parked().unwrap().expect("the parked hold");
    if let Some(first) = first {
        assert_eq!(
            P::fence(&again),
            Some(first + 1),
            "a fresh token of the block"
        );
    }
    assert_eq!(p.parked_holds(), 0);
    assert!(p.take_parked().unwrap().is_none(), "taken once");
    assert_eq!(commands_run(&client) - before, 0, "no command sent");
    assert!(entered.try_recv().is_err(), "the waiter still waits");
    p.leave(&intr, again).unwrap();
    all_entered(&entered, threads);
    until("released", || !p.held());

    let fair = P::make(&client, "fair", 30_000, 8);
    let held = take(&fair);
    assert!(
        fair.take_parked().unwrap().is_none(),
        "a fair one never parks"
    );
    fair.leave(&intr, held).unwrap();
}
