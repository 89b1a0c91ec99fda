//! Seeded randomness for traces and job streams: lull-core's SplitMix64 (the scheduler's
//! own generator) with the few distributions the simulator needs. Every run is
//! reproducible from its seed; nothing reads the OS's entropy.

use lull_core::sched::SplitMix64;

/// A seeded generator with uniform, exponential and choice helpers.
#[derive(Clone, Debug)]
pub struct Rng(SplitMix64);

impl Rng {
    /// A generator from `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(SplitMix64::new(seed))
    }
    /// An independent stream derived from this seed and a label (per machine, per run).
    pub fn derive(seed: u64, label: u64) -> Rng {
        let mut r = SplitMix64::new(seed ^ label.wrapping_mul(0xA24B_AED4_963E_E407));
        r.next_u64();
        Rng(SplitMix64::new(r.next_u64()))
    }
    /// Uniform in [0, 1).
    pub fn f64(&mut self) -> f64 {
        (self.0.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    /// Uniform in [lo, hi).
    pub fn range(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.f64()
    }
    /// Uniform integer in lo..=hi.
    pub fn int(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.0.below(hi - lo + 1)
    }
    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        self.f64() < p
    }
    /// Exponential with the given mean.
    pub fn exp(&mut self, mean: f64) -> f64 {
        -mean * (1.0 - self.f64()).ln()
    }
}
