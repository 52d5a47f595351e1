//! Lua scripts, one file per operation, run by EVALSHA with a fallback to EVAL when Redis
//! answers NOSCRIPT (after SCRIPT FLUSH, a restart or a failover).

use redis::ToRedisArgs;
use std::sync::OnceLock;

pub struct Script {
    pub name: &'static str,
    pub source: &'static str,
    sha: OnceLock<String>,
}

impl Script {
    pub const fn new(name: &'static str, source: &'static str) -> Script {
        Script {
            name,
            source,
            sha: OnceLock::new(),
        }
    }

    pub fn sha(&self) -> &str {
        self.sha
            .get_or_init(|| sha1_smol::Sha1::from(self.source).digest().to_string())
    }
}

/// Declares a `static` [`Script`] from `lua/<path>.lua`. With `after "<shared>", ...` the
/// shared files (`lua/<shared>.lua`, defining local functions) come first: Lua scripts cannot
/// `require`, so the source sent to Redis (and so its SHA) is still one self-contained string,
/// joined at compile time.
#[macro_export]
macro_rules! lua_script {
    ($vis:vis $ident:ident = $path:literal) => {
        $crate::lua_script!($vis $ident = $path, after);
    };
    ($vis:vis $ident:ident = $path:literal, after $($shared:literal),*) => {
        $vis static $ident: $crate::script::Script = $crate::script::Script::new(
            $path,
            concat!(
                $(include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/lua/", $shared, ".lua")),)*
                include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/lua/", $path, ".lua"))
            ),
        );
    };
}

/// One invocation of a script: its keys (all of one hash tag) and arguments.
#[derive(Clone)]
pub struct ScriptCall {
    pub script: &'static Script,
    keys: Vec<String>,
    args: Vec<Vec<u8>>,
}

impl ScriptCall {
    pub fn new(script: &'static Script) -> Self {
        ScriptCall {
            script,
            keys: Vec::new(),
            args: Vec::new(),
        }
    }

    pub fn key(mut self, key: impl Into<String>) -> Self {
        self.keys.push(key.into());
        self
    }

    pub fn arg(mut self, arg: impl ToRedisArgs) -> Self {
        self.args.extend(arg.to_redis_args());
        self
    }

    /// A flag argument: "1" or "0".
    pub fn flag(self, on: bool) -> Self {
        self.arg(if on { "1" } else { "0" })
    }

    /// The key that routes this call in a cluster (all its keys share one hash tag).
    pub fn first_key(&self) -> &[u8] {
        self.keys.first().map_or(&[], |k| k.as_bytes())
    }

    /// Appends the EVALSHA (or EVAL) command to `buf`.
    pub fn pack_into(&self, buf: &mut Vec<u8>, by_sha: bool) {
        let mut cmd = if by_sha {
            redis::cmd("EVALSHA")
        } else {
            redis::cmd("EVAL")
        };
        if by_sha {
            cmd.arg(self.script.sha());
        } else {
            cmd.arg(self.script.source);
        }
        cmd.arg(self.keys.len()).arg(&self.keys);
        for a in &self.args {
            cmd.arg(a.as_slice());
        }
        cmd.write_packed_command(buf);
    }
}
