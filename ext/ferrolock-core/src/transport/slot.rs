//! Redis Cluster hash slots: CRC16 (XMODEM) of the key's hash tag, modulo 16384.
//!
//! The redis crate computes this too (`cluster_routing::Slot::for_key`), but in 1.8 the slot
//! number stays private to the crate (and the `cluster` feature pulls in `rand`), so a slot
//! cannot index our table; this is the algorithm from the Cluster specification, checked against
//! `CLUSTER KEYSLOT` in tests/client/cluster.rs.

pub const SLOTS: usize = 16384;

/// The slot that owns `key`.
pub fn key_slot(key: &[u8]) -> u16 {
    crc16(hash_tag(key).unwrap_or(key)) % SLOTS as u16
}

/// The part between the first `{` and the next `}`, when not empty.
fn hash_tag(key: &[u8]) -> Option<&[u8]> {
    let open = key.iter().position(|&b| b == b'{')?;
    let len = key[open + 1..].iter().position(|&b| b == b'}')?;
    (len > 0).then(|| &key[open + 1..open + 1 + len])
}

/// CRC16-CCITT (XMODEM): polynomial 0x1021, initial value 0.
fn crc16(data: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &byte in data {
        crc ^= (byte as u16) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_slots() {
        // Values from the Cluster specification and `CLUSTER KEYSLOT`.
        assert_eq!(crc16(b"123456789"), 0x31C3);
        assert_eq!(key_slot(b"foo"), 12182);
        assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"user1000"));
        assert_eq!(key_slot(b"foo{}{bar}"), key_slot(b"foo{}{bar}"));
        assert_eq!(key_slot(b"foo{{bar}}zap"), key_slot(b"{bar"));
        assert_eq!(key_slot(b"foo{bar}{zap}"), key_slot(b"bar"));
    }
}
