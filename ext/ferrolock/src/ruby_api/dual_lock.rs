//! `Ferrolock::Native::DualLock` and the ticket one duplicate holds while it waits or runs
//! (see lib/ferrolock/dual_lock.rb, which sequences enter → wait → run → leave).

use crate::errors::{core_error, seconds};
use crate::guard;
use crate::held_cell::HeldCell;
use crate::nogvl::{release_once, run, Retry};
use crate::ruby_api::client::RbClient;
use crate::wait_timeout::{acquire_until, deadline};
use ferrolock_core::replicas;
use ferrolock_core::wait_timeout;
use ferrolock_core::{DualLock, DualLockOptions, Stage, Ticket};
use magnus::{function, method, prelude::*, Error, RModule, Ruby, Symbol};

#[magnus::wrap(class = "Ferrolock::Native::DualLock", free_immediately, size)]
pub struct RbDualLock(DualLock);

/// The ticket is taken out of the mutex by `leave`, so a second leave (an `ensure` running
/// twice) is a no-op rather than a second release.
#[magnus::wrap(class = "Ferrolock::Native::DualLockTicket", free_immediately, size)]
pub struct RbDualTicket(HeldCell<Ticket>);

fn stage_symbol(ruby: &Ruby, stage: Stage) -> Symbol {
    ruby.to_symbol(match stage {
        Stage::Running => "running",
        Stage::Waiting => "waiting",
        Stage::Skipped => "skipped",
    })
}

impl RbDualTicket {
    /// :running, :waiting, :skipped, or :left once released.
    fn stage(ruby: &Ruby, rb_self: &Self) -> Symbol {
        match rb_self.0.lock().as_ref() {
            Some(t) => stage_symbol(ruby, t.stage()),
            None => ruby.to_symbol("left"),
        }
    }
}

impl RbDualLock {
    fn new(
        ruby: &Ruby,
        client: &RbClient,
        key: String,
        wait_lease: f64,
        lease: f64,
        min_replicas_acked: i64,
    ) -> Result<Self, Error> {
        let acks = replicas::check(min_replicas_acked).map_err(|e| core_error(ruby, e))?;
        let opts = DualLockOptions {
            wait_lease: seconds(ruby, "wait_lease", wait_lease)?,
            lease: seconds(ruby, "lease", lease)?,
        };
        DualLock::new(&client.0, &key, opts)
            .map(|l| RbDualLock(l.with_min_replicas_acked(acks)))
            .map_err(|e| core_error(ruby, e))
    }

    /// `wait_timeout`: the caller's time left (nil: none); entering does not wait for a turn,
    /// but a stalled Redis ends it by then (wait_timeout.rs).
    fn enter(
        ruby: &Ruby,
        rb_self: &Self,
        wait_timeout: Option<f64>,
    ) -> Result<RbDualTicket, Error> {
        let token = DualLock::new_token();
        let ticket = acquire_until(
            ruby,
            deadline(ruby, wait_timeout)?,
            |intr| rb_self.0.enter(intr, &token),
            || rb_self.0.abandon(&token),
        )?;
        Ok(RbDualTicket(HeldCell::new(ticket)))
    }

    /// Waits at most `wait_timeout` seconds (nil: as long as it takes); returns the new stage.
    /// Not an acquisition (the ticket is held already): the wait runs until the deadline as
    /// `acquire_until` does, repeated with the same ticket after an interrupt.
    fn wait(
        ruby: &Ruby,
        rb_self: &Self,
        ticket: &RbDualTicket,
        wait_timeout: Option<f64>,
    ) -> Result<Symbol, Error> {
        let deadline = deadline(ruby, wait_timeout)?;
        // The ticket is updated in place, so a retry after an interruption resumes the wait
        // with the same token and deadline.
        let stage = run(ruby, Retry::Idempotent, |intr| {
            let mut guard = ticket.0.lock();
            match guard.as_mut() {
                Some(t) => wait_timeout::until(deadline, || rb_self.0.wait(intr, t, deadline)),
                None => Err(ferrolock_core::Error::argument("ticket: already left")),
            }
        })
        // A wait cut short may still be executed by Redis after the caller left (the bytes were
        // sent): a promotion to EXEC would then hold the key for a whole lease. The caller
        // leaves after any error, so releasing the token again in the background is harmless.
        .inspect_err(|_| {
            if let Some(t) = ticket.0.lock().as_ref() {
                rb_self.0.abandon(t.token());
            }
        })?;
        Ok(stage_symbol(ruby, stage))
    }

    fn leave(ruby: &Ruby, rb_self: &Self, ticket: &RbDualTicket) -> Result<(), Error> {
        release_once(ruby, &ticket.0, |intr, t| rb_self.0.leave(intr, t)).map(drop)
    }

    /// [someone executes, someone waits]
    fn state(ruby: &Ruby, rb_self: &Self) -> Result<(bool, bool), Error> {
        run(ruby, Retry::Idempotent, |intr| rb_self.0.state(intr))
    }

    fn key(&self) -> String {
        self.0.key().to_string()
    }
}

pub fn init(ruby: &Ruby, native: RModule) -> Result<(), Error> {
    let class = native.define_class("DualLock", ruby.class_object())?;
    class.define_singleton_method("new", function!(guard::f5(RbDualLock::new), 5))?;
    class.define_method("enter", method!(guard::f2(RbDualLock::enter), 1))?;
    class.define_method("wait", method!(guard::f3(RbDualLock::wait), 2))?;
    class.define_method("leave", method!(guard::f2(RbDualLock::leave), 1))?;
    class.define_method("state", method!(guard::f1(RbDualLock::state), 0))?;
    class.define_method("key", method!(guard::plain1(RbDualLock::key), 0))?;
    let ticket = native.define_class("DualLockTicket", ruby.class_object())?;
    ticket.define_method("stage", method!(guard::infallible1(RbDualTicket::stage), 0))?;
    Ok(())
}
