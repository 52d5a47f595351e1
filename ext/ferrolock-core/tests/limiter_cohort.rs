//! The cohort hand-off for ConcurrentLimiter slots (src/cohort.rs): a holder passes its slot to
//! a thread of its process waiting for the name without a Redis command, at most `local_passes`
//! times in a row; then the slot goes back through Redis' line. The limit always holds
//! (tests/limiter_local_line.rs runs its many-threads check with the cohort too).
mod support;

use ferrolock_core::client::int;
use ferrolock_core::concurrent_limiter::{ConcurrentLimiter, LimiterOptions};
use ferrolock_core::{Client, Interrupt};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::channel;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::{cmd, commands_run, until, RedisServer};

fn limiter(client: &Client, name: &str, limit: u32, local_passes: u32) -> Arc<ConcurrentLimiter> {
    let opts = LimiterOptions {
        limit,
        lease: Duration::from_secs(30),
        local_passes,
    };
    // A window no slow machine can miss: these tests check passes, not the window.
    let l = ConcurrentLimiter::new(client, name, opts).unwrap();
    Arc::new(l.with_cohort_window(Duration::from_secs(60)))
}

fn queued(client: &Client, name: &str) -> i64 {
    int(&cmd(client, &["LLEN", &format!("t:{{{name}}}:line")])).unwrap()
}

fn after(secs: u64) -> Instant {
    Instant::now() + Duration::from_secs(secs)
}

/// A thread that takes a slot, says `name` when inside, and leaves when told.
fn gated(
    l: &Arc<ConcurrentLimiter>,
    name: &'static str,
    tx: &std::sync::mpsc::Sender<&'static str>,
) -> (std::sync::mpsc::Sender<()>, std::thread::JoinHandle<()>) {
    let (go, go_rx) = channel::<()>();
    let (l, tx) = (l.clone(), tx.clone());
    let thread = std::thread::spawn(move || {
        let intr = Interrupt::new();
        let token = ConcurrentLimiter::new_token();
        let slot = l
            .acquire(&intr, &token, after(30))
            .unwrap()
            .expect("a slot");
        tx.send(name).unwrap();
        go_rx.recv().unwrap();
        l.release(&intr, slot).unwrap();
    });
    (go, thread)
}

#[test]
fn a_local_slot_pass_costs_no_redis_command() {
    let server = RedisServer::start();
    let client = server.client("t");
    let l = limiter(&client, "pass", 1, 8);
    let intr = Interrupt::new();
    let held = l
        .acquire(&intr, &ConcurrentLimiter::new_token(), after(5))
        .unwrap()
        .unwrap();
    let (tx, rx) = channel();
    // The first waiter queues in Redis; the second waits in the process behind it.
    let (go_first, first) = gated(&l, "first", &tx);
    until("the first waiter queued", || queued(&client, "pass") == 1);
    let (go_second, second) = gated(&l, "second", &tx);
    until("the second waits here", || l.local_waiters() == 1);
    cmd(&client, &["CONFIG", "RESETSTAT"]);
    // The slot goes to the local waiter, without Redis; the Redis waiter keeps its entry.
    l.release(&intr, held).unwrap();
    assert_eq!(rx.recv_timeout(Duration::from_secs(20)).unwrap(), "second");
    assert_eq!(commands_run(&client), 0, "a local pass sends nothing");
    assert_eq!(queued(&client, "pass"), 1);
    // Nobody waits here any more: the next release goes through Redis to the line's head.
    go_second.send(()).unwrap();
    second.join().unwrap();
    assert_eq!(rx.recv_timeout(Duration::from_secs(20)).unwrap(), "first");
    go_first.send(()).unwrap();
    first.join().unwrap();
    let status = l.status(&intr).unwrap();
    assert_eq!((status.in_use, status.waiting), (0, 0));
}

#[test]
fn local_passes_past_the_block_are_refused() {
    let server = RedisServer::start();
    let client = server.client("t");
    let opts = LimiterOptions {
        limit: 1,
        lease: Duration::from_secs(1),
        local_passes: 16,
    };
    let err = ConcurrentLimiter::new(&client, "x", opts).err().unwrap();
    assert!(err.to_string().contains("local_passes"), "{err}");
}

/// Process P (4 threads) takes the limiter's only slot over and over; process Q's thread comes
/// once. Returns how many of P's sections ran between Q's arrival in the Redis line and Q's
/// entry.
fn sections_before_other_process(local_passes: u32) -> usize {
    let server = RedisServer::start();
    let p = limiter(&server.client("t"), "fair", 1, local_passes);
    let q = limiter(&server.client("t"), "fair", 1, local_passes);
    let observer = server.client("t");
    let stop = Arc::new(AtomicBool::new(false));
    let p_sections = Arc::new(AtomicUsize::new(0));
    let workers: Vec<_> = (0..4)
        .map(|_| {
            let (p, stop, p_sections) = (p.clone(), stop.clone(), p_sections.clone());
            std::thread::spawn(move || {
                let intr = Interrupt::new();
                while !stop.load(Ordering::SeqCst) {
                    let token = ConcurrentLimiter::new_token();
                    let slot = p
                        .acquire(&intr, &token, after(30))
                        .unwrap()
                        .expect("a slot");
                    p_sections.fetch_add(1, Ordering::SeqCst);
                    std::thread::sleep(Duration::from_micros(200));
                    p.release(&intr, slot).unwrap();
                }
            })
        })
        .collect();
    until("P is busy", || p_sections.load(Ordering::SeqCst) > 50);
    let before = Arc::new(Mutex::new(None));
    let q_thread = {
        let (q, before, p_sections) = (q.clone(), before.clone(), p_sections.clone());
        std::thread::spawn(move || {
            let intr = Interrupt::new();
            let token = ConcurrentLimiter::new_token();
            *before.lock().unwrap() = Some(p_sections.load(Ordering::SeqCst));
            let slot = q
                .acquire(&intr, &token, after(30))
                .unwrap()
                .expect("a slot");
            let waited = p_sections.load(Ordering::SeqCst);
            q.release(&intr, slot).unwrap();
            waited
        })
    };
    let entered_at = q_thread.join().unwrap();
    stop.store(true, Ordering::SeqCst);
    workers.into_iter().for_each(|w| w.join().unwrap());
    assert_eq!(queued(&observer, "fair"), 0);
    let before = before.lock().unwrap().unwrap();
    entered_at - before
}

#[test]
fn another_process_waits_at_most_two_cohorts() {
    // Q's entry may find P's own waiter ahead of it in the Redis line: P's current cohort and
    // that waiter's, each at most local_passes + 1 sections (plus the one section in flight as
    // Q arrives).
    for local_passes in [0u32, 3, 8] {
        let waited = sections_before_other_process(local_passes);
        let bound = 2 * (local_passes as usize + 1) + 1;
        eprintln!("local_passes {local_passes}: the other process waited {waited} sections");
        assert!(
            waited <= bound,
            "local_passes {local_passes}: {waited} sections of the other process (bound {bound})"
        );
    }
}
