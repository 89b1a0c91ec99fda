//! The job routes people use: submit, list (each queued job with why it waits), one
//! job, its output, cancel, and the runtime predictions.

use super::agents::{machine_state, offline_after_s, pool_now};
use super::extract::{need_person, path, query, ApiResult, Auth, Body, JobPath};
use crate::app::App;
use crate::auth::Principal;
use crate::hub::Msg;
use crate::model::*;
use crate::store::{self, now_ms};
use axum::extract::{Query, State};
use axum::Json;
use serde::Deserialize;
use std::sync::Arc;

/// Says why each queued job of `jobs` waits ([`crate::waiting`]), from every enrolled
/// machine as it is now (those `who` may not see are counted, not named); with `ahead`,
/// also how many jobs are queued before it (one count each: for single jobs).
pub(crate) async fn with_waiting(app: &App, who: &Principal, jobs: &mut [Job], ahead: bool) -> ApiResult<()> {
    if !jobs.iter().any(|j| j.state == "queued") {
        return Ok(());
    }
    let all = pool_now(app).await?;
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
        let before = if ahead { Some(crate::store::job_view::queued_before(&app.db, j.id).await?) } else { None };
        j.waiting = crate::waiting::explain(j, &machines, before);
    }
    Ok(())
}

#[utoipa::path(post, path = "/api/v1/jobs", request_body = SubmitJob, security(("bearer" = [])),
    responses((status = 200, body = Job), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)))]
pub(crate) async fn submit(State(app): State<Arc<App>>, Auth(p): Auth, Body(req): Body<SubmitJob>) -> ApiResult<Json<Job>> {
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

#[utoipa::path(get, path = "/api/v1/jobs", params(JobFilter), security(("bearer" = [])),
    responses((status = 200, body = [Job]), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)))]
pub(crate) async fn list_jobs(
    State(app): State<Arc<App>>,
    Auth(p): Auth,
    q: Result<Query<JobFilter>, axum::extract::rejection::QueryRejection>,
) -> ApiResult<Json<Vec<Job>>> {
    need_person(&p)?;
    let f = query(q)?;
    if let Some(s) = &f.state {
        store::check_text("state", s, 1, 16)?;
    }
    let mut jobs = crate::store::job_view::list_jobs(&app.db, &p, f.state.as_deref(), f.limit.unwrap_or(100)).await?;
    with_waiting(&app, &p, &mut jobs, false).await?;
    Ok(Json(jobs))
}

#[utoipa::path(get, path = "/api/v1/jobs/{id}", params(("id" = i64, Path)), security(("bearer" = [])),
    responses((status = 200, body = Job), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub(crate) async fn get_job(State(app): State<Arc<App>>, Auth(p): Auth, id: JobPath) -> ApiResult<Json<Job>> {
    need_person(&p)?;
    let mut job = crate::store::job_view::get_job(&app.db, &p, path(id)?).await?;
    with_waiting(&app, &p, std::slice::from_mut(&mut job), true).await?;
    Ok(Json(job))
}

#[utoipa::path(get, path = "/api/v1/jobs/{id}/output", params(("id" = i64, Path)), security(("bearer" = [])),
    responses((status = 200, body = JobOutput), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub(crate) async fn job_output(State(app): State<Arc<App>>, Auth(p): Auth, id: JobPath) -> ApiResult<Json<JobOutput>> {
    need_person(&p)?;
    Ok(Json(crate::store::job_view::job_output(&app.db, &p, path(id)?).await?))
}

#[utoipa::path(post, path = "/api/v1/jobs/{id}/cancel", params(("id" = i64, Path)), security(("bearer" = [])),
    responses((status = 200, body = Job, description = "the job, cancelled (or as it ended, when it had already ended)"), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody, description = "visible (it ran on the caller's machine) but submitted by someone else"),
        (status = 404, body = ErrorBody)))]
pub(crate) async fn cancel(State(app): State<Arc<App>>, Auth(p): Auth, id: JobPath) -> ApiResult<Json<Job>> {
    need_person(&p)?;
    let job = store::cancel(&app.db, &p, path(id)?).await?;
    app.scheduling.send(Msg::Job { job: job.id, ended: None });
    Ok(Json(job))
}

#[utoipa::path(get, path = "/api/v1/predictions", security(("bearer" = [])),
    responses((status = 200, body = [ProgramPrediction]), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)))]
pub(crate) async fn predictions(State(app): State<Arc<App>>, Auth(p): Auth) -> ApiResult<Json<Vec<ProgramPrediction>>> {
    need_person(&p)?;
    let stats = crate::scheduling::sql::program_stats(&app.db).await?;
    Ok(Json(stats.into_iter().map(ProgramPrediction::from).collect()))
}
