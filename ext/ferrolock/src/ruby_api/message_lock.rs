//! `Ferrolock::Native::MessageLock` and the in-progress lease it hands out (see
//! lib/ferrolock/shoryuken/message_lock.rb).

use crate::errors::{core_error, seconds};
use crate::guard;
use crate::held_cell::HeldCell;
use crate::nogvl::{acquire, release_once};
use crate::ruby_api::client::RbClient;
use ferrolock_core::message_lock::Running;
use ferrolock_core::{Begin, Finish, MessageLock, MessageLockOptions};
use magnus::{function, method, prelude::*, Error, IntoValue, RModule, Ruby, Value};

#[magnus::wrap(class = "Ferrolock::Native::MessageLock", free_immediately, size)]
pub struct RbMessageLock(MessageLock);

/// One delivery's lease. Garbage-collected without finish/abort (a crash of the Ruby code
/// around it), it stops being renewed and expires after lease.
#[magnus::wrap(class = "Ferrolock::Native::MessageLease", free_immediately, size)]
pub struct RbMessageLease(HeldCell<Running>);

impl RbMessageLease {
    fn is_lost(&self) -> bool {
        self.0.lock().as_ref().is_some_and(Running::is_lost)
    }
}

impl RbMessageLock {
    fn new(ruby: &Ruby, client: &RbClient, lease: f64, processed_ttl: f64) -> Result<Self, Error> {
        let opts = MessageLockOptions {
            lease: seconds(ruby, "lease", lease)?,
            processed_ttl: seconds(ruby, "processed_ttl", processed_ttl)?,
        };
        MessageLock::new(&client.0, opts)
            .map(RbMessageLock)
            .map_err(|e| core_error(ruby, e))
    }

    /// A MessageLease (run the job), or :processed / :in_progress (skip it).
    fn begin_message(
        ruby: &Ruby,
        rb_self: &Self,
        queue: String,
        message_id: String,
    ) -> Result<Value, Error> {
        let token = MessageLock::new_token();
        // Idempotent: a retry with the same token finds its own lease.
        let begin = acquire(ruby, |intr| {
            rb_self.0.begin(intr, &queue, &message_id, &token)
        })
        .inspect_err(|_| rb_self.0.abandon(&queue, &message_id, &token))?;
        Ok(match begin {
            Begin::Run(running) => RbMessageLease(HeldCell::new(running)).into_value_with(ruby),
            Begin::Processed => ruby.to_symbol("processed").as_value(),
            Begin::InProgress => ruby.to_symbol("in_progress").as_value(),
        })
    }

    /// :marked, :lapsed or :lost (see Finish); nil when this lease was already used.
    fn finish(ruby: &Ruby, rb_self: &Self, lease: &RbMessageLease) -> Result<Option<Value>, Error> {
        let outcome = release_once(ruby, &lease.0, |intr, r| rb_self.0.finish(intr, r))?;
        Ok(outcome.map(|f| {
            let name = match f {
                Finish::Marked => "marked",
                Finish::Lapsed => "lapsed",
                Finish::Lost => "lost",
            };
            ruby.to_symbol(name).as_value()
        }))
    }

    /// True when the lease was still ours and is now dropped.
    fn abort_message(ruby: &Ruby, rb_self: &Self, lease: &RbMessageLease) -> Result<bool, Error> {
        Ok(release_once(ruby, &lease.0, |intr, r| rb_self.0.abort(intr, r))?.unwrap_or(false))
    }

    fn state_key(
        ruby: &Ruby,
        rb_self: &Self,
        queue: String,
        message_id: String,
    ) -> Result<String, Error> {
        rb_self
            .0
            .state_key(&queue, &message_id)
            .map_err(|e| core_error(ruby, e))
    }

    fn lease(&self) -> f64 {
        self.0.lease().as_secs_f64()
    }

    fn processed_ttl(&self) -> f64 {
        self.0.processed_ttl().as_secs_f64()
    }
}

pub fn init(ruby: &Ruby, native: RModule) -> Result<(), Error> {
    let class = native.define_class("MessageLock", ruby.class_object())?;
    class.define_singleton_method("new", function!(guard::f3(RbMessageLock::new), 3))?;
    class.define_method(
        "begin_message",
        method!(guard::f3(RbMessageLock::begin_message), 2),
    )?;
    class.define_method("finish", method!(guard::f2(RbMessageLock::finish), 1))?;
    class.define_method(
        "abort_message",
        method!(guard::f2(RbMessageLock::abort_message), 1),
    )?;
    class.define_method("state_key", method!(guard::f3(RbMessageLock::state_key), 2))?;
    class.define_method("lease", method!(guard::plain1(RbMessageLock::lease), 0))?;
    class.define_method(
        "processed_ttl",
        method!(guard::plain1(RbMessageLock::processed_ttl), 0),
    )?;
    let lease = native.define_class("MessageLease", ruby.class_object())?;
    lease.define_method("lost?", method!(guard::plain1(RbMessageLease::is_lost), 0))?;
    Ok(())
}
