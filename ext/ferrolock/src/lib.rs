//! The Ruby binding: thin classes under `Ferrolock::Native` over ferrolock-core. Argument
//! checks that need Ruby idioms live in lib/ferrolock/*.rb; this layer converts, releases the
//! GVL and maps errors.
//!
//! Design notes (moved from doc/ARCHITECTURE.md):
//!
//! **Binding rules (ext/ferrolock/src)**
//!
//! Every call into the core goes through `nogvl::run(ruby, Retry::…, |intr| …)`: no GVL while in
//! Redis, interrupts honoured, panics turned into `Ferrolock::Error`. Use `Retry::Idempotent` only
//! when repeating the closure is harmless (lock attempts reuse their token).
//!
//! Interrupt atomicity (`lib/ferrolock/interrupts.rb` + `nogvl.rs`): a primitive's acquisition runs
//! through `nogvl::acquire` and its Ruby caller through `Interrupts.acquire`, which defers
//! asynchronous exceptions (`Thread.handle_interrupt(Object => :never)`) around "native call + record
//! the hold". Ruby still cuts the native wait short when it queues an exception, and `acquire` then
//! sees `Thread.pending_interrupt?` and raises `Native::Interrupted` (token abandoned, nothing held);
//! the queued exception is raised as the mask is left. A grant that raced such an exception is given
//! back first. Releases run through `nogvl::release_once` (never cancelled, never sent twice) inside
//! `Interrupts.release`, and the core's `lease::release_now` hands a release Redis did not answer to
//! the watchdog. `release_in_background` sends a cleanup three times (now, +50 ms, +TTL/4): a call
//! cut short may still be executed by Redis after it, from the bytes already sent.
//!
//! Fork (issue 24): what an acquisition hands to Ruby (hold, slot, ticket, message lease) lives in a
//! `HeldCell` (`held_cell.rs`) that remembers `fork::generation()`; `release_once` in a forked child
//! (and `release_then_sleep`) takes such an inherited item out and forgets it without a word to Redis, so a child leaving its
//! parent's block (or exiting in it) never releases or marks what the parent holds and renews. The
//! uniqueness middleware's `until_executed` compares `Process.pid` for the same reason (its lock is
//! released by jid).
//!
//! "Acquire until a deadline" (issue 24, issue 40): the Ruby API's `wait_timeout` keeps that name
//! through the binding (`wait_timeout.rs`: `deadline` fixes it once, `acquire_until` runs every
//! waiting acquisition) into the core (`ferrolock_core::wait_timeout::until`), which caps every
//! read/connect of the call at the deadline + 0.25 s and turns a read cut past the deadline into
//! `Error::Stalled`. The binding raises it as `Ferrolock::WaitTimeout::Stalled` (a ConnectionError
//! naming host:port), abandons the token as after any error (background token-checked release), and
//! Ruby (`lib/ferrolock/wait_timeout.rb`) raises the primitive's own timeout error with it as the cause.
//!
//! `DistMutex#sleep` runs its release and its wait as one call, `nogvl::release_then_sleep`: one
//! blocking region whose unblocking function records every interrupt from before the release, so a
//! `Thread#wakeup` or ConditionVariable signal sent once the lock is free (Ruby's own wake-up would
//! be lost in a release, then unseen by a later `Kernel#sleep`) ends the wait. The thread looks asleep
//! (`stop?`) during the release, so `locked?`/`try_lock` in the process first wait for such releases
//! of their lock (`unanswered_releases.rs`, which also covers the background give-back of an interrupted
//! acquisition). The Ruby side re-locks when `MutexHold#released_by_sleep?`.
//!
//! `errors::seconds(ruby, "arg", f64)` (a TTL/lease/timeout), `errors::wait` and `wait_timeout::deadline`
//! convert seconds through the core's `seconds` module (`seconds.rs`): one bound for every seconds
//! argument (`MAX_SECONDS`, 10 years), checked before `Duration::from_secs_f64` (which panics past
//! ~1.8e19) and `Instant + Duration`; `seconds::millis` saturates instead of wrapping. The Ruby layer
//! (`Validate`) checks the same bounds first, with messages naming the argument and the bound.
//!
//! Every `function!`/`method!` registration wraps its function in a `guard::fN`/`plain1`/… adapter
//! (`guard.rs`): a panic anywhere in an entry point becomes `Ferrolock::Error`, never Ruby's
//! `fatal` (spec/hostile_input_spec.rb checks that no registration skips it).

mod convert;
mod errors;
mod guard;
mod held_cell;
mod nogvl;
mod ruby_api;
mod unblock;
mod wait_timeout;

use magnus::{function, prelude::*, Error, RString, Ruby};

/// Panics inside a GVL-free call on purpose, so the test suite can check that a Rust panic
/// reaches Ruby as `Ferrolock::Error` instead of aborting the process.
fn panic_for_test(ruby: &Ruby) -> Result<(), Error> {
    nogvl::run(
        ruby,
        nogvl::Retry::Once,
        |_| -> ferrolock_core::Result<()> { panic!("deliberate panic for the test suite") },
    )
}

/// Panics while holding the GVL, outside any `nogvl::run`, so the test suite can check that the
/// entry-point guard turns it into `Ferrolock::Error` (magnus alone would raise `fatal`).
fn panic_with_gvl_for_test(_ruby: &Ruby) -> Result<(), Error> {
    panic!("deliberate panic with the GVL held")
}

/// `Ferrolock::Native.redact(text)`: the text with its passwords replaced by `***`
/// (ferrolock_core::redact; lib/ferrolock/redact.rb). Bytes that are not UTF-8 show as U+FFFD.
fn redact(_ruby: &Ruby, text: RString) -> Result<String, Error> {
    // SAFETY: the bytes are copied before any Ruby code can run.
    let text = String::from_utf8_lossy(unsafe { text.as_slice() }).into_owned();
    Ok(ferrolock_core::redact::redact(&text))
}

#[magnus::init]
fn init(ruby: &Ruby) -> Result<(), Error> {
    let ferrolock = ruby.define_module("Ferrolock")?;
    let native = ferrolock.define_module("Native")?;
    ruby_api::admin::init(ruby, native)?;
    ruby_api::client::init(ruby, native)?;
    ruby_api::cohort::init(ruby, native)?;
    ruby_api::concurrent_limiter::init(ruby, native)?;
    ruby_api::dist_mutex::init(ruby, native)?;
    ruby_api::fair_tenant::init(ruby, native)?;
    ruby_api::fork::init(ruby, native)?;
    ruby_api::job_concurrency::init(ruby, native)?;
    ruby_api::dual_lock::init(ruby, native)?;
    ruby_api::message_lock::init(ruby, native)?;
    ruby_api::lost_leases::init(ruby, native)?;
    ruby_api::rate_limiter::init(ruby, native)?;
    ruby_api::tally::init(ruby, native)?;
    ruby_api::unique_lock::init(ruby, native)?;
    nogvl::init(ruby, native)?;
    // Last: every wrapped class is defined by now (see the function for why it must be eager).
    ruby_api::resolve_wrapped_classes(ruby);
    native.define_module_function("redact", function!(guard::f1(redact), 1))?;
    native.define_module_function("panic_for_test", function!(guard::f0(panic_for_test), 0))?;
    native.define_module_function(
        "panic_with_gvl_for_test",
        function!(guard::f0(panic_with_gvl_for_test), 0),
    )?;
    Ok(())
}
