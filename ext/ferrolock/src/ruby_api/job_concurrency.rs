//! `Ferrolock::Native::JobConcurrency` and the performing job's slot it hands out (see
//! lib/ferrolock/active_job/slots.rb, which checks the arguments the Ruby way first).

use crate::errors::{core_error, seconds};
use crate::guard;
use crate::held_cell::HeldCell;
use crate::nogvl::{release_once, run, Retry};
use crate::ruby_api::client::RbClient;
use ferrolock_core::concurrent_limiter::OverrideAction;
use ferrolock_core::job_concurrency::Running;
use ferrolock_core::{JobConcurrency, OnConflict, Outcome, Promoted, Request};
use magnus::{function, method, prelude::*, Error, IntoValue, RArray, RModule, Ruby, Value};

#[magnus::wrap(class = "Ferrolock::Native::JobConcurrency", free_immediately, size)]
pub struct RbJobConcurrency(JobConcurrency);

/// A performing job's slot. Garbage-collected without release (a crash of the Ruby code around
/// it), it stops being renewed and frees itself after its lease.
#[magnus::wrap(class = "Ferrolock::Native::JobSlot", free_immediately, size)]
pub struct RbJobSlot(HeldCell<Running>);

impl RbJobSlot {
    fn is_lost(&self) -> bool {
        self.0.lock().as_ref().is_some_and(Running::is_lost)
    }

    fn fence(&self) -> Option<i64> {
        self.0.lock().as_ref().map(|r| r.fence)
    }
}

fn promoted_array(ruby: &Ruby, promoted: Vec<Promoted>) -> RArray {
    let out = ruby.ary_new_capa(promoted.len());
    for p in promoted {
        // (push to a fresh array cannot fail)
        let _ = out.push((p.job_id, p.payload, p.promotion));
    }
    out
}

impl RbJobConcurrency {
    fn new(ruby: &Ruby, client: &RbClient) -> Result<Self, Error> {
        JobConcurrency::new(&client.0)
            .map(RbJobConcurrency)
            .map_err(|e| core_error(ruby, e))
    }

    /// [outcome, fencing token, blocked count, [[job_id, payload, promotion], ...]]; outcome is
    /// :held, :blocked, :waiting, :discarded, :full or :duplicate (at perform: a copy of another
    /// promotion of the job started already). `policy` is [to, duration, on_conflict,
    /// max_blocked]; `promotion` the one this copy of the job carries (0: none). Idempotent: sent
    /// again after an interruption, a job finds the slot or the place it was given.
    #[allow(clippy::too_many_arguments)] // the Ruby method's arguments
    fn admit(
        ruby: &Ruby,
        rb_self: &Self,
        key: String,
        job_id: String,
        payload: String,
        at_perform: bool,
        policy: (u32, f64, String, u32),
        promotion: u64,
    ) -> Result<RArray, Error> {
        let (limit, lease, on_conflict, max_blocked) = policy;
        let lease = seconds(ruby, "duration", lease)?;
        let on_conflict = match on_conflict.as_str() {
            "block" => OnConflict::Block,
            "discard" => OnConflict::Discard,
            other => {
                return Err(Error::new(
                    ruby.exception_arg_error(),
                    format!("on_conflict must be :block or :discard, got {other:?}"),
                ))
            }
        };
        let req = Request {
            key: &key,
            job_id: &job_id,
            limit,
            lease,
            on_conflict,
            payload: &payload,
            max_blocked,
            at_perform,
            promotion,
        };
        let admitted = run(ruby, Retry::Idempotent, |intr| rb_self.0.admit(intr, &req))?;
        let outcome = match admitted.outcome {
            Outcome::Held => "held",
            Outcome::Blocked => "blocked",
            Outcome::Waiting => "waiting",
            Outcome::Discarded => "discarded",
            Outcome::Full => "full",
            Outcome::Duplicate => "duplicate",
        };
        let out = ruby.ary_new_capa(4);
        out.push(ruby.to_symbol(outcome))?;
        out.push(admitted.fence)?;
        out.push(admitted.blocked)?;
        out.push(promoted_array(ruby, admitted.promoted))?;
        Ok(out)
    }

    /// Starts renewing the slot of a job admitted at perform.
    fn running(
        ruby: &Ruby,
        rb_self: &Self,
        key: String,
        job_id: String,
        lease: f64,
        fence: i64,
    ) -> Result<Value, Error> {
        let lease = seconds(ruby, "duration", lease)?;
        let running = rb_self
            .0
            .running(&key, &job_id, lease, fence)
            .map_err(|e| core_error(ruby, e))?;
        Ok(RbJobSlot(HeldCell::new(running)).into_value_with(ruby))
    }

    /// [held, [[job_id, payload, promotion], ...]]; nil when this slot was released or kept already.
    fn release(
        ruby: &Ruby,
        rb_self: &Self,
        slot: &RbJobSlot,
        limit: Option<u32>,
    ) -> Result<Option<RArray>, Error> {
        let released = release_once(ruby, &slot.0, |intr, r| rb_self.0.release(intr, r, limit))?;
        released
            .map(|r| {
                let out = ruby.ary_new_capa(2);
                out.push(r.held)?;
                out.push(promoted_array(ruby, r.promoted))?;
                Ok(out)
            })
            .transpose()
    }

    /// [held, [[job_id, payload, promotion], ...]]: the slot of a job that will not perform, given
    /// back (promotion: the copy's, 0: none).
    fn give_back(
        ruby: &Ruby,
        rb_self: &Self,
        key: String,
        job_id: String,
        limit: Option<u32>,
        promotion: u64,
    ) -> Result<RArray, Error> {
        let released = run(ruby, Retry::Once, |intr| {
            rb_self.0.give_back(intr, &key, &job_id, limit, promotion)
        })?;
        let out = ruby.ary_new_capa(2);
        out.push(released.held)?;
        out.push(promoted_array(ruby, released.promoted))?;
        Ok(out)
    }

    /// Stops renewing and leaves the slot held for its resumption (see Running).
    fn keep(_ruby: &Ruby, _rb_self: &Self, slot: &RbJobSlot) -> Result<bool, Error> {
        Ok(slot.0.take_own().map(Running::hand_to_resumption).is_some())
    }

    /// [[job_id, payload, promotion], ...]: blocked jobs promoted into slots whose lease ran out; `claim`
    /// as `due` gave it.
    fn reap(ruby: &Ruby, rb_self: &Self, key: String, claim: i64) -> Result<RArray, Error> {
        let promoted = run(ruby, Retry::Once, |intr| rb_self.0.reap(intr, &key, claim))?;
        Ok(promoted_array(ruby, promoted))
    }

    /// [key names due, their claim, seconds until the next entry is due or nil].
    fn due(
        ruby: &Ruby,
        rb_self: &Self,
        recheck: f64,
    ) -> Result<(Vec<String>, i64, Option<f64>), Error> {
        let recheck = seconds(ruby, "recheck", recheck)?;
        let (names, claim, next) = run(ruby, Retry::Once, |intr| rb_self.0.due(intr, recheck))?;
        Ok((names, claim, next.map(|d| d.as_secs_f64())))
    }

    /// write_override(key, action, limit): the operators' override of limits_concurrency `key`
    /// changed ("set_limit" with a limit, "pause", "resume", "clear"), as [limit or nil, paused]
    /// now in force; blocked jobs it lets in are promoted by the timers' next visit.
    fn write_override(
        ruby: &Ruby,
        rb_self: &Self,
        key: String,
        action: String,
        limit: Option<i64>,
    ) -> Result<(Option<u32>, bool), Error> {
        let action = OverrideAction::parse(&action, limit).map_err(|e| core_error(ruby, e))?;
        let now = run(ruby, Retry::Idempotent, |intr| {
            rb_self.0.write_override(intr, &key, action)
        })?;
        Ok((now.limit, now.paused))
    }

    fn key_part(ruby: &Ruby, rb_self: &Self, key: String, part: String) -> Result<String, Error> {
        rb_self
            .0
            .key_part(&key, &part)
            .map_err(|e| core_error(ruby, e))
    }

    fn due_key(&self) -> String {
        self.0.due_key().to_string()
    }
}

pub fn init(ruby: &Ruby, native: RModule) -> Result<(), Error> {
    let class = native.define_class("JobConcurrency", ruby.class_object())?;
    class.define_singleton_method("new", function!(guard::f1(RbJobConcurrency::new), 1))?;
    class.define_method("admit", method!(guard::f7(RbJobConcurrency::admit), 6))?;
    class.define_method("running", method!(guard::f5(RbJobConcurrency::running), 4))?;
    class.define_method("release", method!(guard::f3(RbJobConcurrency::release), 2))?;
    class.define_method(
        "give_back",
        method!(guard::f5(RbJobConcurrency::give_back), 4),
    )?;
    class.define_method("keep", method!(guard::f2(RbJobConcurrency::keep), 1))?;
    class.define_method("reap", method!(guard::f3(RbJobConcurrency::reap), 2))?;
    class.define_method("due", method!(guard::f2(RbJobConcurrency::due), 1))?;
    class.define_method(
        "write_override",
        method!(guard::f4(RbJobConcurrency::write_override), 3),
    )?;
    class.define_method(
        "key_part",
        method!(guard::f3(RbJobConcurrency::key_part), 2),
    )?;
    class.define_method(
        "due_key",
        method!(guard::plain1(RbJobConcurrency::due_key), 0),
    )?;
    let slot = native.define_class("JobSlot", ruby.class_object())?;
    slot.define_method("lost?", method!(guard::plain1(RbJobSlot::is_lost), 0))?;
    slot.define_method("fence", method!(guard::plain1(RbJobSlot::fence), 0))?;
    Ok(())
}
