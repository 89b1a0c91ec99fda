//! Machines in the database: the machine list, removing a machine, and the batched
//! write of the heartbeat snapshots that [`crate::live`] keeps in memory.

use super::common::{now_ms, placeholders, rows_per_statement, Result, StoreError};
use super::gangs::follow_requeued;
use crate::auth::Principal;
use crate::db::{col, Db};
use crate::model::*;

/// Retires the secret of machine `id` as `removed` (before its row loses the hash), so
/// the agent still holding it is told it was removed (`identity::why_refused`).
async fn retire_removed(tx: &mut sqlx::AnyConnection, id: &str, now: i64, by: &str) -> Result<()> {
    sqlx::query(
        "INSERT INTO retired_secrets(secret_hash, agent_id, reason, at_ms, addr)
         SELECT secret_hash, id, 'removed', $2, $3 FROM agents WHERE id = $1 AND removed_ms IS NULL ON CONFLICT DO NOTHING",
    )
    .bind(id)
    .bind(now)
    .bind(by)
    .execute(&mut *tx)
    .await?;
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
    retire_removed(&mut tx, agent_id, now, by).await?;
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
