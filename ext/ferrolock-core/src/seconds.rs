//! Seconds given by a caller, checked before they become a `Duration`, an `Instant` or a
//! millisecond argument to Redis. One documented upper bound holds for every seconds argument:
//! `MAX_SECONDS` (10 years). It keeps `Duration::from_secs_f64` (which panics past ~1.8e19 s),
//! `Instant + Duration` and Redis' `PX` (now + ttl must fit in a signed 64-bit millisecond
//! count) far from their limits, and no real lease or wait comes near it.
//!
//! Two kinds of argument:
//! - a span (`span`): a TTL, a lease, a connect/read timeout, a window. At least 1 ms, since
//!   Redis expiries and leases count in milliseconds and a zero span would be meaningless;
//! - a wait (`wait`, `deadline`): how long a caller may wait. Zero or more; a tiny positive value
//!   simply means one attempt.

use crate::error::{Error, Result};
use std::time::{Duration, Instant};

/// The largest seconds value any argument accepts: 10 years of 365 days.
pub const MAX_SECONDS: u64 = 315_360_000;
/// `MAX_SECONDS` as a Duration.
pub const MAX: Duration = Duration::from_secs(MAX_SECONDS);
/// The shortest span (TTL, lease, timeout) accepted.
pub const MIN_SPAN: Duration = Duration::from_millis(1);

fn out_of_range(arg: &str, expected: &str, secs: f64) -> Error {
    Error::argument(format!(
        "{arg}: must be {expected} and at most {MAX_SECONDS} seconds (10 years), got {}",
        show(secs)
    ))
}

/// A number as a person reads it: 1e30 rather than thirty-one digits.
fn show(secs: f64) -> String {
    if secs != 0.0 && !(1e-3..1e9).contains(&secs.abs()) {
        format!("{secs:e}")
    } else {
        format!("{secs}")
    }
}

/// A TTL/lease/timeout in seconds: finite, at least 0.001 and at most `MAX_SECONDS`.
pub fn span(arg: &str, secs: f64) -> Result<Duration> {
    // NaN is in no range, so it lands here too.
    if !(0.001..=MAX_SECONDS as f64).contains(&secs) {
        return Err(out_of_range(arg, "at least 0.001 (1 ms)", secs));
    }
    check_span(arg, Duration::from_secs_f64(secs))
}

/// A wait in seconds: finite, zero or more and at most `MAX_SECONDS`.
pub fn wait(arg: &str, secs: f64) -> Result<Duration> {
    if !(0.0..=MAX_SECONDS as f64).contains(&secs) {
        return Err(out_of_range(arg, "zero or more", secs));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// `now` plus a wait in seconds. `Instant + Duration` panics on overflow, so the addition is
/// checked even though the bound keeps it far from any platform's limit.
pub fn deadline(arg: &str, secs: f64, now: Instant) -> Result<Instant> {
    let wait = wait(arg, secs)?;
    now.checked_add(wait)
        .ok_or_else(|| out_of_range(arg, "zero or more", secs))
}

/// Checks a span already given as a Duration (core callers): at least 1 ms, at most `MAX`.
pub fn check_span(arg: &str, d: Duration) -> Result<Duration> {
    if d < MIN_SPAN || d > MAX {
        return Err(Error::argument(format!(
            "{arg}: must be at least 0.001 (1 ms) and at most {MAX_SECONDS} seconds (10 years), got {}",
            show(d.as_secs_f64())
        )));
    }
    Ok(d)
}

/// Whole milliseconds of `d` for a Redis argument, saturating instead of wrapping (checked
/// spans are far below the limit; this only guards against a silent wrap).
pub fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_are_inclusive() {
        assert_eq!(span("ttl", 0.001).unwrap(), Duration::from_millis(1));
        assert_eq!(span("ttl", MAX_SECONDS as f64).unwrap(), MAX);
        assert_eq!(wait("timeout", 0.0).unwrap(), Duration::ZERO);
        assert_eq!(wait("timeout", MAX_SECONDS as f64).unwrap(), MAX);
    }

    #[test]
    fn errors_name_the_argument_and_the_bound() {
        let msg = span("lease", 1e30).unwrap_err().to_string();
        assert!(msg.starts_with("lease: "), "{msg}");
        assert!(msg.contains("315360000 seconds (10 years)"), "{msg}");
        assert!(wait("timeout", f64::NAN).is_err());
        assert!(deadline("timeout", -1.0, Instant::now()).is_err());
    }

    #[test]
    fn millis_saturates() {
        assert_eq!(millis(Duration::MAX), u64::MAX);
        assert_eq!(millis(Duration::from_millis(1500)), 1500);
    }
}
