//! Why a held lease was lost, for `LockLost`'s message. An operator's force release
//! (admin.rs) leaves a tombstone, `<ns>:{name}:forced:<token>`, for TOMBSTONE_TTL; without
//! one, the lock key holding another token means another owner took it after the lease ran
//! out, and an empty one that the lease simply ran out.
//!
//! Only messages depend on this: a lookup that fails (Redis gone, interrupted) gives the
//! answer that blames nobody.

use crate::client::Client;
use crate::error::Result;
use crate::interrupt::Interrupt;
use redis::Value;
use std::time::Duration;

/// How long a force release is remembered. A holder hears of its loss at its next renewal
/// (a third of its lease) but raises LockLost only when its block ends: an hour covers
/// the jobs an operator would release by hand without keeping a key for long.
pub const TOMBSTONE_TTL: Duration = Duration::from_secs(3600);

/// The tombstone's key part, followed by the released token.
const FORCED_PART: &str = "forced:";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    ForceReleased,
    TakenByAnother,
    Expired,
    Unknown,
}

impl Reason {
    pub fn text(self) -> &'static str {
        match self {
            Reason::ForceReleased => {
                "an operator force-released it (ferrolock release / the Web tab's Locks page)"
            }
            Reason::TakenByAnother => "its lease expired without renewal and another owner took it",
            Reason::Expired => {
                "its lease expired without renewal (the process stalled or Redis was unreachable)"
            }
            Reason::Unknown => "it expired or was taken by another owner",
        }
    }
}

/// `SET <tombstone> 1 PX <TOMBSTONE_TTL>`: the force release of `token` on `name`.
pub fn mark_force_released(
    client: &Client,
    intr: &Interrupt,
    name: &str,
    token: &str,
) -> Result<()> {
    let cmd = [
        b"SET".to_vec(),
        tombstone_key(client, name, token)?.into_bytes(),
        b"1".to_vec(),
        b"PX".to_vec(),
        TOMBSTONE_TTL.as_millis().to_string().into_bytes(),
    ];
    client.command(intr, &cmd).map(|_| ())
}

/// Why `token`'s hold on `name` is gone. `holder_key`: the key naming the current owner (a
/// lock's), or None for a limiter (whose slots have no single owner to compare with).
pub fn why_lost(
    client: &Client,
    intr: &Interrupt,
    name: &str,
    token: &str,
    holder_key: Option<&str>,
) -> Reason {
    look_up(client, intr, name, token, holder_key).unwrap_or(Reason::Unknown)
}

fn look_up(
    client: &Client,
    intr: &Interrupt,
    name: &str,
    token: &str,
    holder_key: Option<&str>,
) -> Result<Reason> {
    let exists = [
        b"EXISTS".to_vec(),
        tombstone_key(client, name, token)?.into_bytes(),
    ];
    if matches!(client.command(intr, &exists)?, Value::Int(1)) {
        return Ok(Reason::ForceReleased);
    }
    let Some(key) = holder_key else {
        return Ok(Reason::Expired);
    };
    let get = [b"GET".to_vec(), key.as_bytes().to_vec()];
    Ok(match client.command(intr, &get)? {
        Value::BulkString(owner) if owner != token.as_bytes() => Reason::TakenByAnother,
        Value::Nil => Reason::Expired,
        _ => Reason::Unknown,
    })
}

fn tombstone_key(client: &Client, name: &str, token: &str) -> Result<String> {
    Ok(client.keys(name)?.part(&format!("{FORCED_PART}{token}")))
}
