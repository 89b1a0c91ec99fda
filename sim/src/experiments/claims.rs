//! Every figure over many seeds, and the strict claim checker.
//!
//! An experiment runs N independent seeds ([`Options::seeds`]); each figure is reported as
//! its mean and 95 % interval over them ([`Summary`], Student's t), and each claim of a
//! paper is checked *per seed* and reported with the share of seeds where it holds
//! ([`Claim`]). A claim with a size holds only within the tolerance written beside it, and
//! never for no change ([`Expect::Change`]).
//!
//! A report row ([`Row`]) carries the paper's number, ours with its interval, the
//! verdict with its share of seeds, and one sentence on why ours differs. Rows marked
//! `variant` run a parameter of ours, not the paper's: they are reported apart and never
//! counted with the paper's.

use super::options::Options;
use crate::error::Result;
use crate::parallel::map_runs;
use std::fmt::Write;

/// Mean and 95 % interval of one figure over the seeds.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct Summary {
    /// Seeds.
    pub n: usize,
    /// Mean over the seeds.
    pub mean: f64,
    /// The 95 % interval of the mean (Student's t; equal to the mean for one seed).
    pub lo: f64,
    pub hi: f64,
}

/// Student's t quantile for a two-sided 95 % interval with `df` degrees of freedom.
fn t95(df: usize) -> f64 {
    const T: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101,
        2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
    ];
    match df {
        0 => 0.0,
        1..=30 => T[df - 1],
        31..=60 => 2.000,
        _ => 1.960,
    }
}

impl Summary {
    /// The summary of `values` (non-finite values are left out).
    pub fn of(values: &[f64]) -> Summary {
        let v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
        let n = v.len();
        if n == 0 {
            return Summary { n: 0, mean: f64::NAN, lo: f64::NAN, hi: f64::NAN };
        }
        let mean = v.iter().sum::<f64>() / n as f64;
        let var = if n > 1 { v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64 } else { 0.0 };
        let half = t95(n - 1) * (var / n as f64).sqrt();
        Summary { n, mean, lo: mean - half, hi: mean + half }
    }

    /// As [`Summary::show`] with `unit` after the figure; when no seed gave a value,
    /// `— (why)` instead, so a report never shows a bare dash or a NaN.
    pub fn show_or(&self, decimals: usize, scale: f64, unit: &str, why: &str) -> String {
        if self.n == 0 {
            format!("— ({why})")
        } else {
            format!("{}{unit}", self.show(decimals, scale))
        }
    }

    /// `12.3 [11.9, 12.7]` with `decimals` decimals, scaled by `scale` (100 for percent).
    pub fn show(&self, decimals: usize, scale: f64) -> String {
        if self.n == 0 {
            return "—".into();
        }
        let f = |x: f64| format!("{:.*}", decimals, x * scale);
        if self.n == 1 {
            f(self.mean)
        } else {
            format!("{} [{}, {}]", f(self.mean), f(self.lo), f(self.hi))
        }
    }
}

/// What a claim says, checked on one seed's value.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Expect {
    /// A relative change of about `claimed` (0.51 for "+51 %"): holds when ours lies in
    /// `claimed ± tol·|claimed|` (tol < 1, so never for no change or the other sign).
    Change { claimed: f64, tol: f64 },
    /// A value within `claimed ± tol`.
    Near { claimed: f64, tol: f64 },
    /// At most this value.
    AtMost(f64),
    /// At least this value.
    AtLeast(f64),
    /// A statement true or false per seed (the value is 1 or 0): a ranking, an order.
    True,
}

impl Expect {
    /// Whether `v` satisfies the claim.
    pub fn holds(&self, v: f64) -> bool {
        if !v.is_finite() {
            return false;
        }
        match *self {
            Expect::Change { claimed, tol } => {
                debug_assert!(tol < 1.0 && claimed != 0.0, "a change claim needs a size and a tolerance under 100 %");
                (v - claimed).abs() <= tol * claimed.abs() && v * claimed > 0.0
            }
            Expect::Near { claimed, tol } => (v - claimed).abs() <= tol,
            Expect::AtMost(x) => v <= x,
            Expect::AtLeast(x) => v >= x,
            Expect::True => v >= 0.5,
        }
    }

    /// The tolerance as written beside the claim.
    pub fn tolerance(&self, scale: f64, unit: &str) -> String {
        match *self {
            Expect::Change { claimed, tol } => {
                format!(
                    "{:+.0} % ± {:.0} % of it ({:+.0}…{:+.0} %)",
                    claimed * 100.0,
                    tol * 100.0,
                    (claimed - tol * claimed.abs()) * 100.0,
                    (claimed + tol * claimed.abs()) * 100.0
                )
            }
            Expect::Near { claimed, tol } => format!("{:.2}{unit} ± {:.2}{unit}", claimed * scale, tol * scale),
            Expect::AtMost(x) => format!("≤ {:.2}{unit}", x * scale),
            Expect::AtLeast(x) => format!("≥ {:.2}{unit}", x * scale),
            Expect::True => "true on the seed".into(),
        }
    }
}

/// The verdict over the seeds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum Verdict {
    /// Holds on at least 80 % of the seeds.
    Holds,
    /// Holds on 20–80 % of them: the seed decides.
    Mixed,
    /// Holds on under 20 %.
    Fails,
}

impl Verdict {
    fn of(held: usize, n: usize) -> Verdict {
        let share = held as f64 / n.max(1) as f64;
        if share >= 0.8 {
            Verdict::Holds
        } else if share >= 0.2 {
            Verdict::Mixed
        } else {
            Verdict::Fails
        }
    }
    fn word(self) -> &'static str {
        match self {
            Verdict::Holds => "yes",
            Verdict::Mixed => "**mixed**",
            Verdict::Fails => "**no**",
        }
    }
}

/// One row of a report: a paper's claim, our figure over the seeds, the verdict, why.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Row {
    /// Where in the paper, and what it claims.
    pub claim: String,
    /// The paper's number, as printed.
    pub paper: String,
    /// Ours: mean [95 % interval].
    pub ours: String,
    /// The tolerance the verdict used.
    pub tolerance: String,
    /// Seeds where the claim held, of `seeds`.
    pub held: usize,
    pub seeds: usize,
    pub verdict: Verdict,
    /// One sentence: why ours differs (or agrees).
    pub why: String,
    /// A parameter of ours, not the paper's: reported apart, never counted as the paper's.
    pub variant: bool,
    /// The mean, for the summary.
    #[serde(skip)]
    pub summary: Summary,
}

impl Row {
    /// Why no seed gave a value, in place of the general "no seed gave a value" (a claim
    /// that could not be measured says so rather than show a number).
    pub fn none_because(mut self, why: &str) -> Row {
        if self.summary.n == 0 && !self.ours.starts_with("true on") {
            self.ours = format!("— ({why})");
        }
        self
    }

    /// The reason to give instead when the claim does not hold on most seeds.
    pub fn unless_holds(mut self, why: &str) -> Row {
        if self.verdict != Verdict::Holds {
            self.why = why.to_string();
        }
        self
    }
}

/// A claim to check on per-seed values.
pub struct Claim<'a> {
    pub claim: &'a str,
    pub paper: &'a str,
    pub expect: Expect,
    /// Display: decimals, scale (100 for %), unit suffix.
    pub decimals: usize,
    pub scale: f64,
    pub unit: &'a str,
    pub why: &'a str,
}

impl Claim<'_> {
    /// Checks the claim on each seed's value.
    pub fn check(&self, per_seed: &[f64]) -> Row {
        let held = per_seed.iter().filter(|v| self.expect.holds(**v)).count();
        let s = Summary::of(per_seed);
        let ours = if self.expect == Expect::True {
            format!("true on {held} of {} seeds", per_seed.len())
        } else {
            s.show_or(self.decimals, self.scale, self.unit, "no seed gave a value")
        };
        Row {
            claim: self.claim.to_string(),
            paper: self.paper.to_string(),
            ours,
            tolerance: self.expect.tolerance(self.scale, self.unit),
            held,
            seeds: per_seed.len(),
            verdict: Verdict::of(held, per_seed.len()),
            why: self.why.to_string(),
            variant: false,
            summary: s,
        }
    }

    /// As [`Claim::check`], for a variant of ours (reported apart).
    pub fn check_variant(&self, per_seed: &[f64]) -> Row {
        Row { variant: true, ..self.check(per_seed) }
    }
}

/// Renders rows as the report's claims table, the paper's rows first, variants apart.
pub fn table(md: &mut String, rows: &[Row]) {
    let paper: Vec<&Row> = rows.iter().filter(|r| !r.variant).collect();
    let variants: Vec<&Row> = rows.iter().filter(|r| r.variant).collect();
    let head = "| claim | paper | ours (mean [95 % interval]) | holds if | holds | why ours differs |\n|---|---|---|---|---|---|";
    let line = |md: &mut String, r: &Row| {
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} ({} of {} seeds) | {} |",
            r.claim,
            r.paper,
            r.ours,
            r.tolerance,
            r.verdict.word(),
            r.held,
            r.seeds,
            r.why
        );
    };
    if !paper.is_empty() {
        let _ = writeln!(md, "{head}");
        for r in paper {
            line(md, r);
        }
        let _ = writeln!(md);
    }
    if !variants.is_empty() {
        let _ = writeln!(md, "Variants of ours (not the paper's parameters; not counted with the paper's claims):\n\n{head}");
        for r in variants {
            line(md, r);
        }
        let _ = writeln!(md);
    }
}

/// `k of n` of the paper's rows hold on most seeds, and how many are mixed.
pub fn tally(rows: &[Row]) -> String {
    let paper: Vec<&Row> = rows.iter().filter(|r| !r.variant).collect();
    let holds = paper.iter().filter(|r| r.verdict == Verdict::Holds).count();
    let mixed = paper.iter().filter(|r| r.verdict == Verdict::Mixed).count();
    format!(
        "{holds} of {} of the paper's claims hold on at least 80 % of the seeds, {mixed} hold on some seeds only (20–80 %), {} on fewer; variants of ours are not counted.",
        paper.len(),
        paper.len() - holds - mixed
    )
}

/// A parameter not taken from a paper: its value, where it came from, and how much the
/// headline moves when it is swept.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Assumption {
    pub name: String,
    pub value: String,
    pub source: String,
    /// (swept value, headline summary) pairs; empty when not swept against the table's
    /// headline (why, or where else it is swept, is in `source`).
    pub sweep: Vec<(String, Summary)>,
}

/// Renders the assumptions with their sensitivity sweeps.
pub fn assumptions(md: &mut String, headline: &str, decimals: usize, scale: f64, list: &[Assumption]) {
    if list.is_empty() {
        return;
    }
    let _ = writeln!(md, "### Parameters not from the paper, and how much the headline moves\n");
    let _ =
        writeln!(md, "Headline: {headline}.\n\n| parameter | value | where it came from | headline as it is swept |\n|---|---|---|---|");
    for a in list {
        let sweep = if a.sweep.is_empty() {
            "not swept against this headline".to_string()
        } else {
            a.sweep.iter().map(|(v, s)| format!("{v}: {}", s.show(decimals, scale))).collect::<Vec<_>>().join("; ")
        };
        let _ = writeln!(md, "| {} | {} | {} | {sweep} |", a.name, a.value, a.source);
    }
    let _ = writeln!(md);
}

/// The seeds of a run: `first, first + 1, …`.
pub fn seeds(opts: &Options) -> Vec<u64> {
    (0..opts.seeds.max(1) as u64).map(|k| opts.first_seed.wrapping_add(k)).collect()
}

/// Runs every seed's runs on the pool as one batch (so the pool stays busy across seeds)
/// and gives the results back per seed, in each seed's run order.
pub fn over_seeds<S, O, F>(
    opts: &Options,
    specs_of: impl Fn(u64) -> Vec<S>,
    progress: &mut dyn FnMut(u64, u64),
    run: F,
) -> Result<Vec<Vec<O>>>
where
    S: Sync,
    O: Send,
    F: Fn(u64, &S) -> Result<O> + Sync,
{
    let mut items: Vec<(usize, u64, S)> = Vec::new();
    let seeds = seeds(opts);
    for (k, &seed) in seeds.iter().enumerate() {
        items.extend(specs_of(seed).into_iter().map(|s| (k, seed, s)));
    }
    let outs = map_runs(opts.threads, &items, progress, |(_, seed, s)| run(*seed, s))?;
    let mut per: Vec<Vec<O>> = seeds.iter().map(|_| Vec::new()).collect();
    for ((k, _, _), o) in items.iter().zip(outs) {
        per[*k].push(o);
    }
    Ok(per)
}

/// One figure across the seeds: `f` of each seed's measures.
pub fn per_seed<M>(seeds: &[M], f: impl Fn(&M) -> f64) -> Vec<f64> {
    seeds.iter().map(f).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_holds_only_within_its_tolerance_and_never_for_none() {
        let about_50 = Expect::Change { claimed: 0.5, tol: 0.5 };
        assert!(about_50.holds(0.5) && about_50.holds(0.26) && about_50.holds(0.75));
        assert!(!about_50.holds(0.24), "half the claimed change is the edge");
        assert!(!about_50.holds(0.76) && !about_50.holds(1.0), "a doubling is not 'about +50 %'");
        assert!(!about_50.holds(0.0) && !about_50.holds(-0.3), "no change, or the other way, never holds");
        let down = Expect::Change { claimed: -0.32, tol: 0.5 };
        assert!(down.holds(-0.2) && !down.holds(0.0) && !down.holds(-0.5));
    }

    #[test]
    fn the_interval_is_students_and_a_verdict_counts_seeds() {
        let s = Summary::of(&[1.0, 2.0, 3.0]);
        assert_eq!(s.mean, 2.0);
        // sd 1, n 3: half-width 4.303 / √3.
        assert!((s.hi - 2.0 - 4.303 / 3f64.sqrt()).abs() < 1e-9);
        assert_eq!(Summary::of(&[5.0]).show(1, 1.0), "5.0");
        let c = Claim { claim: "c", paper: "p", expect: Expect::AtLeast(2.0), decimals: 1, scale: 1.0, unit: "", why: "w" };
        let r = c.check(&[1.0, 2.0, 3.0, 4.0, 5.0]);
        assert_eq!((r.held, r.seeds, r.verdict), (4, 5, Verdict::Holds));
        assert_eq!(c.check(&[1.0, 1.0, 3.0, 1.0, 1.0]).verdict, Verdict::Mixed);
        assert_eq!(c.check(&[1.0; 5]).verdict, Verdict::Fails);
        assert!(!Expect::Near { claimed: 1.0, tol: 0.1 }.holds(f64::NAN));
    }

    #[test]
    fn a_figure_no_seed_gave_says_why_and_never_nan() {
        let none = Summary::of(&[f64::NAN, f64::NAN]);
        assert_eq!(none.show_or(0, 100.0, " %", "no job completed"), "— (no job completed)");
        assert_eq!(Summary::of(&[0.5]).show_or(0, 100.0, " %", "unused"), "50 %");
        let c = Claim { claim: "c", paper: "p", expect: Expect::AtMost(1.0), decimals: 0, scale: 100.0, unit: " %", why: "w" };
        let r = c.check(&[f64::NAN; 3]);
        assert_eq!((r.ours.as_str(), r.held, r.verdict), ("— (no seed gave a value)", 0, Verdict::Fails));
        assert_eq!(r.none_because("no job completed on any seed").ours, "— (no job completed on any seed)");
        assert_eq!(c.check(&[0.5]).none_because("unused").ours, "50 %");
    }
}
