//! Donated-time reports per owner or machine and per day or week: donated CPU- and
//! wall-seconds (from the agents' ledger records), interruptions used against the limit
//! (the limit from interruption records and from the heartbeats of each day),
//! the fraction of the period available (from heartbeats), jobs completed, evictions and
//! linger time; as JSON or CSV.
//!
//! Aggregation is per (machine, day) in SQL and the grouping by owner or week in Rust,
//! so both dialects run the same plain `GROUP BY` queries.

use crate::auth::Principal;
use crate::db::{col, Db};
use crate::model::{Report, ReportRow};
use crate::store::StoreError;
use chrono::{Datelike, NaiveDate};
use std::collections::{BTreeMap, HashMap};

/// Group rows by owner or by machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum By {
    Owner,
    Machine,
}

/// Rows per day or per ISO week (Monday).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Period {
    Day,
    Week,
}

/// What to report on.
#[derive(Clone, Debug)]
pub struct ReportQuery {
    pub by: By,
    pub period: Period,
    /// First day included.
    pub since: NaiveDate,
    /// Only this owner's machines (forced to the caller's own name for owners).
    pub owner: Option<String>,
}

/// The longest look back a report takes.
pub const SINCE_MAX_DAYS: u64 = 3660;

/// Parses a duration in the one grammar (`7d`, `2w`, `90m`: see
/// [`lull_protocol::duration`], rounded up to whole days, today counting as the first) or
/// a day `YYYY-MM-DD` into the first day included.
pub fn parse_since(s: &str, today: NaiveDate) -> Result<NaiveDate, String> {
    if let Ok(d) = s.trim().parse::<NaiveDate>() {
        return Ok(d);
    }
    let secs =
        lull_protocol::duration::parse_secs(s, 1, SINCE_MAX_DAYS * 86_400).map_err(|e| format!("since: {e}, or a day YYYY-MM-DD"))?;
    // "7d" covers today and the six days before it.
    let days = secs.div_ceil(86_400) as i64;
    Ok(today - chrono::Duration::days(days - 1))
}

fn period_of(day: &str, p: Period) -> String {
    match (p, day.parse::<NaiveDate>()) {
        (Period::Week, Ok(d)) => (d - chrono::Duration::days(d.weekday().num_days_from_monday() as i64)).to_string(),
        _ => day.to_string(),
    }
}

/// The owner whose machines `who` may report on (`""` for every owner), or Forbidden.
fn owner_filter(who: &Principal, q: &ReportQuery) -> Result<String, StoreError> {
    let owner_filter = match who {
        Principal::Admin => q.owner.clone(),
        Principal::Owner { owner } => {
            if q.owner.as_ref().is_some_and(|o| o != owner) {
                return Err(StoreError::Forbidden);
            }
            Some(owner.clone())
        }
        Principal::Agent { .. } => return Err(StoreError::Forbidden),
    };
    Ok(owner_filter.unwrap_or_default())
}

/// A report's rows as they are summed: one per (owner or machine, period).
struct Tally {
    /// Each reported agent's (owner, machine name).
    names: HashMap<String, (String, String)>,
    by: By,
    period: Period,
    rows: BTreeMap<(String, String), ReportRow>,
    /// The highest interruption limit of each (row key, period, agent).
    limits: BTreeMap<(String, String, String), i64>,
    /// The machines whose availability each row sums.
    machines_in: BTreeMap<(String, String), std::collections::BTreeSet<String>>,
}

impl Tally {
    /// The row `agent`'s `day` adds to (made if new), or None for an agent not reported.
    fn row_for(&mut self, agent: &str, day: &str) -> Option<&mut ReportRow> {
        let (owner, machine) = self.names.get(agent)?;
        let (key, machine) = match self.by {
            By::Owner => (owner.clone(), None),
            By::Machine => (agent.to_string(), Some(machine.clone())),
        };
        let period = period_of(day, self.period);
        Some(self.rows.entry((key.clone(), period.clone())).or_insert_with(|| ReportRow { key, machine, period, ..Default::default() }))
    }

    /// Raises the interruption limit of `agent` in `row` to at least `limit`.
    fn limit(&mut self, row: (String, String), agent: String, limit: i64) {
        let e = self.limits.entry((row.0, row.1, agent)).or_insert(0);
        *e = (*e).max(limit);
    }

    /// Adds the counted records since `since`: CPU, wall, linger time and interruptions.
    async fn add_records(&mut self, db: &Db, since: &str) -> Result<(), StoreError> {
        let recs = sqlx::query(
            "SELECT agent_id, day, CAST(SUM(CAST(cpu_us AS DOUBLE PRECISION)) AS DOUBLE PRECISION) AS cpu_us,
                CAST(SUM(CAST(wall_ms AS DOUBLE PRECISION)) AS DOUBLE PRECISION) AS wall_ms,
                CAST(SUM(CASE WHEN kind = 'interruption' THEN 1 ELSE 0 END) AS BIGINT) AS interruptions,
                CAST(MAX(interruption_limit) AS BIGINT) AS lim, CAST(SUM(CAST(linger_ms AS DOUBLE PRECISION)) AS DOUBLE PRECISION) AS linger_ms
         FROM records WHERE day >= $1 AND day <> '' AND counted = 1 GROUP BY agent_id, day",
        )
        .bind(since)
        .fetch_all(&db.pool)
        .await?;
        for r in &recs {
            let agent: String = col(r, "agent_id")?;
            let day: String = col(r, "day")?;
            let lim: Option<i64> = col(r, "lim")?;
            if let Some(row) = self.row_for(&agent, &day) {
                // Summed as floating point, which no row can overflow (a sum of integers, exact
                // below 2⁵³ µs = 285 CPU-years; what a machine may claim a day is far below),
                // divided once.
                row.cpu_s += col::<f64>(r, "cpu_us")? / 1e6;
                row.wall_s += col::<f64>(r, "wall_ms")? / 1e3;
                row.interruptions = row.interruptions.saturating_add(count(col(r, "interruptions")?));
                row.linger_s += col::<f64>(r, "linger_ms")? / 1e3;
                let key = (row.key.clone(), row.period.clone());
                if let Some(l) = lim {
                    self.limit(key, agent, l);
                }
            }
        }
        Ok(())
    }

    /// Adds each machine's availability since `since` (as a fraction of the period) and
    /// the interruption limit its heartbeats reported.
    async fn add_availability(&mut self, db: &Db, since: &str) -> Result<(), StoreError> {
        let avail = sqlx::query("SELECT agent_id, day, available_ms, interruption_limit AS lim FROM availability WHERE day >= $1")
            .bind(since)
            .fetch_all(&db.pool)
            .await?;
        let period_ms = match self.period {
            Period::Day => 86_400_000.0,
            Period::Week => 7.0 * 86_400_000.0,
        };
        for r in &avail {
            let agent: String = col(r, "agent_id")?;
            let day: String = col(r, "day")?;
            if let Some(row) = self.row_for(&agent, &day) {
                row.available_fraction += col::<i64>(r, "available_ms")? as f64 / period_ms;
                let key = (row.key.clone(), row.period.clone());
                // The limit the machine's heartbeats reported that day counts even when no
                // interruption (which carries its own limit) happened.
                if let Some(l) = col::<Option<i64>>(r, "lim")? {
                    self.limit(key.clone(), agent.clone(), l);
                }
                self.machines_in.entry(key).or_default().insert(agent);
            }
        }
        Ok(())
    }

    /// Adds the tasks completed and evicted on each machine since `since`.
    async fn add_events(&mut self, db: &Db, since: &str) -> Result<(), StoreError> {
        let events = sqlx::query(
            "SELECT agent_id, day, CAST(SUM(CASE WHEN kind = 'completed' THEN 1 ELSE 0 END) AS BIGINT) AS completed,
                CAST(SUM(CASE WHEN kind = 'evicted' THEN 1 ELSE 0 END) AS BIGINT) AS evicted
         FROM task_events WHERE day >= $1 GROUP BY agent_id, day",
        )
        .bind(since)
        .fetch_all(&db.pool)
        .await?;
        for r in &events {
            let agent: String = col(r, "agent_id")?;
            let day: String = col(r, "day")?;
            if let Some(row) = self.row_for(&agent, &day) {
                row.jobs_completed = row.jobs_completed.saturating_add(count(col(r, "completed")?));
                row.evictions = row.evictions.saturating_add(count(col(r, "evicted")?));
            }
        }
        Ok(())
    }

    /// The rows, each with its machines' interruption limits summed and its availability
    /// averaged over its machines.
    fn finish(mut self) -> Vec<ReportRow> {
        for ((key, period, _agent), l) in self.limits {
            if let Some(row) = self.rows.get_mut(&(key, period)) {
                row.interruption_limit = row.interruption_limit.saturating_add(count(l));
            }
        }
        // Availability of several machines is averaged over them.
        for (k, set) in self.machines_in {
            if let Some(row) = self.rows.get_mut(&k) {
                row.available_fraction /= set.len().max(1) as f64;
            }
        }
        self.rows.into_values().collect()
    }
}

/// Builds a report for `who`. Owners see only their own machines; agents none.
pub async fn report(db: &Db, who: &Principal, q: &ReportQuery) -> Result<Report, StoreError> {
    let owner_filter = owner_filter(who, q)?;
    let since = q.since.to_string();
    let agents =
        sqlx::query("SELECT id, owner, name FROM agents WHERE ($1 = '' OR owner = $1)").bind(&owner_filter).fetch_all(&db.pool).await?;
    let mut names: HashMap<String, (String, String)> = HashMap::new();
    for a in &agents {
        names.insert(col(a, "id")?, (col(a, "owner")?, col(a, "name")?));
    }
    let mut tally =
        Tally { names, by: q.by, period: q.period, rows: BTreeMap::new(), limits: BTreeMap::new(), machines_in: BTreeMap::new() };
    tally.add_records(db, &since).await?;
    tally.add_availability(db, &since).await?;
    tally.add_events(db, &since).await?;
    Ok(Report {
        by: match q.by {
            By::Owner => "owner",
            By::Machine => "machine",
        }
        .into(),
        period: match q.period {
            Period::Day => "day",
            Period::Week => "week",
        }
        .into(),
        since,
        rows: tally.finish(),
    })
}

/// A count from the database as a `u32`, saturating (never wrapping or panicking).
fn count(n: i64) -> u32 {
    u32::try_from(n.max(0)).unwrap_or(u32::MAX)
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// The report as CSV (RFC 4180, header line first).
pub fn to_csv(r: &Report) -> String {
    let mut out = String::from(
        "key,machine,period,cpu_s,wall_s,interruptions,interruption_limit,available_fraction,jobs_completed,evictions,linger_s\n",
    );
    for row in &r.rows {
        out.push_str(&format!(
            "{},{},{},{:.6},{:.3},{},{},{:.4},{},{},{:.3}\n",
            csv_field(&row.key),
            csv_field(row.machine.as_deref().unwrap_or("")),
            row.period,
            row.cpu_s,
            row.wall_s,
            row.interruptions,
            row.interruption_limit,
            row.available_fraction,
            row.jobs_completed,
            row.evictions,
            row.linger_s
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn since_parses_spans_and_dates() {
        let today = NaiveDate::from_ymd_opt(2026, 11, 22).unwrap();
        assert_eq!(parse_since("7d", today), Ok(NaiveDate::from_ymd_opt(2026, 11, 16).unwrap()));
        assert_eq!(parse_since("1d", today), Ok(today));
        assert_eq!(parse_since("90m", today), Ok(today));
        assert_eq!(parse_since(" 25H", today), Ok(NaiveDate::from_ymd_opt(2026, 11, 21).unwrap()));
        assert_eq!(parse_since("2w", today), Ok(NaiveDate::from_ymd_opt(2026, 11, 9).unwrap()));
        assert_eq!(parse_since("2026-01-02", today), Ok(NaiveDate::from_ymd_opt(2026, 1, 2).unwrap()));
        assert!(parse_since("7x", today).unwrap_err().contains("YYYY-MM-DD"));
        assert!(parse_since("d", today).is_err());
        assert!(parse_since("99999999999999999999d", today).unwrap_err().contains("allowed"));
    }

    #[test]
    fn weeks_start_on_monday_and_csv_quotes() {
        assert_eq!(period_of("2026-11-22", Period::Week), "2026-11-16");
        assert_eq!(period_of("2026-11-16", Period::Week), "2026-11-16");
        assert_eq!(csv_field("a,b\"c"), "\"a,b\"\"c\"");
    }
}
