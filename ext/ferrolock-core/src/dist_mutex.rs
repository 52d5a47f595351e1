//! DistMutex: a Redis mutex. With `auto_release` the lock is a lease renewed while held and
//! released at unlock; without it (the crawler's spacer) the lock simply expires `expire` after
//! it was taken, so successive holders start at least `expire` apart.

use crate::client::{ints, Client};
use crate::error::{Error, Result};
use crate::interrupt::Interrupt;
use crate::lease::Lease;
use crate::lost_leases::LostLease;
use crate::lua_script;
use crate::replicas::{eval_grant, refuse};
use crate::script::ScriptCall;
use crate::wait::{retry_after, wait_turn};
use std::time::{Duration, Instant};

lua_script!(ACQUIRE = "dist_mutex/acquire");
lua_script!(RELEASE = "dist_mutex/release");
lua_script!(pub(crate) RENEW_KEY = "lease/renew_key");

/// A waiter marks itself for this much longer than it plans to wait, so a release that lands
/// just as its wait ends still signals.
const WAIT_MARK_MARGIN: Duration = Duration::from_secs(1);

/// The fencing counter's TTL in lock TTLs (see `fence_ttl`).
const FENCE_TTL_FACTOR: u32 = 10;

#[derive(Clone, Debug)]
pub struct DistMutexOptions {
    /// `None`: released at unlock, lease of `lease`. `Some(n)`: `n` is the TTL.
    pub expire: Option<Duration>,
    pub auto_release: bool,
    pub lease: Duration,
}

impl Default for DistMutexOptions {
    fn default() -> Self {
        DistMutexOptions {
            expire: None,
            auto_release: true,
            lease: Duration::from_secs(30),
        }
    }
}

pub struct DistMutex {
    client: Client,
    name: String,
    lock_key: String,
    fence_key: String,
    waiters_key: String,
    signal_key: String,
    ttl: Duration,
    auto_release: bool,
    min_replicas_acked: u32,
}

/// One acquisition. Dropping it without `unlock` stops renewal; the lock then expires.
pub struct Held {
    token: String,
    fencing_token: i64,
    lease: Option<Lease>,
}

impl Held {
    pub fn fencing_token(&self) -> i64 {
        self.fencing_token
    }
    pub fn token(&self) -> &str {
        &self.token
    }
}

enum Attempt {
    Acquired(i64),
    Busy { pttl_ms: i64 },
}

impl DistMutex {
    pub fn new(client: &Client, name: &str, opts: DistMutexOptions) -> Result<DistMutex> {
        let keys = client.keys(name)?;
        crate::seconds::check_span("lease", opts.lease)?;
        let ttl = match opts.expire {
            Some(e) => crate::seconds::check_span("expire", e)?,
            None if !opts.auto_release => {
                return Err(Error::argument(
                    "auto_release: false needs expire: (the lock would never be released)",
                ))
            }
            None => opts.lease,
        };
        Ok(DistMutex {
            client: client.clone(),
            name: name.to_string(),
            lock_key: keys.part("lock"),
            fence_key: keys.part("fence"),
            waiters_key: keys.part("waiters"),
            signal_key: keys.part("signal"),
            ttl,
            auto_release: opts.auto_release,
            min_replicas_acked: 0,
        })
    }

    /// Replicas that must hold each grant before the caller enters (0, the default: don't
    /// wait). A grant that reaches fewer is released and `Error::Replication` returned; see
    /// replicas.rs.
    pub fn with_min_replicas_acked(mut self, n: u32) -> Self {
        self.min_replicas_acked = n;
        self
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// A fresh owner token (uuid v4).
    pub fn new_token() -> String {
        crate::token::new_token()
    }

    /// How long the fencing counter outlives the name's last acquisition. Any TTL keeps tokens
    /// increasing (acquire.lua falls back on Redis time once it expired); a longer one only
    /// keeps a token that ran ahead of time in memory longer. Ten lock TTLs lets an idle
    /// name's keys vanish soon while a busy name keeps its counter.
    pub fn fence_ttl(&self) -> Duration {
        // Capped like every span, so PX stays far from Redis' limit.
        self.ttl
            .saturating_mul(FENCE_TTL_FACTOR)
            .min(crate::seconds::MAX)
    }

    /// One round trip, also on the uncontended path. Fails without marking when `wait_ms` is 0.
    fn attempt(&self, intr: &Interrupt, token: &str, wait_ms: u64) -> Result<Attempt> {
        let call = ScriptCall::new(&ACQUIRE)
            .key(&self.lock_key)
            .key(&self.fence_key)
            .key(&self.waiters_key)
            .arg(token)
            .arg(crate::seconds::millis(self.ttl))
            .arg(wait_ms)
            .arg(crate::seconds::millis(self.fence_ttl()));
        let wanted = self.min_replicas_acked;
        let (reply, acked) = eval_grant(&self.client, intr, &call, wanted, self.ttl)?;
        match ints(&reply)?.as_slice() {
            [1, _] if acked < i64::from(wanted) => Err(refuse(
                &self.client,
                intr,
                self.release_call(token),
                self.ttl,
                wanted,
                acked,
            )),
            [1, fence] => Ok(Attempt::Acquired(*fence)),
            [0, pttl] => Ok(Attempt::Busy { pttl_ms: *pttl }),
            other => Err(Error::Redis(format!(
                "dist_mutex/acquire: unexpected reply {other:?}"
            ))),
        }
    }

    fn held(&self, token: &str, fencing_token: i64) -> Held {
        let lease = self.auto_release.then(|| {
            let renew = ScriptCall::new(&RENEW_KEY)
                .key(&self.lock_key)
                .arg(token)
                .arg(crate::seconds::millis(self.ttl));
            let report = LostLease {
                fencing_token: Some(fencing_token),
                ..LostLease::new("dist_mutex", &self.name)
            };
            Lease::start_reporting(&self.client, renew, self.ttl, report)
        });
        Held {
            token: token.to_string(),
            fencing_token,
            lease,
        }
    }

    /// One attempt, never waits.
    pub fn try_lock(&self, intr: &Interrupt, token: &str) -> Result<Option<Held>> {
        // The script also recognises a lock held by this very token (a retried call).
        match self.attempt(intr, token, 0)? {
            Attempt::Acquired(fence) => Ok(Some(self.held(token, fence))),
            Attempt::Busy { .. } => Ok(None),
        }
    }

    /// Waits until acquired or `deadline` passes (`Error::Timeout`). `token` should stay the
    /// same when the call is retried after an interruption, so a lock taken by the interrupted
    /// attempt is recognised as ours.
    pub fn lock(&self, intr: &Interrupt, token: &str, deadline: Option<Instant>) -> Result<Held> {
        // Only a releasing holder signals; expiry-only locks are waited out locally.
        let signal = self.auto_release.then_some(self.signal_key.as_str());
        // The first attempt already marks: a caller that fails it waits anyway.
        loop {
            let planned_wait = match deadline {
                Some(d) => d.saturating_duration_since(Instant::now()).min(self.ttl),
                None => self.ttl,
            };
            let mark_ms = if signal.is_some() {
                crate::seconds::millis(planned_wait + WAIT_MARK_MARGIN)
            } else {
                0
            };
            match self.attempt(intr, token, mark_ms)? {
                Attempt::Acquired(fence) => return Ok(self.held(token, fence)),
                Attempt::Busy { pttl_ms } => {
                    let retry = retry_after(pttl_ms, self.ttl);
                    if !wait_turn(&self.client, intr, signal, retry, deadline)? {
                        return Err(Error::Timeout(format!(
                            "DistMutex {:?}: not acquired before the timeout",
                            self.name
                        )));
                    }
                }
            }
        }
    }

    /// Releases a held lock. Without auto_release this is a no-op (the lock expires by itself).
    /// `Error::LockLost` when the lock was no longer ours: the section was not exclusive.
    pub fn unlock(&self, intr: &Interrupt, held: Held) -> Result<()> {
        if !self.auto_release {
            return Ok(());
        }
        let lost_before = held.lease.as_ref().is_some_and(Lease::is_lost);
        let token = held.token.clone();
        drop(held); // stop renewing before releasing
        let released = crate::client::int(&crate::lease::release_now(
            &self.client,
            intr,
            self.release_call(&token),
            self.ttl,
        )?)? == 1;
        if released && !lost_before {
            Ok(())
        } else {
            Err(Error::LockLost(format!(
                "DistMutex {:?}: the lock expired or was taken by another owner while held",
                self.name
            )))
        }
    }

    /// After a lock call failed (Redis unreachable, interrupted, timed out): Redis may still have
    /// granted `token` with the reply lost, so release it in the background rather than let it
    /// block others for a whole lease. `token` must not be used again.
    pub fn abandon(&self, token: &str) {
        crate::lease::release_in_background(&self.client, self.release_call(token), self.ttl);
    }

    /// The token-checked release, used by `unlock` and `abandon`.
    fn release_call(&self, token: &str) -> ScriptCall {
        ScriptCall::new(&RELEASE)
            .key(&self.lock_key)
            .key(&self.waiters_key)
            .key(&self.signal_key)
            .arg(token)
    }

    /// True when anyone holds the lock.
    pub fn is_locked(&self, intr: &Interrupt) -> Result<bool> {
        let reply = self.client.command(
            intr,
            &[b"EXISTS".to_vec(), self.lock_key.clone().into_bytes()],
        )?;
        Ok(crate::client::int(&reply)? == 1)
    }
}
