//! A cancellation token for one blocking call. The host runtime (Ruby's unblocking function)
//! calls [`Interrupt::cancel`] from another thread or from a signal handler; the call then stops
//! promptly: a socket read is cut by `shutdown(2)` on the registered descriptor, a sleep is woken
//! through an eventfd. `cancel` uses only atomics and async-signal-safe system calls, which lets
//! Ruby skip starting a helper thread per call.

use crate::error::{Error, Result};
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, Ordering};
use std::time::{Duration, Instant};

pub struct Interrupt {
    cancelled: AtomicBool,
    /// The socket the call is blocked on, or -1.
    fd: AtomicI32,
    /// eventfd woken by `cancel`, created by the first `sleep`, or -1.
    wake_fd: AtomicI32,
    /// How many `cancel`s are using `fd`/`wake_fd` right now.
    cancelling: AtomicU32,
}

impl Default for Interrupt {
    fn default() -> Self {
        Interrupt {
            cancelled: AtomicBool::new(false),
            fd: AtomicI32::new(-1),
            wake_fd: AtomicI32::new(-1),
            cancelling: AtomicU32::new(0),
        }
    }
}

impl Interrupt {
    pub fn new() -> Self {
        Self::default()
    }

    /// Called from another thread or a signal handler. Safe to call many times.
    pub fn cancel(&self) {
        self.cancelling.fetch_add(1, Ordering::SeqCst);
        self.cancelled.store(true, Ordering::SeqCst);
        let fd = self.fd.load(Ordering::SeqCst);
        if fd >= 0 {
            // SAFETY: while `cancelling` is non-zero the watched descriptor cannot be handed to
            // another caller (see `FdGuard::drop`).
            unsafe { libc::shutdown(fd, libc::SHUT_RDWR) };
        }
        let wake = self.wake_fd.load(Ordering::SeqCst);
        if wake >= 0 {
            let one: u64 = 1;
            // SAFETY: writing 8 bytes to our own eventfd, which `drop` closes only after
            // `cancelling` is back to zero.
            unsafe { libc::write(wake, &one as *const u64 as *const libc::c_void, 8) };
        }
        self.cancelling.fetch_sub(1, Ordering::SeqCst);
    }

    pub fn is_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::SeqCst)
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
        self.check()?;
        self.fd.store(fd, Ordering::SeqCst);
        let guard = FdGuard { owner: self };
        // A cancel that ran before the store did not see the fd: notice it here.
        self.check()?;
        Ok(guard)
    }

    /// Sleeps for `dur` unless cancelled first.
    pub fn sleep(&self, dur: Duration) -> Result<()> {
        let deadline = Instant::now() + dur;
        let wake = self.wake_fd()?;
        loop {
            self.check()?;
            let now = Instant::now();
            if now >= deadline {
                return Ok(());
            }
            let left = deadline - now;
            let ts = libc::timespec {
                tv_sec: left.as_secs() as libc::time_t,
                tv_nsec: left.subsec_nanos() as libc::c_long,
            };
            let mut pfd = libc::pollfd {
                fd: wake,
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd and timespec on the stack.
            unsafe { libc::ppoll(&mut pfd, 1, &ts, std::ptr::null()) };
        }
    }

    fn wake_fd(&self) -> Result<RawFd> {
        let fd = self.wake_fd.load(Ordering::SeqCst);
        if fd >= 0 {
            return Ok(fd);
        }
        // SAFETY: plain system call.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if fd < 0 {
            return Err(Error::internal(format!(
                "eventfd failed: {}",
                std::io::Error::last_os_error()
            )));
        }
        self.wake_fd.store(fd, Ordering::SeqCst);
        Ok(fd)
    }
}

impl Drop for Interrupt {
    fn drop(&mut self) {
        let fd = self.wake_fd.swap(-1, Ordering::SeqCst);
        while self.cancelling.load(Ordering::SeqCst) > 0 {
            std::hint::spin_loop();
        }
        if fd >= 0 {
            // SAFETY: our own eventfd, no longer reachable by `cancel`.
            unsafe { libc::close(fd) };
        }
    }
}

pub struct FdGuard<'a> {
    owner: &'a Interrupt,
}

impl Drop for FdGuard<'_> {
    fn drop(&mut self) {
        self.owner.fd.store(-1, Ordering::SeqCst);
        // A cancel that already loaded the fd finishes its shutdown before the connection can
        // be reused by anyone else.
        while self.owner.cancelling.load(Ordering::SeqCst) > 0 {
            std::hint::spin_loop();
        }
    }
}
