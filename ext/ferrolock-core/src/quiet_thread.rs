//! The one way ferrolock starts an OS thread (lease watchdog, grant inbox): with every
//! asynchronous signal blocked, so that the host's signal handlers run on the host's threads
//! only. Ruby's handler, run on one of ours, would call a blocked call's unblocking function
//! from a thread Ruby does not synchronise with (see ext/ferrolock/src/unblock.rs), and a trap
//! would wake a Ruby thread later than the signal meant.

use std::io;
use std::thread::JoinHandle;

/// Starts `f` on a new thread named `name` with all signals but the synchronous faults blocked.
/// The mask is set in the spawning thread around `spawn` and inherited, so the new thread never
/// runs a single instruction unmasked; the spawner's own mask is restored at once (a signal that
/// came meanwhile stays pending for it and is delivered then).
pub fn spawn_quiet<F, T>(name: &str, f: F) -> io::Result<JoinHandle<T>>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let quiet = quiet_mask();
    let mut previous = empty_mask();
    // SAFETY: both sets are initialised; pthread_sigmask only reads `quiet` and writes `previous`.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &quiet, &mut previous) };
    let spawned = std::thread::Builder::new().name(name.into()).spawn(f);
    // SAFETY: restores the mask read above.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &previous, std::ptr::null_mut()) };
    spawned
}

/// Every signal except SIGSEGV, SIGBUS, SIGFPE and SIGILL: those are raised by the thread's own
/// faulting instruction, and blocked the kernel would kill the process without the host's crash
/// report.
fn quiet_mask() -> libc::sigset_t {
    let mut set = empty_mask();
    // SAFETY: `set` is a valid sigset_t.
    unsafe {
        libc::sigfillset(&mut set);
        for fault in [libc::SIGSEGV, libc::SIGBUS, libc::SIGFPE, libc::SIGILL] {
            libc::sigdelset(&mut set, fault);
        }
    }
    set
}

fn empty_mask() -> libc::sigset_t {
    // SAFETY: sigset_t is plain data; sigemptyset initialises it.
    unsafe {
        let mut set = std::mem::zeroed::<libc::sigset_t>();
        libc::sigemptyset(&mut set);
        set
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blocked(signal: i32) -> bool {
        let mut now = empty_mask();
        // SAFETY: reads the calling thread's mask into `now`.
        unsafe {
            libc::pthread_sigmask(libc::SIG_BLOCK, std::ptr::null(), &mut now);
            libc::sigismember(&now, signal) == 1
        }
    }

    #[test]
    fn the_new_thread_blocks_signals_and_the_spawner_keeps_its_mask() {
        let before = blocked(libc::SIGUSR2);
        let seen = spawn_quiet("quiet-test", || {
            let name = std::thread::current().name().map(str::to_string);
            (
                blocked(libc::SIGUSR2),
                blocked(libc::SIGINT),
                blocked(libc::SIGSEGV),
                name,
            )
        })
        .unwrap()
        .join()
        .unwrap();
        assert_eq!(seen, (true, true, false, Some("quiet-test".to_string())));
        assert_eq!(blocked(libc::SIGUSR2), before);
    }
}
