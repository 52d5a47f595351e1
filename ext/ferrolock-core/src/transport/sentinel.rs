//! A Sentinel-managed primary: every sentinel is asked for its address
//! (`SENTINEL get-master-addr-by-name`), the majority's answer is checked with `ROLE`, and cached per
//! process. After a connection failure or READONLY/MASTERDOWN (a demoted primary) it is asked
//! again, at most every `RESOLVE_EVERY`; connections to an old primary are dropped.

use crate::error::{Error, Result};
use crate::fork::ForkLocal;
use crate::interrupt::Interrupt;
use crate::transport::conn::Conn;
use crate::transport::endpoint::Endpoint;
use crate::transport::pool::{Connector, NodePool};
use redis::Value;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock, TryLockError};
use std::time::{Duration, Instant};

/// After an error, the sentinels are asked at most this often.
const RESOLVE_EVERY: Duration = Duration::from_millis(50);
/// And while all goes well, this often: an operator's `SENTINEL FAILOVER` leaves the old
/// primary accepting writes until Sentinel demotes it (seconds later); this bounds how long
/// this client keeps writing there.
const RECHECK_EVERY: Duration = Duration::from_secs(1);

enum Ask {
    First,
    AfterError,
    Recheck,
}

/// Milliseconds since the first call in this process (for lock-free "is it time" checks).
fn now_ms() -> u64 {
    static BASE: OnceLock<Instant> = OnceLock::new();
    BASE.get_or_init(Instant::now).elapsed().as_millis() as u64
}

pub(crate) struct Sentinel {
    master_name: String,
    /// With their own credentials.
    sentinels: Vec<Endpoint>,
    /// The primary's credentials and database (address filled in per answer).
    primary: Endpoint,
    state: ForkLocal<State>,
}

#[derive(Default)]
struct State {
    current: RwLock<Option<Arc<NodePool>>>,
    /// Held while asking the sentinels.
    asking: Mutex<()>,
    /// When the sentinels were last asked (`now_ms`).
    asked_ms: AtomicU64,
    /// One kept connection per sentinel (in `sentinels` order), used under `asking`.
    sentinel_conns: Mutex<Vec<Option<Conn>>>,
}

impl Sentinel {
    pub(crate) fn new(master_name: String, sentinels: Vec<Endpoint>, primary: Endpoint) -> Self {
        Sentinel {
            master_name,
            sentinels,
            primary,
            state: ForkLocal::new(State::default),
        }
    }

    pub(crate) fn master_name(&self) -> &str {
        &self.master_name
    }

    /// `host:port` of the primary in use, if one was found yet.
    pub(crate) fn current_addr(&self) -> Option<String> {
        self.current().map(|p| p.addr.clone())
    }

    /// The primary's pool, asking the sentinels the first time, and again every
    /// `RECHECK_EVERY` (one caller asks; the others go on with the cached primary).
    pub(crate) fn primary(&self, how: &Connector, intr: &Interrupt) -> Result<Arc<NodePool>> {
        match self.current() {
            Some(p) if self.recheck_due() => Ok(self.resolve(how, intr, Ask::Recheck).unwrap_or(p)),
            Some(p) => Ok(p),
            None => self.resolve(how, intr, Ask::First),
        }
    }

    /// The primary in use failed or refused a write: ask again (rate-limited).
    pub(crate) fn resolve_soon(&self, how: &Connector, intr: &Interrupt) {
        let _ = self.resolve(how, intr, Ask::AfterError);
    }

    fn current(&self) -> Option<Arc<NodePool>> {
        self.state
            .get()
            .current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn recheck_due(&self) -> bool {
        let asked = self.state.get().asked_ms.load(Ordering::Relaxed);
        now_ms().saturating_sub(asked) >= RECHECK_EVERY.as_millis() as u64
    }

    fn resolve(&self, how: &Connector, intr: &Interrupt, why: Ask) -> Result<Arc<NodePool>> {
        let state = self.state.get();
        // Only the first lookup waits for another thread's; later ones skip when one runs.
        let _asking = match why {
            Ask::First => state.asking.lock().unwrap_or_else(|e| e.into_inner()),
            _ => match state.asking.try_lock() {
                Ok(guard) => guard,
                Err(TryLockError::Poisoned(e)) => e.into_inner(),
                Err(TryLockError::WouldBlock) => {
                    return self.current().ok_or_else(|| self.not_found())
                }
            },
        };
        let current = self.current();
        let since = now_ms().saturating_sub(state.asked_ms.load(Ordering::Relaxed));
        if let Some(p) = &current {
            let fresh = match why {
                Ask::First => true,
                Ask::AfterError => since < RESOLVE_EVERY.as_millis() as u64,
                Ask::Recheck => since < RECHECK_EVERY.as_millis() as u64,
            };
            if fresh {
                return Ok(p.clone());
            }
        }
        state.asked_ms.store(now_ms(), Ordering::Relaxed);
        let (host, port) = self.ask_sentinels(how, intr)?;
        let named = self.primary.at(&host, port);
        let pool = match current {
            Some(p) if p.addr == named.display_addr() => return Ok(p),
            _ => Arc::new(NodePool::new(named)),
        };
        check_master(how, intr, &pool)?;
        let mut slot = state.current.write().unwrap_or_else(|e| e.into_inner());
        if let Some(old) = slot.replace(pool.clone()) {
            // Connections to the old primary are not reused (calls running there finish).
            old.clear();
        }
        Ok(pool)
    }

    fn not_found(&self) -> Error {
        Error::connection(
            &format!("sentinel primary {:?}", self.master_name),
            "not found yet",
        )
    }

    /// Every sentinel is asked and the address most of those that answer give wins (ties: the
    /// earlier sentinel's). One sentinel that has not yet heard of a failover (or one partitioned
    /// away with the old primary) is outvoted instead of sending this client to a stale primary.
    /// Connections to the sentinels are kept for the next lookup.
    fn ask_sentinels(&self, how: &Connector, intr: &Interrupt) -> Result<(String, u16)> {
        let ask = redis::cmd("SENTINEL")
            .arg("get-master-addr-by-name")
            .arg(&self.master_name)
            .get_packed_command();
        let state = self.state.get();
        let mut conns = state
            .sentinel_conns
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        conns.resize_with(self.sentinels.len(), || None);
        let mut votes: Vec<((String, u16), usize)> = Vec::new();
        let mut last = None;
        for (ep, cached) in self.sentinels.iter().zip(conns.iter_mut()) {
            let reply = match cached.take().filter(Conn::is_alive) {
                Some(c) => Ok(c),
                None => Conn::connect(ep, how.timeouts, how.tls.as_ref(), how.spin.clone()),
            }
            .and_then(|mut c| {
                let reply = c.request(intr, &ask)?;
                *cached = Some(c);
                Ok(reply)
            });
            match reply {
                Ok(Value::Array(items)) if items.len() == 2 => {
                    match (
                        text(&items[0]),
                        text(&items[1]).and_then(|p| p.parse().ok()),
                    ) {
                        (Some(host), Some(port)) => {
                            match votes
                                .iter_mut()
                                .find(|(addr, _)| *addr == (host.clone(), port))
                            {
                                Some((_, n)) => *n += 1,
                                None => votes.push(((host, port), 1)),
                            }
                        }
                        _ => last = Some(self.unknown(ep)),
                    }
                }
                Ok(_) => last = Some(self.unknown(ep)),
                Err(Error::Interrupted) => return Err(Error::Interrupted),
                Err(e) => last = Some(e),
            }
        }
        // max_by_key keeps the last of equals: reverse so the earliest answer wins a tie.
        if let Some((addr, _)) = votes.into_iter().rev().max_by_key(|(_, n)| *n) {
            return Ok(addr);
        }
        let addrs: Vec<String> = self.sentinels.iter().map(|e| e.display_addr()).collect();
        let detail = last.map(|e| e.to_string()).unwrap_or_default();
        Err(Error::connection(
            &addrs.join(","),
            format!(
                "no sentinel named the primary {:?} ({detail})",
                self.master_name
            ),
        ))
    }

    fn unknown(&self, ep: &Endpoint) -> Error {
        Error::connection(
            &ep.display_addr(),
            format!(
                "sentinel does not know a primary named {:?}",
                self.master_name
            ),
        )
    }
}

/// A sentinel may still name a demoted primary during a failover: check with ROLE.
fn check_master(how: &Connector, intr: &Interrupt, pool: &NodePool) -> Result<()> {
    let role = redis::cmd("ROLE").get_packed_command();
    let reply = pool.with_conn(how, |c, _| c.request(intr, &role))?;
    match &reply {
        Value::Array(items) if items.first().and_then(text).as_deref() == Some("master") => Ok(()),
        _ => Err(Error::connection(
            &pool.addr,
            "not available (READONLY Sentinel names it the primary but its ROLE is not master)",
        )),
    }
}

fn text(v: &Value) -> Option<String> {
    match v {
        Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
        Value::SimpleString(s) => Some(s.clone()),
        _ => None,
    }
}
