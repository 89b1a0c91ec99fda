//! The instant-recruitment routes (seed 003): `POST /api/v1/recruit` (up to K machines
//! predicted idle for S seconds, answered at once), `GET /api/v1/recruit/{group}` (the
//! group's job once written) and `POST /api/v1/recruit/{group}/release`. The logic is
//! [`crate::scheduling::recruiting`]'s; these are its HTTP faces.

use super::extract::{need_person, path, ApiError, Auth, Body};
use crate::app::App;
use crate::hub::recruiting::{RecruitError, RecruitGrant, RecruitGroup, RecruitRequest};
use crate::model::ErrorBody;
use crate::scheduling::recruiting;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use std::sync::Arc;

type GroupPath = Result<Path<String>, axum::extract::rejection::PathRejection>;

fn group_id(g: GroupPath) -> Result<String, ApiError> {
    let id = path(g)?;
    crate::store::check_text("group", &id, 1, 64)?;
    Ok(id)
}

#[utoipa::path(post, tag = "crate::api_recruit", path = "/api/v1/recruit", request_body = RecruitRequest, security(("bearer" = [])),
    responses((status = 200, body = RecruitGrant), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 503, body = ErrorBody)))]
pub(crate) async fn recruit(
    State(app): State<Arc<App>>,
    Auth(p): Auth,
    Body(req): Body<RecruitRequest>,
) -> Result<Json<RecruitGrant>, ApiError> {
    need_person(&p)?;
    Ok(Json(recruiting::recruit(&app, &p, req)?))
}

#[utoipa::path(get, tag = "crate::api_recruit", path = "/api/v1/recruit/{group}", params(("group" = String, Path)), security(("bearer" = [])),
    responses((status = 200, body = RecruitGroup), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub(crate) async fn group(State(app): State<Arc<App>>, Auth(p): Auth, g: GroupPath) -> Result<Json<RecruitGroup>, ApiError> {
    need_person(&p)?;
    Ok(Json(app.scheduling.recruiting.group(&p, &group_id(g)?)?))
}

#[utoipa::path(post, tag = "crate::api_recruit", path = "/api/v1/recruit/{group}/release", params(("group" = String, Path)), security(("bearer" = [])),
    responses((status = 200, body = RecruitGroup), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub(crate) async fn release(State(app): State<Arc<App>>, Auth(p): Auth, g: GroupPath) -> Result<Json<RecruitGroup>, ApiError> {
    need_person(&p)?;
    let id = group_id(g)?;
    Ok(Json(recruiting::release(&app, &p, &id).await?))
}

/// A [`RecruitError`] as an API answer.
impl From<RecruitError> for ApiError {
    fn from(e: RecruitError) -> Self {
        let status = match e {
            RecruitError::Invalid(_) => StatusCode::BAD_REQUEST,
            RecruitError::NotLeading => StatusCode::SERVICE_UNAVAILABLE,
            RecruitError::NotFound => StatusCode::NOT_FOUND,
            RecruitError::Store(e) => return e.into(),
        };
        ApiError::new(status, e.to_string())
    }
}
