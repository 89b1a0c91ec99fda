//! Runs one named experiment and writes its report: until `lull sim` is wired in the
//! CLI, `cargo run --release -p lull-sim --example experiment -- NAME [SEED] [DIR] [--small]`
//! (DIR defaults to `docs/experiments`). Progress goes to stderr.

use lull_sim::{run_experiment, Scale};
use std::io::Write;
use std::path::PathBuf;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let small = args.iter().any(|a| a == "--small");
    let pos: Vec<&String> = args.iter().filter(|a| !a.starts_with("--")).collect();
    let Some(name) = pos.first() else {
        eprintln!("usage: experiment NAME [SEED] [DIR] [--small]; names: {}", lull_sim::EXPERIMENTS.join(", "));
        std::process::exit(2);
    };
    let seed: u64 = pos.get(1).map(|s| s.parse().expect("SEED is a number")).unwrap_or(1);
    let dir = PathBuf::from(pos.get(2).map(|s| s.as_str()).unwrap_or("docs/experiments"));
    let scale = if small { Scale::Small } else { Scale::Full };
    let started = std::time::Instant::now();
    let report = run_experiment(name, seed, scale, lull_sim::parallel::default_threads(), &mut |done, total| {
        let w = 40;
        let filled = (done * w / total.max(1)) as usize;
        eprint!("\r[{}{}] {done}/{total} {:.0}s", "#".repeat(filled), " ".repeat(w as usize - filled), started.elapsed().as_secs_f64());
        let _ = std::io::stderr().flush();
    })
    .unwrap_or_else(|e| {
        eprintln!("\n{name}: {e}");
        std::process::exit(1);
    });
    eprintln!();
    report.write_to(&dir).expect("write the report");
    eprintln!("wrote {}/{}.md and {} plot(s)", dir.display(), report.name, report.svgs.len());
}
