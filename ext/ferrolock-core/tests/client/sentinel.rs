//! A Sentinel-managed primary: the client finds it through the sentinels (authenticating to
//! them and to the data servers), and follows it through `SENTINEL FAILOVER` and a kill -9.

#[path = "../support/sentinel.rs"]
mod sentinel_support;

use ferrolock_core::{Client, ClientOptions, Error, Interrupt, SentinelOptions};
use ferrolock_core::{DistMutex, DistMutexOptions};
use sentinel_support::*;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn options(setup: &TestSentinels, sentinel_password: &str) -> ClientOptions {
    let mut opts = ClientOptions::new("redis://unused:1");
    opts.namespace = "sent".to_string();
    opts.sentinel = Some(SentinelOptions {
        master_name: MASTER_NAME.to_string(),
        sentinels: setup.sentinel_urls(),
        sentinel_password: Some(sentinel_password.to_string()),
        password: Some(DATA_PASSWORD.to_string()),
        ..SentinelOptions::default()
    });
    opts
}

fn mutex(client: &Client) -> DistMutex {
    let opts = DistMutexOptions {
        fair: true,
        expire: None,
        auto_release: true,
        lease: Duration::from_millis(2_000),
        ..DistMutexOptions::default()
    };
    DistMutex::new(client, "shared", opts).unwrap()
}

/// Locks and unlocks in a loop, counting what callers were told.
struct Worker {
    stop: Arc<AtomicBool>,
    log: Arc<Mutex<Log>>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

#[derive(Default, Debug)]
struct Log {
    ok: usize,
    unreachable: usize,
    lost: usize,
    wrong: Vec<Error>,
}

impl Worker {
    fn start(client: &Client, n: usize) -> Worker {
        let stop = Arc::new(AtomicBool::new(false));
        let log = Arc::new(Mutex::new(Log::default()));
        let threads = (0..n)
            .map(|_| {
                let m = mutex(client);
                let (stop, log) = (stop.clone(), log.clone());
                std::thread::spawn(move || {
                    let intr = Interrupt::new();
                    while !stop.load(Ordering::SeqCst) {
                        let deadline = Instant::now() + Duration::from_secs(2);
                        let run = m
                            .lock(&intr, &DistMutex::new_token(), Some(deadline))
                            .and_then(|h| {
                                std::thread::sleep(Duration::from_millis(5));
                                m.unlock(&intr, h)
                            });
                        let mut log = log.lock().unwrap();
                        match run {
                            Ok(()) => log.ok += 1,
                            Err(Error::Connection { .. } | Error::Timeout(_)) => {
                                log.unreachable += 1
                            }
                            Err(Error::LockLost(_)) => log.lost += 1,
                            Err(e) => log.wrong.push(e),
                        }
                    }
                })
            })
            .collect();
        Worker { stop, log, threads }
    }

    fn ok(&self) -> usize {
        self.log.lock().unwrap().ok
    }

    /// Until `n` more sections succeeded (work goes on).
    #[track_caller]
    fn wait_progress(&self, n: usize) {
        let from = self.ok();
        wait_until(30, || self.ok() >= from + n);
    }

    fn finish(self) -> Log {
        self.stop.store(true, Ordering::SeqCst);
        self.threads.into_iter().for_each(|t| t.join().unwrap());
        Arc::try_unwrap(self.log).unwrap().into_inner().unwrap()
    }
}

/// Where a fresh key written through `client` lands: the primary holding it (a replica may
/// hold a copy already).
fn written_on(setup: &TestSentinels, client: &Client, key: &str) -> u16 {
    let args: Vec<Vec<u8>> = ["SET", key, "1"]
        .iter()
        .map(|a| a.as_bytes().to_vec())
        .collect();
    client.command(&Interrupt::new(), &args).unwrap();
    *setup
        .data_ports
        .iter()
        .find(|&&p| {
            let has = data_query::<Option<String>>(p, &["GET", key])
                .ok()
                .flatten()
                .is_some();
            let role = data_query::<Vec<redis::Value>>(p, &["ROLE"]).ok();
            let primary = role
                .as_ref()
                .and_then(|r| r.first())
                .is_some_and(|r| matches!(r, redis::Value::BulkString(b) if b == b"master"));
            has && primary
        })
        .expect("the key is on no server")
}

#[test]
fn follows_the_primary_through_failover_and_kill() {
    let mut setup = TestSentinels::start();
    let (first, second) = (setup.data_ports[0], setup.data_ports[1]);
    let client = Client::new(options(&setup, SENTINEL_PASSWORD)).unwrap();
    assert_eq!(written_on(&setup, &client, "k0"), first);
    assert_eq!(client.display_addr(), format!("127.0.0.1:{first}"));
    assert!(!client.redacted_url().contains(SENTINEL_PASSWORD));

    let work = Worker::start(&client, 4);
    work.wait_progress(20);

    // An operator's failover: the replica becomes the primary, the old one its replica.
    let _: () = sentinel_query(
        setup.sentinel_ports[0],
        &["SENTINEL", "FAILOVER", MASTER_NAME],
    )
    .unwrap();
    wait_until(30, || setup.primary_port() == second);
    // Sentinel demotes the old primary only seconds later; the client rechecks every second.
    wait_until(30, || {
        client.display_addr() == format!("127.0.0.1:{second}")
    });
    work.wait_progress(20);
    assert_eq!(written_on(&setup, &client, "k1"), second);

    // The new primary dies: the sentinels agree it is down and promote the old one again.
    setup.wait_replica_synced(first);
    setup.kill(second);
    let killed = Instant::now();
    wait_until(30, || setup.primary_port() == first);
    wait_until(30, || client.display_addr() == format!("127.0.0.1:{first}"));
    eprintln!("promoted {:?} after the kill", killed.elapsed());
    work.wait_progress(20);
    assert_eq!(written_on(&setup, &client, "k2"), first);

    let log = work.finish();
    eprintln!("{log:?}");
    assert!(log.wrong.is_empty(), "wrong answers: {:?}", log.wrong);
}

#[test]
fn a_wrong_sentinel_password_is_a_connection_error_without_the_password() {
    let setup = TestSentinels::start();
    let client = Client::new(options(&setup, "not-the-password")).unwrap();
    let args = vec![b"PING".to_vec()];
    let err = client.command(&Interrupt::new(), &args).unwrap_err();
    assert!(matches!(err, Error::Connection { .. }), "{err:?}");
    assert!(!err.to_string().contains("not-the-password"), "{err}");
}
