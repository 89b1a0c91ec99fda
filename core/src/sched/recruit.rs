//! Instant-access recruitment (seed 003, mpidled): answer "give me up to K machines that
//! will stay idle for the next S seconds" at once, with no queue, and keep a share of the
//! idle machines back for the next request.
//!
//! * **Load prediction.** Each machine reports its owner's load (CPU fraction, guests
//!   excluded) about once a second ([`Recruiter::observe`]). A machine's load over the
//!   next S seconds is predicted by the mean of its most recent readings, the window
//!   chosen by the forecast length ([`window_for`]: 5 readings for a 10-s forecast, seed
//!   003 §3.2, Fig. 5).
//! * **Idle.** Predicted load below [`RecruitConfig::idle_load_max`] (seed 003: 10 % CPU)
//!   and not lent to an earlier request.
//! * **Reserve.** Of the `n` idle machines, `⌊reserve_pct · n⌋` are kept back
//!   (`reserved_of`); a request gets at most `n − reserved`, least loaded first (ties to
//!   the lower id). Seed 003 Table 1: a 20–30 % reserve raised the mean speedup of a
//!   stream of parallel jobs from 3.58 (no reserve) to 4.96.
//! * **Lending.** Granted machines are lent until [`Recruiter::release`]: two requests
//!   never share a machine.
//! * **Index.** For the windows in `INDEXED_WINDOWS` (5 readings: seed 003's 10-s
//!   forecast; [`HISTORY`]: every forecast of 119 s or more) the recruiter keeps the
//!   machines that are idle, eligible and not lent in a set ordered by (predicted load,
//!   id), updated whenever a machine's readings or standing change. A request for such a
//!   window reads the idle count and its K first entries (O(K log N)) instead of walking
//!   all N machines; any other window walks them, with the same result (tested against
//!   the walk on random pools).
//!
//! Pure: readings and requests come in as arguments; no clock.

use super::error::SchedError;
use super::ids::MachineId;
use std::collections::{BTreeMap, BTreeSet};

/// Readings kept per machine (enough for the longest window [`window_for`] returns).
pub const HISTORY: usize = 60;

/// The prediction windows kept in an ordered index (see the module doc): 5 readings,
/// [`window_for`] a 10-s forecast (seed 003's), and [`HISTORY`], which every forecast of
/// 119 s or more maps to (`lull recruit --for 10m`). Other windows walk the pool.
pub(crate) const INDEXED_WINDOWS: [usize; 2] = [5, HISTORY];

/// The recruiter's settings.
#[derive(Clone, Debug, PartialEq)]
pub struct RecruitConfig {
    /// A machine is idle when its predicted owner load is below this (fraction 0–1);
    /// at 1.0 every machine counts as idle (load is not looked at).
    pub idle_load_max: f64,
    /// Share of the idle machines kept back from every request (0 ≤ x < 1).
    pub reserve_pct: f64,
}

impl Default for RecruitConfig {
    /// Seed 003's settings: idle below 10 % CPU, a 30 % reserve.
    fn default() -> Self {
        RecruitConfig { idle_load_max: 0.10, reserve_pct: 0.30 }
    }
}

/// A request: up to `k` machines for about `forecast_s` seconds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Request {
    /// How many machines at most.
    pub k: usize,
    /// How long the work is expected to run, seconds (chooses the prediction window).
    pub forecast_s: f64,
}

/// The answer to a [`Request`].
#[derive(Clone, Debug, PartialEq)]
pub struct Grant {
    /// The machines lent, least loaded first.
    pub machines: Vec<MachineId>,
    /// Each granted machine's predicted owner load over the forecast (same order).
    pub predicted: Vec<f64>,
    /// Machines that were idle when the request came (before it was answered).
    pub idle: usize,
    /// Of those, how many were kept back.
    pub reserved: usize,
}

/// The prediction window for a forecast of `forecast_s` seconds: seed 003 Fig. 5 (right)
/// found the best window growing with the forecast, 5 one-second readings for 10 s; we
/// take half the forecast, at least 1 and at most [`HISTORY`].
pub fn window_for(forecast_s: f64) -> usize {
    if !forecast_s.is_finite() || forecast_s <= 0.0 {
        return 1;
    }
    ((forecast_s / 2.0).round() as usize).clamp(1, HISTORY)
}

/// The mean of the last `window` readings (oldest first in `recent`); `None` without any.
#[cfg(test)]
pub(crate) fn predict(recent: &[f32], window: usize) -> Option<f64> {
    let w = window.max(1).min(recent.len());
    if w == 0 {
        return None;
    }
    let tail = &recent[recent.len() - w..];
    Some(tail.iter().map(|v| *v as f64).sum::<f64>() / w as f64)
}

/// How many of `idle` machines a reserve of `reserve_pct` keeps back.
pub(crate) fn reserved_of(idle: usize, reserve_pct: f64) -> usize {
    ((idle as f64) * reserve_pct.clamp(0.0, 1.0)).floor() as usize
}

/// One machine: its last [`HISTORY`] readings in a ring kept inline (a request for a
/// window without an index walks every slot, so no pointer per machine to chase), whether
/// it is lent, whether the driver lets it be recruited at all, and where it is filed.
#[derive(Clone, Debug)]
struct Slot {
    ring: [f32; HISTORY],
    /// Readings held (≤ HISTORY) and where the next one goes.
    len: u8,
    next: u8,
    lent: bool,
    eligible: bool,
    /// The key this machine is filed under in each of [`INDEXED_WINDOWS`]' indexes
    /// (`None`: not in it, i.e. not idle, not eligible, lent or without readings).
    indexed: [Option<f64>; INDEXED_WINDOWS.len()],
}

impl Default for Slot {
    fn default() -> Self {
        Slot { ring: [0.0; HISTORY], len: 0, next: 0, lent: false, eligible: true, indexed: [None; INDEXED_WINDOWS.len()] }
    }
}

/// A predicted load as an index key: ordered by `f64::total_cmp`, as the walk orders them.
#[derive(Clone, Copy, Debug)]
struct Load(f64);

impl PartialEq for Load {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other).is_eq()
    }
}

impl Eq for Load {}

impl PartialOrd for Load {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Load {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0)
    }
}

/// The idle, eligible, unlent machines for one window, least loaded first (ties to the
/// lower id).
type Index = BTreeSet<(Load, MachineId)>;

impl Slot {
    fn push(&mut self, v: f32) {
        self.ring[self.next as usize] = v;
        self.next = ((self.next as usize + 1) % HISTORY) as u8;
        self.len = (self.len as usize + 1).min(HISTORY) as u8;
    }

    /// The mean of the last `window` readings (`None` without any).
    fn mean_of_last(&self, window: usize) -> Option<f64> {
        let w = window.max(1).min(self.len as usize);
        if w == 0 {
            return None;
        }
        let end = self.next as usize;
        let sum: f64 = (1..=w).map(|i| self.ring[(end + HISTORY - i) % HISTORY] as f64).sum();
        Some(sum / w as f64)
    }
}

/// The pool as the recruiter sees it: recent readings and what is lent.
#[derive(Clone, Debug)]
pub struct Recruiter {
    cfg: RecruitConfig,
    machines: BTreeMap<MachineId, Slot>,
    /// One per [`INDEXED_WINDOWS`] entry.
    indexes: [Index; INDEXED_WINDOWS.len()],
}

impl Recruiter {
    /// A recruiter with no machines; refuses a reserve outside `0..1` or a threshold
    /// outside `(0, 1]`.
    pub fn new(cfg: RecruitConfig) -> Result<Recruiter, SchedError> {
        if !(0.0..1.0).contains(&cfg.reserve_pct) {
            return Err(SchedError::InvalidConfig(format!("reserve_pct {} is not in 0..1", cfg.reserve_pct)));
        }
        if !(cfg.idle_load_max > 0.0 && cfg.idle_load_max <= 1.0) {
            return Err(SchedError::InvalidConfig(format!("idle_load_max {} is not in (0, 1]", cfg.idle_load_max)));
        }
        Ok(Recruiter { cfg, machines: BTreeMap::new(), indexes: Default::default() })
    }

    /// The settings.
    pub fn config(&self) -> &RecruitConfig {
        &self.cfg
    }

    /// Whether a machine predicted to load its owner by `p` counts as idle.
    fn idle_at(&self, p: f64) -> bool {
        p < self.cfg.idle_load_max || self.cfg.idle_load_max >= 1.0
    }

    /// Files `machine` again in every index after its readings or standing changed.
    fn reindex(&mut self, machine: MachineId) {
        let (max, all_idle) = (self.cfg.idle_load_max, self.cfg.idle_load_max >= 1.0);
        let Some(slot) = self.machines.get_mut(&machine) else { return };
        for (i, window) in INDEXED_WINDOWS.iter().enumerate() {
            let key = if slot.lent || !slot.eligible { None } else { slot.mean_of_last(*window).filter(|p| *p < max || all_idle) };
            if key.map(Load) == slot.indexed[i].map(Load) {
                continue;
            }
            if let Some(old) = slot.indexed[i] {
                self.indexes[i].remove(&(Load(old), machine));
            }
            if let Some(new) = key {
                self.indexes[i].insert((Load(new), machine));
            }
            slot.indexed[i] = key;
        }
    }

    /// A reading of `machine`'s owner load (fraction, guests excluded; clamped to 0–1,
    /// a non-finite reading counts as fully busy).
    pub fn observe(&mut self, machine: MachineId, load: f32) {
        self.observe_all(machine, &[load]);
    }

    /// Several readings of `machine`, oldest first (as many [`Recruiter::observe`] calls,
    /// with the indexes updated once).
    pub fn observe_all(&mut self, machine: MachineId, loads: &[f32]) {
        if loads.is_empty() {
            return;
        }
        let slot = self.machines.entry(machine).or_default();
        for load in loads {
            slot.push(if load.is_finite() { load.clamp(0.0, 1.0) } else { 1.0 });
        }
        self.reindex(machine);
    }

    /// Whether `machine` may be recruited at all, as its driver sees it (a free slot,
    /// allowed, interruption budget left); machines are eligible until said otherwise.
    /// One not eligible is neither granted nor counted idle, so the reserve is a share of
    /// the machines that could have been granted.
    pub fn set_eligible(&mut self, machine: MachineId, eligible: bool) {
        let slot = self.machines.entry(machine).or_default();
        if slot.eligible != eligible {
            slot.eligible = eligible;
            self.reindex(machine);
        }
    }

    /// The machine left the pool.
    pub fn forget(&mut self, machine: MachineId) {
        if let Some(slot) = self.machines.remove(&machine) {
            for (i, key) in slot.indexed.iter().enumerate() {
                if let Some(k) = key {
                    self.indexes[i].remove(&(Load(*k), machine));
                }
            }
        }
    }

    /// The work lent `machine` ended: it may be recruited again.
    pub fn release(&mut self, machine: MachineId) {
        self.set_lent(machine, false);
    }

    fn set_lent(&mut self, machine: MachineId, lent: bool) {
        if let Some(s) = self.machines.get_mut(&machine) {
            if s.lent != lent {
                s.lent = lent;
                self.reindex(machine);
            }
        }
    }

    /// Whether `machine` is lent now.
    pub fn is_lent(&self, machine: MachineId) -> bool {
        self.machines.get(&machine).is_some_and(|s| s.lent)
    }

    /// The predicted load of `machine` over the next `forecast_s` seconds.
    #[cfg(test)]
    pub(crate) fn predicted(&self, machine: MachineId, forecast_s: f64) -> Option<f64> {
        self.machines.get(&machine)?.mean_of_last(window_for(forecast_s))
    }

    /// Answers `req` at once: the idle eligible machines (see the module doc) least
    /// loaded first, less the reserve, at most `k`; they are lent until released.
    /// Reads the index when the forecast's window has one, else walks the pool.
    pub fn recruit(&mut self, req: Request) -> Grant {
        let w = window_for(req.forecast_s);
        let Some(i) = INDEXED_WINDOWS.iter().position(|x| *x == w) else { return self.recruit_by_walk(req) };
        let idle = self.indexes[i].len();
        let reserved = reserved_of(idle, self.cfg.reserve_pct);
        let n = (idle - reserved).min(req.k);
        let chosen: Vec<(Load, MachineId)> = self.indexes[i].iter().take(n).copied().collect();
        self.lend(chosen.into_iter().map(|(p, id)| (p.0, id)).collect(), idle, reserved)
    }

    /// [`Recruiter::recruit`] by walking every machine (any window; the reference the
    /// indexes are tested against).
    fn recruit_by_walk(&mut self, req: Request) -> Grant {
        let w = window_for(req.forecast_s);
        let mut idle: Vec<(f64, MachineId)> = self
            .machines
            .iter()
            .filter(|(_, s)| !s.lent && s.eligible)
            .filter_map(|(id, s)| s.mean_of_last(w).map(|p| (p, *id)))
            .filter(|(p, _)| self.idle_at(*p))
            .collect();
        let reserved = reserved_of(idle.len(), self.cfg.reserve_pct);
        let n = (idle.len() - reserved).min(req.k);
        // Only the n least loaded are wanted: select them, then sort those few.
        let order = |a: &(f64, MachineId), b: &(f64, MachineId)| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1));
        if n > 0 && n < idle.len() {
            idle.select_nth_unstable_by(n - 1, order);
        }
        let mut chosen: Vec<(f64, MachineId)> = idle.iter().take(n).copied().collect();
        chosen.sort_by(order);
        self.lend(chosen, idle.len(), reserved)
    }

    /// Lends `chosen` (least loaded first) and builds the grant.
    fn lend(&mut self, chosen: Vec<(f64, MachineId)>, idle: usize, reserved: usize) -> Grant {
        for (_, id) in &chosen {
            self.set_lent(*id, true);
        }
        Grant { machines: chosen.iter().map(|(_, id)| *id).collect(), predicted: chosen.iter().map(|(p, _)| *p).collect(), idle, reserved }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_window_follows_the_forecast() {
        assert_eq!(window_for(10.0), 5);
        assert_eq!(window_for(1.0), 1);
        assert_eq!(window_for(0.0), 1);
        assert_eq!(window_for(f64::NAN), 1);
        assert_eq!(window_for(1e9), HISTORY);
        assert_eq!(predict(&[0.9, 0.0, 0.0, 0.1, 0.1, 0.0, 0.0], 5), Some(0.2f32 as f64 / 5.0));
        assert_eq!(predict(&[], 5), None);
    }

    #[test]
    fn a_recent_burst_keeps_a_machine_out_for_a_short_forecast_only_while_it_is_in_the_window() {
        let mut r = Recruiter::new(RecruitConfig { idle_load_max: 0.1, reserve_pct: 0.0 }).unwrap();
        let m = MachineId(1);
        for v in [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.6] {
            r.observe(m, v);
        }
        // 10-s forecast: window 5, mean 0.12 → busy. 60-s forecast: window 30, mean 0.06 → idle.
        assert!(r.recruit(Request { k: 1, forecast_s: 10.0 }).machines.is_empty());
        assert_eq!(r.recruit(Request { k: 1, forecast_s: 60.0 }).machines, vec![m]);
    }

    #[test]
    fn least_loaded_first_less_the_reserve_and_never_twice() {
        let mut r = Recruiter::new(RecruitConfig { idle_load_max: 0.1, reserve_pct: 0.3 }).unwrap();
        for i in 0..10u64 {
            r.observe(MachineId(i), if i == 9 { 0.5 } else { 0.01 * i as f32 });
        }
        // 9 idle, 2 kept back (⌊2.7⌋): 7 granted, the least loaded.
        let g = r.recruit(Request { k: 100, forecast_s: 10.0 });
        assert_eq!((g.idle, g.reserved), (9, 2));
        assert_eq!(g.machines, (0..7).map(MachineId).collect::<Vec<_>>());
        // The next request sees the two left: 0 kept back (⌊0.6⌋), both granted.
        let g2 = r.recruit(Request { k: 100, forecast_s: 10.0 });
        assert_eq!(g2.machines, vec![MachineId(7), MachineId(8)]);
        assert!(r.recruit(Request { k: 100, forecast_s: 10.0 }).machines.is_empty());
        r.release(MachineId(3));
        assert_eq!(r.recruit(Request { k: 1, forecast_s: 10.0 }).machines, vec![MachineId(3)]);
    }

    #[test]
    fn machines_the_driver_rules_out_are_neither_granted_nor_counted_idle() {
        let mut r = Recruiter::new(RecruitConfig { idle_load_max: 0.1, reserve_pct: 0.5 }).unwrap();
        for i in 0..6u64 {
            r.observe(MachineId(i), 0.0);
        }
        // Machines 0–1 out (no free slot, say): 4 idle, 2 kept back, 2 granted.
        r.set_eligible(MachineId(0), false);
        r.set_eligible(MachineId(1), false);
        let g = r.recruit(Request { k: 10, forecast_s: 10.0 });
        assert_eq!((g.idle, g.reserved), (4, 2));
        assert_eq!(g.machines, vec![MachineId(2), MachineId(3)]);
        assert_eq!(g.predicted, vec![0.0, 0.0]);
        assert!(!r.is_lent(MachineId(0)));
    }

    #[test]
    fn a_threshold_of_one_counts_every_machine_idle() {
        let mut r = Recruiter::new(RecruitConfig { idle_load_max: 1.0, reserve_pct: 0.0 }).unwrap();
        r.observe(MachineId(1), 1.0);
        r.observe(MachineId(2), 0.3);
        let g = r.recruit(Request { k: 5, forecast_s: 10.0 });
        assert_eq!(g.machines, vec![MachineId(2), MachineId(1)]);
        let mut strict = Recruiter::new(RecruitConfig { idle_load_max: 0.99, reserve_pct: 0.0 }).unwrap();
        strict.observe(MachineId(1), 1.0);
        assert!(strict.recruit(Request { k: 5, forecast_s: 10.0 }).machines.is_empty());
    }

    #[test]
    fn a_bad_reserve_is_refused() {
        assert!(Recruiter::new(RecruitConfig { idle_load_max: 0.1, reserve_pct: 1.0 }).is_err());
        assert!(Recruiter::new(RecruitConfig { idle_load_max: 0.0, reserve_pct: 0.2 }).is_err());
    }

    proptest! {
        #[test]
        fn back_to_back_requests_never_share_and_the_reserve_holds(
            loads in prop::collection::vec(prop::collection::vec(0.0f32..0.3, 1..20), 1..40),
            reserve in 0.0f64..0.9,
            k1 in 0usize..50, k2 in 0usize..50,
            f1 in 1.0f64..120.0, f2 in 1.0f64..120.0,
        ) {
            let mut r = Recruiter::new(RecruitConfig { idle_load_max: 0.1, reserve_pct: reserve }).unwrap();
            for (i, ls) in loads.iter().enumerate() {
                for l in ls {
                    r.observe(MachineId(i as u64), *l);
                }
            }
            let g1 = r.recruit(Request { k: k1, forecast_s: f1 });
            prop_assert_eq!(g1.predicted.len(), g1.machines.len());
            prop_assert!(g1.predicted.windows(2).all(|p| p[0] <= p[1]), "least loaded first");
            let g2 = r.recruit(Request { k: k2, forecast_s: f2 });
            for g in [&g1, &g2] {
                prop_assert_eq!(g.reserved, reserved_of(g.idle, reserve));
                prop_assert!(g.machines.len() <= g.idle - g.reserved);
                let mut ids = g.machines.clone();
                ids.dedup();
                prop_assert_eq!(ids.len(), g.machines.len());
            }
            prop_assert!(g1.machines.len() <= k1 && g2.machines.len() <= k2);
            prop_assert!(g1.machines.iter().all(|m| !g2.machines.contains(m)));
            // Every machine granted was predicted idle for its request's forecast.
            for m in &g1.machines {
                prop_assert!(r.predicted(*m, f1).unwrap() < 0.1);
            }
        }

        /// The indexes answer exactly as the walk does, on random pools and random
        /// sequences of readings, standings, grants, releases and departures.
        #[test]
        fn the_index_answers_as_the_walk_does(
            ops in prop::collection::vec(op(), 1..300),
            reserve in prop::sample::select(vec![0.0, 0.2, 0.3, 0.5]),
            max in prop::sample::select(vec![0.05, 0.1, 0.5, 1.0]),
        ) {
            let cfg = RecruitConfig { idle_load_max: max, reserve_pct: reserve };
            let mut indexed = Recruiter::new(cfg.clone()).unwrap();
            let mut walked = Recruiter::new(cfg).unwrap();
            for o in ops {
                match o {
                    Op::Observe(m, loads) => {
                        indexed.observe_all(MachineId(m), &loads);
                        for l in &loads {
                            walked.observe(MachineId(m), *l);
                        }
                    }
                    Op::Eligible(m, e) => {
                        indexed.set_eligible(MachineId(m), e);
                        walked.set_eligible(MachineId(m), e);
                    }
                    Op::Release(m) => {
                        indexed.release(MachineId(m));
                        walked.release(MachineId(m));
                    }
                    Op::Forget(m) => {
                        indexed.forget(MachineId(m));
                        walked.forget(MachineId(m));
                    }
                    Op::Recruit(k, forecast_s) => {
                        let req = Request { k, forecast_s };
                        prop_assert_eq!(indexed.recruit(req), walked.recruit_by_walk(req), "k {} forecast {} s", k, forecast_s);
                    }
                }
            }
            // And every index holds exactly the machines the walk finds idle.
            for (i, w) in INDEXED_WINDOWS.iter().enumerate() {
                let forecast_s = if *w == HISTORY { 600.0 } else { *w as f64 * 2.0 };
                prop_assert_eq!(window_for(forecast_s), *w);
                let all = Request { k: usize::MAX, forecast_s };
                let mut everything = Recruiter { cfg: RecruitConfig { reserve_pct: 0.0, ..walked.cfg.clone() }, ..walked.clone() };
                let by_walk = everything.recruit_by_walk(all);
                let in_index: Vec<MachineId> = indexed.indexes[i].iter().map(|(_, m)| *m).collect();
                prop_assert_eq!(by_walk.machines, in_index);
            }
        }
    }

    #[derive(Clone, Debug)]
    enum Op {
        Observe(u64, Vec<f32>),
        Eligible(u64, bool),
        Release(u64),
        Forget(u64),
        Recruit(usize, f64),
    }

    /// A step on a pool of up to 24 machines; loads on a coarse grid so that ties happen,
    /// some non-finite or out of range; forecasts on and off the indexed windows.
    fn op() -> impl Strategy<Value = Op> {
        let machine = 0u64..24;
        let load = prop_oneof![
            8 => (0u8..=20).prop_map(|x| x as f32 / 100.0),
            2 => 0.0f32..1.0,
            1 => prop::sample::select(vec![f32::NAN, -0.5, 1.5, f32::INFINITY]),
        ];
        let forecast = prop_oneof![
            3 => Just(10.0),
            2 => 119.0f64..100_000.0,
            2 => 0.0f64..118.0,
        ];
        prop_oneof![
            6 => (machine.clone(), prop::collection::vec(load, 1..12)).prop_map(|(m, l)| Op::Observe(m, l)),
            2 => (machine.clone(), prop::bool::weighted(0.8)).prop_map(|(m, e)| Op::Eligible(m, e)),
            2 => machine.clone().prop_map(Op::Release),
            1 => machine.prop_map(Op::Forget),
            3 => (0usize..10, forecast).prop_map(|(k, f)| Op::Recruit(k, f)),
        ]
    }
}
