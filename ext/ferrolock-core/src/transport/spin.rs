//! Waiting for a reply by polling the socket for a few microseconds before sleeping in `recv`.
//!
//! A nearby Redis (loopback, same host, same rack) answers in tens of microseconds, but a thread
//! asleep in `recv` takes longer than that to run again once the reply is there: on the CI VM a
//! PING round trip is 59 µs when the reader sleeps and 24 µs when it polls.
//!
//! The budget adapts to the measured round trip: each reply's latency (send to reply read, of a
//! call that was its client's only one in flight) feeds a running average, and a call polls for
//! up to 1.5 times that plus a little, capped by the configured `reply_spin`. A fixed budget
//! would miss every reply on a machine whose round trip is just longer than it. When replies
//! take longer than the cap (a distant Redis), nothing polls: the average is still measured
//! from the blocking reads, so polling resumes if Redis comes closer.
//!
//! Polling costs CPU and can delay other threads, so it is also bounded these ways:
//! - only a call that is the client's ONLY call in flight polls (when several threads wait on
//!   Redis, including in BLPOP, everyone sleeps: no polling under contention);
//! - blocking commands (BLPOP) never poll;
//! - a back-off: after `MISSES_BEFORE_PAUSE` replies in a row that did not arrive within the
//!   budget (a round trip that keeps changing), the next `PAUSE_CALLS` calls do not poll at all.
//!
//! A cap of zero turns it off.

use crate::fork::ForkLocal;
use crate::interrupt::Interrupt;
use crate::transport::poll::poll_fd;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

const MISSES_BEFORE_PAUSE: u32 = 8;
const PAUSE_CALLS: u32 = 1024;

/// Added to 1.5 round trips: the budget's margin for a round trip a bit slower than usual.
const SLACK: Duration = Duration::from_micros(5);

/// A sample counts at most this many times the average (a reply delayed by a Redis stall or a
/// descheduled thread must not switch polling off for long).
const OUTLIER_FACTOR: u64 = 4;

pub struct ReplySpin {
    /// The most one reply is polled for (the configured `reply_spin`).
    cap: Duration,
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
    /// Recent reply latency in ns (an exponentially weighted average, weight 1/8 per reply);
    /// 0 until a first reply is measured.
    latency_ns: AtomicU64,
}

/// Counts one call in flight until dropped.
pub struct InFlight<'a>(&'a AtomicU32);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl ReplySpin {
    pub fn new(cap: Duration) -> ReplySpin {
        ReplySpin {
            cap,
            state: ForkLocal::new(SpinState::default),
        }
    }

    /// The configured cap (`reply_spin`).
    pub fn budget(&self) -> Duration {
        self.cap
    }

    /// How long the next reply is polled for: 1.5 recent round trips plus `SLACK`, at most the
    /// cap; the cap before any reply was measured; zero when replies take longer than the cap.
    pub fn current_budget(&self) -> Duration {
        let latency = Duration::from_nanos(self.state.get().latency_ns.load(Ordering::Relaxed));
        if latency.is_zero() {
            self.cap
        } else if latency > self.cap {
            Duration::ZERO
        } else {
            (latency + latency / 2 + SLACK).min(self.cap)
        }
    }

    /// Records how long a reply took, from its command's send until it was read. Only a call
    /// that was the client's only one in flight counts (others wait behind each other).
    /// Call it inside `enter`'s guard.
    pub fn record(&self, took: Duration) {
        if self.cap.is_zero() {
            return;
        }
        let state = self.state.get();
        if state.in_flight.load(Ordering::Acquire) > 1 {
            return;
        }
        let sample = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
        // Lost updates between racing callers only drop a sample.
        let average = state.latency_ns.load(Ordering::Relaxed);
        let next = if average == 0 {
            sample
        } else {
            let sample = sample.min(average.saturating_mul(OUTLIER_FACTOR));
            average - average / 8 + sample / 8
        };
        state.latency_ns.store(next.max(1), Ordering::Relaxed);
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
        let budget = self.current_budget();
        if budget.is_zero() {
            return;
        }
        let state = self.state.get();
        if state.in_flight.load(Ordering::Acquire) > 1 || state.take_paused() {
            return;
        }
        if poll_until(fd, intr, Instant::now() + budget) {
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
    fn the_budget_follows_the_measured_round_trip_within_the_cap() {
        let spin = ReplySpin::new(Duration::from_micros(200));
        let _call = spin.enter();
        assert_eq!(spin.current_budget(), Duration::from_micros(200));
        spin.record(Duration::from_micros(60));
        assert_eq!(spin.current_budget(), Duration::from_micros(95));
        for _ in 0..100 {
            spin.record(Duration::from_micros(20));
        }
        let budget = spin.current_budget();
        assert!(
            budget >= Duration::from_micros(34) && budget <= Duration::from_micros(37),
            "{budget:?}"
        );
        // One stalled reply moves it a little, not off.
        spin.record(Duration::from_millis(50));
        let budget = spin.current_budget();
        assert!(
            budget > Duration::from_micros(35) && budget < Duration::from_micros(60),
            "{budget:?}"
        );
        // Replies slower than the cap: no polling (the blocking reads keep measuring).
        for _ in 0..100 {
            spin.record(Duration::from_micros(400));
        }
        assert_eq!(spin.current_budget(), Duration::ZERO);
        let (_a, b) = UnixStream::pair().unwrap();
        assert!(
            took(|| spin.wait_readable(b.as_raw_fd(), &Interrupt::new()))
                < Duration::from_micros(150)
        );
        for _ in 0..100 {
            spin.record(Duration::from_micros(30));
        }
        assert!(spin.current_budget() > Duration::ZERO);
    }

    #[test]
    fn only_a_call_alone_in_flight_is_measured() {
        let spin = ReplySpin::new(Duration::from_micros(200));
        let _first = spin.enter();
        let _second = spin.enter();
        spin.record(Duration::from_micros(60));
        assert_eq!(spin.current_budget(), Duration::from_micros(200));
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
