//! `Ferrolock::Native::Tally`: a History::Counter's counts of its DistMutex's or
//! ConcurrentLimiter's grants and releases (ferrolock-core's tally.rs). The primitive's `lock` /
//! `acquire` and `unlock` / `release` take one (or nil) and count in it as they return, timing the
//! wait and the hold themselves; the flush thread drains it (lib/ferrolock/history/counter.rb).

use crate::guard;
use ferrolock_core::Tally;
use magnus::{function, method, prelude::*, Error, RModule, Ruby, TryConvert, Value};
use std::time::Instant;

#[magnus::wrap(class = "Ferrolock::Native::Tally", free_immediately, size)]
pub struct RbTally(Tally);

impl RbTally {
    fn new(_ruby: &Ruby) -> Result<Self, Error> {
        Ok(RbTally(Tally::new()))
    }

    /// The counts since the last drain (Counter::SLOTS' order), or nil when there are none.
    fn drain(&self) -> Option<Vec<u64>> {
        self.0.drain().map(|counts| counts.to_vec())
    }

    /// Counts a grant of a call that started at `started`, now; returns now (when it was granted).
    pub fn acquired(tally: Option<&RbTally>, started: Option<Instant>) -> Instant {
        let now = Instant::now();
        if let (Some(tally), Some(started)) = (tally, started) {
            tally.0.acquired(now.saturating_duration_since(started));
        }
        now
    }

    /// Counts the release of what was granted at `granted`.
    pub fn released(tally: Option<&RbTally>, granted: Instant) {
        if let Some(tally) = tally {
            tally.0.released(granted.elapsed());
        }
    }
}

/// When a call counting in `tally` started (nil: not counted, no clock read).
pub fn started(tally: Option<&RbTally>) -> Option<Instant> {
    tally.map(|_| Instant::now())
}

/// A native call's arguments: the one it always takes and the tally to count in (optional, nil:
/// not counted; History passes one only when it alone listens, see lib/ferrolock/history/counter.rb).
pub fn with_tally<'a, A: TryConvert>(
    ruby: &Ruby,
    args: &[Value],
) -> Result<(A, Option<&'a RbTally>), Error> {
    // By hand: magnus' scan_args formats its argument spec on every call, and this is every
    // lock's and release's path.
    match *args {
        [first] => Ok((A::try_convert(first)?, None)),
        [first, tally] => Ok((
            A::try_convert(first)?,
            Option::<&RbTally>::try_convert(tally)?,
        )),
        _ => Err(Error::new(
            ruby.exception_arg_error(),
            format!(
                "wrong number of arguments (given {}, expected 1..2)",
                args.len()
            ),
        )),
    }
}

pub fn init(ruby: &Ruby, native: RModule) -> Result<(), Error> {
    let class = native.define_class("Tally", ruby.class_object())?;
    class.define_singleton_method("new", function!(guard::f0(RbTally::new), 0))?;
    class.define_method("drain", method!(guard::plain1(RbTally::drain), 0))?;
    Ok(())
}
