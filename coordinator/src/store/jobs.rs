//! Jobs: checking and inserting a submission, a job's state refreshed from its tasks,
//! and cancelling.

use super::common::{check_text, i64_of, now_ms, retry_transient, Result, StoreError};
use crate::auth::Principal;
use crate::db::{col, Db};
use crate::model::*;
use sqlx::Row;

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
    super::job_view::get_job(db, who, id).await
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
pub(crate) async fn refresh_job<'c, E: sqlx::Executor<'c, Database = sqlx::Any>>(ex: E, job_id: i64, now: i64) -> Result<()> {
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
    super::job_view::get_job(db, who, id).await
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
    if !super::job_view::may_cancel(who, &submitter) {
        super::job_view::get_job(db, who, id).await?;
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
