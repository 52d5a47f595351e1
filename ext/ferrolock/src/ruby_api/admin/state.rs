//! `Native::Admin.state(client, kind, name)`: what ferrolock keeps under a name, read by the
//! primitive's own core `inspect` (ferrolock-core's inspect.rs), as a Hash with Symbol keys
//! (nil when nothing is there). The fields of each kind are documented on its core state type
//! (`MutexState::record` …); Admin's `*_info.rb` only format them. And the key layout Admin
//! lists by (ferrolock-core's admin/layout.rs): `layout`, `scan_pattern`, `parse_key`, `key`,
//! `escape_glob`.

use crate::nogvl::{run, Retry};
use crate::ruby_api::client::RbClient;
use ferrolock_core::admin::layout;
use ferrolock_core::inspect::{Field, Record};
use magnus::{prelude::*, Error, IntoValue, RHash, Ruby, Value};

pub fn state(
    ruby: &Ruby,
    client: &RbClient,
    kind: String,
    name: String,
) -> Result<Option<RHash>, Error> {
    let record = run(ruby, Retry::Idempotent, |intr| {
        ferrolock_core::admin::state::state(&client.0, intr, &kind, &name)
    })?;
    record.map(|r| hash(ruby, r)).transpose()
}

fn hash(ruby: &Ruby, record: Record) -> Result<RHash, Error> {
    let out = ruby.hash_new();
    for (name, field) in record {
        out.aset(ruby.to_symbol(name), value(ruby, field)?)?;
    }
    Ok(out)
}

fn value(ruby: &Ruby, field: Field) -> Result<Value, Error> {
    Ok(match field {
        Field::Nil => ruby.qnil().as_value(),
        Field::Bool(b) => b.into_value_with(ruby),
        Field::Int(i) => ruby.integer_from_i64(i).as_value(),
        Field::Float(f) => ruby.float_from_f64(f).as_value(),
        Field::Text(s) => ruby.str_new(&s).as_value(),
        Field::List(items) => {
            let ary = ruby.ary_new_capa(items.len());
            for item in items {
                ary.push(value(ruby, item)?)?;
            }
            ary.as_value()
        }
        Field::Record(r) => hash(ruby, r)?.as_value(),
    })
}

/// `{ kind => [name prefix, [part, …]] }` of every kind Admin lists.
pub fn kinds(ruby: &Ruby) -> Result<RHash, Error> {
    let out = ruby.hash_new();
    for k in layout::KINDS {
        let parts = ruby.ary_from_iter(k.parts.iter().map(|p| ruby.str_new(p)));
        out.aset(ruby.to_symbol(k.kind), (k.prefix, parts))?;
    }
    Ok(out)
}

pub fn scan_pattern(
    _: &Ruby,
    namespace: String,
    name: String,
    part: String,
) -> Result<String, Error> {
    Ok(layout::pattern(&namespace, &name, &part))
}

pub fn parse_key(
    _: &Ruby,
    namespace: String,
    key: String,
) -> Result<Option<(String, String)>, Error> {
    Ok(layout::parse(&namespace, &key).map(|(n, p)| (n.to_string(), p.to_string())))
}

pub fn key(_: &Ruby, namespace: String, name: String, part: String) -> Result<String, Error> {
    Ok(layout::key(&namespace, &name, &part))
}

pub fn escape_glob(_: &Ruby, text: String) -> Result<String, Error> {
    Ok(layout::escape(&text))
}

/// `[job class, digest]` of a uniqueness lock's name (its digest or `<digest>:run`), or nil.
pub fn unique_digest(_: &Ruby, name: String) -> Result<Option<(String, String)>, Error> {
    use ferrolock_core::unique_inspect as unique;
    Ok(unique::digest_of(&name)
        .and_then(|digest| Some((unique::job_class(digest)?.to_string(), digest.to_string()))))
}

/// A rate limiter's state under `name`'s key `part` (ferrolock-core's rate_limiter/inspect.rs);
/// `definition`: the app's `[count, interval, burst]` of that name and kind, or nil.
pub fn rate_state(
    ruby: &Ruby,
    client: &RbClient,
    name: String,
    part: String,
    definition: Option<(u32, f64, u32)>,
) -> Result<Option<RHash>, Error> {
    use ferrolock_core::rate_inspect::{inspect, Definition};
    let definition = match definition {
        Some((count, interval, burst)) => Some(Definition {
            count,
            interval: crate::errors::seconds(ruby, "interval", interval)?,
            burst,
        }),
        None => None,
    };
    let state = run(ruby, Retry::Idempotent, |intr| {
        inspect(&client.0, intr, &name, &part, definition)
    })?;
    state.map(|s| hash(ruby, s.record())).transpose()
}

/// `{ key part => kind }` of the rate limiters' algorithms.
pub fn rate_kinds(ruby: &Ruby) -> Result<RHash, Error> {
    let out = ruby.hash_new();
    for (part, kind) in ferrolock_core::rate_inspect::parts() {
        out.aset(part, kind)?;
    }
    Ok(out)
}

/// A (job class, tenant)'s counters under `name`'s `part`, one per window in `pers` (seconds;
/// ferrolock-core's fair_tenant/inspect.rs).
pub fn tenant_state(
    ruby: &Ruby,
    client: &RbClient,
    name: String,
    part: String,
    pers: Vec<f64>,
) -> Result<Option<RHash>, Error> {
    let state = run(ruby, Retry::Idempotent, |intr| {
        ferrolock_core::fair_tenant::inspect::inspect(&client.0, intr, &name, &part, &pers)
    })?;
    state.map(|s| hash(ruby, s.record())).transpose()
}

/// `[job class, tenant]` of a FairTenant name, or nil.
pub fn tenant_of(_: &Ruby, name: String) -> Result<Option<(String, String)>, Error> {
    Ok(ferrolock_core::fair_tenant::inspect::split(&name))
}

/// The name prefix of a job class's tenants.
pub fn tenant_prefix(_: &Ruby, job_class: String) -> Result<String, Error> {
    Ok(ferrolock_core::fair_tenant::inspect::class_prefix(
        &job_class,
    ))
}

/// The name of a uniqueness digest's run-time lock.
pub fn unique_run(_: &Ruby, digest: String) -> Result<String, Error> {
    Ok(format!(
        "{digest}{}",
        ferrolock_core::unique_inspect::RUN_SUFFIX
    ))
}

/// The namespace of a key shaped like ferrolock's, or nil (the `ferrolock` command's hint).
pub fn namespace_of(_: &Ruby, key: String) -> Result<Option<String>, Error> {
    Ok(layout::namespace_of(&key).map(String::from))
}
