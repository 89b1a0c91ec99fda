//! Memory-centric placement and migration (seed 001) in the scheduler, through its public
//! API: machines with a live memory report take no job that would bring their oversize
//! to MT, a job that ran needs its measured working set, and a machine over MT (or under
//! pressure) has one job chosen by age, working set, page-fault rate or eq. 5 moved to
//! the machine with the most free memory. Unit cases with known answers, then property
//! tests ("no placement ever on a machine over MT").

use lull_core::sched::*;
use proptest::prelude::*;
use std::collections::HashMap;

const MIB: u64 = 1 << 20;

fn t(secs: u64) -> Millis {
    Millis::from_secs(secs)
}

fn sched_with(mt: f64, choice: Choice) -> Scheduler {
    Scheduler::new(SchedConfig { memory_threshold: mt, migration_choice: choice, ..SchedConfig::with_algorithm(Algorithm::FirstFit) })
        .unwrap()
}

/// A machine with `slots` slots, lots of free memory, and a memory report: M = `m_mib`,
/// guests as given.
fn machine(id: u64, speed: f64, slots: u32, m_mib: u64, guests: Vec<JobLoad>, pressure: bool) -> Machine {
    Machine {
        slots,
        free_memory: 1 << 40,
        memory: Some(MachineMemory { guest_memory: m_mib * MIB, guests, pressure }),
        ..Machine::new(id, "o", speed)
    }
}

fn load(job: u64, age_s: f64, ws_mib: u64, fault_rate: f64, io_rate: f64) -> JobLoad {
    JobLoad { job: JobId(job), age_s, working_set: ws_mib * MIB, fault_rate, io_rate }
}

fn update(s: &mut Scheduler, m: Machine) {
    s.handle(t(10), Event::MachineUpdated(m)).unwrap();
}

fn submit(s: &mut Scheduler, id: u64, mem_mib: Option<u64>) {
    let mut j = JobSpec::sequential(id, format!("p{id}"), t(id)).with_estimate(100.0);
    j.memory_per_member = mem_mib.map(|m| m * MIB);
    s.handle(t(id), Event::JobSubmitted(j)).unwrap();
}

fn placed_on(a: &[Assignment], job: u64) -> Option<u64> {
    a.iter().find(|x| x.job == JobId(job)).map(|x| x.machines[0].0)
}

#[test]
fn a_machine_at_mt_takes_nothing_and_a_job_goes_only_where_it_stays_below_mt() {
    let mut s = sched_with(0.0, Choice::Combined);
    // Machine 1 (fastest) will be full to M: Q_o = 0 = MT. Machine 2 has 100 MiB of 1000 in use.
    update(&mut s, machine(1, 3.0, 4, 101, vec![], false));
    update(&mut s, machine(2, 2.0, 4, 1000, vec![], false));
    update(&mut s, machine(3, 1.0, 4, 1000, vec![], false));
    // Two running jobs (placed, then measured) make the demands.
    submit(&mut s, 1, Some(100));
    submit(&mut s, 2, Some(100));
    let a = s.pass(t(20));
    assert_eq!((placed_on(&a, 1), placed_on(&a, 2)), (Some(1), Some(2)), "{a:?}");
    update(&mut s, machine(1, 3.0, 4, 101, vec![load(1, 5.0, 101, 0.0, 0.0)], false));
    update(&mut s, machine(2, 2.0, 4, 1000, vec![load(2, 5.0, 100, 0.0, 0.0)], false));
    assert_eq!(s.memory_demand(MachineId(1)), Some(101 * MIB));

    // A job needing nothing still finds machine 1 at MT.
    submit(&mut s, 3, None);
    assert!(matches!(s.eligibility(JobId(3), MachineId(1)).unwrap(), Err(Ineligible::OverMemoryThreshold { .. })));
    // 900 MiB more on machine 2 would reach Q_o = 0; 899 MiB stays below.
    submit(&mut s, 4, Some(900));
    submit(&mut s, 5, Some(899));
    assert!(matches!(s.eligibility(JobId(4), MachineId(2)).unwrap(), Err(Ineligible::OverMemoryThreshold { .. })));
    assert_eq!(s.eligibility(JobId(5), MachineId(2)).unwrap(), Ok(()));
    let a = s.pass(t(30));
    assert_eq!(placed_on(&a, 3), Some(2), "not on machine 1 although it is fastest: {a:?}");
    assert_eq!(placed_on(&a, 4), Some(3), "job 4 fits only machine 3: {a:?}");
    assert_eq!(placed_on(&a, 5), Some(2), "job 3 needs nothing, so 899 MiB still fits on machine 2: {a:?}");
    // Machine 2 now holds 999 of 1000 MiB: another MiB would reach MT.
    submit(&mut s, 6, Some(1));
    assert!(matches!(s.eligibility(JobId(6), MachineId(2)).unwrap(), Err(Ineligible::OverMemoryThreshold { .. })));
    // The reason names the threshold.
    let why = s.eligibility(JobId(5), MachineId(1)).unwrap().unwrap_err().to_string();
    assert!(why.contains("MT"), "{why}");
}

#[test]
fn an_empty_machine_takes_a_job_that_fits_its_memory_but_a_second_must_stay_below_mt() {
    // MT −5 %: below MT means under 950 of 1000 MiB. A job that held 980 MiB could go
    // nowhere if even an empty machine had to stay below MT.
    let mut s = sched_with(-0.05, Choice::Combined);
    update(&mut s, machine(1, 1.0, 2, 1000, vec![], false));
    submit(&mut s, 1, Some(980));
    submit(&mut s, 2, Some(10));
    submit(&mut s, 3, Some(1001));
    assert_eq!(s.eligibility(JobId(1), MachineId(1)).unwrap(), Ok(()));
    assert!(matches!(s.eligibility(JobId(3), MachineId(1)).unwrap(), Err(Ineligible::OverMemoryThreshold { .. })));
    let a = s.pass(t(20));
    assert_eq!((placed_on(&a, 1), placed_on(&a, 2), placed_on(&a, 3)), (Some(1), None, None), "{a:?}");
    // Measured, it is over MT: nothing more goes there, and with nowhere below MT to go
    // (machine 2 is empty but holds only 1000 MiB) it stays.
    update(&mut s, machine(1, 1.0, 2, 1000, vec![load(1, 9.0, 980, 0.0, 0.0)], false));
    update(&mut s, machine(2, 1.0, 1, 1000, vec![], false));
    assert_eq!(s.memory_migration(MachineId(1)), None, "a move must leave the job below MT where it goes");
    assert!(matches!(s.eligibility(JobId(2), MachineId(1)).unwrap(), Err(Ineligible::OverMemoryThreshold { .. })));
    // A bigger machine appears: the job moves there.
    update(&mut s, machine(3, 1.0, 1, 4000, vec![], false));
    assert_eq!(s.memory_migration(MachineId(1)).map(|m| m.to), Some(MachineId(3)));
}

#[test]
fn a_machine_without_a_report_is_placed_as_before() {
    let mut s = sched_with(0.0, Choice::Combined);
    update(&mut s, Machine { free_memory: 200 * MIB, slots: 2, ..Machine::new(1, "o", 1.0) });
    submit(&mut s, 1, Some(150));
    submit(&mut s, 2, Some(100));
    let a = s.pass(t(20));
    assert_eq!((placed_on(&a, 1), placed_on(&a, 2)), (Some(1), None), "only free memory counts: {a:?}");
}

#[test]
fn a_job_without_declared_memory_needs_its_last_working_set_once_it_ran() {
    let mut s = sched_with(0.0, Choice::Combined);
    update(&mut s, machine(1, 2.0, 1, 4096, vec![], false));
    update(&mut s, machine(2, 1.0, 1, 512, vec![], false));
    submit(&mut s, 1, None);
    assert_eq!(placed_on(&s.pass(t(20)), 1), Some(1));
    assert_eq!(s.job(JobId(1)).unwrap().memory_need(), 0);
    // Machine 1 measures it at 1 GiB; then the owner comes back.
    update(&mut s, machine(1, 2.0, 1, 4096, vec![load(1, 30.0, 1024, 0.0, 0.0)], false));
    assert_eq!(s.job(JobId(1)).unwrap().last_working_set, Some(1024 * MIB));
    s.handle(t(40), Event::TaskEvicted { job: JobId(1), machine: MachineId(1), cpu_seconds: 1.0 }).unwrap();
    update(&mut s, Machine { available: false, ..machine(1, 2.0, 1, 4096, vec![], false) });
    // Re-queued, it needs 1 GiB: machine 2 (512 MiB for guests) cannot take it.
    assert_eq!(s.job(JobId(1)).unwrap().memory_need(), 1024 * MIB);
    assert!(s.pass(t(50)).is_empty(), "a job that held 1 GiB does not go where 512 MiB is all there is");
    update(&mut s, machine(2, 1.0, 1, 2048, vec![], false));
    assert_eq!(placed_on(&s.pass(t(60)), 1), Some(2));
}

/// Machine 1 runs jobs 1–3 (sequential), over MT; machines 2 and 3 are free, 3 with more
/// free memory (but slower, so greedy placement alone would pick 2).
fn over_mt(choice: Choice, pressure: bool, m1_mib: u64) -> Scheduler {
    let mut s = sched_with(0.0, choice);
    update(&mut s, machine(1, 3.0, 3, 1000, vec![], false));
    for j in 1..=3 {
        submit(&mut s, j, None);
    }
    assert_eq!(s.pass(t(20)).len(), 3);
    update(&mut s, machine(2, 2.0, 1, 2000, vec![], false));
    update(&mut s, machine(3, 1.0, 1, 4000, vec![], false));
    // Age, working set, fault rate and I/O each peak on a different job; eq. 5 picks job 3:
    // 1 → (1 + 0.1 + 0.1 + 0)/4, 2 → (0.2 + 0.2 + 1 + 0.1)/4, 3 → (0.5 + 1 + 0.6 + 1)/4.
    let guests = vec![load(1, 1000.0, 100, 2.0, 0.0), load(2, 200.0, 1000, 4.0, 1.0), load(3, 500.0, 600, 20.0, 10.0)];
    update(&mut s, machine(1, 3.0, 3, m1_mib, guests, pressure));
    s
}

#[test]
fn each_migration_choice_moves_its_job_to_the_machine_with_most_free_memory() {
    for (choice, job) in [(Choice::Age, 1), (Choice::WorkingSet, 2), (Choice::PageFaultRate, 3), (Choice::Combined, 3)] {
        let s = over_mt(choice, false, 1000);
        let m = s.memory_migration(MachineId(1)).unwrap_or_else(|| panic!("{choice}: nothing moved"));
        assert_eq!((m.job, m.from, m.to, m.choice), (JobId(job), MachineId(1), MachineId(3), choice), "{m:?}");
        assert!((m.oversize - 0.7).abs() < 1e-9, "Q_o = 1700/1000 − 1: {m:?}");
        assert!(!m.pressure);
        let text = m.to_string();
        assert!(text.contains(choice.name()) && text.contains("machine 3") && text.contains("MT"), "{text}");
        // Nothing is due on machines under MT.
        assert_eq!(s.memory_migration(MachineId(3)), None);
    }
}

#[test]
fn memory_pressure_moves_a_job_even_under_mt_and_nothing_moves_without_room_elsewhere() {
    let s = over_mt(Choice::Age, true, 100_000);
    let m = s.memory_migration(MachineId(1)).expect("pressure alone moves one");
    assert!(m.pressure && m.oversize < 0.0, "{m:?}");
    assert!(m.to_string().contains("pressure"), "{m}");
    // Under MT and no pressure: nothing.
    assert_eq!(over_mt(Choice::Age, false, 100_000).memory_migration(MachineId(1)), None);
    // The chosen job (1000 MiB) fits neither machine 2 nor 3 under MT: nothing moves.
    let mut s = over_mt(Choice::WorkingSet, false, 1000);
    update(&mut s, machine(2, 2.0, 1, 900, vec![], false));
    update(&mut s, machine(3, 1.0, 1, 1000, vec![], false));
    assert_eq!(s.memory_migration(MachineId(1)), None);
}

#[test]
fn a_migrated_job_is_requeued_preferring_its_target_and_is_not_an_eviction() {
    let mut s = over_mt(Choice::Combined, false, 1000);
    let m = s.memory_migration(MachineId(1)).unwrap();
    assert_eq!((m.job, m.to), (JobId(3), MachineId(3)));
    let stops = s.handle(t(30), Event::JobMigrated { job: m.job, from: m.from, to: m.to, working_set: m.working_set }).unwrap();
    assert!(stops.is_empty());
    let j = s.job(JobId(3)).unwrap();
    assert!(j.running.is_none());
    assert_eq!((j.evictions, j.migrations, j.prefer, j.memory_need()), (0, 1, Some(MachineId(3)), 600 * MIB));
    // Machine 2 is faster and has room, but the migration chose machine 3.
    let a = s.pass(t(31));
    assert_eq!(placed_on(&a, 3), Some(3), "{a:?}");
    assert_eq!(s.job(JobId(3)).unwrap().prefer, None, "the preference is spent once placed");
    assert_eq!(s.job(JobId(3)).unwrap().avoid, None);
    // A gang member, an unknown job or a wrong machine is refused and changes nothing.
    let e = s.handle(t(32), Event::JobMigrated { job: JobId(1), from: MachineId(2), to: MachineId(3), working_set: 0 });
    assert!(matches!(e, Err(SchedError::NotRunningOn { .. })), "{e:?}");
}

#[test]
fn a_preferred_machine_that_cannot_take_it_is_passed_over() {
    let mut s = over_mt(Choice::Combined, false, 1000);
    let m = s.memory_migration(MachineId(1)).unwrap();
    s.handle(t(30), Event::JobMigrated { job: m.job, from: m.from, to: m.to, working_set: m.working_set }).unwrap();
    // The target went away meanwhile (no free slot): the job goes where it fits, but
    // never back to the machine it left, even with that machine emptied and fastest.
    update(&mut s, Machine { available: false, ..machine(3, 1.0, 1, 4000, vec![], false) });
    s.handle(t(30), Event::JobCancelled { job: JobId(1) }).unwrap();
    s.handle(t(30), Event::JobCancelled { job: JobId(2) }).unwrap();
    update(&mut s, machine(1, 3.0, 3, 1000, vec![], false));
    let a = s.pass(t(31));
    assert_eq!(placed_on(&a, 3), Some(2), "{a:?}");
}

#[test]
fn the_configuration_names_and_checks_mt_and_the_choice() {
    let c: SchedConfig = serde_json::from_str(r#"{"memory_threshold": 0.05, "migration_choice": "pf-rate"}"#).unwrap();
    assert_eq!((c.memory_threshold, c.migration_choice), (0.05, Choice::PageFaultRate));
    let d = SchedConfig::default();
    assert_eq!((d.memory_threshold, d.migration_choice), (DEFAULT_MEMORY_THRESHOLD, Choice::Combined));
    for bad in [-0.95, 1.5, f64::NAN] {
        let e = Scheduler::new(SchedConfig { memory_threshold: bad, ..SchedConfig::default() }).unwrap_err().to_string();
        assert!(e.contains("memory_threshold") && e.contains("-0.9..=1.0"), "{e}");
    }
    let e = "fastest".parse::<Choice>().unwrap_err();
    assert!(e.contains("migration_choice") && e.contains("age, worksize, pf-rate, combined"), "{e}");
    for c in Choice::ALL {
        assert_eq!(c.name().parse::<Choice>(), Ok(c));
    }
    assert!(serde_json::from_str::<SchedConfig>(r#"{"migration_choice": "oldest"}"#).is_err());
}

// ---------------------------------------------------------------------------------------
// Properties.

#[derive(Clone, Debug)]
struct Case {
    mt: f64,
    /// Per machine: (M in MiB, slots, speed).
    machines: Vec<(u64, u32, f64)>,
    /// Per job: declared MiB (None: undeclared).
    jobs: Vec<Option<u64>>,
    /// Per round: for each running job, its measured working set in MiB (by index, cycled).
    growth: Vec<Vec<u64>>,
    choice: usize,
    pressure: Vec<bool>,
}

fn case() -> impl Strategy<Value = Case> {
    (
        -0.5f64..0.3,
        prop::collection::vec((50u64..2000, 1u32..4, 0.5f64..3.0), 1..6),
        prop::collection::vec(prop::option::of(0u64..800), 1..20),
        prop::collection::vec(prop::collection::vec(0u64..1500, 1..8), 1..6),
        0usize..4,
        prop::collection::vec(any::<bool>(), 6),
    )
        .prop_map(|(mt, machines, jobs, growth, choice, pressure)| Case { mt, machines, jobs, growth, choice, pressure })
}

/// Every member of `a` went to a machine under MT whose oversize with it (and with the
/// members placed before it in this pass) stays below MT — or, the first on an empty
/// machine, that holds it at all.
fn check_pass(s: &Scheduler, mt: f64, before: &HashMap<MachineId, (u64, u64, usize)>, a: &[Assignment]) -> Result<(), TestCaseError> {
    let mut added: HashMap<MachineId, u64> = HashMap::new();
    for x in a {
        let need = s.job(x.job).and_then(|j| j.running.as_ref()).map_or(0, |r| r.memory_per_member);
        for m in &x.machines {
            let (m_bytes, demand, guests) = before[m];
            let so_far = demand + added.get(m).copied().unwrap_or(0);
            prop_assert!(oversize(so_far, m_bytes) < mt + 1e-9, "{:?} on {m}, already over MT", x.job);
            let sum = so_far + need;
            if guests == 0 && !added.contains_key(m) {
                let ok = sum <= m_bytes || oversize(sum, m_bytes) < mt + 1e-9;
                prop_assert!(ok, "{:?} on empty {m}: {need} > M {m_bytes} and over MT", x.job);
            } else {
                prop_assert!(oversize(sum, m_bytes) < mt + 1e-9, "{:?} on {m}: Q_o {} ≥ MT {mt}", x.job, oversize(sum, m_bytes));
            }
            *added.entry(*m).or_default() += need;
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// No placement ever on a machine over MT (nor one it would take to MT), whatever the
    /// machines report as their guests grow, with migrations carried out as they are due.
    #[test]
    fn no_placement_ever_on_a_machine_over_mt(c in case()) {
        let choice = Choice::ALL[c.choice];
        let mut s = sched_with(c.mt, choice);
        let report = |s: &Scheduler, i: usize, round: &[u64], pressure: bool| -> Machine {
            let (m, slots, speed) = c.machines[i];
            let id = MachineId(i as u64 + 1);
            let guests = s
                .guests_on(id)
                .iter()
                .map(|j| load(j.0, j.0 as f64, round[j.0 as usize % round.len()], j.0 as f64 % 7.0, 0.0))
                .collect();
            machine(i as u64 + 1, speed, slots, m, guests, pressure)
        };
        for i in 0..c.machines.len() {
            let m = report(&s, i, &[0], false);
            update(&mut s, m);
        }
        for (j, mem) in c.jobs.iter().enumerate() {
            submit(&mut s, j as u64 + 1, *mem);
        }
        for (r, round) in c.growth.iter().enumerate() {
            let before: HashMap<MachineId, (u64, u64, usize)> = (0..c.machines.len())
                .map(|i| {
                    let id = MachineId(i as u64 + 1);
                    (id, (c.machines[i].0 * MIB, s.memory_demand(id).unwrap(), s.guests_on(id).len()))
                })
                .collect();
            let a = s.pass(t(100 + r as u64 * 10));
            check_pass(&s, c.mt, &before, &a)?;
            // The guests grow (or shrink) as measured; migrations are carried out.
            for i in 0..c.machines.len() {
                let pressure = c.pressure[(i + r) % c.pressure.len()];
                let m = report(&s, i, round, pressure);
                update(&mut s, m);
                if let Some(m) = s.memory_migration(MachineId(i as u64 + 1)) {
                    // A move goes where the job fits below MT, never back where it was.
                    prop_assert_ne!(m.to, m.from);
                    let to = m.to.0 as usize - 1;
                    let after = oversize(s.memory_demand(m.to).unwrap() + m.working_set, c.machines[to].0 * MIB);
                    prop_assert!(after < c.mt + 1e-9, "{m:?}: Q_o at the target would be {after}");
                    prop_assert!(m.pressure || m.oversize >= c.mt, "{m:?}");
                    prop_assert!(s.guests_on(m.from).contains(&m.job));
                    s.handle(t(101 + r as u64 * 10), Event::JobMigrated { job: m.job, from: m.from, to: m.to, working_set: m.working_set })
                        .unwrap();
                    prop_assert_eq!(s.job(m.job).unwrap().evictions, 0);
                }
            }
        }
    }

    /// `room_under` is exactly the largest need that keeps `Q_o` below MT.
    #[test]
    fn room_under_is_the_largest_need_below_mt(mt in -0.9f64..1.0, m in 1u64..(1 << 40), d in 0u64..(1 << 41)) {
        match room_under(mt, m, d) {
            None => prop_assert!(oversize(d, m) >= mt - 1e-9),
            Some(room) => {
                prop_assert!(oversize(d + room, m) < mt + 1e-9);
                prop_assert!(oversize(d + room + 1, m) >= mt - 1e-9);
            }
        }
    }
}
