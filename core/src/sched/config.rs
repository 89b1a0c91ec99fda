//! The scheduler's configuration, one per pool: which algorithm, the random seed and
//! the runtime predictor's parameters. Serde, snake_case, unknown fields rejected.
//!
//! ```toml
//! algorithm = "backfill"      # fifo | first_fit | random | spt | lpt | backfill
//! random_seed = 1280658508
//! memory_threshold = -0.05    # MT (seed 001): oversize tolerated, -0.9 ..= 1.0
//! migration_choice = "combined"   # age | worksize | pf-rate | combined
//! [predict]
//! history_len = 8
//! exp_alpha = 0.5
//! default_normtime_s = 3600.0
//! min_cpu_share = 0.05
//! ```

use super::error::SchedError;
use super::memory::Choice;
use crate::field::Field;
use serde::{Deserialize, Serialize};
use std::fmt;

/// The online scheduling algorithms of seed 002 §3.1. They differ only in which waiting
/// job they try next; placement is the same greedy rule for all
/// (see `super::placement`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Algorithm {
    /// Strict arrival order; blocks behind the first job that cannot start.
    Fifo,
    /// The first job in arrival order that fits, then the next, …; never blocks.
    FirstFit,
    /// A job chosen uniformly among the waiting jobs that fit (seeded, reproducible).
    Random,
    /// Shortest predicted processing time (normtime) first; blocks if that job cannot
    /// start.
    Spt,
    /// Longest predicted processing time first; blocks if that job cannot start.
    Lpt,
    /// FIFO with backfilling (the default): a later job starts early only if it does
    /// not delay the head job's reservation.
    #[default]
    Backfill,
}

impl Algorithm {
    /// All six, in the paper's order.
    pub const ALL: [Algorithm; 6] =
        [Algorithm::Fifo, Algorithm::FirstFit, Algorithm::Random, Algorithm::Spt, Algorithm::Lpt, Algorithm::Backfill];

    /// The snake_case name used in configuration.
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::Fifo => "fifo",
            Algorithm::FirstFit => "first_fit",
            Algorithm::Random => "random",
            Algorithm::Spt => "spt",
            Algorithm::Lpt => "lpt",
            Algorithm::Backfill => "backfill",
        }
    }
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The default seed of [`SchedConfig::random_seed`] ("LULL" in ASCII).
pub(crate) const DEFAULT_RANDOM_SEED: u64 = 0x4C55_4C4C;

/// One pool's scheduler configuration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SchedConfig {
    /// The algorithm (default: backfill).
    pub algorithm: Algorithm,
    /// Seed of the `random` algorithm's generator.
    pub random_seed: u64,
    /// Runtime prediction.
    pub predict: PredictConfig,
    /// MT of seed 001: the oversize `Q_o = (demand − M) / M` a machine with a live memory
    /// report tolerates, as a fraction (−0.9 ..= 1.0). No job is placed where it would
    /// take `Q_o` to MT, and a machine at or over it has one job moved away. Guests here
    /// can never hold more than M (their caps), so the default is a little below 0
    /// (−0.05): seed 001 §4.2's "warning before the page faults really happen", within
    /// the −5 % … 5 % where its combined policy did best (Fig. 3).
    pub memory_threshold: f64,
    /// Which job a machine over MT sheds (seed 001 §6.1; default combined, eq. 5).
    pub migration_choice: Choice,
}

/// MT (see [`SchedConfig::memory_threshold`]): default −0.05, allowed −0.9 ..= 1.0.
pub(crate) const MEMORY_THRESHOLD: Field<f64> = Field {
    name: "memory_threshold",
    default: -0.05,
    min: -0.9,
    max: 1.0,
    unit: "oversize tolerated, as a fraction of the machine's memory",
};

/// The default MT (see `MEMORY_THRESHOLD`).
pub const DEFAULT_MEMORY_THRESHOLD: f64 = MEMORY_THRESHOLD.default;

impl Default for SchedConfig {
    fn default() -> Self {
        SchedConfig {
            algorithm: Algorithm::Backfill,
            random_seed: DEFAULT_RANDOM_SEED,
            predict: PredictConfig::default(),
            memory_threshold: DEFAULT_MEMORY_THRESHOLD,
            migration_choice: Choice::Combined,
        }
    }
}

impl SchedConfig {
    /// The default configuration with another algorithm.
    pub fn with_algorithm(algorithm: Algorithm) -> SchedConfig {
        SchedConfig { algorithm, ..SchedConfig::default() }
    }

    /// Checks the numbers (see [`PredictConfig::validate`]) and MT (−0.9 ..= 1.0).
    pub(crate) fn validate(&self) -> Result<(), SchedError> {
        check_memory_threshold(self.memory_threshold)?;
        self.predict.validate()
    }
}

/// Refuses an MT outside `MEMORY_THRESHOLD`'s range (or not a number), naming the field
/// and the range.
pub fn check_memory_threshold(mt: f64) -> Result<(), SchedError> {
    if !MEMORY_THRESHOLD.contains(mt) {
        return Err(SchedError::InvalidConfig(format!(
            "{} {mt} is outside {:?}..={:?} (the oversize tolerated, as a fraction: -0.05 = block and migrate at 95 % of the guests' memory)",
            MEMORY_THRESHOLD.name, MEMORY_THRESHOLD.min, MEMORY_THRESHOLD.max
        )));
    }
    Ok(())
}

/// Parameters of the runtime predictor ([`super::predict::Predictor`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PredictConfig {
    /// How many recent normtimes are kept per program (≥ 2; shown in the API).
    pub history_len: usize,
    /// α of WINNER's exponential average `T_new = α·T_old + (1 − α)·T_norm`
    /// (seed 002 eq. 1), kept for comparison; 0 < α < 1.
    pub exp_alpha: f64,
    /// Normtime assumed for a job whose program has no history and whose author gave no
    /// estimate, seconds at base speed 1.0 (default one hour). Backfill never uses such a
    /// guess to justify starting a job before the head job's reservation.
    pub default_normtime_s: f64,
    /// Floor of the CPU share `1 − load` when predicting runtime, so a fully loaded
    /// machine gives a long but finite prediction (0 < floor ≤ 1).
    pub min_cpu_share: f64,
}

impl Default for PredictConfig {
    fn default() -> Self {
        PredictConfig { history_len: 8, exp_alpha: 0.5, default_normtime_s: 3600.0, min_cpu_share: 0.05 }
    }
}

impl PredictConfig {
    /// Rejects `history_len < 2`, α outside (0, 1), a non-positive or non-finite default,
    /// and a CPU-share floor outside (0, 1].
    pub(crate) fn validate(&self) -> Result<(), SchedError> {
        if self.history_len < 2 {
            return Err(SchedError::InvalidConfig("predict.history_len must be at least 2".into()));
        }
        if !(self.exp_alpha > 0.0 && self.exp_alpha < 1.0) {
            return Err(SchedError::InvalidConfig("predict.exp_alpha must be strictly between 0 and 1".into()));
        }
        if !(self.default_normtime_s.is_finite() && self.default_normtime_s > 0.0) {
            return Err(SchedError::InvalidConfig("predict.default_normtime_s must be a positive number of seconds".into()));
        }
        if !(self.min_cpu_share > 0.0 && self.min_cpu_share <= 1.0) {
            return Err(SchedError::InvalidConfig("predict.min_cpu_share must be in (0, 1]".into()));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_memory_threshold_lies_inside_its_range() {
        assert!(MEMORY_THRESHOLD.contains(MEMORY_THRESHOLD.default), "{:?}", MEMORY_THRESHOLD);
        assert_eq!(SchedConfig::default().memory_threshold, MEMORY_THRESHOLD.default);
        assert!(SchedConfig::default().validate().is_ok());
    }
}
