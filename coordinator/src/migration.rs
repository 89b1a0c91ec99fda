//! `POST /api/v1/tasks/{job}/{rank}/migrate`: an agent whose owner came back while its
//! guest lingers asks whether to move the task (seed 000 §5.2). This module gathers what
//! the pure decision (`lull_core::sched::decide_migration`) needs from the database and the
//! live heartbeats, and carries a "yes" out: the task is given back with its last
//! checkpoint (`store::release` with `GiveBack::Migrated`: no retry used, no eviction counted; a gang
//! halts until the rank is replaced) and the scheduler is told, so it places it again.
//!
//! Any replica answers: the inputs come from the database (and this replica's latest
//! heartbeats, fresher than the flushed ones), not from the leader's memory. A machine is
//! a candidate when its latest heartbeat (at most 3 intervals and 30 s old) says it is
//! available and allowed with interruptions left, and it holds no leased task.

use crate::app::App;
use crate::db::col;
use crate::hub::{Ended, Msg};
use crate::model::{MigrateAnswer, MigrateRequest};
use crate::store::{self, now_ms, StoreError};
use lull_core::sched::{decide_migration, MigrateAsk, MigrateDecision, StayWhy};
use lull_core::sched::{Machine, MachineId, Predictor};
use std::collections::HashMap;

type Result<T> = std::result::Result<T, StoreError>;

/// The request's numbers, each within its range (the error names the field and range).
pub fn validate(req: &MigrateRequest) -> Result<()> {
    let check = |what: &str, v: f64, max: f64| {
        if v.is_finite() && (0.0..=max).contains(&v) {
            Ok(())
        } else {
            Err(StoreError::Invalid(format!("{what} must be a number from 0 to {max}")))
        }
    };
    check("owner_utilization", req.owner_utilization, 1.0)?;
    check("owner_busy_for_s", req.owner_busy_for_s, 604_800.0)?;
    check("migration_cost_s", req.migration_cost_s, 86_400.0)?;
    check("cpu_s", req.cpu_s, 31_536_000.0)
}

/// Decides on a migration request from the holder of `(job, rank)` and, on yes, gives
/// the task back and tells the scheduler.
pub async fn ask(app: &App, agent: &str, job: i64, rank: i64, req: &MigrateRequest) -> Result<MigrateAnswer> {
    validate(req)?;
    let db = &app.db;
    check_holder(app, agent, job, rank, req).await?;
    let j = sqlx::query("SELECT program, mem_bytes, checkpointable, gang, estimate_s FROM jobs WHERE id = $1")
        .bind(job)
        .fetch_one(&db.pool)
        .await?;
    let program: String = col(&j, "program")?;
    let width = col::<i64>(&j, "gang")?.max(1) as u32;
    let estimate: Option<f64> = col(&j, "estimate_s")?;
    let peers: Vec<String> =
        sqlx::query("SELECT agent_id FROM tasks WHERE job_id = $1 AND rank <> $2 AND state = 'leased' AND agent_id IS NOT NULL")
            .bind(job)
            .bind(rank)
            .fetch_all(&db.pool)
            .await?
            .iter()
            .map(|r| col(r, "agent_id"))
            .collect::<std::result::Result<_, _>>()?;

    let (source, candidates, names) = machines(app, agent, req, &peers).await?;
    let predicted = predicted_normtime(app, &program, width, estimate).await?;
    let a = MigrateAsk {
        done_normtime_s: source.base_speed * req.cpu_s,
        source,
        owner_busy_for_s: req.owner_busy_for_s,
        migration_cost_s: req.migration_cost_s,
        checkpointable: col::<i64>(&j, "checkpointable")? != 0,
        predicted_normtime_s: predicted,
        memory_needed: col::<i64>(&j, "mem_bytes")?.max(0) as u64,
        exclude: Vec::new(),
    };
    let d = decide_migration(&a, &candidates, app.config.scheduler.predict.min_cpu_share);
    let (stay_s, move_s) = match &d {
        MigrateDecision::Migrate { stay_s, move_s, .. } | MigrateDecision::Stay(StayWhy::NotSooner { stay_s, move_s, .. }) => {
            (Some(*stay_s), Some(*move_s))
        }
        MigrateDecision::Stay(StayWhy::NoFreeMachine) => (None, None),
    };
    let answer = MigrateAnswer { migrate: d.migrates(), reason: d.to_string(), stay_s, move_s };
    if let MigrateDecision::Migrate { to, .. } = &d {
        store::release(db, agent, job, rank, req.lease, store::GiveBack::Migrated, None).await?;
        let ended = Ended { agent: agent.to_string(), rank: rank as u32, cpu_s: req.cpu_s, completed: false };
        app.scheduling.send(Msg::Job { job, ended: Some(ended) });
        tracing::info!(job, rank, agent, to = names.get(to).map_or("", String::as_str), reason = %answer.reason, "task migrates");
    } else {
        tracing::info!(job, rank, agent, reason = %answer.reason, "task stays");
    }
    Ok(answer)
}

/// Checks that `agent` holds `(job, rank)` under the request's lease and that the CPU
/// time it reports is possible for that lease.
async fn check_holder(app: &App, agent: &str, job: i64, rank: i64, req: &MigrateRequest) -> Result<()> {
    let db = &app.db;
    let task = store::tasks::task_row(db, job, rank).await?;
    let (state, holder, epoch): (String, Option<String>, i64) = (col(&task, "state")?, col(&task, "agent_id")?, col(&task, "lease_epoch")?);
    if holder.as_deref() != Some(agent) {
        return Err(StoreError::NotFound);
    }
    if state != "leased" || epoch != req.lease {
        return Err(StoreError::Conflict("the lease is no longer held".into()));
    }
    if let Some((m, leased)) = store::lease_facts(db, agent, job, rank, req.lease, app.live.cpus(agent)).await? {
        crate::bounds::check_task_cpu("cpu_s", req.cpu_s, &m, leased, now_ms()).map_err(StoreError::Invalid)?;
    }
    Ok(())
}

/// The machines of the decision, numbered: the asker (`agent`, at the load it reports) as
/// the source, and as candidates every fresh, idle machine that runs none of the job's
/// other ranks (`peers`), with their agent ids by number.
async fn machines(
    app: &App,
    agent: &str,
    req: &MigrateRequest,
    peers: &[String],
) -> Result<(Machine, Vec<Machine>, HashMap<MachineId, String>)> {
    let db = &app.db;
    let now = now_ms();
    let stale_ms = (3 * app.config.heartbeat_interval.as_millis() as i64).max(30_000);
    let rows = sqlx::query(
        "SELECT a.id AS id, a.owner AS owner, a.state AS state, a.available AS available, a.budget_left AS budget_left,
            a.base_speed AS base_speed, a.current_speed AS current_speed, a.free_mem_bytes AS free_mem_bytes, a.last_seen_ms AS last_seen_ms,
            (SELECT COUNT(*) FROM tasks t WHERE t.agent_id = a.id AND t.state = 'leased') AS busy
         FROM agents a WHERE a.removed_ms IS NULL",
    )
    .fetch_all(&db.pool)
    .await?;
    let mut source: Option<Machine> = None;
    let mut candidates = Vec::new();
    let mut names: HashMap<MachineId, String> = HashMap::new();
    for (i, r) in rows.iter().enumerate() {
        let id: String = col(r, "id")?;
        let mut m = Machine::new(i as u64 + 1, col::<String>(r, "owner")?, 1.0);
        let mut seen: Option<i64> = col(r, "last_seen_ms")?;
        let mut state: Option<String> = col(r, "state")?;
        m.available = col::<Option<i64>>(r, "available")?.unwrap_or(0) != 0;
        m.interruptions_left = col::<Option<i64>>(r, "budget_left")?.unwrap_or(0).clamp(0, u32::MAX as i64) as u32;
        m.base_speed = col::<Option<f64>>(r, "base_speed")?.filter(|s| s.is_finite() && *s > 0.0).unwrap_or(1.0);
        let current: Option<f64> = col(r, "current_speed")?;
        m.free_memory = col::<Option<i64>>(r, "free_mem_bytes")?.unwrap_or(0).max(0) as u64;
        let mut current = current;
        if let Some((at, hb)) = app.live.latest(&id) {
            if seen.is_none_or(|s| at >= s) {
                seen = Some(at);
                state = Some(hb.state.clone());
                m.available = hb.available;
                m.interruptions_left = hb.budget_left;
                m.base_speed = if hb.base_speed.is_finite() && hb.base_speed > 0.0 { hb.base_speed } else { 1.0 };
                current = Some(hb.current_speed);
                m.free_memory = hb.free_mem_bytes;
            }
        }
        m.load = current.filter(|c| c.is_finite()).map_or(0.0, |c| (1.0 - c / m.base_speed).clamp(0.0, 1.0));
        m.allowed = !matches!(state.as_deref(), Some("paused" | "not_allowed" | "out_of_budget"));
        if id == agent {
            m.load = req.owner_utilization;
            source = Some(m);
            continue;
        }
        let fresh = seen.is_some_and(|s| now - s <= stale_ms);
        let busy = col::<i64>(r, "busy")? > 0;
        if fresh && !busy && !peers.contains(&id) {
            names.insert(m.id, id);
            candidates.push(m);
        }
    }
    let source = source.ok_or(StoreError::NotFound)?;
    Ok((source, candidates, names))
}

/// The task's predicted normtime per member: its program's history (as the scheduler
/// keeps it), else the author's estimate; `None` when neither exists.
async fn predicted_normtime(app: &App, program: &str, width: u32, estimate: Option<f64>) -> Result<Option<f64>> {
    let db = &app.db;
    let mut predictor = Predictor::new(app.config.scheduler.predict.clone());
    let stats = sqlx::query("SELECT stats FROM program_stats WHERE program = $1").bind(program).fetch_optional(&db.pool).await?;
    if let Some(text) = stats.map(|r| col::<String>(&r, "stats")).transpose()? {
        if let Ok(s) = serde_json::from_str(&text) {
            predictor.restore(&s);
        }
    }
    let p = predictor.predict(program, width, estimate.filter(|e| e.is_finite() && *e >= 0.0), 0.0);
    let predicted = (p.source != lull_core::sched::PredictionSource::Default).then(|| p.total_normtime_s / f64::from(width));
    Ok(predicted)
}
