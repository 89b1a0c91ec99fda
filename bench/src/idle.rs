//! `lull-bench idle`: the agent's own cost while the machine sits idle: CPU share of one
//! core and resident memory of a real `lull agent` (or `lull-tray`) child sampling at 1 Hz.

use anyhow::{bail, Context, Result};
use clap::Args;
use lull_e2e::coordinator::Coordinator;
use lull_e2e::process::terminate;
use lull_e2e::{lull_bin, purge_cgroup_base};
use std::process::Command;
use std::time::{Duration, Instant};

#[derive(Args, Debug)]
pub struct IdleArgs {
    /// How long to measure, seconds (the recorded figure uses 600).
    #[arg(long, default_value_t = 600)]
    pub seconds: u64,
    /// Sampling interval of the agent under test, ms.
    #[arg(long, default_value_t = 1000)]
    pub interval_ms: u64,
    /// The agents' recruitment threshold, s: short by default, so that what is measured
    /// is the state an idle machine spends most of its time in (recruitable, and when
    /// enrolled holding a lease poll); the warm-up waits it out.
    #[arg(long, default_value_t = 5)]
    pub recruitment_threshold_s: u64,
    /// Also run, side by side over the same seconds, an agent whose sampling tick is
    /// driven by tokio's timer instead of the kernel timer (LULL_TOKIO_TICK=1).
    #[arg(long)]
    pub compare_tokio_tick: bool,
    /// Owner presence beyond the desktop (issue 15) side by side: the agents measured run
    /// the terminal backend (`LULL_INPUT=terminal`) and watch three exclusive programs
    /// (`steam`, `zoom`, `blender`), beside one more `lull agent` with neither
    /// (`LULL_INPUT=none`, no list).
    #[arg(long)]
    pub compare_presence: bool,
    /// Agents to measure side by side: agent (`lull agent`), tray (`lull-tray`, built
    /// beside this binary; needs $DISPLAY with a tray host such as trayer).
    #[arg(long, default_value = "agent", value_delimiter = ',')]
    pub agents: Vec<String>,
    /// Enrol every agent to a coordinator started for the run (`lull coordinator serve`
    /// on loopback), so its link, heartbeats and lease polling are part of the figure.
    #[arg(long)]
    pub enrolled: bool,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

/// CPU time of a process (all threads, live and exited), in ns (0 once it is gone).
fn cpu_ns(pid: u32) -> u64 {
    lull_e2e::cpu_ticks(pid as i32) * 1_000_000_000 / lull_e2e::process::clock_ticks_per_s()
}

/// On-CPU ns and wake-ups (voluntary + involuntary context switches) of each live
/// thread, by thread id, with its name: from /proc/PID/task/*/{schedstat,status,comm}
/// (schedstat is finer than clock ticks).
fn threads(pid: u32) -> std::collections::BTreeMap<u32, (String, u64, u64)> {
    let mut out = std::collections::BTreeMap::new();
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return out };
    for t in dir.flatten() {
        let Some(tid) = t.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
        let read = |f: &str| std::fs::read_to_string(t.path().join(f)).unwrap_or_default();
        let ns = read("schedstat").split_whitespace().next().and_then(|v| v.parse().ok()).unwrap_or(0);
        let switches: u64 = read("status")
            .lines()
            .filter(|l| l.starts_with("voluntary_ctxt_switches:") || l.starts_with("nonvoluntary_ctxt_switches:"))
            .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
            .sum();
        out.insert(tid, (read("comm").trim().to_owned(), ns, switches));
    }
    out
}

/// `pid` and all its descendants (from each process's parent in /proc/*/stat).
fn tree(pid: u32) -> Vec<u32> {
    let parents: Vec<(u32, u32)> = std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let p: u32 = e.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
            let ppid = stat.rsplit_once(')')?.1.split_whitespace().nth(1)?.parse().ok()?;
            Some((p, ppid))
        })
        .collect();
    let mut out = vec![pid];
    let mut i = 0;
    while i < out.len() {
        let parent = out[i];
        out.extend(parents.iter().filter(|(_, pp)| *pp == parent).map(|(p, _)| *p));
        i += 1;
    }
    out
}

fn status_kib(pid: u32, field: &str) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines().find(|l| l.starts_with(field))?.split_whitespace().nth(1)?.parse().ok()
}

/// The median (the harness's rounded rank: the upper middle of an even count).
fn median(v: &mut [u64]) -> u64 {
    v.sort_unstable();
    lull_e2e::percentile::of_sorted(v, 0.5).unwrap_or(0)
}

/// The idle agent's RSS goal: 12 MB (decimal), 11.44 MiB.
const RSS_GOAL_BYTES: u64 = 12_000_000;
/// The idle agent's CPU goal, % of one core.
const CPU_GOAL_PERCENT: f64 = 0.03;

/// One agent under measurement.
struct IdleAgent {
    label: &'static str,
    /// Its cgroup base, removed when it has ended.
    base: String,
    child: std::process::Child,
    _dir: tempfile::TempDir,
    cpu0: u64,
    threads0: std::collections::BTreeMap<u32, (String, u64, u64)>,
    rss: Vec<u64>,
    anon: Vec<u64>,
    file: Vec<u64>,
}

impl IdleAgent {
    /// Starts `kind` (`agent` or `tray`) in a directory of its own, with its own cgroup
    /// base; enrolled to `pool` when given.
    fn start(
        label: &'static str,
        kind: &str,
        args: &IdleArgs,
        tokio_tick: bool,
        presence: Option<bool>,
        pool: Option<&Coordinator>,
        n: usize,
    ) -> Result<Self> {
        use crate::owner_return::machine_env;
        let dir = tempfile::tempdir().context("temporary agent directory")?;
        let mut config = format!(
            "[sampling]\ninterval_ms = {}\n[availability]\nrecruitment_threshold_s = {}\n",
            args.interval_ms, args.recruitment_threshold_s
        );
        if presence == Some(true) {
            config.push_str("[rules]\nexclusive_programs = [\"steam\", \"zoom\", \"blender\"]\n");
        }
        std::fs::write(dir.path().join("config.toml"), config)?;
        let lull = lull_bin();
        let base = format!("lull-bench-idle-{}-{n}", std::process::id());
        if let Some(pool) = pool {
            pool.enrol(dir.path(), "bench", &format!("bench-idle-{kind}"))?;
        }
        let display = std::env::var("DISPLAY").unwrap_or_default();
        let mut cmd = match kind {
            "agent" => {
                let mut c = Command::new(&lull);
                c.arg("agent");
                c
            }
            "tray" => {
                let tray = lull.with_file_name("lull-tray");
                if !tray.exists() {
                    bail!("{} is missing: build it first (cargo build --release -p lull-tray)", tray.display());
                }
                if display.is_empty() {
                    bail!("--agents tray needs $DISPLAY (an X server with a tray host such as trayer)");
                }
                Command::new(tray)
            }
            other => bail!("--agents: unknown agent {other:?} (allowed: agent, tray)"),
        };
        machine_env(&mut cmd, dir.path(), &base, &display);
        cmd.env_remove(agent_core::agent::TOKIO_TICK_ENV);
        if tokio_tick {
            cmd.env(agent_core::agent::TOKIO_TICK_ENV, "1");
        }
        match presence {
            Some(true) => cmd.env(agent_core::input::OVERRIDE_ENV, "terminal"),
            Some(false) => cmd.env(agent_core::input::OVERRIDE_ENV, "none"),
            None => &mut cmd,
        };
        // Through the harness: ended with the bench, and ready (answering on its socket,
        // linked when enrolled) before the warm-up starts.
        let socket = dir.path().join("agent.sock");
        let child = lull_e2e::try_start_agent(&mut cmd, &socket, Duration::from_secs(60), |s| pool.is_none() || s.coordinator.is_some())
            .with_context(|| format!("starting {label}"))?;
        Ok(Self { label, base, child, _dir: dir, cpu0: 0, threads0: Default::default(), rss: vec![], anon: vec![], file: vec![] })
    }

    /// CPU time of the agent and its descendants (the tray's or runtime's watchdog).
    fn cpu_ns(&self) -> u64 {
        tree(self.child.id()).into_iter().map(cpu_ns).sum()
    }

    /// Every thread of the agent and its descendants.
    fn threads(&self) -> std::collections::BTreeMap<u32, (String, u64, u64)> {
        tree(self.child.id()).into_iter().flat_map(threads).collect()
    }

    fn begin(&mut self) -> Result<()> {
        self.cpu0 = self.cpu_ns();
        self.threads0 = self.threads();
        Ok(())
    }

    fn sample(&mut self) {
        let pid = self.child.id();
        self.rss.extend(status_kib(pid, "VmRSS:"));
        // The split: heap, stacks and other private memory vs mapped files (the binary's
        // code and data, shared libraries; shared with the page cache, reclaimable).
        self.anon.extend(status_kib(pid, "RssAnon:"));
        self.file.extend(status_kib(pid, "RssFile:"));
    }

    fn finish(mut self, wall: f64) -> Result<serde_json::Value> {
        let pid = self.child.id();
        let cpu1 = self.cpu_ns();
        let threads1 = self.threads();
        let hwm = status_kib(pid, "VmHWM:").unwrap_or(0);
        // SIGTERM: the agent ends its watchdog and guests' cgroups itself.
        terminate(&mut self.child, Duration::from_secs(20));
        purge_cgroup_base(&self.base);
        let per_s = |ns: u64| ns as f64 / 1e9 / wall * 100.0;
        let mut per_thread = Vec::new();
        let mut sched = 0;
        for (tid, (name, ns1, sw1)) in &threads1 {
            let (ns0, sw0) = self.threads0.get(tid).map_or((0, 0), |(_, n, s)| (*n, *s));
            let ns = ns1.saturating_sub(ns0);
            sched += ns;
            per_thread.push(serde_json::json!({
                "thread": name,
                "cpu_percent_of_one_core": per_s(ns),
                "wakeups_per_s": sw1.saturating_sub(sw0) as f64 / wall,
            }));
        }
        let (cpu_pct, sched_pct) = (per_s(cpu1.saturating_sub(self.cpu0)), per_s(sched));
        let rss_med = median(&mut self.rss);
        Ok(serde_json::json!({
            "agent": self.label,
            "cpu_percent_of_one_core_ticks": cpu_pct,
            "cpu_percent_of_one_core_schedstat": sched_pct,
            "rss_median_kib": rss_med,
            "rss_anon_median_kib": median(&mut self.anon),
            "rss_file_median_kib": median(&mut self.file),
            "rss_peak_kib": hwm,
            "threads": per_thread,
            "goal_met": {"cpu": sched_pct <= CPU_GOAL_PERCENT && cpu_pct <= CPU_GOAL_PERCENT, "rss": rss_med * 1024 <= RSS_GOAL_BYTES},
        }))
    }
}

pub fn run(a: IdleArgs) -> Result<()> {
    if a.seconds < 10 {
        bail!("--seconds {} is too short: allowed 10..", a.seconds);
    }
    let pool = if a.enrolled { Some(Coordinator::try_start(&[])?) } else { None };
    let mut agents = Vec::new();
    for kind in &a.agents {
        let label = match kind.as_str() {
            "tray" => "lull-tray",
            _ if a.compare_presence => "lull agent, presence on",
            _ => "lull agent",
        };
        let presence = a.compare_presence.then_some(true);
        agents.push(IdleAgent::start(label, kind, &a, false, presence, pool.as_ref(), agents.len())?);
    }
    if a.compare_tokio_tick {
        agents.push(IdleAgent::start("lull agent, tokio-timer tick", "agent", &a, true, None, pool.as_ref(), agents.len())?);
    }
    if a.compare_presence {
        agents.push(IdleAgent::start("lull agent, presence off", "agent", &a, false, Some(false), pool.as_ref(), agents.len())?);
    }
    // Warm-up: start-up costs (opening the ledger, first sysinfo reading, releasing
    // start-up pages after 3 s; the tray's GTK start and first status refresh; the first
    // heartbeat to the coordinator) are not idle.
    let warm_up = if a.agents.iter().any(|k| k == "tray") || a.enrolled { 15 } else { 5 } + a.recruitment_threshold_s;
    std::thread::sleep(Duration::from_secs(warm_up));
    for ag in &mut agents {
        ag.begin()?;
    }
    let t0 = Instant::now();
    let bar = indicatif::ProgressBar::new(a.seconds);
    bar.set_style(
        indicatif::ProgressStyle::with_template("measuring idle agent {bar:40} {pos}/{len} s")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    if a.json {
        bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    for _ in 0..a.seconds {
        std::thread::sleep(Duration::from_secs(1));
        for ag in &mut agents {
            ag.sample();
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    let wall = t0.elapsed().as_secs_f64();
    let results = agents.into_iter().map(|ag| ag.finish(wall)).collect::<Result<Vec<_>>>()?;
    drop(pool);
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let result = serde_json::json!({
        "seconds": wall,
        "interval_ms": a.interval_ms,
        "recruitment_threshold_s": a.recruitment_threshold_s,
        "enrolled": a.enrolled,
        "loadavg": load.split_whitespace().take(3).collect::<Vec<_>>().join(" "),
        // 12 MB = 12,000,000 bytes = 11.44 MiB; RSS figures here are KiB.
        "goal": {"cpu_percent": CPU_GOAL_PERCENT, "rss_mb": 12},
        "agents": results,
    });
    if a.json {
        outln!("{result}");
        return Ok(());
    }
    outln!("idle agents over {wall:.0} s at {} ms sampling, side by side:", a.interval_ms);
    for r in &results {
        let f = |k: &str| r[k].as_f64().unwrap_or(0.0);
        outln!("{}:", r["agent"].as_str().unwrap_or("?"));
        outln!(
            "  CPU  {:.4} % of one core (schedstat), {:.4} % (clock ticks)  · goal ≤ {CPU_GOAL_PERCENT} %",
            f("cpu_percent_of_one_core_schedstat"),
            f("cpu_percent_of_one_core_ticks")
        );
        outln!(
            "  RSS  median {:.2} MiB (anonymous {:.1}, file-backed {:.1}), peak {:.2} MiB  · goal ≤ 12 MB (11.44 MiB)",
            f("rss_median_kib") / 1024.0,
            f("rss_anon_median_kib") / 1024.0,
            f("rss_file_median_kib") / 1024.0,
            f("rss_peak_kib") / 1024.0
        );
        for t in r["threads"].as_array().into_iter().flatten() {
            outln!(
                "    thread {:<18} {:.4} %  {:.2} wake-ups/s",
                t["thread"].as_str().unwrap_or("?"),
                t["cpu_percent_of_one_core"].as_f64().unwrap_or(0.0),
                t["wakeups_per_s"].as_f64().unwrap_or(0.0)
            );
        }
    }
    outln!("load average at the end {}", load.trim());
    Ok(())
}
