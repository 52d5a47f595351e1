//! RateLimiter: at most `count` calls per `interval`, across processes, counted in Redis time.
//! One key per limiter, one script per call; nothing is held, so nothing is released: a call
//! simply used up a slot.
//!
//! Waiting is a reservation, not a retry: when the next slot is within the caller's remaining
//! wait, the script counts the call at that slot in the same run and returns how long to sleep;
//! the caller sleeps (interruptibly) and goes ahead with no further Redis call. Slots are
//! handed out in the order the scripts ran, so waiters are served first come, first served and
//! none can lose its turn to a later one. A slot past the wait is not reserved: the caller is
//! refused at once with the time to that slot (no slot can open earlier: the scripts' state
//! only moves forward in time).
//!
//! A reserved call that will not run (interrupted while it sleeps, or its reply lost) gives its
//! slot back when that is safe (lua/rate_limiter/refund.lua): always for the sliding window,
//! and for the others only while it is still the latest call. Each call carries a random id,
//! chosen before it is sent, so the refund names exactly that call and can be repeated.
//!
//! Algorithms (lua/rate_limiter/):
//! - `Window`: fixed windows aligned to Redis time, one counter (window.lua).
//! - `SlidingWindow`: a log of call times, so ANY interval-long span holds at most `count`
//!   calls; memory grows with `count` (sliding_window.lua).
//! - `Bucket`, `Leaky` and `Points`: GCRA, one number (gcra.lua). A bucket tolerates a burst of
//!   `count` (the same arithmetic as a token bucket refilled continuously); leaky spaces calls
//!   `interval / count` apart, with an optional burst; points is a bucket of `count` points in
//!   which each call spends its cost.

pub mod inspect;

use crate::client::{ints, Client};
use crate::error::{Error, Result};
use crate::interrupt::Interrupt;
use crate::lua_script;
use crate::script::{Script, ScriptCall};
use std::time::{Duration, Instant};

lua_script!(WINDOW = "rate_limiter/window");
lua_script!(SLIDING_WINDOW = "rate_limiter/sliding_window");
lua_script!(GCRA = "rate_limiter/gcra");
lua_script!(STATUS = "rate_limiter/status");
lua_script!(REFUND = "rate_limiter/refund");

/// window.lua's and sliding_window.lua's arguments (the same).
struct WindowArgs<'a> {
    /// Calls per interval.
    count: u32,
    /// The interval (µs).
    interval: f64,
    /// The longest the call waits for its slot (µs): a later one is not reserved.
    max_wait: u64,
    /// The call's id (for a refund).
    call_id: &'a str,
}

impl WindowArgs<'_> {
    /// The call of `script` (WINDOW or SLIDING_WINDOW) on the limiter's `key`.
    fn call(&self, script: &'static Script, key: &str) -> ScriptCall {
        ScriptCall::new(script)
            .key(key)
            .arg(self.count)
            .arg(self.interval)
            .arg(self.max_wait)
            .arg(self.call_id)
    }
}

/// gcra.lua's arguments.
struct GcraArgs<'a> {
    /// The emission interval (µs: interval / count).
    emission: f64,
    /// How far ahead of its theoretical arrival time a call may go (µs).
    tolerance: f64,
    /// What the call spends (1 unless a points limiter).
    cost: u32,
    /// The longest the call waits for its slot (µs): a later one is not reserved.
    max_wait: u64,
    /// The call's id (for a refund).
    call_id: &'a str,
}

impl GcraArgs<'_> {
    fn call(&self, key: &str) -> ScriptCall {
        ScriptCall::new(&GCRA)
            .key(key)
            .arg(self.emission)
            .arg(self.tolerance)
            .arg(self.cost)
            .arg(self.max_wait)
            .arg(self.call_id)
    }
}

/// refund.lua's arguments.
struct RefundArgs<'a> {
    /// The algorithm's script: "window", "sliding_window" or "gcra".
    kind: &'static str,
    /// The id of the call given back.
    call_id: &'a str,
    /// What it spent.
    cost: u32,
    /// GCRA's emission interval (µs; unused by the others).
    emission: f64,
}

impl RefundArgs<'_> {
    fn call(&self, key: &str) -> ScriptCall {
        ScriptCall::new(&REFUND)
            .key(key)
            .arg(self.kind)
            .arg(self.call_id)
            .arg(self.cost)
            .arg(self.emission)
    }
}

/// status.lua's arguments.
struct StatusArgs {
    /// The algorithm's script: "window", "sliding_window" or "gcra".
    kind: &'static str,
    /// Calls per interval.
    count: u32,
    /// The interval (µs).
    interval: f64,
    /// GCRA's emission interval and tolerance (µs; unused by the others).
    emission: f64,
    tolerance: f64,
}

impl StatusArgs {
    fn call(&self, key: &str) -> ScriptCall {
        ScriptCall::new(&STATUS)
            .key(key)
            .arg(self.kind)
            .arg(self.count)
            .arg(self.interval)
            .arg(self.emission)
            .arg(self.tolerance)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Algorithm {
    Window,
    SlidingWindow,
    Bucket,
    /// `burst`: calls beyond the evenly spaced ones that may go ahead at once.
    Leaky {
        burst: u32,
    },
    /// A bucket of `count` points; each call spends its cost.
    Points,
}

impl Algorithm {
    /// The key's last part: a name reused with another algorithm never meets the other's key.
    fn key_part(self) -> &'static str {
        match self {
            Algorithm::Window => "window",
            Algorithm::SlidingWindow => "log",
            Algorithm::Bucket => "bucket",
            Algorithm::Leaky { .. } => "tat",
            Algorithm::Points => "points",
        }
    }

    /// The script family (status.lua, refund.lua).
    fn kind(self) -> &'static str {
        match self {
            Algorithm::Window => "window",
            Algorithm::SlidingWindow => "sliding_window",
            Algorithm::Bucket | Algorithm::Leaky { .. } | Algorithm::Points => "gcra",
        }
    }
}

/// A slot a call got: now, or reserved for later.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Grant {
    /// The Redis time (µs since the epoch) the call may go ahead at: its slot.
    pub at_us: i64,
    /// Calls the limiter would still let through at that moment.
    pub remaining: u64,
    /// The slot on this host's monotonic clock (the reply's arrival plus the script's wait),
    /// so it is never early by Redis' clock.
    pub opens: Instant,
}

/// The outcome of one attempt (or of a wait).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Attempt {
    Granted(Grant),
    /// Refused; the next slot opens in `retry_after` (if nobody else takes it).
    Refused {
        retry_after: Duration,
    },
}

/// One call's claim on a limiter. Its id is chosen before the call is sent, so the slot can be
/// given back (`RateLimiter::refund`) even when the reply was lost.
#[derive(Debug)]
pub struct Claim {
    id: String,
    cost: u32,
    /// Sent, and not known to be refused: Redis may have counted it.
    sent: bool,
    grant: Option<Grant>,
}

impl Claim {
    pub fn id(&self) -> &str {
        &self.id
    }

    pub fn cost(&self) -> u32 {
        self.cost
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RateStatus {
    /// Calls that would go ahead now.
    pub remaining: u64,
    /// Until the limiter is back to its full count if no call comes.
    pub reset_in: Duration,
}

pub struct RateLimiter {
    client: Client,
    name: String,
    key: String,
    algorithm: Algorithm,
    count: u32,
    interval: Duration,
}

impl RateLimiter {
    /// Keys are `<namespace>:{rate:<name>}:<part>`: hash-tagged like every primitive's, and
    /// apart from a DistMutex or ConcurrentLimiter of the same name.
    pub fn new(
        client: &Client,
        name: &str,
        algorithm: Algorithm,
        count: u32,
        interval: Duration,
    ) -> Result<RateLimiter> {
        crate::keys::check_name("name", name)?;
        if count == 0 {
            return Err(Error::argument("count: must be a positive integer"));
        }
        crate::seconds::check_span("interval", interval)?;
        // GCRA's arrival time is a double of µs since the epoch (resolution 0.25 µs today): a
        // smaller step would not move it at all.
        if algorithm.kind() == "gcra" && (interval.as_micros() as f64) / f64::from(count) < 1.0 {
            return Err(Error::argument(format!(
                "count: bucket, leaky and points allow at most one call per microsecond (count {count} per {} s)",
                interval.as_secs_f64()
            )));
        }
        let keys = client.keys(&format!("rate:{name}"))?;
        Ok(RateLimiter {
            client: client.clone(),
            name: name.to_string(),
            key: keys.part(algorithm.key_part()),
            algorithm,
            count,
            interval,
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn key(&self) -> &str {
        &self.key
    }

    fn interval_us(&self) -> f64 {
        self.interval.as_micros() as f64
    }

    /// GCRA's emission interval and tolerance, in µs.
    fn gcra(&self) -> (f64, f64) {
        let emission = self.interval_us() / f64::from(self.count);
        let tolerance = match self.algorithm {
            Algorithm::Bucket | Algorithm::Points => emission * f64::from(self.count - 1),
            Algorithm::Leaky { burst } => emission * f64::from(burst),
            _ => 0.0,
        };
        (emission, tolerance)
    }

    /// A new claim for one call spending `cost` (1 unless a points limiter).
    pub fn claim(&self, cost: u32) -> Result<Claim> {
        if self.algorithm != Algorithm::Points && cost != 1 {
            return Err(Error::argument(format!(
                "cost: only a points limiter charges more than 1 per call, got {cost}"
            )));
        }
        if cost == 0 || cost > self.count {
            return Err(Error::argument(format!(
                "cost: must be between 1 and the limiter's {} points, got {cost}",
                self.count
            )));
        }
        Ok(Claim {
            id: crate::token::random_hex(),
            cost,
            sent: false,
            grant: None,
        })
    }

    fn reserve_call(&self, claim: &Claim, max_wait: Duration) -> ScriptCall {
        // µs, rounded down: a slot is never reserved past the wait.
        let max_wait = u64::try_from(max_wait.as_micros()).unwrap_or(u64::MAX);
        match self.algorithm {
            Algorithm::Window | Algorithm::SlidingWindow => {
                let script = if self.algorithm == Algorithm::Window {
                    &WINDOW
                } else {
                    &SLIDING_WINDOW
                };
                let args = WindowArgs {
                    count: self.count,
                    interval: self.interval_us(),
                    max_wait,
                    call_id: &claim.id,
                };
                args.call(script, &self.key)
            }
            Algorithm::Bucket | Algorithm::Leaky { .. } | Algorithm::Points => {
                let (emission, tolerance) = self.gcra();
                let args = GcraArgs {
                    emission,
                    tolerance,
                    cost: claim.cost,
                    max_wait,
                    call_id: &claim.id,
                };
                args.call(&self.key)
            }
        }
    }

    /// One script call: a slot now, or the first one within `max_wait` reserved, or a refusal.
    /// A claim sent before whose outcome is unknown (cut short) is refunded and renamed first.
    pub fn reserve(
        &self,
        intr: &Interrupt,
        claim: &mut Claim,
        max_wait: Duration,
    ) -> Result<Attempt> {
        if let Some(grant) = claim.grant {
            return Ok(Attempt::Granted(grant));
        }
        if claim.sent {
            self.refund(claim);
            claim.id = crate::token::random_hex();
        }
        claim.sent = true;
        let reply = self
            .client
            .eval(intr, &self.reserve_call(claim, max_wait))?;
        let received = Instant::now();
        match ints(&reply)?.as_slice() {
            [1, remaining, at_us, wait_us] => {
                let grant = Grant {
                    at_us: *at_us,
                    remaining: (*remaining).max(0) as u64,
                    opens: received + Duration::from_micros((*wait_us).max(0) as u64),
                };
                claim.grant = Some(grant);
                Ok(Attempt::Granted(grant))
            }
            [0, wait_us] => {
                claim.sent = false;
                Ok(Attempt::Refused {
                    // At least 1 µs: a zero wait would spin on a slot that rounding kept closed.
                    retry_after: Duration::from_micros((*wait_us).max(1) as u64),
                })
            }
            other => Err(Error::Redis(format!(
                "rate_limiter: unexpected reply {other:?}"
            ))),
        }
    }

    /// One attempt, no waiting: a slot now or a refusal.
    pub fn try_acquire(&self, intr: &Interrupt, cost: u32) -> Result<Attempt> {
        let mut claim = self.claim(cost)?;
        self.reserve(intr, &mut claim, Duration::ZERO)
            .inspect_err(|_| self.refund(&claim))
    }

    /// Reserves the first slot before `deadline` and sleeps until it opens (or is refused at
    /// once, with the time to that slot). Resumable: after `Interrupted`, calling it again
    /// with the same claim waits for the slot already reserved. A caller that gives up after
    /// an error must `refund` the claim.
    pub fn acquire(
        &self,
        intr: &Interrupt,
        claim: &mut Claim,
        deadline: Instant,
    ) -> Result<Attempt> {
        let max_wait = deadline.saturating_duration_since(Instant::now());
        let attempt = self.reserve(intr, claim, max_wait)?;
        if let Attempt::Granted(grant) = attempt {
            let left = grant.opens.saturating_duration_since(Instant::now());
            if !left.is_zero() {
                intr.sleep(left)?;
            }
        }
        Ok(attempt)
    }

    /// Gives back the slot of a claim that will not run, if Redis may have counted it and
    /// doing so is safe (see refund.lua). In the background, repeated: never blocks.
    pub fn refund(&self, claim: &Claim) {
        if claim.sent {
            self.refund_id(&claim.id, claim.cost);
        }
    }

    /// `refund` by the claim's id and cost (a grant returned to Ruby and then abandoned).
    pub fn refund_id(&self, id: &str, cost: u32) {
        let (emission, _) = self.gcra();
        let call = RefundArgs {
            kind: self.algorithm.kind(),
            call_id: id,
            cost,
            emission,
        }
        .call(&self.key);
        // Retried while Redis is unreachable, for a while: a refund that comes long after its
        // slot gives back little, and the id check makes any repeat harmless.
        let give_up_after = self
            .interval
            .clamp(Duration::from_secs(1), Duration::from_secs(60));
        crate::lease::release_in_background(&self.client, call, give_up_after);
    }

    pub fn status(&self, intr: &Interrupt) -> Result<RateStatus> {
        let (emission, tolerance) = self.gcra();
        let call = StatusArgs {
            kind: self.algorithm.kind(),
            count: self.count,
            interval: self.interval_us(),
            emission,
            tolerance,
        }
        .call(&self.key);
        match ints(&self.client.eval(intr, &call)?)?.as_slice() {
            [remaining, reset_us] => Ok(RateStatus {
                remaining: (*remaining).max(0) as u64,
                reset_in: Duration::from_micros((*reset_us).max(0) as u64),
            }),
            other => Err(Error::Redis(format!(
                "rate_limiter/status: unexpected reply {other:?}"
            ))),
        }
    }
}
