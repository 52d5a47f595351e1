//! Runs core calls without the GVL, with an unblocking function that cancels them, so other
//! Ruby threads run meanwhile and Thread#kill / Thread#raise / Timeout end a blocked call.
//! Panics are caught in the trampoline and raised as `Ferrolock::Error` once the GVL is back.
//!
//! Three kinds of call (see lib/ferrolock/interrupts.rb for the Ruby half):
//! - `run`: any call; an interrupt that raises ends it, one that does not (a signal trap,
//!   Thread#wakeup) repeats it when `Retry::Idempotent`.
//! - `acquire`: a lock attempt made under `Thread.handle_interrupt(Object => :never)`. The mask
//!   keeps Ruby from raising, yet Ruby still calls our unblocking function when it queues an
//!   exception for the thread, so the wait is cut short; we then see the queued exception
//!   (`Thread.pending_interrupt?`) and stop with `Native::Interrupted` ("nothing acquired").
//! - `release_once`: a release, never cancelled and never sent twice: it always finishes (an
//!   unreachable Redis is bounded by read_timeout, and the core hands a failed release to the
//!   watchdog), so no interrupt can leave a lock held.
//! - `release_then_sleep`: `release_once` followed by a wait that any interrupt ends, in one
//!   call: an interrupt that comes during the release (Thread#wakeup, a ConditionVariable
//!   signal) is kept and ends the wait at once (DistMutex#sleep, see dist_mutex.rb).

use crate::errors::{core_error, ferrolock_error};
use crate::guard::panic_message;
use crate::held_cell::HeldCell;
use crate::unblock::{self, Region};
use ferrolock_core::{Error as CoreError, Interrupt};
use magnus::{function, prelude::*, Error, RModule, Ruby};
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

/// The unblocking function of a thread that has no slot in unblock.rs's table (see there):
/// called with the `Interrupt` on `without_gvl`'s stack, and only without
/// `RB_NOGVL_UBF_ASYNC_SAFE`, so Ruby calls it under the interrupt lock that the region's end
/// also takes, never once the region is over.
unsafe extern "C" fn unblock_on_stack(data: *mut c_void) {
    // SAFETY: see above: the region, and so that stack frame, is live.
    unsafe { &*(data as *const Interrupt) }.cancel();
}

/// The unblocking function of releases: lets the call finish (see `release_once`).
unsafe extern "C" fn unblock_nothing(_data: *mut c_void) {}

/// Whether Ruby's unblocking function cancels the call.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Cancel {
    Yes,
    No,
}

/// `None` when Ruby had an interrupt pending and did not run `f` at all.
fn without_gvl<F, R>(f: &F, cancel: Cancel) -> Option<std::thread::Result<R>>
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
    // UBF_ASYNC_SAFE: the unblocking function is async-signal-safe and its argument outlives
    // the region (unblock.rs says why both matter); without the flag Ruby starts a helper
    // thread for every call made from the main thread.
    let async_safe = (rb_sys::RB_NOGVL_INTR_FAIL | rb_sys::RB_NOGVL_UBF_ASYNC_SAFE) as i32;
    // Dropped after `rb_nogvl` returns: the region's end waits for a cancel in progress.
    let region = match cancel {
        Cancel::Yes => Region::start(&intr),
        Cancel::No => None,
    };
    let (ubf, arg, flags): (unsafe extern "C" fn(*mut c_void), *mut c_void, i32) =
        match (cancel, &region) {
            (Cancel::No, _) => (unblock_nothing, std::ptr::null_mut(), async_safe),
            (Cancel::Yes, Some(region)) => (unblock::cancel, region.arg, async_safe),
            (Cancel::Yes, None) => (
                unblock_on_stack,
                &intr as *const Interrupt as *mut c_void,
                rb_sys::RB_NOGVL_INTR_FAIL as i32,
            ),
        };
    unsafe {
        rb_sys::rb_nogvl(
            Some(trampoline::<F, R>),
            &mut call as *mut Call<'_, F, R> as *mut c_void,
            Some(ubf),
            arg,
            flags,
        );
    }
    drop(region);
    call.out
}

/// Whether a call may simply run again after an interruption that raised nothing (a signal
/// trap, say). Lock attempts are (they reuse their token); arbitrary commands are not.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Retry {
    Idempotent,
    Once,
}

/// Runs a release exactly once and always to its end. Takes the held item out of its cell (a
/// second call finds it empty and returns `Ok(None)`). The call is not cancellable: a release
/// cut short might or might not have reached Redis, and sent again it would find the lock gone
/// and report it lost, while dropping it would leave the lock held. So a signal trap or
/// Thread#wakeup waits for it (one round trip), and Thread#kill / Thread#raise land right after
/// it (they are masked by the Ruby layer anyway). Redis not answering is bounded by
/// read_timeout, after which the core hands the release to the watchdog.
/// In a forked child, an item its parent acquired is not released: `Ok(None)`.
pub fn release_once<T, R>(
    ruby: &Ruby,
    cell: &HeldCell<T>,
    f: impl Fn(&Interrupt, T) -> ferrolock_core::Result<R>,
) -> Result<Option<R>, Error> {
    // An item inherited through fork is the parent's: nothing is sent (see held_cell.rs).
    let Some(item) = cell.take_own() else {
        return Ok(None);
    };
    let item = std::sync::Mutex::new(Some(item));
    let call = |intr: &Interrupt| match item.lock().unwrap_or_else(|e| e.into_inner()).take() {
        Some(item) => f(intr, item).map(Some),
        // Unreachable: `f` runs at most once (see the loop below).
        None => Ok(None),
    };
    // An exception raised by the interrupt check (a trap handler that raises, or an unmasked
    // Thread#raise) is kept until the release has been made, then raised.
    let mut raised = None;
    loop {
        match without_gvl(&call, Cancel::No) {
            // Ruby had an interrupt pending and did not run `call`: nothing was sent.
            None => {
                if let Err(e) = ruby.thread_check_ints() {
                    raised.get_or_insert(e);
                }
            }
            Some(outcome) => {
                let result = settle(ruby, outcome);
                return match raised {
                    Some(e) => Err(e),
                    None => result,
                };
            }
        }
    }
}

/// How a `release_then_sleep` ended.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Slept {
    /// Interrupted: Thread#wakeup / #run, a ConditionVariable signal, a signal trap, or an
    /// exception queued for the thread (raised once the caller's mask lets it through).
    Woken,
    TimedOut,
}

/// Makes the release `f` exactly once and to its end (as `release_once`), then waits until
/// `timeout` passes or Ruby interrupts the thread, all in one blocking region: its unblocking
/// function records every interrupt from the moment the region starts, before the release, so
/// none that comes after the release (the only ones a waker holding the lock can send) is lost.
/// Ruby's own wake-up (status and interrupt flag) would be lost there: our release ignores it,
/// and Kernel#sleep, entered afterwards, does not see it. `Ok(None)`: the cell was empty.
///
/// A release error is returned without waiting. An exception raised by the interrupt check
/// before the region starts (a trap handler's) is raised once the release was made, without
/// waiting. So does an exception queued meanwhile, unless `deferred_before` (one was already
/// queued, deferred by the caller's own `Thread.handle_interrupt`, when the sleep began).
pub fn release_then_sleep<T>(
    ruby: &Ruby,
    cell: &HeldCell<T>,
    f: impl Fn(&Interrupt, T) -> ferrolock_core::Result<()>,
    timeout: Option<std::time::Duration>,
    deferred_before: bool,
) -> Result<Option<Slept>, Error> {
    // As in `release_once`: an item inherited through fork is the parent's.
    let Some(item) = cell.take_own() else {
        return Ok(None);
    };
    let item = std::sync::Mutex::new(Some(item));
    let raised: std::cell::Cell<Option<Error>> = std::cell::Cell::new(None);
    let wait = std::cell::Cell::new(true);
    // `wake` is the region's interrupt (cancelled by the unblocking function); the release gets
    // one nobody cancels.
    let call = |wake: &Interrupt| -> ferrolock_core::Result<Slept> {
        let Some(item) = item.lock().unwrap_or_else(|e| e.into_inner()).take() else {
            // Unreachable: the region runs at most once (see the loop below).
            return Ok(Slept::Woken);
        };
        f(&Interrupt::new(), item)?;
        if !wait.get() {
            return Ok(Slept::Woken);
        }
        sleep_until_cancelled(wake, timeout)
    };
    // Keeps the first exception raised before the release (it ends the sleep once released).
    let keep = |e: Error| {
        wait.set(false);
        let first = raised.take().unwrap_or(e);
        raised.set(Some(first));
    };
    // An exception queued before the region starts (a Timeout firing now, deferred by the
    // caller's mask) called no unblocking function of ours: it must end the sleep all the same,
    // unless the caller's own mask defers it (`deferred_before`: then Mutex#sleep sleeps on).
    let skip_wait_if_exception_queued = || match exception_pending(ruby) {
        Ok(pending) => {
            if pending && !deferred_before {
                wait.set(false);
            }
        }
        Err(e) => keep(e),
    };
    skip_wait_if_exception_queued();
    loop {
        match without_gvl(&call, Cancel::Yes) {
            // Ruby had an interrupt pending and did not run `call`: nothing was sent. The lock is
            // still held, so no wake-up can be due yet: run the interrupt and retry.
            None => {
                if let Err(e) = ruby.thread_check_ints() {
                    keep(e);
                }
                skip_wait_if_exception_queued();
            }
            Some(outcome) => {
                let slept = settle(ruby, outcome);
                return match raised.take() {
                    Some(e) => Err(e),
                    None => slept.map(Some),
                };
            }
        }
    }
}

/// Waits on `wake` until it is cancelled or `timeout` passes (forever when `None`).
fn sleep_until_cancelled(
    wake: &Interrupt,
    timeout: Option<std::time::Duration>,
) -> ferrolock_core::Result<Slept> {
    // A day at a time when endless: `Interrupt::sleep` takes a span.
    const DAY: std::time::Duration = std::time::Duration::from_secs(86_400);
    loop {
        match wake.sleep(timeout.unwrap_or(DAY)) {
            Ok(()) if timeout.is_some() => return Ok(Slept::TimedOut),
            Ok(()) => {}
            Err(CoreError::Interrupted) => return Ok(Slept::Woken),
            Err(e) => return Err(e),
        }
    }
}

/// Maps one finished call (or its panic) to Ruby.
fn settle<R>(
    ruby: &Ruby,
    outcome: std::thread::Result<ferrolock_core::Result<R>>,
) -> Result<R, Error> {
    match outcome {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(e)) => Err(core_error(ruby, e)),
        Err(panic) => Err(ferrolock_error(
            ruby,
            "Error",
            format!("internal error in ferrolock: {}", panic_message(&*panic)),
        )),
    }
}

/// True when an exception (Thread#raise, Thread#kill, Timeout) is queued for the current
/// thread, deferred or not. A method call runs the interrupt check when it returns: an
/// exception the thread's mask lets through is raised there, and is returned as the `Err`
/// (dropped, it would be lost).
fn exception_pending(ruby: &Ruby) -> Result<bool, Error> {
    ruby.class_thread()
        .funcall::<_, _, bool>("pending_interrupt?", ())
}

/// `Ferrolock::Native::Interrupted`: an acquisition gave up because an exception is queued for
/// the thread; nothing was acquired (the token is abandoned by the caller).
fn interrupted(ruby: &Ruby) -> Error {
    crate::errors::error_at(
        ruby,
        &["Native", "Interrupted"],
        "interrupted: an exception is pending for this thread",
    )
}

/// Runs a lock attempt (repeatable: it reuses its token) until it ends by itself, or until an
/// exception is queued for this thread while it waits: then `Native::Interrupted` (when the
/// thread's mask defers the exception) or that exception (when it does not). An exception that
/// was already queued when the call started is one the caller's own `Thread.handle_interrupt`
/// defers on purpose: like Ruby's Mutex#lock, the wait then goes on.
pub fn acquire<R>(
    ruby: &Ruby,
    f: impl Fn(&Interrupt) -> ferrolock_core::Result<R>,
) -> Result<R, Error> {
    let deferred_before = exception_pending(ruby)?;
    loop {
        match without_gvl(&f, Cancel::Yes) {
            // Not run (an interrupt was pending) or cut short: nothing acquired yet.
            None | Some(Ok(Err(CoreError::Interrupted))) => {}
            Some(outcome) => return settle(ruby, outcome),
        }
        ruby.thread_check_ints()?;
        if !deferred_before && exception_pending(ruby)? {
            return Err(interrupted(ruby));
        }
    }
}

pub fn run<R>(
    ruby: &Ruby,
    retry: Retry,
    f: impl Fn(&Interrupt) -> ferrolock_core::Result<R>,
) -> Result<R, Error> {
    loop {
        let cut_short = match without_gvl(&f, Cancel::Yes) {
            // Ruby had an interrupt pending (a time-slice tick, a signal…) and did not run `f`:
            // nothing was sent, so running it again is always safe.
            None => false,
            Some(Ok(Err(CoreError::Interrupted))) => true,
            Some(outcome) => return settle(ruby, outcome),
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

/// Defines `Ferrolock::Native::Interrupted` and `Ferrolock::Native.check_interrupts` (raises
/// what the thread's interrupt mask lets through at a blocking point).
pub fn init(ruby: &Ruby, native: RModule) -> Result<(), Error> {
    native.define_error("Interrupted", ruby.exception_standard_error())?;
    native.define_module_function(
        "check_interrupts",
        function!(crate::guard::f0(|ruby: &Ruby| ruby.thread_check_ints()), 0),
    )?;
    // For spec/signals_spec.rb: unblocking calls that came after their region had ended.
    native.define_module_function(
        "stale_unblock_calls",
        function!(
            crate::guard::f0(|_: &Ruby| Ok::<_, Error>(unblock::stale_calls())),
            0
        ),
    )?;
    Ok(())
}
