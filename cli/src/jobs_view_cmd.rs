//! `lull jobs`: what became of submitted jobs, over the coordinator's API: the list
//! (`lull jobs`, `lull jobs list`), one job with its tasks (`lull jobs show ID`), and
//! what its guests wrote (`lull jobs output ID`: the tail the coordinator keeps, the last
//! 64 KiB of each stream, standard output to standard output and standard error to
//! standard error). Admin keys see every job, owner keys their own.

use crate::coordinator_cmd::runtime;
use crate::jobs_cmd::{check, Remote};
use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use coordinator::model::{Job, JobOutput};

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
    /// One job and its tasks.
    Show(ShowArgs),
    /// What a completed job's guests wrote (the last 64 KiB of standard output and error).
    Output(ShowArgs),
}

#[derive(Args, Debug)]
pub struct ListArgs {
    #[command(flatten)]
    pub remote: Remote,
    /// Only jobs in this state.
    #[arg(long, value_parser = ["queued", "running", "completed", "failed", "cancelled"])]
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

/// GETs `path` from the coordinator as text; a 404 becomes "no job ID".
async fn get_text(remote: &Remote, path: &str, query: &[(&str, String)], id: Option<i64>) -> Result<String> {
    let (url, key) = remote.resolve()?;
    let r = reqwest::Client::new()
        .get(format!("{url}{path}"))
        .bearer_auth(&key)
        .query(query)
        .send()
        .await
        .with_context(|| format!("reaching {url}"))?;
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
    }
}

fn when(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.with_timezone(&chrono::Local).format("%Y-%m-%d %H:%M:%S").to_string())
        .unwrap_or_else(|| "?".into())
}

fn list(a: ListArgs) -> Result<()> {
    let mut query = vec![("limit", a.limit.to_string())];
    if let Some(s) = &a.state {
        query.push(("state", s.clone()));
    }
    let text = runtime()?.block_on(get_text(&a.remote, "/api/v1/jobs", &query, None))?;
    if a.json {
        outln!("{text}");
        return Ok(());
    }
    let jobs: Vec<Job> = serde_json::from_str(&text).context("reading the coordinator's job list")?;
    if jobs.is_empty() {
        outln!("(no jobs{})", a.state.map(|s| format!(" {s}")).unwrap_or_default());
        return Ok(());
    }
    outln!("{:>6}  {:<10} {:<20} {:>8}  {:<19}  {}", "id", "state", "program", "machines", "submitted", "exit");
    for j in &jobs {
        let exits: Vec<String> = j.tasks.iter().filter_map(|t| t.exit_code.map(|c| c.to_string())).collect();
        outln!("{:>6}  {:<10} {:<20} {:>8}  {:<19}  {}", j.id, j.state, j.program, j.machines, when(j.created_ms), exits.join(","));
    }
    Ok(())
}

fn show(a: ShowArgs) -> Result<()> {
    let text = runtime()?.block_on(get_text(&a.remote, &format!("/api/v1/jobs/{}", a.id), &[], Some(a.id)))?;
    if a.json {
        outln!("{text}");
        return Ok(());
    }
    let j: Job = serde_json::from_str(&text).context("reading the coordinator's job")?;
    outln!("job {}: {} ({})", j.id, j.state, j.program);
    let args: Vec<String> = j.spec.args.iter().map(|a| format!("{a:?}")).collect();
    outln!("  command    {} {}", j.spec.command, args.join(" "));
    outln!("  submitter  {}", j.submitter);
    outln!("  submitted  {}", when(j.created_ms));
    if let Some(f) = j.finished_ms {
        outln!("  finished   {}", when(f));
    }
    outln!(
        "  machines   {}   retries {}   memory {} bytes{}",
        j.machines,
        j.max_retries,
        j.mem_bytes,
        if j.checkpointable { "   checkpointable" } else { "" }
    );
    for t in &j.tasks {
        let exit = t.exit_code.map_or(String::new(), |c| format!(" exit {c}"));
        let cpu = match (t.user_cpu_s, t.sys_cpu_s) {
            (Some(u), Some(s)) => format!(", cpu {:.3} s", u + s),
            _ => String::new(),
        };
        let on = t.agent_id.as_deref().map_or(String::new(), |a| format!(" on {a}"));
        outln!("  rank {}     {}{exit}{on}, attempts {}, evictions {}{cpu}", t.rank, t.state, t.attempts, t.evictions);
    }
    if j.state == "completed" {
        outln!("output: lull jobs output {}", j.id);
    }
    Ok(())
}

/// `(the last N of M bytes)` when a stream was cut.
fn cut_note(stream: &str, kept: usize, total: u64) -> Option<String> {
    (total > kept as u64).then(|| format!("lull: {stream}: the last {kept} of {total} bytes"))
}

fn output(a: ShowArgs) -> Result<()> {
    let text = runtime()?.block_on(get_text(&a.remote, &format!("/api/v1/jobs/{}/output", a.id), &[], Some(a.id)))?;
    if a.json {
        outln!("{text}");
        return Ok(());
    }
    let o: JobOutput = serde_json::from_str(&text).context("reading the coordinator's job output")?;
    if o.tasks.iter().all(|t| t.output.is_none()) {
        match o.state.as_str() {
            "queued" | "running" => bail!("job {} is {}: its output is kept when it completes", o.job_id, o.state),
            s => bail!("job {} is {s} and no output was kept for it", o.job_id),
        }
    }
    let gang = o.tasks.len() > 1;
    for t in &o.tasks {
        if gang {
            let exit = t.exit_code.map_or(String::new(), |c| format!(", exit {c}"));
            outln!("--- rank {} ({}{exit}) ---", t.rank, t.state);
        }
        let Some(out) = &t.output else { continue };
        out!("{}", out.stdout);
        eprint!("{}", out.stderr);
        for note in [cut_note("stdout", out.stdout.len(), out.stdout_bytes), cut_note("stderr", out.stderr.len(), out.stderr_bytes)]
            .into_iter()
            .flatten()
        {
            errln!("{note}");
        }
    }
    Ok(())
}
