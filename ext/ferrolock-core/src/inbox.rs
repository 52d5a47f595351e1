//! The grant inbox: how a waiter in a Redis line learns that a release handed it the lock (or
//! a slot). One subscription per client and process, to its own channel `<ns>:inbox:<id>`; the
//! waiter's line entry names the inbox (`token|deadline|@<id>`), and the release that hands
//! over PUBLISHes `token|grant` there in the same script. Compared with a grant list per waiter
//! (handoff.rs: RPUSH, PEXPIRE, then the waiter's BLPOP) that is two commands and a round trip
//! less per hand-off, and no key to expire.
//!
//! Pub/sub delivers at most once: a grant published while the subscription is down is lost.
//! Nothing else is lost with it: the lock is the waiter's in Redis, and the waiter's next attempt
//! finds it its own. That attempt comes at once when the inbox subscribes again after the entry
//! was queued ([`Inbox::wait`] reports `Missed`), and otherwise after the holder's TTL, the
//! fallback every wait already has. A server that refuses SUBSCRIBE (an ACL without channel
//! rights) turns the inbox off for the client: its waiters then use grant lists.
//!
//! The subscription runs on a thread of its own, started when a waiter of the process first
//! queues (that wait still uses a grant list: nobody waits for a subscription, and a process
//! that is never contended never subscribes) and ended once no grant was awaited for
//! `IDLE_AFTER`, when the client is dropped, or in a forked child (which gets an inbox of its
//! own, with a new id).
//!
//! The same subscription also listens to `<ns>:inbox:revoked`, where an operator's force release
//! of a DistMutex publishes the token it released (admin.rs): a cohort does not pass on a lock
//! whose token was revoked (cohort.rs), so the holder's release finds it lost (`LockLost`).
//!
//! This module keeps the inbox's state (grants received, revoked tokens) and the waits on it;
//! subscription.rs runs the subscription that fills it. The client owns the inbox, so this
//! module imports nothing of the client.
//!
//! Design notes (moved from doc/ARCHITECTURE.md):
//!
//! Grant inbox (`inbox.rs` and `line/subscription.rs`, issue 16): a grant list costs RPUSH + PEXPIRE (a waiter may die, and
//! RPUSH cannot set a TTL) + the waiter's BLPOP. Instead, each client in each process subscribes,
//! on a connection and thread of its own, to `<ns>:inbox:<32 hex>` (random per process: a forked
//! child makes its own), and its waiters' entries name it: `token|deadline|@<id>`. The release
//! that hands over PUBLISHes `token|grant` there in the same script (a `pcall`: refused only
//! without channel rights, where the waiter could not subscribe either); the listener keeps the
//! grant for its token, and the waiter, on a Condvar (interrupt checked every 10 ms), takes it.
//! No key, nothing to expire, one command instead of three. Pub/sub delivers at most once, so a
//! grant published while the subscription is down is lost; the lock (slot) is still the waiter's
//! in Redis, so the waiter's next attempt (`maybe_ours`, as after any wait: "ours already")
//! finds it. That attempt comes at once when the inbox subscribed anew after the entry was queued
//! (`Waited::Missed`: the waiter compares the current subscription's start with the instant
//! before its queueing attempt, or before it joined the local line when a release queued it),
//! else at the usual bound (the holder's TTL). The listener pings a silent connection after 5 s
//! and reconnects when the pong does not come within the read timeout; it parses its own RESP
//! frames (the connection's parser buffers bytes a readiness check cannot see). When it starts:
//! a process's first contended wait queues with a grant list and starts the inbox; later entries
//! (its own attempts and those its releases queue for local successors) name it once it has
//! subscribed (`id_if_listening`), so nobody waits for a subscription and an uncontended process
//! never subscribes; it ends after 60 s without a waiter, when the client is dropped, or when the
//! server refuses SUBSCRIBE (NOPERM: an ACL without channel rights keeps grant lists for good).
//! Entries without an inbox (an older version's waiter) still get grant lists, so a new release
//! serves old waiters. An older release reads an inbox entry's deadline as 0 (`tonumber("@…")`
//! is nil; the id starts with '@', never a number) and drops it as dead, so a new waiter behind
//! an old releaser waits out its turn (the holder's TTL) and attempts again: slow during a
//! rolling deploy, never wrong (no phantom owner: the token field is unchanged). The Web tab and
//! `status` read the deadline either way. On a cluster, PUBLISH reaches subscribers on every node
//! (classic pub/sub is cluster-wide), and no grant key needs the migration probe. DualLock's EXEC
//! hand-off keeps its grant list: its waiter is the WAIT lock's holder, not a line entry, and
//! naming an inbox there would change the WAIT value that holders and the Web tab read.

use crate::error::{Error, Result};
use crate::interrupt::Interrupt;
use std::collections::HashMap;
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// How often a waiter looks at its interrupt (a condition variable cannot be woken by
/// `Interrupt::cancel`).
const POLL: Duration = Duration::from_millis(10);

pub struct Inbox {
    /// Random, fresh in every process (a forked child makes its own inbox).
    pub(super) id: String,
    state: Mutex<State>,
    pub(super) changed: Condvar,
}

#[derive(Default)]
pub(super) struct State {
    /// Grants received and not taken yet: token -> (grant, when it came).
    pub(super) grants: HashMap<String, (i64, Instant)>,
    /// Tokens an operator force-released lately -> when the notice came.
    pub(super) revoked: HashMap<String, Instant>,
    /// When the current subscription was confirmed (None: not subscribed now).
    pub(super) listening_since: Option<Instant>,
    pub(super) running: bool,
    /// The running thread has subscribed at least once (it may be reconnecting now).
    pub(super) listened: bool,
    pub(super) refused: bool,
    pub(super) stopped: bool,
    /// Waiters inside `wait` now, and when the inbox was last used (a wait ended, an entry
    /// named it, a start): for `IDLE_AFTER`.
    pub(super) waiting: usize,
    pub(super) last_wait: Option<Instant>,
    pub(super) purged_at: Option<Instant>,
}

/// How one wait for a grant ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Waited {
    Granted(i64),
    /// The inbox subscribed anew after the waiter's entry was queued: a grant may have been
    /// published while it was not listening. The waiter attempts again at once.
    Missed,
    TimedOut,
}

impl Default for Inbox {
    fn default() -> Self {
        Inbox {
            id: crate::token::random_hex(),
            state: Mutex::new(State::default()),
            changed: Condvar::new(),
        }
    }
}

impl Inbox {
    pub(super) fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The channel a release publishes this inbox's grants to.
    pub fn channel(namespace: &str, id: &str) -> String {
        format!("{namespace}:inbox:{id}")
    }

    /// The channel force releases publish revoked tokens to (no inbox id is "revoked": ids are hex).
    pub fn revoked_channel(namespace: &str) -> String {
        Inbox::channel(namespace, "revoked")
    }

    /// Whether an operator's force release of `token` was heard lately.
    pub fn was_revoked(&self, token: &str) -> bool {
        let st = self.state();
        !st.revoked.is_empty() && st.revoked.contains_key(token)
    }

    /// The inbox's id for a line entry (`|@<id>` follows the deadline) once its thread has
    /// subscribed (it may be reconnecting now; see `wait`); else None, and the waiter pops a
    /// grant list. Never waits for a subscription.
    pub fn id_if_listening(&self) -> Option<&str> {
        let mut st = self.state();
        if !st.listened || st.refused || st.stopped {
            return None;
        }
        st.last_wait = Some(Instant::now());
        Some(&self.id)
    }

    /// Before each attempt of `token`'s waiter: the id its entry names (`id_if_listening`,
    /// owned), and any grant kept for the token dropped. The attempt tells the truth about the
    /// lock (a grant still valid is found as "ours already"), so a grant left from an earlier
    /// wait (taken too late, the lock since expired) can never be taken by a later one.
    pub fn before_attempt(&self, token: &str) -> Option<String> {
        self.forget(token);
        self.id_if_listening().map(str::to_owned)
    }

    pub(super) fn forget(&self, token: &str) {
        self.state().grants.remove(token);
    }

    /// Waits up to `timeout` for the grant of `token`, whose entry was queued (by its own
    /// attempt or a release) no earlier than `since`.
    pub fn wait(
        &self,
        intr: &Interrupt,
        token: &str,
        since: Instant,
        timeout: Duration,
    ) -> Result<Waited> {
        let deadline = Instant::now() + timeout;
        let mut st = self.state();
        st.waiting += 1;
        let outcome = loop {
            if let Some((grant, _)) = st.grants.remove(token) {
                break Ok(Waited::Granted(grant));
            }
            if st.listening_since.is_some_and(|at| at > since) || !st.running {
                // (Not running: the thread ended, so nothing will come; the next attempt finds
                // a grant that came meanwhile.)
                break Ok(Waited::Missed);
            }
            if intr.is_cancelled() {
                break Err(Error::Interrupted);
            }
            let now = Instant::now();
            if now >= deadline {
                break Ok(Waited::TimedOut);
            }
            st = self
                .changed
                .wait_timeout(st, POLL.min(deadline - now))
                .unwrap_or_else(|e| e.into_inner())
                .0;
        };
        st.waiting -= 1;
        st.last_wait = Some(Instant::now());
        outcome
    }

    /// Ends the subscription (the client is being dropped).
    pub(crate) fn stop(&self) {
        self.state().stopped = true;
        self.changed.notify_all();
    }
}
