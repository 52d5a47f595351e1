//! Direct hand-off: a release hands the lock (a slot) to the first waiter and tells it so in
//! the same script, with the grant (a fencing token, a slot's expiry), so the waiter enters
//! without another attempt. The grant goes to the client's grant inbox when the waiter's line
//! entry names one (inbox.rs: a PUBLISH, nothing to pop), else to the waiter's own grant list,
//! which it pops (see lua/dist_mutex/release.lua).

use super::inbox::Waited;
use crate::client::{int, Client};
use crate::error::Result;
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

/// Waits up to `timeout` for the grant of a waiter: from the client's inbox when its entry
/// names it, else by popping its grant list.
pub fn await_grant(
    client: &Client,
    intr: &Interrupt,
    waiter: Awaiting<'_>,
    timeout: Duration,
) -> Result<Waited> {
    if waiter.entry.is_some_and(|e| e.contains("|@")) {
        let inbox = client.inbox();
        return inbox.wait(intr, waiter.token, waiter.queued_at, timeout);
    }
    Ok(match wait_grant(client, intr, waiter.grant_key, timeout)? {
        Some(grant) => Waited::Granted(grant),
        None => Waited::TimedOut,
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
