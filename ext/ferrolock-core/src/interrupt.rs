//! A cancellation token for one blocking call. The host runtime (Ruby's unblocking function)
//! calls [`Interrupt::cancel`] from another thread; the call then stops promptly: a socket read
//! is cut by `shutdown(2)` on the registered descriptor, a sleep is woken by the condvar.

use crate::error::{Error, Result};
use std::os::fd::RawFd;
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

#[derive(Default)]
pub struct Interrupt {
    state: Mutex<State>,
    wake: Condvar,
}

#[derive(Default)]
struct State {
    cancelled: bool,
    fd: Option<RawFd>,
}

impl Interrupt {
    pub fn new() -> Self {
        Self::default()
    }

    /// Called from another thread. Safe to call many times.
    pub fn cancel(&self) {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        st.cancelled = true;
        if let Some(fd) = st.fd {
            // SAFETY: the descriptor is registered only while its connection is checked out by
            // the cancelled call (see `watch`), so it cannot belong to anyone else yet.
            unsafe { libc::shutdown(fd, libc::SHUT_RDWR) };
        }
        self.wake.notify_all();
    }

    pub fn is_cancelled(&self) -> bool {
        self.state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .cancelled
    }

    pub fn check(&self) -> Result<()> {
        if self.is_cancelled() {
            Err(Error::Interrupted)
        } else {
            Ok(())
        }
    }

    /// Registers the socket a call is about to block on. The registration ends when the guard
    /// drops, which must happen before the connection goes back to the pool.
    pub fn watch(&self, fd: RawFd) -> Result<FdGuard<'_>> {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if st.cancelled {
            return Err(Error::Interrupted);
        }
        st.fd = Some(fd);
        Ok(FdGuard { owner: self })
    }

    /// Sleeps for `dur` unless cancelled first.
    pub fn sleep(&self, dur: Duration) -> Result<()> {
        let deadline = Instant::now() + dur;
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if st.cancelled {
                return Err(Error::Interrupted);
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(());
            }
            st = self
                .wake
                .wait_timeout(st, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
}

pub struct FdGuard<'a> {
    owner: &'a Interrupt,
}

impl Drop for FdGuard<'_> {
    fn drop(&mut self) {
        self.owner
            .state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .fd = None;
    }
}
