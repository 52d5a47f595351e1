//! The Ruby binding: thin classes under `Ferrolock::Native` over ferrolock-core. Argument
//! checks that need Ruby idioms live in lib/ferrolock/*.rb; this layer converts, releases the
//! GVL and maps errors.

mod convert;
mod errors;
mod guard;
mod held_cell;
mod nogvl;
mod ruby_api;
mod unblock;

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
