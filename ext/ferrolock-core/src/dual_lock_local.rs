//! One DualLock waiter per process per key (issue 16). While a thread of this process holds a
//! key's WAIT and has not started running, a duplicate arriving in this process is skipped here,
//! with no Redis command: Redis would skip it for the same reason (one already waits, and that
//! one starts after this arrival, so the newcomer's trigger is covered).
//!
//! Why that holds: the waiter is registered here only while it is Waiting with no round trip in
//! flight that could change its stage other than the BLPOP of its grant, and it takes itself out
//! under the same mutex BEFORE its block can start (grant popped, `enter` run again, deadline,
//! error, drop). So every local skip happens before the waiter's block starts. And wherever the
//! waiter goes next, someone starts after the skip: the grant makes it run; its next `enter`
//! runs it, keeps it waiting, or skips it because another duplicate holds WAIT at that moment
//! (which starts after it); a timeout or error is the waiter's caller's, as when Redis skips.
//! A waiter whose WAIT lease is known lost does not skip anyone (the newcomer asks Redis).
//!
//! Keyed by client identity and WAIT key (DualLock objects are built per call by the Ruby
//! layer), fork-local: a forked child starts empty, and a registration carried into it is
//! ignored.
//!
//! Design notes (moved from doc/ARCHITECTURE.md):
//!
//! One DualLock waiter per process per key (`dual_lock_local.rs`): a DualLock has no line to shorten (at
//! most one duplicate waits), so the saving is on skips. While a thread of this process (same client, same
//! WAIT key) holds WAIT and has not started running, a duplicate arriving in this process is skipped in
//! `DualLock::enter` with no Redis command (`Stage::Skipped`, the same `:skipped` event and reason). Redis
//! would skip it for the same reason, and the rule holds because of when the waiter is registered in the
//! fork-local map: from its `enter`'s Waiting reply, and again before each BLPOP of its grant; never while
//! another round trip that can change its stage is in flight. It takes itself out under the map's mutex
//! right after each BLPOP returns (grant popped, turn ended, error), before its next `enter`, when its wait
//! ends (running, skipped, deadline) and when the ticket is left or dropped (`Registration` in the `Ticket`,
//! RAII). So every local skip precedes the start of the waiter's block, and wherever the waiter goes next
//! someone starts after the skip: the grant runs it; its next `enter` runs it, keeps it waiting, or skips it
//! for another duplicate holding WAIT at that moment, which starts later still; a timeout or error is its
//! caller's, as when Redis skips. A waiter whose WAIT lease is known lost (`Lease::is_lost`, read through a
//! `LeaseWatch`) covers nobody, and a retried `enter` with the waiter's own token is never skipped (it asks
//! Redis, which answers "waiting"). A newer registration for the key replaces an older one (Redis has one
//! WAIT holder, so the older's lease was lost); each `Registration` removes only its own. `min_replicas_acked`
//! needs nothing more: a local skip writes nothing, and the waiter leaves the map before acknowledging a
//! grant that may be refused. Cost: a skip in Redis is 3 commands (EVALSHA, GET, GET), a local one 0; the
//! other processes' duplicates still ask Redis (they cannot know when this process's waiter starts). Tests:
//! `tests/primitives/dual_lock_local.rs` (0 commands for 100 local skips, promoted waiter, retry, interrupt, deadline,
//! lost lease, fork); `spec/dual_lock_spec.rb` (a late duplicate after the waiter started runs; 3 processes
//! x 4 threads with every trigger followed by a run start, runs never overlapping).

use crate::fork::ForkLocal;
use crate::lease::{Lease, LeaseWatch};
use std::collections::HashMap;
use std::sync::{LazyLock, Mutex, MutexGuard};

struct Waiter {
    id: u64,
    token: String,
    lease: LeaseWatch,
}

#[derive(Default)]
struct Waiters {
    /// client identity -> WAIT key -> its waiter (nested so a lookup needs no allocation).
    by_client: HashMap<usize, HashMap<String, Waiter>>,
    next_id: u64,
}

static WAITERS: LazyLock<ForkLocal<Mutex<Waiters>>> =
    LazyLock::new(|| ForkLocal::new(|| Mutex::new(Waiters::default())));

fn waiters() -> MutexGuard<'static, Waiters> {
    WAITERS.get().lock().unwrap_or_else(|e| e.into_inner())
}

/// A waiter's place in the registry; dropping it takes the waiter out.
pub(crate) struct Registration {
    client_id: usize,
    wait_key: String,
    id: u64,
    generation: u64,
}

impl Drop for Registration {
    fn drop(&mut self) {
        if crate::fork::generation() != self.generation {
            return; // the parent's registry
        }
        let mut waiters = waiters();
        let Some(keys) = waiters.by_client.get_mut(&self.client_id) else {
            return;
        };
        // A newer waiter of the process may have replaced this one (this one's lease was lost).
        if keys.get(&self.wait_key).is_some_and(|w| w.id == self.id) {
            keys.remove(&self.wait_key);
            if keys.is_empty() {
                waiters.by_client.remove(&self.client_id);
            }
        }
    }
}

/// Registers `token`, which holds WAIT under `lease`, as the process's waiter for the key. It
/// replaces any other: Redis has one WAIT holder, so an older registration's lease was lost.
pub(crate) fn register(
    client_id: usize,
    wait_key: &str,
    token: &str,
    lease: &Lease,
) -> Registration {
    let mut waiters = waiters();
    waiters.next_id += 1;
    let id = waiters.next_id;
    let waiter = Waiter {
        id,
        token: token.to_string(),
        lease: lease.watch(),
    };
    let keys = waiters.by_client.entry(client_id).or_default();
    keys.insert(wait_key.to_string(), waiter);
    Registration {
        client_id,
        wait_key: wait_key.to_string(),
        id,
        generation: crate::fork::generation(),
    }
}

/// True when a duplicate arriving with `token` is skipped without asking Redis: another token
/// of this process waits for the key and its lease is not known lost. A retried `enter` with
/// the waiter's own token is never skipped.
pub(crate) fn covered(client_id: usize, wait_key: &str, token: &str) -> bool {
    waiters()
        .by_client
        .get(&client_id)
        .and_then(|keys| keys.get(wait_key))
        .is_some_and(|w| w.token != token && !w.lease.is_lost())
}

/// The token registered as the process's waiter for the key (tests).
pub(crate) fn waiting_token(client_id: usize, wait_key: &str) -> Option<String> {
    waiters()
        .by_client
        .get(&client_id)
        .and_then(|keys| keys.get(wait_key))
        .map(|w| w.token.clone())
}
