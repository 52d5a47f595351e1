//! Operator actions (the Sidekiq Web "Locks" tab and the `ferrolock` command). A force release
//! runs the primitive's OWN token-checked release script with the current holder's token, so it
//! does exactly what that holder's release would: hand the lock to the next waiter, signal the
//! limiter's or DualLock's waiters. A holder that changed in between is left alone (returns false).
//! A uniqueness lock (unique_lock.rs) is freed by its own jid-checked release script: nothing
//! waits on it (a duplicate push meets its on_conflict), so nothing is handed on.
//!
//! Design notes (moved from doc/ARCHITECTURE.md):
//!
//! **Operators' view: Admin, the Sidekiq Web tab, the `ferrolock` command**
//!
//! Each primitive reads its own keys (`<primitive>/inspect.rs`, one read-only script each) into a
//! typed state; `state::state` picks it by kind and the binding hands it to Ruby as a Hash
//! (`Native::Admin.state`). `lib/ferrolock/admin.rb` (+ `admin/*.rb`, one concept per file), the
//! Sidekiq Web tab (`lib/ferrolock/web.rb`, `web/routes.rb`, `web/views/*.erb`) and `exe/ferrolock`
//! (`admin/cli.rb`, `admin/cli/`) only format it; the key layout they list by is `layout`. Keys
//! read, per name (`<ns>:{<name>}:<part>`):
//! | primitive | parts read |
//! | --- | --- |
//! | DistMutex | `lock` (token, PTTL), `fence` (last fencing token), `waiters` (list "token\|deadline ms": live entries counted) |
//! | DualLock | `exec`, `wait` (token, PTTL each) |
//! | ConcurrentLimiter | `slots` (live entries: token → lease expiry; member `{limit}` → -limit), `line` (list "token\|deadline ms", live entries) |
//! | FairTenant | `{ft:<class>:<tenant>}:z` (ZCOUNT per rule window) or `:w` (the bounded estimate, as `bounded.lua`) |
//! | Shoryuken | `{msg:<queue>:<id>}:state` (a token = in progress, `processed`) |
//! | limits_concurrency | `{concurrency:<key>}:slots` (live job_ids), `blocked` (count, first 10), `jobs` (`{limit}`, the oldest blocked payload) |
//! | Sidekiq uniqueness | `{<digest>}:lock` (jid, PTTL), `{<digest>:run}:lock` / `exec` / `wait` |
//! | RateLimiter | `{rate:<name>}:<part>` (PTTL; the log's future entries, the window's `w`/`n`, GCRA's `t`) |
//!
//! Listing is `SCAN cursor MATCH <escaped ns>:{<glob>}:<part> COUNT 4×page` (never KEYS), a page
//! being whole SCAN replies until it has a page of wanted keys (at most 20 calls). Not an index:
//! an index is one more write (and TTL upkeep) on every acquisition's hot path, and a sorted-set
//! index of names must itself be trimmed of expired members; SCAN costs only the operator's page.
//! It reads one server: single node or the Sentinel primary; on a Redis Cluster every master in
//! address order (`admin::scan` → `Client::on_master` → `Cluster::masters`, those serving a slot;
//! the cursor is `<node>.<SCAN cursor>` past the first master). A failover or resharding during a
//! listing may skip or repeat keys (SCAN's guarantee holds per node only).
//!
//! Force release (`admin/release.rb` → `Native::Admin.force_release` → `src/admin.rs`): reads the
//! holder's token, then runs the primitive's OWN release `ScriptCall` (`release_call`, made
//! `pub(crate)` in dist_mutex.rs, dual_lock.rs, concurrent_limiter.rs) with it, so whatever the
//! release does (DistMutex's hand-off to the next waiter with a fresh fencing token, the limiter's
//! and DualLock's wake-up signal) happens exactly as at the holder's own release. The hand-off TTL
//! is the holder's PTTL (≥ 1 s; renewed holders sit between 2/3 and all of their lease, and the
//! new holder's watchdog renews it by its own lease). A token that changed meanwhile: nothing done.

use crate::client::{int, Client};
use crate::concurrent_limiter::{ConcurrentLimiter, LimiterOptions};
use crate::dist_mutex::{DistMutex, DistMutexOptions};
use crate::dual_lock::{DualLock, DualLockOptions};
use crate::error::{Error, Result};
use crate::interrupt::Interrupt;
use crate::script::ScriptCall;
use crate::unique_lock::UniqueLock;
use std::time::Duration;

pub mod layout;
pub mod state;

/// What holds a name: the primitive whose release script is run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Held {
    DistMutex,
    DualLock,
    ConcurrentLimiter,
    /// A Sidekiq uniqueness lock: `name` is its digest, the token the holding job's jid.
    UniqueLock,
}

impl Held {
    pub fn parse(kind: &str) -> Result<Held> {
        match kind {
            "dist_mutex" => Ok(Held::DistMutex),
            "dual_lock" => Ok(Held::DualLock),
            "concurrent_limiter" => Ok(Held::ConcurrentLimiter),
            "unique_lock" => Ok(Held::UniqueLock),
            _ => Err(Error::argument(format!(
                "kind: must be dist_mutex, dual_lock, concurrent_limiter or unique_lock (got {kind:?})"
            ))),
        }
    }
}

/// What a release script needs beyond the name and token.
#[derive(Clone, Copy, Debug)]
pub struct ReleaseParams {
    /// DistMutex: the TTL a waiter handed the lock starts with (it renews by its own lease).
    pub ttl: Duration,
    /// ConcurrentLimiter: the most wake-up signals left pending (the limit, or the live slots).
    pub limit: u32,
}

/// The release call `token`'s own release would send (not for `Held::UniqueLock`, whose
/// release is `UniqueLock::release`: see `force_release`).
pub fn release_call(
    client: &Client,
    held: Held,
    name: &str,
    token: &str,
    params: ReleaseParams,
) -> Result<ScriptCall> {
    crate::keys::check_name("token", token)?;
    Ok(match held {
        Held::DistMutex => {
            let opts = DistMutexOptions {
                lease: params.ttl,
                ..DistMutexOptions::default()
            };
            DistMutex::new(client, name, opts)?.release_call(token, false)
        }
        Held::DualLock => {
            let opts = DualLockOptions {
                wait_lease: params.ttl,
                lease: params.ttl,
            };
            DualLock::new(client, name, opts)?.release_call(token, false)
        }
        Held::ConcurrentLimiter => {
            let opts = LimiterOptions {
                limit: params.limit.max(1),
                lease: params.ttl,
                local_passes: 0,
                fair: true,
            };
            ConcurrentLimiter::new(client, name, opts)?.release_call(token, false)
        }
        Held::UniqueLock => {
            return Err(Error::argument(
                "kind: unique_lock is released by UniqueLock::release (admin::force_release)",
            ))
        }
    })
}

/// Releases `token`'s hold on `name`; false when `token` no longer holds it.
pub fn force_release(
    client: &Client,
    intr: &Interrupt,
    held: Held,
    name: &str,
    token: &str,
    params: ReleaseParams,
) -> Result<bool> {
    if held == Held::UniqueLock {
        crate::keys::check_name("token", token)?;
        return UniqueLock::new(client, name)?.release(intr, token);
    }
    let call = release_call(client, held, name, token, params)?;
    let released = int(&client.eval(intr, &call)?)? == 1;
    if released {
        // The holder's LockLost then says an operator released it (lost_reason.rs).
        crate::lost_reason::mark_force_released(client, intr, name, token)?;
        if held == Held::DistMutex {
            // Its process's cohort, if any, stops passing the lock on within the process (its
            // next release then finds it lost; inbox.rs). Refused without channel rights, where
            // the holder's inbox could not listen either.
            let channel = crate::inbox::Inbox::revoked_channel(client.namespace());
            let publish = [
                b"PUBLISH".to_vec(),
                channel.into_bytes(),
                token.as_bytes().to_vec(),
            ];
            let _ = client.command(intr, &publish);
        }
    }
    Ok(released)
}

/// Takes `job_id` out of a limits_concurrency key's blocked line (an operator's release of a job
/// that waits: the release that follows then promotes only the jobs still in it). True when it
/// was there.
pub fn unblock_job(client: &Client, intr: &Interrupt, key: &str, job_id: &str) -> Result<bool> {
    let blocked = crate::job_concurrency::JobConcurrency::new(client)?.key_part(key, "blocked")?;
    let cmd = [
        b"LREM".to_vec(),
        blocked.into_bytes(),
        b"0".to_vec(),
        job_id.as_bytes().to_vec(),
    ];
    Ok(int(&client.command(intr, &cmd)?)? > 0)
}

/// One page of keys from master `node` (see `Client::on_master`): `SCAN cursor MATCH pattern
/// COUNT count` there. Returns the next cursor ("0": that node is done), the keys, and how many
/// masters there are (a cluster's listing goes on with the next node).
pub fn scan(
    client: &Client,
    intr: &Interrupt,
    node: usize,
    cursor: &str,
    pattern: &str,
    count: u32,
) -> Result<(String, Vec<String>, usize)> {
    if cursor.is_empty() || !cursor.bytes().all(|b| b.is_ascii_digit()) {
        return Err(Error::argument(format!(
            "cursor: must be a SCAN cursor (digits), got {cursor:?}"
        )));
    }
    let cmd = redis::cmd("SCAN")
        .arg(cursor)
        .arg("MATCH")
        .arg(pattern)
        .arg("COUNT")
        .arg(count.max(1))
        .get_packed_command();
    let (reply, masters) = client.on_master(intr, node, |c| c.request(intr, &cmd))?;
    let bad = || Error::Redis(format!("SCAN: unexpected reply {reply:?}"));
    let redis::Value::Array(parts) = &reply else {
        return Err(bad());
    };
    let text = |v: &redis::Value| match v {
        redis::Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
        redis::Value::SimpleString(s) => Some(s.clone()),
        _ => None,
    };
    let (Some(next), Some(redis::Value::Array(keys))) =
        (parts.first().and_then(text), parts.get(1))
    else {
        return Err(bad());
    };
    let keys = keys.iter().filter_map(text).collect();
    Ok((next, keys, masters))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_four_kinds_and_names_the_argument_otherwise() {
        assert_eq!(Held::parse("dist_mutex").unwrap(), Held::DistMutex);
        assert_eq!(Held::parse("dual_lock").unwrap(), Held::DualLock);
        assert_eq!(
            Held::parse("concurrent_limiter").unwrap(),
            Held::ConcurrentLimiter
        );
        assert_eq!(Held::parse("unique_lock").unwrap(), Held::UniqueLock);
        let err = Held::parse("mutex").unwrap_err().to_string();
        assert!(err.contains("kind"), "{err}");
    }
}
