//! The identity routes: enrolment (`POST /api/v1/enrol`), and, for the admin, API keys
//! and join tokens — create, list (with each use's time and address, never a secret),
//! revoke (`DELETE …/{id}`). The logic is [`crate::identity`]'s; these are its HTTP faces.

use super::extract::{need_admin, path, ApiResult, Auth, Body, MaybeAuth, PeerIp};
use crate::app::App;
use crate::identity::{self, Caller};
use crate::model::*;
use crate::store::StoreError;
use axum::extract::{Path, State};
use axum::Json;
use std::sync::Arc;

type IdPath = Result<Path<String>, axum::extract::rejection::PathRejection>;

#[utoipa::path(post, tag = "crate::api_identity", path = "/api/v1/enrol", request_body = EnrolRequest, security((), ("bearer" = [])),
    description = "Enrols a machine. A new machine needs a join token. Replacing an enrolled one (`replace`) needs that machine's \
        current credential or an admin key as the bearer (403 `replace_needs_credential` with a token alone); its old credential \
        then answers 401 `credential_replaced`.",
    responses((status = 200, body = Enrolment), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 409, body = ErrorBody)))]
pub(crate) async fn enrol(
    State(app): State<Arc<App>>,
    MaybeAuth(p): MaybeAuth,
    PeerIp(addr): PeerIp,
    Body(req): Body<EnrolRequest>,
) -> ApiResult<Json<Enrolment>> {
    let caller = Caller { principal: p.as_deref(), addr: &addr };
    let e = match identity::enrol(&app.db, &req, caller).await {
        Ok(e) => e,
        Err(e) => {
            if matches!(e, StoreError::Refused { .. }) {
                tracing::warn!(owner = %req.owner, machine = %req.machine, %addr, error = %e, "enrolment refused");
            }
            return Err(e.into());
        }
    };
    if req.replace {
        app.live.forget_creds();
    } else {
        app.live.forget_enrolled();
    }
    tracing::info!(agent = %e.agent_id, owner = %req.owner, machine = %req.machine, replace = req.replace, %addr, "agent enrolled");
    Ok(Json(e))
}

#[utoipa::path(post, tag = "crate::api_identity", path = "/api/v1/keys", request_body = CreateKey, security(("bearer" = [])),
    responses((status = 200, body = ApiKey), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)))]
pub(crate) async fn create_key(State(app): State<Arc<App>>, Auth(p): Auth, Body(req): Body<CreateKey>) -> ApiResult<Json<ApiKey>> {
    need_admin(&p)?;
    Ok(Json(identity::create_key(&app.db, &req.role, req.owner.as_deref()).await?))
}

#[utoipa::path(get, tag = "crate::api_identity", path = "/api/v1/keys", security(("bearer" = [])), description = "Every API key with its uses per address; never a key.",
    responses((status = 200, body = [ApiKeyInfo]), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)))]
pub(crate) async fn list_keys(State(app): State<Arc<App>>, Auth(p): Auth) -> ApiResult<Json<Vec<ApiKeyInfo>>> {
    need_admin(&p)?;
    flush_uses(&app).await;
    Ok(Json(identity::list_keys(&app.db).await?))
}

#[utoipa::path(delete, tag = "crate::api_identity", path = "/api/v1/keys/{id}", params(("id" = String, Path, description = "the id a list shows")), security(("bearer" = [])),
    description = "Revokes an API key (409 for the last admin key).",
    responses((status = 200, body = ApiKeyInfo), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)))]
pub(crate) async fn revoke_key(
    State(app): State<Arc<App>>,
    Auth(p): Auth,
    PeerIp(addr): PeerIp,
    id: IdPath,
) -> ApiResult<Json<ApiKeyInfo>> {
    need_admin(&p)?;
    let k = identity::revoke_key(&app.db, &path(id)?).await?;
    app.live.forget_creds();
    tracing::info!(key = %k.id, role = %k.role, %addr, "API key revoked");
    Ok(Json(k))
}

#[utoipa::path(post, tag = "crate::api_identity", path = "/api/v1/join-tokens", request_body = CreateJoinToken, security(("bearer" = [])),
    responses((status = 200, body = JoinToken), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)))]
pub(crate) async fn create_join_token(
    State(app): State<Arc<App>>,
    Auth(p): Auth,
    Body(req): Body<CreateJoinToken>,
) -> ApiResult<Json<JoinToken>> {
    need_admin(&p)?;
    Ok(Json(identity::create_join_token(&app.db, &req).await?))
}

#[utoipa::path(get, tag = "crate::api_identity", path = "/api/v1/join-tokens", security(("bearer" = [])),
    description = "Every join token with each use (time, address, outcome); never a token.",
    responses((status = 200, body = [JoinTokenInfo]), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)))]
pub(crate) async fn list_tokens(State(app): State<Arc<App>>, Auth(p): Auth) -> ApiResult<Json<Vec<JoinTokenInfo>>> {
    need_admin(&p)?;
    Ok(Json(identity::list_tokens(&app.db).await?))
}

#[utoipa::path(delete, tag = "crate::api_identity", path = "/api/v1/join-tokens/{id}", params(("id" = String, Path, description = "the id a list shows")), security(("bearer" = [])),
    description = "Revokes a join token: it enrols no one from now on.",
    responses((status = 200, body = JoinTokenInfo), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)))]
pub(crate) async fn revoke_token(
    State(app): State<Arc<App>>,
    Auth(p): Auth,
    PeerIp(addr): PeerIp,
    id: IdPath,
) -> ApiResult<Json<JoinTokenInfo>> {
    need_admin(&p)?;
    let t = identity::revoke_token(&app.db, &path(id)?).await?;
    tracing::info!(token = %t.id, %addr, "join token revoked");
    Ok(Json(t))
}

/// Writes this replica's pending key uses, so a list includes the request that asks.
async fn flush_uses(app: &App) {
    app.flush_key_uses().await;
}
