//! `Ferrolock::Native::DistMutex` and the hold it hands out (see lib/ferrolock/dist_mutex.rb,
//! which adds Ruby Mutex's owner rules).

use crate::errors::{core_error, seconds, wait};
use crate::guard;
use crate::held_cell::HeldCell;
use crate::nogvl::{acquire, release_once, release_then_sleep, run, Retry, Slept};
use crate::ruby_api::client::RbClient;
use crate::ruby_api::tally::{self, with_tally, RbTally};
use crate::wait_timeout::{acquire_until, deadline};
use ferrolock_core::replicas;
use ferrolock_core::{Announced, DistMutex, DistMutexOptions, Held};
use magnus::{function, method, prelude::*, Error, RModule, Ruby, Value};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Instant;

#[magnus::wrap(class = "Ferrolock::Native::DistMutex", free_immediately, size)]
pub struct RbDistMutex(DistMutex);

#[magnus::wrap(class = "Ferrolock::Native::MutexHold", free_immediately, size)]
pub struct RbMutexHold {
    held: HeldCell<Held>,
    /// 0: none (a mutex made with `fencing: false`).
    fencing_token: i64,
    /// When it was granted: a counted release's hold time (see `RbTally`).
    granted: Instant,
    /// Set once `release_and_sleep` released it: the sleep must take the lock again.
    released_by_sleep: AtomicBool,
    /// Set by `announce_release` (its owner ended): ends once `unlock` was answered.
    announced: Mutex<Option<Announced>>,
    /// Whether `announced` was set: every `unlock` reads only this flag.
    was_announced: AtomicBool,
}

impl RbMutexHold {
    fn new(held: Held, granted: Instant) -> Self {
        RbMutexHold {
            fencing_token: held.fencing_token(),
            granted,
            held: HeldCell::new(held),
            released_by_sleep: AtomicBool::new(false),
            announced: Mutex::new(None),
            was_announced: AtomicBool::new(false),
        }
    }

    fn fencing_token(&self) -> Option<i64> {
        (self.fencing_token > 0).then_some(self.fencing_token)
    }

    fn is_released_by_sleep(&self) -> bool {
        self.released_by_sleep.load(Ordering::SeqCst)
    }

    fn announce(&self, announced: Announced) {
        *self.announced.lock().unwrap_or_else(|e| e.into_inner()) = Some(announced);
        self.was_announced.store(true, Ordering::SeqCst);
    }

    /// Ends the announcement, if any, once the release was answered or failed.
    fn answered(&self) {
        if self.was_announced.load(Ordering::SeqCst) {
            let announced = self
                .announced
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .take();
            drop(announced);
        }
    }
}

impl RbDistMutex {
    // Native::DistMutex.new's positional arguments (lib/ferrolock/dist_mutex.rb validates them).
    #[allow(clippy::too_many_arguments)]
    fn new(
        ruby: &Ruby,
        client: &RbClient,
        name: String,
        expire: Option<f64>,
        auto_release: bool,
        lease: f64,
        min_replicas_acked: i64,
        local_passes: i64,
        fair: bool,
        fencing: bool,
    ) -> Result<Self, Error> {
        let acks = replicas::check(min_replicas_acked).map_err(|e| core_error(ruby, e))?;
        let opts = DistMutexOptions {
            expire: expire.map(|e| seconds(ruby, "expire", e)).transpose()?,
            auto_release,
            lease: seconds(ruby, "lease", lease)?,
            // Out of range: the core's ArgumentError names the bound.
            local_passes: u32::try_from(local_passes).unwrap_or(u32::MAX),
            fair,
            fencing,
        };
        DistMutex::new(&client.0, &name, opts)
            .map(|m| RbDistMutex(m.with_min_replicas_acked(acks)))
            .map_err(|e| core_error(ruby, e))
    }

    fn try_lock(ruby: &Ruby, rb_self: &Self) -> Result<Option<RbMutexHold>, Error> {
        let token = rb_self.0.token();
        let held = acquire(ruby, |intr| rb_self.0.try_lock(intr, &token))
            .inspect_err(|_| rb_self.0.abandon(&token))?;
        Ok(held.map(|h| RbMutexHold::new(h, Instant::now())))
    }

    /// lock(wait_timeout, tally = nil): waits at most `wait_timeout` seconds (nil: as long as it
    /// takes), as DistMutex#lock's keyword says (`timeout:` there is its deprecated name); counts
    /// the grant and its wait in `tally` when given.
    fn lock(ruby: &Ruby, rb_self: &Self, args: &[Value]) -> Result<RbMutexHold, Error> {
        let (wait_timeout, tally): (Option<f64>, _) = with_tally(ruby, args)?;
        let started = tally::started(tally);
        let deadline = deadline(ruby, wait_timeout)?;
        // Unfair mode: a hold a holder of this process parked is taken with the GVL held (it
        // never blocks, as the unlock that parked it): no blocking region, and no token made
        // (the parked hold keeps its cohort's).
        let parked = rb_self
            .0
            .take_parked(deadline)
            .map_err(|e| core_error(ruby, e))?;
        if let Some(held) = parked {
            return Ok(RbMutexHold::new(held, RbTally::acquired(tally, started)));
        }
        let token = rb_self.0.token();
        let held = acquire_until(
            ruby,
            deadline,
            |intr| rb_self.0.lock(intr, &token, deadline),
            || rb_self.0.abandon(&token),
        )?;
        Ok(RbMutexHold::new(held, RbTally::acquired(tally, started)))
    }

    /// unlock(hold, tally = nil): counts the release and its hold time in `tally` when given and
    /// the release succeeded.
    fn unlock(ruby: &Ruby, rb_self: &Self, args: &[Value]) -> Result<(), Error> {
        let (hold, tally): (&RbMutexHold, _) = with_tally(ruby, args)?;
        // A pass to a waiting thread of this process is made with the GVL held (see
        // ConcurrentLimiter#release).
        if hold.held.consume_own(|h| rb_self.0.unlock_locally(h)) {
            hold.answered();
            RbTally::released(tally, hold.granted);
            return Ok(());
        }
        let released = release_once(ruby, &hold.held, |intr, held| rb_self.0.unlock(intr, held));
        hold.answered();
        // Ok(None): nothing was held here (released before, or inherited through fork).
        if let Ok(Some(_)) = released {
            RbTally::released(tally, hold.granted);
        }
        released.map(drop)
    }

    /// Announces the release of a hold whose owner thread or fiber ended, made next by another
    /// thread (`unlock`): until Redis answers it, this process's `locked?` and `try_lock` wait
    /// for it, so no call here sees a dead thread's lock held (as Ruby's Mutex, freed at thread
    /// end). Called as the hold leaves the process's record of holds (lib/ferrolock/dist_mutex/owners.rb).
    fn announce_release(_ruby: &Ruby, rb_self: &Self, hold: &RbMutexHold) -> Result<(), Error> {
        hold.announce(rb_self.0.announce_release());
        Ok(())
    }

    /// DistMutex#sleep's release and wait, in one call that loses no wake-up (see
    /// `release_then_sleep`, and `deferred` there). True when woken or interrupted, false when
    /// `timeout` passed. A release error is raised without waiting; `hold.released_by_sleep?`
    /// tells whether the lock was released (then it must be taken again, whatever was raised).
    /// `tally` (nil: not counted) counts the release as `unlock` does.
    fn release_and_sleep(
        ruby: &Ruby,
        rb_self: &Self,
        hold: &RbMutexHold,
        timeout: Option<f64>,
        deferred: bool,
        tally: Option<&RbTally>,
    ) -> Result<bool, Error> {
        let timeout = timeout.map(|t| wait(ruby, "timeout", t)).transpose()?;
        // Until Redis answered the release: the thread already looks asleep.
        let announced = Mutex::new(Some(rb_self.0.announce_release()));
        let slept = release_then_sleep(
            ruby,
            &hold.held,
            |intr, held| {
                let released = rb_self.0.unlock(intr, held);
                drop(announced.lock().unwrap_or_else(|e| e.into_inner()).take());
                if released.is_ok() {
                    hold.released_by_sleep.store(true, Ordering::SeqCst);
                    RbTally::released(tally, hold.granted);
                }
                released
            },
            timeout,
            deferred,
        )?;
        Ok(slept != Some(Slept::TimedOut))
    }

    fn is_locked(ruby: &Ruby, rb_self: &Self) -> Result<bool, Error> {
        run(ruby, Retry::Idempotent, |intr| rb_self.0.is_locked(intr))
    }
}

pub fn init(ruby: &Ruby, native: RModule) -> Result<(), Error> {
    let class = native.define_class("DistMutex", ruby.class_object())?;
    class.define_singleton_method("new", function!(guard::f9(RbDistMutex::new), 9))?;
    class.define_method("try_lock", method!(guard::f1(RbDistMutex::try_lock), 0))?;
    class.define_method("lock", method!(guard::variadic(RbDistMutex::lock), -1))?;
    class.define_method("unlock", method!(guard::variadic(RbDistMutex::unlock), -1))?;
    class.define_method(
        "release_and_sleep",
        method!(guard::f5(RbDistMutex::release_and_sleep), 4),
    )?;
    class.define_method("locked?", method!(guard::f1(RbDistMutex::is_locked), 0))?;
    class.define_method(
        "announce_release",
        method!(guard::f2(RbDistMutex::announce_release), 1),
    )?;
    let hold = native.define_class("MutexHold", ruby.class_object())?;
    hold.define_method(
        "fencing_token",
        method!(guard::plain1(RbMutexHold::fencing_token), 0),
    )?;
    hold.define_method(
        "released_by_sleep?",
        method!(guard::plain1(RbMutexHold::is_released_by_sleep), 0),
    )?;
    Ok(())
}
