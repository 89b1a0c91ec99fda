//! The HTTP API (axum): routes, the bearer-secret extractor, the JSON body extractor that
//! turns every malformed body into a 4xx, the metrics/logging middleware, and the
//! OpenAPI document (utoipa) served at `/api/openapi.json`.

use crate::auth::{digest, hash_secret, kind_of, Principal};
use crate::model::*;
use crate::report::{self, By, Period, ReportQuery};
use crate::scheduling::{Ended, Msg};
use crate::store::{self, now_ms, StoreError};
use crate::App;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, FromRequest, FromRequestParts, MatchedPath, Path, Query, Request, State};
use axum::http::{header, request::Parts, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use axum::{Json, Router};
use serde::Deserialize;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};
use utoipa::OpenApi;

/// JSON bodies are small; checkpoints may be larger.
pub const JSON_LIMIT: usize = lull_protocol::limits::JSON_BODY_MAX;
pub const CHECKPOINT_LIMIT: usize = lull_protocol::CHECKPOINT_MAX;

/// An API error: a status, a message for people and, for some, a code for programs
/// ([`lull_protocol::error_code`]).
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
    pub code: Option<&'static str>,
}

impl ApiError {
    pub fn new(status: StatusCode, message: String) -> Self {
        ApiError { status, message, code: None }
    }

    pub fn coded(status: StatusCode, code: &'static str, message: String) -> Self {
        ApiError { status, message, code: Some(code) }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, Json(ErrorBody { error: self.message, code: self.code.map(str::to_string) })).into_response()
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Sql(e) => {
                crate::db::log_sql_error(&e);
                ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "database unavailable".into())
            }
            StoreError::NotFound => ApiError::new(StatusCode::NOT_FOUND, "not found".into()),
            StoreError::Conflict(m) => ApiError::new(StatusCode::CONFLICT, m),
            StoreError::Invalid(m) => ApiError::new(StatusCode::BAD_REQUEST, m),
            StoreError::Unauthorised => ApiError::new(StatusCode::UNAUTHORIZED, "unknown, spent, expired or revoked credential".into()),
            StoreError::Forbidden => ApiError::new(StatusCode::FORBIDDEN, "not allowed for this role".into()),
            StoreError::Denied(m) => ApiError::new(StatusCode::FORBIDDEN, m),
            StoreError::Refused { status, code, message } => {
                ApiError::coded(StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_REQUEST), code, message)
            }
        }
    }
}

type ApiResult<T> = Result<T, ApiError>;

/// The 413 for a body over `limit` bytes, naming the limit.
fn too_large(what: &str, limit: usize) -> ApiError {
    ApiError::coded(
        StatusCode::PAYLOAD_TOO_LARGE,
        lull_protocol::error_code::TOO_LARGE,
        format!("{what} is over its limit of {limit} bytes (README, \"Limits\")"),
    )
}

/// A JSON body; any rejection (syntax, shape, type, size, content type) is a 4xx.
pub struct Body<T>(pub T);

impl<S: Send + Sync, T: serde::de::DeserializeOwned> FromRequest<S> for Body<T> {
    type Rejection = ApiError;
    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        match Json::<T>::from_request(req, state).await {
            Ok(Json(v)) => Ok(Body(v)),
            Err(r) if r.status() == StatusCode::PAYLOAD_TOO_LARGE => Err(too_large("the request body", JSON_LIMIT)),
            Err(r) => {
                let status = if r.status().is_client_error() { r.status() } else { StatusCode::BAD_REQUEST };
                Err(ApiError::new(status, r.body_text()))
            }
        }
    }
}

/// The caller's IP address (without its port), as the connection shows it; behind a
/// reverse proxy, the proxy's.
pub(crate) fn peer_ip(parts: &Parts) -> String {
    parts
        .extensions
        .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
        .map_or_else(|| "unknown".to_string(), |c| c.0.ip().to_string())
}

/// The caller, from `Authorization: Bearer <secret>`.
pub struct Auth(pub Arc<Principal>);

impl FromRequestParts<Arc<App>> for Auth {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, app: &Arc<App>) -> Result<Self, Self::Rejection> {
        use lull_protocol::error_code;
        let missing = |m: &str| ApiError::coded(StatusCode::UNAUTHORIZED, error_code::CREDENTIAL_MISSING, m.into());
        let h = parts.headers.get(header::AUTHORIZATION).ok_or_else(|| missing("missing Authorization: Bearer header"))?;
        let secret = h.to_str().ok().and_then(|s| s.strip_prefix("Bearer ")).ok_or_else(|| missing("Authorization must be Bearer"))?;
        let Some(kind) = kind_of(secret) else {
            return Err(missing("malformed credential"));
        };
        let d = digest(secret);
        let p = match app.live.cred(&d) {
            Some(p) => p,
            None => {
                let hash = hash_secret(secret);
                match crate::identity::principal_by_hash(&app.db, &hash).await? {
                    Some(p) => {
                        let p = Arc::new(p);
                        app.live.cache_cred(d, p.clone());
                        p
                    }
                    None => {
                        let (code, why) = crate::identity::why_refused(&app.db, &hash)
                            .await?
                            .unwrap_or((error_code::CREDENTIAL_UNKNOWN, "unknown credential".to_string()));
                        return Err(ApiError::coded(StatusCode::UNAUTHORIZED, code, why));
                    }
                }
            }
        };
        if matches!(kind, crate::auth::SecretKind::Admin | crate::auth::SecretKind::Owner) {
            app.live.key_used(hash_secret(secret), peer_ip(parts), now_ms());
        }
        Ok(Auth(p))
    }
}

/// The caller if the request carries a working credential, else none: enrolment takes
/// either. A credential that no longer works (a machine removed or replaced, a revoked
/// key) counts as none, so its holder can still enrol anew with a join token.
pub struct MaybeAuth(pub Option<Arc<Principal>>);

impl FromRequestParts<Arc<App>> for MaybeAuth {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, app: &Arc<App>) -> Result<Self, Self::Rejection> {
        if !parts.headers.contains_key(header::AUTHORIZATION) {
            return Ok(MaybeAuth(None));
        }
        match Auth::from_request_parts(parts, app).await {
            Ok(Auth(p)) => Ok(MaybeAuth(Some(p))),
            Err(e) if e.status == StatusCode::UNAUTHORIZED => Ok(MaybeAuth(None)),
            Err(e) => Err(e),
        }
    }
}

/// The caller's address, for records of who did what.
pub struct PeerIp(pub String);

impl<S: Send + Sync> FromRequestParts<S> for PeerIp {
    type Rejection = std::convert::Infallible;
    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        Ok(PeerIp(peer_ip(parts)))
    }
}

pub(crate) fn need_admin(p: &Principal) -> ApiResult<()> {
    match p {
        Principal::Admin => Ok(()),
        _ => Err(ApiError::new(StatusCode::FORBIDDEN, "admin only".into())),
    }
}

fn need_agent(p: &Principal) -> ApiResult<&str> {
    match p {
        Principal::Agent { agent_id, .. } => Ok(agent_id),
        _ => Err(ApiError::new(StatusCode::FORBIDDEN, "agents only".into())),
    }
}

pub(crate) fn need_person(p: &Principal) -> ApiResult<()> {
    match p {
        Principal::Agent { .. } => Err(ApiError::new(StatusCode::FORBIDDEN, "not for agents".into())),
        _ => Ok(()),
    }
}

/// The router with its state.
pub fn router(app: Arc<App>) -> Router {
    let api = Router::new()
        .route("/api/v1/keys", post(crate::api_identity::create_key).get(crate::api_identity::list_keys))
        .route("/api/v1/keys/{id}", delete(crate::api_identity::revoke_key))
        .route("/api/v1/join-tokens", post(crate::api_identity::create_join_token).get(crate::api_identity::list_tokens))
        .route("/api/v1/join-tokens/{id}", delete(crate::api_identity::revoke_token))
        .route("/api/v1/enrol", post(crate::api_identity::enrol))
        .route("/api/v1/heartbeat", post(heartbeat))
        .route("/api/v1/agents", get(agents))
        .route("/api/v1/agents/{id}", delete(remove_agent))
        .route("/api/v1/pool", get(pool))
        .route("/api/v1/jobs", post(submit).get(list_jobs))
        .route("/api/v1/jobs/{id}", get(get_job))
        .route("/api/v1/jobs/{id}/output", get(job_output))
        .route("/api/v1/jobs/{id}/cancel", post(cancel))
        .route("/api/v1/predictions", get(predictions))
        .route("/api/v1/lease", post(lease))
        .route("/api/v1/tasks/{job}/{rank}/progress", post(progress))
        .route("/api/v1/tasks/{job}/{rank}/complete", post(complete))
        .route("/api/v1/tasks/{job}/{rank}/fail", post(fail))
        .route("/api/v1/tasks/{job}/{rank}/evicted", post(evicted))
        .route("/api/v1/tasks/{job}/{rank}/gang", get(gang))
        .route("/api/v1/tasks/{job}/{rank}/migrate", post(migrate))
        .route("/api/v1/give-back", post(give_back))
        .route("/api/v1/records", post(records))
        .route("/api/v1/reports", get(reports))
        .route("/api/v1/recruit", post(crate::api_recruit::recruit))
        .route("/api/v1/recruit/{group}", get(crate::api_recruit::group))
        .route("/api/v1/recruit/{group}/release", post(crate::api_recruit::release))
        .layer(DefaultBodyLimit::max(JSON_LIMIT))
        .layer(axum::middleware::from_fn(declared_limit::<JSON_LIMIT>));
    let checkpoints = Router::new()
        .route("/api/v1/tasks/{job}/{rank}/checkpoint", get(get_checkpoint).put(put_checkpoint))
        .layer(DefaultBodyLimit::max(CHECKPOINT_LIMIT))
        .layer(axum::middleware::from_fn(declared_checkpoint_limit));
    Router::new()
        .route("/", get(crate::dashboard::index))
        .route("/assets/{*path}", get(crate::dashboard::asset))
        .route("/healthz", get(|| async { "ok" }))
        .route("/metrics", get(metrics))
        .route("/api/openapi.json", get(openapi))
        .merge(api)
        .merge(checkpoints)
        .fallback(|| async { ApiError::new(StatusCode::NOT_FOUND, "no such route".into()) })
        .layer(axum::middleware::from_fn_with_state(app.clone(), observe))
        .with_state(app)
}

/// Refuses a body whose declared length is over `LIMIT` before reading any of it (the
/// body limit layer also stops bodies without a declared length once they pass it).
async fn declared_limit<const LIMIT: usize>(req: Request, next: Next) -> Response {
    refuse_declared(req, next, "the request body", LIMIT).await
}

/// [`declared_limit`] for checkpoint uploads.
async fn declared_checkpoint_limit(req: Request, next: Next) -> Response {
    refuse_declared(req, next, "the checkpoint", CHECKPOINT_LIMIT).await
}

async fn refuse_declared(req: Request, next: Next, what: &str, limit: usize) -> Response {
    let declared = req.headers().get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return too_large(what, limit).into_response();
    }
    next.run(req).await
}

async fn observe(State(app): State<Arc<App>>, req: Request, next: Next) -> Response {
    let route = req.extensions().get::<MatchedPath>().cloned();
    let route = route.as_ref().map_or("unmatched", |p| p.as_str());
    let method = req.method().clone();
    let t = Instant::now();
    let resp = next.run(req).await;
    let secs = t.elapsed().as_secs_f64();
    let status = resp.status().as_u16();
    app.metrics.observe(route, status, secs);
    if status >= 500 {
        tracing::warn!(%method, route, status, ms = secs * 1e3, "request failed");
    } else {
        tracing::debug!(%method, route, status, ms = secs * 1e3, "request");
    }
    resp
}

async fn metrics(State(app): State<Arc<App>>, headers: axum::http::HeaderMap) -> Response {
    if let Some(key) = &app.config.metrics_key {
        let given = headers.get(header::AUTHORIZATION).and_then(|h| h.to_str().ok()).and_then(|s| s.strip_prefix("Bearer "));
        // Compared as digests, so the time taken says nothing about the key.
        if given.map(digest) != Some(digest(key)) {
            return ApiError::new(StatusCode::UNAUTHORIZED, "/metrics needs Authorization: Bearer <the metrics key>".into())
                .into_response();
        }
    }
    ([(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; version=0.0.4"))], app.metrics.render(app.live.len())).into_response()
}

async fn openapi() -> Json<utoipa::openapi::OpenApi> {
    Json(ApiDoc::openapi())
}

#[utoipa::path(post, path = "/api/v1/heartbeat", request_body = Heartbeat, security(("bearer" = [])),
    responses((status = 200, body = HeartbeatAck), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)))]
async fn heartbeat(State(app): State<Arc<App>>, Auth(p): Auth, Body(hb): Body<Heartbeat>) -> ApiResult<Json<HeartbeatAck>> {
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
async fn agents(State(app): State<Arc<App>>, Auth(p): Auth) -> ApiResult<Json<Vec<AgentInfo>>> {
    Ok(Json(agents_now(&app, &p).await?))
}

#[utoipa::path(delete, path = "/api/v1/agents/{id}", params(("id" = String, Path)), security(("bearer" = [])),
    responses((status = 200, body = MachineRemoved), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody)))]
async fn remove_agent(
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
async fn agents_now(app: &App, p: &Principal) -> ApiResult<Vec<AgentInfo>> {
    let mut list = store::list_agents(&app.db, p).await?;
    let (now, offline) = (now_ms(), offline_after_s(app));
    for a in &mut list {
        if let Some((at, hb)) = app.live.latest(&a.id) {
            if a.last_seen_ms.is_none_or(|t| t <= at) {
                a.last_seen_ms = Some(at);
                a.heartbeat = Some(hb);
            }
        }
        let state = machine_state(a, now, offline);
        a.why = crate::waiting::machine_words(&crate::waiting::PoolMachine { info: &*a, state, visible: true });
    }
    Ok(list)
}

/// A machine silent for this many heartbeat intervals (and at least 30 s) is offline.
const OFFLINE_INTERVALS: u32 = 3;

/// How long a machine may be silent before it counts as offline, seconds.
fn offline_after_s(app: &App) -> u32 {
    (app.config.heartbeat_interval.as_secs() as u32 * OFFLINE_INTERVALS).max(30)
}

/// Says why each queued job of `jobs` waits ([`crate::waiting`]), from every enrolled
/// machine as it is now (those `who` may not see are counted, not named); with `ahead`,
/// also how many jobs are queued before it (one count each: for single jobs).
async fn with_waiting(app: &App, who: &Principal, jobs: &mut [Job], ahead: bool) -> ApiResult<()> {
    if !jobs.iter().any(|j| j.state == "queued") {
        return Ok(());
    }
    let all = agents_now(app, &Principal::Admin).await?;
    let (now, offline) = (now_ms(), offline_after_s(app));
    let owner = match who {
        Principal::Owner { owner } => Some(owner.as_str()),
        _ => None,
    };
    let machines: Vec<crate::waiting::PoolMachine> = all
        .iter()
        .map(|a| crate::waiting::PoolMachine {
            info: a,
            state: machine_state(a, now, offline),
            visible: owner.is_none_or(|o| o == a.owner),
        })
        .collect();
    for j in jobs.iter_mut().filter(|j| j.state == "queued") {
        let before = if ahead { Some(crate::job_view::queued_before(&app.db, j.id).await?) } else { None };
        j.waiting = crate::waiting::explain(j, &machines, before);
    }
    Ok(())
}

/// A machine's state for the pool overview: its last reported policy state, `offline`
/// when silent for longer than `offline_after_s`, `never_seen` before its first heartbeat.
fn machine_state(a: &AgentInfo, now_ms: i64, offline_after_s: u32) -> String {
    match (&a.heartbeat, a.last_seen_ms) {
        (Some(hb), Some(t)) if now_ms - t <= offline_after_s as i64 * 1000 => hb.state.clone(),
        (_, Some(_)) => "offline".to_string(),
        _ => "never_seen".to_string(),
    }
}

#[utoipa::path(get, path = "/api/v1/pool", security(("bearer" = [])),
    responses((status = 200, body = PoolSummary), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)))]
async fn pool(State(app): State<Arc<App>>, Auth(p): Auth) -> ApiResult<Json<PoolSummary>> {
    need_person(&p)?;
    let now = now_ms();
    let offline_after_s = offline_after_s(&app);
    let list = agents_now(&app, &p).await?;
    let mut machines = std::collections::BTreeMap::new();
    for a in &list {
        *machines.entry(machine_state(a, now, offline_after_s)).or_insert(0) += 1;
    }
    let jobs: std::collections::BTreeMap<String, u32> = crate::job_view::job_counts(&app.db, &p).await?.into_iter().collect();
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

#[utoipa::path(post, path = "/api/v1/jobs", request_body = SubmitJob, security(("bearer" = [])),
    responses((status = 200, body = Job), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)))]
async fn submit(State(app): State<Arc<App>>, Auth(p): Auth, Body(req): Body<SubmitJob>) -> ApiResult<Json<Job>> {
    need_person(&p)?;
    let mut job = store::submit(&app.db, &p, &req).await?;
    app.scheduling.send(Msg::Job { job: job.id, ended: None });
    with_waiting(&app, &p, std::slice::from_mut(&mut job), true).await?;
    tracing::info!(job = job.id, submitter = %job.submitter, program = %job.program, machines = job.machines, "job submitted");
    Ok(Json(job))
}

/// Job list filters.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
pub struct JobFilter {
    /// Only jobs in this state.
    pub state: Option<String>,
    /// At most this many (default 100, at most 10000).
    pub limit: Option<u32>,
}

fn query<T: serde::de::DeserializeOwned>(q: Result<Query<T>, axum::extract::rejection::QueryRejection>) -> ApiResult<T> {
    q.map(|Query(v)| v).map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, e.body_text()))
}

#[utoipa::path(get, path = "/api/v1/jobs", params(JobFilter), security(("bearer" = [])),
    responses((status = 200, body = [Job]), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)))]
async fn list_jobs(
    State(app): State<Arc<App>>,
    Auth(p): Auth,
    q: Result<Query<JobFilter>, axum::extract::rejection::QueryRejection>,
) -> ApiResult<Json<Vec<Job>>> {
    need_person(&p)?;
    let f = query(q)?;
    if let Some(s) = &f.state {
        store::check_text("state", s, 1, 16)?;
    }
    let mut jobs = crate::job_view::list_jobs(&app.db, &p, f.state.as_deref(), f.limit.unwrap_or(100)).await?;
    with_waiting(&app, &p, &mut jobs, false).await?;
    Ok(Json(jobs))
}

pub(crate) fn path<T>(p: Result<Path<T>, axum::extract::rejection::PathRejection>) -> ApiResult<T> {
    p.map(|Path(v)| v).map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, e.body_text()))
}

type JobPath = Result<Path<i64>, axum::extract::rejection::PathRejection>;
type TaskPath = Result<Path<(i64, i64)>, axum::extract::rejection::PathRejection>;

#[utoipa::path(get, path = "/api/v1/jobs/{id}", params(("id" = i64, Path)), security(("bearer" = [])),
    responses((status = 200, body = Job), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)))]
async fn get_job(State(app): State<Arc<App>>, Auth(p): Auth, id: JobPath) -> ApiResult<Json<Job>> {
    need_person(&p)?;
    let mut job = crate::job_view::get_job(&app.db, &p, path(id)?).await?;
    with_waiting(&app, &p, std::slice::from_mut(&mut job), true).await?;
    Ok(Json(job))
}

#[utoipa::path(get, path = "/api/v1/jobs/{id}/output", params(("id" = i64, Path)), security(("bearer" = [])),
    responses((status = 200, body = JobOutput), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)))]
async fn job_output(State(app): State<Arc<App>>, Auth(p): Auth, id: JobPath) -> ApiResult<Json<JobOutput>> {
    need_person(&p)?;
    Ok(Json(crate::job_view::job_output(&app.db, &p, path(id)?).await?))
}

#[utoipa::path(post, path = "/api/v1/jobs/{id}/cancel", params(("id" = i64, Path)), security(("bearer" = [])),
    responses((status = 200, body = Job, description = "the job, cancelled (or as it ended, when it had already ended)"), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody, description = "visible (it ran on the caller's machine) but submitted by someone else"),
        (status = 404, body = ErrorBody)))]
async fn cancel(State(app): State<Arc<App>>, Auth(p): Auth, id: JobPath) -> ApiResult<Json<Job>> {
    need_person(&p)?;
    let job = store::cancel(&app.db, &p, path(id)?).await?;
    app.scheduling.send(Msg::Job { job: job.id, ended: None });
    Ok(Json(job))
}

#[utoipa::path(get, path = "/api/v1/predictions", security(("bearer" = [])),
    responses((status = 200, body = [ProgramPrediction]), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)))]
async fn predictions(State(app): State<Arc<App>>, Auth(p): Auth) -> ApiResult<Json<Vec<ProgramPrediction>>> {
    need_person(&p)?;
    let stats = crate::scheduling::sql::program_stats(&app.db).await?;
    Ok(Json(stats.into_iter().map(ProgramPrediction::from).collect()))
}

#[utoipa::path(post, path = "/api/v1/lease", request_body = LeaseRequest, security(("bearer" = [])),
    responses((status = 200, body = Lease), (status = 204, description = "no work within wait_ms"), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)))]
async fn lease(State(app): State<Arc<App>>, Auth(p): Auth, Body(req): Body<LeaseRequest>) -> ApiResult<Response> {
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
async fn take(app: &App, agent: &str) -> ApiResult<Option<Lease>> {
    let l = app.scheduling.deliveries.take(app, agent).await?;
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
async fn progress(State(app): State<Arc<App>>, Auth(p): Auth, t: TaskPath, Body(req): Body<Progress>) -> ApiResult<Json<ProgressAck>> {
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
async fn complete(State(app): State<Arc<App>>, Auth(p): Auth, t: TaskPath, Body(req): Body<Completion>) -> ApiResult<Json<CompletionAck>> {
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

async fn release(app: &App, p: &Principal, t: TaskPath, req: TaskRelease, evicted: bool) -> ApiResult<Json<Task>> {
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
async fn fail(State(app): State<Arc<App>>, Auth(p): Auth, t: TaskPath, Body(req): Body<TaskRelease>) -> ApiResult<Json<Task>> {
    release(&app, &p, t, req, false).await
}

#[utoipa::path(post, path = "/api/v1/tasks/{job}/{rank}/evicted", request_body = TaskRelease, params(("job" = i64, Path), ("rank" = i64, Path)),
    security(("bearer" = [])), responses((status = 200, body = Task), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)))]
async fn evicted(State(app): State<Arc<App>>, Auth(p): Auth, t: TaskPath, Body(req): Body<TaskRelease>) -> ApiResult<Json<Task>> {
    release(&app, &p, t, req, true).await
}

#[utoipa::path(post, path = "/api/v1/give-back", security(("bearer" = [])),
    responses((status = 200, body = GivenBack, description = "an agent that just started, or is stopping, runs no guest: the tasks it held went back to the queue (no retry used, not an eviction)"),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)))]
async fn give_back(State(app): State<Arc<App>>, Auth(p): Auth) -> ApiResult<Json<GivenBack>> {
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
async fn gang(State(app): State<Arc<App>>, Auth(p): Auth, t: TaskPath) -> ApiResult<Json<Gang>> {
    let agent = need_agent(&p)?;
    let (job, rank) = path(t)?;
    Ok(Json(store::gang(&app.db, agent, job, rank).await?))
}

#[utoipa::path(post, path = "/api/v1/tasks/{job}/{rank}/migrate", request_body = MigrateRequest, params(("job" = i64, Path), ("rank" = i64, Path)),
    security(("bearer" = [])), responses((status = 200, body = MigrateAnswer, description = "the decision; with `migrate` the task was given back: stop the guest"),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)))]
async fn migrate(
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
async fn put_checkpoint(
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
async fn get_checkpoint(State(app): State<Arc<App>>, Auth(p): Auth, t: TaskPath) -> ApiResult<Response> {
    let agent = need_agent(&p)?;
    let (job, rank) = path(t)?;
    let data = store::get_checkpoint(&app.db, agent, job, rank).await?;
    Ok(([(header::CONTENT_TYPE, "application/octet-stream")], data).into_response())
}

#[utoipa::path(post, path = "/api/v1/records", request_body = RecordBatch, security(("bearer" = [])),
    responses((status = 200, body = RecordsAck), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)))]
async fn records(State(app): State<Arc<App>>, Auth(p): Auth, Body(batch): Body<RecordBatch>) -> ApiResult<Json<RecordsAck>> {
    let agent = need_agent(&p)?;
    let facts = store::machine_facts(&app.db, agent, app.live.cpus(agent)).await?;
    let ack = store::ingest(&app.db, agent, &facts, &batch).await?;
    app.metrics.records_stored.fetch_add(ack.stored as u64, Ordering::Relaxed);
    Ok(Json(ack))
}

/// Report parameters.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
pub struct ReportParams {
    /// `owner` (default) or `machine`.
    pub by: Option<String>,
    /// `7d` (default), `2w`, `24h` or a first day `YYYY-MM-DD`.
    pub since: Option<String>,
    /// `day` (default) or `week`.
    pub period: Option<String>,
    /// Only this owner's machines (owners may only name themselves).
    pub owner: Option<String>,
    /// `json` (default) or `csv`.
    pub format: Option<String>,
}

#[utoipa::path(get, path = "/api/v1/reports", params(ReportParams), security(("bearer" = [])),
    responses((status = 200, body = Report), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)))]
async fn reports(
    State(app): State<Arc<App>>,
    Auth(p): Auth,
    q: Result<Query<ReportParams>, axum::extract::rejection::QueryRejection>,
) -> ApiResult<Response> {
    let q = query(q)?;
    let bad = |m: &str| ApiError::new(StatusCode::BAD_REQUEST, m.into());
    let by = match q.by.as_deref().unwrap_or("owner") {
        "owner" => By::Owner,
        "machine" => By::Machine,
        _ => return Err(bad("by must be owner or machine")),
    };
    let period = match q.period.as_deref().unwrap_or("day") {
        "day" => Period::Day,
        "week" => Period::Week,
        _ => return Err(bad("period must be day or week")),
    };
    let today = chrono::Utc::now().date_naive();
    let since = report::parse_since(q.since.as_deref().unwrap_or("7d"), today).map_err(|e| bad(&e))?;
    if let Some(o) = &q.owner {
        store::check_text("owner", o, 1, 128)?;
    }
    let csv = match q.format.as_deref().unwrap_or("json") {
        "json" => false,
        "csv" => true,
        _ => return Err(bad("format must be json or csv")),
    };
    let r = report::report(&app.db, &p, &ReportQuery { by, period, since, owner: q.owner }).await?;
    Ok(if csv {
        ([(header::CONTENT_TYPE, "text/csv; charset=utf-8")], report::to_csv(&r)).into_response()
    } else {
        Json(r).into_response()
    })
}

struct Security;

impl utoipa::Modify for Security {
    fn modify(&self, doc: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
        let c = doc.components.get_or_insert_with(Default::default);
        c.add_security_scheme("bearer", SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()));
        // Every operation may answer these (authentication, role, a malformed, oversized
        // or mistyped request, an unknown resource), always with an `ErrorBody`.
        use utoipa::openapi::{ContentBuilder, Ref, RefOr, ResponseBuilder};
        let generic = [
            ("400", "malformed request"),
            ("401", "missing or unknown credential"),
            ("403", "not allowed for this role"),
            ("404", "no such resource"),
            ("405", "method not allowed"),
            ("409", "the lease is not held"),
            ("413", "body too large"),
            ("415", "body is not JSON"),
            ("422", "body does not match the schema"),
            ("503", "database unavailable"),
        ];
        for item in doc.paths.paths.values_mut() {
            for op in [&mut item.get, &mut item.put, &mut item.post, &mut item.delete].into_iter().flatten() {
                for (code, what) in generic {
                    op.responses.responses.entry(code.to_string()).or_insert_with(|| {
                        RefOr::T(
                            ResponseBuilder::new()
                                .description(what)
                                .content("application/json", ContentBuilder::new().schema(Some(Ref::from_schema_name("ErrorBody"))).build())
                                .build(),
                        )
                    });
                }
            }
        }
    }
}

/// The OpenAPI document.
#[derive(OpenApi)]
#[openapi(
    info(title = "Lull coordinator", description = "Enrolment, jobs and leases, donated-time reports.

Limits (refused with 413 `too_large` or 400 naming the field; `lull_protocol::limits`): a JSON request body 1 MiB; a checkpoint \
64 MiB; a job's command 4 KiB, 1024 args of 64 KiB, 256 env variables and 64 input files (names 256 B, values and files 256 KiB), \
the spec as stored 1 MiB; an output tail 64 KiB per stream; 1000 records a batch, 64 KiB a payload.

What an agent claims is checked against what its machine could have done: a day's donated CPU-seconds at most its CPUs (stated at \
enrolment and in heartbeats, at most 8192) times the time that day can have lasted for it since it joined (at most 26 h); wall and \
linger time at most 64 guests × that; at most 100 interruptions a day; no day not yet begun, no time in the future; a completion's \
CPU time at most its CPUs times its lease's age. Refusals: 400 `record_out_of_range` naming the record, field and range. \
401 answers carry a `code`: `credential_replaced`, `machine_removed`, `key_revoked`, `credential_unknown`, `credential_missing`."),
    paths(crate::api_identity::create_key, crate::api_identity::list_keys, crate::api_identity::revoke_key,
        crate::api_identity::create_join_token, crate::api_identity::list_tokens, crate::api_identity::revoke_token,
        crate::api_identity::enrol, heartbeat, agents, remove_agent, pool, submit, list_jobs, get_job, job_output, cancel, predictions, lease, progress, complete, fail, evicted,
        give_back, gang, migrate, put_checkpoint, get_checkpoint, records, reports, crate::api_recruit::recruit, crate::api_recruit::group, crate::api_recruit::release),
    components(schemas(ErrorBody, CreateJoinToken, JoinToken, JoinTokenInfo, TokenUse, CreateKey, ApiKey, ApiKeyInfo, KeyUse, EnrolRequest, Enrolment, Heartbeat, HeartbeatAck, MemoryReport, GuestMemory, SubmitJob,
        JobSpec, Job, Task, LeaseRequest, Lease, Progress, ProgressAck, Completion, CompletionAck, TaskRelease, Gang, Record, RecordBatch,
        RecordsAck, AgentInfo, ReportRow, Report, Viewer, PoolSummary, Output, JobOutput, TaskOutput, MachineRemoved, Placement, ProgramPrediction,
        MigrateRequest, MigrateAnswer, TaskOutcome, Waiting, GivenBack,
        lull_protocol::LoadReading, crate::scheduling::recruiting::RecruitRequest, crate::scheduling::recruiting::RecruitGrant,
        crate::scheduling::recruiting::RecruitedMachine, crate::scheduling::recruiting::RecruitGroup)),
    modifiers(&Security)
)]
pub struct ApiDoc;

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
