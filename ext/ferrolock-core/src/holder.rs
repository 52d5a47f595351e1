//! Who holds a lock, carried in the owner token itself: `<32 hex>~<host>~<pid>~<thread>~<fiber>~
//! <asked at, ms>[~<job class>~<jid>]`. Every primitive already writes its token in its
//! acquisition script, removes it with the release and lets it expire with the lease, so the
//! holder costs no extra command and can never outlive the hold. Fields use only
//! `[A-Za-z0-9_.:-]`; other bytes are percent-encoded (so never `|`, `~`, whitespace, braces or
//! glob characters: waiter entries split `token|deadline`, keys hold tokens) and each field is
//! capped. The binding supplies the caller's thread, fiber and Sidekiq job
//! ([`set_context_source`]); host and pid are this process's.
//!
//! Design notes (moved from doc/ARCHITECTURE.md):
//!
//! **Holder metadata: in the owner token (`src/holder.rs`, `token.rs`)**
//!
//! A token is `<32 hex>~<host>~<pid>~<tid>~<fid>~<asked at, ms>[~<job class>~<jid>]`. Every
//! primitive already writes its token in its acquisition script (lock value, slot member, DualLock
//! stage, marker, waiter entry), deletes it at release and lets it expire with the lease, so the
//! holder costs no extra command, no script change, and can never outlive the hold (a separate
//! `holder` hash would need a write, a TTL and a delete in every script). Fields use only
//! `[A-Za-z0-9_.:-]`, the rest percent-encoded, each capped (host 64, ids 16, class 96, jid 40
//! bytes): never `|` (waiter entries are `token|deadline`), `~`, braces, whitespace or glob
//! characters. host + pid are cached per process (`ForkLocal`: a child gets its own pid); the binding
//! registers `holder::set_context_source` (`ruby_api/admin/holder.rs`), called when the binding makes
//! the token, with the GVL, before the acquisition: `tid`/`fid` are Sidekiq's log `tid`
//! (`(object_id ^ pid).to_s(36)`) of `Thread.current` / `Fiber.current`, and class + jid come from
//! `Thread.current[:sidekiq_context]` (`{class:, jid:}`, set by JobLogger#prepare in Sidekiq 6.4
//! and 7.3; `class` is already the wrapped ActiveJob class). All of it is read with C functions
//! that run no Ruby code (`rb_obj_id`, the fiber-local table, a walk of the context Hash): a Ruby
//! method call runs the interrupt check as it returns, and a Thread#raise let through there could
//! not be passed on from token making (it was lost). Decoding is `holder::decode` only
//! (`Native::Admin.holder`, used by `Admin::Holder.from_token`); a bare or foreign token decodes to
//! nil. "since": a DistMutex's fencing token is max(last + 1, Redis TIME µs), i.e. Redis time of
//! the grant; DualLock stages, slots and markers have no fence, and their scripts (owned by the
//! primitives) were not changed, so "since" is the holder's clock when it asked (a wait included),
//! shown "(asked)". Cost: `bin/bench holder_metadata` ([BENCHMARKS.md](BENCHMARKS.md#dist_mutex)), within noise.

use crate::fork::ForkLocal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;
use std::time::{SystemTime, UNIX_EPOCH};

/// Separates the token's random part and the holder fields.
pub const SEP: char = '~';
const HOST_MAX: usize = 64;
const ID_MAX: usize = 16;
const CLASS_MAX: usize = 96;
const JID_MAX: usize = 40;

/// What the calling runtime knows about the caller (Ruby: thread, fiber, Sidekiq job).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Caller {
    pub thread: String,
    pub fiber: String,
    pub job_class: Option<String>,
    pub jid: Option<String>,
}

/// A holder decoded from a token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Holder {
    pub host: String,
    pub pid: u32,
    pub thread: String,
    pub fiber: String,
    /// The holder's wall clock (ms since the epoch) when it asked for the hold.
    pub asked_ms: u64,
    pub job_class: Option<String>,
    pub jid: Option<String>,
}

static CONTEXT: OnceLock<fn() -> Caller> = OnceLock::new();
static ENABLED: AtomicBool = AtomicBool::new(true);

/// Registers how the caller's thread, fiber and job are found (once; later calls are ignored).
pub fn set_context_source(source: fn() -> Caller) {
    let _ = CONTEXT.set(source);
}

/// Turns the holder suffix off (bare 32-hex tokens). Only for measuring its cost (bin/bench).
pub fn set_enabled(on: bool) {
    ENABLED.store(on, Ordering::Relaxed);
}

pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// `~host~pid` of this process (again after a fork: the child's pid).
fn process_part() -> &'static str {
    static PART: OnceLock<ForkLocal<String>> = OnceLock::new();
    PART.get_or_init(|| {
        ForkLocal::new(|| {
            let mut part = String::with_capacity(48);
            part.push(SEP);
            push_field(&mut part, &hostname(), HOST_MAX);
            part.push(SEP);
            part.push_str(&std::process::id().to_string());
            part
        })
    })
    .get()
}

fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer outlives the call and its length is passed.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return String::new();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

/// The suffix appended to a fresh token ("" when turned off).
pub fn suffix() -> String {
    if !enabled() {
        return String::new();
    }
    let caller = CONTEXT.get().map(|source| source()).unwrap_or_default();
    let asked = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let mut s = String::with_capacity(96);
    s.push_str(process_part());
    s.push(SEP);
    push_field(&mut s, &caller.thread, ID_MAX);
    s.push(SEP);
    push_field(&mut s, &caller.fiber, ID_MAX);
    s.push(SEP);
    s.push_str(&asked.to_string());
    if caller.job_class.is_some() || caller.jid.is_some() {
        s.push(SEP);
        push_field(&mut s, caller.job_class.as_deref().unwrap_or(""), CLASS_MAX);
        s.push(SEP);
        push_field(&mut s, caller.jid.as_deref().unwrap_or(""), JID_MAX);
    }
    s
}

fn plain(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b':' | b'-')
}

/// Appends `value` percent-encoded, at most `max` bytes (an escape is never cut).
fn push_field(out: &mut String, value: &str, max: usize) {
    let mut used = 0;
    for &b in value.as_bytes() {
        let width = if plain(b) { 1 } else { 3 };
        if used + width > max {
            break;
        }
        used += width;
        if plain(b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
}

fn unescape(field: &str) -> Option<String> {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    // A field cut at its cap may end inside a multi-byte character.
    Some(String::from_utf8_lossy(&out).into_owned())
}

fn non_empty(s: String) -> Option<String> {
    (!s.is_empty()).then_some(s)
}

/// The holder a token carries; None for a bare token (or one written by another version).
pub fn decode(token: &str) -> Option<Holder> {
    let mut parts = token.split(SEP);
    let random = parts.next()?;
    if random.len() != 32 || !random.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let fields: Vec<&str> = parts.collect();
    if fields.len() != 5 && fields.len() != 7 {
        return None;
    }
    let text = |i: usize| unescape(fields[i]);
    Some(Holder {
        host: text(0)?,
        pid: fields[1].parse().ok()?,
        thread: text(2)?,
        fiber: text(3)?,
        asked_ms: fields[4].parse().ok()?,
        job_class: fields.get(5).and_then(|f| unescape(f)).and_then(non_empty),
        jid: fields.get(6).and_then(|f| unescape(f)).and_then(non_empty),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEX: &str = "0123456789abcdef0123456789abcdef";

    #[test]
    fn a_token_carries_host_pid_and_time_and_decodes_back() {
        let token = format!("{HEX}{}", suffix());
        let h = decode(&token).expect("holder");
        assert_eq!(h.pid, std::process::id());
        assert_eq!(
            h.host,
            hostname().chars().take(HOST_MAX).collect::<String>()
        );
        assert!(h.asked_ms > 1_700_000_000_000, "{h:?}");
        assert_eq!(h.job_class, None);
    }

    #[test]
    fn fields_are_escaped_capped_and_round_trip() {
        let mut s = String::from(HEX);
        for (v, max) in [
            ("h~o|s t{*}", HOST_MAX),
            ("12", ID_MAX),
            ("t1", ID_MAX),
            ("f1", ID_MAX),
            ("5", ID_MAX),
            ("Billing::Job é", CLASS_MAX),
            ("jid-1", JID_MAX),
        ] {
            s.push(SEP);
            push_field(&mut s, v, max);
        }
        assert!(
            s[33..].bytes().all(|b| plain(b) || b == b'%' || b == b'~'),
            "{s}"
        );
        let h = decode(&s).expect("holder");
        assert_eq!(h.host, "h~o|s t{*}");
        assert_eq!(h.job_class.as_deref(), Some("Billing::Job é"));
        assert_eq!(h.jid.as_deref(), Some("jid-1"));

        let mut long = String::new();
        push_field(&mut long, &"é".repeat(100), CLASS_MAX);
        assert!(long.len() <= CLASS_MAX && long.len() % 3 == 0, "{long}");
    }

    #[test]
    fn bare_and_foreign_tokens_have_no_holder() {
        assert_eq!(decode(HEX), None);
        assert_eq!(decode("processed"), None);
        assert_eq!(decode(&format!("{HEX}~h~notapid~t~f~1")), None);
        assert_eq!(decode(&format!("{HEX}~h~1~t~f~1~C")), None);
    }
}
