//! A DistMutex's or ConcurrentLimiter's grants and releases, with the histogram steps of their
//! waits and holds, counted by the binding as each call returns (issue 41): no Ruby runs per
//! event. The slots are lib/ferrolock/history/counter.rb's (`Counter::SLOTS`); its flush thread
//! drains them into the minute it writes. Atomics only: counting takes no lock and never waits
//! for a drain.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The last histogram step: step 0 is under 1 ms, step n under 2^n ms (Buckets::LAST_WAIT_STEP).
pub const LAST_STEP: usize = 24;
const STEPS: usize = LAST_STEP + 1;
const ACQUIRED: usize = 0;
const RELEASED: usize = 1;
const WAITS: usize = 2;
const HOLDS: usize = WAITS + STEPS;
/// Slots: acquired, released, the wait steps, the hold steps.
pub const SIZE: usize = HOLDS + STEPS;

pub struct Tally {
    slots: [AtomicU64; SIZE],
}

impl Default for Tally {
    fn default() -> Self {
        Self::new()
    }
}

impl Tally {
    pub fn new() -> Self {
        Tally {
            slots: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }

    /// A grant after waiting `waited`.
    pub fn acquired(&self, waited: Duration) {
        self.add(ACQUIRED, WAITS + step(waited));
    }

    /// A release after holding `held`.
    pub fn released(&self, held: Duration) {
        self.add(RELEASED, HOLDS + step(held));
    }

    /// Everything counted since the last drain, and zero from now on; None when nothing was.
    /// A count racing the drain lands in this one or the next, never in both.
    pub fn drain(&self) -> Option<[u64; SIZE]> {
        let counts: [u64; SIZE] = std::array::from_fn(|i| self.slots[i].swap(0, Ordering::Relaxed));
        counts.iter().any(|c| *c > 0).then_some(counts)
    }

    fn add(&self, event: usize, step: usize) {
        // Relaxed: each slot is a counter on its own; the drain needs no order between them.
        self.slots[event].fetch_add(1, Ordering::Relaxed);
        self.slots[step].fetch_add(1, Ordering::Relaxed);
    }
}

/// The histogram step of a wait or hold, as Buckets.wait_step: its whole milliseconds' bit length,
/// at most LAST_STEP.
pub fn step(d: Duration) -> usize {
    let ms = d.as_millis();
    ((u128::BITS - ms.leading_zeros()) as usize).min(LAST_STEP)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_are_the_millisecond_bit_length_capped() {
        assert_eq!(step(Duration::from_micros(999)), 0);
        assert_eq!(step(Duration::from_millis(1)), 1);
        assert_eq!(step(Duration::from_millis(3)), 2);
        assert_eq!(step(Duration::from_millis(4)), 3);
        assert_eq!(step(Duration::from_secs(1)), 10);
        assert_eq!(step(Duration::from_secs(1 << 20)), LAST_STEP);
    }

    #[test]
    fn drain_takes_the_counts_and_starts_again() {
        let t = Tally::new();
        assert!(t.drain().is_none());
        t.acquired(Duration::from_millis(5));
        t.acquired(Duration::ZERO);
        t.released(Duration::from_secs(2));
        let counts = t.drain().expect("counted");
        assert_eq!(counts[ACQUIRED], 2);
        assert_eq!(counts[RELEASED], 1);
        assert_eq!(counts[WAITS], 1);
        assert_eq!(counts[WAITS + 3], 1);
        assert_eq!(counts[HOLDS + 11], 1);
        assert_eq!(counts.iter().sum::<u64>(), 6);
        assert!(t.drain().is_none());
    }

    #[test]
    fn threads_lose_no_count() {
        let t = Tally::new();
        let mut drained = 0;
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| (0..10_000).for_each(|_| t.acquired(Duration::ZERO)));
            }
            for _ in 0..100 {
                drained += t.drain().map_or(0, |c| c[ACQUIRED]);
            }
        });
        drained += t.drain().map_or(0, |c| c[ACQUIRED]);
        assert_eq!(drained, 40_000);
    }
}
