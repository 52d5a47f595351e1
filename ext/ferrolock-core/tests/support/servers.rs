//! Spawning throwaway servers for the cluster and sentinel test setups: a free loopback port,
//! a start that checks the server listening there is ours, a `kill -9` of every started server
//! when the test binary exits (statics are never dropped), and one-off admin queries.
#![allow(dead_code)]

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, Once};
use std::time::{Duration, Instant};

static PIDS: Mutex<Vec<u32>> = Mutex::new(Vec::new());
static DIRS: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
static AT_EXIT: Once = Once::new();

extern "C" fn kill_at_exit() {
    if let Ok(pids) = PIDS.lock() {
        for pid in pids.iter() {
            // SAFETY: plain kill(2) of a child we started.
            unsafe { libc::kill(*pid as libc::pid_t, libc::SIGKILL) };
        }
    }
    if let Ok(dirs) = DIRS.lock() {
        for dir in dirs.iter() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

fn register_at_exit() {
    // SAFETY: registering a plain function, once.
    AT_EXIT.call_once(|| unsafe {
        libc::atexit(kill_at_exit);
    });
}

/// Removes `dir` at exit too (for a setup kept in a static, which is never dropped).
pub fn remove_at_exit(dir: PathBuf) {
    register_at_exit();
    DIRS.lock().unwrap().push(dir);
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A fresh temp dir for one setup.
pub fn temp_dir(kind: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "ferrolock-core-{kind}-{}-{}",
        std::process::id(),
        free_port()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Starts a server on a free port (in `dir`) and waits until it answers at `url(port)`. A port
/// asked from the OS may be taken by another test before the server binds it: then it tries
/// again on another.
pub fn spawn_listening(
    dir: &PathBuf,
    url: impl Fn(u16) -> String,
    command: impl Fn(u16) -> Command,
) -> (u16, Child) {
    register_at_exit();
    for _ in 0..5 {
        let port = free_port();
        let mut child = command(port)
            .current_dir(dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server must be installed");
        PIDS.lock().unwrap().push(child.id());
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            // Ours, not another test's server that took the port first.
            let info: String = query_url(url(port), &["INFO", "server"]).unwrap_or_default();
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

/// One command to one server (test administration, outside the client under test).
pub fn query_url<T: redis::FromRedisValue>(url: String, args: &[&str]) -> redis::RedisResult<T> {
    let client = redis::Client::open(url)?;
    let mut con = client.get_connection_with_timeout(Duration::from_secs(2))?;
    con.set_read_timeout(Some(Duration::from_secs(5)))?;
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query(&mut con)
}

#[track_caller]
pub fn wait_until(secs: u64, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !ok() {
        assert!(Instant::now() < deadline, "not ready after {secs} s");
        std::thread::sleep(Duration::from_millis(100));
    }
}
