//! Telling that Redis lost ferrolock's data (a restart without persistence, a failover to a
//! replica that missed writes, an eviction, a flush), and what this process lost with it.
//!
//! The watchdog thread (watchdog.rs) probes while its client holds leases or remembers jobs it
//! parked: at most every `PROBE_INTERVAL`, in the same round trip as the renewals that are due
//! then (lua/lease/probe.lua). A probe reads the server's run_id, evicted_keys and uptime, and
//! checks which of the jobs this process parked are still parked; it writes nothing. When, against
//! the previous probe, the run_id changed (a restart, or a failover) or evicted_keys grew, data
//! may have been lost: it was if a lease of this process or a job it parked is gone. So a clean
//! failover or a restart with persistence is told from one that lost data by what this process
//! holds, not by the run_id alone.
//!
//! Every lease is then renewed at once, and the leases found gone then, since the last probe, or
//! in that round trip are the ones lost. A lease found gone while no probe saw a change makes the
//! next probe come at once, so a loss found by a renewal first is explained too; a lease that
//! just ran out (a stalled process) or was deleted shows no change and is only a `lock_lost`.

use crate::lost_leases::LostLease;
use crate::lua_script;
use crate::script::ScriptCall;
use redis::Value;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

lua_script!(PROBE = "lease/probe");
lua_script!(PARKED = "job_concurrency/parked");

/// How often a busy client probes at most.
pub(crate) const PROBE_INTERVAL: Duration = Duration::from_secs(5);
/// A probe due within this joins an earlier round trip.
pub(crate) const PROBE_MARGIN: Duration = Duration::from_millis(2500);
/// How soon a wanted probe (a lease found gone, a failed probe) comes after the last try.
const PROBE_RETRY: Duration = Duration::from_millis(250);
/// Parked jobs remembered per client at most (the oldest keys are forgotten first).
const MAX_PARKED: usize = 10_000;

/// What made Redis lose data, as far as a probe can tell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cause {
    /// The server restarted since the last probe (its uptime is shorter than the time since) and
    /// data is missing: no persistence, or an old snapshot.
    Restart,
    /// Another server answers (a failover) and data is missing: a replica that missed writes.
    Failover,
    /// evicted_keys grew (maxmemory) and ferrolock's keys are gone.
    Eviction,
}

impl Cause {
    pub fn name(self) -> &'static str {
        match self {
            Cause::Restart => "restart",
            Cause::Failover => "failover",
            Cause::Eviction => "eviction",
        }
    }
}

/// A job this process parked (limits_concurrency), by concurrency key and job id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParkedJob {
    pub key: String,
    pub job_id: String,
}

/// One data loss, as this process knows it; or (`lost` false) a server change that kept the data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DataLoss {
    /// False: the server changed (a failover, a restart with persistence) and everything this
    /// process held or parked is still there.
    pub lost: bool,
    pub cause: Cause,
    /// The server (its redacted URL).
    pub redis: String,
    /// The leases of this process found gone.
    pub leases: Vec<LostLease>,
    /// The jobs this process parked that were still parked at its previous probe and are gone.
    pub parked: Vec<ParkedJob>,
}

struct Snapshot {
    run_id: String,
    evicted: i64,
    uptime: Duration,
    at: Instant,
}

/// The parked jobs of one concurrency key: its `jobs` hash and job ids.
struct ParkedKey {
    key: String,
    job_ids: Vec<String>,
}

/// A change the last probe saw, waiting for the renewals it forced.
struct Confirming {
    cause: Cause,
    leases: Vec<LostLease>,
    parked: Vec<ParkedJob>,
}

/// What the watchdog does after a round trip.
pub(crate) enum Next {
    Nothing,
    /// Renew every lease now, then call `confirmed` with what that found gone.
    RenewAll,
    Report(DataLoss),
}

/// The probing state of one watchdog (one client in one process).
pub(crate) struct Watch {
    /// Routes the probe (it touches no key).
    route_key: String,
    redis: String,
    last: Option<Snapshot>,
    tried_at: Option<Instant>,
    /// Leases found gone since the last probe.
    unexplained: Vec<LostLease>,
    parked: BTreeMap<String, ParkedKey>,
    parked_count: usize,
    confirming: Option<Confirming>,
}

/// What one probe asked, to read its replies.
pub(crate) struct Sent {
    parked: Vec<(String, Vec<String>)>,
}

impl Watch {
    pub(crate) fn new(route_key: String, redis: String) -> Watch {
        Watch {
            route_key,
            redis,
            last: None,
            tried_at: None,
            unexplained: Vec::new(),
            parked: BTreeMap::new(),
            parked_count: 0,
            confirming: None,
        }
    }

    /// Remembers a job parked on `key` (its payload in the hash `jobs_key`).
    pub(crate) fn park(&mut self, jobs_key: String, key: &str, job_id: &str) {
        let entry = self.parked.entry(jobs_key).or_insert_with(|| ParkedKey {
            key: key.to_string(),
            job_ids: Vec::new(),
        });
        if entry.job_ids.iter().any(|j| j == job_id) {
            return;
        }
        entry.job_ids.push(job_id.to_string());
        self.parked_count += 1;
        while self.parked_count > MAX_PARKED {
            let Some((_, dropped)) = self.parked.pop_first() else {
                break;
            };
            self.parked_count -= dropped.job_ids.len();
        }
    }

    pub(crate) fn has_parked(&self) -> bool {
        self.parked_count > 0
    }

    /// When the next probe is due (None: nothing to watch).
    pub(crate) fn due(&self, has_leases: bool, now: Instant) -> Option<Instant> {
        if !has_leases && !self.has_parked() && self.unexplained.is_empty() {
            return None;
        }
        let Some(tried) = self.tried_at else {
            return Some(now);
        };
        let wanted = !self.unexplained.is_empty() || self.last.is_none();
        Some(tried + if wanted { PROBE_RETRY } else { PROBE_INTERVAL })
    }

    /// The probe's calls: the server, then one per key with parked jobs.
    pub(crate) fn calls(&mut self, now: Instant) -> (Vec<ScriptCall>, Sent) {
        self.tried_at = Some(now);
        let mut calls = vec![ScriptCall::new(&PROBE).key(self.route_key.as_str())];
        let mut parked = Vec::new();
        for (jobs_key, entry) in &self.parked {
            let mut call = ScriptCall::new(&PARKED).key(jobs_key.as_str());
            for job_id in &entry.job_ids {
                call = call.arg(job_id.as_str());
            }
            calls.push(call);
            parked.push((jobs_key.clone(), entry.job_ids.clone()));
        }
        (calls, Sent { parked })
    }

    /// After a round trip: `lost` the leases it found gone; `probe` the probe's replies, if one
    /// was sent (None each when Redis did not answer).
    pub(crate) fn after(
        &mut self,
        lost: Vec<LostLease>,
        probe: Option<(Sent, Vec<Option<Value>>)>,
        has_leases: bool,
        now: Instant,
    ) -> Next {
        if let Some(mut confirming) = self.confirming.take() {
            confirming.leases.extend(lost);
            return self.settle(confirming);
        }
        self.unexplained.extend(lost);
        let Some((sent, replies)) = probe else {
            return Next::Nothing;
        };
        let Some(snapshot) = replies.first().and_then(|r| snapshot(r.as_ref()?, now)) else {
            return Next::Nothing; // Redis did not answer: tried again later
        };
        let change = self.last.take().and_then(|last| compare(&last, &snapshot));
        self.last = Some(snapshot);
        let gone = self.read_parked(sent, &replies[1..]);
        let Some(cause) = change else {
            self.unexplained.clear(); // leases that simply ran out
            return Next::Nothing;
        };
        let confirming = Confirming {
            cause,
            leases: std::mem::take(&mut self.unexplained),
            parked: gone,
        };
        if has_leases {
            self.confirming = Some(confirming);
            Next::RenewAll
        } else {
            self.settle(confirming)
        }
    }

    fn settle(&mut self, c: Confirming) -> Next {
        let lost = !c.leases.is_empty() || !c.parked.is_empty();
        // Evictions of other keys say nothing; a clean failover or a restart that kept the data
        // is told once (the operator may wonder).
        if !lost && c.cause == Cause::Eviction {
            return Next::Nothing;
        }
        Next::Report(DataLoss {
            lost,
            cause: c.cause,
            redis: self.redis.clone(),
            leases: c.leases,
            parked: c.parked,
        })
    }

    /// Forgets the parked jobs found gone; they are the ones lost when a change was seen.
    fn read_parked(&mut self, sent: Sent, replies: &[Option<Value>]) -> Vec<ParkedJob> {
        let mut gone = Vec::new();
        for ((jobs_key, job_ids), reply) in sent.parked.into_iter().zip(replies) {
            let Some(Value::Array(flags)) = reply else {
                continue; // no answer: asked again next time
            };
            for (job_id, flag) in job_ids.into_iter().zip(flags) {
                if matches!(flag, Value::Int(0)) {
                    if let Some(key) = self.forget(&jobs_key, &job_id) {
                        gone.push(ParkedJob { key, job_id });
                    }
                }
            }
        }
        gone
    }

    /// Forgets one parked job; its concurrency key if it was remembered still.
    fn forget(&mut self, jobs_key: &str, job_id: &str) -> Option<String> {
        let entry = self.parked.get_mut(jobs_key)?;
        let before = entry.job_ids.len();
        entry.job_ids.retain(|j| j != job_id);
        if before == entry.job_ids.len() {
            return None;
        }
        self.parked_count -= 1;
        let key = entry.key.clone();
        if entry.job_ids.is_empty() {
            self.parked.remove(jobs_key);
        }
        Some(key)
    }
}

/// {run_id, evicted_keys, uptime_in_seconds}
fn snapshot(reply: &Value, at: Instant) -> Option<Snapshot> {
    let Value::Array(items) = reply else {
        return None;
    };
    match items.as_slice() {
        [run_id, Value::Int(evicted), Value::Int(uptime)] => Some(Snapshot {
            run_id: crate::client::text(run_id)?,
            evicted: *evicted,
            uptime: Duration::from_secs(u64::try_from(*uptime).ok()?),
            at,
        }),
        _ => None,
    }
}

/// What changed from `last` to `now` that may have lost data.
fn compare(last: &Snapshot, now: &Snapshot) -> Option<Cause> {
    if last.run_id != now.run_id {
        // A server up for less than the time since the last probe started in between; one up
        // for longer was there already (a replica promoted).
        let since = now.at.duration_since(last.at) + Duration::from_secs(1);
        return Some(if now.uptime <= since {
            Cause::Restart
        } else {
            Cause::Failover
        });
    }
    (now.evicted > last.evicted).then_some(Cause::Eviction)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(run_id: &str, evicted: i64, uptime: i64) -> Option<Value> {
        Some(Value::Array(vec![
            Value::BulkString(run_id.into()),
            Value::Int(evicted),
            Value::Int(uptime),
        ]))
    }

    fn probe(watch: &mut Watch, reply: Option<Value>, lost: Vec<LostLease>, leases: bool) -> Next {
        let now = Instant::now();
        let (_, sent) = watch.calls(now);
        watch.after(lost, Some((sent, vec![reply])), leases, now)
    }

    fn lease() -> LostLease {
        LostLease::new("dist_mutex", "a")
    }

    fn report(next: Next) -> DataLoss {
        match next {
            Next::Report(loss) => loss,
            _ => panic!("expected a report"),
        }
    }

    #[test]
    fn a_changed_server_is_a_loss_only_when_something_is_gone() {
        let mut w = Watch::new("e".into(), "r".into());
        probe(&mut w, reply("r1", 0, 100), vec![], true);
        // A replica up for long: a failover; nothing gone: told as kept.
        let next = probe(&mut w, reply("r2", 0, 500), vec![], true);
        assert!(matches!(next, Next::RenewAll));
        let kept = report(w.after(vec![], None, true, Instant::now()));
        assert!(!kept.lost && kept.cause == Cause::Failover);
        // Evictions of other keys: nothing.
        assert!(matches!(
            probe(&mut w, reply("r2", 2, 505), vec![], true),
            Next::RenewAll
        ));
        assert!(matches!(
            w.after(vec![], None, true, Instant::now()),
            Next::Nothing
        ));
        // An eviction that took a lease.
        assert!(matches!(
            probe(&mut w, reply("r2", 3, 510), vec![], true),
            Next::RenewAll
        ));
        let loss = report(w.after(vec![lease()], None, true, Instant::now()));
        assert!(loss.lost);
        assert_eq!(loss.cause, Cause::Eviction);
        assert_eq!(loss.leases, vec![lease()]);
    }

    #[test]
    fn a_restart_that_took_a_lease_found_first_is_reported_at_the_probe_it_brings() {
        let mut w = Watch::new("e".into(), "r".into());
        probe(&mut w, reply("r1", 0, 100), vec![], true);
        assert!(matches!(
            w.after(vec![lease()], None, false, Instant::now()),
            Next::Nothing
        ));
        let loss = report(probe(&mut w, reply("r2", 0, 0), vec![], false));
        assert_eq!(loss.cause, Cause::Restart);
        assert_eq!(loss.leases, vec![lease()]);
    }

    #[test]
    fn a_lease_that_ran_out_alone_is_no_loss() {
        let mut w = Watch::new("e".into(), "r".into());
        probe(&mut w, reply("r1", 0, 100), vec![], true);
        w.after(vec![lease()], None, true, Instant::now());
        assert!(w.due(true, Instant::now()).unwrap() <= Instant::now() + PROBE_RETRY);
        assert!(matches!(
            probe(&mut w, reply("r1", 0, 105), vec![], true),
            Next::Nothing
        ));
        assert!(w.unexplained.is_empty());
    }

    #[test]
    fn parked_jobs_are_forgotten_when_they_leave_and_reported_when_lost() {
        let mut w = Watch::new("e".into(), "r".into());
        w.park("ns:{concurrency:k}:jobs".into(), "k", "j1");
        w.park("ns:{concurrency:k}:jobs".into(), "k", "j2");
        w.park("ns:{concurrency:k}:jobs".into(), "k", "j2");
        assert_eq!(w.parked_count, 2);
        let now = Instant::now();
        let (calls, sent) = w.calls(now);
        assert_eq!(calls.len(), 2);
        let flags = Some(Value::Array(vec![Value::Int(1), Value::Int(0)]));
        w.after(
            vec![],
            Some((sent, vec![reply("r1", 0, 100), flags])),
            false,
            now,
        );
        assert_eq!(w.parked_count, 1);
        let (_, sent) = w.calls(now);
        let flags = Some(Value::Array(vec![Value::Int(0)]));
        let loss = report(w.after(
            vec![],
            Some((sent, vec![reply("r2", 0, 0), flags])),
            false,
            now,
        ));
        let j1 = ParkedJob {
            key: "k".into(),
            job_id: "j1".into(),
        };
        assert_eq!(loss.parked, vec![j1]);
        assert!(!w.has_parked());
    }
}
