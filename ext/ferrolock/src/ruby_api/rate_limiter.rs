//! `Ferrolock::Native::RateLimiter` (see lib/ferrolock/rate_limiter.rb, which adds the
//! constructors, within_limit, OverLimit and events), and the definitions of the app's live
//! RateLimiters for the operators' view.

use crate::errors::{core_error, seconds};
use crate::guard;
use crate::nogvl::{run, Retry};
use crate::ruby_api::client::RbClient;
use crate::wait_timeout::{acquire_until, deadline};
use ferrolock_core::{Algorithm, Attempt, RateLimiter};
use magnus::{function, method, prelude::*, Error, RModule, Ruby};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{LazyLock, Mutex, MutexGuard};
use std::time::{Duration, Instant};

#[magnus::wrap(class = "Ferrolock::Native::RateLimiter", free_immediately, size)]
pub struct RbRateLimiter {
    limiter: RateLimiter,
    /// What `new` was given, for `record_definition`.
    definition: Definition,
    /// Its entry in DEFINITIONS (0: none), taken out when Ruby frees the object.
    recorded: AtomicU64,
}

/// A RateLimiter as the app defined it: Redis keeps only its state (admin/rate_info.rb).
#[derive(Clone)]
struct Definition {
    namespace: String,
    name: String,
    kind: String,
    count: u32,
    interval: Duration,
    burst: u32,
}

/// The live app RateLimiters of this process, by entry id. Weak by construction: an entry lives
/// as long as its native object (not an ObjectSpace::WeakMap: under heavy churn it was the
/// suspect of GC crashes on Ruby 3.3). Only touched with the GVL held (`new`, `definitions`, and the
/// free function, which Ruby's GC runs), and nothing calls Ruby while holding it.
static DEFINITIONS: LazyLock<Mutex<Definitions>> = LazyLock::new(Mutex::default);

#[derive(Default)]
struct Definitions {
    by_id: HashMap<u64, Definition>,
    next_id: u64,
}

fn definitions() -> MutexGuard<'static, Definitions> {
    DEFINITIONS.lock().unwrap_or_else(|e| e.into_inner())
}

impl Drop for RbRateLimiter {
    fn drop(&mut self) {
        let id = *self.recorded.get_mut();
        if id != 0 {
            definitions().by_id.remove(&id);
        }
    }
}

fn positive_u32(ruby: &Ruby, arg: &str, n: i64, min: i64) -> Result<u32, Error> {
    u32::try_from(n)
        .ok()
        .filter(|v| i64::from(*v) >= min)
        .ok_or_else(|| {
            Error::new(
                ruby.exception_arg_error(),
                format!("{arg}: must be an integer of at least {min}, got {n}"),
            )
        })
}

impl RbRateLimiter {
    /// kind: "window", "sliding_window", "bucket", "leaky" or "points"; burst is used by
    /// "leaky" only.
    fn new(
        ruby: &Ruby,
        client: &RbClient,
        name: String,
        kind: String,
        count: i64,
        interval: f64,
        burst: i64,
    ) -> Result<Self, Error> {
        let count = positive_u32(ruby, "count", count, 1)?;
        let burst = positive_u32(ruby, "burst", burst, 0)?;
        let algorithm = match kind.as_str() {
            "window" => Algorithm::Window,
            "sliding_window" => Algorithm::SlidingWindow,
            "bucket" => Algorithm::Bucket,
            "leaky" => Algorithm::Leaky { burst },
            "points" => Algorithm::Points,
            other => {
                return Err(Error::new(
                    ruby.exception_arg_error(),
                    format!("kind: unknown rate limiter kind {other:?}"),
                ))
            }
        };
        let interval = seconds(ruby, "interval", interval)?;
        let limiter = RateLimiter::new(&client.0, &name, algorithm, count, interval)
            .map_err(|e| core_error(ruby, e))?;
        let definition = Definition {
            namespace: client.0.namespace().to_string(),
            name,
            kind,
            count,
            interval,
            burst,
        };
        Ok(RbRateLimiter {
            limiter,
            definition,
            recorded: AtomicU64::new(0),
        })
    }

    /// Lists this limiter among the app's definitions (`definitions`) while it lives. Only the
    /// app's RateLimiter objects are recorded, not the operators' view's own native ones.
    fn record_definition(&self) {
        if self.recorded.load(Ordering::Relaxed) != 0 {
            return;
        }
        let mut all = definitions();
        all.next_id += 1;
        let id = all.next_id;
        all.by_id.insert(id, self.definition.clone());
        self.recorded.store(id, Ordering::Relaxed);
    }

    /// [[name, kind, count, interval (seconds), burst], ...] of the live recorded limiters in
    /// `namespace`: for each name and kind, the one with the largest count.
    fn definitions(namespace: String) -> Vec<(String, String, u32, f64, u32)> {
        let all = definitions();
        let mut largest: HashMap<(&str, &str), &Definition> = HashMap::new();
        for d in all.by_id.values().filter(|d| d.namespace == namespace) {
            let kept = largest.entry((&d.name, &d.kind)).or_insert(d);
            if d.count > kept.count {
                *kept = d;
            }
        }
        largest
            .into_values()
            .map(|d| {
                let interval = d.interval.as_secs_f64();
                (d.name.clone(), d.kind.clone(), d.count, interval, d.burst)
            })
            .collect()
    }

    /// [true, slot (Redis time, seconds), remaining, id] once the call's slot has come, or
    /// [false, retry_after (seconds)]: reserves the first slot within `wait_timeout` seconds
    /// (0: only one free now) and sleeps until it. A wait ended by an exception gives the slot
    /// back (when safe) before raising; the id lets Ruby give back a slot it then abandons.
    fn acquire(
        ruby: &Ruby,
        rb_self: &Self,
        cost: i64,
        wait_timeout: f64,
    ) -> Result<magnus::RArray, Error> {
        let cost = positive_u32(ruby, "cost", cost, 1)?;
        let deadline = deadline(ruby, Some(wait_timeout))?;
        let ends = deadline.unwrap_or_else(Instant::now);
        let claim = Mutex::new(
            rb_self
                .limiter
                .claim(cost)
                .map_err(|e| core_error(ruby, e))?,
        );
        let lock = || claim.lock().unwrap_or_else(|e| e.into_inner());
        // Run again after a signal or Thread#wakeup cut it short, the same claim waits for the
        // slot it already reserved.
        let attempt = acquire_until(
            ruby,
            deadline,
            |intr| rb_self.limiter.acquire(intr, &mut lock(), ends),
            || rb_self.limiter.refund(&lock()),
        )?;
        let reply = ruby.ary_new();
        match attempt {
            Attempt::Granted(grant) => {
                reply.push(true)?;
                reply.push(grant.at_us as f64 / 1e6)?;
                reply.push(grant.remaining)?;
                reply.push(lock().id().to_string())?;
            }
            Attempt::Refused { retry_after } => {
                reply.push(false)?;
                reply.push(retry_after.as_secs_f64())?;
            }
        }
        Ok(reply)
    }

    /// Gives back the slot of a granted call that will not run (see RateLimiter::refund).
    fn refund(ruby: &Ruby, rb_self: &Self, id: String, cost: i64) -> Result<(), Error> {
        let cost = positive_u32(ruby, "cost", cost, 1)?;
        rb_self.limiter.refund_id(&id, cost);
        Ok(())
    }

    /// [remaining, reset_in (seconds)]
    fn status(ruby: &Ruby, rb_self: &Self) -> Result<(u64, f64), Error> {
        let st = run(ruby, Retry::Idempotent, |intr| rb_self.limiter.status(intr))?;
        Ok((st.remaining, st.reset_in.as_secs_f64()))
    }

    fn key(&self) -> String {
        self.limiter.key().to_string()
    }
}

pub fn init(ruby: &Ruby, native: RModule) -> Result<(), Error> {
    let class = native.define_class("RateLimiter", ruby.class_object())?;
    class.define_singleton_method("new", function!(guard::f6(RbRateLimiter::new), 6))?;
    class.define_method("acquire", method!(guard::f3(RbRateLimiter::acquire), 2))?;
    class.define_method("refund", method!(guard::f3(RbRateLimiter::refund), 2))?;
    class.define_method("status", method!(guard::f1(RbRateLimiter::status), 0))?;
    class.define_method("key", method!(guard::plain1(RbRateLimiter::key), 0))?;
    class.define_method(
        "record_definition",
        method!(guard::plain1(RbRateLimiter::record_definition), 0),
    )?;
    class.define_singleton_method(
        "definitions",
        function!(guard::plain1(RbRateLimiter::definitions), 1),
    )?;
    Ok(())
}
