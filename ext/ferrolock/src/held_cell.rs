//! What an acquisition handed out (a DistMutex hold, a limiter slot, a DualLock ticket, a
//! message lease), with the process that acquired it. A child made by `fork` inside a held
//! block inherits the Ruby object and leaves the block too, yet the parent still holds (and
//! renews) that lock: the child must never release or mark it (issue 24). `release_once` gives
//! such an inherited item up without a word to Redis.

use std::sync::{Mutex, MutexGuard};

pub struct HeldCell<T> {
    item: Mutex<Option<T>>,
    /// `fork::generation()` when acquired: it changes in every child.
    born: u64,
}

impl<T> HeldCell<T> {
    pub fn new(item: T) -> Self {
        HeldCell {
            item: Mutex::new(Some(item)),
            born: ferrolock_core::fork::generation(),
        }
    }

    /// The item (None once released), whatever a panicking holder left behind.
    pub fn lock(&self) -> MutexGuard<'_, Option<T>> {
        self.item.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `f` with the item taken out when this process acquired it; `f` gives it back
    /// (`Some`) when it did not consume it. True when consumed. For a call made with the GVL
    /// held, so no other Ruby thread sees the cell empty meanwhile.
    pub fn consume_own(&self, f: impl FnOnce(T) -> Option<T>) -> bool {
        if ferrolock_core::fork::generation() != self.born {
            return false;
        }
        let mut item = self.lock();
        let Some(taken) = item.take() else {
            return false;
        };
        match f(taken) {
            None => true,
            Some(back) => {
                *item = Some(back);
                false
            }
        }
    }

    /// Takes the item out when this process acquired it. An item inherited through fork is
    /// taken out and forgotten (never dropped: dropping a lease reaches for this process's
    /// watchdog, and it is the parent's to end); None then, as for an item already released.
    pub fn take_own(&self) -> Option<T> {
        let item = self.lock().take()?;
        if ferrolock_core::fork::generation() == self.born {
            Some(item)
        } else {
            std::mem::forget(item);
            None
        }
    }
}
