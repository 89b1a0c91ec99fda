//! Gangs: how one rank's loss or failure moves its peers.
//!
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

use super::common::{now_ms, Result};
use super::jobs::refresh_job;
use crate::db::{col, Db};
use sqlx::any::AnyRow;

/// After a rank of a job went back to the queue, failed or was lost. Once any rank
/// failed or was lost for good the remaining ranks are cancelled. A rank `lost` (evicted, lease expired, machine
/// removed, moved away) from a gang that had started halts the gang: its other leased
/// ranks keep their leases (their agents freeze them, told by their renewals) from
/// `halted_ms` until a replacement takes the lost rank (see [`resolve_halts`]).
/// Otherwise — a failure with retries left, or a gang that never filled — the gang
/// restarts together: its other leased ranks are re-queued too (without using their
/// retries; their holders learn it from a 409 on their next progress report).
pub(crate) async fn gang_follow(conn: &mut sqlx::AnyConnection, job_id: i64, lost: bool, now: i64) -> Result<()> {
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
pub(crate) fn distinct_jobs(rows: &[AnyRow]) -> Result<Vec<i64>> {
    let mut jobs: Vec<i64> = rows.iter().map(|r| col(r, "job_id")).collect::<std::result::Result<_, _>>()?;
    jobs.sort_unstable();
    jobs.dedup();
    Ok(jobs)
}

/// After tasks went back to the queue (or failed): each of their jobs (`rows` carry
/// `job_id`) has its gang followed (`lost`: see [`gang_follow`]) and its state
/// recomputed, once.
pub(crate) async fn follow_requeued(tx: &mut sqlx::Transaction<'_, sqlx::Any>, rows: &[AnyRow], lost: bool, now: i64) -> Result<()> {
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
pub(crate) async fn halted_now(db: &Db, job_id: i64) -> Result<bool> {
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
