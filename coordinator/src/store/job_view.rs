//! Jobs as people read them (`GET /api/v1/jobs`, `…/{id}`, `…/{id}/output`, `lull jobs`,
//! the dashboard): who may see and cancel which job, each task with its machine's name,
//! how it ended (exit code, signal, reason) and a job's summary of it.
//!
//! Who sees what: an admin every job; an owner the jobs they submitted and the jobs
//! that ran (or run) on one of their machines. Only the submitter (and an admin) may
//! cancel a job.

use super::common::{Result, StoreError};
use crate::auth::Principal;
use crate::db::{col, Db, Dialect};
use crate::model::*;
use sqlx::any::AnyRow;
use sqlx::AnyConnection;
use sqlx::Row;
use std::collections::HashMap;

/// The job's columns people read.
const JOB_COLS: &str =
    "j.id, j.submitter, j.program, j.spec, j.mem_bytes, j.checkpointable, j.gang, j.max_retries, j.state, j.created_ms, j.finished_ms, j.reason";

/// A task's columns with its machine's name.
pub(crate) const TASK_SELECT: &str =
    "SELECT t.job_id, t.rank, t.state, t.agent_id, a.name AS machine, t.lease_epoch, t.attempts, t.runs, t.evictions,
        t.exit_code, t.signal, t.end_reason, t.user_cpu_s, t.sys_cpu_s
    FROM tasks t LEFT JOIN agents a ON a.id = t.agent_id";

/// The condition (on `jobs j`) that `$1` may see a job: `$1` is empty for an admin, else
/// the owner's name, who sees what they submitted and what ran on their machines.
const VISIBLE: &str = "($1 = '' OR j.submitter = $1
    OR EXISTS (SELECT 1 FROM tasks t JOIN agents a ON a.id = t.agent_id WHERE t.job_id = j.id AND a.owner = $1)
    OR EXISTS (SELECT 1 FROM task_events e JOIN agents a ON a.id = e.agent_id WHERE e.job_id = j.id AND a.owner = $1))";

/// `$1` of [`VISIBLE`] for `who`.
fn viewer(who: &Principal) -> String {
    match who {
        Principal::Admin => String::new(),
        other => other.submitter(),
    }
}

/// Whether `who` may cancel a job `submitter` submitted: an admin any, others their own.
pub fn may_cancel(who: &Principal, submitter: &str) -> bool {
    *who == Principal::Admin || who.submitter() == submitter
}

pub(crate) fn task_of(row: &AnyRow) -> Result<Task> {
    let state: String = col(row, "state")?;
    let charged = col::<i64>(row, "attempts")?.max(0) as u32;
    Ok(Task {
        rank: col::<i64>(row, "rank")? as u32,
        // The lease running now (or the one the task ended under) is counted in
        // `attempts` too; a queued task's count is all past failures.
        retries_used: if state == "queued" { charged } else { charged.saturating_sub(1) },
        state,
        agent_id: col(row, "agent_id")?,
        machine: col(row, "machine")?,
        lease: col(row, "lease_epoch")?,
        attempts: col::<i64>(row, "runs")?.max(0) as u32,
        evictions: col::<i64>(row, "evictions")? as u32,
        exit_code: col(row, "exit_code")?,
        signal: col::<Option<i64>>(row, "signal")?.map(|s| lull_protocol::signal_name(s as i32)),
        reason: col(row, "end_reason")?,
        user_cpu_s: col(row, "user_cpu_s")?,
        sys_cpu_s: col(row, "sys_cpu_s")?,
    })
}

fn spec_of(s: &str) -> Result<JobSpec> {
    serde_json::from_str(s).map_err(|e| StoreError::Sql(sqlx::Error::Decode(Box::new(e))))
}

/// How the job's tasks ended, in one word each: the exit code or the signal's name;
/// one word when every ended rank agrees, else each rank's joined with commas.
pub fn exit_summary(tasks: &[Task]) -> Option<String> {
    let words: Vec<String> = tasks.iter().filter_map(|t| t.exit_code.map(|c| c.to_string()).or_else(|| t.signal.clone())).collect();
    match words.first() {
        None => None,
        Some(first) if words.iter().all(|w| w == first) => Some(first.clone()),
        Some(_) => Some(words.join(",")),
    }
}

fn job_of(row: &AnyRow, tasks: Vec<Task>, who: &Principal) -> Result<Job> {
    let submitter: String = col(row, "submitter")?;
    let state: String = col(row, "state")?;
    Ok(Job {
        id: col(row, "id")?,
        may_cancel: matches!(state.as_str(), "queued" | "running") && may_cancel(who, &submitter),
        submitter,
        program: col(row, "program")?,
        spec: spec_of(&col::<String>(row, "spec")?)?,
        mem_bytes: col::<i64>(row, "mem_bytes")? as u64,
        checkpointable: col::<i64>(row, "checkpointable")? != 0,
        machines: col::<i64>(row, "gang")? as u32,
        max_retries: col::<i64>(row, "max_retries")? as u32,
        state,
        created_ms: col(row, "created_ms")?,
        finished_ms: col(row, "finished_ms")?,
        reason: col(row, "reason")?,
        exit: exit_summary(&tasks),
        tasks,
        placement: None,
        waiting: None,
    })
}

/// `SELECT value FROM …` the elements of the JSON array bound as parameter `$n`, as
/// integers (`ints`) or text: one statement reads any number of ids, where an `IN ($1,
/// …)` list would need a statement per [`crate::store::common::rows_per_statement`] ids.
fn json_elements(db: &Db, n: u32, ints: bool) -> String {
    match (db.dialect, ints) {
        (Dialect::Sqlite, _) => format!("SELECT value FROM json_each(${n})"),
        (Dialect::Postgres, true) => format!("SELECT CAST(value AS BIGINT) FROM json_array_elements_text(CAST(${n} AS JSON))"),
        (Dialect::Postgres, false) => format!("SELECT value FROM json_array_elements_text(CAST(${n} AS JSON))"),
    }
}

/// `items` as a JSON array, for [`json_elements`].
fn json_array<T: serde::Serialize>(items: &[T]) -> String {
    serde_json::to_string(items).expect("ids serialize")
}

/// The tasks of `jobs`, in (job, rank) order, read in one statement on `conn`.
async fn tasks_of(db: &Db, conn: &mut AnyConnection, jobs: &[i64]) -> Result<HashMap<i64, Vec<Task>>> {
    let mut out: HashMap<i64, Vec<Task>> = HashMap::with_capacity(jobs.len());
    let sql = format!("{TASK_SELECT} WHERE t.job_id IN ({}) ORDER BY t.job_id, t.rank", json_elements(db, 1, true));
    for r in sqlx::query(sqlx::AssertSqlSafe(sql)).bind(json_array(jobs)).fetch_all(&mut *conn).await? {
        out.entry(col(&r, "job_id")?).or_default().push(task_of(&r)?);
    }
    Ok(out)
}

/// A job, if `who` may see it: its row, tasks and placement as of one moment
/// ([`Db::read_snapshot`]).
pub async fn get_job(db: &Db, who: &Principal, id: i64) -> Result<Job> {
    let mut tx = db.read_snapshot().await?;
    get_job_in(db, &mut tx, who, id).await
}

/// [`get_job`] read on `conn` (a snapshot).
async fn get_job_in(db: &Db, conn: &mut AnyConnection, who: &Principal, id: i64) -> Result<Job> {
    let sql = format!("SELECT {JOB_COLS} FROM jobs j WHERE j.id = $2 AND {VISIBLE}");
    let row = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(viewer(who)).bind(id).fetch_optional(&mut *conn).await?;
    let row = row.ok_or(StoreError::NotFound)?;
    let tasks = tasks_of(db, conn, &[id]).await?.remove(&id).unwrap_or_default();
    let mut job = job_of(&row, tasks, who)?;
    job.placement = placements_of(db, conn, &[(id, job.finished_ms)]).await?.remove(&id);
    Ok(job)
}

/// Jobs `who` may see, newest first, optionally in one state (at most `limit`), each as
/// of the same moment ([`Db::read_snapshot`]).
pub async fn list_jobs(db: &Db, who: &Principal, state: Option<&str>, limit: u32) -> Result<Vec<Job>> {
    let mut tx = db.read_snapshot().await?;
    let sql = format!("SELECT {JOB_COLS} FROM jobs j WHERE {VISIBLE} AND ($2 = '' OR j.state = $2) ORDER BY j.id DESC LIMIT $3");
    let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(viewer(who))
        .bind(state.unwrap_or(""))
        .bind(limit.min(10_000) as i64)
        .fetch_all(&mut *tx)
        .await?;
    let ids: Vec<i64> = rows.iter().map(|r| col(r, "id")).collect::<std::result::Result<_, _>>()?;
    let mut tasks = tasks_of(db, &mut tx, &ids).await?;
    let mut out = Vec::with_capacity(rows.len());
    for (row, id) in rows.iter().zip(&ids) {
        out.push(job_of(row, tasks.remove(id).unwrap_or_default(), who)?);
    }
    let finished: Vec<(i64, Option<i64>)> = out.iter().map(|j| (j.id, j.finished_ms)).collect();
    let mut placements = placements_of(db, &mut tx, &finished).await?;
    for job in &mut out {
        job.placement = placements.remove(&job.id);
    }
    Ok(out)
}

/// The most queued jobs [`queued_before`] counts: beyond it a submission is told "more
/// than" this many (counting is linear in the queue, and runs for every submission).
pub const QUEUED_BEFORE_CAP: u32 = 1_000;

/// How many jobs were queued before job `id` and still are (the queue ahead of it, as
/// submitted; the scheduler may place some later ones first), counted up to
/// [`QUEUED_BEFORE_CAP`] + 1 from the queued jobs' index (`jobs_queued`).
pub async fn queued_before(db: &Db, id: i64) -> Result<u32> {
    let n: i64 = sqlx::query("SELECT COUNT(*) AS n FROM (SELECT 1 FROM jobs WHERE state = 'queued' AND id < $1 LIMIT $2) ahead")
        .bind(id)
        .bind(i64::from(QUEUED_BEFORE_CAP) + 1)
        .fetch_one(&db.pool)
        .await?
        .try_get("n")?;
    Ok(n.max(0) as u32)
}

/// Jobs `who` may see, counted by state.
pub async fn job_counts(db: &Db, who: &Principal) -> Result<Vec<(String, u32)>> {
    let sql = format!("SELECT j.state AS state, COUNT(*) AS n FROM jobs j WHERE {VISIBLE} GROUP BY j.state ORDER BY j.state");
    let rows = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(viewer(who)).fetch_all(&db.pool).await?;
    rows.iter().map(|r| Ok((col(r, "state")?, col::<i64>(r, "n")? as u32))).collect()
}

/// The latest placement of each of `jobs` (id, finished) that the scheduler placed, read
/// in one statement on `conn`, with every placement's machine names read together in one
/// more.
async fn placements_of(db: &Db, conn: &mut AnyConnection, jobs: &[(i64, Option<i64>)]) -> Result<HashMap<i64, Placement>> {
    let ids: Vec<i64> = jobs.iter().map(|(id, _)| *id).collect();
    let sql = format!(
        "SELECT job_id, agents, algorithm, reason, prediction_source, predicted_runtime_s, placed_ms FROM placements WHERE job_id IN ({})",
        json_elements(db, 1, true)
    );
    let rows = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(json_array(&ids)).fetch_all(&mut *conn).await?;
    let agents_of = |r: &AnyRow| -> Result<Vec<String>> {
        Ok(col::<String>(r, "agents")?.split(',').filter(|s| !s.is_empty()).map(str::to_string).collect())
    };
    let mut all_agents = Vec::new();
    for r in &rows {
        all_agents.extend(agents_of(r)?);
    }
    all_agents.sort();
    all_agents.dedup();
    let names: HashMap<String, String> = all_agents.iter().cloned().zip(machine_names(db, conn, &all_agents).await?).collect();
    let finished: HashMap<i64, Option<i64>> = jobs.iter().copied().collect();
    let mut out = HashMap::with_capacity(rows.len());
    for r in &rows {
        let job: i64 = col(r, "job_id")?;
        let placed_ms: i64 = col(r, "placed_ms")?;
        let agents = agents_of(r)?;
        let machines = agents.iter().map(|a| names.get(a).cloned().unwrap_or_else(|| a.clone())).collect();
        let finished_ms = finished.get(&job).copied().flatten();
        out.insert(
            job,
            Placement {
                agents,
                machines,
                algorithm: col(r, "algorithm")?,
                reason: col(r, "reason")?,
                prediction_source: col(r, "prediction_source")?,
                predicted_runtime_s: col(r, "predicted_runtime_s")?,
                placed_ms,
                actual_runtime_s: finished_ms.map(|f| (f - placed_ms).max(0) as f64 / 1000.0),
            },
        );
    }
    Ok(out)
}

/// The machine name of each agent id, in order (the id itself where the agent is gone),
/// read in one statement on `conn`.
async fn machine_names(db: &Db, conn: &mut AnyConnection, agents: &[String]) -> Result<Vec<String>> {
    let mut names: HashMap<String, String> = HashMap::with_capacity(agents.len());
    if !agents.is_empty() {
        let sql = format!("SELECT id, name FROM agents WHERE id IN ({})", json_elements(db, 1, false));
        for r in sqlx::query(sqlx::AssertSqlSafe(sql)).bind(json_array(agents)).fetch_all(&mut *conn).await? {
            names.insert(col(&r, "id")?, col(&r, "name")?);
        }
    }
    Ok(agents.iter().map(|a| names.get(a).cloned().unwrap_or_else(|| a.clone())).collect())
}

/// The output tails of a job's tasks, if `who` may see the job (as [`get_job`]): what
/// each rank's agent sent with its renewals while it ran and with its completion; `None`
/// for ranks that have not run (or whose agent predates output tails).
pub async fn job_output(db: &Db, who: &Principal, id: i64) -> Result<JobOutput> {
    let mut tx = db.read_snapshot().await?;
    let job = get_job_in(db, &mut tx, who, id).await?;
    let rows = sqlx::query("SELECT rank, stdout_tail, stderr_tail, stdout_bytes, stderr_bytes FROM tasks WHERE job_id = $1 ORDER BY rank")
        .bind(id)
        .fetch_all(&mut *tx)
        .await?;
    let mut tasks = Vec::with_capacity(rows.len());
    for (r, t) in rows.iter().zip(&job.tasks) {
        let stdout: Option<String> = col(r, "stdout_tail")?;
        let output = match stdout {
            Some(stdout) => Some(Output {
                stdout,
                stderr: col::<Option<String>>(r, "stderr_tail")?.unwrap_or_default(),
                stdout_bytes: col::<Option<i64>>(r, "stdout_bytes")?.unwrap_or(0).max(0) as u64,
                stderr_bytes: col::<Option<i64>>(r, "stderr_bytes")?.unwrap_or(0).max(0) as u64,
            }),
            None => None,
        };
        tasks.push(TaskOutput {
            rank: t.rank,
            state: t.state.clone(),
            agent_id: t.agent_id.clone(),
            machine: t.machine.clone(),
            exit_code: t.exit_code,
            signal: t.signal.clone(),
            reason: t.reason.clone(),
            output,
        });
    }
    Ok(JobOutput { job_id: job.id, state: job.state, reason: job.reason, tasks })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(exit: Option<i64>, signal: Option<&str>) -> Task {
        Task {
            rank: 0,
            state: "failed".into(),
            agent_id: None,
            machine: None,
            lease: 1,
            attempts: 1,
            retries_used: 0,
            evictions: 0,
            exit_code: exit,
            signal: signal.map(str::to_string),
            reason: None,
            user_cpu_s: None,
            sys_cpu_s: None,
        }
    }

    #[test]
    fn the_exit_summary_is_one_word_when_the_ranks_agree() {
        assert_eq!(exit_summary(&[]), None);
        assert_eq!(exit_summary(&[task(None, None)]), None, "a program that never ran has no exit code");
        assert_eq!(exit_summary(&[task(Some(0), None), task(Some(0), None)]).as_deref(), Some("0"));
        assert_eq!(exit_summary(&[task(Some(0), None), task(None, Some("SIGKILL"))]).as_deref(), Some("0,SIGKILL"));
    }

    #[test]
    fn only_the_submitter_and_admins_may_cancel() {
        let alice = Principal::Owner { owner: "alice".into() };
        assert!(may_cancel(&Principal::Admin, "alice"));
        assert!(may_cancel(&alice, "alice"));
        assert!(!may_cancel(&alice, "bob"));
    }
}
