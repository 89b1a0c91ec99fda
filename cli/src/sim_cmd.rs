//! `lull sim`: runs one of the seeds' experiments on Lull's own policy and scheduler in
//! virtual time (the `lull-sim` crate) and writes its Markdown report and SVG plots.

use anyhow::{Context, Result};
use clap::Args;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct SimArgs {
    /// The experiment: winner (seed 002's six algorithms), now (seed 004's availability
    /// definitions and recruitment threshold), linger (seed 000's IE/PM/LL/LF), memory
    /// (seed 001's migration choices and thresholds), reserve (seed 003's instant
    /// recruitment with a reserve) or generator (the synthetic owners' statistics).
    #[arg(value_parser = clap::builder::PossibleValuesParser::new(lull_sim::EXPERIMENTS))]
    pub experiment: String,
    /// Seed of every random choice: the same seed gives the same report, byte for byte.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Directory for the report (NAME.md) and its plots.
    #[arg(long, default_value = "docs/experiments")]
    pub out: PathBuf,
    /// A quick, smaller run (for a first look; the committed reports are full runs).
    #[arg(long)]
    pub small: bool,
    /// Simulation runs at once: the experiment's independent runs go to this many threads
    /// (default: every core this process may use). The report is the same, byte for byte,
    /// on any number; one run still uses one core.
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub threads: Option<u16>,
    /// Print where the report went as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(a: SimArgs) -> Result<()> {
    let scale = if a.small { lull_sim::Scale::Small } else { lull_sim::Scale::Full };
    let bar = indicatif::ProgressBar::new(1);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{msg} {bar:40} {pos}/{len} runs, {elapsed}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    bar.set_message(format!("simulating {}", a.experiment));
    let threads = a.threads.map_or_else(lull_sim::parallel::default_threads, usize::from);
    let report = lull_sim::run_experiment(&a.experiment, a.seed, scale, threads, &mut |done, total| {
        bar.set_length(total.max(1));
        bar.set_position(done);
    })
    .with_context(|| format!("experiment {}", a.experiment))?;
    bar.finish_and_clear();
    report.write_to(&a.out).with_context(|| format!("writing the report to {}", a.out.display()))?;
    let md = a.out.join(format!("{}.md", report.name));
    let plots: Vec<PathBuf> = report.svgs.iter().map(|(f, _)| a.out.join(f)).collect();
    if a.json {
        outln!("{}", serde_json::json!({"experiment": report.name, "seed": a.seed, "threads": threads, "report": md, "plots": plots}));
    } else {
        outln!("{}", md.display());
        errln!("{} plot(s) beside it; seed {}, {threads} thread(s)", plots.len(), a.seed);
    }
    Ok(())
}
