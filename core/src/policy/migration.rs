//! Seed 000's migration decision (§3.1, §5.2): whether a guest lingering on a machine
//! whose owner is active should move to another machine now. Pure: the caller hands in
//! the owner's utilisation here, how long the guest has lingered, the migration cost,
//! what it knows of a free machine to move to and of the job's remaining time.
//!
//! The reasoning, from eqs. 1–4: lingering at owner utilisation h gives the guest `1 − h`
//! of the CPU; a machine at utilisation l gives `1 − l` after a migration that costs
//! `T_migr`. With the median remaining life of an episode equal to its age (the paper's
//! predictor), moving pays once the guest has lingered `T_lingr = ((1 − l)/(h − l)) ·
//! T_migr`. When the job's remaining work W (seconds on an unloaded machine) is known,
//! a job that finishes here before the move would pay off stays: moving pays only if
//! `T_migr + W/(1 − l) < W/(1 − h)`. Both conditions together are exactly "completion
//! after moving is earlier than completion when staying" for an episode predicted to
//! last as long again as it has so far.

use std::time::Duration;

/// What the migration decision is made from.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct MigrationInputs {
    /// h: the owner's utilisation on this machine (fraction of the machine).
    pub here_load: f32,
    /// How long the guest has lingered in this episode of owner activity.
    pub lingered_for: Duration,
    /// T_migr = suspend + image size / bandwidth + resume (eq. 5).
    pub migration_cost: Duration,
    /// l: the owner utilisation on the best free machine the guest could move to;
    /// `None` when no free machine is known.
    pub destination_load: Option<f32>,
    /// The job's predicted remaining run time on an unloaded machine; `None` when
    /// unknown (then the job is assumed to outlast the episode, as in eq. 3).
    pub remaining: Option<Duration>,
}

/// Why a lingering guest stays where it is.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum StayReason {
    /// No free machine to move to.
    NoFreeMachine,
    /// The free machine is no less loaded than this one (l ≥ h).
    DestinationNotLighter,
    /// The episode is too young: moving pays only after lingering this much longer.
    EpisodeTooShort { left: Duration },
    /// The job would finish here before a move paid for itself.
    JobEndsFirst,
}

/// The decision.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum MigrationDecision {
    /// Ask for a migration now.
    Migrate,
    /// Keep lingering here.
    Stay(StayReason),
}

impl MigrationDecision {
    /// A short phrase for logs.
    pub fn describe(self) -> String {
        match self {
            Self::Migrate => "migrate now".into(),
            Self::Stay(StayReason::NoFreeMachine) => "stay: no free machine to move to".into(),
            Self::Stay(StayReason::DestinationNotLighter) => "stay: the free machine is not less loaded".into(),
            Self::Stay(StayReason::EpisodeTooShort { left }) => {
                format!("stay: moving pays after {:.1} s more lingering", left.as_secs_f64())
            }
            Self::Stay(StayReason::JobEndsFirst) => "stay: the job ends here before a move pays off".into(),
        }
    }
}

/// `T_lingr = ((1 − l)/(h − l)) · T_migr` (seed 000, eq. 4): how long to linger at owner
/// utilisation `h` before moving to a machine at `l`. `None` (never) when h ≤ l.
pub(crate) fn linger_time(h: f32, l: f32, t_migr: Duration) -> Option<Duration> {
    if h <= l || !h.is_finite() || !l.is_finite() {
        return None;
    }
    let factor = ((1.0 - l) / (h - l)) as f64;
    Some(Duration::from_secs_f64((t_migr.as_secs_f64() * factor).clamp(0.0, 1e12)))
}

/// Seed 000 §5.2: stay or migrate, given a free machine, its load, the linger time so
/// far, the migration cost and (if known) the job's remaining time.
pub(crate) fn decide(i: &MigrationInputs) -> MigrationDecision {
    let Some(l) = i.destination_load else { return MigrationDecision::Stay(StayReason::NoFreeMachine) };
    let h = i.here_load.clamp(0.0, 1.0);
    let l = l.clamp(0.0, 1.0);
    let Some(t_lingr) = linger_time(h, l, i.migration_cost) else {
        return MigrationDecision::Stay(StayReason::DestinationNotLighter);
    };
    if let Some(w) = i.remaining {
        // Completion if it stays for good vs if it moves now (l < h ≤ 1, so 1 − l > 0).
        let w = w.as_secs_f64();
        let after_move = i.migration_cost.as_secs_f64() + w / (1.0 - l as f64);
        let stays_pays = h < 1.0 && w / (1.0 - h as f64) <= after_move;
        if stays_pays {
            return MigrationDecision::Stay(StayReason::JobEndsFirst);
        }
    }
    if i.lingered_for >= t_lingr {
        MigrationDecision::Migrate
    } else {
        MigrationDecision::Stay(StayReason::EpisodeTooShort { left: t_lingr - i.lingered_for })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inputs(h: f32, lingered_s: u64, l: Option<f32>, remaining_s: Option<u64>) -> MigrationInputs {
        MigrationInputs {
            here_load: h,
            lingered_for: Duration::from_secs(lingered_s),
            migration_cost: Duration::from_secs(30),
            destination_load: l,
            remaining: remaining_s.map(Duration::from_secs),
        }
    }

    #[test]
    fn the_papers_example_lingers_about_thirty_seconds() {
        // §5.2: 8 MB at 3 Mbps ≈ 21 s plus suspend/resume; at h = 20 % on a free node
        // (l = 0) T_lingr = 5 · T_migr. With T_migr = 6 s that is the paper's 30 s.
        let t = linger_time(0.2, 0.0, Duration::from_secs(6)).expect("h > l");
        assert_eq!(t, Duration::from_secs(30));
        let mut i = inputs(0.2, 29, Some(0.0), None);
        i.migration_cost = Duration::from_secs(6);
        assert!(matches!(decide(&i), MigrationDecision::Stay(StayReason::EpisodeTooShort { .. })));
        i.lingered_for = Duration::from_secs(30);
        assert_eq!(decide(&i), MigrationDecision::Migrate);
    }

    #[test]
    fn no_free_machine_or_no_lighter_one_means_stay() {
        assert_eq!(decide(&inputs(0.5, 10_000, None, None)), MigrationDecision::Stay(StayReason::NoFreeMachine));
        assert_eq!(decide(&inputs(0.3, 10_000, Some(0.3), None)), MigrationDecision::Stay(StayReason::DestinationNotLighter));
        assert_eq!(decide(&inputs(0.1, 10_000, Some(0.4), None)), MigrationDecision::Stay(StayReason::DestinationNotLighter));
    }

    #[test]
    fn a_loaded_destination_needs_a_longer_episode() {
        // h = 0.5, T_migr = 30: to l = 0 after 60 s, to l = 0.25 after 90 s.
        assert_eq!(decide(&inputs(0.5, 60, Some(0.0), None)), MigrationDecision::Migrate);
        assert_eq!(
            decide(&inputs(0.5, 60, Some(0.25), None)),
            MigrationDecision::Stay(StayReason::EpisodeTooShort { left: Duration::from_secs(30) })
        );
        assert_eq!(decide(&inputs(0.5, 90, Some(0.25), None)), MigrationDecision::Migrate);
    }

    #[test]
    fn a_job_about_to_end_stays() {
        // h = 0.5, l = 0, T_migr = 30: staying takes 2W, moving 30 + W: W = 30 s is even
        // (stays), W = 31 s moves.
        assert_eq!(decide(&inputs(0.5, 1000, Some(0.0), Some(30))), MigrationDecision::Stay(StayReason::JobEndsFirst));
        assert_eq!(decide(&inputs(0.5, 1000, Some(0.0), Some(31))), MigrationDecision::Migrate);
        // A fully busy owner: the job makes no progress here, so it moves.
        assert_eq!(decide(&inputs(1.0, 1000, Some(0.0), Some(1))), MigrationDecision::Migrate);
    }

    /// `s` seconds into the scenario of the two tests below.
    fn at(s: u64) -> crate::clock::Now {
        let start = chrono::DateTime::from_timestamp(1_790_000_000, 0).expect("a valid time");
        let t = start + chrono::Duration::seconds(s as i64);
        crate::clock::Now { mono: crate::clock::MonoMs(s * 1000), utc: t, local: t.naive_utc() }
    }

    /// A reading at `t` seconds with the owner using `cpu` of the machine.
    fn sample(t: u64, cpu: f32) -> crate::policy::Event {
        crate::policy::Event::Sample(crate::sample::Sample {
            at: crate::clock::MonoMs(t * 1000),
            owner_cpu: cpu,
            mem_total_bytes: 16 << 30,
            on_battery: Some(false),
            ..Default::default()
        })
    }

    /// A Linger-Longer policy (T_migr 30 s) recruited after 5 idle seconds, guests present
    /// at 7 s, the owner back (input) at 8 s.
    fn guest_with_owner_back_at_8s() -> crate::policy::Policy {
        use crate::policy::{Event, Policy, Saved, StateKind};
        use crate::sample::{InputEvent, InputSignal};
        let mut cfg = crate::policy::config::PolicyConfig::default();
        cfg.availability.recruitment_threshold_s = 5;
        // The owner's 10 % keeps the machine busy (not re-recruited) but h ≤ 20 % lingers.
        cfg.availability.owner_cpu_max = 0.05;
        cfg.eviction.migration_cost_s = 30;
        let mut p = Policy::new(cfg, at(0), Saved::default(), 0, "b");
        for t in 1..=6 {
            p.handle(at(t), sample(t, 0.0));
        }
        p.handle(at(7), Event::GuestsPresent(true));
        assert_eq!(p.state(), StateKind::Donating);
        p.handle(at(8), Event::Input(InputEvent { at: crate::clock::MonoMs(8000), signal: InputSignal::Activity }));
        p
    }

    /// The policy acts on the decision: under Linger-Longer a lingering guest with no
    /// free machine to go to stays past `T_lingr`; once the pool knows one, it migrates at
    /// the next event.
    #[test]
    fn linger_longer_follows_the_pool_view() {
        use crate::policy::{Event, GuestDirective, PoolView, StateKind};
        let mut p = guest_with_owner_back_at_8s();
        p.set_pool_view(PoolView { destination_load: None, remaining: None, pool_decides: false });
        // h = 10 % over the window: T_lingr to a free machine would be 300 s.
        for t in 9..=20 {
            p.handle(at(t), sample(t, 0.1));
        }
        assert_eq!(p.state(), StateKind::Lingering);
        assert_eq!(p.migration_decision(at(20)), Some(MigrationDecision::Stay(StayReason::NoFreeMachine)));
        for t in (30..=700).step_by(10) {
            p.handle(at(t), sample(t, 0.1));
        }
        assert_eq!((p.state(), p.directive()), (StateKind::Lingering, GuestDirective::Linger), "no free machine: it stays");
        // A free machine at 5 %: T_lingr = (0.95 / 0.05) · 30 s = 570 s, long passed.
        p.set_pool_view(PoolView { destination_load: Some(0.05), remaining: None, pool_decides: false });
        p.handle(at(701), Event::Tick);
        assert_eq!((p.state(), p.directive()), (StateKind::Evicting, GuestDirective::Evict), "migrates once a free machine is known");
    }

    /// When the pool decides (a coordinator's leased guest), reaching `T_lingr` keeps the
    /// guest lingering with nothing counted and only turns the decision to "migrate" for
    /// the driver to ask; the deadline at `T_lingr` is not repeated once passed. Without
    /// it, the policy evicts at the next event, as before.
    #[test]
    fn a_pools_guest_keeps_lingering_past_t_lingr_and_the_driver_is_told_to_ask() {
        use crate::policy::{Event, GuestDirective, PoolView, StateKind};
        let mut p = guest_with_owner_back_at_8s();
        p.set_pool_view(PoolView { pool_decides: true, ..PoolView::default() });
        for t in 9..=20 {
            p.handle(at(t), sample(t, 0.1));
        }
        assert_eq!(p.state(), StateKind::Lingering);
        let counted = p.status(at(20)).interruptions_today;
        assert_eq!(counted, 1, "the owner's return counted once");
        let since = 20 - p.lingered_for(at(20)).expect("lingering").as_secs();
        // h = 10 %, l = 0: T_lingr = 30 s / 0.1 = 300 s after lingering began.
        assert!(matches!(p.migration_decision(at(since + 299)), Some(MigrationDecision::Stay(StayReason::EpisodeTooShort { .. }))));
        assert_eq!(p.next_deadline(at(since + 299)).map(|d| d.0 <= (since + 300) * 1000), Some(true), "woken at T_lingr");
        for t in (30..=since + 400).step_by(10) {
            p.handle(at(t), sample(t, 0.1));
        }
        let now = at(since + 400);
        assert_eq!((p.state(), p.directive()), (StateKind::Lingering, GuestDirective::Linger), "still lingering: the pool decides");
        assert_eq!(p.migration_decision(now), Some(MigrationDecision::Migrate), "time to ask the pool");
        assert_eq!(p.status(now).interruptions_today, counted, "nothing more counted");
        assert!(p.next_deadline(now).is_none_or(|d| d > now.mono), "no deadline in the past");
        // Not the pool's: the policy migrates (evicts) itself at the next event.
        p.set_pool_view(PoolView::default());
        p.handle(at(since + 401), Event::Tick);
        assert_eq!((p.state(), p.directive()), (StateKind::Evicting, GuestDirective::Evict));
    }

    /// Brute force over the paper's timeline (Fig. 1): the decision is "migrate" exactly
    /// when moving now finishes the job no later than staying, for an episode predicted
    /// to last as long again as its age.
    #[test]
    fn decision_matches_completion_times() {
        for h10 in 1..=10 {
            for l10 in 0..h10 {
                for age in [0u64, 5, 20, 60, 200, 1000] {
                    for w in [1u64, 10, 50, 100, 1000, 10_000] {
                        let (h, l) = (h10 as f64 / 10.0, l10 as f64 / 10.0);
                        let (e, w, t_migr) = (age as f64, w as f64, 30.0);
                        let stay = if h >= 1.0 || w <= (1.0 - h) * e {
                            if h >= 1.0 {
                                e + w / (1.0 - l)
                            } else {
                                w / (1.0 - h)
                            }
                        } else {
                            e + (w - (1.0 - h) * e) / (1.0 - l)
                        };
                        let moved = t_migr + w / (1.0 - l);
                        let d = decide(&inputs(h as f32, age, Some(l as f32), Some(w as u64)));
                        let expect_move = moved < stay - 1e-6;
                        let expect_stay = moved > stay + 1e-6;
                        if expect_move {
                            assert_eq!(d, MigrationDecision::Migrate, "h {h} l {l} age {age} w {w}: stay {stay} moved {moved}");
                        }
                        if expect_stay {
                            assert_ne!(d, MigrationDecision::Migrate, "h {h} l {l} age {age} w {w}: stay {stay} moved {moved}");
                        }
                    }
                }
            }
        }
    }
}
