//! Cohort hand-off (issue 27): a DistMutex holder whose process has another thread waiting for
//! the same name passes the lock to it inside the process, with no Redis round trip (the
//! Redis lock keeps the token of the cohort's Redis acquisition, and its lease moves along).
//! A ConcurrentLimiter slot is passed the same way (its member of the slots set keeps the
//! token of the slot's Redis acquisition), with the same window and no fencing, so no token
//! block caps its passes (`MAX_SLOT_PASSES`).
//! A cohort is bounded: at most `local_passes` passes (≤ `MAX_LOCAL_PASSES`), none later than
//! `WINDOW` after its Redis acquisition; then the lock goes back through Redis, whose FIFO line
//! gives it to the next process waiting. A waiter of another process at the head of the Redis
//! line therefore waits at most one cohort: `local_passes` + 1 sections.
//!
//! Fencing: Redis issues every token as a multiple of `FENCE_BLOCK` (lua/dist_mutex/
//! {acquire,release}.lua), so the tokens just above it are never issued by Redis: the cohort
//! hands them out in order, and the next Redis acquisition's token is above them all. A token
//! that is not such a multiple (issued by an older version during a deploy) starts no cohort.
//!
//! Design notes (moved from doc/ARCHITECTURE.md):
//!
//! Cohort hand-off (`line/cohort.rs`, issue 27): a DistMutex `unlock` whose holder came through the
//! process's line (`Held.member`) and whose process has a live local waiter for the name passes
//! the lock to it without Redis (`line::local::pass_on`: under the line's lock, the oldest waiter whose
//! deadline has not passed is told `Turn::Handed(hold)`; the hold is made only then, so a waiter
//! that left (timeout, interrupt) is never chosen, and one told takes it even if interrupted
//! meanwhile: it then holds, and the binding gives it back as any acquisition that raced an
//! interrupt). The passed hold keeps the Redis token of the cohort's acquisition and its `Lease`
//! (the watchdog renews on), with fencing token base + n. Bounds: `local_passes` (default 8,
//! 0..15) passes, none later than `WINDOW` (10 ms, or a quarter of a short lease) after the
//! cohort's Redis acquisition (measured when the holder learned it), and none when the lease is
//! known lost; then the usual release (queueing the next local waiter at the tail, handing the
//! lock to the head of the Redis line). So a waiter at the head of the Redis line waits at most
//! one cohort (`local_passes` + 1 sections), and as a paused process resumes past the window, a
//! cohort never passes a lock that expired while nobody renewed it. Fencing: the scripts round
//! every token Redis issues up to a multiple of 16 (`max(last + 1, TIME µs)`, rounded), so the 15
//! above it are never issued by Redis: the cohort hands them out in order and the next Redis token
//! is above them. A token that is not a multiple of 16 (an older version's grant, during a deploy)
//! starts no cohort. Forced releases: `admin::force_release` PUBLISHes the released token to
//! `<ns>:inbox:revoked`, which every grant inbox also subscribes to (inbox.rs); a cohort whose
//! token was heard revoked does not pass, so its holder's release runs the token-checked script
//! and gets `LockLost`, and its local successor attempts through Redis. Not covered: a pass made
//! before the notice arrives or while the inbox does not listen (refused channels, reconnecting),
//! an eviction, or a foreign write to the key: those are seen at the cohort's next token check
//! (renewal, or its release through Redis), whose holder gets `LockLost`; holders that passed the
//! lock on before are not told. Costs: a local pass sends no
//! command and wakes one thread (Condvar); `tests/line/cohort.rs` pins both. Tried and not kept (stop 37): letting a thread that
//! comes while a passed hold waits for its receiver to wake take it instead (bounded by the cohort).
//! With the io section, 8 workers in 2 processes, it gave the limiter(3) +7 % and DistMutex nothing:
//! there the hand-off between processes costs most (local_passes 0 / 8 / 15: 3,200 / 7,900 / 8,900
//! sections a second). One of six chaos runs with it on Ruby 3.4 failed its limiter
//! max-holders check, which I could not explain before the stop (more local passes within a
//! cohort on a slot lost to a wiped Redis, whose earlier holders are not told, is one candidate;
//! stop 39 found a likelier one in the checker itself: a worker killed after its release and
//! before its "end" line counted as holding until the kill, now journaled as "ended"), so the
//! receiver keeps its pass. Stop 38 measured where a pass's time goes, and tried it again with the
//! receiver waiting for the GVL-holding thread, spinning receivers, and grants by BLPOP: none was
//! faster (doc/BENCHMARKS.md, "Where a DistMutex hand-off's time goes"). Retried calls,
//! `min_replicas_acked` > 0 and `try_lock` (no member) never pass.
//!
//! The limiter's cohort (`ConcurrentLimiter::pass_locally`): the same hand-off for a slot. The passed
//! `Slot` keeps the token of the slot's Redis acquisition (its member of the slots set) and its lease;
//! the bounds are `local_passes` (up to `MAX_SLOT_PASSES`) and the same window from the slot's Redis
//! acquisition, and there is no fencing. One difference: a slot is passed (`pass_on` ahead of the Redis waiter) even while a thread of the
//! process waits in the Redis line. A limiter's process often holds slots while one of its threads
//! waits there for another; passing takes nothing from that waiter, whose entry still waits for a
//! slot released through Redis. Another process's waiter at the head of the line therefore waits at
//! most two cohorts of one slot (`tests/line/cohort.rs`), and the limit holds throughout: a pass
//! moves a held slot, it never adds one.

use crate::error::{Error, Result};
use std::time::{Duration, Instant};

/// Redis-issued fencing tokens are multiples of this (see the scripts).
pub const FENCE_BLOCK: i64 = 16;

/// Local passes a cohort may make at most: the tokens of its block.
pub const MAX_LOCAL_PASSES: u32 = (FENCE_BLOCK - 1) as u32;

/// Local passes a cohort without fencing tokens (a ConcurrentLimiter slot) may make at most: no
/// token block bounds it, so `WINDOW` does for sections longer than 10 ms / 63 (160 µs).
pub const MAX_SLOT_PASSES: u32 = 63;

/// The default number of local passes.
pub const DEFAULT_LOCAL_PASSES: u32 = 8;

/// No local pass later than this after the cohort's Redis acquisition, so a cohort of long
/// sections gives the lock back to Redis soon whatever `local_passes` says.
pub const WINDOW: Duration = Duration::from_millis(10);

/// The window of a primitive whose holds last `lease`: `WINDOW`, or a quarter of a shorter
/// lease, so a cohort never keeps the lock from Redis' line for most of a lease.
pub fn window(lease: Duration) -> Duration {
    WINDOW.min(lease / 4)
}

/// Unfair mode (`DistMutex` with `fair: false`): how long a process may keep the lock among its
/// own threads, renewing its cohort through Redis, before the lock goes back through the Redis
/// line (so a waiter of another process at the line's head is passed over at most this, plus
/// one cohort).
pub const UNFAIR_SLICE: Duration = Duration::from_millis(50);

/// The unfair slice of a lock whose holds last `lease`: `UNFAIR_SLICE`, or a quarter of a
/// shorter lease.
pub fn unfair_slice(lease: Duration) -> Duration {
    UNFAIR_SLICE.min(lease / 4)
}

/// `local_passes` (a primitive's option) within 0..=`most` (`MAX_LOCAL_PASSES`, or
/// `MAX_SLOT_PASSES` for a limiter), else an argument error naming it.
pub fn check_local_passes(local_passes: u32, most: u32) -> Result<()> {
    if local_passes > most {
        return Err(Error::argument(format!(
            "local_passes must be between 0 and {most}, got {local_passes}"
        )));
    }
    Ok(())
}

/// Where a holder stands in its cohort.
#[derive(Clone, Copy, Debug)]
pub struct Cohort {
    /// The fencing token of the cohort's Redis acquisition.
    base: i64,
    /// Local passes made so far (the holder's token is `base + passes`).
    passes: u32,
    started: Instant,
    /// When its process's unbroken hold began (the first cohort's start): an unfair DistMutex
    /// renews its cohort (`renewed`) only within `unfair_slice` of it.
    slice_started: Instant,
}

impl Cohort {
    /// A cohort starting with a Redis acquisition whose fencing token is `fence` (None when
    /// the token has no block above it).
    pub fn start(fence: i64, started: Instant) -> Option<Cohort> {
        (fence > 0 && fence % FENCE_BLOCK == 0).then_some(Cohort {
            base: fence,
            passes: 0,
            started,
            slice_started: started,
        })
    }

    /// A cohort for a hold without fencing tokens (a ConcurrentLimiter slot, a DistMutex made
    /// with `fencing: false`): the same
    /// bounds on passes and time; its `fencing_token` means nothing.
    pub fn unfenced(started: Instant) -> Cohort {
        Cohort {
            base: 0,
            passes: 0,
            started,
            slice_started: started,
        }
    }

    /// The next holder's place, when this cohort may pass on once more (at most `limit`
    /// passes, within `window` of its start; never past a fenced cohort's block).
    pub fn next(&self, limit: u32, window: Duration) -> Option<Cohort> {
        let within = self.started.elapsed() < window;
        let most = if self.is_unfenced() {
            MAX_SLOT_PASSES
        } else {
            MAX_LOCAL_PASSES
        };
        (within && self.passes < limit.min(most)).then_some(Cohort {
            passes: self.passes + 1,
            ..*self
        })
    }

    /// A new cohort of the same unbroken hold, whose Redis block starts at `fence` (unfair
    /// mode: the lock stayed in the process, see release.rs `pass_unfairly`).
    pub fn renewed(&self, fence: i64) -> Option<Cohort> {
        Cohort::start(fence, Instant::now()).map(|c| Cohort {
            slice_started: self.slice_started,
            ..c
        })
    }

    /// A new cohort of the same unbroken hold of a primitive without fencing (unfair mode, a
    /// limiter's slot: release.rs `renew_unfenced`).
    pub fn renewed_unfenced(&self) -> Cohort {
        Cohort {
            slice_started: self.slice_started,
            ..Cohort::unfenced(Instant::now())
        }
    }

    /// How long its process has held the lock without giving it back through Redis.
    pub fn slice_age(&self) -> Duration {
        self.slice_started.elapsed()
    }

    /// This holder's fencing token (0 in an unfenced cohort).
    pub fn fencing_token(&self) -> i64 {
        if self.is_unfenced() {
            return 0;
        }
        self.base + i64::from(self.passes)
    }

    /// A cohort of a hold without fencing tokens (a slot, a `fencing: false` lock).
    pub fn is_unfenced(&self) -> bool {
        self.base == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cohort_hands_out_its_block_in_order_and_stops_at_the_limit() {
        let now = Instant::now();
        assert!(Cohort::start(17, now).is_none(), "no block above 17");
        assert!(Cohort::start(0, now).is_none());
        let mut c = Cohort::start(32, now).expect("32 has a block");
        let mut tokens = vec![c.fencing_token()];
        while let Some(n) = c.next(100, Duration::from_secs(60)) {
            tokens.push(n.fencing_token());
            c = n;
        }
        assert_eq!(tokens, (32..48).collect::<Vec<_>>(), "never past the block");
        let c = Cohort::start(32, now).unwrap();
        assert_eq!(c.next(0, WINDOW).map(|n| n.fencing_token()), None);
        let late = Cohort::start(32, now - Duration::from_millis(20)).unwrap();
        assert!(late.next(8, WINDOW).is_none(), "no pass after the window");
    }

    #[test]
    fn an_unfenced_cohort_passes_up_to_the_slot_bound() {
        let mut c = Cohort::unfenced(Instant::now());
        let mut passes = 0;
        while let Some(n) = c.next(100, Duration::from_secs(60)) {
            assert_eq!(n.fencing_token(), 0, "no token");
            passes += 1;
            c = n;
        }
        assert_eq!(passes, MAX_SLOT_PASSES, "a slot has no token block");
        let c = Cohort::unfenced(Instant::now());
        assert!(c.next(0, WINDOW).is_none());
        assert!(check_local_passes(MAX_SLOT_PASSES, MAX_SLOT_PASSES).is_ok());
        assert!(check_local_passes(MAX_LOCAL_PASSES + 1, MAX_LOCAL_PASSES).is_err());
    }

    #[test]
    fn a_renewed_cohort_passes_again_from_its_block_but_keeps_the_slice() {
        let slice_start = Instant::now() - Duration::from_millis(30);
        let old = Cohort::start(32, slice_start).unwrap();
        assert!(
            old.next(8, WINDOW).is_none(),
            "the old cohort's window is over"
        );
        let renewed = old.renewed(64).expect("64 has a block");
        assert_eq!(renewed.fencing_token(), 64);
        assert_eq!(renewed.next(8, WINDOW).map(|n| n.fencing_token()), Some(65));
        assert!(
            renewed.slice_age() >= Duration::from_millis(30),
            "the slice goes on"
        );
        assert!(old.renewed(65).is_none(), "no block above 65");
        assert_eq!(unfair_slice(Duration::from_secs(30)), UNFAIR_SLICE);
        assert_eq!(
            unfair_slice(Duration::from_millis(100)),
            Duration::from_millis(25)
        );
    }
}
