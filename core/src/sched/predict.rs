//! Runtime prediction without asking users (seed 002 §4.2–4.4).
//!
//! * **Normtime** of a finished job is `Σ S_b,j · (t_user + t_sys)` over its members
//!   (seed 002 eq. 4): CPU seconds scaled to a reference machine of base speed 1.0, so it
//!   does not depend on which machines ran the job or how loaded they were.
//! * Per program identifier the predictor keeps the last [`PredictConfig::history_len`]
//!   normtimes. The **prediction is the mean of the last two** (Tsafrir, Etsion &
//!   Feitelson's "last-two average"); WINNER's exponential average
//!   `T_new = α·T_old + (1 − α)·T_norm` (seed 002 eq. 1) is kept beside it for comparison.
//! * Without history the author's estimate is used (seconds on an idle speed-1.0 machine,
//!   times the width for a gang); with neither, [`PredictConfig::default_normtime_s`] per
//!   member. The [`PredictionSource`] says which.
//! * **Runtime on machines** is `T_norm / (n · S_min)` where `S = S_b · max(1 − load,
//!   min_cpu_share)` (seed 002 eq. 6; for one machine `T_norm / (S_b · (1 − load))`). For a
//!   gang this is the static-partition formula, never shorter than the load-balanced
//!   `T_norm / Σ S_i` (eq. 5), so it errs on the long side for both kinds of gang.
//! * A running job that **outlives** its prediction gets it doubled until it lies in the
//!   future ([`corrected_runtime`]); the program's history is not changed by that.
//! * **Error tracking**: when a job completes, the prediction it was placed with, the
//!   last-two average and the exponential average (both as they stood just before this
//!   job's normtime was added) and the predicted runtime are scored against the actual
//!   normtime and wall time; [`ProgramStats`] reports the mean absolute relative errors.

use super::config::PredictConfig;
use super::machine::{clamp_load, Machine};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, VecDeque};

/// Normtime (seed 002 eq. 4): `Σ S_b · cpu_seconds` over `(base_speed, cpu_seconds)`
/// pairs, one per member (cpu_seconds = user + system time).
pub fn normtime(members: impl IntoIterator<Item = (f64, f64)>) -> f64 {
    members.into_iter().map(|(s_b, cpu)| s_b * cpu).sum()
}

/// The speed a guest gets on `m` now: `S_b · max(1 − load, min_cpu_share)`.
pub(crate) fn current_speed(m: &Machine, min_cpu_share: f64) -> f64 {
    m.base_speed * (1.0 - clamp_load(m.load)).max(min_cpu_share)
}

/// Predicted wall time, seconds, of `normtime_s` on `n` members whose slowest current
/// speed is `slowest_speed`: `normtime / (n · S_min)` (seed 002 eq. 6). A non-positive
/// speed or `n == 0` gives `f64::INFINITY`.
pub(crate) fn runtime_from_speed(normtime_s: f64, n: usize, slowest_speed: f64) -> f64 {
    if n == 0 || slowest_speed <= 0.0 || slowest_speed.is_nan() {
        return f64::INFINITY;
    }
    normtime_s / (n as f64 * slowest_speed)
}

/// Predicted wall time, seconds, of `normtime_s` on `machines` (one per member), with
/// the CPU share floored at `min_cpu_share` (see `current_speed`).
pub fn predicted_runtime_s(normtime_s: f64, machines: &[&Machine], min_cpu_share: f64) -> f64 {
    let slowest = machines.iter().map(|m| current_speed(m, min_cpu_share)).fold(f64::INFINITY, f64::min);
    runtime_from_speed(normtime_s, machines.len(), slowest)
}

/// The corrected runtime of a job still running after `elapsed_s` seconds although
/// predicted to take `predicted_s`: the prediction (at least 1 s) doubled until it
/// exceeds the elapsed time. Returns `predicted_s` unchanged while it is not outlived.
/// Doubling keeps the number of corrections logarithmic in the overrun while keeping
/// Backfill's reservations finite and in the future.
pub fn corrected_runtime(predicted_s: f64, elapsed_s: f64) -> f64 {
    if predicted_s > elapsed_s {
        return predicted_s;
    }
    let mut r = if predicted_s.is_finite() { predicted_s.max(1.0) } else { 1.0 };
    while r <= elapsed_s {
        r *= 2.0;
    }
    r
}

/// Where a prediction came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PredictionSource {
    /// The program's last-two average.
    History,
    /// The author's estimate (the program has no history).
    UserEstimate,
    /// [`PredictConfig::default_normtime_s`]: neither history nor estimate.
    Default,
}

/// A predicted normtime for one job.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Prediction {
    /// Normtime still to do, seconds at speed 1.0 (the whole job minus checkpointed work,
    /// never below a tenth of the whole).
    pub normtime_s: f64,
    /// Predicted normtime of the whole job (what is scored against the actual normtime).
    pub total_normtime_s: f64,
    /// Where it came from.
    pub source: PredictionSource,
}

/// The share of a job's predicted normtime always left to do after checkpoint credit.
pub(crate) const CHECKPOINT_FLOOR: f64 = 0.1;

#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct ErrorSum {
    n: u64,
    sum: f64,
}

impl ErrorSum {
    fn add(&mut self, predicted: f64, actual: f64) {
        if actual > 0.0 && actual.is_finite() && predicted.is_finite() {
            self.n += 1;
            self.sum += (predicted - actual).abs() / actual;
        }
    }

    fn mean(&self) -> Option<f64> {
        (self.n > 0).then(|| self.sum / self.n as f64)
    }
}

/// One program's runtime history.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProgramHistory {
    recent: VecDeque<f64>,
    exp_average: Option<f64>,
    completed: u64,
    err_used: ErrorSum,
    err_last_two: ErrorSum,
    err_exp: ErrorSum,
    err_runtime: ErrorSum,
}

impl ProgramHistory {
    /// Mean of the last two normtimes (the only one while there is one); `None` without
    /// history.
    pub fn last_two_average(&self) -> Option<f64> {
        let mut it = self.recent.iter().rev();
        match (it.next(), it.next()) {
            (Some(a), Some(b)) => Some((a + b) / 2.0),
            (Some(a), None) => Some(*a),
            _ => None,
        }
    }

    /// WINNER's exponential average (seed 002 eq. 1), `None` without history.
    pub fn exp_average(&self) -> Option<f64> {
        self.exp_average
    }

    /// The kept normtimes, oldest first.
    pub fn recent(&self) -> impl Iterator<Item = f64> + '_ {
        self.recent.iter().copied()
    }

    /// Completed jobs recorded.
    pub fn completed(&self) -> u64 {
        self.completed
    }
}

/// A program's prediction record, for the API (serializable).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProgramStats {
    /// The program identifier.
    pub program: String,
    /// Completed jobs recorded.
    pub completed: u64,
    /// The kept normtimes, seconds, oldest first.
    pub recent_normtimes_s: Vec<f64>,
    /// The current prediction (last-two average), seconds.
    pub last_two_average_s: Option<f64>,
    /// WINNER's exponential average, seconds.
    pub exp_average_s: Option<f64>,
    /// Completed jobs whose predictions were scored.
    pub scored: u64,
    /// Mean absolute relative error of the normtime predictions jobs were placed with
    /// (whatever their source), `|predicted − actual| / actual`.
    pub mare_used: Option<f64>,
    /// The same for the last-two average, over jobs that completed when it existed.
    pub mare_last_two: Option<f64>,
    /// The same for the exponential average.
    pub mare_exp_average: Option<f64>,
    /// Mean absolute relative error of the predicted runtime (at placement) against the
    /// wall time (the longest member's).
    pub mare_runtime: Option<f64>,
    /// How many predictions `mare_last_two` averages (so a record read back restores
    /// the sums exactly; 0 in records kept before it was).
    #[serde(default)]
    pub scored_last_two: u64,
    /// How many predictions `mare_exp_average` averages.
    #[serde(default)]
    pub scored_exp_average: u64,
    /// How many predictions `mare_runtime` averages.
    #[serde(default)]
    pub scored_runtime: u64,
}

/// Per-program runtime history and predictions.
#[derive(Clone, Debug, PartialEq)]
pub struct Predictor {
    config: PredictConfig,
    programs: BTreeMap<String, ProgramHistory>,
}

impl Predictor {
    /// An empty predictor.
    pub fn new(config: PredictConfig) -> Predictor {
        Predictor { config, programs: BTreeMap::new() }
    }

    /// The history of `program`, if any job of it completed.
    pub fn history(&self, program: &str) -> Option<&ProgramHistory> {
        self.programs.get(program)
    }

    /// The normtime prediction for a job of `program` with `width` members: last-two
    /// average; else `user_estimate_s × width`; else `default_normtime_s × width`. Then
    /// `credited_s` of checkpointed work is taken off, leaving at least
    /// `CHECKPOINT_FLOOR` of the whole.
    pub fn predict(&self, program: &str, width: u32, user_estimate_s: Option<f64>, credited_s: f64) -> Prediction {
        let width = f64::from(width.max(1));
        let (total, source) = match self.programs.get(program).and_then(ProgramHistory::last_two_average) {
            Some(t) => (t, PredictionSource::History),
            None => match user_estimate_s.filter(|e| e.is_finite() && *e >= 0.0) {
                Some(e) => (e * width, PredictionSource::UserEstimate),
                None => (self.config.default_normtime_s * width, PredictionSource::Default),
            },
        };
        let remaining = if credited_s > 0.0 { (total - credited_s).max(total * CHECKPOINT_FLOOR) } else { total };
        Prediction { normtime_s: remaining, total_normtime_s: total, source }
    }

    /// Records a completed job: scores the predictions (see the module doc), then adds
    /// `actual_normtime_s` to the program's history. `predicted_runtime_s` is the runtime
    /// predicted at placement and `wall_s` the job's wall time. A non-finite or negative
    /// normtime is ignored.
    pub fn record(&mut self, program: &str, actual_normtime_s: f64, used: &Prediction, predicted_runtime_s: f64, wall_s: f64) {
        if !(actual_normtime_s.is_finite() && actual_normtime_s >= 0.0) {
            return;
        }
        let alpha = self.config.exp_alpha;
        let keep = self.config.history_len.max(2);
        let h = self.programs.entry(program.to_string()).or_default();
        h.err_used.add(used.total_normtime_s, actual_normtime_s);
        if let Some(l2) = h.last_two_average() {
            h.err_last_two.add(l2, actual_normtime_s);
        }
        if let Some(e) = h.exp_average {
            h.err_exp.add(e, actual_normtime_s);
        }
        h.err_runtime.add(predicted_runtime_s, wall_s);
        h.recent.push_back(actual_normtime_s);
        while h.recent.len() > keep {
            h.recent.pop_front();
        }
        h.exp_average = Some(match h.exp_average {
            Some(old) => alpha * old + (1.0 - alpha) * actual_normtime_s,
            None => actual_normtime_s,
        });
        h.completed += 1;
    }

    /// The record of one program.
    pub fn program_stats(&self, program: &str) -> Option<ProgramStats> {
        self.programs.get(program).map(|h| stats_of(program, h))
    }

    /// The records of all programs, by program identifier.
    pub fn stats(&self) -> Vec<ProgramStats> {
        self.programs.iter().map(|(p, h)| stats_of(p, h)).collect()
    }

    /// Takes back a program's history from its record (as kept by the coordinator's
    /// database), replacing what this predictor knew of it: a restarted or newly elected
    /// scheduler predicts as the one before it did. A record older than the `scored_*`
    /// counts restores each error mean with the `scored` count.
    pub fn restore(&mut self, stats: &ProgramStats) {
        let keep = self.config.history_len.max(2);
        let sum = |mean: Option<f64>, n: u64| ErrorSum { n: if mean.is_some() { n } else { 0 }, sum: mean.unwrap_or(0.0) * n as f64 };
        let or_scored = |n: u64| if n == 0 { stats.scored } else { n };
        let mut recent: VecDeque<f64> = stats.recent_normtimes_s.iter().copied().filter(|x| x.is_finite() && *x >= 0.0).collect();
        while recent.len() > keep {
            recent.pop_front();
        }
        let h = ProgramHistory {
            recent,
            exp_average: stats.exp_average_s.filter(|x| x.is_finite()),
            completed: stats.completed,
            err_used: sum(stats.mare_used, stats.scored),
            err_last_two: sum(stats.mare_last_two, or_scored(stats.scored_last_two)),
            err_exp: sum(stats.mare_exp_average, or_scored(stats.scored_exp_average)),
            err_runtime: sum(stats.mare_runtime, or_scored(stats.scored_runtime)),
        };
        self.programs.insert(stats.program.clone(), h);
    }
}

fn stats_of(program: &str, h: &ProgramHistory) -> ProgramStats {
    ProgramStats {
        program: program.to_string(),
        completed: h.completed,
        recent_normtimes_s: h.recent.iter().copied().collect(),
        last_two_average_s: h.last_two_average(),
        exp_average_s: h.exp_average,
        scored: h.err_used.n,
        mare_used: h.err_used.mean(),
        mare_last_two: h.err_last_two.mean(),
        mare_exp_average: h.err_exp.mean(),
        mare_runtime: h.err_runtime.mean(),
        scored_last_two: h.err_last_two.n,
        scored_exp_average: h.err_exp.n,
        scored_runtime: h.err_runtime.n,
    }
}
