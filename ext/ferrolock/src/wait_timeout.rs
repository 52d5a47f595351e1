//! "Acquire until a deadline", the binding's half (the core's: ferrolock-core's wait_timeout.rs;
//! Ruby's: lib/ferrolock/wait_timeout.rb). Every acquisition that waits (DistMutex#lock,
//! ConcurrentLimiter and RateLimiter acquire, DualLock enter) goes through [`acquire_until`].

use crate::errors::core_error;
use crate::nogvl;
use ferrolock_core::{seconds, wait_timeout, Interrupt};
use magnus::{Error, Ruby};
use std::time::Instant;

/// The moment a `wait_timeout` from Ruby (seconds, zero or more; None: no limit) runs out,
/// fixed once so that retries after an interrupt keep it.
pub fn deadline(ruby: &Ruby, wait_timeout: Option<f64>) -> Result<Option<Instant>, Error> {
    wait_timeout
        .map(|secs| seconds::deadline("wait_timeout", secs, Instant::now()))
        .transpose()
        .map_err(|e| core_error(ruby, e))
}

/// Runs the acquisition `f` GVL-free and interruptible (`nogvl::acquire`; it is repeated after
/// an interrupt, so it must reuse its token) until `deadline` (`wait_timeout::until`: a stalled
/// Redis ends it as `Ferrolock::WaitTimeout::Stalled`). After any error `abandon` runs: the call
/// may have been granted in Redis.
pub fn acquire_until<R>(
    ruby: &Ruby,
    deadline: Option<Instant>,
    f: impl Fn(&Interrupt) -> ferrolock_core::Result<R>,
    abandon: impl FnOnce(),
) -> Result<R, Error> {
    nogvl::acquire(ruby, |intr| wait_timeout::until(deadline, || f(intr)))
        .inspect_err(|_| abandon())
}
