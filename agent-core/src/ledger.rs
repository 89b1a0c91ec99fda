//! The local ledger: an SQLite database (WAL, `synchronous=FULL`) in the platform data
//! directory holding everything the agent has accounted — state transitions, owner
//! commands, counted interruptions, donated seconds per guest and day, the persisted
//! policy settings, an outbox of records for the coordinator, and a compact 2-second
//! trace of owner CPU, owner memory and input activity kept for 30 days.
//!
//! Crash safety: every accounting write is one transaction. Interruptions are unique per
//! (day, number); donated time is stored as each guest's *cumulative* counters and the
//! day's total is advanced by the difference in the same transaction, so replaying a
//! write after `kill -9` neither loses nor doubles anything.

use crate::policy::{Command, Interruption, Saved, StateKind};
use chrono::{DateTime, NaiveDate, Utc};
use lull_protocol::Record;
use rusqlite::{params, Connection, OptionalExtension};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// A ledger failure.
#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    #[error("ledger database {path}: {source}")]
    Open { path: String, source: rusqlite::Error },
    #[error("ledger: {0}")]
    Sql(#[from] rusqlite::Error),
    #[error("ledger: stored value is not valid: {0}")]
    Corrupt(#[from] serde_json::Error),
    #[error("ledger database {path} is damaged and could not be renamed aside (nothing was changed): {source}")]
    SetAside { path: String, source: std::io::Error },
}

type Result<T> = std::result::Result<T, LedgerError>;

const SCHEMA: &str = r#"
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS transitions (
    id INTEGER PRIMARY KEY, at_utc TEXT NOT NULL, from_state TEXT NOT NULL,
    to_state TEXT NOT NULL, reason TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS transitions_at ON transitions(at_utc);
CREATE TABLE IF NOT EXISTS commands (id INTEGER PRIMARY KEY, at_utc TEXT NOT NULL, command TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS interruptions (
    id INTEGER PRIMARY KEY, day TEXT NOT NULL, number INTEGER NOT NULL, limit_n INTEGER NOT NULL,
    cause TEXT NOT NULL, mode TEXT NOT NULL, at_utc TEXT NOT NULL, restore_ms INTEGER,
    cache_restore_ms INTEGER, UNIQUE(day, number));
CREATE TABLE IF NOT EXISTS guest_usage (
    guest TEXT PRIMARY KEY, started_utc TEXT NOT NULL, cpu_us INTEGER NOT NULL,
    wall_ms INTEGER NOT NULL, peak_mem INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS donated_days (
    day TEXT PRIMARY KEY, cpu_us INTEGER NOT NULL, wall_ms INTEGER NOT NULL,
    present_cpu_us INTEGER NOT NULL DEFAULT 0, present_wall_ms INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS outbox (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, kind TEXT NOT NULL, payload TEXT NOT NULL,
    synced INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS trace (
    t INTEGER PRIMARY KEY, owner_cpu REAL NOT NULL, owner_mem INTEGER NOT NULL, input INTEGER NOT NULL);
"#;

/// One row of the calibration trace (every 2 s by default).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct TraceRow {
    /// Unix seconds (UTC).
    pub t: i64,
    pub owner_cpu: f32,
    pub owner_mem_bytes: u64,
    /// Input happened during the row's interval.
    pub input: bool,
}

/// A guest's cumulative usage, as read from its counters.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GuestTotals {
    pub guest: String,
    pub cpu_us: u64,
    pub wall_ms: u64,
    pub peak_mem_bytes: u64,
}

/// A recorded interruption, as shown to the owner.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct InterruptionRow {
    pub id: i64,
    pub day: NaiveDate,
    pub number: u32,
    pub limit: u32,
    pub cause: String,
    pub mode: String,
    pub at_utc: String,
    /// Bringing the owner's swapped pages back after the eviction, ms.
    pub restore_ms: Option<u64>,
    /// Reading the owner's file cache back after the eviction, ms (after the swapped pages).
    #[serde(default)]
    pub cache_restore_ms: Option<u64>,
}

/// A state transition.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct TransitionRow {
    pub at_utc: String,
    pub from: String,
    pub to: String,
    pub reason: String,
}

/// Donated time on one local day.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct DayDonation {
    pub day: NaiveDate,
    pub cpu_s: f64,
    pub wall_s: f64,
    /// The part of `cpu_s` and `wall_s` donated while the owner was present (guest work
    /// lingering, or lent while light): included in the totals, never added to them.
    #[serde(default)]
    pub present_cpu_s: f64,
    #[serde(default)]
    pub present_wall_s: f64,
}

/// The ledger.
pub struct Ledger {
    conn: Connection,
}

/// The ledger's tables, in the order a salvage copies them.
pub const TABLES: [&str; 8] = ["meta", "interruptions", "commands", "transitions", "guest_usage", "donated_days", "outbox", "trace"];

/// The tables that hold the owner's budget and settings: checked at every start.
pub const BUDGET_TABLES: [&str; 2] = ["meta", "interruptions"];

/// The lowest count of interruptions a day may show, set when today's count was
/// recovered from what survived a damaged ledger (see `ledger_integrity`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct BudgetFloor {
    day: NaiveDate,
    used: u32,
}

/// Brings a ledger written by an older agent up to the schema, column by column: the part
/// of each day's donation made while the owner was present (lingering or lent while
/// light), and each interruption's file-cache restore time, came later.
fn upgrade(conn: &Connection) -> Result<()> {
    let has = |table: &str, column: &str| -> Result<bool> {
        let n: i64 = conn.query_row("SELECT COUNT(*) FROM pragma_table_info(?1) WHERE name = ?2", params![table, column], |r| r.get(0))?;
        Ok(n > 0)
    };
    if !has("donated_days", "present_cpu_us")? {
        conn.execute_batch(
            "ALTER TABLE donated_days ADD COLUMN present_cpu_us INTEGER NOT NULL DEFAULT 0;
             ALTER TABLE donated_days ADD COLUMN present_wall_ms INTEGER NOT NULL DEFAULT 0;",
        )?;
    }
    if !has("interruptions", "cache_restore_ms")? {
        conn.execute_batch("ALTER TABLE interruptions ADD COLUMN cache_restore_ms INTEGER")?;
    }
    Ok(())
}

/// A path as an SQLite URI's path: `%`, `?` and `#` escaped.
fn uri_path(p: &Path) -> String {
    p.display().to_string().replace('%', "%25").replace('?', "%3f").replace('#', "%23")
}

fn ts(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

impl Ledger {
    /// Opens (creating if needed) the ledger at `path`.
    pub fn open(path: &Path) -> Result<Self> {
        if let Some(dir) = path.parent() {
            let _ = crate::private_files::create_dir(dir);
        }
        // Created owner-only before SQLite opens it: its -wal and -shm take the database
        // file's mode.
        let _ = crate::private_files::create_file(path);
        let conn = Connection::open(path).map_err(|source| LedgerError::Open { path: path.display().to_string(), source })?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "FULL")?;
        // The agent writes a few rows a minute: a small page cache keeps its RSS low.
        conn.pragma_update(None, "cache_size", -256)?;
        conn.execute_batch(SCHEMA)?;
        upgrade(&conn)?;
        Ok(Self { conn })
    }

    /// Opens an existing ledger read-only, creating and changing nothing (not even on
    /// close): what the start-up check and a salvage read a suspect file with.
    pub fn open_read_only(path: &Path) -> Result<Self> {
        use rusqlite::OpenFlags;
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX | OpenFlags::SQLITE_OPEN_URI;
        let conn =
            Connection::open_with_flags(path, flags).map_err(|source| LedgerError::Open { path: path.display().to_string(), source })?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        conn.pragma_update(None, "cache_size", -256)?;
        Ok(Self { conn })
    }

    /// An in-memory ledger, for the simulator and tests.
    pub fn in_memory() -> Result<Self> {
        let conn = Connection::open_in_memory()?;
        conn.execute_batch(SCHEMA)?;
        Ok(Self { conn })
    }

    /// A value kept as JSON in the meta table.
    pub(crate) fn meta_json<T: serde::de::DeserializeOwned>(&self, key: &str) -> Result<Option<T>> {
        Ok(match self.meta(key)? {
            Some(s) => Some(serde_json::from_str(&s)?),
            None => None,
        })
    }

    /// Keeps a value as JSON in the meta table (`None` removes it).
    pub(crate) fn set_meta_json<T: Serialize>(&self, key: &str, value: Option<&T>) -> Result<()> {
        match value {
            Some(v) => self.set_meta(key, &serde_json::to_string(v)?),
            None => {
                self.conn.execute("DELETE FROM meta WHERE key = ?1", [key])?;
                Ok(())
            }
        }
    }

    fn meta(&self, key: &str) -> Result<Option<String>> {
        Ok(self.conn.query_row("SELECT value FROM meta WHERE key = ?1", [key], |r| r.get(0)).optional()?)
    }

    fn set_meta(&self, key: &str, value: &str) -> Result<()> {
        self.conn.execute(
            "INSERT INTO meta(key, value) VALUES (?1, ?2) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            params![key, value],
        )?;
        Ok(())
    }

    /// The persisted policy settings (pause, donate-now, budget day).
    pub fn load_saved(&self) -> Result<Saved> {
        match self.meta("policy_saved")? {
            Some(s) => Ok(serde_json::from_str(&s)?),
            None => Ok(Saved::default()),
        }
    }

    /// Persists the policy settings.
    pub fn store_saved(&self, saved: &Saved) -> Result<()> {
        self.set_meta("policy_saved", &serde_json::to_string(saved)?)
    }

    /// A stable identity for this machine's agent, created on first use.
    pub fn agent_id(&self) -> Result<String> {
        if let Some(id) = self.meta("agent_id")? {
            return Ok(id);
        }
        let mut bytes = [0u8; 16];
        if let Ok(mut f) = std::fs::File::open("/dev/urandom") {
            let _ = std::io::Read::read_exact(&mut f, &mut bytes);
        }
        let id: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        self.set_meta("agent_id", &id)?;
        Ok(id)
    }

    /// Interruptions counted against `day`: the rows, or the highest number among them
    /// if that is more (a row lost to damage still counts), and never fewer than a count
    /// recovered after damage ([`Self::set_budget_floor`]).
    pub fn interruptions_on(&self, day: NaiveDate) -> Result<u32> {
        let rows: u32 = self.conn.query_row(
            "SELECT MAX(COUNT(*), COALESCE(MAX(number), 0)) FROM interruptions WHERE day = ?1",
            [day.to_string()],
            |r| r.get(0),
        )?;
        let floor = self.meta_json::<BudgetFloor>("budget_floor")?.filter(|f| f.day == day).map_or(0, |f| f.used);
        Ok(rows.max(floor))
    }

    /// Sets the least `day` counts, recovered from what survived a damaged ledger: the
    /// interruptions it held are gone, their number is not.
    pub fn set_budget_floor(&self, day: NaiveDate, used: u32) -> Result<()> {
        self.set_meta_json("budget_floor", Some(&BudgetFloor { day, used }))
    }

    /// Which of the ledger's tables this file holds.
    pub fn tables_present(&self) -> Result<Vec<String>> {
        let mut st = self.conn.prepare("SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name")?;
        let names = st.query_map([], |r| r.get::<_, String>(0))?.collect::<std::result::Result<Vec<_>, _>>()?;
        Ok(names.into_iter().filter(|n| TABLES.contains(&n.as_str())).collect())
    }

    /// SQLite's `quick_check` of some tables and their indexes only (`None`: all of
    /// them), returning what it found wrong, if anything. A few small tables take
    /// microseconds; a year of trace takes seconds (docs/BENCHMARKS.md).
    pub fn quick_check(&self, tables: Option<&[&str]>) -> Result<Option<String>> {
        let mut problems = Vec::new();
        let mut check = |sql: String| -> Result<()> {
            let mut st = self.conn.prepare(&sql)?;
            let rows = st.query_map([], |r| r.get::<_, String>(0))?;
            problems.extend(rows.collect::<std::result::Result<Vec<_>, _>>()?.into_iter().filter(|r| r != "ok"));
            Ok(())
        };
        let checked = match tables {
            None => check("PRAGMA quick_check(20)".into()),
            Some(ts) => ts.iter().try_for_each(|t| check(format!("PRAGMA quick_check(\"{t}\")"))),
        };
        match checked {
            // A page too damaged for the check to walk is what it looks for, too.
            Err(LedgerError::Sql(e))
                if matches!(e.sqlite_error_code(), Some(rusqlite::ErrorCode::DatabaseCorrupt | rusqlite::ErrorCode::NotADatabase)) =>
            {
                problems.push(e.to_string())
            }
            other => other?,
        }
        Ok((!problems.is_empty()).then(|| problems.join("; ")))
    }

    /// Copies what can still be read from the ledger at `damaged` (opened read-only)
    /// into this one, table by table, each in one transaction (a table that cannot be
    /// read whole is not copied at all). Returns each table with the rows copied, or
    /// why it could not be. An outbox not recovered leaves the next records numbered
    /// from the wall clock's milliseconds, above any number sent before, so the
    /// coordinator (which stores each agent's number once) takes them.
    pub fn salvage_from(&mut self, damaged: &Path, now_ms: i64) -> Vec<(&'static str, std::result::Result<usize, String>)> {
        let uri = format!("file:{}?mode=ro", uri_path(damaged));
        if let Err(e) = self.conn.execute("ATTACH DATABASE ?1 AS damaged", [uri]) {
            let why = e.to_string();
            let out = TABLES.iter().map(|t| (*t, Err(why.clone()))).collect();
            let _ = self.number_outbox_from(now_ms);
            return out;
        }
        let out: Vec<_> = TABLES.iter().map(|t| (*t, self.copy_table(t).map_err(|e| e.to_string()))).collect();
        let _ = self.conn.execute_batch("DETACH DATABASE damaged");
        if !out.iter().any(|(t, r)| *t == "outbox" && r.is_ok()) {
            let _ = self.number_outbox_from(now_ms);
        }
        out
    }

    fn copy_table(&mut self, table: &str) -> Result<usize> {
        let columns = |schema: &str| -> Result<Vec<String>> {
            let mut st = self.conn.prepare(&format!("SELECT name FROM \"{schema}\".pragma_table_info(?1)"))?;
            let names = st.query_map([table], |r| r.get::<_, String>(0))?.collect::<std::result::Result<Vec<_>, _>>()?;
            Ok(names)
        };
        let theirs = columns("damaged")?;
        let shared: Vec<String> = columns("main")?.into_iter().filter(|c| theirs.contains(c)).collect();
        if shared.is_empty() {
            return Ok(0);
        }
        let list = shared.join(", ");
        let tx = self.conn.transaction()?;
        let n = tx.execute(&format!("INSERT OR IGNORE INTO main.{table}({list}) SELECT {list} FROM damaged.{table}"), [])?;
        tx.commit()?;
        Ok(n)
    }

    /// Numbers the next outbox records from `first` on (unless they already are).
    pub fn number_outbox_from(&self, first: i64) -> Result<()> {
        self.conn.execute("DELETE FROM sqlite_sequence WHERE name = 'outbox' AND seq < ?1", [first])?;
        self.conn.execute("INSERT INTO sqlite_sequence(name, seq) SELECT 'outbox', ?1 WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'outbox')", [first])?;
        Ok(())
    }

    /// Records a state transition.
    pub fn record_transition(&self, at: DateTime<Utc>, from: StateKind, to: StateKind, reason: &str) -> Result<()> {
        self.conn.execute(
            "INSERT INTO transitions(at_utc, from_state, to_state, reason) VALUES (?1, ?2, ?3, ?4)",
            params![ts(at), from.as_str(), to.as_str(), reason],
        )?;
        Ok(())
    }

    /// Records an owner command and the settings it leaves, in one transaction.
    pub fn record_command(&mut self, at: DateTime<Utc>, command: &Command, saved: &Saved) -> Result<()> {
        let tx = self.conn.transaction()?;
        tx.execute("INSERT INTO commands(at_utc, command) VALUES (?1, ?2)", params![ts(at), serde_json::to_string(command)?])?;
        tx.execute(
            "INSERT INTO meta(key, value) VALUES ('policy_saved', ?1) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            [serde_json::to_string(saved)?],
        )?;
        tx.commit()?;
        Ok(())
    }

    /// Records a counted interruption (with the settings it leaves) and queues it for the
    /// coordinator. Recording the same (day, number) twice is a no-op; returns the row id.
    pub fn record_interruption(&mut self, i: &Interruption, saved: &Saved) -> Result<i64> {
        let tx = self.conn.transaction()?;
        let inserted = tx.execute(
            "INSERT OR IGNORE INTO interruptions(day, number, limit_n, cause, mode, at_utc) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![
                i.day.to_string(),
                i.number,
                i.limit,
                serde_json::to_value(i.cause)?.as_str().unwrap_or_default(),
                i.mode.short(),
                ts(i.at_utc)
            ],
        )?;
        let id: i64 =
            tx.query_row("SELECT id FROM interruptions WHERE day = ?1 AND number = ?2", params![i.day.to_string(), i.number], |r| {
                r.get(0)
            })?;
        if inserted == 1 {
            tx.execute("INSERT INTO outbox(kind, payload) VALUES ('interruption', ?1)", [serde_json::to_string(i)?])?;
        }
        tx.execute(
            "INSERT INTO meta(key, value) VALUES ('policy_saved', ?1) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            [serde_json::to_string(saved)?],
        )?;
        tx.commit()?;
        Ok(id)
    }

    /// Adds the measured memory-restore times to an interruption: swapped pages and file
    /// cache, each in its own column. A time already recorded is kept (one restore per
    /// eviction: a second report for the same interruption neither replaces nor adds).
    pub fn set_restore_times(&self, interruption_id: i64, anon_ms: Option<u64>, cache_ms: Option<u64>) -> Result<()> {
        self.conn.execute(
            "UPDATE interruptions SET restore_ms = COALESCE(restore_ms, ?2), cache_restore_ms = COALESCE(cache_restore_ms, ?3) WHERE id = ?1",
            params![interruption_id, anon_ms.map(|v| v as i64), cache_ms.map(|v| v as i64)],
        )?;
        Ok(())
    }

    /// Accounts a guest's cumulative counters: the day's donated time advances by the
    /// growth since the last call for that guest. Idempotent for repeated totals; counters
    /// that went backwards (a new guest reusing a name) count from zero.
    /// Returns the (cpu µs, wall ms) added.
    pub fn record_guest_totals(&mut self, day: NaiveDate, at: DateTime<Utc>, g: &GuestTotals) -> Result<(u64, u64)> {
        self.record_guest_totals_while(day, at, g, false)
    }

    /// [`Self::record_guest_totals`], saying whether the owner was present while the
    /// growth was donated (lingering or lent while light): then it is also added to the
    /// day's `present_*` part, in the same transaction, so the part never exceeds or
    /// doubles the total.
    pub fn record_guest_totals_while(
        &mut self,
        day: NaiveDate,
        at: DateTime<Utc>,
        g: &GuestTotals,
        owner_present: bool,
    ) -> Result<(u64, u64)> {
        let tx = self.conn.transaction()?;
        let prev: Option<(i64, i64)> = tx
            .query_row("SELECT cpu_us, wall_ms FROM guest_usage WHERE guest = ?1", [&g.guest], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()?;
        let (pc, pw) = prev.map_or((0u64, 0u64), |(c, w)| (c as u64, w as u64));
        let dc = if g.cpu_us >= pc { g.cpu_us - pc } else { g.cpu_us };
        let dw = if g.wall_ms >= pw { g.wall_ms - pw } else { g.wall_ms };
        tx.execute(
            "INSERT INTO guest_usage(guest, started_utc, cpu_us, wall_ms, peak_mem) VALUES (?1, ?2, ?3, ?4, ?5)
             ON CONFLICT(guest) DO UPDATE SET cpu_us = excluded.cpu_us, wall_ms = excluded.wall_ms,
             peak_mem = MAX(peak_mem, excluded.peak_mem)",
            params![g.guest, ts(at), g.cpu_us as i64, g.wall_ms as i64, g.peak_mem_bytes as i64],
        )?;
        if dc > 0 || dw > 0 {
            let (pc, pw) = if owner_present { (dc as i64, dw as i64) } else { (0, 0) };
            tx.execute(
                "INSERT INTO donated_days(day, cpu_us, wall_ms, present_cpu_us, present_wall_ms) VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT(day) DO UPDATE SET cpu_us = cpu_us + excluded.cpu_us, wall_ms = wall_ms + excluded.wall_ms,
                 present_cpu_us = present_cpu_us + excluded.present_cpu_us, present_wall_ms = present_wall_ms + excluded.present_wall_ms",
                params![day.to_string(), dc as i64, dw as i64, pc, pw],
            )?;
            let payload = serde_json::json!({"guest": g.guest, "day": day, "cpu_us": dc, "wall_ms": dw, "at_utc": ts(at)});
            tx.execute("INSERT INTO outbox(kind, payload) VALUES ('donation', ?1)", [payload.to_string()])?;
        }
        tx.commit()?;
        Ok((dc, dw))
    }

    /// Donated time on `day`.
    pub fn donated_on(&self, day: NaiveDate) -> Result<DayDonation> {
        let row: Option<(i64, i64, i64, i64)> = self
            .conn
            .query_row("SELECT cpu_us, wall_ms, present_cpu_us, present_wall_ms FROM donated_days WHERE day = ?1", [day.to_string()], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
            })
            .optional()?;
        let (c, w, pc, pw) = row.unwrap_or((0, 0, 0, 0));
        Ok(DayDonation {
            day,
            cpu_s: c as f64 / 1e6,
            wall_s: w as f64 / 1e3,
            present_cpu_s: pc as f64 / 1e6,
            present_wall_s: pw as f64 / 1e3,
        })
    }

    /// Donated time for each of the `days` days ending with `last` (oldest first; days
    /// without donation are zero).
    pub fn donated_days(&self, last: NaiveDate, days: u32) -> Result<Vec<DayDonation>> {
        (0..days).rev().map(|i| self.donated_on(last - chrono::Duration::days(i as i64))).collect()
    }

    /// The interruptions counted against `day`.
    pub fn interruptions(&self, day: NaiveDate) -> Result<Vec<InterruptionRow>> {
        let mut st = self.conn.prepare(
            "SELECT id, day, number, limit_n, cause, mode, at_utc, restore_ms, cache_restore_ms FROM interruptions WHERE day = ?1 ORDER BY number",
        )?;
        let rows = st.query_map([day.to_string()], |r| {
            let day: String = r.get(1)?;
            Ok(InterruptionRow {
                id: r.get(0)?,
                day: day.parse().unwrap_or_default(),
                number: r.get(2)?,
                limit: r.get(3)?,
                cause: r.get(4)?,
                mode: r.get(5)?,
                at_utc: r.get(6)?,
                restore_ms: r.get::<_, Option<i64>>(7)?.map(|v| v as u64),
                cache_restore_ms: r.get::<_, Option<i64>>(8)?.map(|v| v as u64),
            })
        })?;
        Ok(rows.collect::<std::result::Result<_, _>>()?)
    }

    /// Transitions recorded between two instants, oldest first.
    pub fn transitions(&self, from: DateTime<Utc>, to: DateTime<Utc>) -> Result<Vec<TransitionRow>> {
        let mut st = self
            .conn
            .prepare("SELECT at_utc, from_state, to_state, reason FROM transitions WHERE at_utc >= ?1 AND at_utc < ?2 ORDER BY id")?;
        let rows = st.query_map(params![ts(from), ts(to)], |r| {
            Ok(TransitionRow { at_utc: r.get(0)?, from: r.get(1)?, to: r.get(2)?, reason: r.get(3)? })
        })?;
        Ok(rows.collect::<std::result::Result<_, _>>()?)
    }

    /// Appends trace rows in one transaction (a row for an existing second is replaced).
    ///
    /// This runs once a minute in the idle agent, so every statement, `BEGIN` and
    /// `COMMIT` included, is a cached prepared statement: SQLite's parser (and its code
    /// pages) stays out of the idle loop.
    pub fn append_trace(&mut self, rows: &[TraceRow]) -> Result<()> {
        self.conn.prepare_cached("BEGIN")?.execute([])?;
        let written = (|| -> Result<()> {
            let mut st =
                self.conn.prepare_cached("INSERT OR REPLACE INTO trace(t, owner_cpu, owner_mem, input) VALUES (?1, ?2, ?3, ?4)")?;
            for r in rows {
                st.execute(params![r.t, r.owner_cpu as f64, r.owner_mem_bytes as i64, r.input])?;
            }
            self.conn.prepare_cached("COMMIT")?.execute([])?;
            Ok(())
        })();
        if written.is_err() && !self.conn.is_autocommit() {
            let _ = self.conn.execute_batch("ROLLBACK");
        }
        written
    }

    /// Deletes trace rows older than `before` (unix seconds); returns how many.
    pub fn prune_trace(&self, before: i64) -> Result<usize> {
        Ok(self.conn.execute("DELETE FROM trace WHERE t < ?1", [before])?)
    }

    /// Trace rows in `[from, to)` (unix seconds).
    pub fn trace(&self, from: i64, to: i64) -> Result<Vec<TraceRow>> {
        let mut st = self.conn.prepare("SELECT t, owner_cpu, owner_mem, input FROM trace WHERE t >= ?1 AND t < ?2 ORDER BY t")?;
        let rows = st.query_map(params![from, to], |r| {
            Ok(TraceRow {
                t: r.get(0)?,
                owner_cpu: r.get::<_, f64>(1)? as f32,
                owner_mem_bytes: r.get::<_, i64>(2)? as u64,
                input: r.get(3)?,
            })
        })?;
        Ok(rows.collect::<std::result::Result<_, _>>()?)
    }

    /// Records not yet acknowledged by the coordinator, oldest first, as they are sent.
    pub fn outbox_pending(&self, limit: usize) -> Result<Vec<Record>> {
        let mut st = self.conn.prepare("SELECT seq, kind, payload FROM outbox WHERE synced = 0 ORDER BY seq LIMIT ?1")?;
        let rows = st.query_map([limit as i64], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?, r.get::<_, String>(2)?)))?;
        let mut out = Vec::new();
        for row in rows {
            let (seq, kind, payload) = row?;
            out.push(Record { seq, kind, payload: serde_json::from_str(&payload)? });
        }
        Ok(out)
    }

    /// Marks every record up to `seq` as acknowledged.
    pub fn outbox_acked(&self, seq: i64) -> Result<()> {
        self.conn.execute("UPDATE outbox SET synced = 1 WHERE seq <= ?1 AND synced = 0", [seq])?;
        Ok(())
    }

    /// Runs an SQLite integrity check.
    pub fn check(&self) -> Result<bool> {
        let r: String = self.conn.query_row("PRAGMA integrity_check", [], |r| r.get(0))?;
        Ok(r == "ok")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::EvictionMode;
    use crate::policy::ReturnCause;

    fn interruption(day: NaiveDate, number: u32) -> Interruption {
        Interruption {
            day,
            number,
            limit: 5,
            cause: ReturnCause::Input,
            at_utc: Utc::now(),
            at_mono: crate::clock::MonoMs(1),
            mode: EvictionMode::LingerLonger,
        }
    }

    /// The ledger (when the owner was at the machine) and SQLite's -wal and -shm beside
    /// it are the owner's only, whatever the umask.
    #[test]
    fn the_ledger_files_are_owner_only() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("data/ledger.db");
        let ledger = Ledger::open(&path).expect("open");
        ledger.record_transition(Utc::now(), StateKind::Idle, StateKind::Donating, "test").expect("write");
        for p in [path.clone(), path.with_extension("db-wal"), path.with_extension("db-shm"), dir.path().join("data")] {
            let mode = std::fs::metadata(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display())).permissions().mode() & 0o777;
            assert_eq!(mode & 0o077, 0, "{} is {mode:o}", p.display());
        }
    }

    #[test]
    fn interruptions_are_unique_per_day_and_number() {
        let mut l = Ledger::in_memory().unwrap();
        let d = NaiveDate::from_ymd_opt(2026, 11, 23).unwrap();
        let a = l.record_interruption(&interruption(d, 1), &Saved::default()).unwrap();
        let b = l.record_interruption(&interruption(d, 1), &Saved::default()).unwrap();
        assert_eq!(a, b);
        l.record_interruption(&interruption(d, 2), &Saved::default()).unwrap();
        assert_eq!(l.interruptions_on(d).unwrap(), 2);
        assert_eq!(l.outbox_pending(10).unwrap().len(), 2, "the replay was not queued twice");
    }

    #[test]
    fn both_restore_times_are_recorded_once_each_in_their_own_column() {
        let mut l = Ledger::in_memory().unwrap();
        let d = NaiveDate::from_ymd_opt(2026, 11, 23).unwrap();
        let a = l.record_interruption(&interruption(d, 1), &Saved::default()).unwrap();
        let b = l.record_interruption(&interruption(d, 2), &Saved::default()).unwrap();
        l.set_restore_times(a, Some(120), Some(340)).unwrap();
        // A second report for the same interruption neither replaces nor adds.
        l.set_restore_times(a, Some(999), Some(999)).unwrap();
        // Only a file-cache restore (nothing was in swap), then a late anonymous one.
        l.set_restore_times(b, None, Some(50)).unwrap();
        l.set_restore_times(b, Some(7), None).unwrap();
        let rows = l.interruptions(d).unwrap();
        let times: Vec<_> = rows.iter().map(|r| (r.restore_ms, r.cache_restore_ms)).collect();
        assert_eq!(times, vec![(Some(120), Some(340)), (Some(7), Some(50))]);
        assert_eq!(l.outbox_pending(10).unwrap().len(), 2, "restore times queue nothing new");
    }

    #[test]
    fn a_ledger_from_before_the_file_cache_restore_is_upgraded_in_place() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ledger.sqlite");
        {
            let c = Connection::open(&path).unwrap();
            c.execute_batch(
                "CREATE TABLE interruptions (id INTEGER PRIMARY KEY, day TEXT NOT NULL, number INTEGER NOT NULL, \
                 limit_n INTEGER NOT NULL, cause TEXT NOT NULL, mode TEXT NOT NULL, at_utc TEXT NOT NULL, restore_ms INTEGER, \
                 UNIQUE(day, number)); \
                 INSERT INTO interruptions(day, number, limit_n, cause, mode, at_utc, restore_ms) \
                 VALUES ('2026-11-23', 1, 5, 'input', 'LL', '2026-11-23T10:00:00.000Z', 80);",
            )
            .unwrap();
        }
        let l = Ledger::open(&path).unwrap();
        let d = NaiveDate::from_ymd_opt(2026, 11, 23).unwrap();
        let rows = l.interruptions(d).unwrap();
        assert_eq!((rows[0].restore_ms, rows[0].cache_restore_ms), (Some(80), None));
        l.set_restore_times(rows[0].id, None, Some(25)).unwrap();
        assert_eq!(l.interruptions(d).unwrap()[0].cache_restore_ms, Some(25));
        drop(l);
        // Opening again leaves it as it is.
        assert_eq!(Ledger::open(&path).unwrap().interruptions(d).unwrap()[0].cache_restore_ms, Some(25));
    }

    #[test]
    fn guest_totals_advance_by_difference_only() {
        let mut l = Ledger::in_memory().unwrap();
        let d = NaiveDate::from_ymd_opt(2026, 11, 23).unwrap();
        let g = |cpu, wall| GuestTotals { guest: "g1".into(), cpu_us: cpu, wall_ms: wall, peak_mem_bytes: 10 };
        l.record_guest_totals(d, Utc::now(), &g(1_000_000, 2000)).unwrap();
        l.record_guest_totals(d, Utc::now(), &g(1_000_000, 2000)).unwrap();
        l.record_guest_totals(d, Utc::now(), &g(3_000_000, 5000)).unwrap();
        let day = l.donated_on(d).unwrap();
        assert_eq!(day.cpu_s, 3.0);
        assert_eq!(day.wall_s, 5.0);
        let seqs: Vec<i64> = l.outbox_pending(10).unwrap().iter().map(|r| r.seq).collect();
        assert_eq!(seqs.len(), 2);
        l.outbox_acked(seqs[0]).unwrap();
        assert_eq!(l.outbox_pending(10).unwrap().len(), 1);
    }

    #[test]
    fn time_donated_while_the_owner_is_present_is_a_part_of_the_total() {
        let mut l = Ledger::in_memory().unwrap();
        let d = NaiveDate::from_ymd_opt(2026, 11, 23).unwrap();
        let g = |cpu, wall| GuestTotals { guest: "g1".into(), cpu_us: cpu, wall_ms: wall, peak_mem_bytes: 10 };
        l.record_guest_totals_while(d, Utc::now(), &g(1_000_000, 2000), false).unwrap();
        l.record_guest_totals_while(d, Utc::now(), &g(1_500_000, 4000), true).unwrap();
        // The same totals again (a retry) add nothing to either.
        l.record_guest_totals_while(d, Utc::now(), &g(1_500_000, 4000), true).unwrap();
        l.record_guest_totals_while(d, Utc::now(), &g(2_000_000, 5000), false).unwrap();
        let day = l.donated_on(d).unwrap();
        assert_eq!((day.cpu_s, day.wall_s), (2.0, 5.0));
        assert_eq!((day.present_cpu_s, day.present_wall_s), (0.5, 2.0));
    }

    #[test]
    fn an_older_ledger_is_upgraded_in_place() {
        let dir = std::env::temp_dir().join(format!("lull-ledger-upgrade-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("ledger.sqlite");
        {
            let c = Connection::open(&path).unwrap();
            c.execute_batch(
                "CREATE TABLE donated_days (day TEXT PRIMARY KEY, cpu_us INTEGER NOT NULL, wall_ms INTEGER NOT NULL);
                             INSERT INTO donated_days VALUES ('2026-11-23', 7000000, 9000);",
            )
            .unwrap();
        }
        let l = Ledger::open(&path).unwrap();
        let day = l.donated_on(NaiveDate::from_ymd_opt(2026, 11, 23).unwrap()).unwrap();
        assert_eq!((day.cpu_s, day.wall_s, day.present_cpu_s), (7.0, 9.0, 0.0));
        drop(l);
        Ledger::open(&path).expect("opening an upgraded ledger again");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn saved_settings_round_trip() {
        let l = Ledger::in_memory().unwrap();
        let s =
            Saved { pause: Some(crate::policy::SavedPause::UntilResumed), donate: None, budget_day: NaiveDate::from_ymd_opt(2026, 1, 2) };
        l.store_saved(&s).unwrap();
        assert_eq!(l.load_saved().unwrap(), s);
    }
}
