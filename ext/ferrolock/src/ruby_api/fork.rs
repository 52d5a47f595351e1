//! `Ferrolock::Native.fork_generation`: a number that changes in every forked child (see
//! ferrolock-core's fork.rs). Ruby code compares it to tell it runs in a new process, instead of
//! `Process.pid`, which is a `getpid` system call on every call.

use crate::guard;
use magnus::{function, Error, RModule, Ruby};

fn fork_generation(_ruby: &Ruby) -> Result<u64, Error> {
    Ok(ferrolock_core::fork::generation())
}

pub fn init(_ruby: &Ruby, native: RModule) -> Result<(), Error> {
    native.define_module_function("fork_generation", function!(guard::f0(fork_generation), 0))?;
    Ok(())
}
