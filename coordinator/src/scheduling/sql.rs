//! The scheduler's database side: what the leader reads to rebuild and reconcile its
//! state, the one transaction that turns a pass's assignments into leases, and the
//! long poll's hand-over of a waiting lease.

use crate::auth::Principal;
use crate::db::{col, Db, Dialect};
use crate::model::{JobSpec, Lease, SubmitJob};
use crate::store::{id_list, now_ms, StoreError};
use sqlx::any::AnyRow;
use sqlx::Row;
use std::collections::{HashMap, HashSet};

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
    /// Since when a started gang has been halted for a lost member (`None`: not halted).
    pub halted_ms: Option<i64>,
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

/// Ids (or agents) one statement names at most.
const IN_CHUNK: usize = 400;

const JOB_COLS: &str = "id, program, state, mem_bytes, checkpointable, estimate_s, created_ms, halted_ms";

fn job_row(r: &AnyRow) -> Result<JobRow> {
    Ok(JobRow {
        id: col(r, "id")?,
        program: col(r, "program")?,
        state: col(r, "state")?,
        mem_bytes: col::<i64>(r, "mem_bytes")?.max(0) as u64,
        checkpointable: col::<i64>(r, "checkpointable")? != 0,
        estimate_s: col(r, "estimate_s")?,
        created_ms: col(r, "created_ms")?,
        halted_ms: col(r, "halted_ms")?,
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
    let jobs = sqlx::query(sqlx::AssertSqlSafe(format!("SELECT {JOB_COLS} FROM jobs WHERE state IN ('queued', 'running') ORDER BY id")))
        .fetch_all(&db.pool)
        .await?;
    let tasks = sqlx::query(
        "SELECT t.job_id, t.rank, t.state, t.agent_id, t.user_cpu_s, t.sys_cpu_s FROM tasks t JOIN jobs j ON j.id = t.job_id
         WHERE j.state IN ('queued', 'running') ORDER BY t.job_id, t.rank",
    )
    .fetch_all(&db.pool)
    .await?;
    with_tasks(&jobs, &tasks)
}

/// Jobs with their tasks, by id (ids not found are left out): a batch of messages' jobs
/// read with a few statements (400 ids each) instead of two per job.
pub async fn jobs(db: &Db, ids: &[i64]) -> Result<Vec<JobRow>> {
    let mut out = Vec::with_capacity(ids.len());
    for chunk in ids.chunks(IN_CHUNK) {
        let list = id_list(chunk.len());
        let mut jq = sqlx::query(sqlx::AssertSqlSafe(format!("SELECT {JOB_COLS} FROM jobs WHERE id IN ({list})")));
        let mut tq = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT job_id, rank, state, agent_id, user_cpu_s, sys_cpu_s FROM tasks WHERE job_id IN ({list}) ORDER BY job_id, rank"
        )));
        for id in chunk {
            jq = jq.bind(*id);
            tq = tq.bind(*id);
        }
        let jobs = jq.fetch_all(&db.pool).await?;
        let tasks = tq.fetch_all(&db.pool).await?;
        out.extend(with_tasks(&jobs, &tasks)?);
    }
    Ok(out)
}

/// Job rows with their task rows attached (tasks in the order given).
fn with_tasks(jobs: &[AnyRow], tasks: &[AnyRow]) -> Result<Vec<JobRow>> {
    let mut out: Vec<JobRow> = jobs.iter().map(job_row).collect::<Result<_>>()?;
    let ix: std::collections::HashMap<i64, usize> = out.iter().enumerate().map(|(i, j)| (j.id, i)).collect();
    for r in tasks {
        let (job, t) = task_row(r)?;
        if let Some(&i) = ix.get(&job) {
            out[i].tasks.push(t);
        }
    }
    Ok(out)
}

/// An enrolled machine's last flushed heartbeat state.
#[derive(Clone, Debug)]
pub struct AgentRow {
    pub id: String,
    pub owner: String,
    /// The machine's name as enrolled.
    pub machine: String,
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
        machine: col(r, "name")?,
        state: col(r, "state")?,
        budget_left: col(r, "budget_left")?,
        base_speed: col(r, "base_speed")?,
        current_speed: col(r, "current_speed")?,
        free_mem: col(r, "free_mem_bytes")?,
    })
}

const AGENT_COLS: &str = "id, owner, name, state, budget_left, base_speed, current_speed, free_mem_bytes";

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
    /// Replacements for a halted gang's lost ranks: the job's placement record (its
    /// first placement's machines, algorithm and prediction) is left as it is.
    pub replacement: bool,
    /// (rank, agent) for each member.
    pub members: Vec<(u32, String)>,
    pub algorithm: String,
    pub reason: String,
    pub prediction_source: String,
    pub predicted_runtime_s: f64,
}

/// Members (one `(job, rank, agent)` row each) per multi-row statement in [`assign`].
const ASSIGN_CHUNK: usize = 500;

/// Turns a pass's placements into leases in one transaction: each member's task goes
/// from `queued` to `leased` (not yet delivered, expiring after `delivery_ms` unless its
/// agent's poll takes it), the job's state and placement are written. A job whose tasks
/// are no longer all queued (cancelled meanwhile, say) is left untouched as a whole and
/// returned, for the caller to reconcile.
///
/// The whole pass is first written with a few multi-row statements (500 members each);
/// only when one of them finds a task no longer queued is that attempt rolled back and
/// the pass written job by job, each in a savepoint of its own.
pub async fn assign(db: &Db, plans: &[Planned], delivery_ms: i64) -> Result<Vec<i64>> {
    let now = now_ms();
    let mut tx = db.pool.begin().await?;
    if assign_all(&mut tx, db.dialect, plans, now + delivery_ms, now).await? {
        tx.commit().await?;
        return Ok(Vec::new());
    }
    tx.rollback().await?;
    let mut tx = db.pool.begin().await?;
    let conflicts = assign_each(&mut tx, plans, now + delivery_ms, now).await?;
    tx.commit().await?;
    Ok(conflicts)
}

/// Submits a job and leases its ranks as `plan_of(job id)` says, in one transaction: a
/// recruit group's job, written already placed on the machines it was granted. Returns
/// the job's id.
pub async fn insert_placed(
    db: &Db,
    who: &Principal,
    req: &SubmitJob,
    plan_of: impl FnOnce(i64) -> Planned,
    delivery_ms: i64,
) -> Result<i64> {
    let now = now_ms();
    let mut tx = db.pool.begin().await?;
    let job = crate::store::insert_job_in(&mut tx, who, req).await?;
    // The tasks were inserted queued by this very transaction, so every lease takes.
    if !assign_all(&mut tx, db.dialect, &[plan_of(job)], now + delivery_ms, now).await? {
        return Err(StoreError::Conflict("a new job's tasks were not queued".into()));
    }
    tx.commit().await?;
    Ok(job)
}

/// The statement that leases `members` queued tasks, each to its agent: `(job, rank,
/// agent)` triples bound first, then the delivery deadline, then the time of the
/// assignment (what the holder's CPU time is checked against).
///
/// On SQLite the state test is written `+tasks.state` (no index on it): with a few
/// hundred rows in `v`, SQLite's planner otherwise walked every queued task through
/// `tasks_queue (state=?)` and scanned `v` for each — 20,000 × 500 comparisons per
/// statement, ≈ 1 s, 85 % of the coordinator's CPU in `lull bench placements` — instead
/// of looking each member up by its key (`sched_sql.rs` checks the plan).
#[doc(hidden)]
pub fn lease_tasks_sql(dialect: Dialect, members: usize) -> String {
    let state = if dialect == Dialect::Sqlite { "+tasks.state" } else { "tasks.state" };
    format!(
        "WITH v(job, rnk, agent) AS (VALUES {})
         UPDATE tasks SET state = 'leased', agent_id = v.agent, lease_epoch = lease_epoch + 1, lease_expires_ms = ${},
            attempts = attempts + 1, lease_delivered = 0, leased_ms = ${}
         FROM v WHERE tasks.job_id = v.job AND tasks.rank = v.rnk AND {state} = 'queued'",
        crate::store::placeholders(members, 3),
        members * 3 + 1,
        members * 3 + 2
    )
}

/// Writes every placement with multi-row statements; `false` (the caller rolls back)
/// when some task was no longer queued.
async fn assign_all(tx: &mut sqlx::AnyConnection, dialect: Dialect, plans: &[Planned], expires_ms: i64, now: i64) -> Result<bool> {
    let members: Vec<(i64, u32, &str)> = plans.iter().flat_map(|p| p.members.iter().map(|(r, a)| (p.job, *r, a.as_str()))).collect();
    for chunk in members.chunks(ASSIGN_CHUNK) {
        let mut q = sqlx::query(sqlx::AssertSqlSafe(lease_tasks_sql(dialect, chunk.len())));
        for (job, rank, agent) in chunk {
            q = q.bind(*job).bind(*rank as i64).bind(agent.to_string());
        }
        if q.bind(expires_ms).bind(now).execute(&mut *tx).await?.rows_affected() != chunk.len() as u64 {
            return Ok(false);
        }
    }
    let placed: Vec<&Planned> = plans.iter().filter(|p| !p.replacement).collect();
    for chunk in placed.chunks(ASSIGN_CHUNK) {
        let ids = id_list(chunk.len());
        let mut q = sqlx::query(sqlx::AssertSqlSafe(format!("UPDATE jobs SET state = 'running' WHERE state = 'queued' AND id IN ({ids})")));
        for p in chunk {
            q = q.bind(p.job);
        }
        q.execute(&mut *tx).await?;
        let sql = format!(
            "INSERT INTO placements(job_id, agents, algorithm, reason, prediction_source, predicted_runtime_s, placed_ms)
             VALUES {}
             ON CONFLICT(job_id) DO UPDATE SET agents = excluded.agents, algorithm = excluded.algorithm, reason = excluded.reason,
               prediction_source = excluded.prediction_source, predicted_runtime_s = excluded.predicted_runtime_s,
               placed_ms = excluded.placed_ms",
            crate::store::placeholders(chunk.len(), 7)
        );
        let mut q = sqlx::query(sqlx::AssertSqlSafe(sql));
        for p in chunk {
            let agents: Vec<&str> = p.members.iter().map(|(_, a)| a.as_str()).collect();
            q = q
                .bind(p.job)
                .bind(agents.join(","))
                .bind(p.algorithm.clone())
                .bind(p.reason.clone())
                .bind(p.prediction_source.clone())
                .bind(p.predicted_runtime_s)
                .bind(now);
        }
        q.execute(&mut *tx).await?;
    }
    Ok(true)
}

/// Writes the placements job by job, a savepoint each; returns the jobs left untouched.
async fn assign_each(tx: &mut sqlx::AnyConnection, plans: &[Planned], expires_ms: i64, now: i64) -> Result<Vec<i64>> {
    let mut conflicts = Vec::new();
    for p in plans {
        let mut sp = sqlx::Connection::begin(&mut *tx).await?;
        let mut ok = true;
        for (rank, agent) in &p.members {
            let n = sqlx::query(
                "UPDATE tasks SET state = 'leased', agent_id = $3, lease_epoch = lease_epoch + 1, lease_expires_ms = $4,
                    attempts = attempts + 1, lease_delivered = 0, leased_ms = $5
                 WHERE job_id = $1 AND rank = $2 AND state = 'queued'",
            )
            .bind(p.job)
            .bind(*rank as i64)
            .bind(agent)
            .bind(expires_ms)
            .bind(now)
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
        if p.replacement {
            sp.commit().await?;
            continue;
        }
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
    Ok(conflicts)
}

/// Hands a lease waiting for `agent` to its poll: marks it delivered and gives it the
/// full lease time. At most one poll gets each lease.
pub async fn take_delivery(db: &Db, agent: &str, ttl_ms: i64) -> Result<Option<Lease>> {
    Ok(take_deliveries(db, &[(agent.to_string(), 1)], ttl_ms).await?.0.pop().map(|(_, l)| l))
}

/// Hands waiting leases to many polls in one transaction (one commit): for each
/// `(agent, n)`, at most `n` of the leases assigned to `agent` and not yet delivered
/// (lowest job and rank first) are marked delivered and given the full lease time.
/// Returns them with their agent. Each lease is delivered at most once (the `UPDATE`
/// re-checks `lease_delivered = 0` on the row it changes), so a lease another replica
/// took meanwhile is simply not returned.
///
/// Also returns the agents that still have a lease waiting after this transaction (only
/// those that got all they asked for can; one more read in the same transaction tells),
/// so the leader knows the others have none ([`Hints`](crate::hub::deliveries::Hints)).
pub async fn take_deliveries(db: &Db, asks: &[(String, u32)], ttl_ms: i64) -> Result<(Vec<(String, Lease)>, HashSet<String>)> {
    if asks.is_empty() {
        return Ok((Vec::new(), HashSet::new()));
    }
    // A deadlock with a cancel (which locks a job's rows by rank) is run again.
    crate::store::retry_transient(|| take_deliveries_once(db, asks, ttl_ms)).await
}

/// One try of [`take_deliveries`], in one transaction.
async fn take_deliveries_once(db: &Db, asks: &[(String, u32)], ttl_ms: i64) -> Result<(Vec<(String, Lease)>, HashSet<String>)> {
    let now = now_ms();
    let mut tx = db.pool.begin().await?;
    let mut taken: Vec<(String, i64, i64, i64)> = Vec::new();
    for chunk in asks.chunks(IN_CHUNK) {
        let sql = format!(
            "WITH want(agent, n) AS (VALUES {}),
             ranked AS (
                SELECT q.job_id, q.rank, w.n, ROW_NUMBER() OVER (PARTITION BY q.agent_id ORDER BY q.job_id, q.rank) AS rn
                FROM tasks q JOIN want w ON q.agent_id = w.agent
                WHERE q.state = 'leased' AND q.lease_delivered = 0)
             UPDATE tasks SET lease_delivered = 1, runs = runs + 1, lease_expires_ms = ${}
             WHERE state = 'leased' AND lease_delivered = 0 AND (job_id, rank) IN (SELECT job_id, rank FROM ranked WHERE rn <= n)
             RETURNING job_id, rank, lease_epoch, agent_id",
            crate::store::placeholders(chunk.len(), 2),
            chunk.len() * 2 + 1
        );
        let mut q = sqlx::query(sqlx::AssertSqlSafe(sql));
        for (agent, n) in chunk {
            q = q.bind(agent.clone()).bind(*n as i64);
        }
        for r in q.bind(now + ttl_ms).fetch_all(&mut *tx).await? {
            taken.push((col(&r, "agent_id")?, col(&r, "job_id")?, col(&r, "rank")?, col(&r, "lease_epoch")?));
        }
    }
    let mut got: HashMap<&str, u32> = HashMap::with_capacity(taken.len());
    for t in &taken {
        *got.entry(t.0.as_str()).or_default() += 1;
    }
    let full: Vec<&str> = asks.iter().filter(|(a, n)| got.get(a.as_str()).copied().unwrap_or(0) >= *n).map(|(a, _)| a.as_str()).collect();
    let mut waiting = HashSet::new();
    for chunk in full.chunks(IN_CHUNK) {
        let sql = format!(
            "SELECT DISTINCT agent_id FROM tasks WHERE agent_id IN ({}) AND lease_delivered = 0 AND state = 'leased'",
            id_list(chunk.len())
        );
        let mut q = sqlx::query(sqlx::AssertSqlSafe(sql));
        for agent in chunk {
            q = q.bind(agent.to_string());
        }
        for r in q.fetch_all(&mut *tx).await? {
            waiting.insert(col::<String>(&r, "agent_id")?);
        }
    }
    drop(got);
    let mut jobs: Vec<i64> = taken.iter().map(|t| t.1).collect();
    jobs.sort_unstable();
    jobs.dedup();
    let mut specs = HashMap::with_capacity(jobs.len());
    for chunk in jobs.chunks(IN_CHUNK) {
        let sql = format!("SELECT id, program, spec, mem_bytes, checkpointable, gang FROM jobs WHERE id IN ({})", id_list(chunk.len()));
        let mut q = sqlx::query(sqlx::AssertSqlSafe(sql));
        for id in chunk {
            q = q.bind(*id);
        }
        for j in q.fetch_all(&mut *tx).await? {
            let spec: JobSpec =
                serde_json::from_str(&col::<String>(&j, "spec")?).map_err(|e| StoreError::Sql(sqlx::Error::Decode(Box::new(e))))?;
            specs.insert(
                col::<i64>(&j, "id")?,
                (
                    col::<i64>(&j, "gang")? as u32,
                    col::<String>(&j, "program")?,
                    spec,
                    col::<i64>(&j, "mem_bytes")?,
                    col::<i64>(&j, "checkpointable")?,
                ),
            );
        }
    }
    tx.commit().await?;
    taken.sort_unstable_by_key(|t| (t.1, t.2));
    let mut out = Vec::with_capacity(taken.len());
    for (agent, job_id, rank, lease) in taken {
        let Some((machines, program, spec, mem, checkpointable)) = specs.get(&job_id).cloned() else { continue };
        out.push((
            agent,
            Lease {
                job_id,
                rank: rank as u32,
                lease,
                expires_ms: now + ttl_ms,
                machines,
                program,
                spec,
                mem_bytes: mem.max(0) as u64,
                checkpointable: checkpointable != 0,
            },
        ));
    }
    Ok((out, waiting))
}

/// Gives back a delivered lease whose poll was gone before it could be answered: it
/// waits for the agent's next poll again, for at most `delivery_ms`.
pub async fn undeliver(db: &Db, lease: &Lease, delivery_ms: i64) -> Result<()> {
    sqlx::query(
        "UPDATE tasks SET lease_delivered = 0, runs = CASE WHEN runs > 0 THEN runs - 1 ELSE 0 END, lease_expires_ms = $4
         WHERE job_id = $1 AND rank = $2 AND lease_epoch = $3 AND state = 'leased' AND lease_delivered = 1",
    )
    .bind(lease.job_id)
    .bind(lease.rank as i64)
    .bind(lease.lease)
    .bind(now_ms() + delivery_ms)
    .execute(&db.pool)
    .await?;
    Ok(())
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
