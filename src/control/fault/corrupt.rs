//! File corruption (the `corrupt` fault): a seeded, exactly described damage to a stopped node's
//! data file. Pure (bytes in, bytes out) so the rule is unit-tested; the target reads and writes
//! the file through its `Control`, wherever the node runs.

use serde::{Deserialize, Serialize};

/// What was done to a file, for the history: which file, which damage, where, how many bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Damage {
    pub file: String,
    /// "flip-bits" (each byte of the range XOR 0xFF... one bit per byte), "zero-block", or
    /// "truncate" (the file cut at `offset`; `length` bytes removed).
    pub op: String,
    pub offset: u64,
    pub length: u64,
    /// The file's size before.
    pub size: u64,
}

fn mix(seed: u64, salt: u64) -> u64 {
    let mut z = seed ^ salt.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Damages `bytes` (the file `file`) as `seed` says. The first 8 bytes (the file's magic) are
/// left alone unless the file is that short, so the damage hits records, not the header alone.
pub fn damage(file: &str, bytes: &mut Vec<u8>, seed: u64) -> Damage {
    let size = bytes.len() as u64;
    let from = if size > 16 { 8 } else { 0 };
    let span = size.saturating_sub(from).max(1);
    let offset = (from + mix(seed, 1) % span).min(size);
    let (op, length) = match mix(seed, 2) % 3 {
        0 => {
            let len = (1 + mix(seed, 3) % 4).min(size - offset);
            for (k, b) in bytes[offset as usize..(offset + len) as usize]
                .iter_mut()
                .enumerate()
            {
                *b ^= 1 << (mix(seed, 10 + k as u64) % 8);
            }
            ("flip-bits", len)
        }
        1 => {
            let len = (512u64).min(size - offset);
            bytes[offset as usize..(offset + len) as usize].fill(0);
            ("zero-block", len)
        }
        _ => {
            bytes.truncate(offset as usize);
            ("truncate", size - offset)
        }
    };
    Damage {
        file: file.to_string(),
        op: op.to_string(),
        offset,
        length,
        size,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn damage_is_seeded_exact_and_changes_the_file() {
        let orig: Vec<u8> = (0..2000u32).map(|i| (i % 251) as u8).collect();
        let mut ops = std::collections::HashSet::new();
        for seed in 0..60 {
            let mut a = orig.clone();
            let mut b = orig.clone();
            let d = damage("txnlog", &mut a, seed);
            assert_eq!(d, damage("txnlog", &mut b, seed), "seeded");
            assert_eq!(a, b);
            assert_ne!(a, orig, "{d:?} changed nothing");
            assert!(d.offset >= 8 && d.offset + d.length <= d.size, "{d:?}");
            match d.op.as_str() {
                "truncate" => assert_eq!(a.len() as u64, d.offset),
                _ => {
                    assert_eq!(a.len(), orig.len());
                    let changed: Vec<usize> = (0..a.len()).filter(|&i| a[i] != orig[i]).collect();
                    assert!(changed
                        .iter()
                        .all(|&i| { (i as u64) >= d.offset && (i as u64) < d.offset + d.length }));
                }
            }
            ops.insert(d.op);
        }
        assert_eq!(ops.len(), 3, "all three damages occur: {ops:?}");
    }
}
