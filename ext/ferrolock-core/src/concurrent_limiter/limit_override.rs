//! The operators' override of a limit, live: another limit, or paused (no slot is taken or
//! handed on). One hash per name, `<ns>:{<name>}:override` (fields `limit`, `paused`, `ttl`),
//! beside the slots it governs: a ConcurrentLimiter's (lua/concurrent_limiter/override.lua writes
//! it and wakes the waiters in line; acquire.lua and release.lua read it) and a `limits_concurrency`
//! key's (`JobConcurrency::write_override`, lua/job_concurrency/override.lua; admit.lua and
//! release.lua read it); operators read it with `read_override` (override_read.lua). The hash's
//! layout is lua/concurrent_limiter/override_state.lua's, put in front of every script that writes
//! or reads it, with the write step both override scripts share (`apply_override`). It survives
//! restarts until cleared, and expires only after `OVERRIDE_TTL` without an admission reading it.
//! Holders are never evicted.

use super::ConcurrentLimiter;
use crate::client::{int, Client};
use crate::error::{Error, Result};
use crate::interrupt::Interrupt;
use crate::lua_script;
use crate::script::ScriptCall;
use redis::Value;
use std::time::Duration;

lua_script!(WRITE = "concurrent_limiter/override",
    after "concurrent_limiter/override_state", "concurrent_limiter/line_entry");
lua_script!(READ = "concurrent_limiter/override_read", after "concurrent_limiter/override_state");

/// How long an override lives without an admission reading it (30 days).
pub const OVERRIDE_TTL: Duration = Duration::from_secs(30 * 24 * 3600);

/// What an operator changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OverrideAction {
    /// Another limit (a positive one), in force until cleared.
    SetLimit(u32),
    /// No new holder until resumed; nothing waiting is dropped.
    Pause,
    /// Undoes a pause (a limit set stays).
    Resume,
    /// Back to the code's limit, resumed.
    Clear,
}

impl OverrideAction {
    /// From its name ("set_limit", "pause", "resume", "clear") and, for set_limit, the limit.
    pub fn parse(action: &str, limit: Option<i64>) -> Result<OverrideAction> {
        match (action, limit) {
            ("set_limit", Some(l)) => u32::try_from(l)
                .ok()
                .filter(|l| *l > 0)
                .map(OverrideAction::SetLimit)
                .ok_or_else(|| {
                    Error::argument(format!("limit: must be a positive integer, got {l}"))
                }),
            ("set_limit", None) => Err(Error::argument(
                "limit: must be a positive integer, got nothing",
            )),
            ("pause", _) => Ok(OverrideAction::Pause),
            ("resume", _) => Ok(OverrideAction::Resume),
            ("clear", _) => Ok(OverrideAction::Clear),
            (other, _) => Err(Error::argument(format!(
                "action: must be one of set_limit, pause, resume, clear, got {other:?}"
            ))),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            OverrideAction::SetLimit(_) => "set_limit",
            OverrideAction::Pause => "pause",
            OverrideAction::Resume => "resume",
            OverrideAction::Clear => "clear",
        }
    }

    /// Whether it may let waiting callers in (they are woken, or promoted).
    pub fn eases(self) -> bool {
        self != OverrideAction::Pause
    }

    /// The script's arguments: the action, its limit ('' but for set_limit), the TTL (ms).
    pub(crate) fn args(self, call: ScriptCall) -> ScriptCall {
        let limit = match self {
            OverrideAction::SetLimit(l) => l.to_string(),
            _ => String::new(),
        };
        call.arg(self.name())
            .arg(limit)
            .arg(crate::seconds::millis(OVERRIDE_TTL))
    }
}

/// The override in force after a change (`limit` None and not paused: none).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Override {
    pub limit: Option<u32>,
    pub paused: bool,
}

impl Override {
    /// From an override script's reply, `{limit or nil, paused 0/1, ...}`.
    pub(crate) fn from_reply(op: &str, reply: &Value) -> Result<Override> {
        let unexpected = || Error::Redis(format!("{op}: unexpected reply {reply:?}"));
        let Value::Array(items) = reply else {
            return Err(unexpected());
        };
        let (Some(limit), Some(paused)) = (items.first(), items.get(1)) else {
            return Err(unexpected());
        };
        let limit = match limit {
            Value::Nil => None,
            v => Some(u32::try_from(int(v)?).map_err(|_| unexpected())?),
        };
        Ok(Override {
            limit,
            paused: int(paused)? == 1,
        })
    }
}

impl ConcurrentLimiter {
    /// Changes limiter `name`'s override (any process, no limiter object needed) and wakes its
    /// waiters unless pausing; the override now in force.
    pub fn write_override(
        client: &Client,
        intr: &Interrupt,
        name: &str,
        action: OverrideAction,
    ) -> Result<Override> {
        let keys = client.keys(name)?;
        let call = action
            .args(
                ScriptCall::new(&WRITE)
                    .key(keys.part("override"))
                    .key(keys.part("line")),
            )
            .arg(keys.part("grant:"))
            .arg(crate::inbox::Inbox::channel(client.namespace(), ""));
        Override::from_reply("concurrent_limiter/override", &client.eval(intr, &call)?)
    }

    /// The override stored under `name` (a limiter's name, or a limits_concurrency key's
    /// `concurrency:<key>`), None when there is none. `keep`: a reader that obeys a pause (a
    /// Shoryuken queue's) keeps one it finds alive, refreshing its TTL as an admission does; an
    /// operator's look (false) leaves the TTL as it was.
    pub fn read_override(
        client: &Client,
        intr: &Interrupt,
        name: &str,
        keep: bool,
    ) -> Result<Option<Override>> {
        let keys = client.keys(name)?;
        let call = ScriptCall::new(&READ).key(keys.part("override")).flag(keep);
        let now = Override::from_reply(
            "concurrent_limiter/override_read",
            &client.eval(intr, &call)?,
        )?;
        Ok((now != Override::default()).then_some(now))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_write_carries_the_shared_state_and_line_entry_functions_once() {
        let source = WRITE.source;
        for function in [
            "local function write_override(",
            "local function apply_override(",
            "local function parse(",
            "local function tell(",
        ] {
            assert_eq!(source.matches(function).count(), 1, "{function}");
        }
        assert!(source.ends_with(include_str!("../../lua/concurrent_limiter/override.lua")));
        assert!(READ.source.contains("local function override_reply("));
    }

    #[test]
    fn actions_are_parsed_by_name_and_a_limit_must_be_positive() {
        assert_eq!(
            OverrideAction::parse("set_limit", Some(3)).unwrap(),
            OverrideAction::SetLimit(3)
        );
        assert_eq!(
            OverrideAction::parse("pause", None).unwrap(),
            OverrideAction::Pause
        );
        assert!(OverrideAction::parse("set_limit", Some(0)).is_err());
        assert!(OverrideAction::parse("set_limit", None).is_err());
        assert!(OverrideAction::parse("stop", None).is_err());
    }
}
