//! The lease watchdog: one background thread per client (and process) that renews every lease
//! about every TTL/3, all due renewals of a tick in one pipelined round trip, and runs the
//! best-effort cleanups of lease.rs (`release_in_background`), and probes whether Redis lost
//! ferrolock's data (data_loss.rs). The client owns it; how a batch reaches Redis is given to it
//! when its thread starts (`Link`), so this module imports nothing of the client.

use crate::data_loss::{Next, Watch, PROBE_MARGIN};
use crate::error::{Error, Result};
use crate::lost_leases::LostLease;
use crate::script::ScriptCall;
use crate::unanswered_releases::Announced;
use redis::Value;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// How long after a failed round trip (Redis unreachable) the watchdog tries again.
const RETRY_AFTER_FAILURE: Duration = Duration::from_millis(250);

/// Runs a batch of calls in one round trip: each call's reply (None: no answer, or an error);
/// None when the client is gone (the thread then ends).
pub(crate) type Batch = Box<dyn Fn(&[ScriptCall]) -> Option<Vec<Option<Value>>> + Send>;

/// The thread's way to Redis, and what its probes need (data_loss.rs).
pub(crate) struct Link {
    pub(crate) batch: Batch,
    /// Routes the data-loss probe (data_loss.rs) to the namespace's node.
    pub(crate) route_key: String,
    /// The server, as reports show it (redacted).
    pub(crate) redis: String,
    /// ClientOptions::data_loss_probe: false, no probe is ever sent.
    pub(crate) probe: bool,
}

/// A lease the watchdog renews (lease.rs).
pub(crate) struct LeaseEntry {
    pub(crate) renew: ScriptCall,
    pub(crate) ttl: Duration,
    pub(crate) lost: AtomicBool,
    /// Reported to `lost_leases` when a renewal finds the lease gone.
    pub(crate) report: Option<LostLease>,
}

#[derive(Default)]
pub struct Watchdog {
    state: Mutex<State>,
    wake: Condvar,
}

#[derive(Default)]
struct State {
    due: HashMap<u64, Due>,
    next_id: u64,
    running: bool,
    stopped: bool,
    /// When the watchdog thread will look again by itself (None: not before it is notified).
    wakes_at: Option<Instant>,
    /// Made when the thread starts.
    watch: Option<Watch>,
}

impl State {
    fn has_leases(&self) -> bool {
        self.due.values().any(|d| matches!(d.work, Work::Renew(_)))
    }

    fn probe_due(&self, now: Instant) -> Option<Instant> {
        self.watch.as_ref()?.due(self.has_leases(), now)
    }
}

pub(crate) enum Work {
    Renew(Arc<LeaseEntry>),
    Cleanup {
        call: ScriptCall,
        give_up_at: Instant,
        /// Dropped after the first try (see `release_in_background_announced`).
        announced: Option<Announced>,
    },
}

struct Due {
    work: Work,
    at: Instant,
}

impl Due {
    fn call(&self) -> ScriptCall {
        match &self.work {
            Work::Renew(entry) => entry.renew.clone(),
            Work::Cleanup { call, .. } => call.clone(),
        }
    }

    /// Renewals due within a sixth of their TTL join an earlier batch.
    fn batch_margin(&self) -> Duration {
        match &self.work {
            Work::Renew(entry) => entry.ttl / 6,
            Work::Cleanup { .. } => Duration::ZERO,
        }
    }

    /// Records the outcome of this item's round trip (`None`: Redis did not answer); a lease
    /// found gone goes to `lost`. Returns false when the item is finished.
    fn settle(&mut self, outcome: Option<i64>, now: Instant, lost: &mut Vec<LostLease>) -> bool {
        if let Work::Cleanup { announced, .. } = &mut self.work {
            announced.take();
        }
        match (&self.work, outcome) {
            (Work::Renew(entry), Some(1)) => {
                self.at = now + entry.ttl / 3;
                true
            }
            (Work::Renew(entry), Some(_)) => {
                entry.lost.store(true, Ordering::SeqCst);
                if let Some(report) = &entry.report {
                    crate::lost_leases::push(report.clone());
                    lost.push(report.clone());
                }
                false
            }
            (Work::Renew(entry), None) => {
                self.at = now + RETRY_AFTER_FAILURE.min(entry.ttl / 6);
                true
            }
            (Work::Cleanup { .. }, Some(_)) => false,
            (Work::Cleanup { give_up_at, .. }, None) => {
                self.at = now + RETRY_AFTER_FAILURE;
                now < *give_up_at
            }
        }
    }
}

impl Watchdog {
    /// Queues `work`, starting the thread first if it is not running (see `ensure_running`).
    /// `link` makes the thread's way to Redis (only called when the thread starts).
    pub(crate) fn add(
        self: &Arc<Self>,
        link: impl FnOnce() -> Link,
        work: Work,
        at: Instant,
    ) -> Result<u64> {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        self.ensure_running(&mut st, link)?;
        st.next_id += 1;
        let id = st.next_id;
        st.due.insert(id, Due { work, at });
        // Wake the thread only if it would otherwise look too late: locks taken and released
        // within a TTL/3 never cost a wake-up.
        let wake = st.wakes_at.is_none_or(|t| at < t);
        if wake {
            self.wake.notify_one();
        }
        Ok(id)
    }

    /// Remembers a job this process parked (limits_concurrency), so that its loss is reported;
    /// forgotten once a probe finds it gone from its key's `jobs` hash.
    pub(crate) fn park(
        self: &Arc<Self>,
        link: impl FnOnce() -> Link,
        jobs_key: String,
        key: &str,
        job_id: &str,
    ) -> Result<()> {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        self.ensure_running(&mut st, link)?;
        let Some(watch) = st.watch.as_mut() else {
            return Ok(());
        };
        let first = !watch.has_parked();
        watch.park(jobs_key, key, job_id);
        // The first parked job may make a probe due sooner than the thread would look.
        if first {
            self.wake.notify_one();
        }
        Ok(())
    }

    /// Starts the thread unless it runs. When the OS refuses the thread, nothing is queued and
    /// `running` stays false: no entry waits for a thread that does not exist (it would be
    /// renewed forever once a later one started), and the next call tries again.
    fn ensure_running(self: &Arc<Self>, st: &mut State, link: impl FnOnce() -> Link) -> Result<()> {
        if st.running {
            return Ok(());
        }
        let me = self.clone();
        let Link {
            batch,
            route_key,
            redis,
            probe,
        } = link();
        spawn_thread(move || me.run(batch)).map_err(|e| {
            Error::internal(format!("could not start the lease watchdog thread: {e}"))
        })?;
        st.watch = probe.then(|| Watch::new(route_key, redis));
        st.running = true;
        Ok(())
    }

    pub(crate) fn remove(&self, id: u64) {
        self.state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .due
            .remove(&id);
    }

    /// Queued items (leases and cleanups), for tests.
    #[cfg(test)]
    pub(crate) fn queued(&self) -> (usize, bool) {
        let st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        (st.due.len(), st.running)
    }

    pub(crate) fn stop(&self) {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).stopped = true;
        self.wake.notify_all();
    }

    fn run(&self, batch: Batch) {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if st.stopped {
                return;
            }
            let now = Instant::now();
            let probe_at = st.probe_due(now);
            let Some(earliest) = st.due.values().map(|d| d.at).chain(probe_at).min() else {
                st.wakes_at = None;
                st = self.wake.wait(st).unwrap_or_else(|e| e.into_inner());
                continue;
            };
            if earliest > now {
                st.wakes_at = Some(earliest);
                st = self
                    .wake
                    .wait_timeout(st, earliest - now)
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
                continue;
            }
            st.wakes_at = Some(now);
            // Batch: everything due now (or soon enough) goes in this one round trip.
            let due: Vec<u64> = st
                .due
                .iter()
                .filter(|(_, d)| d.at <= now + d.batch_margin())
                .map(|(id, _)| *id)
                .collect();
            let mut calls: Vec<ScriptCall> = due.iter().map(|id| st.due[id].call()).collect();
            let probe = match (probe_at, st.watch.as_mut()) {
                (Some(at), Some(watch)) if at <= now + PROBE_MARGIN => {
                    let (probe_calls, sent) = watch.calls(now);
                    calls.extend(probe_calls);
                    Some(sent)
                }
                _ => None,
            };
            drop(st);
            let Some(mut results) = batch(&calls) else {
                return;
            };
            results.resize(calls.len(), None);
            let probe_replies = results.split_off(due.len());
            st = self.state.lock().unwrap_or_else(|e| e.into_inner());
            let now = Instant::now();
            let mut lost = Vec::new();
            for (id, outcome) in due.iter().zip(results) {
                let outcome = outcome.and_then(|v| crate::client::int(&v).ok());
                let finished = st
                    .due
                    .get_mut(id)
                    .is_some_and(|due| !due.settle(outcome, now, &mut lost));
                if finished {
                    st.due.remove(id);
                }
            }
            let has_leases = st.has_leases();
            let probe = probe.map(|sent| (sent, probe_replies));
            let next = match st.watch.as_mut() {
                Some(watch) => watch.after(lost, probe, has_leases, now),
                None => Next::Nothing,
            };
            match next {
                Next::Nothing => {}
                // Every lease renewed now: those gone are what the change took.
                Next::RenewAll => st
                    .due
                    .values_mut()
                    .filter(|d| matches!(d.work, Work::Renew(_)))
                    .for_each(|d| d.at = now),
                Next::Report(loss) => crate::lost_leases::push_data_loss(loss),
            }
        }
    }
}

fn spawn_thread(run: impl FnOnce() + Send + 'static) -> std::io::Result<()> {
    #[cfg(test)]
    if test_hooks::REFUSE_THREADS.with(std::cell::Cell::get) {
        return Err(std::io::Error::other("refused by the test"));
    }
    crate::quiet_thread::spawn_quiet("ferrolock-watchdog", run).map(drop)
}

#[cfg(test)]
pub(crate) mod test_hooks {
    use std::cell::Cell;

    thread_local! {
        /// The OS "refuses" the watchdog thread to this test thread.
        pub(crate) static REFUSE_THREADS: Cell<bool> = const { Cell::new(false) };
    }
}
