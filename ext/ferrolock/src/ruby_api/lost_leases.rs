//! `Ferrolock::Native.listen_lost_leases` and `.next_lost_lease`: the watchdog's lost-lease
//! notices for lib/ferrolock/lock_lost_watcher.rb, which turns them into `:lock_lost` events.

use crate::errors::wait;
use crate::guard;
use crate::nogvl::{run, Retry};
use ferrolock_core::lost_leases;
use magnus::{function, Error, RModule, Ruby};

/// [primitive, name, fencing_token or nil, queue or nil]
type Notice = (String, String, Option<i64>, Option<String>);

fn listen(_ruby: &Ruby) -> Result<(), Error> {
    lost_leases::listen();
    Ok(())
}

/// The next notice, or nil after `timeout` seconds; waits without the GVL and is cut short by
/// Thread#kill / Thread#raise like any blocking call.
fn next_lost_lease(ruby: &Ruby, timeout: f64) -> Result<Option<Notice>, Error> {
    let timeout = wait(ruby, "timeout", timeout)?;
    let lost = run(ruby, Retry::Idempotent, |intr| {
        lost_leases::next(intr, timeout)
    })?;
    Ok(lost.map(|l| (l.primitive.to_string(), l.name, l.fencing_token, l.queue)))
}

pub fn init(_ruby: &Ruby, native: RModule) -> Result<(), Error> {
    native.define_module_function("listen_lost_leases", function!(guard::f0(listen), 0))?;
    native.define_module_function("next_lost_lease", function!(guard::f1(next_lost_lease), 1))?;
    Ok(())
}
