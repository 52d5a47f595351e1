//! MessageLock: one execution per message on at-least-once queues (SQS standard queues deliver
//! a message more than once). Each (queue, message id) has one state key: absent (never seen,
//! or its last run failed or crashed), a delivery's token (an in-progress lease, renewed while
//! the job runs, so a long job never lets a copy in and a crashed one frees it after lease),
//! or "processed" for processed_ttl after the job succeeded.

pub mod inspect;

use crate::client::{int, text, Client};
use crate::error::{Error, Result};
use crate::interrupt::Interrupt;
use crate::lease::{Lease, RenewKeyArgs};
use crate::lost_leases::LostLease;
use crate::lua_script;
use crate::script::ScriptCall;
use std::time::Duration;

lua_script!(BEGIN = "message_lock/begin");
lua_script!(FINISH = "message_lock/finish");
lua_script!(ABORT = "message_lock/abort");

/// message_lock/begin.lua's arguments.
struct BeginArgs<'a> {
    /// This delivery's token.
    token: &'a str,
    /// The in-progress lease (ms).
    lease_ms: u64,
}

impl BeginArgs<'_> {
    fn call(&self, state_key: &str) -> ScriptCall {
        ScriptCall::new(&BEGIN)
            .key(state_key)
            .arg(self.token)
            .arg(self.lease_ms)
    }
}

/// message_lock/finish.lua's arguments.
struct FinishArgs<'a> {
    /// The delivery's token.
    token: &'a str,
    /// How long the message stays "processed" (ms).
    processed_ttl_ms: u64,
}

impl FinishArgs<'_> {
    fn call(&self, state_key: &str) -> ScriptCall {
        ScriptCall::new(&FINISH)
            .key(state_key)
            .arg(self.token)
            .arg(self.processed_ttl_ms)
    }
}

/// message_lock/abort.lua's arguments.
struct AbortArgs<'a> {
    /// The delivery's token.
    token: &'a str,
}

impl AbortArgs<'_> {
    fn call(&self, state_key: &str) -> ScriptCall {
        ScriptCall::new(&ABORT).key(state_key).arg(self.token)
    }
}

#[derive(Clone, Debug)]
pub struct MessageLockOptions {
    /// How long a crashed delivery keeps copies out; meant to match the queue's visibility
    /// timeout. Renewed every third of it while the job runs.
    pub lease: Duration,
    /// How long a processed message's later copies are recognised (and acknowledged).
    pub processed_ttl: Duration,
}

impl Default for MessageLockOptions {
    fn default() -> Self {
        MessageLockOptions {
            lease: Duration::from_secs(60),
            processed_ttl: Duration::from_secs(3600),
        }
    }
}

pub struct MessageLock {
    client: Client,
    lease: Duration,
    processed_ttl: Duration,
}

/// What a delivery may do with its message.
pub enum Begin {
    /// Run the job: this delivery holds the in-progress lease.
    Run(Running),
    /// Already processed: skip it and acknowledge (delete) this copy.
    Processed,
    /// Another delivery runs it now: skip it and leave this copy (if that run fails, this copy
    /// is its retry).
    InProgress,
}

/// A delivery's in-progress lease; renewal stops when it is finished, aborted or dropped.
pub struct Running {
    key: String,
    token: String,
    lease: Lease,
}

impl Running {
    /// True once a renewal found the lease gone or taken (Redis was unreachable for lease).
    pub fn is_lost(&self) -> bool {
        self.lease.is_lost()
    }
}

/// How `finish` left the state key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finish {
    /// Our lease became "processed".
    Marked,
    /// Our lease had lapsed but nobody had claimed the message; marked "processed" anyway.
    Lapsed,
    /// Another delivery held or had finished the message: it was left alone.
    Lost,
}

impl MessageLock {
    pub fn new(client: &Client, opts: MessageLockOptions) -> Result<MessageLock> {
        for (arg, d) in [("lease", opts.lease), ("processed_ttl", opts.processed_ttl)] {
            crate::seconds::check_span(arg, d)?;
        }
        Ok(MessageLock {
            client: client.clone(),
            lease: opts.lease,
            processed_ttl: opts.processed_ttl,
        })
    }

    pub fn lease(&self) -> Duration {
        self.lease
    }

    pub fn processed_ttl(&self) -> Duration {
        self.processed_ttl
    }

    /// The state key: `<ns>:{msg:<queue>:<message_id>}:state`.
    pub fn state_key(&self, queue: &str, message_id: &str) -> Result<String> {
        crate::keys::check_name("queue", queue)?;
        crate::keys::check_name("message_id", message_id)?;
        Ok(self
            .client
            .keys(&format!("msg:{queue}:{message_id}"))?
            .part("state"))
    }

    /// A fresh delivery token (uuid v4).
    pub fn new_token() -> String {
        crate::token::new_token()
    }

    /// After `begin` failed (Redis unreachable, interrupted): Redis may still have given
    /// `token` the in-progress lease with the reply lost, so drop it in the background rather
    /// than hold back the redelivery for a whole lease. `token` must not be used again.
    pub fn abandon(&self, queue: &str, message_id: &str, token: &str) {
        let Ok(key) = self.state_key(queue, message_id) else {
            return;
        };
        let call = AbortArgs { token }.call(&key);
        crate::lease::release_in_background(&self.client, call, self.lease);
    }

    /// Decides what this delivery does. `token` should stay the same when the call is retried
    /// after an interruption, so a lease taken by the interrupted attempt is recognised as ours.
    pub fn begin(
        &self,
        intr: &Interrupt,
        queue: &str,
        message_id: &str,
        token: &str,
    ) -> Result<Begin> {
        let key = self.state_key(queue, message_id)?;
        let lease_ms = crate::seconds::millis(self.lease);
        let call = BeginArgs { token, lease_ms }.call(&key);
        let reply = self.client.eval(intr, &call)?;
        match text(&reply).as_deref() {
            Some("run") => {
                let renew = RenewKeyArgs {
                    token,
                    ttl_ms: lease_ms,
                }
                .call(&key);
                let report = LostLease {
                    queue: Some(queue.to_string()),
                    ..LostLease::new("shoryuken_lock", message_id)
                };
                let lease = Lease::start_reporting(&self.client, renew, self.lease, report);
                Ok(Begin::Run(Running {
                    key,
                    token: token.to_string(),
                    lease,
                }))
            }
            Some("processed") => Ok(Begin::Processed),
            Some("in_progress") => Ok(Begin::InProgress),
            _ => Err(Error::Redis(format!(
                "message_lock/begin: unexpected reply {reply:?}"
            ))),
        }
    }

    /// The job succeeded: the message becomes "processed" for processed_ttl.
    pub fn finish(&self, intr: &Interrupt, running: Running) -> Result<Finish> {
        let Running { key, token, lease } = running;
        let lost_before = lease.is_lost();
        drop(lease); // stop renewing: the renewal would find "processed" and report a loss
        let call = FinishArgs {
            token: &token,
            processed_ttl_ms: crate::seconds::millis(self.processed_ttl),
        }
        .call(&key);
        match int(&crate::lease::release_now(
            &self.client,
            intr,
            call,
            self.lease,
        )?)? {
            1 if !lost_before => Ok(Finish::Marked),
            // A renewal saw the lease gone (so copies could have run meanwhile), or finish did.
            1 | 0 => Ok(Finish::Lapsed),
            _ => Ok(Finish::Lost),
        }
    }

    /// The job raised: drop the lease so the next copy runs it. True when it was still ours.
    pub fn abort(&self, intr: &Interrupt, running: Running) -> Result<bool> {
        let Running { key, token, lease } = running;
        drop(lease);
        let call = AbortArgs { token: &token }.call(&key);
        Ok(int(&crate::lease::release_now(
            &self.client,
            intr,
            call,
            self.lease,
        )?)? == 1)
    }
}
