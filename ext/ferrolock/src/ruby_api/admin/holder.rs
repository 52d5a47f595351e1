//! The Ruby side of holder metadata (ferrolock-core's holder.rs): who is asking, read from the
//! calling Ruby thread when a token is made (before any GVL release), and
//! `Native::Admin.holder(token)`, the one decoder the Admin read model uses.

use ferrolock_core::holder::{self, Caller};
use magnus::{value::ReprValue, Error, RHash, Ruby, Value};

/// `(object_id ^ pid).to_s(36)`: the `tid=` of Sidekiq's log lines, so a holder can be found
/// in the worker's log.
fn ruby_id(value: Value) -> String {
    let id: u64 = value.funcall("object_id", ()).unwrap_or(0);
    base36(id ^ u64::from(std::process::id()))
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

/// Sidekiq (6.4 and 7.3) keeps the running job's `{class:, jid:}` in the fiber-local
/// `Thread.current[:sidekiq_context]` while the job runs (JobLogger#prepare).
fn sidekiq_job(ruby: &Ruby, thread: magnus::Thread) -> (Option<String>, Option<String>) {
    let Ok(Some(context)) = thread.local_aref::<_, Option<RHash>>("sidekiq_context") else {
        return (None, None);
    };
    let field = |key: &str| {
        let value = context.get(ruby.to_symbol(key))?;
        if value.is_nil() {
            return None;
        }
        value.funcall::<_, _, String>("to_s", ()).ok()
    };
    (field("class"), field("jid"))
}

/// The calling Ruby thread, fiber and Sidekiq job; empty off a Ruby thread or without the GVL.
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
