//! What a DistMutex section costs Redis: every command it runs, those inside scripts included
//! (INFO commandstats on a server of its own). Pins the counts of issue 16 so a change that
//! adds work to the hot paths shows up here. A client stands for a process. Hand-offs through
//! Redis are measured with `local_passes: 0` (a local pass, tests/line/cohort.rs, costs none).

use crate::support::{cmd, commands_run, contend_once, spawn_gated, until, Gated, RedisServer};
use ferrolock_core::client::int;
use ferrolock_core::{Client, Interrupt};
use ferrolock_core::{DistMutex, DistMutexOptions};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Every hand-off through Redis: no cohort passes.
fn through_redis() -> DistMutexOptions {
    DistMutexOptions {
        fair: true,
        local_passes: 0,
        ..DistMutexOptions::default()
    }
}

fn reset(client: &Client) {
    cmd(client, &["CONFIG", "RESETSTAT"]);
}

fn queued(client: &Client, name: &str) -> i64 {
    ferrolock_core::client::int(&cmd(client, &["LLEN", &format!("t:{{{name}}}:waiters")])).unwrap()
}

#[test]
fn an_uncontended_lock_and_unlock_cost_seven_commands() {
    let server = RedisServer::start();
    let client = server.counted_client("t");
    let m = DistMutex::new(&client, "free", through_redis()).unwrap();
    let intr = Interrupt::new();
    // Warm up: scripts loaded, connection's client id known.
    m.unlock(&intr, m.lock(&intr, &DistMutex::new_token(), None).unwrap())
        .unwrap();
    reset(&client);
    let rounds = 20;
    for _ in 0..rounds {
        let held = m.lock(&intr, &DistMutex::new_token(), None).unwrap();
        m.unlock(&intr, held).unwrap();
    }
    // Acquire: EVALSHA, TIME, SET NX PXAT, SET (fence). Release: EVALSHA, LPOP, GETDEL.
    assert_eq!(commands_run(&client), 7 * rounds);
}

#[test]
fn an_unfenced_uncontended_lock_and_unlock_cost_five_commands_and_issue_no_token() {
    let server = RedisServer::start();
    let client = server.counted_client("t");
    let opts = DistMutexOptions {
        fencing: false,
        ..through_redis()
    };
    let m = DistMutex::new(&client, "free", opts).unwrap();
    let intr = Interrupt::new();
    let held = m.lock(&intr, &m.token(), None).unwrap();
    assert_eq!(held.fencing_token(), 0);
    // The lease is the options' (PX from the script's start).
    let pttl = int(&cmd(&client, &["PTTL", "t:{free}:lock"])).unwrap();
    assert!(pttl > 25_000 && pttl <= 30_000, "{pttl}");
    m.unlock(&intr, held).unwrap();
    reset(&client);
    let rounds = 20;
    for _ in 0..rounds {
        let held = m.lock(&intr, &m.token(), None).unwrap();
        assert_eq!(held.fencing_token(), 0);
        m.unlock(&intr, held).unwrap();
    }
    // Acquire: EVALSHA, SET NX PX. Release: EVALSHA, LPOP, GETDEL.
    assert_eq!(commands_run(&client), 5 * rounds);
    // No counter was written: nothing of the name is left.
    assert_eq!(int(&cmd(&client, &["DBSIZE"])).unwrap(), 0);
}

#[test]
fn a_contended_hand_off_costs_twelve_commands() {
    let server = RedisServer::start();
    let client = server.counted_client("t");
    let m = Arc::new(DistMutex::new(&client, "busy", through_redis()).unwrap());
    let intr = Interrupt::new();
    m.unlock(&intr, m.lock(&intr, &DistMutex::new_token(), None).unwrap())
        .unwrap();
    // The process was contended before: its grant inbox listens.
    contend_once(&client, &client, "t");
    let held = m.lock(&intr, &DistMutex::new_token(), None).unwrap();
    reset(&client);
    let waiter = {
        let m = m.clone();
        std::thread::spawn(move || {
            let intr = Interrupt::new();
            m.lock(&intr, &DistMutex::new_token(), None).unwrap()
        })
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while queued(&client, "busy") < 1 {
        assert!(Instant::now() < deadline, "the waiter never queued");
        std::thread::sleep(Duration::from_millis(5));
    }
    m.unlock(&intr, held).unwrap();
    let entered = waiter.join().unwrap();
    // Everything but the polling LLENs (and the SUBSCRIBE of the process's grant inbox, once):
    // the waiter's attempt (EVALSHA, TIME, SET NX, PTTL, RPUSH, PEXPIRE), the release
    // (EVALSHA, LPOP, TIME, SET lock GET, SET fence, PUBLISH to the waiter's inbox). A second
    // thread of the waiter's process would not run an attempt: see the tests below.
    let (section, stats) = section_commands(&client, 1);
    assert_eq!(section, 12, "{stats}");
    m.unlock(&intr, entered).unwrap();
}

/// Commands run since the reset but the polling LLENs (and the SUBSCRIBE of a grant inbox, run
/// once per process), with the stats for a failure message. The count is read once `grants`
/// PUBLISHes are in.
fn section_commands(client: &Client, grants: i64) -> (i64, String) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let stats = match cmd(client, &["INFO", "commandstats"]) {
            redis::Value::BulkString(b) => String::from_utf8(b).unwrap(),
            other => panic!("INFO: {other:?}"),
        };
        let calls: Vec<(&str, i64)> = stats
            .lines()
            .filter_map(|l| l.strip_prefix("cmdstat_"))
            .map(|l| {
                let (name, rest) = l.split_once(':').unwrap();
                let calls = rest.split(['=', ',']).nth(1).unwrap().parse().unwrap();
                (name, calls)
            })
            .collect();
        let calls_of = |name: &str| calls.iter().find(|c| c.0 == name).map_or(0, |c| c.1);
        if calls_of("publish") < grants && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
            continue;
        }
        let skipped = ["info", "llen", "subscribe"];
        let section = calls
            .iter()
            .filter(|(name, _)| !skipped.contains(name) && !name.starts_with("config"))
            .map(|c| c.1)
            .sum();
        return (section, stats);
    }
}

/// A thread that takes the lock, reports its fencing token, and releases when told.
fn gated(m: &Arc<DistMutex>) -> Gated<i64, ()> {
    let m = m.clone();
    spawn_gated(move |gate| {
        let intr = Interrupt::new();
        let held = m.lock(&intr, &DistMutex::new_token(), None).unwrap();
        gate.entered(held.fencing_token());
        gate.wait_go();
        m.unlock(&intr, held).unwrap();
    })
}

#[test]
fn a_hand_off_to_a_local_waiter_costs_seven_commands() {
    let server = RedisServer::start();
    let client = server.counted_client("t");
    let m = Arc::new(DistMutex::new(&client, "local", through_redis()).unwrap());
    let intr = Interrupt::new();
    m.unlock(&intr, m.lock(&intr, &DistMutex::new_token(), None).unwrap())
        .unwrap();
    contend_once(&client, &client, "t");
    let held = m.lock(&intr, &DistMutex::new_token(), None).unwrap();
    let first = gated(&m);
    until("the first waiter queued", || queued(&client, "local") == 1);
    let second = gated(&m);
    until("the second waiter waits locally", || m.local_waiters() == 1);
    m.unlock(&intr, held).unwrap();
    first.wait_entered();
    // The process has nobody in the Redis line now: the first one's release queues the second.
    reset(&client);
    first.release();
    second.wait_entered();
    // The release (EVALSHA, TIME, RPUSH entry, LPOP, SET lock GET, SET fence, PUBLISH grant):
    // the second one runs no attempt of its own, and no command to wait.
    let (section, stats) = section_commands(&client, 1);
    assert_eq!(section, 7, "{stats}");
    second.release();
    assert_eq!(queued(&client, "local"), 0);
}

fn line_pttl(client: &Client, name: &str) -> i64 {
    ferrolock_core::client::int(&cmd(client, &["PTTL", &format!("t:{{{name}}}:waiters")])).unwrap()
}

/// The steady state between two processes (clients): A1's release queues A2 at the tail (behind
/// B1) and hands over to B1. Returns the commands of that section (with the stats) and the
/// line's PTTL right after. `forget`: process A forgets when it last set the line's TTL (as a
/// line made anew would), so that release must set it again.
fn section_between_processes(name: &str, forget: bool) -> (i64, String, i64) {
    let server = RedisServer::start();
    let (a, b) = (server.counted_client("t"), server.counted_client("t"));
    let ma = Arc::new(DistMutex::new(&a, name, through_redis()).unwrap());
    let mb = Arc::new(DistMutex::new(&b, name, through_redis()).unwrap());
    let intr = Interrupt::new();
    // Both processes were contended before: their grant inboxes listen.
    contend_once(&a, &a, "t");
    contend_once(&a, &b, "t");
    ma.unlock(
        &intr,
        ma.lock(&intr, &DistMutex::new_token(), None).unwrap(),
    )
    .unwrap();
    mb.unlock(
        &intr,
        mb.lock(&intr, &DistMutex::new_token(), None).unwrap(),
    )
    .unwrap();
    // Process A holds, A1 and then B1 queue in Redis, A2 waits locally behind A1.
    let held = ma.lock(&intr, &DistMutex::new_token(), None).unwrap();
    let a1 = gated(&ma);
    until("A1 queued", || queued(&a, name) == 1);
    let b1 = gated(&mb);
    until("B1 queued", || queued(&a, name) == 2);
    let a2 = gated(&ma);
    until("A2 waits locally", || ma.local_waiters() == 1);
    ma.unlock(&intr, held).unwrap();
    a1.wait_entered();
    if forget {
        ma.forget_line_refresh();
    }
    reset(&a);
    a1.release();
    b1.wait_entered();
    let (section, stats) = section_commands(&a, 1);
    let pttl = line_pttl(&a, name);
    assert_eq!(queued(&a, name), 1, "A2 queued behind B1");
    b1.release();
    a2.wait_entered();
    a2.release();
    assert_eq!(queued(&a, name), 0);
    (section, stats, pttl)
}

#[test]
fn a_contended_section_between_processes_costs_seven_commands() {
    let (section, stats, pttl) = section_between_processes("steady", false);
    // The release (EVALSHA, TIME, RPUSH entry, LPOP, SET lock GET, SET fence, PUBLISH to B's
    // inbox). No PEXPIRE of the line: A1's own attempt set its TTL (2 x (30 s + 1 s)) moments
    // ago, which covers A2's entry (a lock TTL + 1 s).
    assert_eq!(section, 7, "{stats}");
    assert!(pttl > 31_000, "the line outlives A2's entry: PTTL {pttl}");
}

#[test]
fn a_release_sets_the_line_ttl_when_its_process_does_not_know_it() {
    let (section, stats, pttl) = section_between_processes("refresh", true);
    // As above, plus the line's PEXPIRE, to the whole line TTL.
    assert_eq!(section, 8, "{stats}");
    assert!(pttl > 31_000, "the line outlives A2's entry: PTTL {pttl}");
}
