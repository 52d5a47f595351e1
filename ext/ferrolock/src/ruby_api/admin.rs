//! `Ferrolock::Native::Admin.force_release`: an operator's release of a holder by its token
//! (lib/ferrolock/admin/release.rb reads the token first). See ferrolock-core's admin.rs.
//! `Native::Admin.holder(token)`: who a token says holds it (admin/holder.rs).

use crate::errors::{core_error, seconds};
use crate::guard;
use crate::nogvl::{run, Retry};
use crate::ruby_api::client::RbClient;
use ferrolock_core::admin::{force_release, Held, ReleaseParams};
use magnus::{function, prelude::*, Error, RModule, Ruby};

mod holder;

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
    // Tokens made from now on carry the calling thread, fiber and Sidekiq job.
    holder::register();
    module.define_singleton_method("holder", function!(guard::f1(holder::decode), 1))?;
    module.define_singleton_method(
        "holder_metadata=",
        function!(guard::f1(holder::set_enabled), 1),
    )?;
    Ok(())
}
