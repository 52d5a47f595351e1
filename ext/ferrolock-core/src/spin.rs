//! Waiting for a reply by polling the socket for a few microseconds before sleeping in `recv`.
//!
//! A nearby Redis (loopback, same host, same rack) answers in tens of microseconds, but a thread
//! asleep in `recv` takes longer than that to run again once the reply is there: on the CI VM a
//! PING round trip is 59 µs when the reader sleeps and 24 µs when it polls. Polling costs CPU
//! and can delay other threads, so it is bounded four ways:
//! - only a call that is the client's ONLY call in flight polls (when several threads wait on
//!   Redis, including in BLPOP, everyone sleeps: no polling under contention);
//! - a time budget per reply, then the usual blocking read;
//! - blocking commands (BLPOP) never poll;
//! - a back-off: after `MISSES_BEFORE_PAUSE` replies in a row that did not arrive within the
//!   budget (a distant Redis), the next `PAUSE_CALLS` calls do not poll at all.
//!
//! A budget of zero turns it off.

use crate::conn::poll_fd;
use crate::fork::ForkLocal;
use crate::interrupt::Interrupt;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

const MISSES_BEFORE_PAUSE: u32 = 8;
const PAUSE_CALLS: u32 = 1024;

pub struct ReplySpin {
    budget: Duration,
    /// Per process: a child forked while the parent had calls in flight starts from zero.
    state: ForkLocal<SpinState>,
}

#[derive(Default)]
struct SpinState {
    /// Calls of this client waiting on Redis right now (blocking ones included).
    in_flight: AtomicU32,
    /// Polls in a row that ended without a reply.
    misses: AtomicU32,
    /// Calls left that skip polling after too many misses.
    paused: AtomicU32,
}

/// Counts one call in flight until dropped.
pub struct InFlight<'a>(&'a AtomicU32);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl ReplySpin {
    pub fn new(budget: Duration) -> ReplySpin {
        ReplySpin {
            budget,
            state: ForkLocal::new(SpinState::default),
        }
    }

    pub fn budget(&self) -> Duration {
        self.budget
    }

    /// Marks a call as waiting on Redis, for as long as the guard lives.
    pub fn enter(&self) -> InFlight<'_> {
        let in_flight = &self.state.get().in_flight;
        in_flight.fetch_add(1, Ordering::AcqRel);
        InFlight(in_flight)
    }

    /// Polls `fd` until it is readable, the call is cancelled or the budget is spent; the caller
    /// then reads as usual (at once when the reply is there). Never reads or fails itself.
    /// Call it inside `enter`'s guard.
    pub fn wait_readable(&self, fd: RawFd, intr: &Interrupt) {
        if self.budget.is_zero() {
            return;
        }
        let state = self.state.get();
        if state.in_flight.load(Ordering::Acquire) > 1 || state.take_paused() {
            return;
        }
        if poll_until(fd, intr, Instant::now() + self.budget) {
            state.misses.store(0, Ordering::Relaxed);
        } else if state.misses.fetch_add(1, Ordering::Relaxed) + 1 >= MISSES_BEFORE_PAUSE {
            state.misses.store(0, Ordering::Relaxed);
            state.paused.store(PAUSE_CALLS, Ordering::Relaxed);
        }
    }
}

impl SpinState {
    /// True (and one less to skip) while polling is paused.
    fn take_paused(&self) -> bool {
        self.paused
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
            .is_ok()
    }
}

/// True when `fd` became readable (data, EOF or an error: the read that follows tells which).
fn poll_until(fd: RawFd, intr: &Interrupt, deadline: Instant) -> bool {
    loop {
        // Readable, or poll failed: either way the read that follows reports it.
        if poll_fd(fd, libc::POLLIN, 0).unwrap_or(true) {
            return true;
        }
        if intr.is_cancelled() || Instant::now() >= deadline {
            return false;
        }
        std::hint::spin_loop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::fd::AsRawFd;
    use std::os::unix::net::UnixStream;

    fn took(f: impl FnOnce()) -> Duration {
        let started = Instant::now();
        f();
        started.elapsed()
    }

    #[test]
    fn returns_once_readable_and_gives_up_after_the_budget() {
        let (mut a, b) = UnixStream::pair().unwrap();
        let spin = ReplySpin::new(Duration::from_millis(20));
        let intr = Interrupt::new();
        let _call = spin.enter();
        assert!(took(|| spin.wait_readable(b.as_raw_fd(), &intr)) >= Duration::from_millis(20));
        a.write_all(b"+PONG\r\n").unwrap();
        assert!(took(|| spin.wait_readable(b.as_raw_fd(), &intr)) < Duration::from_millis(20));
    }

    #[test]
    fn only_the_one_call_in_flight_polls() {
        let (_a, b) = UnixStream::pair().unwrap();
        let spin = ReplySpin::new(Duration::from_millis(20));
        let intr = Interrupt::new();
        let _first = spin.enter();
        {
            let _second = spin.enter();
            assert!(took(|| spin.wait_readable(b.as_raw_fd(), &intr)) < Duration::from_millis(5));
        }
        assert!(took(|| spin.wait_readable(b.as_raw_fd(), &intr)) >= Duration::from_millis(20));
    }

    #[test]
    fn pauses_after_repeated_misses_and_stops_when_cancelled() {
        let (_a, b) = UnixStream::pair().unwrap();
        let spin = ReplySpin::new(Duration::from_micros(200));
        let intr = Interrupt::new();
        let _call = spin.enter();
        for _ in 0..MISSES_BEFORE_PAUSE {
            spin.wait_readable(b.as_raw_fd(), &intr);
        }
        let paused = &spin.state.get().paused;
        assert_eq!(paused.load(Ordering::Relaxed), PAUSE_CALLS);
        spin.wait_readable(b.as_raw_fd(), &intr);
        assert_eq!(paused.load(Ordering::Relaxed), PAUSE_CALLS - 1);

        let long = ReplySpin::new(Duration::from_secs(10));
        let _long_call = long.enter();
        intr.cancel();
        assert!(took(|| long.wait_readable(b.as_raw_fd(), &intr)) < Duration::from_secs(1));
    }

    #[test]
    fn a_zero_budget_never_polls() {
        let (_a, b) = UnixStream::pair().unwrap();
        let spin = ReplySpin::new(Duration::ZERO);
        let _call = spin.enter();
        let waited = took(|| spin.wait_readable(b.as_raw_fd(), &Interrupt::new()));
        assert!(waited < Duration::from_millis(5));
        assert_eq!(spin.state.get().misses.load(Ordering::Relaxed), 0);
    }
}
