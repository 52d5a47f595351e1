//! JobConcurrency: `limits_concurrency` for ActiveJob (lib/ferrolock/active_job/concurrency.rb).
//! At most `limit` jobs of one key hold a slot at once; a job over the limit is blocked (its
//! serialized payload parked in Redis, FIFO) and promoted into the first slot that frees, by
//! the release that frees it or, for a holder that died, when its lease runs out.
//!
//! Keys of one concurrency key (`<ns>:{concurrency:<key>}:…`): `slots` (zset job_id -> lease
//! expiry), `blocked` (list of job_ids), `jobs` (hash job_id -> payload), `fence` (the fencing
//! counter), `override` (the operators' live limit or pause, as a ConcurrentLimiter's:
//! `write_override`), `started:<job_id>` (which promotion of a job promoted more than once started). The slot token is the ActiveJob job_id, so a job that enqueues itself again (a
//! continuation's resumption) finds its own slot instead of queueing behind itself.
//!
//! A holder that died frees its slot when its lease runs out; the blocked jobs behind it must
//! then be promoted by somebody; so must a promoted job whose enqueue was lost (its payload stays
//! until it starts, and its slot's lease running out puts it back at the head of the line). Every
//! key with such parked jobs is listed in one index per namespace
//! (`<ns>:{concurrency}:due`, scored by the key's earliest lease expiry), which each process's
//! timer reads once per wake-up (`due`), sleeping until the earliest entry: no worker polls the
//! keys themselves. Admissions and releases of a key free and promote as they go, too.
//!
//! A promoted job that did not start within its lease is promoted again, so two copies of it may
//! be queued: each promotion is numbered, the copy carries its number, and at perform only the
//! copy that started first runs (again, if redelivered); another promotion's copy is `Duplicate`.

use crate::client::{int, text, Client};
use crate::concurrent_limiter::{Override, OverrideAction, RenewArgs};
use crate::error::{Error, Result};
use crate::interrupt::Interrupt;
use crate::keys::Keys;
use crate::lease::Lease;
use crate::lost_leases::LostLease;
use crate::script::ScriptCall;
use redis::Value;
use std::time::Duration;

pub mod inspect;
mod scripts;
use scripts::{override_call, DueArgs, ForgetArgs, ReleaseArgs};
// Slots are a zset of token -> expiry, as the limiter's: its renewal (RenewArgs) fits them.

/// The fencing counter's TTL in leases (as DistMutex's).
const FENCE_TTL_FACTOR: u32 = 10;
/// How long blocked jobs and the index outlive their last write: a week, so jobs wait out any
/// real outage of the workers, yet keys of a key nobody uses any more go.
const BLOCKED_TTL: Duration = Duration::from_secs(7 * 24 * 3600);
/// An index score that is due at once (ms of Redis time).
const DUE_AT_ONCE: i64 = 1;
/// Keys one timer visit claims at most.
const DUE_BATCH: u32 = 100;

/// What to do with a job over the limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnConflict {
    Block,
    Discard,
}

/// What an admission decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The job holds a slot.
    Held,
    /// Parked now, behind `blocked - 1` others.
    Blocked,
    /// Parked already (a second delivery of a blocked job): left in its place.
    Waiting,
    Discarded,
    /// max_blocked jobs wait already: nothing stored.
    Full,
    /// At perform: a copy of another promotion of this job started already; this one must not run.
    Duplicate,
}

/// A blocked job given a slot: its caller enqueues `payload` (the serialized ActiveJob job).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Promoted {
    pub job_id: String,
    pub payload: String,
    /// The promotion's number (1 for the first of the job): its enqueued copy carries it, and
    /// gives it back as [`Request::promotion`] at perform.
    pub promotion: u64,
}

#[derive(Debug)]
pub struct Admitted {
    pub outcome: Outcome,
    /// At perform, the slot's fencing token (0 at enqueue, or when not held).
    pub fence: i64,
    /// Jobs waiting on this key after this call.
    pub blocked: i64,
    pub promoted: Vec<Promoted>,
}

#[derive(Debug)]
pub struct Released {
    /// False when the job's lease had run out: its slot had been counted free already, so
    /// nothing was freed now.
    pub held: bool,
    pub promoted: Vec<Promoted>,
}

/// What one admission asks for: also admit.lua's arguments (scripts.rs), so its fields but `key`
/// are named as the script's ARGV locals.
pub struct Request<'a> {
    /// The concurrency key (its Redis keys are `<ns>:{concurrency:<key>}:…`).
    pub key: &'a str,
    /// The job: its slot's token.
    pub job_id: &'a str,
    /// Slots of the key.
    pub limit: u32,
    /// The slot's lease.
    pub lease: Duration,
    /// What becomes of the job over the limit.
    pub on_conflict: OnConflict,
    /// The serialized job, kept while it is blocked.
    pub payload: &'a str,
    /// Blocked jobs at most (0: no bound).
    pub max_blocked: u32,
    /// At perform: the job starts, and is issued a fencing token (its payload goes).
    pub at_perform: bool,
    /// The promotion this copy of the job carries ([`Promoted::promotion`]; 0: none).
    pub promotion: u64,
}

#[derive(Clone)]
pub struct JobConcurrency {
    client: Client,
    due_key: String,
}

/// A performing job's slot: renewed every third of its lease until dropped.
pub struct Running {
    pub key: String,
    pub job_id: String,
    pub fence: i64,
    duration: Duration,
    lease: Lease,
}

impl Running {
    /// Stops renewing and leaves the slot held until its lease runs out: the job enqueued itself
    /// again (a continuation's resumption), and that admission gave the slot a fresh lease.
    pub fn hand_to_resumption(self) {}

    /// True once a renewal found the slot gone (its lease ran out, e.g. the process was paused).
    pub fn is_lost(&self) -> bool {
        self.lease.is_lost()
    }
}

impl JobConcurrency {
    pub fn new(client: &Client) -> Result<JobConcurrency> {
        Ok(JobConcurrency {
            client: client.clone(),
            due_key: client.keys("concurrency")?.part("due"),
        })
    }

    fn keys(&self, key: &str) -> Result<Keys> {
        crate::keys::check_name("key", key)?;
        self.client.keys(&format!("concurrency:{key}"))
    }

    /// The index of keys with parked jobs (blocked, or promoted and not started).
    pub fn due_key(&self) -> &str {
        &self.due_key
    }

    /// `<ns>:{concurrency:<key>}:<part>` (slots, blocked, jobs, fence, started:<job_id>).
    pub fn key_part(&self, key: &str, part: &str) -> Result<String> {
        Ok(self.keys(key)?.part(part))
    }

    pub fn admit(&self, intr: &Interrupt, req: &Request) -> Result<Admitted> {
        if req.job_id.is_empty() {
            return Err(Error::argument("job_id: must not be empty"));
        }
        if req.limit == 0 {
            return Err(Error::argument("to: must be at least 1"));
        }
        crate::seconds::check_span("duration", req.lease)?;
        let keys = self.keys(req.key)?;
        let reply = self.client.eval(intr, &req.admit_call(&keys))?;
        let items = list(&reply, "admit")?;
        if items.len() < 6 {
            return Err(unexpected("admit", &reply));
        }
        let outcome = match text(&items[0]).as_deref() {
            Some("held") => Outcome::Held,
            Some("blocked") => Outcome::Blocked,
            Some("waiting") => Outcome::Waiting,
            Some("discarded") => Outcome::Discarded,
            Some("full") => Outcome::Full,
            Some("duplicate") => Outcome::Duplicate,
            _ => return Err(unexpected("admit", &reply)),
        };
        let earliest = int(&items[2])?;
        let blocked = int(&items[3])?;
        let parked = int(&items[5])?;
        let promoted = promoted(&items[6..])?;
        // The index watches keys with parked jobs (blocked, or promoted and not started: one
        // whose enqueue was lost comes back when its lease ends). Only a visit drops an entry
        // (forget.lua): a key left with none parked here has its entry made due at once, and so
        // does the first job parked in a line, so a visit that found none just before cannot
        // drop it.
        let index = if int(&items[4])? == 1 {
            Index::DueIfListed
        } else if outcome == Outcome::Blocked && parked == 1 {
            Index::Earlier(DUE_AT_ONCE)
        } else if outcome == Outcome::Blocked || (parked > 0 && !promoted.is_empty()) {
            Index::Earlier(earliest)
        } else {
            Index::Keep
        };
        self.index(intr, req.key, index)?;
        if matches!(outcome, Outcome::Blocked | Outcome::Waiting) {
            // Reported if Redis loses it (data_loss.rs).
            crate::lease::watch_parked(&self.client, keys.part("jobs"), req.key, req.job_id);
        }
        Ok(Admitted {
            outcome,
            fence: int(&items[1])?,
            blocked,
            promoted,
        })
    }

    /// Starts renewing a performing job's slot (after an admission at perform said Held).
    pub fn running(&self, key: &str, job_id: &str, lease: Duration, fence: i64) -> Result<Running> {
        let lease = crate::seconds::check_span("duration", lease)?;
        let slots = self.keys(key)?.part("slots");
        let renew = RenewArgs {
            token: job_id,
            lease: crate::seconds::millis(lease),
        }
        .call(&slots);
        let report = LostLease {
            fencing_token: Some(fence),
            ..LostLease::new("limits_concurrency", key)
        };
        Ok(Running {
            key: key.to_string(),
            job_id: job_id.to_string(),
            fence,
            duration: lease,
            lease: Lease::start_reporting(&self.client, renew, lease, report),
        })
    }

    /// Gives the slot back and promotes the next blocked jobs. When Redis does not answer, the
    /// release is retried in the background (for at most the lease) and the error returned.
    pub fn release(
        &self,
        intr: &Interrupt,
        running: Running,
        limit: Option<u32>,
    ) -> Result<Released> {
        let Running {
            key,
            job_id,
            duration,
            lease,
            ..
        } = running;
        // Stop renewing first: a renewal after the release would find the slot gone.
        drop(lease);
        let call = self.release_call(&key, &job_id, limit, 0)?;
        let reply = crate::lease::release_now(&self.client, intr, call, duration)?;
        self.released(intr, &key, &reply, None)
    }

    /// Gives back the slot of a job that will not perform (its enqueue failed after it was
    /// admitted, it was promoted but cannot be built any more, or it failed before it performed),
    /// payload and all. `promotion`: the copy's (0: none); a copy of another promotion than the
    /// one that started gives back nothing (the slot is the running copy's).
    pub fn give_back(
        &self,
        intr: &Interrupt,
        key: &str,
        job_id: &str,
        limit: Option<u32>,
        promotion: u64,
    ) -> Result<Released> {
        let call = self.release_call(key, job_id, limit, promotion)?;
        let reply = self.client.eval(intr, &call)?;
        self.released(intr, key, &reply, None)
    }

    /// The timer's visit of a key it claimed (`claim`, from [`due`](Self::due)): frees the key's
    /// slots whose lease ran out and promotes blocked jobs into free slots.
    pub fn reap(&self, intr: &Interrupt, key: &str, claim: i64) -> Result<Vec<Promoted>> {
        let call = self.release_call(key, "", None, 0)?;
        let reply = self.client.eval(intr, &call)?;
        Ok(self.released(intr, key, &reply, Some(claim))?.promoted)
    }

    fn release_call(
        &self,
        key: &str,
        job_id: &str,
        limit: Option<u32>,
        promotion: u64,
    ) -> Result<ScriptCall> {
        let args = ReleaseArgs {
            job_id,
            limit,
            promotion,
            blocked_ttl_ms: crate::seconds::millis(BLOCKED_TTL),
        };
        Ok(args.call(&self.keys(key)?))
    }

    /// `visit`: the timer's claim (its claim on the index entry is replaced by the key's real state).
    fn released(
        &self,
        intr: &Interrupt,
        key: &str,
        reply: &Value,
        visit: Option<i64>,
    ) -> Result<Released> {
        let items = list(reply, "release")?;
        if items.len() < 5 {
            return Err(unexpected("release", reply));
        }
        let earliest = int(&items[1])?;
        let parked = int(&items[4])?;
        let promoted = promoted(&items[5..])?;
        // Only a visit drops an entry (forget.lua), once no job is parked: a key left with none
        // parked here has it made due at once.
        let index = if let (Some(claim), 0) = (visit, parked) {
            Index::Forget(claim)
        } else if int(&items[3])? == 1 {
            Index::DueIfListed
        } else if visit.is_some() && parked > 0 {
            Index::Set(earliest)
        } else if parked > 0 && !promoted.is_empty() {
            // A promoted job's lease may end before the others' (classes of one group with
            // different durations).
            Index::Earlier(earliest)
        } else {
            Index::Keep
        };
        self.index(intr, key, index)?;
        Ok(Released {
            held: int(&items[0])? == 1,
            promoted,
        })
    }

    /// Changes `key`'s override (the operators' limit, or paused: see
    /// concurrent_limiter/limit_override.rs); the override now in force. A change that may let
    /// blocked jobs in makes the key due at once in the timers' index: the next timer visit (every
    /// process's timer looks at least once a second) promotes them into the slots the limit in
    /// force allows, and enqueues them in a process that has their classes.
    pub fn write_override(
        &self,
        intr: &Interrupt,
        key: &str,
        action: OverrideAction,
    ) -> Result<Override> {
        let reply = self
            .client
            .eval(intr, &override_call(&self.keys(key)?, action))?;
        let now = Override::from_reply("job_concurrency/override", &reply)?;
        let blocked = match &reply {
            Value::Array(items) => items.get(2).map(int).transpose()?.unwrap_or(0),
            _ => 0,
        };
        if action.eases() && blocked > 0 {
            self.index(intr, key, Index::Earlier(DUE_AT_ONCE))?;
        }
        Ok(now)
    }

    /// Claims the keys whose earliest lease is due (each put off by `recheck` meanwhile); also
    /// how long until the next entry is due (None: the index is empty).
    pub fn due(
        &self,
        intr: &Interrupt,
        recheck: Duration,
    ) -> Result<(Vec<String>, i64, Option<Duration>)> {
        let call = DueArgs {
            recheck_ms: crate::seconds::millis(recheck).max(1),
            max_keys: DUE_BATCH,
            index_ttl_ms: crate::seconds::millis(BLOCKED_TTL),
        }
        .call(&self.due_key);
        let reply = self.client.eval(intr, &call)?;
        let items = list(&reply, "due")?;
        let Some(first) = items.first() else {
            return Err(unexpected("due", &reply));
        };
        let next = int(first)?;
        let next = (next >= 0).then(|| Duration::from_millis(next.unsigned_abs()));
        let claim = int(items.get(1).ok_or_else(|| unexpected("due", &reply))?)?;
        let names = items[2..]
            .iter()
            .map(|v| text(v).ok_or_else(|| unexpected("due", &reply)))
            .collect::<Result<Vec<_>>>()?;
        Ok((names, claim, next))
    }

    /// Keeps the index of keys with parked jobs true to what a script found. An entry may be
    /// early (a visit finds nothing due and puts it right) or outlive its line until the next
    /// timer wake-up, never missing while a job is blocked: only a visit drops an entry, and
    /// only while nothing moved it since its claim.
    fn index(&self, intr: &Interrupt, key: &str, index: Index) -> Result<()> {
        let (score, lt) = match index {
            Index::Keep => return Ok(()),
            Index::DueIfListed => {
                let mut cmd = redis::cmd("ZADD");
                cmd.arg(&self.due_key)
                    .arg("XX")
                    .arg("LT")
                    .arg(DUE_AT_ONCE)
                    .arg(key);
                self.client.pipeline(intr, &[cmd])?;
                return Ok(());
            }
            Index::Forget(claim) => {
                let call = ForgetArgs { name: key, claim }.call(&self.due_key);
                self.client.eval(intr, &call)?;
                return Ok(());
            }
            Index::Earlier(score) => (score, true),
            Index::Set(score) => (score, false),
        };
        if score <= 0 {
            return Ok(());
        }
        let mut add = redis::cmd("ZADD");
        add.arg(&self.due_key);
        if lt {
            // LT: only ever moves an entry earlier, so a due visit is never put off.
            add.arg("LT");
        }
        add.arg(score).arg(key);
        let mut expire = redis::cmd("PEXPIRE");
        expire
            .arg(&self.due_key)
            .arg(crate::seconds::millis(BLOCKED_TTL));
        self.client.pipeline(intr, &[add, expire])?;
        Ok(())
    }
}

/// What a script's outcome asks of the index.
enum Index {
    Keep,
    /// Drop the entry if it still has this visit's claim (forget.lua).
    Forget(i64),
    /// Make the entry, if there is one, due at once (its line emptied: a visit drops it).
    DueIfListed,
    /// Move the entry to this expiry if earlier (or add it).
    Earlier(i64),
    /// Put the entry at this expiry (the timer's visit).
    Set(i64),
}

fn fence_ttl(lease: Duration) -> Duration {
    lease
        .saturating_mul(FENCE_TTL_FACTOR)
        .min(crate::seconds::MAX)
}

fn promoted(items: &[Value]) -> Result<Vec<Promoted>> {
    items
        .chunks(3)
        .map(|triple| match triple {
            [id, body, number] => Ok(Promoted {
                job_id: text(id).ok_or_else(|| unexpected("promote", id))?,
                payload: text(body).ok_or_else(|| unexpected("promote", body))?,
                promotion: u64::try_from(int(number)?)
                    .map_err(|_| unexpected("promote", number))?,
            }),
            _ => Err(Error::Redis(
                "job_concurrency: promoted jobs come in threes".into(),
            )),
        })
        .collect()
}

fn list<'a>(v: &'a Value, op: &str) -> Result<&'a [Value]> {
    match v {
        Value::Array(items) => Ok(items),
        other => Err(unexpected(op, other)),
    }
}

fn unexpected(op: &str, reply: &Value) -> Error {
    Error::Redis(format!("job_concurrency/{op}: unexpected reply {reply:?}"))
}
