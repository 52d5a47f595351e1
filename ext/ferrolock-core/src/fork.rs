//! Fork safety without locks: state that must not cross `fork(2)` (sockets, the lease
//! watchdog) lives in a [`ForkLocal`], which hands a child process a fresh value. The parent's
//! value is leaked in the child on purpose: dropping it would close or TLS-shut-down sockets the
//! parent still uses, and its mutexes may have been held by threads that do not exist here.

use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};
use std::sync::{LazyLock, Once};

static GENERATION: AtomicU64 = AtomicU64::new(0);
static HOOK: Once = Once::new();

extern "C" fn after_fork_in_child() {
    GENERATION.fetch_add(1, Ordering::SeqCst);
}

/// Increments in every child process right after fork (via `pthread_atfork`), so comparing it
/// costs no system call.
pub fn generation() -> u64 {
    HOOK.call_once(|| {
        // SAFETY: registering a plain function without captured state.
        unsafe { libc::pthread_atfork(None, None, Some(after_fork_in_child)) };
    });
    GENERATION.load(Ordering::SeqCst)
}

/// This process's id, asked of the OS once per process (`std::process::id` is a `getpid`
/// system call every time, and token making runs on every lock).
pub fn pid() -> u32 {
    static PID: LazyLock<ForkLocal<u32>> = LazyLock::new(|| ForkLocal::new(std::process::id));
    *PID.get()
}

struct Slot<T> {
    generation: u64,
    value: T,
}

pub struct ForkLocal<T> {
    current: AtomicPtr<Slot<T>>,
    init: fn() -> T,
}

impl<T> ForkLocal<T> {
    pub fn new(init: fn() -> T) -> Self {
        ForkLocal {
            current: AtomicPtr::new(std::ptr::null_mut()),
            init,
        }
    }

    /// The value for this process, created on first use after a fork.
    pub fn get(&self) -> &T {
        let gen = generation();
        let ptr = self.current.load(Ordering::Acquire);
        // SAFETY: slots are only freed in `drop`, which needs `&mut self`.
        if let Some(slot) = unsafe { ptr.as_ref() } {
            if slot.generation == gen {
                return &slot.value;
            }
        }
        let fresh = Box::into_raw(Box::new(Slot {
            generation: gen,
            value: (self.init)(),
        }));
        match self
            .current
            .compare_exchange(ptr, fresh, Ordering::AcqRel, Ordering::Acquire)
        {
            // The old slot (if any) belongs to the parent process: leaked, see module docs.
            Ok(_) => unsafe { &(*fresh).value },
            Err(winner) => {
                // SAFETY: `fresh` was never shared.
                drop(unsafe { Box::from_raw(fresh) });
                // The winner is of this generation (another thread of this process put it).
                unsafe { &(*winner).value }
            }
        }
    }
}

impl<T> Drop for ForkLocal<T> {
    fn drop(&mut self) {
        let ptr = *self.current.get_mut();
        if ptr.is_null() {
            return;
        }
        // SAFETY: we own the slot now.
        let slot = unsafe { Box::from_raw(ptr) };
        if slot.generation != generation() {
            std::mem::forget(slot);
        }
    }
}

// SAFETY: access to the value goes through `&T`; the value itself decides its thread safety.
unsafe impl<T: Send + Sync> Sync for ForkLocal<T> {}
unsafe impl<T: Send + Sync> Send for ForkLocal<T> {}
