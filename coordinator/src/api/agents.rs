//! The machines' routes: an agent's heartbeat, the machine list (with why each takes no
//! guest work now), removing a machine, and the pool overview.

use super::extract::{need_admin, need_agent, need_person, path, ApiError, ApiResult, Auth, Body, PeerIp};
use crate::app::App;
use crate::auth::Principal;
use crate::hub::Msg;
use crate::model::*;
use crate::store::{self, now_ms};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use std::sync::atomic::Ordering;
use std::sync::Arc;

#[utoipa::path(post, path = "/api/v1/heartbeat", request_body = Heartbeat, security(("bearer" = [])),
    responses((status = 200, body = HeartbeatAck), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)))]
pub(crate) async fn heartbeat(State(app): State<Arc<App>>, Auth(p): Auth, Body(hb): Body<Heartbeat>) -> ApiResult<Json<HeartbeatAck>> {
    let agent = need_agent(&p)?;
    store::check_text("state", &hb.state, 1, 32)?;
    if let Some(b) = &hb.busy {
        store::check_text("busy", b, 1, 32)?;
    }
    crate::bounds::check_heartbeat(&hb).map_err(|why| ApiError::new(StatusCode::BAD_REQUEST, why))?;
    let mut hb = hb;
    // The readings go to the scheduler (instant recruitment) only, not into the snapshot.
    let owner_load = std::mem::take(&mut hb.owner_load);
    app.scheduling.send(Msg::Heartbeat { agent: agent.to_string(), hb: Heartbeat { owner_load, ..hb.clone() } });
    app.live.heartbeat(agent, hb, now_ms(), app.config.heartbeat_interval.as_millis() as i64);
    app.metrics.heartbeats.fetch_add(1, Ordering::Relaxed);
    Ok(Json(HeartbeatAck { next_heartbeat_s: app.config.heartbeat_interval.as_secs().max(1) as u32 }))
}

#[utoipa::path(get, path = "/api/v1/agents", security(("bearer" = [])),
    responses((status = 200, body = [AgentInfo]), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)))]
pub(crate) async fn agents(State(app): State<Arc<App>>, Auth(p): Auth) -> ApiResult<Json<Vec<AgentInfo>>> {
    Ok(Json(agents_now(&app, &p).await?))
}

#[utoipa::path(delete, path = "/api/v1/agents/{id}", params(("id" = String, Path)), security(("bearer" = [])),
    responses((status = 200, body = MachineRemoved), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody)))]
pub(crate) async fn remove_agent(
    State(app): State<Arc<App>>,
    Auth(p): Auth,
    PeerIp(addr): PeerIp,
    id: Result<Path<String>, axum::extract::rejection::PathRejection>,
) -> ApiResult<Json<MachineRemoved>> {
    need_admin(&p)?;
    let id = path(id)?;
    store::check_text("id", &id, 1, 64)?;
    let r = store::remove_agent(&app.db, &id, &addr).await?;
    app.live.forget_creds();
    app.scheduling.send(Msg::AgentRemoved { agent: r.id.clone() });
    tracing::info!(agent = %r.id, owner = %r.owner, machine = %r.machine, requeued = r.tasks_requeued, "machine removed");
    Ok(Json(r))
}

/// The machines `p` may see, with the latest heartbeat (in memory until the next flush)
/// and why each takes no guest work now.
pub(crate) async fn agents_now(app: &App, p: &Principal) -> ApiResult<Vec<AgentInfo>> {
    let mut list = store::list_agents(&app.db, p).await?;
    let (now, offline) = (now_ms(), offline_after_s(app));
    for a in &mut list {
        with_latest_heartbeat(app, a);
        let state = machine_state(a, now, offline);
        a.why = crate::waiting::machine_words(&crate::waiting::PoolMachine { info: &*a, state, visible: true });
    }
    Ok(list)
}

/// Every enrolled machine with this replica's latest heartbeat, for the waiting
/// explanations (`why` left empty): the database's list is reused for up to
/// [`crate::live::ENROLLED_TTL`], because a submission that read every machine's row
/// took 22 ms of the coordinator at 2,000 machines (45 submissions/s).
pub(crate) async fn pool_now(app: &App) -> ApiResult<Vec<AgentInfo>> {
    let listed = match app.live.enrolled() {
        Some(l) => l,
        None => {
            let l = Arc::new(store::list_agents(&app.db, &Principal::Admin).await?);
            app.live.cache_enrolled(l.clone());
            l
        }
    };
    let mut list = (*listed).clone();
    for a in &mut list {
        with_latest_heartbeat(app, a);
    }
    Ok(list)
}

/// Lays this replica's latest heartbeat of `a` over what the database said, when newer.
fn with_latest_heartbeat(app: &App, a: &mut AgentInfo) {
    if let Some((at, hb)) = app.live.latest(&a.id) {
        if a.last_seen_ms.is_none_or(|t| t <= at) {
            a.last_seen_ms = Some(at);
            a.heartbeat = Some(hb);
        }
    }
}

/// A machine silent for this many heartbeat intervals (and at least 30 s) is offline.
const OFFLINE_INTERVALS: u32 = 3;

/// How long a machine may be silent before it counts as offline, seconds.
pub(crate) fn offline_after_s(app: &App) -> u32 {
    (app.config.heartbeat_interval.as_secs() as u32 * OFFLINE_INTERVALS).max(30)
}

/// A machine's state for the pool overview: its last reported policy state, `offline`
/// when silent for longer than `offline_after_s`, `never_seen` before its first heartbeat.
pub(crate) fn machine_state(a: &AgentInfo, now_ms: i64, offline_after_s: u32) -> String {
    match (&a.heartbeat, a.last_seen_ms) {
        (Some(hb), Some(t)) if now_ms - t <= offline_after_s as i64 * 1000 => hb.state.clone(),
        (_, Some(_)) => "offline".to_string(),
        _ => "never_seen".to_string(),
    }
}

#[utoipa::path(get, path = "/api/v1/pool", security(("bearer" = [])),
    responses((status = 200, body = PoolSummary), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)))]
pub(crate) async fn pool(State(app): State<Arc<App>>, Auth(p): Auth) -> ApiResult<Json<PoolSummary>> {
    need_person(&p)?;
    let now = now_ms();
    let offline_after_s = offline_after_s(&app);
    let list = agents_now(&app, &p).await?;
    let mut machines = std::collections::BTreeMap::new();
    for a in &list {
        *machines.entry(machine_state(a, now, offline_after_s)).or_insert(0) += 1;
    }
    let jobs: std::collections::BTreeMap<String, u32> = crate::store::job_view::job_counts(&app.db, &p).await?.into_iter().collect();
    let viewer = match &*p {
        Principal::Owner { owner } => Viewer { role: "owner".into(), owner: Some(owner.clone()) },
        _ => Viewer { role: "admin".into(), owner: None },
    };
    Ok(Json(PoolSummary {
        now_ms: now,
        viewer,
        offline_after_s,
        machines_total: list.len() as u32,
        machines,
        jobs_total: jobs.values().sum(),
        jobs,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn silent_machines_are_offline_and_unheard_ones_never_seen() {
        let hb = Heartbeat {
            state: "donating".into(),
            available: false,
            budget_left: 1,
            free_mem_bytes: 0,
            base_speed: 1.0,
            current_speed: 1.0,
            interruption_limit: None,
            idle_for_s: None,
            owner_load: Vec::new(),
            memory: None,
            busy: None,
            cpus: None,
        };
        let a = |seen: Option<i64>, hb: Option<Heartbeat>| AgentInfo {
            id: "x".into(),
            owner: "o".into(),
            machine: "m".into(),
            enrolled_ms: 0,
            last_seen_ms: seen,
            heartbeat: hb,
            why: None,
        };
        assert_eq!(machine_state(&a(Some(70_000), Some(hb.clone())), 100_000, 30), "donating");
        assert_eq!(machine_state(&a(Some(69_999), Some(hb.clone())), 100_000, 30), "offline");
        assert_eq!(machine_state(&a(None, None), 100_000, 30), "never_seen");
    }
}
