//! `lull jobs`: what became of submitted jobs, over the coordinator's API: the list
//! (`lull jobs`, `lull jobs list`, each job's exit code or signal and why it failed,
//! was lost, was cancelled or waits), one job with its tasks (`lull jobs show ID`), what
//! its guests wrote (`lull jobs output ID`, `--follow` while it runs: the tail the
//! coordinator keeps, the last 64 KiB of each stream, standard output to standard output
//! and standard error to standard error), and `lull jobs cancel ID…`. Admin keys see
//! every job; owner keys the jobs they submitted and those that ran on their machines,
//! and may cancel their own.

use crate::jobs_cmd::{check, unreachable, Remote};
use crate::pool_files::runtime;
use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use coordinator::model::{Job, JobOutput, Task};
use std::time::Duration;

#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub struct JobsArgs {
    #[command(subcommand)]
    pub cmd: Option<JobsCmd>,
    #[command(flatten)]
    pub list: ListArgs,
}

#[derive(Subcommand, Debug)]
pub enum JobsCmd {
    /// Jobs, newest first (the default).
    List(ListArgs),
    /// One job and its tasks: where each ran, how it ended and why, or why it waits.
    Show(ShowArgs),
    /// What a job's guests wrote (the last 64 KiB of standard output and error);
    /// `--follow` shows a running job's output as it comes.
    Output(OutputArgs),
    /// Cancel jobs (your own; an admin key any): a running guest is stopped within a
    /// renewal (15 s).
    Cancel(CancelArgs),
}

/// The states a job can be in.
pub const STATES: [&str; 6] = ["queued", "running", "completed", "failed", "cancelled", "lost"];

#[derive(Args, Debug)]
pub struct ListArgs {
    #[command(flatten)]
    pub remote: Remote,
    /// Only jobs in this state.
    #[arg(long, value_parser = STATES)]
    pub state: Option<String>,
    /// At most this many jobs.
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub limit: u32,
    /// Print the coordinator's JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct ShowArgs {
    #[command(flatten)]
    pub remote: Remote,
    /// The job's id (as `lull submit` printed it).
    pub id: i64,
    /// Print the coordinator's JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct OutputArgs {
    #[command(flatten)]
    pub remote: Remote,
    /// The job's id (as `lull submit` printed it).
    pub id: i64,
    /// Keep showing what the job writes until it ends (its agent sends it with each
    /// lease renewal, every 15 s).
    #[arg(long, short = 'f', conflicts_with = "json")]
    pub follow: bool,
    /// Print the coordinator's JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct CancelArgs {
    #[command(flatten)]
    pub remote: Remote,
    /// The jobs' ids.
    #[arg(required = true, num_args = 1..)]
    pub ids: Vec<i64>,
    /// Print each job as the coordinator answers it, as JSON lines.
    #[arg(long)]
    pub json: bool,
}

/// GETs `path` from the coordinator as text; a 404 becomes "no job ID".
async fn get_text(
    http: &reqwest::Client,
    remote: &(String, String),
    path: &str,
    query: &[(&str, String)],
    id: Option<i64>,
) -> Result<String> {
    let (url, key) = remote;
    let r = http.get(format!("{url}{path}")).bearer_auth(key).query(query).send().await.map_err(|e| unreachable(url, e))?;
    if let (Some(id), reqwest::StatusCode::NOT_FOUND) = (id, r.status()) {
        bail!("no job {id} on {url} that this key may see");
    }
    Ok(check(r).await?.text().await?)
}

pub fn run(a: JobsArgs) -> Result<()> {
    match a.cmd.unwrap_or(JobsCmd::List(a.list)) {
        JobsCmd::List(a) => list(a),
        JobsCmd::Show(a) => show(a),
        JobsCmd::Output(a) => output(a),
        JobsCmd::Cancel(a) => cancel(a),
    }
}

fn when(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.with_timezone(&chrono::Local).format("%Y-%m-%d %H:%M:%S").to_string())
        .unwrap_or_else(|| "?".into())
}

/// Why a job is as it is, in a few words: its end's reason, or why it waits.
fn why(j: &Job) -> String {
    match (&j.reason, &j.waiting) {
        (Some(r), _) => r.clone(),
        (None, Some(w)) => format!("waiting: {}", w.reason),
        _ => String::new(),
    }
}

fn list(a: ListArgs) -> Result<()> {
    let mut query = vec![("limit", a.limit.to_string())];
    if let Some(s) = &a.state {
        query.push(("state", s.clone()));
    }
    let remote = a.remote.resolve()?;
    let text = runtime()?.block_on(get_text(&reqwest::Client::new(), &remote, "/api/v1/jobs", &query, None))?;
    if a.json {
        outln!("{text}");
        return Ok(());
    }
    let jobs: Vec<Job> = serde_json::from_str(&text).context("reading the coordinator's job list")?;
    if jobs.is_empty() {
        outln!("(no jobs{})", a.state.map(|s| format!(" {s}")).unwrap_or_default());
        return Ok(());
    }
    outln!("{:>6}  {:<10} {:<20} {:>8}  {:<19}  {:<8} {}", "id", "state", "program", "machines", "submitted", "exit", "why");
    for j in &jobs {
        outln!(
            "{:>6}  {:<10} {:<20} {:>8}  {:<19}  {:<8} {}",
            j.id,
            j.state,
            j.program,
            j.machines,
            when(j.created_ms),
            j.exit.as_deref().unwrap_or("-"),
            why(j)
        );
    }
    Ok(())
}

/// One task's line in `lull jobs show`.
fn task_line(t: &Task) -> String {
    let ended = match (t.exit_code, &t.signal) {
        (Some(c), _) => format!(", exit {c}"),
        (None, Some(s)) => format!(", signal {s}"),
        _ => String::new(),
    };
    let cpu = match (t.user_cpu_s, t.sys_cpu_s) {
        (Some(u), Some(s)) => format!(", cpu {:.3} s", u + s),
        _ => String::new(),
    };
    let on = t.machine.as_deref().or(t.agent_id.as_deref()).map_or(String::new(), |m| format!(" on {m}"));
    let reason = t.reason.as_deref().map_or(String::new(), |r| format!(" — {r}"));
    format!(
        "  rank {}     {}{on}{ended}{cpu}, attempts {}, evictions {}, retries used {}{reason}",
        t.rank, t.state, t.attempts, t.evictions, t.retries_used
    )
}

/// `lull jobs show` as text.
pub fn describe_job(j: &Job) -> String {
    let mut out = format!("job {}: {} ({})\n", j.id, j.state, j.program);
    if let Some(r) = &j.reason {
        out += &format!("  why        {r}\n");
    }
    if let Some(w) = &j.waiting {
        out += &format!("  waiting    {}{}\n", w.reason, if w.cannot_run { " (the pool as it is cannot run it)" } else { "" });
    }
    let words: Vec<String> = std::iter::once(j.spec.command.clone()).chain(j.spec.args.iter().map(|a| format!("{a:?}"))).collect();
    out += &format!("  command    {}\n", words.join(" "));
    out += &format!("  submitter  {}\n", j.submitter);
    out += &format!("  submitted  {}\n", when(j.created_ms));
    if let Some(f) = j.finished_ms {
        out += &format!("  finished   {}\n", when(f));
    }
    out += &format!(
        "  machines   {}   retries {}   memory {}{}\n",
        j.machines,
        j.max_retries,
        if j.mem_bytes == 0 { "not stated".to_string() } else { format!("{} bytes", j.mem_bytes) },
        if j.checkpointable { "   checkpointable" } else { "" }
    );
    if let Some(p) = &j.placement {
        // The reason usually starts with the algorithm's name already ("backfill: next in fifo order").
        let reason = p.reason.strip_prefix(&format!("{}: ", p.algorithm)).unwrap_or(&p.reason);
        out += &format!("  placed on  {} ({}: {reason})\n", p.machines.join(", "), p.algorithm);
    }
    for t in &j.tasks {
        out += &task_line(t);
        out += "\n";
    }
    match j.state.as_str() {
        "queued" => {}
        "running" => out += &format!("output so far: lull jobs output {} --follow\n", j.id),
        _ => out += &format!("output: lull jobs output {}\n", j.id),
    }
    if j.may_cancel {
        out += &format!("cancel: lull jobs cancel {}\n", j.id);
    }
    out
}

fn show(a: ShowArgs) -> Result<()> {
    let remote = a.remote.resolve()?;
    let text = runtime()?.block_on(get_text(&reqwest::Client::new(), &remote, &format!("/api/v1/jobs/{}", a.id), &[], Some(a.id)))?;
    if a.json {
        outln!("{text}");
        return Ok(());
    }
    let j: Job = serde_json::from_str(&text).context("reading the coordinator's job")?;
    out!("{}", describe_job(&j));
    Ok(())
}

/// `(the last N of M bytes)` when a stream was cut.
fn cut_note(stream: &str, kept: usize, total: u64) -> Option<String> {
    (total > kept as u64).then(|| format!("lull: {stream}: the last {kept} of {total} bytes"))
}

/// What of a stream's tail is new, given how many of its bytes were shown already:
/// the new text (from a character boundary) and how many bytes went by unseen (the
/// coordinator keeps only the tail).
pub fn new_part(tail: &str, total: u64, shown: u64) -> (&str, u64) {
    let new = total.saturating_sub(shown);
    if new == 0 {
        return ("", 0);
    }
    if new as usize >= tail.len() {
        return (tail, new - tail.len() as u64);
    }
    let mut from = tail.len() - new as usize;
    while !tail.is_char_boundary(from) {
        from += 1;
    }
    (&tail[from..], 0)
}

fn output(a: OutputArgs) -> Result<()> {
    let remote = a.remote.resolve()?;
    let path = format!("/api/v1/jobs/{}/output", a.id);
    let http = reqwest::Client::new();
    let rt = runtime()?;
    if a.follow {
        return rt.block_on(follow(&http, &remote, &path, a.id));
    }
    let text = rt.block_on(get_text(&http, &remote, &path, &[], Some(a.id)))?;
    if a.json {
        outln!("{text}");
        return Ok(());
    }
    let o: JobOutput = serde_json::from_str(&text).context("reading the coordinator's job output")?;
    if o.tasks.iter().all(|t| t.output.is_none()) {
        match o.state.as_str() {
            "queued" => bail!("job {} is queued: nothing ran yet (lull jobs show {} says why it waits)", o.job_id, o.job_id),
            "running" => bail!("job {} is running and has written nothing yet (lull jobs output {} --follow)", o.job_id, o.job_id),
            s => bail!("job {} is {s} and no output was kept for it{}", o.job_id, o.reason.map(|r| format!(" ({r})")).unwrap_or_default()),
        }
    }
    let gang = o.tasks.len() > 1;
    for t in &o.tasks {
        if gang {
            let exit = t.exit_code.map(|c| format!(", exit {c}")).or(t.signal.as_ref().map(|s| format!(", {s}"))).unwrap_or_default();
            outln!("--- rank {} ({}{exit}) ---", t.rank, t.state);
        }
        let Some(out) = &t.output else { continue };
        out!("{}", out.stdout);
        agent_core::stdout::ewrite(format_args!("{}", out.stderr));
        for note in [cut_note("stdout", out.stdout.len(), out.stdout_bytes), cut_note("stderr", out.stderr.len(), out.stderr_bytes)]
            .into_iter()
            .flatten()
        {
            errln!("{note}");
        }
    }
    Ok(())
}

/// How often `--follow` asks the coordinator.
const FOLLOW_EVERY: Duration = Duration::from_secs(1);

/// `lull jobs output ID --follow`: prints what is new in each rank's tails as its agent
/// sends them, until the job has ended; then says how it ended.
async fn follow(http: &reqwest::Client, remote: &(String, String), path: &str, id: i64) -> Result<()> {
    let mut shown: Vec<(u64, u64)> = Vec::new();
    let mut said_waiting = false;
    loop {
        let text = get_text(http, remote, path, &[], Some(id)).await?;
        let o: JobOutput = serde_json::from_str(&text).context("reading the coordinator's job output")?;
        shown.resize(o.tasks.len(), (0, 0));
        for (t, seen) in o.tasks.iter().zip(shown.iter_mut()) {
            let Some(out) = &t.output else { continue };
            let (text, skipped) = new_part(&out.stdout, out.stdout_bytes, seen.0);
            if skipped > 0 {
                errln!("lull: ({skipped} bytes of standard output went by before they could be shown)");
            }
            out!("{text}");
            let (text, skipped) = new_part(&out.stderr, out.stderr_bytes, seen.1);
            if skipped > 0 {
                errln!("lull: ({skipped} bytes of standard error went by before they could be shown)");
            }
            agent_core::stdout::ewrite(format_args!("{text}"));
            *seen = (out.stdout_bytes.max(seen.0), out.stderr_bytes.max(seen.1));
        }
        match o.state.as_str() {
            "queued" if !said_waiting => {
                said_waiting = true;
                errln!("lull: job {id} is queued; waiting for it to start (lull jobs show {id} says why)");
            }
            "queued" | "running" => {}
            "completed" => return Ok(()),
            s => {
                errln!("lull: job {id} {s}{}", o.reason.map(|r| format!(": {r}")).unwrap_or_default());
                return Ok(());
            }
        }
        tokio::time::sleep(FOLLOW_EVERY).await;
    }
}

fn cancel(a: CancelArgs) -> Result<()> {
    let (url, key) = a.remote.resolve()?;
    runtime()?.block_on(async move {
        let http = reqwest::Client::new();
        let mut failed = 0;
        for id in &a.ids {
            // A job that already ended is said so, not cancelled again (the coordinator
            // would answer it as it ended, cancelled or not, with a 200).
            let before = http.get(format!("{url}/api/v1/jobs/{id}")).bearer_auth(&key).send().await.map_err(|e| unreachable(&url, e))?;
            if before.status().is_success() {
                let j: Job = before.json().await?;
                if !matches!(j.state.as_str(), "queued" | "running") {
                    if a.json {
                        outln!("{}", serde_json::to_string(&j)?);
                    } else {
                        outln!(
                            "job {id} had already ended: {}{}; nothing to cancel",
                            j.state,
                            j.reason.map(|r| format!(" ({r})")).unwrap_or_default()
                        );
                    }
                    continue;
                }
            }
            let r = http.post(format!("{url}/api/v1/jobs/{id}/cancel")).bearer_auth(&key).send().await.map_err(|e| unreachable(&url, e))?;
            if r.status() == reqwest::StatusCode::NOT_FOUND {
                errln!("lull: no job {id} on {url} that this key may see");
                failed += 1;
                continue;
            }
            let j: Job = match check(r).await {
                Ok(r) => r.json().await?,
                Err(e) => {
                    errln!("lull: job {id}: {e}");
                    failed += 1;
                    continue;
                }
            };
            if a.json {
                outln!("{}", serde_json::to_string(&j)?);
            } else if j.state == "cancelled" {
                outln!(
                    "job {id} cancelled{}",
                    if j.tasks.iter().any(|t| t.agent_id.is_some()) { " (its guest stops within 15 s)" } else { "" }
                );
            } else {
                outln!(
                    "job {id} had already ended: {}{}; nothing to cancel",
                    j.state,
                    j.reason.map(|r| format!(" ({r})")).unwrap_or_default()
                );
            }
        }
        if failed > 0 {
            bail!("{failed} of {} jobs not cancelled", a.ids.len());
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn following_prints_only_what_is_new_and_counts_what_went_by() {
        assert_eq!(new_part("abc\n", 4, 0), ("abc\n", 0));
        assert_eq!(new_part("abc\ndef\n", 8, 4), ("def\n", 0));
        assert_eq!(new_part("abc\n", 4, 4), ("", 0));
        // The coordinator kept only the last 4 of 10 bytes: 6 went by unseen.
        assert_eq!(new_part("wxyz", 10, 0), ("wxyz", 6));
        // A cut inside a character moves to the next boundary.
        assert_eq!(new_part("aé", 3, 1), ("é", 0));
        assert_eq!(new_part("aé", 3, 2), ("", 0));
    }
}
