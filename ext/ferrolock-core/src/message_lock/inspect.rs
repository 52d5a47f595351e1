//! Admin's read of a Shoryuken message marker (inspect.rs): `<ns>:{msg:<queue>:<message_id>}:state`
//! holds the delivery's token while a copy runs, "processed" once done.

use crate::client::Client;
use crate::error::Result;
use crate::inspect::{tokens, Field, Record};
use crate::interrupt::Interrupt;

/// The name prefix of markers.
pub const PREFIX: &str = "msg:";
const PROCESSED: &str = "processed";

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MarkerState {
    pub queue: String,
    pub message_id: String,
    /// The running delivery's token; None once processed.
    pub token: Option<String>,
    pub processed: bool,
    pub pttl: i64,
}

impl MarkerState {
    /// `queue`, `message_id`, `state` ("in_progress" or "processed"), `token`, `ttl`.
    pub fn record(self) -> Record {
        let state = if self.processed {
            PROCESSED
        } else {
            "in_progress"
        };
        vec![
            ("queue", Field::Text(self.queue)),
            ("message_id", Field::Text(self.message_id)),
            ("state", Field::Text(state.into())),
            ("token", Field::text(self.token)),
            ("ttl", Field::ttl(self.pttl)),
        ]
    }
}

/// (queue, message_id) of a marker's name; SQS queue names have no ':'.
pub fn split(name: &str) -> Option<(&str, &str)> {
    name.strip_prefix(PREFIX)?.split_once(':')
}

/// None for another name, or a marker that is gone.
pub fn inspect(client: &Client, intr: &Interrupt, name: &str) -> Result<Option<MarkerState>> {
    let Some((queue, message_id)) = split(name) else {
        return Ok(None);
    };
    let key = client.keys(name)?.part("state");
    let Some(read) = tokens(client, intr, &[key])?.pop() else {
        return Ok(None);
    };
    let Some(value) = read.token else {
        return Ok(None);
    };
    let processed = value == PROCESSED;
    Ok(Some(MarkerState {
        queue: queue.into(),
        message_id: message_id.into(),
        token: (!processed).then_some(value),
        processed,
        pttl: read.pttl,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_queue_and_message_id() {
        assert_eq!(split("msg:q1:abc:d"), Some(("q1", "abc:d")));
        assert_eq!(split("msg:q1"), None);
        assert_eq!(split("other:q1:a"), None);
    }
}
