//! `Ferrolock::Native::Admin.force_release`: an operator's release of a holder by its token
//! (lib/ferrolock/admin/release.rb reads the token first). See ferrolock-core's admin.rs.
//! `Native::Admin.holder(token)`: who a token says holds it (admin/holder.rs).
//! `Native::Admin.state(client, kind, name)` and the key layout Admin lists by (admin/state.rs).

use crate::errors::{core_error, seconds};
use crate::guard;
use crate::nogvl::{run, Retry};
use crate::ruby_api::client::RbClient;
use ferrolock_core::admin::{force_release, Held, ReleaseParams};
use magnus::{function, prelude::*, Error, RModule, Ruby};

mod holder;
mod state;

/// true released (handed on), false `token` no longer holds `name`.
fn release(
    ruby: &Ruby,
    client: &RbClient,
    kind: String,
    name: String,
    token: String,
    ttl: f64,
    limit: u32,
) -> Result<bool, Error> {
    let held = Held::parse(&kind).map_err(|e| core_error(ruby, e))?;
    let params = ReleaseParams {
        ttl: seconds(ruby, "ttl", ttl)?,
        limit,
    };
    // Once: a repeat after the hand-off would find the token gone and report false.
    run(ruby, Retry::Once, |intr| {
        force_release(&client.0, intr, held, &name, &token, params)
    })
}

/// Takes `job_id` out of a limits_concurrency key's blocked line; true when it was there.
fn unblock_job(ruby: &Ruby, client: &RbClient, key: String, job_id: String) -> Result<bool, Error> {
    run(ruby, Retry::Idempotent, |intr| {
        ferrolock_core::admin::unblock_job(&client.0, intr, &key, &job_id)
    })
}

/// `[next cursor, keys, masters]` of one SCAN on master `node` (lib/ferrolock/admin/scanner.rb).
fn scan(
    ruby: &Ruby,
    client: &RbClient,
    node: usize,
    cursor: String,
    pattern: String,
    count: u32,
) -> Result<(String, Vec<String>, usize), Error> {
    run(ruby, Retry::Idempotent, |intr| {
        ferrolock_core::admin::scan(&client.0, intr, node, &cursor, &pattern, count)
    })
}

pub fn init(_ruby: &Ruby, native: RModule) -> Result<(), Error> {
    let module = native.define_module("Admin")?;
    module.define_singleton_method("force_release", function!(guard::f6(release), 6))?;
    module.define_singleton_method("scan", function!(guard::f5(scan), 5))?;
    module.define_singleton_method("unblock_job", function!(guard::f3(unblock_job), 3))?;
    module.define_singleton_method("state", function!(guard::f3(state::state), 3))?;
    module.define_singleton_method("rate_state", function!(guard::f4(state::rate_state), 4))?;
    module.define_singleton_method("tenant_state", function!(guard::f4(state::tenant_state), 4))?;
    module.define_singleton_method("kinds", function!(guard::f0(state::kinds), 0))?;
    module.define_singleton_method("rate_kinds", function!(guard::f0(state::rate_kinds), 0))?;
    module.define_singleton_method("scan_pattern", function!(guard::f3(state::scan_pattern), 3))?;
    module.define_singleton_method("key", function!(guard::f3(state::key), 3))?;
    module.define_singleton_method("parse_key", function!(guard::f2(state::parse_key), 2))?;
    module.define_singleton_method("escape_glob", function!(guard::f1(state::escape_glob), 1))?;
    module.define_singleton_method("namespace_of", function!(guard::f1(state::namespace_of), 1))?;
    module.define_singleton_method("tenant_of", function!(guard::f1(state::tenant_of), 1))?;
    module.define_singleton_method(
        "tenant_prefix",
        function!(guard::f1(state::tenant_prefix), 1),
    )?;
    module.define_singleton_method(
        "unique_digest",
        function!(guard::f1(state::unique_digest), 1),
    )?;
    module.define_singleton_method("unique_run", function!(guard::f1(state::unique_run), 1))?;
    module.const_set(
        "ANY_NAMESPACE",
        ferrolock_core::admin::layout::ANY_NAMESPACE,
    )?;
    // Tokens made from now on carry the calling thread, fiber and Sidekiq job.
    holder::register();
    module.define_singleton_method("holder", function!(guard::f1(holder::decode), 1))?;
    module.define_singleton_method(
        "holder_metadata=",
        function!(guard::f1(holder::set_enabled), 1),
    )?;
    Ok(())
}
