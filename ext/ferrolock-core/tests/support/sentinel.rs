//! A throwaway Sentinel setup for tests: a primary, one replica and 3 sentinels on free
//! loopback ports, all password-protected, `--save ""`, `--appendonly no`, under a temp dir,
//! killed on drop. Low `down-after-milliseconds` so a killed primary is replaced in seconds.
#![allow(dead_code)]

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const MASTER_NAME: &str = "mymaster";
pub const DATA_PASSWORD: &str = "data-secret";
pub const SENTINEL_PASSWORD: &str = "sentinel-secret";

pub struct TestSentinels {
    /// The primary's port at start, then the replica's.
    pub data_ports: Vec<u16>,
    pub sentinel_ports: Vec<u16>,
    data: Vec<Option<Child>>,
    sentinels: Vec<Child>,
    dir: PathBuf,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl TestSentinels {
    pub fn start() -> TestSentinels {
        let dir = std::env::temp_dir().join(format!(
            "ferrolock-core-sentinel-{}-{}",
            std::process::id(),
            free_port()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let mut setup = TestSentinels {
            data_ports: Vec::new(),
            sentinel_ports: Vec::new(),
            data: Vec::new(),
            sentinels: Vec::new(),
            dir,
        };
        for _ in 0..2 {
            let primary = setup.data_ports.first().copied();
            let (port, child) = spawn_listening(&setup.dir, DATA_PASSWORD, |port| {
                let mut cmd = Command::new("redis-server");
                cmd.args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
                    .args(["--save", "", "--appendonly", "no"])
                    .args(["--repl-diskless-sync-delay", "0"])
                    .args([
                        "--requirepass",
                        DATA_PASSWORD,
                        "--masterauth",
                        DATA_PASSWORD,
                    ]);
                if let Some(p) = primary {
                    cmd.args(["--replicaof", "127.0.0.1", &p.to_string()]);
                }
                cmd
            });
            setup.data_ports.push(port);
            setup.data.push(Some(child));
        }
        let primary = setup.data_ports[0];
        setup.wait_replica_synced(setup.data_ports[1]);
        for _ in 0..3 {
            let dir = setup.dir.clone();
            let (port, child) = spawn_listening(&setup.dir, SENTINEL_PASSWORD, |port| {
                let conf = dir.join(format!("sentinel-{port}.conf"));
                std::fs::write(
                    &conf,
                    format!(
                        "port {port}\nbind 127.0.0.1\ndir {dir}\n\
                         requirepass {SENTINEL_PASSWORD}\n\
                         sentinel sentinel-pass {SENTINEL_PASSWORD}\n\
                         sentinel monitor {MASTER_NAME} 127.0.0.1 {primary} 2\n\
                         sentinel auth-pass {MASTER_NAME} {DATA_PASSWORD}\n\
                         sentinel down-after-milliseconds {MASTER_NAME} 1000\n\
                         sentinel failover-timeout {MASTER_NAME} 5000\n",
                        dir = dir.display()
                    ),
                )
                .unwrap();
                let mut cmd = Command::new("redis-server");
                cmd.arg(&conf).arg("--sentinel");
                cmd
            });
            setup.sentinel_ports.push(port);
            setup.sentinels.push(child);
        }
        // Every sentinel knows the replica and the other two sentinels (needed to agree).
        wait_until(30, || {
            setup.sentinel_ports.iter().all(|&s| {
                let replicas: redis::Value =
                    sentinel_query(s, &["SENTINEL", "REPLICAS", MASTER_NAME]).unwrap();
                let others: redis::Value =
                    sentinel_query(s, &["SENTINEL", "SENTINELS", MASTER_NAME]).unwrap();
                matches!((replicas, others), (redis::Value::Array(r), redis::Value::Array(o)) if r.len() == 1 && o.len() == 2)
            })
        });
        setup
    }

    pub fn sentinel_urls(&self) -> Vec<String> {
        self.sentinel_ports
            .iter()
            .map(|p| format!("redis://127.0.0.1:{p}"))
            .collect()
    }

    /// The primary's port according to the first live sentinel.
    pub fn primary_port(&self) -> u16 {
        let addr: Vec<String> = sentinel_query(
            self.sentinel_ports[0],
            &["SENTINEL", "GET-MASTER-ADDR-BY-NAME", MASTER_NAME],
        )
        .unwrap();
        addr[1].parse().unwrap()
    }

    /// Until the server on `port` is a replica whose link to its primary is up.
    pub fn wait_replica_synced(&self, port: u16) {
        wait_until(30, || {
            let info: String = data_query(port, &["INFO", "replication"]).unwrap_or_default();
            info.contains("role:slave") && info.contains("master_link_status:up")
        });
    }

    /// `kill -9` of the data server on `port`.
    pub fn kill(&mut self, port: u16) {
        let i = self.data_ports.iter().position(|&p| p == port).unwrap();
        if let Some(mut child) = self.data[i].take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for TestSentinels {
    fn drop(&mut self) {
        let children = self
            .data
            .iter_mut()
            .flatten()
            .chain(self.sentinels.iter_mut());
        for child in children {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Starts a server on a free port and waits until it answers. A port asked from the OS may be
/// taken by another test before the server binds it: then it tries again on another.
fn spawn_listening(
    dir: &PathBuf,
    password: &str,
    command: impl Fn(u16) -> Command,
) -> (u16, Child) {
    for _ in 0..5 {
        let port = free_port();
        let mut child = command(port)
            .current_dir(dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server must be installed");
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            // Ours, not another test's server that took the port first.
            let info: String = query(
                format!("redis://:{password}@127.0.0.1:{port}"),
                &["INFO", "server"],
            )
            .unwrap_or_default();
            if info.contains(&format!("process_id:{}\r", child.id())) {
                return (port, child);
            }
            if child.try_wait().ok().flatten().is_some() || Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    panic!("could not start a server on a free port");
}

fn query<T: redis::FromRedisValue>(url: String, args: &[&str]) -> redis::RedisResult<T> {
    let client = redis::Client::open(url)?;
    let mut con = client.get_connection_with_timeout(Duration::from_secs(2))?;
    con.set_read_timeout(Some(Duration::from_secs(5)))?;
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query(&mut con)
}

pub fn data_query<T: redis::FromRedisValue>(port: u16, args: &[&str]) -> redis::RedisResult<T> {
    query(format!("redis://:{DATA_PASSWORD}@127.0.0.1:{port}"), args)
}

pub fn sentinel_query<T: redis::FromRedisValue>(port: u16, args: &[&str]) -> redis::RedisResult<T> {
    query(
        format!("redis://:{SENTINEL_PASSWORD}@127.0.0.1:{port}"),
        args,
    )
}

#[track_caller]
pub fn wait_until(secs: u64, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !ok() {
        assert!(Instant::now() < deadline, "not ready after {secs} s");
        std::thread::sleep(Duration::from_millis(100));
    }
}
