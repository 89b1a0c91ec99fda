//! `lull submit` and `lull report`: a pool coordinator's commands, over the coordinator's
//! HTTP API. The address and key default to what `lull coordinator serve` / `lull up`
//! left in the data directory (`coordinator.url`, `coordinator-admin.key`), or come from
//! `--url`/`LULL_COORDINATOR_URL` and `--key`/`LULL_KEY`.

use crate::pool_files::{data_files, runtime, DEFAULT_LISTEN};
use anyhow::{bail, Context, Result};
use clap::Args;
use coordinator::model::{Job, Report, SubmitJob};
use std::collections::BTreeMap;

#[derive(Args, Debug, Clone)]
pub struct Remote {
    /// The coordinator's address (default: the one `lull up` / `lull coordinator serve` recorded).
    #[arg(long, env = "LULL_COORDINATOR_URL", hide_env_values = true)]
    pub url: Option<String>,
    /// An admin or owner API key (default: the admin key in the data directory).
    #[arg(long, env = "LULL_KEY", hide_env_values = true)]
    pub key: Option<String>,
}

impl Remote {
    pub(crate) fn resolve(&self) -> Result<(String, String)> {
        let f = data_files()?;
        let url = match self.url.as_deref().map(str::trim).filter(|u| !u.is_empty()) {
            Some(u) => {
                let ok = reqwest::Url::parse(u).is_ok_and(|p| matches!(p.scheme(), "http" | "https") && p.has_host());
                if !ok {
                    bail!("--url (or LULL_COORDINATOR_URL) {u:?} is not a coordinator address like http://127.0.0.1:7878");
                }
                u.to_string()
            }
            None => {
                std::fs::read_to_string(&f.url_file).map(|s| s.trim().to_string()).unwrap_or_else(|_| format!("http://{DEFAULT_LISTEN}"))
            }
        };
        let key = match &self.key {
            Some(k) => k.clone(),
            None => match std::fs::read_to_string(&f.admin_key_file) {
                Ok(k) => k.trim().to_string(),
                Err(_) => bail!(
                    "no --key given and no admin key in {}: start a coordinator here with `lull up` (it writes that key), or give \
                     --key (or LULL_KEY) and --url for another one",
                    f.admin_key_file.display()
                ),
            },
        };
        Ok((url.trim_end_matches('/').to_string(), key))
    }
}

#[derive(Args, Debug)]
pub struct SubmitArgs {
    #[command(flatten)]
    pub remote: Remote,
    /// Machines to gang-start the job on (1: a sequential job).
    #[arg(long, default_value_t = 1)]
    pub machines: u32,
    /// Memory request: bytes, or with K/M/G suffix.
    #[arg(long, default_value = "0")]
    pub mem: String,
    /// The job can be checkpointed and resumed elsewhere.
    #[arg(long)]
    pub checkpointable: bool,
    /// Program name for runtime prediction (default: the command's file name).
    #[arg(long)]
    pub program: Option<String>,
    /// Your runtime estimate (seconds on an idle reference machine), used only until
    /// the pool has seen this program finish.
    #[arg(long, value_name = "SECONDS")]
    pub estimate: Option<f64>,
    /// Environment variable for the job, NAME=VALUE (repeatable).
    #[arg(long = "env", value_name = "NAME=VALUE")]
    pub env: Vec<String>,
    /// An input file shipped with the job (repeatable; UTF-8 text).
    #[arg(long = "input", value_name = "FILE")]
    pub inputs: Vec<std::path::PathBuf>,
    /// Retries after failures or lost leases.
    #[arg(long)]
    pub retries: Option<u32>,
    /// Submit this many identical jobs (1-10000).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub count: u32,
    /// Print the submitted jobs as JSON.
    #[arg(long)]
    pub json: bool,
    /// The command and its arguments (after `--`).
    #[arg(last = true, required = true)]
    pub command: Vec<String>,
}

/// Parses 512, 64K, 512M, 2G (powers of 1024).
pub fn parse_bytes(s: &str) -> Result<u64> {
    let s = s.trim();
    let (n, mult) = match s.chars().last() {
        Some('K' | 'k') => (&s[..s.len() - 1], 1u64 << 10),
        Some('M' | 'm') => (&s[..s.len() - 1], 1 << 20),
        Some('G' | 'g') => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    let n: u64 = n.parse().with_context(|| format!("{s:?} is not a size like 512M"))?;
    n.checked_mul(mult).with_context(|| format!("{s} is too large"))
}

/// A request that never reached the coordinator, in one line that says what to do: a
/// refused connection means none runs there (`lull up` starts one).
pub(crate) fn unreachable(url: &str, e: reqwest::Error) -> anyhow::Error {
    let refused = std::error::Error::source(&e)
        .and_then(|s| s.source().or(Some(s)))
        .is_some_and(|s| s.to_string().to_lowercase().contains("connection refused"))
        || e.to_string().to_lowercase().contains("connection refused");
    if e.is_connect() && refused {
        return anyhow::anyhow!(
            "no coordinator answers at {url} (connection refused): start one with `lull up` (or `lull coordinator serve`), or give its address with --url"
        );
    }
    anyhow::anyhow!("cannot reach the coordinator at {url}: {}", agent_core::message::once(anyhow::Error::from(e).chain()))
}

/// The response if it is a success; otherwise one error line with the coordinator's message.
pub(crate) async fn check(r: reqwest::Response) -> Result<reqwest::Response> {
    let st = r.status();
    if st.is_success() {
        return Ok(r);
    }
    let text = r.text().await.unwrap_or_default();
    let msg = serde_json::from_str::<serde_json::Value>(&text).ok().and_then(|v| v["error"].as_str().map(str::to_string)).unwrap_or(text);
    bail!("coordinator answered {st}: {msg}")
}

pub fn submit(a: SubmitArgs) -> Result<()> {
    let (url, key) = a.remote.resolve()?;
    let mut env = BTreeMap::new();
    for kv in &a.env {
        let (k, v) = kv.split_once('=').with_context(|| format!("--env {kv:?} is not NAME=VALUE"))?;
        env.insert(k.to_string(), v.to_string());
    }
    let mut inputs = BTreeMap::new();
    for p in &a.inputs {
        let name = p.file_name().and_then(|n| n.to_str()).with_context(|| format!("{} has no file name", p.display()))?;
        inputs.insert(name.to_string(), std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?);
    }
    let job = SubmitJob {
        command: a.command[0].clone(),
        args: a.command[1..].to_vec(),
        env,
        inputs,
        mem_bytes: parse_bytes(&a.mem)?,
        checkpointable: a.checkpointable,
        program: a.program.clone(),
        machines: a.machines,
        max_retries: a.retries,
        estimate_s: a.estimate,
    };
    runtime()?.block_on(async move {
        let http = reqwest::Client::new();
        for _ in 0..a.count {
            let r = http.post(format!("{url}/api/v1/jobs")).bearer_auth(&key).json(&job).send().await.map_err(|e| unreachable(&url, e))?;
            let j: Job = check(r).await?.json().await?;
            if a.json {
                outln!("{}", serde_json::to_string(&j)?);
                continue;
            }
            outln!("job {} queued: {} on {} machine{}", j.id, j.program, j.machines, if j.machines == 1 { "" } else { "s" });
            match &j.waiting {
                Some(w) if w.cannot_run => errln!(
                    "lull: warning: job {} cannot run with the pool as it is: {}; it waits until that changes (cancel it with `lull jobs cancel {}`)",
                    j.id,
                    w.reason,
                    j.id
                ),
                Some(_) if a.count == 1 => {
                    // An idle machine usually leases it within a moment (a machine just
                    // donated may not have said so yet): say why it waits only if it does.
                    if let Some(reason) = still_waiting(&http, &url, &key, j.id).await {
                        errln!("lull: job {} waits: {reason}", j.id);
                    }
                }
                _ => {}
            }
        }
        Ok(())
    })
}

/// How long `lull submit` gives an idle machine to take a job before it says why the
/// job waits.
const PLACEMENT_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

/// Why job `id` still waits after [`PLACEMENT_GRACE`], or `None` once it is placed (or
/// cannot be read: the submission itself succeeded).
async fn still_waiting(http: &reqwest::Client, url: &str, key: &str, id: i64) -> Option<String> {
    let deadline = std::time::Instant::now() + PLACEMENT_GRACE;
    loop {
        let j: Job = http.get(format!("{url}/api/v1/jobs/{id}")).bearer_auth(key).send().await.ok()?.json().await.ok()?;
        let waiting = j.waiting?;
        if std::time::Instant::now() >= deadline {
            return Some(waiting.reason);
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

#[derive(Args, Debug)]
pub struct ReportArgs {
    #[command(flatten)]
    pub remote: Remote,
    /// Rows per owner or per machine.
    #[arg(long, default_value = "owner", value_parser = ["owner", "machine"])]
    pub by: String,
    /// From when: a duration back from today (7d, 2w, 90m; up to 3660d) or a day YYYY-MM-DD.
    #[arg(long, default_value = "7d", value_parser = crate::spans::since)]
    pub since: String,
    /// Rows per day or per week.
    #[arg(long, default_value = "day", value_parser = ["day", "week"])]
    pub period: String,
    /// Only this owner's machines.
    #[arg(long)]
    pub owner: Option<String>,
    /// Print the report as JSON.
    #[arg(long, conflicts_with = "csv")]
    pub json: bool,
    /// Print the report as CSV (one row per owner or machine and period).
    #[arg(long)]
    pub csv: bool,
}

pub fn report(a: ReportArgs) -> Result<()> {
    let (url, key) = a.remote.resolve()?;
    let format = if a.csv { "csv" } else { "json" };
    let mut query = vec![("by", a.by.clone()), ("since", a.since.clone()), ("period", a.period.clone()), ("format", format.to_string())];
    if let Some(o) = &a.owner {
        query.push(("owner", o.clone()));
    }
    runtime()?.block_on(async move {
        let r = reqwest::Client::new()
            .get(format!("{url}/api/v1/reports"))
            .bearer_auth(&key)
            .query(&query)
            .send()
            .await
            .map_err(|e| unreachable(&url, e))?;
        let text = check(r).await?.text().await?;
        if a.csv || a.json {
            out!("{text}");
            if a.json {
                outln!();
            }
            return Ok(());
        }
        let r: Report = serde_json::from_str(&text)?;
        outln!(
            "{:<24} {:<10} {:>12} {:>12} {:>9} {:>7} {:>5} {:>6} {:>10}",
            r.by,
            r.period,
            "cpu s",
            "wall s",
            "interr.",
            "avail",
            "jobs",
            "evict",
            "linger s"
        );
        // Machines by name; an id (its first 8 characters) only where two share a name.
        let named = |m: &str| {
            r.rows.iter().filter(|x| x.machine.as_deref() == Some(m)).map(|x| &x.key).collect::<std::collections::BTreeSet<_>>().len()
        };
        for row in &r.rows {
            let key = match &row.machine {
                Some(m) if named(m) > 1 => format!("{m} ({})", &row.key[..row.key.len().min(8)]),
                Some(m) => m.clone(),
                None => row.key.clone(),
            };
            outln!(
                "{:<24} {:<10} {:>12.3} {:>12.3} {:>5}/{:<3} {:>6.1}% {:>5} {:>6} {:>10.1}",
                key,
                row.period,
                row.cpu_s,
                row.wall_s,
                row.interruptions,
                row.interruption_limit,
                row.available_fraction * 100.0,
                row.jobs_completed,
                row.evictions,
                row.linger_s
            );
        }
        if r.rows.is_empty() {
            outln!("(nothing donated since {})", r.since);
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_suffixes() {
        assert_eq!(parse_bytes("512").unwrap(), 512);
        assert_eq!(parse_bytes("64K").unwrap(), 65_536);
        assert_eq!(parse_bytes("512M").unwrap(), 512 << 20);
        assert_eq!(parse_bytes("2g").unwrap(), 2 << 30);
        assert!(parse_bytes("x").is_err());
        assert!(parse_bytes("99999999999999G").is_err());
    }
}
