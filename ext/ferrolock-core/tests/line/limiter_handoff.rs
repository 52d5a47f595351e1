//! ConcurrentLimiter's direct hand-off, what only slots have (handoff.rs runs what it shares with
//! DistMutex against both): a release gives its slot to the first waiter of `<ns>:{name}:line`
//! still waiting; dead, timed-out and interrupted waiters never keep a slot past their bounds, a
//! limit of several slots is never exceeded, and nothing is left in Redis without a TTL.

use crate::support::{cmd, grant_keys, keys_without_ttl, until, RedisServer};
use ferrolock_core::client::int;
use ferrolock_core::concurrent_limiter::{ConcurrentLimiter, LimiterOptions, LimiterStatus};
use ferrolock_core::{Client, Error, Interrupt};
use redis::Value;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The real acquire script, run by hand to queue a waiter that dies at once (nobody pops its
/// grant, nobody gives up for it).
const ACQUIRE_LUA: &str = include_str!("../../lua/concurrent_limiter/acquire.lua");

fn limiter(client: &Client, name: &str, limit: u32, lease_ms: u64) -> ConcurrentLimiter {
    let opts = LimiterOptions {
        limit,
        lease: Duration::from_millis(lease_ms),
        local_passes: 0,
        fair: true,
    };
    ConcurrentLimiter::new(client, name, opts).unwrap()
}

fn token() -> String {
    ConcurrentLimiter::new_token()
}

fn after(ms: u64) -> Instant {
    Instant::now() + Duration::from_millis(ms)
}

fn key(client: &Client, name: &str, part: &str) -> String {
    client.keys(name).unwrap().part(part)
}

fn grant_key(client: &Client, name: &str, token: &str) -> String {
    key(client, name, &format!("grant:{token}"))
}

fn line_len(client: &Client, name: &str) -> i64 {
    int(&cmd(client, &["LLEN", &key(client, name, "line")])).unwrap()
}

fn exists(client: &Client, key: &str) -> bool {
    int(&cmd(client, &["EXISTS", key])).unwrap() == 1
}

/// The slot's expiry (ms of Redis time) when `token` has a member in the slots set.
fn slot_of(client: &Client, name: &str, token: &str) -> Option<String> {
    match cmd(client, &["ZSCORE", &key(client, name, "slots"), token]) {
        Value::Nil => None,
        Value::BulkString(b) => Some(String::from_utf8(b).unwrap()),
        other => panic!("ZSCORE: {other:?}"),
    }
}

fn status(l: &ConcurrentLimiter) -> LimiterStatus {
    l.status(&Interrupt::new()).unwrap()
}

/// Waits (generously: the machine may be loaded) until `n` waiters are in line.
fn until_queued(client: &Client, name: &str, n: i64) {
    until(&format!("{n} waiters in line"), || {
        line_len(client, name) >= n
    });
}

/// Queues `token` as a waiter that plans to wait `wait_ms`, then dies on the spot: the same
/// script a failed attempt runs, with nobody ever popping the grant or leaving the line.
fn enqueue_and_die(client: &Client, name: &str, token: &str, lease_ms: u64, wait_ms: u64) {
    let (slots, line, grant, overridden) = (
        key(client, name, "slots"),
        key(client, name, "line"),
        grant_key(client, name, token),
        key(client, name, "override"),
    );
    let (lease, wait) = (lease_ms.to_string(), wait_ms.to_string());
    // The line's TTL every writer sets (ConcurrentLimiter::line_ttl).
    let line_ttl = (2 * (lease_ms.max(1000) + 1000)).to_string();
    let reply = cmd(
        client,
        &[
            "EVAL",
            ACQUIRE_LUA,
            "4",
            &slots,
            &line,
            &grant,
            &overridden,
            token,
            "1",
            &lease,
            &wait,
            "",
            "0",
            &line_ttl,
        ],
    );
    let Value::Array(items) = reply else {
        panic!("acquire.lua: {reply:?}")
    };
    assert_eq!(items.len(), 3, "queued (full, with an entry): {items:?}");
}

#[test]
fn a_slot_handed_to_a_waiter_that_died_is_back_within_its_lease() {
    let server = RedisServer::start();
    let client = server.client("t");
    let lease_ms = 1_000;
    let l = limiter(&client, "crash", 1, lease_ms);
    let intr = Interrupt::new();
    let held = l.acquire(&intr, &token(), after(0)).unwrap().unwrap();
    // Died while its entry was still live: the release hands it the slot, which nobody renews.
    let victim = token();
    enqueue_and_die(&client, "crash", &victim, lease_ms, 30_000);
    let released = Instant::now();
    l.release(&intr, held).unwrap();
    assert!(
        slot_of(&client, "crash", &victim).is_some(),
        "the slot went to the waiter first in line"
    );
    let grant = grant_key(&client, "crash", &victim);
    let grant_ttl = int(&cmd(&client, &["PTTL", &grant])).unwrap();
    assert!(
        grant_ttl > 0,
        "an unpopped grant expires (PTTL {grant_ttl})"
    );
    let slot = l
        .acquire(&intr, &token(), after(15_000))
        .unwrap()
        .expect("the dead waiter's slot came back");
    let waited = released.elapsed();
    // One lease, plus the waiter's 1 s re-check and slack for a loaded VM: "not 15 s".
    assert!(
        waited < Duration::from_millis(lease_ms + 4_000),
        "took {waited:?}"
    );
    assert_eq!(slot_of(&client, "crash", &victim), None);
    l.release(&intr, slot).unwrap();
    assert_eq!(keys_without_ttl(&client), Vec::<String>::new());
}

#[test]
fn a_waiter_that_times_out_leaves_no_entry_and_no_grant() {
    let server = RedisServer::start();
    let client = server.client("t");
    let l = limiter(&client, "late", 1, 30_000);
    let intr = Interrupt::new();
    let held = l.acquire(&intr, &token(), after(0)).unwrap().unwrap();
    let late = token();
    let started = Instant::now();
    assert!(l.acquire(&intr, &late, after(300)).unwrap().is_none());
    assert!(started.elapsed() >= Duration::from_millis(290));
    assert_eq!(line_len(&client, "late"), 0);
    assert!(!exists(&client, &grant_key(&client, "late", &late)));
    assert_eq!(slot_of(&client, "late", &late), None);
    assert_eq!(keys_without_ttl(&client), Vec::<String>::new());
    l.release(&intr, held).unwrap();
    assert_eq!(status(&l).in_use, 0);
}

/// A waiter cut short while waiting (as the binding's call is on an interrupt): it keeps its
/// place for a retry with the same token.
fn cut_short_waiter(client: &Client, l: &Arc<ConcurrentLimiter>, name: &str, token: &str) {
    let cut = Arc::new(Interrupt::new());
    let waiter = {
        let (l, cut, token) = (l.clone(), cut.clone(), token.to_string());
        std::thread::spawn(move || l.acquire(&cut, &token, after(20_000)).map(|s| s.is_some()))
    };
    until_queued(client, name, 1);
    cut.cancel();
    assert!(matches!(waiter.join().unwrap(), Err(Error::Interrupted)));
}

#[test]
fn a_retried_call_takes_the_slot_granted_while_it_was_cut_short() {
    let server = RedisServer::start();
    let client = server.client("t");
    let l = Arc::new(limiter(&client, "retry", 1, 30_000));
    let intr = Interrupt::new();
    let held = l.acquire(&intr, &token(), after(0)).unwrap().unwrap();
    let retried = token();
    cut_short_waiter(&client, &l, "retry", &retried);
    l.release(&intr, held).unwrap();
    // No wait: the slot is already this token's (30 s lease, 5 s deadline).
    let started = Instant::now();
    let slot = l.acquire(&intr, &retried, after(5_000)).unwrap();
    assert!(started.elapsed() < Duration::from_secs(2));
    let slot = slot.expect("the granted slot");
    assert_eq!(slot.token(), retried);
    assert_eq!(status(&l).in_use, 1);
    // The grant nobody popped is gone with the retry.
    assert!(!exists(&client, &grant_key(&client, "retry", &retried)));
    l.release(&intr, slot).unwrap();
    assert_eq!(line_len(&client, "retry"), 0);
    assert_eq!(keys_without_ttl(&client), Vec::<String>::new());
}

#[test]
fn many_threads_never_exceed_the_limit_and_take_turns() {
    let server = RedisServer::start();
    let client = server.client("t");
    let (limit, threads, rounds) = (3usize, 12usize, 30usize);
    let inside = Arc::new(AtomicUsize::new(0));
    let max_inside = Arc::new(AtomicUsize::new(0));
    let done: Arc<Vec<AtomicUsize>> = Arc::new((0..threads).map(|_| AtomicUsize::new(0)).collect());
    // Rounds done by every thread when the first one finished all of its own.
    let at_first_finish = Arc::new(Mutex::new(None::<Vec<usize>>));
    let workers: Vec<_> = (0..threads)
        .map(|me| {
            let l = limiter(&client, "many", limit as u32, 5_000);
            let (inside, max_inside) = (inside.clone(), max_inside.clone());
            let (done, at_first_finish) = (done.clone(), at_first_finish.clone());
            std::thread::spawn(move || {
                let intr = Interrupt::new();
                for _ in 0..rounds {
                    let slot = l
                        .acquire(&intr, &token(), after(30_000))
                        .unwrap()
                        .expect("a slot within 30 s");
                    let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                    max_inside.fetch_max(now, Ordering::SeqCst);
                    std::thread::sleep(Duration::from_millis(1));
                    inside.fetch_sub(1, Ordering::SeqCst);
                    done[me].fetch_add(1, Ordering::SeqCst);
                    l.release(&intr, slot).unwrap();
                }
                let mut first = at_first_finish.lock().unwrap();
                if first.is_none() {
                    *first = Some(done.iter().map(|d| d.load(Ordering::SeqCst)).collect());
                }
            })
        })
        .collect();
    workers.into_iter().for_each(|w| w.join().unwrap());
    assert_eq!(
        max_inside.load(Ordering::SeqCst),
        limit,
        "never more than {limit} inside, and {limit} were reached"
    );
    // FIFO: a releaser queues behind those already waiting, so nobody runs far ahead. A barging
    // limiter lets the releaser take its slot straight back and finish long before the others.
    // (A third of the rounds: threads stalled on a loaded machine lose some turns.)
    let first = at_first_finish.lock().unwrap().clone().unwrap();
    assert!(
        first.iter().all(|&n| n >= rounds / 3),
        "rounds done when the first thread finished: {first:?}"
    );
    let l = limiter(&client, "many", limit as u32, 5_000);
    assert_eq!(
        status(&l),
        LimiterStatus {
            limit: limit as u32,
            in_use: 0,
            waiting: 0
        }
    );
    assert_eq!(grant_keys(&client), Value::Array(vec![]));
    assert_eq!(keys_without_ttl(&client), Vec::<String>::new());
}

#[test]
fn room_left_by_an_earlier_release_goes_to_the_next_waiters_in_line_never_past_the_limit() {
    let server = RedisServer::start();
    let client = server.client("t");
    let l = limiter(&client, "room", 3, 30_000);
    let intr = Interrupt::new();
    // One slot held of three: two are free, as after releases that found nobody in line while
    // the waiters of other processes waited in their processes.
    let held = l.acquire(&intr, &token(), after(0)).unwrap().unwrap();
    // Three waiters queued as if full (the script run with a limit of 1): they wait on their
    // grants and attempt no more (dead to Redis, live entries).
    let waiters = [token(), token(), token()];
    for t in &waiters {
        enqueue_and_die(&client, "room", t, 30_000, 30_000);
    }
    l.release(&intr, held).unwrap();
    // The release handed its own slot to the first and the two free ones to the next two: three
    // in use, the limit.
    for t in &waiters[..2] {
        assert!(slot_of(&client, "room", t).is_some(), "granted");
        assert!(exists(&client, &grant_key(&client, "room", t)));
    }
    assert!(
        slot_of(&client, "room", &waiters[2]).is_some(),
        "room for the third"
    );
    assert_eq!(status(&l).in_use, 3);
    assert_eq!(line_len(&client, "room"), 0);
    assert_eq!(keys_without_ttl(&client), Vec::<String>::new());
}

#[test]
fn a_full_limiter_hands_over_only_the_released_slot() {
    let server = RedisServer::start();
    let client = server.client("t");
    let l = limiter(&client, "full", 2, 30_000);
    let intr = Interrupt::new();
    let held = l.acquire(&intr, &token(), after(0)).unwrap().unwrap();
    let kept = l.acquire(&intr, &token(), after(0)).unwrap().unwrap();
    let waiters = [token(), token()];
    for t in &waiters {
        enqueue_and_die(&client, "full", t, 30_000, 30_000);
    }
    l.release(&intr, held).unwrap();
    assert!(slot_of(&client, "full", &waiters[0]).is_some());
    assert_eq!(
        slot_of(&client, "full", &waiters[1]),
        None,
        "no room for a second"
    );
    assert_eq!(status(&l).in_use, 2);
    assert_eq!(line_len(&client, "full"), 1);
    l.release(&intr, kept).unwrap();
    assert!(slot_of(&client, "full", &waiters[1]).is_some());
    assert_eq!(status(&l).in_use, 2);
}

/// An interrupted waiter holds nothing: right after it was given up and the holder released,
/// this process's `status` shows no slot in use, even when the release handed the slot to the
/// interrupted waiter before its background give-back ran (unanswered_releases.rs).
#[test]
fn status_right_after_an_interrupted_wait_and_the_release_shows_no_slot_in_use() {
    let server = RedisServer::start();
    let client = server.client("t");
    let l = Arc::new(limiter(&client, "left", 1, 30_000));
    let intr = Interrupt::new();
    for round in 0..20 {
        let held = l.acquire(&intr, &token(), after(0)).unwrap().unwrap();
        let gone = token();
        cut_short_waiter(&client, &l, "left", &gone);
        // What the binding does when a wait was cut short, then the holder leaves at once.
        l.abandon(&gone);
        l.release(&intr, held).unwrap();
        assert_eq!(
            status(&l).in_use,
            0,
            "round {round}: a slot stayed with the interrupted waiter"
        );
    }
}
