//! A local waiter's wait: until a holder or a release of its process passes it on, or it goes to
//! Redis by itself.

use super::*;

pub struct LocalWaiter {
    pub(super) key: LineKey,
    pub(super) id: u64,
    pub(super) wake: Arc<Condvar>,
    pub(super) generation: u64,
}

/// Why a local wait ended without a turn.
#[derive(Debug)]
pub enum Left {
    Timeout,
    Interrupted,
}

impl LocalWaiter {
    /// Waits to be passed on. Never longer than `recheck` (the lock TTL) while nobody passes it
    /// on: then it goes to Redis by itself, so a bug that loses a turn cannot
    /// strand it. `unqueued` (a limiter's): the oldest local waiter also goes to Redis by
    /// itself once nobody of the process has waited in Redis for that long (only holders
    /// would pass it on, while a slot may be free). Once a release is queueing it, it waits
    /// for the outcome even past its deadline or an interrupt (a round trip): the caller then
    /// handles both with its entry.
    pub fn wait(
        self,
        intr: &Interrupt,
        recheck: Duration,
        unqueued: Option<Duration>,
    ) -> std::result::Result<(Turn, Member), Left> {
        let started = Instant::now();
        // Since when this waiter is the oldest with nobody of the process in Redis.
        let mut unqueued_since: Option<Instant> = None;
        let mut lines = lines();
        loop {
            let line = lines
                .0
                .get_mut(&self.key)
                .expect("a line with waiters stays");
            let mut slice = INTERRUPT_POLL;
            match line.slots.get(&self.id) {
                Some(Slot::Told(_)) => {
                    let Some(Slot::Told(turn)) = line.slots.remove(&self.id) else {
                        unreachable!("matched above");
                    };
                    line.wakes.remove(&self.id);
                    // Taken even if interrupted or out of time meanwhile: the caller holds it
                    // now, and gives it back as any acquisition that raced an interrupt.
                    let role = match turn {
                        Turn::Handed(_) => Role::Holding,
                        _ => Role::InRedis,
                    };
                    let member = Member {
                        key: self.key.clone(),
                        generation: self.generation,
                        role,
                    };
                    return Ok((turn, member));
                }
                Some(Slot::Promoting) => {}
                Some(Slot::Waiting { deadline, .. }) => {
                    let deadline = *deadline;
                    let now = Instant::now();
                    let left = if intr.is_cancelled() {
                        Some(Left::Interrupted)
                    } else if deadline.is_some_and(|d| d <= now) {
                        Some(Left::Timeout)
                    } else {
                        None
                    };
                    let timed_out = left.is_some();
                    if let Some(why) = left.filter(|_| line.parked.is_empty()) {
                        line.waiting.retain(|id| *id != self.id);
                        line.slots.remove(&self.id);
                        line.wakes.remove(&self.id);
                        drop_if_unused(&mut lines, &self.key);
                        return Err(why);
                    }
                    let waited = now - started;
                    let first_unqueued = unqueued
                        .filter(|_| line.in_redis == 0 && line.waiting.front() == Some(&self.id));
                    let since = match first_unqueued {
                        Some(_) => *unqueued_since.get_or_insert(now),
                        None => {
                            unqueued_since = None;
                            now
                        }
                    };
                    let unqueued_left =
                        first_unqueued.map(|limit| limit.saturating_sub(now - since));
                    // A parked hold nobody running took within a tick, or one that would
                    // be left with nobody to take it (this waiter leaves, or goes to Redis
                    // alone): this waiter takes it (parked.rs).
                    let tick = line.park_tick.unwrap_or(PARK_TICK);
                    let going_alone =
                        waited >= recheck || unqueued_left.is_some_and(|l| l.is_zero());
                    let leaving = timed_out || going_alone;
                    let parked_due = line
                        .parked
                        .front()
                        .is_some_and(|p| leaving || now.saturating_duration_since(p.at) >= tick);
                    if parked_due {
                        let parked = line.parked.pop_front().expect("looked at above");
                        if !leaving {
                            line.park_backoff.missed();
                        }
                        line.waiting.retain(|id| *id != self.id);
                        line.slots.remove(&self.id);
                        line.wakes.remove(&self.id);
                        let member = Member {
                            key: self.key.clone(),
                            generation: self.generation,
                            role: Role::Holding,
                        };
                        return Ok((Turn::Handed(parked.baton), member));
                    }
                    if going_alone {
                        // Nobody passed it on within a lock TTL (or, first in line, within
                        // `unqueued` while nobody of the process was in Redis): go alone.
                        line.waiting.retain(|id| *id != self.id);
                        line.slots.remove(&self.id);
                        line.wakes.remove(&self.id);
                        line.in_redis += 1;
                        let member = Member {
                            key: self.key.clone(),
                            generation: self.generation,
                            role: Role::InRedis,
                        };
                        return Ok((Turn::Attempt { uncertain: false }, member));
                    }
                    slice = slice.min(recheck - waited);
                    if line.park_tick.is_some() && line.waiting.front() == Some(&self.id) {
                        slice = slice.min(tick);
                    }
                    if let Some(l) = unqueued_left {
                        slice = slice.min(l);
                    }
                    if let Some(d) = deadline {
                        slice = slice.min(d - now);
                    }
                }
                None => unreachable!("a waiter's slot stays until it leaves"),
            }
            lines = self
                .wake
                .wait_timeout(lines, slice)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
}
