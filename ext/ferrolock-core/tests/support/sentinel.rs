//! A throwaway Sentinel setup for tests: a primary, one replica and 3 sentinels on free
//! loopback ports, all password-protected, `--save ""`, `--appendonly no`, under a temp dir,
//! killed on drop. Low `down-after-milliseconds` so a killed primary is replaced in seconds.
#![allow(dead_code)]

pub use crate::servers::wait_until;
use crate::servers::{query_url, spawn_listening, temp_dir};
use std::path::PathBuf;
use std::process::{Child, Command};

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

impl TestSentinels {
    pub fn start() -> TestSentinels {
        let dir = temp_dir("sentinel");
        let mut setup = TestSentinels {
            data_ports: Vec::new(),
            sentinel_ports: Vec::new(),
            data: Vec::new(),
            sentinels: Vec::new(),
            dir,
        };
        for _ in 0..2 {
            let primary = setup.data_ports.first().copied();
            let (port, child) = spawn_listening(&setup.dir, data_url, |port| {
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
            let (port, child) = spawn_listening(&setup.dir, sentinel_url, |port| {
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

fn data_url(port: u16) -> String {
    format!("redis://:{DATA_PASSWORD}@127.0.0.1:{port}")
}

fn sentinel_url(port: u16) -> String {
    format!("redis://:{SENTINEL_PASSWORD}@127.0.0.1:{port}")
}

pub fn data_query<T: redis::FromRedisValue>(port: u16, args: &[&str]) -> redis::RedisResult<T> {
    query_url(data_url(port), args)
}

pub fn sentinel_query<T: redis::FromRedisValue>(port: u16, args: &[&str]) -> redis::RedisResult<T> {
    query_url(sentinel_url(port), args)
}
