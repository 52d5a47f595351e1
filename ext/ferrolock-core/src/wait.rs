//! Waiting for a turn without polling: block on the primitive's signal list (a release pushes
//! to it) for at most `retry_in` (the holder's remaining TTL, which bounds a lost wake-up), or
//! sleep locally when nothing will ever signal (expiry-only locks).

use crate::client::Client;
use crate::error::Result;
use crate::interrupt::Interrupt;
use std::time::{Duration, Instant};

/// Waits, then returns true to try again; false when `deadline` has passed.
pub fn wait_turn(
    client: &Client,
    intr: &Interrupt,
    signal_key: Option<&str>,
    retry_in: Duration,
    deadline: Option<Instant>,
) -> Result<bool> {
    let mut wait = retry_in;
    if let Some(deadline) = deadline {
        let now = Instant::now();
        if now >= deadline {
            return Ok(false);
        }
        wait = wait.min(deadline - now);
    }
    match signal_key {
        Some(key) => {
            client.blpop(intr, key, wait)?;
        }
        None => intr.sleep(wait)?,
    }
    Ok(true)
}

/// The TTL reported by a failed attempt, as a wait: a key without expiry (-1) or already gone
/// (-2) is retried after `fallback`.
pub fn retry_after(pttl_ms: i64, fallback: Duration) -> Duration {
    if pttl_ms > 0 {
        Duration::from_millis(pttl_ms as u64)
    } else if pttl_ms == -2 {
        Duration::ZERO
    } else {
        fallback
    }
}
