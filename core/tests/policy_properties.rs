//! Property tests of the social contract: for any sequence of input, samples, guest
//! activity, owner commands, settings changes, clock steps and restarts over any number
//! of days, no local day has more interruptions counted than the limit in force, numbers
//! never repeat, and time under "Donate now" never counts, nor does making way for an
//! exclusive program (`rules.exclusive_programs`). The contract charges only the pool:
//! the owner's own acts (pause, resume, a new or ended offer, a new limit, a settings
//! change) never count, and one return of the owner counts at most once, whatever the
//! eviction mode does afterwards (freeze, thaw to linger, evict): a second count needs
//! guest work recruited again in between. Every interruption counted for guest work comes with
//! the directive that stops it (freeze or evict): lending while light counts only what
//! the owner's activity stops. And a driver that sleeps until `Policy::next_deadline`
//! between events misses nothing a 1-ms ticker would have seen. Each property runs with
//! and without lend-while-light, which the owner also turns on and off mid-run.

use chrono::{Duration as CDuration, TimeZone, Utc};
use lull_core::clock::{MonoMs, Now};
use lull_core::policy::{Action, Command, DonateSpan, Event, GuestDirective, PauseSpan, Policy, PoolView, ReturnCause, Saved, StateKind};
use lull_core::policy::{EvictionMode, PolicyConfig as Config};
use lull_core::sample::{InputEvent, InputSignal, Sample};
use proptest::prelude::*;
use std::collections::BTreeMap;

#[derive(Clone, Debug)]
enum Step {
    Sample {
        cpu: u8,
        mem_mib: u16,
        exclusive: bool,
    },
    Input,
    Resumed,
    Idled,
    Inhibit(bool),
    Guests(bool),
    Pause(u8),
    Resume,
    Donate(Option<u16>),
    SetLimit(u8),
    /// The owner turns lend-while-light on or off.
    Lend(bool),
    /// The owner changes the availability definition: the owner-CPU limit (percent) and
    /// the recruitment threshold (seconds).
    Settings {
        cpu_max: u8,
        threshold_s: u16,
    },
    /// The driver says whether the guest work is a pool's, which decides its migration
    /// (`PoolView::pool_decides`: Linger-Longer then lingers past `T_lingr`).
    PoolDecides(bool),
    WallClockJump(i32),
    Restart,
}

/// Which steps are the owner changing their settings (the driver then feeds a Tick).
enum StepKind {
    Settings,
    Other,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        8 => (0u8..40, 0u16..2000, prop::bool::weighted(0.2)).prop_map(|(cpu, mem_mib, exclusive)| Step::Sample { cpu, mem_mib, exclusive }),
        4 => Just(Step::Input),
        1 => Just(Step::Resumed),
        1 => Just(Step::Idled),
        1 => any::<bool>().prop_map(Step::Inhibit),
        4 => any::<bool>().prop_map(Step::Guests),
        1 => (0u8..4).prop_map(Step::Pause),
        1 => Just(Step::Resume),
        1 => proptest::option::of(1u16..7200).prop_map(Step::Donate),
        1 => (0u8..8).prop_map(Step::SetLimit),
        1 => any::<bool>().prop_map(Step::Lend),
        1 => (1u8..60, 0u16..400).prop_map(|(cpu_max, threshold_s)| Step::Settings { cpu_max, threshold_s }),
        1 => any::<bool>().prop_map(Step::PoolDecides),
        1 => (-10_800i32..10_800).prop_map(Step::WallClockJump),
        1 => Just(Step::Restart),
    ]
}

fn mode() -> impl Strategy<Value = EvictionMode> {
    prop_oneof![
        Just(EvictionMode::ImmediateEviction),
        Just(EvictionMode::PauseAndMigrate),
        Just(EvictionMode::LingerLonger),
        Just(EvictionMode::LingerForever),
    ]
}

/// Lend while light: off, or on with a light window of 1, 5 or 60 s.
fn lend() -> impl Strategy<Value = Option<u64>> {
    prop_oneof![Just(None), Just(Some(1u64)), Just(Some(5)), Just(Some(60))]
}

fn run(
    steps: Vec<(u32, Step)>,
    mode: EvictionMode,
    limit: u32,
    threshold_s: u64,
    fixed_limit: bool,
    lend: Option<u64>,
) -> Result<u32, TestCaseError> {
    run_probed(steps, mode, limit, threshold_s, fixed_limit, lend, false)
}

/// With `probe`, after every event a copy of the policy is ticked at moments between
/// the event and the earlier of the next event and `next_deadline()`: no such tick may
/// change anything (an action, the state, the directive, the fast path's arming).
fn run_probed(
    steps: Vec<(u32, Step)>,
    mode: EvictionMode,
    limit: u32,
    threshold_s: u64,
    fixed_limit: bool,
    lend: Option<u64>,
    probe: bool,
) -> Result<u32, TestCaseError> {
    let gaps: Vec<u64> = steps.iter().skip(1).map(|(dt, _)| *dt as u64).chain([u64::MAX / 4]).collect();
    let mut cfg = Config::default();
    cfg.eviction.mode = mode;
    cfg.budget.interruptions_per_day = limit;
    cfg.availability.recruitment_threshold_s = threshold_s;
    cfg.availability.lend_while_light = lend.is_some();
    cfg.availability.light_for_s = lend.unwrap_or(60);
    let tz = chrono_tz::Europe::Berlin;
    let start = Utc.with_ymd_and_hms(2026, 10, 24, 20, 0, 0).unwrap();
    let mut mono: u64 = 10_000;
    let mut skew: i64 = 0;
    let now_at = |mono: u64, skew: i64| {
        let utc = start + CDuration::milliseconds(mono as i64 + skew);
        Now { mono: MonoMs(mono), utc, local: utc.with_timezone(&tz).naive_local() }
    };
    let mut ledger: BTreeMap<chrono::NaiveDate, u32> = BTreeMap::new();
    let mut saved = Saved::default();
    let mut policy = Policy::new(cfg.clone(), now_at(mono, skew), saved.clone(), 0, "b");
    // Guest work was recruited (or lent) since the last interruption counted: a new
    // return may count. Every count before the first needs one too.
    let mut recruited_since_count = false;
    for ((dt_ms, st), gap) in steps.into_iter().zip(gaps) {
        mono += dt_ms as u64;
        let st_kind = if matches!(st, Step::Settings { .. } | Step::Lend(_)) { StepKind::Settings } else { StepKind::Other };
        // A driver wakes at every deadline, so by the time the owner acts, whatever time
        // alone decided (a linger time, an offer's end) has been handled: tick first, so
        // that what the act's own evaluation does is the act's alone.
        let mut batches = Vec::new();
        if matches!(st, Step::Pause(_) | Step::Resume | Step::Donate(_) | Step::SetLimit(_) | Step::Lend(_) | Step::Settings { .. }) {
            let now = now_at(mono, skew);
            let actions = policy.handle(now, Event::Tick);
            batches.push((actions, false, false));
        }
        let now = now_at(mono, skew);
        let before = policy.status(now);
        let donate_active = before.donate_now && before.donate_for_s.is_none_or(|s| s > 0);
        let exclusive_before = before.exclusive_program.is_some();
        // Lent anew: guest work starts while the owner is light. Lent work that lingers
        // and becomes light again is the same lending, counted once.
        if matches!(st, Step::Guests(true)) && !before.guests_present && before.state == StateKind::LendingLight {
            recruited_since_count = true;
        }
        let event = match st {
            Step::Sample { cpu, mem_mib, exclusive } => Event::Sample(Sample {
                at: now.mono,
                owner_cpu: cpu as f32 / 100.0,
                owner_mem_bytes: (4u64 << 30) + ((mem_mib as u64) << 20),
                mem_total_bytes: 16 << 30,
                mem_available_bytes: 8 << 30,
                on_battery: Some(false),
                exclusive_program: exclusive.then(|| "fakegame".to_owned()),
                ..Default::default()
            }),
            Step::Input => Event::Input(InputEvent { at: now.mono, signal: InputSignal::Activity }),
            Step::Resumed => Event::Input(InputEvent { at: now.mono, signal: InputSignal::Resumed }),
            Step::Idled => Event::Input(InputEvent { at: now.mono, signal: InputSignal::Idled { idle_for_ms: 1000 } }),
            Step::Inhibit(b) => Event::Input(InputEvent { at: now.mono, signal: InputSignal::Inhibited(b) }),
            Step::Guests(b) => Event::GuestsPresent(b),
            Step::Pause(k) => Event::Command(Command::Pause(match k {
                0 => PauseSpan::For { secs: 3600 },
                1 => PauseSpan::For { secs: 3 * 3600 },
                2 => PauseSpan::UntilTomorrow,
                _ => PauseSpan::UntilResumed,
            })),
            Step::Resume => Event::Command(Command::Resume),
            Step::Donate(d) => Event::Command(Command::Donate(match d {
                Some(s) => DonateSpan::For { secs: s as u64 },
                None => DonateSpan::UntilReturn,
            })),
            Step::SetLimit(n) if !fixed_limit => Event::Command(Command::SetLimit(n as u32)),
            Step::SetLimit(_) => Event::Tick,
            Step::Lend(on) => {
                let mut c = policy.config().clone();
                c.availability.lend_while_light = on;
                policy.set_config(c);
                Event::Tick
            }
            Step::Settings { cpu_max, threshold_s } => {
                let mut c = policy.config().clone();
                c.availability.owner_cpu_max = cpu_max as f64 / 100.0;
                c.availability.recruitment_threshold_s = threshold_s as u64;
                policy.set_config(c);
                Event::Tick
            }
            Step::PoolDecides(on) => {
                policy.set_pool_view(PoolView { pool_decides: on, ..PoolView::default() });
                Event::Tick
            }
            Step::WallClockJump(s) => {
                skew += s as i64 * 1000;
                Event::Tick
            }
            Step::Restart => {
                let day = saved.budget_day.unwrap_or(now.local_date()).max(now.local_date());
                let used = ledger.get(&day).copied().unwrap_or(0);
                let mut c = policy.config().clone();
                if fixed_limit {
                    c.budget.interruptions_per_day = limit;
                }
                policy = Policy::new(c, now_at(mono, skew), saved.clone(), used, "b");
                Event::Tick
            }
        };
        // The owner's own act: a command, or the Tick a driver feeds after a new configuration.
        let owner_act = matches!(event, Event::Command(_)) || matches!(st_kind, StepKind::Settings);
        let exclusive_now = matches!(&event, Event::Sample(s) if s.exclusive_program.is_some());
        let now = now_at(mono, skew);
        let actions = policy.handle(now, event);
        batches.push((actions, owner_act, exclusive_now));
        for (actions, owner_act, exclusive_now) in batches {
            let stopped = actions.iter().any(|a| matches!(a, Action::Directive(GuestDirective::Freeze | GuestDirective::Evict)));
            for a in actions {
                match a {
                    Action::InterruptionCounted(i) => {
                        prop_assert!(
                            i.cause == ReturnCause::AfterGuest || stopped,
                            "an interruption was counted for guest work that was not stopped (state before {:?}): {:?}",
                            before.state,
                            i
                        );
                        let n = ledger.entry(i.day).or_default();
                        *n += 1;
                        prop_assert_eq!(*n, i.number, "numbers are consecutive per day, never repeated");
                        prop_assert!(i.number <= i.limit, "day {} got interruption {} over limit {}", i.day, i.number, i.limit);
                        if fixed_limit {
                            prop_assert!(*n <= limit, "day {} has {} > {}", i.day, n, limit);
                        }
                        prop_assert!(!donate_active, "an interruption was counted during donate-now");
                        prop_assert!(
                            !owner_act,
                            "the owner's own act was counted as an interruption (state before {:?}): {:?}",
                            before.state,
                            i
                        );
                        prop_assert!(
                            recruited_since_count,
                            "a second interruption for one return (no guest work recruited since the last count; state before {:?}): {:?}",
                            before.state,
                            i
                        );
                        recruited_since_count = false;
                        prop_assert!(!exclusive_before && !exclusive_now, "an interruption was counted for an exclusive program: {:?}", i);
                        saved = policy.saved(now, "b");
                    }
                    Action::OwnerSettingsChanged | Action::DayRolled { .. } => saved = policy.saved(now, "b"),
                    // Recruited again: the owner was away for the threshold (or offered the
                    // machine).
                    Action::StateChanged { to: StateKind::Recruitable | StateKind::Donating, .. } => recruited_since_count = true,
                    _ => {}
                }
            }
        }
        if probe {
            let deadline = policy.next_deadline(now).map_or(u64::MAX, |d| d.0);
            prop_assert!(deadline > mono, "a deadline not in the future: {deadline} at {mono}");
            let until = deadline.min(mono.saturating_add(gap));
            for t in [mono + 1, mono + (until - mono) / 2, until - 1] {
                if t <= mono || t >= until {
                    continue;
                }
                let mut copy = policy.clone();
                let (state, directive, armed) = (copy.state(), copy.directive(), copy.freeze_on_input());
                let actions = copy.handle(now_at(t, skew), Event::Tick);
                prop_assert!(actions.is_empty(), "a tick at {t} before the deadline {deadline} (event at {mono}) changed: {actions:?}");
                prop_assert_eq!((copy.state(), copy.directive(), copy.freeze_on_input()), (state, directive, armed));
            }
        }
    }
    Ok(ledger.values().sum())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn never_over_budget_and_donate_never_counts(
        steps in proptest::collection::vec(((0u32..300_000), step()), 1..400),
        mode in mode(),
        limit in 0u32..8,
        threshold_s in prop_oneof![Just(0u64), Just(5), Just(180)],
        lend in lend(),
    ) {
        run(steps, mode, limit, threshold_s, true, lend)?;
    }

    #[test]
    fn limit_changes_and_long_gaps_over_many_days(
        steps in proptest::collection::vec((prop_oneof![3 => 0u32..60_000, 1 => 0u32..21_600_000], step()), 1..400),
        mode in mode(),
        limit in 0u32..8,
        lend in lend(),
    ) {
        run(steps, mode, limit, 60, false, lend)?;
    }

    #[test]
    fn sleeping_to_the_deadline_misses_nothing(
        steps in proptest::collection::vec((prop_oneof![3 => 0u32..60_000, 1 => 0u32..21_600_000], step()), 1..200),
        mode in mode(),
        limit in 0u32..8,
        threshold_s in prop_oneof![Just(0u64), Just(5), Just(180)],
        lend in lend(),
    ) {
        run_probed(steps, mode, limit, threshold_s, false, lend, true)?;
    }
}

/// One return counts once in every mode: recruited or lent guest work that the owner's
/// work freezes, thaws to linger and freezes again, round after round, counts one
/// interruption per recruitment or lending, however often the mode goes back and forth.
#[test]
fn freezing_and_thawing_after_one_return_counts_once() {
    for mode in [EvictionMode::LingerForever, EvictionMode::LingerLonger, EvictionMode::PauseAndMigrate, EvictionMode::ImmediateEviction] {
        for lend in [None, Some(5)] {
            let mut steps = Vec::new();
            let sample = |cpu| Step::Sample { cpu, mem_mib: 0, exclusive: false };
            // Lent: the owner types lightly; recruited: the owner is away past the threshold.
            for _ in 0..40 {
                if lend.is_some() {
                    steps.push((500, Step::Input));
                }
                steps.push((500, sample(2)));
            }
            steps.push((1, Step::Guests(true)));
            if lend.is_none() {
                steps.push((1, Step::Input));
            }
            for _ in 0..6 {
                for cpu in [35u8, 1] {
                    for _ in 0..90 {
                        steps.push((500, Step::Input));
                        steps.push((500, sample(cpu)));
                    }
                }
            }
            let counted = run(steps, mode, 5, 15, true, lend).expect("the contract holds");
            assert_eq!(counted, 1, "{mode:?}, lend {lend:?}: one return (or one lending) counts exactly once");
        }
    }
}

/// The properties above must be able to fail: a policy that forgot the budget would be
/// caught. This drives many returns in one day and checks the count stops at the limit.
#[test]
fn many_returns_in_one_day_stop_at_the_limit() {
    let mut steps = Vec::new();
    for _ in 0..20 {
        for _ in 0..10 {
            steps.push((1000, Step::Sample { cpu: 1, mem_mib: 0, exclusive: false }));
        }
        steps.push((1, Step::Guests(true)));
        steps.push((1, Step::Input));
        steps.push((1, Step::Guests(false)));
    }
    let counted = run(steps, EvictionMode::ImmediateEviction, 3, 5, true, None).expect("within budget");
    assert_eq!(counted, 3, "20 returns to working guests in one day count exactly the limit");
}
