//! When this process last set the Redis line's TTL, so a release queueing a local waiter whose
//! entry that covers skips the PEXPIRE.

use super::*;

/// Whether a write queueing an entry needed until `needed_until` must set the Redis line's TTL
/// (`line_ttl`, the same for every writer of the name): yes unless this process's last setting
/// of it (`refreshed`) keeps the line alive that long.
fn refresh_needed(refreshed: Option<Instant>, needed_until: Instant, line_ttl: Duration) -> bool {
    refreshed.is_none_or(|at| at + line_ttl < needed_until)
}

/// Whether a release of this process queueing an entry needed until `needed_until` must set the
/// Redis line's TTL to `line_ttl` (always when this process has no line for the name: nothing
/// known).
pub(crate) fn line_refresh_needed(
    client_id: usize,
    lock_key: &str,
    needed_until: Instant,
    line_ttl: Duration,
) -> bool {
    let refreshed = lines()
        .0
        .get(&(client_id, lock_key.to_string()))
        .and_then(|l| l.line_refreshed);
    refresh_needed(refreshed, needed_until, line_ttl)
}

/// A script of this process set the Redis line's TTL (or left no line), sent at `sent_at`:
/// remembered while the process has a line for the name.
pub fn line_refreshed(client_id: usize, lock_key: &str, sent_at: Instant) {
    if let Some(line) = lines().0.get_mut(&(client_id, lock_key.to_string())) {
        // Replies of concurrent holders may come back out of order: the latest send counts.
        line.line_refreshed = Some(line.line_refreshed.map_or(sent_at, |t| t.max(sent_at)));
    }
}

/// Tests: forget when the Redis line's TTL was last set, as a line made anew would.
#[doc(hidden)]
pub fn forget_line_refresh(client_id: usize, lock_key: &str) {
    if let Some(line) = lines().0.get_mut(&(client_id, lock_key.to_string())) {
        line.line_refreshed = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_is_refreshed_unless_a_recent_refresh_covers_the_entry() {
        let ttl = Duration::from_secs(62);
        let t = Instant::now();
        // Nothing known: always.
        assert!(refresh_needed(None, t, ttl));
        // Covered up to the line TTL after the last refresh, not a moment beyond.
        assert!(!refresh_needed(Some(t), t + Duration::from_secs(31), ttl));
        assert!(!refresh_needed(Some(t), t + ttl, ttl));
        assert!(refresh_needed(
            Some(t),
            t + ttl + Duration::from_millis(1),
            ttl
        ));
    }
}
