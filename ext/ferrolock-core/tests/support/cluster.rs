//! A throwaway Redis Cluster for tests: 3 masters + 3 replicas on free loopback ports (client
//! and bus ports both asked from the OS), `--save ""`, `--appendonly no`, all under a temp dir.
//! Killed on drop, and at process exit for the one `shared()` cluster (a static is never
//! dropped).
#![allow(dead_code)]

pub use crate::servers::{free_port, wait_until};
use crate::servers::{query_url, remove_at_exit, spawn_listening, temp_dir};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;

/// `cluster-node-timeout`: how soon a replica replaces a dead master.
pub const NODE_TIMEOUT_MS: u64 = 2000;

pub struct TestCluster {
    pub ports: Vec<u16>,
    children: Vec<Option<Child>>,
    dir: PathBuf,
}

impl TestCluster {
    /// One cluster per test binary, for tests that do not kill nodes.
    pub fn shared() -> &'static TestCluster {
        static SHARED: OnceLock<TestCluster> = OnceLock::new();
        SHARED.get_or_init(|| {
            let cluster = TestCluster::start();
            remove_at_exit(cluster.dir.clone());
            cluster
        })
    }

    pub fn start() -> TestCluster {
        let dir = temp_dir("cluster");
        let mut cluster = TestCluster {
            ports: Vec::new(),
            children: Vec::new(),
            dir,
        };
        for _ in 0..6 {
            let (port, child) = spawn_listening(&cluster.dir, local_url, |port| {
                let mut cmd = Command::new("redis-server");
                cmd.args(["--port", &port.to_string()])
                    .args(["--cluster-port", &free_port().to_string()])
                    .args(["--cluster-enabled", "yes"])
                    .args(["--cluster-config-file", &format!("nodes-{port}.conf")])
                    .args(["--cluster-node-timeout", &NODE_TIMEOUT_MS.to_string()])
                    .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
                    // Replicas in sync at once (the default waits 5 s to batch replicas).
                    .args(["--repl-diskless-sync-delay", "0"]);
                cmd
            });
            cluster.ports.push(port);
            cluster.children.push(Some(child));
        }
        let addrs: Vec<String> = cluster
            .ports
            .iter()
            .map(|p| format!("127.0.0.1:{p}"))
            .collect();
        let status = Command::new("redis-cli")
            .args(["--cluster", "create"])
            .args(&addrs)
            .args(["--cluster-replicas", "1", "--cluster-yes"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("redis-cli must be installed");
        assert!(status.success(), "redis-cli --cluster create failed");
        cluster.wait_ok();
        // A replica takes over only once it has synced with its master.
        for &port in &cluster.ports {
            wait_until(30, || {
                let info: String = query(port, &["INFO", "replication"]).unwrap_or_default();
                info.contains("role:master") || info.contains("master_link_status:up")
            });
        }
        cluster
    }

    /// Until every live node says `cluster_state:ok` and agrees on 3 masters with slots.
    pub fn wait_ok(&self) {
        wait_until(30, || {
            self.live_ports().iter().all(|&p| {
                let info: String = query(p, &["CLUSTER", "INFO"]).unwrap_or_default();
                info.contains("cluster_state:ok") && self.masters_seen_by(p).len() == 3
            })
        });
    }

    pub fn urls(&self) -> Vec<String> {
        self.ports
            .iter()
            .map(|p| format!("redis://127.0.0.1:{p}"))
            .collect()
    }

    fn live_ports(&self) -> Vec<u16> {
        self.ports
            .iter()
            .zip(&self.children)
            .filter(|(_, c)| c.is_some())
            .map(|(p, _)| *p)
            .collect()
    }

    /// Masters serving slots, as `(port, node id)`, as `port` sees them.
    fn masters_seen_by(&self, port: u16) -> Vec<(u16, String)> {
        let nodes: String = query(port, &["CLUSTER", "NODES"]).unwrap_or_default();
        nodes
            .lines()
            .filter_map(|line| {
                let f: Vec<&str> = line.split(' ').collect();
                let serving = f.len() > 8;
                let master = f.get(2)?.contains("master") && !f[2].contains("fail");
                let port = f.get(1)?.split(['@', ':']).nth(1)?.parse().ok()?;
                (serving && master).then(|| (port, f[0].to_string()))
            })
            .collect()
    }

    /// Masters serving slots as `(port, node id)`, asked from a live node.
    pub fn masters(&self) -> Vec<(u16, String)> {
        self.masters_seen_by(self.live_ports()[0])
    }

    /// The master port serving `slot`.
    pub fn owner_of(&self, slot: u16) -> u16 {
        let slots: redis::Value = query(self.live_ports()[0], &["CLUSTER", "SLOTS"]).unwrap();
        let redis::Value::Array(ranges) = slots else {
            panic!("{slots:?}")
        };
        for r in ranges {
            let redis::Value::Array(items) = r else {
                continue;
            };
            if let (redis::Value::Int(a), redis::Value::Int(b), redis::Value::Array(m)) =
                (&items[0], &items[1], &items[2])
            {
                if (*a..=*b).contains(&(slot as i64)) {
                    if let redis::Value::Int(p) = &m[1] {
                        return *p as u16;
                    }
                }
            }
        }
        panic!("slot {slot} is not served");
    }

    pub fn node_id(&self, port: u16) -> String {
        query(port, &["CLUSTER", "MYID"]).unwrap()
    }

    /// `kill -9` of the node on `port`.
    pub fn kill(&mut self, port: u16) {
        let i = self.ports.iter().position(|&p| p == port).unwrap();
        if let Some(mut child) = self.children[i].take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for TestCluster {
    fn drop(&mut self) {
        for child in self.children.iter_mut().flatten() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn local_url(port: u16) -> String {
    format!("redis://127.0.0.1:{port}")
}

/// One command to one node (test administration, outside the client under test).
pub fn query<T: redis::FromRedisValue>(port: u16, args: &[&str]) -> redis::RedisResult<T> {
    query_url(local_url(port), args)
}
