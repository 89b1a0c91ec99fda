//! The routes an agent runs its tasks by: the lease long poll, progress (renewal),
//! completion, failure and eviction, giving every task back, a gang's members,
//! migration, and checkpoints.

use super::extract::{need_agent, path, query, too_large, ApiError, ApiResult, Auth, Body, TaskPath, CHECKPOINT_LIMIT};
use crate::app::App;
use crate::auth::Principal;
use crate::hub::{Ended, Msg};
use crate::model::*;
use crate::scheduling::delivery;
use crate::store;
use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

#[utoipa::path(post, path = "/api/v1/lease", request_body = LeaseRequest, security(("bearer" = [])),
    responses((status = 200, body = Lease), (status = 204, description = "no work within wait_ms"), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)))]
pub(crate) async fn lease(State(app): State<Arc<App>>, Auth(p): Auth, Body(req): Body<LeaseRequest>) -> ApiResult<Response> {
    let agent = need_agent(&p)?.to_string();
    if req.wait_ms > lull_protocol::MAX_LEASE_WAIT_MS {
        return Err(ApiError::new(StatusCode::BAD_REQUEST, format!("wait_ms must be at most {}", lull_protocol::MAX_LEASE_WAIT_MS)));
    }
    if req.free_mem_bytes > lull_protocol::limits::MEMORY_BYTES_MAX {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            format!("free_mem_bytes must be 0–{} (1 PiB)", lull_protocol::limits::MEMORY_BYTES_MAX),
        ));
    }
    let deadline = tokio::time::Instant::now() + Duration::from_millis(req.wait_ms as u64);
    let mut shutdown = app.shutdown.clone();
    // A lease the scheduler already assigned is handed over at once.
    if let Some(l) = take(&app, &agent).await? {
        return Ok(Json(l).into_response());
    }
    // Otherwise this poll is a free slot on the machine until it gets a lease or ends
    // (also when the agent hangs up: the guard tells the scheduler on drop).
    // (The guard is declared first so it drops last, after `waiter`: see `release_waiter`.)
    let (mut poll, seq) = PollGuard::open(&app, &agent, req.free_mem_bytes);
    let waiter = app.scheduling.waiter(&agent);
    // "No work" is said only after the scheduler had this poll in a pass (when it runs
    // on this replica), so even `wait_ms = 0` gets what could be placed at once.
    let mut passed = app.scheduling.passed();
    let settle = tokio::time::Instant::now() + Duration::from_secs(2);
    loop {
        // Register for the wake-up before looking, so a lease assigned in between is not missed.
        let notified = waiter.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        // Read before looking: a pass that ends after the look is not taken as seen.
        let seen = seq.is_none_or(|n| *passed.borrow_and_update() >= n);
        if let Some(l) = take(&app, &agent).await? {
            poll.delivered = true;
            return Ok(Json(l).into_response());
        }
        let now = tokio::time::Instant::now();
        if (now >= deadline && (seen || now >= settle)) || *shutdown.borrow() {
            return Ok(StatusCode::NO_CONTENT.into_response());
        }
        // A lost wake-up (another replica's notice) costs at most this nap.
        let until = if now >= deadline { settle } else { deadline };
        let nap = (until - now).min(Duration::from_millis(1000));
        tokio::select! {
            _ = notified => {}
            _ = passed.changed(), if !seen => {}
            _ = tokio::time::sleep(nap) => {}
            _ = shutdown.changed() => {}
        }
    }
}

/// Takes a lease waiting for `agent`, counting it.
pub(crate) async fn take(app: &App, agent: &str) -> ApiResult<Option<Lease>> {
    let l = delivery::take(app, agent).await?;
    if let Some(l) = &l {
        app.metrics.leases.fetch_add(1, Ordering::Relaxed);
        tracing::info!(job = l.job_id, rank = l.rank, lease = l.lease, agent, "task leased");
    }
    Ok(l)
}

/// An open long poll, as the scheduler counts it: one free slot on its machine.
struct PollGuard<'a> {
    app: &'a App,
    agent: String,
    delivered: bool,
}

impl<'a> PollGuard<'a> {
    /// Opens the poll; the number is the scheduler's for the message (on a leader).
    fn open(app: &'a App, agent: &str, free_mem: u64) -> (PollGuard<'a>, Option<u64>) {
        let hb = app.live.latest(agent).map(|(_, hb)| hb);
        let seq = app.scheduling.open_poll(agent, free_mem, hb);
        (PollGuard { app, agent: agent.to_string(), delivered: false }, seq)
    }
}

impl Drop for PollGuard<'_> {
    fn drop(&mut self) {
        let agent = std::mem::take(&mut self.agent);
        self.app.scheduling.close_poll(&agent, self.delivered);
        self.app.scheduling.release_waiter(&agent);
    }
}

#[utoipa::path(post, path = "/api/v1/tasks/{job}/{rank}/progress", request_body = Progress, params(("job" = i64, Path), ("rank" = i64, Path)),
    security(("bearer" = [])), responses((status = 200, body = ProgressAck), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)))]
pub(crate) async fn progress(
    State(app): State<Arc<App>>,
    Auth(p): Auth,
    t: TaskPath,
    Body(req): Body<Progress>,
) -> ApiResult<Json<ProgressAck>> {
    let agent = need_agent(&p)?;
    let (job, rank) = path(t)?;
    if req.fraction.is_some_and(|f| !(f.is_finite() && (0.0..=1.0).contains(&f))) {
        return Err(ApiError::new(StatusCode::BAD_REQUEST, "fraction must be a number from 0 to 1".into()));
    }
    Ok(Json(store::progress(&app.db, agent, job, rank, &req, app.config.lease_ttl.as_millis() as i64).await?))
}

#[utoipa::path(post, path = "/api/v1/tasks/{job}/{rank}/complete", request_body = Completion, params(("job" = i64, Path), ("rank" = i64, Path)),
    security(("bearer" = [])), responses((status = 200, body = CompletionAck), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)))]
pub(crate) async fn complete(
    State(app): State<Arc<App>>,
    Auth(p): Auth,
    t: TaskPath,
    Body(req): Body<Completion>,
) -> ApiResult<Json<CompletionAck>> {
    let agent = need_agent(&p)?;
    let (job, rank) = path(t)?;
    let ack = store::complete(&app.db, agent, job, rank, &req, app.live.cpus(agent)).await?;
    if ack.counted {
        let ended = Ended { agent: agent.to_string(), rank: rank as u32, cpu_s: req.user_cpu_s + req.sys_cpu_s, completed: true };
        app.scheduling.send(Msg::Job { job, ended: Some(ended) });
        app.metrics.completions.fetch_add(1, Ordering::Relaxed);
        tracing::info!(job, rank, lease = req.lease, agent, exit_code = req.exit_code, "task completed");
    }
    Ok(Json(ack))
}

pub(crate) async fn release(app: &App, p: &Principal, t: TaskPath, req: TaskRelease, evicted: bool) -> ApiResult<Json<Task>> {
    let agent = need_agent(p)?;
    let (job, rank) = path(t)?;
    if let Some(r) = &req.reason {
        store::check_text("reason", r, 0, 4096)?;
    }
    let why = match (evicted, req.not_started) {
        (_, true) => store::GiveBack::NotStarted,
        (true, false) => store::GiveBack::Evicted,
        (false, false) => store::GiveBack::Failed,
    };
    let task = store::release(&app.db, agent, job, rank, req.lease, why, req.reason.as_deref()).await?;
    let ended = Ended { agent: agent.to_string(), rank: rank as u32, cpu_s: 0.0, completed: false };
    app.scheduling.send(Msg::Job { job, ended: Some(ended) });
    tracing::info!(job, rank, agent, ?why, state = %task.state, reason = req.reason.as_deref().unwrap_or(""), "task released");
    Ok(Json(task))
}

#[utoipa::path(post, path = "/api/v1/tasks/{job}/{rank}/fail", request_body = TaskRelease, params(("job" = i64, Path), ("rank" = i64, Path)),
    security(("bearer" = [])), responses((status = 200, body = Task), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)))]
pub(crate) async fn fail(State(app): State<Arc<App>>, Auth(p): Auth, t: TaskPath, Body(req): Body<TaskRelease>) -> ApiResult<Json<Task>> {
    release(&app, &p, t, req, false).await
}

#[utoipa::path(post, path = "/api/v1/tasks/{job}/{rank}/evicted", request_body = TaskRelease, params(("job" = i64, Path), ("rank" = i64, Path)),
    security(("bearer" = [])), responses((status = 200, body = Task), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)))]
pub(crate) async fn evicted(
    State(app): State<Arc<App>>,
    Auth(p): Auth,
    t: TaskPath,
    Body(req): Body<TaskRelease>,
) -> ApiResult<Json<Task>> {
    release(&app, &p, t, req, true).await
}

#[utoipa::path(post, path = "/api/v1/give-back", security(("bearer" = [])),
    responses((status = 200, body = GivenBack, description = "an agent that just started, or is stopping, runs no guest: the tasks it held went back to the queue (no retry used, not an eviction)"),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)))]
pub(crate) async fn give_back(State(app): State<Arc<App>>, Auth(p): Auth) -> ApiResult<Json<GivenBack>> {
    let agent = need_agent(&p)?;
    let (n, jobs) = store::give_back_all(&app.db, agent).await?;
    for job in jobs {
        app.scheduling.send(Msg::Job { job, ended: None });
    }
    if n > 0 {
        tracing::info!(agent, tasks = n, "agent runs no guest (started or stopping): the tasks it held went back to the queue");
        app.metrics.requeued.fetch_add(n as u64, Ordering::Relaxed);
    }
    Ok(Json(GivenBack { tasks_requeued: n }))
}

#[utoipa::path(get, path = "/api/v1/tasks/{job}/{rank}/gang", params(("job" = i64, Path), ("rank" = i64, Path)),
    security(("bearer" = [])), responses((status = 200, body = Gang), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody)))]
pub(crate) async fn gang(State(app): State<Arc<App>>, Auth(p): Auth, t: TaskPath) -> ApiResult<Json<Gang>> {
    let agent = need_agent(&p)?;
    let (job, rank) = path(t)?;
    Ok(Json(store::gang(&app.db, agent, job, rank).await?))
}

#[utoipa::path(post, path = "/api/v1/tasks/{job}/{rank}/migrate", request_body = MigrateRequest, params(("job" = i64, Path), ("rank" = i64, Path)),
    security(("bearer" = [])), responses((status = 200, body = MigrateAnswer, description = "the decision; with `migrate` the task was given back: stop the guest"),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)))]
pub(crate) async fn migrate(
    State(app): State<Arc<App>>,
    Auth(p): Auth,
    t: TaskPath,
    Body(req): Body<MigrateRequest>,
) -> ApiResult<Json<MigrateAnswer>> {
    let agent = need_agent(&p)?;
    let (job, rank) = path(t)?;
    Ok(Json(crate::migration::ask(&app, agent, job, rank, &req).await?))
}

#[utoipa::path(put, path = "/api/v1/tasks/{job}/{rank}/checkpoint", request_body(content = Vec<u8>, content_type = "application/octet-stream"),
    params(("job" = i64, Path), ("rank" = i64, Path), lull_protocol::CheckpointQuery), security(("bearer" = [])),
    responses((status = 204), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody), (status = 413, body = ErrorBody)))]
pub(crate) async fn put_checkpoint(
    State(app): State<Arc<App>>,
    Auth(p): Auth,
    t: TaskPath,
    q: Result<Query<lull_protocol::CheckpointQuery>, axum::extract::rejection::QueryRejection>,
    body: Result<Bytes, axum::extract::rejection::BytesRejection>,
) -> ApiResult<StatusCode> {
    let agent = need_agent(&p)?;
    let (job, rank) = path(t)?;
    let q = query(q)?;
    let body = body.map_err(|e| match e.status() {
        StatusCode::PAYLOAD_TOO_LARGE => too_large("the checkpoint", CHECKPOINT_LIMIT),
        s if s.is_client_error() => ApiError::new(s, e.body_text()),
        _ => ApiError::new(StatusCode::BAD_REQUEST, e.body_text()),
    })?;
    store::put_checkpoint(&app.db, agent, job, rank, q.lease, &body).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(get, path = "/api/v1/tasks/{job}/{rank}/checkpoint", params(("job" = i64, Path), ("rank" = i64, Path)), security(("bearer" = [])),
    responses((status = 200, content_type = "application/octet-stream", body = Vec<u8>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody)))]
pub(crate) async fn get_checkpoint(State(app): State<Arc<App>>, Auth(p): Auth, t: TaskPath) -> ApiResult<Response> {
    let agent = need_agent(&p)?;
    let (job, rank) = path(t)?;
    let data = store::get_checkpoint(&app.db, agent, job, rank).await?;
    Ok(([(header::CONTENT_TYPE, "application/octet-stream")], data).into_response())
}
