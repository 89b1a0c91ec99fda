//! The Standard Workload Format (SWF) of the Parallel Workloads Archive
//! (Feitelson et al., <https://www.cs.huji.ac.il/labs/parallel/workload/swf.html>): one
//! job per line, 18 whitespace-separated fields, `-1` for "unknown"; header lines start
//! with `;` and carry `Key: value` pairs (`MaxProcs`, `UnixStartTime`, `TimeZoneString`…).
//!
//! | # | field | used here |
//! |---|---|---|
//! | 1 | job number | job id |
//! | 2 | submit time (s from the log's start) | submission |
//! | 3 | wait time (s) | — |
//! | 4 | run time (s, wall) | processing time = run time × processors |
//! | 5 | number of allocated processors | width (else field 8) |
//! | 6 | average CPU time used per processor (s) | — |
//! | 7 | used memory per processor (KB) | — |
//! | 8 | requested number of processors | width when field 5 is -1 |
//! | 9 | requested time (s, wall) | the author's estimate per member |
//! | 10 | requested memory per processor (KB) | — |
//! | 11 | status (1 completed, 0 failed, 5 cancelled) | — |
//! | 12 | user id | — |
//! | 13 | group id | — |
//! | 14 | executable (application) number | program name `app<N>`: runtime history per program |
//! | 15 | queue number | — |
//! | 16 | partition number | — |
//! | 17 | preceding job number | — |
//! | 18 | think time from preceding job (s) | — |
//!
//! Real archives: download e.g. `LANL-CM5-1994-4.1-cln.swf.gz` from the Parallel
//! Workloads Archive, `gunzip` it, and hand the path to [`read_swf`] (or `lull sim
//! --jobs FILE.swf` once the CLI is wired). Jobs with run time ≤ 0 (never ran) are
//! skipped by [`SwfLog::jobs`].

use crate::driver::SimJob;
use crate::error::TraceError;
use crate::input::{bad_line, read_text, BadLines, Skipped};
use std::collections::BTreeMap;
use std::path::Path;

/// One SWF line, all 18 fields (`-1` where unknown; times in seconds).
#[derive(Clone, Debug, PartialEq)]
pub struct SwfRecord {
    pub job: i64,
    pub submit: f64,
    pub wait: f64,
    pub run_time: f64,
    pub allocated_procs: i64,
    pub avg_cpu_time: f64,
    pub used_memory_kb: f64,
    pub requested_procs: i64,
    pub requested_time: f64,
    pub requested_memory_kb: f64,
    pub status: i64,
    pub user: i64,
    pub group: i64,
    pub executable: i64,
    pub queue: i64,
    pub partition: i64,
    pub preceding_job: i64,
    pub think_time: f64,
}

/// A parsed SWF file: its header's `Key: value` pairs and its records.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct SwfLog {
    /// Header comments of the form `; Key: value`.
    pub header: BTreeMap<String, String>,
    /// The job records in file order.
    pub records: Vec<SwfRecord>,
}

/// Reads an SWF file (plain or gzipped, any encoding in its comments), refusing a
/// malformed line.
pub fn read_swf(path: &Path) -> Result<SwfLog, TraceError> {
    Ok(read_swf_with(path, BadLines::Refuse)?.0)
}

/// Reads an SWF file, malformed lines refused or skipped as `bad` says; skipped lines are
/// returned with their numbers and reasons.
pub fn read_swf_with(path: &Path, bad: BadLines) -> Result<(SwfLog, Vec<Skipped>), TraceError> {
    parse_swf_with(path, &read_text(path)?, bad)
}

const NAMES: [&str; 18] = [
    "job number",
    "submit time",
    "wait time",
    "run time",
    "allocated processors",
    "average CPU time",
    "used memory",
    "requested processors",
    "requested time",
    "requested memory",
    "status",
    "user id",
    "group id",
    "executable number",
    "queue number",
    "partition number",
    "preceding job number",
    "think time",
];

/// Parses SWF text; `file` names it in errors; a malformed line is refused.
pub fn parse_swf(file: &Path, text: &str) -> Result<SwfLog, TraceError> {
    Ok(parse_swf_with(file, text, BadLines::Refuse)?.0)
}

/// Parses SWF text, malformed lines refused or skipped as `bad` says.
pub fn parse_swf_with(file: &Path, text: &str, bad: BadLines) -> Result<(SwfLog, Vec<Skipped>), TraceError> {
    let mut log = SwfLog::default();
    let mut skipped = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let n = i + 1;
        let line = raw.trim();
        if line.is_empty() {
            continue;
        }
        if let Some(c) = line.strip_prefix(';') {
            if let Some((k, v)) = c.split_once(':') {
                log.header.insert(k.trim().to_string(), v.trim().to_string());
            }
            continue;
        }
        match record(file, n, line) {
            Ok(r) => log.records.push(r),
            Err(e) => bad_line(bad, &mut skipped, e)?,
        }
    }
    if log.records.is_empty() {
        return Err(TraceError::Empty { file: file.to_path_buf(), msg: "no job records".into() });
    }
    Ok((log, skipped))
}

/// One job line's 18 fields.
fn record(file: &Path, n: usize, line: &str) -> Result<SwfRecord, TraceError> {
    let f: Vec<&str> = line.split_whitespace().collect();
    if f.len() != 18 {
        return Err(TraceError::parse(file, n, format!("expected 18 fields, found {}", f.len())));
    }
    let mut v = [0f64; 18];
    for (k, s) in f.iter().enumerate() {
        v[k] = s.parse().map_err(|_| TraceError::parse(file, n, format!("field {} ({}): {s:?} is not a number", k + 1, NAMES[k])))?;
    }
    let int = |k: usize| -> Result<i64, TraceError> {
        if v[k].fract() != 0.0 {
            return Err(TraceError::parse(file, n, format!("field {} ({}): {} is not an integer", k + 1, NAMES[k], f[k])));
        }
        Ok(v[k] as i64)
    };
    if v[1] < 0.0 {
        return Err(TraceError::parse(file, n, format!("field 2 (submit time): {} is negative", f[1])));
    }
    Ok(SwfRecord {
        job: int(0)?,
        submit: v[1],
        wait: v[2],
        run_time: v[3],
        allocated_procs: int(4)?,
        avg_cpu_time: v[5],
        used_memory_kb: v[6],
        requested_procs: int(7)?,
        requested_time: v[8],
        requested_memory_kb: v[9],
        status: int(10)?,
        user: int(11)?,
        group: int(12)?,
        executable: int(13)?,
        queue: int(14)?,
        partition: int(15)?,
        preceding_job: int(16)?,
        think_time: v[17],
    })
}

impl SwfLog {
    /// The log as an experiment's job input (`lull sim winner --swf FILE`): its jobs on
    /// its own processors (`MaxProcs`, else the widest job), with a line on where it came
    /// from (its header's `Installation` and `Acknowledge`).
    pub fn job_log(&self, name: &str) -> crate::experiments::JobLog {
        let widest = self.records.iter().map(|r| r.allocated_procs.max(r.requested_procs)).max().unwrap_or(1).max(1);
        let processors = self.header.get("MaxProcs").and_then(|v| v.parse::<i64>().ok()).filter(|v| *v > 0).unwrap_or(widest) as u32;
        let (jobs, skipped) = self.jobs(processors);
        let about = ["Installation", "Computer", "Acknowledge"]
            .iter()
            .filter_map(|k| self.header.get(*k).map(|v| format!("{k}: {v}")))
            .collect::<Vec<_>>()
            .join("; ");
        let about = format!(
            "{name}.swf ({about}); {} records, {skipped} not run (never ran, unknown width or wider than the machine)",
            self.records.len()
        );
        crate::experiments::JobLog { name: name.to_string(), jobs, processors, about }
    }

    /// The header's `UnixStartTime`, if given.
    pub fn unix_start(&self) -> Option<i64> {
        self.header.get("UnixStartTime").and_then(|v| v.parse().ok())
    }

    /// The records as simulator jobs for a pool of `pool_size` machines: width from
    /// field 5 (else 8), processing time = run time × width (seconds on a speed-1.0
    /// machine), estimate per member from field 9 when given, program `app<N>` from
    /// field 14 (else one program per job), submission relative to the log's start.
    /// Returns the jobs and how many were skipped (never ran, unknown width, or wider
    /// than the pool).
    pub fn jobs(&self, pool_size: u32) -> (Vec<SimJob>, usize) {
        let mut out = Vec::new();
        let mut skipped = 0;
        for r in &self.records {
            let width = if r.allocated_procs > 0 { r.allocated_procs } else { r.requested_procs };
            if r.run_time <= 0.0 || width <= 0 || width > pool_size as i64 {
                skipped += 1;
                continue;
            }
            let width = width as u32;
            let program = if r.executable > 0 { format!("app{}", r.executable) } else { format!("job{}", r.job) };
            out.push(SimJob {
                id: r.job.max(0) as u64,
                program,
                submit_s: r.submit,
                width,
                normtime_s: r.run_time * width as f64,
                estimate_s: (r.requested_time > 0.0).then_some(r.requested_time),
                checkpointable: false,
                migration_s: 0.0,
            });
        }
        (out, skipped)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn testdata(name: &str) -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata").join(name)
    }

    #[test]
    fn reads_the_hand_written_log() {
        let log = read_swf(&testdata("small.swf")).unwrap();
        assert_eq!(log.header.get("MaxProcs").map(String::as_str), Some("8"));
        assert_eq!(log.unix_start(), Some(1_767_225_600));
        assert_eq!(log.records.len(), 6);
        let r = &log.records[2];
        assert_eq!((r.job, r.submit, r.run_time, r.allocated_procs, r.requested_time, r.executable), (3, 120.0, 900.0, 4, 1200.0, 7));
        let (jobs, skipped) = log.jobs(8);
        // Job 5 never ran (run time -1) and job 6 asked for 16 processors.
        assert_eq!(skipped, 2);
        assert_eq!(jobs.len(), 4);
        assert_eq!(jobs[2].normtime_s, 3600.0);
        assert_eq!(jobs[2].estimate_s, Some(1200.0));
        assert_eq!(jobs[2].program, "app7");
        // Job 4: allocated unknown, requested 2; no estimate, no executable.
        assert_eq!((jobs[3].width, jobs[3].estimate_s, jobs[3].program.as_str()), (2, None, "job4"));
    }

    #[test]
    fn malformed_lines_name_the_line_and_field() {
        let f = Path::new("bad.swf");
        let ok = "1 0 0 10 1 -1 -1 1 20 -1 1 1 1 1 1 -1 -1 -1";
        let e = parse_swf(f, &format!("; c\n{ok}\n1 2 3\n")).unwrap_err().to_string();
        assert_eq!(e, "bad.swf:3: expected 18 fields, found 3");
        let e = parse_swf(f, &format!("{ok}\n2 0 0 ten 1 -1 -1 1 20 -1 1 1 1 1 1 -1 -1 -1\n")).unwrap_err().to_string();
        assert_eq!(e, "bad.swf:2: field 4 (run time): \"ten\" is not a number");
        let e = parse_swf(f, "2 0 0 10 1.5 -1 -1 1 20 -1 1 1 1 1 1 -1 -1 -1\n").unwrap_err().to_string();
        assert_eq!(e, "bad.swf:1: field 5 (allocated processors): 1.5 is not an integer");
        assert!(matches!(parse_swf(f, "; only a header\n"), Err(TraceError::Empty { .. })));
    }

    #[test]
    fn malformed_lines_can_be_skipped_and_are_listed_by_number() {
        let f = Path::new("bad.swf");
        let ok = "1 0 0 10 1 -1 -1 1 20 -1 1 1 1 1 1 -1 -1 -1";
        let text = format!("; c\n{ok}\n1 2 3\n2 0 0 ten 1 -1 -1 1 20 -1 1 1 1 1 1 -1 -1 -1\n{}\n", ok.replacen('1', "3", 1));
        let (log, skipped) = parse_swf_with(f, &text, BadLines::Skip).unwrap();
        assert_eq!(log.records.iter().map(|r| r.job).collect::<Vec<_>>(), vec![1, 3]);
        assert_eq!(skipped.iter().map(|s| s.line).collect::<Vec<_>>(), vec![3, 4]);
        assert_eq!(skipped[1].reason, "field 4 (run time): \"ten\" is not a number");
        assert_eq!(parse_swf_with(f, &text, BadLines::Refuse).unwrap_err().to_string(), "bad.swf:3: expected 18 fields, found 3");
    }
}
