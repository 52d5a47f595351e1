//! Key naming: `<namespace>:{<name>}:<part>`. The braces are a Redis Cluster hash tag, so every
//! key of one primitive instance lives in one slot and multi-key scripts never cross slots.

use crate::error::{Error, Result};

#[derive(Clone, Debug)]
pub struct Keys {
    prefix: String,
}

impl Keys {
    pub fn new(namespace: &str, name: &str) -> Result<Keys> {
        check_name("name", name)?;
        Ok(Keys {
            prefix: format!("{namespace}:{{{name}}}:"),
        })
    }

    pub fn part(&self, part: &str) -> String {
        format!("{}{}", self.prefix, part)
    }
}

/// A name must be non-empty and free of braces (which would break the hash tag).
pub fn check_name(arg: &str, name: &str) -> Result<()> {
    if name.is_empty() {
        return Err(Error::argument(format!("{arg}: must not be empty")));
    }
    if name.contains(['{', '}']) {
        return Err(Error::argument(format!(
            "{arg}: must not contain '{{' or '}}' (got {name:?})"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_hash_tagged_keys() {
        let k = Keys::new("ferrolock", "crawl:example.com").unwrap();
        assert_eq!(k.part("lock"), "ferrolock:{crawl:example.com}:lock");
        assert!(Keys::new("ns", "").is_err());
        assert!(Keys::new("ns", "a{b").is_err());
    }
}
