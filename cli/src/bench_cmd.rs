//! `lull bench …`: benchmarks run as real processes and reported with medians, for
//! `docs/BENCHMARKS.md`. `lull bench idle` measures the agent's own cost while the
//! machine sits idle: CPU share of one core and resident memory of a real `lull agent`
//! child sampling at 1 Hz.

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[derive(Args, Debug)]
pub struct BenchArgs {
    #[command(subcommand)]
    pub which: Which,
}

#[derive(Subcommand, Debug)]
pub enum Which {
    /// The agent's own CPU and RSS while idle (goal: ≤ 0.03 % of a core, ≤ 12 MB).
    Idle(IdleArgs),
    /// Coordinator heartbeats/s and latency with N simulated agents over loopback
    /// (goal on SQLite: ≥ 20,000/s, p99 ≤ 10 ms with 10,000 agents).
    Heartbeats(crate::bench_heartbeats::HeartbeatArgs),
}

#[derive(Args, Debug)]
pub struct IdleArgs {
    /// How long to measure, seconds (the recorded figure uses 600).
    #[arg(long, default_value_t = 600)]
    pub seconds: u64,
    /// Sampling interval of the agent under test, ms.
    #[arg(long, default_value_t = 1000)]
    pub interval_ms: u64,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(a: BenchArgs) -> Result<()> {
    match a.which {
        Which::Idle(i) => idle(i),
        Which::Heartbeats(h) => crate::bench_heartbeats::run(h),
    }
}

/// CPU time of a process (all threads, live and exited), in ns, from /proc/PID/stat.
fn cpu_ns(pid: u32) -> Result<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).context("reading /proc/PID/stat")?;
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).context("malformed /proc/PID/stat")?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = f[11].parse::<u64>()? + f[12].parse::<u64>()?;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    Ok(ticks * 1_000_000_000 / hz)
}

/// On-CPU time of all live threads in ns, from /proc/PID/task/*/schedstat (finer than
/// clock ticks).
fn sched_ns(pid: u32) -> u64 {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return 0 };
    dir.flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("schedstat")).ok())
        .filter_map(|s| s.split_whitespace().next().and_then(|v| v.parse::<u64>().ok()))
        .sum()
}

fn status_kib(pid: u32, field: &str) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines().find(|l| l.starts_with(field))?.split_whitespace().nth(1)?.parse().ok()
}

fn median(v: &mut [u64]) -> u64 {
    v.sort_unstable();
    v.get(v.len() / 2).copied().unwrap_or(0)
}

fn idle(a: IdleArgs) -> Result<()> {
    if a.seconds < 10 {
        bail!("--seconds {} is too short: allowed 10..", a.seconds);
    }
    let dir = tempfile::tempdir().context("temporary agent directory")?;
    let cfg = dir.path().join("config.toml");
    std::fs::write(&cfg, format!("[sampling]\ninterval_ms = {}\n", a.interval_ms))?;
    let exe = std::env::current_exe()?;
    let mut child = Command::new(exe)
        .arg("agent")
        .env("LULL_CONFIG", &cfg)
        .env("LULL_DATA_DIR", dir.path())
        .env("LULL_SOCKET", dir.path().join("agent.sock"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .context("starting the agent under test")?;
    let pid = child.id();
    // Warm-up: start-up costs (opening the ledger, first sysinfo reading) are not idle.
    std::thread::sleep(Duration::from_secs(5));
    let (cpu0, sched0, t0) = (cpu_ns(pid)?, sched_ns(pid), Instant::now());
    let bar = indicatif::ProgressBar::new(a.seconds);
    bar.set_style(
        indicatif::ProgressStyle::with_template("measuring idle agent {bar:40} {pos}/{len} s")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    if a.json {
        bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    let mut rss = Vec::new();
    for _ in 0..a.seconds {
        std::thread::sleep(Duration::from_secs(1));
        if let Some(k) = status_kib(pid, "VmRSS:") {
            rss.push(k);
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    let wall = t0.elapsed().as_secs_f64();
    let (cpu1, sched1) = (cpu_ns(pid)?, sched_ns(pid));
    let hwm = status_kib(pid, "VmHWM:").unwrap_or(0);
    let threads = status_kib(pid, "Threads:").unwrap_or(0);
    let _ = child.kill();
    let _ = child.wait();
    let cpu_pct = (cpu1 - cpu0) as f64 / 1e9 / wall * 100.0;
    let sched_pct = sched1.saturating_sub(sched0) as f64 / 1e9 / wall * 100.0;
    let rss_med = median(&mut rss);
    let result = serde_json::json!({
        "seconds": wall,
        "interval_ms": a.interval_ms,
        "cpu_percent_of_one_core_ticks": cpu_pct,
        "cpu_percent_of_one_core_schedstat": sched_pct,
        "rss_median_kib": rss_med,
        "rss_peak_kib": hwm,
        "threads": threads,
        "goal": {"cpu_percent": 0.03, "rss_mib": 12},
    });
    if a.json {
        println!("{result}");
    } else {
        println!("idle agent over {wall:.0} s at {} ms sampling:", a.interval_ms);
        println!("  CPU  {sched_pct:.4} % of one core (schedstat), {cpu_pct:.4} % (clock ticks)  · goal ≤ 0.03 %");
        println!("  RSS  median {:.1} MiB, peak {:.1} MiB  · goal ≤ 12 MB", rss_med as f64 / 1024.0, hwm as f64 / 1024.0);
        println!("  threads {threads}");
    }
    Ok(())
}
