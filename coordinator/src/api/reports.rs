//! The accounting routes: an agent's ledger records in, donated-time reports out (JSON
//! or CSV).

use super::extract::{need_agent, query, ApiError, ApiResult, Auth, Body};
use crate::app::App;
use crate::model::*;
use crate::report::{self, By, Period, ReportQuery};
use crate::store;
use axum::extract::{Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use std::sync::atomic::Ordering;
use std::sync::Arc;

#[utoipa::path(post, path = "/api/v1/records", request_body = RecordBatch, security(("bearer" = [])),
    responses((status = 200, body = RecordsAck), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)))]
pub(crate) async fn records(State(app): State<Arc<App>>, Auth(p): Auth, Body(batch): Body<RecordBatch>) -> ApiResult<Json<RecordsAck>> {
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
pub(crate) async fn reports(
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
