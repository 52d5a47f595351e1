//! `Ferrolock::Native::UniqueLock` (see lib/ferrolock/sidekiq/unique/lock.rb, which checks the
//! arguments the Ruby way first).

use crate::errors::{core_error, seconds};
use crate::guard;
use crate::nogvl::{run, Retry};
use crate::ruby_api::client::RbClient;
use ferrolock_core::unique_lock::UniqueLock;
use magnus::{function, method, prelude::*, Error, RModule, Ruby};

#[magnus::wrap(class = "Ferrolock::Native::UniqueLock", free_immediately, size)]
pub struct RbUniqueLock(UniqueLock);

// Retry after an interruption that raised nothing: take and expire write the same value and
// expiry again (idempotent); release and hand_over would find their own write and report
// false, so they fail with "interrupted before Redis answered" instead (as Client#call does).
impl RbUniqueLock {
    fn new(ruby: &Ruby, client: &RbClient, digest: String) -> Result<Self, Error> {
        UniqueLock::new(&client.0, &digest)
            .map(RbUniqueLock)
            .map_err(|e| core_error(ruby, e))
    }

    /// nil when jid holds the lock now, else the jid holding it.
    fn take(
        ruby: &Ruby,
        rb_self: &Self,
        jid: String,
        ttl: f64,
        keep: bool,
    ) -> Result<Option<String>, Error> {
        let ttl = seconds(ruby, "ttl", ttl)?;
        run(ruby, Retry::Idempotent, |intr| {
            rb_self.0.take(intr, &jid, ttl, keep)
        })
    }

    fn release(ruby: &Ruby, rb_self: &Self, jid: String) -> Result<bool, Error> {
        run(ruby, Retry::Once, |intr| rb_self.0.release(intr, &jid))
    }

    fn expire(ruby: &Ruby, rb_self: &Self, jid: String, ttl: f64) -> Result<bool, Error> {
        let ttl = seconds(ruby, "ttl", ttl)?;
        run(ruby, Retry::Idempotent, |intr| {
            rb_self.0.expire(intr, &jid, ttl)
        })
    }

    fn hand_over(
        ruby: &Ruby,
        rb_self: &Self,
        from_jid: String,
        to_jid: String,
        ttl: f64,
    ) -> Result<bool, Error> {
        let ttl = seconds(ruby, "ttl", ttl)?;
        run(ruby, Retry::Once, |intr| {
            rb_self.0.hand_over(intr, &from_jid, &to_jid, ttl)
        })
    }

    fn holder(ruby: &Ruby, rb_self: &Self) -> Result<Option<String>, Error> {
        run(ruby, Retry::Idempotent, |intr| rb_self.0.holder(intr))
    }

    fn key(&self) -> String {
        self.0.key().to_string()
    }
}

pub fn init(ruby: &Ruby, native: RModule) -> Result<(), Error> {
    let class = native.define_class("UniqueLock", ruby.class_object())?;
    class.define_singleton_method("new", function!(guard::f2(RbUniqueLock::new), 2))?;
    class.define_method("take", method!(guard::f4(RbUniqueLock::take), 3))?;
    class.define_method("release", method!(guard::f2(RbUniqueLock::release), 1))?;
    class.define_method("expire", method!(guard::f3(RbUniqueLock::expire), 2))?;
    class.define_method("hand_over", method!(guard::f4(RbUniqueLock::hand_over), 3))?;
    class.define_method("holder", method!(guard::f1(RbUniqueLock::holder), 0))?;
    class.define_method("key", method!(guard::plain1(RbUniqueLock::key), 0))?;
    Ok(())
}
