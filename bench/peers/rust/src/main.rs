//! rslock driver for bench/peers.rb:
//! `rslock <url> <key> <workers> <process> <start_at> <stop_at> <lease_ms>` (the same arguments as
//! the node and python drivers).
//! Each worker is an OS thread with its own current-thread tokio runtime and its own LockManager
//! (one connection), looping acquire + release on one name from start_at to stop_at
//! (CLOCK_MONOTONIC seconds, which all processes share). Prints one JSON line:
//! {"spans":[[entered,left,"process.worker",asked],...],"errors":n} (asked: when the worker began
//! wanting the lock, its failed tries included).
//! With FERROLOCK_PEERS_IO_URL set, the section is INCR then DECR of FERROLOCK_PEERS_IO_KEY on that
//! (second) Redis, through the worker's own multiplexed connection of the `redis` crate (the one
//! rslock uses).
use rslock::LockManager;
use std::time::Duration;

/// Seconds on CLOCK_MONOTONIC (std's Instant hides the absolute value other processes compare).
fn monotonic() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime only writes the timespec we pass.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
}

fn sleep_until(at: f64) {
    let now = monotonic();
    if at > now {
        std::thread::sleep(Duration::from_secs_f64(at - now));
    }
}

struct Args {
    url: String,
    key: String,
    workers: usize,
    process: usize,
    start_at: f64,
    stop_at: f64,
    lease: Duration,
}

fn parse_args() -> Args {
    let a: Vec<String> = std::env::args().skip(2).collect();
    if std::env::args().nth(1).as_deref() != Some("rslock") || a.len() != 7 {
        eprintln!("usage: ferrolock-peer-rslock rslock <url> <key> <workers> <process> <start_at> <stop_at> <lease_ms>");
        std::process::exit(2);
    }
    let num = |i: usize| -> f64 { a[i].parse().expect("a number") };
    Args {
        url: a[0].clone(),
        key: a[1].clone(),
        workers: num(2) as usize,
        process: num(3) as usize,
        start_at: num(4),
        stop_at: num(5),
        lease: Duration::from_millis(num(6) as u64),
    }
}

/// One worker: returns its spans (entered, left, asked: when it began wanting the lock, failed tries
/// included) and how many acquires failed.
fn worker(
    url: String,
    key: String,
    start_at: f64,
    stop_at: f64,
    lease: Duration,
) -> (Vec<(f64, f64, f64)>, u64) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    rt.block_on(async move {
        // Library defaults: 3 tries per lock() call, a random 0-200 ms pause between them;
        // acquire() calls lock() again until it succeeds.
        let manager = LockManager::new(vec![url]);
        let mut io = match std::env::var("FERROLOCK_PEERS_IO_URL") {
            Ok(io_url) => Some(
                redis::Client::open(io_url)
                    .expect("FERROLOCK_PEERS_IO_URL")
                    .get_multiplexed_async_connection()
                    .await
                    .expect("a connection to the io Redis"),
            ),
            Err(_) => None,
        };
        let io_key = std::env::var("FERROLOCK_PEERS_IO_KEY").unwrap_or_default();
        let mut spans = Vec::new();
        let mut errors = 0;
        sleep_until(start_at);
        let mut asked = monotonic();
        while monotonic() < stop_at {
            match manager.acquire(key.as_str(), lease).await {
                Ok(guard) => {
                    let entered = monotonic();
                    if let Some(io) = io.as_mut() {
                        let _: i64 = redis::cmd("INCR")
                            .arg(&io_key)
                            .query_async(io)
                            .await
                            .expect("INCR");
                        let _: i64 = redis::cmd("DECR")
                            .arg(&io_key)
                            .query_async(io)
                            .await
                            .expect("DECR");
                    }
                    let left = monotonic();
                    guard.release().await;
                    spans.push((entered, left, asked));
                    asked = monotonic();
                }
                Err(_) => errors += 1,
            }
        }
        (spans, errors)
    })
}

fn main() {
    let args = parse_args();
    let handles: Vec<_> = (0..args.workers)
        .map(|_| {
            let (url, key) = (args.url.clone(), args.key.clone());
            let (start_at, stop_at, lease) = (args.start_at, args.stop_at, args.lease);
            std::thread::spawn(move || worker(url, key, start_at, stop_at, lease))
        })
        .collect();
    let mut out = String::from("{\"spans\":[");
    let mut errors = 0;
    let mut first = true;
    for (w, handle) in handles.into_iter().enumerate() {
        let (spans, failed) = handle.join().expect("a worker thread");
        errors += failed;
        for (entered, left, asked) in spans {
            if !first {
                out.push(',');
            }
            first = false;
            out.push_str(&format!(
                "[{entered:.9},{left:.9},\"{}.{w}\",{asked:.9}]",
                args.process
            ));
        }
    }
    out.push_str(&format!("],\"errors\":{errors}}}"));
    println!("{out}");
}
