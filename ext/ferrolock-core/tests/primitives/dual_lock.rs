use crate::support::{cmd, RedisServer};
use ferrolock_core::{Client, Error, Interrupt};
use ferrolock_core::{DualLock, DualLockOptions, Stage};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn lock(client: &Client, key: &str, wait_ms: u64, exec_ms: u64) -> DualLock {
    let opts = DualLockOptions {
        wait_lease: Duration::from_millis(wait_ms),
        lease: Duration::from_millis(exec_ms),
    };
    DualLock::new(client, key, opts).unwrap()
}

fn token() -> String {
    DualLock::new_token()
}

fn exists(client: &Client, key: &str) -> bool {
    cmd(client, &["EXISTS", key]) == redis::Value::Int(1)
}

#[test]
fn three_arrivals_run_wait_then_skip() {
    let server = RedisServer::start();
    let client = server.client("t");
    let t0 = Instant::now();
    let log = Arc::new(Mutex::new(Vec::new()));
    let threads: Vec<_> = [0u64, 100, 300]
        .into_iter()
        .enumerate()
        .map(|(i, delay)| {
            let l = lock(&client, "orig", 5_000, 5_000);
            let log = log.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(delay));
                let intr = Interrupt::new();
                let mut ticket = l.enter(&intr, &token()).unwrap();
                let first = ticket.stage();
                if first == Stage::Waiting {
                    assert_eq!(l.wait(&intr, &mut ticket, None).unwrap(), Stage::Running);
                }
                if ticket.stage() == Stage::Running {
                    let start = t0.elapsed();
                    std::thread::sleep(Duration::from_millis(600));
                    let end = t0.elapsed();
                    l.leave(&intr, ticket).unwrap();
                    log.lock().unwrap().push((i, first, Some((start, end))));
                } else {
                    log.lock().unwrap().push((i, first, None));
                }
            })
        })
        .collect();
    threads.into_iter().for_each(|t| t.join().unwrap());
    let mut log = log.lock().unwrap().clone();
    log.sort_by_key(|e| e.0);
    assert_eq!(log[0].1, Stage::Running);
    assert_eq!(log[1].1, Stage::Waiting);
    assert_eq!(log[2], (2, Stage::Skipped, None));
    let (_, first_end) = log[0].2.unwrap();
    let (second_start, _) = log[1].2.unwrap();
    assert!(
        second_start >= first_end,
        "the waiter started before the first run ended"
    );
    // Woken by the release, not by a timer: generous bound for a loaded machine.
    assert!(
        second_start - first_end < Duration::from_millis(250),
        "hand-off took {:?}",
        second_start - first_end
    );
    assert!(!exists(&client, "t:{orig}:exec") && !exists(&client, "t:{orig}:wait"));
}

#[test]
fn a_run_longer_than_its_lease_stays_exclusive() {
    let server = RedisServer::start();
    let client = server.client("t");
    let l = lock(&client, "long", 300, 300);
    let intr = Interrupt::new();
    let running = l.enter(&intr, &token()).unwrap();
    assert_eq!(running.stage(), Stage::Running);
    let mut waiter = l.enter(&intr, &token()).unwrap();
    assert_eq!(waiter.stage(), Stage::Waiting);
    // 1.2 s = 4 exec TTLs: the waiter must not get in, and its WAIT must survive too.
    let stage = l
        .wait(
            &intr,
            &mut waiter,
            Some(Instant::now() + Duration::from_millis(1200)),
        )
        .unwrap();
    assert_eq!(stage, Stage::Waiting);
    assert_eq!(l.enter(&intr, &token()).unwrap().stage(), Stage::Skipped);
    l.leave(&intr, running).unwrap();
    assert_eq!(l.wait(&intr, &mut waiter, None).unwrap(), Stage::Running);
    l.leave(&intr, waiter).unwrap();
}

#[test]
fn a_crashed_executor_frees_the_key_after_its_lease() {
    let server = RedisServer::start();
    let client = server.client("t");
    let l = lock(&client, "crash", 5_000, 800);
    let intr = Interrupt::new();
    drop(l.enter(&intr, &token()).unwrap()); // renewal stops, nobody releases
    let mut waiter = l.enter(&intr, &token()).unwrap();
    assert_eq!(waiter.stage(), Stage::Waiting);
    let started = Instant::now();
    assert_eq!(l.wait(&intr, &mut waiter, None).unwrap(), Stage::Running);
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(600),
        "ran after {waited:?}: before the crashed run's lease expired"
    );
    assert!(
        waited < Duration::from_millis(2500),
        "waited {waited:?} for an 0.8 s lease"
    );
    l.leave(&intr, waiter).unwrap();
}

#[test]
fn a_crashed_waiter_frees_its_place_after_its_wait_lease() {
    let server = RedisServer::start();
    let client = server.client("t");
    let l = lock(&client, "crashw", 500, 10_000);
    let intr = Interrupt::new();
    let running = l.enter(&intr, &token()).unwrap();
    drop(l.enter(&intr, &token()).unwrap()); // a waiter that dies
    assert_eq!(l.enter(&intr, &token()).unwrap().stage(), Stage::Skipped);
    std::thread::sleep(Duration::from_millis(700));
    let next = l.enter(&intr, &token()).unwrap();
    assert_eq!(next.stage(), Stage::Waiting);
    l.leave(&intr, next).unwrap();
    l.leave(&intr, running).unwrap();
}

#[test]
fn giving_up_a_wait_lets_the_next_duplicate_wait() {
    let server = RedisServer::start();
    let client = server.client("t");
    let l = lock(&client, "giveup", 5_000, 5_000);
    let intr = Interrupt::new();
    let running = l.enter(&intr, &token()).unwrap();
    let mut waiter = l.enter(&intr, &token()).unwrap();
    let started = Instant::now();
    let stage = l
        .wait(
            &intr,
            &mut waiter,
            Some(Instant::now() + Duration::from_millis(300)),
        )
        .unwrap();
    assert_eq!(stage, Stage::Waiting);
    assert!(started.elapsed() >= Duration::from_millis(290));
    l.leave(&intr, waiter).unwrap();
    let next = l.enter(&intr, &token()).unwrap();
    assert_eq!(next.stage(), Stage::Waiting);
    l.leave(&intr, next).unwrap();
    l.leave(&intr, running).unwrap();
    assert!(!exists(&client, "t:{giveup}:wait") && !exists(&client, "t:{giveup}:exec"));
}

#[test]
fn release_is_token_checked_and_reports_a_lost_run() {
    let server = RedisServer::start();
    let client = server.client("t");
    let l = lock(&client, "lost", 5_000, 5_000);
    let intr = Interrupt::new();
    let running = l.enter(&intr, &token()).unwrap();
    cmd(
        &client,
        &["SET", "t:{lost}:exec", "someone-else", "PX", "5000"],
    );
    assert!(matches!(l.leave(&intr, running), Err(Error::LockLost(_))));
    assert_eq!(
        cmd(&client, &["GET", "t:{lost}:exec"]),
        redis::Value::BulkString(b"someone-else".to_vec())
    );
}

#[test]
fn an_interrupted_enter_is_recognised_on_retry() {
    let server = RedisServer::start();
    let client = server.client("t");
    let l = lock(&client, "retry", 5_000, 5_000);
    let intr = Interrupt::new();
    let tok = token();
    let first = l.enter(&intr, &tok).unwrap();
    let again = l.enter(&intr, &tok).unwrap();
    assert_eq!(again.stage(), Stage::Running);
    drop(first);
    let w = token();
    assert_eq!(l.enter(&intr, &w).unwrap().stage(), Stage::Waiting);
    assert_eq!(l.enter(&intr, &w).unwrap().stage(), Stage::Waiting);
    l.leave(&intr, again).unwrap();
}

#[test]
fn a_waiter_is_interrupted_promptly() {
    let server = RedisServer::start();
    let client = server.client("t");
    let l = Arc::new(lock(&client, "intr", 5_000, 30_000));
    let intr = Interrupt::new();
    let _running = l.enter(&intr, &token()).unwrap();
    let waiter_intr = Arc::new(Interrupt::new());
    let (l2, wi) = (l.clone(), waiter_intr.clone());
    let handle = std::thread::spawn(move || {
        let mut ticket = l2.enter(&wi, &token()).unwrap();
        let started = Instant::now();
        let result = l2.wait(&wi, &mut ticket, None);
        (result, started.elapsed())
    });
    std::thread::sleep(Duration::from_millis(300));
    waiter_intr.cancel();
    let (result, waited) = handle.join().unwrap();
    assert_eq!(result, Err(Error::Interrupted));
    assert!(
        waited < Duration::from_millis(1500),
        "interrupt took {waited:?}"
    );
}

#[test]
fn a_waiter_sends_few_commands() {
    let server = RedisServer::start();
    let client = server.counted_client("t");
    let l = lock(&client, "quiet", 10_000, 10_000);
    let intr = Interrupt::new();
    let running = l.enter(&intr, &token()).unwrap();
    let mut waiter = l.enter(&intr, &token()).unwrap();
    cmd(&client, &["CONFIG", "RESETSTAT"]);
    l.wait(
        &intr,
        &mut waiter,
        Some(Instant::now() + Duration::from_secs(2)),
    )
    .unwrap();
    let stats = match cmd(&client, &["INFO", "commandstats"]) {
        redis::Value::BulkString(b) => String::from_utf8(b).unwrap(),
        redis::Value::VerbatimString { text, .. } => text,
        other => panic!("INFO answered {other:?}"),
    };
    let calls: u64 = stats
        .lines()
        .filter(|l| {
            l.starts_with("cmdstat_evalsha")
                || l.starts_with("cmdstat_blpop")
                || l.starts_with("cmdstat_eval:")
        })
        .filter_map(|l| {
            l.split("calls=")
                .nth(1)?
                .split(',')
                .next()?
                .parse::<u64>()
                .ok()
        })
        .sum();
    // One BLPOP bounded by EXEC's TTL covers the whole 2 s wait (a 100 ms poller would send 20).
    assert!(calls <= 3, "a 2 s wait sent {calls} commands:\n{stats}");
    l.leave(&intr, waiter).unwrap();
    l.leave(&intr, running).unwrap();
}

/// Many threads trigger one key at random: never two running, never two waiting, and every
/// trigger is followed by a run that started after it (no update lost).
#[test]
fn concurrent_triggers_lose_no_update() {
    let server = RedisServer::start();
    let client = server.client("t");
    let running = Arc::new(AtomicUsize::new(0));
    let waiting = Arc::new(AtomicUsize::new(0));
    let max_running = Arc::new(AtomicUsize::new(0));
    let max_waiting = Arc::new(AtomicUsize::new(0));
    let arrivals = Arc::new(Mutex::new(Vec::new()));
    let starts = Arc::new(Mutex::new(Vec::new()));
    let t0 = Instant::now();
    let threads: Vec<_> = (0..8u64)
        .map(|n| {
            let l = lock(&client, "stress", 5_000, 5_000);
            let (running, waiting) = (running.clone(), waiting.clone());
            let (max_running, max_waiting) = (max_running.clone(), max_waiting.clone());
            let (arrivals, starts) = (arrivals.clone(), starts.clone());
            std::thread::spawn(move || {
                let intr = Interrupt::new();
                for i in 0..25u64 {
                    std::thread::sleep(Duration::from_millis((n * 7 + i * 13) % 20));
                    arrivals.lock().unwrap().push(t0.elapsed());
                    let mut ticket = l.enter(&intr, &token()).unwrap();
                    if ticket.stage() == Stage::Waiting {
                        let w = waiting.fetch_add(1, Ordering::SeqCst) + 1;
                        max_waiting.fetch_max(w, Ordering::SeqCst);
                        let stage = l.wait(&intr, &mut ticket, None).unwrap();
                        // Decrement before the run is counted, as the script swaps WAIT for EXEC.
                        waiting.fetch_sub(1, Ordering::SeqCst);
                        assert_eq!(stage, Stage::Running);
                    }
                    if ticket.stage() == Stage::Running {
                        let r = running.fetch_add(1, Ordering::SeqCst) + 1;
                        max_running.fetch_max(r, Ordering::SeqCst);
                        starts.lock().unwrap().push(t0.elapsed());
                        std::thread::sleep(Duration::from_millis(5));
                        running.fetch_sub(1, Ordering::SeqCst);
                        l.leave(&intr, ticket).unwrap();
                    }
                }
            })
        })
        .collect();
    threads.into_iter().for_each(|t| t.join().unwrap());
    assert_eq!(max_running.load(Ordering::SeqCst), 1);
    // Counted in-process around the calls, so a hand-off may overlap by a moment: at most 2.
    assert!(max_waiting.load(Ordering::SeqCst) <= 2);
    // Each trigger is covered by a run that starts after it, soon (runs take 5 ms).
    let starts = starts.lock().unwrap().clone();
    for arrival in arrivals.lock().unwrap().iter() {
        let next = starts.iter().filter(|s| *s >= arrival).min();
        let next = next
            .unwrap_or_else(|| panic!("the trigger at {arrival:?} was never followed by a run"));
        assert!(
            *next - *arrival < Duration::from_secs(2),
            "the trigger at {arrival:?} waited until {next:?}"
        );
    }
    let runs = starts.len();
    assert!(
        runs < 200,
        "every trigger ran ({runs}): duplicates were not skipped"
    );
}

#[test]
fn rejects_bad_arguments() {
    let server = RedisServer::start();
    let client = server.client("t");
    let zero = DualLockOptions {
        wait_lease: Duration::ZERO,
        lease: Duration::from_secs(1),
    };
    assert!(
        matches!(DualLock::new(&client, "k", zero), Err(Error::Argument(m)) if m.contains("wait_lease"))
    );
    let zero = DualLockOptions {
        wait_lease: Duration::from_secs(1),
        lease: Duration::ZERO,
    };
    assert!(
        matches!(DualLock::new(&client, "k", zero), Err(Error::Argument(m)) if m.contains("lease"))
    );
    assert!(matches!(
        DualLock::new(&client, "a{b", DualLockOptions::default()),
        Err(Error::Argument(_))
    ));
}

/// An arrival whose reply was lost (interrupted: the Ruby side abandons it) holds WAIT in Redis
/// until the background release lands; this process's next duplicate and `state` wait for that
/// release, so the duplicate waits in its place instead of being skipped for a waiter that is
/// gone (a lost update). Repeated: without the wait, `state` usually beats the watchdog thread.
#[test]
fn an_abandoned_waiter_is_gone_for_this_process_at_once() {
    let server = RedisServer::start();
    let client = server.client("t");
    let l = lock(&client, "abandoned", 30_000, 30_000);
    let intr = Interrupt::new();
    let running = l.enter(&intr, &token()).unwrap();
    for round in 0..20 {
        let gone = token();
        let ticket = l.enter(&intr, &gone).unwrap();
        assert_eq!(ticket.stage(), Stage::Waiting);
        drop(ticket);
        l.abandon(&gone);
        assert_eq!(l.state(&intr).unwrap(), (true, false), "round {round}");
        let next = token();
        let ticket = l.enter(&intr, &next).unwrap();
        assert_eq!(ticket.stage(), Stage::Waiting, "round {round}");
        l.leave(&intr, ticket).unwrap();
    }
    l.leave(&intr, running).unwrap();
}
