//! Which server a call goes to: one server (the fast path: no lookup, no lock), a Redis Cluster
//! (by the hash slot of the call's key), or the primary a set of Sentinels names. Calls that
//! certainly did not run (a redirect, a server not serving yet, no connection made) are sent
//! again until the read timeout; a call whose reply was lost is never re-sent (it may have run).
//!
//! Design notes (moved from doc/ARCHITECTURE.md):
//!
//! **Cluster and Sentinel (ext/ferrolock-core/src/transport/{topology,cluster,sentinel,pool,slot}.rs)**
//!
//! `Topology` (`topology.rs`) is what a `Client` talks to: `Single` (one `NodePool`, the old
//! path: no lookup, no lock, no allocation added per call), `Cluster` or `Sentinel`. Every
//! `Client` method routes its call: a script by its first key (`ScriptCall::first_key`; all keys
//! share the hash tag), `command`/`pipeline` by their first argument, keyless calls (PING, the
//! public `with_conn`) to any master / the primary. `NodePool` (`pool.rs`) is the idle pool of
//! one server (fork-local), one per node in a cluster.
//!
//! Re-sending is allowed only when the server certainly did not run the call: `MOVED` (patch
//! the slot, reload the table, send to the owner), `ASK` (`ASKING` + the call on the target;
//! a script is `SCRIPT LOAD`ed there first, since ASKING covers one command and an EVAL after
//! NOSCRIPT would be refused), `TRYAGAIN`/`CLUSTERDOWN`/`READONLY`/`MASTERDOWN`/`LOADING`
//! (pause 25 ms, refresh), or no connection could be made. Retries stop at the read timeout
//! (plus the block time for BLPOP). A reply lost after sending is returned as
//! `Error::Connection`, as on one server (the call may have run; callers already handle that),
//! and makes the next call look up the topology again.
//!
//! Cluster (`cluster.rs`): the slot table comes from `CLUSTER SLOTS` (asked of the known
//! masters, then the seeds), per process, loaded on first use, patched by MOVED and reloaded at
//! most every 100 ms after MOVED, TRYAGAIN/CLUSTERDOWN or a connection failure. BLPOP runs on the
//! slot's owner and its `CLIENT UNBLOCK` goes to that same node (the closure gets the call's
//! pool). `eval_many` (the watchdog's renewals) sends one pipeline per node and puts the results
//! back in order; a renewal a node did not run (MOVED/ASK) is sent again alone through `eval`.
//! Redis moves clients blocked on a migrated slot with MOVED (within its cron, ≤ 1 s); BLPOP is
//! then sent to the new owner.
//!
//! What comes from the `redis` crate and what is ours: the crate encodes commands (`Cmd`),
//! parses replies (`Parser`) and URLs, and exposes server error codes (`ServerError::code`),
//! all used as before. Its cluster support is not used: `ClusterConnection` owns its sockets
//! and would bypass our `Conn` (interrupts by socket shutdown, reply spin, fork-local pools,
//! CLIENT UNBLOCK on the blocked node), and in 1.8 its slot computation
//! (`cluster_routing::Slot::for_key`) keeps the slot number crate-private (and the `cluster`
//! feature pulls in `rand`). So `slot.rs` is the Cluster spec's CRC16/XMODEM + hash tag (20
//! lines, checked against `CLUSTER KEYSLOT` in tests/client/cluster.rs), and CLUSTER SLOTS parsing,
//! the table and the redirect handling are written here.
//!
//! Sentinel (`sentinel.rs`): the sentinels are asked in order (`SENTINEL
//! get-master-addr-by-name`, with the sentinel credentials: those in a sentinel's URL, else
//! `sentinel_username`/`sentinel_password`); the named server is checked with `ROLE` and
//! connected with the primary's credentials and db (by TLS when the sentinel URLs are
//! `rediss://`). The address is cached per process and asked
//! again after a connection failure or READONLY/MASTERDOWN (at most every 50 ms), and every
//! second while all goes well (one caller asks, the others carry on): after `SENTINEL FAILOVER`
//! the old primary keeps accepting writes until Sentinel demotes it seconds later, and this
//! bounds how long a client keeps writing there. A new address gets a new pool; the old pool's
//! idle connections are dropped.
//!
//! Tests: `tests/support/{cluster,sentinel}.rs` start 3 masters + 3 replicas (client and bus
//! ports from the OS, `--repl-diskless-sync-delay 0` so replicas are in sync before a kill;
//! one cluster per test binary, killed at exit) and a password-protected primary + replica + 3
//! sentinels (`down-after-milliseconds 1000`).
//!
//! **Cluster and Sentinel: what is tested**
//!
//! What is tested (`spec/cluster_spec.rb`, `spec/sentinel_spec.rb`, each starting its own servers on loopback:
//! 3 masters with a replica each; a primary, a replica and 3 sentinels): every primitive and both Sidekiq server
//! middlewares with names on all three masters; exclusion across 2 processes × 4 threads for DistMutex,
//! ConcurrentLimiter and DualLock (counted, not assumed); a lock's slot migrated twice to other masters while 8
//! threads in 2 processes use it (no overlap, no error reaches a caller); a master killed with `kill -9` while its
//! locks are held and waited on (callers see `Ferrolock::ConnectionError` for the few seconds until its replica is
//! promoted, then work resumes; no overlap that its holder was not told of, see below); with Sentinel, the
//! primary found, `SENTINEL FAILOVER` and a killed primary followed, and the sentinels' own password.

use crate::error::{Error, Result};
use crate::interrupt::Interrupt;
use crate::script::Script;
use crate::transport::cluster::Cluster;
use crate::transport::conn::Conn;
use crate::transport::endpoint::{Addr, Endpoint};
use crate::transport::pool::{Connector, NodePool};
use crate::transport::sentinel::Sentinel;
use crate::transport::slot::{key_slot, SLOTS};
use std::sync::Arc;
use std::time::{Duration, Instant};

mod options;

/// Pause before re-sending a call to a server that is not serving (failover, migration).
const RETRY_PAUSE: Duration = Duration::from_millis(25);
/// Redirects followed at once for one call; later ones after a pause (a multi-key call can
/// bounce between the two nodes of a migration, with TRYAGAIN, until its keys have moved; nodes
/// may disagree for a moment after a failover).
const QUICK_REDIRECTS: u32 = 3;

pub(crate) enum Topology {
    Single(NodePool),
    Cluster(Cluster),
    Sentinel(Sentinel),
}

/// What a call is about: routes it to the server that owns that key.
#[derive(Clone, Copy)]
pub(crate) enum Route<'a> {
    /// Keyless (PING, CONFIG GET): any primary will do.
    Any,
    Key(&'a [u8]),
    /// A script call by its first key: on an ASK redirect the script is loaded on the target
    /// first, as ASKING covers only the next command (not an EVAL after NOSCRIPT).
    Script(&'a [u8], &'static Script),
}

/// A failure after which the call may be sent again, because the server did not run it.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Retry {
    /// The slot lives elsewhere now (for good): update the table, send it there.
    Moved { slot: u16, host: String, port: u16 },
    /// The key is being migrated: send it there once, preceded by ASKING.
    Ask { host: String, port: u16 },
    /// TRYAGAIN, CLUSTERDOWN, READONLY, MASTERDOWN, LOADING, UNBLOCKED: wait a little, look again.
    Unavailable,
}

impl Retry {
    /// A redirect or a "not run" error; `None` for anything else, including a MOVED/ASK whose
    /// slot is not below 16384 (a broken or hostile server): that one stays a plain Redis error
    /// instead of indexing past the slot table.
    pub(crate) fn of(e: &Error) -> Option<Retry> {
        match e {
            Error::Redis(text) => {
                let mut words = text.split_ascii_whitespace();
                let code = words.next()?;
                if code != "MOVED" && code != "ASK" {
                    return None;
                }
                let slot: u16 = words.next()?.parse().ok()?;
                if usize::from(slot) >= SLOTS {
                    return None;
                }
                let (host, port) = words.next()?.rsplit_once(':')?;
                let (host, port) = (host.to_string(), port.parse().ok()?);
                Some(if code == "MOVED" {
                    Retry::Moved { slot, host, port }
                } else {
                    Retry::Ask { host, port }
                })
            }
            Error::Connection { detail, .. } => {
                let code = detail.strip_prefix("not available (")?;
                const NOT_RUN: [&str; 6] = [
                    "UNBLOCKED",
                    "TRYAGAIN",
                    "CLUSTERDOWN",
                    "READONLY",
                    "MASTERDOWN",
                    "LOADING",
                ];
                NOT_RUN
                    .iter()
                    .any(|c| code.starts_with(c))
                    .then_some(Retry::Unavailable)
            }
            _ => None,
        }
    }
}

impl Topology {
    /// The topology `opts` selects (see options.rs), what `redacted_url` shows for it, and
    /// whether any of its servers is reached by TLS.
    pub(crate) fn from_options(
        opts: &crate::transport::options::ClientOptions,
    ) -> Result<(Topology, String, bool)> {
        let (selected, shown, tls) = options::select(opts)?;
        let topology = match selected {
            options::Selected::Single(endpoint) => Topology::Single(NodePool::new(endpoint)),
            options::Selected::Cluster(seeds) => Topology::Cluster(Cluster::new(seeds)),
            options::Selected::Sentinel {
                master_name,
                sentinels,
                primary,
            } => Topology::Sentinel(Sentinel::new(master_name, sentinels, primary)),
        };
        Ok((topology, shown, tls))
    }

    pub(crate) fn display_addr(&self) -> String {
        match self {
            Topology::Single(pool) => pool.addr.clone(),
            Topology::Cluster(c) => c
                .seeds()
                .iter()
                .map(Endpoint::display_addr)
                .collect::<Vec<_>>()
                .join(","),
            Topology::Sentinel(s) => s
                .current_addr()
                .unwrap_or_else(|| format!("sentinel primary {:?}", s.master_name())),
        }
    }

    /// Runs `f` on a connection to the server `route` names, following redirects for up to
    /// the read timeout plus `blocks` (how long a blocking command may wait in Redis).
    pub(crate) fn run<R>(
        &self,
        how: &Connector,
        intr: &Interrupt,
        route: Route,
        blocks: Duration,
        mut f: impl FnMut(&mut Conn, &NodePool) -> Result<R>,
    ) -> Result<R> {
        intr.check()?;
        if let Topology::Single(pool) = self {
            return pool.with_conn(how, f);
        }
        // Redirects and retries end by the caller's deadline too (wait_timeout.rs).
        let deadline = Instant::now() + crate::wait_timeout::cap(how.timeouts.read + blocks);
        let mut ask: Option<Arc<NodePool>> = None;
        let mut redirects = 0;
        loop {
            let asking = ask.take();
            let pool = match &asking {
                Some(p) => p.clone(),
                None => match self.pool_for(how, intr, route) {
                    Ok(p) => p,
                    Err(e) if may_resend(&e) && pause(intr, deadline)? => continue,
                    Err(e) => return Err(e),
                },
            };
            let mut conn = match pool.checkout(how) {
                Ok(c) => c,
                Err(e) => {
                    // Nothing was sent: look for the server again and retry.
                    self.lost(how, intr);
                    if may_resend(&e) && pause(intr, deadline)? {
                        continue;
                    }
                    return Err(e);
                }
            };
            let result = match asking {
                Some(_) => ask_then(&mut conn, intr, &pool, route, &mut f),
                None => f(&mut conn, &pool),
            };
            pool.checkin(conn, &result);
            let Err(e) = &result else { return result };
            match Retry::of(e) {
                Some(Retry::Moved { slot, host, port }) => {
                    if let Topology::Cluster(c) = self {
                        c.moved(how, intr, slot, &pool.host_or(&host), port);
                    }
                    redirects += 1;
                    if !redirected(intr, deadline, redirects)? {
                        return result;
                    }
                }
                Some(Retry::Ask { host, port }) => {
                    let Topology::Cluster(c) = self else {
                        return result;
                    };
                    redirects += 1;
                    if !redirected(intr, deadline, redirects)? {
                        return result;
                    }
                    ask = Some(c.pool_at(&pool.host_or(&host), port));
                }
                Some(Retry::Unavailable) => {
                    self.lost(how, intr);
                    if !pause(intr, deadline)? {
                        return result;
                    }
                }
                None => {
                    if e.is_io() && !matches!(e, Error::Interrupted) {
                        // The reply was lost: not re-sent, but the next call looks again.
                        self.lost(how, intr);
                    }
                    return result;
                }
            }
        }
    }

    /// The pool a call for `route` goes to now.
    pub(crate) fn pool_for(
        &self,
        how: &Connector,
        intr: &Interrupt,
        route: Route,
    ) -> Result<Arc<NodePool>> {
        match self {
            Topology::Single(_) => unreachable!("the single-server path does not route"),
            Topology::Cluster(c) => c.pool_for(how, intr, route.slot()),
            Topology::Sentinel(s) => s.primary(how, intr),
        }
    }

    /// The server behind `pool` failed or refused: refresh what we know (rate-limited).
    fn lost(&self, how: &Connector, intr: &Interrupt) {
        match self {
            Topology::Single(_) => {}
            Topology::Cluster(c) => c.refresh_soon(how, intr),
            Topology::Sentinel(s) => s.resolve_soon(how, intr),
        }
    }
}

impl Route<'_> {
    fn slot(self) -> Option<u16> {
        match self {
            Route::Any => None,
            Route::Key(k) | Route::Script(k, _) => Some(key_slot(k)),
        }
    }
}

impl NodePool {
    /// A redirect's host, or this node's when the server left it out (`MOVED 12 :7001`).
    fn host_or(&self, host: &str) -> String {
        if !host.is_empty() {
            return host.to_string();
        }
        match &self.endpoint.addr {
            Addr::Tcp { host, .. } | Addr::Tls { host, .. } => host.clone(),
            Addr::Unix(_) => "127.0.0.1".to_string(),
        }
    }
}

/// `ASKING`, then the call, on the migration's target node (ASKING covers one command).
fn ask_then<R>(
    conn: &mut Conn,
    intr: &Interrupt,
    pool: &NodePool,
    route: Route,
    f: &mut impl FnMut(&mut Conn, &NodePool) -> Result<R>,
) -> Result<R> {
    if let Route::Script(_, script) = route {
        let load = redis::cmd("SCRIPT")
            .arg("LOAD")
            .arg(script.source)
            .get_packed_command();
        conn.request(intr, &load)?;
    }
    // A blocking call asks its CLIENT ID first, which would use up the ASKING.
    conn.client_id(intr)?;
    conn.request(intr, &redis::cmd("ASKING").get_packed_command())?;
    f(conn, pool)
}

/// True when `e` says the call was not sent (no connection) or not run. A refused password
/// will not change by retrying.
fn may_resend(e: &Error) -> bool {
    match e {
        Error::Connection { detail, .. } => !detail.starts_with("authentication failed"),
        other => Retry::of(other).is_some(),
    }
}

/// Whether to follow the `count`th redirect of a call: at once for the first few, then after a
/// pause; never past the deadline.
fn redirected(intr: &Interrupt, deadline: Instant, count: u32) -> Result<bool> {
    if count > QUICK_REDIRECTS {
        return pause(intr, deadline);
    }
    Ok(Instant::now() < deadline)
}

/// Waits before the next try; false (no wait) when the deadline would pass.
fn pause(intr: &Interrupt, deadline: Instant) -> Result<bool> {
    if Instant::now() + RETRY_PAUSE >= deadline {
        return Ok(false);
    }
    intr.sleep(RETRY_PAUSE)?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_redirects() {
        assert_eq!(
            Retry::of(&Error::Redis("MOVED 3999 127.0.0.1:6381".into())),
            Some(Retry::Moved {
                slot: 3999,
                host: "127.0.0.1".into(),
                port: 6381
            })
        );
        assert_eq!(
            Retry::of(&Error::Redis("ASK 3999 ::1:6381".into())),
            Some(Retry::Ask {
                host: "::1".into(),
                port: 6381
            })
        );
        let busy = Error::connection("h:1", "not available (TRYAGAIN Multiple keys)");
        assert_eq!(Retry::of(&busy), Some(Retry::Unavailable));
        assert_eq!(Retry::of(&Error::connection("h:1", "timed out")), None);
        assert_eq!(Retry::of(&Error::Redis("ERR MOVED".into())), None);
    }

    #[test]
    fn a_redirect_to_a_slot_outside_the_table_is_a_protocol_error() {
        let last = Retry::of(&Error::Redis("MOVED 16383 10.0.0.1:7000".into()));
        assert!(matches!(last, Some(Retry::Moved { slot: 16383, .. })));
        for reply in [
            "MOVED 16384 10.0.0.1:7000",
            "MOVED 65535 10.0.0.1:7000",
            "MOVED 65536 10.0.0.1:7000",
            "MOVED -1 10.0.0.1:7000",
            "ASK 16384 10.0.0.1:7000",
            "ASK 99999 10.0.0.1:7000",
        ] {
            assert_eq!(Retry::of(&Error::Redis(reply.into())), None, "{reply}");
        }
    }
}
