//! Admin's read of a (job class, tenant)'s FairTenant counters (inspect.rs): for each rule's
//! window, the enqueues counted within it (exact mode), or bounded.lua's estimate.

use super::{escape, Mode};
use crate::client::{int, text, Client};
use crate::error::Result;
use crate::inspect::{items, Field, Record};
use crate::interrupt::Interrupt;
use crate::lua_script;
use crate::script::ScriptCall;
use redis::Value;

lua_script!(INSPECT = "fair_tenant/inspect");

/// The name prefix of FairTenant's keys: `ft:<class>:<tenant>` (tag_name).
pub const PREFIX: &str = "ft:";
/// The key part of each mode (Mode::key_part).
pub const PARTS: &[&str] = &["z", "w"];

/// The name prefix of one job class's tenants.
pub fn class_prefix(job_class: &str) -> String {
    format!("{PREFIX}{}:", escape(job_class, false))
}

/// (job class, tenant) of a name, unescaped; None for another name.
pub fn split(name: &str) -> Option<(String, String)> {
    let (job_class, tenant) = name.strip_prefix(PREFIX)?.rsplit_once(':')?;
    if job_class.is_empty() || tenant.is_empty() {
        return None;
    }
    Some((unescape(job_class), unescape(tenant)))
}

/// tag_name's escapes undone (%7B, %7D, %3A, %25, either case).
fn unescape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('%') {
        out.push_str(&rest[..at]);
        let code = rest.get(at + 1..at + 3).map(str::to_ascii_uppercase);
        let decoded = match code.as_deref() {
            Some("7B") => Some('{'),
            Some("7D") => Some('}'),
            Some("3A") => Some(':'),
            Some("25") => Some('%'),
            _ => None,
        };
        match decoded {
            Some(c) => {
                out.push(c);
                rest = &rest[at + 3..];
            }
            None => {
                out.push('%');
                rest = &rest[at + 1..];
            }
        }
    }
    out.push_str(rest);
    out
}

#[derive(Clone, Debug, PartialEq)]
pub struct TenantState {
    pub job_class: String,
    pub tenant: String,
    pub mode: Mode,
    /// Per window asked: a whole count (exact) or the estimate rounded to 0.01 (bounded).
    pub counted: Vec<Field>,
}

impl TenantState {
    /// `job_class`, `tenant`, `mode` ("exact" or "bounded"), `counted`.
    pub fn record(self) -> Record {
        let mode = match self.mode {
            Mode::Exact => "exact",
            Mode::Bounded => "bounded",
        };
        vec![
            ("job_class", Field::Text(self.job_class)),
            ("tenant", Field::Text(self.tenant)),
            ("mode", Field::Text(mode.into())),
            ("counted", Field::List(self.counted)),
        ]
    }
}

/// The counters under `name`'s `part` for each window (seconds); None for another name or part.
pub fn inspect(
    client: &Client,
    intr: &Interrupt,
    name: &str,
    part: &str,
    pers: &[f64],
) -> Result<Option<TenantState>> {
    let Some((job_class, tenant)) = split(name) else {
        return Ok(None);
    };
    let mode = match part {
        _ if part == Mode::Exact.key_part() => Mode::Exact,
        _ if part == Mode::Bounded.key_part() => Mode::Bounded,
        _ => return Ok(None),
    };
    // As Rules: a window's whole ms (the bounded hash's field names).
    let windows: Vec<i64> = pers
        .iter()
        .map(|per| (per * 1e9).round() as i64 / 1_000_000)
        .collect();
    let mut counted = Vec::with_capacity(windows.len());
    if !windows.is_empty() {
        let key = client.keys(name)?.part(part);
        let mut call = ScriptCall::new(&INSPECT)
            .key(key)
            .arg(if mode == Mode::Exact {
                "exact"
            } else {
                "bounded"
            });
        for w in &windows {
            call = call.arg(*w);
        }
        let reply = client.eval(intr, &call)?;
        let read = items(&reply, "fair_tenant/inspect")?;
        let now = int(read.first().unwrap_or(&Value::Nil))?;
        let rest = &read[1.min(read.len())..];
        for (i, per) in windows.iter().enumerate() {
            counted.push(match mode {
                Mode::Exact => Field::Int(rest.get(i).map(int).transpose()?.unwrap_or(0)),
                Mode::Bounded => Field::Float(estimate(rest.get(3 * i..3 * i + 3), now, *per)),
            });
        }
    }
    Ok(Some(TenantState {
        job_class,
        tenant,
        mode,
        counted,
    }))
}

/// bounded.lua's estimate: the current bucket plus the part of the previous one still inside
/// the window; a stored bucket the window moved on from is the previous one if adjacent, else
/// both are empty (missing fields read as 0).
fn estimate(stored: Option<&[Value]>, now: i64, per: i64) -> f64 {
    let field = |i: usize| {
        stored
            .and_then(|s| s.get(i))
            .and_then(text)
            .and_then(|v| v.parse::<i64>().ok())
            .unwrap_or(0)
    };
    let (at, cur, prev) = (field(0), field(1), field(2));
    let per = per.max(1);
    let bucket = now / per;
    let (cur, prev) = if at == bucket {
        (cur, prev)
    } else if at == bucket - 1 {
        (0, cur)
    } else {
        (0, 0)
    };
    let value = cur as f64 + (prev * (per - now % per)) as f64 / per as f64;
    (value * 100.0).round() / 100.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_and_unescapes_names() {
        let name = super::super::tag_name("Admin::Job", "a:b{%").unwrap();
        assert_eq!(split(&name), Some(("Admin::Job".into(), "a:b{%".into())));
        assert_eq!(split("ft::x"), None);
        assert_eq!(class_prefix("J{"), "ft:J%7B:");
        assert_eq!(PARTS, [Mode::Exact.key_part(), Mode::Bounded.key_part()]);
    }

    #[test]
    fn estimates_as_bounded_lua() {
        let v = |n: i64| Value::BulkString(n.to_string().into_bytes());
        // Bucket 10 of 1000 ms, 250 ms into it: 4 now + 3/4 of the previous 8.
        let stored = [v(10), v(4), v(8)];
        assert_eq!(estimate(Some(&stored), 10_250, 1000), 10.0);
        // The window moved on by one: the stored current bucket is the previous one.
        assert_eq!(estimate(Some(&stored), 11_500, 1000), 2.0);
        assert_eq!(estimate(None, 11_500, 1000), 0.0);
    }
}
