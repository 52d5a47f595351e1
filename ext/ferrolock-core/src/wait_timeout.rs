//! A caller's `wait_timeout` (the Ruby API's one name for "wait at most this long"), the core's
//! half of "acquire until a deadline" (the binding's: ext/ferrolock/src/wait_timeout.rs, Ruby's:
//! lib/ferrolock/wait_timeout.rb). The binding fixes the wait_timeout as a deadline once
//! (`seconds::deadline`; retries after an interrupt keep it) and runs the call inside [`until`].
//!
//! Stall handling lives here (issue 24): without it, a stopped server (SIGSTOP, a frozen VM)
//! holds a `lock(wait_timeout: 0.5)` for the whole `read_timeout`. Inside [`until`] every read
//! and connect on this thread waits at most until the deadline + [`GRACE`] (conn.rs, topology.rs
//! call [`cap`]); a call cut so, past its deadline, ends as `Error::Stalled` (host:port named, as
//! `Error::Connection`), which the primitive reports as its own timeout error. A connection error
//! before the deadline stays `Error::Connection`.
//!
//! A read cut short leaves the connection's protocol state unknown: it fails as
//! `Error::Connection`, so the pool drops that connection (`Error::is_io`). The call may have
//! run in Redis (a lock granted): the binding abandons the token after any error, which
//! releases it in the background (token-checked), and the lease bounds it anyway.
//!
//! A thread-local, not an argument: the cap applies to every connection the call touches
//! (pool checkout, CLIENT UNBLOCK on another connection, redirects) without threading a
//! deadline through each of them; the call runs on the calling thread (rb_nogvl).

use crate::error::{Error, Result};
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

/// Runs `f` until `deadline` (the moment the caller's wait_timeout runs out; None: no limit):
/// this thread's reads and connects end by `deadline` + [`GRACE`], and a connection error once
/// the deadline has passed is `Error::Stalled`. Nested calls keep the earlier cap.
pub fn until<T>(deadline: Option<Instant>, f: impl FnOnce() -> Result<T>) -> Result<T> {
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
    f().map_err(|e| stalled_past(deadline, e))
}

/// `e` as `Error::Stalled` when it is a connection error that came once `deadline` had passed.
fn stalled_past(deadline: Option<Instant>, e: Error) -> Error {
    match e {
        Error::Connection { addr, detail } if deadline.is_some_and(|d| Instant::now() >= d) => {
            Error::Stalled { addr, detail }
        }
        e => e,
    }
}

/// `wait` shortened to what is left before this thread's cap (unchanged without one).
pub(crate) fn cap(wait: Duration) -> Duration {
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
        until(Some(deadline), || {
            assert!(cap(long) <= Duration::from_millis(350));
            until(None, || {
                assert!(cap(long) <= Duration::from_millis(350));
                Ok(())
            })
        })
        .unwrap();
        assert_eq!(cap(long), long);
    }

    #[test]
    fn a_passed_deadline_leaves_the_shortest_wait() {
        let past = Instant::now() - Duration::from_secs(1);
        until(Some(past), || {
            assert_eq!(cap(Duration::from_secs(5)), SHORTEST);
            Ok(())
        })
        .unwrap();
    }

    #[test]
    fn a_connection_error_past_the_deadline_is_a_stall() {
        let cut = || Err::<(), _>(Error::connection("127.0.0.1:1", "timed out"));
        let past = Instant::now() - Duration::from_millis(1);
        let future = Instant::now() + Duration::from_secs(60);
        assert!(matches!(until(Some(past), cut), Err(Error::Stalled { .. })));
        assert!(matches!(
            until(Some(future), cut),
            Err(Error::Connection { .. })
        ));
        assert!(matches!(until(None, cut), Err(Error::Connection { .. })));
        let other = || Err::<(), _>(Error::Redis("ERR".into()));
        assert!(matches!(until(Some(past), other), Err(Error::Redis(_))));
    }
}
