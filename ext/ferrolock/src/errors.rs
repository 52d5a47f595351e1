//! Maps core errors to the Ruby classes defined in lib/ferrolock.rb.

use ferrolock_core::Error as CoreError;
use magnus::{prelude::*, Error, ExceptionClass, RModule, Ruby};

/// An exception of `class`, built now. magnus' lazy `Error::new` builds it only while raising,
/// and panics (aborting the process) if that Ruby call is cut by a pending thread kill, e.g. a
/// thread still in a ferrolock call when the process exits. Built here, the kill just goes on.
pub fn new_error(ruby: &Ruby, class: ExceptionClass, msg: &str) -> Error {
    match class.new_instance((ruby.str_new(msg),)) {
        Ok(exception) => Error::from(exception),
        Err(pending) => pending,
    }
}

pub fn ferrolock_error(ruby: &Ruby, class: &str, msg: String) -> Error {
    let class = ruby
        .class_object()
        .const_get::<_, RModule>("Ferrolock")
        .and_then(|m| m.const_get::<_, ExceptionClass>(class))
        .unwrap_or_else(|_| ruby.exception_runtime_error());
    new_error(ruby, class, &msg)
}

/// `Ferrolock::WaitTimeout::Stalled` (a ConnectionError): Ruby's `WaitTimeout` raises the
/// primitive's own timeout error in its place (lib/ferrolock/wait_timeout.rb).
fn stalled(ruby: &Ruby, msg: &str) -> Error {
    let class = ruby
        .class_object()
        .const_get::<_, RModule>("Ferrolock")
        .and_then(|m| m.const_get::<_, RModule>("WaitTimeout"))
        .and_then(|m| m.const_get::<_, ExceptionClass>("Stalled"))
        .unwrap_or_else(|_| ruby.exception_runtime_error());
    new_error(ruby, class, msg)
}

pub fn core_error(ruby: &Ruby, e: CoreError) -> Error {
    let msg = e.to_string();
    match e {
        CoreError::Connection { .. } => ferrolock_error(ruby, "ConnectionError", msg),
        CoreError::Stalled { .. } => stalled(ruby, &msg),
        CoreError::Replication { .. } => ferrolock_error(ruby, "ReplicationError", msg),
        CoreError::Timeout(_) => ferrolock_error(ruby, "TimeoutError", msg),
        CoreError::LockLost(_) => ferrolock_error(ruby, "LockLost", msg),
        CoreError::OverLimit(_) => ferrolock_error(ruby, "OverLimit", msg),
        CoreError::Argument(_) => new_error(ruby, ruby.exception_arg_error(), &msg),
        CoreError::Redis(_) | CoreError::Internal(_) | CoreError::Interrupted => {
            ferrolock_error(ruby, "Error", msg)
        }
    }
}

/// A span from Ruby (TTL, lease, timeout: at least 1 ms, at most 10 years) as a Duration; `arg`
/// names the argument in the ArgumentError.
pub fn seconds(ruby: &Ruby, arg: &str, secs: f64) -> Result<std::time::Duration, Error> {
    ferrolock_core::seconds::span(arg, secs).map_err(|e| core_error(ruby, e))
}

/// A wait from Ruby (zero or more, at most 10 years) as a Duration.
pub fn wait(ruby: &Ruby, arg: &str, secs: f64) -> Result<std::time::Duration, Error> {
    ferrolock_core::seconds::wait(arg, secs).map_err(|e| core_error(ruby, e))
}
