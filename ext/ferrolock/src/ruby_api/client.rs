//! `Ferrolock::Native::Client`: a pooled, fork-safe Redis client (see lib/ferrolock/client.rb).

use crate::convert::{to_arg, to_ruby};
use crate::errors::{core_error, seconds, wait};
use crate::guard;
use crate::nogvl::{run, Retry};
use ferrolock_core::{Client, ClientOptions};
use magnus::{function, method, prelude::*, Error, RHash, RModule, Ruby, Value};

mod topology;

#[magnus::wrap(class = "Ferrolock::Native::Client", free_immediately, size)]
pub struct RbClient(pub Client);

impl RbClient {
    #[allow(clippy::too_many_arguments)]
    fn new(
        ruby: &Ruby,
        url: String,
        namespace: String,
        connect_timeout: f64,
        read_timeout: f64,
        tls_ca_file: Option<String>,
        reply_spin: f64,
        cluster_or_sentinel: Option<RHash>,
    ) -> Result<Self, Error> {
        let mut opts = ClientOptions::new(&url);
        if let Some(spec) = cluster_or_sentinel {
            topology::apply(ruby, spec, &mut opts)?;
        }
        opts.namespace = namespace;
        opts.connect_timeout = seconds(ruby, "connect_timeout", connect_timeout)?;
        opts.read_timeout = seconds(ruby, "read_timeout", read_timeout)?;
        opts.tls_ca_file = tls_ca_file.map(Into::into);
        opts.reply_spin = wait(ruby, "reply_spin", reply_spin)?;
        // Spinning burns a CPU: Configuration::MAX_REPLY_SPIN (10 ms) bounds it in Ruby too.
        if opts.reply_spin > std::time::Duration::from_millis(10) {
            return Err(Error::new(
                ruby.exception_arg_error(),
                format!("reply_spin: must be between 0 and 0.01 seconds, got {reply_spin}"),
            ));
        }
        Client::new(opts)
            .map(RbClient)
            .map_err(|e| core_error(ruby, e))
    }

    fn call(ruby: &Ruby, rb_self: &Self, args: &[Value]) -> Result<Value, Error> {
        let args = args
            .iter()
            .map(|a| to_arg(ruby, *a))
            .collect::<Result<Vec<_>, _>>()?;
        let reply = run(ruby, retry_for(&args), |intr| {
            rb_self.0.command(intr, &args)
        })?;
        to_ruby(ruby, reply)
    }

    fn ping(ruby: &Ruby, rb_self: &Self) -> Result<Value, Error> {
        let reply = run(ruby, Retry::Idempotent, |intr| {
            rb_self.0.command(intr, &[b"PING".to_vec()])
        })?;
        to_ruby(ruby, reply)
    }

    /// Redis' maxmemory-policy, or nil when not reported; raises when CONFIG is refused.
    fn maxmemory_policy(ruby: &Ruby, rb_self: &Self) -> Result<Option<String>, Error> {
        run(ruby, Retry::Idempotent, |intr| {
            rb_self.0.maxmemory_policy(intr)
        })
    }

    fn namespace(&self) -> String {
        self.0.namespace().to_string()
    }

    fn reply_spin(&self) -> f64 {
        self.0.reply_spin().as_secs_f64()
    }

    /// The URL, or the cluster seeds or sentinels, passwords replaced by ***.
    fn redacted_url(&self) -> String {
        self.0.redacted_url().to_string()
    }

    fn key(ruby: &Ruby, rb_self: &Self, name: String, part: String) -> Result<String, Error> {
        let keys = rb_self.0.keys(&name).map_err(|e| core_error(ruby, e))?;
        Ok(keys.part(&part))
    }
}

/// Commands that only read: sent again after a signal (a trap handler, SIGCHLD, Thread#wakeup)
/// cut them short, since a second read changes nothing. Anything else may have been applied
/// before the cut, so it fails with "interrupted before Redis answered" instead.
const READ_ONLY: &[&[u8]] = &[
    b"PING",
    b"ECHO",
    b"GET",
    b"MGET",
    b"EXISTS",
    b"TTL",
    b"PTTL",
    b"TYPE",
    b"STRLEN",
    b"HGET",
    b"HMGET",
    b"HGETALL",
    b"HLEN",
    b"HEXISTS",
    b"LLEN",
    b"LRANGE",
    b"LINDEX",
    b"SCARD",
    b"SISMEMBER",
    b"SMEMBERS",
    b"ZCARD",
    b"ZCOUNT",
    b"ZSCORE",
    b"ZRANGE",
    b"ZRANGEBYSCORE",
    b"SCAN",
    b"SSCAN",
    b"HSCAN",
    b"ZSCAN",
    b"DBSIZE",
    b"INFO",
    b"TIME",
];

fn retry_for(args: &[Vec<u8>]) -> Retry {
    match args.first() {
        Some(name) if READ_ONLY.iter().any(|r| r.eq_ignore_ascii_case(name)) => Retry::Idempotent,
        _ => Retry::Once,
    }
}

pub fn init(ruby: &Ruby, native: RModule) -> Result<(), Error> {
    let class = native.define_class("Client", ruby.class_object())?;
    class.define_singleton_method("new", function!(guard::f7(RbClient::new), 7))?;
    class.define_method("call", method!(guard::variadic(RbClient::call), -1))?;
    class.define_method("ping", method!(guard::f1(RbClient::ping), 0))?;
    class.define_method("namespace", method!(guard::plain1(RbClient::namespace), 0))?;
    class.define_method(
        "maxmemory_policy",
        method!(guard::f1(RbClient::maxmemory_policy), 0),
    )?;
    class.define_method(
        "redacted_url",
        method!(guard::plain1(RbClient::redacted_url), 0),
    )?;
    class.define_method(
        "reply_spin",
        method!(guard::plain1(RbClient::reply_spin), 0),
    )?;
    class.define_method("key", method!(guard::f3(RbClient::key), 2))?;
    Ok(())
}
