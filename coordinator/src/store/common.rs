//! What every store module shares: [`StoreError`] and its `Result`, the retry of a
//! transaction PostgreSQL ended for a deadlock, the clock (`now_ms`, `day_of`), text and
//! number checks, and the chunking of statements under SQLite's parameter limit.

use crate::db::Db;

/// A store failure: `Sql` is a server fault, the others are the caller's.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{0}")]
    Sql(#[from] sqlx::Error),
    #[error("not found")]
    NotFound,
    #[error("{0}")]
    Conflict(String),
    #[error("{0}")]
    Invalid(String),
    #[error("unauthorised")]
    Unauthorised,
    #[error("forbidden")]
    Forbidden,
    /// Not allowed, and why (403 with this message).
    #[error("{0}")]
    Denied(String),
    /// A refusal with its own status and [`lull_protocol::error_code`].
    #[error("{message}")]
    Refused { status: u16, code: &'static str, message: String },
}

pub(crate) type Result<T> = std::result::Result<T, StoreError>;

/// True when PostgreSQL ended this transaction to break a deadlock (SQLSTATE 40P01) or
/// for a serialization failure (40001): nothing it did was kept, and running it again is
/// the remedy PostgreSQL's manual gives. (SQLite, one writer, never says either.)
fn is_transient(e: &StoreError) -> bool {
    matches!(e, StoreError::Sql(sqlx::Error::Database(d)) if matches!(d.code().as_deref(), Some("40P01" | "40001")))
}

/// How many times [`retry_transient`] runs a transaction at most.
const TRANSIENT_TRIES: u32 = 5;

/// Runs `transaction` again, up to [`TRANSIENT_TRIES`] times in all, while PostgreSQL
/// ends it for a deadlock or a serialization failure ([`is_transient`]); any other
/// outcome is returned as it is. `transaction` must begin, do and commit its whole work
/// each time, so a retry redoes all of it. Two statements that lock the same task rows
/// in different orders (a job's cancel, by rank; a batch of deliveries, by agent) can
/// deadlock under load (`lull bench recruit-api --db postgres`): without this the loser
/// answered 503, and a recruit group's release left its job leased in the database.
pub async fn retry_transient<T, F: std::future::Future<Output = Result<T>>>(mut transaction: impl FnMut() -> F) -> Result<T> {
    let mut tries = 1;
    loop {
        match transaction().await {
            Err(e) if tries < TRANSIENT_TRIES && is_transient(&e) => {
                tracing::info!(error = %e, tries, "transaction ended by the database; running it again");
                tokio::time::sleep(transient_pause(tries)).await;
                tries += 1;
            }
            outcome => return outcome,
        }
    }
}

/// The pause after the `tries`-th failed try: 2, 4, 8, 16 ms, plus up to as much again
/// at random, so that two transactions that deadlocked do not run into each other again
/// in step.
fn transient_pause(tries: u32) -> std::time::Duration {
    let base = 1u64 << tries.min(5);
    let mut b = [0u8; 8];
    let jitter = match getrandom::fill(&mut b) {
        Ok(()) => u64::from_le_bytes(b) % (base * 1000),
        Err(_) => 0,
    };
    std::time::Duration::from_micros(base * 1000 + jitter)
}

/// Unix milliseconds now.
pub fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// The UTC day of a Unix-millisecond instant.
pub fn day_of(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms).unwrap_or_default().date_naive().to_string()
}

pub(crate) fn i64_of(v: u64, what: &str) -> Result<i64> {
    i64::try_from(v).map_err(|_| StoreError::Invalid(format!("{what} is too large")))
}

/// Checks a user-supplied text field: length and no NUL (PostgreSQL refuses NUL in text).
pub fn check_text(what: &str, s: &str, min: usize, max: usize) -> Result<()> {
    if s.len() < min || s.len() > max {
        return Err(StoreError::Invalid(format!("{what} must be {min}–{max} bytes, not {}", s.len())));
    }
    if s.contains('\0') {
        return Err(StoreError::Invalid(format!("{what} must not contain NUL")));
    }
    Ok(())
}

/// Numbered parameters per statement on SQLite. SQLite finds a numbered parameter's name
/// by walking the statement's list of them, and sqlx asks for every parameter's name when
/// it binds, so binding one statement costs the square of its parameters: 4,500 of them
/// (a 500-row flush) made `sqlite3_bind_parameter_name` a tenth of the coordinator's CPU
/// under 1,000 heartbeats/s (`perf`, `lull bench recruit-api`).
const SQLITE_PARAMS_PER_STATEMENT: usize = 450;

/// Rows per multi-row statement of `cols` parameters each: `rows` on PostgreSQL (fewer
/// round trips), at most [`SQLITE_PARAMS_PER_STATEMENT`] parameters on SQLite.
pub(crate) fn rows_per_statement(db: &Db, rows: usize, cols: usize) -> usize {
    match db.dialect {
        crate::db::Dialect::Postgres => rows,
        crate::db::Dialect::Sqlite => (SQLITE_PARAMS_PER_STATEMENT / cols.max(1)).clamp(1, rows),
    }
}

/// `$1, $2, …, $n`.
pub(crate) fn id_list(n: usize) -> String {
    (1..=n).map(|i| format!("${i}")).collect::<Vec<_>>().join(", ")
}

/// `($1, $2, …), ($9, …)`: `rows` tuples of `cols` numbered placeholders.
pub(crate) fn placeholders(rows: usize, cols: usize) -> String {
    let mut out = String::with_capacity(rows * cols * 5);
    for r in 0..rows {
        if r > 0 {
            out.push_str(", ");
        }
        out.push('(');
        for c in 0..cols {
            if c > 0 {
                out.push_str(", ");
            }
            out.push_str(&format!("${}", r * cols + c + 1));
        }
        out.push(')');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_transient_failure_waits_longer_each_try_within_its_bounds() {
        for tries in 1..TRANSIENT_TRIES {
            let base = std::time::Duration::from_millis(1 << tries);
            for _ in 0..50 {
                let p = transient_pause(tries);
                assert!(p >= base && p < 2 * base, "try {tries}: {p:?} not in [{base:?}, {:?})", 2 * base);
            }
        }
        let spread: std::collections::HashSet<_> = (0..20).map(|_| transient_pause(3)).collect();
        assert!(spread.len() > 1, "the pause is jittered");
    }
}
