//! Leases and their watchdog. A held lock or slot is a key with a TTL; while the holding process
//! lives, one background thread per client renews every lease about every TTL/3, all due
//! renewals of a tick in one pipelined round trip, each token-checked by its script. A lease the
//! script reports gone is marked lost (the owner learns it at release) and, for a lease started
//! with a report, queued in `lost_leases` so the loss is announced at once.
//!
//! The same thread runs best-effort cleanups: token-checked releases of acquisitions whose
//! outcome is unknown (see [`release_in_background`]). The thread itself is watchdog.rs's.

use crate::client::Client;
use crate::error::Result;
use crate::interrupt::Interrupt;
use crate::lost_leases::LostLease;
use crate::lua_script;
use crate::script::ScriptCall;
use crate::watchdog::{LeaseEntry, Link, Work};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

lua_script!(RENEW_KEY = "lease/renew_key");

/// lease/renew_key.lua's arguments: the token-checked renewal of a lease kept as a string key
/// holding its owner's token (a DistMutex's lock, a DualLock's locks, a MessageLock's state).
pub(crate) struct RenewKeyArgs<'a> {
    /// The owner token the key must still hold.
    pub token: &'a str,
    /// The key's TTL from now (ms): its lease.
    pub ttl_ms: u64,
}

impl RenewKeyArgs<'_> {
    /// The renewal of `key`.
    pub fn call(&self, key: &str) -> ScriptCall {
        ScriptCall::new(&RENEW_KEY)
            .key(key)
            .arg(self.token)
            .arg(self.ttl_ms)
    }
}

/// Leases started in this process and not yet dropped, across every client.
static RENEWED: AtomicUsize = AtomicUsize::new(0);

/// How many leases this process renews now: what its threads hold. The specs check that an
/// example leaves none behind (spec/support/holds_left.rb), for every primitive at once.
pub fn renewed() -> usize {
    RENEWED.load(Ordering::Relaxed)
}

/// A registered lease; renewal stops when it is dropped.
pub struct Lease {
    client: Client,
    id: u64,
    entry: Arc<LeaseEntry>,
}

impl Lease {
    /// Starts renewing: `renew` must return 1 while the lease is ours and 0 once it is not.
    /// Panics when the OS refuses the watchdog thread (see [`Lease::try_start`]).
    pub fn start(client: &Client, renew: ScriptCall, ttl: Duration) -> Lease {
        started(Self::try_start(client, renew, ttl, None))
    }

    /// As `start`; a loss found by a renewal is also queued for `lost_leases::next` (the
    /// `:lock_lost` event) as `report`.
    pub fn start_reporting(
        client: &Client,
        renew: ScriptCall,
        ttl: Duration,
        report: LostLease,
    ) -> Lease {
        started(Self::try_start(client, renew, ttl, Some(report)))
    }

    /// As `start` (`start_reporting` with a `report`), but an error when the client's watchdog
    /// thread is not running yet and the OS refuses to start it (thread limit, memory): the
    /// lease would never be renewed. The watchdog is left as it was, so a later lease tries
    /// again. The caller still holds what it acquired, and should release it.
    pub fn try_start(
        client: &Client,
        renew: ScriptCall,
        ttl: Duration,
        report: Option<LostLease>,
    ) -> Result<Lease> {
        let entry = Arc::new(LeaseEntry {
            renew,
            ttl,
            lost: AtomicBool::new(false),
            report,
        });
        let at = Instant::now() + ttl / 3;
        let id =
            client
                .inner
                .watchdog
                .get()
                .add(|| link(client), Work::Renew(entry.clone()), at)?;
        RENEWED.fetch_add(1, Ordering::Relaxed);
        Ok(Lease {
            client: client.clone(),
            id,
            entry,
        })
    }

    /// True once a renewal found the lease gone or taken by another token.
    pub fn is_lost(&self) -> bool {
        self.entry.lost.load(Ordering::SeqCst)
    }

    /// `is_lost` for someone who does not own the lease (dual_lock_local's registry).
    pub(crate) fn watch(&self) -> LeaseWatch {
        LeaseWatch(self.entry.clone())
    }
}

/// Tells whether a lease was found lost; does not keep it renewed.
#[derive(Clone)]
pub(crate) struct LeaseWatch(Arc<LeaseEntry>);

impl LeaseWatch {
    pub(crate) fn is_lost(&self) -> bool {
        self.0.lost.load(Ordering::SeqCst)
    }
}

/// The primitives start leases infallibly (right after Redis granted the hold): a refused
/// watchdog thread is still a panic there, which the binding turns into `Ferrolock::Error`
/// ("internal error in ferrolock: could not start the lease watchdog thread: …"). Only its
/// state is kept sound (see `Watchdog::add`).
fn started(lease: Result<Lease>) -> Lease {
    lease.unwrap_or_else(|e| panic!("{e}"))
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.client.inner.watchdog.get().remove(self.id);
        RENEWED.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Best effort, from the watchdog thread: runs a token-checked release for an acquisition
/// whose outcome is unknown (its reply was lost to a timeout or an interrupt, so Redis may have
/// granted it), retrying while Redis is unreachable, for at most `give_up_after` (the lease:
/// past it the key has expired anyway). Without this such a lock would block others for a
/// whole lease. Only for tokens that will never be used again.
///
/// The release is sent now and repeated twice (harmless: it is token-checked and the token is
/// dead): a call cut short may still be executed by Redis after the cleanup, from the bytes it
/// had already sent on its own connection, and the repeats catch that grant well within one
/// renewal tick instead of letting it block others for its whole lease.
/// Without a watchdog thread (the OS refused one) the release is dropped: the key expires
/// with its lease.
pub fn release_in_background(client: &Client, release: ScriptCall, give_up_after: Duration) {
    queue_cleanup(client, release, give_up_after, None);
}

/// [`release_in_background`] of a give-up (`abandon`) of `lock_key`, announced as a release in
/// flight (unanswered_releases.rs) until its first try was answered (or failed), so that this
/// process's `try_lock`, `locked?` and limiter `status` see what an interrupted acquisition
/// leaves: nothing held.
pub fn release_in_background_announced(
    client: &Client,
    release: ScriptCall,
    give_up_after: Duration,
    lock_key: &str,
) {
    let announced = crate::unanswered_releases::announce(client.identity(), lock_key);
    queue_cleanup(client, release, give_up_after, Some(announced));
}

/// Queues the release now and its two repeats (see `release_in_background`); `announced` goes
/// with the first.
fn queue_cleanup(
    client: &Client,
    release: ScriptCall,
    give_up_after: Duration,
    mut announced: Option<crate::unanswered_releases::Announced>,
) {
    let now = Instant::now();
    let watchdog = client.inner.watchdog.get();
    for delay in [Duration::ZERO, CLEANUP_REPEAT, give_up_after / 4] {
        let work = Work::Cleanup {
            call: release.clone(),
            give_up_at: now + give_up_after,
            announced: announced.take(),
        };
        if watchdog.add(|| link(client), work, now + delay).is_err() {
            return;
        }
    }
}

/// Remembers a job this process parked (limits_concurrency) on `key`, whose payload is kept in
/// the hash `jobs_key`, so that the client's watchdog reports it if Redis loses it
/// (data_loss.rs). Best effort: without a watchdog thread nothing is remembered.
pub fn watch_parked(client: &Client, jobs_key: String, key: &str, job_id: &str) {
    let watchdog = client.inner.watchdog.get();
    let _ = watchdog.park(|| link(client), jobs_key, key, job_id);
}

/// How the client's watchdog thread reaches Redis: its calls pipelined by `eval_many`. It holds
/// the client weakly: once the client is dropped, the thread ends.
fn link(client: &Client) -> Link {
    let weak = Arc::downgrade(&client.inner);
    let batch = Box::new(move |calls: &[ScriptCall]| {
        let inner = weak.upgrade()?;
        let replies = Client { inner }.eval_many(&Interrupt::new(), calls);
        Some(match replies {
            Ok(replies) => replies.into_iter().map(Result::ok).collect(),
            Err(_) => vec![None; calls.len()],
        })
    });
    Link {
        batch,
        route_key: client
            .keys("ferrolock")
            .map(|k| k.part("probe"))
            .unwrap_or_default(),
        redis: client.redacted_url().to_string(),
        probe: client.inner.data_loss_probe,
    }
}

/// When a background release is repeated first (see `release_in_background`).
const CLEANUP_REPEAT: Duration = Duration::from_millis(50);

/// Runs a token-checked release now. When Redis does not answer (unreachable, read_timeout,
/// cut short), the release is handed to the watchdog as by [`release_in_background`] before the
/// error is returned, so a release is never dropped: the lock is freed as soon as Redis is
/// back rather than after its whole lease.
pub fn release_now(
    client: &Client,
    intr: &Interrupt,
    release: ScriptCall,
    give_up_after: Duration,
) -> crate::Result<redis::Value> {
    client.eval(intr, &release).inspect_err(|e| {
        if matches!(
            e,
            crate::Error::Connection { .. } | crate::Error::Timeout(_) | crate::Error::Interrupted
        ) {
            release_in_background(client, release.clone(), give_up_after);
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::ClientOptions;
    use crate::error::Error;
    use crate::watchdog::test_hooks::REFUSE_THREADS;

    #[test]
    fn a_refused_watchdog_thread_is_an_error_and_the_next_lease_tries_again() {
        // Nothing listens there: no renewal in this test reaches a server, none needs to.
        let client = Client::new(ClientOptions::new("redis://127.0.0.1:1")).unwrap();
        let renew = || {
            RenewKeyArgs {
                token: "token",
                ttl_ms: 60_000,
            }
            .call("k")
        };
        let ttl = Duration::from_secs(60);
        let watchdog = client.inner.watchdog.get().clone();

        REFUSE_THREADS.with(|r| r.set(true));
        let refused = Lease::try_start(&client, renew(), ttl, None).err();
        let start = std::panic::AssertUnwindSafe(|| Lease::start(&client, renew(), ttl));
        let panic = std::panic::catch_unwind(start).err();
        release_in_background(&client, renew(), ttl); // dropped, without a panic
        assert_eq!(watchdog.queued(), (0, false));
        REFUSE_THREADS.with(|r| r.set(false));

        let message = "could not start the lease watchdog thread: refused by the test";
        assert_eq!(refused, Some(Error::Internal(message.into())));
        let panic = panic.expect("Lease::start panics");
        assert_eq!(
            panic.downcast_ref::<String>().map(String::as_str),
            Some(message)
        );

        let lease = Lease::try_start(&client, renew(), ttl, None).unwrap();
        assert_eq!(watchdog.queued(), (1, true));
        drop(lease);
        assert_eq!(watchdog.queued(), (0, true));
        client.inner.watchdog.get().stop();
    }
}
