//! Admin's read of a limits_concurrency key (inspect.rs): the jobs holding a slot, the blocked
//! line, the limit stored by the last job blocked and the oldest blocked job's payload, in one
//! read-only script.

use crate::client::{int, text, Client};
use crate::error::{Error, Result};
use crate::inspect::{deadlines, items, Field, Record};
use crate::interrupt::Interrupt;
use crate::lua_script;
use crate::script::ScriptCall;

lua_script!(INSPECT = "job_concurrency/inspect", after "inspect/line");

/// The name prefix of limits_concurrency keys: `concurrency:<group>/<key>`.
pub const PREFIX: &str = "concurrency:";

#[derive(Clone, Debug, PartialEq)]
pub struct KeyState {
    /// The key, without PREFIX.
    pub key: String,
    pub limit: Option<i64>,
    /// `{token: job_id, ttl:}` records, one per live slot.
    pub holders: Vec<Field>,
    pub blocked: i64,
    /// The first blocked job_ids, oldest first.
    pub blocked_jobs: Vec<String>,
    /// The oldest blocked job's payload (its ActiveJob JSON), when stored.
    pub oldest_payload: Option<String>,
}

impl KeyState {
    /// `key`, `limit`, `holders`, `blocked`, `blocked_jobs`, `oldest_job_id`, `oldest_payload`.
    pub fn record(self) -> Record {
        let oldest = self.blocked_jobs.first().cloned();
        vec![
            ("key", Field::Text(self.key)),
            ("limit", Field::int(self.limit)),
            ("holders", Field::List(self.holders)),
            ("blocked", Field::Int(self.blocked)),
            (
                "blocked_jobs",
                Field::List(self.blocked_jobs.into_iter().map(Field::Text).collect()),
            ),
            ("oldest_job_id", Field::text(oldest)),
            ("oldest_payload", Field::text(self.oldest_payload)),
        ]
    }
}

/// `name` is `concurrency:<key>`; None for another name, or when no job holds a slot nor waits.
/// `shown`: how many blocked job_ids to name.
pub fn inspect(
    client: &Client,
    intr: &Interrupt,
    name: &str,
    shown: u32,
) -> Result<Option<KeyState>> {
    let Some(key) = name.strip_prefix(PREFIX) else {
        return Ok(None);
    };
    let keys = client.keys(name)?;
    let call = ScriptCall::new(&INSPECT)
        .key(keys.part("slots"))
        .key(keys.part("blocked"))
        .key(keys.part("jobs"))
        .arg(shown.max(1));
    let reply = client.eval(intr, &call)?;
    let [now, held, blocked, first, limit, payload] = items(&reply, "job_concurrency/inspect")?
    else {
        return Err(Error::Redis(format!(
            "job_concurrency/inspect: unexpected reply {reply:?}"
        )));
    };
    let state = KeyState {
        key: key.into(),
        limit: text(limit).and_then(|l| l.parse().ok()),
        holders: deadlines(held, int(now)?, "token")?,
        blocked: int(blocked)?,
        blocked_jobs: items(first, "job_concurrency/inspect")?
            .iter()
            .filter_map(text)
            .collect(),
        oldest_payload: text(payload),
    };
    Ok((!state.holders.is_empty() || state.blocked > 0).then_some(state))
}
