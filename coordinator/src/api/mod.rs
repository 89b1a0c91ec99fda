//! The HTTP API (axum): the router, the body-limit and metrics/logging middleware, and
//! the OpenAPI document (utoipa) served at `/api/openapi.json`. The routes live by
//! concern in the submodules; what they share (errors, extractors, role checks) in
//! [`extract`]; the dashboard's page and files at `/` in [`dashboard`].

mod agents;
pub mod dashboard;
pub(crate) mod extract;
mod identity;
mod jobs;
mod recruit;
mod reports;
mod tasks;

pub use extract::{ApiError, Auth, Body, MaybeAuth, PeerIp, CHECKPOINT_LIMIT, JSON_LIMIT};
pub use jobs::JobFilter;
pub use reports::ReportParams;

use crate::app::App;
use crate::auth::digest;
use crate::model::*;
// The route handlers (these and the jobs, reports and tasks ones below) come in by name,
// with utoipa's `__path_` companions, so that the document lists them as before the
// split: untagged (a module path in `paths(…)` would become a tag).
use agents::{__path_agents, __path_heartbeat, __path_pool, __path_remove_agent, agents, heartbeat, pool, remove_agent};
use axum::extract::{DefaultBodyLimit, MatchedPath, Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use axum::{Json, Router};
use extract::too_large;
use jobs::{
    __path_cancel, __path_get_job, __path_job_output, __path_list_jobs, __path_predictions, __path_submit, cancel, get_job, job_output,
    list_jobs, predictions, submit,
};
use reports::{__path_records, __path_reports, records, reports};
use std::sync::Arc;
use std::time::Instant;
use tasks::{
    __path_complete, __path_evicted, __path_fail, __path_gang, __path_get_checkpoint, __path_give_back, __path_lease, __path_migrate,
    __path_progress, __path_put_checkpoint, complete, evicted, fail, gang, get_checkpoint, give_back, lease, migrate, progress,
    put_checkpoint,
};
use utoipa::OpenApi;

/// The router with its state.
pub fn router(app: Arc<App>) -> Router {
    let api = Router::new()
        .route("/api/v1/keys", post(identity::create_key).get(identity::list_keys))
        .route("/api/v1/keys/{id}", delete(identity::revoke_key))
        .route("/api/v1/join-tokens", post(identity::create_join_token).get(identity::list_tokens))
        .route("/api/v1/join-tokens/{id}", delete(identity::revoke_token))
        .route("/api/v1/enrol", post(identity::enrol))
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
        .route("/api/v1/recruit", post(recruit::recruit))
        .route("/api/v1/recruit/{group}", get(recruit::group))
        .route("/api/v1/recruit/{group}/release", post(recruit::release))
        .layer(DefaultBodyLimit::max(JSON_LIMIT))
        .layer(axum::middleware::from_fn(declared_limit::<JSON_LIMIT>));
    let checkpoints = Router::new()
        .route("/api/v1/tasks/{job}/{rank}/checkpoint", get(get_checkpoint).put(put_checkpoint))
        .layer(DefaultBodyLimit::max(CHECKPOINT_LIMIT))
        .layer(axum::middleware::from_fn(declared_checkpoint_limit));
    Router::new()
        .route("/", get(dashboard::index))
        .route("/assets/{*path}", get(dashboard::asset))
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
    paths(identity::create_key, identity::list_keys, identity::revoke_key,
        identity::create_join_token, identity::list_tokens, identity::revoke_token,
        identity::enrol, heartbeat, agents, remove_agent, pool, submit, list_jobs, get_job, job_output, cancel, predictions, lease, progress, complete, fail, evicted,
        give_back, gang, migrate, put_checkpoint, get_checkpoint, records, reports, recruit::recruit, recruit::group, recruit::release),
    components(schemas(ErrorBody, CreateJoinToken, JoinToken, JoinTokenInfo, TokenUse, CreateKey, ApiKey, ApiKeyInfo, KeyUse, EnrolRequest, Enrolment, Heartbeat, HeartbeatAck, MemoryReport, GuestMemory, SubmitJob,
        JobSpec, Job, Task, LeaseRequest, Lease, Progress, ProgressAck, Completion, CompletionAck, TaskRelease, Gang, Record, RecordBatch,
        RecordsAck, AgentInfo, ReportRow, Report, Viewer, PoolSummary, Output, JobOutput, TaskOutput, MachineRemoved, Placement, ProgramPrediction,
        MigrateRequest, MigrateAnswer, TaskOutcome, Waiting, GivenBack,
        lull_protocol::LoadReading, crate::hub::recruiting::RecruitRequest, crate::hub::recruiting::RecruitGrant,
        crate::hub::recruiting::RecruitedMachine, crate::hub::recruiting::RecruitGroup)),
    modifiers(&Security)
)]
pub struct ApiDoc;
