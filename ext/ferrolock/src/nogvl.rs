//! Runs core calls without the GVL, with an unblocking function that cancels them, so other
//! Ruby threads run meanwhile and Thread#kill / Thread#raise / Timeout end a blocked call.
//! Panics are caught in the trampoline and raised as `Ferrolock::Error` once the GVL is back.

use crate::errors::{core_error, ferrolock_error};
use ferrolock_core::{Error as CoreError, Interrupt};
use magnus::{Error, Ruby};
use std::ffi::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};

struct Call<'a, F, R> {
    f: &'a F,
    intr: *const Interrupt,
    out: Option<std::thread::Result<R>>,
}

unsafe extern "C" fn trampoline<F, R>(data: *mut c_void) -> *mut c_void
where
    F: Fn(&Interrupt) -> R,
{
    // SAFETY: `data` is the `Call` on `without_gvl`'s stack, alive for this whole call.
    let call = unsafe { &mut *(data as *mut Call<'_, F, R>) };
    let intr = unsafe { &*call.intr };
    call.out = Some(catch_unwind(AssertUnwindSafe(|| (call.f)(intr))));
    std::ptr::null_mut()
}

unsafe extern "C" fn unblock(data: *mut c_void) {
    // SAFETY: `data` is the `Interrupt` on `without_gvl`'s stack; Ruby calls this only while
    // the blocking region (and so that stack frame) is live.
    unsafe { &*(data as *const Interrupt) }.cancel();
}

/// `None` when Ruby had an interrupt pending and did not run `f` at all.
fn without_gvl<F, R>(f: &F) -> Option<std::thread::Result<R>>
where
    F: Fn(&Interrupt) -> R,
{
    let intr = Interrupt::new();
    let mut call = Call {
        f,
        intr: &intr,
        out: None,
    };
    // INTR_FAIL: return instead of raising when interrupted, so Ruby never longjmps through
    // the Rust frames here (pending interrupts are run by `thread_check_ints` afterwards).
    // UBF_ASYNC_SAFE: `Interrupt::cancel` is async-signal-safe; without this flag Ruby starts
    // a helper thread for every call made from the main thread.
    let flags = (rb_sys::RB_NOGVL_INTR_FAIL | rb_sys::RB_NOGVL_UBF_ASYNC_SAFE) as i32;
    unsafe {
        rb_sys::rb_nogvl(
            Some(trampoline::<F, R>),
            &mut call as *mut Call<'_, F, R> as *mut c_void,
            Some(unblock),
            &intr as *const Interrupt as *mut c_void,
            flags,
        );
    }
    call.out
}

/// Whether a call may simply run again after an interruption that raised nothing (a signal
/// trap, say). Lock attempts are (they reuse their token); arbitrary commands are not.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Retry {
    Idempotent,
    Once,
}

/// Runs a release exactly once. Takes the held item out of its cell (a second call finds it
/// empty and returns `Ok(None)`) and never repeats the call after an interruption: a release that
/// reached Redis would, sent again, find the lock gone and report it lost.
pub fn release_once<T, R>(
    ruby: &Ruby,
    cell: &std::sync::Mutex<Option<T>>,
    f: impl Fn(&Interrupt, T) -> ferrolock_core::Result<R>,
) -> Result<Option<R>, Error> {
    let Some(item) = cell.lock().unwrap_or_else(|e| e.into_inner()).take() else {
        return Ok(None);
    };
    let item = std::sync::Mutex::new(Some(item));
    run(ruby, Retry::Once, |intr| {
        match item.lock().unwrap_or_else(|e| e.into_inner()).take() {
            Some(item) => f(intr, item).map(Some),
            // Only reachable after the first call was cut short, which `Retry::Once` raises.
            None => Err(CoreError::Interrupted),
        }
    })
}

pub fn run<R>(
    ruby: &Ruby,
    retry: Retry,
    f: impl Fn(&Interrupt) -> ferrolock_core::Result<R>,
) -> Result<R, Error> {
    loop {
        let cut_short = match without_gvl(&f) {
            Some(Ok(Ok(value))) => return Ok(value),
            // Ruby had an interrupt pending (a time-slice tick, a signal…) and did not run `f`:
            // nothing was sent, so running it again is always safe.
            None => false,
            Some(Ok(Err(CoreError::Interrupted))) => true,
            Some(Ok(Err(e))) => return Err(core_error(ruby, e)),
            Some(Err(panic)) => {
                let msg = panic
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "unknown panic".to_string());
                return Err(ferrolock_error(
                    ruby,
                    "Error",
                    format!("internal error in ferrolock: {msg}"),
                ));
            }
        };
        // Raises Thread#kill / Thread#raise / Timeout's exception if one is pending.
        ruby.thread_check_ints()?;
        if cut_short && retry == Retry::Once {
            return Err(ferrolock_error(
                ruby,
                "Error",
                "interrupted before Redis answered".to_string(),
            ));
        }
    }
}
