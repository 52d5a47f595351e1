//! `min_replicas_acked`: an acquisition that must reach n replicas before its caller enters.
//! Redis replicates asynchronously, so a failover can lose a grant the old primary acknowledged;
//! `WAIT n timeout` right after the acquisition script (same connection, same round trip)
//! narrows that window to grants that reached fewer than n replicas, which are given back and
//! reported as `Error::Replication`. This is not consensus: a replica that acknowledged may
//! still not be the one promoted.

use crate::client::Client;
use crate::error::{Error, Result};
use crate::interrupt::Interrupt;
use crate::script::ScriptCall;
use redis::Value;
use std::time::Duration;

/// The largest `min_replicas_acked` accepted (a bound for validation, far above real setups).
pub const MAX_REPLICAS_ACKED: u32 = 100;

/// WAIT never waits less than this: a replica on the same host acknowledges in well under 1 ms.
const MIN_ACK_TIMEOUT: Duration = Duration::from_millis(10);

/// Checks a `min_replicas_acked` value coming from a binding.
pub fn check(n: i64) -> Result<u32> {
    u32::try_from(n)
        .ok()
        .filter(|n| *n <= MAX_REPLICAS_ACKED)
        .ok_or_else(|| {
            Error::argument(format!(
                "min_replicas_acked: must be an Integer from 0 to {MAX_REPLICAS_ACKED}, got {n}"
            ))
        })
}

/// How long WAIT may wait for the acknowledgements: a third of the lease (the same budget as a
/// renewal tick, so a granted lease is never half gone before its holder enters) and half the
/// client's read_timeout (the round trip must answer before the read gives up on it).
pub fn ack_timeout(client: &Client, ttl: Duration) -> Duration {
    (ttl / 3)
        .min(client.read_timeout() / 2)
        .max(MIN_ACK_TIMEOUT)
}

/// Runs an acquisition script. With `wanted` 0 this is plain `eval` (no extra cost); otherwise
/// the script and `WAIT wanted timeout` go in one round trip. Returns the script's reply and how
/// many replicas acknowledged (`u32::MAX` as i64 when none were asked for).
pub fn eval_grant(
    client: &Client,
    intr: &Interrupt,
    call: &ScriptCall,
    wanted: u32,
    ttl: Duration,
) -> Result<(Value, i64)> {
    if wanted == 0 {
        return Ok((client.eval(intr, call)?, i64::from(u32::MAX)));
    }
    client.eval_acked(intr, call, wanted, ack_timeout(client, ttl))
}

/// A grant that reached too few replicas: gives it back (token-checked `release`; a release
/// Redis does not answer goes to the watchdog) and returns the error to report.
pub fn refuse(
    client: &Client,
    intr: &Interrupt,
    release: ScriptCall,
    ttl: Duration,
    wanted: u32,
    acked: i64,
) -> Error {
    // The error that matters is the missing acknowledgement; a failed release is retried by
    // the watchdog and otherwise ends with the lease.
    let _ = crate::lease::release_now(client, intr, release, ttl);
    Error::Replication {
        addr: client.display_addr(),
        wanted,
        acked,
    }
}
