//! What every route shares: the error answer ([`ApiError`], from a [`StoreError`] too),
//! the extractors (a JSON [`Body`] whose every rejection is a 4xx, the bearer-secret
//! [`Auth`], [`MaybeAuth`], the caller's [`PeerIp`]), path and query parsing, and the role
//! checks.

use crate::app::App;
use crate::auth::{digest, hash_secret, kind_of, Principal};
use crate::model::ErrorBody;
use crate::store::{now_ms, StoreError};
use axum::extract::{FromRequest, FromRequestParts, Path, Query, Request};
use axum::http::{header, request::Parts, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use std::sync::Arc;

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

/// What a handler answers: its body, or the error as JSON with its status.
pub(crate) type ApiResult<T> = Result<T, ApiError>;

/// The 413 for a body over `limit` bytes, naming the limit.
pub(crate) fn too_large(what: &str, limit: usize) -> ApiError {
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

pub(crate) fn need_agent(p: &Principal) -> ApiResult<&str> {
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

pub(crate) fn query<T: serde::de::DeserializeOwned>(q: Result<Query<T>, axum::extract::rejection::QueryRejection>) -> ApiResult<T> {
    q.map(|Query(v)| v).map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, e.body_text()))
}

pub(crate) fn path<T>(p: Result<Path<T>, axum::extract::rejection::PathRejection>) -> ApiResult<T> {
    p.map(|Path(v)| v).map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, e.body_text()))
}

pub(crate) type JobPath = Result<Path<i64>, axum::extract::rejection::PathRejection>;
pub(crate) type TaskPath = Result<Path<(i64, i64)>, axum::extract::rejection::PathRejection>;
