//! Direct hand-off: a release hands the lock (a slot) to the first waiter and tells it so in
//! the same script, with the grant (a fencing token, a slot's expiry), so the waiter enters
//! without another attempt. The grant goes to the client's grant inbox when the waiter's line
//! entry names one (inbox.rs: a PUBLISH, nothing to pop), else to the waiter's own grant list,
//! which it pops (see lua/dist_mutex/release.lua).
//!
//! Design notes (moved from doc/ARCHITECTURE.md):
//!
//! DistMutex hands off directly (`line/handoff.rs`, `lua/dist_mutex/{acquire,release}.lua`): a
//! failed attempt that will wait appends `token|deadline ms` (Redis time: now + its planned wait
//! for this turn + 1 s) to the name's `waiters` list in the same script, and BLPOPs its own
//! `grant:<token>` list. The release, instead of deleting the lock, pops the first entry whose
//! deadline has not passed, SETs the lock to that token (PX lease) with a fresh fencing token
//! (max(last + 1, TIME µs), as acquire) and RPUSHes the token to the waiter's grant list (TTL: the
//! entry's deadline + 1 s). The pop returns the fencing token: the waiter enters with no further
//! attempt, FIFO across threads and processes, and nobody barges while anyone waits (a free lock
//! with live entries only exists after a holder's lease expired: then the first attempt wins).
//! Bounds kept: a turn's wait never outlasts the holder's PTTL (then the waiter attempts again,
//! keeping its place: `LPOS` + `LSET`); a waiter whose deadline passes leaves the line with the
//! release script (`leave_line` = entries + grant removed), which also hands on a grant that
//! raced in; `abandon` (call failed or interrupted for good) does the same in the background; a
//! waiter killed while waiting is skipped once its entry's deadline passed, and one granted
//! before that holds the lock one lease at most (nobody renews it). A call cut short keeps its
//! entry in `DistMutex::cut_short` so the binding's retry (same token) takes its place back
//! instead of queueing twice. Only such a retry, a waiter coming back and `try_lock` ask whether
//! the lock is already theirs (a GET after the failed `SET NX`): a fresh token's first attempt
//! cannot hold it. Redis 6.2 is enough: no `SET NX GET` or `PEXPIRE GT` (7.0); every writer
//! sets the line's TTL to the same `line_ttl` = 2 × (lock TTL + 1 s), so a refresh only extends
//! the line's life: an attempt that queues always sets it, a release queueing a local waiter
//! only when asked (next bullet). A process using the name with a shorter lease than another's
//! may shorten it: at worst an entry is lost, and its waiter attempts again after its turn's
//! wait (at most a lock TTL), as after a lost wake-up. With
//! `min_replicas_acked` = n a handed-over waiter runs its token-checked renewal + `WAIT n` in one
//! round trip (`Client::eval_acked`) before entering: a pop served to a blocked client does not
//! move that client's replication offset, so WAIT right after the BLPOP could return at once
//! without covering the grant (seen in spec/dist_mutex_handoff_spec.rb); the renewal is a write
//! after the grant, so its acknowledgement covers it. Too few acks: the grant is handed on and
//! `Error::Replication` returned. The pop is `Client::blpop` (which returns the popped
//! element): routed to the grant key's node, ended at its deadline or on interrupt with CLIENT
//! UNBLOCK like every other wait. On a cluster the release probes the next waiter's grant key
//! (pcall EXISTS) before writing the lock: in a slot being migrated that key may already be on
//! the target node, and the script then puts the popped entry back and answers TRYAGAIN with the
//! lock unchanged; off a cluster (ARGV flag from `Client::is_cluster`) the probe is skipped.
//! Mixed versions during a deploy stay correct
//! (an old release deletes the lock without handing over; a new waiter attempts again after the
//! holder's PTTL) but slow; an old string `waiters` mark is replaced by a new waiter's line (the
//! RPUSH is a `pcall`; WRONGTYPE → DEL + RPUSH) and read as "no line" by a new release. Cost, contended (8 workers / 2 processes):
//! 15 commands per section counting those inside scripts (acquire 6: EVALSHA, SET NX, PTTL, TIME,
//! RPUSH, PEXPIRE; BLPOP 1; release 8: EVALSHA, GET, LPOP, TIME, SET lock, SET fence, RPUSH,
//! PEXPIRE; + EXISTS on a cluster; 14, then 10 and 9 with the next bullet's changes), 3 round
//! trips, against 18 and 4 round trips before
//! (pinned by tests/primitives/dist_mutex_commands.rs, with the uncontended lock + unlock's 8).

use crate::client::{int, Client};
use crate::error::Result;
use crate::inbox::Waited;
use crate::interrupt::Interrupt;
use crate::script::ScriptCall;
use std::time::{Duration, Instant};

/// A waiter in a Redis line, as [`await_grant`] needs it.
pub struct Awaiting<'a> {
    pub token: &'a str,
    /// Its line entry: `|@<id>` in it names the client's inbox.
    pub entry: Option<&'a str>,
    /// No later than the entry was queued (by its own attempt or a release).
    pub queued_at: Instant,
    /// Its grant list, for an entry without an inbox.
    pub grant_key: &'a str,
}

/// The grant value that hands over nothing: it wakes the waiter to attempt again at once (an
/// operator resumed a limiter or raised its limit: lua/concurrent_limiter/override.lua). No
/// hold is ever granted as 0 (fencing tokens and slot expiries are positive).
pub const WAKE: i64 = 0;

/// Waits up to `timeout` for the grant of a waiter: from the client's inbox when its entry
/// names it, else by popping its grant list.
pub fn await_grant(
    client: &Client,
    intr: &Interrupt,
    waiter: Awaiting<'_>,
    timeout: Duration,
) -> Result<Waited> {
    let waited = if waiter.entry.is_some_and(|e| e.contains("|@")) {
        let inbox = client.inbox();
        inbox.wait(intr, waiter.token, waiter.queued_at, timeout)?
    } else {
        match wait_grant(client, intr, waiter.grant_key, timeout)? {
            Some(grant) => Waited::Granted(grant),
            None => Waited::TimedOut,
        }
    };
    Ok(match waited {
        Waited::Granted(WAKE) => Waited::Missed,
        other => other,
    })
}

/// Blocks on `grant_key` for at most `timeout`: the fencing token of the lock a release handed
/// to this waiter, or `None` when nothing came. `Client::blpop` routes the pop to the key's node
/// and ends it with CLIENT UNBLOCK when the thread is interrupted.
pub fn wait_grant(
    client: &Client,
    intr: &Interrupt,
    grant_key: &str,
    timeout: Duration,
) -> Result<Option<i64>> {
    client
        .blpop(intr, grant_key, timeout)?
        .map(|fence| int(&fence))
        .transpose()
}

/// `min_replicas_acked` for a handed-over lock: the grant was written by the releaser's
/// connection, and a pop served to a blocked client does not move this client's replication
/// offset, so WAIT alone would not cover it. A token-checked renewal (`renew`, a write issued
/// after the grant) followed by `WAIT wanted` on its connection does. Returns how many replicas
/// acknowledged (0 when the lock was no longer ours).
pub fn ack_grant(
    client: &Client,
    intr: &Interrupt,
    renew: &ScriptCall,
    wanted: u32,
    ack_timeout: Duration,
) -> Result<i64> {
    let (renewed, acked) = client.eval_acked(intr, renew, wanted, ack_timeout)?;
    Ok(if int(&renewed)? == 1 { acked } else { 0 })
}
