//! What a ConcurrentLimiter block costs Redis: every command it runs, those inside scripts
//! included (INFO commandstats on a server of its own). Pins the counts so a change that adds
//! work to the hot paths (such as storing the limit for the operators' view) shows up here.
mod support;

use ferrolock_core::concurrent_limiter::{ConcurrentLimiter, LimiterOptions};
use ferrolock_core::{Client, Interrupt};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::{cmd, RedisServer};

/// Calls per command since the last reset, but the INFO/CONFIG calls measuring them.
fn calls(client: &Client) -> Vec<(String, i64)> {
    let stats = match cmd(client, &["INFO", "commandstats"]) {
        redis::Value::BulkString(b) => String::from_utf8(b).unwrap(),
        other => panic!("INFO: {other:?}"),
    };
    stats
        .lines()
        .filter_map(|l| l.strip_prefix("cmdstat_"))
        .filter(|l| !l.starts_with("info:") && !l.starts_with("config"))
        .map(|l| {
            let (name, rest) = l.split_once(':').unwrap();
            let n = rest.split(['=', ',']).nth(1).unwrap().parse().unwrap();
            (name.to_string(), n)
        })
        .collect()
}

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
    };
    ConcurrentLimiter::new(client, name, opts).unwrap()
}

fn far() -> Instant {
    Instant::now() + Duration::from_secs(30)
}

#[test]
fn an_uncontended_acquire_and_release_cost_twelve_commands() {
    let server = RedisServer::start();
    let client = server.client("t");
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
    // Acquire: EVALSHA, TIME, ZRANGEBYSCORE, ZREMRANGEBYSCORE, ZADD (the slot and the limit in
    // one), PTTL, PEXPIRE. Release: EVALSHA, TIME, ZSCORE, LPOP, ZREM.
    assert_eq!(
        commands_run(&client, &[]),
        12 * rounds,
        "{:?}",
        calls(&client)
    );
}

#[test]
fn a_contended_hand_off_costs_fourteen_commands() {
    let server = RedisServer::start();
    let client = server.client("t");
    let l = Arc::new(limiter(&client, "busy", 1));
    let intr = Interrupt::new();
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
    // Everything but the polling LLENs (and the CLIENT ID a fresh blocking connection asks):
    // the waiter's attempt (EVALSHA, TIME, ZRANGEBYSCORE, RPUSH, PEXPIRE) and BLPOP, the
    // release (EVALSHA, TIME, ZSCORE, LPOP, RPUSH, PEXPIRE, ZADD, ZREM).
    let block = commands_run(&client, &["llen", "client|id"]);
    assert_eq!(block, 14, "{:?}", calls(&client));
    l.release(&intr, entered).unwrap();
}
