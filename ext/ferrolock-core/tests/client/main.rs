//! The client and its transport (one test binary): commands, scripts, timeouts, signals, Redis
//! Cluster and Sentinel, and the seconds every span is checked against. Each test starts its own
//! throwaway servers (support/).

/// What the Cluster and Sentinel setups (cluster.rs, sentinel.rs) share.
#[path = "../support/servers.rs"]
mod servers;
#[path = "../support/mod.rs"]
mod support;

mod client;
mod cluster;
mod seconds;
mod sentinel;
