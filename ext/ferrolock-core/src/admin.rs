//! Operator actions (the Sidekiq Web "Locks" tab and the `ferrolock` command). A force release
//! runs the primitive's OWN token-checked release script with the current holder's token, so it
//! does exactly what that holder's release would: hand the lock to the next waiter, signal the
//! limiter's or DualLock's waiters. A holder that changed in between is left alone (returns false).

use crate::client::{int, Client};
use crate::concurrent_limiter::{ConcurrentLimiter, LimiterOptions};
use crate::dist_mutex::{DistMutex, DistMutexOptions};
use crate::dual_lock::{DualLock, DualLockOptions};
use crate::error::{Error, Result};
use crate::interrupt::Interrupt;
use crate::script::ScriptCall;
use std::time::Duration;

/// What holds a name: the primitive whose release script is run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Held {
    DistMutex,
    DualLock,
    ConcurrentLimiter,
}

impl Held {
    pub fn parse(kind: &str) -> Result<Held> {
        match kind {
            "dist_mutex" => Ok(Held::DistMutex),
            "dual_lock" => Ok(Held::DualLock),
            "concurrent_limiter" => Ok(Held::ConcurrentLimiter),
            _ => Err(Error::argument(format!(
                "kind: must be dist_mutex, dual_lock or concurrent_limiter (got {kind:?})"
            ))),
        }
    }
}

/// What a release script needs beyond the name and token.
#[derive(Clone, Copy, Debug)]
pub struct ReleaseParams {
    /// DistMutex: the TTL a waiter handed the lock starts with (it renews by its own lease).
    pub ttl: Duration,
    /// ConcurrentLimiter: the most wake-up signals left pending (the limit, or the live slots).
    pub limit: u32,
}

/// The release call `token`'s own release would send.
pub fn release_call(
    client: &Client,
    held: Held,
    name: &str,
    token: &str,
    params: ReleaseParams,
) -> Result<ScriptCall> {
    crate::keys::check_name("token", token)?;
    Ok(match held {
        Held::DistMutex => {
            let opts = DistMutexOptions {
                lease: params.ttl,
                ..DistMutexOptions::default()
            };
            DistMutex::new(client, name, opts)?.release_call(token, false)
        }
        Held::DualLock => {
            let opts = DualLockOptions {
                wait_ttl: params.ttl,
                exec_ttl: params.ttl,
            };
            DualLock::new(client, name, opts)?.release_call(token)
        }
        Held::ConcurrentLimiter => {
            let opts = LimiterOptions {
                limit: params.limit.max(1),
                lease: params.ttl,
            };
            ConcurrentLimiter::new(client, name, opts)?.release_call(token)
        }
    })
}

/// Releases `token`'s hold on `name`; false when `token` no longer holds it.
pub fn force_release(
    client: &Client,
    intr: &Interrupt,
    held: Held,
    name: &str,
    token: &str,
    params: ReleaseParams,
) -> Result<bool> {
    let call = release_call(client, held, name, token, params)?;
    Ok(int(&client.eval(intr, &call)?)? == 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_three_kinds_and_names_the_argument_otherwise() {
        assert_eq!(Held::parse("dist_mutex").unwrap(), Held::DistMutex);
        assert_eq!(Held::parse("dual_lock").unwrap(), Held::DualLock);
        assert_eq!(
            Held::parse("concurrent_limiter").unwrap(),
            Held::ConcurrentLimiter
        );
        let err = Held::parse("mutex").unwrap_err().to_string();
        assert!(err.contains("kind"), "{err}");
    }
}
