//! Admin's read of a ConcurrentLimiter (inspect.rs): its live slots, the limit stored by the
//! latest acquisition that took a free slot (the slots set's `{limit}` member, scored -limit:
//! acquire.lua), its line's live waiters and the operators' override, in one read-only script.

use super::ConcurrentLimiter;
use crate::client::{int, text, Client};
use crate::error::{Error, Result};
use crate::inspect::{deadlines, items, number, Field, Record};
use crate::interrupt::Interrupt;
use crate::lua_script;
use crate::script::ScriptCall;

lua_script!(INSPECT = "concurrent_limiter/inspect", after "inspect/line");

#[derive(Clone, Debug, PartialEq)]
pub struct LimiterState {
    /// The stored limit (None: no slots set, or a version that did not write it).
    pub limit: Option<i64>,
    /// `{token:, ttl:}` records, one per live slot.
    pub slots: Vec<Field>,
    pub waiting: i64,
    /// The override's limit and paused flag; None when there is no override.
    pub override_limit: Option<i64>,
    pub paused: Option<bool>,
}

impl LimiterState {
    /// `limit`, `slots`, `waiting`, `override` (`{limit:, paused:}` or nil).
    pub fn record(self) -> Record {
        let over = if self.override_limit.is_none() && self.paused.is_none() {
            Field::Nil
        } else {
            Field::Record(vec![
                ("limit", Field::int(self.override_limit)),
                ("paused", Field::Bool(self.paused.unwrap_or(false))),
            ])
        };
        vec![
            ("limit", Field::int(self.limit)),
            ("slots", Field::List(self.slots)),
            ("waiting", Field::Int(self.waiting)),
            ("override", over),
        ]
    }

    fn idle(&self) -> bool {
        self.slots.is_empty()
            && self.waiting == 0
            && self.override_limit.is_none()
            && self.paused.is_none()
    }
}

/// The state whether idle or not.
pub fn read(client: &Client, intr: &Interrupt, name: &str) -> Result<LimiterState> {
    let keys = client.keys(name)?;
    let call = ScriptCall::new(&INSPECT)
        .key(keys.part("slots"))
        .key(keys.part("line"))
        .key(keys.part("override"));
    let reply = client.eval(intr, &call)?;
    let [now, slots, limit, waiting, over_limit, paused] =
        items(&reply, "concurrent_limiter/inspect")?
    else {
        return Err(Error::Redis(format!(
            "concurrent_limiter/inspect: unexpected reply {reply:?}"
        )));
    };
    Ok(LimiterState {
        limit: number(limit).map(|score| (-score) as i64),
        slots: deadlines(slots, int(now)?, "token")?,
        waiting: int(waiting)?,
        override_limit: text(over_limit).and_then(|l| l.parse().ok()),
        paused: text(paused).map(|p| p == "1"),
    })
}

/// None when there is no live slot, no waiter and no override.
pub fn inspect(client: &Client, intr: &Interrupt, name: &str) -> Result<Option<LimiterState>> {
    let state = read(client, intr, name)?;
    Ok((!state.idle()).then_some(state))
}

impl ConcurrentLimiter {
    /// The limit stored by the latest acquisition that took a free slot (see LimiterState).
    pub fn stored_limit(&self, intr: &Interrupt) -> Result<Option<i64>> {
        Ok(read(&self.line.client, intr, &self.line.name)?.limit)
    }
}
