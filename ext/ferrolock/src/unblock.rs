//! The argument of the unblocking function that cancels a blocking call (see nogvl.rs).
//!
//! We pass `RB_NOGVL_UBF_ASYNC_SAFE`: without it, a call made by the main thread while it is the
//! only Ruby thread makes Ruby start a helper Ruby thread for that one call (every lock, every
//! round trip of a single-threaded script). With it, Ruby's signal handler reads the main
//! thread's unblocking function and argument without a lock and calls them, on whichever OS
//! thread got the signal, possibly after the blocking region (and the caller's stack frame)
//! is gone. So the argument is not a pointer to the call's stack: it names a slot in a static
//! table (never freed) and the region it was made for. Each Ruby thread keeps one slot; a
//! call for a region that has ended finds another region number (or none) there and does
//! nothing but count itself (`stale_calls`, read by spec/signals_spec.rb).
//! Threads beyond the table's size run without the flag (Ruby then calls the function only
//! under its interrupt lock, which the region's end also takes, so the stack is safe there).

use ferrolock_core::fork::generation;
use ferrolock_core::{ForkLocal, Interrupt};
use std::cell::Cell;
use std::ffi::c_void;
use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{LazyLock, Mutex};

/// Slots: Ruby threads of one process that make blocking ferrolock calls at the same time.
const SLOTS: usize = 4096;
/// Low bits of an argument: the slot; the rest: the region.
const SLOT_BITS: u32 = 16;

struct Slot {
    /// Bumped as each region starts: a call made for an earlier one finds another number.
    region: AtomicUsize,
    /// The live region's interrupt; null between regions.
    current: AtomicPtr<Interrupt>,
    /// Unblocking calls that may be using `current` now: a region ends once there are none.
    busy: AtomicU32,
}

#[allow(clippy::declare_interior_mutable_const)] // only to initialise the table
const FREE_SLOT: Slot = Slot {
    region: AtomicUsize::new(0),
    current: AtomicPtr::new(std::ptr::null_mut()),
    busy: AtomicU32::new(0),
};
static TABLE: [Slot; SLOTS] = [FREE_SLOT; SLOTS];
/// Slots never handed out yet.
static NEXT: AtomicUsize = AtomicUsize::new(0);
/// Slots given back by ended threads of this process. A forked child starts with none: its
/// parent's other threads' slots are not reused there.
static RETURNED: LazyLock<ForkLocal<Mutex<Vec<usize>>>> =
    LazyLock::new(|| ForkLocal::new(Mutex::default));
static STALE_CALLS: AtomicU64 = AtomicU64::new(0);

/// The calling thread's slot, given back as the thread ends.
struct Owned {
    slot: Cell<Option<(usize, u64)>>,
}

impl Drop for Owned {
    fn drop(&mut self) {
        if let Some((index, born)) = self.slot.get() {
            if born == generation() {
                RETURNED
                    .get()
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(index);
            }
        }
    }
}

thread_local! {
    static OWNED: Owned = const { Owned { slot: Cell::new(None) } };
}

/// The calling thread's slot index, taken on its first call (and again in a forked child: a
/// call of the parent may have been using the old one as it forked). None: the table is full.
fn own_slot() -> Option<usize> {
    OWNED
        .try_with(|owned| {
            let now = generation();
            match owned.slot.get() {
                Some((index, born)) if born == now => Some(index),
                _ => {
                    let returned = RETURNED
                        .get()
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .pop();
                    let index = returned.or_else(|| {
                        let next = NEXT.fetch_add(1, Ordering::Relaxed);
                        (next < SLOTS).then_some(next)
                    })?;
                    owned.slot.set(Some((index, now)));
                    Some(index)
                }
            }
        })
        .ok()
        .flatten()
}

/// A blocking region's registration: `arg` is what Ruby passes to [`cancel`]. Dropping it ends
/// the region, waiting for an unblocking call that is using its interrupt.
pub struct Region {
    slot: &'static Slot,
    pub arg: *mut c_void,
}

impl Region {
    /// Registers `intr` for a region; None when this thread has no slot (the table is full).
    pub fn start(intr: &Interrupt) -> Option<Region> {
        let index = own_slot()?;
        let slot = &TABLE[index];
        // Only this thread writes `region` and `current`. Release: a `cancel` that sees this
        // interrupt sees this region's number too (every lock's path: no fence here).
        let region = (slot.region.load(Ordering::Relaxed) + 1) & (usize::MAX >> SLOT_BITS);
        slot.region.store(region, Ordering::Relaxed);
        slot.current.store(
            intr as *const Interrupt as *mut Interrupt,
            Ordering::Release,
        );
        Some(Region {
            slot,
            arg: ((region << SLOT_BITS) | index) as *mut c_void,
        })
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        self.slot
            .current
            .store(std::ptr::null_mut(), Ordering::SeqCst);
        // A call that saw the interrupt finishes with it first (a cancel is a few system calls).
        while self.slot.busy.load(Ordering::SeqCst) > 0 {
            std::hint::spin_loop();
        }
    }
}

/// The unblocking function, for an argument made by [`Region::start`]. Async-signal-safe:
/// atomics only, and `Interrupt::cancel`.
pub unsafe extern "C" fn cancel(arg: *mut c_void) {
    let arg = arg as usize;
    let Some(slot) = TABLE.get(arg & ((1 << SLOT_BITS) - 1)) else {
        return;
    };
    slot.busy.fetch_add(1, Ordering::SeqCst);
    // `current` before `region`: a later region's interrupt comes with its own number (see
    // `start`), so it is never taken for ours.
    let intr = slot.current.load(Ordering::SeqCst);
    if !intr.is_null() && slot.region.load(Ordering::SeqCst) == arg >> SLOT_BITS {
        // SAFETY: the region is live, and cannot end while `busy` counts this call.
        unsafe { &*intr }.cancel();
    } else {
        STALE_CALLS.fetch_add(1, Ordering::Relaxed);
    }
    slot.busy.fetch_sub(1, Ordering::SeqCst);
}

/// Calls of [`cancel`] for a region that had ended, in this process so far.
pub fn stale_calls() -> u64 {
    STALE_CALLS.load(Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_for_an_ended_region_cancels_nothing_and_is_counted() {
        let first = Interrupt::new();
        let region = Region::start(&first).unwrap();
        let old_arg = region.arg;
        unsafe { cancel(old_arg) };
        assert!(first.is_cancelled());
        drop(region);

        let second = Interrupt::new();
        let _region = Region::start(&second).unwrap();
        let stale = stale_calls();
        unsafe { cancel(old_arg) };
        assert!(!second.is_cancelled());
        assert_eq!(stale_calls(), stale + 1);
    }
}
