//! Key naming: `<namespace>:{<name>}:<part>`. The braces are a Redis Cluster hash tag, so every
//! key of one primitive instance lives in one slot and multi-key scripts never cross slots.
//!
//! Design notes (moved from doc/ARCHITECTURE.md):
//!
//! **Redis is left clean: every key expires or is deleted**
//!
//! Apps lock per record, so most names are used once: no key may outlive its use. Each script
//! writes keys only with `PX`/`PEXPIRE` or deletes them (audited for every script in
//! `lua/**` and every raw command in `src/*.rs`); `spec/redis_hygiene_spec.rb` churns 100k names
//! through every primitive and waits for `DBSIZE` 0.
//! | key | lifetime |
//! | --- | --- |
//! | DistMutex `lock` | lease / `expire:` (renewed while held), deleted at unlock |
//! | DistMutex `fence` | 10 × the lock's TTL after the last acquisition |
//! | DistMutex `waiters` (list); ConcurrentLimiter `line` (list) | 2 × the longest planned wait (lock TTL / max(lease, 1 s), + 1 s) after the last refresh |
//! | DistMutex, ConcurrentLimiter `grant:<token>` | popped at once; else the waiter's deadline + 1 s, or deleted when it leaves the line |
//! | DualLock `grant:<token>` | popped at once; else `lease` (the granted EXEC's own TTL), or deleted at leave / the waiter's next `enter` |
//! | DualLock `wait`, `exec` | `wait_lease` / `lease`, renewed while held, deleted at leave |
//! | ConcurrentLimiter `slots` | the lease, extended by renewals; empty sets vanish |
//! | FairTenant `z` (exact) / `w` (bounded) | the longest window / two longest windows after the last enqueue |
//! | MessageLock `state` | `lease` while running (renewed), `processed_ttl` once processed |
//! | DistMutex, DualLock, ConcurrentLimiter `forced:<token>` (an operator's force release, read by the holder's LockLost message; `lost_reason.rs`) | 1 hour |
//! | limits_concurrency `{concurrency:<group>/<key>}:slots` (zset job_id -> lease expiry) | while any job is parked (blocked, or promoted and not started), as long as `jobs` (a lost promotion's expired slot must still be seen); then until its last lease ends, extended by renewals; empty sets vanish |
//! | limits_concurrency `blocked` (list of job_ids), `jobs` (hash: payloads of blocked and promoted-not-started jobs, `{limit}`) | 7 days after the last write while any job is parked; `jobs` is deleted once none is (`promote.lua`'s `settle`, run by every admission and release) |
//! | limits_concurrency `fence` | 10 × the lease after the last admission at perform |
//! | limits_concurrency index `{concurrency}:due` (zset key -> earliest lease expiry of a key with parked jobs) | 7 days after the last write; a key leaves it at the timer's next visit after none is parked |
//! | History `{history}:m:<minute>`, `{history}:h:<hour>` (hashes `<primitive>\|<event or wait step>\|<name>` -> count; lib/ferrolock/history/) | EXPIREAT the bucket's end + 8 hours (minutes) / + 72 hours (hours) |
//! | ActiveJob uniqueness `activejob_uniqueness:<class>:<md5>` and `…:runtime` (outside the namespace: the keys of the activejob-uniqueness gem; `unique_lock.rs` `at_key`) | `lock_ttl` / `runtime_lock_ttl`, a running job's lock a lease renewed while it runs; deleted at unlock |
//! | Sidekiq uniqueness `{unique:<class>:<sha>}:lock` (value: the jid; `unique_lock.rs`, `lua/unique_lock/{take,release,expire,hand_over}.lua`, wrapped by lib/ferrolock/sidekiq/unique/lock.rb) | `ttl` after the job is due while queued; `lease` (renewed by a Ruby thread) while an `until_executed` job runs; deleted when released; `ttl` + the longest default retry delay after a failure |
//!
//! **maxmemory-policy**
//!
//! Every key having a TTL means `volatile-*` eviction picks exactly ferrolock's keys, and an evicted
//! lock is a lock silently released. `Ferrolock::EvictionCheck` asks `CONFIG GET maxmemory-policy`
//! once per client, in a background thread started by the client's first use, and logs a warning
//! for anything but `noeviction`. CONFIG refused (ACL, managed Redis): debug line only; Redis down:
//! retried on a use ≥ 30 s later. Never raises; the hot path pays one instance-variable test.

use crate::error::{Error, Result};

#[derive(Clone, Debug)]
pub struct Keys {
    prefix: String,
}

impl Keys {
    pub fn new(namespace: &str, name: &str) -> Result<Keys> {
        check_name("name", name)?;
        Ok(Keys {
            prefix: format!("{namespace}:{{{name}}}:"),
        })
    }

    pub fn part(&self, part: &str) -> String {
        format!("{}{}", self.prefix, part)
    }
}

/// A name must be non-empty and free of braces (which would break the hash tag).
pub fn check_name(arg: &str, name: &str) -> Result<()> {
    if name.is_empty() {
        return Err(Error::argument(format!("{arg}: must not be empty")));
    }
    if name.contains(['{', '}']) {
        return Err(Error::argument(format!(
            "{arg}: must not contain '{{' or '}}' (got {name:?})"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_hash_tagged_keys() {
        let k = Keys::new("ferrolock", "crawl:example.com").unwrap();
        assert_eq!(k.part("lock"), "ferrolock:{crawl:example.com}:lock");
        assert!(Keys::new("ns", "").is_err());
        assert!(Keys::new("ns", "a{b").is_err());
    }
}
