//! `Ferrolock::Native::Cohort`: the cohort hand-off's bounds from the core
//! (ferrolock_core::line::cohort), which lib/ferrolock/cohort.rb reads instead of repeating them.

use ferrolock_core::{DEFAULT_LOCAL_PASSES, MAX_LOCAL_PASSES, MAX_SLOT_PASSES};
use magnus::{prelude::*, Error, RModule, Ruby};

pub fn init(_ruby: &Ruby, native: RModule) -> Result<(), Error> {
    let module = native.define_module("Cohort")?;
    // Passes in a row at most: the fencing tokens a Redis acquisition reserves above its own.
    module.const_set("MAX_LOCAL_PASSES", MAX_LOCAL_PASSES)?;
    // A limiter's slot has no fencing tokens: only the window bounds its passes beyond this.
    module.const_set("MAX_SLOT_PASSES", MAX_SLOT_PASSES)?;
    module.const_set("DEFAULT_LOCAL_PASSES", DEFAULT_LOCAL_PASSES)?;
    Ok(())
}
