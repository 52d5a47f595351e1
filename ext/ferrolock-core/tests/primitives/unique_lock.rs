//! UniqueLock (Sidekiq uniqueness) against a real redis-server (one per test).

use crate::support::{cmd, RedisServer};
use ferrolock_core::UniqueLock;
use ferrolock_core::{Client, Error, Interrupt};
use std::sync::{Arc, Barrier};
use std::time::Duration;

const MINUTE: Duration = Duration::from_secs(60);

fn server() -> (RedisServer, Client) {
    let server = RedisServer::start();
    let client = server.client("t");
    (server, client)
}

fn pttl(client: &Client, key: &str) -> i64 {
    ferrolock_core::client::int(&cmd(client, &["PTTL", key])).unwrap()
}

#[test]
fn one_jid_holds_a_digest_and_only_it_changes_the_lock() {
    let (_server, client) = server();
    let intr = Interrupt::new();
    let lock = UniqueLock::new(&client, "unique:Job:abc").unwrap();
    assert_eq!(lock.key(), "t:{unique:Job:abc}:lock");

    assert_eq!(lock.take(&intr, "a", MINUTE, false).unwrap(), None);
    assert_eq!(
        lock.take(&intr, "b", MINUTE, false).unwrap().as_deref(),
        Some("a")
    );
    assert!(!lock.release(&intr, "b").unwrap());
    assert!(!lock.expire(&intr, "b", MINUTE).unwrap());
    assert!(!lock.hand_over(&intr, "b", "c", MINUTE).unwrap());
    assert_eq!(lock.holder(&intr).unwrap().as_deref(), Some("a"));

    assert!(lock.expire(&intr, "a", Duration::from_secs(5)).unwrap());
    assert!((1..=5_000).contains(&pttl(&client, lock.key())));
    assert!(lock.hand_over(&intr, "a", "c", MINUTE).unwrap());
    assert!(pttl(&client, lock.key()) > 5_000);
    assert!(!lock.release(&intr, "a").unwrap());
    assert!(lock.release(&intr, "c").unwrap());
    assert_eq!(lock.holder(&intr).unwrap(), None);
}

#[test]
fn keep_leaves_the_expiry_of_a_lock_the_jid_already_holds() {
    let (_server, client) = server();
    let intr = Interrupt::new();
    let lock = UniqueLock::new(&client, "d").unwrap();
    lock.take(&intr, "a", Duration::from_secs(5), false)
        .unwrap();
    assert_eq!(lock.take(&intr, "a", MINUTE, true).unwrap(), None);
    assert!(pttl(&client, lock.key()) <= 5_000);
    assert_eq!(lock.take(&intr, "a", MINUTE, false).unwrap(), None);
    assert!(pttl(&client, lock.key()) > 5_000);
}

#[test]
fn scripts_come_back_after_script_flush() {
    let (_server, client) = server();
    let intr = Interrupt::new();
    let lock = UniqueLock::new(&client, "d").unwrap();
    lock.take(&intr, "a", MINUTE, false).unwrap();
    cmd(&client, &["SCRIPT", "FLUSH"]);
    assert!(lock.release(&intr, "a").unwrap());
}

#[test]
fn of_many_threads_taking_one_digest_exactly_one_gets_it() {
    let (_server, client) = server();
    let threads = 16;
    let barrier = Arc::new(Barrier::new(threads));
    let winners: Vec<String> = (0..threads)
        .map(|i| {
            let (client, barrier) = (client.clone(), barrier.clone());
            std::thread::spawn(move || {
                let lock = UniqueLock::new(&client, "race").unwrap();
                let jid = format!("jid-{i}");
                barrier.wait();
                let holder = lock.take(&Interrupt::new(), &jid, MINUTE, false).unwrap();
                holder.is_none().then_some(jid)
            })
        })
        .collect::<Vec<_>>()
        .into_iter()
        .filter_map(|t| t.join().unwrap())
        .collect();
    assert_eq!(winners.len(), 1);
    let lock = UniqueLock::new(&client, "race").unwrap();
    assert_eq!(
        lock.holder(&Interrupt::new()).unwrap(),
        Some(winners[0].clone())
    );
}

#[test]
fn bad_arguments_are_named() {
    let (_server, client) = server();
    let intr = Interrupt::new();
    let message = |e: Error| match e {
        Error::Argument(m) => m,
        other => panic!("expected an argument error, got {other:?}"),
    };
    assert!(message(UniqueLock::new(&client, "").err().unwrap()).starts_with("digest:"));
    assert!(message(UniqueLock::new(&client, "a{b").err().unwrap()).starts_with("digest:"));
    let lock = UniqueLock::new(&client, "d").unwrap();
    assert!(message(lock.take(&intr, "", MINUTE, false).unwrap_err()).starts_with("jid:"));
    assert!(message(lock.take(&intr, "a", Duration::ZERO, false).unwrap_err()).starts_with("ttl:"));
    assert!(message(lock.hand_over(&intr, "a", "", MINUTE).unwrap_err()).starts_with("to_jid:"));
    assert_eq!(lock.holder(&intr).unwrap(), None);
}

#[test]
fn at_key_takes_a_key_outside_the_namespace_and_excludes_a_plain_set_nx() {
    let (_server, client) = server();
    let intr = Interrupt::new();
    let lock = UniqueLock::at_key(&client, "activejob_uniqueness:my_job:abc").unwrap();
    assert_eq!(lock.key(), "activejob_uniqueness:my_job:abc");
    assert!(UniqueLock::at_key(&client, "").is_err());

    // Held by another gem's random value (Redlock's SET NX PX): refused, and left alone.
    cmd(
        &client,
        &["SET", lock.key(), "their-uuid", "NX", "PX", "60000"],
    );
    assert_eq!(
        lock.take(&intr, "a", MINUTE, false).unwrap().as_deref(),
        Some("their-uuid")
    );
    assert!(!lock.release(&intr, "a").unwrap());
    cmd(&client, &["DEL", lock.key()]);

    assert_eq!(lock.take(&intr, "a", MINUTE, false).unwrap(), None);
    assert_eq!(
        cmd(&client, &["SET", lock.key(), "x", "NX", "PX", "60000"]),
        redis::Value::Nil
    );
    assert!(lock.release(&intr, "a").unwrap());
}
