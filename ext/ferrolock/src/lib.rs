//! The Ruby binding: thin classes under `Ferrolock::Native` over ferrolock-core. Argument
//! checks that need Ruby idioms live in lib/ferrolock/*.rb; this layer converts, releases the
//! GVL and maps errors.

mod convert;
mod errors;
mod nogvl;
mod ruby_api;

use magnus::{prelude::*, Error, Ruby};

#[magnus::init]
fn init(ruby: &Ruby) -> Result<(), Error> {
    let ferrolock = ruby.define_module("Ferrolock")?;
    let native = ferrolock.define_module("Native")?;
    ruby_api::client::init(ruby, native)?;
    ruby_api::concurrent_limiter::init(ruby, native)?;
    ruby_api::dist_mutex::init(ruby, native)?;
    ruby_api::fair_tenant::init(ruby, native)?;
    ruby_api::dual_lock::init(ruby, native)?;
    ruby_api::message_lock::init(ruby, native)?;
    Ok(())
}
