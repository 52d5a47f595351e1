//! A caller's timeout bounds its call even when Redis stalls (issue 24): without this, a
//! stopped server (SIGSTOP, a frozen VM) holds a `lock(timeout: 0.5)` for the whole
//! `read_timeout`. The binding runs a call that has a deadline inside [`bounded`]; every read
//! and connect on this thread meanwhile waits at most until the deadline + [`GRACE`] (conn.rs).
//!
//! A read cut short leaves the connection's protocol state unknown: it fails as
//! `Error::Connection`, so the pool drops that connection (`Error::is_io`). The call may have
//! run in Redis (a lock granted): the binding abandons the token after any error, which
//! releases it in the background (token-checked), and the lease bounds it anyway.
//!
//! A thread-local, not an argument: the cap applies to every connection the call touches
//! (pool checkout, CLIENT UNBLOCK on another connection, redirects) without threading a
//! deadline through each of them; the call runs on the calling thread (rb_nogvl).

use std::cell::Cell;
use std::time::{Duration, Instant};

/// Time past the caller's deadline that a call still gets: a wait that ends at its deadline
/// still has round trips to make (CLIENT UNBLOCK's reply, leaving the line), which a healthy
/// Redis answers well within this.
pub const GRACE: Duration = Duration::from_millis(250);

/// The shortest wait a capped read gets (a zero socket timeout would mean "none").
const SHORTEST: Duration = Duration::from_millis(1);

thread_local! {
    static CAP: Cell<Option<Instant>> = const { Cell::new(None) };
}

/// Runs `f` with this thread's reads and connects ending by `deadline` + [`GRACE`] (no cap for
/// None). Nested calls keep the earlier cap.
pub fn bounded<R>(deadline: Option<Instant>, f: impl FnOnce() -> R) -> R {
    struct Restore(Option<Instant>);
    impl Drop for Restore {
        fn drop(&mut self) {
            CAP.with(|c| c.set(self.0));
        }
    }
    let before = CAP.with(Cell::get);
    let cap = match (before, deadline.map(|d| d + GRACE)) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    CAP.with(|c| c.set(cap));
    let _restore = Restore(before);
    f()
}

/// `wait` shortened to what is left before this thread's cap (unchanged without one).
pub fn cap(wait: Duration) -> Duration {
    match CAP.with(Cell::get) {
        None => wait,
        Some(at) => wait
            .min(at.saturating_duration_since(Instant::now()))
            .max(SHORTEST),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_only_inside_and_restores() {
        let long = Duration::from_secs(5);
        assert_eq!(cap(long), long);
        let deadline = Instant::now() + Duration::from_millis(100);
        bounded(Some(deadline), || {
            assert!(cap(long) <= Duration::from_millis(350));
            bounded(None, || assert!(cap(long) <= Duration::from_millis(350)));
        });
        assert_eq!(cap(long), long);
    }

    #[test]
    fn a_passed_deadline_leaves_the_shortest_wait() {
        let past = Instant::now() - Duration::from_secs(1);
        bounded(Some(past), || {
            assert_eq!(cap(Duration::from_secs(5)), SHORTEST)
        });
    }
}
