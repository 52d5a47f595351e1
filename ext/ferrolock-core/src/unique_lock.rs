//! UniqueLock: one job per digest (Sidekiq uniqueness, see lib/ferrolock/sidekiq/unique/lock.rb).
//! A single key `<ns>:{<digest>}:lock` holds the jid of the job holding it, always with an
//! expiry. Every change is one script that compares the jid before writing, so a job never
//! frees or extends a lock a duplicate holds now.

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

    /// `<ns>:{<digest>}:lock`
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
        let call = ScriptCall::new(&TAKE)
            .key(&self.key)
            .arg(check_jid("jid", jid)?)
            .arg(ttl_ms(ttl)?)
            .arg(if keep { "keep" } else { "set" });
        match self.client.eval(intr, &call)? {
            Value::Nil => Ok(None),
            reply => text(&reply)
                .map(Some)
                .ok_or_else(|| unexpected("take", &reply)),
        }
    }

    /// True when `jid` held the lock and it is now free.
    pub fn release(&self, intr: &Interrupt, jid: &str) -> Result<bool> {
        let call = ScriptCall::new(&RELEASE)
            .key(&self.key)
            .arg(check_jid("jid", jid)?);
        Ok(int(&self.client.eval(intr, &call)?)? == 1)
    }

    /// Sets the lock's expiry to `ttl` from now if `jid` holds it; false when it does not.
    pub fn expire(&self, intr: &Interrupt, jid: &str, ttl: Duration) -> Result<bool> {
        let call = ScriptCall::new(&EXPIRE)
            .key(&self.key)
            .arg(check_jid("jid", jid)?)
            .arg(ttl_ms(ttl)?);
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
        let call = ScriptCall::new(&HAND_OVER)
            .key(&self.key)
            .arg(check_jid("from_jid", from_jid)?)
            .arg(check_jid("to_jid", to_jid)?)
            .arg(ttl_ms(ttl)?);
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
