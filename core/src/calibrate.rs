//! `lull calibrate`'s logic: from a machine's own recorded trace (the agent ledger's
//! `trace` rows), derive its availability threshold and its recruitment threshold, as
//! seed 004 §3.4 asks (thresholds "derived empirically" per machine, Fig. 7's threshold
//! from the machine's own idle-period distribution).
//!
//! * **Rows are irregular.** The agent writes a row every 2 s while guest work may be
//!   stopped by a reading and every 10 s otherwise (`sampling.relaxed_interval_ms`), and
//!   none while it is not running. A row stands for the time up to the next row when that
//!   gap is at most `MAX_GAP_S`; a longer gap is unknown time (it counts for nothing and
//!   ends any idle period). History is the time covered, in days.
//! * **Owner CPU threshold.** While the owner is *away* (no input for `AWAY_S`) the CPU
//!   seen is background: daemons, indexers (seed 004: spikes of 10–20 %). While the owner
//!   is *active* (input in the last minute) it is their use. The threshold is set just
//!   above the background — its 99.9th percentile (time-weighted; daemon spikes are brief) plus `MARGIN`, rounded
//!   up to a whole percent — and is checked against active use: if most active time is
//!   above it, CPU separates the two; if not, the report says input is what tells them
//!   apart.
//! * **Recruitment threshold.** With that definition, the machine's idle periods `Lᵢ`
//!   (idle = owner CPU below the threshold and no input). For each candidate T:
//!   expected donated time per day `Σ max(0, Lᵢ − T)` and expected interruptions per day
//!   (periods longer than T that the owner ended), both counted day by day with the
//!   daily budget enforced as the policy does (after the N-th interruption the machine
//!   leaves the pool until the next day). The threshold is the candidate with the most
//!   donated time among those whose interruptions per day stay within the budget on
//!   average; with none, the longest candidate.
//!
//! Pure: rows in, [`Calibration`] out. It lives in the core (not the simulator) because
//! the agent and the tray run it on the owner's own ledger; the simulator reads the same
//! [`OwnerSample`]s from traces.

use std::fmt::Write;

/// One reading of the owner's use of the machine, as the agent's ledger records it and
/// the simulator replays it.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct OwnerSample {
    /// Owner CPU as a fraction of the machine (guests excluded).
    pub owner_cpu: f32,
    /// Owner memory in bytes.
    pub owner_mem_bytes: u64,
    /// Keyboard or mouse input happened during the sample's interval.
    pub input: bool,
}

/// A row covers the time up to the next row if they are at most this far apart (s).
pub(crate) const MAX_GAP_S: i64 = 30;
/// No input for this long (s) counts as the owner being away.
pub(crate) const AWAY_S: i64 = 300;
/// Input within this long (s) counts as the owner being active.
pub(crate) const ACTIVE_S: i64 = 60;
/// Margin above the background's 99.9th percentile.
pub(crate) const MARGIN: f64 = 0.02;
/// Days of covered history needed.
pub const MIN_DAYS: f64 = 3.0;
/// The candidate recruitment thresholds, seconds.
pub(crate) const CANDIDATES_S: [u64; 15] = [0, 15, 30, 60, 90, 120, 180, 240, 300, 450, 600, 900, 1200, 1800, 3600];

/// Why calibration refused.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum CalibrateError {
    /// Less than [`MIN_DAYS`] of covered history.
    #[error(
        "only {have_days:.1} days of trace recorded; calibration needs {MIN_DAYS:.0}, so {:.1} more days (keep the agent running) — the defaults stay in force",
        MIN_DAYS - have_days
    )]
    NotEnoughHistory {
        /// Days covered so far.
        have_days: f64,
    },
}

/// One candidate recruitment threshold's expectation.
#[derive(Clone, Debug, PartialEq)]
pub struct Candidate {
    /// The threshold, seconds.
    pub threshold_s: u64,
    /// Expected donated (wall) hours per day, budget enforced.
    pub donated_h_per_day: f64,
    /// Expected interruptions per day (mean over days, budget enforced).
    pub interruptions_per_day: f64,
    /// The worst day's interruptions without the budget's cap.
    pub worst_day_uncapped: u32,
}

/// The result.
#[derive(Clone, Debug, PartialEq)]
pub struct Calibration {
    /// Days of covered history.
    pub days: f64,
    /// Rows read.
    pub rows: usize,
    /// Background owner CPU while away: 99.9th percentile (fraction).
    pub background_cpu: f64,
    /// Owner CPU while active: median and 90th percentile.
    pub active_p50: f64,
    pub active_p90: f64,
    /// Share of active time at or above the derived threshold.
    pub active_above: f64,
    /// The derived owner CPU threshold (`availability.owner_cpu_max`).
    pub owner_cpu_max: f64,
    /// The derived recruitment threshold (`availability.recruitment_threshold_s`).
    pub recruitment_threshold_s: u64,
    /// The daily interruption budget it was derived for.
    pub budget: u32,
    /// Idle periods found.
    pub idle_periods: usize,
    /// Every candidate's expectation.
    pub candidates: Vec<Candidate>,
    /// The reasoning, one line each, for the owner.
    pub reasoning: Vec<String>,
}

/// A stretch of the trace a row stands for.
#[derive(Clone, Copy, Debug)]
struct Span {
    from: i64,
    to: i64,
    s: OwnerSample,
    /// Seconds since the last input at `from` (None: none seen yet or after a gap).
    since_input: Option<i64>,
}

fn spans(rows: &[(i64, OwnerSample)]) -> Vec<Span> {
    let mut out = Vec::with_capacity(rows.len());
    let mut last_input: Option<i64> = None;
    // The most common gap, for a row followed by unknown time.
    let step = {
        let mut g: Vec<i64> = rows.windows(2).map(|w| w[1].0 - w[0].0).filter(|g| *g > 0 && *g <= MAX_GAP_S).collect();
        g.sort_unstable();
        g.get(g.len() / 2).copied().unwrap_or(2)
    };
    for (i, (t, s)) in rows.iter().enumerate() {
        let next = rows.get(i + 1).map(|r| r.0);
        let to = match next {
            Some(n) if n - t <= MAX_GAP_S && n > *t => n,
            _ => t + step,
        };
        if s.input {
            last_input = Some(*t);
        }
        out.push(Span { from: *t, to, s: *s, since_input: last_input.map(|l| t - l) });
        if to != next.unwrap_or(to) {
            last_input = None; // unknown time: whether the owner typed is not known
        }
    }
    out
}

/// Time-weighted quantile `q` of `(value, weight)` pairs; 0 when empty.
fn quantile(mut v: Vec<(f64, f64)>, q: f64) -> f64 {
    v.sort_by(|a, b| a.0.total_cmp(&b.0));
    let total: f64 = v.iter().map(|x| x.1).sum();
    let mut acc = 0.0;
    for (x, w) in &v {
        acc += w;
        if acc >= q * total {
            return *x;
        }
    }
    v.last().map_or(0.0, |x| x.0)
}

/// An idle period: (start, length s, ended by the owner's return).
type Period = (i64, i64, bool);

fn idle_periods(sp: &[Span], cpu_max: f64) -> Vec<Period> {
    let mut out = Vec::new();
    let mut cur: Option<(i64, i64)> = None;
    for (i, x) in sp.iter().enumerate() {
        let idle = !x.s.input && (x.s.owner_cpu as f64) < cpu_max;
        let gap_after = sp.get(i + 1).is_none_or(|n| n.from != x.to);
        if idle {
            let (start, _) = cur.unwrap_or((x.from, x.from));
            cur = Some((start, x.to));
        } else if let Some((a, b)) = cur.take() {
            out.push((a, b - a, true));
        }
        if gap_after {
            if let Some((a, b)) = cur.take() {
                out.push((a, b - a, false));
            }
        }
    }
    out
}

fn evaluate(periods: &[Period], t: u64, budget: u32, days: f64, utc_offset_s: i64) -> Candidate {
    use std::collections::BTreeMap;
    let mut per_day: BTreeMap<i64, (f64, u32, u32)> = BTreeMap::new(); // donated s, counted, uncapped
    for &(start, len, ended_by_owner) in periods {
        let day = (start + utc_offset_s).div_euclid(86_400);
        let e = per_day.entry(day).or_default();
        if len as u64 <= t {
            continue;
        }
        if e.1 >= budget {
            // Out of budget: the machine is out of the pool until the next day.
            if ended_by_owner {
                e.2 += 1;
            }
            continue;
        }
        e.0 += (len as u64 - t) as f64;
        if ended_by_owner {
            e.1 += 1;
            e.2 += 1;
        }
    }
    let d = days.max(1e-9);
    Candidate {
        threshold_s: t,
        donated_h_per_day: per_day.values().map(|v| v.0).sum::<f64>() / 3600.0 / d,
        interruptions_per_day: per_day.values().map(|v| v.1 as f64).sum::<f64>() / d,
        worst_day_uncapped: per_day.values().map(|v| v.2).max().unwrap_or(0),
    }
}

/// Calibrates from `rows` (Unix seconds, sample; sorted or not) for a daily budget of
/// `budget` interruptions; local days are UTC + `utc_offset_s`.
pub fn calibrate(rows: &[(i64, OwnerSample)], budget: u32, utc_offset_s: i64) -> Result<Calibration, CalibrateError> {
    let mut rows = rows.to_vec();
    rows.sort_by_key(|r| r.0);
    rows.dedup_by_key(|r| r.0);
    let sp = spans(&rows);
    let covered: i64 = sp.iter().map(|s| s.to - s.from).sum();
    let days = covered as f64 / 86_400.0;
    if days < MIN_DAYS {
        return Err(CalibrateError::NotEnoughHistory { have_days: days });
    }
    let w = |s: &Span| (s.to - s.from) as f64;
    let away: Vec<(f64, f64)> =
        sp.iter().filter(|s| !s.s.input && s.since_input.is_none_or(|d| d >= AWAY_S)).map(|s| (s.s.owner_cpu as f64, w(s))).collect();
    let active: Vec<(f64, f64)> =
        sp.iter().filter(|s| s.s.input || s.since_input.is_some_and(|d| d < ACTIVE_S)).map(|s| (s.s.owner_cpu as f64, w(s))).collect();
    let background_cpu = quantile(away.clone(), 0.999);
    let owner_cpu_max = (((background_cpu + MARGIN) * 100.0).ceil() / 100.0).clamp(0.05, 0.95);
    let active_p50 = quantile(active.clone(), 0.5);
    let active_p90 = quantile(active.clone(), 0.9);
    let active_total: f64 = active.iter().map(|a| a.1).sum();
    let active_above = active.iter().filter(|a| a.0 >= owner_cpu_max).map(|a| a.1).sum::<f64>() / active_total.max(1e-9);

    let periods = idle_periods(&sp, owner_cpu_max);
    let candidates: Vec<Candidate> = CANDIDATES_S.iter().map(|&t| evaluate(&periods, t, budget, days, utc_offset_s)).collect();
    let chosen = candidates
        .iter()
        .filter(|c| c.interruptions_per_day <= budget as f64)
        .max_by(|a, b| a.donated_h_per_day.total_cmp(&b.donated_h_per_day).then(b.threshold_s.cmp(&a.threshold_s)))
        .unwrap_or_else(|| candidates.last().expect("candidates"));
    let recruitment_threshold_s = chosen.threshold_s;

    let mut why = Vec::new();
    why.push(format!("{days:.1} days of trace ({} rows; gaps over {MAX_GAP_S} s count as unknown time).", rows.len()));
    why.push(format!(
        "While you were away (no input for {} min), background CPU stayed at or below {:.0} % 99.9 % of the time; the threshold goes just above it: {:.0} %.",
        AWAY_S / 60,
        background_cpu * 100.0,
        owner_cpu_max * 100.0
    ));
    if active_above >= 0.5 {
        why.push(format!(
            "While you were active, your CPU use was {:.0} % at the median ({:.0} % at the 90th percentile): {:.0} % of active time is above the threshold, so CPU tells your use from the background.",
            active_p50 * 100.0,
            active_p90 * 100.0,
            active_above * 100.0
        ));
    } else {
        why.push(format!(
            "While you were active, your CPU use was {:.0} % at the median ({:.0} % at the 90th percentile): only {:.0} % of active time is above the threshold, so keyboard and mouse input, not CPU, is what tells your use from the background.",
            active_p50 * 100.0,
            active_p90 * 100.0,
            active_above * 100.0
        ));
    }
    why.push(format!(
        "With that definition the machine had {} idle periods. For each recruitment threshold T: expected donated time Σ max(0, L − T) and interruptions (idle periods longer than T that you ended), day by day with your budget of {budget} a day enforced.",
        periods.len()
    ));
    why.push(format!(
        "Chosen T = {recruitment_threshold_s} s: {:.1} donated hours a day with {:.1} interruptions a day on average (worst day without the budget: {}).",
        chosen.donated_h_per_day, chosen.interruptions_per_day, chosen.worst_day_uncapped
    ));
    Ok(Calibration {
        days,
        rows: rows.len(),
        background_cpu,
        active_p50,
        active_p90,
        active_above,
        owner_cpu_max,
        recruitment_threshold_s,
        budget,
        idle_periods: periods.len(),
        candidates,
        reasoning: why,
    })
}

impl Calibration {
    /// The reasoning and the candidates as text.
    pub fn explain(&self) -> String {
        let mut s = String::new();
        for l in &self.reasoning {
            let _ = writeln!(s, "{l}");
        }
        let _ = writeln!(s, "\n  T (s)   donated h/day   interruptions/day   worst day (no budget)");
        for c in &self.candidates {
            let mark = if c.threshold_s == self.recruitment_threshold_s { " ←" } else { "" };
            let _ = writeln!(
                s,
                "  {:>5}   {:>13.1}   {:>17.1}   {:>21}{mark}",
                c.threshold_s, c.donated_h_per_day, c.interruptions_per_day, c.worst_day_uncapped
            );
        }
        s
    }

    /// The plot: donated hours and interruptions per day against T, with the budget.
    pub fn svg(&self) -> String {
        let xs = |f: &dyn Fn(&Candidate) -> f64| self.candidates.iter().map(|c| (c.threshold_s as f64, f(c))).collect::<Vec<_>>();
        crate::chart::Chart::new(
            format!("Calibration: T = {} s, CPU < {:.0} %", self.recruitment_threshold_s, self.owner_cpu_max * 100.0),
            "recruitment threshold T (s)",
            "per day",
        )
        .line("donated hours", xs(&|c| c.donated_h_per_day))
        .line("interruptions", xs(&|c| c.interruptions_per_day))
        .line("budget", xs(&|_| self.budget as f64))
        .to_svg()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sched::SplitMix64;

    /// The few draws the synthetic trace needs, on the scheduler's own generator.
    struct Rng(SplitMix64);
    impl Rng {
        fn new(seed: u64) -> Rng {
            Rng(SplitMix64::new(seed))
        }
        fn f64(&mut self) -> f64 {
            (self.0.next_u64() >> 11) as f64 / (1u64 << 53) as f64
        }
        fn range(&mut self, lo: f64, hi: f64) -> f64 {
            lo + (hi - lo) * self.f64()
        }
        fn int(&mut self, lo: u64, hi: u64) -> u64 {
            lo + self.0.below(hi - lo + 1)
        }
        fn chance(&mut self, p: f64) -> bool {
            self.f64() < p
        }
    }

    /// Days of rows every `step` s (10 s when `relaxed`, mixing 2 s and 10 s spacing): the
    /// owner away at night with background CPU up to `bg` (and a spike to `bg` now and
    /// then), active by day at CPU ≥ `active` with input; by day `short` idle breaks of
    /// under 100 s and 3 long ones (20 min) the owner ends.
    fn synthetic(days: u32, bg: f32, active: f32, short: u32, seed: u64) -> Vec<(i64, OwnerSample)> {
        let mut r = Rng::new(seed);
        let mut rows = Vec::new();
        let t0 = 1_767_225_600i64;
        for d in 0..days as i64 {
            let day = t0 + d * 86_400;
            // Plan of the working day 9:00–17:00: (start offset, length) of idle breaks.
            let mut breaks: Vec<(i64, i64)> = (0..short).map(|_| (r.int(9 * 3600, 16 * 3600) as i64, r.int(20, 95) as i64)).collect();
            for k in 0..3 {
                breaks.push((10 * 3600 + k * 7200, 1200));
            }
            let mut t = day;
            while t < day + 86_400 {
                let s = t - day;
                let working = (9 * 3600..17 * 3600).contains(&s);
                let on_break = breaks.iter().any(|(a, l)| (*a..*a + *l).contains(&s));
                let present = working && !on_break;
                let sample = if present {
                    OwnerSample { owner_cpu: active + r.range(0.0, (1.0 - active) as f64) as f32, owner_mem_bytes: 2 << 30, input: true }
                } else {
                    let spike = r.chance(0.01);
                    OwnerSample {
                        owner_cpu: if spike { bg } else { r.range(0.0, bg as f64 * 0.5) as f32 },
                        owner_mem_bytes: 2 << 30,
                        input: false,
                    }
                };
                rows.push((t, sample));
                // Close sampling while present, relaxed (10 s) while away, as the agent.
                t += if present { 2 } else { 10 };
            }
        }
        rows
    }

    #[test]
    fn recovers_known_thresholds_from_irregular_rows() {
        // Background up to 12 %, active use ≥ 50 %: the CPU threshold lands just above 12 %.
        // Twenty breaks under 100 s a day and three of 20 min: with a budget of 5 the
        // recruitment threshold must outlast the short breaks (> 95 s) and no more: 120 s.
        let rows = synthetic(4, 0.12, 0.5, 20, 1);
        let c = calibrate(&rows, 5, 0).unwrap();
        assert!((3.9..=4.1).contains(&c.days), "{}", c.days);
        assert!((0.13..=0.15).contains(&c.owner_cpu_max), "{}", c.owner_cpu_max);
        assert!(c.active_above > 0.9, "{}", c.active_above);
        assert_eq!(c.recruitment_threshold_s, 120, "{}", c.explain());
        let chosen = c.candidates.iter().find(|x| x.threshold_s == 120).unwrap();
        // Three long breaks a day and the night, which the owner ends in the morning.
        assert!((chosen.interruptions_per_day - 4.0).abs() < 0.01, "{}", c.explain());
        // A short threshold would have spent the budget on the short breaks by mid-morning.
        let short = c.candidates.iter().find(|x| x.threshold_s == 15).unwrap();
        assert!(short.interruptions_per_day > 4.9 && short.donated_h_per_day < chosen.donated_h_per_day + 16.0);

        // A noisier background moves the CPU threshold with it; a budget of 25 admits the
        // short breaks, so a short threshold wins.
        let rows = synthetic(4, 0.30, 0.6, 20, 2);
        let c = calibrate(&rows, 25, 0).unwrap();
        assert!((0.31..=0.33).contains(&c.owner_cpu_max), "{}", c.owner_cpu_max);
        assert!(c.recruitment_threshold_s < 60, "{}", c.explain());
        assert!(c.svg().contains("<svg"));
    }

    #[test]
    fn too_little_history_is_refused_with_the_days_still_needed() {
        let rows = synthetic(2, 0.12, 0.5, 5, 3);
        let e = calibrate(&rows, 5, 0).unwrap_err();
        let CalibrateError::NotEnoughHistory { have_days } = e.clone();
        assert!((1.9..=2.1).contains(&have_days));
        let msg = e.to_string();
        assert!(msg.contains("needs 3") && msg.contains("1.0 more days"), "{msg}");
        // Rows far apart do not count as covered time.
        let sparse: Vec<(i64, OwnerSample)> = (0..10_000).map(|i| (i * 120, OwnerSample::default())).collect();
        assert!(calibrate(&sparse, 5, 0).is_err());
    }
}
