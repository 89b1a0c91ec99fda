//! This machine's calibration, for `lull calibrate` and the tray's Settings window: reads
//! the owner's recorded trace from the agent's ledger (its own read connection, so the
//! running agent is never held up) and derives the availability and recruitment
//! thresholds with `lull_core::calibrate` (the logic; this file only reads and shapes the
//! answer). Both entry points call [`of_this_machine`] so the window and the command can
//! never disagree.

use crate::ledger::{Ledger, LedgerError};
use lull_core::calibrate::OwnerSample;
use lull_core::calibrate::{calibrate, CalibrateError, Calibration, MIN_DAYS};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// The owner's trace from the ledger at `ledger`, oldest first, as calibration reads it.
/// No ledger yet is no history (calibration then says how many days it still needs).
pub fn ledger_rows(ledger: &Path) -> Result<Vec<(i64, OwnerSample)>, LedgerError> {
    if !ledger.exists() {
        return Ok(Vec::new());
    }
    let rows = Ledger::open(ledger)?.trace(i64::MIN, i64::MAX)?;
    Ok(rows
        .into_iter()
        .map(|r| (r.t, OwnerSample { owner_cpu: r.owner_cpu.clamp(0.0, 1.0), owner_mem_bytes: r.owner_mem_bytes, input: r.input }))
        .collect())
}

/// Calibrates from the ledger at `ledger` for a daily budget of `budget` interruptions.
/// `utc_offset_s` is the owner's local offset (days are counted in local time).
pub fn of_this_machine(ledger: &Path, budget: u32, utc_offset_s: i64) -> Result<Result<Calibration, CalibrateError>, LedgerError> {
    let rows = ledger_rows(ledger)?;
    Ok(calibrate(&rows, budget, utc_offset_s))
}

/// What the Settings window shows: either the derived thresholds with the reasoning and
/// the plot, or why there are none yet.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct CalibrationView {
    /// Thresholds were derived (enough history).
    pub calibrated: bool,
    /// Days of history recorded.
    pub have_days: f64,
    /// Days still needed before calibration can run (0 once it can).
    pub need_days: f64,
    /// The daily budget it was derived for.
    pub budget: u32,
    /// The derived owner-CPU threshold (`availability.owner_cpu_max`, fraction 0–1).
    pub owner_cpu_max: Option<f64>,
    /// The derived recruitment threshold (`availability.recruitment_threshold_s`).
    pub recruitment_threshold_s: Option<u64>,
    /// The reasoning, one line each (or the refusal).
    pub reasoning: Vec<String>,
    /// Donated hours and interruptions per day against the recruitment threshold (SVG
    /// markup made by Lull's own plotter, no scripts).
    pub plot_svg: Option<String>,
}

impl CalibrationView {
    /// Shapes a calibration (or its refusal) for the window.
    pub fn new(result: Result<Calibration, CalibrateError>, budget: u32) -> Self {
        match result {
            Ok(c) => CalibrationView {
                calibrated: true,
                have_days: c.days,
                need_days: 0.0,
                budget: c.budget,
                owner_cpu_max: Some(c.owner_cpu_max),
                recruitment_threshold_s: Some(c.recruitment_threshold_s),
                plot_svg: Some(c.svg()),
                reasoning: c.reasoning,
            },
            Err(e @ CalibrateError::NotEnoughHistory { have_days }) => CalibrationView {
                calibrated: false,
                have_days,
                need_days: (MIN_DAYS - have_days).max(0.0),
                budget,
                owner_cpu_max: None,
                recruitment_threshold_s: None,
                reasoning: vec![e.to_string()],
                plot_svg: None,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::TraceRow;

    /// Writes `days` of trace rows (every 10 s) into a real ledger file: nights away at
    /// 2 % CPU, days active at 60 % with input, and long lunch breaks the owner ends.
    fn ledger_with(days: i64) -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("ledger.db");
        let mut ledger = Ledger::open(&path).expect("ledger");
        let t0 = 1_700_000_000 - 1_700_000_000 % 86_400;
        let mut rows = Vec::new();
        for t in (0..days * 86_400).step_by(10) {
            let h = (t % 86_400) / 3600;
            let (cpu, input) = match h {
                9..=11 | 14..=17 => (0.6, true),
                12 | 13 => (0.03, false),
                _ => (0.02, false),
            };
            rows.push(TraceRow { t: t0 + t, owner_cpu: cpu, owner_mem_bytes: 1 << 30, input });
        }
        ledger.append_trace(&rows).expect("trace rows");
        (dir, path)
    }

    #[test]
    fn reads_the_ledger_and_derives_thresholds() {
        let (_d, path) = ledger_with(4);
        let v = CalibrationView::new(of_this_machine(&path, 3, 0).expect("ledger read"), 3);
        assert!(v.calibrated, "{v:?}");
        assert!(v.have_days > 3.9, "{v:?}");
        let cpu = v.owner_cpu_max.expect("cpu threshold");
        assert!(cpu > 0.02 && cpu < 0.6, "between background and active use: {cpu}");
        assert!(v.recruitment_threshold_s.is_some());
        assert!(v.plot_svg.as_deref().is_some_and(|s| s.starts_with("<svg")), "{:?}", v.plot_svg);
    }

    #[test]
    fn too_little_history_says_how_many_days_are_missing() {
        let (_d, path) = ledger_with(1);
        let v = CalibrationView::new(of_this_machine(&path, 3, 0).expect("ledger read"), 3);
        assert!(!v.calibrated);
        assert!((v.need_days - 2.0).abs() < 0.1, "{v:?}");
        assert!(v.reasoning[0].contains("days"), "{v:?}");
        assert!(v.owner_cpu_max.is_none() && v.plot_svg.is_none());
        let none = CalibrationView::new(of_this_machine(&_d.path().join("absent.db"), 3, 0).expect("no ledger"), 3);
        assert!(!none.calibrated && none.need_days == MIN_DAYS, "{none:?}");
    }
}
