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
    error_at(ruby, &[class], &msg)
}

/// An exception of the class at `path` under `Ferrolock` (["Native", "Interrupted"] is
/// `Ferrolock::Native::Interrupted`); a RuntimeError if Ruby has no such class.
pub fn error_at(ruby: &Ruby, path: &[&str], msg: &str) -> Error {
    let (last, modules) = path.split_last().expect("a class path names a class");
    let mut module = ruby.class_object().const_get::<_, RModule>("Ferrolock");
    for name in modules {
        module = module.and_then(|m| m.const_get::<_, RModule>(*name));
    }
    let class = module
        .and_then(|m| m.const_get::<_, ExceptionClass>(*last))
        .unwrap_or_else(|_| ruby.exception_runtime_error());
    new_error(ruby, class, msg)
}

pub fn core_error(ruby: &Ruby, e: CoreError) -> Error {
    let msg = e.to_string();
    match e {
        CoreError::Connection { .. } => ferrolock_error(ruby, "ConnectionError", msg),
        // A ConnectionError: Ruby's `WaitTimeout` raises the primitive's own timeout error in
        // its place (lib/ferrolock/wait_timeout.rb).
        CoreError::Stalled { .. } => error_at(ruby, &["WaitTimeout", "Stalled"], &msg),
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
