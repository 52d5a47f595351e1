//! `Ferrolock::Native.listen_lost_leases` and `.next_lost_lease`: the watchdog's lost-lease
//! and data-loss notices for lib/ferrolock/lock_lost_watcher.rb, which turns them into
//! `:lock_lost` and `:data_lost` events.

use crate::errors::wait;
use crate::guard;
use crate::nogvl::{run, Retry};
use ferrolock_core::lost_leases;
use ferrolock_core::{LostLease, Notice};
use magnus::{function, Error, IntoValue, RModule, Ruby, Value};

/// [primitive, name, fencing_token or nil, queue or nil]
type Lease = (String, String, Option<i64>, Option<String>);

fn lease(l: LostLease) -> Lease {
    (l.primitive.to_string(), l.name, l.fencing_token, l.queue)
}

fn listen(_ruby: &Ruby) -> Result<(), Error> {
    lost_leases::listen();
    Ok(())
}

/// The next notice, or nil after `timeout` seconds; waits without the GVL and is cut short by
/// Thread#kill / Thread#raise like any blocking call. A lost lease is
/// [primitive, name, fencing_token or nil, queue or nil]; a data loss is
/// ["data_lost", lost (false: the server changed and kept the data), cause, redis,
/// [lost lease, ...], [[key, job_id], ...]].
fn next_lost_lease(ruby: &Ruby, timeout: f64) -> Result<Option<Value>, Error> {
    let timeout = wait(ruby, "timeout", timeout)?;
    let lost = run(ruby, Retry::Idempotent, |intr| {
        lost_leases::next(intr, timeout)
    })?;
    Ok(lost.map(|notice| match notice {
        Notice::Lease(l) => lease(l).into_value_with(ruby),
        Notice::Data(d) => (
            "data_lost",
            d.lost,
            d.cause.name(),
            d.redis,
            d.leases.into_iter().map(lease).collect::<Vec<_>>(),
            d.parked
                .into_iter()
                .map(|p| (p.key, p.job_id))
                .collect::<Vec<_>>(),
        )
            .into_value_with(ruby),
    }))
}

/// How many leases this process renews now (ferrolock-core's `lease::renewed`).
fn renewed_leases(_ruby: &Ruby) -> Result<usize, Error> {
    Ok(ferrolock_core::renewed_leases())
}

pub fn init(_ruby: &Ruby, native: RModule) -> Result<(), Error> {
    native.define_module_function("listen_lost_leases", function!(guard::f0(listen), 0))?;
    native.define_module_function("next_lost_lease", function!(guard::f1(next_lost_lease), 1))?;
    native.define_module_function("renewed_leases", function!(guard::f0(renewed_leases), 0))?;
    Ok(())
}
