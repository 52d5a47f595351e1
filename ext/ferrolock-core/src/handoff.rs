//! Direct hand-off: a waiter blocks on its own grant list, which a release fills with the
//! fencing token of the lock it has just handed to that waiter (see lua/dist_mutex/release.lua).
//! The popped value is the grant, so the waiter enters without another attempt.

use crate::client::{int, Client};
use crate::error::{Error, Result};
use crate::interrupt::Interrupt;
use crate::script::ScriptCall;
use redis::Value;
use std::time::Duration;

/// Blocks on `grant_key` for at most `timeout`: the fencing token of the lock a release handed
/// to this waiter, or `None` when nothing came.
pub fn wait_grant(
    client: &Client,
    intr: &Interrupt,
    grant_key: &str,
    timeout: Duration,
) -> Result<Option<i64>> {
    let packed = blpop(grant_key, timeout);
    let popped = client.with_conn(intr, |c| {
        popped_fence(c.request_blocking(intr, &packed, timeout, None)?)
    });
    match popped {
        // A cluster node that does not own the key: pop through the routed client instead,
        // in slices the read timeout allows (the caller's loop comes back for the rest).
        Err(e) if crate::topology::Retry::of(&e).is_some() => {
            let slice = timeout.min(client.read_timeout() / 2);
            let args = [
                b"BLPOP".to_vec(),
                grant_key.as_bytes().to_vec(),
                secs(slice).into_bytes(),
            ];
            popped_fence(client.command(intr, &args)?)
        }
        other => other,
    }
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

fn blpop(key: &str, timeout: Duration) -> Vec<u8> {
    redis::cmd("BLPOP")
        .arg(key)
        .arg(secs(timeout))
        .get_packed_command()
}

/// BLPOP 0 would block forever; Redis takes fractional seconds since 6.0.
fn secs(timeout: Duration) -> String {
    format!("{:.3}", timeout.as_secs_f64().max(0.001))
}

/// BLPOP's reply: nil (timed out) or [key, fencing token].
fn popped_fence(reply: Value) -> Result<Option<i64>> {
    match reply {
        Value::Nil => Ok(None),
        Value::Array(mut kv) if kv.len() == 2 => int(&kv.pop().expect("two items")).map(Some),
        other => Err(Error::Redis(format!("BLPOP: unexpected reply {other:?}"))),
    }
}
