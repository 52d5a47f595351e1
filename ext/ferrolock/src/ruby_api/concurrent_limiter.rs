//! `Ferrolock::Native::ConcurrentLimiter` and the slot it hands out (see
//! lib/ferrolock/concurrent_limiter.rb, which adds within_limit, OverLimit and events).

use crate::errors::{core_error, seconds};
use crate::guard;
use crate::held_cell::HeldCell;
use crate::nogvl::{release_once, run, Retry};
use crate::ruby_api::client::RbClient;
use crate::ruby_api::tally::{self, with_tally, RbTally};
use crate::wait_timeout::{acquire_until, deadline};
use ferrolock_core::concurrent_limiter::{Override, OverrideAction, OVERRIDE_TTL};
use ferrolock_core::replicas;
use ferrolock_core::{ConcurrentLimiter, LimiterOptions, Slot};
use magnus::{function, method, prelude::*, Error, RModule, Ruby, Value};
use std::time::Instant;

#[magnus::wrap(class = "Ferrolock::Native::ConcurrentLimiter", free_immediately, size)]
pub struct RbConcurrentLimiter(ConcurrentLimiter);

#[magnus::wrap(class = "Ferrolock::Native::LimiterSlot", free_immediately, size)]
pub struct RbLimiterSlot {
    slot: HeldCell<Slot>,
    /// When it was granted: a counted release's hold time (see `RbTally`).
    granted: Instant,
}

impl RbConcurrentLimiter {
    // Native::ConcurrentLimiter.new's positional arguments (lib/ferrolock/concurrent_limiter.rb
    // validates them).
    #[allow(clippy::too_many_arguments)]
    fn new(
        ruby: &Ruby,
        client: &RbClient,
        name: String,
        limit: i64,
        lease: f64,
        min_replicas_acked: i64,
        local_passes: i64,
        fair: bool,
    ) -> Result<Self, Error> {
        let acks = replicas::check(min_replicas_acked).map_err(|e| core_error(ruby, e))?;
        let limit = u32::try_from(limit)
            .ok()
            .filter(|l| *l > 0)
            .ok_or_else(|| {
                Error::new(
                    ruby.exception_arg_error(),
                    format!("count: must be a positive integer, got {limit}"),
                )
            })?;
        let opts = LimiterOptions {
            limit,
            lease: seconds(ruby, "lease", lease)?,
            // Out of range: the core's ArgumentError names the bound.
            local_passes: u32::try_from(local_passes).unwrap_or(u32::MAX),
            fair,
        };
        ConcurrentLimiter::new(&client.0, &name, opts)
            .map(|l| RbConcurrentLimiter(l.with_min_replicas_acked(acks)))
            .map_err(|e| core_error(ruby, e))
    }

    /// acquire(wait_timeout, tally = nil): a slot, or nil when none freed within `wait_timeout`
    /// seconds (0: one attempt); counts the grant and its wait in `tally` when given.
    fn acquire(
        ruby: &Ruby,
        rb_self: &Self,
        args: &[Value],
    ) -> Result<Option<RbLimiterSlot>, Error> {
        let (wait_timeout, tally): (f64, _) = with_tally(ruby, args)?;
        let started = tally::started(tally);
        // A limiter always has a finite wait; 0 gives a deadline of now: one attempt.
        let deadline = deadline(ruby, Some(wait_timeout))?;
        let ends = deadline.unwrap_or_else(Instant::now);
        // Unfair mode: a slot a holder of this process parked is taken with the GVL held (as
        // DistMutex#lock takes a parked hold): no blocking region, no token made.
        let parked = rb_self
            .0
            .take_parked(ends)
            .map_err(|e| core_error(ruby, e))?;
        let slot = match parked {
            Some(slot) => Some(slot),
            None => {
                let token = ConcurrentLimiter::new_token();
                acquire_until(
                    ruby,
                    deadline,
                    |intr| rb_self.0.acquire(intr, &token, ends),
                    || rb_self.0.abandon(&token),
                )?
            }
        };
        Ok(slot.map(|s| RbLimiterSlot {
            slot: HeldCell::new(s),
            granted: RbTally::acquired(tally, started),
        }))
    }

    /// release(slot, tally = nil): gives the slot back (a second call does nothing); raises
    /// LockLost if its lease was lost. Counts the release and its hold time in `tally` when
    /// given and this call released it.
    fn release(ruby: &Ruby, rb_self: &Self, args: &[Value]) -> Result<(), Error> {
        let (slot, tally): (&RbLimiterSlot, _) = with_tally(ruby, args)?;
        // A pass to a waiting thread of this process is made with the GVL held: the waiter it
        // wakes gets the GVL as soon as this thread next blocks, instead of this thread giving
        // it up and taking it back around the pass.
        if slot.slot.consume_own(|s| rb_self.0.release_locally(s)) {
            RbTally::released(tally, slot.granted);
            return Ok(());
        }
        let released = release_once(ruby, &slot.slot, |intr, s| rb_self.0.release(intr, s))?;
        if released.is_some() {
            RbTally::released(tally, slot.granted);
        }
        Ok(())
    }

    /// [in_use, waiting]
    fn status(ruby: &Ruby, rb_self: &Self) -> Result<(u32, u32), Error> {
        let st = run(ruby, Retry::Idempotent, |intr| rb_self.0.status(intr))?;
        Ok((st.in_use, st.waiting))
    }

    /// The limit stored by the latest acquisition that took a free slot, or nil (ferrolock-core's
    /// concurrent_limiter/inspect.rs).
    fn stored_limit(ruby: &Ruby, rb_self: &Self) -> Result<Option<i64>, Error> {
        run(ruby, Retry::Idempotent, |intr| rb_self.0.stored_limit(intr))
    }

    /// Native::ConcurrentLimiter.write_override(client, name, action, limit): the operators'
    /// override of limiter `name` changed ("set_limit" with a limit, "pause", "resume",
    /// "clear"), as [limit or nil, paused] now in force.
    fn write_override(
        ruby: &Ruby,
        client: &RbClient,
        name: String,
        action: String,
        limit: Option<i64>,
    ) -> Result<(Option<u32>, bool), Error> {
        let action = OverrideAction::parse(&action, limit).map_err(|e| core_error(ruby, e))?;
        let now: Override = run(ruby, Retry::Idempotent, |intr| {
            ConcurrentLimiter::write_override(&client.0, intr, &name, action)
        })?;
        Ok((now.limit, now.paused))
    }

    /// Native::ConcurrentLimiter.read_override(client, name, keep): the override stored under
    /// `name` (a limiter's, a limits_concurrency key's "concurrency:<key>" or a Shoryuken queue's
    /// "msg:<queue>") as [limit or nil, paused], or nil when there is none; `keep`: a pause found
    /// stays (its TTL refreshed).
    fn read_override(
        ruby: &Ruby,
        client: &RbClient,
        name: String,
        keep: bool,
    ) -> Result<Option<(Option<u32>, bool)>, Error> {
        let now = run(ruby, Retry::Idempotent, |intr| {
            ConcurrentLimiter::read_override(&client.0, intr, &name, keep)
        })?;
        Ok(now.map(|o| (o.limit, o.paused)))
    }

    fn limit(&self) -> u32 {
        self.0.limit()
    }
}

impl RbLimiterSlot {
    fn token(&self) -> Option<String> {
        self.slot.lock().as_ref().map(|s| s.token().to_string())
    }
}

pub fn init(ruby: &Ruby, native: RModule) -> Result<(), Error> {
    let class = native.define_class("ConcurrentLimiter", ruby.class_object())?;
    class.define_singleton_method("new", function!(guard::f7(RbConcurrentLimiter::new), 7))?;
    class.define_method(
        "acquire",
        method!(guard::variadic(RbConcurrentLimiter::acquire), -1),
    )?;
    class.define_method(
        "release",
        method!(guard::variadic(RbConcurrentLimiter::release), -1),
    )?;
    // Seconds an override lives without an admission reading it.
    class.const_set("OVERRIDE_TTL", OVERRIDE_TTL.as_secs())?;
    class.define_singleton_method(
        "write_override",
        function!(guard::f4(RbConcurrentLimiter::write_override), 4),
    )?;
    class.define_singleton_method(
        "read_override",
        function!(guard::f3(RbConcurrentLimiter::read_override), 3),
    )?;
    class.define_method("status", method!(guard::f1(RbConcurrentLimiter::status), 0))?;
    class.define_method(
        "stored_limit",
        method!(guard::f1(RbConcurrentLimiter::stored_limit), 0),
    )?;
    class.define_method(
        "limit",
        method!(guard::plain1(RbConcurrentLimiter::limit), 0),
    )?;
    let slot = native.define_class("LimiterSlot", ruby.class_object())?;
    slot.define_method("token", method!(guard::plain1(RbLimiterSlot::token), 0))?;
    Ok(())
}
