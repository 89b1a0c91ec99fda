//! The seeds' experiments as named runs. Each returns a [`Report`]: Markdown with the
//! paper's figures beside ours, and SVG plots the Markdown links to by file name.
//!
//! ```no_run
//! use lull_sim::{run_experiment, Scale};
//! let report = run_experiment("winner", 1, Scale::Full, lull_sim::parallel::default_threads(), &mut |done, total| eprint!("\r{done}/{total}")).unwrap();
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
//! The same seed gives the same report, byte for byte.

pub mod generator;
pub mod linger;
pub mod memory;
pub mod now;
pub mod reserve;
pub mod winner;

use crate::error::{Result, SimError};
use std::path::Path;

/// How big a run: `Full` for the committed reports, `Small` for tests (fewer
/// iterations, jobs and sweep points; same code).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scale {
    /// The committed report's size.
    Full,
    /// A quick run for tests.
    Small,
}

/// An experiment's output.
#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    /// The experiment's name (the Markdown file is `<name>.md`).
    pub name: String,
    /// The Markdown report.
    pub markdown: String,
    /// SVG plots: (file name, document).
    pub svgs: Vec<(String, String)>,
}

impl Report {
    /// Writes `<name>.md` and the SVGs into `dir`.
    pub fn write_to(&self, dir: &Path) -> std::io::Result<()> {
        std::fs::create_dir_all(dir)?;
        std::fs::write(dir.join(format!("{}.md", self.name)), &self.markdown)?;
        for (f, s) in &self.svgs {
            std::fs::write(dir.join(f), s)?;
        }
        Ok(())
    }
}

/// The experiments [`run_experiment`] knows.
pub const EXPERIMENTS: [&str; 6] = ["winner", "now", "linger", "memory", "reserve", "generator"];

/// Runs the named experiment from `seed`, its independent simulation runs on `threads`
/// workers ([`crate::parallel::map_runs`]; the report is the same on any number).
/// `progress(done, total)` is called as work units (single simulation runs) finish, for a
/// progress bar.
pub fn run_experiment(name: &str, seed: u64, scale: Scale, threads: usize, progress: &mut dyn FnMut(u64, u64)) -> Result<Report> {
    match name {
        "winner" => winner::run(seed, scale, threads, progress),
        "now" => now::run(seed, scale, threads, progress),
        "generator" => generator::run(seed, scale, threads, progress),
        "linger" => linger::run(seed, scale, threads, progress),
        "memory" => memory::run(seed, scale, threads, progress),
        "reserve" => reserve::run(seed, scale, threads, progress),
        _ => Err(SimError::UnknownExperiment(name.into(), EXPERIMENTS.join(", "))),
    }
}

/// Formats seconds for tables: `12 345`.
pub(crate) fn secs(v: f64) -> String {
    let n = v.round() as i64;
    let s = n.abs().to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push('\u{202f}');
        }
        out.push(c);
    }
    if n < 0 {
        format!("-{out}")
    } else {
        out
    }
}
