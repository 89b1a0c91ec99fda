//! Every number an agent sends, checked at the door against what that machine (its
//! logical CPUs, when it joined) and that lease (when it was assigned) could physically
//! have done; see [`lull_protocol::limits`] for the bounds and why. A refusal is a
//! message naming the field, its value and the range, and says once what would have been
//! possible. Pure: the caller passes the facts and `now`.
//!
//! The rules for ledger records, per record and per (machine, local day):
//! - a day begins in no time zone before UTC+14 and ends in none after UTC−12, and is not
//!   in the future; a record's `at_utc` is not in the future and lies within its day;
//! - one record is one guest's growth on one day: at most a day of wall time, and at
//!   most a day of all the machine's CPUs;
//! - a day's counted records together hold at most `cpus` CPU-seconds per second of the
//!   time that day can have lasted for this machine by now (since it joined, an hour's
//!   grace), at most [`GUESTS_MAX`] guests' wall and linger time, and at most
//!   [`INTERRUPTIONS_PER_DAY_MAX`] interruptions;
//! - records made before the machine joined (less the grace) are kept but not counted.
//!
//! With these, no sum a report makes can overflow: a day's total is at most
//! 8192 CPUs × 26 h = 7.7 × 10¹⁴ µs, far inside `i64`.

use crate::model::{Heartbeat, MemoryReport, Record};
use chrono::NaiveDate;
use lull_protocol::limits::*;

/// What the coordinator knows of a machine, for checking what it claims.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MachineFacts {
    /// Logical CPUs (as reported; [`CPUS_MAX`] when it never said).
    pub cpus: u32,
    /// When it was first enrolled (Unix ms).
    pub enrolled_ms: i64,
}

impl MachineFacts {
    /// The facts from stored values: an unknown or out-of-range CPU count is taken as
    /// [`CPUS_MAX`].
    pub fn new(cpus: Option<i64>, enrolled_ms: i64) -> Self {
        let cpus = cpus.and_then(|c| u32::try_from(c).ok()).filter(|c| (1..=CPUS_MAX).contains(c)).unwrap_or(CPUS_MAX);
        MachineFacts { cpus, enrolled_ms }
    }
}

/// What a ledger record is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Donation,
    Interruption,
    Linger,
    /// Stored, not counted.
    Other,
}

/// A checked record: the amounts it adds to reports.
#[derive(Clone, Debug, PartialEq)]
pub struct Claim {
    pub kind: Kind,
    /// The local day (`YYYY-MM-DD`; empty for kinds that are not counted and name none).
    pub day: String,
    pub cpu_us: i64,
    pub wall_ms: i64,
    pub linger_ms: i64,
    /// An interruption's daily limit.
    pub limit: Option<i64>,
    /// Counted in reports: made after the machine joined the pool (less the grace).
    /// Kinds that count nothing are "counted" (they add nothing either way).
    pub counted: bool,
}

impl Claim {
    fn new(kind: Kind, day: String, counted: bool) -> Self {
        Claim { kind, day, cpu_us: 0, wall_ms: 0, linger_ms: 0, limit: None, counted }
    }
}

const DAY_MS: i64 = 86_400_000;

fn midnight_ms(day: NaiveDate) -> i64 {
    day.and_hms_opt(0, 0, 0).map_or(0, |t| t.and_utc().timestamp_millis())
}

/// How long local day `day` can have lasted for machine `m` by `now`, ms: from its
/// earliest start in any time zone (or the machine's joining, less the grace) to its
/// latest end (or now, plus the clock skew allowed), at most [`DAY_MS_MAX`].
pub fn day_span_ms(day: NaiveDate, m: &MachineFacts, now: i64) -> i64 {
    let midnight = midnight_ms(day);
    let start = (midnight - DAY_STARTS_BEFORE_UTC_MS).max(m.enrolled_ms.saturating_sub(JOIN_GRACE_MS));
    let end = (midnight + DAY_MS + DAY_ENDS_AFTER_UTC_MS).min(now.saturating_add(CLOCK_SKEW_MS));
    (end - start).clamp(0, DAY_MS_MAX)
}

/// The most CPU µs `cpus` CPUs give in `ms` milliseconds.
fn cpu_us_in(cpus: u32, ms: i64) -> i128 {
    i128::from(cpus) * i128::from(ms.max(0)) * 1000
}

fn kind_of(kind: &str) -> Kind {
    match kind {
        "donation" => Kind::Donation,
        "interruption" => Kind::Interruption,
        "linger" => Kind::Linger,
        _ => Kind::Other,
    }
}

/// Checks one record of machine `m` received at `now`: its shape, its day and time, and
/// each amount against what one record can hold. The error names the record and field.
pub fn claim(r: &Record, m: &MachineFacts, now: i64) -> Result<Claim, String> {
    let p = &r.payload;
    let bad = |what: String| format!("record {}: {what}", r.seq);
    let kind = kind_of(&r.kind);
    let day_text = p.get("day").and_then(|d| d.as_str());
    if kind == Kind::Other {
        // Stored, never counted: its day (if it names one) only files it.
        let day = day_text.and_then(|d| d.parse::<NaiveDate>().ok()).map(|d| d.to_string()).unwrap_or_default();
        return Ok(Claim::new(kind, day, true));
    }
    let day: NaiveDate = day_text
        .ok_or_else(|| bad("payload.day is missing".into()))?
        .parse()
        .map_err(|_| bad("payload.day is not a day YYYY-MM-DD".into()))?;
    let midnight = midnight_ms(day);
    if midnight - DAY_STARTS_BEFORE_UTC_MS > now + CLOCK_SKEW_MS {
        return Err(bad(format!("payload.day {day} has not begun anywhere yet (it is {} UTC here)", show_ms(now))));
    }
    let at = match p.get("at_utc") {
        None | Some(serde_json::Value::Null) => None,
        Some(v) => Some(
            v.as_str()
                .and_then(|s| chrono::DateTime::parse_from_rfc3339(s).ok())
                .map(|t| t.timestamp_millis())
                .ok_or_else(|| bad("payload.at_utc is not an RFC 3339 time".into()))?,
        ),
    };
    if let Some(at) = at {
        if at > now + CLOCK_SKEW_MS {
            return Err(bad(format!("payload.at_utc {} is in the future (it is {} UTC here)", show_ms(at), show_ms(now))));
        }
        if at < midnight - DAY_STARTS_BEFORE_UTC_MS || at > midnight + DAY_MS + DAY_ENDS_AFTER_UTC_MS {
            return Err(bad(format!("payload.at_utc {} is not within payload.day {day} in any time zone", show_ms(at))));
        }
    }
    let num = |k: &str| -> Result<i64, String> {
        p.get(k)
            .and_then(|v| v.as_u64())
            .and_then(|v| i64::try_from(v).ok())
            .ok_or_else(|| bad(format!("payload.{k} must be a non-negative integer")))
    };
    let within = |k: &str, v: i64, max: i128, what: &str| -> Result<i64, String> {
        if i128::from(v) > max {
            return Err(bad(format!("payload.{k} {v} is more than {what}: at most {max}")));
        }
        Ok(v)
    };
    let joined = m.enrolled_ms.saturating_sub(JOIN_GRACE_MS);
    let counted = at.is_none_or(|at| at >= joined) && midnight + DAY_MS + DAY_ENDS_AFTER_UTC_MS >= joined;
    let mut c = Claim::new(kind, day.to_string(), counted);
    let cpus = m.cpus;
    match kind {
        Kind::Donation => {
            c.cpu_us = within("cpu_us", num("cpu_us")?, cpu_us_in(cpus, DAY_MS_MAX), &format!("{cpus} CPUs give in a day"))?;
            c.wall_ms = within("wall_ms", num("wall_ms")?, i128::from(DAY_MS_MAX), "one guest runs in a day")?;
        }
        Kind::Interruption => {
            let max = i128::from(INTERRUPTIONS_PER_DAY_MAX);
            let n = within("number", num("number")?, max, "the interruptions of a day")?;
            if n == 0 {
                return Err(bad("payload.number must be 1 or more (the day's first interruption is 1)".into()));
            }
            c.limit = Some(within("limit", num("limit")?, max, "a daily interruption limit")?);
        }
        Kind::Linger => c.linger_ms = within("linger_ms", num("linger_ms")?, i128::from(DAY_MS_MAX), "one guest lingers in a day")?,
        Kind::Other => unreachable!("returned above"),
    }
    Ok(c)
}

/// What a machine's counted records of one day hold in all.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DayTotals {
    pub cpu_us: i64,
    pub wall_ms: i64,
    pub linger_ms: i64,
    pub interruptions: i64,
}

/// Checks a day's totals (stored and new records together) against what machine `m`
/// can have done in that day by `now`; the error names the field and the range.
pub fn check_day(day: NaiveDate, t: &DayTotals, m: &MachineFacts, now: i64) -> Result<(), String> {
    let span = day_span_ms(day, m, now);
    let hours = span as f64 / 3.6e6;
    let cpu_max = cpu_us_in(m.cpus, span);
    if i128::from(t.cpu_us) > cpu_max {
        return Err(format!(
            "payload.cpu_us: day {day} would hold {:.1} CPU-s donated; {} CPUs give at most {:.1} CPU-s in the {hours:.2} h that day \
             can have lasted for this machine by now (since it joined)",
            t.cpu_us as f64 / 1e6,
            m.cpus,
            cpu_max as f64 / 1e6
        ));
    }
    let wall_max = i128::from(GUESTS_MAX) * i128::from(span);
    for (field, v) in [("wall_ms", t.wall_ms), ("linger_ms", t.linger_ms)] {
        if i128::from(v) > wall_max {
            return Err(format!(
                "payload.{field}: day {day} would hold {:.1} s; {GUESTS_MAX} guests at once give at most {:.1} s in the {hours:.2} h \
                 that day can have lasted for this machine by now (since it joined)",
                v as f64 / 1e3,
                wall_max as f64 / 1e3
            ));
        }
    }
    if t.interruptions > i64::from(INTERRUPTIONS_PER_DAY_MAX) {
        return Err(format!(
            "payload.number: day {day} would hold {} interruptions; at most {INTERRUPTIONS_PER_DAY_MAX} a day",
            t.interruptions
        ));
    }
    Ok(())
}

/// Seconds of CPU per CPU a task's report may exceed its lease's age by (the
/// measurement's rounding, and the moment between assignment and this check).
pub const TASK_CPU_SLACK_S: f64 = 2.0;

/// Checks the CPU time a lease holder reports for its task (`field`: which report)
/// against what `cpus` CPUs can have given since the lease was assigned at `leased_ms`
/// (or, for a lease from before this was kept, since the machine joined).
pub fn check_task_cpu(field: &str, cpu_s: f64, m: &MachineFacts, leased_ms: Option<i64>, now: i64) -> Result<(), String> {
    if !(cpu_s.is_finite() && cpu_s >= 0.0) {
        return Err(format!("{field} must be a finite, non-negative number of seconds"));
    }
    // Both instants are the coordinator's own clock: no skew to allow, only the
    // rounding of the measurement.
    let since = leased_ms.unwrap_or(m.enrolled_ms);
    let secs = ((now - since).max(0) as f64) / 1e3 + TASK_CPU_SLACK_S;
    let max = f64::from(m.cpus) * secs;
    if cpu_s > max {
        return Err(format!(
            "{field} {cpu_s} is more than {} CPUs can give in the {secs:.0} s since this lease was assigned: at most {max:.0}",
            m.cpus
        ));
    }
    Ok(())
}

/// Checks a heartbeat's numbers; the error names the field and the range.
pub fn check_heartbeat(hb: &Heartbeat) -> Result<(), String> {
    for (field, v) in [("base_speed", hb.base_speed), ("current_speed", hb.current_speed)] {
        if !(v.is_finite() && (0.0..=SPEED_MAX).contains(&v)) {
            return Err(format!("{field} {v} is not a number from 0 to {SPEED_MAX}"));
        }
    }
    if hb.current_speed > hb.base_speed {
        return Err(format!(
            "current_speed {} is more than base_speed {}: owner load only slows a machine",
            hb.current_speed, hb.base_speed
        ));
    }
    let per_day = INTERRUPTIONS_PER_DAY_MAX;
    if hb.budget_left > per_day || hb.interruption_limit.is_some_and(|l| l > per_day) {
        return Err(format!("budget_left and interruption_limit must be 0–{per_day}"));
    }
    if hb.free_mem_bytes > MEMORY_BYTES_MAX {
        return Err(format!("free_mem_bytes {} is more than {MEMORY_BYTES_MAX} (1 PiB)", hb.free_mem_bytes));
    }
    if hb.idle_for_s.is_some_and(|s| s > IDLE_FOR_S_MAX) {
        return Err(format!("idle_for_s must be 0–{IDLE_FOR_S_MAX}"));
    }
    if hb.cpus.is_some_and(|c| !(1..=CPUS_MAX).contains(&c)) {
        return Err(format!("cpus must be 1–{CPUS_MAX}"));
    }
    if hb.owner_load.len() > lull_protocol::OWNER_LOAD_MAX {
        return Err(format!("owner_load has {} readings, at most {}", hb.owner_load.len(), lull_protocol::OWNER_LOAD_MAX));
    }
    if let Some(why) = hb.owner_load.iter().find_map(|r| r.invalid()) {
        return Err(why);
    }
    hb.memory.as_ref().map_or(Ok(()), check_memory_report)
}

/// Most guests one heartbeat's memory report may name.
pub const MEMORY_REPORT_GUESTS_MAX: usize = 256;

/// A heartbeat's memory report: at most [`MEMORY_REPORT_GUESTS_MAX`] guests, positive job
/// ids, amounts within [`MEMORY_BYTES_MAX`], rates and ages finite and non-negative.
pub fn check_memory_report(m: &MemoryReport) -> Result<(), String> {
    if m.guests.len() > MEMORY_REPORT_GUESTS_MAX {
        return Err(format!("memory.guests holds {} guests; at most {MEMORY_REPORT_GUESTS_MAX}", m.guests.len()));
    }
    if m.available_bytes > MEMORY_BYTES_MAX || m.guest_memory_bytes > MEMORY_BYTES_MAX {
        return Err(format!("memory.available_bytes and memory.guest_memory_bytes must be 0–{MEMORY_BYTES_MAX}"));
    }
    let ok = |v: f64| v.is_finite() && v >= 0.0;
    for (i, g) in m.guests.iter().enumerate() {
        if g.job_id <= 0 {
            return Err(format!("memory.guests[{i}].job_id must be a positive job id"));
        }
        if g.working_set_bytes > MEMORY_BYTES_MAX {
            return Err(format!("memory.guests[{i}].working_set_bytes must be 0–{MEMORY_BYTES_MAX}"));
        }
        for (name, v) in
            [("major_faults_per_s", g.major_faults_per_s), ("age_s", g.age_s), ("io_bytes_per_s", g.io_bytes_per_s.unwrap_or(0.0))]
        {
            if !ok(v) {
                return Err(format!("memory.guests[{i}].{name} must be a finite non-negative number"));
            }
        }
    }
    Ok(())
}

fn show_ms(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms).map_or_else(|| ms.to_string(), |t| t.format("%Y-%m-%d %H:%M:%S").to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const H: i64 = 3_600_000;

    fn at(s: &str) -> i64 {
        chrono::DateTime::parse_from_rfc3339(s).unwrap().timestamp_millis()
    }

    fn rec(kind: &str, payload: serde_json::Value) -> Record {
        Record { seq: 7, kind: kind.into(), payload }
    }

    #[test]
    fn a_day_lasts_at_most_26_hours_and_only_since_the_machine_joined() {
        let day: NaiveDate = "2026-11-20".parse().unwrap();
        let old = MachineFacts { cpus: 2, enrolled_ms: 0 };
        assert_eq!(day_span_ms(day, &old, at("2026-12-01T00:00:00Z")), DAY_MS_MAX);
        // 09:00 UTC: the day began 23 h ago at UTC+14, plus the skew allowed.
        assert_eq!(day_span_ms(day, &old, at("2026-11-20T09:00:00Z")), 23 * H + CLOCK_SKEW_MS);
        // Joined ten minutes ago: an hour's grace, ten minutes and the skew.
        let now = at("2026-11-20T12:00:00Z");
        let new = MachineFacts { cpus: 2, enrolled_ms: now - 10 * 60_000 };
        assert_eq!(day_span_ms(day, &new, now), H + 10 * 60_000 + CLOCK_SKEW_MS);
        // A day before it joined has no span; a day not begun has none either.
        assert_eq!(day_span_ms("2026-11-17".parse().unwrap(), &new, now), 0);
    }

    #[test]
    fn records_are_checked_field_by_field() {
        let now = at("2026-11-20T12:00:00Z");
        let m = MachineFacts { cpus: 2, enrolled_ms: now - 30 * 86_400_000 };
        let ok =
            claim(&rec("donation", json!({"day": "2026-11-20", "cpu_us": 5, "wall_ms": 3, "at_utc": "2026-11-20T11:00:00Z"})), &m, now)
                .unwrap();
        assert_eq!((ok.cpu_us, ok.wall_ms, ok.counted), (5, 3, true));
        let err = |kind: &str, p: serde_json::Value| claim(&rec(kind, p), &m, now).unwrap_err();
        assert!(err("donation", json!({"day": "2026-11-20", "cpu_us": i64::MAX, "wall_ms": 1})).contains("payload.cpu_us"));
        assert!(err("donation", json!({"day": "2026-11-20", "cpu_us": -1, "wall_ms": 1})).contains("non-negative"));
        assert!(err("donation", json!({"day": "2026-11-20", "cpu_us": 1, "wall_ms": 27 * H})).contains("payload.wall_ms"));
        assert!(err("donation", json!({"day": "2999-01-01", "cpu_us": 1, "wall_ms": 1})).contains("not begun"));
        assert!(
            err("donation", json!({"day": "2026-11-20", "cpu_us": 1, "wall_ms": 1, "at_utc": "2026-11-21T00:00:00Z"})).contains("future")
        );
        assert!(
            err("donation", json!({"day": "2026-11-10", "cpu_us": 1, "wall_ms": 1, "at_utc": "2026-11-20T00:00:00Z"})).contains("within")
        );
        assert!(err("interruption", json!({"day": "2026-11-20", "number": 1, "limit": 1000})).contains("payload.limit"));
        assert!(err("interruption", json!({"day": "2026-11-20", "number": 0, "limit": 5})).contains("payload.number"));
        assert!(err("donation", json!({"cpu_us": 1, "wall_ms": 1})).starts_with("record 7: payload.day"));
        // Before the machine joined: kept, not counted.
        let young = MachineFacts { cpus: 2, enrolled_ms: now - 60_000 };
        let c =
            claim(&rec("donation", json!({"day": "2026-11-20", "cpu_us": 5, "wall_ms": 3, "at_utc": "2026-11-20T09:00:00Z"})), &young, now)
                .unwrap();
        assert!(!c.counted);
        // Other kinds: stored, adding nothing.
        let note = claim(&rec("note", json!({"x": 1})), &m, now).unwrap();
        assert_eq!((note.kind, note.cpu_us, note.wall_ms, note.limit), (Kind::Other, 0, 0, None));
    }

    #[test]
    fn a_day_holds_what_its_cpus_could_give_and_no_more() {
        let now = at("2026-11-20T12:00:00Z");
        let day: NaiveDate = "2026-11-20".parse().unwrap();
        // A 2-CPU machine, joined ten minutes ago: 10 h of CPU is refused, 1 h is not.
        let m = MachineFacts { cpus: 2, enrolled_ms: now - 10 * 60_000 };
        let t = |cpu_s: i64| DayTotals { cpu_us: cpu_s * 1_000_000, ..DayTotals::default() };
        assert!(check_day(day, &t(3600), &m, now).is_ok());
        let e = check_day(day, &t(36_000), &m, now).unwrap_err();
        assert!(e.contains("payload.cpu_us") && e.contains("2 CPUs"), "{e}");
        // A whole past day: 2 CPUs × 26 h at most.
        let old = MachineFacts { cpus: 2, enrolled_ms: 0 };
        let past: NaiveDate = "2026-11-01".parse().unwrap();
        assert!(check_day(past, &t(2 * 26 * 3600), &old, now).is_ok());
        assert!(check_day(past, &t(2 * 26 * 3600 + 1), &old, now).is_err());
        assert!(check_day(past, &DayTotals { interruptions: 101, ..DayTotals::default() }, &old, now)
            .unwrap_err()
            .contains("payload.number"));
    }

    #[test]
    fn a_lease_of_ten_minutes_cannot_have_used_ten_hours() {
        let now = at("2026-11-20T12:00:00Z");
        let m = MachineFacts { cpus: 2, enrolled_ms: 0 };
        let leased = Some(now - 10 * 60_000);
        assert!(check_task_cpu("user_cpu_s + sys_cpu_s", 1200.0, &m, leased, now).is_ok());
        assert!(check_task_cpu("user_cpu_s + sys_cpu_s", 1300.0, &m, leased, now).is_err(), "2 CPUs × 600 s (+ 2 s)");
        let e = check_task_cpu("user_cpu_s + sys_cpu_s", 36_000.0, &m, leased, now).unwrap_err();
        assert!(e.contains("user_cpu_s + sys_cpu_s") && e.contains("2 CPUs"), "{e}");
        assert!(check_task_cpu("cpu_s", f64::NAN, &m, leased, now).is_err());
    }

    #[test]
    fn unknown_cpu_counts_are_the_ceiling() {
        assert_eq!(MachineFacts::new(None, 0).cpus, CPUS_MAX);
        assert_eq!(MachineFacts::new(Some(0), 0).cpus, CPUS_MAX);
        assert_eq!(MachineFacts::new(Some(4), 0).cpus, 4);
    }
}
