//! Runs one named experiment (or `all`) and writes its report without the CLI:
//! `cargo run --release -p lull-sim --example experiment -- NAME|all [SEED] [DIR] [--small] [--seeds N] [--swf FILE]`
//! (DIR defaults to `docs/experiments`). `lull sim` does the same with a progress bar,
//! `--fta`, `--bad-lines` and `--json`; both call `lull_sim::run_experiment`, so they
//! write the same files.

use lull_sim::{run_experiment, Options, Scale, DEFAULT_SEEDS, EXPERIMENTS};
use std::io::Write;
use std::path::{Path, PathBuf};

fn flag<'a>(args: &'a [String], name: &str) -> Option<&'a String> {
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1))
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let small = args.iter().any(|a| a == "--small");
    let seeds = flag(&args, "--seeds").map_or(DEFAULT_SEEDS, |s| s.parse().expect("--seeds N"));
    let pos: Vec<&String> = args
        .iter()
        .enumerate()
        .filter(|(i, a)| !a.starts_with("--") && (*i == 0 || !matches!(args[i - 1].as_str(), "--seeds" | "--swf")))
        .map(|(_, a)| a)
        .collect();
    let Some(name) = pos.first() else {
        eprintln!("usage: experiment NAME|all [SEED] [DIR] [--small] [--seeds N] [--swf FILE]; names: {}", EXPERIMENTS.join(", "));
        std::process::exit(2);
    };
    let seed: u64 = pos.get(1).map(|s| s.parse().expect("SEED is a number")).unwrap_or(1);
    let dir = PathBuf::from(pos.get(2).map(|s| s.as_str()).unwrap_or("docs/experiments"));
    let mut opts = Options::new(seed, seeds, if small { Scale::Small } else { Scale::Full }, lull_sim::parallel::default_threads());
    if let Some(f) = flag(&args, "--swf") {
        let log = lull_sim::swf::read_swf(Path::new(f)).unwrap_or_else(|e| {
            eprintln!("{e}");
            std::process::exit(1);
        });
        opts.inputs.jobs = Some(log.job_log(&lull_sim::input::log_name(Path::new(f))));
    }
    let all = name.as_str() == "all";
    let names: Vec<&str> = if all { EXPERIMENTS.to_vec() } else { vec![name.as_str()] };
    let started_all = std::time::Instant::now();
    let mut reports = Vec::new();
    for n in names {
        let started = std::time::Instant::now();
        let report = run_experiment(n, &opts, &mut |done, total| {
            eprint!("\r{n}: {done}/{total} runs, {:.0} s", started.elapsed().as_secs_f64());
            let _ = std::io::stderr().flush();
        })
        .unwrap_or_else(|e| {
            eprintln!("\n{n}: {e}");
            std::process::exit(1);
        });
        report.write_to(&dir).expect("write the report");
        eprintln!(
            "\nwrote {}/{}.md and {} plot(s) in {:.1} s",
            dir.display(),
            report.name,
            report.svgs.len(),
            started.elapsed().as_secs_f64()
        );
        reports.push(report);
    }
    if all {
        std::fs::write(dir.join("README.md"), lull_sim::experiments::index_markdown(&reports, &opts)).expect("write the index");
        eprintln!("all: {:.1} s", started_all.elapsed().as_secs_f64());
    }
}
