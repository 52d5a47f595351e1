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

/// The TTL reported by a failed attempt, as a wait: a key already gone (-2) is retried at
/// once, one expiring within the millisecond (0) after 1 ms, and only a key without expiry (-1)
/// after `fallback`.
pub fn retry_after(pttl_ms: i64, fallback: Duration) -> Duration {
    match pttl_ms {
        -2 => Duration::ZERO,
        ms if ms >= 0 => Duration::from_millis(ms.max(1) as u64),
        _ => fallback,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_for_the_reported_ttl() {
        let fallback = Duration::from_secs(30);
        assert_eq!(retry_after(250, fallback), Duration::from_millis(250));
        // PTTL 0: the key expires within this millisecond, not "no expiry".
        assert_eq!(retry_after(0, fallback), Duration::from_millis(1));
        assert_eq!(retry_after(-2, fallback), Duration::ZERO);
        assert_eq!(retry_after(-1, fallback), fallback);
    }
}
