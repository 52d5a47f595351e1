//! What operators read (Admin, the `ferrolock` command, the Sidekiq Web tab): each primitive
//! reads its own keys in its `inspect` submodule (`dist_mutex/inspect.rs` …) with one
//! read-only script, and answers a typed state; `admin::state` picks the primitive by kind.
//! A state goes to Ruby as a `Record`, its fields named as Admin's structs name them, so no Ruby
//! code spells a key part, a hash field or a member. The key layout itself (a kind's name prefix
//! and parts, SCAN patterns, reading a key back) is `admin::layout`.

use crate::client::{int, text, Client};
use crate::error::{Error, Result};
use crate::interrupt::Interrupt;
use crate::lua_script;
use redis::Value;

lua_script!(TOKENS = "inspect/tokens");

/// One field of a state, as the binding converts it (Nil: Ruby's nil).
#[derive(Clone, Debug, PartialEq)]
pub enum Field {
    Nil,
    Bool(bool),
    Int(i64),
    Float(f64),
    Text(String),
    List(Vec<Field>),
    Record(Record),
}

/// Named fields, in the order a state documents them.
pub type Record = Vec<(&'static str, Field)>;

impl Field {
    pub fn text(value: Option<String>) -> Field {
        value.map_or(Field::Nil, Field::Text)
    }

    pub fn int(value: Option<i64>) -> Field {
        value.map_or(Field::Nil, Field::Int)
    }

    /// Seconds of a PTTL; Nil when the key is gone (-2) or has no expiry (-1).
    pub fn ttl(pttl: i64) -> Field {
        if pttl >= 0 {
            Field::Float(pttl as f64 / 1000.0)
        } else {
            Field::Nil
        }
    }
}

/// A token key's value and PTTL (ms; -2 gone).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenKey {
    pub token: Option<String>,
    pub pttl: i64,
}

impl TokenKey {
    /// `token`, `ttl` (seconds); None when the key holds nothing.
    pub fn record(self) -> Option<Record> {
        let token = self.token?;
        Some(vec![
            ("token", Field::Text(token)),
            ("ttl", Field::ttl(self.pttl)),
        ])
    }
}

/// Each key's value and PTTL, in one read-only script (the keys share one hash tag).
pub fn tokens(client: &Client, intr: &Interrupt, keys: &[String]) -> Result<Vec<TokenKey>> {
    let call = keys
        .iter()
        .fold(crate::script::ScriptCall::new(&TOKENS), |call, key| {
            call.key(key.as_str())
        });
    let reply = client.eval(intr, &call)?;
    items(&reply, "inspect/tokens")?
        .chunks(2)
        .map(|pair| match pair {
            [value, pttl] => Ok(TokenKey {
                token: text(value),
                pttl: int(pttl)?,
            }),
            _ => Err(Error::Redis("inspect/tokens: odd reply".into())),
        })
        .collect()
}

/// An array reply's items.
pub fn items<'a>(reply: &'a Value, script: &str) -> Result<&'a [Value]> {
    match reply {
        Value::Array(items) => Ok(items.as_slice()),
        other => Err(Error::Redis(format!(
            "{script}: unexpected reply {other:?}"
        ))),
    }
}

/// A number reply (an integer, or a score as text); None for Nil or anything else.
pub fn number(v: &Value) -> Option<f64> {
    match v {
        Value::Int(i) => Some(*i as f64),
        Value::Double(d) => Some(*d),
        _ => text(v).and_then(|s| s.parse().ok()),
    }
}

/// `[member, score, …]` of a ZRANGE … WITHSCORES whose scores are deadlines in ms: each member
/// with the seconds left from `now_ms`, as `{token:, ttl:}` records (`who` names the member).
pub fn deadlines(reply: &Value, now_ms: i64, who: &'static str) -> Result<Vec<Field>> {
    let entries = items(reply, "inspect")?;
    Ok(entries
        .chunks(2)
        .filter_map(|pair| {
            let [member, score] = pair else { return None };
            let expiry = number(score)?;
            Some(Field::Record(vec![
                (who, Field::text(text(member))),
                ("ttl", Field::Float((expiry - now_ms as f64) / 1000.0)),
            ]))
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ttl_is_seconds_or_nil() {
        assert_eq!(Field::ttl(1500), Field::Float(1.5));
        assert_eq!(Field::ttl(-1), Field::Nil);
        assert_eq!(Field::ttl(-2), Field::Nil);
    }

    #[test]
    fn deadlines_are_seconds_from_now() {
        let reply = Value::Array(vec![
            Value::BulkString(b"t1".to_vec()),
            Value::BulkString(b"2500".to_vec()),
        ]);
        let got = deadlines(&reply, 1000, "token").unwrap();
        assert_eq!(
            got,
            vec![Field::Record(vec![
                ("token", Field::Text("t1".into())),
                ("ttl", Field::Float(1.5))
            ])]
        );
    }
}
