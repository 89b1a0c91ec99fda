//! Ledger records in: checked against what the machine could have done
//! ([`crate::bounds`]) and stored idempotently on agent and sequence.

use super::common::{check_text, now_ms, Result, StoreError};
use crate::bounds::{self, MachineFacts};
use crate::db::{col, Db};
use crate::model::*;

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
