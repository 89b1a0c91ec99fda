//! The owner's daily budget across damage to the ledger. The trust model's promise is
//! that a damaged ledger is detected and said, never silently reset to a fresh day.
//!
//! At every start, before the driver uses the ledger ([`open_checked`]): the file is
//! examined — missing, empty, not SQLite, shorter than its header says, SQLite's
//! `quick_check` of the budget's own tables (`meta`, `interruptions`: microseconds,
//! whatever the size of the trace), and today's count and settings read. A damaged file
//! is renamed aside (`ledger.damaged-<local time>.db`, with its `-wal`/`-shm`), never
//! deleted; a new ledger takes its place and every table that can still be read whole is
//! copied into it. Today's count is then the largest of what survives: the ledger (or
//! its salvage) and the checksummed record beside it ([`crate::budget_record`]). When
//! nothing survives, the day counts as used up (the machine leaves the pool until the
//! next local day) rather than fresh. A missing ledger is new only when nothing says an
//! agent ran here before (no record, and the data directory's lock file was not there).
//! The coordinator keeps this machine's interruptions too, but no route gives them back
//! to an agent, so it is not a source. What was found and done is kept in the ledger and
//! said in `lull status` and the tray for the rest of the day.
//!
//! After start ([`check_in_background`]): the full `quick_check` (seconds for a year of
//! trace) runs on a thread of its own at the lowest CPU and I/O priority; damage it finds is
//! said at once and noted in the record, so the next start sets the ledger aside.

use crate::budget_record::{self, BudgetRecord, RecordRead};
use crate::clock::Now;
use crate::control::AlertKind;
use crate::ledger::{Ledger, LedgerError, BUDGET_TABLES, TABLES};
use crate::policy::Saved;
use chrono::NaiveDate;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// What the start-up check found and did, in the owner's words.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    /// The ledger was recovered, or only today's record rebuilt.
    #[serde(default = "recovered")]
    pub kind: AlertKind,
    /// The budget day it concerns (it is said until that day ends).
    pub day: NaiveDate,
    pub message: String,
    /// What the owner may do about it, if anything.
    pub action: Option<String>,
}

fn recovered() -> AlertKind {
    AlertKind::LedgerRecovered
}

/// What the start-up check needs to know besides the files.
#[derive(Clone, Copy, Debug)]
pub struct StartFacts {
    pub now: Now,
    /// The daily interruption limit in force.
    pub limit: u32,
    /// An agent ran in this data directory before (its lock file was there).
    pub ran_before: bool,
}

/// The ledger the driver runs with, and the budget it starts from.
pub struct Checked {
    pub ledger: Ledger,
    /// The owner's settings, with the budget day the count is for.
    pub saved: Saved,
    /// Interruptions used on `saved.budget_day`.
    pub used: u32,
    /// What was found (now, or earlier today), to be said once.
    pub finding: Option<Finding>,
}

/// The meta keys this module keeps in the ledger.
const FINDING_KEY: &str = "integrity_finding";
const RECORD_WRITTEN_KEY: &str = "budget_record_written";

/// How the ledger file was found.
enum Examined {
    Missing,
    Intact,
    Damaged(String),
}

/// What became of the ledger file.
enum Outcome {
    Intact,
    /// Missing; leftover `-wal`/`-shm` files were set aside under this name.
    Missing {
        leftovers: Option<PathBuf>,
    },
    Damaged {
        why: String,
        aside: PathBuf,
        salvaged: Vec<(&'static str, Result<usize, String>)>,
    },
}

/// Opens the ledger at `path` for the driver after checking it and today's record, as
/// the module doc says. Fails only when no ledger can be opened at all (the agent then
/// does not start).
pub fn open_checked(path: &Path, facts: &StartFacts) -> Result<Checked, LedgerError> {
    let t0 = std::time::Instant::now();
    let record_path = budget_record::path_for(path);
    let record = budget_record::read(&record_path);
    let today = facts.now.local_date();
    let set_aside_failed = |e: std::io::Error| LedgerError::SetAside { path: path.display().to_string(), source: e };
    let (ledger, outcome) = match examine(path, &record, today) {
        Examined::Intact => (Ledger::open(path)?, Outcome::Intact),
        Examined::Missing => {
            // A journal left without its database would be replayed into the new one.
            let leftovers = set_aside(path, facts.now).map_err(set_aside_failed)?;
            (Ledger::open(path)?, Outcome::Missing { leftovers })
        }
        Examined::Damaged(why) => {
            let aside = set_aside(path, facts.now).map_err(set_aside_failed)?.unwrap_or_else(|| path.to_path_buf());
            let mut fresh = Ledger::open(path)?;
            let salvaged = fresh.salvage_from(&aside, facts.now.utc.timestamp_millis());
            (fresh, Outcome::Damaged { why, aside, salvaged })
        }
    };
    let mut saved = ledger.load_saved().unwrap_or_else(|e| {
        tracing::warn!("the owner's saved settings could not be read ({e}): starting without a pause or offer");
        Saved::default()
    });
    let record_day = match &record {
        RecordRead::Valid(r) => Some(r.day),
        _ => None,
    };
    let day = [Some(today), saved.budget_day, record_day].into_iter().flatten().max().unwrap_or(today);
    saved.budget_day = Some(day);
    let ledger_count = match &outcome {
        Outcome::Intact => Some(ledger.interruptions_on(day)?),
        Outcome::Damaged { salvaged, .. } if salvaged.iter().any(|(t, r)| *t == "interruptions" && r.is_ok()) => {
            Some(ledger.interruptions_on(day)?)
        }
        _ => None,
    };
    let record_count = match &record {
        RecordRead::Valid(r) if r.day == day => Some(r.used),
        RecordRead::Valid(_) => Some(0),
        _ => None,
    };
    let lost = match &outcome {
        Outcome::Intact => false,
        Outcome::Damaged { .. } => true,
        Outcome::Missing { leftovers } => leftovers.is_some() || record != RecordRead::Missing || facts.ran_before,
    };
    let used = match ledger_count.max(record_count) {
        Some(n) => n,
        None if lost => facts.limit,
        None => 0,
    };
    let record_was_written = ledger.meta_json::<bool>(RECORD_WRITTEN_KEY).ok().flatten().unwrap_or(false);
    let said = Said { path, record_path: &record_path, day, used, limit: facts.limit };
    let found = if lost {
        Some(said.lost_ledger(&outcome, ledger_count, record_count))
    } else {
        said.record_trouble(&record, record_was_written, ledger_count.unwrap_or(0), record_count)
    };
    if ledger.interruptions_on(day)? < used {
        ledger.set_budget_floor(day, used)?;
    }
    let kept = BudgetRecord { day, used, limit: facts.limit, written_utc: stamp(facts.now), ledger_damage: None };
    match budget_record::write(&record_path, &kept) {
        Ok(()) => ledger.set_meta_json(RECORD_WRITTEN_KEY, Some(&true))?,
        Err(e) => tracing::warn!("today's record {} could not be written: {e}", record_path.display()),
    }
    let finding = match found {
        Some(f) => {
            tracing::warn!("{}", f.message);
            ledger.set_meta_json(FINDING_KEY, Some(&f))?;
            Some(f)
        }
        None => ledger.meta_json::<Finding>(FINDING_KEY).ok().flatten().filter(|f| f.day == day),
    };
    tracing::info!(ms = t0.elapsed().as_millis() as u64, used, day = %day, "ledger checked at start");
    Ok(Checked { ledger, saved, used, finding })
}

/// Writes today's record after an interruption was counted (whether or not the ledger
/// took it), keeping damage the background check found.
pub fn keep_count(ledger_path: &Path, now: Now, day: NaiveDate, used: u32, limit: u32, damage: Option<String>) -> std::io::Result<()> {
    let record = BudgetRecord { day, used, limit, written_utc: stamp(now), ledger_damage: damage };
    budget_record::write(&budget_record::path_for(ledger_path), &record)
}

/// Notes in today's record that the background check found the ledger damaged, so the
/// next start sets it aside.
pub fn remember_damage(ledger_path: &Path, now: Now, problem: &str) -> std::io::Result<()> {
    let path = budget_record::path_for(ledger_path);
    let RecordRead::Valid(mut r) = budget_record::read(&path) else {
        return Err(std::io::Error::other("today's record is missing or damaged"));
    };
    r.ledger_damage = Some(problem.to_string());
    r.written_utc = stamp(now);
    budget_record::write(&path, &r)
}

/// Runs SQLite's full `quick_check` of the ledger at `path` on its own read-only
/// connection, on a thread of its own at the lowest priority (SCHED_IDLE, nice 19, idle
/// I/O class, as guests run), and answers with what it found
/// wrong (`Ok(None)`: nothing), or why it could not run.
pub fn check_in_background(path: PathBuf) -> tokio::sync::oneshot::Receiver<Result<Option<String>, String>> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    let spawned = std::thread::Builder::new().name("ledger-check".into()).spawn(move || {
        // Linux applies these to the calling thread only: SCHED_IDLE, nice 19, idle I/O.
        if let Err(e) = crate::sys::sched::lowest_for_this_thread() {
            tracing::debug!("the ledger check runs at normal priority: {e}");
        }
        let t0 = std::time::Instant::now();
        let found = Ledger::open_read_only(&path).and_then(|l| l.quick_check(None)).map_err(|e| e.to_string());
        tracing::info!(ms = t0.elapsed().as_millis() as u64, intact = matches!(found, Ok(None)), "ledger quick_check (background)");
        let _ = tx.send(found);
    });
    if let Err(e) = spawned {
        tracing::warn!("the ledger's background check could not start: {e}");
    }
    rx
}

fn stamp(now: Now) -> String {
    now.utc.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// How the ledger file at `path` is, without changing it.
fn examine(path: &Path, record: &RecordRead, today: NaiveDate) -> Examined {
    let len = match std::fs::metadata(path) {
        Ok(m) => m.len(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Examined::Missing,
        Err(e) => return Examined::Damaged(format!("cannot be read ({e})")),
    };
    if len == 0 {
        return Examined::Damaged("is empty (0 bytes): it was truncated".into());
    }
    if let Some(why) = header_problem(path, len) {
        return Examined::Damaged(why);
    }
    let damaged = |e: LedgerError| Examined::Damaged(format!("cannot be read ({e})"));
    let ro = match Ledger::open_read_only(path) {
        Ok(l) => l,
        Err(e) => return damaged(e),
    };
    let present = match ro.tables_present() {
        Ok(p) => p,
        Err(e) => return damaged(e),
    };
    if present.is_empty() {
        return Examined::Damaged("holds none of the ledger's tables (another program's database?)".into());
    }
    let budget: Vec<&str> = BUDGET_TABLES.iter().copied().filter(|t| present.iter().any(|p| p == t)).collect();
    match ro.quick_check(Some(&budget)) {
        Ok(None) => {}
        Ok(Some(problem)) => return Examined::Damaged(format!("fails SQLite's quick_check ({problem})")),
        Err(e) => return damaged(e),
    }
    if budget.len() == BUDGET_TABLES.len() {
        if let Err(e) = ro.load_saved().and_then(|_| ro.interruptions_on(today)) {
            return damaged(e);
        }
    }
    if let RecordRead::Valid(BudgetRecord { ledger_damage: Some(problem), .. }) = record {
        return Examined::Damaged(format!("was found damaged by the last background check ({problem})"));
    }
    Examined::Intact
}

/// What is wrong with the file's SQLite header, if anything: not SQLite's magic string,
/// or shorter than the pages its (valid) header counts.
fn header_problem(path: &Path, len: u64) -> Option<String> {
    use std::io::Read;
    let mut h = [0u8; 100];
    let read = std::fs::File::open(path).and_then(|mut f| f.read_exact(&mut h));
    if len < 100 || read.is_err() {
        return Some(format!("is truncated ({len} bytes, less than SQLite's 100-byte header)"));
    }
    if &h[..16] != b"SQLite format 3\0" {
        return Some("is not an SQLite database (it does not begin with SQLite's header)".into());
    }
    let page = match u16::from_be_bytes([h[16], h[17]]) {
        1 => 65_536,
        p => u64::from(p),
    };
    let pages = u64::from(u32::from_be_bytes([h[28], h[29], h[30], h[31]]));
    // The page count is valid when the change counter matches "version valid for".
    let counted = h[24..28] == h[92..96];
    (counted && len < page * pages).then(|| format!("is truncated ({len} bytes; its header counts {pages} pages of {page} bytes)"))
}

/// Renames the ledger and its `-wal`/`-shm` files aside as `ledger.damaged-<local
/// time>.db` (never over an earlier one); returns the new name of the database, when
/// anything was moved.
fn set_aside(path: &Path, now: Now) -> std::io::Result<Option<PathBuf>> {
    let with = |p: &Path, suffix: &str| PathBuf::from(format!("{}{suffix}", p.display()));
    let parts = ["", "-wal", "-shm"];
    if !parts.iter().any(|s| with(path, s).exists()) {
        return Ok(None);
    }
    let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("ledger");
    let ext = path.extension().and_then(|s| s.to_str()).unwrap_or("db");
    let time = now.local.format("%Y%m%dT%H%M%S");
    let mut aside = path.with_file_name(format!("{stem}.damaged-{time}.{ext}"));
    let mut n = 1;
    while parts.iter().any(|s| with(&aside, s).exists()) {
        n += 1;
        aside = path.with_file_name(format!("{stem}.damaged-{time}-{n}.{ext}"));
    }
    for s in parts {
        if with(path, s).exists() {
            std::fs::rename(with(path, s), with(&aside, s))?;
        }
    }
    Ok(Some(aside))
}

/// The facts every finding quotes.
struct Said<'a> {
    path: &'a Path,
    record_path: &'a Path,
    day: NaiveDate,
    used: u32,
    limit: u32,
}

fn file_name(p: &Path) -> String {
    p.file_name().map_or_else(|| p.display().to_string(), |n| n.to_string_lossy().into_owned())
}

impl Said<'_> {
    fn finding(&self, kind: AlertKind, message: String, action: Option<String>) -> Finding {
        Finding { kind, day: self.day, message, action }
    }

    /// The ledger was lost (damaged, or missing where one was): what happened, what was
    /// kept and salvaged, and where today's count comes from.
    fn lost_ledger(&self, outcome: &Outcome, ledger: Option<u32>, record: Option<u32>) -> Finding {
        let (what, kept) = match outcome {
            Outcome::Damaged { why, aside, salvaged } => {
                let (ok, lost): (Vec<_>, Vec<_>) = salvaged.iter().partition(|(_, r)| r.is_ok());
                let names = |v: &[&(&str, Result<usize, String>)]| v.iter().map(|(t, _)| *t).collect::<Vec<_>>().join(", ");
                let salvage = match (ok.is_empty(), lost.is_empty()) {
                    (_, true) => format!("every table ({}) was copied into a new ledger", TABLES.len()),
                    (true, false) => "nothing in it could be read".to_string(),
                    (false, false) => format!("copied into a new ledger: {}; lost: {}", names(&ok), names(&lost)),
                };
                (format!("The ledger {} {why}", self.path.display()), format!("It is kept as {}; {salvage}.", file_name(aside)))
            }
            Outcome::Missing { leftovers } => {
                let kept = leftovers.as_ref().map(|p| format!("Its leftover journal is kept as {}-wal.", file_name(p))).unwrap_or_default();
                (format!("The ledger {} is missing", self.path.display()), kept)
            }
            Outcome::Intact => (String::new(), String::new()),
        };
        let record_name = file_name(self.record_path);
        let (count, action) = match (ledger, record) {
            (None, None) => (
                format!(
                    "Nothing survives to say how many interruptions today ({}) used, so today's budget counts as used up ({} of {}): this machine stays out of the pool until tomorrow.",
                    self.day, self.used, self.limit
                ),
                Some("If you want guest work today anyway, raise today's limit: `lull limits --interruptions N`.".to_string()),
            ),
            (Some(l), Some(r)) => (
                format!(
                    "Today's interruptions, {} of {}, are the larger of what survives: the salvaged ledger ({l}) and the checksummed record {record_name} ({r}). The agent goes on with the new ledger.",
                    self.used, self.limit
                ),
                None,
            ),
            (Some(_), None) => (
                format!(
                    "Today's interruptions, {} of {}, come from the salvaged ledger ({record_name} is gone too). The agent goes on with the new ledger.",
                    self.used, self.limit
                ),
                None,
            ),
            (None, Some(_)) => (
                format!(
                    "Today's interruptions, {} of {}, come from the checksummed record {record_name}. The agent goes on with a new ledger.",
                    self.used, self.limit
                ),
                None,
            ),
        };
        self.finding(AlertKind::LedgerRecovered, format!("{what}. {kept} {count}").replace("  ", " "), action)
    }

    /// The ledger is intact: anything wrong with today's record, or a record that
    /// counts more than the ledger (an interruption the ledger did not take).
    fn record_trouble(&self, record: &RecordRead, was_written: bool, ledger: u32, record_count: Option<u32>) -> Option<Finding> {
        let name = self.record_path.display();
        let rebuilt = format!("rebuilt from the ledger ({} of {} used today)", self.used, self.limit);
        match record {
            RecordRead::Damaged(why) => Some(self.finding(AlertKind::RecordRebuilt, format!("Today's record {name} {why}; {rebuilt}."), None)),
            RecordRead::Missing if was_written => Some(self.finding(AlertKind::RecordRebuilt, format!("Today's record {name} was missing; {rebuilt}."), None)),
            RecordRead::Valid(_) if record_count > Some(ledger) => Some(self.finding(
                AlertKind::LedgerRecovered,
                format!(
                    "The ledger holds {ledger} interruptions today but today's record ({name}) holds {}: the ledger did not take one (a failed write). Counting {} of {}.",
                    record_count.unwrap_or(0),
                    self.used,
                    self.limit
                ),
                None,
            )),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::EvictionMode;
    use crate::policy::{Interruption, ReturnCause};

    fn now() -> Now {
        let utc = chrono::Utc::now();
        Now { mono: crate::clock::MonoMs(1), utc, local: utc.naive_utc() }
    }

    fn facts(ran_before: bool) -> StartFacts {
        StartFacts { now: now(), limit: 5, ran_before }
    }

    /// A data directory whose agent counted `n` interruptions today, as the driver does:
    /// ledger row, then today's record.
    fn counted(n: u32) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("ledger.db");
        let mut c = open_checked(&path, &facts(false)).expect("first start");
        assert_eq!((c.used, c.finding.is_some()), (0, false), "a first start is fresh and says nothing");
        let day = c.saved.budget_day.expect("day");
        for number in 1..=n {
            let i = Interruption {
                day,
                number,
                limit: 5,
                cause: ReturnCause::Input,
                at_utc: chrono::Utc::now(),
                at_mono: crate::clock::MonoMs(1),
                mode: EvictionMode::LingerLonger,
            };
            c.ledger.record_interruption(&i, &c.saved).expect("row");
            keep_count(&path, now(), day, number, 5, None).expect("record");
        }
        c.ledger
            .record_guest_totals(
                day,
                chrono::Utc::now(),
                &crate::ledger::GuestTotals { guest: "g".into(), cpu_us: 7_000_000, wall_ms: 9_000, peak_mem_bytes: 1 },
            )
            .expect("donation");
        (dir, path)
    }

    fn restart(path: &Path, ran_before: bool) -> Checked {
        open_checked(path, &facts(ran_before)).expect("restart")
    }

    fn message(c: &Checked) -> String {
        c.finding.as_ref().map(|f| format!("{} {}", f.message, f.action.clone().unwrap_or_default())).unwrap_or_default()
    }

    fn aside(dir: &Path) -> Vec<PathBuf> {
        let mut v: Vec<_> = std::fs::read_dir(dir)
            .expect("ls")
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.to_string_lossy().contains(".damaged-") && p.extension().is_some_and(|e| e == "db"))
            .collect();
        v.sort();
        v
    }

    /// Overwrites the first page of `table` in the (checkpointed) ledger file.
    fn corrupt_table(path: &Path, table: &str) {
        let (root, page): (i64, i64) = {
            let c = rusqlite::Connection::open(path).expect("open");
            let root = c.query_row("SELECT rootpage FROM sqlite_schema WHERE name = ?1", [table], |r| r.get(0)).expect("root");
            (root, c.query_row("PRAGMA page_size", [], |r| r.get(0)).expect("page size"))
        };
        use std::io::{Seek, Write};
        let mut f = std::fs::OpenOptions::new().write(true).open(path).expect("open file");
        f.seek(std::io::SeekFrom::Start(((root - 1) * page) as u64)).expect("seek");
        f.write_all(&vec![0x5a; page as usize]).expect("garbage");
    }

    #[test]
    fn an_intact_ledger_and_record_start_as_they_were_and_say_nothing() {
        let (_dir, path) = counted(3);
        let c = restart(&path, true);
        assert_eq!((c.used, c.finding), (3, None));
    }

    #[test]
    fn a_ledger_truncated_to_0_bytes_is_set_aside_and_today_recovered_from_the_record() {
        let (dir, path) = counted(3);
        std::fs::File::create(&path).expect("truncate");
        let c = restart(&path, true);
        assert_eq!(c.used, 3, "{}", message(&c));
        let m = message(&c);
        assert!(m.contains("is empty (0 bytes)") && m.contains("3 of 5") && m.contains("ledger.today"), "{m}");
        let kept = aside(dir.path());
        assert_eq!(kept.len(), 1, "{kept:?}");
        assert_eq!(std::fs::metadata(&kept[0]).expect("kept").len(), 0, "the damaged file is kept as it was");
        assert!(m.contains(&file_name(&kept[0])), "{m}");
        // Said again after another restart the same day, from the new ledger; still 3.
        drop(c);
        let c = restart(&path, true);
        assert_eq!((c.used, message(&c)), (3, m));
    }

    #[test]
    fn a_corrupt_page_of_interruptions_is_found_and_the_rest_salvaged() {
        let (dir, path) = counted(3);
        corrupt_table(&path, "interruptions");
        let c = restart(&path, true);
        let m = message(&c);
        assert_eq!(c.used, 3, "{m}");
        assert!(m.contains("quick_check") && m.contains("lost: interruptions") && m.contains("3 of 5"), "{m}");
        assert_eq!(aside(dir.path()).len(), 1);
        let day = c.saved.budget_day.expect("day");
        assert_eq!(c.ledger.donated_on(day).expect("donated").cpu_s, 7.0, "donated time salvaged");
        assert_eq!(c.ledger.outbox_pending(10).expect("outbox").len(), 4, "unsent records salvaged");
    }

    #[test]
    fn a_deleted_ledger_is_recovered_from_the_record() {
        let (_dir, path) = counted(3);
        std::fs::remove_file(&path).expect("rm");
        let c = restart(&path, true);
        let m = message(&c);
        assert_eq!(c.used, 3, "{m}");
        assert!(m.contains("is missing") && m.contains("checksummed record"), "{m}");
    }

    #[test]
    fn a_deleted_record_is_rebuilt_from_the_ledger_and_said() {
        let (_dir, path) = counted(3);
        std::fs::remove_file(budget_record::path_for(&path)).expect("rm");
        let c = restart(&path, true);
        let m = message(&c);
        assert_eq!(c.used, 3, "{m}");
        assert!(m.contains("was missing; rebuilt from the ledger (3 of 5"), "{m}");
        assert!(matches!(budget_record::read(&budget_record::path_for(&path)), RecordRead::Valid(r) if r.used == 3));
    }

    #[test]
    fn with_nothing_left_the_day_counts_as_used_up_unless_nothing_ever_ran_here() {
        let (_dir, path) = counted(3);
        std::fs::remove_file(&path).expect("rm ledger");
        std::fs::remove_file(budget_record::path_for(&path)).expect("rm record");
        let c = restart(&path, true);
        let m = message(&c);
        assert_eq!(c.used, 5, "{m}");
        assert!(m.contains("Nothing survives") && m.contains("out of the pool until tomorrow") && m.contains("lull limits"), "{m}");
        // The used-up day holds across a restart.
        drop(c);
        assert_eq!(restart(&path, true).used, 5);
        // A data directory where no agent ran: a first start.
        let fresh = tempfile::tempdir().expect("dir");
        let c = restart(&fresh.path().join("ledger.db"), false);
        assert_eq!((c.used, c.finding), (0, None));
    }

    #[test]
    fn a_truncated_or_foreign_file_is_damage() {
        let (dir, path) = counted(3);
        let len = std::fs::metadata(&path).expect("meta").len();
        std::fs::OpenOptions::new().write(true).open(&path).expect("open").set_len(len / 2).expect("cut");
        let c = restart(&path, true);
        assert!(message(&c).contains("is truncated"), "{}", message(&c));
        assert_eq!(c.used, 3);
        drop(c);
        std::fs::write(&path, "not a database at all, but long enough to have a header of a hundred bytes, if it were SQLite's own.")
            .expect("garbage");
        let c = restart(&path, true);
        assert!(message(&c).contains("is not an SQLite database"), "{}", message(&c));
        assert_eq!((c.used, aside(dir.path()).len()), (3, 2), "each damaged file kept");
    }

    #[test]
    fn a_record_counting_more_than_the_ledger_wins_and_is_said() {
        let (_dir, path) = counted(3);
        let day = now().local_date();
        keep_count(&path, now(), day, 4, 5, None).expect("record of a fourth the ledger did not take");
        let c = restart(&path, true);
        let m = message(&c);
        assert_eq!(c.used, 4, "{m}");
        assert!(m.contains("holds 3 interruptions today but today's record") && m.contains("holds 4"), "{m}");
        drop(c);
        assert_eq!(restart(&path, true).used, 4, "kept as the day's floor");
    }

    #[test]
    fn the_background_check_finds_damage_the_start_up_check_does_not_look_at() {
        let (dir, path) = counted(3);
        {
            let mut l = Ledger::open(&path).expect("open");
            let rows: Vec<_> = (0..3000).map(|t| crate::ledger::TraceRow { t, owner_cpu: 0.1, owner_mem_bytes: 1, input: false }).collect();
            l.append_trace(&rows).expect("trace");
        }
        corrupt_table(&path, "trace");
        let c = restart(&path, true);
        assert_eq!((c.used, c.finding.is_some()), (3, false), "the budget's tables are intact: {}", message(&c));
        drop(c);
        let rt = tokio::runtime::Builder::new_current_thread().build().expect("rt");
        let found = rt.block_on(check_in_background(path.clone())).expect("answer").expect("ran");
        let problem = found.expect("damage found");
        remember_damage(&path, now(), &problem).expect("noted");
        // The next start sets the ledger aside, keeps today's count.
        let c = restart(&path, true);
        let m = message(&c);
        assert!(m.contains("last background check") && m.contains("lost: trace"), "{m}");
        assert_eq!((c.used, aside(dir.path()).len()), (3, 1));
    }
}
