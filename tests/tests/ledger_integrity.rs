//! The owner's daily budget is never silently reset (issue 27), with a real `lull
//! agent` in a throw-away data directory and real SQLite files:
//! - three interruptions counted today, then, while the agent is stopped, the ledger
//!   truncated to 0 bytes, a page of it corrupted, the ledger deleted, today's record
//!   beside it deleted, or both: at the next start the agent says so in `lull status`
//!   (text and `--json`), keeps the damaged file aside, and today's count is 3 — or, when
//!   nothing survives, the day counts as used up and the machine is out of the pool;
//! - an interruption counted while the ledger cannot be written (its files made
//!   immutable, or its disk full): the agent never prints "counted", says what happened,
//!   and keeps the interruption counted (after a restart too, when today's record took it).
//!
//! The write-failure tests need root (cgroups for the guest, `chattr`, `mount`) and
//! `script` for the owner's pty, as tests/tests/presence.rs.

use agent_core::config::EvictionMode;
use agent_core::policy::{Interruption, ReturnCause, Saved, StateKind};
use lull_e2e::{owner_pty, skip_without, skip_without_cgroups, Agent, Kid};
use serde_json::Value;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// An agent whose ledger holds three interruptions counted today, stopped cleanly.
fn stopped_with_three_today() -> Agent {
    let mut a = Agent::new("");
    a.env.push(("LULL_INPUT".into(), "none".into()));
    a.start();
    a.stop();
    let day = chrono::Local::now().date_naive();
    {
        let mut l = agent_core::ledger::Ledger::open(&a.dir.join("ledger.db")).expect("ledger");
        let saved = Saved { budget_day: Some(day), ..Saved::default() };
        for number in 1..=3 {
            let i = Interruption {
                day,
                number,
                limit: 5,
                cause: ReturnCause::Input,
                at_utc: chrono::Utc::now(),
                at_mono: agent_core::clock::MonoMs(1),
                mode: EvictionMode::LingerLonger,
            };
            l.record_interruption(&i, &saved).expect("an interruption");
        }
    }
    a.start();
    assert_eq!(a.status().policy.interruptions_today, 3, "the agent counts the ledger's three");
    a.stop();
    a
}

/// `lull status --json` and `lull status` of a running agent.
fn statuses(a: &Agent) -> (Value, String) {
    let json = a.lull(&["status", "--json"]).output().expect("lull status --json");
    assert!(json.status.success(), "{}", String::from_utf8_lossy(&json.stderr));
    let text = a.lull(&["status"]).output().expect("lull status");
    (serde_json::from_slice(&json.stdout).expect("JSON status"), String::from_utf8_lossy(&text.stdout).into_owned())
}

/// The one alert of a status, as (kind, message).
fn the_alert(s: &Value) -> (String, String) {
    let alerts = s["alerts"].as_array().cloned().unwrap_or_default();
    assert_eq!(alerts.len(), 1, "one thing said once: {s:#}");
    (alerts[0]["kind"].as_str().unwrap_or_default().to_string(), alerts[0]["message"].as_str().unwrap_or_default().to_string())
}

/// The files set aside as damaged (databases only).
fn kept_aside(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .expect("ls")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().contains("ledger.damaged-") && p.extension().is_some_and(|e| e == "db"))
        .collect()
}

/// Starts the damaged agent and checks what every recovery must show: today's count,
/// one alert of `kind` whose message holds `says`, the same in the text status.
fn start_and_expect(a: &mut Agent, used: u64, kind: &str, says: &[&str]) -> Value {
    a.start();
    let (s, text) = statuses(a);
    assert_eq!(s["interruptions_today"].as_u64(), Some(used), "today's count: {s:#}\n{}", a.stderr());
    let (k, message) = the_alert(&s);
    assert_eq!(k, kind, "{message}");
    for w in says {
        assert!(message.contains(w), "{w:?} not in {message:?}");
    }
    let head: String = message.chars().take(40).collect();
    assert!(text.contains(&format!("Attention:      {head}")), "the text status says it too:\n{text}");
    assert_eq!(text.matches("Attention:").count(), 1, "said once:\n{text}");
    s
}

#[test]
fn a_ledger_truncated_to_0_bytes_keeps_todays_count_and_says_so() {
    let mut a = stopped_with_three_today();
    std::fs::File::create(a.dir.join("ledger.db")).expect("truncate to 0 bytes");
    start_and_expect(&mut a, 3, "ledger_recovered", &["is empty (0 bytes)", "kept as ledger.damaged-", "3 of 5", "ledger.today"]);
    let kept = kept_aside(&a.dir);
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert_eq!(std::fs::metadata(&kept[0]).expect("kept").len(), 0, "kept as it was found");
    // The agent's stdout said it once, after it started.
    assert_eq!(a.stdout().matches("attention: The ledger").count(), 1, "{}", a.stdout());
}

#[test]
fn a_corrupt_page_keeps_todays_count_and_says_so() {
    let mut a = stopped_with_three_today();
    let path = a.dir.join("ledger.db");
    let (root, page): (i64, i64) = {
        let c = rusqlite::Connection::open(&path).expect("open");
        let root = c.query_row("SELECT rootpage FROM sqlite_schema WHERE name = 'interruptions'", [], |r| r.get(0)).expect("root page");
        (root, c.query_row("PRAGMA page_size", [], |r| r.get(0)).expect("page size"))
    };
    {
        use std::io::{Seek, SeekFrom};
        let mut f = std::fs::OpenOptions::new().write(true).open(&path).expect("ledger file");
        f.seek(SeekFrom::Start(((root - 1) * page) as u64)).expect("seek");
        f.write_all(&vec![0x5a; page as usize]).expect("corrupt the interruptions' page");
    }
    start_and_expect(&mut a, 3, "ledger_recovered", &["quick_check", "lost: interruptions", "3 of 5"]);
    assert_eq!(kept_aside(&a.dir).len(), 1);
}

#[test]
fn a_deleted_ledger_keeps_todays_count_and_says_so() {
    let mut a = stopped_with_three_today();
    std::fs::remove_file(a.dir.join("ledger.db")).expect("rm ledger");
    start_and_expect(&mut a, 3, "ledger_recovered", &["is missing", "3 of 5", "checksummed record"]);
}

#[test]
fn a_deleted_record_is_rebuilt_from_the_ledger_and_said() {
    let mut a = stopped_with_three_today();
    // On an agent without the record there is nothing to delete; the count must still be
    // said to have been checked.
    let _ = std::fs::remove_file(a.dir.join("ledger.today"));
    start_and_expect(&mut a, 3, "record_rebuilt", &["ledger.today was missing", "rebuilt from the ledger (3 of 5"]);
}

#[test]
fn with_ledger_and_record_both_gone_the_day_counts_as_used_up_and_says_so() {
    let mut a = stopped_with_three_today();
    std::fs::remove_file(a.dir.join("ledger.db")).expect("rm ledger");
    let _ = std::fs::remove_file(a.dir.join("ledger.today"));
    let s = start_and_expect(&mut a, 5, "ledger_recovered", &["Nothing survives", "used up (5 of 5)", "until tomorrow"]);
    assert_eq!(s["state"], "out_of_budget", "{s:#}");
    // Still so after another restart the same day.
    a.stop();
    a.start();
    let s = a.wait_for("out of budget", Duration::from_secs(10), |s| s.policy.state == StateKind::OutOfBudget);
    assert_eq!(s.policy.interruptions_today, 5);
}

/// The terminal backend sees every pty of the owner: the two tests that type into one
/// run one after the other, or one's typing would interrupt the other's agent.
static ONE_PTY_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// An agent with the terminal backend, a guest running (`lull run`), the owner's pty
/// open; `break_ledger` runs, then the owner types a line: the interruption is counted
/// while the ledger cannot take it. Returns the agent's JSON status then.
fn interrupt_with_a_broken_ledger(a: &mut Agent, break_ledger: impl FnOnce()) -> Value {
    a.env.push(("LULL_INPUT".into(), "terminal".into()));
    a.start();
    let mut pty = owner_pty();
    let _run = Kid(a.lull(&["run", "--", "sleep", "600"]).stdout(Stdio::null()).stderr(Stdio::null()).spawn().expect("lull run"));
    a.wait_for("donating", Duration::from_secs(60), |s| s.policy.state == StateKind::Donating);
    break_ledger();
    let stdin = pty.0.stdin.as_mut().expect("pty stdin");
    stdin.write_all(b"true\n").and_then(|_| stdin.flush()).expect("typing into the pty");
    a.wait_for("the interruption", Duration::from_secs(10), |s| s.policy.interruptions_today == 1);
    let (s, text) = statuses(a);
    assert!(text.contains("Attention:"), "{text}");
    s
}

/// What every failed write must show: nothing printed as counted, the failure said.
fn never_counted(a: &Agent, s: &Value, kept: &str) {
    let out = a.stdout();
    assert!(!out.contains("counted"), "a failed write was announced as counted:\n{out}");
    assert!(out.contains("interruption 1 of 5") && out.contains("NOT written to the ledger") && out.contains(kept), "{out}");
    let (kind, message) = the_alert(s);
    assert_eq!(kind, "ledger_write_failed", "{message}");
    assert!(message.contains("Interruption 1 of 5 could not be written to the ledger"), "{message}");
    assert_eq!(s["interruptions_today"].as_u64(), Some(1), "the budget keeps it as used");
}

/// Runs `chattr` on the ledger's files.
fn chattr(flag: &str, dir: &Path) {
    for f in ["ledger.db", "ledger.db-wal"] {
        let ok = Command::new("chattr").arg(flag).arg(dir.join(f)).status().is_ok_and(|s| s.success());
        assert!(ok || flag == "-i", "chattr {flag} {f}");
    }
}

/// Makes the ledger's files writable again when dropped (before the temp dir goes).
struct Mutable(PathBuf);
impl Drop for Mutable {
    fn drop(&mut self) {
        chattr("-i", &self.0);
    }
}

#[test]
fn an_interruption_the_ledger_refuses_is_never_reported_as_counted_and_survives_in_the_record() {
    if skip_without_cgroups() || skip_without("script", "LULL_REQUIRE_CGROUPS") || skip_without("chattr", "LULL_REQUIRE_CGROUPS") {
        return;
    }
    let _one = ONE_PTY_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let mut a = Agent::new(
        "[sampling]\ninterval_ms = 100\nrelaxed_interval_ms = 1000\n[availability]\nowner_cpu_max = 1.0\nmemory_growth_max = 1.0\nrecruitment_threshold_s = 3\n",
    );
    let dir = a.dir.clone();
    let _mutable = Mutable(dir.clone());
    let s = interrupt_with_a_broken_ledger(&mut a, || chattr("+i", &dir));
    never_counted(&a, &s, "kept in today's record");
    chattr("-i", &dir);
    a.stop();
    // Today's record took it: after a restart it still counts, and the agent says why.
    a.start();
    let (s, _) = statuses(&a);
    assert_eq!(s["interruptions_today"].as_u64(), Some(1), "{s:#}");
    let (kind, message) = the_alert(&s);
    assert_eq!(kind, "ledger_recovered");
    assert!(message.contains("holds 0 interruptions today") && message.contains("holds 1"), "{message}");
}

/// A small tmpfs, unmounted when dropped.
struct Tmpfs(tempfile::TempDir);
impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.0.path()).status();
    }
}

#[test]
fn an_interruption_counted_on_a_full_disk_is_never_reported_as_counted() {
    if skip_without_cgroups() || skip_without("script", "LULL_REQUIRE_CGROUPS") {
        return;
    }
    let _one = ONE_PTY_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let disk = Tmpfs(tempfile::tempdir().expect("mount point"));
    let mounted = Command::new("mount").args(["-t", "tmpfs", "-o", "size=4m", "tmpfs"]).arg(disk.0.path()).status();
    assert!(mounted.is_ok_and(|s| s.success()), "mounting a 4-MiB tmpfs");
    let mut a = Agent::new(
        "[sampling]\ninterval_ms = 100\nrelaxed_interval_ms = 1000\n[availability]\nowner_cpu_max = 1.0\nmemory_growth_max = 1.0\nrecruitment_threshold_s = 3\n",
    );
    let data = disk.0.path().to_path_buf();
    a.env.push(("LULL_DATA_DIR".into(), data.to_string_lossy().into_owned()));
    let s = interrupt_with_a_broken_ledger(&mut a, || {
        let mut filler = std::fs::File::create(data.join("filler")).expect("filler");
        while filler.write_all(&[0u8; 65_536]).is_ok() {}
    });
    never_counted(&a, &s, "could not be written either");
    let (_, message) = the_alert(&s);
    assert!(message.contains("until the agent stops"), "{message}");
    a.stop();
}
