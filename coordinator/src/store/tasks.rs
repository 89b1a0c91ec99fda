//! Tasks and their leases: renewals (progress), completion, failure, eviction and giving
//! back, migration, expiry, a gang's members, and checkpoints. Every change is one
//! conditional `UPDATE … WHERE state = … AND lease_epoch = …` or one transaction.

use super::common::{check_text, day_of, now_ms, Result, StoreError};
use super::gangs::{distinct_jobs, follow_requeued, gang_follow, halted_now};
use super::jobs::refresh_job;
use crate::bounds::{self, MachineFacts};
use crate::db::{col, Db};
use crate::model::*;
use sqlx::any::AnyRow;

/// A task's state, holder and lease epoch; `NotFound` when the job has no such rank.
pub(crate) async fn task_row(db: &Db, job_id: i64, rank: i64) -> Result<AnyRow> {
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
    let row = sqlx::query(sqlx::AssertSqlSafe(format!("{} WHERE t.job_id = $1 AND t.rank = $2", super::job_view::TASK_SELECT)))
        .bind(job_id)
        .bind(rank)
        .fetch_one(&mut *tx)
        .await?;
    tx.commit().await?;
    super::job_view::task_of(&row)
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
