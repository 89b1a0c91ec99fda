//! A fixed, seedless hasher for the scheduler's id-keyed maps.
//!
//! `std`'s default `RandomState` seeds itself from the OS's entropy, which this crate
//! does not touch, and it is slower than needed for `u64` ids. [`IdHasher`] is the
//! Fx-style multiply-rotate hash: deterministic (the same events give the same iteration
//! order on every run), fast, and not DoS-resistant, which is fine for ids the
//! coordinator itself allocates. Nothing public depends on these maps' iteration order.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

/// Fx-style hasher (as in rustc's `FxHasher`), deterministic across runs.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct IdHasher {
    hash: u64,
}

const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl IdHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.hash = (self.hash.rotate_left(5) ^ word).wrapping_mul(SEED);
    }
}

impl Hasher for IdHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.add(u64::from_le_bytes(word));
        }
    }

    #[inline]
    fn write_u64(&mut self, n: u64) {
        self.add(n);
    }

    #[inline]
    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }

    #[inline]
    fn finish(&self) -> u64 {
        self.hash
    }
}

/// A `HashMap` with [`IdHasher`].
pub(crate) type IdMap<K, V> = HashMap<K, V, BuildHasherDefault<IdHasher>>;
/// A `HashSet` with [`IdHasher`].
pub(crate) type IdSet<K> = HashSet<K, BuildHasherDefault<IdHasher>>;
