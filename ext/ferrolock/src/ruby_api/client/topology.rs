//! A Redis Cluster or a Sentinel-managed primary, from the Hash that lib/ferrolock/topology.rb
//! builds: `{"cluster" => [urls]}` or `{"master_name" =>, "sentinels" => [urls],
//! "sentinel_username" =>, "sentinel_password" =>, "username" =>, "password" =>, "db" =>}`.
//! The core checks the URLs again (errors name `cluster[i]` / `sentinels[i]`).

use ferrolock_core::{ClientOptions, SentinelOptions};
use magnus::{Error, RHash, Ruby};

/// Fills `opts.cluster` or `opts.sentinel`.
pub fn apply(ruby: &Ruby, spec: RHash, opts: &mut ClientOptions) -> Result<(), Error> {
    if let Some(seeds) = spec.lookup::<_, Option<Vec<String>>>("cluster")? {
        opts.cluster = seeds;
        return Ok(());
    }
    let missing = |what: &str| Error::new(ruby.exception_arg_error(), format!("{what}: missing"));
    opts.sentinel = Some(SentinelOptions {
        master_name: spec
            .lookup::<_, Option<String>>("master_name")?
            .ok_or_else(|| missing("name"))?,
        sentinels: spec
            .lookup::<_, Option<Vec<String>>>("sentinels")?
            .ok_or_else(|| missing("sentinels"))?,
        sentinel_username: spec.lookup("sentinel_username")?,
        sentinel_password: spec.lookup("sentinel_password")?,
        username: spec.lookup("username")?,
        password: spec.lookup("password")?,
        db: spec.lookup::<_, Option<i64>>("db")?.unwrap_or(0),
    });
    Ok(())
}
