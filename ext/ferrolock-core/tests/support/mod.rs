//! A throwaway redis-server per test binary (never 6379), with stop/pause for fault tests.
#![allow(dead_code)]

use ferrolock_core::{Client, ClientOptions};
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct RedisServer {
    pub port: u16,
    child: Option<Child>,
    dir: PathBuf,
}

impl RedisServer {
    /// A server on a free port. The port asked from the OS is free only for a moment: another
    /// test of this binary may start its server there first, and then ours would exit while the
    /// other answered our checks (and vanish under us when that test ends). So a start counts
    /// only when the server answering there is our own process; else it tries another port.
    pub fn start() -> RedisServer {
        for _ in 0..5 {
            let port = TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port();
            let dir = std::env::temp_dir()
                .join(format!("ferrolock-core-test-{}-{port}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            let mut server = RedisServer {
                port,
                child: None,
                dir,
            };
            if server.spawn() {
                return server;
            }
        }
        panic!("could not start redis-server on a free port");
    }

    /// Starts redis-server on `self.port`; true once it answers there as our own process, false
    /// when it exited (the port was taken) or did not answer within 10 s.
    fn spawn(&mut self) -> bool {
        let mut child = Command::new("redis-server")
            .args([
                "--port",
                &self.port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .arg("--dir")
            .arg(&self.dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server must be installed (bin/setup installs it)");
        let ours = format!("process_id:{}\r", child.id());
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if self.info_server().is_some_and(|info| info.contains(&ours)) {
                self.child = Some(child);
                return true;
            }
            if child.try_wait().ok().flatten().is_some() || Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn info_server(&self) -> Option<String> {
        let client = redis::Client::open(self.url()).ok()?;
        let mut con = client
            .get_connection_with_timeout(Duration::from_secs(1))
            .ok()?;
        con.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
        redis::cmd("INFO").arg("server").query(&mut con).ok()
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }

    /// A client in its own namespace, so tests sharing the server don't see each other's keys.
    pub fn client(&self, namespace: &str) -> Client {
        let mut opts = ClientOptions::new(&self.url());
        opts.namespace = namespace.to_string();
        Client::new(opts).unwrap()
    }

    /// A client whose watchdog sends no data-loss probe (data_loss.rs): for the tests that count
    /// a primitive's own commands, which a probe landing in their window would add to.
    #[allow(dead_code)] // (not every test binary uses it)
    pub fn counted_client(&self, namespace: &str) -> Client {
        let mut opts = ClientOptions::new(&self.url());
        opts.namespace = namespace.to_string();
        opts.data_loss_probe = false;
        Client::new(opts).unwrap()
    }

    /// Makes ACL user `user` (password "pw", every key, `rules` after +@all) and returns its URL.
    #[allow(dead_code)] // (not every test binary uses it)
    pub fn acl_user(&self, user: &str, rules: &[&str]) -> String {
        let mut args = vec!["ACL", "SETUSER", user, "on", ">pw", "~*"];
        args.extend_from_slice(rules);
        cmd(&self.client("acl"), &args);
        format!("redis://{user}:pw@127.0.0.1:{}/0", self.port)
    }

    pub fn signal(&self, sig: &str) {
        let Some(child) = self.child.as_ref() else {
            return;
        };
        let pid = child.id().to_string();
        Command::new("kill")
            .args([&format!("-{sig}"), &pid])
            .status()
            .unwrap();
    }

    pub fn pause(&self) {
        self.signal("STOP");
    }

    pub fn resume(&self) {
        self.signal("CONT");
    }

    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    pub fn restart(&mut self) {
        self.stop();
        assert!(
            self.spawn(),
            "redis-server did not restart on port {}",
            self.port
        );
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.resume();
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Runs a raw command through a client (test convenience).
pub fn cmd(client: &Client, args: &[&str]) -> redis::Value {
    let args: Vec<Vec<u8>> = args.iter().map(|a| a.as_bytes().to_vec()).collect();
    client
        .command(&ferrolock_core::Interrupt::new(), &args)
        .unwrap()
}

/// Calls per command since the last CONFIG RESETSTAT, but the INFO/CONFIG calls measuring them.
pub fn calls(client: &Client) -> Vec<(String, i64)> {
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

/// Every command Redis ran since the last CONFIG RESETSTAT, but the INFO/CONFIG calls measuring them.
pub fn commands_run(client: &Client) -> i64 {
    calls(client).iter().map(|(_, n)| n).sum()
}

/// Grant inbox channels (src/inbox.rs) subscribed on the server in namespace `ns`.
pub fn inboxes(client: &Client, ns: &str) -> usize {
    match cmd(
        client,
        &["PUBSUB", "CHANNELS", &format!("{ns}:inbox:[0-9a-f]*")],
    ) {
        redis::Value::Array(channels) => channels.len(),
        other => panic!("PUBSUB CHANNELS: {other:?}"),
    }
}

/// Contends once for a scratch name held through `holder` (the same client or another), so
/// `waiter`'s process starts its grant inbox, as its first contended wait in an app would, and
/// waits until the inbox listens. `ns` is the clients' namespace.
pub fn contend_once(holder: &Client, waiter: &Client, ns: &str) {
    let before = inboxes(holder, ns);
    contend(holder, waiter);
    let until = Instant::now() + Duration::from_secs(10);
    while inboxes(holder, ns) <= before {
        assert!(Instant::now() < until, "the waiter's inbox never listened");
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// `waiter` waits 30 ms in vain for a scratch name held through `holder`.
pub fn contend(holder: &Client, waiter: &Client) {
    use ferrolock_core::{DistMutex, DistMutexOptions};
    let intr = ferrolock_core::Interrupt::new();
    let held_by = DistMutex::new(holder, "contend-once", DistMutexOptions::default()).unwrap();
    let held = held_by.lock(&intr, &DistMutex::new_token(), None).unwrap();
    let waits = DistMutex::new(waiter, "contend-once", DistMutexOptions::default()).unwrap();
    let deadline = Instant::now() + Duration::from_millis(30);
    let waited = std::thread::scope(|s| {
        s.spawn(|| {
            waits.lock(
                &ferrolock_core::Interrupt::new(),
                &DistMutex::new_token(),
                Some(deadline),
            )
        })
        .join()
        .unwrap()
    });
    assert!(
        matches!(waited, Err(ferrolock_core::Error::Timeout(_))),
        "{:?}",
        waited.map(|h| h.fencing_token())
    );
    held_by.unlock(&intr, held).unwrap();
}

/// Waits (generously: the machine may be loaded) until `done` holds; fails naming `what` after 20 s.
pub fn until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !done() {
        assert!(Instant::now() < deadline, "never: {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Waits for each of `threads` to report through `entered` (within 20 s each) that it entered,
/// then joins them.
pub fn all_entered(
    entered: &std::sync::mpsc::Receiver<bool>,
    threads: Vec<std::thread::JoinHandle<()>>,
) {
    for _ in &threads {
        assert!(entered.recv_timeout(Duration::from_secs(20)).unwrap());
    }
    threads.into_iter().for_each(|t| t.join().unwrap());
}

/// A thread that enters something (a lock, a slot), says so through its `Gate` and leaves when
/// the test calls `release`.
pub struct Gated<T, R> {
    entered: std::sync::mpsc::Receiver<T>,
    go: std::sync::mpsc::Sender<()>,
    thread: std::thread::JoinHandle<R>,
}

/// What a gated thread calls: `entered` once inside, then `wait_go` before it leaves.
pub struct Gate<T> {
    entered: std::sync::mpsc::Sender<T>,
    go: std::sync::mpsc::Receiver<()>,
}

impl<T> Gate<T> {
    pub fn entered(&self, value: T) {
        self.entered.send(value).unwrap();
    }

    pub fn wait_go(&self) {
        let _ = self.go.recv();
    }
}

/// Runs `body` in a thread of its own, gated (see `Gated`).
pub fn spawn_gated<T: Send + 'static, R: Send + 'static>(
    body: impl FnOnce(Gate<T>) -> R + Send + 'static,
) -> Gated<T, R> {
    let (entered_tx, entered) = std::sync::mpsc::channel();
    let (go, go_rx) = std::sync::mpsc::channel();
    let thread = std::thread::spawn(move || {
        body(Gate {
            entered: entered_tx,
            go: go_rx,
        })
    });
    Gated {
        entered,
        go,
        thread,
    }
}

impl<T, R> Gated<T, R> {
    /// What the thread said once inside (fails after 20 s).
    pub fn wait_entered(&self) -> T {
        self.entered.recv_timeout(Duration::from_secs(20)).unwrap()
    }

    /// Lets the thread leave and returns what it returned.
    pub fn release(self) -> R {
        let _ = self.go.send(());
        self.thread.join().unwrap()
    }
}

/// Every key of namespace "t" (the tests' own) that would never expire: what a crash would
/// leave in Redis forever.
pub fn keys_without_ttl(client: &Client) -> Vec<String> {
    let redis::Value::Array(keys) = cmd(client, &["KEYS", "t:*"]) else {
        panic!("KEYS: not an array")
    };
    keys.iter()
        .map(|k| match k {
            redis::Value::BulkString(b) => String::from_utf8(b.clone()).unwrap(),
            other => panic!("KEYS: {other:?}"),
        })
        .filter(|k| ferrolock_core::client::int(&cmd(client, &["PTTL", k])).unwrap() == -1)
        .collect()
}

/// The grant inboxes of namespace "t" still in Redis.
pub fn grant_keys(client: &Client) -> redis::Value {
    cmd(client, &["KEYS", "t:*:grant:*"])
}
