//! One DualLock waiter per process per key (src/dual_lock_local.rs): while a thread of this
//! process (client) waits for a key, the process's other duplicates are skipped without any Redis
//! command; every other case goes to Redis as before. Commands are counted with INFO
//! commandstats on a server of each test's own. A client stands for a process here.

use crate::support::{cmd, until, RedisServer};
use ferrolock_core::{Client, Error, Interrupt};
use ferrolock_core::{DualLock, DualLockOptions, Stage, Ticket};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn lock(client: &Client, key: &str, wait_ms: u64) -> Arc<DualLock> {
    let opts = DualLockOptions {
        wait_lease: Duration::from_millis(wait_ms),
        lease: Duration::from_secs(60),
    };
    Arc::new(DualLock::new(client, key, opts).unwrap())
}

fn token() -> String {
    DualLock::new_token()
}

fn info(client: &Client, section: &str) -> String {
    match cmd(client, &["INFO", section]) {
        redis::Value::BulkString(b) => String::from_utf8(b).unwrap(),
        redis::Value::VerbatimString { text, .. } => text,
        other => panic!("INFO answered {other:?}"),
    }
}

/// Every command run since the last CONFIG RESETSTAT, but the test's own INFO/CONFIG probes.
fn commands_run(client: &Client) -> i64 {
    info(client, "commandstats")
        .lines()
        .filter_map(|l| l.strip_prefix("cmdstat_"))
        .filter(|l| !l.starts_with("info:") && !l.starts_with("config"))
        .map(|l| {
            let calls = l.split("calls=").nth(1).unwrap().split(',').next().unwrap();
            calls.parse::<i64>().unwrap()
        })
        .sum()
}

fn reset(client: &Client) {
    cmd(client, &["CONFIG", "RESETSTAT"]);
}

fn blocked_clients(client: &Client) -> i64 {
    info(client, "clients")
        .lines()
        .find_map(|l| l.strip_prefix("blocked_clients:"))
        .map_or(0, |n| n.trim().parse().unwrap())
}

/// What a waiter thread's wait ended with, and whether it was still registered right after.
type Waited = (Result<Stage, Error>, bool);

/// A thread that enters (it must be told to wait), waits with no deadline and leaves at once.
/// Returned once it blocks in Redis for its grant.
fn waiter(
    l: &Arc<DualLock>,
    client: &Client,
    intr: Arc<Interrupt>,
) -> (String, std::thread::JoinHandle<Waited>) {
    let blocked_before = blocked_clients(client);
    let t = token();
    let (l2, t2) = (l.clone(), t.clone());
    let thread = std::thread::spawn(move || {
        let mut ticket = l2.enter(&intr, &t2).unwrap();
        assert_eq!(ticket.stage(), Stage::Waiting);
        let stage = l2.wait(&intr, &mut ticket, None);
        let registered = l2.local_waiter().as_deref() == Some(t2.as_str());
        l2.leave(&Interrupt::new(), ticket).unwrap();
        (stage, registered)
    });
    until("the waiter registered and blocked on its grant", || {
        l.local_waiter().as_deref() == Some(t.as_str()) && blocked_clients(client) > blocked_before
    });
    (t, thread)
}

fn enter_all(l: &Arc<DualLock>, threads: usize, each: usize) -> Vec<Stage> {
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let l = l.clone();
            std::thread::spawn(move || {
                let intr = Interrupt::new();
                (0..each)
                    .map(|_| {
                        let ticket = l.enter(&intr, &token()).unwrap();
                        let stage = ticket.stage();
                        l.leave(&intr, ticket).unwrap();
                        stage
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect()
}

#[test]
fn newcomers_of_the_process_cost_no_command_while_its_waiter_waits() {
    let server = RedisServer::start();
    let client = server.counted_client("t");
    let l = lock(&client, "quiet", 60_000);
    let intr = Interrupt::new();
    let running = l.enter(&intr, &token()).unwrap();
    assert_eq!(running.stage(), Stage::Running);
    let (_, waiting) = waiter(&l, &client, Arc::new(Interrupt::new()));
    reset(&client);
    let stages = enter_all(&l, 4, 25);
    assert!(stages.iter().all(|s| *s == Stage::Skipped), "{stages:?}");
    assert_eq!(
        commands_run(&client),
        0,
        "100 local skips sent commands:\n{}",
        info(&client, "commandstats")
    );
    // Another process (client) still asks Redis, and is skipped there.
    let other = server.counted_client("t");
    let l_other = lock(&other, "quiet", 60_000);
    assert_eq!(l_other.local_waiter(), None);
    assert_eq!(
        l_other.enter(&intr, &token()).unwrap().stage(),
        Stage::Skipped
    );
    assert!(commands_run(&client) > 0);
    l.leave(&intr, running).unwrap();
    let (stage, registered) = waiting.join().unwrap();
    assert_eq!(stage.unwrap(), Stage::Running);
    assert!(!registered, "still registered once running");
    assert_eq!(l.local_waiter(), None);
    assert_eq!(l.state(&intr).unwrap(), (false, false));
}

#[test]
fn a_newcomer_after_the_waiter_was_promoted_goes_to_redis_and_waits_next() {
    let server = RedisServer::start();
    let client = server.client("t");
    let l = lock(&client, "next", 60_000);
    let intr = Interrupt::new();
    let running = l.enter(&intr, &token()).unwrap();
    let mut second = l.enter(&intr, &token()).unwrap();
    assert_eq!(second.stage(), Stage::Waiting);
    assert_eq!(l.local_waiter().as_deref(), Some(second.token()));
    l.leave(&intr, running).unwrap();
    assert_eq!(l.wait(&intr, &mut second, None).unwrap(), Stage::Running);
    // Promoted: it covers nobody any more (its block starts now).
    assert_eq!(l.local_waiter(), None);
    reset(&client);
    let mut third = l.enter(&intr, &token()).unwrap();
    assert_eq!(
        third.stage(),
        Stage::Waiting,
        "a newcomer after the start waits"
    );
    assert!(commands_run(&client) > 0, "the newcomer asked Redis");
    assert_eq!(l.local_waiter().as_deref(), Some(third.token()));
    assert_eq!(l.enter(&intr, &token()).unwrap().stage(), Stage::Skipped);
    // Granted by the release but not started: it still covers newcomers until its wait sees it.
    l.leave(&intr, second).unwrap();
    assert_eq!(l.local_waiter().as_deref(), Some(third.token()));
    assert_eq!(l.wait(&intr, &mut third, None).unwrap(), Stage::Running);
    assert_eq!(l.local_waiter(), None);
    l.leave(&intr, third).unwrap();
    assert_eq!(l.state(&intr).unwrap(), (false, false));
}

#[test]
fn a_retried_enter_with_the_waiters_own_token_is_not_skipped() {
    let server = RedisServer::start();
    let client = server.client("t");
    let l = lock(&client, "retry", 60_000);
    let intr = Interrupt::new();
    let running = l.enter(&intr, &token()).unwrap();
    let first = l.enter(&intr, &token()).unwrap();
    assert_eq!(first.stage(), Stage::Waiting);
    let again = l.enter(&intr, first.token()).unwrap();
    assert_eq!(again.stage(), Stage::Waiting, "Redis says it is ours");
    drop(first);
    drop(again);
    assert_eq!(
        l.local_waiter(),
        None,
        "dropped tickets leave no registration"
    );
    l.leave(&intr, running).unwrap();
}

#[test]
fn an_interrupted_or_timed_out_waiter_leaves_no_registration() {
    let server = RedisServer::start();
    let client = server.client("t");
    let l = lock(&client, "intr", 60_000);
    let intr = Interrupt::new();
    let running = l.enter(&intr, &token()).unwrap();
    let cut = Arc::new(Interrupt::new());
    let (_, waiting) = waiter(&l, &client, cut.clone());
    cut.cancel();
    let (stage, registered) = waiting.join().unwrap();
    assert!(matches!(stage, Err(Error::Interrupted)), "{stage:?}");
    assert!(!registered, "still registered after the interrupted wait");
    assert_eq!(l.local_waiter(), None);
    // The next duplicate asks Redis and waits there (the interrupted one left).
    let mut next = l.enter(&intr, &token()).unwrap();
    assert_eq!(next.stage(), Stage::Waiting);
    // Out of time (before and during the wait): still holding WAIT until it leaves, but it
    // covers nobody.
    assert_eq!(l.local_waiter().as_deref(), Some(next.token()));
    let passed = Some(Instant::now());
    assert_eq!(l.wait(&intr, &mut next, passed).unwrap(), Stage::Waiting);
    assert_eq!(l.local_waiter(), None);
    let soon = Some(Instant::now() + Duration::from_millis(50));
    assert_eq!(l.wait(&intr, &mut next, soon).unwrap(), Stage::Waiting);
    assert_eq!(l.local_waiter(), None);
    reset(&client);
    assert_eq!(l.enter(&intr, &token()).unwrap().stage(), Stage::Skipped);
    assert!(commands_run(&client) > 0, "skipped by Redis, not locally");
    l.leave(&intr, next).unwrap();
    l.leave(&intr, running).unwrap();
    assert_eq!(l.state(&intr).unwrap(), (false, false));
}

#[test]
fn a_waiter_whose_wait_lease_was_found_lost_lets_newcomers_ask_redis() {
    let server = RedisServer::start();
    let client = server.client("t");
    // WAIT renewed every 100 ms, so its loss is found within a few renewals.
    let l = lock(&client, "lost", 300);
    let intr = Interrupt::new();
    let running = l.enter(&intr, &token()).unwrap();
    let waiting: Ticket = l.enter(&intr, &token()).unwrap();
    assert_eq!(waiting.stage(), Stage::Waiting);
    cmd(
        &client,
        &["SET", "t:{lost}:wait", "intruder", "PX", "60000"],
    );
    until("a newcomer goes to Redis once the loss is found", || {
        reset(&client);
        let stage = l.enter(&intr, &token()).unwrap().stage();
        assert_eq!(stage, Stage::Skipped, "the intruder waits");
        commands_run(&client) > 0
    });
    drop(waiting);
    assert_eq!(l.local_waiter(), None);
    l.leave(&intr, running).unwrap();
}

#[test]
fn a_forked_child_starts_with_no_local_waiter() {
    let server = RedisServer::start();
    let client = server.client("t");
    let l = lock(&client, "fork", 60_000);
    let intr = Interrupt::new();
    let running = l.enter(&intr, &token()).unwrap();
    let waiting = l.enter(&intr, &token()).unwrap();
    assert_eq!(l.local_waiter().as_deref(), Some(waiting.token()));
    reset(&client);
    // SAFETY: the child only runs ferrolock calls (fork-safe: pools and registries are
    // fork-local) and leaves with _exit, so nothing of the parent's threads is needed.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let ok = l.local_waiter().is_none()
            && l.enter(&Interrupt::new(), &token())
                .is_ok_and(|t| t.stage() == Stage::Skipped);
        // SAFETY: ends the child without running the parent's destructors or test harness.
        unsafe { libc::_exit(if ok { 0 } else { 1 }) };
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut status = 0;
    loop {
        // SAFETY: waiting for our own child.
        let done = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        if done == pid {
            break;
        }
        if Instant::now() > deadline {
            // SAFETY: our own child.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            panic!("the forked child did not finish within 20 s");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "the child saw a local waiter or was not skipped by Redis (status {status})"
    );
    assert!(commands_run(&client) > 0, "the child asked Redis");
    assert_eq!(l.local_waiter().as_deref(), Some(waiting.token()));
    l.leave(&intr, waiting).unwrap();
    l.leave(&intr, running).unwrap();
}
