//! Admin's read of a DualLock (inspect.rs): each stage's token and TTL.

use crate::client::Client;
use crate::error::Result;
use crate::inspect::{tokens, Field, Record, TokenKey};
use crate::interrupt::Interrupt;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DualState {
    /// EXEC: the duplicate running.
    pub exec: TokenKey,
    /// WAIT: the one waiting.
    pub wait: TokenKey,
}

impl DualState {
    /// `exec`, `wait`: each `{token:, ttl:}` or nil when free.
    pub fn record(self) -> Record {
        let stage = |k: TokenKey| k.record().map_or(Field::Nil, Field::Record);
        vec![("exec", stage(self.exec)), ("wait", stage(self.wait))]
    }

    pub fn held(&self) -> bool {
        self.exec.token.is_some() || self.wait.token.is_some()
    }
}

/// Both stages, held or not.
pub fn stages(client: &Client, intr: &Interrupt, name: &str) -> Result<DualState> {
    let keys = client.keys(name)?;
    let mut read = tokens(client, intr, &[keys.part("exec"), keys.part("wait")])?.into_iter();
    let mut next = || {
        read.next().unwrap_or(TokenKey {
            token: None,
            pttl: -2,
        })
    };
    Ok(DualState {
        exec: next(),
        wait: next(),
    })
}

/// None when neither stage is held.
pub fn inspect(client: &Client, intr: &Interrupt, name: &str) -> Result<Option<DualState>> {
    let state = stages(client, intr, name)?;
    Ok(state.held().then_some(state))
}
