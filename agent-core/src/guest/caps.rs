//! The disk and output caps' words and the pure part of their watches, alike on every
//! platform: what a guest over `[guests] disk_mib` is told ([`Over`]), what a job whose
//! output was cut is told ([`output_limit`]), and (for Windows, where no free-space bound
//! is read) when a guest's work directory is walked ([`WalkPlan`]): while the bytes its
//! job's processes wrote since the last walk, added to what that walk found, stay under
//! the limit nothing is walked; past it, or every [`WALK_AT_LEAST_EVERY`] all the same (a
//! file written through a mapping or extended without writing is not counted as written),
//! or every [`WALK_UNCOUNTED_EVERY`] while the written count reads 0 (none written, or a
//! system that does not count: Wine 8.0), the directory is walked; never more often than
//! [`WALK_COST_FACTOR`] times the last walk's duration.

use std::time::{Duration, Instant};

/// Entries one walk looks at; a directory holding more is over its limit (said so).
pub const MAX_ENTRIES: usize = 200_000;
/// A walk that took t waits this many times t before the next (~2 % of a core at most).
pub const WALK_COST_FACTOR: u32 = 50;
/// A walk is made at least this often, whatever the written count says.
pub const WALK_AT_LEAST_EVERY: Duration = Duration::from_secs(30);
/// How often the directory is walked while the job's written count reads 0.
pub const WALK_UNCOUNTED_EVERY: Duration = Duration::from_secs(2);

/// What a measurement found over the limit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Over {
    pub used_bytes: u64,
    pub limit_bytes: u64,
    /// The walk stopped at [`MAX_ENTRIES`].
    pub too_many_files: bool,
}

impl std::fmt::Display for Over {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mib = |b: u64| b as f64 / (1u64 << 20) as f64;
        if self.too_many_files {
            write!(
                f,
                "disk limit: the work directory holds more than {MAX_ENTRIES} files ([guests] disk_mib = {:.0})",
                mib(self.limit_bytes)
            )
        } else {
            // Said in KiB when it is over by less than a MiB: "64.0 MiB, over 64" reads as
            // no excess at all.
            let over = self.used_bytes.saturating_sub(self.limit_bytes);
            let by = if over < 1 << 20 { format!("{} KiB", over.div_ceil(1024)) } else { format!("{:.1} MiB", mib(over)) };
            write!(
                f,
                "disk limit: the work directory used {:.1} MiB, {by} over [guests] disk_mib = {:.0}",
                mib(self.used_bytes),
                mib(self.limit_bytes)
            )
        }
    }
}

/// The failure of a job whose `stream` ("stdout", "stderr") was cut at the cap.
pub fn output_limit(stream: &str, output_mib: u64) -> String {
    format!("output limit: its {stream} was cut at [guests] output_mib = {output_mib}")
}

/// When one guest's work directory is walked (see the module's doc).
#[derive(Debug, Clone)]
pub struct WalkPlan {
    limit: u64,
    /// What the last walk found, bytes.
    measured: u64,
    /// The job's written count at the last walk.
    written_at_walk: u64,
    last_walk: Option<Instant>,
    /// No walk before this (the cost bound).
    not_before: Option<Instant>,
    /// Walks made.
    pub walks: u32,
}

impl WalkPlan {
    pub fn new(limit_bytes: u64) -> Self {
        Self { limit: limit_bytes, measured: 0, written_at_walk: 0, last_walk: None, not_before: None, walks: 0 }
    }

    /// Whether to walk now, the job having written `written` bytes in all (`None`: the
    /// count could not be read).
    pub fn due(&self, now: Instant, written: Option<u64>) -> bool {
        if self.not_before.is_some_and(|t| now < t) {
            return false;
        }
        let Some(last) = self.last_walk else { return true };
        let since = now.saturating_duration_since(last);
        match written.filter(|&w| w > 0) {
            Some(w) => self.measured + w.saturating_sub(self.written_at_walk) > self.limit || since >= WALK_AT_LEAST_EVERY,
            None => since >= WALK_UNCOUNTED_EVERY,
        }
    }

    /// Records a walk made at `now` that found `used` bytes (`complete`: it saw every
    /// entry) in `took`; the job had written `written` bytes then. Over the limit: why.
    pub fn walked(&mut self, now: Instant, used: u64, complete: bool, took: Duration, written: Option<u64>) -> Option<Over> {
        self.walks += 1;
        self.measured = used;
        self.written_at_walk = written.unwrap_or(0);
        self.last_walk = Some(now);
        self.not_before = Some(now + took * WALK_COST_FACTOR);
        (used > self.limit || !complete).then_some(Over { used_bytes: used, limit_bytes: self.limit, too_many_files: !complete })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    #[test]
    fn a_counted_job_is_walked_only_when_its_writes_could_pass_the_limit() {
        let t0 = Instant::now();
        let mut p = WalkPlan::new(10 * MIB);
        assert!(p.due(t0, Some(0)), "the first look walks");
        assert_eq!(p.walked(t0, 4 * MIB, true, Duration::ZERO, Some(4 * MIB)), None);
        let t1 = t0 + Duration::from_secs(5);
        assert!(!p.due(t1, Some(9 * MIB)), "4 MiB found + 5 MiB written since: within 10");
        assert!(p.due(t1, Some(11 * MIB)), "4 + 7 could be over 10");
        assert!(p.due(t0 + WALK_AT_LEAST_EVERY, Some(5 * MIB)), "walked all the same every 30 s");
    }

    #[test]
    fn an_uncounted_job_is_walked_every_two_seconds() {
        let t0 = Instant::now();
        let mut p = WalkPlan::new(10 * MIB);
        p.walked(t0, 0, true, Duration::ZERO, Some(0));
        assert!(!p.due(t0 + Duration::from_secs(1), Some(0)));
        assert!(p.due(t0 + WALK_UNCOUNTED_EVERY, Some(0)));
        assert!(p.due(t0 + WALK_UNCOUNTED_EVERY, None));
    }

    #[test]
    fn a_slow_walk_spaces_the_next() {
        let t0 = Instant::now();
        let mut p = WalkPlan::new(MIB);
        p.walked(t0, 0, true, Duration::from_millis(100), Some(1));
        assert!(!p.due(t0 + Duration::from_secs(4), Some(100 * MIB)), "5 s (50 × 100 ms) must pass");
        assert!(p.due(t0 + Duration::from_secs(5), Some(100 * MIB)));
    }

    #[test]
    fn over_the_limit_or_too_many_files_is_said() {
        let mut p = WalkPlan::new(MIB);
        let t = Instant::now();
        let over = p.walked(t, 3 * MIB, true, Duration::ZERO, None).unwrap();
        assert_eq!(over.to_string(), "disk limit: the work directory used 3.0 MiB, 2.0 MiB over [guests] disk_mib = 1");
        assert!(p.walked(t, 0, false, Duration::ZERO, None).unwrap().too_many_files);
        assert_eq!(output_limit("stdout", 4), "output limit: its stdout was cut at [guests] output_mib = 4");
    }
}
