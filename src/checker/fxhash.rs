//! The hash maps of the checkers' large per-run tables (one entry per written value or zxid):
//! FxHash (rustc's: a rotate, a xor and a multiply per word, plus a final mix) instead of
//! std's SipHash. On the
//! 5 M-event check bench, SipHash and the table growth it rehashed were a sixth of the CPU time.
//!
//! Histories are the tool's own output, not an adversary's, so SipHash's resistance to crafted
//! collisions buys nothing here; the few lines below beat a dependency.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

pub type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<FxHasher>>;
pub type FastSet<K> = HashSet<K, BuildHasherDefault<FxHasher>>;

/// A map with room for `n` entries (growing one rehashes every entry).
pub fn map_with<K, V>(n: usize) -> FastMap<K, V> {
    FastMap::with_capacity_and_hasher(n, Default::default())
}

#[derive(Default, Clone, Copy)]
pub struct FxHasher {
    hash: u64,
}

const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl FxHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.hash = (self.hash.rotate_left(5) ^ word).wrapping_mul(SEED);
    }
}

impl Hasher for FxHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.add(u64::from_le_bytes(c.try_into().expect("8 bytes")));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut last = [0u8; 8];
            last[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(last) ^ ((rest.len() as u64) << 56));
        }
    }

    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.add(i as u64)
    }

    #[inline]
    fn write_u16(&mut self, i: u16) {
        self.add(i as u64)
    }

    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.add(i as u64)
    }

    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.add(i)
    }

    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64)
    }

    /// A multiply carries each bit only upwards, so the words' last bytes (a value's varying
    /// digits) barely reach the bits the table indexes by; murmur3's finalizer mixes every
    /// bit into every other (plain FxHash spread the bench's values over a fifth of the
    /// buckets, see the test).
    #[inline]
    fn finish(&self) -> u64 {
        let mut x = self.hash;
        x ^= x >> 33;
        x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
        x ^= x >> 33;
        x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        x ^ (x >> 33)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values as the writes workload makes them: all distinct keys land in many buckets.
    #[test]
    fn written_values_spread_over_the_table() {
        use std::hash::BuildHasher;
        let b = BuildHasherDefault::<FxHasher>::default();
        let mask = (1u64 << 12) - 1;
        let buckets: FastSet<u64> = (0..4096u64)
            .map(|i| b.hash_one(format!("\"w{}\"", i + (3 << 20))) & mask)
            .collect();
        assert!(
            buckets.len() > 2000,
            "{} of 4096 buckets used",
            buckets.len()
        );
        let zxids: FastSet<u64> = (0..4096u64)
            .map(|i| b.hash_one((7u64 << 32) | i) & mask)
            .collect();
        assert!(zxids.len() > 2000, "{} of 4096 buckets used", zxids.len());
    }
}
