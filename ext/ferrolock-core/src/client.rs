//! A Redis client shared by many threads: a pool of connections (one per concurrent caller,
//! so threads never queue behind one socket), reset in a forked child.

use crate::conn::{Conn, Timeouts};
use crate::endpoint::{Addr, Endpoint};
use crate::error::{Error, Result};
use crate::fork::ForkLocal;
use crate::interrupt::Interrupt;
use crate::keys::{check_name, Keys};
use crate::lease::Watchdog;
use crate::script::ScriptCall;
use crate::spin::ReplySpin;
use redis::Value;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Idle connections kept per client; more may be open while many threads are busy.
const MAX_IDLE: usize = 64;

/// Covers a loopback or same-host round trip including a short script (24–40 µs on the CI VM).
pub const DEFAULT_REPLY_SPIN: Duration = Duration::from_micros(50);

#[derive(Clone, Debug)]
pub struct ClientOptions {
    /// One Redis server. Ignored when `cluster` or `sentinel` is given.
    pub url: String,
    /// Redis Cluster seed node URLs (credentials, TLS scheme taken from them); non-empty selects
    /// cluster mode.
    pub cluster: Vec<String>,
    /// A Sentinel-managed primary.
    pub sentinel: Option<SentinelOptions>,
    pub namespace: String,
    pub connect_timeout: Duration,
    pub read_timeout: Duration,
    /// Extra CA certificate (PEM) trusted for rediss:// besides the system roots.
    pub tls_ca_file: Option<PathBuf>,
    /// How long a thread may poll for a reply before sleeping in `recv` (zero: never).
    pub reply_spin: Duration,
}

impl ClientOptions {
    pub fn new(url: &str) -> Self {
        ClientOptions {
            url: url.to_string(),
            cluster: Vec::new(),
            sentinel: None,
            namespace: "ferrolock".to_string(),
            connect_timeout: Duration::from_secs(1),
            read_timeout: Duration::from_secs(1),
            tls_ca_file: None,
            reply_spin: DEFAULT_REPLY_SPIN,
        }
    }
}

/// Where to find a Sentinel-managed primary and how to authenticate to it.
#[derive(Clone, Debug, Default)]
pub struct SentinelOptions {
    /// The primary's name in the sentinels' configuration ("mymaster").
    pub master_name: String,
    /// Sentinel URLs, `redis://[user:password@]host:port` (credentials there authenticate to that
    /// sentinel, overriding `sentinel_username`/`sentinel_password`).
    pub sentinels: Vec<String>,
    pub sentinel_username: Option<String>,
    pub sentinel_password: Option<String>,
    /// Credentials and database of the primary (and of the replicas it fails over to).
    pub username: Option<String>,
    pub password: Option<String>,
    pub db: i64,
}

#[derive(Clone)]
pub struct Client {
    pub(crate) inner: Arc<ClientInner>,
}

pub(crate) struct ClientInner {
    endpoint: Endpoint,
    namespace: String,
    timeouts: Timeouts,
    tls: Option<Arc<rustls::ClientConfig>>,
    spin: Arc<ReplySpin>,
    /// The server refused CLIENT UNBLOCK: blocking waits end at Redis' pace.
    unblock_refused: AtomicBool,
    idle: ForkLocal<Mutex<Vec<Conn>>>,
    pub(crate) watchdog: ForkLocal<Arc<Watchdog>>,
}

impl Drop for ClientInner {
    fn drop(&mut self) {
        self.watchdog.get().stop();
    }
}

impl Client {
    pub fn new(opts: ClientOptions) -> Result<Client> {
        if !opts.cluster.is_empty() || opts.sentinel.is_some() {
            return Err(Error::argument(
                "cluster/sentinels: not supported yet (being built)",
            ));
        }
        let endpoint = Endpoint::parse(&opts.url)?;
        check_name("namespace", &opts.namespace)?;
        for (arg, d) in [
            ("connect_timeout", opts.connect_timeout),
            ("read_timeout", opts.read_timeout),
        ] {
            // Bounded too: deadlines are `Instant::now() + timeout`.
            crate::seconds::check_span(arg, d)?;
        }
        let tls = match &endpoint.addr {
            Addr::Tls { insecure: true, .. } => {
                return Err(Error::argument(
                    "url: #insecure TLS is not supported; give tls_ca_file instead",
                ))
            }
            Addr::Tls { .. } => Some(crate::tls::client_config(opts.tls_ca_file.as_deref())?),
            _ => None,
        };
        Ok(Client {
            inner: Arc::new(ClientInner {
                endpoint,
                namespace: opts.namespace,
                timeouts: Timeouts {
                    connect: opts.connect_timeout,
                    read: opts.read_timeout,
                },
                tls,
                spin: Arc::new(ReplySpin::new(opts.reply_spin)),
                unblock_refused: AtomicBool::new(false),
                idle: ForkLocal::new(|| Mutex::new(Vec::new())),
                watchdog: ForkLocal::new(|| Arc::new(Watchdog::default())),
            }),
        })
    }

    pub fn namespace(&self) -> &str {
        &self.inner.namespace
    }

    pub fn redacted_url(&self) -> &str {
        self.inner.endpoint.redacted_url()
    }

    pub fn display_addr(&self) -> String {
        self.inner.endpoint.display_addr()
    }

    pub fn reply_spin(&self) -> Duration {
        self.inner.spin.budget()
    }

    pub fn read_timeout(&self) -> Duration {
        self.inner.timeouts.read
    }

    pub fn keys(&self, name: &str) -> Result<Keys> {
        Keys::new(&self.inner.namespace, name)
    }

    /// Runs `f` on a pooled connection. The connection goes back to the pool only when `f`
    /// left it in a known state (no I/O error, not interrupted).
    pub fn with_conn<R>(
        &self,
        intr: &Interrupt,
        f: impl FnOnce(&mut Conn) -> Result<R>,
    ) -> Result<R> {
        intr.check()?;
        let idle = self.inner.idle.get();
        let pooled = loop {
            let candidate = idle.lock().unwrap_or_else(|e| e.into_inner()).pop();
            match candidate {
                Some(c) if !c.is_alive() => continue, // closed by the server: drop it
                other => break other,
            }
        };
        let mut conn = match pooled {
            Some(c) => c,
            None => Conn::connect(
                &self.inner.endpoint,
                self.inner.timeouts,
                self.inner.tls.as_ref(),
                self.inner.spin.clone(),
            )?,
        };
        let result = f(&mut conn);
        match &result {
            Err(e) if e.is_io() => drop(conn),
            _ => {
                let mut idle = idle.lock().unwrap_or_else(|e| e.into_inner());
                if idle.len() < MAX_IDLE {
                    idle.push(conn);
                }
            }
        }
        result
    }

    /// Any Redis command, e.g. `["SET", "k", "v"]`.
    pub fn command(&self, intr: &Interrupt, args: &[Vec<u8>]) -> Result<Value> {
        if args.is_empty() {
            return Err(Error::argument("command: needs at least a command name"));
        }
        let mut cmd = redis::Cmd::new();
        for a in args {
            cmd.arg(a.as_slice());
        }
        let packed = cmd.get_packed_command();
        self.with_conn(intr, |c| c.request(intr, &packed))
    }

    /// Sends plain commands in one round trip; each reply (or error reply) in order.
    pub fn pipeline(&self, intr: &Interrupt, cmds: &[redis::Cmd]) -> Result<Vec<Value>> {
        let mut buf = Vec::with_capacity(64 * cmds.len());
        for cmd in cmds {
            cmd.write_packed_command(&mut buf);
        }
        self.with_conn(intr, |c| c.pipeline(intr, &buf, cmds.len()))
    }

    /// Runs a script call: EVALSHA, and EVAL on NOSCRIPT. One round trip when cached.
    pub fn eval(&self, intr: &Interrupt, call: &ScriptCall) -> Result<Value> {
        self.with_conn(intr, |c| {
            let mut buf = Vec::with_capacity(128);
            call.pack_into(&mut buf, true);
            match c.request(intr, &buf) {
                Err(Error::Redis(msg)) if msg.starts_with("NOSCRIPT") => {
                    buf.clear();
                    call.pack_into(&mut buf, false);
                    c.request(intr, &buf)
                }
                other => other,
            }
        })
    }

    /// Runs a script call, then `WAIT replicas timeout` on the same connection (one round trip):
    /// the script's reply and how many replicas acknowledged its writes within `timeout`.
    pub fn eval_acked(
        &self,
        intr: &Interrupt,
        call: &ScriptCall,
        replicas: u32,
        timeout: Duration,
    ) -> Result<(Value, i64)> {
        let wait = redis::cmd("WAIT")
            .arg(replicas)
            .arg(timeout.as_millis().min(u64::MAX as u128) as u64)
            .get_packed_command();
        self.with_conn(intr, |c| {
            let mut buf = Vec::with_capacity(160);
            call.pack_into(&mut buf, true);
            buf.extend_from_slice(&wait);
            let mut replies = c.pipeline(intr, &buf, 2)?;
            let acked = replies.pop().expect("two replies");
            let reply = replies.pop().expect("two replies");
            let reply = match reply {
                Value::ServerError(e) if e.code() == "NOSCRIPT" => {
                    // Not cached (restart, failover): run it by source, then WAIT again.
                    buf.clear();
                    call.pack_into(&mut buf, false);
                    let v = c.request(intr, &buf)?;
                    let acked = int(&c.request(intr, &wait)?)?;
                    return Ok((v, acked));
                }
                Value::ServerError(e) => return Err(c.server_error(&e)),
                v => v,
            };
            let acked = match acked {
                Value::ServerError(e) => return Err(c.server_error(&e)),
                v => int(&v)?,
            };
            Ok((reply, acked))
        })
    }

    /// Runs many script calls in one round trip; each gets its own result.
    pub fn eval_many(&self, intr: &Interrupt, calls: &[ScriptCall]) -> Result<Vec<Result<Value>>> {
        if calls.is_empty() {
            return Ok(Vec::new());
        }
        self.with_conn(intr, |c| {
            let mut buf = Vec::with_capacity(128 * calls.len());
            for call in calls {
                call.pack_into(&mut buf, true);
            }
            let replies = c.pipeline(intr, &buf, calls.len())?;
            let mut out = Vec::with_capacity(calls.len());
            for (call, reply) in calls.iter().zip(replies) {
                out.push(match reply {
                    Value::ServerError(e) if e.code() == "NOSCRIPT" => {
                        buf.clear();
                        call.pack_into(&mut buf, false);
                        c.request(intr, &buf)
                    }
                    Value::ServerError(e) => Err(c.server_error(&e)),
                    v => Ok(v),
                });
            }
            Ok(out)
        })
    }

    /// BLPOP on `key` for at most `timeout`. True when an element was popped.
    pub fn blpop(&self, intr: &Interrupt, key: &str, timeout: Duration) -> Result<bool> {
        // BLPOP 0 would block forever; Redis takes fractional seconds since 6.0.
        let secs = timeout.as_secs_f64().max(0.001);
        let packed = redis::cmd("BLPOP")
            .arg(key)
            .arg(format!("{secs:.3}"))
            .get_packed_command();
        let unblock = |id: i64| self.unblock(intr, id);
        let unblock: Option<&dyn Fn(i64) -> Result<()>> =
            if self.inner.unblock_refused.load(Ordering::Relaxed) {
                None
            } else {
                Some(&unblock)
            };
        let reply = self.with_conn(intr, |c| {
            c.request_blocking(intr, &packed, timeout, unblock)
        })?;
        Ok(!matches!(reply, Value::Nil))
    }

    /// Redis' `maxmemory-policy` (`CONFIG GET`), asked once at boot by the Ruby client to warn
    /// when Redis may evict ferrolock's keys. `Ok(None)` when the server does not report it;
    /// `Error::Redis` when it refuses CONFIG (ACL, managed Redis).
    pub fn maxmemory_policy(&self, intr: &Interrupt) -> Result<Option<String>> {
        let args = [
            b"CONFIG".to_vec(),
            b"GET".to_vec(),
            b"maxmemory-policy".to_vec(),
        ];
        let reply = self.command(intr, &args)?;
        // RESP2: [name, value]; RESP3 would be a map, which this connection never negotiates.
        Ok(match reply {
            Value::Array(items) => match items.get(1) {
                Some(Value::BulkString(b)) => Some(String::from_utf8_lossy(b).into_owned()),
                _ => None,
            },
            _ => None,
        })
    }

    /// Ends a blocked connection's wait now, as if its timeout had passed. A server that refuses
    /// CLIENT UNBLOCK is not asked again (that wait ends at Redis' pace); Redis unreachable is
    /// an error.
    fn unblock(&self, intr: &Interrupt, id: i64) -> Result<()> {
        let args = [
            b"CLIENT".to_vec(),
            b"UNBLOCK".to_vec(),
            id.to_string().into_bytes(),
            b"TIMEOUT".to_vec(),
        ];
        match self.command(intr, &args) {
            Ok(_) => Ok(()),
            Err(Error::Redis(_)) => {
                self.inner.unblock_refused.store(true, Ordering::Relaxed);
                Ok(())
            }
            Err(e) => Err(e),
        }
    }
}

/// Reads an integer reply.
pub fn int(v: &Value) -> Result<i64> {
    match v {
        Value::Int(i) => Ok(*i),
        Value::BulkString(b) => std::str::from_utf8(b)
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| Error::Redis(format!("expected an integer, got {v:?}"))),
        other => Err(Error::Redis(format!("expected an integer, got {other:?}"))),
    }
}

/// Reads an array reply of integers.
pub fn ints(v: &Value) -> Result<Vec<i64>> {
    match v {
        Value::Array(items) => items.iter().map(int).collect(),
        other => Err(Error::Redis(format!("expected an array, got {other:?}"))),
    }
}
