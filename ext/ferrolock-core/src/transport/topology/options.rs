//! Which topology a `ClientOptions` selects, validated: one server, cluster seeds or sentinels.
//! Only parsed here: topology.rs builds the pools (so this module imports none of the
//! transport's routing, and nothing of it imports this back).

use crate::error::{Error, Result};
use crate::transport::endpoint::{Addr, Endpoint, Secret};
use crate::transport::options::{ClientOptions, SentinelOptions};

/// The servers `ClientOptions` name, validated.
pub(super) enum Selected {
    Single(Endpoint),
    Cluster(Vec<Endpoint>),
    Sentinel {
        master_name: String,
        sentinels: Vec<Endpoint>,
        primary: Endpoint,
    },
}

/// The servers `opts` selects, what `redacted_url` shows for them, and whether any of them is
/// reached by TLS.
pub(super) fn select(opts: &ClientOptions) -> Result<(Selected, String, bool)> {
    if !opts.cluster.is_empty() && opts.sentinel.is_some() {
        return Err(Error::argument(
            "cluster, sentinels: give one of them, not both",
        ));
    }
    if !opts.cluster.is_empty() {
        let seeds = parse_tcp_urls("cluster", &opts.cluster)?;
        let tls = seeds.iter().any(is_tls);
        let shown = format!("cluster {}", shown_list(&seeds));
        return Ok((Selected::Cluster(seeds), shown, tls));
    }
    if let Some(so) = &opts.sentinel {
        return sentinel_from(so);
    }
    let endpoint = Endpoint::parse(&opts.url)?;
    reject_insecure(&endpoint, "url")?;
    let tls = is_tls(&endpoint);
    let shown = endpoint.redacted_url().to_string();
    Ok((Selected::Single(endpoint), shown, tls))
}

fn sentinel_from(so: &SentinelOptions) -> Result<(Selected, String, bool)> {
    if so.master_name.is_empty() {
        return Err(Error::argument(
            "name: the primary's name in Sentinel is empty",
        ));
    }
    if so.sentinels.is_empty() {
        return Err(Error::argument("sentinels: give at least one sentinel URL"));
    }
    let mut sentinels = parse_tcp_urls("sentinels", &so.sentinels)?;
    for ep in &mut sentinels {
        // Credentials in a sentinel's URL win over sentinel_username/sentinel_password.
        if ep.password.is_none() {
            ep.password = so.sentinel_password.clone().map(Secret);
            if ep.username.is_none() {
                ep.username = so.sentinel_username.clone();
            }
        }
    }
    let mut primary = sentinels[0].clone();
    primary.username = so.username.clone();
    primary.password = so.password.clone().map(Secret);
    primary.db = so.db;
    let tls = sentinels.iter().any(is_tls);
    let shown = format!(
        "sentinel primary {:?} via {}",
        so.master_name,
        shown_list(&sentinels)
    );
    let selected = Selected::Sentinel {
        master_name: so.master_name.clone(),
        sentinels,
        primary,
    };
    Ok((selected, shown, tls))
}

/// Cluster seeds and sentinels: TCP or TLS URLs (a unix socket cannot name other nodes).
fn parse_tcp_urls(arg: &str, urls: &[String]) -> Result<Vec<Endpoint>> {
    urls.iter()
        .enumerate()
        .map(|(i, url)| {
            let ep = Endpoint::parse(url).map_err(|e| match e {
                Error::Argument(m) => Error::argument(format!("{arg}[{i}]: {m}")),
                other => other,
            })?;
            if matches!(ep.addr, Addr::Unix(_)) {
                return Err(Error::argument(format!(
                    "{arg}[{i}]: unix sockets are not supported here; give redis:// or rediss://"
                )));
            }
            reject_insecure(&ep, &format!("{arg}[{i}]"))?;
            Ok(ep)
        })
        .collect()
}

fn reject_insecure(ep: &Endpoint, arg: &str) -> Result<()> {
    if matches!(ep.addr, Addr::Tls { insecure: true, .. }) {
        return Err(Error::argument(format!(
            "{arg}: #insecure TLS is not supported; give tls_ca_file instead"
        )));
    }
    Ok(())
}

fn is_tls(ep: &Endpoint) -> bool {
    matches!(ep.addr, Addr::Tls { .. })
}

fn shown_list(eps: &[Endpoint]) -> String {
    eps.iter()
        .map(Endpoint::redacted_url)
        .collect::<Vec<_>>()
        .join(", ")
}
