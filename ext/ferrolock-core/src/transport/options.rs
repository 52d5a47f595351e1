//! What a [`crate::client::Client`] is built from: the server(s), timeouts, TLS. The transport
//! reads these, so they live here (the client re-exports them) and the transport never imports
//! the client.

use std::path::PathBuf;
use std::time::Duration;

/// The most a reply is polled for (the budget itself follows the measured round trip, see
/// transport/spin.rs): covers a loopback, same-host or same-rack round trip with room to spare.
pub const DEFAULT_REPLY_SPIN: Duration = Duration::from_micros(200);

#[derive(Clone, Debug)]
pub struct ClientOptions {
    /// One Redis server. Ignored when `cluster` or `sentinel` is given.
    pub url: String,
    /// Redis Cluster seed node URLs (credentials, TLS scheme taken from them); non-empty selects
    /// cluster mode.
    pub cluster: Vec<String>,
    /// A Sentinel-managed primary.
    pub sentinel: Option<SentinelOptions>,
    pub namespace: String,
    pub connect_timeout: Duration,
    pub read_timeout: Duration,
    /// Extra CA certificate (PEM) trusted for rediss:// besides the system roots.
    pub tls_ca_file: Option<PathBuf>,
    /// How long a thread may poll for a reply before sleeping in `recv` (zero: never).
    pub reply_spin: Duration,
    /// Whether the lease watchdog probes for lost data (data_loss.rs) while this client holds
    /// leases or remembers parked jobs: one script every 5 s at most. Off, a lost lease is only
    /// a `lock_lost` (the core's command-count tests turn it off to count a primitive alone).
    pub data_loss_probe: bool,
}

impl ClientOptions {
    pub fn new(url: &str) -> Self {
        ClientOptions {
            url: url.to_string(),
            cluster: Vec::new(),
            sentinel: None,
            namespace: "ferrolock".to_string(),
            connect_timeout: Duration::from_secs(1),
            read_timeout: Duration::from_secs(1),
            tls_ca_file: None,
            reply_spin: DEFAULT_REPLY_SPIN,
            data_loss_probe: true,
        }
    }
}

/// Where to find a Sentinel-managed primary and how to authenticate to it.
#[derive(Clone, Debug, Default)]
pub struct SentinelOptions {
    /// The primary's name in the sentinels' configuration ("mymaster").
    pub master_name: String,
    /// Sentinel URLs, `redis://[user:password@]host:port` (credentials there authenticate to that
    /// sentinel, overriding `sentinel_username`/`sentinel_password`). With `rediss://` the
    /// primary is reached by TLS too.
    pub sentinels: Vec<String>,
    pub sentinel_username: Option<String>,
    pub sentinel_password: Option<String>,
    /// Credentials and database of the primary (and of the replicas it fails over to).
    pub username: Option<String>,
    pub password: Option<String>,
    pub db: i64,
}
