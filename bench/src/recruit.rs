//! `lull-bench placements --real-agents N`: machine recruited → guest running, timed from
//! outside on real processes.
//!
//! A `lull coordinator serve` (SQLite, heartbeats every second) in a directory of its own
//! and N real `lull agent` processes, each with its own data directory, config, control
//! socket and cgroup base, enrolled with `lull enrol`. The agents sample every 100 ms,
//! take guest work at once (no recruitment wait, owner CPU left out of the availability
//! definition) and have no input backend (the owner never comes back). Each round:
//! every agent is paused (`Pause` on its control socket) until the coordinator's view of
//! all of them says `paused`; N jobs are submitted with `lull submit` (each writes the
//! wall clock in ns, `date +%s%N`, into `$HOME/started` — its work directory, the only
//! place its sandbox lets it write — and sleeps 1 s); then every agent is resumed, and
//! the latency of each job is the time its guest wrote the file minus the moment the
//! first resume was sent; recruited → running is the time its guest wrote the file minus
//! the moment the bench first saw its agent's status say recruitable (or donating),
//! polled every 2 ms over the control socket. The round ends when all N jobs completed.

use crate::heartbeats::Http;
use agent_core::control::{call, Request, Response};
use agent_core::policy::{PauseSpan, StateKind};
use anyhow::{bail, Context, Result};
use lull_e2e::coordinator::Coordinator;
use lull_e2e::process::{terminate, wait_until};
use lull_e2e::{agent_env, lull_bin, purge_cgroup_base, try_start_agent};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const CONFIG: &str = "[sampling]\ninterval_ms = 100\n[availability]\nowner_cpu_max = 1.0\nmemory_growth_max = 1.0\n\
                      recruitment_threshold_s = 0\n[input]\nbackend = \"none\"\n";

/// The processes of a run, stopped and cleaned up on drop (the agents, then the
/// coordinator).
struct Run {
    pool: Coordinator,
    agents: Vec<(tempfile::TempDir, String)>,
    procs: Vec<Child>,
}

impl Drop for Run {
    fn drop(&mut self) {
        for p in &mut self.procs {
            terminate(p, Duration::from_secs(20));
        }
        for (_, base) in &self.agents {
            purge_cgroup_base(base);
        }
    }
}

fn now_ns() -> u128 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos())
}

fn socket(dir: &Path) -> PathBuf {
    dir.join("agent.sock")
}

fn control(dir: &Path, req: &Request) -> Result<()> {
    match call(&socket(dir), req) {
        Ok(Response::Status(_)) => Ok(()),
        other => bail!("the agent answered {other:?}"),
    }
}

/// GET `path` on the coordinator with the admin key; the JSON answer.
fn get(rt: &tokio::runtime::Runtime, url: &str, key: &str, path: &str) -> Result<serde_json::Value> {
    let addr = url.trim_start_matches("http://").trim_end_matches('/').to_string();
    let req = format!("GET {path} HTTP/1.1\r\nhost: {addr}\r\nauthorization: Bearer {key}\r\n\r\n").into_bytes();
    rt.block_on(async {
        let mut http = Http::connect(&addr).await?;
        let (status, body) = http.call(&req).await?;
        if status != 200 {
            bail!("GET {path}: {status}");
        }
        Ok(serde_json::from_slice(body)?)
    })
}

fn start(lull: &Path, n: usize) -> Result<Run> {
    let pool = Coordinator::try_start(&["--heartbeat-s", "1"])?;
    let mut run = Run { pool, agents: Vec::new(), procs: Vec::new() };
    for i in 0..n {
        let dir = tempfile::tempdir()?;
        let d = dir.path().to_path_buf();
        std::fs::write(d.join("config.toml"), CONFIG)?;
        let base = format!("lull-bench-recruit-{}-{i}", std::process::id());
        run.agents.push((dir, base.clone()));
        run.pool.enrol(&d, "bench", &format!("real{i}"))?;
        let mut c = Command::new(lull);
        agent_env(c.arg("agent"), &d)
            .env("LULL_CGROUP", &base)
            .env("XDG_CONFIG_HOME", d.join("xdg-config"))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(d.join("agent.log"))?);
        let agent = try_start_agent(&mut c, &socket(&d), Duration::from_secs(60), |s| s.coordinator.is_some())
            .with_context(|| std::fs::read_to_string(d.join("agent.log")).unwrap_or_default())?;
        run.procs.push(agent);
    }
    Ok(run)
}

/// Submits `n` jobs to the local pool, each guest writing its start time (ns) in
/// `$HOME/started` and then sleeping a second.
fn submit_jobs(lull: &Path, run: &Run, n: usize) -> Result<()> {
    for _ in 0..n {
        let o = Command::new(lull)
            .args(["submit", "--", "sh", "-c", "date +%s%N > \"$HOME/started\"; sleep 1"])
            .env("LULL_DATA_DIR", run.pool.dir.path())
            .env_remove("LULL_COORDINATOR_URL")
            .env_remove("LULL_KEY")
            .output()?;
        if !o.status.success() {
            bail!("submit: {}", String::from_utf8_lossy(&o.stderr));
        }
    }
    Ok(())
}

/// One time in ns (or none yet) per agent.
type Times = Vec<Option<u128>>;

/// Polls every agent (every 2 ms, up to 60 s) for when it was recruited and when its
/// guest started (at or after `t0`): one `(recruited, started)` time in ns each.
fn watch_recruitment(run: &Run, t0: u128) -> Result<(Times, Times)> {
    // Each agent's recruitment (its status says recruitable or donating, polled every
    // 2 ms) and its guest's first line (in its work directory, read while it sleeps).
    let mut recruited: Times = vec![None; run.agents.len()];
    let mut started: Times = vec![None; run.agents.len()];
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while started.iter().any(Option::is_none) {
        if std::time::Instant::now() > deadline {
            bail!("not every guest ran within 60 s of the resume (recruited: {recruited:?}, started: {started:?})");
        }
        for (i, (dir, _)) in run.agents.iter().enumerate() {
            if recruited[i].is_none() {
                if let Ok(Response::Status(st)) = call(&socket(dir.path()), &Request::Status) {
                    if matches!(st.policy.state, StateKind::Recruitable | StateKind::Donating) {
                        recruited[i] = Some(now_ns());
                    }
                }
            }
            if started[i].is_none() {
                let jobs = agent_core::paths::Paths::under(dir.path()).work_root().join("jobs");
                for e in std::fs::read_dir(jobs).into_iter().flatten().flatten() {
                    // The guest's $HOME is its work directory (`jobs/<id>/work/`).
                    let file = agent_core::guest::GuestDir::new(e.path()).work().join("started");
                    let t = std::fs::read_to_string(file).ok().and_then(|s| s.trim().parse::<u128>().ok());
                    if let Some(t) = t.filter(|t| *t >= t0) {
                        started[i] = Some(t);
                    }
                }
            }
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    Ok((recruited, started))
}

pub fn run(n: usize, rounds: usize, json: bool) -> Result<()> {
    if n == 0 || rounds == 0 {
        bail!("--real-agents and --rounds must be at least 1");
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        bail!("--real-agents needs root: the agents put their guests in cgroups");
    }
    let lull = lull_bin();
    let rt = crate::heartbeats::runtime()?;
    let run = start(&lull, n)?;
    let key = std::fs::read_to_string(run.pool.dir.path().join("coordinator-admin.key"))?.trim().to_string();
    let bar = indicatif::ProgressBar::new(rounds as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template("recruit → running {bar:40} {pos}/{len} rounds")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    if json {
        bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    // recruited → running, resume → running, resume → recruited.
    let (mut lat_ms, mut resume_ms, mut policy_ms) = (Vec::new(), Vec::new(), Vec::new());
    let mut completed = 0usize;
    for _ in 0..rounds {
        for (dir, _) in &run.agents {
            control(dir.path(), &Request::Pause { span: PauseSpan::UntilResumed })?;
        }
        wait_until("the coordinator to see every agent paused", Duration::from_secs(30), || {
            let agents = get(&rt, &run.pool.url, &key, "/api/v1/agents").ok()?;
            let paused = agents.as_array()?.iter().filter(|a| a["heartbeat"]["state"] == "paused").count();
            (paused == n).then_some(())
        })?;
        submit_jobs(&lull, &run, n)?;
        std::thread::sleep(Duration::from_millis(300));
        let t0 = now_ns();
        for (dir, _) in &run.agents {
            control(dir.path(), &Request::Resume)?;
        }
        let (recruited, started) = watch_recruitment(&run, t0)?;
        for i in 0..n {
            let (s, r) = (started[i].unwrap_or(t0), recruited[i].unwrap_or(t0));
            resume_ms.push(s.saturating_sub(t0) as f64 / 1e6);
            // A guest may write before the status poll saw the state change: 0 then.
            lat_ms.push(s.saturating_sub(r) as f64 / 1e6);
            policy_ms.push(r.saturating_sub(t0) as f64 / 1e6);
        }
        completed += n;
        wait_until("every job to complete", Duration::from_secs(60), || {
            let jobs = get(&rt, &run.pool.url, &key, "/api/v1/jobs?state=completed&limit=10000").ok()?;
            (jobs.as_array()?.len() >= completed).then_some(())
        })?;
        bar.inc(1);
    }
    bar.finish_and_clear();
    let figures = |v: &mut Vec<f64>| {
        let mut p = |q: f64| lull_e2e::percentile::of(v, q);
        (p(0.5), p(0.99), p(1.0))
    };
    let (lat, resume, policy) = (figures(&mut lat_ms), figures(&mut resume_ms), figures(&mut policy_ms));
    let json_of = |f: (f64, f64, f64)| serde_json::json!({"p50_ms": f.0, "p99_ms": f.1, "max_ms": f.2});
    let result = serde_json::json!({
        "bench": "placements-real-agents",
        "agents": n,
        "rounds": rounds,
        "samples": lat_ms.len(),
        "recruited_to_running": json_of(lat),
        "resume_to_running": json_of(resume),
        "resume_to_recruited": json_of(policy),
    });
    if json {
        outln!("{result}");
    } else {
        outln!("recruited → running with {n} real agents, {rounds} rounds ({} guests):", lat_ms.len());
        for (what, f) in [("recruited → guest running", lat), ("resume → guest running", resume), ("resume → recruited", policy)] {
            outln!("  {what:<26} p50 {:>7.1} ms · p99 {:>7.1} ms · max {:>7.1} ms", f.0, f.1, f.2);
        }
        outln!("  goal: recruited → running p99 ≤ 1 s");
    }
    drop(run);
    Ok(())
}
