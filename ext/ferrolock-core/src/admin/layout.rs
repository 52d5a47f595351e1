//! ferrolock's key layout as operators' listings read it: `<namespace>:{<name>}:<part>` (keys.rs),
//! each kind's name prefix and the parts a listing looks for, SCAN MATCH patterns, and a key
//! read back into (name, part). Names never contain braces, so the first "{" after the
//! namespace and the "}:" before the part delimit the name.

use crate::fair_tenant::inspect as fair_tenant;
use crate::job_concurrency::inspect as job_concurrency;
use crate::message_lock::inspect as message_lock;
use crate::rate_limiter::inspect as rate_limiter;
use crate::unique_lock::inspect as unique_lock;

/// A kind as Admin lists it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Kind {
    pub kind: &'static str,
    /// What every name of the kind starts with ("" for names of the app's choosing).
    pub prefix: &'static str,
    /// The key parts a listing finds it by.
    pub parts: &'static [&'static str],
}

pub const KINDS: &[Kind] = &[
    Kind {
        kind: "dist_mutex",
        prefix: "",
        parts: &["lock"],
    },
    Kind {
        kind: "dual_lock",
        prefix: "",
        parts: &["exec", "wait"],
    },
    Kind {
        kind: "concurrent_limiter",
        prefix: "",
        parts: &["slots", "override"],
    },
    Kind {
        kind: "limits_concurrency",
        prefix: job_concurrency::PREFIX,
        parts: &["slots", "blocked"],
    },
    Kind {
        kind: "shoryuken_marker",
        prefix: message_lock::PREFIX,
        parts: &["state"],
    },
    Kind {
        kind: "unique_lock",
        prefix: unique_lock::PREFIX,
        parts: &["lock", "exec", "wait"],
    },
    Kind {
        kind: "fair_tenant",
        prefix: fair_tenant::PREFIX,
        parts: fair_tenant::PARTS,
    },
    Kind {
        kind: "rate_limiter",
        prefix: rate_limiter::PREFIX,
        parts: rate_limiter::PARTS,
    },
];

/// `text` matched literally inside a Redis glob.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// A SCAN MATCH pattern for `namespace`'s keys whose name matches the glob `name` and whose
/// part matches the glob `part`.
pub fn pattern(namespace: &str, name: &str, part: &str) -> String {
    format!("{}:{{{name}}}:{part}", escape(namespace))
}

/// The key of `name`'s `part` (no check of the name: Admin's callers check it).
pub fn key(namespace: &str, name: &str, part: &str) -> String {
    format!("{namespace}:{{{name}}}:{part}")
}

/// (name, part) of a key of `namespace`; None for a key outside it.
pub fn parse<'a>(namespace: &str, key: &'a str) -> Option<(&'a str, &'a str)> {
    let rest = key.strip_prefix(namespace)?.strip_prefix(":{")?;
    let close = rest.find("}:")?;
    Some((&rest[..close], &rest[close + 2..]))
}

/// A SCAN MATCH pattern for keys shaped like ferrolock's, in any namespace.
pub const ANY_NAMESPACE: &str = "*:{*}:*";

/// The namespace of a key shaped like ferrolock's (`<namespace>:{<name>}:<part>`, the part
/// starting with a lowercase letter: "lock", "slots", "state"...), or None.
pub fn namespace_of(key: &str) -> Option<&str> {
    let open = key.find('{')?;
    let namespace = key[..open].strip_suffix(':')?;
    let rest = &key[open + 1..];
    let close = rest.find(['{', '}'])?;
    let part = rest[close..].strip_prefix("}:")?;
    let shaped = !namespace.is_empty()
        && !namespace.contains('}')
        && close > 0
        && part.starts_with(|c: char| c.is_ascii_lowercase());
    shaped.then_some(namespace)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_keys_back_and_escapes_patterns() {
        assert_eq!(parse("ns", "ns:{a:b}:lock"), Some(("a:b", "lock")));
        assert_eq!(parse("ns", "ns:{a}:grant:x}:y"), Some(("a", "grant:x}:y")));
        assert_eq!(parse("ns", "other:{a}:lock"), None);
        assert_eq!(parse("ns", "ns:{a"), None);
        assert_eq!(pattern("n*s", "r*", "lock"), "n\\*s:{r*}:lock");
        assert_eq!(key("ns", "a", "slots"), "ns:{a}:slots");
        assert_eq!(namespace_of("my:app:{a:b}:lock"), Some("my:app"));
        assert_eq!(namespace_of("app:{a}:Lock"), None);
        assert_eq!(namespace_of(":{a}:lock"), None);
        assert_eq!(namespace_of("app:{}:lock"), None);
        assert_eq!(namespace_of("app:{a{b}:lock"), None);
    }
}
