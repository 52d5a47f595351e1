//! FairTenant: counts each (job class, tenant)'s enqueues in sliding windows and says which
//! rerouting rule the latest enqueue breaks. One script per enqueue (record, trim, expire and
//! every rule's count), so one round trip whatever the number of rules, and Redis time only.
//!
//! Two storage modes: `Exact` keeps a sorted set of jids per tenant (exact counts, memory grows
//! with the tenant's enqueues within the longest window); `Bounded` keeps sliding-window
//! counters (two buckets per distinct window) in one small hash, whatever the enqueue rate.

pub mod inspect;

use crate::client::{int, Client};
use crate::error::{Error, Result};
use crate::interrupt::Interrupt;
use crate::lua_script;
use crate::script::ScriptCall;
use std::time::Duration;

lua_script!(EXACT = "fair_tenant/exact");
lua_script!(BOUNDED = "fair_tenant/bounded");

/// Rules per job class: Redis handles them all in one script, but a script's argument list
/// should stay small.
pub const MAX_RULES: usize = 32;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Exact,
    Bounded,
}

impl Mode {
    pub fn parse(name: &str) -> Result<Mode> {
        match name {
            "exact" => Ok(Mode::Exact),
            "bounded" => Ok(Mode::Bounded),
            other => Err(Error::argument(format!(
                "fair_tenant_mode: must be :exact or :bounded, got {other:?}"
            ))),
        }
    }

    fn key_part(self) -> &'static str {
        match self {
            Mode::Exact => "z",
            Mode::Bounded => "w",
        }
    }
}

/// One rule: more than `threshold` enqueues within `per` breaks it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rule {
    pub threshold: u64,
    pub per: Duration,
}

/// A job class's rules, checked once and reused for every enqueue.
#[derive(Clone, Debug)]
pub struct Rules {
    /// (window in ms, threshold), in the order given: the LAST broken rule wins.
    pairs: Vec<(u64, u64)>,
    /// The distinct windows (ms), ascending: rules sharing a window share its counters in
    /// bounded mode. The last is the longest.
    windows: Vec<u64>,
}

impl Rules {
    pub fn new(rules: &[Rule]) -> Result<Rules> {
        if rules.is_empty() {
            return Err(Error::argument(
                "fair_tenant_queues: needs at least one rule",
            ));
        }
        if rules.len() > MAX_RULES {
            return Err(Error::argument(format!(
                "fair_tenant_queues: at most {MAX_RULES} rules, got {}",
                rules.len()
            )));
        }
        let mut pairs = Vec::with_capacity(rules.len());
        for (i, rule) in rules.iter().enumerate() {
            if rule.threshold == 0 {
                return Err(Error::argument(format!(
                    "fair_tenant_queues[{i}].threshold: must be positive"
                )));
            }
            let per_ms = rule.per.as_millis();
            if per_ms < 1 {
                return Err(Error::argument(format!(
                    "fair_tenant_queues[{i}].per: must be at least 0.001 seconds"
                )));
            }
            // Lua numbers are doubles: keep windows well inside their exact integer range.
            if per_ms > (1u128 << 40) {
                return Err(Error::argument(format!(
                    "fair_tenant_queues[{i}].per: too long ({per_ms} ms)"
                )));
            }
            pairs.push((per_ms as u64, rule.threshold));
        }
        let mut windows: Vec<u64> = pairs.iter().map(|(per, _)| *per).collect();
        windows.sort_unstable();
        windows.dedup();
        Ok(Rules { pairs, windows })
    }

    fn longest(&self) -> u64 {
        self.windows.last().copied().unwrap_or(0)
    }

    pub fn len(&self) -> usize {
        self.pairs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.pairs.is_empty()
    }
}

/// exact.lua's arguments.
struct ExactArgs<'a> {
    /// The enqueued job.
    jid: &'a str,
    /// Count this enqueue (false: only evaluate, a re-push already counted).
    record: bool,
    /// The rules, sent as `longest` (the longest window, ms), `rule_count`, then each rule's
    /// window (ms) and threshold.
    rules: &'a Rules,
}

impl ExactArgs<'_> {
    fn call(&self, key: &str) -> ScriptCall {
        let rules = self.rules;
        let mut call = ScriptCall::new(&EXACT)
            .key(key)
            .arg(self.jid)
            .flag(self.record)
            .arg(rules.longest())
            .arg(rules.pairs.len());
        for (per, threshold) in &rules.pairs {
            call = call.arg(*per).arg(*threshold);
        }
        call
    }
}

/// bounded.lua's arguments.
struct BoundedArgs<'a> {
    /// Count this enqueue (false: only evaluate, a re-push already counted).
    record: bool,
    /// The rules, sent as `w` (the number of distinct windows), the windows (ms, ascending),
    /// `rule_count`, then each rule's window number (1-based) and threshold.
    rules: &'a Rules,
}

impl BoundedArgs<'_> {
    fn call(&self, key: &str) -> ScriptCall {
        let rules = self.rules;
        let mut call = ScriptCall::new(&BOUNDED)
            .key(key)
            .flag(self.record)
            .arg(rules.windows.len());
        for per in &rules.windows {
            call = call.arg(*per);
        }
        call = call.arg(rules.pairs.len());
        for (per, threshold) in &rules.pairs {
            let number = rules.windows.partition_point(|w| w < per) + 1;
            call = call.arg(number).arg(*threshold);
        }
        call
    }
}

/// The hash-tag name of a (job class, tenant): `ft:<class>:<tenant>`. Braces would break the
/// hash tag and a ':' in the tenant would let two (class, tenant) pairs share a name, so both are
/// percent-escaped (and '%' itself); class names cannot contain ':' except as `::`, and the
/// escaped tenant contains none, so the last ':' always separates the two.
pub fn tag_name(job_class: &str, tenant: &str) -> Result<String> {
    if job_class.is_empty() {
        return Err(Error::argument("job class: must not be empty"));
    }
    if tenant.is_empty() {
        return Err(Error::argument("tenant: must not be empty"));
    }
    Ok(format!(
        "ft:{}:{}",
        escape(job_class, false),
        escape(tenant, true)
    ))
}

fn escape(s: &str, colon: bool) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '%' => out.push_str("%25"),
            '{' => out.push_str("%7B"),
            '}' => out.push_str("%7D"),
            ':' if colon => out.push_str("%3A"),
            c => out.push(c),
        }
    }
    out
}

/// The Redis key holding a (job class, tenant)'s counts in `mode`.
pub fn key(client: &Client, mode: Mode, job_class: &str, tenant: &str) -> Result<String> {
    Ok(client
        .keys(&tag_name(job_class, tenant)?)?
        .part(mode.key_part()))
}

/// One enqueue to evaluate. `record: false` when this job was already counted (a retry or a
/// scheduled job pushed again): the rules are checked without counting it a second time.
pub struct Enqueue<'a> {
    pub job_class: &'a str,
    pub tenant: &'a str,
    pub jid: &'a str,
    pub mode: Mode,
    pub record: bool,
}

/// Records the enqueue (unless `record` is false, or in exact mode its jid was already counted)
/// and returns the 1-based index of the last rule now broken, or 0.
pub fn check(
    client: &Client,
    intr: &Interrupt,
    rules: &Rules,
    enqueue: &Enqueue<'_>,
) -> Result<usize> {
    if enqueue.jid.is_empty() {
        return Err(Error::argument("jid: must not be empty"));
    }
    let key = key(client, enqueue.mode, enqueue.job_class, enqueue.tenant)?;
    let record = enqueue.record;
    let call = match enqueue.mode {
        Mode::Exact => ExactArgs {
            jid: enqueue.jid,
            record,
            rules,
        }
        .call(&key),
        Mode::Bounded => BoundedArgs { record, rules }.call(&key),
    };
    let index = int(&client.eval(intr, &call)?)?;
    usize::try_from(index)
        .ok()
        .filter(|i| *i <= rules.len())
        .ok_or_else(|| Error::Redis(format!("fair_tenant: unexpected rule index {index}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_braces_colons_and_percent_in_tag_names() {
        assert_eq!(tag_name("HeavyJob", "t1").unwrap(), "ft:HeavyJob:t1");
        assert_eq!(
            tag_name("Admin::Job", "a:b").unwrap(),
            "ft:Admin::Job:a%3Ab"
        );
        assert_eq!(tag_name("J", "{x}%").unwrap(), "ft:J:%7Bx%7D%25");
        // (class "A:B", tenant "c") and (class "A", tenant "B:c") must not share a name.
        assert_ne!(tag_name("A:B", "c").unwrap(), tag_name("A", "B:c").unwrap());
        assert!(tag_name("", "t").is_err());
        assert!(tag_name("J", "").is_err());
    }

    #[test]
    fn rejects_bad_rules_naming_the_rule() {
        let ok = Rule {
            threshold: 1,
            per: Duration::from_secs(1),
        };
        assert!(Rules::new(&[]).is_err());
        let zero = Rules::new(&[ok, Rule { threshold: 0, ..ok }]).unwrap_err();
        assert!(
            zero.to_string().contains("fair_tenant_queues[1].threshold"),
            "{zero}"
        );
        let short = Rules::new(&[Rule {
            per: Duration::from_micros(10),
            ..ok
        }])
        .unwrap_err();
        assert!(
            short.to_string().contains("fair_tenant_queues[0].per"),
            "{short}"
        );
        assert_eq!(Rules::new(&[ok, ok]).unwrap().len(), 2);
    }

    #[test]
    fn shares_windows_between_rules_longest_last() {
        let rule = |threshold, secs| Rule {
            threshold,
            per: Duration::from_secs(secs),
        };
        let rules = Rules::new(&[rule(500, 3600), rule(100, 60), rule(50, 3600)]).unwrap();
        assert_eq!(rules.windows, vec![60_000, 3_600_000]);
        assert_eq!(rules.longest(), 3_600_000);
    }

    #[test]
    fn parses_modes() {
        assert_eq!(Mode::parse("exact").unwrap(), Mode::Exact);
        assert_eq!(Mode::parse("bounded").unwrap(), Mode::Bounded);
        assert!(Mode::parse("fast").is_err());
    }
}
