//! A Redis client shared by many threads: pools of connections (one per concurrent caller,
//! so threads never queue behind one socket), reset in a forked child, to one server, the
//! masters of a Redis Cluster or a Sentinel-managed primary (see transport/topology.rs).

use crate::error::{Error, Result};
use crate::fork::ForkLocal;
use crate::inbox::Inbox;
use crate::interrupt::Interrupt;
use crate::keys::{check_name, Keys};
use crate::script::ScriptCall;
use crate::transport::conn::{Conn, Timeouts};
use crate::transport::pool::{Connector, NodePool};
use crate::transport::spin::ReplySpin;
use crate::transport::topology::{Route, Topology};
use crate::watchdog::Watchdog;
// Defined with the transport (which reads them); named here, where callers look for them.
pub use crate::transport::options::{ClientOptions, SentinelOptions, DEFAULT_REPLY_SPIN};
use redis::Value;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

#[derive(Clone)]
pub struct Client {
    pub(crate) inner: Arc<ClientInner>,
}

pub(crate) struct ClientInner {
    topology: Topology,
    /// What errors and `redacted_url` show: the URL(s) without passwords.
    shown: String,
    namespace: String,
    how: Connector,
    /// The server refused CLIENT UNBLOCK: blocking waits end at Redis' pace.
    unblock_refused: AtomicBool,
    /// ClientOptions::data_loss_probe.
    pub(crate) data_loss_probe: bool,
    pub(crate) watchdog: ForkLocal<Arc<Watchdog>>,
    /// Where releases publish this process's grants (inbox.rs).
    inbox: ForkLocal<Arc<Inbox>>,
}

impl Drop for ClientInner {
    fn drop(&mut self) {
        self.watchdog.get().stop();
        self.inbox.get().stop();
    }
}

impl Client {
    /// The same for every clone of this client and different for any other living client: the
    /// key of the process-wide maps of local waiters (line/local/mod.rs, dual_lock_local.rs).
    pub(crate) fn identity(&self) -> usize {
        Arc::as_ptr(&self.inner) as usize
    }

    pub fn new(opts: ClientOptions) -> Result<Client> {
        let (topology, shown, uses_tls) = Topology::from_options(&opts)?;
        check_name("namespace", &opts.namespace)?;
        for (arg, d) in [
            ("connect_timeout", opts.connect_timeout),
            ("read_timeout", opts.read_timeout),
        ] {
            // Bounded too: deadlines are `Instant::now() + timeout`.
            crate::seconds::check_span(arg, d)?;
        }
        let tls = if uses_tls {
            Some(crate::transport::tls::client_config(
                opts.tls_ca_file.as_deref(),
            )?)
        } else {
            None
        };
        Ok(Client {
            inner: Arc::new(ClientInner {
                topology,
                shown,
                namespace: opts.namespace,
                how: Connector {
                    timeouts: Timeouts {
                        connect: opts.connect_timeout,
                        read: opts.read_timeout,
                    },
                    tls,
                    spin: Arc::new(ReplySpin::new(opts.reply_spin)),
                },
                unblock_refused: AtomicBool::new(false),
                data_loss_probe: opts.data_loss_probe,
                watchdog: ForkLocal::new(|| Arc::new(Watchdog::default())),
                inbox: ForkLocal::new(|| Arc::new(Inbox::default())),
            }),
        })
    }

    pub fn namespace(&self) -> &str {
        &self.inner.namespace
    }

    /// The URL (or seed/sentinel URLs) without passwords.
    pub fn redacted_url(&self) -> &str {
        &self.inner.shown
    }

    /// `host:port` for errors: the server, the cluster seeds, or the primary in use.
    pub fn display_addr(&self) -> String {
        self.inner.topology.display_addr()
    }

    pub fn reply_spin(&self) -> Duration {
        self.inner.how.spin.budget()
    }

    pub fn read_timeout(&self) -> Duration {
        self.inner.how.timeouts.read
    }

    pub(crate) fn timeouts(&self) -> Timeouts {
        self.inner.how.timeouts
    }

    /// This process's grant inbox for this client.
    pub(crate) fn inbox(&self) -> &Arc<Inbox> {
        self.inner.inbox.get()
    }

    /// A connection taken out of the pool for good (an idle one, else a new one; a cluster's: to
    /// any master): the grant inbox's subscription.
    pub(crate) fn dedicated_conn(&self, intr: &Interrupt) -> Result<Conn> {
        let how = &self.inner.how;
        match &self.inner.topology {
            Topology::Single(pool) => pool.checkout(how),
            routed => routed.pool_for(how, intr, Route::Any)?.checkout(how),
        }
    }

    /// True on a Redis Cluster, where a script may find an undeclared key on another node.
    pub fn is_cluster(&self) -> bool {
        matches!(self.inner.topology, Topology::Cluster(_))
    }

    pub fn keys(&self, name: &str) -> Result<Keys> {
        Keys::new(&self.inner.namespace, name)
    }

    /// Runs `f` on a pooled connection (in a cluster: to any master, without following
    /// redirects; routed calls use the methods below). The connection goes back to the pool
    /// only when `f` left it in a known state (no I/O error, not interrupted).
    pub fn with_conn<R>(
        &self,
        intr: &Interrupt,
        f: impl FnOnce(&mut Conn) -> Result<R>,
    ) -> Result<R> {
        intr.check()?;
        let how = &self.inner.how;
        match &self.inner.topology {
            Topology::Single(pool) => pool.with_conn(how, |c, _| f(c)),
            routed => routed
                .pool_for(how, intr, Route::Any)?
                .with_conn(how, |c, _| f(c)),
        }
    }

    /// Runs `f` on the server owning `route`, following redirects (see topology.rs).
    fn run<R>(
        &self,
        intr: &Interrupt,
        route: Route,
        f: impl FnMut(&mut Conn, &NodePool) -> Result<R>,
    ) -> Result<R> {
        self.inner
            .topology
            .run(&self.inner.how, intr, route, Duration::ZERO, f)
    }

    /// Runs `f` on master number `node` (a cluster's masters in address order; else the one
    /// server or the Sentinel primary, node 0), with how many masters there are: for listings
    /// that must visit every node (admin.rs SCAN). No redirects: the caller reads, per node.
    pub(crate) fn on_master<R>(
        &self,
        intr: &Interrupt,
        node: usize,
        f: impl FnOnce(&mut Conn) -> Result<R>,
    ) -> Result<(R, usize)> {
        intr.check()?;
        let how = &self.inner.how;
        let no_such = || Error::argument(format!("node: no master number {node}"));
        match &self.inner.topology {
            Topology::Single(pool) if node == 0 => Ok((pool.with_conn(how, |c, _| f(c))?, 1)),
            Topology::Cluster(cluster) => {
                let masters = cluster.masters(how, intr)?;
                let pool = masters.get(node).ok_or_else(no_such)?;
                Ok((pool.with_conn(how, |c, _| f(c))?, masters.len()))
            }
            Topology::Sentinel(_) if node == 0 => {
                let pool = self.inner.topology.pool_for(how, intr, Route::Any)?;
                Ok((pool.with_conn(how, |c, _| f(c))?, 1))
            }
            _ => Err(no_such()),
        }
    }

    /// Any Redis command, e.g. `["SET", "k", "v"]`; routed as `command_route` says.
    pub fn command(&self, intr: &Interrupt, args: &[Vec<u8>]) -> Result<Value> {
        if args.is_empty() {
            return Err(Error::argument("command: needs at least a command name"));
        }
        let mut cmd = redis::Cmd::new();
        for a in args {
            cmd.arg(a.as_slice());
        }
        let packed = cmd.get_packed_command();
        self.run(intr, command_route(args), |c, _| c.request(intr, &packed))
    }

    /// Sends plain commands in one round trip; each reply (or error reply) in order.
    pub fn pipeline(&self, intr: &Interrupt, cmds: &[redis::Cmd]) -> Result<Vec<Value>> {
        let mut buf = Vec::with_capacity(64 * cmds.len());
        for cmd in cmds {
            cmd.write_packed_command(&mut buf);
        }
        let first_key = cmds.first().and_then(|c| match c.args_iter().nth(1) {
            Some(redis::Arg::Simple(k)) => Some(k),
            _ => None,
        });
        let route = first_key.map_or(Route::Any, Route::Key);
        self.run(intr, route, |c, _| c.pipeline(intr, &buf, cmds.len()))
    }

    /// Runs a script call: EVALSHA, and EVAL on NOSCRIPT. One round trip when cached.
    pub fn eval(&self, intr: &Interrupt, call: &ScriptCall) -> Result<Value> {
        self.run(intr, script_route(call), |c, _| {
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
        self.run(intr, script_route(call), |c, _| {
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

    /// Runs many script calls in one round trip per server; each gets its own result.
    pub fn eval_many(&self, intr: &Interrupt, calls: &[ScriptCall]) -> Result<Vec<Result<Value>>> {
        if calls.is_empty() {
            return Ok(Vec::new());
        }
        match &self.inner.topology {
            Topology::Single(pool) => {
                pool.with_conn(&self.inner.how, |c, _| eval_batch(c, intr, calls.iter()))
            }
            _ => self.eval_many_routed(intr, calls),
        }
    }

    /// One pipeline per server, results put back in the callers' order. A call the server did
    /// not run (MOVED, ASK, TRYAGAIN) is sent again on its own through `eval`.
    fn eval_many_routed(
        &self,
        intr: &Interrupt,
        calls: &[ScriptCall],
    ) -> Result<Vec<Result<Value>>> {
        let how = &self.inner.how;
        let mut groups: Vec<(Arc<NodePool>, Vec<usize>)> = Vec::new();
        let mut out: Vec<Option<Result<Value>>> = vec![None; calls.len()];
        for (i, call) in calls.iter().enumerate() {
            match self.inner.topology.pool_for(how, intr, script_route(call)) {
                Ok(pool) => match groups.iter_mut().find(|(p, _)| Arc::ptr_eq(p, &pool)) {
                    Some((_, members)) => members.push(i),
                    None => groups.push((pool, vec![i])),
                },
                Err(e) => out[i] = Some(Err(e)),
            }
        }
        for (pool, members) in groups {
            let batch = pool.with_conn(how, |c, _| {
                eval_batch(c, intr, members.iter().map(|&i| &calls[i]))
            });
            match batch {
                Ok(results) => {
                    for (&i, r) in members.iter().zip(results) {
                        out[i] = Some(r);
                    }
                }
                Err(e) => {
                    for &i in &members {
                        out[i] = Some(Err(e.clone()));
                    }
                }
            }
        }
        Ok(out
            .into_iter()
            .zip(calls)
            .map(|(r, call)| match r.expect("every call has a result") {
                Err(e) if crate::transport::topology::Retry::of(&e).is_some() => {
                    self.eval(intr, call)
                }
                other => other,
            })
            .collect())
    }

    /// BLPOP on `key` for at most `timeout`: the popped element, or `None` when the wait timed
    /// out. Routed to the key's node (following MOVED/ASK), and ended by CLIENT UNBLOCK when the
    /// caller is interrupted.
    pub fn blpop(&self, intr: &Interrupt, key: &str, timeout: Duration) -> Result<Option<Value>> {
        // BLPOP 0 would block forever; Redis takes fractional seconds since 6.0.
        let secs = timeout.as_secs_f64().max(0.001);
        let packed = redis::cmd("BLPOP")
            .arg(key)
            .arg(format!("{secs:.3}"))
            .get_packed_command();
        let route = Route::Key(key.as_bytes());
        let how = &self.inner.how;
        let reply = self
            .inner
            .topology
            .run(how, intr, route, timeout, |c, pool| {
                // CLIENT UNBLOCK must reach the server this connection is blocked on.
                let unblock = |id: i64| self.unblock(intr, pool, id);
                let unblock: Option<&dyn Fn(i64) -> Result<()>> =
                    if self.inner.unblock_refused.load(Ordering::Relaxed) {
                        None
                    } else {
                        Some(&unblock)
                    };
                c.request_blocking(intr, &packed, timeout, unblock)
            })?;
        popped_element(reply)
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
    fn unblock(&self, intr: &Interrupt, pool: &NodePool, id: i64) -> Result<()> {
        let packed = redis::cmd("CLIENT")
            .arg("UNBLOCK")
            .arg(id)
            .arg("TIMEOUT")
            .get_packed_command();
        match pool.with_conn(&self.inner.how, |c, _| c.request(intr, &packed)) {
            Ok(_) => Ok(()),
            Err(Error::Redis(_)) => {
                self.inner.unblock_refused.store(true, Ordering::Relaxed);
                Ok(())
            }
            Err(e) => Err(e),
        }
    }
}

/// BLPOP's reply: nil (timed out) or [key, element].
fn popped_element(reply: Value) -> Result<Option<Value>> {
    match reply {
        Value::Nil => Ok(None),
        Value::Array(mut kv) if kv.len() == 2 => Ok(kv.pop()),
        other => Err(Error::Redis(format!("BLPOP: unexpected reply {other:?}"))),
    }
}

fn script_route(call: &ScriptCall) -> Route<'_> {
    Route::Script(call.first_key(), call.script)
}

/// Runs script calls in one pipeline; NOSCRIPT answered by EVAL of that call.
fn eval_batch<'a>(
    c: &mut Conn,
    intr: &Interrupt,
    calls: impl Iterator<Item = &'a ScriptCall> + Clone,
) -> Result<Vec<Result<Value>>> {
    let mut buf = Vec::with_capacity(256);
    let mut count = 0;
    for call in calls.clone() {
        call.pack_into(&mut buf, true);
        count += 1;
    }
    let replies = c.pipeline(intr, &buf, count)?;
    let mut out = Vec::with_capacity(count);
    for (call, reply) in calls.zip(replies) {
        out.push(match reply {
            Value::ServerError(e) if e.code() == "NOSCRIPT" => {
                buf.clear();
                call.pack_into(&mut buf, false);
                match c.request(intr, &buf) {
                    // No reply in time: one may still come. The whole batch fails, so the pool
                    // drops this connection rather than hand that reply to its next call (its
                    // idle check sees only a reply already arrived).
                    Err(e) if e.is_io() => return Err(e),
                    other => other,
                }
            }
            Value::ServerError(e) => Err(c.server_error(&e)),
            v => Ok(v),
        });
    }
    Ok(out)
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

/// Reads a string reply (None: another kind, or not UTF-8).
pub fn text(v: &Value) -> Option<String> {
    match v {
        Value::BulkString(b) => String::from_utf8(b.clone()).ok(),
        Value::SimpleString(s) => Some(s.clone()),
        _ => None,
    }
}

/// Reads an array reply of integers.
pub fn ints(v: &Value) -> Result<Vec<i64>> {
    match v {
        Value::Array(items) => items.iter().map(int).collect(),
        other => Err(Error::Redis(format!("expected an array, got {other:?}"))),
    }
}

/// Where a raw command goes: by its first argument, the key of every command ferrolock sends,
/// but a script (`EVAL script numkeys key…`, EVALSHA, FCALL) by its first key, as a
/// `ScriptCall` is (History's flush on a Redis Cluster).
fn command_route(args: &[Vec<u8>]) -> Route<'_> {
    const SCRIPTS: [&[u8]; 5] = [b"EVAL", b"EVALSHA", b"EVAL_RO", b"EVALSHA_RO", b"FCALL"];
    match args {
        [name, _, numkeys, key, ..]
            if numkeys.as_slice() != b"0"
                && SCRIPTS.iter().any(|s| name.eq_ignore_ascii_case(s)) =>
        {
            Route::Key(key)
        }
        [_, first, ..] => Route::Key(first),
        _ => Route::Any,
    }
}
