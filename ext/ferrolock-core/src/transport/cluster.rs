//! A Redis Cluster: which master owns each of the 16384 slots (from CLUSTER SLOTS), and one
//! connection pool per master. The table is per process (a forked child loads its own), loaded
//! on first use, patched by MOVED and reloaded (at most every `REFRESH_EVERY`) after MOVED,
//! TRYAGAIN/CLUSTERDOWN and connection failures, from any node that answers.

use crate::error::{Error, Result};
use crate::fork::ForkLocal;
use crate::interrupt::Interrupt;
use crate::transport::endpoint::Endpoint;
use crate::transport::pool::{Connector, NodePool};
use crate::transport::slot::SLOTS;
use redis::Value;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

/// Reloads of the slot table are at least this far apart (a failover storms with errors).
const REFRESH_EVERY: Duration = Duration::from_millis(100);
/// A slot no master owns (yet).
const UNOWNED: u16 = u16::MAX;

pub(crate) struct Cluster {
    seeds: Vec<Endpoint>,
    state: ForkLocal<State>,
}

#[derive(Default)]
struct State {
    table: RwLock<Arc<SlotTable>>,
    /// Every node we have talked to, by `host:port`: pools outlive table reloads.
    pools: Mutex<HashMap<String, Arc<NodePool>>>,
    /// When the table was last (re)loaded or tried; held while loading.
    loaded_at: Mutex<Option<Instant>>,
    /// Spreads keyless calls over the masters.
    next_any: AtomicUsize,
}

/// Empty `owner` means not loaded yet.
#[derive(Default, Clone)]
struct SlotTable {
    owner: Vec<u16>,
    masters: Vec<Arc<NodePool>>,
}

impl Cluster {
    pub(crate) fn new(seeds: Vec<Endpoint>) -> Cluster {
        Cluster {
            seeds,
            state: ForkLocal::new(State::default),
        }
    }

    pub(crate) fn seeds(&self) -> &[Endpoint] {
        &self.seeds
    }

    /// The master owning `slot` (any master for `None`).
    pub(crate) fn pool_for(
        &self,
        how: &Connector,
        intr: &Interrupt,
        slot: Option<u16>,
    ) -> Result<Arc<NodePool>> {
        let mut table = self.table();
        if table.owner.is_empty() {
            self.reload(how, intr, true)?;
            table = self.table();
        }
        let owner = match slot {
            Some(s) => table.owner[s as usize],
            None if table.masters.is_empty() => UNOWNED,
            None => {
                let n = self.state.get().next_any.fetch_add(1, Ordering::Relaxed);
                (n % table.masters.len()) as u16
            }
        };
        if owner == UNOWNED {
            self.refresh_soon(how, intr);
            return Err(Error::connection(
                &self.seeds[0].display_addr(),
                format!("not available (CLUSTERDOWN slot {slot:?} is not served)"),
            ));
        }
        Ok(table.masters[owner as usize].clone())
    }

    /// The masters serving at least one slot, in address order (a per-node listing's order).
    pub(crate) fn masters(&self, how: &Connector, intr: &Interrupt) -> Result<Vec<Arc<NodePool>>> {
        if self.table().owner.is_empty() {
            self.reload(how, intr, true)?;
        }
        let table = self.table();
        let mut masters: Vec<Arc<NodePool>> = (0..table.masters.len())
            .filter(|&i| table.owner.iter().any(|&o| o as usize == i))
            .map(|i| table.masters[i].clone())
            .collect();
        masters.sort_by(|a, b| a.addr.cmp(&b.addr));
        Ok(masters)
    }

    /// The pool for a node by address, made on first sight (a MOVED/ASK target).
    pub(crate) fn pool_at(&self, host: &str, port: u16) -> Arc<NodePool> {
        let addr = self.seeds[0].at(host, port);
        let mut pools = self
            .state
            .get()
            .pools
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        pools
            .entry(addr.display_addr())
            .or_insert_with(|| Arc::new(NodePool::new(addr)))
            .clone()
    }

    /// MOVED: `slot` is served by `host:port` now. Patches the table, then reloads it (rate
    /// limited), as a MOVED often means more slots moved (a failover, a resharding).
    pub(crate) fn moved(
        &self,
        how: &Connector,
        intr: &Interrupt,
        slot: u16,
        host: &str,
        port: u16,
    ) {
        let pool = self.pool_at(host, port);
        {
            let state = self.state.get();
            let mut table = state.table.write().unwrap_or_else(|e| e.into_inner());
            if !table.owner.is_empty() {
                let mut patched = SlotTable::clone(&table);
                let index = match patched.masters.iter().position(|p| Arc::ptr_eq(p, &pool)) {
                    Some(i) => i,
                    None => {
                        patched.masters.push(pool);
                        patched.masters.len() - 1
                    }
                };
                // Retry::of admits only slots below 16384; `get_mut` keeps a bad one from panicking.
                if let Some(owner) = patched.owner.get_mut(usize::from(slot)) {
                    *owner = index as u16;
                }
                *table = Arc::new(patched);
            }
        }
        self.refresh_soon(how, intr);
    }

    /// Reloads the table unless that was done less than `REFRESH_EVERY` ago. Failures are left
    /// for the next call to find.
    pub(crate) fn refresh_soon(&self, how: &Connector, intr: &Interrupt) {
        let _ = self.reload(how, intr, false);
    }

    fn table(&self) -> Arc<SlotTable> {
        self.state
            .get()
            .table
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Asks the known masters, then the seeds, for CLUSTER SLOTS; the first answer wins.
    /// `first`: the table is empty, load it unless another thread just did. Otherwise a reload
    /// already under way is enough (callers do not queue behind a slow node).
    fn reload(&self, how: &Connector, intr: &Interrupt, first: bool) -> Result<()> {
        let state = self.state.get();
        let mut loaded_at = if first {
            state.loaded_at.lock().unwrap_or_else(|e| e.into_inner())
        } else {
            match state.loaded_at.try_lock() {
                Ok(guard) => guard,
                Err(std::sync::TryLockError::Poisoned(e)) => e.into_inner(),
                Err(std::sync::TryLockError::WouldBlock) => return Ok(()),
            }
        };
        let recent = loaded_at.is_some_and(|t| t.elapsed() < REFRESH_EVERY);
        if first && !self.table().owner.is_empty() || !first && recent {
            return Ok(());
        }
        *loaded_at = Some(Instant::now());
        let mut candidates: Vec<Arc<NodePool>> = self.table().masters.clone();
        for seed in &self.seeds {
            let (host, port) = host_port(seed);
            let pool = self.pool_at(&host, port);
            if !candidates.iter().any(|p| Arc::ptr_eq(p, &pool)) {
                candidates.push(pool);
            }
        }
        let slots = redis::cmd("CLUSTER").arg("SLOTS").get_packed_command();
        let mut last = None;
        for pool in candidates {
            let reply = pool.with_conn(how, |c, _| c.request(intr, &slots));
            match reply.and_then(|v| self.parse(&v, &host_port(&pool.endpoint).0)) {
                Ok(table) => {
                    *state.table.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(table);
                    return Ok(());
                }
                Err(Error::Interrupted) => return Err(Error::Interrupted),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| Error::argument("cluster: no seed nodes")))
    }

    /// CLUSTER SLOTS: `[[start, end, [host, port, id, ...], replicas...], ...]`. An empty or `?`
    /// host means the node that answered.
    fn parse(&self, reply: &Value, answered: &str) -> Result<SlotTable> {
        let bad = || Error::Redis(format!("cluster: unexpected CLUSTER SLOTS reply {reply:?}"));
        let Value::Array(ranges) = reply else {
            return Err(bad());
        };
        let mut table = SlotTable {
            owner: vec![UNOWNED; SLOTS],
            masters: Vec::new(),
        };
        for range in ranges {
            let Value::Array(items) = range else {
                return Err(bad());
            };
            let (Some(Value::Int(start)), Some(Value::Int(end)), Some(Value::Array(master))) =
                (items.first(), items.get(1), items.get(2))
            else {
                return Err(bad());
            };
            let (Some(host), Some(Value::Int(port))) = (master.first(), master.get(1)) else {
                return Err(bad());
            };
            let host = match host {
                Value::BulkString(b) if !b.is_empty() && b != b"?" => {
                    String::from_utf8_lossy(b).into_owned()
                }
                _ => answered.to_string(),
            };
            let pool = self.pool_at(&host, u16::try_from(*port).map_err(|_| bad())?);
            let index = match table.masters.iter().position(|p| Arc::ptr_eq(p, &pool)) {
                Some(i) => i,
                None => {
                    table.masters.push(pool);
                    table.masters.len() - 1
                }
            };
            let (start, end) = (*start as usize, *end as usize);
            if start > end || end >= SLOTS {
                return Err(bad());
            }
            table.owner[start..=end].fill(index as u16);
        }
        if table.masters.is_empty() {
            return Err(Error::connection(
                answered,
                "not available (CLUSTERDOWN no slots served)",
            ));
        }
        Ok(table)
    }
}

fn host_port(ep: &Endpoint) -> (String, u16) {
    match &ep.addr {
        crate::transport::endpoint::Addr::Tcp { host, port }
        | crate::transport::endpoint::Addr::Tls { host, port, .. } => (host.clone(), *port),
        crate::transport::endpoint::Addr::Unix(_) => (String::new(), 0),
    }
}
