//! One waiter per process per name, for both primitives (src/line/local/): threads of one
//! client waiting for the same name keep one entry in the Redis line; the others wait in the
//! process, in the order they came, and a release queues the next of them. A client stands for
//! a process here.

use crate::both::{both, commands_since_reset, ids, make, passer, queued, take, Lined};
use crate::support::{cmd, grant_keys, keys_without_ttl, until, RedisServer};
use ferrolock_core::{Error, Interrupt};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

both!(
    threads_of_one_process_keep_one_entry_send_nothing_while_waiting_and_enter_in_order,
    redis_sees_one_entry_per_process_and_processes_take_turns,
    local_waiters_that_time_out_or_are_interrupted_leave_nothing_stuck,
);

fn threads_of_one_process_keep_one_entry_send_nothing_while_waiting_and_enter_in_order<P: Lined>() {
    let server = RedisServer::start();
    let holder_client = server.counted_client("t");
    let holder = make::<P>(&holder_client, "one");
    let intr = Interrupt::new();
    let held = take(&*holder);
    let first = P::fence(&held);
    let p = make::<P>(&server.counted_client("t"), "one");
    let log = Arc::new(Mutex::new(Vec::new()));
    let mut threads = vec![passer(&p, 0, &log)];
    until("the first waiter queued in Redis", || {
        queued::<P>(&holder_client, "one") == 1
    });
    for i in 1..6 {
        threads.push(passer(&p, i, &log));
        until("the waiter waits locally", || p.local_waiters() == i);
    }
    assert_eq!(
        queued::<P>(&holder_client, "one"),
        1,
        "one entry for the whole process"
    );
    // The waiting threads send nothing: the one in Redis blocks on its grant (a 30 s lease: its
    // turn outlasts this pause), the others on a condition variable.
    cmd(&holder_client, &["CONFIG", "RESETSTAT"]);
    std::thread::sleep(Duration::from_millis(1500));
    let sent = commands_since_reset(&holder_client);
    assert!(
        sent.iter().all(|(_, n)| *n == 0),
        "commands while waiting: {sent:?}"
    );
    holder.leave(&intr, held).unwrap();
    threads.into_iter().for_each(|t| t.join().unwrap());
    assert_eq!(ids(&log), (0..6).collect::<Vec<_>>());
    crate::both::assert_fences_grow(first, &log);
    assert!(!p.held());
    assert_eq!(queued::<P>(&holder_client, "one"), 0);
    assert_eq!(p.local_waiters(), 0);
    assert_eq!(grant_keys(&holder_client), redis::Value::Array(vec![]));
    assert_eq!(keys_without_ttl(&holder_client), Vec::<String>::new());
}

fn redis_sees_one_entry_per_process_and_processes_take_turns<P: Lined>() {
    let server = RedisServer::start();
    let holder_client = server.counted_client("t");
    let holder = make::<P>(&holder_client, "turns");
    let intr = Interrupt::new();
    let held = take(&*holder);
    let log = Arc::new(Mutex::new(Vec::new()));
    let processes: Vec<Arc<P>> = (0..3)
        .map(|_| make::<P>(&server.counted_client("t"), "turns"))
        .collect();
    let mut threads = Vec::new();
    // Process p's thread t has id 10 * p + t; the first thread of each queues in Redis.
    for t in 0..3 {
        for (i, p) in processes.iter().enumerate() {
            threads.push(passer(p, 10 * i + t, &log));
            if t == 0 {
                until("queued in Redis", || {
                    queued::<P>(&holder_client, "turns") == i as i64 + 1
                });
            } else {
                until("waits locally", || p.local_waiters() == t);
            }
        }
    }
    assert_eq!(
        queued::<P>(&holder_client, "turns"),
        3,
        "one entry per process"
    );
    holder.leave(&intr, held).unwrap();
    threads.into_iter().for_each(|t| t.join().unwrap());
    // Each process's next thread joins the tail of the line when the one before it leaves.
    assert_eq!(ids(&log), vec![0, 10, 20, 1, 11, 21, 2, 12, 22]);
    assert_eq!(queued::<P>(&holder_client, "turns"), 0);
    assert!(!holder.held());
}

fn local_waiters_that_time_out_or_are_interrupted_leave_nothing_stuck<P: Lined>() {
    let server = RedisServer::start();
    let client = server.counted_client("t");
    let other = make::<P>(&server.counted_client("t"), "leave");
    let p = make::<P>(&client, "leave");
    let intr = Interrupt::new();
    // Held by another process: a holder of this one would pass the local waiters on itself.
    let held = take(&*other);
    let log = Arc::new(Mutex::new(Vec::new()));
    let first = passer(&p, 0, &log);
    until("the first waiter queued in Redis", || {
        queued::<P>(&client, "leave") == 1
    });
    let hasty = {
        let p = p.clone();
        std::thread::spawn(move || {
            let started = Instant::now();
            // Time for a loaded machine to queue the two waiters below behind it.
            let deadline = started + Duration::from_millis(1000);
            let outcome = p.enter(&Interrupt::new(), &P::token(), Some(deadline));
            (matches!(outcome, Ok(None)), started.elapsed())
        })
    };
    until("the hasty waiter waits locally", || p.local_waiters() == 1);
    let cut = Arc::new(Interrupt::new());
    let interrupted = {
        let (p, cut) = (p.clone(), cut.clone());
        std::thread::spawn(move || {
            matches!(p.enter(&cut, &P::token(), None), Err(Error::Interrupted))
        })
    };
    until("the interrupted waiter waits locally", || {
        p.local_waiters() == 2
    });
    let last = passer(&p, 3, &log);
    until("the last waiter waits locally", || p.local_waiters() == 3);
    let (timed_out, took) = hasty.join().unwrap();
    assert!(timed_out);
    assert!(took >= Duration::from_millis(990), "ended early: {took:?}");
    // On time while the hold is still held (a 30 s lease): generous for a loaded machine.
    assert!(took < Duration::from_secs(5), "timed out after {took:?}");
    cut.cancel();
    assert!(interrupted.join().unwrap());
    assert_eq!(p.local_waiters(), 1);
    assert_eq!(
        queued::<P>(&client, "leave"),
        1,
        "only the first waiter's entry"
    );
    other.leave(&intr, held).unwrap();
    first.join().unwrap();
    last.join().unwrap();
    assert_eq!(ids(&log), vec![0, 3]);
    assert!(!p.held());
    assert_eq!(queued::<P>(&client, "leave"), 0);
    assert_eq!(grant_keys(&client), redis::Value::Array(vec![]));
    assert_eq!(keys_without_ttl(&client), Vec::<String>::new());
}
