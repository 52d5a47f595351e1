//! Admin's read of a Sidekiq uniqueness digest (inspect.rs): the push-time lock
//! `<ns>:{<digest>}:lock` (the holding job's jid) and the run-time lock on `<digest>:run`, a
//! DistMutex (while_executing) or a DualLock (until_and_while_executing). Digests are
//! `unique:<job class>:<SHA-256 hex>` (lib/ferrolock/sidekiq/unique/digest.rb).

use crate::client::Client;
use crate::error::Result;
use crate::inspect::{tokens, Field, Record, TokenKey};
use crate::interrupt::Interrupt;

pub const PREFIX: &str = "unique:";
/// The run-time lock's name is the digest's with this after it.
pub const RUN_SUFFIX: &str = ":run";

/// The job class a digest names; None when `name` is not a digest.
pub fn job_class(name: &str) -> Option<&str> {
    let rest = name.strip_prefix(PREFIX)?;
    let (class, hex) = rest.rsplit_once(':')?;
    let hex_ok = hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit());
    (hex_ok && !class.is_empty()).then_some(class)
}

/// The digest a lock name belongs to: the digest itself or its `<digest>:run`.
pub fn digest_of(name: &str) -> Option<&str> {
    if job_class(name).is_some() {
        return Some(name);
    }
    let base = name.strip_suffix(RUN_SUFFIX)?;
    job_class(base).map(|_| base)
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UniqueState {
    pub job_class: String,
    /// The push-time lock's key.
    pub key: String,
    pub push: TokenKey,
    /// The DistMutex's hold, else the DualLock's EXEC.
    pub running: Option<TokenKey>,
    /// The DualLock's WAIT.
    pub waiting: Option<TokenKey>,
    /// "dist_mutex", "dual_lock", or None without a run-time lock.
    pub primitive: Option<&'static str>,
}

impl UniqueState {
    /// `job_class`, `key`, `jid`, `ttl` (the push-time lock's), `running`, `waiting`
    /// (`{token:, ttl:}` or nil), `primitive`.
    pub fn record(self) -> Record {
        let stage = |k: Option<TokenKey>| {
            k.and_then(TokenKey::record)
                .map_or(Field::Nil, Field::Record)
        };
        let ttl = if self.push.token.is_some() {
            Field::ttl(self.push.pttl)
        } else {
            Field::Nil
        };
        vec![
            ("job_class", Field::Text(self.job_class)),
            ("key", Field::Text(self.key)),
            ("jid", Field::text(self.push.token)),
            ("ttl", ttl),
            ("running", stage(self.running)),
            ("waiting", stage(self.waiting)),
            ("primitive", Field::text(self.primitive.map(String::from))),
        ]
    }
}

/// None when `digest` is not one, or nothing of it is in Redis.
pub fn inspect(client: &Client, intr: &Interrupt, digest: &str) -> Result<Option<UniqueState>> {
    let Some(job_class) = job_class(digest) else {
        return Ok(None);
    };
    let key = client.keys(digest)?.part("lock");
    let push = tokens(client, intr, std::slice::from_ref(&key))?
        .pop()
        .unwrap_or(TokenKey {
            token: None,
            pttl: -2,
        });
    let run = client.keys(&format!("{digest}{RUN_SUFFIX}"))?;
    let parts = [run.part("lock"), run.part("exec"), run.part("wait")];
    let mut read = tokens(client, intr, &parts)?.into_iter();
    let (lock, exec, wait) = (read.next(), read.next(), read.next());
    let held = |k: Option<TokenKey>| k.filter(|k| k.token.is_some());
    let (running, waiting, primitive) = match held(lock) {
        Some(mutex) => (Some(mutex), None, Some("dist_mutex")),
        None => {
            let (exec, wait) = (held(exec), held(wait));
            let primitive = (exec.is_some() || wait.is_some()).then_some("dual_lock");
            (exec, wait, primitive)
        }
    };
    if push.token.is_none() && primitive.is_none() {
        return Ok(None);
    }
    Ok(Some(UniqueState {
        job_class: job_class.into(),
        key,
        push,
        running,
        waiting,
        primitive,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_digest_and_its_run_lock() {
        let hex = "a".repeat(64);
        let digest = format!("unique:Report:Job:{hex}");
        assert_eq!(job_class(&digest), Some("Report:Job"));
        assert_eq!(digest_of(&format!("{digest}:run")), Some(digest.as_str()));
        assert_eq!(job_class("unique:Report:abc"), None);
        assert_eq!(job_class(&format!("unique::{hex}")), None);
    }
}
