//! One `poll(2)` of a socket, shared by the connection (is a reply or a hang-up pending?) and
//! the reply spin (has the reply arrived yet?). Its own module so that neither of those two
//! imports the other for it.

use std::io;
use std::os::fd::RawFd;

/// One `poll(2)` of `fd` for `events`: true when any event (or an error condition) is pending
/// within `timeout_ms` (0: just look).
pub(crate) fn poll_fd(fd: RawFd, events: libc::c_short, timeout_ms: i32) -> io::Result<bool> {
    let mut pfd = libc::pollfd {
        fd,
        events,
        revents: 0,
    };
    // SAFETY: one valid pollfd on the stack.
    match unsafe { libc::poll(&mut pfd, 1, timeout_ms) } {
        n if n < 0 => Err(io::Error::last_os_error()),
        n => Ok(n > 0),
    }
}
