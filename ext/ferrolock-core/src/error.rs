//! One error type for the whole core. The binding maps each variant to a Ruby class.

use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// Redis could not be reached or did not answer in time. `addr` is `host:port` (or the socket
    /// path); it never carries a password.
    Connection { addr: String, detail: String },
    /// Redis did not answer before the caller's wait_timeout ran out: a read or connect cut at
    /// the deadline (`wait_timeout::until`). Shown as `Connection`; the binding raises the
    /// primitive's own timeout error with it as the cause.
    Stalled { addr: String, detail: String },
    /// A wait passed its deadline.
    Timeout(String),
    /// A held lease was found gone or owned by another token.
    LockLost(String),
    /// No slot of a limiter freed within the wait timeout.
    OverLimit(String),
    /// Bad input from the caller; the message names the argument.
    Argument(String),
    /// Redis answered with an error reply (or something we could not understand).
    Redis(String),
    /// Not Redis' doing: an invariant of the core broke (a bug), or the system refused something
    /// the core needs (a thread, an eventfd). Kept apart from `Redis` so nobody goes looking
    /// at the server for it.
    Internal(String),
    /// The blocking call was cancelled by the host runtime (Thread#kill, Thread#raise, Timeout).
    Interrupted,
    /// A grant reached fewer replicas than `min_replicas_acked` asked for (WAIT); it was released.
    Replication {
        addr: String,
        wanted: u32,
        acked: i64,
    },
}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub fn connection(addr: &str, detail: impl fmt::Display) -> Self {
        Error::Connection {
            addr: addr.to_string(),
            detail: detail.to_string(),
        }
    }

    pub fn argument(msg: impl Into<String>) -> Self {
        Error::Argument(msg.into())
    }

    pub fn internal(msg: impl fmt::Display) -> Self {
        Error::Internal(msg.to_string())
    }

    /// True when the failure says nothing about the lock state and the connection should be
    /// dropped rather than reused.
    pub fn is_io(&self) -> bool {
        matches!(
            self,
            Error::Connection { .. } | Error::Stalled { .. } | Error::Interrupted
        )
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Connection { addr, detail } | Error::Stalled { addr, detail } => {
                write!(f, "cannot reach Redis at {addr}: {detail}")
            }
            Error::Timeout(m)
            | Error::LockLost(m)
            | Error::OverLimit(m)
            | Error::Argument(m)
            | Error::Redis(m)
            | Error::Internal(m) => f.write_str(m),
            Error::Interrupted => f.write_str("interrupted"),
            Error::Replication {
                addr,
                wanted,
                acked,
            } => write!(
                f,
                "min_replicas_acked: only {acked} of {wanted} replica(s) of {addr} acknowledged \
                 the grant in time; it was released"
            ),
        }
    }
}

impl std::error::Error for Error {}
