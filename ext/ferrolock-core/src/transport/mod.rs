//! The transport: how a call reaches Redis and its reply comes back. Nothing here knows what a
//! lock is; the primitives reach it through [`crate::client::Client`].
//!
//! - `options`: what a client is built from (re-exported by `client`).
//! - `endpoint`: where to connect and how to authenticate, parsed from a URL; `tls`: rediss://.
//! - `conn`: one connection (its socket is ours, so a blocked read can be cut); `spin`: polling
//!   for a nearby server's reply before sleeping; `poll`: the `poll(2)` both use.
//! - `pool`: the idle connections to one server, reset in a forked child.
//! - `topology`: which server a call goes to (one server, a `cluster` by `slot`, or the primary
//!   a `sentinel` set names), and re-sending calls that certainly did not run.

pub(crate) mod cluster;
pub(crate) mod conn;
pub(crate) mod endpoint;
pub(crate) mod options;
pub(crate) mod poll;
pub(crate) mod pool;
pub(crate) mod sentinel;
pub mod slot;
pub(crate) mod spin;
pub(crate) mod tls;
pub(crate) mod topology;
