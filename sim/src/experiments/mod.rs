//! The seeds' experiments as named runs. Each returns a [`Report`]: Markdown with the
//! paper's figures beside ours, and SVG plots the Markdown links to by file name.
//!
//! ```no_run
//! use lull_sim::{run_experiment, Scale};
//! let opts = lull_sim::Options::new(1, 10, Scale::Full, lull_sim::parallel::default_threads());
//! let report = run_experiment("winner", &opts, &mut |done, total| eprint!("\r{done}/{total}")).unwrap();
//! report.write_to(std::path::Path::new("docs/experiments")).unwrap();
//! ```
//!
//! | name | seed paper | what |
//! |---|---|---|
//! | `winner` | 002 (WINNER), §3.3 Figs. 2–8 | the six algorithms on the paper's scenarios, exact and fuzzy runtime estimates |
//! | `now` | 004 (NOW), Figs. 3, 7, 8 | owner delays per day for CPU-only, Condor-like and Lull's definition; recruitment-threshold and daily-limit sweeps |
//! | `linger` | 000 (Linger-Longer), Table 1, Figs. 7, 10 | IE, PM, LL, LF on 64 machines: owner delay ratio, harvested fraction, job time, throughput |
//! | `memory` | 001 (memory-centric), Figs. 2, 3 | migration choice by age, working set, page-fault rate, combined weight; CT/MT thresholds |
//! | `reserve` | 003 (mpidled), Table 1 | instant recruitment with no reserve vs x % reserve: mean speedup of parallel jobs |
//! | `generator` | 000 §4, 003 §3.1, 004 Fig. 1 | the owner-activity generator's statistics against the published ones |
//!
//! The same seeds give the same report, byte for byte. Every figure is the mean over N
//! seeds with its 95 % interval and every claim states the share of seeds where it holds
//! ([`claims`]).

pub mod claims;
pub mod generator;
pub mod linger;
pub mod memory;
pub mod now;
mod options;
mod report;
pub mod reserve;
pub mod winner;

pub use options::{Inputs, JobLog, Options, OwnerLog, Scale, DEFAULT_SEEDS};
pub use report::Report;

use crate::error::{Result, SimError};

/// The experiments [`run_experiment`] knows.
pub const EXPERIMENTS: [&str; 6] = ["winner", "now", "linger", "memory", "reserve", "generator"];

/// Which experiments take a job log (`--swf`) and which owner traces (`--fta`). `linger`
/// runs seed 000's two synthetic job families and `memory` seed 001's programs, which a
/// log cannot stand for.
pub const TAKES_JOBS: [&str; 2] = ["winner", "now"];
pub const TAKES_OWNERS: [&str; 2] = ["now", "reserve"];

/// Runs the named experiment over `opts.seeds` seeds, its independent simulation runs on
/// `opts.threads` workers ([`crate::parallel::map_runs`]; the report is the same on any
/// number). `progress(done, total)` is called as work units (single simulation runs)
/// finish, for a progress bar.
pub fn run_experiment(name: &str, opts: &Options, progress: &mut dyn FnMut(u64, u64)) -> Result<Report> {
    if opts.inputs.jobs.is_some() && !TAKES_JOBS.contains(&name) {
        return Err(SimError::Invalid(format!("{name} takes no job log (--swf is for {})", TAKES_JOBS.join(", "))));
    }
    if opts.inputs.owners.is_some() && !TAKES_OWNERS.contains(&name) {
        return Err(SimError::Invalid(format!("{name} takes no owner traces (--fta is for {})", TAKES_OWNERS.join(", "))));
    }
    if opts.seeds == 0 {
        return Err(SimError::Invalid("seeds: 0; at least 1 (10 by default)".into()));
    }
    match name {
        "winner" => winner::run(opts, progress),
        "now" => now::run(opts, progress),
        "generator" => generator::run(opts, progress),
        "linger" => linger::run(opts, progress),
        "memory" => memory::run(opts, progress),
        "reserve" => reserve::run(opts, progress),
        _ => Err(SimError::UnknownExperiment(name.into(), EXPERIMENTS.join(", "))),
    }
}

/// The index `lull sim all` writes (`docs/experiments/README.md`): every report, its tally, and every headline row.
pub fn index_markdown(reports: &[Report], opts: &Options) -> String {
    use std::fmt::Write;
    let mut md = String::new();
    let _ = writeln!(
        md,
        "# Experiments\n\nWritten by `lull sim all --seed {} --seeds {}{}` (release build; the command regenerates this file and every report beside it, byte for byte). Each report runs Lull's own policy, scheduler, recruiter and memory choice on the seed papers' experiments over {} independent seeds, and checks each of the paper's claims on every seed: **yes** when it holds on at least 80 % of the seeds, **mixed** on 20–80 %, **no** below. Rows from variants of ours (not the paper's parameters) are in the reports, not counted here. `lull sim winner --swf sim/testdata/UniLu-Gaia-2014-2.swf.gz` writes [winner-UniLu-Gaia-2014-2.md](winner-UniLu-Gaia-2014-2.md), the same algorithms on a real log.\n",
        opts.first_seed,
        opts.seeds,
        if opts.scale == Scale::Small { " --small" } else { "" },
        opts.seeds
    );
    let _ = writeln!(md, "| report | seed paper | the paper's claims that hold |\n|---|---|---|");
    for r in reports {
        let paper: Vec<&claims::Row> = r.rows.iter().filter(|x| !x.variant).collect();
        let holds = paper.iter().filter(|x| x.verdict == claims::Verdict::Holds).count();
        let mixed = paper.iter().filter(|x| x.verdict == claims::Verdict::Mixed).count();
        let seed = match r.name.as_str() {
            "winner" => "002 (WINNER) §3.3, §5",
            "now" => "004 (NOW) Figs. 3, 4, 7–9, Table 2",
            "linger" => "000 (Linger-Longer) Table 1, Figs. 7, 8, 11",
            "memory" => "001 (memory-centric) Figs. 2, 3",
            "reserve" => "003 (mpidled) Table 1",
            _ => "000 §4, 003 §3.1, 004 Fig. 1",
        };
        let _ = writeln!(
            md,
            "| [{name}.md]({name}.md) | {seed} | {holds} of {n} (and {mixed} on some seeds) |",
            name = r.name,
            n = paper.len()
        );
    }
    let _ = writeln!(md, "\n## Every claim, paper against ours\n\n| report | claim | paper | ours (mean [95 % interval]) | holds | why ours differs |\n|---|---|---|---|---|---|");
    for r in reports {
        for x in r.rows.iter().filter(|x| !x.variant) {
            let verdict = match x.verdict {
                claims::Verdict::Holds => "yes",
                claims::Verdict::Mixed => "mixed",
                claims::Verdict::Fails => "no",
            };
            let _ =
                writeln!(md, "| {} | {} | {} | {} | {verdict} ({}/{}) | {} |", r.name, x.claim, x.paper, x.ours, x.held, x.seeds, x.why);
        }
    }
    md
}
