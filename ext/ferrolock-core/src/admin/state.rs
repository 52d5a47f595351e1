//! `state(kind, name)`: the one entry for Admin's reads; each kind's primitive reads its own keys
//! (crate::inspect).

use crate::client::Client;
use crate::error::{Error, Result};
use crate::inspect::Record;
use crate::interrupt::Interrupt;

/// How many of a limits_concurrency key's blocked jobs a state names.
pub const BLOCKED_SHOWN: u32 = 10;

/// The state of what `kind` keeps under `name`, or None when nothing is there.
pub fn state(client: &Client, intr: &Interrupt, kind: &str, name: &str) -> Result<Option<Record>> {
    Ok(match kind {
        "dist_mutex" => {
            crate::dist_mutex::inspect::inspect(client, intr, name)?.map(|s| s.record())
        }
        "dual_lock" => crate::dual_lock::inspect::inspect(client, intr, name)?.map(|s| s.record()),
        "concurrent_limiter" => {
            crate::concurrent_limiter::inspect::inspect(client, intr, name)?.map(|s| s.record())
        }
        "limits_concurrency" => {
            crate::job_concurrency::inspect::inspect(client, intr, name, BLOCKED_SHOWN)?
                .map(|s| s.record())
        }
        "shoryuken_marker" => {
            crate::message_lock::inspect::inspect(client, intr, name)?.map(|s| s.record())
        }
        "unique_lock" => {
            crate::unique_lock::inspect::inspect(client, intr, name)?.map(|s| s.record())
        }
        _ => {
            return Err(Error::argument(format!(
                "kind: must be one of {} (got {kind:?})",
                super::layout::KINDS
                    .iter()
                    .map(|k| k.kind)
                    .collect::<Vec<_>>()
                    .join(", ")
            )))
        }
    })
}
