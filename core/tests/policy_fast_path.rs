//! The quiet fast path of `Policy::handle` changes no outcome: two policies, one with the
//! path on (the default) and one with it off (`Policy::set_fast_path(false)`), are fed
//! the same random events (stretches of readings, steady or noisy, below and above the
//! thresholds, with input now and then, battery and heat, exclusive programs, guest work
//! arriving and leaving, owner commands, ticks, clock steps, new days, configuration and
//! pool-view changes) under every eviction mode, with and without lend-while-light and
//! allowed hours. After every event both must return the same actions and be in the same
//! state: their whole `Debug` print (every field, windows included), status and next
//! deadline. A last test checks that the path is taken at all, on a trace like the
//! simulator's, so the comparison is not vacuous.

use chrono::{Duration as CDuration, TimeZone, Utc};
use lull_core::clock::{MonoMs, Now};
use lull_core::policy::{Command, DonateSpan, Event, PauseSpan, Policy, PoolView, Saved};
use lull_core::policy::{EvictionMode, PolicyConfig};
use lull_core::sample::{InputEvent, InputSignal, Sample};
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Step {
    /// `n` readings `gap_ms` apart, owner CPU drawn in `[cpu_lo, cpu_lo + spread)` %,
    /// owner memory rising by `mem_step_mib` per reading, input with chance `input` / 8.
    Readings {
        n: u8,
        gap_ms: u32,
        cpu_lo: u8,
        spread: u8,
        mem_step_mib: u16,
        input: u8,
        seed: u32,
    },
    Input,
    Resumed,
    Idled,
    Inhibit(bool),
    Guests(bool),
    Command(u8),
    Tick,
    /// Time passes with no event (across local midnight at times).
    Gap(u32),
    WallClockJump(i32),
    /// Battery / heat / exclusive program on the next readings.
    Hardware(u8),
    PoolView(Option<u8>),
    MigrationCost(Option<u16>),
    /// The owner changes the configuration (lend while light, thresholds).
    Reconfigure(u8),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        12 => (1u8..200, prop_oneof![4 => Just(1000u32), 1 => 100u32..3000], 0u8..100, 0u8..40, prop_oneof![4 => Just(0u16), 1 => 0u16..2000], 0u8..8, any::<u32>())
            .prop_map(|(n, gap_ms, cpu_lo, spread, mem_step_mib, input, seed)| Step::Readings { n, gap_ms, cpu_lo, spread, mem_step_mib, input, seed }),
        2 => Just(Step::Input),
        1 => Just(Step::Resumed),
        1 => Just(Step::Idled),
        1 => any::<bool>().prop_map(Step::Inhibit),
        4 => any::<bool>().prop_map(Step::Guests),
        2 => (0u8..8).prop_map(Step::Command),
        1 => Just(Step::Tick),
        2 => prop_oneof![0u32..600_000, 0u32..30_000_000].prop_map(Step::Gap),
        1 => (-10_800i32..10_800).prop_map(Step::WallClockJump),
        1 => (0u8..6).prop_map(Step::Hardware),
        1 => proptest::option::of(0u8..100).prop_map(Step::PoolView),
        1 => proptest::option::of(0u16..600).prop_map(Step::MigrationCost),
        1 => (0u8..6).prop_map(Step::Reconfigure),
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

fn config(mode: EvictionMode, threshold_s: u64, lend: Option<u64>, hours: bool, limit: u32) -> PolicyConfig {
    let mut c = PolicyConfig::default();
    c.eviction.mode = mode;
    c.eviction.pause_s = 30;
    c.availability.recruitment_threshold_s = threshold_s;
    c.availability.lend_while_light = lend.is_some();
    c.availability.light_for_s = lend.unwrap_or(60);
    c.budget.interruptions_per_day = limit;
    if hours {
        c.rules.hours.sat = Some(vec!["08:00-12:30".into(), "21:10-21:20".into()]);
        c.rules.hours.sun = Some(vec!["00:00-01:05".into(), "02:00-24:00".into()]);
        c.rules.hours.mon = Some(vec![]);
    }
    c
}

/// The same event to both policies; both must answer and end up alike.
struct Pair {
    fast: Policy,
    slow: Policy,
}

impl Pair {
    fn feed(&mut self, now: Now, event: Event) -> Result<(), TestCaseError> {
        let a = self.fast.handle(now, event.clone());
        let b = self.slow.handle(now, event.clone());
        prop_assert_eq!(&a, &b, "actions differ for {:?} at {:?}", event, now.mono);
        self.same(now)
    }
    fn same(&self, now: Now) -> Result<(), TestCaseError> {
        prop_assert_eq!(format!("{:?}", self.fast), format!("{:?}", self.slow), "states differ at {:?}", now.mono);
        prop_assert_eq!(self.fast.status(now), self.slow.status(now));
        prop_assert_eq!(self.fast.next_deadline(now), self.slow.next_deadline(now));
        Ok(())
    }
    fn both(&mut self, f: impl Fn(&mut Policy)) {
        f(&mut self.fast);
        f(&mut self.slow);
    }
}

fn xorshift(seed: &mut u64) -> u64 {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    *seed
}

fn run(steps: Vec<Step>, mode: EvictionMode, threshold_s: u64, lend: Option<u64>, hours: bool, limit: u32) -> Result<(), TestCaseError> {
    let tz = chrono_tz::Europe::Berlin;
    // The evening before the autumn clock change, so long gaps cross it and midnights.
    let start = Utc.with_ymd_and_hms(2026, 10, 24, 19, 0, 0).unwrap();
    let mut mono: u64 = 10_000;
    let mut skew: i64 = 0;
    let now_at = |mono: u64, skew: i64| {
        let utc = start + CDuration::milliseconds(mono as i64 + skew);
        Now { mono: MonoMs(mono), utc, local: utc.with_timezone(&tz).naive_local() }
    };
    let cfg = config(mode, threshold_s, lend, hours, limit);
    let t0 = now_at(mono, skew);
    let mut slow = Policy::new(cfg.clone(), t0, Saved::default(), 0, "b");
    slow.set_fast_path(false);
    let mut p = Pair { fast: Policy::new(cfg, t0, Saved::default(), 0, "b"), slow };
    let mut mem: u64 = 3 << 30;
    let (mut battery, mut temp, mut exclusive) = (false, 50.0f32, false);
    for st in steps {
        match st {
            Step::Readings { n, gap_ms, cpu_lo, spread, mem_step_mib, input, seed } => {
                let mut r = seed as u64 | 1;
                for _ in 0..n {
                    mono += gap_ms as u64;
                    let now = now_at(mono, skew);
                    if (xorshift(&mut r) % 8) < input as u64 {
                        p.feed(now, Event::Input(InputEvent { at: now.mono, signal: InputSignal::Activity }))?;
                    }
                    let cpu = (cpu_lo as u64 + if spread > 0 { xorshift(&mut r) % spread as u64 } else { 0 }).min(100);
                    mem = mem.saturating_add((mem_step_mib as u64) << 20);
                    if mem > 14 << 30 {
                        mem = 2 << 30;
                    }
                    let s = Sample {
                        at: now.mono,
                        owner_cpu: cpu as f32 / 100.0,
                        owner_mem_bytes: mem,
                        mem_total_bytes: 16 << 30,
                        mem_available_bytes: (16u64 << 30) - mem,
                        on_battery: Some(battery),
                        cpu_temp_c: Some(temp),
                        exclusive_program: exclusive.then(|| "fakegame".to_owned()),
                        ..Default::default()
                    };
                    p.feed(now, Event::Sample(s))?;
                }
            }
            Step::Gap(ms) => {
                mono += ms as u64;
                p.same(now_at(mono, skew))?;
            }
            Step::WallClockJump(s) => skew += s as i64 * 1000,
            Step::Hardware(k) => match k {
                0 => battery = !battery,
                1 => temp = if temp > 80.0 { 50.0 } else { 99.0 },
                2 => exclusive = !exclusive,
                _ => (battery, temp, exclusive) = (false, 50.0, false),
            },
            Step::PoolView(l) => p.both(|q| {
                q.set_pool_view(PoolView {
                    destination_load: l.map(|l| l as f32 / 100.0),
                    remaining: None,
                    pool_decides: l.is_some_and(|l| l % 2 == 1),
                })
            }),
            Step::MigrationCost(c) => p.both(|q| q.set_migration_cost(c.map(|c| std::time::Duration::from_secs(c as u64)))),
            Step::Reconfigure(k) => {
                let mut c = p.fast.config().clone();
                match k {
                    0 => c.availability.lend_while_light = !c.availability.lend_while_light,
                    1 => c.availability.recruitment_threshold_s = [0, 5, 180][(c.availability.recruitment_threshold_s % 3) as usize],
                    2 => c.availability.owner_cpu_max = if c.availability.owner_cpu_max < 0.5 { 0.6 } else { 0.2 },
                    3 => c.rules.allow_on_battery = !c.rules.allow_on_battery,
                    4 => c.eviction.linger_cpu_max = if c.eviction.linger_cpu_max < 0.5 { 0.7 } else { 0.2 },
                    _ => c.availability.memory_growth_max = if c.availability.memory_growth_max < 0.1 { 0.5 } else { 0.05 },
                }
                p.both(|q| q.set_config(c.clone()));
            }
            other => {
                mono += 37;
                let now = now_at(mono, skew);
                let event = match other {
                    Step::Input => Event::Input(InputEvent { at: now.mono, signal: InputSignal::Activity }),
                    Step::Resumed => Event::Input(InputEvent { at: now.mono, signal: InputSignal::Resumed }),
                    Step::Idled => Event::Input(InputEvent { at: now.mono, signal: InputSignal::Idled { idle_for_ms: 5_000 } }),
                    Step::Inhibit(b) => Event::Input(InputEvent { at: now.mono, signal: InputSignal::Inhibited(b) }),
                    Step::Guests(b) => Event::GuestsPresent(b),
                    Step::Command(k) => Event::Command(match k {
                        0 => Command::Pause(PauseSpan::For { secs: 120 }),
                        1 => Command::Pause(PauseSpan::UntilTomorrow),
                        2 => Command::Pause(PauseSpan::UntilResumed),
                        3 => Command::Resume,
                        4 => Command::Donate(DonateSpan::For { secs: 90 }),
                        5 => Command::Donate(DonateSpan::UntilReturn),
                        6 => Command::SetLimit(1),
                        _ => Command::SetLimit(6),
                    }),
                    _ => Event::Tick,
                };
                p.feed(now, event)?;
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn the_fast_path_changes_no_action_and_no_state(
        steps in proptest::collection::vec(step(), 1..120),
        mode in mode(),
        threshold_s in prop_oneof![Just(0u64), Just(5), Just(180)],
        lend in prop_oneof![Just(None), Just(Some(0u64)), Just(Some(5)), Just(Some(60))],
        hours in prop::bool::weighted(0.3),
        limit in 0u32..6,
    ) {
        run(steps, mode, threshold_s, lend, hours, limit)?;
    }
}

/// The comparison above is only worth something if the path is taken: an hour of 1-s
/// readings like the simulator's generated owners while away (CPU noise below the
/// threshold, steady memory), guest work arriving after ten minutes, must be taken in
/// by the fast path but for the readings where the state moves.
#[test]
fn the_fast_path_is_taken_on_quiet_readings() {
    let start = Utc.with_ymd_and_hms(2026, 11, 26, 0, 0, 0).unwrap();
    let now_at = |mono: u64| {
        let utc = start + CDuration::milliseconds(mono as i64);
        Now { mono: MonoMs(mono), utc, local: utc.naive_utc() }
    };
    let mut policy = Policy::new(PolicyConfig::default(), now_at(1), Saved::default(), 0, "b");
    let mut r = 7u64;
    let mut taken = 0;
    for i in 0..3_600u64 {
        let now = now_at(1 + i * 1000);
        if i == 600 {
            policy.handle(now, Event::GuestsPresent(true));
        }
        let s = Sample {
            at: now.mono,
            owner_cpu: (xorshift(&mut r) % 10) as f32 / 100.0,
            owner_mem_bytes: 2 << 30,
            mem_total_bytes: 16 << 30,
            ..Default::default()
        };
        policy.handle(now, Event::Sample(s));
        taken = policy.quiet_readings();
    }
    // All but the readings where the state moved (the threshold reached, guest work
    // started) and the first.
    assert!(taken > 3_500, "the fast path took only {taken} of 3,600 quiet readings");
}
