//! Admin's read of a RateLimiter (inspect.rs). Redis keeps only its state (a counter, a log of
//! call times or an arrival time), not its count or interval: those come from the app's own
//! RateLimiter of that name and kind when it exists in the reading process (`Definition`), and
//! then `remaining` is what the limiter's own status script answers. Without it: remaining is
//! unknown, `reset_in` comes from the key's TTL (every script sets it to the time the limiter is
//! full again), and `reserved` is known for a sliding window only (future entries of its log).
//! `reserved`: calls that reserved a later slot and are sleeping until it (unknown for points: a
//! call's cost is not stored, so the calls behind its arrival time are unknown).

use super::{Algorithm, RateLimiter};
use crate::client::{int, text, Client};
use crate::error::{Error, Result};
use crate::inspect::{items, number, Field, Record};
use crate::interrupt::Interrupt;
use crate::lua_script;
use crate::script::ScriptCall;
use std::time::Duration;

lua_script!(INSPECT = "rate_limiter/inspect");

/// The name prefix of rate limiters' keys (`<ns>:{rate:<name>}:<part>`).
pub const PREFIX: &str = "rate:";

/// Each algorithm as the Ruby API names it (RateLimiter's `kind`).
const ALGORITHMS: [(Algorithm, &str); 5] = [
    (Algorithm::Window, "window"),
    (Algorithm::SlidingWindow, "sliding_window"),
    (Algorithm::Bucket, "bucket"),
    (Algorithm::Leaky { burst: 0 }, "leaky"),
    (Algorithm::Points, "points"),
];

/// The key parts of the algorithms (Algorithm::key_part), in ALGORITHMS' order.
pub const PARTS: &[&str] = &["window", "log", "bucket", "tat", "points"];

/// (key part, kind) of each algorithm: a listing finds limiters by these parts.
pub fn parts() -> Vec<(&'static str, &'static str)> {
    ALGORITHMS
        .iter()
        .map(|(algorithm, kind)| (algorithm.key_part(), *kind))
        .collect()
}

/// What the app's RateLimiter of a name and kind passes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Definition {
    pub count: u32,
    pub interval: Duration,
    pub burst: u32,
}

#[derive(Clone, Debug, PartialEq)]
pub struct RateState {
    pub kind: &'static str,
    pub known: bool,
    pub remaining: Option<u64>,
    /// Seconds until full again.
    pub reset_in: Option<f64>,
    pub reserved: Option<i64>,
}

impl RateState {
    /// `kind`, `known`, `remaining`, `reset_in`, `reserved`.
    pub fn record(self) -> Record {
        vec![
            ("kind", Field::Text(self.kind.into())),
            ("known", Field::Bool(self.known)),
            ("remaining", Field::int(self.remaining.map(|r| r as i64))),
            ("reset_in", self.reset_in.map_or(Field::Nil, Field::Float)),
            ("reserved", Field::int(self.reserved)),
        ]
    }
}

/// The state under `name`'s key `part`; None for another part, or when the key is gone.
pub fn inspect(
    client: &Client,
    intr: &Interrupt,
    name: &str,
    part: &str,
    definition: Option<Definition>,
) -> Result<Option<RateState>> {
    let Some(&(algorithm, kind)) = ALGORITHMS.iter().find(|(a, _)| a.key_part() == part) else {
        return Ok(None);
    };
    let algorithm = match (algorithm, definition) {
        (Algorithm::Leaky { .. }, Some(d)) => Algorithm::Leaky { burst: d.burst },
        (a, _) => a,
    };
    let key = client.keys(&format!("{PREFIX}{name}"))?.part(part);
    let call = ScriptCall::new(&INSPECT).key(key).arg(algorithm.kind());
    let reply = client.eval(intr, &call)?;
    let read = items(&reply, "rate_limiter/inspect")?;
    let pttl = int(read.first().unwrap_or(&redis::Value::Nil))?;
    if pttl == -2 {
        return Ok(None);
    }
    let [_, now, log_reserved, window, used, tat] = read else {
        return Err(Error::Redis(format!(
            "rate_limiter/inspect: unexpected reply {reply:?}"
        )));
    };
    let mut state = RateState {
        kind,
        known: definition.is_some(),
        remaining: None,
        reset_in: (pttl >= 0).then(|| pttl as f64 / 1000.0),
        reserved: int(log_reserved).ok(),
    };
    let Some(def) = definition else {
        return Ok(Some(state));
    };
    let limiter = RateLimiter::new(client, name, algorithm, def.count, def.interval)?;
    let status = limiter.status(intr)?;
    state.remaining = Some(status.remaining);
    state.reset_in = Some(status.reset_in.as_secs_f64());
    if state.reserved.is_none() {
        let now = int(now)?;
        let whole = |v: &redis::Value| text(v).and_then(|s| s.parse::<i64>().ok());
        state.reserved = match algorithm {
            Algorithm::Window => Some(window_reserved(whole(window), whole(used), now, def)),
            Algorithm::Points => None,
            _ => Some(gcra_reserved(number(tat), now, algorithm, def)),
        };
    }
    Ok(Some(state))
}

fn interval_us(def: Definition) -> i64 {
    i64::try_from(def.interval.as_micros()).unwrap_or(i64::MAX)
}

/// Calls in windows after the current one (window.lua): every window before the latest one
/// with a call is full, so they wait for the earlier ones.
fn window_reserved(latest: Option<i64>, used: Option<i64>, now_us: i64, def: Definition) -> i64 {
    let (Some(latest), Some(used)) = (latest, used) else {
        return 0;
    };
    let current = now_us / interval_us(def).max(1);
    if latest > current {
        ((latest - current - 1) * i64::from(def.count) + used).max(0)
    } else {
        0
    }
}

/// Calls whose slot is after now (gcra.lua): the last call's slot is the arrival time it left
/// minus one emission and the tolerance, each earlier one an emission before.
fn gcra_reserved(tat: Option<f64>, now_us: i64, algorithm: Algorithm, def: Definition) -> i64 {
    let Some(tat) = tat else { return 0 };
    let emission = interval_us(def) as f64 / f64::from(def.count);
    let tolerance = emission
        * f64::from(match algorithm {
            Algorithm::Leaky { burst } => burst,
            _ => def.count - 1,
        });
    let ahead = (((tat - tolerance - now_us as f64) / emission) - 1e-9).ceil() as i64 - 1;
    ahead.max(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn def(count: u32, secs: u64) -> Definition {
        Definition {
            count,
            interval: Duration::from_secs(secs),
            burst: 0,
        }
    }

    #[test]
    fn counts_the_calls_waiting_for_later_windows() {
        // Two windows ahead with 2 calls in the last: one full window of 5, then 2.
        assert_eq!(window_reserved(Some(12), Some(2), 10_000_000, def(5, 1)), 7);
        assert_eq!(window_reserved(Some(10), Some(2), 10_000_000, def(5, 1)), 0);
        assert_eq!(window_reserved(None, None, 10_000_000, def(5, 1)), 0);
    }

    #[test]
    fn counts_the_calls_behind_an_arrival_time() {
        // A bucket of 4 per 4 s (1 s emission, tolerance 3 s): TAT 6 s ahead = 2 calls after now.
        let d = def(4, 4);
        assert_eq!(gcra_reserved(Some(6_000_000.0), 0, Algorithm::Bucket, d), 2);
        assert_eq!(gcra_reserved(Some(1_000_000.0), 0, Algorithm::Bucket, d), 0);
        assert_eq!(parts()[1], ("log", "sliding_window"));
        assert_eq!(parts().iter().map(|p| p.0).collect::<Vec<_>>(), PARTS);
    }
}
