//! DualLock: "until and while executing" uniqueness per key. At most one duplicate executes
//! (EXEC lock) and at most one waits (WAIT lock); a duplicate arriving while one already waits
//! is skipped, because that waiter starts after it arrived and so covers its trigger. The
//! executor's release hands EXEC straight to the waiter (`dual_lock/release`), which pops the
//! grant from its own list and runs without another attempt (line/handoff.rs); a waiter whose turn
//! ends without a grant (the executor crashed) promotes itself (`dual_lock/enter`). Every
//! transition is one script.
//! Both locks are leases renewed while their holder lives, so a crashed waiter or executor
//! frees its lock within its TTL and a long run never lets a second executor in.
//! While a thread of this process waits for the key, a duplicate arriving in this process is
//! skipped with no Redis command at all (dual_lock_local.rs: one waiter per process per key).

pub mod inspect;

use crate::client::{int, ints, Client};
use crate::dual_lock_local::{self, Registration};
use crate::error::{Error, Result};
use crate::interrupt::Interrupt;
use crate::lease::{Lease, RenewKeyArgs};
use crate::line::handoff::{ack_grant, wait_grant};
use crate::lost_leases::LostLease;
use crate::lost_reason::why_lost;
use crate::lua_script;
use crate::replicas::{ack_timeout, eval_grant, refuse};
use crate::script::{Script, ScriptCall};
use crate::wait::retry_after;
use std::time::{Duration, Instant};

lua_script!(ENTER = "dual_lock/enter");
lua_script!(RELEASE = "dual_lock/release");

/// dual_lock/enter.lua's arguments.
struct EnterArgs<'a> {
    /// The duplicate's owner token.
    token: &'a str,
    /// The WAIT lock's lease (ms).
    wait_lease_ms: u64,
    /// The EXEC lock's lease (ms).
    exec_lease_ms: u64,
}

/// dual_lock/release.lua's arguments.
struct ReleaseArgs<'a> {
    /// The owner token releasing.
    token: &'a str,
    /// The EXEC lock's lease (ms), for the waiter it is handed to.
    exec_lease_ms: u64,
    /// The grant lists' key prefix (a waiter's token follows).
    grant_prefix: &'a str,
    /// The token was waiting: a grant not popped yet goes too.
    was_waiting: bool,
}

impl EnterArgs<'_> {
    fn call(&self, lock: &DualLock) -> ScriptCall {
        lock.script_call(&ENTER, self.token)
            .arg(self.token)
            .arg(self.wait_lease_ms)
            .arg(self.exec_lease_ms)
    }
}

impl ReleaseArgs<'_> {
    fn call(&self, lock: &DualLock) -> ScriptCall {
        lock.script_call(&RELEASE, self.token)
            .arg(self.token)
            .arg(self.exec_lease_ms)
            .arg(self.grant_prefix)
            .flag(self.was_waiting)
    }
}

#[derive(Clone, Debug)]
pub struct DualLockOptions {
    /// Lease of the WAIT lock: how long a crashed waiter keeps others out.
    pub wait_lease: Duration,
    /// Lease of the EXEC lock: how long a crashed executor keeps the waiter out.
    pub lease: Duration,
}

impl Default for DualLockOptions {
    fn default() -> Self {
        DualLockOptions {
            wait_lease: Duration::from_secs(60),
            lease: Duration::from_secs(60),
        }
    }
}

/// Where one duplicate stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// Holds EXEC: run the work, then `leave`.
    Running,
    /// Holds WAIT: call `wait` (and `leave` when giving up).
    Waiting,
    /// Another duplicate already waits; nothing is held.
    Skipped,
}

/// One duplicate's pass through the lock. Dropping it without `leave` stops renewal; what it
/// holds then expires after its TTL.
pub struct Ticket {
    /// Registered as this process's waiter for the key (see dual_lock_local.rs); first, so it
    /// is dropped before the lease.
    local: Option<Registration>,
    token: String,
    stage: Stage,
    /// EXEC's remaining TTL as last seen: bounds the next wait, so a lost wake-up costs at most
    /// that long.
    exec_pttl_ms: i64,
    lease: Option<Lease>,
    /// A wait for the grant was cut short: the pop may have taken it with the reply lost, so
    /// the retried wait asks Redis (`enter`) before blocking again.
    maybe_granted: bool,
}

impl Ticket {
    pub fn stage(&self) -> Stage {
        self.stage
    }

    pub fn token(&self) -> &str {
        &self.token
    }
}

pub struct DualLock {
    client: Client,
    key: String,
    wait_key: String,
    exec_key: String,
    /// `<ns>:{key}:grant:`, followed by the waiter's token.
    grant_prefix: String,
    opts: DualLockOptions,
    min_replicas_acked: u32,
}

impl DualLock {
    pub fn new(client: &Client, key: &str, opts: DualLockOptions) -> Result<DualLock> {
        let keys = client.keys(key)?;
        for (arg, ttl) in [("wait_lease", opts.wait_lease), ("lease", opts.lease)] {
            crate::seconds::check_span(arg, ttl)?;
        }
        Ok(DualLock {
            client: client.clone(),
            key: key.to_string(),
            wait_key: keys.part("wait"),
            exec_key: keys.part("exec"),
            grant_prefix: keys.part("grant:"),
            opts,
            min_replicas_acked: 0,
        })
    }

    /// Replicas that must hold the EXEC grant before the duplicate runs (0: don't wait); see
    /// replicas.rs. Waiting grants are not checked: losing one only lets a duplicate through
    /// to wait as well.
    pub fn with_min_replicas_acked(mut self, n: u32) -> Self {
        self.min_replicas_acked = n;
        self
    }

    pub fn key(&self) -> &str {
        &self.key
    }

    /// A fresh owner token (uuid v4).
    pub fn new_token() -> String {
        crate::token::new_token()
    }

    /// After `enter` failed (Redis unreachable, interrupted): Redis may still have given
    /// `token` WAIT or EXEC with the reply lost, so release it in the background rather than
    /// let it turn duplicates away for a whole TTL. `token` must not be used again. Until the
    /// release is answered, this process's `enter` and `state` wait for it (as an interrupted
    /// `Mutex#lock` leaves nothing behind): a duplicate is not skipped for a waiter that is gone.
    pub fn abandon(&self, token: &str) {
        let ttl = self.opts.wait_lease.max(self.opts.lease);
        let call = self.release_call(token, true);
        crate::lease::release_in_background_announced(&self.client, call, ttl, &self.wait_key);
    }

    /// Waits for this process's abandoned tickets of the key to be released (see `abandon`).
    fn wait_abandoned(&self, intr: &Interrupt) -> Result<()> {
        crate::unanswered_releases::wait_answered(self.client.identity(), &self.wait_key, intr)
    }

    /// The token-checked release of WAIT and/or EXEC (handing EXEC to the waiter), used by
    /// `leave` and `abandon`; `waited`: the token was waiting, so a grant not popped goes too.
    pub(crate) fn release_call(&self, token: &str, waited: bool) -> ScriptCall {
        ReleaseArgs {
            token,
            exec_lease_ms: crate::seconds::millis(self.opts.lease),
            grant_prefix: &self.grant_prefix,
            was_waiting: waited,
        }
        .call(self)
    }

    /// A call of the enter or release script: both take the same keys (the WAIT lock, the EXEC
    /// lock, `token`'s grant list).
    fn script_call(&self, script: &'static Script, token: &str) -> ScriptCall {
        ScriptCall::new(script)
            .key(&self.wait_key)
            .key(&self.exec_key)
            .key(self.grant_key(token))
    }

    fn grant_key(&self, token: &str) -> String {
        format!("{}{}", self.grant_prefix, token)
    }

    /// Arrives: the ticket says whether to run now, wait, or skip. `token` should stay the same
    /// when the call is retried after an interruption, so what the first attempt took is
    /// recognised as ours.
    pub fn enter(&self, intr: &Interrupt, token: &str) -> Result<Ticket> {
        let mut ticket = Ticket {
            local: None,
            token: token.to_string(),
            stage: Stage::Skipped,
            exec_pttl_ms: 0,
            lease: None,
            maybe_granted: false,
        };
        // A thread of this process waits and will start after this arrival: skipped here, as
        // Redis would skip it.
        if dual_lock_local::covered(self.client.identity(), &self.wait_key, token) {
            return Ok(ticket);
        }
        self.wait_abandoned(intr)?;
        self.turn(intr, &mut ticket)?;
        self.cover_locally(&mut ticket);
        Ok(ticket)
    }

    /// Registers a waiting ticket as this process's waiter for the key, so the process's next
    /// duplicates are skipped without Redis (not when its WAIT lease is known lost).
    fn cover_locally(&self, ticket: &mut Ticket) {
        if ticket.stage != Stage::Waiting || ticket.local.is_some() {
            return;
        }
        if let Some(lease) = ticket.lease.as_ref().filter(|l| !l.is_lost()) {
            let id = self.client.identity();
            ticket.local = Some(dual_lock_local::register(
                id,
                &self.wait_key,
                &ticket.token,
                lease,
            ));
        }
    }

    /// The token this process's duplicates are skipped for, if one waits (tests).
    pub fn local_waiter(&self) -> Option<String> {
        dual_lock_local::waiting_token(self.client.identity(), &self.wait_key)
    }

    /// Waits for the executing duplicate to finish, then promotes the ticket to `Running`.
    /// Returns the ticket's stage: `Running`, `Waiting` when `deadline` passed first (WAIT is
    /// still held: `leave` gives it up), or `Skipped` when the WAIT lease was lost meanwhile and
    /// another duplicate took it (that one will run instead).
    pub fn wait(
        &self,
        intr: &Interrupt,
        ticket: &mut Ticket,
        deadline: Option<Instant>,
    ) -> Result<Stage> {
        while ticket.stage == Stage::Waiting {
            if ticket.maybe_granted {
                self.turn(intr, ticket)?;
                ticket.maybe_granted = false;
                continue;
            }
            let mut wait = retry_after(ticket.exec_pttl_ms, self.opts.lease);
            if let Some(d) = deadline {
                let now = Instant::now();
                if now >= d {
                    break;
                }
                wait = wait.min(d - now);
            }
            // The turn's wait never outlasts EXEC's TTL: an executor that crashed hands over
            // nothing, and then `enter` promotes this waiter once EXEC has expired.
            self.cover_locally(ticket);
            ticket.maybe_granted = true;
            let popped = wait_grant(&self.client, intr, &self.grant_key(&ticket.token), wait);
            // Out of the registry before whatever comes next can start the block or end the
            // wait (promotion, another `enter`, an error): a local skip must precede the start.
            ticket.local = None;
            let popped = popped?;
            ticket.maybe_granted = false;
            match popped {
                Some(_) => self.promote(intr, ticket)?,
                None => self.turn(intr, ticket)?,
            }
        }
        // Running, skipped, or out of time (it will not run: the caller leaves): it covers
        // nobody from now on.
        ticket.local = None;
        Ok(ticket.stage)
    }

    /// The executor handed EXEC to this waiter: it runs now. With `min_replicas_acked` the
    /// grant's ack is checked first (see handoff::ack_grant).
    fn promote(&self, intr: &Interrupt, ticket: &mut Ticket) -> Result<()> {
        ticket.lease = None; // WAIT is gone: the release deleted it
        let wanted = self.min_replicas_acked;
        if wanted > 0 {
            let renew = self.renew_call(&self.exec_key, &ticket.token, self.opts.lease);
            let within = ack_timeout(&self.client, self.opts.lease);
            let acked = ack_grant(&self.client, intr, &renew, wanted, within)?;
            if acked < i64::from(wanted) {
                ticket.stage = Stage::Skipped;
                let ttl = self.opts.wait_lease.max(self.opts.lease);
                let release = self.release_call(&ticket.token, false);
                return Err(refuse(&self.client, intr, release, ttl, wanted, acked));
            }
        }
        let report = LostLease::new("dual_lock", &self.key);
        ticket.lease =
            Some(self.lease(&self.exec_key, &ticket.token, self.opts.lease, Some(report)));
        ticket.stage = Stage::Running;
        ticket.exec_pttl_ms = 0;
        Ok(())
    }

    /// Runs the enter script and moves the ticket (and its lease) to the stage it reports.
    fn turn(&self, intr: &Interrupt, ticket: &mut Ticket) -> Result<()> {
        // The script may run, skip or keep the ticket: until it is known, nobody is skipped for it.
        ticket.local = None;
        let call = EnterArgs {
            token: &ticket.token,
            wait_lease_ms: crate::seconds::millis(self.opts.wait_lease),
            exec_lease_ms: crate::seconds::millis(self.opts.lease),
        }
        .call(self);
        let wanted = self.min_replicas_acked;
        let (reply, acked) = eval_grant(&self.client, intr, &call, wanted, self.opts.lease)?;
        let (stage, pttl) = match ints(&reply)?.as_slice() {
            [1, _] if acked < i64::from(wanted) => {
                ticket.lease = None;
                ticket.stage = Stage::Skipped;
                let ttl = self.opts.wait_lease.max(self.opts.lease);
                let release = self.release_call(&ticket.token, false);
                return Err(refuse(&self.client, intr, release, ttl, wanted, acked));
            }
            [1, _] => (Stage::Running, 0),
            [0, pttl] => (Stage::Waiting, *pttl),
            [-1, _] => (Stage::Skipped, 0),
            other => {
                return Err(Error::Redis(format!(
                    "dual_lock/enter: unexpected reply {other:?}"
                )))
            }
        };
        ticket.exec_pttl_ms = pttl;
        // A waiter whose lease was found lost but which got WAIT back needs renewing again.
        let relevant = ticket.stage == stage && ticket.lease.as_ref().is_some_and(|l| !l.is_lost());
        if !relevant {
            ticket.lease = match stage {
                Stage::Running => {
                    let report = LostLease::new("dual_lock", &self.key);
                    Some(self.lease(&self.exec_key, &ticket.token, self.opts.lease, Some(report)))
                }
                Stage::Waiting => {
                    Some(self.lease(&self.wait_key, &ticket.token, self.opts.wait_lease, None))
                }
                Stage::Skipped => None,
            };
        }
        ticket.stage = stage;
        Ok(())
    }

    /// A renewed lease of `key`; `report` names it in the `:lock_lost` event if it is lost.
    fn lease(&self, key: &str, token: &str, ttl: Duration, report: Option<LostLease>) -> Lease {
        let renew = self.renew_call(key, token, ttl);
        match report {
            Some(report) => Lease::start_reporting(&self.client, renew, ttl, report),
            None => Lease::start(&self.client, renew, ttl),
        }
    }

    /// The token-checked renewal of `key` (the lease's, and the hand-off's ack write).
    fn renew_call(&self, key: &str, token: &str, ttl: Duration) -> ScriptCall {
        RenewKeyArgs {
            token,
            ttl_ms: crate::seconds::millis(ttl),
        }
        .call(key)
    }

    /// Gives up whatever the ticket holds: ends a run (waking the waiter) or a wait.
    /// `Error::LockLost` when a run's EXEC lock was no longer ours: the run was not exclusive.
    pub fn leave(&self, intr: &Interrupt, ticket: Ticket) -> Result<()> {
        let lost_before = ticket.lease.as_ref().is_some_and(Lease::is_lost);
        let Ticket {
            local,
            token,
            stage,
            lease,
            ..
        } = ticket;
        drop(local); // from now the process's duplicates ask Redis
        drop(lease); // stop renewing before releasing
        if stage == Stage::Skipped {
            return Ok(());
        }
        let ttl = self.opts.wait_lease.max(self.opts.lease);
        let call = self.release_call(&token, stage == Stage::Waiting);
        let released = int(&crate::lease::release_now(&self.client, intr, call, ttl)?)? == 1;
        if stage == Stage::Running && (!released || lost_before) {
            let why = why_lost(&self.client, intr, &self.key, &token, Some(&self.exec_key));
            return Err(Error::LockLost(format!(
                "DualLock {:?}: the EXEC lock was lost while running: {}",
                self.key,
                why.text()
            )));
        }
        Ok(())
    }

    /// Who holds what now: (someone executes, someone waits).
    pub fn state(&self, intr: &Interrupt) -> Result<(bool, bool)> {
        self.wait_abandoned(intr)?;
        let cmd = [b"EXISTS".to_vec(), self.exec_key.clone().into_bytes()];
        let exec = int(&self.client.command(intr, &cmd)?)? == 1;
        let cmd = [b"EXISTS".to_vec(), self.wait_key.clone().into_bytes()];
        let wait = int(&self.client.command(intr, &cmd)?)? == 1;
        Ok((exec, wait))
    }
}
