//! The coordinator's operations on the database (keys, tokens and enrolment are in
//! [`crate::identity`]): jobs and their tasks (FIFO leases with expiry, re-queueing, idempotent completion, cancel,
//! bounded retries, gangs), ledger records (idempotent on agent and sequence) and the
//! heartbeat snapshot written in batches.
//!
//! Every state change is one conditional statement or one transaction, so it is safe
//! with several replicas on one PostgreSQL: a task changes hands only through an
//! `UPDATE … WHERE state = … AND lease_epoch = …` that at most one caller can win.
//!
//! # Gangs
//! A gang (a job of k > 1 machines) is placed whole on distinct machines or not at all,
//! and its agents start only once `GET …/gang` says every rank's lease was taken
//! (`jobs.gang_started`). A member whose peers never take theirs gives its lease back
//! after 120 s ("gang did not fill"), which re-queues the gang; a lease no poll takes
//! within the delivery window expires without using a retry. A *started* gang holds: when
//! one rank is lost (evicted, expired, its machine removed or migrated) only that rank is
//! re-queued, the others keep their leases and the job is halted (`jobs.halted_ms`): their
//! renewals answer `halt: true`, so their agents freeze their guests, until every rank's
//! lease is taken again. A halt not over within the gang-halt timeout (120 s by default)
//! re-queues the whole gang ([`resolve_halts`]). A rank that fails with retries left, or a
//! rank lost before the gang ever filled, restarts the gang together (its peers re-queued
//! without using their retries; their holders get 409 on their next renewal); a rank that
//! fails for good cancels the others. Completed ranks stay completed.

use crate::auth::Principal;
use crate::bounds::{self, MachineFacts};
use crate::db::{col, Db};
use crate::model::*;
use sqlx::any::AnyRow;
use sqlx::Row;

/// A store failure: `Sql` is a server fault, the others are the caller's.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{0}")]
    Sql(#[from] sqlx::Error),
    #[error("not found")]
    NotFound,
    #[error("{0}")]
    Conflict(String),
    #[error("{0}")]
    Invalid(String),
    #[error("unauthorised")]
    Unauthorised,
    #[error("forbidden")]
    Forbidden,
    /// Not allowed, and why (403 with this message).
    #[error("{0}")]
    Denied(String),
    /// A refusal with its own status and [`lull_protocol::error_code`].
    #[error("{message}")]
    Refused { status: u16, code: &'static str, message: String },
}

pub(crate) type Result<T> = std::result::Result<T, StoreError>;

/// True when PostgreSQL ended this transaction to break a deadlock (SQLSTATE 40P01) or
/// for a serialization failure (40001): nothing it did was kept, and running it again is
/// the remedy PostgreSQL's manual gives. (SQLite, one writer, never says either.)
fn is_transient(e: &StoreError) -> bool {
    matches!(e, StoreError::Sql(sqlx::Error::Database(d)) if matches!(d.code().as_deref(), Some("40P01" | "40001")))
}

/// How many times [`retry_transient`] runs a transaction at most.
const TRANSIENT_TRIES: u32 = 5;

/// Runs `transaction` again, up to [`TRANSIENT_TRIES`] times in all, while PostgreSQL
/// ends it for a deadlock or a serialization failure ([`is_transient`]); any other
/// outcome is returned as it is. `transaction` must begin, do and commit its whole work
/// each time, so a retry redoes all of it. Two statements that lock the same task rows
/// in different orders (a job's cancel, by rank; a batch of deliveries, by agent) can
/// deadlock under load (`lull bench recruit-api --db postgres`): without this the loser
/// answered 503, and a recruit group's release left its job leased in the database.
pub async fn retry_transient<T, F: std::future::Future<Output = Result<T>>>(mut transaction: impl FnMut() -> F) -> Result<T> {
    let mut tries = 1;
    loop {
        match transaction().await {
            Err(e) if tries < TRANSIENT_TRIES && is_transient(&e) => {
                tracing::info!(error = %e, tries, "transaction ended by the database; running it again");
                tries += 1;
            }
            outcome => return outcome,
        }
    }
}

/// Unix milliseconds now.
pub fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// The UTC day of a Unix-millisecond instant.
pub fn day_of(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms).unwrap_or_default().date_naive().to_string()
}

fn i64_of(v: u64, what: &str) -> Result<i64> {
    i64::try_from(v).map_err(|_| StoreError::Invalid(format!("{what} is too large")))
}

/// Checks a user-supplied text field: length and no NUL (PostgreSQL refuses NUL in text).
pub fn check_text(what: &str, s: &str, min: usize, max: usize) -> Result<()> {
    if s.len() < min || s.len() > max {
        return Err(StoreError::Invalid(format!("{what} must be {min}–{max} bytes, not {}", s.len())));
    }
    if s.contains('\0') {
        return Err(StoreError::Invalid(format!("{what} must not contain NUL")));
    }
    Ok(())
}

/// Removes a machine: it leaves machine lists and its secret stops working; its leased
/// tasks go back to the queue (without using a retry); its records stay, so reports
/// keep the time it donated; the agent still holding the secret is told (401
/// `machine_removed`). `by` says who removed it (an address, or the command). `NotFound`
/// if no such machine is enrolled.
pub async fn remove_agent(db: &Db, agent_id: &str, by: &str) -> Result<MachineRemoved> {
    let now = now_ms();
    let mut tx = db.pool.begin().await?;
    crate::identity::retire_removed(&mut tx, agent_id, now, by).await?;
    let row = sqlx::query(
        "UPDATE agents SET removed_ms = $2, secret_hash = 'removed:' || id WHERE id = $1 AND removed_ms IS NULL RETURNING owner, name",
    )
    .bind(agent_id)
    .bind(now)
    .fetch_optional(&mut *tx)
    .await?
    .ok_or(StoreError::NotFound)?;
    let rows = sqlx::query(
        "UPDATE tasks SET state = 'queued', agent_id = NULL, lease_expires_ms = NULL, attempts = attempts - 1
         WHERE agent_id = $1 AND state = 'leased' RETURNING job_id",
    )
    .bind(agent_id)
    .fetch_all(&mut *tx)
    .await?;
    follow_requeued(&mut tx, &rows, true, now).await?;
    tx.commit().await?;
    Ok(MachineRemoved {
        id: agent_id.to_string(),
        owner: col(&row, "owner")?,
        machine: col(&row, "name")?,
        tasks_requeued: rows.len() as u32,
    })
}

/// Checks a job before it is stored (each failure names the field and its limit, from
/// [`lull_protocol::limits`]); returns its program name, memory request and retries as
/// stored.
pub fn check_job(req: &SubmitJob) -> Result<(String, i64, u32)> {
    use lull_protocol::limits::{ARGS_MAX, ARG_MAX, COMMAND_MAX, ENV_MAX, INPUTS_MAX, MEMORY_BYTES_MAX, NAME_MAX, VALUE_MAX};
    check_text("command", &req.command, 1, COMMAND_MAX)?;
    let count = |what: &str, n: usize, max: usize| {
        if n > max {
            return Err(StoreError::Invalid(format!("{what} has {n} entries; at most {max}")));
        }
        Ok(())
    };
    count("args", req.args.len(), ARGS_MAX)?;
    count("env", req.env.len(), ENV_MAX)?;
    count("inputs", req.inputs.len(), INPUTS_MAX)?;
    for (i, a) in req.args.iter().enumerate() {
        check_text(&format!("args[{i}]"), a, 0, ARG_MAX)?;
    }
    for (what, map) in [("env", &req.env), ("inputs", &req.inputs)] {
        for (k, v) in map {
            check_text(&format!("{what} name {:?}", k.chars().take(40).collect::<String>()), k, 1, NAME_MAX)?;
            check_text(&format!("{what}[{:?}]", k.chars().take(40).collect::<String>()), v, 0, VALUE_MAX)?;
        }
    }
    if req.machines == 0 || req.machines > 1024 {
        return Err(StoreError::Invalid("machines must be 1–1024".into()));
    }
    let max_retries = req.max_retries.unwrap_or(3);
    if max_retries > 100 {
        return Err(StoreError::Invalid("max_retries must be 0–100".into()));
    }
    let program = req.program.clone().unwrap_or_else(|| req.command.rsplit('/').next().unwrap_or(&req.command).to_string());
    check_text("program", &program, 1, 256)?;
    if req.mem_bytes > MEMORY_BYTES_MAX {
        return Err(StoreError::Invalid(format!("mem_bytes must be 0–{MEMORY_BYTES_MAX} (1 PiB)")));
    }
    let mem = i64_of(req.mem_bytes, "mem_bytes")?;
    if req.estimate_s.is_some_and(|e| !(e.is_finite() && (0.0..=31_536_000.0).contains(&e))) {
        return Err(StoreError::Invalid("estimate_s must be 0–31536000 seconds".into()));
    }
    Ok((program, mem, max_retries))
}

/// Submits a job: one row for the job, one task per machine.
pub async fn submit(db: &Db, who: &Principal, req: &SubmitJob) -> Result<Job> {
    let mut tx = db.pool.begin().await?;
    let id = insert_job_in(&mut tx, who, req).await?;
    tx.commit().await?;
    crate::job_view::get_job(db, who, id).await
}

/// Writes a job and its tasks (one row per machine, two statements) inside the caller's
/// transaction, and returns its id.
pub(crate) async fn insert_job_in(tx: &mut sqlx::AnyConnection, who: &Principal, req: &SubmitJob) -> Result<i64> {
    let (program, mem, max_retries) = check_job(req)?;
    let spec = JobSpec { command: req.command.clone(), args: req.args.clone(), env: req.env.clone(), inputs: req.inputs.clone() };
    let spec_json = serde_json::to_string(&spec).map_err(|e| StoreError::Invalid(e.to_string()))?;
    let max = lull_protocol::limits::SPEC_MAX;
    if spec_json.len() > max {
        return Err(StoreError::Refused {
            status: 413,
            code: lull_protocol::error_code::TOO_LARGE,
            message: format!("the job spec (command, args, env and inputs) is {} bytes as JSON; at most {max}", spec_json.len()),
        });
    }
    let now = now_ms();
    let id: i64 = sqlx::query(
        "INSERT INTO jobs(submitter, program, spec, mem_bytes, checkpointable, gang, max_retries, state, created_ms, estimate_s)
         VALUES ($1, $2, $3, $4, $5, $6, $7, 'queued', $8, $9) RETURNING id",
    )
    .bind(who.submitter())
    .bind(&program)
    .bind(&spec_json)
    .bind(mem)
    .bind(req.checkpointable as i64)
    .bind(req.machines as i64)
    .bind(max_retries as i64)
    .bind(now)
    .bind(req.estimate_s)
    .fetch_one(&mut *tx)
    .await?
    .try_get("id")?;
    // Ranks 0..machines from a recursive count: one statement of one text whatever the width.
    sqlx::query(
        "WITH RECURSIVE ranks(r) AS (SELECT CAST(0 AS BIGINT) UNION ALL SELECT r + 1 FROM ranks WHERE r + 1 < $4)
         INSERT INTO tasks(job_id, rank, state, max_retries, mem_bytes) SELECT $1, r, 'queued', $2, $3 FROM ranks",
    )
    .bind(id)
    .bind(max_retries as i64)
    .bind(mem)
    .bind(req.machines as i64)
    .execute(&mut *tx)
    .await?;
    Ok(id)
}

/// Recomputes a job's state from its tasks (cancelled stays cancelled): `failed` once a
/// rank failed, `lost` once a rank's retries were used up, `completed` when every rank
/// completed; its `reason` is then the first such rank's (a failure before a loss).
async fn refresh_job<'c, E: sqlx::Executor<'c, Database = sqlx::Any>>(ex: E, job_id: i64, now: i64) -> Result<()> {
    sqlx::query(
        "UPDATE jobs SET state = CASE
            WHEN state = 'cancelled' THEN 'cancelled'
            WHEN EXISTS (SELECT 1 FROM tasks t WHERE t.job_id = jobs.id AND t.state = 'failed') THEN 'failed'
            WHEN EXISTS (SELECT 1 FROM tasks t WHERE t.job_id = jobs.id AND t.state = 'lost') THEN 'lost'
            WHEN NOT EXISTS (SELECT 1 FROM tasks t WHERE t.job_id = jobs.id AND t.state <> 'completed') THEN 'completed'
            WHEN EXISTS (SELECT 1 FROM tasks t WHERE t.job_id = jobs.id AND t.state = 'leased') THEN 'running'
            ELSE 'queued' END,
          finished_ms = CASE WHEN finished_ms IS NOT NULL THEN finished_ms
            WHEN EXISTS (SELECT 1 FROM tasks t WHERE t.job_id = jobs.id AND t.state IN ('failed', 'lost'))
              OR NOT EXISTS (SELECT 1 FROM tasks t WHERE t.job_id = jobs.id AND t.state <> 'completed') THEN $2
            ELSE NULL END,
          reason = CASE WHEN state = 'cancelled' THEN reason
            ELSE (SELECT t.end_reason FROM tasks t WHERE t.job_id = jobs.id AND t.state IN ('failed', 'lost')
                  ORDER BY CASE WHEN t.state = 'failed' THEN 0 ELSE 1 END, t.rank LIMIT 1) END
         WHERE id = $1",
    )
    .bind(job_id)
    .bind(now)
    .execute(ex)
    .await?;
    Ok(())
}

/// Cancels a job: its queued and leased tasks become cancelled (agents learn it from
/// their next progress report).
pub async fn cancel(db: &Db, who: &Principal, id: i64) -> Result<Job> {
    cancel_job(db, who, id).await?;
    crate::job_view::get_job(db, who, id).await
}

/// [`cancel`] without reading the job back: whether this call cancelled it (`false`: it
/// had already ended). `NotFound` if `who` may not see it; `Refused` if they may see it
/// (it ran on their machine) but did not submit it.
pub async fn cancel_job(db: &Db, who: &Principal, id: i64) -> Result<bool> {
    let submitter: Option<String> = sqlx::query("SELECT submitter FROM jobs WHERE id = $1")
        .bind(id)
        .fetch_optional(&db.pool)
        .await?
        .map(|r| col(&r, "submitter"))
        .transpose()?;
    let Some(submitter) = submitter else { return Err(StoreError::NotFound) };
    if !crate::job_view::may_cancel(who, &submitter) {
        crate::job_view::get_job(db, who, id).await?;
        return Err(StoreError::Denied(format!("job {id} was submitted by {submitter}: only they or an admin may cancel it")));
    }
    let reason = format!("cancelled by {}", who.submitter());
    retry_transient(|| async {
        let now = now_ms();
        let mut tx = db.pool.begin().await?;
        let n = sqlx::query(
            "UPDATE jobs SET state = 'cancelled', finished_ms = $2, reason = $3 WHERE id = $1 AND state IN ('queued', 'running')",
        )
        .bind(id)
        .bind(now)
        .bind(&reason)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        if n == 1 {
            sqlx::query("UPDATE tasks SET state = 'cancelled', end_reason = $2 WHERE job_id = $1 AND state IN ('queued', 'leased')")
                .bind(id)
                .bind(&reason)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(n == 1)
    })
    .await
}

async fn task_row(db: &Db, job_id: i64, rank: i64) -> Result<AnyRow> {
    sqlx::query("SELECT state, agent_id, lease_epoch FROM tasks WHERE job_id = $1 AND rank = $2")
        .bind(job_id)
        .bind(rank)
        .fetch_optional(&db.pool)
        .await?
        .ok_or(StoreError::NotFound)
}

/// Checks an output tail an agent sent (each stream at most [`OUTPUT_TAIL_MAX`] bytes of
/// text without NUL, its whole size at most `OUTPUT_BYTES_MAX`).
fn check_output(o: Option<&Output>) -> Result<()> {
    if let Some(o) = o {
        check_text("output.stdout", &o.stdout, 0, OUTPUT_TAIL_MAX)?;
        check_text("output.stderr", &o.stderr, 0, OUTPUT_TAIL_MAX)?;
        let max = lull_protocol::limits::OUTPUT_BYTES_MAX;
        if o.stdout_bytes > max || o.stderr_bytes > max {
            return Err(StoreError::Invalid(format!("output.stdout_bytes and output.stderr_bytes must be 0–{max}")));
        }
    }
    Ok(())
}

/// Renews a lease, keeping the output tail the renewal carries (what the guest wrote so
/// far, for `lull jobs output --follow`). `cancel` tells the agent the job was cancelled.
pub async fn progress(db: &Db, agent_id: &str, job_id: i64, rank: i64, req: &Progress, ttl_ms: i64) -> Result<ProgressAck> {
    check_output(req.output.as_ref())?;
    let out = req.output.as_ref();
    let expires = now_ms() + ttl_ms;
    // The job's width comes back with the renewal, so only a gang's renewal asks whether
    // it is halted.
    let renewed = sqlx::query(
        "UPDATE tasks SET lease_expires_ms = $5, stdout_tail = COALESCE($6, stdout_tail), stderr_tail = COALESCE($7, stderr_tail),
            stdout_bytes = COALESCE($8, stdout_bytes), stderr_bytes = COALESCE($9, stderr_bytes)
         WHERE job_id = $1 AND rank = $2 AND agent_id = $3 AND lease_epoch = $4 AND state = 'leased'
         RETURNING (SELECT gang FROM jobs WHERE jobs.id = $1) AS gang",
    )
    .bind(job_id)
    .bind(rank)
    .bind(agent_id)
    .bind(req.lease)
    .bind(expires)
    .bind(out.map(|o| o.stdout.clone()))
    .bind(out.map(|o| o.stderr.clone()))
    .bind(out.map(|o| i64::try_from(o.stdout_bytes).unwrap_or(i64::MAX)))
    .bind(out.map(|o| i64::try_from(o.stderr_bytes).unwrap_or(i64::MAX)))
    .fetch_optional(&db.pool)
    .await?;
    if let Some(r) = renewed {
        let halt = col::<i64>(&r, "gang")? > 1 && halted_now(db, job_id).await?;
        return Ok(ProgressAck { expires_ms: expires, cancel: false, halt });
    }
    let row = task_row(db, job_id, rank).await?;
    let (state, holder, epoch): (String, Option<String>, i64) = (col(&row, "state")?, col(&row, "agent_id")?, col(&row, "lease_epoch")?);
    if state == "cancelled" && holder.as_deref() == Some(agent_id) && epoch == req.lease {
        return Ok(ProgressAck { expires_ms: 0, cancel: true, halt: false });
    }
    Err(StoreError::Conflict("the lease is no longer held".into()))
}

/// How a completion says its guest ended: its outcome, or (older agents) what its bare
/// exit code says; the texts checked.
fn outcome_of(c: &Completion) -> Result<TaskOutcome> {
    let outcome = c.outcome.clone().unwrap_or_else(|| TaskOutcome::from_legacy_code(c.exit_code));
    for t in outcome.texts() {
        check_text("outcome text", t, 0, lull_protocol::OUTCOME_TEXT_MAX)?;
    }
    Ok(outcome)
}

/// The machine and the lease behind task `(job_id, rank)` under epoch `lease` held by
/// `agent_id`, for checking what the holder reports: its facts (the latest heartbeat's
/// `live_cpus` if any) and when the lease was assigned. `None` when it does not hold it.
pub async fn lease_facts(
    db: &Db,
    agent_id: &str,
    job_id: i64,
    rank: i64,
    lease: i64,
    live_cpus: Option<u32>,
) -> Result<Option<(MachineFacts, Option<i64>)>> {
    let row = sqlx::query(
        "SELECT t.leased_ms AS leased_ms, a.cpus AS cpus, a.enrolled_ms AS enrolled_ms FROM tasks t JOIN agents a ON a.id = t.agent_id
         WHERE t.job_id = $1 AND t.rank = $2 AND t.agent_id = $3 AND t.lease_epoch = $4",
    )
    .bind(job_id)
    .bind(rank)
    .bind(agent_id)
    .bind(lease)
    .fetch_optional(&db.pool)
    .await?;
    let Some(row) = row else { return Ok(None) };
    let cpus = live_cpus.map(i64::from).or(col::<Option<i64>>(&row, "cpus")?);
    Ok(Some((MachineFacts::new(cpus, col(&row, "enrolled_ms")?), col(&row, "leased_ms")?)))
}

/// Completes a task: `completed` when its guest exited with 0, `failed` (with the
/// reason, for good: no retry) otherwise; a failed rank cancels the rest of its gang.
/// Idempotent: a retry of the same (agent, lease) answers `counted: false`; a
/// completion under a lost lease is a conflict. The CPU time must be what the machine's
/// CPUs can have given since the lease was assigned.
pub async fn complete(db: &Db, agent_id: &str, job_id: i64, rank: i64, c: &Completion, live_cpus: Option<u32>) -> Result<CompletionAck> {
    for (field, v) in [("user_cpu_s", c.user_cpu_s), ("sys_cpu_s", c.sys_cpu_s)] {
        if !(v.is_finite() && v >= 0.0) {
            return Err(StoreError::Invalid(format!("{field} must be a finite, non-negative number of seconds")));
        }
    }
    if let Some((m, leased)) = lease_facts(db, agent_id, job_id, rank, c.lease, live_cpus).await? {
        bounds::check_task_cpu("user_cpu_s + sys_cpu_s", c.user_cpu_s + c.sys_cpu_s, &m, leased, now_ms()).map_err(StoreError::Invalid)?;
    }
    check_output(c.output.as_ref())?;
    let outcome = outcome_of(c)?;
    let state = if outcome.succeeded() { "completed" } else { "failed" };
    let signal = match outcome {
        TaskOutcome::Signalled { signal } => Some(signal as i64),
        TaskOutcome::FileSizeLimit => Some(lull_protocol::outcome::SIGXFSZ as i64),
        _ => None,
    };
    let out = c.output.as_ref();
    let now = now_ms();
    let mut tx = db.pool.begin().await?;
    let n = sqlx::query(
        "UPDATE tasks SET state = $13, exit_code = $5, user_cpu_s = $6, sys_cpu_s = $7, finished_ms = $8, lease_expires_ms = NULL,
            stdout_tail = $9, stderr_tail = $10, stdout_bytes = $11, stderr_bytes = $12, signal = $14, end_reason = $15
         WHERE job_id = $1 AND rank = $2 AND agent_id = $3 AND lease_epoch = $4 AND state = 'leased'",
    )
    .bind(job_id)
    .bind(rank)
    .bind(agent_id)
    .bind(c.lease)
    .bind(outcome.exit_code().map(i64::from))
    .bind(c.user_cpu_s)
    .bind(c.sys_cpu_s)
    .bind(now)
    .bind(out.map(|o| o.stdout.clone()))
    .bind(out.map(|o| o.stderr.clone()))
    .bind(out.map(|o| i64::try_from(o.stdout_bytes).unwrap_or(i64::MAX)))
    .bind(out.map(|o| i64::try_from(o.stderr_bytes).unwrap_or(i64::MAX)))
    .bind(state)
    .bind(signal)
    .bind((!outcome.succeeded()).then(|| outcome.describe()))
    .execute(&mut *tx)
    .await?
    .rows_affected();
    if n == 1 {
        sqlx::query("INSERT INTO task_events(job_id, rank, lease_epoch, kind, agent_id, day, at_ms) VALUES ($1, $2, $3, $7, $4, $5, $6)")
            .bind(job_id)
            .bind(rank)
            .bind(c.lease)
            .bind(agent_id)
            .bind(day_of(now))
            .bind(now)
            .bind(state)
            .execute(&mut *tx)
            .await?;
        if state == "failed" {
            gang_follow(&mut tx, job_id, false, now).await?;
        }
        refresh_job(&mut *tx, job_id, now).await?;
        tx.commit().await?;
        return Ok(CompletionAck { counted: true });
    }
    tx.commit().await?;
    let row = task_row(db, job_id, rank).await?;
    let (now_state, holder, epoch): (String, Option<String>, i64) =
        (col(&row, "state")?, col(&row, "agent_id")?, col(&row, "lease_epoch")?);
    if now_state == state && holder.as_deref() == Some(agent_id) && epoch == c.lease {
        return Ok(CompletionAck { counted: false });
    }
    Err(StoreError::Conflict(format!("task is {now_state} and the lease is no longer held")))
}

/// After a rank of a job went back to the queue, failed or was lost. Once any rank
/// failed or was lost for good the remaining ranks are cancelled. A rank `lost` (evicted, lease expired, machine
/// removed, moved away) from a gang that had started halts the gang: its other leased
/// ranks keep their leases (their agents freeze them, told by their renewals) from
/// `halted_ms` until a replacement takes the lost rank (see [`resolve_halts`]).
/// Otherwise — a failure with retries left, or a gang that never filled — the gang
/// restarts together: its other leased ranks are re-queued too (without using their
/// retries; their holders learn it from a 409 on their next progress report).
async fn gang_follow(conn: &mut sqlx::AnyConnection, job_id: i64, lost: bool, now: i64) -> Result<()> {
    sqlx::query(
        "UPDATE tasks SET state = 'cancelled', end_reason = 'another rank of the job ended it' WHERE job_id = $1 AND state IN ('queued', 'leased')
           AND EXISTS (SELECT 1 FROM tasks f WHERE f.job_id = $1 AND f.state IN ('failed', 'lost'))",
    )
    .bind(job_id)
    .execute(&mut *conn)
    .await?;
    let halted = lost
        && sqlx::query(
            "UPDATE jobs SET halted_ms = COALESCE(halted_ms, $2) WHERE id = $1 AND gang > 1 AND gang_started = 1
               AND EXISTS (SELECT 1 FROM tasks q WHERE q.job_id = $1 AND q.state = 'queued')
               AND EXISTS (SELECT 1 FROM tasks l WHERE l.job_id = $1 AND l.state = 'leased')",
        )
        .bind(job_id)
        .bind(now)
        .execute(&mut *conn)
        .await?
        .rows_affected()
            == 1;
    if !halted {
        sqlx::query(
            "UPDATE tasks SET state = 'queued', agent_id = NULL, lease_expires_ms = NULL, attempts = attempts - 1
             WHERE job_id = $1 AND state = 'leased'
               AND EXISTS (SELECT 1 FROM tasks q WHERE q.job_id = $1 AND q.state = 'queued')
               AND (SELECT gang FROM jobs WHERE jobs.id = $1) > 1",
        )
        .bind(job_id)
        .execute(&mut *conn)
        .await?;
    }
    // A gang with no rank leased any more has not started (and is not halted).
    sqlx::query(
        "UPDATE jobs SET gang_started = 0, halted_ms = NULL WHERE id = $1 AND (gang_started = 1 OR halted_ms IS NOT NULL)
           AND NOT EXISTS (SELECT 1 FROM tasks l WHERE l.job_id = $1 AND l.state = 'leased')",
    )
    .bind(job_id)
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// The jobs of `rows` (which carry `job_id`), each once, in order.
fn distinct_jobs(rows: &[AnyRow]) -> Result<Vec<i64>> {
    let mut jobs: Vec<i64> = rows.iter().map(|r| col(r, "job_id")).collect::<std::result::Result<_, _>>()?;
    jobs.sort_unstable();
    jobs.dedup();
    Ok(jobs)
}

/// After tasks went back to the queue (or failed): each of their jobs (`rows` carry
/// `job_id`) has its gang followed (`lost`: see [`gang_follow`]) and its state
/// recomputed, once.
async fn follow_requeued(tx: &mut sqlx::Transaction<'_, sqlx::Any>, rows: &[AnyRow], lost: bool, now: i64) -> Result<()> {
    let jobs = distinct_jobs(rows)?;
    for j in &jobs {
        gang_follow(tx, *j, lost, now).await?;
        refresh_job(&mut **tx, *j, now).await?;
    }
    Ok(())
}

/// Halted gangs: a halt whose gang is whole again (every rank's lease taken, or
/// completed) or that ended (cancelled, failed) is cleared; one older than `timeout_ms`
/// re-queues the whole gang as before halts existed (its leased ranks without using a
/// retry; their holders get 409 on their next progress). Returns the jobs re-queued.
pub async fn resolve_halts(db: &Db, timeout_ms: i64) -> Result<Vec<i64>> {
    let now = now_ms();
    sqlx::query(
        "UPDATE jobs SET halted_ms = NULL WHERE halted_ms IS NOT NULL AND (state NOT IN ('queued', 'running')
           OR NOT EXISTS (SELECT 1 FROM tasks t WHERE t.job_id = jobs.id
             AND NOT ((t.state = 'leased' AND t.lease_delivered = 1) OR t.state = 'completed')))",
    )
    .execute(&db.pool)
    .await?;
    let due: Vec<i64> = sqlx::query("SELECT id FROM jobs WHERE halted_ms IS NOT NULL AND halted_ms < $1 ORDER BY id")
        .bind(now - timeout_ms)
        .fetch_all(&db.pool)
        .await?
        .iter()
        .map(|r| col(r, "id"))
        .collect::<std::result::Result<_, _>>()?;
    let mut requeued = Vec::new();
    for job in due {
        let mut tx = db.pool.begin().await?;
        let n =
            sqlx::query("UPDATE jobs SET halted_ms = NULL, gang_started = 0 WHERE id = $1 AND halted_ms IS NOT NULL AND halted_ms < $2")
                .bind(job)
                .bind(now - timeout_ms)
                .execute(&mut *tx)
                .await?
                .rows_affected();
        if n == 1 {
            sqlx::query(
                "UPDATE tasks SET state = 'queued', agent_id = NULL, lease_expires_ms = NULL, attempts = attempts - 1
                 WHERE job_id = $1 AND state = 'leased'",
            )
            .bind(job)
            .execute(&mut *tx)
            .await?;
            refresh_job(&mut *tx, job, now).await?;
            requeued.push(job);
        }
        tx.commit().await?;
    }
    Ok(requeued)
}

/// Whether the gang of a job is halted for its holders: started, and not every rank's
/// lease taken (or completed). Sequential jobs never are.
async fn halted_now(db: &Db, job_id: i64) -> Result<bool> {
    let row = sqlx::query(
        "SELECT j.gang AS gang, j.gang_started AS started,
            (SELECT COUNT(*) FROM tasks t WHERE t.job_id = j.id AND ((t.state = 'leased' AND t.lease_delivered = 1) OR t.state = 'completed')) AS whole
         FROM jobs j WHERE j.id = $1",
    )
    .bind(job_id)
    .fetch_optional(&db.pool)
    .await?;
    let Some(row) = row else { return Ok(false) };
    let (gang, started, whole): (i64, i64, i64) = (col(&row, "gang")?, col(&row, "started")?, col(&row, "whole")?);
    Ok(gang > 1 && started == 1 && whole < gang)
}

/// Why a leased task is given back (see [`release`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GiveBack {
    /// The agent could not run it, or it failed: uses a retry; past `max_retries` the
    /// task is lost (and the job with it).
    Failed,
    /// The owner came back: no retry used, one eviction counted.
    Evicted,
    /// It moves (the coordinator decided a migration, `migration.rs`): no retry used, no
    /// eviction counted; its last checkpoint stays for the next holder.
    Migrated,
    /// The agent gives it back before its guest started (the machine stopped accepting
    /// guest work, a gang that did not fill): no retry, no eviction, not an attempt.
    NotStarted,
}

impl GiveBack {
    fn event(self) -> &'static str {
        match self {
            GiveBack::Failed => "failed",
            GiveBack::Evicted => "evicted",
            GiveBack::Migrated => "migrated",
            GiveBack::NotStarted => "returned",
        }
    }

    /// The statement that gives the task back (`$5`, for a failure only: the agent's
    /// reason, kept if it is the last retry).
    fn sql(self) -> &'static str {
        match self {
            GiveBack::Evicted => {
                "UPDATE tasks SET state = 'queued', agent_id = NULL, lease_expires_ms = NULL, attempts = attempts - 1, evictions = evictions + 1
                 WHERE job_id = $1 AND rank = $2 AND agent_id = $3 AND lease_epoch = $4 AND state = 'leased'"
            }
            GiveBack::Migrated => {
                "UPDATE tasks SET state = 'queued', agent_id = NULL, lease_expires_ms = NULL, attempts = attempts - 1
                 WHERE job_id = $1 AND rank = $2 AND agent_id = $3 AND lease_epoch = $4 AND state = 'leased'"
            }
            GiveBack::NotStarted => {
                "UPDATE tasks SET state = 'queued', agent_id = NULL, lease_expires_ms = NULL, attempts = attempts - 1,
                    runs = CASE WHEN runs > 0 THEN runs - 1 ELSE 0 END
                 WHERE job_id = $1 AND rank = $2 AND agent_id = $3 AND lease_epoch = $4 AND state = 'leased'"
            }
            GiveBack::Failed => {
                "UPDATE tasks SET state = CASE WHEN attempts > max_retries THEN 'lost' ELSE 'queued' END,
                    agent_id = CASE WHEN attempts > max_retries THEN agent_id ELSE NULL END, lease_expires_ms = NULL,
                    end_reason = CASE WHEN attempts > max_retries THEN 'retries used up: ' || $5 ELSE end_reason END
                 WHERE job_id = $1 AND rank = $2 AND agent_id = $3 AND lease_epoch = $4 AND state = 'leased'"
            }
        }
    }
}

/// Gives a leased task back (`why`, with the agent's `reason`). A rank lost this way
/// (evicted, migrated, given back unstarted) halts a started gang until it is replaced;
/// a failure restarts the gang (see `gang_follow`).
pub async fn release(db: &Db, agent_id: &str, job_id: i64, rank: i64, lease: i64, why: GiveBack, reason: Option<&str>) -> Result<Task> {
    let now = now_ms();
    let reason = reason.filter(|r| !r.is_empty()).unwrap_or("the agent gave it back as failed").to_string();
    let mut tx = db.pool.begin().await?;
    let q = sqlx::query(why.sql()).bind(job_id).bind(rank).bind(agent_id).bind(lease);
    let q = if why == GiveBack::Failed { q.bind(&reason) } else { q };
    let n = q.execute(&mut *tx).await?.rows_affected();
    if n != 1 {
        tx.commit().await?;
        return Err(StoreError::Conflict("the lease is no longer held".into()));
    }
    sqlx::query(
        "INSERT INTO task_events(job_id, rank, lease_epoch, kind, agent_id, day, at_ms) VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING",
    )
    .bind(job_id)
    .bind(rank)
    .bind(lease)
    .bind(why.event())
    .bind(agent_id)
    .bind(day_of(now))
    .bind(now)
    .execute(&mut *tx)
    .await?;
    gang_follow(&mut tx, job_id, why != GiveBack::Failed, now).await?;
    refresh_job(&mut *tx, job_id, now).await?;
    let row = sqlx::query(sqlx::AssertSqlSafe(format!("{} WHERE t.job_id = $1 AND t.rank = $2", crate::job_view::TASK_SELECT)))
        .bind(job_id)
        .bind(rank)
        .fetch_one(&mut *tx)
        .await?;
    tx.commit().await?;
    crate::job_view::task_of(&row)
}

/// An agent that just started (or is stopping) runs no guest: the tasks it held (leases
/// it took) go back to the queue at once rather than when their leases expire — no retry
/// used, not an eviction (the guests died with the agent's run, not for anything they
/// did or because the owner came back). A lease assigned but not yet taken stays for its
/// next polls. Returns how many tasks went back and their jobs.
pub async fn give_back_all(db: &Db, agent_id: &str) -> Result<(u32, Vec<i64>)> {
    let now = now_ms();
    let mut tx = db.pool.begin().await?;
    let rows = sqlx::query(
        "UPDATE tasks SET state = 'queued', agent_id = NULL, lease_expires_ms = NULL, attempts = attempts - 1
         WHERE agent_id = $1 AND state = 'leased' AND lease_delivered = 1 RETURNING job_id",
    )
    .bind(agent_id)
    .fetch_all(&mut *tx)
    .await?;
    follow_requeued(&mut tx, &rows, true, now).await?;
    tx.commit().await?;
    Ok((rows.len() as u32, distinct_jobs(&rows)?))
}

/// Carries out a memory migration (seed 001) the scheduler decided: the task `job_id`/
/// `rank` leased to `agent_id` goes back to the queue without using a retry and without
/// counting as an eviction (the owner did not return), and the job's placement reason
/// says why. Its holder learns it from a 409 on its next progress report, as a lease
/// taken back, and stops the guest; the checkpoint it last uploaded stays for the next
/// lease. Returns false (nothing changed) when the task is no longer leased there.
pub async fn migrate_task(db: &Db, agent_id: &str, job_id: i64, rank: i64, reason: &str) -> Result<bool> {
    let now = now_ms();
    let mut tx = db.pool.begin().await?;
    let row = sqlx::query(
        "UPDATE tasks SET state = 'queued', agent_id = NULL, lease_expires_ms = NULL, attempts = attempts - 1
         WHERE job_id = $1 AND rank = $2 AND agent_id = $3 AND state = 'leased' RETURNING lease_epoch",
    )
    .bind(job_id)
    .bind(rank)
    .bind(agent_id)
    .fetch_optional(&mut *tx)
    .await?;
    let Some(row) = row else {
        tx.commit().await?;
        return Ok(false);
    };
    let epoch: i64 = col(&row, "lease_epoch")?;
    sqlx::query(
        "INSERT INTO task_events(job_id, rank, lease_epoch, kind, agent_id, day, at_ms) VALUES ($1, $2, $3, 'migrated', $4, $5, $6) ON CONFLICT DO NOTHING",
    )
    .bind(job_id)
    .bind(rank)
    .bind(epoch)
    .bind(agent_id)
    .bind(day_of(now))
    .bind(now)
    .execute(&mut *tx)
    .await?;
    sqlx::query("UPDATE placements SET reason = $2 WHERE job_id = $1").bind(job_id).bind(reason).execute(&mut *tx).await?;
    refresh_job(&mut *tx, job_id, now).await?;
    tx.commit().await?;
    Ok(true)
}

/// Re-queues tasks whose lease expired (their agent is lost), or marks them lost past
/// their retries; a lease its agent never took (`lease_delivered = 0`) uses no retry.
/// Returns the jobs that changed, each once.
pub async fn requeue_expired(db: &Db) -> Result<Vec<i64>> {
    let now = now_ms();
    let mut tx = db.pool.begin().await?;
    let rows = sqlx::query(
        "UPDATE tasks SET attempts = attempts - 1 + lease_delivered,
            state = CASE WHEN attempts - 1 + lease_delivered > max_retries THEN 'lost' ELSE 'queued' END,
            end_reason = CASE WHEN attempts - 1 + lease_delivered > max_retries
              THEN 'retries used up: its lease expired on ' || COALESCE((SELECT a.name FROM agents a WHERE a.id = tasks.agent_id), agent_id)
                || ' (the machine stopped answering)'
              ELSE end_reason END,
            agent_id = CASE WHEN attempts - 1 + lease_delivered > max_retries THEN agent_id ELSE NULL END, lease_expires_ms = NULL,
            lease_delivered = 1
         WHERE state = 'leased' AND lease_expires_ms < $1 RETURNING job_id",
    )
    .bind(now)
    .fetch_all(&mut *tx)
    .await?;
    follow_requeued(&mut tx, &rows, true, now).await?;
    tx.commit().await?;
    distinct_jobs(&rows)
}

/// The gang state of the job a task belongs to; only the lease holder may ask.
pub async fn gang(db: &Db, agent_id: &str, job_id: i64, rank: i64) -> Result<Gang> {
    let row = task_row(db, job_id, rank).await?;
    if col::<Option<String>>(&row, "agent_id")?.as_deref() != Some(agent_id) {
        return Err(StoreError::NotFound);
    }
    // A member counts once its agent took the lease (a lease the scheduler assigned but no
    // poll has taken yet may still expire).
    let rows = sqlx::query("SELECT state, agent_id, lease_delivered FROM tasks WHERE job_id = $1 ORDER BY rank")
        .bind(job_id)
        .fetch_all(&db.pool)
        .await?;
    let mut agents = Vec::new();
    let mut leased = 0;
    for r in &rows {
        let state: String = col(r, "state")?;
        let a: Option<String> = col(r, "agent_id")?;
        let delivered = col::<i64>(r, "lease_delivered")? != 0;
        if (state == "leased" && delivered) || state == "completed" {
            leased += 1;
            agents.push(a);
        } else {
            agents.push(None);
        }
    }
    let ready = leased == rows.len() as u32;
    if ready {
        // Whole: it has started (a member lost from now on halts the others rather than
        // re-queueing them), and any halt is over.
        sqlx::query("UPDATE jobs SET gang_started = 1, halted_ms = NULL WHERE id = $1 AND (gang_started = 0 OR halted_ms IS NOT NULL)")
            .bind(job_id)
            .execute(&db.pool)
            .await?;
    }
    Ok(Gang { machines: rows.len() as u32, leased, ready, agents })
}

/// Stores a checkpoint for a leased task (the holder only; with `lease`, only under that
/// lease epoch, so a late upload from a lost lease cannot replace a newer checkpoint).
pub async fn put_checkpoint(db: &Db, agent_id: &str, job_id: i64, rank: i64, lease: Option<i64>, data: &[u8]) -> Result<()> {
    let row = task_row(db, job_id, rank).await?;
    if col::<Option<String>>(&row, "agent_id")?.as_deref() != Some(agent_id) || col::<String>(&row, "state")? != "leased" {
        return Err(StoreError::Conflict("the lease is not held".into()));
    }
    let epoch: i64 = col(&row, "lease_epoch")?;
    if lease.is_some_and(|l| l != epoch) {
        return Err(StoreError::Conflict("the lease is no longer held".into()));
    }
    sqlx::query(
        "INSERT INTO checkpoints(job_id, rank, data, updated_ms) VALUES ($1, $2, $3, $4)
         ON CONFLICT(job_id, rank) DO UPDATE SET data = excluded.data, updated_ms = excluded.updated_ms",
    )
    .bind(job_id)
    .bind(rank)
    .bind(data.to_vec())
    .bind(now_ms())
    .execute(&db.pool)
    .await?;
    Ok(())
}

/// The last checkpoint of a task, for its current lease holder.
pub async fn get_checkpoint(db: &Db, agent_id: &str, job_id: i64, rank: i64) -> Result<Vec<u8>> {
    let row = task_row(db, job_id, rank).await?;
    if col::<Option<String>>(&row, "agent_id")?.as_deref() != Some(agent_id) {
        return Err(StoreError::NotFound);
    }
    let row = sqlx::query("SELECT data FROM checkpoints WHERE job_id = $1 AND rank = $2")
        .bind(job_id)
        .bind(rank)
        .fetch_optional(&db.pool)
        .await?
        .ok_or(StoreError::NotFound)?;
    Ok(col(&row, "data")?)
}

/// What is known of machine `agent_id` for checking its claims: its CPUs (the latest
/// heartbeat's `live_cpus` if any, else the stored count) and when it joined.
pub async fn machine_facts(db: &Db, agent_id: &str, live_cpus: Option<u32>) -> Result<MachineFacts> {
    let row = sqlx::query("SELECT cpus, enrolled_ms FROM agents WHERE id = $1").bind(agent_id).fetch_optional(&db.pool).await?;
    let row = row.ok_or(StoreError::NotFound)?;
    let cpus = live_cpus.map(i64::from).or(col::<Option<i64>>(&row, "cpus")?);
    Ok(MachineFacts::new(cpus, col(&row, "enrolled_ms")?))
}

/// A record refused for good (resending it will not help): 400 `record_out_of_range`.
fn out_of_range(message: String) -> StoreError {
    StoreError::Refused { status: 400, code: lull_protocol::error_code::RECORD_OUT_OF_RANGE, message }
}

/// Stores an agent's ledger records; a record already stored under (agent, seq) is left
/// as it is, so retries and replays never double-count. All or nothing per batch.
///
/// Each record, and each day's counted records together, are checked against what the
/// machine `m` could have done by now ([`crate::bounds`]): a batch that would put a day
/// over is refused whole, naming the record, field and range. Records made before the
/// machine joined are stored but not counted (the ack lists them).
pub async fn ingest(db: &Db, agent_id: &str, m: &MachineFacts, batch: &RecordBatch) -> Result<RecordsAck> {
    use lull_protocol::limits::{RECORDS_PER_BATCH_MAX, RECORD_PAYLOAD_MAX};
    if batch.records.is_empty() || batch.records.len() > RECORDS_PER_BATCH_MAX {
        return Err(StoreError::Invalid(format!("a batch holds 1–{RECORDS_PER_BATCH_MAX} records, not {}", batch.records.len())));
    }
    let now = now_ms();
    let mut parsed = Vec::with_capacity(batch.records.len());
    for r in &batch.records {
        if r.seq < 1 {
            return Err(out_of_range(format!("record {}: seq must be positive", r.seq)));
        }
        check_text("kind", &r.kind, 1, 64)?;
        let payload = r.payload.to_string();
        if payload.len() > RECORD_PAYLOAD_MAX || payload.contains('\0') {
            return Err(out_of_range(format!("record {}: payload must be at most {RECORD_PAYLOAD_MAX} bytes of JSON, without NUL", r.seq)));
        }
        parsed.push((r, bounds::claim(r, m, now).map_err(out_of_range)?, payload));
    }
    let mut tx = db.pool.begin().await?;
    if db.dialect == crate::db::Dialect::Postgres {
        // One batch of a machine at a time (replicas): the day's totals are read after
        // this batch's rows went in, so two batches cannot both pass on the same room.
        sqlx::query("SELECT id FROM agents WHERE id = $1 FOR UPDATE").bind(agent_id).fetch_optional(&mut *tx).await?;
    }
    let mut stored = 0;
    let mut uncounted = Vec::new();
    // Per day of newly counted records: the last such record, named if the day is over.
    let mut days: std::collections::BTreeMap<&str, i64> = std::collections::BTreeMap::new();
    for (r, c, payload) in &parsed {
        let new = sqlx::query(
            "INSERT INTO records(agent_id, seq, kind, day, cpu_us, wall_ms, interruption_limit, linger_ms, payload, received_ms, counted)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) ON CONFLICT(agent_id, seq) DO NOTHING",
        )
        .bind(agent_id)
        .bind(r.seq)
        .bind(&r.kind)
        .bind(&c.day)
        .bind(c.cpu_us)
        .bind(c.wall_ms)
        .bind(c.limit)
        .bind(c.linger_ms)
        .bind(payload)
        .bind(now)
        .bind(c.counted as i64)
        .execute(&mut *tx)
        .await?
        .rows_affected()
            == 1;
        if new {
            stored += 1;
            if !c.counted {
                uncounted.push(r.seq);
            } else if c.kind != bounds::Kind::Other {
                days.insert(c.day.as_str(), r.seq);
            }
        }
    }
    for (day, seq) in days {
        let t = day_totals(&mut tx, agent_id, day).await?;
        let d: chrono::NaiveDate = day.parse().map_err(|_| StoreError::Invalid(format!("day {day:?}")))?;
        bounds::check_day(d, &t, m, now).map_err(|why| out_of_range(format!("record {seq}: {why}")))?;
    }
    tx.commit().await?;
    let acked_through = batch.records.iter().map(|r| r.seq).max().unwrap_or(0);
    Ok(RecordsAck { acked_through, stored, uncounted })
}

/// What an agent's counted records of `day` hold in all (sums as floating point, which
/// no row can overflow; exact below 2⁵³, far above what a day may hold).
async fn day_totals(tx: &mut sqlx::AnyConnection, agent_id: &str, day: &str) -> Result<bounds::DayTotals> {
    let row = sqlx::query(
        "SELECT CAST(COALESCE(SUM(CAST(cpu_us AS DOUBLE PRECISION)), 0) AS DOUBLE PRECISION) AS cpu_us,
                CAST(COALESCE(SUM(CAST(wall_ms AS DOUBLE PRECISION)), 0) AS DOUBLE PRECISION) AS wall_ms,
                CAST(COALESCE(SUM(CAST(linger_ms AS DOUBLE PRECISION)), 0) AS DOUBLE PRECISION) AS linger_ms,
                CAST(COALESCE(SUM(CASE WHEN kind = 'interruption' THEN 1 ELSE 0 END), 0) AS DOUBLE PRECISION) AS n
         FROM records WHERE agent_id = $1 AND day = $2 AND counted = 1",
    )
    .bind(agent_id)
    .bind(day)
    .fetch_one(&mut *tx)
    .await?;
    let f = |k: &str| -> Result<i64> { Ok(col::<f64>(&row, k)?.min(i64::MAX as f64) as i64) };
    Ok(bounds::DayTotals { cpu_us: f("cpu_us")?, wall_ms: f("wall_ms")?, linger_ms: f("linger_ms")?, interruptions: f("n")? })
}

/// The heartbeat snapshot of one agent, as flushed from memory.
#[derive(Clone, Debug)]
pub struct Snapshot {
    pub agent_id: String,
    pub at_ms: i64,
    pub hb: Heartbeat,
    /// Availability observed since the last flush: (day, available ms, observed ms).
    pub availability: Vec<(String, i64, i64)>,
}

/// Rows per multi-row statement in a flush on PostgreSQL (10 parameters a row: 5,000
/// parameters, well under its 65,535); SQLite takes fewer, see [`rows_per_statement`].
const FLUSH_CHUNK: usize = 500;

/// Numbered parameters per statement on SQLite. SQLite finds a numbered parameter's name
/// by walking the statement's list of them, and sqlx asks for every parameter's name when
/// it binds, so binding one statement costs the square of its parameters: 4,500 of them
/// (a 500-row flush) made `sqlite3_bind_parameter_name` a tenth of the coordinator's CPU
/// under 1,000 heartbeats/s (`perf`, `lull bench recruit-api`).
const SQLITE_PARAMS_PER_STATEMENT: usize = 450;

/// Rows per multi-row statement of `cols` parameters each: `rows` on PostgreSQL (fewer
/// round trips), at most [`SQLITE_PARAMS_PER_STATEMENT`] parameters on SQLite.
pub(crate) fn rows_per_statement(db: &Db, rows: usize, cols: usize) -> usize {
    match db.dialect {
        crate::db::Dialect::Postgres => rows,
        crate::db::Dialect::Sqlite => (SQLITE_PARAMS_PER_STATEMENT / cols.max(1)).clamp(1, rows),
    }
}

/// `$1, $2, …, $n`.
pub(crate) fn id_list(n: usize) -> String {
    (1..=n).map(|i| format!("${i}")).collect::<Vec<_>>().join(", ")
}

/// `($1, $2, …), ($9, …)`: `rows` tuples of `cols` numbered placeholders.
pub(crate) fn placeholders(rows: usize, cols: usize) -> String {
    let mut out = String::with_capacity(rows * cols * 5);
    for r in 0..rows {
        if r > 0 {
            out.push_str(", ");
        }
        out.push('(');
        for c in 0..cols {
            if c > 0 {
                out.push_str(", ");
            }
            out.push_str(&format!("${}", r * cols + c + 1));
        }
        out.push(')');
    }
    out
}

/// Writes heartbeat snapshots in one transaction, 500 agents per statement (an
/// `UPDATE … FROM` a `VALUES` list, which SQLite and PostgreSQL both take).
pub async fn flush_snapshots(db: &Db, snaps: &[Snapshot]) -> Result<()> {
    if snaps.is_empty() {
        return Ok(());
    }
    let mut tx = db.pool.begin().await?;
    for chunk in snaps.chunks(rows_per_statement(db, FLUSH_CHUNK, 10)) {
        let sql = format!(
            "WITH v(id, t, st, av, bl, fm, bs, cs, il, cp) AS (VALUES {})
             UPDATE agents SET last_seen_ms = v.t, state = v.st, available = v.av, budget_left = v.bl, free_mem_bytes = v.fm,
                base_speed = v.bs, current_speed = v.cs, interruption_limit = COALESCE(v.il, agents.interruption_limit),
                cpus = COALESCE(v.cp, agents.cpus)
             FROM v WHERE agents.id = v.id",
            placeholders(chunk.len(), 10)
        );
        let mut q = sqlx::query(sqlx::AssertSqlSafe(sql));
        for s in chunk {
            q = q
                .bind(s.agent_id.clone())
                .bind(s.at_ms)
                .bind(s.hb.state.clone())
                .bind(s.hb.available as i64)
                .bind(s.hb.budget_left as i64)
                .bind(i64::try_from(s.hb.free_mem_bytes).unwrap_or(i64::MAX))
                .bind(s.hb.base_speed)
                .bind(s.hb.current_speed)
                .bind(s.hb.interruption_limit.map(i64::from))
                .bind(s.hb.cpus.map(i64::from));
        }
        q.execute(&mut *tx).await?;
    }
    // Each day's row also keeps the interruption limit last reported that day, so reports
    // know a machine's limit on days without an interruption.
    let avail: Vec<(&str, &str, i64, i64, Option<i64>)> = snaps
        .iter()
        .flat_map(|s| {
            let lim = s.hb.interruption_limit.map(i64::from);
            s.availability.iter().map(move |(d, a, o)| (s.agent_id.as_str(), d.as_str(), *a, *o, lim))
        })
        .collect();
    for chunk in avail.chunks(rows_per_statement(db, FLUSH_CHUNK, 5)) {
        let sql = format!(
            "INSERT INTO availability(agent_id, day, available_ms, observed_ms, interruption_limit) VALUES {}
             ON CONFLICT(agent_id, day) DO UPDATE SET available_ms = availability.available_ms + excluded.available_ms,
             observed_ms = availability.observed_ms + excluded.observed_ms,
             interruption_limit = COALESCE(excluded.interruption_limit, availability.interruption_limit)",
            placeholders(chunk.len(), 5)
        );
        let mut q = sqlx::query(sqlx::AssertSqlSafe(sql));
        for (agent, day, a, o, lim) in chunk {
            q = q.bind(agent.to_string()).bind(day.to_string()).bind(*a).bind(*o).bind(*lim);
        }
        q.execute(&mut *tx).await?;
    }
    tx.commit().await?;
    Ok(())
}

/// Enrolled machines `who` may see.
pub async fn list_agents(db: &Db, who: &Principal) -> Result<Vec<AgentInfo>> {
    let owner = match who {
        Principal::Admin => String::new(),
        Principal::Owner { owner } => owner.clone(),
        Principal::Agent { .. } => return Err(StoreError::Forbidden),
    };
    let rows = sqlx::query(
        "SELECT id, owner, name, enrolled_ms, last_seen_ms, state, available, budget_left, free_mem_bytes, base_speed, current_speed,
                interruption_limit, cpus
         FROM agents WHERE ($1 = '' OR owner = $1) AND removed_ms IS NULL ORDER BY owner, name, id",
    )
    .bind(owner)
    .fetch_all(&db.pool)
    .await?;
    rows.iter()
        .map(|r| {
            let state: Option<String> = col(r, "state")?;
            let heartbeat = match state {
                Some(state) => Some(Heartbeat {
                    state,
                    available: col::<Option<i64>>(r, "available")?.unwrap_or(0) != 0,
                    budget_left: col::<Option<i64>>(r, "budget_left")?.unwrap_or(0) as u32,
                    free_mem_bytes: col::<Option<i64>>(r, "free_mem_bytes")?.unwrap_or(0) as u64,
                    base_speed: col::<Option<f64>>(r, "base_speed")?.unwrap_or(0.0),
                    current_speed: col::<Option<f64>>(r, "current_speed")?.unwrap_or(0.0),
                    interruption_limit: col::<Option<i64>>(r, "interruption_limit")?.map(|l| l.clamp(0, u32::MAX as i64) as u32),
                    // Not stored: the live heartbeat (in memory) carries it.
                    idle_for_s: None,
                    owner_load: Vec::new(),
                    memory: None,
                    busy: None,
                    cpus: col::<Option<i64>>(r, "cpus")?.and_then(|c| u32::try_from(c).ok()),
                }),
                None => None,
            };
            Ok(AgentInfo {
                id: col(r, "id")?,
                owner: col(r, "owner")?,
                machine: col(r, "name")?,
                enrolled_ms: col(r, "enrolled_ms")?,
                last_seen_ms: col(r, "last_seen_ms")?,
                heartbeat,
                why: None,
            })
        })
        .collect()
}
