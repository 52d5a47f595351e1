//! Releases of this process that Redis has not answered yet, which the caller already treats
//! as done:
//! - a `DistMutex#sleep`'s: the sleeping thread makes its release and its wait in one blocking
//!   call, so Ruby shows it asleep (`Thread#stop?`) while the release is still on its way;
//! - an abandoned acquisition's (`Timeout.timeout` or `Thread#raise` cut the wait short): its
//!   line entry, or a hold handed to it meanwhile, is given back from the watchdog thread
//!   (`lease::release_in_background`) while the caller has already been raised into.
//!
//! With Ruby's Mutex, a thread seen asleep in `sleep` no longer holds the lock, and an
//! interrupted `lock` leaves nothing behind: once its holder unlocks, `try_lock` succeeds.
//! `locked?`, `try_lock` (a limiter's `status`, a DualLock's `enter` and `state`) in this process
//! keep that true by first waiting for the unanswered releases of their lock (one round trip,
//! bounded by read_timeout like any release; a background release counts as answered after its
//! first try).

use crate::error::Result;
use crate::fork::ForkLocal;
use crate::interrupt::Interrupt;
use std::collections::HashMap;
use std::sync::{Condvar, LazyLock, Mutex, MutexGuard};
use std::time::Duration;

/// (client identity, lock key).
type Key = (usize, String);

#[derive(Default)]
struct InFlight {
    count: Mutex<HashMap<Key, usize>>,
    done: Condvar,
}

/// Per process: a forked child has no thread of its parent's releases.
static IN_FLIGHT: LazyLock<ForkLocal<InFlight>> =
    LazyLock::new(|| ForkLocal::new(InFlight::default));

fn in_flight() -> &'static InFlight {
    IN_FLIGHT.get()
}

fn counts() -> MutexGuard<'static, HashMap<Key, usize>> {
    in_flight().count.lock().unwrap_or_else(|e| e.into_inner())
}

/// One release in flight; dropping it (once the release was answered) ends it.
pub struct Announced {
    key: Key,
}

/// Announces a release of `lock_key` before its caller can see it as done.
pub fn announce(client_id: usize, lock_key: &str) -> Announced {
    let key = (client_id, lock_key.to_string());
    *counts().entry(key.clone()).or_insert(0) += 1;
    Announced { key }
}

impl Drop for Announced {
    fn drop(&mut self) {
        let mut counts = counts();
        if let Some(n) = counts.get_mut(&self.key) {
            *n -= 1;
            if *n == 0 {
                counts.remove(&self.key);
            }
        }
        drop(counts);
        in_flight().done.notify_all();
    }
}

/// Waits until no release of `lock_key` is in flight, or `intr` is cancelled.
pub fn wait_answered(client_id: usize, lock_key: &str, intr: &Interrupt) -> Result<()> {
    let mut counts = counts();
    // Nothing in flight (the usual case, and every DualLock arrival's): no key made.
    if counts.is_empty() {
        return Ok(());
    }
    let key = (client_id, lock_key.to_string());
    loop {
        if !counts.contains_key(&key) {
            return Ok(());
        }
        intr.check()?;
        // A cancel cannot notify a Condvar (it may run in a signal handler): poll for it.
        counts = in_flight()
            .done
            .wait_timeout(counts, Duration::from_millis(5))
            .unwrap_or_else(|e| e.into_inner())
            .0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn waits_for_announced_releases_of_its_own_lock_only() {
        let announced = announce(1, "unanswered-releases:a");
        // Another lock, or the same key through another client: no wait.
        wait_answered(1, "unanswered-releases:b", &Interrupt::new()).unwrap();
        wait_answered(2, "unanswered-releases:a", &Interrupt::new()).unwrap();
        let started = Instant::now();
        let answered = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            drop(announced);
        });
        wait_answered(1, "unanswered-releases:a", &Interrupt::new()).unwrap();
        assert!(started.elapsed() >= Duration::from_millis(50));
        answered.join().unwrap();
    }

    #[test]
    fn a_cancelled_wait_ends_interrupted() {
        let _announced = announce(3, "unanswered-releases:c");
        let intr = Interrupt::new();
        intr.cancel();
        assert!(matches!(
            wait_answered(3, "unanswered-releases:c", &intr),
            Err(crate::error::Error::Interrupted)
        ));
    }
}
