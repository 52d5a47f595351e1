//! `Ferrolock::Native::FairTenantRules` (a job class's checked rules, built once) and
//! `Ferrolock::Native::FairTenant.check` (one enqueue, one round trip). The middleware around
//! them is lib/ferrolock/sidekiq/fair_tenant_middleware.rb.

use crate::errors::{core_error, seconds};
use crate::guard;
use crate::nogvl::{run, Retry};
use crate::ruby_api::client::RbClient;
use ferrolock_core::fair_tenant::{check, tag_name};
use ferrolock_core::{Enqueue, Mode, Rule, Rules};
use magnus::{function, method, prelude::*, Error, RModule, Ruby};

#[magnus::wrap(class = "Ferrolock::Native::FairTenantRules", free_immediately, size)]
pub struct RbRules(Rules);

impl RbRules {
    fn new(ruby: &Ruby, thresholds: Vec<u64>, pers: Vec<f64>) -> Result<Self, Error> {
        if thresholds.len() != pers.len() {
            return Err(Error::new(
                ruby.exception_arg_error(),
                "thresholds and pers must have the same length",
            ));
        }
        let rules = thresholds
            .iter()
            .zip(&pers)
            .enumerate()
            .map(|(i, (threshold, per))| {
                Ok(Rule {
                    threshold: *threshold,
                    per: seconds(ruby, &format!("fair_tenant_queues[{i}].per"), *per)?,
                })
            })
            .collect::<Result<Vec<_>, Error>>()?;
        Rules::new(&rules)
            .map(RbRules)
            .map_err(|e| core_error(ruby, e))
    }

    fn size(&self) -> usize {
        self.0.len()
    }
}

#[allow(clippy::too_many_arguments)]
fn check_enqueue(
    ruby: &Ruby,
    client: &RbClient,
    rules: &RbRules,
    job_class: String,
    tenant: String,
    jid: String,
    mode: String,
    record: bool,
) -> Result<usize, Error> {
    let mode = Mode::parse(&mode).map_err(|e| core_error(ruby, e))?;
    let enqueue = Enqueue {
        job_class: &job_class,
        tenant: &tenant,
        jid: &jid,
        mode,
        record,
    };
    // Once: a bounded-mode record is not idempotent, so an interrupted call is not repeated.
    run(ruby, Retry::Once, |intr| {
        check(&client.0, intr, &rules.0, &enqueue)
    })
}

/// The hash-tag name used for a (job class, tenant), for tools and specs that inspect Redis.
fn tag(ruby: &Ruby, job_class: String, tenant: String) -> Result<String, Error> {
    tag_name(&job_class, &tenant).map_err(|e| core_error(ruby, e))
}

pub fn init(ruby: &Ruby, native: RModule) -> Result<(), Error> {
    let rules = native.define_class("FairTenantRules", ruby.class_object())?;
    rules.define_singleton_method("new", function!(guard::f2(RbRules::new), 2))?;
    rules.define_method("size", method!(guard::plain1(RbRules::size), 0))?;
    let module = native.define_module("FairTenant")?;
    module.define_singleton_method("check", function!(guard::f7(check_enqueue), 7))?;
    module.define_singleton_method("tag", function!(guard::f2(tag), 2))?;
    Ok(())
}
