//! UniqueLock: one job per digest (Sidekiq uniqueness, see lib/ferrolock/sidekiq/unique/lock.rb).
//! A single key `<ns>:{<digest>}:lock` holds the jid of the job holding it, always with an
//! expiry. Every change is one script that compares the jid before writing, so a job never
//! frees or extends a lock a duplicate holds now.

pub mod inspect;

use crate::client::{int, text, Client};
use crate::error::{Error, Result};
use crate::interrupt::Interrupt;
use crate::lua_script;
use crate::script::ScriptCall;
use redis::Value;
use std::time::Duration;

lua_script!(TAKE = "unique_lock/take");
lua_script!(RELEASE = "unique_lock/release");
lua_script!(EXPIRE = "unique_lock/expire");
lua_script!(HAND_OVER = "unique_lock/hand_over");

/// unique_lock/take.lua's arguments.
struct TakeArgs<'a> {
    /// The job taking the lock.
    jid: &'a str,
    /// The lock's TTL (ms).
    ttl_ms: u64,
    /// What becomes of a lock this jid holds already.
    on_held: OnHeld,
}

/// take.lua's `on_held`.
#[derive(Clone, Copy)]
enum OnHeld {
    /// "keep": its expiry stays (until_expired).
    Keep,
    /// "set": its expiry becomes `ttl_ms`.
    Set,
}

impl TakeArgs<'_> {
    fn call(&self, key: &str) -> ScriptCall {
        ScriptCall::new(&TAKE)
            .key(key)
            .arg(self.jid)
            .arg(self.ttl_ms)
            .arg(match self.on_held {
                OnHeld::Keep => "keep",
                OnHeld::Set => "set",
            })
    }
}

/// unique_lock/release.lua's arguments.
struct ReleaseArgs<'a> {
    /// The job freeing the lock.
    jid: &'a str,
}

impl ReleaseArgs<'_> {
    fn call(&self, key: &str) -> ScriptCall {
        ScriptCall::new(&RELEASE).key(key).arg(self.jid)
    }
}

/// unique_lock/expire.lua's arguments.
struct ExpireArgs<'a> {
    /// The job holding the lock.
    jid: &'a str,
    /// The lock's TTL from now (ms).
    ttl_ms: u64,
}

impl ExpireArgs<'_> {
    fn call(&self, key: &str) -> ScriptCall {
        ScriptCall::new(&EXPIRE)
            .key(key)
            .arg(self.jid)
            .arg(self.ttl_ms)
    }
}

/// unique_lock/hand_over.lua's arguments.
struct HandOverArgs<'a> {
    /// The job holding the lock.
    jid: &'a str,
    /// The job it goes to.
    new_jid: &'a str,
    /// The lock's TTL from now (ms).
    ttl_ms: u64,
}

impl HandOverArgs<'_> {
    fn call(&self, key: &str) -> ScriptCall {
        ScriptCall::new(&HAND_OVER)
            .key(key)
            .arg(self.jid)
            .arg(self.new_jid)
            .arg(self.ttl_ms)
    }
}

#[derive(Clone)]
pub struct UniqueLock {
    client: Client,
    key: String,
}

impl UniqueLock {
    pub fn new(client: &Client, digest: &str) -> Result<UniqueLock> {
        crate::keys::check_name("digest", digest)?;
        Ok(UniqueLock {
            client: client.clone(),
            key: client.keys(digest)?.part("lock"),
        })
    }

    /// The same lock on a key taken as it is, outside the namespace: another gem's key (the
    /// activejob-uniqueness drop-in takes `activejob_uniqueness:<class>:<digest>` the way that gem's
    /// Redlock does, SET NX PX, so both gems exclude each other during a rolling deploy).
    pub fn at_key(client: &Client, key: &str) -> Result<UniqueLock> {
        if key.is_empty() {
            return Err(Error::argument("key: must not be empty"));
        }
        Ok(UniqueLock {
            client: client.clone(),
            key: key.to_string(),
        })
    }

    /// `<ns>:{<digest>}:lock`, or the key given to `at_key`.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// `None` when `jid` holds the lock now (for `ttl`), else the jid holding it. With `keep`, a
    /// lock `jid` already holds keeps its expiry (until_expired).
    pub fn take(
        &self,
        intr: &Interrupt,
        jid: &str,
        ttl: Duration,
        keep: bool,
    ) -> Result<Option<String>> {
        let call = TakeArgs {
            jid: check_jid("jid", jid)?,
            ttl_ms: ttl_ms(ttl)?,
            on_held: if keep { OnHeld::Keep } else { OnHeld::Set },
        }
        .call(&self.key);
        match self.client.eval(intr, &call)? {
            Value::Nil => Ok(None),
            reply => text(&reply)
                .map(Some)
                .ok_or_else(|| unexpected("take", &reply)),
        }
    }

    /// True when `jid` held the lock and it is now free.
    pub fn release(&self, intr: &Interrupt, jid: &str) -> Result<bool> {
        let call = ReleaseArgs {
            jid: check_jid("jid", jid)?,
        }
        .call(&self.key);
        Ok(int(&self.client.eval(intr, &call)?)? == 1)
    }

    /// Sets the lock's expiry to `ttl` from now if `jid` holds it; false when it does not.
    pub fn expire(&self, intr: &Interrupt, jid: &str, ttl: Duration) -> Result<bool> {
        let call = ExpireArgs {
            jid: check_jid("jid", jid)?,
            ttl_ms: ttl_ms(ttl)?,
        }
        .call(&self.key);
        Ok(int(&self.client.eval(intr, &call)?)? == 1)
    }

    /// Hands the lock from `from_jid` to `to_jid` for `ttl` (on_conflict: :replace); false
    /// when `from_jid` no longer holds it.
    pub fn hand_over(
        &self,
        intr: &Interrupt,
        from_jid: &str,
        to_jid: &str,
        ttl: Duration,
    ) -> Result<bool> {
        let call = HandOverArgs {
            jid: check_jid("from_jid", from_jid)?,
            new_jid: check_jid("to_jid", to_jid)?,
            ttl_ms: ttl_ms(ttl)?,
        }
        .call(&self.key);
        Ok(int(&self.client.eval(intr, &call)?)? == 1)
    }

    /// The jid holding the lock, if any.
    pub fn holder(&self, intr: &Interrupt) -> Result<Option<String>> {
        let reply = self
            .client
            .command(intr, &[b"GET".to_vec(), self.key.as_bytes().to_vec()])?;
        match reply {
            Value::Nil => Ok(None),
            reply => text(&reply)
                .map(Some)
                .ok_or_else(|| unexpected("holder", &reply)),
        }
    }
}

/// An empty jid would make "held by nobody" and "held by this job" look alike to the scripts.
fn check_jid<'a>(arg: &str, jid: &'a str) -> Result<&'a str> {
    if jid.is_empty() {
        return Err(Error::argument(format!("{arg}: must not be empty")));
    }
    Ok(jid)
}

fn ttl_ms(ttl: Duration) -> Result<u64> {
    Ok(crate::seconds::millis(crate::seconds::check_span(
        "ttl", ttl,
    )?))
}

fn unexpected(op: &str, reply: &Value) -> Error {
    Error::Redis(format!("unique_lock/{op}: unexpected reply {reply:?}"))
}
