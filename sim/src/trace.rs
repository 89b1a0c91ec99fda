//! Per-machine owner activity in virtual time ([`OwnerTrace`]), and the reader of the
//! agent's own trace as exported from its ledger.
//!
//! # The ledger export (CSV)
//! The agent keeps a calibration trace in its SQLite ledger (`agent-core/src/ledger.rs`,
//! table `trace(t, owner_cpu, owner_mem, input)`, one row every 2 s, 30 days). This crate
//! does not link SQLite; it reads the table exported as CSV, which `sqlite3` itself
//! writes with no Lull code at all:
//!
//! ```text
//! sqlite3 -csv -header ~/.local/share/lull/ledger.db \
//!   "SELECT t, owner_cpu, owner_mem AS owner_mem_bytes, input FROM trace ORDER BY t" > mine.csv
//! ```
//!
//! Columns (header required, any order): `t` (Unix seconds, UTC), `owner_cpu` (fraction
//! 0–1 of the machine, guests excluded), `owner_mem_bytes` (also accepted: `owner_mem`),
//! `input` (`1`/`0` or `true`/`false`: input happened during the row's interval). Lines
//! starting with `#` are comments; `# mem_total_bytes=N` gives the machine's memory
//! (default 16 GiB), which the availability definition's memory-growth test needs.
//! Rows are irregular: the agent writes one every 2 s while a reading may stop guest
//! work and every 10 s otherwise (`sampling.relaxed_interval_ms`). The sampling step is
//! the most common gap between rows; a row holds (without its input) until the next one
//! if that is at most [`HOLD_S`] away; longer gaps (the agent was not running) become
//! *owner present* samples (CPU 1.0), because nobody watched. [`parse_ledger_rows`]
//! gives the rows as they are (what `lull calibrate` reads).

use crate::error::TraceError;
use std::path::Path;

pub use lull_core::calibrate::OwnerSample;

/// One machine's owner activity: samples every `step_s` seconds from `start_unix`.
#[derive(Clone, Debug, PartialEq)]
pub struct OwnerTrace {
    /// The machine's name (host name, FTA node name, or generated).
    pub machine: String,
    /// Unix time (UTC seconds) of the first sample.
    pub start_unix: i64,
    /// Seconds between samples (≥ 1).
    pub step_s: u32,
    /// Physical memory, bytes.
    pub mem_total_bytes: u64,
    /// The samples.
    pub samples: Vec<OwnerSample>,
}

/// Memory assumed when a trace does not say (16 GiB).
pub const DEFAULT_MEM_TOTAL: u64 = 16 << 30;

impl OwnerTrace {
    /// Unix time just after the last sample.
    pub fn end_unix(&self) -> i64 {
        self.start_unix + self.samples.len() as i64 * self.step_s as i64
    }
    /// The trace at `factor` times its step: each new sample holds the mean owner CPU,
    /// the largest owner memory and any input of the samples it covers (a 1-s trace as
    /// the 2-s traces of seeds 000 and 004 recorded it).
    pub fn coarsen(&self, factor: u32) -> OwnerTrace {
        let k = factor.max(1) as usize;
        let samples = self
            .samples
            .chunks(k)
            .map(|c| OwnerSample {
                owner_cpu: c.iter().map(|s| s.owner_cpu).sum::<f32>() / c.len() as f32,
                owner_mem_bytes: c.iter().map(|s| s.owner_mem_bytes).max().unwrap_or(0),
                input: c.iter().any(|s| s.input),
            })
            .collect();
        OwnerTrace { step_s: self.step_s * k as u32, samples, ..self.clone() }
    }
    /// The sample in force at Unix time `t`, `None` outside the trace.
    pub fn at(&self, t: i64) -> Option<&OwnerSample> {
        if t < self.start_unix {
            return None;
        }
        self.samples.get(((t - self.start_unix) / self.step_s as i64) as usize)
    }
}

/// An [`OwnerTrace`] stored as runs of identical samples: what the driver replays.
/// Sample `i` lies in the run `k` with `runs[k].0 <= i < runs[k + 1].0` (the last run
/// ends at `len`). A year of a large pool only fits in memory this way.
#[derive(Clone, Debug, PartialEq)]
pub struct RunTrace {
    /// The machine's name.
    pub machine: String,
    /// Unix time (UTC seconds) of sample 0.
    pub start_unix: i64,
    /// Seconds between samples (≥ 1).
    pub step_s: u32,
    /// Physical memory, bytes.
    pub mem_total_bytes: u64,
    /// Number of samples.
    pub len: u32,
    /// (first sample index, sample) of each run, increasing; the first starts at 0.
    pub runs: Vec<(u32, OwnerSample)>,
}

impl RunTrace {
    /// An empty trace to push runs onto.
    pub fn new(machine: impl Into<String>, start_unix: i64, step_s: u32, mem_total_bytes: u64) -> RunTrace {
        RunTrace { machine: machine.into(), start_unix, step_s: step_s.max(1), mem_total_bytes, len: 0, runs: Vec::new() }
    }
    /// Appends `n` copies of `s` (merged into the last run when equal).
    pub fn push(&mut self, s: OwnerSample, n: u32) {
        if n == 0 {
            return;
        }
        if self.runs.last().is_none_or(|(_, last)| *last != s) {
            self.runs.push((self.len, s));
        }
        self.len += n;
    }
    /// The sample at index `i` (binary search; the driver keeps a cursor instead).
    pub fn sample(&self, i: u32) -> Option<OwnerSample> {
        if i >= self.len {
            return None;
        }
        let k = self.runs.partition_point(|(start, _)| *start <= i);
        Some(self.runs[k - 1].1)
    }
    /// Unix time just after the last sample.
    pub fn end_unix(&self) -> i64 {
        self.start_unix + self.len as i64 * self.step_s as i64
    }
}

impl From<&OwnerTrace> for RunTrace {
    fn from(t: &OwnerTrace) -> RunTrace {
        let mut r = RunTrace::new(t.machine.clone(), t.start_unix, t.step_s, t.mem_total_bytes);
        for s in &t.samples {
            r.push(*s, 1);
        }
        r
    }
}

/// Reads a ledger trace exported as CSV (see the module doc) from a file.
pub fn read_ledger_csv(path: &Path) -> Result<OwnerTrace, TraceError> {
    let text = std::fs::read_to_string(path).map_err(|source| TraceError::Io { file: path.to_path_buf(), source })?;
    let name = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "ledger".into());
    parse_ledger_csv(path, &name, &text)
}

/// Parses ledger CSV text; `file` names it in errors.
pub fn parse_ledger_csv(file: &Path, machine: &str, text: &str) -> Result<OwnerTrace, TraceError> {
    let (rows, mem_total) = rows_of(file, text)?;
    // The step: the most common gap.
    let mut gaps: Vec<i64> = rows.windows(2).map(|w| w[1].0 - w[0].0).collect();
    gaps.sort_unstable();
    let step = mode(&gaps).unwrap_or(2).max(1);
    let start = rows[0].0;
    let len = ((rows.last().expect("non-empty").0 - start) / step + 1) as usize;
    let absent = OwnerSample { owner_cpu: 1.0, owner_mem_bytes: 0, input: false };
    let mut samples = vec![absent; len];
    // A row stands for the time up to the next one if that is at most HOLD_S away (the
    // agent samples every 10 s with no guest work, every 2 s otherwise); longer gaps
    // stay absent.
    for (k, (t, s)) in rows.iter().enumerate() {
        let from = ((t - start) / step) as usize;
        let until = rows.get(k + 1).filter(|n| n.0 - t <= HOLD_S).map_or(from + 1, |n| ((n.0 - start) / step) as usize);
        samples[from] = *s;
        let held = OwnerSample { input: false, ..*s };
        for slot in samples.iter_mut().take(until).skip(from + 1) {
            *slot = held;
        }
    }
    Ok(OwnerTrace { machine: machine.to_string(), start_unix: start, step_s: step as u32, mem_total_bytes: mem_total, samples })
}

/// A row of a ledger export stands for the time up to the next row if that is at most
/// this far (s); see [`parse_ledger_csv`].
pub const HOLD_S: i64 = 30;

/// The rows of ledger CSV text as they are, `(Unix seconds, sample)`, in order.
pub fn parse_ledger_rows(file: &Path, text: &str) -> Result<Vec<(i64, OwnerSample)>, TraceError> {
    Ok(rows_of(file, text)?.0)
}

fn rows_of(file: &Path, text: &str) -> Result<(Vec<(i64, OwnerSample)>, u64), TraceError> {
    let mut mem_total = DEFAULT_MEM_TOTAL;
    let mut cols: Option<[usize; 4]> = None;
    let mut rows: Vec<(i64, OwnerSample)> = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let n = i + 1;
        let line = raw.trim();
        if line.is_empty() {
            continue;
        }
        if let Some(c) = line.strip_prefix('#') {
            if let Some(v) = c.trim().strip_prefix("mem_total_bytes=") {
                mem_total =
                    v.trim().parse().map_err(|_| TraceError::parse(file, n, format!("mem_total_bytes: {v:?} is not a byte count")))?;
            }
            continue;
        }
        let fields: Vec<&str> = line.split(',').map(str::trim).collect();
        let Some(c) = cols else {
            let find = |names: &[&str]| fields.iter().position(|f| names.contains(f));
            let need =
                |names: &[&str]| find(names).ok_or_else(|| TraceError::parse(file, n, format!("header lacks column {:?}", names[0])));
            cols = Some([need(&["t"])?, need(&["owner_cpu"])?, need(&["owner_mem_bytes", "owner_mem"])?, need(&["input"])?]);
            continue;
        };
        let get =
            |k: usize, name: &str| fields.get(c[k]).copied().ok_or_else(|| TraceError::parse(file, n, format!("missing field {name}")));
        let t: i64 = get(0, "t")?.parse().map_err(|_| TraceError::parse(file, n, format!("t: {:?} is not Unix seconds", fields[c[0]])))?;
        let cpu_s = get(1, "owner_cpu")?;
        let cpu: f32 = cpu_s
            .parse()
            .ok()
            .filter(|v: &f32| (0.0..=1.0).contains(v))
            .ok_or_else(|| TraceError::parse(file, n, format!("owner_cpu: {cpu_s:?} is not a fraction between 0 and 1")))?;
        let mem_s = get(2, "owner_mem_bytes")?;
        let mem: u64 = mem_s.parse().map_err(|_| TraceError::parse(file, n, format!("owner_mem_bytes: {mem_s:?} is not a byte count")))?;
        let input = match get(3, "input")? {
            "1" | "true" => true,
            "0" | "false" => false,
            v => return Err(TraceError::parse(file, n, format!("input: {v:?} is not 0/1 or true/false"))),
        };
        if rows.last().is_some_and(|(p, _)| *p >= t) {
            return Err(TraceError::parse(file, n, format!("t: {t} is not after the previous row's")));
        }
        rows.push((t, OwnerSample { owner_cpu: cpu, owner_mem_bytes: mem, input }));
    }
    if rows.is_empty() {
        return Err(TraceError::Empty { file: file.to_path_buf(), msg: "no trace rows".into() });
    }
    Ok((rows, mem_total))
}

fn mode(sorted: &[i64]) -> Option<i64> {
    let mut best: Option<(i64, usize)> = None;
    let mut i = 0;
    while i < sorted.len() {
        let j = sorted[i..].iter().position(|v| *v != sorted[i]).map_or(sorted.len(), |k| i + k);
        if best.is_none_or(|(_, c)| j - i > c) {
            best = Some((sorted[i], j - i));
        }
        i = j;
    }
    best.map(|(v, _)| v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn testdata(name: &str) -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata").join(name)
    }

    #[test]
    fn reads_the_sample_export() {
        let t = read_ledger_csv(&testdata("ledger-trace.csv")).unwrap();
        assert_eq!(t.step_s, 2);
        assert_eq!(t.mem_total_bytes, 8 << 30);
        assert_eq!(t.start_unix, 1_767_261_600);
        // 10 rows over 22 s with one 4-s gap: 11 slots, the gap holding the row before it
        // (the agent's relaxed sampling), without its input.
        assert_eq!(t.samples.len(), 11);
        assert!(t.samples[0].input);
        assert_eq!(t.samples[5], t.samples[4]);
        // A gap longer than HOLD_S is time nobody watched: owner present.
        let f = Path::new("g.csv");
        let g = parse_ledger_csv(f, "g", "t,owner_cpu,owner_mem,input\n0,0.1,5,1\n2,0.1,5,0\n12,0.2,5,0\n100,0.0,5,0\n").unwrap();
        assert_eq!(g.step_s, 2);
        assert_eq!(g.samples[1].owner_cpu, 0.1);
        assert!(!g.samples[2].input && g.samples[2].owner_cpu == 0.1, "held across the 10-s gap");
        assert_eq!(g.samples[6].owner_cpu, 0.2);
        assert_eq!(g.samples[7].owner_cpu, 1.0, "unwatched");
        assert_eq!(parse_ledger_rows(f, "t,owner_cpu,owner_mem,input\n0,0.1,5,1\n12,0.2,5,0\n").unwrap().len(), 2);
        assert_eq!(t.at(1_767_261_600 + 3).unwrap().owner_cpu, t.samples[1].owner_cpu);
        assert!(t.at(1_767_261_600 - 1).is_none());
    }

    #[test]
    fn run_traces_keep_every_sample() {
        let t = read_ledger_csv(&testdata("ledger-trace.csv")).unwrap();
        let r = RunTrace::from(&t);
        assert_eq!(r.len as usize, t.samples.len());
        assert!(r.runs.len() <= t.samples.len());
        for (i, s) in t.samples.iter().enumerate() {
            assert_eq!(r.sample(i as u32), Some(*s), "sample {i}");
        }
        assert_eq!(r.sample(r.len), None);
        assert_eq!(r.end_unix(), t.end_unix());
    }

    #[test]
    fn bad_rows_name_file_line_and_field() {
        let f = Path::new("x.csv");
        let e = parse_ledger_csv(f, "x", "t,owner_cpu,owner_mem,input\n10,0.1,5,0\n12,1.7,5,0\n").unwrap_err().to_string();
        assert_eq!(e, "x.csv:3: owner_cpu: \"1.7\" is not a fraction between 0 and 1");
        let e = parse_ledger_csv(f, "x", "t,owner_cpu,input\n").unwrap_err().to_string();
        assert!(e.starts_with("x.csv:1: header lacks column \"owner_mem_bytes\""), "{e}");
        let e = parse_ledger_csv(f, "x", "t,owner_cpu,owner_mem,input\n10,0.1,5,0\n10,0.1,5,yes\n").unwrap_err().to_string();
        assert_eq!(e, "x.csv:3: input: \"yes\" is not 0/1 or true/false");
        let e = parse_ledger_csv(f, "x", "t,owner_cpu,owner_mem,input\n10,0.1,5,0\n8,0.1,5,1\n").unwrap_err().to_string();
        assert_eq!(e, "x.csv:3: t: 8 is not after the previous row's");
        assert!(matches!(parse_ledger_csv(f, "x", "# nothing\n"), Err(TraceError::Empty { .. })));
    }
}
