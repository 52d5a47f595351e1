//! The Ruby side of holder metadata (ferrolock-core's holder.rs): who is asking, read from the
//! calling Ruby thread when a token is made (before any GVL release), and
//! `Native::Admin.holder(token)`, the one decoder the Admin read model uses.

use ferrolock_core::holder;
use ferrolock_core::Caller;
use magnus::r_hash::ForEach;
use magnus::rb_sys::{AsRawValue, FromRawValue};
use magnus::{value::ReprValue, Error, Integer, RHash, RString, Ruby, Symbol, Value};

// Everything below runs when a lock token is made, on the caller's thread with the GVL, and
// calls only C functions of Ruby that run no Ruby code and check no interrupts: a Ruby method
// call (`funcall`) checks for pending interrupts when it returns, so a Thread#raise or
// Timeout pending there would be raised into this code, which has nowhere to pass it on
// (the token is made by an infallible core call): it would be lost.

/// `(object_id ^ pid).to_s(36)`: the `tid=` of Sidekiq's log lines, so a holder can be found
/// in the worker's log. `rb_obj_id` is Kernel#object_id's C function (never an override).
fn ruby_id(value: Value) -> String {
    // SAFETY: `value` is a live object of the calling Ruby thread, which holds the GVL.
    let id = unsafe { Value::from_raw(rb_sys::rb_obj_id(value.as_raw())) };
    let id = Integer::from_value(id)
        .and_then(|i| i.to_u64().ok())
        .unwrap_or(0);
    base36(id ^ u64::from(ferrolock_core::fork::pid()))
}

fn base36(mut n: u64) -> String {
    const DIGITS: &[u8; 36] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut out = Vec::with_capacity(13);
    loop {
        out.push(DIGITS[(n % 36) as usize]);
        n /= 36;
        if n == 0 {
            break;
        }
    }
    out.reverse();
    String::from_utf8(out).unwrap_or_default()
}

const TEXT_MAX: usize = 128;

/// A String's or Symbol's text (anything else, e.g. nil: none), read without calling `to_s`.
fn text_of(value: Value) -> Option<String> {
    let string = match Symbol::from_value(value) {
        // SAFETY: a Symbol's name, as Symbol#name reads it; the GVL is held.
        Some(sym) => {
            RString::from_value(unsafe { Value::from_raw(rb_sys::rb_sym2str(sym.as_raw())) })?
        }
        None => RString::from_value(value)?,
    };
    // SAFETY: the bytes are copied at once, before any Ruby code could change the String.
    let bytes = unsafe { string.as_slice() };
    // Fields are capped at fewer bytes than this (holder.rs), so a huge String is not copied.
    Some(String::from_utf8_lossy(&bytes[..bytes.len().min(TEXT_MAX)]).into_owned())
}

/// Sidekiq (6.4 and 7.3) keeps the running job's `{class:, jid:}` (Strings) in the
/// fiber-local `Thread.current[:sidekiq_context]` while the job runs (JobLogger#prepare). The
/// Hash is walked, keys compared by identity: a lookup would call a colliding key's `eql?`.
fn sidekiq_job(ruby: &Ruby, thread: magnus::Thread) -> (Option<String>, Option<String>) {
    let Ok(context) = thread.local_aref::<_, Value>("sidekiq_context") else {
        return (None, None);
    };
    let Some(context) = RHash::from_value(context) else {
        return (None, None);
    };
    let (class_key, jid_key) = (
        ruby.to_symbol("class").as_raw(),
        ruby.to_symbol("jid").as_raw(),
    );
    let (mut class, mut jid) = (None, None);
    let _ = context.foreach(|key: Value, value: Value| {
        if key.as_raw() == class_key {
            class = text_of(value);
        } else if key.as_raw() == jid_key {
            jid = text_of(value);
        }
        Ok(ForEach::Continue)
    });
    (class, jid)
}

/// The calling Ruby thread, fiber and Sidekiq job; empty off a Ruby thread.
fn caller() -> Caller {
    let Ok(ruby) = Ruby::get() else {
        return Caller::default();
    };
    let thread = ruby.thread_current();
    let (job_class, jid) = sidekiq_job(&ruby, thread);
    Caller {
        thread: ruby_id(thread.as_value()),
        fiber: ruby_id(ruby.fiber_current().as_value()),
        job_class,
        jid,
    }
}

pub fn register() {
    holder::set_context_source(caller);
}

/// [host, pid, thread, fiber, asked_at_ms, job_class, jid], or nil for a token without a holder.
#[allow(clippy::type_complexity)]
pub fn decode(
    _ruby: &Ruby,
    token: String,
) -> Result<
    Option<(
        String,
        u32,
        String,
        String,
        u64,
        Option<String>,
        Option<String>,
    )>,
    Error,
> {
    Ok(holder::decode(&token).map(|h| {
        (
            h.host,
            h.pid,
            h.thread,
            h.fiber,
            h.asked_ms,
            h.job_class,
            h.jid,
        )
    }))
}

/// Bench only: tokens without (false) or with (true) the holder suffix.
pub fn set_enabled(_ruby: &Ruby, on: bool) -> Result<bool, Error> {
    holder::set_enabled(on);
    Ok(on)
}
