//! The Failure Trace Archive's `event_trace` table (Kondo, Javadi, Iosup & Epema, "The
//! Failure Trace Archive", CCGrid 2010; <https://fta.scem.uws.edu.au/>), as the archive
//! ships it: one tab-separated line per availability or unavailability interval of one
//! node.
//!
//! | # | field | type | used here |
//! |---|---|---|---|
//! | 1 | event_id | integer | — (must parse) |
//! | 2 | component_id | text (e.g. CPU) | — |
//! | 3 | node_id | integer | groups lines into machines |
//! | 4 | platform_id | integer | — |
//! | 5 | node_name | text | the machine's name |
//! | 6 | event_type | 0 = unavailability, 1 = availability | owner present / away |
//! | 7 | event_start_time | seconds since the Unix epoch (decimal) | interval start |
//! | 8 | event_end_time | seconds since the Unix epoch (decimal) | interval end |
//! | 9 | event_end_reason | text, may be empty or absent | — |
//!
//! A header line beginning with `event_id` and lines beginning with `#` are skipped.
//!
//! **Mapping to owner samples.** FTA's desktop-grid data sets (e.g. `UCB`, the Berkeley
//! workstations of seed 004's era, and `Condor`, `SETI@home`) record *availability as the
//! harvester saw it*, not CPU or input. So an availability interval becomes owner CPU 0
//! and no input, an unavailability interval owner CPU 1.0 with input, and time in no
//! interval counts as unavailable. Lull's own availability definition then sees exactly
//! the archive's; comparing definitions needs a ledger trace or the generator.
//!
//! Real archives: download a data set's `event_trace.tab` (e.g. `ucb/event_trace.tab`)
//! and hand it to [`read_fta`] with a step (60 s keeps a month of 100 nodes at about
//! 70 MB); `lull sim --owners FILE.tab` once the CLI is wired.

use crate::error::TraceError;
use crate::input::{bad_line, read_text, BadLines, Skipped};
use crate::trace::{OwnerSample, OwnerTrace, DEFAULT_MEM_TOTAL};
use std::collections::BTreeMap;
use std::path::Path;

/// One `event_trace` line.
#[derive(Clone, Debug, PartialEq)]
pub struct FtaEvent {
    pub event_id: i64,
    pub component_id: String,
    pub node_id: i64,
    pub platform_id: i64,
    pub node_name: String,
    /// true = availability (event_type 1), false = unavailability (0).
    pub available: bool,
    pub start: f64,
    pub end: f64,
    pub end_reason: String,
}

/// Parses `event_trace` text; `file` names it in errors; a malformed line is refused.
pub fn parse_fta(file: &Path, text: &str) -> Result<Vec<FtaEvent>, TraceError> {
    Ok(parse_fta_with(file, text, BadLines::Refuse)?.0)
}

/// Parses `event_trace` text, malformed lines refused or skipped as `bad` says.
pub fn parse_fta_with(file: &Path, text: &str, bad: BadLines) -> Result<(Vec<FtaEvent>, Vec<Skipped>), TraceError> {
    let mut out = Vec::new();
    let mut skipped = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let n = i + 1;
        let line = raw.trim_end_matches(['\r', '\n']);
        if line.trim().is_empty() || line.starts_with('#') || line.starts_with("event_id") {
            continue;
        }
        match event(file, n, line) {
            Ok(e) => out.push(e),
            Err(e) => bad_line(bad, &mut skipped, e)?,
        }
    }
    if out.is_empty() {
        return Err(TraceError::Empty { file: file.to_path_buf(), msg: "no events".into() });
    }
    Ok((out, skipped))
}

/// One event line's fields.
fn event(file: &Path, n: usize, line: &str) -> Result<FtaEvent, TraceError> {
    let f: Vec<&str> = line.split('\t').map(str::trim).collect();
    if f.len() != 8 && f.len() != 9 {
        return Err(TraceError::parse(file, n, format!("expected 9 tab-separated fields, found {}", f.len())));
    }
    let int = |k: usize, name: &str| -> Result<i64, TraceError> {
        f[k].parse().map_err(|_| TraceError::parse(file, n, format!("{name}: {:?} is not an integer", f[k])))
    };
    let time = |k: usize, name: &str| -> Result<f64, TraceError> {
        f[k].parse::<f64>()
            .ok()
            .filter(|v| v.is_finite() && *v >= 0.0)
            .ok_or_else(|| TraceError::parse(file, n, format!("{name}: {:?} is not a time in seconds", f[k])))
    };
    let available = match f[5] {
        "1" => true,
        "0" => false,
        v => return Err(TraceError::parse(file, n, format!("event_type: {v:?} is neither 0 (unavailability) nor 1 (availability)"))),
    };
    let (start, end) = (time(6, "event_start_time")?, time(7, "event_end_time")?);
    if end < start {
        return Err(TraceError::parse(file, n, format!("event_end_time {end} is before event_start_time {start}")));
    }
    Ok(FtaEvent {
        event_id: int(0, "event_id")?,
        component_id: f[1].to_string(),
        node_id: int(2, "node_id")?,
        platform_id: int(3, "platform_id")?,
        node_name: f[4].to_string(),
        available,
        start,
        end,
        end_reason: f.get(8).unwrap_or(&"").to_string(),
    })
}

/// Reads an `event_trace` file (plain or gzipped) into one owner trace per node, sampled
/// every `step_s` seconds (a sample is available only if the whole step lies in
/// availability), refusing a malformed line.
pub fn read_fta(path: &Path, step_s: u32) -> Result<Vec<OwnerTrace>, TraceError> {
    Ok(read_fta_with(path, step_s, BadLines::Refuse)?.0)
}

/// As [`read_fta`], malformed lines refused or skipped as `bad` says.
pub fn read_fta_with(path: &Path, step_s: u32, bad: BadLines) -> Result<(Vec<OwnerTrace>, Vec<Skipped>), TraceError> {
    let (events, skipped) = parse_fta_with(path, &read_text(path)?, bad)?;
    Ok((to_traces(&events, step_s), skipped))
}

/// Turns events into per-node owner traces (see the module doc for the mapping).
pub fn to_traces(events: &[FtaEvent], step_s: u32) -> Vec<OwnerTrace> {
    let step = step_s.max(1) as i64;
    let mut nodes: BTreeMap<i64, Vec<&FtaEvent>> = BTreeMap::new();
    for e in events {
        nodes.entry(e.node_id).or_default().push(e);
    }
    let busy = OwnerSample { owner_cpu: 1.0, owner_mem_bytes: 0, input: true };
    let away = OwnerSample { owner_cpu: 0.0, owner_mem_bytes: 0, input: false };
    nodes
        .into_values()
        .map(|evs| {
            let start = evs.iter().map(|e| e.start.floor() as i64).min().unwrap_or(0);
            let end = evs.iter().map(|e| e.end.ceil() as i64).max().unwrap_or(start);
            let len = ((end - start + step - 1) / step).max(1) as usize;
            let mut samples = vec![busy; len];
            for e in evs.iter().filter(|e| e.available) {
                // Steps wholly inside the interval.
                let a = ((e.start.ceil() as i64 - start) + step - 1) / step;
                let b = (e.end.floor() as i64 - start) / step;
                for s in samples.iter_mut().take(b.max(0) as usize).skip(a.max(0) as usize) {
                    *s = away;
                }
            }
            let name = if evs[0].node_name.is_empty() { format!("node{}", evs[0].node_id) } else { evs[0].node_name.clone() };
            OwnerTrace { machine: name, start_unix: start, step_s: step as u32, mem_total_bytes: DEFAULT_MEM_TOTAL, samples }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn testdata(name: &str) -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata").join(name)
    }

    #[test]
    fn reads_the_hand_written_trace() {
        let traces = read_fta(&testdata("event_trace.tab"), 60).unwrap();
        assert_eq!(traces.len(), 2);
        let a = &traces[0];
        assert_eq!(a.machine, "ws01.cad.example");
        assert_eq!(a.start_unix, 1_767_225_600);
        // ws01: available 0–3600, unavailable 3600–5400, available 5400–9000.
        assert_eq!(a.samples.len(), 150);
        assert!(a.samples[..60].iter().all(|s| s.owner_cpu == 0.0 && !s.input));
        assert!(a.samples[60..90].iter().all(|s| s.input));
        assert!(a.samples[90..].iter().all(|s| !s.input));
        // ws02's gap between its two events (no interval) counts as unavailable.
        let b = &traces[1];
        assert_eq!(b.machine, "ws02.cad.example");
        assert!(b.at(1_767_225_600 + 1900).unwrap().input);
        assert!(!b.at(1_767_225_600 + 100).unwrap().input);
    }

    #[test]
    fn malformed_lines_name_the_line_and_field() {
        let f = Path::new("e.tab");
        let good = "1\tCPU\t1\t1\tws\t1\t0\t10\t";
        let e = parse_fta(f, &format!("{good}\n2\tCPU\t1\t1\tws\t2\t10\t20\t\n")).unwrap_err().to_string();
        assert_eq!(e, "e.tab:2: event_type: \"2\" is neither 0 (unavailability) nor 1 (availability)");
        let e = parse_fta(f, "1 CPU 1 1 ws 1 0 10\n").unwrap_err().to_string();
        assert_eq!(e, "e.tab:1: expected 9 tab-separated fields, found 1");
        let e = parse_fta(f, "event_id\tcomponent_id\n1\tCPU\t1\t1\tws\t1\t20\t10\t\n").unwrap_err().to_string();
        assert_eq!(e, "e.tab:2: event_end_time 10 is before event_start_time 20");
        let e = parse_fta(f, "x\tCPU\t1\t1\tws\t1\t0\t10\t\n").unwrap_err().to_string();
        assert_eq!(e, "e.tab:1: event_id: \"x\" is not an integer");
    }
}
