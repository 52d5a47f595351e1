//! Every Ruby-facing native function is registered through one of these adapters, so a Rust
//! panic anywhere in it (not only inside `nogvl::run`) reaches Ruby as a rescuable
//! `Ferrolock::Error "internal error in ferrolock: …"`. Without them magnus turns a panic into
//! Ruby's `fatal`, which no `rescue StandardError` catches and which ends the process.
//!
//!     class.define_method("lock", method!(guard::f2(RbDistMutex::lock), 1))?;
//!
//! `fN` wraps a function taking `&Ruby` and N more arguments (for `method!` the receiver counts
//! as one of them) and returning `Result`; `plain1` and `infallible1` wrap receiver-only methods
//! that return a plain value (without and with `&Ruby`).

use crate::errors::ferrolock_error;
use magnus::{Error, IntoValue, Ruby, Value};
use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// The panic's message, as `panic!` formatted it.
pub fn panic_message(panic: &(dyn Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".to_string())
}

/// Runs `f`, turning a panic into `Ferrolock::Error`.
pub fn guard<R>(ruby: &Ruby, f: impl FnOnce() -> Result<R, Error>) -> Result<R, Error> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(result) => result,
        Err(panic) => Err(ferrolock_error(
            ruby,
            "Error",
            format!("internal error in ferrolock: {}", panic_message(&*panic)),
        )),
    }
}

/// Defines `fN` for each arity: `f(ruby, a, b, …)` run inside `guard`.
macro_rules! adapters {
    ($($name:ident($($arg:ident: $ty:ident),*);)*) => {$(
        // Every arity is defined whether or not an entry point uses it today.
        #[allow(dead_code)]
        pub fn $name<$($ty,)* R>(
            f: impl Fn(&Ruby, $($ty),*) -> Result<R, Error>,
        ) -> impl Fn(&Ruby, $($ty),*) -> Result<R, Error> {
            move |ruby, $($arg),*| guard(ruby, || f(ruby, $($arg),*))
        }
    )*};
}

adapters! {
    f0();
    f1(a: A);
    f2(a: A, b: B);
    f3(a: A, b: B, c: C);
    f4(a: A, b: B, c: C, d: D);
    f5(a: A, b: B, c: C, d: D, e: E);
    f6(a: A, b: B, c: C, d: D, e: E, g: G);
    f7(a: A, b: B, c: C, d: D, e: E, g: G, h: H);
    f8(a: A, b: B, c: C, d: D, e: E, g: G, h: H, i: I);
    f9(a: A, b: B, c: C, d: D, e: E, g: G, h: H, i: I, j: J);
}

/// A receiver-only accessor that takes no `&Ruby` and returns a plain value.
pub fn plain1<S, R>(f: impl Fn(S) -> R) -> impl Fn(&Ruby, S) -> Result<R, Error> {
    move |ruby, rb_self| guard(ruby, || Ok(f(rb_self)))
}

/// A receiver-only method that takes `&Ruby` and cannot fail.
pub fn infallible1<S, R>(f: impl Fn(&Ruby, S) -> R) -> impl Fn(&Ruby, S) -> Result<R, Error> {
    move |ruby, rb_self| guard(ruby, || Ok(f(ruby, rb_self)))
}

/// A variadic method (`method!(…, -1)`): receiver and a slice of arguments.
pub fn variadic<S, R: IntoValue>(
    f: impl Fn(&Ruby, S, &[Value]) -> Result<R, Error>,
) -> impl Fn(&Ruby, S, &[Value]) -> Result<R, Error> {
    move |ruby, rb_self, args| guard(ruby, || f(ruby, rb_self, args))
}
