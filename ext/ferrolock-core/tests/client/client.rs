use crate::support::{cmd, RedisServer};
use ferrolock_core::client::int;
use ferrolock_core::script::{Script, ScriptCall};
use ferrolock_core::{lua_script, Client, ClientOptions, Error, Interrupt};
use std::sync::Arc;
use std::time::{Duration, Instant};

lua_script!(ECHO_KEY = "lease/renew_key");

#[test]
fn commands_and_values_round_trip() {
    let server = RedisServer::start();
    let c = server.client("t");
    assert_eq!(cmd(&c, &["SET", "a", "1"]), redis::Value::Okay);
    assert_eq!(cmd(&c, &["INCR", "a"]), redis::Value::Int(2));
    assert_eq!(cmd(&c, &["GET", "missing"]), redis::Value::Nil);
    let err = c
        .command(&Interrupt::new(), &[b"NOSUCHCOMMAND".to_vec()])
        .unwrap_err();
    assert!(
        matches!(err, Error::Redis(ref m) if m.contains("unknown command")),
        "{err:?}"
    );
    // The connection that got the error reply is still usable.
    assert_eq!(
        cmd(&c, &["PING"]),
        redis::Value::SimpleString("PONG".into())
    );
}

#[test]
fn scripts_survive_script_flush() {
    let server = RedisServer::start();
    let c = server.client("t");
    cmd(&c, &["SET", "k", "tok"]);
    let call = ScriptCall::new(&ECHO_KEY).key("k").arg("tok").arg(5000);
    assert_eq!(int(&c.eval(&Interrupt::new(), &call).unwrap()).unwrap(), 1);
    cmd(&c, &["SCRIPT", "FLUSH"]);
    assert_eq!(int(&c.eval(&Interrupt::new(), &call).unwrap()).unwrap(), 1);
    cmd(&c, &["SCRIPT", "FLUSH"]);
    let many = c
        .eval_many(&Interrupt::new(), &[call.clone(), call])
        .unwrap();
    assert!(many.iter().all(|r| int(r.as_ref().unwrap()).unwrap() == 1));
}

/// Never cached until it runs (no other test loads it): its EVALSHA in a batch meets NOSCRIPT,
/// and the EVAL that follows outlasts the client's read_timeout. It spins ARGV[1] rounds: Redis 8
/// and Valkey 9 freeze TIME within a script, so it cannot watch the clock.
static SLOW: Script = Script::new(
    "test/slow",
    "local x = 0 for i = 1, tonumber(ARGV[1]) do x = x + i end return 'late'",
);
/// SLOW's loop under another name (SLOW must stay uncached): times rounds of it.
static SPIN: Script = Script::new(
    "test/spin",
    "local x = 0 for i = 1, tonumber(ARGV[1]) do x = x + i end return x",
);

/// A batch's NOSCRIPT fallback that gets no reply in time leaves a reply on its way: the
/// connection must be dropped, not handed to the next call (which would read 'late' as its own
/// reply: a release's answer once came back as a limiter's status so). The pool's check of an
/// idle connection (unread data: not reused) misses a reply that is still on its way.
#[test]
fn a_batch_whose_fallback_got_no_reply_drops_its_connection() {
    let server = RedisServer::start();
    let mut opts = ClientOptions::new(&server.url());
    opts.namespace = "t".to_string();
    opts.read_timeout = Duration::from_millis(400);
    let c = Client::new(opts).unwrap();
    // Rounds for about 2 s of the server's time (5 read timeouts), measured here: the fastest of
    // three probes, since a probe slowed by the machine's load (a server waiting for a CPU)
    // would make the script too short to outlast the read timeout (ci13, Valkey beside other
    // lanes); a slower script than planned only makes the PINGs below wait longer.
    let probe = 1_000_000u64;
    let fastest = (0..3)
        .map(|_| {
            let t = Instant::now();
            c.eval(&Interrupt::new(), &ScriptCall::new(&SPIN).arg(probe))
                .unwrap();
            t.elapsed().as_millis().max(1) as u64
        })
        .min()
        .unwrap();
    let rounds = probe * 2000 / fastest;
    let batch = c.eval_many(&Interrupt::new(), &[ScriptCall::new(&SLOW).arg(rounds)]);
    let cut = match &batch {
        Ok(results) => matches!(results[0], Err(Error::Connection { .. })),
        Err(Error::Connection { .. }) => true,
        _ => false,
    };
    assert!(cut, "{batch:?}");
    // At once, while the script still runs: a connection kept would have nothing to read yet,
    // look healthy, and read 'late' for a PING. A fresh one waits for the server (its calls
    // time out, or meet BUSY) and then reads PONG.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match c.command(&Interrupt::new(), &[b"PING".to_vec()]) {
            Ok(reply) => {
                assert_eq!(reply, redis::Value::SimpleString("PONG".into()));
                break;
            }
            Err(e) => assert!(Instant::now() < deadline, "{e:?}"),
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn many_threads_share_one_client() {
    let server = RedisServer::start();
    let c = Arc::new(server.client("t"));
    let threads: Vec<_> = (0..16)
        .map(|t| {
            let c = c.clone();
            std::thread::spawn(move || {
                for i in 0..200 {
                    let key = format!("k{t}");
                    let v = int(&cmd(&c, &["INCR", &key])).unwrap();
                    assert_eq!(v, i + 1);
                }
            })
        })
        .collect();
    threads.into_iter().for_each(|t| t.join().unwrap());
}

#[test]
fn unreachable_redis_is_a_connection_error_naming_the_address() {
    let mut server = RedisServer::start();
    let port = server.port;
    server.stop();
    let c = Client::new(ClientOptions::new(&format!(
        "redis://:hunter2@127.0.0.1:{port}/0"
    )))
    .unwrap();
    let err = c
        .command(&Interrupt::new(), &[b"PING".to_vec()])
        .unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, Error::Connection { .. }), "{err:?}");
    assert!(msg.contains(&format!("127.0.0.1:{port}")), "{msg}");
    assert!(!msg.contains("hunter2"), "{msg}");
}

#[test]
fn paused_redis_times_out_within_read_timeout_and_recovers() {
    let server = RedisServer::start();
    let mut opts = ClientOptions::new(&server.url());
    opts.read_timeout = Duration::from_millis(400);
    let c = Client::new(opts).unwrap();
    cmd(&c, &["PING"]);
    server.pause();
    let t = Instant::now();
    let err = c
        .command(&Interrupt::new(), &[b"PING".to_vec()])
        .unwrap_err();
    assert!(
        matches!(err, Error::Connection { ref detail, .. } if detail.contains("timed out")),
        "{err:?}"
    );
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    server.resume();
    assert_eq!(
        cmd(&c, &["PING"]),
        redis::Value::SimpleString("PONG".into())
    );
}

#[test]
fn cancel_cuts_a_blocked_read_promptly() {
    let server = RedisServer::start();
    let mut opts = ClientOptions::new(&server.url());
    opts.read_timeout = Duration::from_secs(30);
    let c = server.client("t");
    let c2 = Client::new(opts).unwrap();
    cmd(&c, &["PING"]);
    let intr = Arc::new(Interrupt::new());
    let started = Instant::now();
    let blocked = {
        let intr = intr.clone();
        std::thread::spawn(move || c2.blpop(&intr, "nothing", Duration::from_secs(20)))
    };
    std::thread::sleep(Duration::from_millis(100));
    let cancelled_at = Instant::now();
    intr.cancel();
    let result = blocked.join().unwrap();
    assert_eq!(result.unwrap_err(), Error::Interrupted);
    assert!(
        cancelled_at.elapsed() < Duration::from_millis(100),
        "{:?}",
        cancelled_at.elapsed()
    );
    assert!(started.elapsed() < Duration::from_secs(2));
}

#[test]
fn db_index_and_acl_users_are_honoured() {
    let server = RedisServer::start();
    let admin = server.client("t");
    cmd(
        &admin,
        &["ACL", "SETUSER", "app", "on", ">s3cret", "~*", "+@all"],
    );
    let url = format!("redis://app:s3cret@127.0.0.1:{}/4", server.port);
    let c = Client::new(ClientOptions::new(&url)).unwrap();
    cmd(&c, &["SET", "in4", "yes"]);
    cmd(&admin, &["SELECT", "0"]);
    // The admin connection pool is db 0: the key is not there.
    assert_eq!(cmd(&admin, &["EXISTS", "in4"]), redis::Value::Int(0));
    let bad = format!("redis://app:wrong@127.0.0.1:{}/0", server.port);
    let err = Client::new(ClientOptions::new(&bad))
        .unwrap()
        .command(&Interrupt::new(), &[b"PING".to_vec()])
        .unwrap_err();
    assert!(matches!(err, Error::Connection { .. }), "{err:?}");
    assert!(!err.to_string().contains("wrong"), "{err}");
}

#[test]
fn a_server_that_refuses_scripts_is_named_with_what_is_missing() {
    let server = RedisServer::start();
    let admin = server.client("t");
    cmd(
        &admin,
        &[
            "ACL",
            "SETUSER",
            "noscript",
            "on",
            ">pw",
            "~*",
            "+@all",
            "-@scripting",
        ],
    );
    let url = format!("redis://noscript:pw@127.0.0.1:{}/0", server.port);
    let c = Client::new(ClientOptions::new(&url)).unwrap();
    let call = ScriptCall::new(&ECHO_KEY).key("k").arg("tok").arg(5000);
    let err = c.eval(&Interrupt::new(), &call).unwrap_err();
    let text = err.to_string();
    let addr = format!("127.0.0.1:{}", server.port);
    assert!(
        text.contains(&format!("Redis at {addr} cannot run Lua scripts")),
        "{text}"
    );
    assert!(text.contains("+@scripting"), "{text}");
    assert!(!text.contains("pw"), "{text}");
    // A script's own error is not mistaken for it.
    let err = admin
        .command(
            &Interrupt::new(),
            &[
                b"EVAL".to_vec(),
                b"return redis.call('NOPE')".to_vec(),
                b"0".to_vec(),
            ],
        )
        .unwrap_err();
    assert!(!err.to_string().contains("cannot run Lua scripts"), "{err}");
}

#[test]
fn pooled_connections_survive_a_redis_restart() {
    let mut server = RedisServer::start();
    let c = server.client("t");
    // Several pooled connections, all to the old server process.
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let c = c.clone();
            std::thread::spawn(move || cmd(&c, &["PING"]))
        })
        .collect();
    threads.into_iter().for_each(|t| {
        t.join().unwrap();
    });
    server.restart();
    for _ in 0..8 {
        assert_eq!(
            cmd(&c, &["PING"]),
            redis::Value::SimpleString("PONG".into())
        );
    }
}

extern "C" fn ignore_signal(_: libc::c_int) {}

#[test]
fn signals_do_not_stretch_the_read_timeout() {
    // Ruby signals threads blocked in system calls; each EINTR must not restart the timeout.
    let server = RedisServer::start();
    let mut opts = ClientOptions::new(&server.url());
    opts.read_timeout = Duration::from_millis(400);
    let c = Client::new(opts).unwrap();
    cmd(&c, &["PING"]);
    // SAFETY: installs a no-op handler for SIGUSR2 without SA_RESTART, so recv returns EINTR.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = ignore_signal as extern "C" fn(libc::c_int) as usize;
        libc::sigaction(libc::SIGUSR2, &action, std::ptr::null_mut());
    }
    server.pause();
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (tx, rx) = std::sync::mpsc::channel();
    let (stopped_tx, stopped_rx) = std::sync::mpsc::channel::<()>();
    let reader = {
        let done = done.clone();
        std::thread::spawn(move || {
            tx.send(unsafe { libc::pthread_self() }).unwrap();
            let t = Instant::now();
            let result = c.command(&Interrupt::new(), &[b"PING".to_vec()]);
            let took = t.elapsed();
            // Stay alive until the signaller has stopped aiming at this thread.
            done.store(true, std::sync::atomic::Ordering::SeqCst);
            stopped_rx.recv().unwrap();
            (result, took)
        })
    };
    let thread = rx.recv().unwrap();
    let signaller = std::thread::spawn(move || {
        while !done.load(std::sync::atomic::Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(20));
            // SAFETY: the reader thread waits for `stopped_tx` before it exits.
            unsafe { libc::pthread_kill(thread, libc::SIGUSR2) };
        }
        stopped_tx.send(()).unwrap();
    });
    let (result, took) = reader.join().unwrap();
    server.resume();
    assert!(
        matches!(result, Err(Error::Connection { ref detail, .. }) if detail.contains("timed out")),
        "{result:?}"
    );
    assert!(took < Duration::from_millis(1000), "took {took:?}");
    signaller.join().unwrap();
}

fn median_blpop(c: &Client, key: &str, timeout: Duration) -> Duration {
    let mut took: Vec<Duration> = (0..5)
        .map(|_| {
            let started = Instant::now();
            assert!(c.blpop(&Interrupt::new(), key, timeout).unwrap().is_none());
            started.elapsed()
        })
        .collect();
    took.sort();
    took[2]
}

#[test]
fn blpop_ends_at_its_timeout_not_at_the_servers_next_tick() {
    let server = RedisServer::start();
    let c = server.client("t");
    // Redis alone would answer at its next cron tick: 100 ms for any timeout below that.
    let took = median_blpop(&c, "empty", Duration::from_millis(30));
    assert!(took >= Duration::from_millis(30), "{took:?}");
    assert!(took < Duration::from_millis(80), "{took:?}");
}

#[test]
fn blpop_on_a_fresh_connection_returns_an_element_at_once() {
    let server = RedisServer::start();
    let c = server.client("t");
    cmd(&c, &["RPUSH", "ready", "x"]);
    // The first BLPOP of a connection also learns its client id; the element already there
    // must come back now, not when the wait's deadline passes.
    let other = server.client("t");
    let started = Instant::now();
    assert!(other
        .blpop(&Interrupt::new(), "ready", Duration::from_secs(3))
        .unwrap()
        .is_some());
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn blpop_still_times_out_where_client_commands_are_refused() {
    let server = RedisServer::start();
    let admin = server.client("t");
    // No CLIENT at all, or CLIENT ID but not CLIENT UNBLOCK.
    for (user, rule) in [("noclient", "-client"), ("nounblock", "-client|unblock")] {
        let url = server.acl_user(user, &["+@all", rule]);
        let c = Client::new(ClientOptions::new(&url)).unwrap();
        // Ends at Redis' pace (its next tick), but ends, and the connection stays usable.
        let took = median_blpop(&c, "empty", Duration::from_millis(30));
        assert!(took >= Duration::from_millis(30), "{user}: {took:?}");
        assert!(took < Duration::from_millis(500), "{user}: {took:?}");
        cmd(&admin, &["RPUSH", "full", "x"]);
        assert!(c
            .blpop(&Interrupt::new(), "full", Duration::from_secs(1))
            .unwrap()
            .is_some());
    }
}

#[test]
fn ending_waits_early_never_loses_a_pushed_element() {
    let server = RedisServer::start();
    let c = server.client("t");
    let pushed = 3000;
    // Waiters whose 2 ms waits are ended by CLIENT UNBLOCK while a pusher keeps pushing: an
    // element popped at the moment of the unblock must still reach its waiter.
    let waiters: Vec<_> = (0..4)
        .map(|_| {
            let c = c.clone();
            std::thread::spawn(move || {
                let mut got = 0;
                let started = Instant::now();
                while started.elapsed() < Duration::from_secs(3) {
                    if c.blpop(&Interrupt::new(), "signals", Duration::from_millis(2))
                        .unwrap()
                        .is_some()
                    {
                        got += 1;
                    }
                }
                got
            })
        })
        .collect();
    let pusher = c.clone();
    for i in 0..pushed {
        cmd(&pusher, &["RPUSH", "signals", "x"]);
        if i % 50 == 0 {
            std::thread::sleep(Duration::from_millis(3));
        }
    }
    let popped: i64 = waiters.into_iter().map(|w| w.join().unwrap()).sum();
    let left = int(&cmd(&c, &["LLEN", "signals"])).unwrap();
    assert_eq!(popped + left, pushed);
    assert!(popped > 0);
}

#[test]
fn a_busy_server_is_a_connection_error_not_an_answer() {
    // LOADING (replaying the AOF after a restart), BUSY (a long script), READONLY (a replica after
    // a failover): the command did not run, so callers must see Connection, not a Redis reply.
    let server = RedisServer::start();
    let c = server.client("t");
    cmd(&c, &["CONFIG", "SET", "busy-reply-threshold", "50"]);
    let url = server.url();
    let busy = std::thread::spawn(move || {
        let admin = Client::new(ClientOptions::new(&url)).unwrap();
        let spin = "local t0 = redis.call('TIME') \
                    local function ms(t) return t[1] * 1000 + math.floor(t[2] / 1000) end \
                    while ms(redis.call('TIME')) - ms(t0) < 700 do end return 1";
        cmd(&admin, &["EVAL", spin, "0"])
    });
    std::thread::sleep(Duration::from_millis(300));
    let err = c
        .command(&Interrupt::new(), &[b"GET".to_vec(), b"k".to_vec()])
        .unwrap_err();
    assert!(
        matches!(err, Error::Connection { ref detail, .. } if detail.contains("BUSY")),
        "{err:?}"
    );
    let call = ScriptCall::new(&ECHO_KEY).key("k").arg("tok").arg(5000);
    let err = c.eval_many(&Interrupt::new(), &[call]);
    let busy_in_batch = match &err {
        Ok(results) => matches!(results[0], Err(Error::Connection { .. })),
        Err(Error::Connection { .. }) => true,
        _ => false,
    };
    assert!(busy_in_batch, "{err:?}");
    assert_eq!(busy.join().unwrap(), redis::Value::Int(1));
    assert_eq!(
        cmd(&c, &["PING"]),
        redis::Value::SimpleString("PONG".into())
    );
}
