//! Tests of `lull_core::sched` through its public API: hand-made job mixes with known
//! answers, small discrete-event simulations in virtual time, and property tests.

use lull_core::sched::*;
use lull_core::sched::{corrected_runtime, normtime, predicted_runtime_s};
use proptest::prelude::*;
use std::collections::{BTreeSet, HashMap, VecDeque};

const GB: u64 = 1 << 30;

fn t(secs: u64) -> Millis {
    Millis::from_secs(secs)
}

fn sched(algorithm: Algorithm) -> Scheduler {
    Scheduler::new(SchedConfig::with_algorithm(algorithm)).unwrap()
}

fn add_machine(s: &mut Scheduler, m: Machine) {
    s.handle(Millis::ZERO, Event::MachineUpdated(m)).unwrap();
}

fn submit(s: &mut Scheduler, spec: JobSpec) {
    s.handle(spec.submitted_at, Event::JobSubmitted(spec)).unwrap();
}

fn seq_job(id: u64, at: u64, est: f64) -> JobSpec {
    JobSpec::sequential(id, format!("prog{id}"), t(at)).with_estimate(est)
}

fn ids(a: &[Assignment]) -> Vec<u64> {
    a.iter().map(|x| x.job.0).collect()
}

// ---------------------------------------------------------------------------------------
// A tiny discrete-event driver in virtual time.

type EndFn = Box<dyn Fn(&Assignment, Millis) -> Millis>;

struct Des {
    s: Scheduler,
    now: Millis,
    arrivals: VecDeque<JobSpec>,
    finishes: BTreeSet<(Millis, JobId)>,
    placed: HashMap<JobId, Assignment>,
    started: HashMap<JobId, Millis>,
    completed: HashMap<JobId, Millis>,
    end_of: EndFn,
}

impl Des {
    /// Jobs arrive at their `submitted_at`; a job started at `now` finishes at
    /// `end_of(assignment, now)`, every member reporting `cpu = wall` (no owner load).
    fn new(s: Scheduler, mut jobs: Vec<JobSpec>, end_of: EndFn) -> Des {
        jobs.sort_by_key(|j| j.submitted_at);
        Des {
            s,
            now: Millis::ZERO,
            arrivals: jobs.into(),
            finishes: BTreeSet::new(),
            placed: HashMap::new(),
            started: HashMap::new(),
            completed: HashMap::new(),
            end_of,
        }
    }

    /// Exact predictions: every job ends at its predicted end.
    fn exact(s: Scheduler, jobs: Vec<JobSpec>) -> Des {
        Des::new(s, jobs, Box::new(|a, _| a.predicted_end))
    }

    /// Advances to the next event time, applies finishes then arrivals, runs one pass.
    fn step(&mut self) -> Option<Vec<Assignment>> {
        let next_a = self.arrivals.front().map(|j| j.submitted_at);
        let next_f = self.finishes.first().map(|f| f.0);
        let now = match (next_a, next_f) {
            (None, None) => return None,
            (Some(a), None) => a,
            (None, Some(f)) => f,
            (Some(a), Some(f)) => a.min(f),
        };
        self.now = now;
        while let Some(&(end, job)) = self.finishes.first() {
            if end != now {
                break;
            }
            self.finishes.pop_first();
            let wall = now.secs_since(self.started[&job]);
            for &m in &self.placed[&job].machines {
                self.s.handle(now, Event::JobFinished { job, machine: m, cpu_seconds: wall, wall_seconds: wall }).unwrap();
            }
            self.completed.insert(job, now);
        }
        while self.arrivals.front().is_some_and(|j| j.submitted_at == now) {
            let spec = self.arrivals.pop_front().unwrap();
            self.s.handle(now, Event::JobSubmitted(spec)).unwrap();
        }
        let assignments = self.s.pass(now);
        for a in &assignments {
            self.started.insert(a.job, now);
            self.finishes.insert(((self.end_of)(a, now), a.job));
            self.placed.insert(a.job, a.clone());
        }
        Some(assignments)
    }

    fn run_until(&mut self, horizon: Millis) {
        while self.arrivals.front().map(|j| j.submitted_at).into_iter().chain(self.finishes.first().map(|f| f.0)).min() <= Some(horizon) {
            if self.step().is_none() {
                break;
            }
        }
    }

    fn run(&mut self) {
        while self.step().is_some() {}
    }
}

// ---------------------------------------------------------------------------------------
// FIFO vs FirstFit with a blocked gang.

fn four_machines_one_busy(algorithm: Algorithm) -> Scheduler {
    let mut s = sched(algorithm);
    for (id, speed) in [(1, 4.0), (2, 3.0), (3, 2.0), (4, 1.0)] {
        add_machine(&mut s, Machine::new(id, "o", speed));
    }
    submit(&mut s, seq_job(1, 0, 100.0));
    assert_eq!(ids(&s.pass(t(0))), vec![1]);
    submit(&mut s, seq_job(2, 1, 10.0).with_width(4));
    submit(&mut s, seq_job(3, 2, 10.0));
    submit(&mut s, seq_job(4, 3, 10.0));
    s
}

#[test]
fn fifo_blocks_behind_a_wide_gang_that_cannot_start() {
    let mut s = four_machines_one_busy(Algorithm::Fifo);
    assert!(s.pass(t(5)).is_empty(), "FIFO must not pass the blocked gang");
    let order: Vec<u64> = s.queued().map(|j| j.id().0).collect();
    assert_eq!(order, vec![2, 3, 4]);
}

#[test]
fn first_fit_starts_the_narrow_jobs_behind_the_gang() {
    let mut s = four_machines_one_busy(Algorithm::FirstFit);
    let a = s.pass(t(5));
    assert_eq!(ids(&a), vec![3, 4]);
    assert_eq!(a[0].machines, vec![MachineId(2)]);
    assert_eq!(a[1].machines, vec![MachineId(3)]);
    assert_eq!(a[0].reason, Reason::FirstFit { passed_over: 1 });
    assert_eq!(s.queued().map(|j| j.id().0).collect::<Vec<_>>(), vec![2]);
}

// ---------------------------------------------------------------------------------------
// FirstFit starves a wide job; Backfill starts it by its reservation.

/// Two speed-1 machines; narrow 10 s jobs arrive every 5 s from t = 0; a 2-wide job at t = 1.
fn narrow_stream_and_a_wide_job(algorithm: Algorithm) -> Des {
    let mut s = sched(algorithm);
    add_machine(&mut s, Machine::new(1, "a", 1.0));
    add_machine(&mut s, Machine::new(2, "b", 1.0));
    let mut jobs: Vec<JobSpec> = (0..100).map(|k| JobSpec::sequential(100 + k, "narrow", t(5 * k)).with_estimate(10.0)).collect();
    jobs.push(JobSpec::sequential(1, "wide", t(1)).with_width(2).with_estimate(10.0));
    Des::exact(s, jobs)
}

#[test]
fn first_fit_starves_a_wide_job_under_a_stream_of_narrow_ones() {
    let mut d = narrow_stream_and_a_wide_job(Algorithm::FirstFit);
    d.run_until(t(490));
    assert!(!d.started.contains_key(&JobId(1)), "the wide job started at {:?}", d.started.get(&JobId(1)));
    assert!(d.started.len() >= 95, "narrow jobs keep running: {}", d.started.len());
}

#[test]
fn backfill_starts_the_wide_job_by_its_reservation() {
    let mut d = narrow_stream_and_a_wide_job(Algorithm::Backfill);
    d.step(); // t = 0: narrow job 100 starts on machine 1
    d.step(); // t = 1: the wide job arrives and is blocked
    assert_eq!(d.now, t(1));
    let r = d.s.reservation().cloned().expect("a reservation for the wide job");
    assert_eq!((r.head, r.at), (JobId(1), t(10)));
    assert_eq!(r.machines.len(), 2);
    d.run_until(t(490));
    assert_eq!(d.started[&JobId(1)], t(10));
    // The narrow job that arrived at t = 5 (would end at 15) was not backfilled into the gap.
    assert!(d.started[&JobId(101)] >= t(10));
    assert!(d.started.len() >= 95);
}

// ---------------------------------------------------------------------------------------
// Backfill never delays the head job's reservation (exact predictions).

#[derive(Clone, Debug)]
struct Mix {
    machines: Vec<(f64, u32, u64)>,  // speed, slots, free memory (GB)
    jobs: Vec<(u32, u64, u64, u64)>, // width, memory (GB), estimate s, submit s
}

fn mix() -> impl Strategy<Value = Mix> {
    prop::collection::vec((prop::sample::select(vec![1.0, 1.5, 2.0, 3.0]), 1u32..=2, 2u64..=4), 1..=6).prop_flat_map(|machines| {
        let n = machines.len() as u32;
        let jobs = prop::collection::vec((1..=n, 0u64..=2, 1u64..=60, 0u64..=80), 1..=14);
        (Just(machines), jobs).prop_map(|(machines, jobs)| Mix { machines, jobs })
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn backfill_never_delays_the_head_jobs_reservation(m in mix()) {
        let mut s = sched(Algorithm::Backfill);
        for (i, &(speed, slots, mem)) in m.machines.iter().enumerate() {
            add_machine(&mut s, Machine { slots, free_memory: mem * GB, ..Machine::new(i as u64 + 1, "o", speed) });
        }
        let jobs: Vec<JobSpec> = m.jobs.iter().enumerate().map(|(i, &(w, mem, est, at))| {
            let mut j = JobSpec::sequential(i as u64 + 1, format!("p{i}"), t(at)).with_width(w).with_estimate(est as f64);
            if mem > 0 { j = j.with_memory(mem * GB) }
            j
        }).collect();
        let mut d = Des::exact(s, jobs.clone());
        let mut first_reservation: HashMap<JobId, Millis> = HashMap::new();
        while d.step().is_some() {
            if let Some(r) = d.s.reservation() {
                first_reservation.entry(r.head).or_insert(r.at);
                prop_assert!(r.at >= d.now);
            }
        }
        // Every job fits on the pool (width ≤ machines, memory ≤ 2 GB ≤ every machine's).
        prop_assert_eq!(d.started.len(), jobs.len());
        for (job, at) in &first_reservation {
            prop_assert!(d.started[job] <= *at, "{} started at {} after its reservation {}", job, d.started[job], at);
        }
    }
}

// ---------------------------------------------------------------------------------------
// SPT and LPT on offline batches with known answers.

fn offline_batch(algorithm: Algorithm, seed: u64, runtimes: &[u64]) -> Des {
    let mut s = Scheduler::new(SchedConfig { algorithm, random_seed: seed, ..SchedConfig::default() }).unwrap();
    add_machine(&mut s, Machine::new(1, "a", 1.0));
    add_machine(&mut s, Machine::new(2, "b", 1.0));
    let jobs = runtimes.iter().enumerate().map(|(i, &r)| seq_job(i as u64 + 1, 0, r as f64)).collect();
    let mut d = Des::exact(s, jobs);
    d.run();
    d
}

fn total_flowtime(d: &Des) -> u64 {
    d.completed.values().map(|end| end.0 / 1000).sum() // all released at 0
}

fn makespan(d: &Des) -> u64 {
    d.completed.values().map(|end| end.0 / 1000).max().unwrap()
}

#[test]
fn spt_gives_the_least_mean_flowtime() {
    // Submitted longest first, so FIFO runs them as LPT would.
    let rt = [6, 5, 4, 3, 2, 1];
    let spt = total_flowtime(&offline_batch(Algorithm::Spt, 0, &rt));
    assert_eq!(spt, 34, "SPT on 2 machines: ends 1, 2, 4, 6, 9, 12");
    assert_eq!(total_flowtime(&offline_batch(Algorithm::Fifo, 0, &rt)), 50);
    assert_eq!(total_flowtime(&offline_batch(Algorithm::Lpt, 0, &rt)), 50);
    for seed in 0..20 {
        assert!(total_flowtime(&offline_batch(Algorithm::Random, seed, &rt)) >= spt);
    }
}

#[test]
fn lpt_makespan_is_no_worse_than_spt() {
    let rt = [1, 1, 1, 1, 4];
    let lpt = makespan(&offline_batch(Algorithm::Lpt, 0, &rt));
    let spt = makespan(&offline_batch(Algorithm::Spt, 0, &rt));
    assert_eq!((lpt, spt), (4, 6));
}

#[test]
fn spt_and_lpt_block_when_the_selected_job_cannot_start() {
    for (alg, first) in [(Algorithm::Spt, 2), (Algorithm::Lpt, 3)] {
        let mut s = sched(alg);
        add_machine(&mut s, Machine::new(1, "a", 1.0));
        add_machine(&mut s, Machine::new(2, "b", 1.0));
        submit(&mut s, seq_job(1, 0, 1000.0));
        assert_eq!(ids(&s.pass(t(0))), vec![1]);
        submit(&mut s, seq_job(2, 1, 5.0).with_width(2)); // shortest, cannot start
        submit(&mut s, seq_job(3, 1, 50.0).with_width(2)); // longest, cannot start
        submit(&mut s, seq_job(4, 1, 20.0));
        assert!(s.pass(t(1)).is_empty(), "{alg} must block behind job {first}");
    }
}

// ---------------------------------------------------------------------------------------
// The contract: never a machine without budget, not allowed, not available, or short of memory.

#[derive(Clone, Debug)]
struct ContractCase {
    machines: Vec<(bool, bool, u32, u64, u32, f64, f64)>, // available, allowed, budget, mem GB, slots, speed, load
    jobs: Vec<(u32, u64)>,                                // width, mem GB
    algorithm: usize,
    flips: Vec<(usize, bool, bool, u32)>,
}

fn contract_case() -> impl Strategy<Value = ContractCase> {
    let machine = (any::<bool>(), any::<bool>(), 0u32..=2, 0u64..=4, 1u32..=3, 0.5f64..3.0, 0.0f64..1.0);
    (
        prop::collection::vec(machine, 1..=12),
        prop::collection::vec((1u32..=4, 0u64..=3), 1..=25),
        0usize..6,
        prop::collection::vec((0usize..12, any::<bool>(), any::<bool>(), 0u32..=2), 0..=6),
    )
        .prop_map(|(machines, jobs, algorithm, flips)| ContractCase { machines, jobs, algorithm, flips })
}

fn check_assignments(s: &Scheduler, before: &HashMap<MachineId, (usize, u64)>, a: &[Assignment]) -> Result<(), TestCaseError> {
    let mut used: HashMap<MachineId, (usize, u64)> = HashMap::new();
    for x in a {
        let job = s.job(x.job).unwrap();
        prop_assert_eq!(x.machines.len(), job.spec.width as usize);
        let distinct: BTreeSet<_> = x.machines.iter().collect();
        prop_assert_eq!(distinct.len(), x.machines.len(), "gang members on distinct machines");
        for m in &x.machines {
            let mm = s.machine(*m).unwrap();
            prop_assert!(mm.available && mm.allowed && mm.interruptions_left > 0, "{:?}", mm);
            let u = used.entry(*m).or_default();
            u.0 += 1;
            u.1 += job.spec.memory_needed();
        }
    }
    for (m, (n, mem)) in used {
        let mm = s.machine(m).unwrap();
        let (guests_before, free_before) = before[&m];
        prop_assert!(guests_before + n <= mm.slots as usize, "slots of {}", m);
        prop_assert!(mem <= free_before, "memory of {}: {} > {}", m, mem, free_before);
    }
    Ok(())
}

fn snapshot(s: &Scheduler) -> HashMap<MachineId, (usize, u64)> {
    s.machines().map(|m| (m.id, (s.guests_on(m.id).len(), s.free_memory_for_guests(m.id).unwrap()))).collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn no_placement_violates_the_contract_or_memory(c in contract_case()) {
        let mut s = sched(Algorithm::ALL[c.algorithm]);
        for (i, &(available, allowed, budget, mem, slots, speed, load)) in c.machines.iter().enumerate() {
            add_machine(&mut s, Machine {
                available, allowed, interruptions_left: budget, free_memory: mem * GB, slots, load,
                ..Machine::new(i as u64, "o", speed)
            });
        }
        for (i, &(w, mem)) in c.jobs.iter().enumerate() {
            let mut j = seq_job(i as u64, i as u64, 30.0).with_width(w);
            if mem > 0 { j = j.with_memory(mem * GB) }
            submit(&mut s, j);
        }
        let before = snapshot(&s);
        let a = s.pass(t(100));
        check_assignments(&s, &before, &a)?;
        // Flip some machines' terms, finish one job, pass again.
        for &(i, available, allowed, budget) in &c.flips {
            if let Some(m) = s.machine(MachineId((i % c.machines.len()) as u64)).cloned() {
                s.handle(t(101), Event::MachineUpdated(Machine { available, allowed, interruptions_left: budget, ..m })).unwrap();
            }
        }
        if let Some(x) = a.first() {
            for m in &x.machines {
                s.handle(t(102), Event::JobFinished { job: x.job, machine: *m, cpu_seconds: 1.0, wall_seconds: 1.0 }).unwrap();
            }
        }
        let before = snapshot(&s);
        let a2 = s.pass(t(103));
        check_assignments(&s, &before, &a2)?;
    }
}

#[derive(Clone, Debug)]
struct ViewCase {
    machines: Vec<(u32, u64, u32, f64, f64)>, // budget, mem GB, slots, speed, load
    jobs: Vec<(u32, u64, u64, u8)>,           // width, mem GB, estimate s, program
    algorithm: usize,
    seed: u64,
}

fn view_case() -> impl Strategy<Value = ViewCase> {
    (
        prop::collection::vec((0u32..=2, 0u64..=8, 1u32..=3, prop::sample::select(vec![1.0, 2.0, 3.0]), 0.0f64..0.5), 1..=90),
        prop::collection::vec((1u32..=6, 0u64..=6, 1u64..=200, 0u8..4), 1..=120),
        0usize..6,
        any::<u64>(),
    )
        .prop_map(|(machines, jobs, algorithm, seed)| ViewCase { machines, jobs, algorithm, seed })
}

/// Runs a few passes with finishes between them; returns every assignment made.
fn run_view_case(c: &ViewCase, rebuild_every_pass: bool) -> Vec<Assignment> {
    let config = SchedConfig { algorithm: Algorithm::ALL[c.algorithm], random_seed: c.seed, ..SchedConfig::default() };
    let mut s = Scheduler::new(config).unwrap();
    s.set_rebuild_index_every_pass(rebuild_every_pass);
    for (i, &(budget, mem, slots, speed, load)) in c.machines.iter().enumerate() {
        let m = Machine { interruptions_left: budget, free_memory: mem * GB, slots, load, ..Machine::new(i as u64, "o", speed) };
        add_machine(&mut s, m);
    }
    for (i, &(w, mem, est, prog)) in c.jobs.iter().enumerate() {
        let mut j = JobSpec::sequential(i as u64, format!("p{prog}"), t(i as u64)).with_width(w);
        if mem > 0 {
            j = j.with_memory(mem * GB);
        }
        if est % 3 != 0 {
            j = j.with_estimate(est as f64);
        }
        submit(&mut s, j);
    }
    let mut all = Vec::new();
    for round in 0..4u64 {
        let now = t(1000 + 100 * round);
        let a = s.pass(now);
        // Finish every other job started this round.
        for x in a.iter().step_by(2) {
            for m in &x.machines {
                s.handle(now, Event::JobFinished { job: x.job, machine: *m, cpu_seconds: 10.0, wall_seconds: 10.0 }).unwrap();
            }
        }
        all.extend(a);
    }
    all
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    /// The free-machine index keeps tombstones, skip pointers and memory cursors from
    /// pass to pass (`free.rs`); rebuilding it before every pass must decide the same.
    #[test]
    fn a_pass_decides_the_same_with_a_fresh_or_a_reused_index(c in view_case()) {
        let fresh = run_view_case(&c, true);
        let reused = run_view_case(&c, false);
        prop_assert_eq!(fresh, reused);
    }
}

#[test]
fn each_ineligibility_is_refused_and_named() {
    let ok = Machine { free_memory: 4 * GB, ..Machine::new(1, "o", 1.0) };
    let cases = [
        (Machine { available: false, ..ok.clone() }, Ineligible::NotAvailable),
        (Machine { allowed: false, ..ok.clone() }, Ineligible::NotAllowed),
        (Machine { interruptions_left: 0, ..ok.clone() }, Ineligible::NoInterruptionsLeft),
        (Machine { free_memory: GB, ..ok.clone() }, Ineligible::NotEnoughMemory { free: GB, needed: 2 * GB }),
    ];
    for (m, why) in cases {
        for alg in Algorithm::ALL {
            let mut s = sched(alg);
            add_machine(&mut s, m.clone());
            submit(&mut s, seq_job(1, 0, 10.0).with_memory(2 * GB));
            assert!(s.pass(t(1)).is_empty(), "{alg} placed on a machine that is {why}");
            assert_eq!(s.eligibility(JobId(1), MachineId(1)).unwrap(), Err(why));
        }
    }
    let mut s = sched(Algorithm::Fifo);
    add_machine(&mut s, ok);
    submit(&mut s, seq_job(1, 0, 10.0).with_memory(2 * GB));
    submit(&mut s, seq_job(2, 0, 10.0));
    assert_eq!(s.eligibility(JobId(1), MachineId(1)).unwrap(), Ok(()));
    assert_eq!(ids(&s.pass(t(1))), vec![1]);
    assert_eq!(s.eligibility(JobId(2), MachineId(1)).unwrap(), Err(Ineligible::NoFreeSlot));
}

// ---------------------------------------------------------------------------------------
// Greedy placement and the contract's preference.

#[test]
fn greedy_placement_takes_the_fastest_effective_machine() {
    let mut s = sched(Algorithm::Fifo);
    add_machine(&mut s, Machine { load: 0.6, ..Machine::new(1, "a", 2.0) }); // 0.8
    add_machine(&mut s, Machine::new(2, "b", 1.0)); // 1.0
    add_machine(&mut s, Machine::new(3, "c", 0.9)); // 0.9
    submit(&mut s, seq_job(1, 0, 10.0));
    submit(&mut s, seq_job(2, 0, 10.0));
    submit(&mut s, seq_job(3, 0, 10.0));
    let a = s.pass(t(0));
    let got: Vec<_> = a.iter().map(|x| x.machines[0].0).collect();
    assert_eq!(got, vec![2, 3, 1]);
    assert_eq!(a[2].predicted_runtime_s, 10.0 / 0.8);
}

#[test]
fn ties_prefer_more_interruptions_left_then_longer_idle() {
    let now = t(10_000);
    let d = Machine { interruptions_left: 2, idle_since: t(100), ..Machine::new(4, "d", 1.0) };
    let e = Machine { interruptions_left: 5, idle_since: t(500), ..Machine::new(5, "e", 1.0) };
    let f = Machine { interruptions_left: 5, idle_since: t(200), ..Machine::new(6, "f", 1.0) };
    let g = Machine { interruptions_left: 5, idle_since: t(200), ..Machine::new(7, "g", 1.0) };
    let fast = Machine { interruptions_left: 1, idle_since: t(9_999), ..Machine::new(8, "h", 1.01) };
    assert!(f.idle_for_ms(now) > e.idle_for_ms(now));
    let order = rank_machines([&d, &e, &f, &g, &fast]);
    assert_eq!(order, vec![MachineId(8), MachineId(6), MachineId(7), MachineId(5), MachineId(4)]);
    assert_eq!(placement_order(&f, &e), std::cmp::Ordering::Less);
    assert_eq!(placement_order(&e, &d), std::cmp::Ordering::Less);
    let mut s = sched(Algorithm::Backfill);
    for m in [d, e, f, g, fast] {
        add_machine(&mut s, m);
    }
    submit(&mut s, seq_job(1, 0, 10.0).with_width(3));
    let a = s.pass(now);
    assert_eq!(a[0].machines, vec![MachineId(8), MachineId(6), MachineId(7)]);
}

// ---------------------------------------------------------------------------------------
// Prediction.

#[test]
fn prediction_is_the_last_two_average_with_the_exponential_one_beside() {
    let mut p = Predictor::new(PredictConfig::default());
    let used = p.predict("pi", 1, None, 0.0);
    assert_eq!(used.source, PredictionSource::Default);
    assert_eq!(used.normtime_s, 3600.0);
    for n in [10.0, 20.0, 40.0] {
        p.record("pi", n, &used, 1.0, 1.0);
    }
    let h = p.history("pi").unwrap();
    assert_eq!(h.last_two_average(), Some(30.0));
    assert_eq!(h.exp_average(), Some(27.5)); // 10 → 15 → 27.5 with α = 0.5
    let pr = p.predict("pi", 4, Some(1.0), 0.0);
    assert_eq!((pr.normtime_s, pr.source), (30.0, PredictionSource::History));
    // Only the last `history_len` normtimes are kept.
    for i in 0..20 {
        p.record("pi", f64::from(i), &used, 1.0, 1.0);
    }
    assert_eq!(p.history("pi").unwrap().recent().count(), 8);
}

#[test]
fn a_predictor_restored_from_its_records_predicts_and_scores_as_before() {
    let mut p = Predictor::new(PredictConfig::default());
    for (i, n) in [12.0, 20.0, 41.0, 39.0, 50.0].into_iter().enumerate() {
        let used = p.predict("pi", 1, if i == 0 { Some(10.0) } else { None }, 0.0);
        p.record("pi", n, &used, n * 1.1, n);
    }
    let used = p.predict("sort", 2, None, 0.0);
    p.record("sort", 7.0, &used, 3.0, 4.0);
    // Through JSON, as the coordinator's database keeps them.
    let saved: Vec<String> = p.stats().iter().map(|s| serde_json::to_string(s).unwrap()).collect();
    let mut q = Predictor::new(PredictConfig::default());
    for s in &saved {
        q.restore(&serde_json::from_str(s).unwrap());
    }
    // Error means come back as sum = mean × n: equal up to rounding.
    fn same(a: &[ProgramStats], b: &[ProgramStats]) {
        let round = |v: Option<f64>| v.map(|x| (x * 1e9).round() / 1e9);
        let key = |s: &ProgramStats| {
            let mut s = s.clone();
            (s.mare_used, s.mare_last_two, s.mare_exp_average, s.mare_runtime) =
                (round(s.mare_used), round(s.mare_last_two), round(s.mare_exp_average), round(s.mare_runtime));
            s
        };
        assert_eq!(a.iter().map(key).collect::<Vec<_>>(), b.iter().map(key).collect::<Vec<_>>());
    }
    same(&q.stats(), &p.stats());
    assert_eq!(q.predict("pi", 1, None, 0.0), p.predict("pi", 1, None, 0.0));
    // Both go on the same way.
    let used = p.predict("pi", 1, None, 0.0);
    p.record("pi", 44.0, &used, 40.0, 44.0);
    q.record("pi", 44.0, &used, 40.0, 44.0);
    same(&q.stats(), &p.stats());
    // And the restore is what made them equal: a predictor that forgot differs.
    assert_ne!(Predictor::new(PredictConfig::default()).predict("pi", 1, None, 0.0), p.predict("pi", 1, None, 0.0));
}

#[test]
fn normtime_and_runtime_follow_the_papers_formulas() {
    assert_eq!(normtime([(2.0, 30.0), (1.0, 40.0)]), 100.0);
    let a = Machine { load: 0.5, ..Machine::new(1, "a", 2.0) }; // current speed 1.0
    let b = Machine::new(2, "b", 4.0); // current speed 4.0
    assert_eq!(predicted_runtime_s(100.0, &[&b], 0.05), 25.0);
    assert_eq!(predicted_runtime_s(100.0, &[&a, &b], 0.05), 50.0); // 100 / (2 · 1.0)
    let full = Machine { load: 1.0, ..Machine::new(3, "c", 1.0) };
    assert_eq!(predicted_runtime_s(100.0, &[&full], 0.05), 2000.0); // share floored at 5 %
}

#[test]
fn user_estimate_is_used_only_without_history() {
    let mut s = sched(Algorithm::Fifo);
    add_machine(&mut s, Machine::new(1, "a", 2.0));
    submit(&mut s, JobSpec::sequential(1, "sim", t(0)).with_estimate(100.0));
    let a = s.pass(t(0));
    assert_eq!(a[0].prediction.source, PredictionSource::UserEstimate);
    assert_eq!((a[0].prediction.normtime_s, a[0].predicted_runtime_s), (100.0, 50.0));
    // It actually needed 20 CPU seconds on the speed-2 machine: normtime 40.
    s.handle(t(20), Event::JobFinished { job: JobId(1), machine: MachineId(1), cpu_seconds: 20.0, wall_seconds: 20.0 }).unwrap();
    submit(&mut s, JobSpec::sequential(2, "sim", t(21)).with_estimate(100.0));
    let a = s.pass(t(21));
    assert_eq!(a[0].prediction.source, PredictionSource::History);
    assert_eq!((a[0].prediction.normtime_s, a[0].predicted_runtime_s), (40.0, 20.0));
    // No history and no estimate: the default, per member.
    submit(&mut s, JobSpec::sequential(3, "unknown", t(22)).with_width(2));
    let j = s.queued().next().unwrap().spec.clone();
    assert_eq!(s.predictor().predict(&j.program, j.width, j.user_estimate_s, 0.0).normtime_s, 7200.0);
}

#[test]
fn outlived_predictions_are_raised_by_doubling() {
    assert_eq!(corrected_runtime(10.0, 5.0), 10.0);
    assert_eq!(corrected_runtime(10.0, 15.0), 20.0);
    assert_eq!(corrected_runtime(20.0, 50.0), 80.0);
    assert_eq!(corrected_runtime(0.0, 0.0), 1.0);
    let mut s = sched(Algorithm::Backfill);
    add_machine(&mut s, Machine::new(1, "a", 1.0));
    submit(&mut s, seq_job(1, 0, 10.0));
    assert_eq!(s.pass(t(0))[0].predicted_end, t(10));
    s.pass(t(10)); // exactly at its predicted end: not outlived yet
    assert_eq!(s.job(JobId(1)).unwrap().running.as_ref().unwrap().corrections, 0);
    s.pass(t(15));
    let run = s.job(JobId(1)).unwrap().running.clone().unwrap();
    assert_eq!((run.predicted_runtime_s, run.predicted_end, run.corrections), (20.0, t(20), 1));
    s.pass(t(50));
    let run = s.job(JobId(1)).unwrap().running.clone().unwrap();
    assert_eq!((run.predicted_runtime_s, run.predicted_end, run.corrections), (80.0, t(80), 2));
    // The head job's reservation follows the corrected end.
    submit(&mut s, seq_job(2, 50, 10.0));
    s.pass(t(51));
    assert_eq!(s.reservation().map(|r| (r.head, r.at)), Some((JobId(2), t(80))));
}

#[test]
fn prediction_errors_are_tracked_per_program() {
    let mut s = sched(Algorithm::Fifo);
    add_machine(&mut s, Machine::new(1, "a", 1.0));
    let mut now = 0;
    for (id, actual) in [(1u64, 50.0), (2, 100.0), (3, 75.0)] {
        submit(&mut s, JobSpec::sequential(id, "pi", t(now)).with_estimate(100.0));
        let a = s.pass(t(now));
        assert_eq!(a.len(), 1);
        now += actual as u64;
        s.handle(t(now), Event::JobFinished { job: JobId(id), machine: MachineId(1), cpu_seconds: actual, wall_seconds: actual }).unwrap();
    }
    let st = s.predictor().program_stats("pi").unwrap();
    // Used: 100 (estimate) vs 50, 50 (history) vs 100, 75 (last two) vs 75.
    assert_eq!(st.completed, 3);
    assert_eq!(st.scored, 3);
    assert!((st.mare_used.unwrap() - 0.5).abs() < 1e-12);
    assert!((st.mare_last_two.unwrap() - 0.25).abs() < 1e-12);
    assert!((st.mare_exp_average.unwrap() - 0.25).abs() < 1e-12);
    assert!((st.mare_runtime.unwrap() - 0.5).abs() < 1e-12);
    assert_eq!(st.recent_normtimes_s, vec![50.0, 100.0, 75.0]);
    assert_eq!(st.last_two_average_s, Some(87.5));
    let json = serde_json::to_string(&s.prediction_stats()).unwrap();
    let back: Vec<ProgramStats> = serde_json::from_str(&json).unwrap();
    assert_eq!(back, vec![st]);
}

#[test]
fn checkpointed_work_shortens_the_next_prediction() {
    let mut s = sched(Algorithm::Fifo);
    add_machine(&mut s, Machine::new(1, "a", 2.0));
    submit(&mut s, JobSpec::sequential(1, "render", t(0)).with_estimate(100.0).checkpointable());
    s.pass(t(0));
    s.handle(t(30), Event::TaskEvicted { job: JobId(1), machine: MachineId(1), cpu_seconds: 30.0 }).unwrap();
    let j = s.job(JobId(1)).unwrap();
    assert_eq!((j.evictions, j.credited_normtime_s), (1, 60.0));
    let a = s.pass(t(31));
    assert_eq!((a[0].prediction.normtime_s, a[0].prediction.total_normtime_s), (40.0, 100.0));
}

// ---------------------------------------------------------------------------------------
// Random.

fn random_run(seed: u64) -> Vec<(u64, Vec<u64>)> {
    let mut s = Scheduler::new(SchedConfig { algorithm: Algorithm::Random, random_seed: seed, ..SchedConfig::default() }).unwrap();
    for i in 0..5 {
        add_machine(&mut s, Machine::new(i, "o", 1.0 + i as f64));
    }
    for j in 0..30 {
        submit(&mut s, seq_job(j, 0, 10.0).with_width(1 + (j % 3) as u32));
    }
    let mut out = Vec::new();
    for round in 0..4u64 {
        for a in s.pass(t(round * 100)) {
            out.push((a.job.0, a.machines.iter().map(|m| m.0).collect()));
            for m in &a.machines {
                s.handle(t(round * 100 + 50), Event::JobFinished { job: a.job, machine: *m, cpu_seconds: 1.0, wall_seconds: 1.0 }).unwrap();
            }
        }
    }
    out
}

#[test]
fn random_is_reproducible_from_its_seed_and_differs_between_seeds() {
    let a = random_run(1);
    assert!(a.len() >= 8);
    assert_eq!(a, random_run(1));
    assert_ne!(a, random_run(2));
    assert_ne!(random_run(2), random_run(3));
}

// ---------------------------------------------------------------------------------------
// Gangs.

#[test]
fn a_gang_is_placed_whole_on_distinct_machines_or_not_at_all() {
    for alg in Algorithm::ALL {
        let mut s = sched(alg);
        add_machine(&mut s, Machine::new(1, "a", 1.0));
        add_machine(&mut s, Machine::new(2, "b", 1.0));
        add_machine(&mut s, Machine { available: false, ..Machine::new(3, "c", 1.0) });
        add_machine(&mut s, Machine { slots: 4, ..Machine::new(4, "d", 0.5) });
        submit(&mut s, seq_job(1, 0, 10.0).with_width(4));
        assert!(s.pass(t(0)).is_empty(), "{alg}: 3 eligible machines (one with 4 slots) cannot take a gang of 4");
        assert_eq!(s.running_len(), 0);
        s.handle(t(1), Event::MachineUpdated(Machine::new(3, "c", 1.0))).unwrap();
        let a = s.pass(t(1));
        assert_eq!(a.len(), 1, "{alg}");
        let set: BTreeSet<u64> = a[0].machines.iter().map(|m| m.0).collect();
        assert_eq!(set, BTreeSet::from([1, 2, 3, 4]));
    }
}

#[test]
fn losing_one_member_requeues_the_whole_gang_and_stops_the_others() {
    let mut s = sched(Algorithm::FirstFit);
    for i in 1..=3 {
        add_machine(&mut s, Machine::new(i, "o", 1.0));
    }
    submit(&mut s, seq_job(1, 0, 10.0));
    submit(&mut s, seq_job(2, 1, 10.0).with_width(2));
    submit(&mut s, seq_job(3, 2, 10.0));
    assert_eq!(ids(&s.pass(t(2))), vec![1, 2]);
    let gang: Vec<MachineId> = s.job(JobId(2)).unwrap().running.as_ref().unwrap().members.iter().map(|m| m.machine).collect();
    let stops = s.handle(t(5), Event::TaskEvicted { job: JobId(2), machine: gang[0], cpu_seconds: 3.0 }).unwrap();
    assert_eq!(stops, vec![Stop { job: JobId(2), machine: gang[1], why: StopWhy::GangRequeued }]);
    // Back in the queue before job 3 (its original order), machines free again.
    assert_eq!(s.queued().map(|j| j.id().0).collect::<Vec<_>>(), vec![2, 3]);
    assert!(s.guests_on(gang[0]).is_empty() && s.guests_on(gang[1]).is_empty());
    assert_eq!(s.job(JobId(2)).unwrap().evictions, 1);
}

/// Four machines, job 1 on one, gang 2 on two, job 3 queued (submitted before the gang's
/// loss): returns the gang's machines.
fn gang_of_two_running(s: &mut Scheduler) -> Vec<MachineId> {
    for i in 1..=3 {
        add_machine(s, Machine::new(i, "o", 1.0));
    }
    submit(s, seq_job(1, 0, 10.0));
    submit(s, seq_job(2, 1, 10.0).with_width(2));
    let started: BTreeSet<u64> = ids(&s.pass(t(2))).into_iter().collect();
    assert_eq!(started, BTreeSet::from([1, 2]));
    submit(s, seq_job(3, 3, 10.0));
    s.job(JobId(2)).unwrap().running.as_ref().unwrap().members.iter().map(|m| m.machine).collect()
}

#[test]
fn losing_one_member_halts_the_gang_and_a_pass_places_only_its_replacement() {
    for alg in Algorithm::ALL {
        let mut s = sched(alg);
        let gang = gang_of_two_running(&mut s);
        // The owner of gang[0] came back: that machine is no longer available.
        s.handle(t(5), Event::MachineUpdated(Machine { available: false, ..Machine::new(gang[0].0, "o", 1.0) })).unwrap();
        let stops = s.handle(t(5), Event::MemberLost { job: JobId(2), machine: gang[0], cpu_seconds: 3.0 }).unwrap();
        assert!(stops.is_empty(), "{alg}: the other member is halted, not stopped");
        let run = s.job(JobId(2)).unwrap().running.clone().unwrap();
        assert_eq!((run.vacancies, run.halted_since, run.members.len()), (1, Some(t(5)), 1), "{alg}");
        assert_eq!(run.members[0].machine, gang[1]);
        assert_eq!(s.halted().collect::<Vec<_>>(), vec![(JobId(2), 1)]);
        assert!(s.guests_on(gang[0]).is_empty() && s.guests_on(gang[1]) == [JobId(2)]);
        assert_eq!(s.job(JobId(2)).unwrap().evictions, 1);
        assert_eq!(s.queued().map(|j| j.id().0).collect::<Vec<_>>(), vec![3], "{alg}: the gang is not re-queued");
        // No machine free: nothing placed, still halted.
        assert!(s.pass(t(6)).is_empty(), "{alg}");
        // A fourth machine arrives: the replacement takes it before queued job 3.
        add_machine(&mut s, Machine::new(4, "n", 1.0));
        let a = s.pass(t(7));
        assert_eq!(a.len(), 1, "{alg}");
        assert_eq!((a[0].job, a[0].machines.clone()), (JobId(2), vec![MachineId(4)]), "{alg}");
        assert!(a[0].is_replacement());
        assert_eq!(a[0].reason, Reason::ReplacesLostMembers { halted: 1 });
        assert!(a[0].reason.to_string().contains("replaces lost gang member"));
        let run = s.job(JobId(2)).unwrap().running.clone().unwrap();
        assert_eq!((run.vacancies, run.halted_since), (0, None));
        let on: BTreeSet<MachineId> = run.members.iter().map(|m| m.machine).collect();
        assert_eq!(on, BTreeSet::from([gang[1], MachineId(4)]));
        assert_eq!(s.halted().count(), 0);
        assert_eq!(s.guests_on(MachineId(4)), [JobId(2)]);
        // Both finish: the job completes and its normtime (the members' runs) is recorded.
        s.handle(t(20), Event::JobFinished { job: JobId(2), machine: gang[1], cpu_seconds: 10.0, wall_seconds: 18.0 }).unwrap();
        assert!(s.job(JobId(2)).is_some());
        s.handle(t(20), Event::JobFinished { job: JobId(2), machine: MachineId(4), cpu_seconds: 10.0, wall_seconds: 13.0 }).unwrap();
        assert!(s.job(JobId(2)).is_none(), "{alg}");
        assert_eq!(s.predictor().history("prog2").unwrap().completed(), 1);
        assert_eq!(s.predictor().history("prog2").unwrap().last_two_average(), Some(20.0));
    }
}

#[test]
fn a_gang_found_halted_at_a_rebuild_gets_its_replacement_as_if_halted_here() {
    for alg in Algorithm::ALL {
        // The scheduler that saw the loss…
        let mut before = sched(alg);
        let gang = gang_of_two_running(&mut before);
        before.handle(t(5), Event::MachineUpdated(Machine { available: false, ..Machine::new(gang[0].0, "o", 1.0) })).unwrap();
        before.handle(t(5), Event::MemberLost { job: JobId(2), machine: gang[0], cpu_seconds: 3.0 }).unwrap();
        // …and a new leader's, rebuilt from the records: the same machines, job 1 running
        // (held by the driver, not the scheduler), job 3 queued, the gang found halted.
        let mut after = sched(alg);
        for i in 1..=3 {
            add_machine(&mut after, Machine::new(i, "o", 1.0));
        }
        after.handle(t(5), Event::MachineUpdated(Machine { available: false, ..Machine::new(gang[0].0, "o", 1.0) })).unwrap();
        let job1 = before.job(JobId(1)).unwrap().running.as_ref().unwrap().members[0].machine;
        after.handle(t(5), Event::MachineUpdated(Machine { available: false, ..Machine::new(job1.0, "o", 1.0) })).unwrap();
        let found = Event::HaltedGangFound {
            spec: seq_job(2, 1, 10.0).with_width(2),
            members: vec![gang[1]],
            vacancies: 1,
            started_at: t(2),
            halted_since: t(5),
        };
        assert!(after.handle(t(6), found.clone()).unwrap().is_empty());
        submit(&mut after, seq_job(3, 3, 10.0));
        let run = after.job(JobId(2)).unwrap().running.clone().unwrap();
        assert_eq!((run.vacancies, run.halted_since, run.members.len()), (1, Some(t(5)), 1), "{alg}");
        assert_eq!(run.reason, Reason::FoundAtRebuild);
        assert_eq!(after.halted().collect::<Vec<_>>(), before.halted().collect::<Vec<_>>(), "{alg}");
        assert_eq!(after.guests_on(gang[1]), [JobId(2)]);
        assert_eq!(after.queued().map(|j| j.id().0).collect::<Vec<_>>(), vec![3], "{alg}: the gang is not queued");
        // Found twice (a second rebuild message) is refused and changes nothing.
        assert!(after.handle(t(6), found).is_err());
        // Nothing free on either: both wait. A fourth machine: both place only the
        // replacement there, before job 3.
        assert!(after.pass(t(6)).is_empty() && before.pass(t(6)).is_empty(), "{alg}");
        for s in [&mut before, &mut after] {
            add_machine(s, Machine::new(4, "n", 1.0));
        }
        let (a, b) = (after.pass(t(7)), before.pass(t(7)));
        assert_eq!(a.len(), 1, "{alg}");
        assert_eq!((a[0].job, a[0].machines.clone(), a[0].reason), (b[0].job, b[0].machines.clone(), b[0].reason), "{alg}");
        assert_eq!(a[0].machines, vec![MachineId(4)]);
        let run = after.job(JobId(2)).unwrap().running.clone().unwrap();
        assert_eq!((run.vacancies, run.halted_since), (0, None));
        // It completes there like any gang.
        after.handle(t(20), Event::JobFinished { job: JobId(2), machine: gang[1], cpu_seconds: 10.0, wall_seconds: 18.0 }).unwrap();
        after.handle(t(20), Event::JobFinished { job: JobId(2), machine: MachineId(4), cpu_seconds: 10.0, wall_seconds: 13.0 }).unwrap();
        assert!(after.job(JobId(2)).is_none(), "{alg}");
    }
}

#[test]
fn a_halted_gang_found_with_members_and_vacancies_that_do_not_add_up_is_refused() {
    let mut s = sched(Algorithm::Fifo);
    for i in 1..=2 {
        add_machine(&mut s, Machine::new(i, "o", 1.0));
    }
    let found = |members: Vec<u64>, vacancies| Event::HaltedGangFound {
        spec: seq_job(2, 1, 10.0).with_width(3),
        members: members.into_iter().map(MachineId).collect(),
        vacancies,
        started_at: t(2),
        halted_since: t(5),
    };
    assert!(matches!(s.handle(t(6), found(vec![1], 1)), Err(SchedError::InvalidJob { .. })));
    assert!(matches!(s.handle(t(6), found(vec![1, 2, 2], 0)), Err(SchedError::InvalidJob { .. })));
    assert!(matches!(s.handle(t(6), found(vec![1, 1], 1)), Err(SchedError::InvalidJob { .. })));
    assert!(matches!(s.handle(t(6), found(vec![1, 9], 1)), Err(SchedError::UnknownMachine(MachineId(9)))));
    assert!(s.job(JobId(2)).is_none() && s.guests_on(MachineId(1)).is_empty(), "a refused event changes nothing");
    s.handle(t(6), found(vec![1, 2], 1)).unwrap();
    assert_eq!(s.halted().collect::<Vec<_>>(), vec![(JobId(2), 1)]);
}

#[test]
fn a_replacement_never_lands_on_a_machine_the_gang_uses_and_a_finished_rest_waits_for_it() {
    let mut s = sched(Algorithm::Fifo);
    let gang = gang_of_two_running(&mut s);
    // The lost member's machine stays available (e.g. its lease expired): it may take
    // the replacement; the remaining member's machine, with a second slot, may not.
    s.handle(t(4), Event::MachineUpdated(Machine { slots: 2, ..Machine::new(gang[1].0, "o", 9.0) })).unwrap();
    s.handle(t(5), Event::MemberLost { job: JobId(2), machine: gang[0], cpu_seconds: 0.0 }).unwrap();
    // The remaining member finishes while halted: the job is not done.
    s.handle(t(6), Event::JobFinished { job: JobId(2), machine: gang[1], cpu_seconds: 1.0, wall_seconds: 4.0 }).unwrap();
    assert_eq!(s.job(JobId(2)).unwrap().running.as_ref().unwrap().vacancies, 1);
    let a = s.pass(t(7));
    // gang[1] is the fastest free machine but the gang uses it; gang[0] takes the
    // replacement; job 3 gets gang[1]'s free slot.
    assert_eq!(a[0].machines, vec![gang[0]]);
    assert_eq!(a[0].reason, Reason::ReplacesLostMembers { halted: 0 });
    assert_eq!((a[1].job, a[1].machines.clone()), (JobId(3), vec![gang[1]]));
    s.handle(t(9), Event::JobFinished { job: JobId(2), machine: gang[0], cpu_seconds: 1.0, wall_seconds: 2.0 }).unwrap();
    assert!(s.job(JobId(2)).is_none());
}

#[test]
fn a_lost_machine_leaves_a_vacancy_and_a_lone_member_or_sequential_job_is_requeued() {
    let mut s = sched(Algorithm::Backfill);
    let gang = gang_of_two_running(&mut s);
    assert!(s.handle(t(7), Event::MachineLost { machine: gang[1] }).unwrap().is_empty());
    assert!(s.machine(gang[1]).is_none());
    assert_eq!(s.halted().collect::<Vec<_>>(), vec![(JobId(2), 1)]);
    // Then the last running member is lost too: nothing is left to halt, the gang goes
    // back to the queue whole, at its place (before job 3).
    assert!(s.handle(t(8), Event::MemberLost { job: JobId(2), machine: gang[0], cpu_seconds: 1.0 }).unwrap().is_empty());
    assert_eq!(s.queued().map(|j| (j.id().0, j.spec.width)).collect::<Vec<_>>(), vec![(2, 2), (3, 1)]);
    assert_eq!(s.halted().count(), 0);
    assert_eq!(s.job(JobId(2)).unwrap().evictions, 2);
    // A sequential checkpointable job lost is requeued with its credit, as an eviction.
    let mut s = sched(Algorithm::Fifo);
    add_machine(&mut s, Machine::new(1, "a", 2.0));
    submit(&mut s, seq_job(9, 0, 100.0).checkpointable());
    s.pass(t(0));
    s.handle(t(10), Event::MemberLost { job: JobId(9), machine: MachineId(1), cpu_seconds: 20.0 }).unwrap();
    let j = s.job(JobId(9)).unwrap();
    assert_eq!((j.running.is_none(), j.credited_normtime_s, j.evictions), (true, 40.0, 1));
    // Bad reports change nothing.
    assert!(matches!(
        s.handle(t(11), Event::MemberLost { job: JobId(9), machine: MachineId(1), cpu_seconds: f64::NAN }),
        Err(SchedError::InvalidReport { .. })
    ));
    assert_eq!(
        s.handle(t(11), Event::MemberLost { job: JobId(9), machine: MachineId(1), cpu_seconds: 0.0 }),
        Err(SchedError::NotRunning(JobId(9)))
    );
}

#[derive(Clone, Debug)]
enum GangOp {
    /// Lose the member at this index (mod the members).
    Lose(usize),
    /// Toggle this machine's availability (mod the machines).
    Toggle(usize),
    /// Remove this machine (mod the machines), if more than one is left.
    Remove(usize),
    /// Finish the member at this index.
    Finish(usize),
    Pass,
}

fn gang_op() -> impl Strategy<Value = GangOp> {
    prop_oneof![
        (0usize..8).prop_map(GangOp::Lose),
        (0usize..8).prop_map(GangOp::Toggle),
        (0usize..8).prop_map(GangOp::Remove),
        (0usize..8).prop_map(GangOp::Finish),
        Just(GangOp::Pass),
        Just(GangOp::Pass),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// Whatever members are lost, machines come, go or are removed: a running gang's
    /// placed members plus its vacancies always equal its width, its members sit on
    /// distinct machines that hold it as a guest, a replacement is never on a machine the
    /// gang already uses, and a halted gang is listed as such.
    #[test]
    fn a_halted_gang_keeps_its_width_and_replacements_stay_distinct(
        machines in 3u64..8, width in 2u32..4, ops in proptest::collection::vec(gang_op(), 1..40),
    ) {
        let mut s = sched(Algorithm::Backfill);
        for i in 1..=machines {
            add_machine(&mut s, Machine::new(i, "o", 1.0 + i as f64 / 10.0));
        }
        submit(&mut s, seq_job(1, 0, 100.0).with_width(width));
        s.pass(t(0));
        let mut avail: HashMap<u64, bool> = (1..=machines).map(|i| (i, true)).collect();
        for (step, op) in ops.into_iter().enumerate() {
            let now = t(step as u64 + 1);
            let members: Vec<MachineId> = s.job(JobId(1)).and_then(|j| j.running.as_ref())
                .map(|r| r.unfinished_machines().collect()).unwrap_or_default();
            match op {
                GangOp::Lose(i) if !members.is_empty() => {
                    let m = members[i % members.len()];
                    s.handle(now, Event::MemberLost { job: JobId(1), machine: m, cpu_seconds: 1.0 }).unwrap();
                }
                GangOp::Finish(i) if !members.is_empty() => {
                    let m = members[i % members.len()];
                    s.handle(now, Event::JobFinished { job: JobId(1), machine: m, cpu_seconds: 1.0, wall_seconds: 1.0 }).unwrap();
                }
                GangOp::Toggle(i) => {
                    let keys: Vec<u64> = { let mut k: Vec<u64> = avail.keys().copied().collect(); k.sort(); k };
                    let id = keys[i % keys.len()];
                    let a = avail.get_mut(&id).unwrap();
                    *a = !*a;
                    s.handle(now, Event::MachineUpdated(Machine { available: *a, ..Machine::new(id, "o", 1.0 + id as f64 / 10.0) })).unwrap();
                }
                GangOp::Remove(i) if avail.len() > 1 => {
                    let keys: Vec<u64> = { let mut k: Vec<u64> = avail.keys().copied().collect(); k.sort(); k };
                    let id = keys[i % keys.len()];
                    avail.remove(&id);
                    s.handle(now, Event::MachineLost { machine: MachineId(id) }).unwrap();
                }
                GangOp::Pass => {
                    let before: Vec<MachineId> = s.job(JobId(1)).and_then(|j| j.running.as_ref())
                        .map(|r| r.members.iter().map(|m| m.machine).collect()).unwrap_or_default();
                    for a in s.pass(now) {
                        if a.is_replacement() {
                            for m in &a.machines {
                                prop_assert!(!before.contains(m), "replacement on {m}, which the gang uses");
                            }
                        }
                    }
                }
                _ => {}
            }
            let Some(job) = s.job(JobId(1)) else { break };
            if let Some(run) = &job.running {
                prop_assert_eq!(run.members.len() as u32 + run.vacancies, width);
                let distinct: BTreeSet<MachineId> = run.members.iter().map(|m| m.machine).collect();
                prop_assert_eq!(distinct.len(), run.members.len());
                for m in run.unfinished_machines() {
                    prop_assert!(s.guests_on(m).contains(&JobId(1)));
                }
                prop_assert_eq!(run.halted(), run.halted_since.is_some());
                prop_assert_eq!(s.halted().any(|(j, _)| j == JobId(1)), run.halted());
            }
        }
    }
}

#[test]
fn failed_and_evicted_jobs_go_back_in_their_original_order() {
    let mut s = sched(Algorithm::Fifo);
    add_machine(&mut s, Machine::new(1, "a", 1.0));
    for j in 1..=3 {
        submit(&mut s, seq_job(j, j, 10.0));
    }
    assert_eq!(ids(&s.pass(t(3))), vec![1]);
    submit(&mut s, seq_job(4, 4, 10.0));
    assert!(s.handle(t(5), Event::JobFailed { job: JobId(1), machine: MachineId(1) }).unwrap().is_empty());
    assert_eq!(s.queued().map(|j| j.id().0).collect::<Vec<_>>(), vec![1, 2, 3, 4]);
    assert_eq!(s.job(JobId(1)).unwrap().failures, 1);
    assert_eq!(ids(&s.pass(t(6))), vec![1]);
    // Errors change nothing.
    assert_eq!(s.handle(t(7), Event::JobFailed { job: JobId(2), machine: MachineId(1) }), Err(SchedError::NotRunning(JobId(2))));
    assert_eq!(
        s.handle(t(7), Event::JobFailed { job: JobId(1), machine: MachineId(9) }),
        Err(SchedError::NotRunningOn { job: JobId(1), machine: MachineId(9) })
    );
    assert_eq!(s.handle(t(7), Event::JobSubmitted(seq_job(3, 7, 1.0))), Err(SchedError::DuplicateJob(JobId(3))));
    let stops = s.handle(t(8), Event::JobCancelled { job: JobId(1) }).unwrap();
    assert_eq!(stops, vec![Stop { job: JobId(1), machine: MachineId(1), why: StopWhy::Cancelled }]);
    s.handle(t(8), Event::JobCancelled { job: JobId(3) }).unwrap();
    assert_eq!(s.queued().map(|j| j.id().0).collect::<Vec<_>>(), vec![2, 4]);
    assert_eq!(ids(&s.pass(t(9))), vec![2]);
}

#[test]
fn backfill_does_not_use_the_default_guess_to_jump_the_reservation() {
    let mut s = sched(Algorithm::Backfill);
    add_machine(&mut s, Machine::new(1, "a", 1.0));
    add_machine(&mut s, Machine::new(2, "b", 1.0));
    submit(&mut s, seq_job(1, 0, 100.0));
    assert_eq!(ids(&s.pass(t(0))), vec![1]);
    submit(&mut s, seq_job(2, 1, 10.0).with_width(2)); // head, reservation at 100
    submit(&mut s, JobSpec::sequential(3, "mystery", t(2))); // no estimate, no history
    submit(&mut s, seq_job(4, 3, 50.0)); // ends at 55 < 100
    let a = s.pass(t(5));
    assert_eq!(ids(&a), vec![4]);
    assert!(matches!(a[0].reason, Reason::EndsBeforeReservation { head: JobId(2), reservation, .. } if reservation == t(100)));
    assert!(a[0].reason.to_string().starts_with("backfilled: predicted to end at"));
}

#[test]
fn backfill_uses_machines_the_head_will_not_need() {
    let mut s = sched(Algorithm::Backfill);
    for (id, speed, mem) in [(1, 3.0, 4), (2, 2.0, 4), (3, 1.0, 1)] {
        add_machine(&mut s, Machine { free_memory: mem * GB, ..Machine::new(id, "o", speed) });
    }
    submit(&mut s, seq_job(1, 0, 300.0));
    assert_eq!(s.pass(t(0))[0].machines, vec![MachineId(1)]); // ends at 100
                                                              // Needs 2 machines with 2 GB: only machine 2 now, machines 1 and 2 at t = 100.
    submit(&mut s, seq_job(2, 1, 10.0).with_width(2).with_memory(2 * GB));
    submit(&mut s, seq_job(3, 2, 10_000.0)); // long: only machine 3 is safe
    let a = s.pass(t(2));
    let r = s.reservation().unwrap();
    assert_eq!((r.head, r.at, r.machines.clone()), (JobId(2), t(100), vec![MachineId(1), MachineId(2)]));
    assert_eq!(ids(&a), vec![3]);
    assert_eq!(a[0].machines, vec![MachineId(3)]);
    assert_eq!(a[0].reason, Reason::OffReservedMachines { head: JobId(2), reservation: t(100) });
}

#[test]
fn heartbeats_mark_machines_alive_and_bad_reports_are_refused() {
    let mut s = sched(Algorithm::Fifo);
    add_machine(&mut s, Machine::new(1, "a", 1.0));
    add_machine(&mut s, Machine::new(2, "b", 1.0));
    s.handle(t(100), Event::Heartbeat { machine: MachineId(2) }).unwrap();
    assert_eq!(s.stale_machines(t(150), 60_000), vec![MachineId(1)]);
    assert_eq!(s.stale_machines(t(150), 200_000), Vec::<MachineId>::new());
    assert_eq!(s.handle(t(1), Event::Heartbeat { machine: MachineId(9) }), Err(SchedError::UnknownMachine(MachineId(9))));
    let bad = Machine::new(3, "c", 0.0);
    assert!(matches!(s.handle(t(1), Event::MachineUpdated(bad)), Err(SchedError::InvalidMachine { .. })));
    assert!(s.machine(MachineId(3)).is_none());
    assert!(matches!(s.handle(t(1), Event::JobSubmitted(seq_job(1, 1, 1.0).with_width(0))), Err(SchedError::InvalidJob { .. })));
    assert!(matches!(s.handle(t(1), Event::JobSubmitted(seq_job(1, 1, f64::NAN))), Err(SchedError::InvalidJob { .. })));
    assert_eq!(s.queue_len(), 0);
    submit(&mut s, seq_job(1, 1, 10.0));
    s.pass(t(2));
    let e = s.handle(t(3), Event::JobFinished { job: JobId(1), machine: MachineId(1), cpu_seconds: -1.0, wall_seconds: 1.0 });
    assert!(matches!(e, Err(SchedError::InvalidReport { .. })));
    assert_eq!(s.running_len(), 1);
}

// ---------------------------------------------------------------------------------------
// Configuration.

#[test]
fn config_round_trips_with_defaults_and_rejects_unknown_fields() {
    let d: SchedConfig = serde_json::from_str("{}").unwrap();
    assert_eq!(d, SchedConfig::default());
    assert_eq!(d.algorithm, Algorithm::Backfill);
    for alg in Algorithm::ALL {
        let c = SchedConfig { algorithm: alg, random_seed: 99, ..SchedConfig::default() };
        let json = serde_json::to_string(&c).unwrap();
        assert!(json.contains(&format!("\"algorithm\":\"{}\"", alg.name())), "{json}");
        assert_eq!(serde_json::from_str::<SchedConfig>(&json).unwrap(), c);
    }
    let c: SchedConfig = serde_json::from_str(r#"{"algorithm":"first_fit","predict":{"history_len":4}}"#).unwrap();
    assert_eq!((c.algorithm, c.predict.history_len, c.predict.exp_alpha), (Algorithm::FirstFit, 4, 0.5));
    assert!(serde_json::from_str::<SchedConfig>(r#"{"algoritm":"fifo"}"#).is_err());
    assert!(serde_json::from_str::<SchedConfig>(r#"{"predict":{"alpha":0.3}}"#).is_err());
    assert!(serde_json::from_str::<SchedConfig>(r#"{"algorithm":"FirstFit"}"#).is_err());
    let bad = SchedConfig { predict: PredictConfig { exp_alpha: 1.0, ..PredictConfig::default() }, ..SchedConfig::default() };
    assert!(matches!(Scheduler::new(bad), Err(SchedError::InvalidConfig(_))));
}

// ---------------------------------------------------------------------------------------
// Migration on request (seed 000 §5.2).

fn migrate_case() -> impl Strategy<Value = (MigrateAsk, Vec<Machine>)> {
    let machine = (2u64..9, 0.5f64..3.0, 0.0f64..1.0, any::<bool>(), 0u32..3, 0u64..4);
    (
        0.0f64..1.0,
        0.0f64..600.0,
        0.0f64..60.0,
        any::<bool>(),
        0.0f64..2000.0,
        proptest::option::of(0.0f64..4000.0),
        proptest::collection::vec(machine, 0..6),
        proptest::collection::vec(2u64..9, 0..2),
    )
        .prop_map(|(h, busy, cost, ckpt, done, pred, ms, exclude)| {
            let ask = MigrateAsk {
                source: Machine { load: h, ..Machine::new(1, "src", 1.0) },
                owner_busy_for_s: busy,
                migration_cost_s: cost,
                checkpointable: ckpt,
                done_normtime_s: done,
                predicted_normtime_s: pred,
                memory_needed: GB,
                exclude: exclude.into_iter().map(MachineId).collect(),
            };
            let ms = ms
                .into_iter()
                .map(|(id, speed, load, available, left, mem)| Machine {
                    load,
                    available,
                    interruptions_left: left,
                    free_memory: mem * GB / 2,
                    ..Machine::new(id, "o", speed)
                })
                .collect();
            (ask, ms)
        })
}

proptest! {
    /// The answer never names the source, a gang peer or a machine that could not take the
    /// task; it migrates exactly when moving is predicted sooner, to the first eligible
    /// machine in placement order; and with no eligible machine it stays.
    #[test]
    fn a_migration_goes_only_to_an_eligible_machine_and_only_when_sooner((ask, ms) in migrate_case()) {
        let eligible: Vec<&Machine> = ms.iter()
            .filter(|m| m.id != ask.source.id && !ask.exclude.contains(&m.id) && check_eligible(m, 0, 0, ask.memory_needed).is_ok())
            .collect();
        let best = eligible.iter().min_by_key(|m| rank_key(m)).map(|m| m.id);
        match decide_migration(&ask, &ms, 0.05) {
            MigrateDecision::Migrate { to, stay_s, move_s } => {
                prop_assert_eq!(Some(to), best);
                prop_assert!(move_s < stay_s);
            }
            MigrateDecision::Stay(StayWhy::NotSooner { best: b, stay_s, move_s }) => {
                prop_assert_eq!(Some(b), best);
                prop_assert!(move_s >= stay_s);
            }
            MigrateDecision::Stay(StayWhy::NoFreeMachine) => prop_assert!(best.is_none()),
        }
    }
}
