//! `lull-bench placements`: the coordinator's scheduling path measured from outside, on a
//! real `lull coordinator serve` process (SQLite file or a fresh PostgreSQL database).
//!
//! N simulated agents are enrolled; each keeps one keep-alive loopback connection, sends
//! one heartbeat (available, idle for 10 min, budget left, 8 GiB free) and then long-polls
//! `POST /api/v1/lease` (`wait_ms` 30 s) in a loop: a lease received is kept (the task
//! "runs" for the rest of the run, the lease TTL is an hour) and the next poll opens at
//! once, so every agent always offers one free slot. Jobs (`true`, 64 MiB, estimate 60 s)
//! are submitted through `POST /api/v1/jobs` by separate keep-alive connections with an
//! admin key. Two phases on one coordinator:
//!
//! * **backlog**: the M jobs are submitted while no agent polls; a probe poll that fits no
//!   job (0 bytes free) returns once the scheduler has applied every submission; then every
//!   agent opens its poll at once. Placement rate = M / (first poll opened → last lease
//!   received); recruited→running latency = each poll's opening → its lease received
//!   (every poll opened while the queue still had work).
//! * **stream**: every agent already waits in a long poll; M more jobs are submitted as
//!   fast as the submitters go. Rate = M / (first submit sent → last lease received);
//!   latency = submit sent → lease received.
//!
//! Each rate is also given in steady state (the leases from the 10th to the 90th
//! percentile of arrival, over the time between them). Every job must be leased exactly
//! once: a job missing or received twice fails the run.

use crate::heartbeats::{metric, metrics_text, pct, post, BenchCoordinator, BenchDb, Http};
use anyhow::{bail, Context, Result};
use clap::Args;
use lull_e2e::process::cpu_seconds as cpu_s;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(Args, Debug)]
pub struct PlacementArgs {
    /// Simulated agents (each enrolled, each holding one long poll at a time).
    #[arg(long, default_value_t = 2000)]
    pub agents: usize,
    /// Jobs per phase.
    #[arg(long, default_value_t = 20_000)]
    pub jobs: usize,
    /// Phases to run, in order: backlog, stream (comma-separated).
    #[arg(long, default_value = "backlog,stream", value_delimiter = ',')]
    pub phases: Vec<String>,
    /// Concurrent keep-alive connections submitting jobs.
    #[arg(long, default_value_t = 8)]
    pub submitters: usize,
    /// The coordinator's scheduling algorithm (`lull coordinator serve --scheduler`).
    #[arg(long, default_value = "backfill")]
    pub scheduler: String,
    #[command(flatten)]
    pub db: BenchDb,
    /// Instead of simulated agents: this many real `lull agent` processes (each in a
    /// directory of its own, enrolled to a `lull coordinator serve` on SQLite), timed from
    /// their resume (paused → available) to their guest running. Needs root (cgroups).
    #[arg(long)]
    pub real_agents: Option<usize>,
    /// Rounds with `--real-agents`.
    #[arg(long, default_value_t = 20)]
    pub rounds: usize,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

const FREE_MEM: u64 = 8 << 30;
const JOB: &str = r#"{"command":"true","program":"bench","mem_bytes":67108864,"estimate_s":60}"#;

/// One lease an agent received.
#[derive(Clone, Copy, Debug)]
struct Got {
    job: i64,
    /// When the agent sent the poll that got it.
    opened: Instant,
    /// When the lease's last byte arrived.
    at: Instant,
}

/// What the agents share with the bench.
#[derive(Default)]
struct Shared {
    got: Mutex<Vec<Got>>,
    count: AtomicU64,
    non_200: AtomicU64,
}

/// The number after `"key":` in a JSON text (the first occurrence).
fn json_int(body: &[u8], key: &str) -> Option<i64> {
    let text = std::str::from_utf8(body).ok()?;
    let at = text.find(&format!("\"{key}\":"))? + key.len() + 3;
    let digits: String = text[at..].trim_start().chars().take_while(|c| c.is_ascii_digit() || *c == '-').collect();
    digits.parse().ok()
}

/// One simulated agent: a heartbeat, then (once `go` turns true) long polls forever.
async fn agent(addr: String, secret: String, mut go: tokio::sync::watch::Receiver<bool>, shared: Arc<Shared>) -> Result<()> {
    let mut http = Http::connect(&addr).await?;
    let hb = format!(
        r#"{{"state":"idle","available":true,"budget_left":5,"free_mem_bytes":{FREE_MEM},"base_speed":100.0,"current_speed":95.0,"idle_for_s":600}}"#
    );
    let (status, _) = http.call(&post(&addr, "/api/v1/heartbeat", &secret, &hb)).await?;
    if status != 200 {
        bail!("heartbeat answered {status}");
    }
    go.wait_for(|g| *g).await?;
    let poll = post(&addr, "/api/v1/lease", &secret, &format!(r#"{{"free_mem_bytes":{FREE_MEM},"wait_ms":30000}}"#));
    loop {
        let opened = Instant::now();
        let (status, body) = http.call(&poll).await?;
        let at = Instant::now();
        match status {
            200 => {
                let job = json_int(body, "job_id").context("a lease without job_id")?;
                shared.got.lock().unwrap_or_else(|e| e.into_inner()).push(Got { job, opened, at });
                shared.count.fetch_add(1, Ordering::Relaxed);
            }
            204 => {}
            _ => {
                shared.non_200.fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// Submits `n` jobs over `conns` connections; returns each job's id with the moment its
/// submission was sent.
async fn submit(addr: &str, key: &str, n: usize, conns: usize) -> Result<Vec<(i64, Instant)>> {
    let req = Arc::new(post(addr, "/api/v1/jobs", key, JOB));
    let conns = conns.clamp(1, n.max(1));
    let mut tasks = Vec::new();
    for c in 0..conns {
        let share = n / conns + usize::from(c < n % conns);
        let (addr, req) = (addr.to_string(), req.clone());
        tasks.push(tokio::spawn(async move {
            let mut http = Http::connect(&addr).await?;
            let mut out = Vec::with_capacity(share);
            for _ in 0..share {
                let sent = Instant::now();
                let (status, body) = http.call(&req).await?;
                if status != 200 {
                    bail!("submit answered {status}: {}", String::from_utf8_lossy(body));
                }
                out.push((json_int(body, "id").context("a job without id")?, sent));
            }
            Ok::<_, anyhow::Error>(out)
        }));
    }
    let mut all = Vec::with_capacity(n);
    for t in tasks {
        all.extend(t.await??);
    }
    Ok(all)
}

/// Waits until the agents hold `from + jobs` leases in all, showing progress.
async fn wait_leases(shared: &Shared, from: u64, jobs: u64, label: &str, quiet: bool, timeout: Duration) -> Result<()> {
    let target = from + jobs;
    let bar = indicatif::ProgressBar::new(jobs);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{msg} {bar:40} {pos}/{len} leases {per_sec}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    bar.set_message(label.to_string());
    if quiet {
        bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    let deadline = Instant::now() + timeout;
    loop {
        let n = shared.count.load(Ordering::Relaxed);
        bar.set_position(n.saturating_sub(from).min(jobs));
        if n >= target {
            break;
        }
        if Instant::now() > deadline {
            bar.abandon();
            bail!("{label}: only {n} of {target} leases within {timeout:?}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    bar.finish_and_clear();
    Ok(())
}

/// One phase's figures.
struct Phase {
    name: &'static str,
    jobs: usize,
    /// Submission: seconds and jobs/s.
    submit_s: f64,
    /// First poll opened (backlog) or first submit sent (stream) → last lease received.
    wall_s: f64,
    steady_per_s: f64,
    /// Latencies, µs, sorted: poll opened → lease (backlog), submit → lease (stream).
    lat: Vec<u32>,
    server_cpu_cores: f64,
}

impl Phase {
    fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "phase": self.name,
            "jobs": self.jobs,
            "submit_s": self.submit_s,
            "submits_per_s": (self.jobs as f64 / self.submit_s.max(1e-9)).round(),
            "wall_s": self.wall_s,
            "placements_per_s": (self.jobs as f64 / self.wall_s.max(1e-9)).round(),
            "steady_placements_per_s": self.steady_per_s.round(),
            "latency": if self.name == "backlog" { "poll opened → lease received" } else { "submit sent → lease received" },
            "p50_ms": pct(&self.lat, 0.5),
            "p99_ms": pct(&self.lat, 0.99),
            "max_ms": pct(&self.lat, 1.0),
            "server_cpu_cores": self.server_cpu_cores,
        })
    }
}

/// Leases per second between the 10th and the 90th percentile of their arrival.
fn steady(mut at: Vec<Instant>) -> f64 {
    at.sort_unstable();
    if at.len() < 10 {
        return 0.0;
    }
    let (a, b) = (at.len() / 10, at.len() * 9 / 10);
    (b - a) as f64 / at[b].duration_since(at[a]).as_secs_f64().max(1e-9)
}

fn micros(d: Duration) -> u32 {
    d.as_micros().min(u32::MAX as u128) as u32
}

pub fn run(a: PlacementArgs) -> Result<()> {
    if let Some(n) = a.real_agents {
        return crate::recruit::run(n, a.rounds, a.json);
    }
    for p in &a.phases {
        if p != "backlog" && p != "stream" {
            bail!("--phases: unknown phase {p:?} (allowed: backlog, stream)");
        }
    }
    coordinator::scheduling::parse_algorithm(&a.scheduler).map_err(|e| anyhow::anyhow!("{e}"))?;
    if a.agents == 0 || a.jobs == 0 {
        bail!("--agents and --jobs must be at least 1");
    }
    let rt = crate::heartbeats::runtime()?;
    // One more enrolled agent: the probe.
    let c = BenchCoordinator::start(&rt, &a.db, a.agents + 1, &["--scheduler", &a.scheduler, "--lease-ttl-s", "3600"], a.json)?;
    let result = rt.block_on(measure(&a, &c));
    let m = metrics_text(&c.addr);
    let log = c.log();
    c.stop(&rt);
    let (phases, got, submitted, non_200) = result.map_err(|e| anyhow::anyhow!("{e:#}\ncoordinator log:\n{log}"))?;

    // Every job leased exactly once.
    let mut seen: HashMap<i64, u32> = HashMap::with_capacity(got.len());
    for g in &got {
        *seen.entry(g.job).or_default() += 1;
    }
    let twice = seen.values().filter(|n| **n > 1).count();
    let missing = submitted.iter().filter(|j| !seen.contains_key(j)).count();
    let out = serde_json::json!({
        "bench": "placements",
        "db": a.db.db,
        "scheduler": a.scheduler,
        "agents": a.agents,
        "jobs_per_phase": a.jobs,
        "phases": phases.iter().map(Phase::json).collect::<Vec<_>>(),
        "leases": got.len(),
        "jobs_leased_twice": twice,
        "jobs_missing": missing,
        "non_200_polls": non_200,
        "coordinator_placements_total": metric(&m, "lull_placements_total"),
        "coordinator_leases_total": metric(&m, "lull_leases_total"),
        "coordinator_last_pass_ms": metric(&m, "lull_sched_last_pass_seconds") * 1e3,
        "coordinator_placing_passes_total": metric(&m, "lull_sched_placing_passes_total"),
        "coordinator_delivery_looks_total": metric(&m, "lull_delivery_looks_total"),
        "coordinator_delivery_batches_total": metric(&m, "lull_delivery_batches_total"),
        "coordinator_delivery_looks_skipped_total": metric(&m, "lull_delivery_looks_skipped_total"),
    });
    if a.json {
        outln!("{out}");
    } else {
        outln!("placements ({}, {}, {} agents, {} jobs per phase):", a.db.db, a.scheduler, a.agents, a.jobs);
        for p in &phases {
            let what = if p.name == "backlog" { "poll opened → lease" } else { "submit → lease" };
            outln!(
                "  {:<8} {:>6.0} placements/s ({:.2} s) · steady {:>6.0}/s · {what}: p50 {:.1} ms · p99 {:.1} ms · max {:.1} ms · submits {:.0}/s · coordinator CPU {:.2} cores",
                p.name,
                p.jobs as f64 / p.wall_s.max(1e-9),
                p.wall_s,
                p.steady_per_s,
                pct(&p.lat, 0.5),
                pct(&p.lat, 0.99),
                pct(&p.lat, 1.0),
                p.jobs as f64 / p.submit_s.max(1e-9),
                p.server_cpu_cores,
            );
        }
        outln!("  leases {} · leased twice {twice} · missing {missing} · non-200 polls {non_200}", got.len());
        // Whole run (both phases), from the coordinator's /metrics; zero from a coordinator
        // that does not count them.
        let per = |name: &str, by: &str| metric(&m, name) / metric(&m, by).max(1.0);
        outln!(
            "  per lease: {:.2} database looks ({:.2} skipped) in {:.1} looks per transaction · {:.1} placements per placing pass",
            per("lull_delivery_looks_total", "lull_leases_total"),
            per("lull_delivery_looks_skipped_total", "lull_leases_total"),
            per("lull_delivery_looks_total", "lull_delivery_batches_total"),
            per("lull_placements_total", "lull_sched_placing_passes_total"),
        );
        outln!("  goal: ≥ 5000 placements/s; recruited → running p99 ≤ 1 s");
    }
    if twice > 0 || missing > 0 || got.len() != submitted.len() {
        bail!("{twice} jobs leased twice, {missing} never leased, {} leases for {} jobs", got.len(), submitted.len());
    }
    Ok(())
}

type Measured = (Vec<Phase>, Vec<Got>, Vec<i64>, u64);

async fn measure(a: &PlacementArgs, c: &BenchCoordinator) -> Result<Measured> {
    let shared = Arc::new(Shared::default());
    let (go_tx, go) = tokio::sync::watch::channel(false);
    let mut agents = Vec::with_capacity(a.agents);
    for secret in &c.secrets[..a.agents] {
        agents.push(tokio::spawn(agent(c.addr.clone(), secret.clone(), go.clone(), shared.clone())));
    }
    let result = phases(a, c, &shared, go_tx).await;
    for t in &agents {
        t.abort();
    }
    for t in agents {
        if let Ok(Err(e)) = t.await {
            return Err(e.context("a simulated agent failed"));
        }
    }
    let (phases, submitted) = result?;
    let got = std::mem::take(&mut *shared.got.lock().unwrap_or_else(|e| e.into_inner()));
    Ok((phases, got, submitted, shared.non_200.load(Ordering::Relaxed)))
}

async fn phases(
    a: &PlacementArgs,
    c: &BenchCoordinator,
    shared: &Arc<Shared>,
    go: tokio::sync::watch::Sender<bool>,
) -> Result<(Vec<Phase>, Vec<i64>)> {
    let quiet = a.json;
    let timeout = Duration::from_secs(120 + a.jobs as u64 / 50);
    // Every agent's heartbeat is in before anything is measured.
    let probe_secret = c.secrets[a.agents].clone();
    let mut probe = Http::connect(&c.addr).await?;
    wait_for_heartbeats(&c.addr, a.agents).await?;
    let mut out = Vec::new();
    let mut submitted = Vec::new();
    for name in &a.phases {
        let leased_before = shared.count.load(Ordering::Relaxed);
        let backlog = name == "backlog";
        let (jobs, submit_s, start, cpu0) = if backlog {
            if *go.borrow() {
                bail!("the backlog phase must come first (the agents poll from then on)");
            }
            let t0 = Instant::now();
            let jobs = submit(&c.addr, &c.admin_key, a.jobs, a.submitters).await?;
            let submit_s = t0.elapsed().as_secs_f64();
            // The probe fits no job (0 bytes free): its answer comes once the scheduler
            // applied every submission and ran a pass.
            let (status, _) = probe.call(&post(&c.addr, "/api/v1/lease", &probe_secret, r#"{"free_mem_bytes":0,"wait_ms":0}"#)).await?;
            if status != 204 {
                bail!("the probe poll answered {status}");
            }
            let (cpu0, start) = (cpu_s(c.pid), Instant::now());
            go.send_replace(true);
            (jobs, submit_s, start, cpu0)
        } else {
            if !*go.borrow() {
                go.send_replace(true);
                // Every agent waits in its poll before the first submission.
                tokio::time::sleep(Duration::from_secs(2)).await;
            }
            let (cpu0, start) = (cpu_s(c.pid), Instant::now());
            let jobs = submit(&c.addr, &c.admin_key, a.jobs, a.submitters).await?;
            (jobs, start.elapsed().as_secs_f64(), start, cpu0)
        };
        wait_leases(shared, leased_before, a.jobs as u64, name, quiet, timeout).await?;
        let sent: HashMap<i64, Instant> = jobs.iter().copied().collect();
        let got: Vec<Got> =
            shared.got.lock().unwrap_or_else(|e| e.into_inner()).iter().filter(|g| sent.contains_key(&g.job)).copied().collect();
        let last = got.iter().map(|g| g.at).max().unwrap_or(start);
        // Backlog: the poll's opening (every poll had queued work); stream: the submission.
        let from = |g: &Got| if backlog { g.opened.max(start) } else { sent[&g.job] };
        let mut lat: Vec<u32> = got.iter().map(|g| micros(g.at.saturating_duration_since(from(g)))).collect();
        lat.sort_unstable();
        submitted.extend(jobs.iter().map(|j| j.0));
        let wall_s = last.duration_since(start).as_secs_f64();
        out.push(Phase {
            name: if backlog { "backlog" } else { "stream" },
            jobs: a.jobs,
            submit_s,
            wall_s,
            steady_per_s: steady(got.iter().map(|g| g.at).collect()),
            lat,
            server_cpu_cores: (cpu_s(c.pid) - cpu0) / wall_s.max(1e-3),
        });
    }
    Ok((out, submitted))
}

/// Waits until the coordinator has heard `n` heartbeats.
async fn wait_for_heartbeats(addr: &str, n: usize) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let addr2 = addr.to_string();
        let m = tokio::task::spawn_blocking(move || metrics_text(&addr2)).await?;
        let heard = metric(&m, "lull_heartbeats_total") as usize;
        if heard >= n {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("only {heard} of {n} agents' heartbeats arrived");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_int_finds_the_first_number_of_a_key() {
        assert_eq!(json_int(br#"{"job_id":42,"rank":0}"#, "job_id"), Some(42));
        assert_eq!(json_int(br#"{"id": 7,"tasks":[{"id":1}]}"#, "id"), Some(7));
        assert_eq!(json_int(br#"{"x":1}"#, "id"), None);
    }

    #[test]
    fn steady_counts_the_middle_eighty_percent() {
        let t0 = Instant::now();
        let at: Vec<Instant> = (0..101).map(|i| t0 + Duration::from_millis(i * 10)).collect();
        let r = steady(at);
        assert!((r - 100.0).abs() < 1.0, "{r}");
    }
}
