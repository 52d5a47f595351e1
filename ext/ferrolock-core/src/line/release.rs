//! The release, written once for every primitive that queues in a Redis line: pass the hold to
//! a thread of this process waiting for the name (cohort.rs), else give it back through Redis,
//! queueing the process's next local waiter in the same script (local/); and the give-back of
//! a call cut short (`abandon`).

use super::cohort::Cohort;
use super::local::{self, Member, Successor, Turn};
use super::primitive::{Hold, Line, Primitive, ReleaseArgs};
use crate::client::int;
use crate::error::{Error, Result};
use crate::interrupt::Interrupt;
use crate::lease::{release_in_background, release_in_background_announced, release_now, Lease};
use crate::lost_reason::why_lost;
use redis::Value;
use std::time::{Duration, Instant};

impl Line {
    /// Gives `hold` back (to a local waiter, or to the next waiter in line, if any).
    /// `Error::LockLost` when it was no longer ours (its lease ran out, or an operator released
    /// it): the section was not exclusive (the limit may have been exceeded).
    pub(crate) fn release<P: Primitive>(
        &self,
        p: &P,
        intr: &Interrupt,
        mut hold: Hold,
    ) -> Result<()> {
        let lost_before = hold.lease.as_ref().is_some_and(Lease::is_lost);
        if !lost_before
            && (self.pass_locally::<P>(&mut hold) || self.pass_unfairly(p, intr, &mut hold))
        {
            return Ok(());
        }
        let token = std::mem::take(&mut hold.token);
        let member = hold.member.take();
        drop(hold); // stop renewing before releasing

        // The member is kept until the release is done (a newcomer meanwhile waits locally and
        // is then passed on), or handed to the local successor this release queues.
        let successor = member.map(Member::take_successor);
        let released = match successor {
            Some(Ok(successor)) => self.release_queueing(p, intr, &token, successor)?,
            _ => {
                let release = p.release_script(&token, &ReleaseArgs::plain(false));
                int(&release_now(&self.client, intr, release, self.lease)?)? == 1
            }
        };
        if released && !lost_before {
            Ok(())
        } else {
            let why = why_lost(&self.client, intr, &self.name, &token, p.holder_key());
            Err(Error::LockLost(format!(
                "{} {:?}: the {} was lost while held: {}",
                P::KIND,
                self.name,
                P::HOLD,
                why.text()
            )))
        }
    }

    /// The release's local pass alone (`pass_locally`, no Redis, never blocks for long: the
    /// process's lines' lock only), for a caller that holds a lock of its own it should not give
    /// up for a round trip (the binding keeps Ruby's GVL through it, so the waiter it wakes runs
    /// as soon as the releasing thread next blocks). The hold back when there was no local pass
    /// to make, without its cohort (the pass was just tried; unfair mode keeps it): then `release`
    /// it, through Redis.
    pub(crate) fn release_locally<P: Primitive>(&self, mut hold: Hold) -> Option<Hold> {
        let lost = hold.lease.as_ref().is_some_and(Lease::is_lost);
        if !lost && self.pass_locally::<P>(&mut hold) {
            return None;
        }
        // Unfair mode keeps it: `release` may renew it (`pass_unfairly`) and pass then.
        if self.unfair_slice.is_none() {
            hold.cohort = None;
        }
        Some(hold)
    }

    /// Passes `hold` to the oldest live local waiter of its process (the cohort hand-off, no
    /// Redis round trip) when its cohort may pass on once more: true when passed (`hold` is then
    /// an empty shell: its token and lease went to the waiter).
    fn pass_locally<P: Primitive>(&self, hold: &mut Hold) -> bool {
        // A pass within the cohort may be parked (a retake); a renewed cohort's first goes to
        // the oldest waiter, so threads of the process take turns every cohort.
        let next = hold.cohort.and_then(|c| {
            c.next(self.local_passes, self.cohort_window)
                .map(|n| (n, true))
                .or_else(|| self.renew_unfenced(c).map(|n| (n, false)))
        });
        let Some((next, may_park)) = next else {
            return false;
        };
        // An operator force-released it: the release through Redis reports it lost.
        if self.client.inbox().was_revoked(&hold.token) {
            return false;
        }
        self.pass_on_with::<P>(hold, next, may_park)
    }

    /// Unfair mode, a hold without fencing (a limiter's slot, a `fencing: false` lock): a cohort
    /// that may pass no more starts another one in place, with no Redis call (there is no token
    /// block to renew; its lease renews as before), while its process's slice lasts.
    fn renew_unfenced(&self, cohort: Cohort) -> Option<Cohort> {
        let slice = self.unfair_slice.filter(|_| cohort.is_unfenced())?;
        (cohort.slice_age() < slice)
            .then(|| cohort.renewed_unfenced())
            .and_then(|c| c.next(self.local_passes, self.cohort_window))
    }

    /// Passes `hold` to the oldest live local waiter as the holder of `next` in its cohort;
    /// in unfair mode, `may_park`, it parks it instead (local/parked.rs): the first thread of
    /// the process to ask takes it, with no wake-up.
    fn pass_on_with<P: Primitive>(&self, hold: &mut Hold, next: Cohort, may_park: bool) -> bool {
        let ahead = self.ahead_of_redis_waiter::<P>();
        let mut baton = || -> local::Baton {
            Box::new(Hold {
                token: std::mem::take(&mut hold.token),
                fencing_token: next.fencing_token(),
                lease: hold.lease.take(),
                member: None,
                cohort: Some(next),
            })
        };
        if may_park
            && self.unfair_slice.is_some()
            && local::park(&mut hold.member, ahead, &mut baton)
        {
            return true;
        }
        local::pass_on(&mut hold.member, ahead, baton)
    }

    /// A pass may go ahead of the process's waiter in the Redis line: a limiter's slots (that
    /// waiter waits for another one), and an unfair lock (its process keeps it).
    fn ahead_of_redis_waiter<P: Primitive>(&self) -> bool {
        P::SLOTS || self.unfair_slice.is_some()
    }

    /// Unfair mode: a holder whose cohort may pass no more, whose process has held the lock for
    /// less than `unfair_slice` and has a thread waiting for it, keeps the lock in the process:
    /// one token-checked script renews its lease and issues a fresh fencing block (so tokens
    /// stay above every earlier one), and the waiter gets it as a new cohort's first holder.
    /// The Redis line is not touched: its head waits until the slice ends (then this process's
    /// release hands it the lock as in fair mode). False when it did not pass (no slice, no
    /// waiter, the lock no longer ours, Redis unreachable): the usual release follows.
    fn pass_unfairly<P: Primitive>(&self, p: &P, intr: &Interrupt, hold: &mut Hold) -> bool {
        let (Some(slice), Some(cohort)) = (self.unfair_slice, hold.cohort) else {
            return false;
        };
        // An unfenced cohort was renewed in place (`renew_unfenced`) while its slice lasted.
        if self.local_passes == 0
            || cohort.is_unfenced()
            || cohort.slice_age() >= slice
            || !local::has_live_waiter(&hold.member, true)
            || self.client.inbox().was_revoked(&hold.token)
        {
            return false;
        }
        let Some(call) = p.refence_script(&hold.token) else {
            return false;
        };
        let fence = match self.client.eval(intr, &call).and_then(|r| int(&r)) {
            Ok(fence) if fence > 0 => fence,
            _ => return false,
        };
        match cohort.renewed(fence) {
            Some(next) => self.pass_on_with::<P>(hold, next, false),
            None => false,
        }
    }

    /// The release that also queues `successor`, the process's next local waiter for this name,
    /// at the tail of the Redis line (planning to wait as its deadline allows). It is granted
    /// through this process's inbox (inbox.rs) when that listens, else through its grant list,
    /// and the inbox starts then: the process is contended. The release sets the line's TTL
    /// only when this process's last setting of it does not cover the new entry (its wait, from
    /// now: the script runs later, so this errs on the safe side). A reply `{1, entry, room?}`
    /// tells the successor its entry; any other reply (the hold was no longer ours) tells it to
    /// attempt. When the reply was lost, the plain release goes on in the background, and the
    /// successor, dropped untold, attempts on its own (uncertain), so a repeated release never
    /// queues it twice. Slots the script reports still free (`room`) send as many local waiters
    /// to attempt. True when the hold was still ours.
    fn release_queueing<P: Primitive>(
        &self,
        p: &P,
        intr: &Interrupt,
        token: &str,
        successor: Successor,
    ) -> Result<bool> {
        let client = &self.client;
        let wait_ms = self.planned_wait_ms(successor.deadline);
        let sent_at = Instant::now();
        let needed_until = sent_at + Duration::from_millis(wait_ms);
        let refresh = local::line_refresh_needed(
            client.identity(),
            &self.local_key,
            needed_until,
            self.line_ttl(),
        );
        let args = ReleaseArgs {
            leave_line: false,
            successor: &successor.token,
            successor_inbox: client.inbox().id_or_start(client),
            successor_wait_ms: wait_ms,
            refresh_line: refresh,
        };
        let call = p.release_script(token, &args);
        let reply = client.eval(intr, &call).inspect_err(|e| {
            if matches!(
                e,
                Error::Connection { .. } | Error::Timeout(_) | Error::Interrupted
            ) {
                let plain = p.release_script(token, &ReleaseArgs::plain(false));
                release_in_background(client, plain, self.lease);
            }
        })?;
        if refresh {
            // Whatever it answered, the script left no line without that TTL (or no line).
            local::line_refreshed(client.identity(), &self.local_key, sent_at);
        }
        let (released, room) = match &reply {
            Value::Array(items) => match (items.first().map(int), items.get(1), items.get(2)) {
                (Some(Ok(1)), Some(Value::BulkString(entry)), room) => {
                    let entry = String::from_utf8_lossy(entry).into_owned();
                    successor.tell(Turn::Queued(entry));
                    let room = room.map(int).and_then(|r| r.ok()).unwrap_or(0);
                    (true, usize::try_from(room).unwrap_or(0))
                }
                _ => {
                    return Err(Error::Redis(format!(
                        "{}: unexpected reply {reply:?}",
                        call.script.name
                    )))
                }
            },
            other => {
                // Not ours any more (or nothing to queue): nothing was queued.
                successor.tell(Turn::Attempt { uncertain: false });
                (int(other)? == 1, 0)
            }
        };
        // Slots still free (one freed earlier while nobody was in line): the next local waiters
        // attempt now instead of waiting for releases of this process.
        if room > 0 {
            local::pass_room(client.identity(), &self.local_key, room);
        }
        Ok(released)
    }

    /// After an acquisition failed (Redis unreachable, interrupted, timed out): Redis may still
    /// have granted `token` with the reply lost, so release it in the background rather than let
    /// it block others for a whole lease. `token` must not be used again. It also takes the token
    /// out of the line, and passes on a hand-off that reached it. Until Redis answers, this
    /// process's `try_lock`, `locked?` and `status` wait for the give-back (the interrupted
    /// caller holds nothing, as after an interrupted Mutex#lock).
    pub(crate) fn abandon<P: Primitive>(&self, p: &P, token: &str) {
        self.cut_short.forget(token);
        let release = p.release_script(token, &ReleaseArgs::plain(true));
        release_in_background_announced(&self.client, release, self.lease, &self.key);
    }
}
