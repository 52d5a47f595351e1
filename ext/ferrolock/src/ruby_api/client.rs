//! `Ferrolock::Native::Client`: a pooled, fork-safe Redis client (see lib/ferrolock/client.rb).

use crate::convert::{to_arg, to_ruby};
use crate::errors::{core_error, seconds};
use crate::nogvl::{run, Retry};
use ferrolock_core::{Client, ClientOptions};
use magnus::{function, method, prelude::*, Error, RModule, Ruby, Value};

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
    ) -> Result<Self, Error> {
        let mut opts = ClientOptions::new(&url);
        opts.namespace = namespace;
        opts.connect_timeout = seconds(ruby, "connect_timeout", connect_timeout)?;
        opts.read_timeout = seconds(ruby, "read_timeout", read_timeout)?;
        opts.tls_ca_file = tls_ca_file.map(Into::into);
        opts.reply_spin = match reply_spin {
            0.0 => std::time::Duration::ZERO,
            secs => seconds(ruby, "reply_spin", secs)?,
        };
        Client::new(opts)
            .map(RbClient)
            .map_err(|e| core_error(ruby, e))
    }

    fn call(ruby: &Ruby, rb_self: &Self, args: &[Value]) -> Result<Value, Error> {
        let args = args
            .iter()
            .map(|a| to_arg(ruby, *a))
            .collect::<Result<Vec<_>, _>>()?;
        let reply = run(ruby, Retry::Once, |intr| rb_self.0.command(intr, &args))?;
        to_ruby(ruby, reply)
    }

    fn ping(ruby: &Ruby, rb_self: &Self) -> Result<Value, Error> {
        let reply = run(ruby, Retry::Idempotent, |intr| {
            rb_self.0.command(intr, &[b"PING".to_vec()])
        })?;
        to_ruby(ruby, reply)
    }

    fn namespace(&self) -> String {
        self.0.namespace().to_string()
    }

    fn reply_spin(&self) -> f64 {
        self.0.reply_spin().as_secs_f64()
    }

    fn redacted_url(&self) -> String {
        self.0.redacted_url().to_string()
    }

    fn key(ruby: &Ruby, rb_self: &Self, name: String, part: String) -> Result<String, Error> {
        let keys = rb_self.0.keys(&name).map_err(|e| core_error(ruby, e))?;
        Ok(keys.part(&part))
    }
}

pub fn init(ruby: &Ruby, native: RModule) -> Result<(), Error> {
    let class = native.define_class("Client", ruby.class_object())?;
    class.define_singleton_method("new", function!(RbClient::new, 6))?;
    class.define_method("call", method!(RbClient::call, -1))?;
    class.define_method("ping", method!(RbClient::ping, 0))?;
    class.define_method("namespace", method!(RbClient::namespace, 0))?;
    class.define_method("redacted_url", method!(RbClient::redacted_url, 0))?;
    class.define_method("reply_spin", method!(RbClient::reply_spin, 0))?;
    class.define_method("key", method!(RbClient::key, 2))?;
    Ok(())
}
