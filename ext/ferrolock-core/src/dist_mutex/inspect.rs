//! Admin's read of a DistMutex (inspect.rs): the holder's token, the lock's TTL, the fence
//! counter's last value (the holder's fencing token) and the live waiters of its line, in one
//! read-only script.

use crate::client::{int, text, Client};
use crate::error::{Error, Result};
use crate::inspect::{items, Field, Record};
use crate::interrupt::Interrupt;
use crate::lua_script;
use crate::script::ScriptCall;

lua_script!(INSPECT = "dist_mutex/inspect", after "inspect/line");

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MutexState {
    pub token: Option<String>,
    /// The lock's PTTL (ms; -2 free).
    pub pttl: i64,
    /// The fence counter's last value (None: none, not a number, or a holder made with
    /// `fencing: false`, whose hold has no token).
    pub fencing_token: Option<i64>,
    pub waiters: i64,
}

impl MutexState {
    /// `token`, `fencing_token`, `ttl` (seconds), `waiters`.
    pub fn record(self) -> Record {
        vec![
            ("token", Field::text(self.token)),
            ("fencing_token", Field::int(self.fencing_token)),
            ("ttl", Field::ttl(self.pttl)),
            ("waiters", Field::Int(self.waiters)),
        ]
    }
}

/// None when nothing of the mutex is in Redis (no holder, no live waiter).
pub fn inspect(client: &Client, intr: &Interrupt, name: &str) -> Result<Option<MutexState>> {
    let keys = client.keys(name)?;
    let call = ScriptCall::new(&INSPECT)
        .key(keys.part("lock"))
        .key(keys.part("fence"))
        .key(keys.part("waiters"));
    let reply = client.eval(intr, &call)?;
    let [token, pttl, fence, waiters] = items(&reply, "dist_mutex/inspect")? else {
        return Err(Error::Redis(format!(
            "dist_mutex/inspect: unexpected reply {reply:?}"
        )));
    };
    let token = text(token);
    let fenced = token.as_deref().is_none_or(crate::token::is_fenced);
    let state = MutexState {
        pttl: int(pttl)?,
        fencing_token: text(fence).and_then(|f| f.parse().ok()).filter(|_| fenced),
        token,
        waiters: int(waiters)?,
    };
    Ok((state.token.is_some() || state.waiters > 0).then_some(state))
}
