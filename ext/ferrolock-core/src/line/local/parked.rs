//! The parked hold (issue 43 item 4, unfair mode: `fair: false`). A holder whose cohort may
//! pass once more (cohort.rs: a fresh fencing token of its block, within its window and the
//! unfair slice), and whose process has a live local waiter for the name, does not wake that
//! waiter: it leaves the hold, still held in Redis and renewed by its lease, in the process's
//! line. The first thread of the process to ask for the name takes it (`join`: the releasing
//! thread itself coming back, or another running thread), with no Redis round trip and no
//! wake-up; a DistMutex `lock` and a limiter's `acquire` look first with `take_parked`, which
//! the binding calls with Ruby's GVL held (no blocking region, as the release that parked it).
//! When nobody asks within `PARK_TICK`, the oldest local waiter takes it at its next look (it
//! looks every `PARK_TICK` in an unfair line); a waiter that leaves (timeout, interrupt) while a
//! hold is parked takes it as it goes (held past its deadline, or given back by the binding as
//! any acquisition that raced an interrupt), so a hold is parked only while a waiter is there to
//! take it: there are never more parked holds than waiters, and no waiter is
//! passed on, queued or sent to Redis while that would leave fewer (`keeps_last_waiter`). A
//! process that exits or is killed leaves it to its lease.
//! Holds are parked only by holders that came through the line (`Member`), so a parked hold
//! counts as held (`holding`) until taken.

use super::*;

/// How long a parked hold waits for a running thread before the oldest local waiter takes it;
/// also how often that waiter looks (a condition variable wait cannot be shortened from outside
/// without waking it, which is what parking saves).
pub const PARK_TICK: Duration = Duration::from_millis(2);

pub(super) struct Parked {
    pub baton: Baton,
    pub at: Instant,
}

/// Parks a hold in its process's line (see the module): `baton` is made only when it parks,
/// under the line's lock. False, `member` left as it was, when it is not a holder of this fork,
/// nobody waits here alive, or (unless `ahead_of_redis_waiter`) a thread of the process waits
/// in the Redis line.
pub fn park(
    member: &mut Option<Member>,
    ahead_of_redis_waiter: bool,
    baton: impl FnOnce() -> Baton,
) -> bool {
    let Some(holder) = member.as_ref() else {
        return false;
    };
    if holder.role != Role::Holding || crate::fork::generation() != holder.generation {
        return false;
    }
    let mut lines = lines();
    let Some(line) = lines.0.get_mut(&holder.key) else {
        return false;
    };
    if (line.in_redis > 0 && !ahead_of_redis_waiter)
        || line.first_live_waiter().is_none()
        || line.waiting.len() <= line.parked.len()
        || line.park_backoff.skip()
    {
        return false;
    }
    line.parked.push_back(Parked {
        baton: baton(),
        at: Instant::now(),
    });
    drop(lines);
    // Its holding count stays with the parked hold.
    std::mem::forget(member.take());
    true
}

/// Parking bets that a thread of the process asks again within `PARK_TICK`; when nobody did, the
/// hold idled up to a tick, and the next `skip` releases (2, 4, ... 64 after misses in a row)
/// wake their waiter at once instead; a parked hold a running thread took resets it.
#[derive(Default)]
pub(super) struct Backoff {
    misses: u32,
    skip: u32,
}

impl Backoff {
    pub fn hit(&mut self) {
        self.misses = 0;
    }

    pub fn missed(&mut self) {
        self.misses = (self.misses + 1).min(6);
        self.skip = 1 << self.misses;
    }

    /// Whether this release passes on directly (counting it).
    fn skip(&mut self) -> bool {
        let skip = self.skip > 0;
        self.skip = self.skip.saturating_sub(1);
        skip
    }
}

/// Holds parked in this process for one name (tests).
pub fn parked_holds(client_id: usize, lock_key: &str) -> usize {
    lines()
        .0
        .get(&(client_id, lock_key.to_string()))
        .map_or(0, |l| l.parked.len())
}
