//! The scheduler's database side: what the leader reads to rebuild and reconcile its
//! state, the one transaction that turns a pass's assignments into leases, and the
//! long poll's hand-over of a waiting lease.

use crate::db::{col, Db};
use crate::model::{JobSpec, Lease};
use crate::store::{now_ms, StoreError};
use sqlx::any::AnyRow;
use sqlx::Row;

type Result<T> = std::result::Result<T, StoreError>;

/// A job as the scheduler needs it.
#[derive(Clone, Debug)]
pub struct JobRow {
    pub id: i64,
    pub program: String,
    pub state: String,
    pub mem_bytes: u64,
    pub checkpointable: bool,
    pub estimate_s: Option<f64>,
    pub created_ms: i64,
    pub tasks: Vec<TaskRow>,
}

/// One rank of a job.
#[derive(Clone, Debug)]
pub struct TaskRow {
    pub rank: u32,
    pub state: String,
    pub agent_id: Option<String>,
    pub cpu_s: f64,
}

impl JobRow {
    /// Ranks still to run (queued or leased), in order.
    pub fn open_ranks(&self) -> impl Iterator<Item = &TaskRow> {
        self.tasks.iter().filter(|t| t.state == "queued" || t.state == "leased")
    }
}

const JOB_COLS: &str = "id, program, state, mem_bytes, checkpointable, estimate_s, created_ms";

fn job_row(r: &AnyRow) -> Result<JobRow> {
    Ok(JobRow {
        id: col(r, "id")?,
        program: col(r, "program")?,
        state: col(r, "state")?,
        mem_bytes: col::<i64>(r, "mem_bytes")?.max(0) as u64,
        checkpointable: col::<i64>(r, "checkpointable")? != 0,
        estimate_s: col(r, "estimate_s")?,
        created_ms: col(r, "created_ms")?,
        tasks: Vec::new(),
    })
}

fn task_row(r: &AnyRow) -> Result<(i64, TaskRow)> {
    let cpu = col::<Option<f64>>(r, "user_cpu_s")?.unwrap_or(0.0) + col::<Option<f64>>(r, "sys_cpu_s")?.unwrap_or(0.0);
    Ok((
        col(r, "job_id")?,
        TaskRow { rank: col::<i64>(r, "rank")? as u32, state: col(r, "state")?, agent_id: col(r, "agent_id")?, cpu_s: cpu },
    ))
}

/// One job with its tasks, whatever its state.
pub async fn job(db: &Db, id: i64) -> Result<Option<JobRow>> {
    let Some(r) =
        sqlx::query(sqlx::AssertSqlSafe(format!("SELECT {JOB_COLS} FROM jobs WHERE id = $1"))).bind(id).fetch_optional(&db.pool).await?
    else {
        return Ok(None);
    };
    let mut j = job_row(&r)?;
    for r in sqlx::query("SELECT job_id, rank, state, agent_id, user_cpu_s, sys_cpu_s FROM tasks WHERE job_id = $1 ORDER BY rank")
        .bind(id)
        .fetch_all(&db.pool)
        .await?
    {
        j.tasks.push(task_row(&r)?.1);
    }
    Ok(Some(j))
}

/// Every queued or running job with its tasks, oldest first (the leader's rebuild).
pub async fn open_jobs(db: &Db) -> Result<Vec<JobRow>> {
    let mut jobs: Vec<JobRow> = Vec::new();
    for r in sqlx::query(sqlx::AssertSqlSafe(format!("SELECT {JOB_COLS} FROM jobs WHERE state IN ('queued', 'running') ORDER BY id")))
        .fetch_all(&db.pool)
        .await?
    {
        jobs.push(job_row(&r)?);
    }
    let ix: std::collections::HashMap<i64, usize> = jobs.iter().enumerate().map(|(i, j)| (j.id, i)).collect();
    for r in sqlx::query(
        "SELECT t.job_id, t.rank, t.state, t.agent_id, t.user_cpu_s, t.sys_cpu_s FROM tasks t JOIN jobs j ON j.id = t.job_id
         WHERE j.state IN ('queued', 'running') ORDER BY t.job_id, t.rank",
    )
    .fetch_all(&db.pool)
    .await?
    {
        let (job, t) = task_row(&r)?;
        if let Some(&i) = ix.get(&job) {
            jobs[i].tasks.push(t);
        }
    }
    Ok(jobs)
}

/// An enrolled machine's last flushed heartbeat state.
#[derive(Clone, Debug)]
pub struct AgentRow {
    pub id: String,
    pub owner: String,
    pub state: Option<String>,
    pub budget_left: Option<i64>,
    pub base_speed: Option<f64>,
    pub current_speed: Option<f64>,
    pub free_mem: Option<i64>,
}

fn agent_row(r: &AnyRow) -> Result<AgentRow> {
    Ok(AgentRow {
        id: col(r, "id")?,
        owner: col(r, "owner")?,
        state: col(r, "state")?,
        budget_left: col(r, "budget_left")?,
        base_speed: col(r, "base_speed")?,
        current_speed: col(r, "current_speed")?,
        free_mem: col(r, "free_mem_bytes")?,
    })
}

const AGENT_COLS: &str = "id, owner, state, budget_left, base_speed, current_speed, free_mem_bytes";

/// Every machine still enrolled.
pub async fn agents(db: &Db) -> Result<Vec<AgentRow>> {
    sqlx::query(sqlx::AssertSqlSafe(format!("SELECT {AGENT_COLS} FROM agents WHERE removed_ms IS NULL")))
        .fetch_all(&db.pool)
        .await?
        .iter()
        .map(agent_row)
        .collect()
}

/// One enrolled machine.
pub async fn agent(db: &Db, id: &str) -> Result<Option<AgentRow>> {
    sqlx::query(sqlx::AssertSqlSafe(format!("SELECT {AGENT_COLS} FROM agents WHERE id = $1 AND removed_ms IS NULL")))
        .bind(id)
        .fetch_optional(&db.pool)
        .await?
        .as_ref()
        .map(agent_row)
        .transpose()
}

/// One job's placement, as the leader decided it.
#[derive(Clone, Debug)]
pub struct Planned {
    pub job: i64,
    /// (rank, agent) for each member.
    pub members: Vec<(u32, String)>,
    pub algorithm: String,
    pub reason: String,
    pub prediction_source: String,
    pub predicted_runtime_s: f64,
}

/// Turns a pass's placements into leases in one transaction: each member's task goes
/// from `queued` to `leased` (not yet delivered, expiring after `delivery_ms` unless its
/// agent's poll takes it), the job's state and placement are written. A job whose tasks
/// are no longer all queued (cancelled meanwhile, say) is left untouched as a whole and
/// returned, for the caller to reconcile.
pub async fn assign(db: &Db, plans: &[Planned], delivery_ms: i64) -> Result<Vec<i64>> {
    let now = now_ms();
    let mut conflicts = Vec::new();
    let mut tx = db.pool.begin().await?;
    for p in plans {
        let mut sp = sqlx::Connection::begin(&mut *tx).await?;
        let mut ok = true;
        for (rank, agent) in &p.members {
            let n = sqlx::query(
                "UPDATE tasks SET state = 'leased', agent_id = $3, lease_epoch = lease_epoch + 1, lease_expires_ms = $4,
                    attempts = attempts + 1, lease_delivered = 0
                 WHERE job_id = $1 AND rank = $2 AND state = 'queued'",
            )
            .bind(p.job)
            .bind(*rank as i64)
            .bind(agent)
            .bind(now + delivery_ms)
            .execute(&mut *sp)
            .await?
            .rows_affected();
            if n != 1 {
                ok = false;
                break;
            }
        }
        if !ok {
            sp.rollback().await?;
            conflicts.push(p.job);
            continue;
        }
        sqlx::query("UPDATE jobs SET state = 'running' WHERE id = $1 AND state = 'queued'").bind(p.job).execute(&mut *sp).await?;
        let agents: Vec<&str> = p.members.iter().map(|(_, a)| a.as_str()).collect();
        sqlx::query(
            "INSERT INTO placements(job_id, agents, algorithm, reason, prediction_source, predicted_runtime_s, placed_ms)
             VALUES ($1, $2, $3, $4, $5, $6, $7)
             ON CONFLICT(job_id) DO UPDATE SET agents = excluded.agents, algorithm = excluded.algorithm, reason = excluded.reason,
               prediction_source = excluded.prediction_source, predicted_runtime_s = excluded.predicted_runtime_s,
               placed_ms = excluded.placed_ms",
        )
        .bind(p.job)
        .bind(agents.join(","))
        .bind(&p.algorithm)
        .bind(&p.reason)
        .bind(&p.prediction_source)
        .bind(p.predicted_runtime_s)
        .bind(now)
        .execute(&mut *sp)
        .await?;
        sp.commit().await?;
    }
    tx.commit().await?;
    Ok(conflicts)
}

/// Hands a lease waiting for `agent` to its poll: marks it delivered and gives it the
/// full lease time. At most one poll gets each lease.
pub async fn take_delivery(db: &Db, agent: &str, ttl_ms: i64) -> Result<Option<Lease>> {
    let now = now_ms();
    let row = sqlx::query(
        "UPDATE tasks SET lease_delivered = 1, lease_expires_ms = $2
         WHERE lease_delivered = 0 AND state = 'leased' AND agent_id = $1 AND (job_id, rank) = (
            SELECT q.job_id, q.rank FROM tasks q WHERE q.agent_id = $1 AND q.state = 'leased' AND q.lease_delivered = 0
            ORDER BY q.job_id, q.rank LIMIT 1)
         RETURNING job_id, rank, lease_epoch",
    )
    .bind(agent)
    .bind(now + ttl_ms)
    .fetch_optional(&db.pool)
    .await?;
    let Some(row) = row else { return Ok(None) };
    let job_id: i64 = col(&row, "job_id")?;
    let rank: i64 = col(&row, "rank")?;
    let lease: i64 = col(&row, "lease_epoch")?;
    let j = sqlx::query("SELECT program, spec, mem_bytes, checkpointable, gang FROM jobs WHERE id = $1")
        .bind(job_id)
        .fetch_one(&db.pool)
        .await?;
    let spec: JobSpec = serde_json::from_str(&col::<String>(&j, "spec")?).map_err(|e| StoreError::Sql(sqlx::Error::Decode(Box::new(e))))?;
    Ok(Some(Lease {
        job_id,
        rank: rank as u32,
        lease,
        expires_ms: now + ttl_ms,
        machines: col::<i64>(&j, "gang")? as u32,
        program: col(&j, "program")?,
        spec,
        mem_bytes: col::<i64>(&j, "mem_bytes")?.max(0) as u64,
        checkpointable: col::<i64>(&j, "checkpointable")? != 0,
    }))
}

/// Writes one program's prediction record (the leader, after a job completes).
pub async fn save_program_stats(db: &Db, stats: &lull_core::sched::ProgramStats) -> Result<()> {
    let text = serde_json::to_string(stats).map_err(|e| StoreError::Invalid(e.to_string()))?;
    sqlx::query(
        "INSERT INTO program_stats(program, stats, updated_ms) VALUES ($1, $2, $3)
         ON CONFLICT(program) DO UPDATE SET stats = excluded.stats, updated_ms = excluded.updated_ms",
    )
    .bind(&stats.program)
    .bind(text)
    .bind(now_ms())
    .execute(&db.pool)
    .await?;
    Ok(())
}

/// Every program's prediction record, by program name.
pub async fn program_stats(db: &Db) -> Result<Vec<lull_core::sched::ProgramStats>> {
    let mut out = Vec::new();
    for r in sqlx::query("SELECT stats FROM program_stats ORDER BY program").fetch_all(&db.pool).await? {
        let text: String = r.try_get("stats")?;
        if let Ok(s) = serde_json::from_str(&text) {
            out.push(s);
        }
    }
    Ok(out)
}
