//! Maps core errors to the Ruby classes defined in lib/ferrolock/errors.rb.

use ferrolock_core::Error as CoreError;
use magnus::{prelude::*, Error, ExceptionClass, RModule, Ruby};

pub fn ferrolock_error(ruby: &Ruby, class: &str, msg: String) -> Error {
    let class = ruby
        .class_object()
        .const_get::<_, RModule>("Ferrolock")
        .and_then(|m| m.const_get::<_, ExceptionClass>(class))
        .unwrap_or_else(|_| ruby.exception_runtime_error());
    Error::new(class, msg)
}

pub fn core_error(ruby: &Ruby, e: CoreError) -> Error {
    let msg = e.to_string();
    match e {
        CoreError::Connection { .. } => ferrolock_error(ruby, "ConnectionError", msg),
        CoreError::Timeout(_) => ferrolock_error(ruby, "TimeoutError", msg),
        CoreError::LockLost(_) => ferrolock_error(ruby, "LockLost", msg),
        CoreError::OverLimit(_) => ferrolock_error(ruby, "OverLimit", msg),
        CoreError::Argument(_) => Error::new(ruby.exception_arg_error(), msg),
        CoreError::Redis(_) | CoreError::Interrupted => ferrolock_error(ruby, "Error", msg),
    }
}

/// Seconds from Ruby as a Duration; `arg` names the argument in the error.
pub fn seconds(ruby: &Ruby, arg: &str, secs: f64) -> Result<std::time::Duration, Error> {
    if !secs.is_finite() || secs <= 0.0 {
        return Err(Error::new(
            ruby.exception_arg_error(),
            format!("{arg}: must be a positive number of seconds, got {secs}"),
        ));
    }
    Ok(std::time::Duration::from_secs_f64(secs))
}

/// A wait limit from Ruby (`nil` = wait as long as needed, `0` = don't wait) as a deadline.
pub fn deadline(
    ruby: &Ruby,
    arg: &str,
    secs: Option<f64>,
) -> Result<Option<std::time::Instant>, Error> {
    let now = std::time::Instant::now();
    match secs {
        None => Ok(None),
        Some(0.0) => Ok(Some(now)),
        Some(s) => Ok(Some(now + seconds(ruby, arg, s)?)),
    }
}
