//! What a ConcurrentLimiter block costs Redis: every command it runs, those inside scripts
//! included (INFO commandstats on a server of its own). Pins the counts so a change that adds
//! work to the hot paths (such as storing the limit for the operators' view) shows up here.

use crate::support::{calls, cmd, contend_once, spawn_gated, until, Gated, RedisServer};
use ferrolock_core::concurrent_limiter::{ConcurrentLimiter, LimiterOptions};
use ferrolock_core::{Client, Interrupt};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Every command run since the last reset, but those named in `except`.
fn commands_run(client: &Client, except: &[&str]) -> i64 {
    calls(client)
        .iter()
        .filter(|(name, _)| !except.contains(&name.as_str()))
        .map(|(_, n)| n)
        .sum()
}

fn reset(client: &Client) {
    cmd(client, &["CONFIG", "RESETSTAT"]);
}

fn limiter(client: &Client, name: &str, limit: u32) -> ConcurrentLimiter {
    let opts = LimiterOptions {
        limit,
        lease: Duration::from_secs(60),
        local_passes: 0,
        fair: true,
    };
    ConcurrentLimiter::new(client, name, opts).unwrap()
}

fn far() -> Instant {
    Instant::now() + Duration::from_secs(30)
}

#[test]
fn an_uncontended_acquire_and_release_cost_eleven_commands() {
    let server = RedisServer::start();
    let client = server.counted_client("t");
    let l = limiter(&client, "free", 3);
    let intr = Interrupt::new();
    let token = ConcurrentLimiter::new_token;
    // Warm up: scripts loaded.
    let slot = l.acquire(&intr, &token(), far()).unwrap().unwrap();
    l.release(&intr, slot).unwrap();
    reset(&client);
    let rounds = 20;
    for _ in 0..rounds {
        let slot = l.acquire(&intr, &token(), far()).unwrap().unwrap();
        l.release(&intr, slot).unwrap();
    }
    // Acquire: EVALSHA, TIME, HMGET (the operators' override: none), ZRANGEBYSCORE (every
    // member: nothing expired to drop, the latest live expiry known), ZADD (the slot and the
    // limit in one), PEXPIRE. Release: EVALSHA, TIME, ZRANGEBYSCORE, LPOP, ZREM (nobody next:
    // the override is not read).
    assert_eq!(
        commands_run(&client, &[]),
        11 * rounds,
        "{:?}",
        calls(&client)
    );
}

/// The free-slot attempt drops expired slots only when there are some, and sets the key's TTL
/// from the slots it read: never below a live slot of a longer lease.
#[test]
fn a_free_slot_attempt_drops_expired_slots_and_keeps_the_longest_lease() {
    let server = RedisServer::start();
    let client = server.counted_client("t");
    let intr = Interrupt::new();
    let with_lease = |secs| {
        let opts = LimiterOptions {
            limit: 3,
            lease: Duration::from_secs(secs),
            local_passes: 0,
            fair: true,
        };
        ConcurrentLimiter::new(&client, "mixed", opts).unwrap()
    };
    let long = with_lease(60);
    let held = long
        .acquire(&intr, &ConcurrentLimiter::new_token(), far())
        .unwrap()
        .unwrap();
    let slots = client.keys("mixed").unwrap().part("slots");
    // A crashed holder's slot, expired long ago.
    cmd(&client, &["ZADD", &slots, "1", "crashed"]);
    reset(&client);
    let short = with_lease(2);
    let slot = short
        .acquire(&intr, &ConcurrentLimiter::new_token(), far())
        .unwrap()
        .unwrap();
    let ran = calls(&client);
    assert!(
        ran.contains(&("zremrangebyscore".to_string(), 1)),
        "{ran:?}"
    );
    assert!(!ran.iter().any(|(name, _)| name == "pttl"), "{ran:?}");
    assert_eq!(
        cmd(&client, &["ZSCORE", &slots, "crashed"]),
        redis::Value::Nil
    );
    let pttl = match cmd(&client, &["PTTL", &slots]) {
        redis::Value::Int(ms) => ms,
        other => panic!("PTTL: {other:?}"),
    };
    assert!(
        pttl > 50_000,
        "the 60 s slot's key now expires in {pttl} ms"
    );
    // Nothing expired now: the next attempt does not try to drop anything.
    reset(&client);
    let third = short
        .acquire(&intr, &ConcurrentLimiter::new_token(), far())
        .unwrap()
        .unwrap();
    let ran = calls(&client);
    assert!(
        !ran.iter().any(|(name, _)| name == "zremrangebyscore"),
        "{ran:?}"
    );
    for (l, s) in [(&long, held), (&short, slot), (&short, third)] {
        l.release(&intr, s).unwrap();
    }
}

#[test]
fn a_contended_hand_off_costs_fourteen_commands() {
    let server = RedisServer::start();
    let client = server.counted_client("t");
    let l = Arc::new(limiter(&client, "busy", 1));
    let intr = Interrupt::new();
    // The process was contended before: its grant inbox listens.
    contend_once(&client, &client, "t");
    let warm = l.acquire(&intr, &ConcurrentLimiter::new_token(), far());
    l.release(&intr, warm.unwrap().unwrap()).unwrap();
    let held = l
        .acquire(&intr, &ConcurrentLimiter::new_token(), far())
        .unwrap()
        .unwrap();
    reset(&client);
    let waiter = {
        let l = l.clone();
        std::thread::spawn(move || {
            let intr = Interrupt::new();
            l.acquire(&intr, &ConcurrentLimiter::new_token(), far())
                .unwrap()
                .unwrap()
        })
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    let line = client.keys("busy").unwrap().part("line");
    while ferrolock_core::client::int(&cmd(&client, &["LLEN", &line])).unwrap() < 1 {
        assert!(Instant::now() < deadline, "the waiter never queued");
        std::thread::sleep(Duration::from_millis(5));
    }
    l.release(&intr, held).unwrap();
    let entered = waiter.join().unwrap();
    // Everything but the polling LLENs (and the SUBSCRIBE of the process's grant inbox, once):
    // the waiter's attempt (EVALSHA, TIME, HMGET override, ZRANGEBYSCORE, RPUSH, PEXPIRE), the
    // release (EVALSHA, TIME, ZRANGEBYSCORE, LPOP, HMGET override, PUBLISH to the waiter's
    // inbox, ZADD, ZREM).
    let block = commands_run(&client, &["llen", "subscribe"]);
    assert_eq!(block, 14, "{:?}", calls(&client));
    l.release(&intr, entered).unwrap();
}

fn queued(client: &Client, name: &str) -> i64 {
    let line = client.keys(name).unwrap().part("line");
    ferrolock_core::client::int(&cmd(client, &["LLEN", &line])).unwrap()
}

/// Commands run since the reset but the polling LLENs (and the SUBSCRIBE of a grant inbox, run
/// once per process), with the stats for a failure message. The count is read once `grants`
/// PUBLISHes are in.
fn section_commands(client: &Client, grants: i64) -> (i64, Vec<(String, i64)>) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let stats = calls(client);
        let published = stats.iter().find(|c| c.0 == "publish").map_or(0, |c| c.1);
        if published < grants && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
            continue;
        }
        return (commands_run(client, &["llen", "subscribe"]), stats);
    }
}

/// A thread that takes a slot, says so, and releases when told.
fn gated(l: &Arc<ConcurrentLimiter>) -> Gated<(), ()> {
    let l = l.clone();
    spawn_gated(move |gate| {
        let intr = Interrupt::new();
        let slot = l
            .acquire(&intr, &ConcurrentLimiter::new_token(), far())
            .unwrap()
            .expect("a slot within 30 s");
        gate.entered(());
        gate.wait_go();
        l.release(&intr, slot).unwrap();
    })
}

/// Measures `scenario` (which returns the section's command count) until it gives `pinned`, at
/// most three times: a local waiter left with nobody of its process in Redis attempts by itself
/// after 100 ms (concurrent_limiter.rs, `UNQUEUED_GRACE`), which a stall of the loaded test machine between
/// the grant and the release would show as one attempt more. A change of the cost itself shows
/// in every run.
fn pinned_cost(pinned: i64, mut scenario: impl FnMut(&str) -> (i64, Vec<(String, i64)>)) {
    let mut runs = Vec::new();
    for run in 0..3 {
        let (section, stats) = scenario(&format!("run{run}"));
        if section == pinned {
            return;
        }
        runs.push((section, stats));
    }
    panic!("expected {pinned} commands: {runs:?}");
}

#[test]
fn a_hand_off_to_a_local_waiter_costs_nine_commands() {
    let server = RedisServer::start();
    let client = server.counted_client("t");
    contend_once(&client, &client, "t");
    pinned_cost(9, |name| {
        let l = Arc::new(limiter(&client, name, 1));
        let intr = Interrupt::new();
        let warm = l.acquire(&intr, &ConcurrentLimiter::new_token(), far());
        l.release(&intr, warm.unwrap().unwrap()).unwrap();
        let held = l
            .acquire(&intr, &ConcurrentLimiter::new_token(), far())
            .unwrap()
            .unwrap();
        let first = gated(&l);
        until("the first waiter queued", || queued(&client, name) == 1);
        let second = gated(&l);
        until("the second waiter waits locally", || l.local_waiters() == 1);
        l.release(&intr, held).unwrap();
        first.wait_entered();
        // The process has nobody in the Redis line now: the first one's release queues the
        // second.
        reset(&client);
        first.release();
        second.wait_entered();
        // The release (EVALSHA, TIME, ZRANGEBYSCORE, RPUSH entry, LPOP, HMGET override, PUBLISH
        // grant, ZADD, ZREM): the second one runs no attempt of its own, and no command to wait.
        let measured = section_commands(&client, 1);
        second.release();
        assert_eq!(queued(&client, name), 0);
        measured
    });
}

fn line_pttl(client: &Client, name: &str) -> i64 {
    let line = client.keys(name).unwrap().part("line");
    ferrolock_core::client::int(&cmd(client, &["PTTL", &line])).unwrap()
}

/// The steady state between two processes (clients), measured until it costs `pinned`: A1's
/// release queues A2 at the tail (behind B1) and hands over to B1. `forget`: process A forgets
/// when it last set the line's TTL (as a line made anew would), so that release must set it
/// again. Each run checks that the line still outlives A2's entry (its 30 s deadline + 1 s).
fn block_between_processes(pinned: i64, forget: bool) {
    let server = RedisServer::start();
    let (a, b) = (server.counted_client("t"), server.counted_client("t"));
    // Both processes were contended before: their grant inboxes listen.
    contend_once(&a, &a, "t");
    contend_once(&a, &b, "t");
    pinned_cost(pinned, |name| {
        let la = Arc::new(limiter(&a, name, 1));
        let lb = Arc::new(limiter(&b, name, 1));
        let intr = Interrupt::new();
        for l in [&la, &lb] {
            let warm = l.acquire(&intr, &ConcurrentLimiter::new_token(), far());
            l.release(&intr, warm.unwrap().unwrap()).unwrap();
        }
        // Process A holds, A1 and then B1 queue in Redis, A2 waits locally behind A1.
        let held = la
            .acquire(&intr, &ConcurrentLimiter::new_token(), far())
            .unwrap()
            .unwrap();
        let a1 = gated(&la);
        until("A1 queued", || queued(&a, name) == 1);
        let b1 = gated(&lb);
        until("B1 queued", || queued(&a, name) == 2);
        let a2 = gated(&la);
        until("A2 waits locally", || la.local_waiters() == 1);
        la.release(&intr, held).unwrap();
        a1.wait_entered();
        if forget {
            la.forget_line_refresh();
        }
        reset(&a);
        a1.release();
        b1.wait_entered();
        let measured = section_commands(&a, 1);
        let pttl = line_pttl(&a, name);
        assert!(pttl > 31_000, "the line outlives A2's entry: PTTL {pttl}");
        assert_eq!(queued(&a, name), 1, "A2 queued behind B1");
        b1.release();
        a2.wait_entered();
        a2.release();
        assert_eq!(queued(&a, name), 0);
        measured
    });
}

#[test]
fn a_contended_block_between_processes_costs_nine_commands() {
    // The release (EVALSHA, TIME, ZRANGEBYSCORE, RPUSH entry, LPOP, HMGET override, PUBLISH to
    // B's inbox, ZADD, ZREM). No PEXPIRE of the line: A1's own attempt set its TTL (2 x (60 s + 1 s)) moments
    // ago, which covers A2's entry (at most a lease + 1 s).
    block_between_processes(9, false);
}

#[test]
fn a_release_sets_the_line_ttl_when_its_process_does_not_know_it() {
    // As above, plus the line's PEXPIRE.
    block_between_processes(10, true);
}
