//! The scripts of JobConcurrency and their typed arguments: one struct a script, its fields
//! named as the script's ARGV locals, sent in ARGV order by its `call`.

use super::{fence_ttl, OnConflict, Request, BLOCKED_TTL};
use crate::concurrent_limiter::OverrideAction;
use crate::keys::Keys;
use crate::lua_script;
use crate::script::ScriptCall;
use crate::seconds::millis;

// admit.lua and release.lua both free expired slots and promote blocked jobs (promote.lua), up
// to the limit in force (the operators' override: override_state.lua, a ConcurrentLimiter's too).
lua_script!(ADMIT = "job_concurrency/admit",
    after "job_concurrency/promote", "concurrent_limiter/override_state");
lua_script!(RELEASE = "job_concurrency/release",
    after "job_concurrency/promote", "concurrent_limiter/override_state");
lua_script!(OVERRIDE = "job_concurrency/override", after "concurrent_limiter/override_state");
lua_script!(DUE = "job_concurrency/due");
lua_script!(FORGET = "job_concurrency/forget");

/// admit.lua's arguments are a [`Request`]'s: its fields but `key` (which names the keys) are
/// ARGV[1] to ARGV[7], named as the script's locals; the fencing counter's TTL and the blocked
/// jobs' TTL follow, from the lease and `BLOCKED_TTL`, then the copy's `promotion` (ARGV[10]).
impl Request<'_> {
    pub fn admit_call(&self, keys: &Keys) -> ScriptCall {
        ScriptCall::new(&ADMIT)
            .key(keys.part("slots"))
            .key(keys.part("blocked"))
            .key(keys.part("jobs"))
            .key(keys.part("fence"))
            .key(keys.part("override"))
            .key(keys.part(&format!("started:{}", self.job_id)))
            .arg(self.job_id)
            .arg(self.limit)
            .arg(millis(self.lease))
            .arg(match self.on_conflict {
                OnConflict::Block => "block",
                OnConflict::Discard => "discard",
            })
            .arg(self.payload)
            .arg(self.max_blocked)
            .flag(self.at_perform)
            .arg(millis(fence_ttl(self.lease)))
            .arg(millis(BLOCKED_TTL))
            .arg(self.promotion)
    }
}

/// release.lua's arguments.
pub(super) struct ReleaseArgs<'a> {
    /// The job giving its slot back ("": none, only free expired slots and promote).
    pub job_id: &'a str,
    /// Slots of the key (None: the one stored by the last job blocked).
    pub limit: Option<u32>,
    /// The TTL of the blocked list and the jobs hash (ms).
    pub blocked_ttl_ms: u64,
    /// The promotion of the copy giving its slot back (0: none): nothing is given back when another
    /// promotion's copy started.
    pub promotion: u64,
}

impl ReleaseArgs<'_> {
    pub fn call(&self, keys: &Keys) -> ScriptCall {
        ScriptCall::new(&RELEASE)
            .key(keys.part("slots"))
            .key(keys.part("blocked"))
            .key(keys.part("jobs"))
            .key(keys.part("override"))
            .key(keys.part(&format!("started:{}", self.job_id)))
            .arg(self.job_id)
            .arg(self.limit.map(|l| l.to_string()).unwrap_or_default())
            .arg(self.blocked_ttl_ms)
            .arg(self.promotion)
    }
}

/// override.lua's call: `action` on the key's override (its keys: the override, blocked).
pub(super) fn override_call(keys: &Keys, action: OverrideAction) -> ScriptCall {
    action.args(
        ScriptCall::new(&OVERRIDE)
            .key(keys.part("override"))
            .key(keys.part("blocked")),
    )
}

/// due.lua's arguments.
pub(super) struct DueArgs {
    /// How long a claimed key's entry is put off (ms).
    pub recheck_ms: u64,
    /// Keys one visit claims at most.
    pub max_keys: u32,
    /// The index's TTL (ms).
    pub index_ttl_ms: u64,
}

impl DueArgs {
    pub fn call(&self, due_key: &str) -> ScriptCall {
        ScriptCall::new(&DUE)
            .key(due_key)
            .arg(self.recheck_ms)
            .arg(self.max_keys)
            .arg(self.index_ttl_ms)
    }
}

/// forget.lua's arguments.
pub(super) struct ForgetArgs<'a> {
    /// The key (its name in the index).
    pub name: &'a str,
    /// The visit's claim: the entry goes only if nothing moved it since.
    pub claim: i64,
}

impl ForgetArgs<'_> {
    pub fn call(&self, due_key: &str) -> ScriptCall {
        ScriptCall::new(&FORGET)
            .key(due_key)
            .arg(self.name)
            .arg(self.claim)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn admit_and_release_each_carry_the_shared_promote_function_once() {
        let shared = concat!(
            include_str!("../../lua/job_concurrency/promote.lua"),
            include_str!("../../lua/concurrent_limiter/override_state.lua")
        );
        for (script, own) in [
            (
                &super::ADMIT,
                include_str!("../../lua/job_concurrency/admit.lua"),
            ),
            (
                &super::RELEASE,
                include_str!("../../lua/job_concurrency/release.lua"),
            ),
        ] {
            assert_eq!(script.source, format!("{shared}{own}"), "{}", script.name);
            assert_eq!(script.source.matches("local function promote(").count(), 1);
            assert_eq!(
                script
                    .source
                    .matches("local function limit_in_force(")
                    .count(),
                1
            );
        }
    }
}
