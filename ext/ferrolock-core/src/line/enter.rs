//! The wait to enter, written once for every primitive that queues in a Redis line: attempt
//! (queueing on failure), wait for the hand-off, give up at the deadline; behind the process's
//! waiter in Redis first, when another thread of the process waits there (local/).

use super::handoff::{ack_grant, await_grant, Awaiting};
use super::local::{self, Joined, Left, Turn};
use super::primitive::{AcquireArgs, Attempt, Hold, Line, Primitive, ReleaseArgs};
use crate::client::int;
use crate::error::{Error, Result};
use crate::inbox::Waited;
use crate::interrupt::Interrupt;
use crate::lease::release_now;
use crate::replicas::{ack_timeout, eval_grant, refuse};
use redis::Value;
use std::time::{Duration, Instant};

/// A limiter's oldest local waiter attempts by itself once nobody of its process has waited in
/// Redis for this long (local/wait.rs, `unqueued`): only releases of this process's holders pass
/// local waiters on, so a slot freed meanwhile by another process (with an empty line) would
/// stay idle until one of them releases. Short, so such a slot idles at most this long; it costs
/// one attempt only when no holder of the process released within it (long blocks), which also
/// puts the process back in the line.
const UNQUEUED_GRACE: Duration = Duration::from_millis(100);

/// How a waiter got its hold.
enum Entered {
    /// A release handed it over.
    HandedOver,
    /// Its own attempt found it free (or granted to it meanwhile).
    Free,
}

impl Line {
    /// Waits for a hold until `deadline` (None: as long as it takes). `Ok(None)` when none
    /// came in time and the primitive's `timeout` is none. `token` should stay the same when
    /// the call is retried after an interruption, so a hold taken by the interrupted attempt is
    /// recognised as ours.
    pub(crate) fn enter<P: Primitive>(
        &self,
        p: &P,
        intr: &Interrupt,
        token: &str,
        deadline: Option<Instant>,
    ) -> Result<Option<Hold>> {
        // A retry of a call cut short takes its place in line back (and may be granted already).
        // It, a grant that replicas must acknowledge (ack_grant's extra round trip) and (see
        // ATTEMPT_AT_DEADLINE) a caller out of time keep the plain path: one Redis entry per
        // thread.
        let out_of_time = P::ATTEMPT_AT_DEADLINE && deadline.is_some_and(|d| d <= Instant::now());
        self.cut_short.resume(token, |retried, queued| {
            let hold = if retried || self.min_replicas_acked > 0 || out_of_time {
                let entered = self.wait_in_line(p, intr, token, deadline, retried, queued, None)?;
                entered.map(|(hold, _)| hold)
            } else {
                self.wait_in_process_line(p, intr, token, deadline, queued)?
            };
            match (hold, p.timeout()) {
                (None, Some(timeout)) => Err(timeout),
                (hold, _) => Ok(hold),
            }
        })
    }

    /// Unfair mode: the hold a holder of this process parked for the name (local/parked.rs), as
    /// `enter` would take it first, without blocking: no Redis, no wait (the lines' lock only),
    /// so the binding tries it with Ruby's GVL held before a new call's `enter` (a retry keeps
    /// its own token: `enter`). `Ok(None)` when none is parked, or when `enter` would not take
    /// it (a grant replicas acknowledge, a caller out of time): then `enter`.
    pub(crate) fn take_parked<P: Primitive>(
        &self,
        deadline: Option<Instant>,
    ) -> Result<Option<Hold>> {
        if self.unfair_slice.is_none()
            || self.min_replicas_acked > 0
            || (P::ATTEMPT_AT_DEADLINE && deadline.is_some_and(|d| d <= Instant::now()))
        {
            return Ok(None);
        }
        let Some((baton, member)) = local::take_parked(self.client.identity(), &self.local_key)
        else {
            return Ok(None);
        };
        handed::<P>(baton, member).map(Some)
    }

    /// One round trip, also on the uncontended path: the hold, or what the script reported
    /// (queued unless `args.wait_ms` is 0).
    pub(crate) fn attempt<P: Primitive>(
        &self,
        p: &P,
        intr: &Interrupt,
        token: &str,
        args: &AcquireArgs,
    ) -> Result<Attempt> {
        let call = p.acquire_script(token, args);
        let wanted = self.min_replicas_acked;
        let sent_at = Instant::now();
        let (reply, acked) = eval_grant(&self.client, intr, &call, wanted, self.lease)?;
        let unexpected =
            || Error::Redis(format!("{}: unexpected reply {reply:?}", call.script.name));
        let Value::Array(items) = &reply else {
            return Err(unexpected());
        };
        match (items.first().map(int), items.get(1).map(int), items.get(2)) {
            (Some(Ok(1)), Some(Ok(_)), None) if acked < i64::from(wanted) => {
                Err(self.refuse(p, intr, token, acked))
            }
            (Some(Ok(1)), Some(Ok(grant)), None) => Ok(Attempt::Acquired(grant)),
            (Some(Ok(0)), Some(Ok(reported_ms)), entry) => Ok(Attempt::Busy {
                reported_ms,
                entry: match entry {
                    None => None,
                    Some(Value::BulkString(b)) => {
                        // Queued: the script set the line's TTL.
                        local::line_refreshed(self.client.identity(), &self.local_key, sent_at);
                        Some(String::from_utf8_lossy(b).into_owned())
                    }
                    Some(_) => return Err(unexpected()),
                },
            }),
            _ => Err(unexpected()),
        }
    }

    /// Waits behind the process's waiter in Redis for this name (if any) until passed on, then
    /// in Redis: with the entry a release queued, or by an attempt of its own.
    fn wait_in_process_line<P: Primitive>(
        &self,
        p: &P,
        intr: &Interrupt,
        token: &str,
        deadline: Option<Instant>,
        queued: &mut Option<String>,
    ) -> Result<Option<Hold>> {
        // A release may queue this waiter from now on (and publish its grant right after).
        let joined_at = Instant::now();
        let (turn, mut member) = match local::join(
            self.client.identity(),
            &self.local_key,
            token,
            deadline,
            self.unfair_slice.map(|_| self.park_tick),
            P::SLOTS,
        ) {
            Joined::Active(member) => (Turn::Attempt { uncertain: false }, member),
            // Unfair mode: a hold a holder of this process parked (local/parked.rs).
            Joined::Parked(baton, member) => (Turn::Handed(baton), member),
            // Holders renew, so nobody but a release passes a local waiter on within a
            // lease; a slot freed by another process's release while none of this one
            // waits in Redis is found within UNQUEUED_GRACE (the oldest then attempts).
            Joined::Local(waiter) => {
                let unqueued = P::SLOTS.then_some(UNQUEUED_GRACE);
                match waiter.wait(intr, self.max_block, unqueued) {
                    Ok(turned) => turned,
                    Err(Left::Timeout) => return Ok(None),
                    Err(Left::Interrupted) => return Err(Error::Interrupted),
                }
            }
        };
        if let Turn::Handed(baton) = turn {
            // A holder of this process passed us its hold (cohort.rs): no Redis.
            return handed::<P>(baton, member).map(Some);
        }
        // `member` lives until this returns: an error passes the turn on as it drops.
        let queued_by_release = start_turn(turn, queued, || {
            let leave = p.release_script(token, &ReleaseArgs::plain(true));
            release_now(&self.client, intr, leave, self.lease).map(drop)
        })?;
        let queued_at = queued_by_release.then_some(joined_at);
        let entered = self.wait_in_line(p, intr, token, deadline, false, queued, queued_at)?;
        Ok(entered.map(|(mut hold, how)| {
            match how {
                // Slots had room: the next local waiter may find some too, so it attempts now
                // instead of waiting for a release of this process.
                Entered::Free if P::SLOTS => member.acquired_with_room(),
                _ => member.acquired(),
            }
            hold.member = Some(member);
            hold
        }))
    }

    /// Attempts, queueing on failure, then waits for the hand-off. One turn's wait never
    /// outlasts what the attempt reported (`Primitive::retry_in`: a holder that died hands over
    /// nothing): then it attempts again, keeping its place in the line. `queued_by_release`: a
    /// release already queued this waiter (as `queued`) no earlier than that instant, so it
    /// starts with the wait, for at most `max_block`. A grant comes through the client's inbox
    /// when the entry names it, else from the waiter's grant list. `Ok(None)`: out of time.
    #[allow(clippy::too_many_arguments)]
    fn wait_in_line<P: Primitive>(
        &self,
        p: &P,
        intr: &Interrupt,
        token: &str,
        deadline: Option<Instant>,
        retried: bool,
        queued: &mut Option<String>,
        queued_by_release: Option<Instant>,
    ) -> Result<Option<(Hold, Entered)>> {
        let inbox = self.client.inbox();
        let out_of_time = || deadline.is_some_and(|d| Instant::now() >= d);
        let mut skip_attempt = queued_by_release.is_some();
        let mut queued_at = queued_by_release.unwrap_or_else(Instant::now);
        loop {
            let skip = std::mem::take(&mut skip_attempt);
            let reported = if skip && !(P::ATTEMPT_AT_DEADLINE && out_of_time()) {
                None
            } else {
                let id = inbox.before_attempt(token);
                queued_at = Instant::now();
                let args = AcquireArgs {
                    wait_ms: self.planned_wait_ms(deadline),
                    queued: queued.as_deref(),
                    maybe_ours: retried || queued.is_some(),
                    inbox: id.as_deref(),
                };
                match self.attempt(p, intr, token, &args)? {
                    Attempt::Acquired(grant) => {
                        *queued = None;
                        return Ok(Some((p.hold(token, grant), Entered::Free)));
                    }
                    Attempt::Busy { reported_ms, entry } => {
                        // No entry: out of time, it did not queue (an earlier entry stays, for
                        // `give_up` to take out).
                        if entry.is_some() {
                            *queued = entry;
                            if id.is_none() {
                                // Contended: the process's next waits are granted through its
                                // inbox.
                                inbox.start(&self.client);
                            }
                        }
                        Some(reported_ms)
                    }
                }
            };
            // Queued by a release: as planned by its entry, at most `max_block` (what holds it
            // now is not known without an attempt).
            let mut wait = reported.map_or(self.max_block, |ms| p.retry_in(ms));
            if let Some(d) = deadline {
                let now = Instant::now();
                if now >= d {
                    if P::ATTEMPT_AT_DEADLINE && reported.is_none() {
                        continue;
                    }
                    self.give_up(p, intr, token, queued);
                    return Ok(None);
                }
                wait = wait.min(d - now);
            }
            if wait.is_zero() {
                continue;
            }
            let waiter = Awaiting {
                token,
                entry: queued.as_deref(),
                queued_at,
                grant_key: &self.grant_key(token),
            };
            match await_grant(&self.client, intr, waiter, wait)? {
                Waited::Granted(grant) => {
                    *queued = None;
                    return Ok(Some((
                        self.granted(p, intr, token, grant)?,
                        Entered::HandedOver,
                    )));
                }
                // A grant the inbox may have missed: the next attempt finds the hold if ours.
                Waited::Missed => continue,
                Waited::TimedOut => {}
            }
            // Out of time: leave now, or after one last attempt (it may find the hold a
            // hand-off raced in).
            if !P::ATTEMPT_AT_DEADLINE && out_of_time() {
                self.give_up(p, intr, token, queued);
                return Ok(None);
            }
        }
    }

    /// A release handed this waiter its hold. With `min_replicas_acked` the grant's ack is
    /// checked first (see handoff::ack_grant).
    fn granted<P: Primitive>(
        &self,
        p: &P,
        intr: &Interrupt,
        token: &str,
        grant: i64,
    ) -> Result<Hold> {
        let wanted = self.min_replicas_acked;
        if wanted > 0 {
            let within = ack_timeout(&self.client, self.lease);
            let acked = ack_grant(&self.client, intr, &p.renew_script(token), wanted, within)?;
            if acked < i64::from(wanted) {
                return Err(self.refuse(p, intr, token, acked));
            }
        }
        Ok(p.hold(token, grant))
    }

    /// A grant that reached `acked` replicas, fewer than wanted: given back (see replicas.rs).
    fn refuse<P: Primitive>(&self, p: &P, intr: &Interrupt, token: &str, acked: i64) -> Error {
        let release = p.release_script(token, &ReleaseArgs::plain(false));
        let wanted = self.min_replicas_acked;
        refuse(&self.client, intr, release, self.lease, wanted, acked)
    }

    /// The deadline passed: leave the line. A hand-off that raced in is passed on to the next
    /// waiter in the same script, so it never keeps the hold idle for a lease.
    fn give_up<P: Primitive>(
        &self,
        p: &P,
        intr: &Interrupt,
        token: &str,
        queued: &mut Option<String>,
    ) {
        if queued.take().is_some() {
            let leave = p.release_script(token, &ReleaseArgs::plain(true));
            let _ = release_now(&self.client, intr, leave, self.lease);
        }
    }
}

/// The hold a holder of this process passed on or parked (cohort.rs, local/parked.rs), now
/// `member`'s: no Redis.
fn handed<P: Primitive>(baton: local::Baton, member: local::Member) -> Result<Hold> {
    let Ok(mut hold) = baton.downcast::<Hold>() else {
        return Err(Error::internal(format!(
            "{}: a foreign hold was passed",
            P::KIND
        )));
    };
    hold.member = Some(member);
    Ok(*hold)
}

/// What a passed-on waiter starts with: true when a release queued it (its entry goes to
/// `queued`, and it waits for the grant); false when it attempts on its own, after
/// `leave_line` when the release that was queueing it failed (it may have left an entry, a
/// grant or even the hold for this token, which nobody would take out later).
fn start_turn(
    turn: Turn,
    queued: &mut Option<String>,
    leave_line: impl FnOnce() -> Result<()>,
) -> Result<bool> {
    match turn {
        Turn::Queued(entry) => {
            *queued = Some(entry);
            Ok(true)
        }
        Turn::Attempt { uncertain } => {
            if uncertain {
                leave_line()?;
            }
            Ok(false)
        }
        // Taken by the caller before it starts a turn.
        Turn::Handed(_) => Err(Error::internal(
            "local line: a passed hold reached a Redis turn",
        )),
    }
}
