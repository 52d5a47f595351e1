//! The cohort hand-off (src/cohort.rs): a holder passes the lock to a thread of its process
//! waiting for the name without a Redis command, with the next fencing token of its block, at
//! most `local_passes` times; then the lock goes back through Redis' line.
mod support;

use ferrolock_core::dist_mutex::{DistMutex, DistMutexOptions};
use ferrolock_core::{Client, Interrupt};
use std::sync::mpsc::channel;
use std::sync::Arc;
use std::time::Duration;
use support::{cmd, commands_run, until, RedisServer};

fn queued(client: &Client, name: &str) -> i64 {
    ferrolock_core::client::int(&cmd(client, &["LLEN", &format!("t:{{{name}}}:waiters")])).unwrap()
}

fn mutex(client: &Client, name: &str, local_passes: u32) -> Arc<DistMutex> {
    let opts = DistMutexOptions {
        local_passes,
        ..DistMutexOptions::default()
    };
    // A window no slow machine can miss: these tests check passes, not the window.
    let m = DistMutex::new(client, name, opts).unwrap();
    Arc::new(m.with_cohort_window(Duration::from_secs(60)))
}

/// Threads of one process (client) each take the lock `sections` times in a row; returns the
/// fencing tokens in the order the sections ran.
fn sections(m: &Arc<DistMutex>, threads: usize, sections: usize) -> Vec<i64> {
    let order = Arc::new(std::sync::Mutex::new(Vec::new()));
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let (m, order) = (m.clone(), order.clone());
            std::thread::spawn(move || {
                let intr = Interrupt::new();
                for _ in 0..sections {
                    let held = m.lock(&intr, &DistMutex::new_token(), None).unwrap();
                    order.lock().unwrap().push(held.fencing_token());
                    m.unlock(&intr, held).unwrap();
                }
            })
        })
        .collect();
    handles.into_iter().for_each(|h| h.join().unwrap());
    let order = order.lock().unwrap().clone();
    order
}

/// A thread that takes the lock, reports (name, fencing token), and releases when told.
fn gated(
    m: &Arc<DistMutex>,
    name: &'static str,
    tx: &std::sync::mpsc::Sender<(&'static str, i64)>,
) -> (std::sync::mpsc::Sender<()>, std::thread::JoinHandle<()>) {
    let (go, go_rx) = channel::<()>();
    let (m, tx) = (m.clone(), tx.clone());
    let thread = std::thread::spawn(move || {
        let intr = Interrupt::new();
        let held = m.lock(&intr, &DistMutex::new_token(), None).unwrap();
        tx.send((name, held.fencing_token())).unwrap();
        go_rx.recv().unwrap();
        m.unlock(&intr, held).unwrap();
    });
    (go, thread)
}

#[test]
fn a_local_pass_costs_no_redis_command_and_takes_the_next_fencing_token() {
    let server = RedisServer::start();
    let client = server.client("t");
    let m = mutex(&client, "pass", 8);
    let intr = Interrupt::new();
    // A holder; the second thread queues in Redis, the third waits here behind it.
    let held = m.lock(&intr, &DistMutex::new_token(), None).unwrap();
    let (tx, rx) = channel();
    let (go_second, second) = gated(&m, "second", &tx);
    until("the second thread queued", || queued(&client, "pass") == 1);
    let (go_third, third) = gated(&m, "third", &tx);
    until("the third thread waits here", || m.local_waiters() == 1);
    // A thread of the process waits in Redis (it came first): the holder does not pass.
    m.unlock(&intr, held).unwrap();
    let (who, granted) = rx.recv_timeout(Duration::from_secs(20)).unwrap();
    assert_eq!(who, "second");
    assert_eq!(granted % 16, 0, "Redis issues multiples of 16");
    cmd(&client, &["CONFIG", "RESETSTAT"]);
    go_second.send(()).unwrap();
    let (who, passed) = rx.recv_timeout(Duration::from_secs(20)).unwrap();
    assert_eq!((who, passed), ("third", granted + 1));
    second.join().unwrap();
    assert_eq!(commands_run(&client), 0, "a local pass sends nothing");
    go_third.send(()).unwrap();
    third.join().unwrap();
    assert_eq!(m.local_waiters(), 0);
    let lock = cmd(&client, &["EXISTS", "t:{pass}:lock"]);
    assert_eq!(ferrolock_core::client::int(&lock).unwrap(), 0);
    // The next acquisition through Redis is above the cohort's block.
    let next = m.lock(&intr, &DistMutex::new_token(), None).unwrap();
    assert!(
        next.fencing_token() >= granted + 16,
        "{}",
        next.fencing_token()
    );
    m.unlock(&intr, next).unwrap();
}

#[test]
fn fencing_tokens_grow_through_passes_and_redis_acquisitions() {
    let server = RedisServer::start();
    let client = server.client("t");
    for passes in [0u32, 3, 15] {
        let m = mutex(&client, &format!("grow{passes}"), passes);
        let order = sections(&m, 4, 40);
        assert!(
            order.windows(2).all(|w| w[1] > w[0]),
            "tokens went back: {order:?}"
        );
        // No cohort longer than its limit: a token's place in its block counts its passes.
        let most = order.iter().map(|f| f % 16).max().unwrap();
        assert!(most <= i64::from(passes), "{most} passes with {passes}");
        if passes > 0 {
            assert!(most > 0, "no local pass at all with {passes}");
        }
    }
}

#[test]
fn local_passes_past_the_block_are_refused() {
    let server = RedisServer::start();
    let client = server.client("t");
    let opts = DistMutexOptions {
        local_passes: 16,
        ..DistMutexOptions::default()
    };
    let err = DistMutex::new(&client, "x", opts).err().unwrap();
    assert!(err.to_string().contains("local_passes"), "{err}");
}

/// Three processes (clients), three threads each, queued behind a holder of a fourth: the first
/// thread of each in Redis, the others waiting in their process. Returns the order they entered
/// (process p's thread t is 10 * p + t).
fn turns(local_passes: u32) -> Vec<usize> {
    let server = RedisServer::start();
    let holder_client = server.client("t");
    let holder = mutex(&holder_client, "turns", local_passes);
    let intr = Interrupt::new();
    let held = holder.lock(&intr, &DistMutex::new_token(), None).unwrap();
    let entered = Arc::new(std::sync::Mutex::new(Vec::new()));
    let processes: Vec<Arc<DistMutex>> = (0..3)
        .map(|_| mutex(&server.client("t"), "turns", local_passes))
        .collect();
    let mut threads = Vec::new();
    for t in 0..3 {
        for (p, m) in processes.iter().enumerate() {
            let (m, entered) = (m.clone(), entered.clone());
            threads.push(std::thread::spawn(move || {
                let intr = Interrupt::new();
                let held = m.lock(&intr, &DistMutex::new_token(), None).unwrap();
                entered.lock().unwrap().push(10 * p + t);
                m.unlock(&intr, held).unwrap();
            }));
            let m = &processes[p];
            if t == 0 {
                until("queued in Redis", || {
                    queued(&holder_client, "turns") == p as i64 + 1
                });
            } else {
                until("waits locally", || m.local_waiters() == t);
            }
        }
    }
    holder.unlock(&intr, held).unwrap();
    threads.into_iter().for_each(|t| t.join().unwrap());
    let order = entered.lock().unwrap().clone();
    order
}

#[test]
fn a_cohort_goes_back_through_redis_after_its_local_passes() {
    // Each process's waiter in Redis enters, then passes to its process's next threads (FIFO)
    // up to the limit; the cohort's last release queues the process's next thread at the tail of
    // the Redis line and hands the lock to the next process.
    assert_eq!(turns(8), vec![0, 1, 2, 10, 11, 12, 20, 21, 22]);
    assert_eq!(turns(1), vec![0, 1, 10, 11, 20, 21, 2, 12, 22]);
    assert_eq!(turns(0), vec![0, 10, 20, 1, 11, 21, 2, 12, 22]);
}

#[test]
fn a_force_released_lock_is_not_passed_on_and_its_holder_hears_it_lost() {
    use ferrolock_core::admin::{force_release, Held, ReleaseParams};
    use ferrolock_core::Error;
    let server = RedisServer::start();
    let client = server.client("t");
    // The process's grant inbox listens (it also hears force releases).
    support::contend_once(&client, &client, "t");
    let m = mutex(&client, "revoke", 8);
    let intr = Interrupt::new();
    let held = m.lock(&intr, &DistMutex::new_token(), None).unwrap();
    let (tx, rx) = channel();
    let (go, go_rx) = channel::<()>();
    let second = {
        let (m, tx) = (m.clone(), tx.clone());
        std::thread::spawn(move || {
            let intr = Interrupt::new();
            let held = m.lock(&intr, &DistMutex::new_token(), None).unwrap();
            tx.send(("second", held.fencing_token())).unwrap();
            go_rx.recv().unwrap();
            m.unlock(&intr, held)
        })
    };
    until("the second thread queued", || {
        queued(&client, "revoke") == 1
    });
    let (go_third, third) = gated(&m, "third", &tx);
    until("the third thread waits here", || m.local_waiters() == 1);
    m.unlock(&intr, held).unwrap();
    let (_, granted) = rx.recv_timeout(Duration::from_secs(20)).unwrap();
    // An operator releases the second thread's hold while the third waits behind it.
    let token = match cmd(&client, &["GET", "t:{revoke}:lock"]) {
        redis::Value::BulkString(b) => String::from_utf8(b).unwrap(),
        other => panic!("GET: {other:?}"),
    };
    let params = ReleaseParams {
        ttl: Duration::from_secs(30),
        limit: 1,
    };
    assert!(force_release(&client, &intr, Held::DistMutex, "revoke", &token, params).unwrap());
    std::thread::sleep(Duration::from_millis(200)); // the notice reaches the inbox
    go.send(()).unwrap();
    assert!(matches!(second.join().unwrap(), Err(Error::LockLost(_))));
    // The third thread was not passed the revoked lock: it took it through Redis.
    let (who, fence) = rx.recv_timeout(Duration::from_secs(20)).unwrap();
    assert_eq!(who, "third");
    assert!(
        fence >= granted + 16 && fence % 16 == 0,
        "{fence} after {granted}"
    );
    go_third.send(()).unwrap();
    third.join().unwrap();
}
