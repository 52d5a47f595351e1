//! ConcurrentLimiter: at most `limit` holders at once across processes. Each slot is a member of
//! a sorted set scored by its lease expiry (Redis time), renewed while held, so a block that runs
//! past the lease keeps its slot; an expired member means a crashed holder and counts as free.

use crate::client::{int, ints, Client};
use crate::error::{Error, Result};
use crate::interrupt::Interrupt;
use crate::lease::Lease;
use crate::lost_leases::LostLease;
use crate::lua_script;
use crate::replicas::{eval_grant, refuse};
use crate::script::ScriptCall;
use crate::wait::wait_turn;
use std::time::{Duration, Instant};

lua_script!(ACQUIRE = "concurrent_limiter/acquire");
lua_script!(RELEASE = "concurrent_limiter/release");
lua_script!(RENEW = "concurrent_limiter/renew");
lua_script!(STATUS = "concurrent_limiter/status");

/// A waiter's mark outlives its planned wait by this much, so a release that lands just as the
/// wait ends still signals.
const WAIT_MARK_MARGIN: Duration = Duration::from_secs(1);

/// Between attempts a waiter blocks at least this long (unless its deadline is nearer): the
/// earliest lease expiry keeps moving while holders renew, and re-checking it more often would
/// cost a waiter more than two commands a second. Only a crashed holder's slot is found later.
const MIN_RECHECK: Duration = Duration::from_secs(1);

#[derive(Clone, Debug)]
pub struct LimiterOptions {
    pub limit: u32,
    /// How long a slot survives without renewal: the crash-recovery bound.
    pub lease: Duration,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LimiterStatus {
    pub limit: u32,
    pub in_use: u32,
    pub waiting: u32,
}

pub struct ConcurrentLimiter {
    client: Client,
    name: String,
    slots_key: String,
    waiters_key: String,
    signal_key: String,
    limit: u32,
    lease: Duration,
    min_replicas_acked: u32,
}

/// A held slot. Dropping it without `release` stops renewal; the slot then expires.
pub struct Slot {
    token: String,
    lease: Lease,
}

impl Slot {
    pub fn token(&self) -> &str {
        &self.token
    }
}

enum Attempt {
    Acquired,
    Full { expires_in_ms: i64 },
}

impl ConcurrentLimiter {
    pub fn new(client: &Client, name: &str, opts: LimiterOptions) -> Result<ConcurrentLimiter> {
        let keys = client.keys(name)?;
        if opts.limit == 0 {
            return Err(Error::argument("count: must be a positive integer"));
        }
        crate::seconds::check_span("lock_timeout", opts.lease)?;
        Ok(ConcurrentLimiter {
            client: client.clone(),
            name: name.to_string(),
            slots_key: keys.part("slots"),
            waiters_key: keys.part("waiters"),
            signal_key: keys.part("signal"),
            limit: opts.limit,
            lease: opts.lease,
            min_replicas_acked: 0,
        })
    }

    /// Replicas that must hold each slot grant before the caller enters (0: don't wait); see
    /// replicas.rs.
    pub fn with_min_replicas_acked(mut self, n: u32) -> Self {
        self.min_replicas_acked = n;
        self
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn limit(&self) -> u32 {
        self.limit
    }

    /// A fresh slot token (uuid v4).
    pub fn new_token() -> String {
        crate::token::new_token()
    }

    fn lease_ms(&self) -> u64 {
        crate::seconds::millis(self.lease)
    }

    fn attempt(&self, intr: &Interrupt, token: &str, wait_ms: u64) -> Result<Attempt> {
        let call = ScriptCall::new(&ACQUIRE)
            .key(&self.slots_key)
            .key(&self.waiters_key)
            .arg(token)
            .arg(self.limit)
            .arg(self.lease_ms())
            .arg(wait_ms);
        let wanted = self.min_replicas_acked;
        let (reply, acked) = eval_grant(&self.client, intr, &call, wanted, self.lease)?;
        match ints(&reply)?.as_slice() {
            [1, _] if acked < i64::from(wanted) => Err(refuse(
                &self.client,
                intr,
                self.release_call(token),
                self.lease,
                wanted,
                acked,
            )),
            [1, _] => Ok(Attempt::Acquired),
            [0, ms] => Ok(Attempt::Full { expires_in_ms: *ms }),
            other => Err(Error::Redis(format!(
                "concurrent_limiter/acquire: unexpected reply {other:?}"
            ))),
        }
    }

    fn slot(&self, token: &str) -> Slot {
        let renew = ScriptCall::new(&RENEW)
            .key(&self.slots_key)
            .arg(token)
            .arg(self.lease_ms());
        let report = LostLease::new("concurrent_limiter", &self.name);
        Slot {
            token: token.to_string(),
            lease: Lease::start_reporting(&self.client, renew, self.lease, report),
        }
    }

    /// Waits for a slot until `deadline` (one attempt when it has passed already). `Ok(None)`
    /// when none freed in time. `token` should stay the same when the call is repeated after an
    /// interruption, so a slot taken by the interrupted attempt is recognised as ours.
    pub fn acquire(
        &self,
        intr: &Interrupt,
        token: &str,
        deadline: Instant,
    ) -> Result<Option<Slot>> {
        // The longest a waiter blocks between two attempts: its mark must cover that.
        let max_block = self.lease.max(MIN_RECHECK);
        let mut marked = false;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let mark_ms = if left.is_zero() {
                0
            } else {
                crate::seconds::millis(left.min(max_block) + WAIT_MARK_MARGIN)
            };
            marked |= mark_ms > 0;
            match self.attempt(intr, token, mark_ms)? {
                Attempt::Acquired => return Ok(Some(self.slot(token))),
                Attempt::Full { expires_in_ms } => {
                    let retry = Duration::from_millis(expires_in_ms.max(0) as u64).max(MIN_RECHECK);
                    // wait_turn answers false once the deadline has passed; the attempt above
                    // was then the last one.
                    if left.is_zero()
                        || !wait_turn(
                            &self.client,
                            intr,
                            Some(&self.signal_key),
                            retry,
                            Some(deadline),
                        )?
                    {
                        if marked {
                            self.withdraw_mark(intr, token)?;
                        }
                        return Ok(None);
                    }
                }
            }
        }
    }

    /// Removes the waiting mark our attempts left, so status stops counting us.
    fn withdraw_mark(&self, intr: &Interrupt, token: &str) -> Result<()> {
        self.client.command(
            intr,
            &[
                b"ZREM".to_vec(),
                self.waiters_key.clone().into_bytes(),
                token.into(),
            ],
        )?;
        Ok(())
    }

    /// Gives the slot back and wakes one waiter. `Error::LockLost` when the slot's lease had run
    /// out (or Redis lost it) while held: the limit may have been exceeded meanwhile.
    pub fn release(&self, intr: &Interrupt, slot: Slot) -> Result<()> {
        let lost_before = slot.lease.is_lost();
        let token = slot.token.clone();
        drop(slot); // stop renewing before releasing
        let call = self.release_call(&token);
        let released = int(&crate::lease::release_now(
            &self.client,
            intr,
            call,
            self.lease,
        )?)? == 1;
        if released && !lost_before {
            Ok(())
        } else {
            Err(Error::LockLost(format!(
                "ConcurrentLimiter {:?}: the slot's lease was lost while held (lock_timeout passed without renewal)",
                self.name
            )))
        }
    }

    /// After `acquire` failed (Redis unreachable, interrupted): Redis may still have given
    /// `token` a slot with the reply lost, so release it in the background rather than keep
    /// the slot taken for a whole lock_timeout. `token` must not be used again.
    pub fn abandon(&self, token: &str) {
        crate::lease::release_in_background(&self.client, self.release_call(token), self.lease);
    }

    /// The token-checked release of one slot, used by `release` and `abandon`.
    pub(crate) fn release_call(&self, token: &str) -> ScriptCall {
        ScriptCall::new(&RELEASE)
            .key(&self.slots_key)
            .key(&self.waiters_key)
            .key(&self.signal_key)
            .arg(token)
            .arg(self.limit)
    }

    /// Live slots and waiting callers, across every process.
    pub fn status(&self, intr: &Interrupt) -> Result<LimiterStatus> {
        let call = ScriptCall::new(&STATUS)
            .key(&self.slots_key)
            .key(&self.waiters_key);
        match ints(&self.client.eval(intr, &call)?)?.as_slice() {
            [in_use, waiting] => Ok(LimiterStatus {
                limit: self.limit,
                in_use: count_u32(*in_use),
                waiting: count_u32(*waiting),
            }),
            other => Err(Error::Redis(format!(
                "concurrent_limiter/status: unexpected reply {other:?}"
            ))),
        }
    }
}

/// A count Redis reported, as u32: clamped instead of wrapped (a count is never negative or
/// above u32::MAX unless the keys were tampered with).
fn count_u32(n: i64) -> u32 {
    u32::try_from(n.max(0)).unwrap_or(u32::MAX)
}
