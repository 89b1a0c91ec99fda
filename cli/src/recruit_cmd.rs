//! `lull recruit K --for 10m -- CMD…`: instant recruitment (seed 003). Asks the
//! coordinator for up to K machines predicted to stay idle for the given time, prints the
//! grant (each machine with its predicted load), then runs CMD on exactly those machines
//! as one gang (the group's job: every rank starts once all are leased, `LULL_RANK` and
//! `LULL_MACHINES` tell each member its place), waits for it to end, prints what each
//! rank wrote, and releases the group. Ctrl-C releases it at once (its job is cancelled).

use crate::jobs_cmd::{check, parse_bytes, Remote};
use crate::pool_files::runtime;
use anyhow::{bail, Context, Result};
use clap::Args;
use coordinator::model::{Job, JobOutput};
use coordinator::scheduling::recruiting::{RecruitGrant, RecruitGroup, RecruitRequest};
use std::collections::BTreeMap;
use std::time::Duration;

#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  lull recruit 8 --for 10m -- ./render --frames 1-100\n  lull recruit 2 --for 1m --json -- sh -c 'echo rank $LULL_RANK of $LULL_MACHINES'\n\n\
The coordinator answers at once: no queue. It grants only machines whose owners' recent \
CPU load predicts them idle for the whole time (the mean of their last readings, more of \
them for a longer time), least loaded first, and keeps a share of the idle machines \
(`lull coordinator serve --reserve-pct`, default 20 %) back for the next request, so \
you may get fewer than K. Machines out of their owners' interruption budget, paused or \
without a free slot are never granted."
)]
pub struct RecruitArgs {
    #[command(flatten)]
    pub remote: Remote,
    /// How many machines at most (1–1024).
    #[arg(value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub k: u32,
    /// How long the work will run (30s, 10m, 1h; at most 24h): machines are granted only
    /// when predicted idle that long.
    #[arg(long = "for", value_name = "DURATION", default_value = "10m")]
    pub for_: String,
    /// Memory per machine (bytes, or with K/M/G): the guest's cap.
    #[arg(long, default_value = "0")]
    pub mem: String,
    /// Environment variable for the work, NAME=VALUE (repeatable).
    #[arg(long = "env", value_name = "NAME=VALUE")]
    pub env: Vec<String>,
    /// Print the grant, then the finished job and its output, as JSON lines.
    #[arg(long)]
    pub json: bool,
    /// The command each machine runs, and its arguments (after `--`).
    #[arg(last = true, required = true)]
    pub command: Vec<String>,
}

async fn post<T: serde::de::DeserializeOwned>(
    http: &reqwest::Client,
    url: &str,
    key: &str,
    path: &str,
    body: &impl serde::Serialize,
) -> Result<T> {
    let r = http.post(format!("{url}{path}")).bearer_auth(key).json(body).send().await.map_err(|e| crate::jobs_cmd::unreachable(url, e))?;
    Ok(check(r).await?.json().await?)
}

async fn get<T: serde::de::DeserializeOwned>(http: &reqwest::Client, url: &str, key: &str, path: &str) -> Result<T> {
    let r = http.get(format!("{url}{path}")).bearer_auth(key).send().await.map_err(|e| crate::jobs_cmd::unreachable(url, e))?;
    Ok(check(r).await?.json().await?)
}

pub fn run(a: RecruitArgs) -> Result<()> {
    let (url, key) = a.remote.resolve()?;
    let seconds = lull_protocol::duration::parse_secs(&a.for_, 1, 86_400).map_err(|e| anyhow::anyhow!("--for: {e}"))?;
    let mut env = BTreeMap::new();
    for kv in &a.env {
        let (k, v) = kv.split_once('=').with_context(|| format!("--env {kv:?} is not NAME=VALUE"))?;
        env.insert(k.to_string(), v.to_string());
    }
    let req = RecruitRequest {
        k: a.k,
        seconds: seconds as u32,
        command: a.command[0].clone(),
        args: a.command[1..].to_vec(),
        env,
        inputs: BTreeMap::new(),
        mem_bytes: parse_bytes(&a.mem)?,
    };
    runtime()?.block_on(async move {
        let http = reqwest::Client::new();
        let grant: RecruitGrant = post(&http, &url, &key, "/api/v1/recruit", &req).await?;
        if a.json {
            outln!("{}", serde_json::to_string(&grant)?);
        } else {
            print_grant(&grant, seconds);
        }
        let Some(group) = grant.group.clone() else {
            bail!("no machine granted: {} idle, {} kept in reserve (try fewer, a shorter --for, or later)", grant.idle, grant.reserved);
        };
        let ended = tokio::select! {
            r = follow(&http, &url, &key, &group) => Some(r),
            _ = tokio::signal::ctrl_c() => None,
        };
        let job = match ended {
            Some(r) => r,
            None => {
                let g: RecruitGroup = post(&http, &url, &key, &format!("/api/v1/recruit/{group}/release"), &serde_json::json!({})).await?;
                errln!("interrupted: group {group} released ({})", g.state);
                std::process::exit(130);
            }
        };
        let job = match job {
            Ok(j) => j,
            Err(e) => {
                // Whatever went wrong, the machines go back.
                let _ = post::<RecruitGroup>(&http, &url, &key, &format!("/api/v1/recruit/{group}/release"), &serde_json::json!({})).await;
                return Err(e);
            }
        };
        let output: JobOutput = get(&http, &url, &key, &format!("/api/v1/jobs/{}/output", job.id)).await?;
        // The group was released when its job ended; this makes sure (idempotent).
        let released: RecruitGroup = post(&http, &url, &key, &format!("/api/v1/recruit/{group}/release"), &serde_json::json!({})).await?;
        if a.json {
            outln!("{}", serde_json::json!({"group": group, "state": released.state, "job": job, "output": output}));
        } else {
            for t in &output.tasks {
                let on = t.agent_id.clone().unwrap_or_default();
                let exit = t.exit_code.map_or(String::new(), |c| format!(", exit {c}"));
                outln!("--- rank {} on {on} ({}{exit}) ---", t.rank, t.state);
                if let Some(o) = &t.output {
                    out!("{}", o.stdout);
                    eprint!("{}", o.stderr);
                }
            }
            outln!("group {group} ({} machines, job {}) {}; released", job.machines, job.id, job.state);
        }
        let ok = job.state == "completed" && job.tasks.iter().all(|t| t.exit_code == Some(0));
        if !ok {
            bail!("the group's job {} ended {} (not every rank exited 0)", job.id, job.state);
        }
        Ok(())
    })
}

fn print_grant(g: &RecruitGrant, seconds: u64) {
    outln!(
        "granted {} machine(s) predicted idle for {} ({} idle, {} kept in reserve at {:.0} %; window {} s, decided in {} µs)",
        g.machines.len(),
        lull_protocol::duration::human(seconds),
        g.idle,
        g.reserved,
        g.reserve_pct,
        g.window,
        g.decided_us
    );
    for m in &g.machines {
        outln!(
            "  rank {:>3}  {:<24} {:<16} owner load {:>4.1} %  idle for {}",
            m.rank,
            m.machine,
            m.owner,
            m.predicted_load * 100.0,
            lull_protocol::duration::human(m.idle_for_s)
        );
    }
}

/// Waits for the group's job to be written and then to end.
async fn follow(http: &reqwest::Client, url: &str, key: &str, group: &str) -> Result<Job> {
    let mut job_id = None;
    for _ in 0..200 {
        let g: RecruitGroup = get(http, url, key, &format!("/api/v1/recruit/{group}")).await?;
        if g.state == "failed" {
            bail!("group {group} could not be leased: {}", g.error.unwrap_or_default());
        }
        if let Some(j) = g.job_id {
            job_id = Some(j);
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let Some(id) = job_id else { bail!("group {group} was not written within 10 s") };
    loop {
        let j: Job = get(http, url, key, &format!("/api/v1/jobs/{id}")).await?;
        if matches!(j.state.as_str(), "completed" | "failed" | "cancelled") {
            return Ok(j);
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}
