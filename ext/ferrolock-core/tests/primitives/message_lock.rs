//! MessageLock against a real redis-server (one per test).

use crate::support::{cmd, RedisServer};
use ferrolock_core::message_lock::{Begin, Finish, MessageLock, MessageLockOptions, Running};
use ferrolock_core::{Client, Error, Interrupt};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A throwaway redis-server for one test (killed when dropped) and a client on it.
fn server() -> (RedisServer, Client) {
    let server = RedisServer::start();
    let client = server.client("t");
    (server, client)
}

fn lock(client: &Client, lease_ms: u64, processed_ttl_ms: u64) -> MessageLock {
    let opts = MessageLockOptions {
        lease: Duration::from_millis(lease_ms),
        processed_ttl: Duration::from_millis(processed_ttl_ms),
    };
    MessageLock::new(client, opts).unwrap()
}

fn begin(lock: &MessageLock, id: &str) -> Begin {
    lock.begin(&Interrupt::new(), "orders", id, &MessageLock::new_token())
        .unwrap()
}

fn run(b: Begin) -> Running {
    match b {
        Begin::Run(r) => r,
        Begin::Processed => panic!("expected run, got processed"),
        Begin::InProgress => panic!("expected run, got in_progress"),
    }
}

fn kind(b: &Begin) -> &'static str {
    match b {
        Begin::Run(_) => "run",
        Begin::Processed => "processed",
        Begin::InProgress => "in_progress",
    }
}

fn pttl(client: &Client, key: &str) -> i64 {
    ferrolock_core::client::int(&cmd(client, &["PTTL", key])).unwrap()
}

fn get(client: &Client, key: &str) -> Option<String> {
    match cmd(client, &["GET", key]) {
        redis::Value::BulkString(b) => Some(String::from_utf8(b).unwrap()),
        _ => None,
    }
}

#[test]
fn first_delivery_runs_copies_wait_then_are_recognised_as_processed() {
    let (_server, c) = server();
    let l = lock(&c, 5_000, 60_000);
    let key = l.state_key("orders", "m-1").unwrap();
    assert_eq!(key, format!("{}:{{msg:orders:m-1}}:state", c.namespace()));

    let running = run(begin(&l, "m-1"));
    assert_eq!(kind(&begin(&l, "m-1")), "in_progress");
    assert!(pttl(&c, &key) > 4_000);

    assert_eq!(
        l.finish(&Interrupt::new(), running).unwrap(),
        Finish::Marked
    );
    assert_eq!(get(&c, &key).as_deref(), Some("processed"));
    let ttl = pttl(&c, &key);
    assert!(
        ttl > 59_000 && ttl <= 60_000,
        "processed_ttl applied: {ttl}"
    );
    assert_eq!(kind(&begin(&l, "m-1")), "processed");
    // Another queue's message with the same id is another message.
    let other = l
        .begin(
            &Interrupt::new(),
            "invoices",
            "m-1",
            &MessageLock::new_token(),
        )
        .unwrap();
    assert_eq!(kind(&other), "run");
}

#[test]
fn a_failed_run_frees_the_message_for_its_next_copy_at_once() {
    let (_server, c) = server();
    let l = lock(&c, 60_000, 60_000);
    let running = run(begin(&l, "m-2"));
    assert!(l.abort(&Interrupt::new(), running).unwrap());
    assert_eq!(get(&c, &l.state_key("orders", "m-2").unwrap()), None);
    let again = run(begin(&l, "m-2"));
    assert_eq!(l.finish(&Interrupt::new(), again).unwrap(), Finish::Marked);
}

#[test]
fn a_retried_begin_with_the_same_token_is_recognised_as_ours() {
    let (_server, c) = server();
    let l = lock(&c, 60_000, 60_000);
    let token = MessageLock::new_token();
    let first = l.begin(&Interrupt::new(), "orders", "m-3", &token).unwrap();
    let retried = l.begin(&Interrupt::new(), "orders", "m-3", &token).unwrap();
    assert_eq!((kind(&first), kind(&retried)), ("run", "run"));
}

#[test]
fn the_lease_is_renewed_while_the_job_runs_and_expires_after_a_crash() {
    let (_server, c) = server();
    let l = lock(&c, 300, 60_000);
    let running = run(begin(&l, "m-4"));
    // 3x lease: a copy arriving at any point in between must not run.
    let until = Instant::now() + Duration::from_millis(900);
    while Instant::now() < until {
        assert_eq!(kind(&begin(&l, "m-4")), "in_progress");
        std::thread::sleep(Duration::from_millis(25));
    }
    assert!(!running.is_lost());
    // A crash: renewal stops without finish or abort; the next copy runs within lease.
    drop(running);
    let crashed = Instant::now();
    let next = loop {
        match begin(&l, "m-4") {
            Begin::Run(r) => break r,
            Begin::InProgress => std::thread::sleep(Duration::from_millis(10)),
            Begin::Processed => panic!("never finished, cannot be processed"),
        }
    };
    assert!(
        crashed.elapsed() < Duration::from_millis(300 + 700),
        "{:?}",
        crashed.elapsed()
    );
    assert_eq!(l.finish(&Interrupt::new(), next).unwrap(), Finish::Marked);
}

#[test]
fn finish_marks_a_lapsed_lease_but_never_overwrites_another_delivery() {
    let (_server, c) = server();
    let l = lock(&c, 60_000, 60_000);
    let key = l.state_key("orders", "m-5").unwrap();
    let del = |c: &Client| cmd(c, &["DEL", &key]);

    let lapsed = run(begin(&l, "m-5"));
    del(&c);
    assert_eq!(l.finish(&Interrupt::new(), lapsed).unwrap(), Finish::Lapsed);
    assert_eq!(get(&c, &key).as_deref(), Some("processed"));

    del(&c);
    let stale = run(begin(&l, "m-5"));
    del(&c);
    let current = run(begin(&l, "m-5"));
    assert_eq!(l.finish(&Interrupt::new(), stale).unwrap(), Finish::Lost);
    assert!(
        get(&c, &key).is_some_and(|v| v != "processed"),
        "the current delivery's lease stays"
    );
    let stale_abort = run(begin(&l, "m-6"));
    cmd(
        &c,
        &[
            "SET",
            &l.state_key("orders", "m-6").unwrap(),
            "someone-else",
        ],
    );
    assert!(!l.abort(&Interrupt::new(), stale_abort).unwrap());
    assert_eq!(
        get(&c, &l.state_key("orders", "m-6").unwrap()).as_deref(),
        Some("someone-else")
    );
    assert_eq!(
        l.finish(&Interrupt::new(), current).unwrap(),
        Finish::Marked
    );
}

#[test]
fn scripts_survive_a_script_flush() {
    let (_server, c) = server();
    let l = lock(&c, 60_000, 60_000);
    let r = run(begin(&l, "m-7"));
    cmd(&c, &["SCRIPT", "FLUSH"]);
    assert_eq!(l.finish(&Interrupt::new(), r).unwrap(), Finish::Marked);
    assert_eq!(kind(&begin(&l, "m-7")), "processed");
}

#[test]
fn bad_arguments_name_the_argument() {
    let (_server, c) = server();
    let zero = MessageLockOptions {
        lease: Duration::ZERO,
        ..MessageLockOptions::default()
    };
    assert!(
        matches!(MessageLock::new(&c, zero), Err(Error::Argument(m)) if m.starts_with("lease"))
    );
    let zero = MessageLockOptions {
        processed_ttl: Duration::from_micros(10),
        ..MessageLockOptions::default()
    };
    assert!(
        matches!(MessageLock::new(&c, zero), Err(Error::Argument(m)) if m.starts_with("processed_ttl"))
    );
    let l = lock(&c, 1_000, 1_000);
    let t = MessageLock::new_token();
    let i = Interrupt::new();
    assert!(matches!(l.begin(&i, "", "m", &t), Err(Error::Argument(m)) if m.starts_with("queue")));
    assert!(
        matches!(l.begin(&i, "q{x}", "m", &t), Err(Error::Argument(m)) if m.starts_with("queue"))
    );
    assert!(
        matches!(l.begin(&i, "q", "", &t), Err(Error::Argument(m)) if m.starts_with("message_id"))
    );
}

/// 8 threads receive 300 messages, each delivered 1-3 times (copies back to back, so they
/// overlap), and 5% of first runs fail: every message's work completes exactly once.
#[test]
fn every_message_completes_exactly_once_under_concurrent_copies() {
    let (_server, c) = server();
    let l = Arc::new(lock(&c, 2_000, 60_000));
    let mut deliveries = Vec::new();
    for id in 0..300u32 {
        for _ in 0..(1 + id % 3) {
            deliveries.push(id);
        }
    }
    let queue = Arc::new(Mutex::new(deliveries));
    let done: Arc<Vec<AtomicU32>> = Arc::new((0..300).map(|_| AtomicU32::new(0)).collect());
    let attempts: Arc<Mutex<HashMap<u32, u32>>> = Arc::default();
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let (l, queue, done, attempts) =
                (l.clone(), queue.clone(), done.clone(), attempts.clone());
            std::thread::spawn(move || loop {
                let Some(id) = queue.lock().unwrap().pop() else {
                    return;
                };
                let msg = format!("msg-{id}");
                match begin(&l, &msg) {
                    Begin::Run(r) => {
                        let attempt = {
                            let mut a = attempts.lock().unwrap();
                            let n = a.entry(id).or_insert(0);
                            *n += 1;
                            *n
                        };
                        std::thread::sleep(Duration::from_micros(500));
                        if id % 20 == 0 && attempt == 1 {
                            l.abort(&Interrupt::new(), r).unwrap();
                            queue.lock().unwrap().insert(0, id); // redelivered later
                        } else {
                            done[id as usize].fetch_add(1, Ordering::SeqCst);
                            assert_eq!(l.finish(&Interrupt::new(), r).unwrap(), Finish::Marked);
                        }
                    }
                    Begin::Processed => {}
                    // Left alone: the copy comes back after the visibility timeout.
                    Begin::InProgress => queue.lock().unwrap().insert(0, id),
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    for (id, n) in done.iter().enumerate() {
        assert_eq!(n.load(Ordering::SeqCst), 1, "message {id} completed once");
    }
    assert!(attempts
        .lock()
        .unwrap()
        .iter()
        .filter(|(id, _)| *id % 20 == 0)
        .all(|(_, n)| *n == 2));
}

#[test]
fn redis_down_is_an_error_never_a_decision() {
    let (mut server, c) = server();
    let l = lock(&c, 1_000, 1_000);
    server.stop();
    let t = MessageLock::new_token();
    assert!(matches!(
        l.begin(&Interrupt::new(), "orders", "m-8", &t),
        Err(Error::Connection { .. })
    ));
}
