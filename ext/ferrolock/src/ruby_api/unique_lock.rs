//! `Ferrolock::Native::UniqueLock` (see lib/ferrolock/sidekiq/unique/lock.rb, which checks the
//! arguments the Ruby way first) and `Ferrolock::Native::KeyLock`, the same lock on a key taken
//! as it is (see lib/ferrolock/active_job/uniqueness/key_lock.rb).

use crate::errors::{core_error, seconds};
use crate::guard;
use crate::nogvl::{run, Retry};
use crate::ruby_api::client::RbClient;
use ferrolock_core::UniqueLock;
use magnus::{function, method, prelude::*, Error, RClass, RModule, Ruby};

#[magnus::wrap(class = "Ferrolock::Native::UniqueLock", free_immediately, size)]
pub struct RbUniqueLock(UniqueLock);

#[magnus::wrap(class = "Ferrolock::Native::KeyLock", free_immediately, size)]
pub struct RbKeyLock(UniqueLock);

/// Both classes' methods are the lock's.
trait Held {
    fn lock(&self) -> &UniqueLock;
}

impl Held for RbUniqueLock {
    fn lock(&self) -> &UniqueLock {
        &self.0
    }
}

impl Held for RbKeyLock {
    fn lock(&self) -> &UniqueLock {
        &self.0
    }
}

impl RbUniqueLock {
    fn new(ruby: &Ruby, client: &RbClient, digest: String) -> Result<Self, Error> {
        UniqueLock::new(&client.0, &digest)
            .map(RbUniqueLock)
            .map_err(|e| core_error(ruby, e))
    }
}

impl RbKeyLock {
    fn new(ruby: &Ruby, client: &RbClient, key: String) -> Result<Self, Error> {
        UniqueLock::at_key(&client.0, &key)
            .map(RbKeyLock)
            .map_err(|e| core_error(ruby, e))
    }
}

// Retry after an interruption that raised nothing: take and expire write the same value and
// expiry again (idempotent); release and hand_over would find their own write and report
// false, so they fail with "interrupted before Redis answered" instead (as Client#call does).

/// nil when jid holds the lock now, else the jid holding it.
fn take<T: Held>(
    ruby: &Ruby,
    rb_self: &T,
    jid: String,
    ttl: f64,
    keep: bool,
) -> Result<Option<String>, Error> {
    let ttl = seconds(ruby, "ttl", ttl)?;
    run(ruby, Retry::Idempotent, |intr| {
        rb_self.lock().take(intr, &jid, ttl, keep)
    })
}

fn release<T: Held>(ruby: &Ruby, rb_self: &T, jid: String) -> Result<bool, Error> {
    run(ruby, Retry::Once, |intr| rb_self.lock().release(intr, &jid))
}

fn expire<T: Held>(ruby: &Ruby, rb_self: &T, jid: String, ttl: f64) -> Result<bool, Error> {
    let ttl = seconds(ruby, "ttl", ttl)?;
    run(ruby, Retry::Idempotent, |intr| {
        rb_self.lock().expire(intr, &jid, ttl)
    })
}

fn hand_over<T: Held>(
    ruby: &Ruby,
    rb_self: &T,
    from_jid: String,
    to_jid: String,
    ttl: f64,
) -> Result<bool, Error> {
    let ttl = seconds(ruby, "ttl", ttl)?;
    run(ruby, Retry::Once, |intr| {
        rb_self.lock().hand_over(intr, &from_jid, &to_jid, ttl)
    })
}

fn holder<T: Held>(ruby: &Ruby, rb_self: &T) -> Result<Option<String>, Error> {
    run(ruby, Retry::Idempotent, |intr| rb_self.lock().holder(intr))
}

fn key<T: Held>(rb_self: &T) -> String {
    rb_self.lock().key().to_string()
}

macro_rules! define_lock_methods {
    ($class:expr, $ty:ty) => {{
        let class: RClass = $class;
        class.define_method("take", method!(guard::f4(take::<$ty>), 3))?;
        class.define_method("release", method!(guard::f2(release::<$ty>), 1))?;
        class.define_method("expire", method!(guard::f3(expire::<$ty>), 2))?;
        class.define_method("hand_over", method!(guard::f4(hand_over::<$ty>), 3))?;
        class.define_method("holder", method!(guard::f1(holder::<$ty>), 0))?;
        class.define_method("key", method!(guard::plain1(key::<$ty>), 0))?;
    }};
}

pub fn init(ruby: &Ruby, native: RModule) -> Result<(), Error> {
    let class = native.define_class("UniqueLock", ruby.class_object())?;
    class.define_singleton_method("new", function!(guard::f2(RbUniqueLock::new), 2))?;
    define_lock_methods!(class, RbUniqueLock);
    let class = native.define_class("KeyLock", ruby.class_object())?;
    class.define_singleton_method("new", function!(guard::f2(RbKeyLock::new), 2))?;
    define_lock_methods!(class, RbKeyLock);
    Ok(())
}
