//! The two primitives that wait in a line (src/line/), behind one interface, so that a test of
//! the wait path runs against both: `both!(test, …)` instantiates each generic test for
//! DistMutex and for a ConcurrentLimiter of one slot.

use crate::support::cmd;
use ferrolock_core::client::int;
use ferrolock_core::concurrent_limiter::{ConcurrentLimiter, LimiterOptions};
use ferrolock_core::{Client, Error, Interrupt, Result};
use ferrolock_core::{DistMutex, DistMutexOptions, Held};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub trait Lined: Send + Sync + Sized + 'static {
    type Hold: Send + 'static;
    /// The key part of the Redis line.
    const LINE: &'static str;
    /// A hold may pass to a local waiter ahead of the process's waiter in Redis (slots).
    const PASSES_AHEAD: bool;
    /// The most `local_passes` allowed (a lock's fencing block; a slot has none).
    const MAX_PASSES: u32;

    /// A lease of `lease_ms`, `local_passes` cohort passes (a limiter: one slot); a cohort
    /// window no slow machine can miss.
    fn build(client: &Client, name: &str, lease_ms: u64, local_passes: u32) -> Result<Self>;
    fn make(client: &Client, name: &str, lease_ms: u64, local_passes: u32) -> Self {
        Self::build(client, name, lease_ms, local_passes).unwrap()
    }
    fn token() -> String;
    /// Waits until `deadline`: `Ok(None)` when it passed.
    fn enter(
        &self,
        intr: &Interrupt,
        token: &str,
        deadline: Option<Instant>,
    ) -> Result<Option<Self::Hold>>;
    fn leave(&self, intr: &Interrupt, hold: Self::Hold) -> Result<()>;
    fn abandon(&self, token: &str);
    fn local_waiters(&self) -> usize;
    /// `fair: false` (a limiter: `limit` slots; a lock: one), a 30 s lease, 8 local passes, a
    /// cohort window no slow machine can miss;
    /// `tick`: how long a parked hold waits for a running thread (None: the default).
    fn unfair(client: &Client, name: &str, limit: u32, tick: Option<Duration>) -> Self;
    fn parked_holds(&self) -> usize;
    /// The binding's retake with the GVL held (a new call's hold when one is parked here).
    fn take_parked(&self) -> Result<Option<Self::Hold>>;
    /// Whether anyone holds it now.
    fn held(&self) -> bool;
    /// A lock's fencing token (a slot has none).
    fn fence(hold: &Self::Hold) -> Option<i64>;
}

impl Lined for DistMutex {
    type Hold = Held;
    const LINE: &'static str = "waiters";
    const PASSES_AHEAD: bool = false;
    const MAX_PASSES: u32 = ferrolock_core::MAX_LOCAL_PASSES;

    fn build(client: &Client, name: &str, lease_ms: u64, local_passes: u32) -> Result<Self> {
        let opts = DistMutexOptions {
            fair: true,
            lease: Duration::from_millis(lease_ms),
            local_passes,
            ..DistMutexOptions::default()
        };
        let m = DistMutex::new(client, name, opts)?;
        Ok(m.with_cohort_window(Duration::from_secs(60)))
    }
    fn token() -> String {
        DistMutex::new_token()
    }
    fn enter(
        &self,
        intr: &Interrupt,
        token: &str,
        deadline: Option<Instant>,
    ) -> Result<Option<Held>> {
        match self.lock(intr, token, deadline) {
            Ok(held) => Ok(Some(held)),
            Err(Error::Timeout(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }
    fn leave(&self, intr: &Interrupt, hold: Held) -> Result<()> {
        self.unlock(intr, hold)
    }
    fn abandon(&self, token: &str) {
        DistMutex::abandon(self, token)
    }
    fn local_waiters(&self) -> usize {
        DistMutex::local_waiters(self)
    }
    fn unfair(client: &Client, name: &str, _limit: u32, tick: Option<Duration>) -> Self {
        let opts = DistMutexOptions {
            fair: false,
            ..DistMutexOptions::default()
        };
        let m = DistMutex::new(client, name, opts)
            .unwrap()
            .with_cohort_window(Duration::from_secs(60));
        match tick {
            Some(t) => m.with_park_tick(t),
            None => m,
        }
    }
    fn parked_holds(&self) -> usize {
        DistMutex::parked_holds(self)
    }
    fn take_parked(&self) -> Result<Option<Held>> {
        DistMutex::take_parked(self, None)
    }
    fn held(&self) -> bool {
        self.is_locked(&Interrupt::new()).unwrap()
    }
    fn fence(hold: &Held) -> Option<i64> {
        Some(hold.fencing_token())
    }
}

impl Lined for ConcurrentLimiter {
    type Hold = ferrolock_core::concurrent_limiter::Slot;
    const LINE: &'static str = "line";
    const PASSES_AHEAD: bool = true;
    const MAX_PASSES: u32 = ferrolock_core::MAX_SLOT_PASSES;

    fn build(client: &Client, name: &str, lease_ms: u64, local_passes: u32) -> Result<Self> {
        let opts = LimiterOptions {
            limit: 1,
            lease: Duration::from_millis(lease_ms),
            local_passes,
            fair: true,
        };
        let l = ConcurrentLimiter::new(client, name, opts)?;
        Ok(l.with_cohort_window(Duration::from_secs(60)))
    }
    fn token() -> String {
        ConcurrentLimiter::new_token()
    }
    fn enter(
        &self,
        intr: &Interrupt,
        token: &str,
        deadline: Option<Instant>,
    ) -> Result<Option<Self::Hold>> {
        let deadline = deadline.unwrap_or_else(|| Instant::now() + Duration::from_secs(60));
        self.acquire(intr, token, deadline)
    }
    fn leave(&self, intr: &Interrupt, hold: Self::Hold) -> Result<()> {
        self.release(intr, hold)
    }
    fn abandon(&self, token: &str) {
        ConcurrentLimiter::abandon(self, token)
    }
    fn local_waiters(&self) -> usize {
        ConcurrentLimiter::local_waiters(self)
    }
    fn unfair(client: &Client, name: &str, limit: u32, tick: Option<Duration>) -> Self {
        let opts = LimiterOptions {
            limit,
            lease: Duration::from_secs(30),
            local_passes: 8,
            fair: false,
        };
        let l = ConcurrentLimiter::new(client, name, opts)
            .unwrap()
            .with_cohort_window(Duration::from_secs(60));
        match tick {
            Some(t) => l.with_park_tick(t),
            None => l,
        }
    }
    fn parked_holds(&self) -> usize {
        ConcurrentLimiter::parked_holds(self)
    }
    fn take_parked(&self) -> Result<Option<Self::Hold>> {
        ConcurrentLimiter::take_parked(self, Instant::now() + Duration::from_secs(60))
    }
    fn held(&self) -> bool {
        self.status(&Interrupt::new()).unwrap().in_use > 0
    }
    fn fence(_: &Self::Hold) -> Option<i64> {
        None
    }
}

/// A primitive of `name` on `client` with a 30 s lease (a waiter entering within seconds was
/// handed over), every hand-off through Redis.
pub fn make<P: Lined>(client: &Client, name: &str) -> Arc<P> {
    Arc::new(P::make(client, name, 30_000, 0))
}

/// Takes the hold (no deadline: a limiter waits 60 s).
pub fn take<P: Lined>(p: &P) -> P::Hold {
    p.enter(&Interrupt::new(), &P::token(), None)
        .unwrap()
        .expect("entered")
}

pub fn key<P: Lined>(name: &str, part: &str) -> String {
    format!("t:{{{name}}}:{part}")
}

/// Entries in the Redis line.
pub fn queued<P: Lined>(client: &Client, name: &str) -> i64 {
    int(&cmd(client, &["LLEN", &key::<P>(name, P::LINE)])).unwrap()
}

pub fn exists(client: &Client, key: &str) -> bool {
    int(&cmd(client, &["EXISTS", key])).unwrap() == 1
}

/// Waits (generously: the machine may be loaded) until `n` entries are in the Redis line.
pub fn until_queued<P: Lined>(client: &Client, name: &str, n: i64) {
    crate::support::until(&format!("{n} waiters in line"), || {
        queued::<P>(client, name) >= n
    });
}

/// The ids of the threads that entered, with a lock's fencing token, in the order they did.
pub type Log = Arc<std::sync::Mutex<Vec<(usize, Option<i64>)>>>;

/// A thread that takes the hold (no deadline), records `id` (with its fencing token) and
/// leaves at once.
pub fn passer<P: Lined>(p: &Arc<P>, id: usize, log: &Log) -> std::thread::JoinHandle<()> {
    let (p, log) = (p.clone(), log.clone());
    std::thread::spawn(move || {
        let hold = take(&*p);
        log.lock().unwrap().push((id, P::fence(&hold)));
        p.leave(&Interrupt::new(), hold).unwrap();
    })
}

/// The ids `passer`s logged, in order.
pub fn ids(log: &std::sync::Mutex<Vec<(usize, Option<i64>)>>) -> Vec<usize> {
    log.lock().unwrap().iter().map(|(i, _)| *i).collect()
}

/// Fencing tokens (a lock's) grow from `first` in the order logged.
pub fn assert_fences_grow(first: Option<i64>, log: &std::sync::Mutex<Vec<(usize, Option<i64>)>>) {
    let mut last = first;
    for (_, fence) in log.lock().unwrap().iter() {
        if let (Some(f), Some(l)) = (fence, last) {
            assert!(*f > l, "fencing token {f} after {l}");
        }
        last = *fence;
    }
}

/// Calls of every command since the last CONFIG RESETSTAT, but the test's own probes (INFO,
/// CONFIG, and the LLEN of `until_queued`).
pub fn commands_since_reset(client: &Client) -> Vec<(String, i64)> {
    let mut calls = crate::support::calls(client);
    calls.retain(|(name, _)| name != "llen");
    calls
}

/// Runs each generic test `fn name<P: Lined>()` of the module for both primitives.
macro_rules! both {
    ($($test:ident),* $(,)?) => {
        mod dist_mutex {
            $(#[test]
            fn $test() {
                super::$test::<ferrolock_core::DistMutex>()
            })*
        }
        mod concurrent_limiter {
            $(#[test]
            fn $test() {
                super::$test::<ferrolock_core::concurrent_limiter::ConcurrentLimiter>()
            })*
        }
    };
}
pub(crate) use both;
