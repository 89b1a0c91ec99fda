//! The owner's memory against the guests', as pure decisions: whether a new guest may
//! start and with which memory cap (admission), how far a running guest's cap is
//! re-clamped to what the owner can spare, and what the pressure watch does with the
//! owner's memory stall time (freeze, then kill, then thaw when it clears), and what the
//! [`LevelWatch`] does with a pressure level the OS grades itself (macOS's pressure
//! level, Windows's low-memory notification).
//!
//! The guest runtime reads `/proc/meminfo`, PSI and the cgroups (or the OS's level),
//! hands the readings in and acts on what comes back; the numbers and the reasoning live
//! here, where the simulator and the tests can drive them in virtual time.

use crate::clock::MonoMs;
use std::fmt;
use std::time::Duration;

/// One mebibyte.
pub const MIB: u64 = 1 << 20;
/// The smallest memory cap a guest is ever given: below it nothing useful runs, and a
/// re-clamp never squeezes a running guest under it.
pub(crate) const MIN_GUEST_BYTES: u64 = 16 * MIB;

/// The owner's memory settings, from `[guests]` and `[caps]`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MemoryRules {
    /// Memory always left to the owner, bytes (`guests.owner_reserve_mib`).
    pub owner_reserve_bytes: u64,
    /// No new guest while the owner's own memory is above this fraction of the total
    /// (`guests.admission_owner_mem_max`).
    pub admission_owner_mem_max: f64,
    /// A fixed cap per guest, bytes; `None` for no fixed cap (`guests.memory_cap_mib = 0`).
    pub memory_cap_bytes: Option<u64>,
    /// The guests' share of total memory the owner allows (`caps.memory_max`).
    pub memory_share: f64,
    /// The owner's memory stall (% of wall time) above which guests are frozen
    /// (`guests.pressure_freeze_pct`); they thaw below half of it.
    pub pressure_freeze_pct: f64,
    /// How long pressure may last with guests frozen before they are killed
    /// (`guests.pressure_kill_s`).
    pub pressure_kill: Duration,
}

/// What the runtime read about memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemoryReading {
    /// Physical memory, bytes.
    pub total: u64,
    /// Memory available without swapping (`MemAvailable`), bytes.
    pub available: u64,
}

/// Why a guest may not start now.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Refusal {
    /// The owner's own memory is above the admission limit.
    OwnerShare { share: f64, limit: f64 },
    /// Less than the owner's reserve plus the smallest guest is available.
    LowAvailable { available: u64, reserve: u64 },
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Refusal::OwnerShare { share, limit } => {
                write!(f, "owner uses {:.0} % of memory (admission limit {:.0} %)", share * 100.0, limit * 100.0)
            }
            Refusal::LowAvailable { available, reserve } => {
                write!(f, "{} MiB available, owner reserve {} MiB", available / MIB, reserve / MIB)
            }
        }
    }
}

/// The cap a guest gets before admission clamps it: the fixed cap, the owner's share of
/// total memory and the job's own cap, whichever is least.
pub fn cap_for(rules: &MemoryRules, total: u64, spec_cap: Option<u64>) -> u64 {
    let share = (rules.memory_share.clamp(0.0, 1.0) * total as f64) as u64;
    rules.memory_cap_bytes.unwrap_or(u64::MAX).min(share).min(spec_cap.unwrap_or(u64::MAX))
}

/// M of seed 001 for this machine: what its guests may hold in all now — what they hold
/// plus what is available beyond the owner's reserve, at most the owner's share of total
/// memory and the fixed per-guest cap times the guests that may run at once
/// (`max_jobs`). The coordinator places no job that would take the guests' measured
/// demand to its memory threshold of this.
pub fn guests_may_hold(rules: &MemoryRules, m: MemoryReading, guests_bytes: u64, max_jobs: u32) -> u64 {
    let share = (rules.memory_share.clamp(0.0, 1.0) * m.total as f64) as u64;
    let fixed = rules.memory_cap_bytes.map_or(u64::MAX, |c| c.saturating_mul(u64::from(max_jobs.max(1))));
    let spare = m.available.saturating_add(guests_bytes).saturating_sub(rules.owner_reserve_bytes);
    share.min(fixed).min(spare)
}

/// Admission: no start while the owner's own memory (everything in use but the guests')
/// is above the limit or less than the reserve plus the smallest guest is available.
/// Returns the cap the new guest gets: its [`cap_for`], never more than what is
/// available beyond the reserve.
pub fn admit(rules: &MemoryRules, m: MemoryReading, guests_bytes: u64, spec_cap: Option<u64>) -> Result<u64, Refusal> {
    let owner = m.total.saturating_sub(m.available).saturating_sub(guests_bytes);
    let share = owner as f64 / m.total.max(1) as f64;
    if share > rules.admission_owner_mem_max {
        return Err(Refusal::OwnerShare { share, limit: rules.admission_owner_mem_max });
    }
    let reserve = rules.owner_reserve_bytes;
    if m.available < reserve.saturating_add(MIN_GUEST_BYTES) {
        return Err(Refusal::LowAvailable { available: m.available, reserve });
    }
    Ok(cap_for(rules, m.total, spec_cap).min(m.available - reserve))
}

/// A running guest's cap re-clamped to what the owner can spare: at most its admitted
/// cap and what it holds plus what is available beyond the reserve, never below
/// `MIN_GUEST_BYTES`. `Some(new)` when the limit should change: whenever it must
/// shrink, and only when it may grow by more than an eighth (no churn on small moves).
pub fn reclamp(rules: &MemoryRules, available: u64, guest_bytes: u64, cap: u64, limit_now: Option<u64>) -> Option<u64> {
    let spare = available.saturating_add(guest_bytes).saturating_sub(rules.owner_reserve_bytes);
    let want = cap.min(spare).max(MIN_GUEST_BYTES);
    let cur = limit_now.unwrap_or(u64::MAX);
    (want < cur || want > cur.saturating_add(cur / 8)).then_some(want)
}

/// Cumulative memory stall counters (PSI `some` total, microseconds) at one instant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StallReading {
    pub at: MonoMs,
    /// The whole system's stall time.
    pub system_us: u64,
    /// The guests' own stall time (their cgroup's PSI).
    pub guests_us: u64,
}

/// The owner's share of wall time stalled on memory between two readings, in percent:
/// the system's stall minus the guests' own.
pub fn owner_stall_pct(prev: StallReading, cur: StallReading) -> f64 {
    let wall_us = cur.at.since(prev.at).as_micros() as f64;
    if wall_us <= 0.0 {
        return 0.0;
    }
    let guests = cur.guests_us.saturating_sub(prev.guests_us);
    let owner = cur.system_us.saturating_sub(prev.system_us).saturating_sub(guests);
    owner as f64 / wall_us * 100.0
}

/// What the pressure watch asks of the runtime.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PressureDecision {
    /// Nothing to do.
    Hold,
    /// Freeze the guests: the owner is short of memory.
    Freeze,
    /// Pressure outlasted `pressure_kill` with guests frozen: kill them.
    Kill,
    /// Pressure cleared: the guests may thaw (if the policy lets them run).
    Thaw,
}

/// The pressure watch's state between readings.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PressureWatch {
    last: Option<StallReading>,
    frozen_since: Option<MonoMs>,
}

impl PressureWatch {
    /// Whether the watch holds the guests frozen.
    pub fn frozen(&self) -> bool {
        self.frozen_since.is_some()
    }

    /// Forgets the stall baseline (no guest to guard: the next guest starts afresh).
    pub fn idle(&mut self) {
        self.last = None;
    }

    /// One reading: `available` memory and the stall counters, with `active` true while
    /// some guest runs (is not being stopped). Freezes when available memory is below
    /// the reserve or the owner's stall passes the threshold, kills when that lasts
    /// `pressure_kill` with guests frozen, thaws when available memory is back above the
    /// reserve and the stall below half the threshold. Returns the decision and the
    /// owner's stall percentage it was based on.
    pub fn step(&mut self, rules: &MemoryRules, available: u64, stall: StallReading, active: bool) -> (PressureDecision, f64) {
        let pct = self.last.map_or(0.0, |prev| owner_stall_pct(prev, stall));
        self.last = Some(stall);
        let low = available < rules.owner_reserve_bytes;
        let decision = if active && (low || pct > rules.pressure_freeze_pct) {
            match self.frozen_since {
                None => {
                    self.frozen_since = Some(stall.at);
                    PressureDecision::Freeze
                }
                Some(t) if stall.at.since(t) >= rules.pressure_kill => PressureDecision::Kill,
                Some(_) => PressureDecision::Hold,
            }
        } else if self.frozen_since.is_some() && !low && pct < rules.pressure_freeze_pct / 2.0 {
            self.frozen_since = None;
            PressureDecision::Thaw
        } else {
            PressureDecision::Hold
        };
        (decision, pct)
    }
}

/// The system's memory pressure as the OS grades it: macOS's
/// `kern.memorystatus_vm_pressure_level`; Windows's low-memory resource notification,
/// which knows two grades only (signalled reads as `Critical`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PressureLevel {
    Normal,
    Warning,
    Critical,
}

/// The pressure watch for an OS-graded level ([`PressureLevel`]), between readings:
/// guests freeze while the level is raised (and none start), are killed once it has
/// stayed `Critical` for `pressure_kill`, and may thaw when it is `Normal` again.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LevelWatch {
    critical_since: Option<MonoMs>,
    raised: bool,
    frozen: bool,
}

impl LevelWatch {
    /// Whether the watch holds the guests frozen (the policy must not thaw them).
    pub fn frozen(&self) -> bool {
        self.frozen
    }

    /// Whether the last level read was raised: no new guest may start.
    pub fn raised(&self) -> bool {
        self.raised
    }

    /// One reading at `now`: the `level`, with `active` true while some guest runs (is
    /// not evicted). Freezes when the level is raised and a guest runs; kills when it has
    /// been `Critical` without a break for `pressure_kill` and a guest still runs; thaws
    /// when it is `Normal` again after a freeze or kill.
    pub fn step(&mut self, now: MonoMs, level: PressureLevel, active: bool, pressure_kill: Duration) -> PressureDecision {
        self.critical_since = match level {
            PressureLevel::Critical => Some(self.critical_since.unwrap_or(now)),
            _ => None,
        };
        self.raised = level != PressureLevel::Normal;
        if !self.raised {
            return if std::mem::take(&mut self.frozen) { PressureDecision::Thaw } else { PressureDecision::Hold };
        }
        if !active {
            return PressureDecision::Hold;
        }
        if self.critical_since.is_some_and(|t| now.since(t) >= pressure_kill) {
            self.frozen = true;
            return PressureDecision::Kill;
        }
        if std::mem::replace(&mut self.frozen, true) {
            PressureDecision::Hold
        } else {
            PressureDecision::Freeze
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;

    fn rules() -> MemoryRules {
        MemoryRules {
            owner_reserve_bytes: 512 * MIB,
            admission_owner_mem_max: 0.6,
            memory_cap_bytes: Some(2 * GIB),
            memory_share: 0.5,
            pressure_freeze_pct: 10.0,
            pressure_kill: Duration::from_secs(60),
        }
    }

    #[test]
    fn what_guests_may_hold_is_the_least_of_share_fixed_caps_and_what_the_owner_spares() {
        let r = rules();
        let m = |available| MemoryReading { total: 16 * GIB, available };
        // Plenty available: the fixed cap per guest times the guests at once (2 × 2 GiB).
        assert_eq!(guests_may_hold(&r, m(12 * GIB), 0, 2), 4 * GIB);
        // The owner's share (8 GiB) below five fixed caps.
        assert_eq!(guests_may_hold(&r, m(12 * GIB), 0, 5), 8 * GIB);
        // What the guests hold counts as theirs: 1 GiB available + 1 GiB held − 0.5 reserve.
        assert_eq!(guests_may_hold(&r, m(GIB), GIB, 2), GIB + GIB - 512 * MIB);
        // No fixed cap; less available than the reserve: nothing.
        let open = MemoryRules { memory_cap_bytes: None, ..r };
        assert_eq!(guests_may_hold(&open, m(12 * GIB), 0, 1), 8 * GIB);
        assert_eq!(guests_may_hold(&open, m(256 * MIB), 0, 1), 0);
    }

    #[test]
    fn admission_refuses_a_busy_owner_and_a_short_machine_and_caps_what_it_admits() {
        let r = rules();
        // 16 GiB machine, owner uses 12 GiB (75 %): refused, naming both figures.
        let busy = admit(&r, MemoryReading { total: 16 * GIB, available: 4 * GIB }, 0, None).unwrap_err();
        assert_eq!(busy.to_string(), "owner uses 75 % of memory (admission limit 60 %)");
        // Guests' own memory is not the owner's: 12 GiB in use of which 8 are guests.
        assert!(admit(&r, MemoryReading { total: 16 * GIB, available: 4 * GIB }, 8 * GIB, None).is_ok());
        // Less than reserve + 16 MiB available: refused.
        let short = admit(&r, MemoryReading { total: 16 * GIB, available: 520 * MIB }, 15 * GIB, None).unwrap_err();
        assert_eq!(short, Refusal::LowAvailable { available: 520 * MIB, reserve: 512 * MIB });
        // Admitted: the fixed cap (2 GiB) below the share (8 GiB) and the job's own 3 GiB.
        assert_eq!(admit(&r, MemoryReading { total: 16 * GIB, available: 12 * GIB }, 0, Some(3 * GIB)), Ok(2 * GIB));
        // ...and never more than what is available beyond the reserve.
        assert_eq!(admit(&r, MemoryReading { total: 16 * GIB, available: GIB }, 10 * GIB, None), Ok(512 * MIB));
        // No fixed cap: the owner's share of total memory.
        let open = MemoryRules { memory_cap_bytes: None, ..r };
        assert_eq!(cap_for(&open, 16 * GIB, None), 8 * GIB);
    }

    #[test]
    fn reclamp_shrinks_at_once_grows_only_by_more_than_an_eighth_and_keeps_a_floor() {
        let r = rules();
        // 1 GiB available + 1 GiB held − 0.5 reserve = 1.5 GiB < 2 GiB limit: shrink.
        assert_eq!(reclamp(&r, GIB, GIB, 2 * GIB, Some(2 * GIB)), Some(GIB + 512 * MIB));
        // Plenty available, limit already at the cap: nothing.
        assert_eq!(reclamp(&r, 8 * GIB, GIB, 2 * GIB, Some(2 * GIB)), None);
        // Room to grow by a little (< 1/8): nothing; by more: grow.
        assert_eq!(reclamp(&r, 8 * GIB, GIB, 2 * GIB, Some(1900 * MIB)), None);
        assert_eq!(reclamp(&r, 8 * GIB, GIB, 2 * GIB, Some(GIB)), Some(2 * GIB));
        // Nothing spare at all: the floor.
        assert_eq!(reclamp(&r, 0, 0, 2 * GIB, Some(GIB)), Some(MIN_GUEST_BYTES));
    }

    #[test]
    fn pressure_freezes_kills_when_it_lasts_and_thaws_below_half_the_threshold() {
        let r = rules();
        let mut w = PressureWatch::default();
        let at = |s: u64, sys_ms: u64, guests_ms: u64| StallReading {
            at: MonoMs(s * 1000),
            system_us: sys_ms * 1000,
            guests_us: guests_ms * 1000,
        };
        let plenty = 8 * GIB;
        assert_eq!(w.step(&r, plenty, at(0, 0, 0), true).0, PressureDecision::Hold);
        // 1 s later the system stalled 300 ms of which the guests' own 250: owner 5 %.
        let (d, pct) = w.step(&r, plenty, at(1, 300, 250), true);
        assert_eq!(d, PressureDecision::Hold);
        assert!((pct - 5.0).abs() < 1e-9, "{pct}");
        // The owner stalls 200 ms in the next second (20 %): freeze.
        assert_eq!(w.step(&r, plenty, at(2, 500, 250), true).0, PressureDecision::Freeze);
        assert!(w.frozen());
        // Still 20 %: hold, until 60 s after the freeze: kill.
        assert_eq!(w.step(&r, plenty, at(3, 700, 250), true).0, PressureDecision::Hold);
        assert_eq!(w.step(&r, plenty, at(62, 12_500, 250), true).0, PressureDecision::Kill);
        // Clears to 6 % (not below half of 10 %): hold; to 2 %: thaw.
        assert_eq!(w.step(&r, plenty, at(63, 12_560, 250), false).0, PressureDecision::Hold);
        assert_eq!(w.step(&r, plenty, at(64, 12_580, 250), false).0, PressureDecision::Thaw);
        assert!(!w.frozen());
        // Available memory below the reserve freezes with no stall at all.
        assert_eq!(w.step(&r, 100 * MIB, at(65, 12_580, 250), true).0, PressureDecision::Freeze);
        // ...but never without a running guest to freeze.
        let mut quiet = PressureWatch::default();
        assert_eq!(quiet.step(&r, 100 * MIB, at(0, 0, 0), false).0, PressureDecision::Hold);
    }

    #[test]
    fn a_graded_level_freezes_while_raised_kills_when_critical_lasts_and_thaws_at_normal() {
        use PressureLevel::{Critical, Normal, Warning};
        let kill = Duration::from_secs(10);
        let at = |s: u64| MonoMs(s * 1000);
        let mut w = LevelWatch::default();
        assert_eq!(w.step(at(0), Normal, true, kill), PressureDecision::Hold);
        assert!(!w.raised() && !w.frozen());
        // Raised with no guest running: nothing to freeze, but none may start.
        assert_eq!(w.step(at(1), Warning, false, kill), PressureDecision::Hold);
        assert!(w.raised() && !w.frozen());
        // A warning freezes once, then holds; a warning never kills, however long.
        assert_eq!(w.step(at(2), Warning, true, kill), PressureDecision::Freeze);
        assert_eq!(w.step(at(3), Warning, true, kill), PressureDecision::Hold);
        assert_eq!(w.step(at(100), Warning, true, kill), PressureDecision::Hold);
        // Critical from 101 s: held until 10 s of it, then killed.
        assert_eq!(w.step(at(101), Critical, true, kill), PressureDecision::Hold);
        assert_eq!(w.step(at(110), Critical, true, kill), PressureDecision::Hold);
        assert_eq!(w.step(at(111), Critical, true, kill), PressureDecision::Kill);
        assert!(w.frozen());
        // Nothing left running: no second kill; then normal: thaw, once.
        assert_eq!(w.step(at(112), Critical, false, kill), PressureDecision::Hold);
        assert_eq!(w.step(at(113), Normal, false, kill), PressureDecision::Thaw);
        assert_eq!(w.step(at(114), Normal, true, kill), PressureDecision::Hold);
        assert!(!w.raised() && !w.frozen());
        // A break in the critical spell restarts its count: 9 s, warning, 9 s: no kill.
        assert_eq!(w.step(at(120), Critical, true, kill), PressureDecision::Freeze);
        assert_eq!(w.step(at(129), Critical, true, kill), PressureDecision::Hold);
        assert_eq!(w.step(at(130), Warning, true, kill), PressureDecision::Hold);
        assert_eq!(w.step(at(131), Critical, true, kill), PressureDecision::Hold);
        assert_eq!(w.step(at(140), Critical, true, kill), PressureDecision::Hold);
        assert_eq!(w.step(at(141), Critical, true, kill), PressureDecision::Kill);
        // pressure_kill 0: a critical level kills at its first reading.
        let mut now = LevelWatch::default();
        assert_eq!(now.step(at(0), Critical, true, Duration::ZERO), PressureDecision::Kill);
    }
}
