//! Owner tokens: a random uuid v4 per acquisition, followed by who asked (`holder.rs`). The random bits come from a generator seeded
//! from the OS once per process (and again in every forked child, so a child never repeats its
//! parent's tokens), which saves a `getrandom` system call on every lock.

use crate::fork::generation;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

struct Seed {
    generation: u64,
    key: [u64; 2],
}

static SEED: Mutex<Option<Seed>> = Mutex::new(None);
static COUNTER: AtomicU64 = AtomicU64::new(0);

fn splitmix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn key() -> [u64; 2] {
    let gen = generation();
    let mut seed = SEED.lock().unwrap_or_else(|e| e.into_inner());
    match &*seed {
        Some(s) if s.generation == gen => s.key,
        _ => {
            let bytes = *uuid::Uuid::new_v4().as_bytes();
            let key = [
                u64::from_le_bytes(bytes[..8].try_into().expect("8 bytes")),
                u64::from_le_bytes(bytes[8..].try_into().expect("8 bytes")),
            ];
            *seed = Some(Seed {
                generation: gen,
                key,
            });
            key
        }
    }
}

/// A fresh owner token: 32 hex digits of a uuid v4, then the holder (see holder.rs).
pub fn new_token() -> String {
    let mut token = random_hex();
    token.push_str(&crate::holder::suffix());
    token
}

/// A fresh owner token whose random part says "no fencing token" (a DistMutex made with
/// `fencing: false`): a uuid v8 (RFC 9562's custom version) in place of the v4, so Admin's read
/// does not take the fencing counter's last value for its hold's token. Every reader of a token
/// compares it byte for byte, or decodes only the holder after it.
pub(crate) fn new_unfenced_token() -> String {
    let mut token = new_token();
    token.replace_range(VERSION_AT..=VERSION_AT, "8");
    token
}

/// False for a token marked by `new_unfenced_token`.
pub(crate) fn is_fenced(token: &str) -> bool {
    token.as_bytes().get(VERSION_AT) != Some(&b'8')
}

/// Where a uuid's version digit stands in its 32 hex digits.
const VERSION_AT: usize = 12;

/// 32 hex digits of a uuid v4 (also a rate limiter call's id).
pub(crate) fn random_hex() -> String {
    let [a, b] = key();
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let hi = splitmix(a ^ n);
    let lo = splitmix(b ^ hi ^ n.rotate_left(32));
    let mut bytes = [0u8; 16];
    bytes[..8].copy_from_slice(&hi.to_le_bytes());
    bytes[8..].copy_from_slice(&lo.to_le_bytes());
    uuid::Builder::from_random_bytes(bytes)
        .into_uuid()
        .simple()
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn an_unfenced_token_is_a_v8_uuid_with_the_same_holder() {
        let token = new_unfenced_token();
        let u = uuid::Uuid::parse_str(&token[..32]).unwrap();
        assert_eq!(u.get_version_num(), 8);
        assert!(!is_fenced(&token));
        assert!(is_fenced(&new_token()));
        assert!(crate::holder::decode(&token).is_some());
    }

    #[test]
    fn tokens_are_distinct_v4_uuids() {
        let tokens: HashSet<String> = (0..10_000).map(|_| random_hex()).collect();
        assert_eq!(tokens.len(), 10_000);
        let t = tokens.iter().next().unwrap();
        let u = uuid::Uuid::parse_str(t).unwrap();
        assert_eq!(u.get_version_num(), 4);
    }

    #[test]
    fn tokens_carry_their_holder() {
        let t = new_token();
        assert!(crate::holder::decode(&t).is_some(), "{t}");
        assert!(!t.contains(['|', '{', '}', ' ', '*']), "{t}");
    }
}
