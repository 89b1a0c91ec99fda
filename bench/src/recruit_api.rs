//! `lull-bench recruit-api`: instant recruitment's answer time (seed 003; mpidled: ≤ 150 ms
//! typical, 2.5 s worst; goal here p99 ≤ 2 ms at 10,000 agents), measured from outside on
//! a real `lull coordinator serve` process (SQLite file or a fresh PostgreSQL database).
//!
//! N simulated agents are enrolled. Each holds one keep-alive loopback connection with a
//! long poll open (`POST /api/v1/lease`, `wait_ms` 15–25 s at random as a real agent picks
//! it, `agent_core::coordinator_client::next_lease_wait`; a lease received is dropped and the
//! next poll opens at once), as a real agent does while it wants work. All polls open
//! together at the start, as after a coordinator restart. Their
//! heartbeats, with ten owner-load readings of a second each, come over separate
//! keep-alive connections at the rate agents send them (N per heartbeat interval, 10 s):
//! 90 % of the machines report an idle owner (0–5 % CPU), 10 % a busy one (40–90 %).
//! A separate client then sends `POST /api/v1/recruit` requests one at a time, a fixed gap
//! apart, each for K machines for S seconds, and releases each group as soon as it is
//! granted (`POST /api/v1/recruit/{group}/release`, not timed), so every request faces the
//! whole pool. Latency = request sent → answer's last byte; the coordinator's own
//! decision time (`decided_us`, the in-memory part) is reported beside it.

use crate::heartbeats::{pct, post, BenchCoordinator, BenchDb, Http};
use anyhow::{bail, Result};
use clap::Args;
use lull_e2e::process::cpu_seconds as cpu_s;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Args, Debug)]
pub struct RecruitApiArgs {
    /// Simulated agents (each enrolled, each holding one long poll, each heartbeating).
    #[arg(long, default_value_t = 10_000)]
    pub agents: usize,
    /// Recruit requests measured (after 50 warm-up ones).
    #[arg(long, default_value_t = 2000)]
    pub requests: usize,
    /// Machines asked for per request.
    #[arg(long, default_value_t = 8)]
    pub k: u32,
    /// Seconds each request asks the machines for (chooses the prediction window).
    #[arg(long, default_value_t = 10)]
    pub seconds: u32,
    /// Gap between the end of one request (and its release) and the next, ms.
    #[arg(long, default_value_t = 10)]
    pub gap_ms: u64,
    /// Heartbeat interval the agents keep, seconds (each agent sends one per interval).
    #[arg(long, default_value_t = 10)]
    pub heartbeat_s: u64,
    /// Every long poll waits exactly this long, ms (at most 30000), instead of a random
    /// 15–25 s as agents do: polls opened together then end and reopen together, the
    /// wave agents made before they spread their waits. For comparison.
    #[arg(long, value_parser = clap::value_parser!(u32).range(0..=lull_protocol::MAX_LEASE_WAIT_MS as i64))]
    pub poll_wait_ms: Option<u32>,
    #[command(flatten)]
    pub db: BenchDb,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Machine `i`'s heartbeat: idle (0–5 % CPU) for 9 in 10, busy (40–90 %) otherwise.
fn heartbeat(i: usize, round: u64) -> String {
    let busy = i % 10 == 9;
    let readings: Vec<String> = (0..10u64)
        .map(|s| {
            let x = (i as u64).wrapping_mul(2654435761).wrapping_add(round * 97 + s * 31) % 100;
            let pct = if busy { 40 + x / 2 } else { x / 20 };
            format!(r#"{{"cpu_pct":{pct},"secs":1}}"#)
        })
        .collect();
    format!(
        r#"{{"state":"recruitable","available":true,"budget_left":5,"free_mem_bytes":8589934592,"base_speed":100.0,"current_speed":95.0,"idle_for_s":600,"owner_load":[{}]}}"#,
        readings.join(",")
    )
}

/// One simulated agent's long polls, forever.
async fn poller(addr: String, secret: String, fixed_wait_ms: Option<u32>) -> Result<()> {
    let mut http = Http::connect(&addr).await?;
    loop {
        // Each poll waits as a real agent's does (15–25 s, at random), unless fixed.
        let wait = fixed_wait_ms.map_or_else(|| agent_core::coordinator_client::next_lease_wait().as_millis(), u128::from);
        let poll = post(&addr, "/api/v1/lease", &secret, &format!(r#"{{"free_mem_bytes":8589934592,"wait_ms":{wait}}}"#));
        let (status, _) = http.call(&poll).await?;
        if status != 200 && status != 204 {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

/// Heartbeats of `agents` (index, secret), each once per `every`, over one connection.
async fn heartbeats(addr: String, agents: Vec<(usize, String)>, every: Duration, stop: Arc<AtomicBool>, bad: Arc<AtomicU64>) -> Result<()> {
    let mut http = Http::connect(&addr).await?;
    let gap = every / agents.len().max(1) as u32;
    let mut round = 0u64;
    let mut next = tokio::time::Instant::now();
    while !stop.load(Ordering::Relaxed) {
        for (i, secret) in &agents {
            let (status, _) = http.call(&post(&addr, "/api/v1/heartbeat", secret, &heartbeat(*i, round))).await?;
            if status != 200 {
                bad.fetch_add(1, Ordering::Relaxed);
            }
            next += gap;
            tokio::time::sleep_until(next).await;
            if stop.load(Ordering::Relaxed) {
                return Ok(());
            }
        }
        round += 1;
    }
    Ok(())
}

/// The text after `"key":` up to the next `,` or `}` (the first occurrence).
fn json_field<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    let at = text.find(&format!("\"{key}\":"))? + key.len() + 3;
    let rest = &text[at..];
    Some(rest[..rest.find([',', '}']).unwrap_or(rest.len())].trim().trim_matches('"'))
}

/// One grant as the client read it.
struct Answer {
    /// When it was sent, µs after the first measured request.
    at_us: u64,
    us: u32,
    decided_us: u32,
    granted: usize,
    idle: u64,
}

async fn ask(http: &mut Http, addr: &str, key: &str, body: &str) -> Result<(Answer, Option<String>)> {
    let req = post(addr, "/api/v1/recruit", key, body);
    let t = Instant::now();
    let (status, answer) = http.call(&req).await?;
    let us = t.elapsed().as_micros().min(u32::MAX as u128) as u32;
    let text = std::str::from_utf8(answer).unwrap_or("").to_string();
    if status != 200 {
        bail!("recruit answered {status}: {text}");
    }
    let group = json_field(&text, "group").filter(|g| *g != "null").map(str::to_string);
    let a = Answer {
        at_us: 0,
        us,
        decided_us: json_field(&text, "decided_us").and_then(|v| v.parse().ok()).unwrap_or(0),
        granted: text.matches("\"agent_id\"").count(),
        idle: json_field(&text, "idle").and_then(|v| v.parse().ok()).unwrap_or(0),
    };
    if let Some(g) = &group {
        let (status, body) = http.call(&post(addr, &format!("/api/v1/recruit/{g}/release"), key, "{}")).await?;
        if status != 200 {
            bail!("release answered {status}: {}", String::from_utf8_lossy(body));
        }
    }
    Ok((a, group))
}

/// The measuring client: waits until the coordinator counts every idle machine, warms
/// up, then sends `requests` requests `gap_ms` apart. Returns the answers and the
/// coordinator's CPU (cores) meanwhile.
#[allow(clippy::too_many_arguments)]
async fn measure(
    addr: String,
    key: String,
    k: u32,
    seconds: u32,
    requests: usize,
    gap_ms: u64,
    heartbeat_s: u64,
    expected_idle: u64,
    pid: u32,
) -> Result<(Vec<Answer>, f64)> {
    let mut http = Http::connect(&addr).await?;
    let body = format!(r#"{{"k":{k},"seconds":{seconds},"command":"true"}}"#);
    // Warm-up: until the coordinator has every idle machine's readings and poll.
    let ready_by = Instant::now() + Duration::from_secs(heartbeat_s.max(1) * 3 + 60);
    loop {
        let (ans, _) = ask(&mut http, &addr, &key, &body).await?;
        if ans.idle >= expected_idle {
            break;
        }
        if Instant::now() > ready_by {
            bail!("only {} of {expected_idle} idle machines known after the warm-up", ans.idle);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    for _ in 0..50 {
        ask(&mut http, &addr, &key, &body).await?;
    }
    let cpu0 = cpu_s(pid);
    let t0 = Instant::now();
    let mut answers = Vec::with_capacity(requests);
    for _ in 0..requests {
        let at_us = t0.elapsed().as_micros() as u64;
        answers.push(Answer { at_us, ..ask(&mut http, &addr, &key, &body).await?.0 });
        tokio::time::sleep(Duration::from_millis(gap_ms)).await;
    }
    let wall = t0.elapsed().as_secs_f64();
    Ok((answers, (cpu_s(pid) - cpu0) / wall))
}

pub fn run(a: RecruitApiArgs) -> Result<()> {
    if a.agents < 10 || a.requests == 0 || a.k == 0 {
        bail!("--agents must be at least 10, --requests and --k at least 1");
    }
    let rt = crate::heartbeats::runtime()?;
    let hb_s = a.heartbeat_s.max(1).to_string();
    let c = BenchCoordinator::start(&rt, &a.db, a.agents, &["--heartbeat-s", &hb_s], a.json)?;
    let (addr, pid, secrets, key) = (c.addr.clone(), c.pid, c.secrets.clone(), c.admin_key.clone());
    let expected_idle = (0..a.agents).filter(|i| i % 10 != 9).count() as u64;
    let result = rt.block_on(async {
        let stop = Arc::new(AtomicBool::new(false));
        let bad = Arc::new(AtomicU64::new(0));
        let mut polls = tokio::task::JoinSet::new();
        for s in &secrets {
            polls.spawn(poller(addr.clone(), s.clone(), a.poll_wait_ms));
        }
        let mut beats = tokio::task::JoinSet::new();
        let indexed: Vec<(usize, String)> = secrets.iter().cloned().enumerate().collect();
        let conns = 8usize.min(a.agents);
        for chunk in indexed.chunks(a.agents.div_ceil(conns)) {
            beats.spawn(heartbeats(addr.clone(), chunk.to_vec(), Duration::from_secs(a.heartbeat_s.max(1)), stop.clone(), bad.clone()));
        }
        // The measuring client runs on a thread and runtime of its own, so that the
        // simulated agents' 10,000 polls and heartbeats in this process do not delay
        // when it reads an answer.
        let client = {
            let (addr, key, k, seconds, requests, gap_ms, hb_s) =
                (addr.clone(), key.clone(), a.k, a.seconds, a.requests, a.gap_ms, a.heartbeat_s);
            std::thread::spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
                rt.block_on(measure(addr, key, k, seconds, requests, gap_ms, hb_s, expected_idle, pid))
            })
        };
        let measured = tokio::task::spawn_blocking(move || client.join()).await?;
        stop.store(true, Ordering::Relaxed);
        polls.abort_all();
        beats.abort_all();
        let (answers, cores) = match measured {
            Ok(r) => r?,
            Err(_) => bail!("the measuring client panicked"),
        };
        Ok::<_, anyhow::Error>((answers, bad.load(Ordering::Relaxed), cores))
    });
    c.stop(&rt);
    let (answers, bad, cores) = result?;
    let mut lat: Vec<u32> = answers.iter().map(|x| x.us).collect();
    let mut decided: Vec<u32> = answers.iter().map(|x| x.decided_us).collect();
    lat.sort_unstable();
    decided.sort_unstable();
    let short = answers.iter().filter(|x| x.granted < a.k as usize).count();
    // The slowest 1 % with when they were sent, to tell periodic stalls (a flush) from noise.
    let mut slow: Vec<&Answer> = answers.iter().collect();
    slow.sort_unstable_by_key(|x| std::cmp::Reverse(x.us));
    slow.truncate(answers.len().div_ceil(100));
    slow.sort_unstable_by_key(|x| x.at_us);
    let slowest: Vec<serde_json::Value> =
        slow.iter().map(|x| serde_json::json!({"sent_ms": x.at_us as f64 / 1e3, "ms": x.us as f64 / 1e3})).collect();
    let out = serde_json::json!({
        "bench": "recruit-api",
        "db": a.db.db,
        "agents": a.agents,
        "idle_agents": expected_idle,
        "requests": answers.len(),
        "k": a.k,
        "seconds": a.seconds,
        "poll_wait_ms": a.poll_wait_ms.map_or_else(|| serde_json::json!("15000-25000 (the agent's spread)"), |w| serde_json::json!(w)),
        "heartbeats_per_s": a.agents as f64 / a.heartbeat_s.max(1) as f64,
        "p50_ms": pct(&lat, 0.5),
        "p99_ms": pct(&lat, 0.99),
        "max_ms": pct(&lat, 1.0),
        "decided_p50_ms": pct(&decided, 0.5),
        "decided_p99_ms": pct(&decided, 0.99),
        "grants_short_of_k": short,
        "heartbeats_not_200": bad,
        "server_cpu_cores": cores,
        "slowest": slowest,
    });
    if a.json {
        outln!("{out}");
    } else {
        outln!(
            "recruit-api ({}, {} agents of which {expected_idle} idle, {} heartbeats/s, {} requests of k={} for {} s):",
            a.db.db,
            a.agents,
            a.agents as u64 / a.heartbeat_s.max(1),
            answers.len(),
            a.k,
            a.seconds
        );
        outln!(
            "  POST /api/v1/recruit, client-side: p50 {:.3} ms · p99 {:.3} ms · max {:.3} ms",
            pct(&lat, 0.5),
            pct(&lat, 0.99),
            pct(&lat, 1.0)
        );
        outln!("  decision inside the coordinator:  p50 {:.3} ms · p99 {:.3} ms", pct(&decided, 0.5), pct(&decided, 0.99));
        match a.poll_wait_ms {
            Some(w) => outln!("  long polls: every one waits {w} ms (fixed)"),
            None => outln!("  long polls: each waits 15–25 s at random, as agents do"),
        }
        outln!("  grants short of k: {short} · heartbeats not 200: {bad} · coordinator CPU {cores:.2} cores · goal: p99 ≤ 2 ms");
    }
    if short > 0 {
        bail!("{short} grants had fewer than {} machines with {expected_idle} idle", a.k);
    }
    Ok(())
}
