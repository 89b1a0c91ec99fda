//! `generator`: the owner-activity generator's statistics beside the published ones
//! (seed 000 §4, seed 003 §3.1, seed 004 Fig. 1), over the seeds, with the hourly
//! activity shape plotted against the shape the generator was given.

use super::claims::{self, Claim, Expect, Summary};
use super::options::{Options, Scale};
use super::report::{preamble, Report};
use crate::error::Result;
use crate::gen::{generate, Counts, GenParams, HOURLY_ACTIVITY, TARGETS};
use lull_core::chart::Chart;
use std::fmt::Write;

/// Runs the experiment: per seed, `machines × days` generated machine-days.
pub fn run(opts: &Options, progress: &mut dyn FnMut(u64, u64)) -> Result<Report> {
    let (machines, days) = if opts.scale == Scale::Small { (4u64, 1u32) } else { (60, 7) };
    let p = GenParams::default();
    let per_seed = claims::over_seeds(
        opts,
        |_| (0..machines).collect::<Vec<u64>>(),
        progress,
        // Each machine's trace is counted and dropped at once: keeping every seed's traces
        // took 5.7 GB at 10 seeds.
        |seed, &i| Ok(Counts::of(&generate(&p, seed, i, 1_767_225_600, days))),
    )?;
    let st: Vec<crate::gen::Stats> = per_seed.iter().map(|counts| counts.iter().sum::<Counts>().stats()).collect();
    let mut md = String::new();
    preamble(&mut md, "`generator` — synthetic owner activity against the published statistics", "generator", opts);
    let _ = writeln!(md, "Per seed: {machines} machines × {days} day(s) of 1-s samples from `lull_sim::gen::generate` with its default parameters, which were fitted to these statistics (so agreement here is a check of the fit, not evidence about the papers). Definitions as in `sim/src/gen.rs`.\n");
    let rows: Vec<claims::Row> = TARGETS
        .iter()
        .enumerate()
        .map(|(k, t)| {
            Claim {
                claim: &format!("{} ({})", t.name, t.source),
                paper: &format!("{:.1} %", t.value * 100.0),
                expect: Expect::Near { claimed: t.value, tol: t.tolerance },
                decimals: 1,
                scale: 100.0,
                unit: " %",
                why: "the generator's parameters were fitted to this figure",
            }
            .check(&st.iter().map(|s| s.values()[k]).collect::<Vec<_>>())
        })
        .collect();
    claims::table(&mut md, &rows);
    let file = "generator-hourly.svg".to_string();
    let _ = writeln!(md, "![hourly input activity]({file})\n");
    let hourly: Vec<(f64, f64)> =
        (0..24).map(|h| (h as f64, Summary::of(&st.iter().map(|s| s.hourly_input[h]).collect::<Vec<_>>()).mean * 100.0)).collect();
    let chart = Chart::new("Keyboard and mouse activity by hour (cf. seed 004 Fig. 1)", "hour of day", "% of all activity")
        .line("shape given (Fig. 1 reading)", HOURLY_ACTIVITY.iter().enumerate().map(|(h, v)| (h as f64, *v)).collect())
        .line("generated (mean of seeds)", hourly);
    Ok(Report { name: opts.report_name("generator"), markdown: md, svgs: vec![(file, chart.to_svg())], rows })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_report_lists_every_target() {
        let r = run(&Options::new(1, 2, Scale::Small, 1), &mut |_, _| {}).unwrap();
        for t in TARGETS {
            assert!(r.markdown.contains(t.name), "{}", t.name);
        }
        assert_eq!(r.svgs.len(), 1);
        assert_eq!(r.rows.len(), TARGETS.len());
    }
}
