//! Identity: API keys and join tokens (minted, listed with their uses, revoked), the
//! enrolment of machines, and the look-up of a secret — who holds it, or, for one that
//! stopped working, why.
//!
//! The rules: a join token enrols a *new* machine only. Taking the place of an enrolled
//! machine (`replace`) needs that machine's current credential or an admin key; the old
//! secret is then kept (as a hash) among the retired ones, so the agent still holding it
//! is answered `credential_replaced` instead of "unknown". Every use of a token — an
//! enrolment, or a refused attempt — is kept with its time and address; API keys' uses
//! are counted per address in memory and written with the heartbeat flush
//! ([`flush_key_uses`]). Lists show an id (the first 12 hex digits of the secret's
//! SHA-256), never a secret.

use crate::auth::{hash_secret, new_secret, random_hex, Principal, SecretKind};
use crate::db::{col, Db, Dialect};
use crate::model::*;
use crate::store::common::{check_text, now_ms, placeholders, rows_per_statement, StoreError};
use lull_protocol::error_code;
use std::collections::BTreeMap;

type Result<T> = std::result::Result<T, StoreError>;

/// The id a secret is listed and revoked by: the first 12 hex digits of its SHA-256
/// (48 bits: it names a secret without revealing anything usable of it).
pub fn cred_id(hash: &str) -> String {
    hash.chars().take(ID_LEN).collect()
}

const ID_LEN: usize = 12;

/// Who asks for an enrolment, and from where.
#[derive(Clone, Copy, Debug)]
pub struct Caller<'a> {
    /// The credential the request carried, if any.
    pub principal: Option<&'a Principal>,
    /// The peer's address (`IP:port`), or what ran the command (`lull up`).
    pub addr: &'a str,
}

/// Creates an admin or owner API key; returns the secret (shown once) and its id.
pub async fn create_key(db: &Db, role: &str, owner: Option<&str>) -> Result<ApiKey> {
    let (kind, owner) = match (role, owner) {
        ("admin", None) => (SecretKind::Admin, None),
        ("owner", Some(o)) => {
            check_text("owner", o, 1, 128)?;
            (SecretKind::Owner, Some(o.to_string()))
        }
        ("admin", Some(_)) => return Err(StoreError::Invalid("admin keys have no owner".into())),
        ("owner", None) => return Err(StoreError::Invalid("owner keys need an owner".into())),
        _ => return Err(StoreError::Invalid("role must be admin or owner".into())),
    };
    let key = new_secret(kind);
    let hash = hash_secret(&key);
    sqlx::query("INSERT INTO api_keys(key_hash, role, owner, created_ms) VALUES ($1, $2, $3, $4)")
        .bind(&hash)
        .bind(role)
        .bind(owner.clone())
        .bind(now_ms())
        .execute(&db.pool)
        .await?;
    Ok(ApiKey { id: cred_id(&hash), key, role: role.into(), owner })
}

/// True if an admin key that is not revoked exists.
pub async fn has_admin_key(db: &Db) -> Result<bool> {
    Ok(active_admin_keys(&db.pool).await? > 0)
}

async fn active_admin_keys<'c, E: sqlx::Executor<'c, Database = sqlx::Any>>(ex: E) -> Result<i64> {
    let row = sqlx::query("SELECT COUNT(*) AS n FROM api_keys WHERE role = 'admin' AND revoked_ms IS NULL").fetch_one(ex).await?;
    Ok(col(&row, "n")?)
}

/// Creates a join token.
pub async fn create_join_token(db: &Db, req: &CreateJoinToken) -> Result<JoinToken> {
    let uses = req.uses.unwrap_or(1);
    let ttl_s = req.ttl_s.unwrap_or(7 * 86_400);
    if uses == 0 || uses > 100_000 {
        return Err(StoreError::Invalid("uses must be 1–100000".into()));
    }
    if ttl_s == 0 || ttl_s > 365 * 86_400 {
        return Err(StoreError::Invalid("ttl_s must be 1–31536000".into()));
    }
    let token = new_secret(SecretKind::Join);
    let hash = hash_secret(&token);
    let now = now_ms();
    let expires_ms = now + ttl_s as i64 * 1000;
    sqlx::query("INSERT INTO join_tokens(token_hash, uses_left, uses, expires_ms, created_ms) VALUES ($1, $2, $2, $3, $4)")
        .bind(&hash)
        .bind(uses as i64)
        .bind(expires_ms)
        .bind(now)
        .execute(&db.pool)
        .await?;
    Ok(JoinToken { id: cred_id(&hash), token, uses, expires_ms })
}

/// A refusal with a status and an [`error_code`].
fn refused(status: u16, code: &'static str, message: String) -> StoreError {
    StoreError::Refused { status, code, message }
}

/// Enrols a machine. A new machine (no active machine of the owner's with this name)
/// states its CPUs and spends one use of a join token (an admin needs none). An enrolled one is replaced only
/// with `replace` *and* the caller holding that machine's current credential or an admin
/// key (no token is spent then): its agent id and history stay, its old secret is retired
/// as `replaced`. Every use of a known token is recorded, refused ones too.
pub async fn enrol(db: &Db, req: &EnrolRequest, caller: Caller<'_>) -> Result<Enrolment> {
    check_text("owner", &req.owner, 1, 128)?;
    check_text("machine", &req.machine, 1, 128)?;
    check_text("token", &req.token, 0, 200)?;
    if let Some(c) = req.cpus {
        if !(1..=lull_protocol::limits::CPUS_MAX).contains(&c) {
            return Err(StoreError::Invalid(format!("cpus {c} is not in 1–{}", lull_protocol::limits::CPUS_MAX)));
        }
    }
    let now = now_ms();
    let token_hash = (!req.token.is_empty()).then(|| hash_secret(&req.token));
    let mut tx = db.pool.begin().await?;
    let existing: Option<String> =
        sqlx::query("SELECT id FROM agents WHERE owner = $1 AND name = $2 AND removed_ms IS NULL ORDER BY enrolled_ms DESC, id LIMIT 1")
            .bind(&req.owner)
            .bind(&req.machine)
            .fetch_optional(&mut *tx)
            .await?
            .map(|r| col(&r, "id"))
            .transpose()?;
    let secret = new_secret(SecretKind::Agent);
    let agent_id = match existing {
        Some(id) => {
            // Dropping the transaction rolls it back: nothing is spent or changed.
            if let Err(e) = may_replace(req, caller, &id) {
                drop(tx);
                if let Some(h) = &token_hash {
                    note_token_use(db, h, now, caller.addr, &format!("refused: {}", outcome_of(&e)), req, Some(&id)).await?;
                }
                return Err(e);
            }
            replace_secret(&mut tx, &id, &secret, req.cpus, now, caller.addr).await?;
            id
        }
        None => {
            // What its CPU-seconds will be checked against: a new machine must say.
            if req.cpus.is_none() {
                return Err(StoreError::Invalid(format!(
                    "cpus is missing: a new machine says how many logical CPUs it has (1–{})",
                    lull_protocol::limits::CPUS_MAX
                )));
            }
            let admin = matches!(caller.principal, Some(Principal::Admin));
            match &token_hash {
                Some(h) => spend_token(&mut tx, h, now).await?,
                None if admin => {}
                None => return Err(StoreError::Invalid("token is missing: a new machine enrols with a join token".into())),
            }
            let id = random_hex(16);
            sqlx::query("INSERT INTO agents(id, owner, name, secret_hash, enrolled_ms, cpus) VALUES ($1, $2, $3, $4, $5, $6)")
                .bind(&id)
                .bind(&req.owner)
                .bind(&req.machine)
                .bind(hash_secret(&secret))
                .bind(now)
                .bind(req.cpus.map(i64::from))
                .execute(&mut *tx)
                .await?;
            if let Some(h) = &token_hash {
                insert_token_use(&mut *tx, h, now, caller.addr, "enrolled", req, Some(&id)).await?;
            }
            id
        }
    };
    tx.commit().await?;
    Ok(Enrolment { agent_id, secret })
}

/// Whether `caller` may take the place of the enrolled machine `id` (the error says why
/// not, and what to do instead).
fn may_replace(req: &EnrolRequest, caller: Caller<'_>, id: &str) -> Result<()> {
    let who = format!("{} already has a machine named {:?} (agent {id})", req.owner, req.machine);
    if !req.replace {
        return Err(refused(
            409,
            error_code::MACHINE_EXISTS,
            format!(
                "{who}: enrol again with replace (`lull enrol --replace` on that machine) to take its place and keep its \
                 history, or choose another machine name"
            ),
        ));
    }
    match caller.principal {
        Some(Principal::Admin) => Ok(()),
        Some(Principal::Agent { agent_id, .. }) if agent_id == id => Ok(()),
        _ => Err(refused(
            403,
            error_code::REPLACE_NEEDS_CREDENTIAL,
            format!(
                "{who}: a join token enrols new machines only. Replacing this one needs its current credential \
                 (`lull enrol --replace` on that machine sends it) or an admin key; if its credential is lost, the pool \
                 admin removes it (`lull coordinator machine rm {}`) and it enrols anew",
                req.machine
            ),
        )),
    }
}

fn outcome_of(e: &StoreError) -> String {
    match e {
        StoreError::Refused { code, .. } => (*code).to_string(),
        other => other.to_string(),
    }
}

/// Gives machine `id` a new secret, retiring its old one as `replaced`.
async fn replace_secret(tx: &mut sqlx::AnyConnection, id: &str, secret: &str, cpus: Option<u32>, now: i64, addr: &str) -> Result<()> {
    sqlx::query(
        "INSERT INTO retired_secrets(secret_hash, agent_id, reason, at_ms, addr)
         SELECT secret_hash, id, 'replaced', $2, $3 FROM agents WHERE id = $1 ON CONFLICT DO NOTHING",
    )
    .bind(id)
    .bind(now)
    .bind(addr)
    .execute(&mut *tx)
    .await?;
    sqlx::query("UPDATE agents SET secret_hash = $2, cpus = COALESCE($3, cpus) WHERE id = $1")
        .bind(id)
        .bind(hash_secret(secret))
        .bind(cpus.map(i64::from))
        .execute(&mut *tx)
        .await?;
    Ok(())
}

/// Spends one use of a join token that is neither spent, expired nor revoked.
async fn spend_token(tx: &mut sqlx::AnyConnection, hash: &str, now: i64) -> Result<()> {
    let spent = sqlx::query(
        "UPDATE join_tokens SET uses_left = uses_left - 1
         WHERE token_hash = $1 AND uses_left > 0 AND expires_ms > $2 AND revoked_ms IS NULL",
    )
    .bind(hash)
    .bind(now)
    .execute(&mut *tx)
    .await?
    .rows_affected();
    if spent != 1 {
        return Err(StoreError::Unauthorised);
    }
    Ok(())
}

/// The most uses (refused attempts included) kept per token.
const TOKEN_USES_KEPT: i64 = 1000;

async fn insert_token_use<'c, E: sqlx::Executor<'c, Database = sqlx::Any>>(
    ex: E,
    hash: &str,
    now: i64,
    addr: &str,
    outcome: &str,
    req: &EnrolRequest,
    agent: Option<&str>,
) -> Result<()> {
    sqlx::query(
        "INSERT INTO token_uses(token_hash, at_ms, addr, outcome, agent_id, owner, machine)
         SELECT $1, $2, $3, $4, $5, $6, $7 FROM join_tokens
         WHERE token_hash = $1 AND (SELECT COUNT(*) FROM token_uses WHERE token_hash = $1) < $8",
    )
    .bind(hash)
    .bind(now)
    .bind(addr)
    .bind(outcome)
    .bind(agent)
    .bind(&req.owner)
    .bind(&req.machine)
    .bind(TOKEN_USES_KEPT)
    .execute(ex)
    .await?;
    Ok(())
}

/// Records a refused use of a token (only of a token this pool issued).
async fn note_token_use(db: &Db, hash: &str, now: i64, addr: &str, outcome: &str, req: &EnrolRequest, agent: Option<&str>) -> Result<()> {
    insert_token_use(&db.pool, hash, now, addr, outcome, req, agent).await
}

/// Looks a secret's hash up: an API key that is not revoked, or an enrolled agent.
pub async fn principal_by_hash(db: &Db, hash: &str) -> Result<Option<Principal>> {
    if let Some(row) = sqlx::query("SELECT role, owner FROM api_keys WHERE key_hash = $1 AND revoked_ms IS NULL")
        .bind(hash)
        .fetch_optional(&db.pool)
        .await?
    {
        let role: String = col(&row, "role")?;
        let owner: Option<String> = col(&row, "owner")?;
        return Ok(match (role.as_str(), owner) {
            ("admin", _) => Some(Principal::Admin),
            ("owner", Some(owner)) => Some(Principal::Owner { owner }),
            _ => None,
        });
    }
    if let Some(row) = sqlx::query("SELECT id, owner FROM agents WHERE secret_hash = $1 AND removed_ms IS NULL")
        .bind(hash)
        .fetch_optional(&db.pool)
        .await?
    {
        return Ok(Some(Principal::Agent { agent_id: col(&row, "id")?, owner: col(&row, "owner")? }));
    }
    Ok(None)
}

/// Why a secret no principal holds stopped working: `(code, message)`, or `None` for a
/// secret never issued here.
pub async fn why_refused(db: &Db, hash: &str) -> Result<Option<(&'static str, String)>> {
    let at = |ms: i64| {
        chrono::DateTime::from_timestamp_millis(ms).map_or_else(|| ms.to_string(), |t| t.format("%Y-%m-%d %H:%M:%S UTC").to_string())
    };
    if let Some(r) = sqlx::query("SELECT revoked_ms FROM api_keys WHERE key_hash = $1").bind(hash).fetch_optional(&db.pool).await? {
        let when: Option<i64> = col(&r, "revoked_ms")?;
        return Ok(Some((
            error_code::KEY_REVOKED,
            format!("this API key (id {}) was revoked at {}", cred_id(hash), at(when.unwrap_or(0))),
        )));
    }
    let Some(r) = sqlx::query(
        "SELECT r.reason AS reason, r.at_ms AS at_ms, r.addr AS addr, a.name AS name, a.owner AS owner
         FROM retired_secrets r JOIN agents a ON a.id = r.agent_id WHERE r.secret_hash = $1",
    )
    .bind(hash)
    .fetch_optional(&db.pool)
    .await?
    else {
        return Ok(None);
    };
    let (reason, when, addr, name, owner): (String, i64, String, String, String) =
        (col(&r, "reason")?, col(&r, "at_ms")?, col(&r, "addr")?, col(&r, "name")?, col(&r, "owner")?);
    Ok(Some(if reason == "removed" {
        (
            error_code::MACHINE_REMOVED,
            format!(
                "this machine ({owner}'s {name:?}) was removed from the pool at {} (by {addr}): to join again, enrol with a new \
                 join token (`lull enrol --replace --token …`)",
                at(when)
            ),
        )
    } else {
        (
            error_code::CREDENTIAL_REPLACED,
            format!(
                "this machine's credential ({owner}'s {name:?}) was replaced at {} by a new enrolment from {addr}: this agent no \
                 longer speaks for the machine. If that was not you, tell the pool admin; to enrol this machine again the admin \
                 removes the other (`lull coordinator machine rm {name}`) or enrols it with an admin key",
                at(when)
            ),
        )
    }))
}

fn token_state(uses_left: i64, expires_ms: i64, revoked_ms: Option<i64>, now: i64) -> &'static str {
    if revoked_ms.is_some() {
        "revoked"
    } else if expires_ms <= now {
        "expired"
    } else if uses_left <= 0 {
        "spent"
    } else {
        "active"
    }
}

/// Every join token (newest first), with its uses; never the token itself.
pub async fn list_tokens(db: &Db) -> Result<Vec<JoinTokenInfo>> {
    let now = now_ms();
    let mut used: BTreeMap<String, Vec<TokenUse>> = BTreeMap::new();
    for r in sqlx::query("SELECT token_hash, at_ms, addr, outcome, agent_id, owner, machine FROM token_uses ORDER BY at_ms")
        .fetch_all(&db.pool)
        .await?
    {
        used.entry(col(&r, "token_hash")?).or_default().push(TokenUse {
            at_ms: col(&r, "at_ms")?,
            addr: col(&r, "addr")?,
            outcome: col(&r, "outcome")?,
            agent_id: col(&r, "agent_id")?,
            owner: col(&r, "owner")?,
            machine: col(&r, "machine")?,
        });
    }
    let rows =
        sqlx::query("SELECT token_hash, uses, uses_left, expires_ms, created_ms, revoked_ms FROM join_tokens ORDER BY created_ms DESC")
            .fetch_all(&db.pool)
            .await?;
    rows.iter()
        .map(|r| {
            let hash: String = col(r, "token_hash")?;
            let (uses_left, expires_ms, revoked_ms): (i64, i64, Option<i64>) =
                (col(r, "uses_left")?, col(r, "expires_ms")?, col(r, "revoked_ms")?);
            Ok(JoinTokenInfo {
                id: cred_id(&hash),
                created_ms: col(r, "created_ms")?,
                expires_ms,
                uses: col::<Option<i64>>(r, "uses")?.map(|u| u.clamp(0, u32::MAX as i64) as u32),
                uses_left: uses_left.clamp(0, u32::MAX as i64) as u32,
                revoked_ms,
                state: token_state(uses_left, expires_ms, revoked_ms, now).into(),
                used: used.remove(&hash).unwrap_or_default(),
            })
        })
        .collect()
}

/// Every API key (newest first), with its uses per address; never the key itself.
pub async fn list_keys(db: &Db) -> Result<Vec<ApiKeyInfo>> {
    let mut used: BTreeMap<String, Vec<KeyUse>> = BTreeMap::new();
    for r in sqlx::query("SELECT key_hash, addr, first_ms, last_ms, uses FROM key_uses ORDER BY last_ms DESC").fetch_all(&db.pool).await? {
        used.entry(col(&r, "key_hash")?).or_default().push(KeyUse {
            addr: col(&r, "addr")?,
            first_ms: col(&r, "first_ms")?,
            last_ms: col(&r, "last_ms")?,
            uses: col::<i64>(&r, "uses")?.max(0) as u64,
        });
    }
    let rows = sqlx::query("SELECT key_hash, role, owner, created_ms, revoked_ms FROM api_keys ORDER BY created_ms DESC")
        .fetch_all(&db.pool)
        .await?;
    rows.iter()
        .map(|r| {
            let hash: String = col(r, "key_hash")?;
            let revoked_ms: Option<i64> = col(r, "revoked_ms")?;
            let used_from = used.remove(&hash).unwrap_or_default();
            Ok(ApiKeyInfo {
                id: cred_id(&hash),
                role: col(r, "role")?,
                owner: col(r, "owner")?,
                created_ms: col(r, "created_ms")?,
                revoked_ms,
                state: if revoked_ms.is_some() { "revoked" } else { "active" }.into(),
                uses: used_from.iter().fold(0u64, |n, u| n.saturating_add(u.uses)),
                last_used_ms: used_from.iter().map(|u| u.last_ms).max(),
                used_from,
            })
        })
        .collect()
}

/// The one stored hash of `table.column` whose id is `id` (404 if none, 409 if several).
async fn hash_for_id(db: &Db, table: &str, column: &str, id: &str) -> Result<String> {
    if id.len() != ID_LEN || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(StoreError::Invalid(format!("id must be the {ID_LEN} hex digits a list shows")));
    }
    let sql = format!("SELECT {column} AS h FROM {table} WHERE substr({column}, 1, {ID_LEN}) = $1");
    let rows = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(id.to_ascii_lowercase()).fetch_all(&db.pool).await?;
    match rows.as_slice() {
        [one] => Ok(col(one, "h")?),
        [] => Err(StoreError::NotFound),
        _ => Err(StoreError::Conflict(format!("id {id} names several; revoke by the secret itself"))),
    }
}

/// Revokes a join token by id: it enrols no one from now on (revoking a revoked token
/// changes nothing). Returns it as listed.
pub async fn revoke_token(db: &Db, id: &str) -> Result<JoinTokenInfo> {
    let hash = hash_for_id(db, "join_tokens", "token_hash", id).await?;
    sqlx::query("UPDATE join_tokens SET revoked_ms = $2 WHERE token_hash = $1 AND revoked_ms IS NULL")
        .bind(&hash)
        .bind(now_ms())
        .execute(&db.pool)
        .await?;
    list_tokens(db).await?.into_iter().find(|t| t.id == cred_id(&hash)).ok_or(StoreError::NotFound)
}

/// Revokes an API key by id: it answers 401 `key_revoked` from now on (within the
/// credential cache's 30 s on other replicas). The last admin key is not revoked (409):
/// the pool would have no administrator left.
pub async fn revoke_key(db: &Db, id: &str) -> Result<ApiKeyInfo> {
    let hash = hash_for_id(db, "api_keys", "key_hash", id).await?;
    let mut tx = db.pool.begin().await?;
    let lock = if db.dialect == Dialect::Postgres { " FOR UPDATE" } else { "" };
    let row = sqlx::query(sqlx::AssertSqlSafe(format!("SELECT role, revoked_ms FROM api_keys WHERE key_hash = $1{lock}")))
        .bind(&hash)
        .fetch_one(&mut *tx)
        .await?;
    let (role, revoked): (String, Option<i64>) = (col(&row, "role")?, col(&row, "revoked_ms")?);
    if revoked.is_none() && role == "admin" && active_admin_keys(&mut *tx).await? <= 1 {
        return Err(StoreError::Conflict(
            "this is the last admin key: create another first (`lull coordinator key create --role admin`), then revoke this one".into(),
        ));
    }
    sqlx::query("UPDATE api_keys SET revoked_ms = $2 WHERE key_hash = $1 AND revoked_ms IS NULL")
        .bind(&hash)
        .bind(now_ms())
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    list_keys(db).await?.into_iter().find(|k| k.id == cred_id(&hash)).ok_or(StoreError::NotFound)
}

/// Uses of API keys seen since the last flush: `(key hash, address) → (first, last, count)`.
pub type KeyUses = BTreeMap<(String, String), (i64, i64, u64)>;

/// Adds API keys' uses to their per-address tallies (first use kept, last use and count
/// advanced), in one transaction.
pub async fn flush_key_uses(db: &Db, uses: &KeyUses) -> Result<()> {
    if uses.is_empty() {
        return Ok(());
    }
    let rows: Vec<_> = uses.iter().collect();
    let mut tx = db.pool.begin().await?;
    for chunk in rows.chunks(rows_per_statement(db, 500, 5)) {
        let sql = format!(
            "INSERT INTO key_uses(key_hash, addr, first_ms, last_ms, uses) VALUES {}
             ON CONFLICT(key_hash, addr) DO UPDATE SET last_ms = excluded.last_ms, uses = key_uses.uses + excluded.uses",
            placeholders(chunk.len(), 5)
        );
        let mut q = sqlx::query(sqlx::AssertSqlSafe(sql));
        for ((hash, addr), (first, last, n)) in chunk {
            q = q.bind(hash.clone()).bind(addr.clone()).bind(*first).bind(*last).bind(i64::try_from(*n).unwrap_or(i64::MAX));
        }
        q.execute(&mut *tx).await?;
    }
    tx.commit().await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_hash_prefixes_and_states_read_right() {
        assert_eq!(cred_id("0123456789abcdef0123"), "0123456789ab");
        assert_eq!(token_state(1, 100, None, 50), "active");
        assert_eq!(token_state(0, 100, None, 50), "spent");
        assert_eq!(token_state(1, 100, None, 100), "expired");
        assert_eq!(token_state(1, 100, Some(10), 50), "revoked");
    }
}
