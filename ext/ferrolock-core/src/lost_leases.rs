//! Leases the watchdog found lost, queued for the host runtime to report at once (Ruby's
//! `:lock_lost` event) instead of only at release, and the data losses its probes found
//! (data_loss.rs; Ruby's `:data_lost`). The watchdog is a plain thread that cannot
//! call into Ruby, so it pushes here and one Ruby thread waits in [`next`] without the GVL.
//!
//! Nothing is queued until someone [`listen`]s (a loss nobody hears of is not kept for later);
//! the queue is bounded, dropping the oldest notice when a listener falls far behind.

use crate::data_loss::DataLoss;
use crate::error::Result;
use crate::fork::ForkLocal;
use crate::interrupt::Interrupt;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, LazyLock, Mutex};
use std::time::{Duration, Instant};

/// Notices kept for a listener that has not caught up yet.
const CAPACITY: usize = 1024;

/// How often a waiting [`next`] looks at its `Interrupt` (a condvar cannot be woken by it).
const INTERRUPT_CHECK: Duration = Duration::from_millis(50);

/// What a lease was guarding, for the report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LostLease {
    /// "dist_mutex", "dual_lock", "concurrent_limiter", "shoryuken_lock".
    pub primitive: &'static str,
    /// The lock's name (DualLock: its key; MessageLock: the message id).
    pub name: String,
    /// DistMutex: the fencing token of the lost hold.
    pub fencing_token: Option<i64>,
    /// MessageLock: the queue.
    pub queue: Option<String>,
}

impl LostLease {
    pub fn new(primitive: &'static str, name: &str) -> Self {
        LostLease {
            primitive,
            name: name.to_string(),
            fencing_token: None,
            queue: None,
        }
    }
}

/// One report for the host runtime.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Notice {
    Lease(LostLease),
    Data(DataLoss),
}

#[derive(Default)]
struct Queue {
    listening: AtomicBool,
    items: Mutex<VecDeque<Notice>>,
    ready: Condvar,
}

// Per process: a forked child starts with no listener and an empty queue.
static QUEUE: LazyLock<ForkLocal<Queue>> = LazyLock::new(|| ForkLocal::new(Queue::default));

/// From now on, lost leases of this process are queued for [`next`].
pub fn listen() {
    QUEUE.get().listening.store(true, Ordering::SeqCst);
}

/// Called by the watchdog when a renewal finds a lease gone.
pub(crate) fn push(lost: LostLease) {
    push_notice(Notice::Lease(lost));
}

/// Called by the watchdog when a probe found that Redis lost data.
pub(crate) fn push_data_loss(loss: DataLoss) {
    push_notice(Notice::Data(loss));
}

fn push_notice(lost: Notice) {
    let q = QUEUE.get();
    if !q.listening.load(Ordering::SeqCst) {
        return;
    }
    let mut items = q.items.lock().unwrap_or_else(|e| e.into_inner());
    if items.len() >= CAPACITY {
        items.pop_front();
    }
    items.push_back(lost);
    q.ready.notify_one();
}

/// The next notice, waiting at most `timeout`; `Ok(None)` when none came.
pub fn next(intr: &Interrupt, timeout: Duration) -> Result<Option<Notice>> {
    let q = QUEUE.get();
    let deadline = Instant::now() + timeout;
    let mut items = q.items.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        if let Some(lost) = items.pop_front() {
            return Ok(Some(lost));
        }
        intr.check()?;
        let now = Instant::now();
        if now >= deadline {
            return Ok(None);
        }
        let slice = (deadline - now).min(INTERRUPT_CHECK);
        items = q
            .ready
            .wait_timeout(items, slice)
            .unwrap_or_else(|e| e.into_inner())
            .0;
    }
}
