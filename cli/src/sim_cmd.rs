//! `lull sim`: runs the seeds' experiments on Lull's own policy and scheduler in virtual
//! time (the `lull-sim` crate) over many seeds and writes each Markdown report and its SVG
//! plots; `all` runs the whole set and writes the index (`docs/experiments/README.md`).
//! Real traces come in with `--swf` (jobs) and `--fta` (machines), plain or gzipped.

use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use lull_sim::experiments::claims::{Row, Verdict};
use lull_sim::input::{log_name, BadLines, Skipped};
use lull_sim::{Inputs, JobLog, Options, OwnerLog, Report, Scale};
use std::path::{Path, PathBuf};

#[derive(Args, Debug)]
pub struct SimArgs {
    /// The experiment: winner (seed 002's six algorithms), now (seed 004's availability
    /// definitions, threshold, contract, migration cost), linger (seed 000's IE/PM/LL/LF,
    /// dispatch-level delay, parallel jobs), memory (seed 001's migration choices and
    /// thresholds), reserve (seed 003's instant recruitment with a reserve), generator (the
    /// synthetic owners' statistics), or all of them (`all`, which also writes the index).
    #[arg(value_parser = experiment_names())]
    pub experiment: String,
    /// The first seed: the run uses seeds SEED, SEED+1, … (the same seeds give the same
    /// reports, byte for byte).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Independent seeds; every figure is their mean with its 95 % interval and every
    /// claim says on how many of them it holds.
    #[arg(long, default_value_t = lull_sim::DEFAULT_SEEDS as u16, value_parser = clap::value_parser!(u16).range(1..=1000))]
    pub seeds: u16,
    /// Directory for the reports (NAME.md) and their plots.
    #[arg(long, default_value = "docs/experiments")]
    pub out: PathBuf,
    /// A first look in seconds: the same code on smaller inputs that still give real
    /// figures (each report says what it changed; the committed reports are full runs).
    #[arg(long)]
    pub small: bool,
    /// Simulation runs at once (default: every core this process may use). The reports
    /// are the same, byte for byte, on any number; one run still uses one core.
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub threads: Option<u16>,
    /// A job log in the Standard Workload Format (Parallel Workloads Archive), plain or
    /// .gz, for the experiments that take jobs (winner, now); the report is
    /// NAME-<log>.md.
    #[arg(long, value_name = "FILE")]
    pub swf: Option<PathBuf>,
    /// Machines' availability from a Failure Trace Archive `event_trace` file, plain or
    /// .gz, for the experiments that take machines (now, reserve).
    #[arg(long, value_name = "FILE")]
    pub fta: Option<PathBuf>,
    /// Seconds per sample when reading --fta.
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u32).range(1..=3600))]
    pub fta_step: u32,
    /// A malformed line in --swf or --fta: refuse the file (naming the line), or skip it
    /// and list it.
    #[arg(long, value_enum, default_value_t = OnBadLine::Refuse)]
    pub bad_lines: OnBadLine,
    /// Print each report's path, its plots and its claims (paper, ours, verdict, share of
    /// seeds, why) as JSON, one object per line.
    #[arg(long)]
    pub json: bool,
}

/// What `--bad-lines` does with a malformed line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum OnBadLine {
    /// Refuse the file at the first malformed line.
    Refuse,
    /// Skip malformed lines and list them.
    Skip,
}

fn experiment_names() -> clap::builder::PossibleValuesParser {
    clap::builder::PossibleValuesParser::new(lull_sim::EXPERIMENTS.iter().copied().chain(["all"]))
}

pub fn run(a: SimArgs) -> Result<()> {
    let bad = match a.bad_lines {
        OnBadLine::Refuse => BadLines::Refuse,
        OnBadLine::Skip => BadLines::Skip,
    };
    let inputs = Inputs {
        jobs: a.swf.as_deref().map(|p| job_log(p, bad)).transpose()?,
        owners: a.fta.as_deref().map(|p| owner_log(p, a.fta_step, bad)).transpose()?,
    };
    let threads = a.threads.map_or_else(lull_sim::parallel::default_threads, usize::from);
    let opts =
        Options { first_seed: a.seed, seeds: a.seeds as usize, scale: if a.small { Scale::Small } else { Scale::Full }, threads, inputs };
    let names: Vec<&str> = if a.experiment == "all" {
        if opts.inputs.jobs.is_some() || opts.inputs.owners.is_some() {
            bail!(
                "`lull sim all` runs the committed set on generated inputs; give --swf or --fta to one experiment (jobs: {}; machines: {})",
                lull_sim::experiments::TAKES_JOBS.join(", "),
                lull_sim::experiments::TAKES_OWNERS.join(", ")
            );
        }
        lull_sim::EXPERIMENTS.to_vec()
    } else {
        vec![a.experiment.as_str()]
    };
    let started = std::time::Instant::now();
    let mut reports = Vec::new();
    for name in names {
        let report = run_one(name, &opts, a.json)?;
        report.write_to(&a.out).with_context(|| format!("writing the report to {}", a.out.display()))?;
        print_report(&report, &a.out, &opts, a.json);
        reports.push(report);
    }
    if a.experiment == "all" {
        let index = a.out.join("README.md");
        std::fs::write(&index, lull_sim::experiments::index_markdown(&reports, &opts))
            .with_context(|| format!("writing {}", index.display()))?;
        if !a.json {
            errln!(
                "{} experiment(s), {} seed(s), {threads} thread(s): {:.0} s; index {}",
                reports.len(),
                opts.seeds,
                started.elapsed().as_secs_f64(),
                index.display()
            );
        }
    }
    Ok(())
}

/// One experiment with a progress bar (hidden under --json).
fn run_one(name: &str, opts: &Options, json: bool) -> Result<Report> {
    let bar = if json { indicatif::ProgressBar::hidden() } else { indicatif::ProgressBar::new(1) };
    bar.set_style(
        indicatif::ProgressStyle::with_template("{msg} {bar:40} {pos}/{len} runs, {elapsed} (eta {eta})")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    bar.set_message(format!("simulating {name}, {} seed(s)", opts.seeds));
    let report = lull_sim::run_experiment(name, opts, &mut |done, total| {
        bar.set_length(total.max(1));
        bar.set_position(done);
    })
    .with_context(|| format!("experiment {name}"))?;
    bar.finish_and_clear();
    Ok(report)
}

fn print_report(report: &Report, out: &Path, opts: &Options, json: bool) {
    let md = out.join(format!("{}.md", report.name));
    let plots: Vec<PathBuf> = report.svgs.iter().map(|(f, _)| out.join(f)).collect();
    if json {
        outln!(
            "{}",
            serde_json::json!({"experiment": report.name, "first_seed": opts.first_seed, "seeds": opts.seeds, "threads": opts.threads, "report": md, "plots": plots, "claims": report.rows})
        );
    } else {
        outln!("{}", md.display());
        let paper: Vec<&Row> = report.rows.iter().filter(|r| !r.variant).collect();
        let holds = paper.iter().filter(|r| r.verdict == Verdict::Holds).count();
        errln!(
            "  {} plot(s) beside it; {holds} of {} of the paper's claims hold on ≥ 80 % of {} seed(s)",
            plots.len(),
            paper.len(),
            opts.seeds
        );
        out!("{}", first_look(&paper));
    }
}

/// The paper's claims as a compact table (claim, paper, ours, holds), so a run shows its
/// results without opening the report; the report has the tolerances and the reasons.
fn first_look(rows: &[&Row]) -> String {
    use std::fmt::Write as _;
    if rows.is_empty() {
        return String::new();
    }
    // A claim without its "(ours: …)" tolerance, cut to fit a terminal.
    let claim = |r: &Row| fit(r.claim.split(" (ours:").next().unwrap_or(&r.claim), 60);
    let paper = |r: &Row| fit(&r.paper, 18);
    let width = |f: &dyn Fn(&Row) -> String| rows.iter().map(|r| f(r).chars().count()).max().unwrap_or(0);
    let (wc, wp) = (width(&claim).max(5), width(&paper).max(5));
    let wo = rows.iter().map(|r| r.ours.chars().count()).max().unwrap_or(0).clamp(4, 28);
    let mut s = String::new();
    let _ = writeln!(s, "  {:wc$}  {:wp$}  {:wo$}  holds", "claim", "paper", "ours");
    for r in rows {
        let holds = match r.verdict {
            Verdict::Holds => "yes",
            Verdict::Mixed => "mixed",
            Verdict::Fails => "no",
        };
        let _ = writeln!(s, "  {:wc$}  {:wp$}  {:wo$}  {holds} ({}/{})", claim(r), paper(r), r.ours, r.held, r.seeds);
    }
    s
}

/// `s` cut to `n` characters, ending in "…" when cut.
fn fit(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        format!("{}…", s.chars().take(n - 1).collect::<String>())
    }
}

/// Reads `--swf`, naming the file and line on error and listing skipped lines.
fn job_log(path: &Path, bad: BadLines) -> Result<JobLog> {
    let (log, skipped) = lull_sim::swf::read_swf_with(path, bad).with_context(|| format!("reading the job log {}", path.display()))?;
    note_skipped(path, &skipped);
    let mut jobs = log.job_log(&log_name(path));
    jobs.about.push_str(&skipped_note(&skipped));
    Ok(jobs)
}

/// Reads `--fta` at `step` seconds per sample.
fn owner_log(path: &Path, step: u32, bad: BadLines) -> Result<OwnerLog> {
    let (traces, skipped) =
        lull_sim::fta::read_fta_with(path, step, bad).with_context(|| format!("reading the availability trace {}", path.display()))?;
    note_skipped(path, &skipped);
    let name = log_name(path);
    Ok(OwnerLog {
        about: format!(
            "{name}: Failure Trace Archive availability, {} machines at {step}-s samples{}",
            traces.len(),
            skipped_note(&skipped)
        ),
        name,
        traces,
    })
}

/// What the report says about skipped lines, so a report never hides that its input was
/// partial: empty when none was skipped.
fn skipped_note(skipped: &[Skipped]) -> String {
    if skipped.is_empty() {
        return String::new();
    }
    let lines: Vec<String> = skipped.iter().take(10).map(|s| s.line.to_string()).collect();
    let more = if skipped.len() > 10 { ", …" } else { "" };
    format!("; {} malformed line(s) skipped (--bad-lines skip): line {}{more}", skipped.len(), lines.join(", "))
}

fn note_skipped(path: &Path, skipped: &[Skipped]) {
    if skipped.is_empty() {
        return;
    }
    errln!("{}: skipped {} malformed line(s):", path.display(), skipped.len());
    for s in skipped.iter().take(20) {
        errln!("  line {}: {}", s.line, s.reason);
    }
    if skipped.len() > 20 {
        errln!("  … and {} more", skipped.len() - 20);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lull_sim::experiments::claims::{Claim, Expect};

    #[test]
    fn the_first_look_lists_each_claim_compactly_with_its_verdict() {
        let long = Claim {
            claim: "§3.2: with the CPU-only definition one unlucky user is delayed 80 times a day, a claim far too long for one terminal line (ours: the worst owner, ±50 %)",
            paper: "80",
            expect: Expect::Near { claimed: 80.0, tol: 40.0 },
            decimals: 1,
            scale: 1.0,
            unit: "",
            why: "w",
        }
        .check(&[11.0, 12.0]);
        let short =
            Claim {
                claim: "§3.5: bounded by N", paper: "≤ N", expect: Expect::AtMost(5.0), decimals: 1, scale: 1.0, unit: "", why: "w"
            }
            .check(&[5.0, 5.0]);
        let table = first_look(&[&long, &short]);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 3, "{table}");
        assert!(lines[0].contains("claim") && lines[0].contains("paper") && lines[0].contains("ours") && lines[0].ends_with("holds"));
        assert!(
            lines[1].contains("§3.2: with the CPU-only definition") && lines[1].contains('…') && !lines[1].contains("(ours:"),
            "{table}"
        );
        assert!(lines[1].contains("11.5 [") && lines[1].ends_with("no (0/2)"), "{table}");
        assert!(lines[2].contains("§3.5: bounded by N") && lines[2].ends_with("yes (2/2)"), "{table}");
        assert!(lines.iter().all(|l| l.chars().count() <= 130), "{table}");
        assert_eq!(first_look(&[]), "");
    }
}
