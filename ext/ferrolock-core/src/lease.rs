//! Leases and their watchdog. A held lock or slot is a key with a TTL; while the holding process
//! lives, one background thread per client renews every lease about every TTL/3, all due
//! renewals of a tick in one pipelined round trip, each token-checked by its script. A lease the
//! script reports gone is marked lost (the owner learns it at release).

use crate::client::{int, Client, ClientInner};
use crate::interrupt::Interrupt;
use crate::script::ScriptCall;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::time::{Duration, Instant};

/// How long after a failed renewal (Redis unreachable) the watchdog tries again.
const RETRY_AFTER_FAILURE: Duration = Duration::from_millis(250);

struct LeaseEntry {
    renew: ScriptCall,
    ttl: Duration,
    lost: AtomicBool,
}

/// A registered lease; renewal stops when it is dropped.
pub struct Lease {
    client: Client,
    id: u64,
    entry: Arc<LeaseEntry>,
}

impl Lease {
    /// Starts renewing: `renew` must return 1 while the lease is ours and 0 once it is not.
    pub fn start(client: &Client, renew: ScriptCall, ttl: Duration) -> Lease {
        let entry = Arc::new(LeaseEntry {
            renew,
            ttl,
            lost: AtomicBool::new(false),
        });
        let id = client
            .inner
            .watchdog
            .get()
            .register(&client.inner, entry.clone());
        Lease {
            client: client.clone(),
            id,
            entry,
        }
    }

    /// True once a renewal found the lease gone or taken by another token.
    pub fn is_lost(&self) -> bool {
        self.entry.lost.load(Ordering::SeqCst)
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.client.inner.watchdog.get().unregister(self.id);
    }
}

#[derive(Default)]
pub struct Watchdog {
    state: Mutex<State>,
    wake: Condvar,
}

#[derive(Default)]
struct State {
    leases: HashMap<u64, Due>,
    next_id: u64,
    running: bool,
    stopped: bool,
    /// When the watchdog thread will look again by itself (None: not before it is notified).
    wakes_at: Option<Instant>,
}

struct Due {
    entry: Arc<LeaseEntry>,
    at: Instant,
}

impl Watchdog {
    fn register(self: &Arc<Self>, client: &Arc<ClientInner>, entry: Arc<LeaseEntry>) -> u64 {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        st.next_id += 1;
        let id = st.next_id;
        let at = Instant::now() + entry.ttl / 3;
        st.leases.insert(id, Due { entry, at });
        // Wake the thread only if it would otherwise look too late: locks taken and released
        // within a TTL/3 never cost a wake-up.
        let wake = st.wakes_at.is_none_or(|t| at < t);
        if !st.running {
            st.running = true;
            let me = self.clone();
            let client = Arc::downgrade(client);
            std::thread::Builder::new()
                .name("ferrolock-watchdog".into())
                .spawn(move || me.run(client))
                .expect("spawn the lease watchdog thread");
        }
        if wake {
            self.wake.notify_one();
        }
        id
    }

    fn unregister(&self, id: u64) {
        self.state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .leases
            .remove(&id);
    }

    pub(crate) fn stop(&self) {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).stopped = true;
        self.wake.notify_all();
    }

    fn run(&self, client: Weak<ClientInner>) {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if st.stopped {
                return;
            }
            let now = Instant::now();
            let Some(earliest) = st.leases.values().map(|d| d.at).min() else {
                st = self.wake.wait(st).unwrap_or_else(|e| e.into_inner());
                continue;
            };
            if earliest > now {
                st = self
                    .wake
                    .wait_timeout(st, earliest - now)
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
                continue;
            }
            // Batch: everything due now or within a sixth of its TTL goes in this round trip.
            let batch: Vec<(u64, Arc<LeaseEntry>)> = st
                .leases
                .iter()
                .filter(|(_, d)| d.at <= now + d.entry.ttl / 6)
                .map(|(id, d)| (*id, d.entry.clone()))
                .collect();
            drop(st);
            let Some(inner) = client.upgrade() else {
                return;
            };
            let calls: Vec<ScriptCall> = batch.iter().map(|(_, e)| e.renew.clone()).collect();
            let results = Client { inner }.eval_many(&Interrupt::new(), &calls);
            st = self.state.lock().unwrap_or_else(|e| e.into_inner());
            let now = Instant::now();
            for (i, (id, entry)) in batch.iter().enumerate() {
                let outcome = match &results {
                    Ok(rs) => rs[i].as_ref().ok().and_then(|v| int(v).ok()),
                    Err(_) => None,
                };
                match outcome {
                    Some(1) => {
                        if let Some(d) = st.leases.get_mut(id) {
                            d.at = now + entry.ttl / 3;
                        }
                    }
                    Some(_) => {
                        entry.lost.store(true, Ordering::SeqCst);
                        st.leases.remove(id);
                    }
                    None => {
                        if let Some(d) = st.leases.get_mut(id) {
                            d.at = now + RETRY_AFTER_FAILURE.min(entry.ttl / 6);
                        }
                    }
                }
            }
        }
    }
}
