//! The virtual-time driver: lull-core's [`Policy`] on every traced machine and its
//! [`Scheduler`] for the pool, run unchanged; this file only moves time and carries
//! their decisions out, as the agent and the coordinator do live.
//!
//! * **Time** is seconds since the run's start (`f64`); the policy sees it as
//!   [`Now`] (monotonic ms, and UTC = local = `start_unix + t`, shifted by
//!   `utc_offset_s` for local days), the scheduler as [`Millis`].
//! * **Owners.** A machine with a trace ([`RunTrace`]) gets its own policy. A step feeds
//!   one sample: input first (when the definition uses input), then the sample. A
//!   machine without a trace is *dedicated*: always available, no owner load (seed 002's
//!   simulator model).
//! * **Sleeping** ([`Stepping::Sleep`], the default). Like the live agent, a machine's
//!   policy is only stepped when something can change: at a sample with input, at a
//!   sample that differs from the one before, at the samples within the policy's windows
//!   (`memory_window_s`, `linger_window_s`) of such a change, at its last sample, and at
//!   the first sample at or after `Policy::next_deadline()`; each machine's wake time
//!   sits in one priority queue. Every skipped sample repeats the last one fed, holds no
//!   input, comes before the deadline and finds the windows holding only that value, so
//!   it could not have changed the policy: the outcome is the same as stepping at every
//!   sample ([`Stepping::EverySample`]; the test
//!   `sleeping_to_the_deadline_gives_the_same_run_as_every_sample` compares the two).
//!   Deadlines are rounded up to the trace's next sample, the trace's resolution.
//! * **The pool.** After every step that changes a machine's availability the scheduler
//!   gets a `MachineUpdated`; after every arrival, finish, eviction or availability change
//!   it runs a pass, and each assignment becomes a guest on its machines.
//! * **Migration.** A checkpointable job evicted keeps its work; when placed again it
//!   first pays its `migration_s` (suspend, image over the network, resume) as work at
//!   full speed on its new members.
//! * **Guests** progress in virtual time. A job's rate is `width × min member speed`
//!   (the static-partition model the predictor assumes; a gang moves at its slowest
//!   member), a member's speed `S_b × (1 − owner CPU)` while the directive is Accept or
//!   Linger and 0 while frozen. Evict ends the member (`TaskEvicted`; a gang's other
//!   members are stopped as the scheduler says) and the job starts over when placed again.
//! * **Measured:** per job submission, first start, end and evictions; per machine the
//!   interruptions the policy counted per local day, and *owner delays* per day: owner
//!   returns (input after ≥ 60 s without input, seed 004's "inactive" rule) that found
//!   guest work on the machine, whatever definition recruited it.
//!

use crate::error::{Result, SimError};
use crate::trace::{OwnerSample, OwnerTrace, RunTrace};
use chrono::{DateTime, NaiveDate, Utc};
use lull_core::clock::{MonoMs, Now};
use lull_core::policy::PolicyConfig;
use lull_core::policy::{Action, Event as PEvent, GuestDirective, Policy, Saved, StateKind};
use lull_core::sample::{InputEvent, InputSignal, Sample};
use lull_core::sched::{Event, JobId, JobSpec, Machine, MachineId, Millis, SchedConfig, Scheduler};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap};

/// A job to simulate.
#[derive(Clone, Debug, PartialEq)]
pub struct SimJob {
    /// Unique id.
    pub id: u64,
    /// Program name (runtime history is kept per program).
    pub program: String,
    /// Submission, seconds after the run's start.
    pub submit_s: f64,
    /// Members (1 = sequential).
    pub width: u32,
    /// True processing time: seconds on a speed-1.0 machine, summed over members.
    pub normtime_s: f64,
    /// What the scheduler is told: the author's estimate per member (seconds on a
    /// speed-1.0 machine); `None` leaves prediction to history or the default.
    pub estimate_s: Option<f64>,
    /// Evicted work is kept (checkpoint, then migration, as seed 004's simulator
    /// assumes): the job resumes with what it had left. Otherwise it starts over.
    pub checkpointable: bool,
    /// Seconds a checkpointed job is suspended to move when it resumes elsewhere (seed
    /// 000 eq. 5's `T_migr = suspend + image / bandwidth + resume`; seed 004 Fig. 4's
    /// migration cost). The job's members are held and make no progress for that long at
    /// full speed (the move uses both machines' processors, seed 000 §5.2); 0 = free.
    pub migration_s: f64,
}

/// A machine of the simulated pool.
#[derive(Clone, Debug)]
pub struct SimMachine {
    /// Name (the owner's, for reports).
    pub name: String,
    /// Base speed `S_b`.
    pub base_speed: f64,
    /// The owner's activity; `None` = a dedicated machine.
    pub owner: Option<RunTrace>,
    /// The owner's policy configuration.
    pub policy: PolicyConfig,
    /// Whether the availability definition sees keyboard/mouse input (false models a
    /// CPU-only definition: the policy is not fed input events).
    pub sees_input: bool,
}

impl SimMachine {
    /// A dedicated machine of speed `base_speed`.
    pub fn dedicated(name: impl Into<String>, base_speed: f64) -> SimMachine {
        SimMachine { name: name.into(), base_speed, owner: None, policy: PolicyConfig::default(), sees_input: true }
    }
    /// A machine of speed 1.0 replaying `trace` under `policy`, seeing input.
    pub fn traced(trace: &OwnerTrace, policy: PolicyConfig) -> SimMachine {
        SimMachine { name: trace.machine.clone(), base_speed: 1.0, owner: Some(RunTrace::from(trace)), policy, sees_input: true }
    }
}

/// When the driver steps a traced machine's policy (see the module doc).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Stepping {
    /// Only when something can change: input, a changed sample and its windows, the
    /// policy's next deadline.
    #[default]
    Sleep,
    /// At every sample (the reference the sleeping driver is tested against).
    EverySample,
}

/// Run parameters.
#[derive(Clone, Debug)]
pub struct SimConfig {
    /// The scheduler's configuration (algorithm, seed of `random`, prediction).
    pub sched: SchedConfig,
    /// Unix time of virtual t = 0 (when machines have traces: their earliest start).
    pub start_unix: Option<i64>,
    /// Local time = UTC + this, for the policy's local days and hours.
    pub utc_offset_s: i64,
    /// Stop at this virtual time even if work remains (default: when every job has
    /// ended, or the last trace ends).
    pub horizon_s: Option<f64>,
    /// When machines' policies are stepped.
    pub stepping: Stepping,
    /// Tell a machine with guest work the cost of moving it as the pool stands: with no
    /// free available machine, migrating means waiting, so `T_migr` is set to a day
    /// (`Policy::set_migration_cost`); otherwise the configured estimate. Seed 000's LL
    /// weighs lingering against the best idle node; the policy alone knows no other node.
    /// Costs a scan of the pool per step of such a machine (for experiments, not the
    /// year-long benchmark).
    pub migration_sees_pool: bool,
}

impl SimConfig {
    /// The given scheduler configuration, everything else default.
    pub fn new(sched: SchedConfig) -> SimConfig {
        SimConfig { sched, start_unix: None, utc_offset_s: 0, horizon_s: None, stepping: Stepping::Sleep, migration_sees_pool: false }
    }
}

/// What happened to one job.
#[derive(Clone, Debug, PartialEq)]
pub struct JobOutcome {
    pub id: u64,
    pub width: u32,
    pub submit_s: f64,
    /// First start, if ever started.
    pub start_s: Option<f64>,
    /// Completion, if completed.
    pub end_s: Option<f64>,
    /// Times a member was evicted (the job then starts over).
    pub evictions: u32,
}

/// What happened on one machine.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MachineOutcome {
    pub name: String,
    /// Interruptions the policy counted, per local day.
    pub interruptions: BTreeMap<NaiveDate, u32>,
    /// Owner returns that found guest work present, per local day (see the module doc).
    pub owner_delays: BTreeMap<NaiveDate, u32>,
    /// Guest wall-seconds on the machine.
    pub guest_s: f64,
    /// Guest CPU-seconds at speed 1.0 (`S_b × share` integrated): the donated time.
    pub guest_cpu_s: f64,
    /// Seconds a guest lingered (directive Linger) beside its owner.
    pub lingered_s: f64,
    /// Owner CPU-seconds (owner CPU integrated over the trace).
    pub owner_cpu_s: f64,
    /// Owner CPU-seconds during which a guest also ran (share > 0): where lingering can
    /// delay the owner.
    pub shared_owner_cpu_s: f64,
    /// Seconds a guest ran beside its owner (share > 0), by the owner's CPU in 5-%
    /// levels (0, 5, …, 100 %: seed 000 §4.1's 21 levels): what a dispatch-level model
    /// ([`crate::dispatch`]) turns into the owner's delay.
    pub shared_by_level: [f64; 21],
    /// Idle CPU-seconds the owner left (`1 − owner CPU` integrated over the trace).
    pub idle_cpu_s: f64,
    /// Seconds the owner trace covers (0 for a dedicated machine).
    pub traced_s: f64,
}

/// The result of a run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Outcome {
    pub jobs: Vec<JobOutcome>,
    pub machines: Vec<MachineOutcome>,
    /// Virtual time when the run stopped.
    pub end_s: f64,
    /// Scheduler passes run.
    pub passes: u64,
    /// Policy steps run.
    pub policy_steps: u64,
    /// Trace samples replayed (fed or skipped as unchanged), over all machines.
    pub node_samples: u64,
    /// Readings the policies took in on their quiet fast path, without an evaluation
    /// (`Policy::quiet_readings`), over all machines.
    pub quiet_readings: u64,
}

impl Outcome {
    /// Completion time of the last job (C_max), over completed jobs.
    pub fn makespan(&self) -> f64 {
        self.jobs.iter().filter_map(|j| j.end_s).fold(0.0, f64::max)
    }
    /// Mean of (end − submit) over completed jobs.
    pub fn avg_flowtime(&self) -> f64 {
        mean(self.jobs.iter().filter_map(|j| j.end_s.map(|e| e - j.submit_s)))
    }
    /// Largest (first start − submit) over started jobs.
    pub fn max_wait(&self) -> f64 {
        self.jobs.iter().filter_map(|j| j.start_s.map(|s| s - j.submit_s)).fold(0.0, f64::max)
    }
    /// Share of jobs completed.
    pub fn completed_share(&self) -> f64 {
        if self.jobs.is_empty() {
            return 1.0;
        }
        self.jobs.iter().filter(|j| j.end_s.is_some()).count() as f64 / self.jobs.len() as f64
    }
}

fn mean(it: impl Iterator<Item = f64>) -> f64 {
    let (s, n) = it.fold((0.0, 0usize), |(s, n), v| (s + v, n + 1));
    if n == 0 {
        0.0
    } else {
        s / n as f64
    }
}

/// Seconds without input after which the next input is an owner *return*.
pub const RETURN_AFTER_S: i64 = 60;
const EPS: f64 = 1e-6;

struct MState {
    policy: Option<Policy>,
    /// The sample index the machine wakes at next.
    next_sample: u32,
    /// One past the last sample fed.
    fed: u32,
    /// Its time (ms); heap entries at other times are stale.
    wake_ms: u64,
    /// Index of the run holding the last sample fed.
    run: usize,
    /// Where owner memory / owner CPU last changed (sample index + 1; 0 = never).
    changed: (u32, u32),
    /// Samples around a change of owner memory / of owner CPU that are always fed (the
    /// policy's memory-growth and utilisation windows).
    window: (u32, u32),
    /// Trace start, ms after the run's start.
    off_ms: u64,
    /// Time up to which the outcome's integrals are accounted.
    acct_t: f64,
    /// Traced (owner CPU and idle time are accounted).
    traced: bool,
    guest: Option<JobId>,
    /// The guest's job as an index into the run's jobs (valid while `guest` is set).
    job: usize,
    /// Speed share the guest gets now (0 when frozen or absent).
    share: f64,
    owner_cpu: f64,
    available: bool,
    left: u32,
    used_today: u32,
    idle_since: Millis,
    last_input: Option<i64>,
    out: MachineOutcome,
}

struct Run {
    job: JobId,
    members: Vec<usize>,
    /// Work left at `as_of`.
    remaining: f64,
    started: f64,
    as_of: f64,
    /// Progress per second since `as_of`.
    rate: f64,
    /// When the work runs out at this rate (`None` while the rate is 0).
    end: Option<f64>,
}

impl Run {
    /// The rate changes to `v` at `t`: bring the work left up to `t` and schedule the end.
    fn retime(&mut self, t: f64, v: f64) {
        self.remaining -= self.rate * (t - self.as_of);
        self.as_of = t;
        self.rate = v;
        self.end = (v > 0.0).then(|| t + self.remaining.max(0.0) / v);
    }
}

/// The jobs running, by index into the run's jobs, and the list of those indices. Their
/// ends move with every change of a member's owner CPU, so the next one is found by a scan
/// of the running jobs (few beside the machines' samples) rather than kept in a heap.
struct Running {
    runs: Vec<Option<Run>>,
    active: Vec<usize>,
}

impl Running {
    fn insert(&mut self, ix: usize, r: Run) {
        if self.runs[ix].replace(r).is_none() {
            self.active.push(ix);
        }
    }
    fn remove(&mut self, ix: usize) -> Option<Run> {
        let r = self.runs[ix].take()?;
        let k = self.active.iter().position(|&a| a == ix).expect("an active run is listed");
        self.active.swap_remove(k);
        Some(r)
    }
    fn get(&self, ix: usize) -> Option<&Run> {
        self.runs[ix].as_ref()
    }
    fn get_mut(&mut self, ix: usize) -> Option<&mut Run> {
        self.runs[ix].as_mut()
    }
    fn is_empty(&self) -> bool {
        self.active.is_empty()
    }
    /// The earliest end of a running job.
    fn next_end(&self) -> Option<f64> {
        self.active.iter().filter_map(|&ix| self.runs[ix].as_ref().and_then(|r| r.end)).reduce(f64::min)
    }
    /// The jobs whose end is due by `t` (job index), in job id order.
    fn due(&self, t: f64) -> Vec<usize> {
        let mut due: Vec<usize> =
            self.active.iter().copied().filter(|&ix| self.runs[ix].as_ref().and_then(|r| r.end).is_some_and(|e| e <= t)).collect();
        due.sort_unstable_by_key(|&ix| self.runs[ix].as_ref().map(|r| r.job));
        due
    }
}

/// A machine's wake time in the sample queue: (ms << 24) | machine, so one integer
/// compares as (time, machine) did.
fn wake_key(at_ms: u64, mi: usize) -> u64 {
    (at_ms << MACHINE_BITS) | mi as u64
}
const MACHINE_BITS: u32 = 24;

/// The machines' wake times, popped in order of [`wake_key`] (time, then machine) as a
/// binary heap would, but in O(1) per wake for the common case of many machines waking
/// within the next seconds: a ring of one bucket per second for the next
/// [`WakeQueue::SECONDS`] seconds, a heap beyond. The second being drained is a batch
/// sorted once (descending, so the next key pops from the end).
struct WakeQueue {
    /// The batch: every key whose second is at most `second`, sorted descending (none
    /// before the first refill).
    batch: Vec<u64>,
    second: Option<u64>,
    /// Keys of the next seconds (from [`Self::ring_start`]), in slot `second % SECONDS`,
    /// unsorted.
    ring: Vec<Vec<u64>>,
    in_ring: usize,
    /// Keys further out.
    far: BinaryHeap<Reverse<u64>>,
}

impl WakeQueue {
    /// Long enough for a 60-s trace's next sample; few enough buckets to stay in cache.
    const SECONDS: u64 = 64;

    fn new() -> Self {
        WakeQueue {
            batch: Vec::new(),
            second: None,
            ring: (0..Self::SECONDS).map(|_| Vec::new()).collect(),
            in_ring: 0,
            far: BinaryHeap::new(),
        }
    }

    fn second_of(key: u64) -> u64 {
        (key >> MACHINE_BITS) / 1000
    }

    /// The first second the ring holds.
    fn ring_start(&self) -> u64 {
        self.second.map_or(0, |s| s + 1)
    }

    fn push(&mut self, key: u64) {
        let s = Self::second_of(key);
        if self.second.is_some_and(|b| s <= b) {
            let at = self.batch.partition_point(|&k| k > key);
            self.batch.insert(at, key);
        } else if s < self.ring_start() + Self::SECONDS {
            self.ring[(s % Self::SECONDS) as usize].push(key);
            self.in_ring += 1;
        } else {
            self.far.push(Reverse(key));
        }
    }

    /// The smallest key.
    fn peek(&mut self) -> Option<u64> {
        if self.batch.is_empty() {
            self.refill();
        }
        self.batch.last().copied()
    }

    fn pop(&mut self) -> Option<u64> {
        let k = self.peek();
        self.batch.pop();
        k
    }

    /// Makes the earliest second still queued the batch.
    fn refill(&mut self) {
        let from_far = self.far.peek().map(|Reverse(k)| Self::second_of(*k));
        let mut next = from_far;
        if self.in_ring > 0 {
            let start = self.ring_start();
            let limit = from_far.map_or(start + Self::SECONDS, |f| f.min(start + Self::SECONDS));
            next = (start..limit).find(|s| !self.ring[(s % Self::SECONDS) as usize].is_empty()).or(from_far);
        }
        let Some(next) = next else { return };
        self.second = Some(next);
        let slot = &mut self.ring[(next % Self::SECONDS) as usize];
        self.in_ring -= slot.len();
        std::mem::swap(&mut self.batch, slot);
        while let Some(&Reverse(k)) = self.far.peek() {
            if Self::second_of(k) > next {
                break;
            }
            self.far.pop();
            self.batch.push(k);
        }
        self.batch.sort_unstable_by(|a, b| b.cmp(a));
    }
}

/// How far ahead in its trace a machine's runs are prefetched (2 cache lines of runs).
const PREFETCH_RUNS: usize = 4;

/// Asks the CPU to bring `p`'s cache line in ahead of use (a hint: no effect on results).
#[inline(always)]
fn prefetch<T>(p: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint that never faults, and `p` is a valid reference anyway.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p as *const T as *const i8)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Runs `jobs` on `machines` (see the module doc). `progress(done, total)` is called as
/// jobs end (total = number of jobs).
pub fn run(machines: &[SimMachine], jobs: &[SimJob], cfg: &SimConfig, progress: &mut dyn FnMut(u64, u64)) -> Result<Outcome> {
    let mut sim = Sim::new(machines, jobs, cfg)?;
    loop {
        if sim.dirty {
            sim.pass();
        }
        let Some(t) = sim.next_event_time() else { break };
        sim.t = t;
        sim.complete_due(progress)?;
        sim.admit_arrivals()?;
        sim.step_due_machines()?;
        if t >= sim.horizon {
            break;
        }
    }
    Ok(sim.finish())
}

/// Virtual seconds as the core's clocks: the scheduler's [`Millis`] and the policy's [`Now`].
#[derive(Clone, Copy, Debug)]
struct Clock {
    /// Unix time of virtual t = 0.
    start_unix: i64,
    /// Local time = UTC + this.
    utc_offset_s: i64,
}

impl Clock {
    fn millis(&self, t: f64) -> Millis {
        Millis((self.start_unix as u64) * 1000 + (t * 1000.0).round().max(0.0) as u64)
    }
    fn now(&self, t: f64) -> Now {
        let ms = (t * 1000.0).round().max(0.0) as u64;
        let utc = DateTime::<Utc>::from_timestamp_millis(self.start_unix * 1000 + ms as i64).unwrap_or_default();
        Now { mono: MonoMs(ms + 1), utc, local: utc.naive_utc() + chrono::Duration::seconds(self.utc_offset_s) }
    }
}

/// One run in progress: the pool's scheduler, every machine's state, the running jobs,
/// and the counters the [`Outcome`] reports.
struct Sim<'a> {
    machines: &'a [SimMachine],
    jobs: &'a [SimJob],
    cfg: &'a SimConfig,
    clock: Clock,
    sched: Scheduler,
    /// Job indices in submission order.
    order: Vec<usize>,
    job_ix: HashMap<u64, usize>,
    outcomes: Vec<JobOutcome>,
    ms: Vec<MState>,
    /// The machines' wake times.
    samples: WakeQueue,
    /// When the last trace ends (virtual s).
    trace_end: f64,
    horizon: f64,
    runs: Running,
    /// Work left of evicted checkpointable jobs.
    kept: HashMap<JobId, f64>,
    /// The next job (index into `order`) to arrive.
    next_job: usize,
    t: f64,
    done: u64,
    passes: u64,
    steps: u64,
    node_samples: u64,
    /// Something changed since the last scheduler pass.
    dirty: bool,
}

impl<'a> Sim<'a> {
    /// Every machine's policy started and announced to the scheduler, every traced machine
    /// queued at its first sample.
    fn new(machines: &'a [SimMachine], jobs: &'a [SimJob], cfg: &'a SimConfig) -> Result<Sim<'a>> {
        let sched = Scheduler::new(cfg.sched.clone())?;
        let start_unix = cfg
            .start_unix
            .or_else(|| machines.iter().filter_map(|m| m.owner.as_ref().map(|t| t.start_unix)).min())
            .unwrap_or(1_767_225_600);
        let clock = Clock { start_unix, utc_offset_s: cfg.utc_offset_s };
        let mut order: Vec<usize> = (0..jobs.len()).collect();
        order.sort_by(|a, b| jobs[*a].submit_s.total_cmp(&jobs[*b].submit_s).then(a.cmp(b)));
        if machines.len() >= 1 << MACHINE_BITS {
            return Err(SimError::Invalid(format!("{} machines: at most {} per run", machines.len(), (1u64 << MACHINE_BITS) - 1)));
        }
        let mut sim = Sim {
            machines,
            jobs,
            cfg,
            clock,
            sched,
            order,
            job_ix: jobs.iter().enumerate().map(|(i, j)| (j.id, i)).collect(),
            outcomes: jobs
                .iter()
                .map(|j| JobOutcome { id: j.id, width: j.width, submit_s: j.submit_s, start_s: None, end_s: None, evictions: 0 })
                .collect(),
            ms: Vec::with_capacity(machines.len()),
            samples: WakeQueue::new(),
            trace_end: 0.0,
            horizon: cfg.horizon_s.unwrap_or(f64::INFINITY),
            runs: Running { runs: (0..jobs.len()).map(|_| None).collect(), active: Vec::new() },
            kept: HashMap::new(),
            next_job: 0,
            t: 0.0,
            done: 0,
            passes: 0,
            steps: 0,
            node_samples: 0,
            dirty: true,
        };
        for (i, m) in machines.iter().enumerate() {
            let st = sim.machine_state(i, m)?;
            sim.sched.handle(clock.millis(0.0), Event::MachineUpdated(machine_of(i, m, &st)))?;
            sim.ms.push(st);
        }
        Ok(sim)
    }

    /// Machine `i`'s starting state; a traced machine gets its policy and its first wake.
    fn machine_state(&mut self, i: usize, m: &SimMachine) -> Result<MState> {
        let mut st = MState {
            policy: None,
            next_sample: 0,
            fed: 0,
            wake_ms: 0,
            run: 0,
            changed: (0, 0),
            window: (0, 0),
            off_ms: 0,
            acct_t: 0.0,
            traced: false,
            guest: None,
            job: 0,
            share: 0.0,
            owner_cpu: 0.0,
            available: m.owner.is_none(),
            left: 10,
            used_today: 0,
            idle_since: Millis::ZERO,
            last_input: None,
            out: MachineOutcome { name: m.name.clone(), ..Default::default() },
        };
        let Some(tr) = &m.owner else { return Ok(st) };
        let start_unix = self.clock.start_unix;
        let t0 = (tr.start_unix - start_unix) as f64;
        st.policy = Some(Policy::new(m.policy.clone(), self.clock.now(t0.max(0.0)), Saved::default(), 0, "sim"));
        st.left = m.policy.budget.interruptions_per_day;
        st.out.traced_s = tr.len as f64 * tr.step_s as f64;
        self.trace_end = self.trace_end.max((tr.end_unix() - start_unix) as f64);
        // A window of `span` pushed at sample d holds the samples back to d − span
        // (`Window::push` drops only what is older): ⌊span / step⌋ samples before d.
        // Feeding that many before a change, and after it, gives every fed step the
        // window stepping at every sample gives; further out the window holds one
        // value only, whatever its count.
        let w = |span_s: u64| (span_s / tr.step_s as u64).min(u32::MAX as u64 / 4) as u32;
        st.window = (w(m.policy.availability.memory_window_s), w(m.policy.eviction.linger_window_s));
        st.off_ms = ((tr.start_unix - start_unix).max(0) as u64) * 1000;
        st.acct_t = st.off_ms as f64 / 1000.0;
        st.traced = true;
        st.wake_ms = st.off_ms;
        if (tr.end_unix() - start_unix) as u64 * 1000 >= 1 << (64 - MACHINE_BITS) {
            return Err(SimError::Invalid(format!("trace of {}: ends over 34 years after the run's start", m.name)));
        }
        if tr.len > 0 {
            self.samples.push(wake_key(st.wake_ms, i));
        }
        Ok(st)
    }

    /// A scheduler pass: each assignment becomes a guest on its machines.
    fn pass(&mut self) {
        self.dirty = false;
        self.passes += 1;
        let t = self.t;
        let nw = self.clock.now(t);
        for a in self.sched.pass(self.clock.millis(t)) {
            let ix = self.job_ix[&a.job.0];
            let members: Vec<usize> = a.machines.iter().map(|m| m.0 as usize).collect();
            for &mi in &members {
                let st = &mut self.ms[mi];
                settle(st, t, self.machines[mi].base_speed);
                st.guest = Some(a.job);
                st.job = ix;
                if let Some(p) = st.policy.as_mut() {
                    self.steps += 1;
                    let acts = p.handle(nw, PEvent::GuestsPresent(true));
                    apply_actions(st, &acts, nw);
                }
                st.share = share_of(st);
                rewake(&self.machines[mi], self.clock, mi, st, t, &mut self.samples);
            }
            self.outcomes[ix].start_s.get_or_insert(t);
            let remaining = match self.kept.remove(&a.job) {
                // Resuming after an eviction: first the move, as work at full speed.
                Some(left) => left + self.jobs[ix].migration_s * full_rate(&members, self.machines),
                None => self.jobs[ix].normtime_s,
            };
            let mut r = Run { job: a.job, members, remaining, started: t, as_of: t, rate: 0.0, end: None };
            let v = rate(&r, self.machines, &self.ms);
            r.retime(t, v);
            self.runs.insert(ix, r);
        }
    }

    /// The time of the next arrival, completion or wake; `None` when the run is over (no
    /// work left and no horizon). Past the horizon (or with nothing left to happen) the
    /// clock moves to the horizon or the last trace's end and the run ends there.
    fn next_event_time(&mut self) -> Option<f64> {
        let t = self.t;
        let t_arr = self.order.get(self.next_job).map_or(f64::INFINITY, |&i| self.jobs[i].submit_s.max(t));
        let t_done = self.runs.next_end().map_or(f64::INFINITY, |e| e.max(t));
        let t_samp = self.samples.peek().map_or(f64::INFINITY, |k| (k >> MACHINE_BITS) as f64 / 1000.0);
        let t_next = t_arr.min(t_done).min(t_samp);
        let work_left = self.next_job < self.order.len() || !self.runs.is_empty() || self.sched.queue_len() > 0;
        if !work_left && self.cfg.horizon_s.is_none() {
            return None;
        }
        if !t_next.is_finite() || t_next > self.horizon {
            self.t = self.horizon.min(if t_next.is_finite() { t_next } else { t.max(self.trace_end) });
            return None;
        }
        Some(t_next)
    }

    /// Completions: the jobs whose end is due by now release their machines.
    fn complete_due(&mut self, progress: &mut dyn FnMut(u64, u64)) -> Result<()> {
        let t = self.t;
        let (now, nw) = (self.clock.millis(t), self.clock.now(t));
        for ix in self.runs.due(t) {
            let r = self.runs.remove(ix).expect("running");
            let id = r.job;
            let wall = t - r.started;
            for &mi in &r.members {
                let cpu = wall * self.ms[mi].share.max(0.0);
                self.sched
                    .handle(now, Event::JobFinished { job: id, machine: MachineId(mi as u64), cpu_seconds: cpu, wall_seconds: wall })?;
                release(&mut self.ms[mi], t, self.machines[mi].base_speed, nw, &mut self.steps);
                rewake(&self.machines[mi], self.clock, mi, &mut self.ms[mi], t, &mut self.samples);
            }
            self.outcomes[ix].end_s = Some(t);
            self.done += 1;
            progress(self.done, self.jobs.len() as u64);
            self.dirty = true;
        }
        Ok(())
    }

    /// Arrivals: every job submitted by now goes to the scheduler.
    fn admit_arrivals(&mut self) -> Result<()> {
        let now = self.clock.millis(self.t);
        while let Some(&i) = self.order.get(self.next_job) {
            if self.jobs[i].submit_s > self.t + EPS {
                break;
            }
            let j = &self.jobs[i];
            let mut spec = JobSpec::sequential(j.id, j.program.clone(), self.clock.millis(j.submit_s)).with_width(j.width);
            spec.user_estimate_s = j.estimate_s;
            self.sched.handle(now, Event::JobSubmitted(spec))?;
            self.next_job += 1;
            self.dirty = true;
        }
        Ok(())
    }

    /// Owner samples due now: every machine whose wake time has come takes its step.
    fn step_due_machines(&mut self) -> Result<()> {
        while let Some(key) = self.samples.peek() {
            let (at, mi) = (key >> MACHINE_BITS, (key & ((1 << MACHINE_BITS) - 1)) as usize);
            if at as f64 / 1000.0 > self.t + EPS {
                break;
            }
            self.samples.pop();
            let tr = self.machines[mi].owner.as_ref().expect("traced");
            let st = &self.ms[mi];
            if at != st.wake_ms || st.next_sample >= tr.len {
                continue; // superseded by an earlier wake
            }
            self.step_machine(mi)?;
        }
        Ok(())
    }

    /// One step of machine `mi`: its sample fed to its policy, then the pool's view of the
    /// machine and the guest's directive acted on.
    fn step_machine(&mut self, mi: usize) -> Result<()> {
        let t = self.t;
        settle(&mut self.ms[mi], t, self.machines[mi].base_speed);
        if self.cfg.migration_sees_pool && self.ms[mi].guest.is_some() {
            self.tell_migration_cost(mi);
        }
        let ended = self.feed_sample(mi);
        self.publish_availability(mi, ended)?;
        self.act_on_directive(mi, ended)?;
        // The guest's share changed with the sample: its job's pace too.
        if self.ms[mi].guest.is_some() {
            if let Some(r) = self.runs.get_mut(self.ms[mi].job) {
                let v = rate(r, self.machines, &self.ms);
                if v != r.rate {
                    r.retime(t, v);
                }
            }
        }
        Ok(())
    }

    /// With no free available machine, migrating means waiting: `T_migr` a day
    /// (`SimConfig::migration_sees_pool`).
    fn tell_migration_cost(&mut self, mi: usize) {
        let free = self.ms.iter().any(|o| o.available && o.guest.is_none());
        if let Some(p) = self.ms[mi].policy.as_mut() {
            p.set_migration_cost(if free { None } else { Some(std::time::Duration::from_secs(86_400)) });
        }
    }

    /// Feeds machine `mi` its next sample (input first, when its definition sees input),
    /// counts an owner delay when the owner returns to guest work, and queues its next
    /// wake. Returns whether that was the trace's last sample.
    fn feed_sample(&mut self, mi: usize) -> bool {
        let (m, t) = (&self.machines[mi], self.t);
        let tr = m.owner.as_ref().expect("traced");
        let nw = self.clock.now(t);
        let st = &mut self.ms[mi];
        let i = st.next_sample;
        advance_runs(st, tr, i);
        let s = tr.runs[st.run].1;
        // Each machine reads its trace forward, but hundreds of them in turn, more
        // streams than the CPU's own prefetcher follows: the runs a few samples ahead
        // are asked for now, long before this machine's next turn.
        if let Some(ahead) = tr.runs.get(st.run + PREFETCH_RUNS) {
            prefetch(ahead);
        }
        let unix = tr.start_unix + (i as i64) * tr.step_s as i64;
        if s.input {
            if st.guest.is_some() && st.last_input.is_none_or(|l| unix - l >= RETURN_AFTER_S) {
                *st.out.owner_delays.entry(nw.local_date()).or_default() += 1;
            }
            st.last_input = Some(unix);
        }
        let p = st.policy.as_mut().expect("traced machines have a policy");
        let mut acts = Vec::new();
        if s.input && m.sees_input {
            acts = p.handle(nw, PEvent::Input(InputEvent { at: nw.mono, signal: InputSignal::Activity }));
            self.steps += 1;
        }
        let more = p.handle(nw, PEvent::Sample(sample_of(nw, s, tr.mem_total_bytes)));
        if acts.is_empty() {
            acts = more;
        } else {
            acts.extend(more);
        }
        self.steps += 1;
        st.owner_cpu = s.owner_cpu as f64;
        apply_actions(st, &acts, nw);
        // The deadline is only asked for when the trace lets the machine sleep.
        let policy = st.policy.as_ref();
        let dl = || policy.and_then(|p| p.next_deadline(nw));
        let next = next_step(tr, st.run, st.changed, i, st.window, self.cfg.stepping, &dl, st.off_ms);
        st.fed = i + 1;
        let prev = st.next_sample;
        st.next_sample = next.unwrap_or(tr.len);
        self.node_samples += (st.next_sample - prev) as u64;
        let ended = next.is_none();
        st.traced = !ended;
        if let Some(ix) = next {
            st.wake_ms = st.off_ms + ix as u64 * tr.step_s as u64 * 1000;
            self.samples.push(wake_key(st.wake_ms, mi));
        }
        ended
    }

    /// Tells the scheduler when machine `mi`'s availability or interruptions left changed.
    fn publish_availability(&mut self, mi: usize, ended: bool) -> Result<()> {
        let m = &self.machines[mi];
        let st = &mut self.ms[mi];
        let p = st.policy.as_ref().expect("policy");
        let available = !ended
            && matches!(p.state(), StateKind::Recruitable | StateKind::Donating | StateKind::LendingLight)
            && p.directive() == GuestDirective::Accept;
        let left = m.policy.budget.interruptions_per_day.saturating_sub(st.used_today);
        if available && !st.available {
            st.idle_since = self.clock.millis(self.t);
        }
        if available != st.available || left != st.left {
            st.available = available;
            st.left = left;
            self.sched.handle(self.clock.millis(self.t), Event::MachineUpdated(machine_of(mi, m, st)))?;
            self.dirty = true;
        }
        Ok(())
    }

    /// Acts on the policy's guest directive: an eviction (or the trace's end) ends the
    /// guest's job on every member; a checkpointable job keeps the work it had left.
    fn act_on_directive(&mut self, mi: usize, ended: bool) -> Result<()> {
        let t = self.t;
        let st = &mut self.ms[mi];
        let evict = ended || st.policy.as_ref().expect("policy").directive() == GuestDirective::Evict;
        st.share = share_of(st);
        let (true, Some(job)) = (evict, st.guest) else { return Ok(()) };
        let jx = st.job;
        let r = self.runs.get(jx).expect("a guest's job runs");
        let cpu = (t - r.started) * self.machines[mi].base_speed;
        // Every member is released below; the scheduler has requeued the job.
        let _stops = self
            .sched
            .handle(self.clock.millis(t), Event::TaskEvicted { job, machine: MachineId(mi as u64), cpu_seconds: cpu.max(0.0) })?;
        self.outcomes[jx].evictions += 1;
        let r = self.runs.remove(jx).expect("running");
        if self.jobs[jx].checkpointable {
            self.kept.insert(job, (r.remaining - r.rate * (t - r.as_of)).max(0.0));
        }
        let nw = self.clock.now(t);
        for &o in &r.members {
            release(&mut self.ms[o], t, self.machines[o].base_speed, nw, &mut self.steps);
            rewake(&self.machines[o], self.clock, o, &mut self.ms[o], t, &mut self.samples);
        }
        self.dirty = true;
        Ok(())
    }

    /// Brings every machine's integrals to the end and gathers the outcome.
    fn finish(mut self) -> Outcome {
        for (i, st) in self.ms.iter_mut().enumerate() {
            settle(st, self.t, self.machines[i].base_speed);
        }
        let quiet_readings = self.ms.iter().filter_map(|s| s.policy.as_ref()).map(Policy::quiet_readings).sum();
        Outcome {
            jobs: self.outcomes,
            machines: self.ms.into_iter().map(|s| s.out).collect(),
            end_s: self.t,
            passes: self.passes,
            policy_steps: self.steps,
            node_samples: self.node_samples,
            quiet_readings,
        }
    }
}

/// Moves `st`'s run cursor to the run holding sample `i`, noting where owner memory and
/// owner CPU last changed (the windows fed around a change start there).
fn advance_runs(st: &mut MState, tr: &RunTrace, i: u32) {
    if i == 0 {
        st.changed = (1, 1);
    }
    while st.run + 1 < tr.runs.len() && tr.runs[st.run + 1].0 <= i {
        st.run += 1;
        let (a, b) = (tr.runs[st.run - 1].1, tr.runs[st.run].1);
        if a.owner_mem_bytes != b.owner_mem_bytes {
            st.changed.0 = tr.runs[st.run].0 + 1;
        }
        if a.owner_cpu != b.owner_cpu {
            st.changed.1 = tr.runs[st.run].0 + 1;
        }
    }
}

/// The policy's [`Sample`] of a trace sample at `nw`.
fn sample_of(nw: Now, s: OwnerSample, mem_total_bytes: u64) -> Sample {
    Sample {
        at: nw.mono,
        owner_cpu: s.owner_cpu,
        owner_mem_bytes: s.owner_mem_bytes,
        mem_total_bytes,
        mem_available_bytes: mem_total_bytes.saturating_sub(s.owner_mem_bytes),
        swap_total_bytes: 0,
        swap_free_bytes: 0,
        guest_cpu: 0.0,
        guest_mem_bytes: 0,
        on_battery: None,
        cpu_temp_c: None,
        exclusive_program: None,
    }
}

/// A machine's policy may want an earlier wake after an event outside its samples (a
/// guest arrived or left): queue it at the sample of its next deadline if that is sooner.
fn rewake(m: &SimMachine, clock: Clock, mi: usize, st: &mut MState, t: f64, queue: &mut WakeQueue) {
    let (Some(tr), Some(p)) = (m.owner.as_ref(), st.policy.as_ref()) else { return };
    if st.next_sample >= tr.len {
        return;
    }
    if let Some(dl) = p.next_deadline(clock.now(t)) {
        let ix = index_at(tr, st.off_ms, dl).max(st.fed);
        if ix < st.next_sample {
            st.next_sample = ix;
            st.wake_ms = st.off_ms + ix as u64 * tr.step_s as u64 * 1000;
            queue.push(wake_key(st.wake_ms, mi));
        }
    }
}

/// A job's progress per second on `members` with no owner load: width × slowest base speed.
fn full_rate(members: &[usize], machines: &[SimMachine]) -> f64 {
    members.len() as f64 * members.iter().map(|&i| machines[i].base_speed).fold(f64::INFINITY, f64::min)
}

/// A running job's progress per second: width × its slowest member's speed share.
fn rate(run: &Run, machines: &[SimMachine], ms: &[MState]) -> f64 {
    let slowest = run.members.iter().map(|&i| machines[i].base_speed * ms[i].share).fold(f64::INFINITY, f64::min);
    run.members.len() as f64 * slowest
}

/// The first sample index at or after the policy deadline `dl` (a monotonic reading,
/// virtual ms + 1), less a millisecond: deadlines on the local calendar (midnight, the
/// allowed hours) come rounded up by one, and a sample taken exactly at midnight already
/// sees the new day.
fn index_at(tr: &RunTrace, off_ms: u64, dl: MonoMs) -> u32 {
    let ms = dl.0.saturating_sub(2).saturating_sub(off_ms);
    let step = tr.step_s as u64 * 1000;
    ms.div_ceil(step).min(u32::MAX as u64) as u32
}

/// How many samples around the start of run `k` the windows need fed: the memory
/// window's if owner memory changed there, the utilisation window's if owner CPU did.
fn reach(tr: &RunTrace, k: usize, window: (u32, u32)) -> u32 {
    let Some(prev) = k.checked_sub(1).map(|p| tr.runs[p].1) else { return window.0.max(window.1) };
    let s = tr.runs[k].1;
    let mem = if s.owner_mem_bytes != prev.owner_mem_bytes { window.0 } else { 0 };
    let cpu = if s.owner_cpu != prev.owner_cpu { window.1 } else { 0 };
    mem.max(cpu)
}

/// After feeding sample `i` (in run `run`): the next sample to feed, `None` when `i`
/// was the last (see the module doc for why skipping the others changes nothing).
#[allow(clippy::too_many_arguments)]
fn next_step(
    tr: &RunTrace,
    run: usize,
    changed: (u32, u32),
    i: u32,
    window: (u32, u32),
    stepping: Stepping,
    deadline: &dyn Fn() -> Option<MonoMs>,
    off_ms: u64,
) -> Option<u32> {
    let n = tr.len;
    if i + 1 >= n {
        return None;
    }
    let by_trace = match stepping {
        Stepping::EverySample => i + 1,
        Stepping::Sleep => {
            let s = tr.runs[run].1;
            let next_start = tr.runs.get(run + 1).map_or(n, |r| r.0);
            let in_window = |c: u32, w: u32| c > 0 && i < c - 1 + w;
            if (s.input && i + 1 < next_start) || in_window(changed.0, window.0) || in_window(changed.1, window.1) {
                i + 1
            } else {
                // The next change, or earlier: the windows of the changes ahead.
                let most = window.0.max(window.1);
                let mut best = if next_start < n { next_start } else { n - 1 };
                let mut k = run + 1;
                while let Some(&(c, _)) = tr.runs.get(k) {
                    if c >= best.saturating_add(most) {
                        break;
                    }
                    best = best.min(c.saturating_sub(reach(tr, k, window)));
                    k += 1;
                }
                best.max(i + 1)
            }
        }
    };
    if by_trace == i + 1 {
        return Some(i + 1); // no deadline can come sooner
    }
    let by_deadline = deadline().map_or(u32::MAX, |d| index_at(tr, off_ms, d).max(i + 1));
    Some(by_trace.min(by_deadline))
}

fn machine_of(i: usize, m: &SimMachine, st: &MState) -> Machine {
    let mut mm = Machine::new(i as u64, m.name.clone(), m.base_speed);
    mm.load = if m.owner.is_some() { st.owner_cpu } else { 0.0 };
    mm.free_memory = u64::MAX / 4;
    mm.available = st.available;
    mm.interruptions_left = if m.owner.is_some() { st.left } else { 10 };
    mm.idle_since = st.idle_since;
    mm
}

/// The share of its machine a guest gets under the policy's directive.
fn share_of(st: &MState) -> f64 {
    if st.guest.is_none() {
        return 0.0;
    }
    match st.policy.as_ref().map(Policy::directive) {
        None => 1.0,
        Some(GuestDirective::Accept | GuestDirective::Linger) => (1.0 - st.owner_cpu).clamp(0.0, 1.0),
        Some(GuestDirective::Freeze | GuestDirective::Evict) => 0.0,
    }
}

fn apply_actions(st: &mut MState, acts: &[Action], now: Now) {
    for a in acts {
        match a {
            Action::InterruptionCounted(i) => {
                *st.out.interruptions.entry(i.day).or_default() += 1;
                st.used_today = i.number;
            }
            Action::DayRolled { .. } => st.used_today = 0,
            _ => {}
        }
    }
    let _ = now;
}

/// The guest left the machine: tell its policy.
fn release(st: &mut MState, t: f64, speed: f64, now: Now, steps: &mut u64) {
    settle(st, t, speed);
    st.guest = None;
    st.share = 0.0;
    if let Some(p) = st.policy.as_mut() {
        *steps += 1;
        let acts = p.handle(now, PEvent::GuestsPresent(false));
        apply_actions(st, &acts, now);
    }
}

/// Brings the machine's integrals (guest time, donated CPU, owner CPU) up to `t`; called
/// before anything they depend on changes, so only machines that change cost anything.
fn settle(st: &mut MState, t: f64, speed: f64) {
    let dt = t - st.acct_t;
    if dt <= 0.0 {
        return;
    }
    st.acct_t = t;
    let o = &mut st.out;
    if st.guest.is_some() {
        o.guest_s += dt;
        o.guest_cpu_s += st.share * speed * dt;
        if st.share > 0.0 {
            o.shared_owner_cpu_s += st.owner_cpu * dt;
            o.shared_by_level[(st.owner_cpu.clamp(0.0, 1.0) * 20.0).round() as usize] += dt;
        }
        if st.policy.as_ref().is_some_and(|p| p.directive() == GuestDirective::Linger) {
            o.lingered_s += dt;
        }
    }
    if st.traced {
        o.owner_cpu_s += st.owner_cpu * dt;
        o.idle_cpu_s += (1.0 - st.owner_cpu).max(0.0) * dt;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::OwnerSample;
    use lull_core::sched::Algorithm;

    fn job(id: u64, submit: f64, width: u32, normtime: f64) -> SimJob {
        SimJob {
            id,
            program: format!("p{id}"),
            submit_s: submit,
            width,
            normtime_s: normtime,
            estimate_s: Some(normtime / width as f64),
            checkpointable: false,
            migration_s: 0.0,
        }
    }

    #[test]
    fn dedicated_fifo_runs_jobs_back_to_back_at_machine_speed() {
        let machines = vec![SimMachine::dedicated("a", 2.0)];
        let jobs = vec![job(1, 0.0, 1, 100.0), job(2, 10.0, 1, 50.0)];
        let out = run(&machines, &jobs, &SimConfig::new(SchedConfig::with_algorithm(Algorithm::Fifo)), &mut |_, _| {}).unwrap();
        assert_eq!(out.jobs[0].end_s, Some(50.0));
        assert_eq!(out.jobs[1].start_s, Some(50.0));
        assert!((out.jobs[1].end_s.unwrap() - 75.0).abs() < 1e-6);
        assert!((out.makespan() - 75.0).abs() < 1e-6);
        assert!((out.max_wait() - 40.0).abs() < 1e-6);
    }

    #[test]
    fn a_gang_moves_at_its_slowest_member() {
        let machines = vec![SimMachine::dedicated("fast", 2.0), SimMachine::dedicated("slow", 1.0)];
        let out = run(&machines, &[job(1, 0.0, 2, 100.0)], &SimConfig::new(SchedConfig::default()), &mut |_, _| {}).unwrap();
        assert!((out.jobs[0].end_s.unwrap() - 50.0).abs() < 1e-6);
    }

    fn trace(pattern: &[(u32, bool)]) -> RunTrace {
        // (seconds, owner present) runs at 1-s samples.
        let mut samples = Vec::new();
        for &(n, present) in pattern {
            for _ in 0..n {
                samples.push(OwnerSample { owner_cpu: if present { 0.5 } else { 0.0 }, owner_mem_bytes: 1 << 30, input: present });
            }
        }
        RunTrace::from(&OwnerTrace { machine: "ws".into(), start_unix: 1_767_254_400, step_s: 1, mem_total_bytes: 16 << 30, samples })
    }

    #[test]
    fn the_policy_recruits_after_the_threshold_and_an_owner_return_evicts_and_counts() {
        let mut m = SimMachine::dedicated("ws", 1.0);
        m.owner = Some(trace(&[(10, true), (400, false), (30, true), (2000, false)]));
        m.policy.eviction.mode = lull_core::policy::EvictionMode::ImmediateEviction;
        // 300 s of work: recruited at ~190 s, owner back at 410 s (220 s done), evicted,
        // started over after the next 180 s of idleness (~620 s), done at ~920 s.
        let out = run(&[m], &[job(1, 0.0, 1, 300.0)], &SimConfig::new(SchedConfig::default()), &mut |_, _| {}).unwrap();
        let j = &out.jobs[0];
        assert_eq!(j.evictions, 1);
        let start = j.start_s.unwrap();
        assert!((185.0..=195.0).contains(&start), "start {start}");
        let end = j.end_s.unwrap();
        assert!((910.0..=930.0).contains(&end), "end {end}");
        let mo = &out.machines[0];
        assert_eq!(mo.interruptions.values().sum::<u32>(), 1);
        assert_eq!(mo.owner_delays.values().sum::<u32>(), 1);
    }

    #[test]
    fn a_checkpointable_job_resumes_where_it_was_evicted() {
        let mut m = SimMachine::dedicated("ws", 1.0);
        m.owner = Some(trace(&[(10, true), (400, false), (30, true), (2000, false)]));
        m.policy.eviction.mode = lull_core::policy::EvictionMode::ImmediateEviction;
        let mut j = job(1, 0.0, 1, 300.0);
        j.checkpointable = true;
        // ~220 s done before the return; the last ~80 s after re-recruitment at ~620 s.
        let out = run(&[m], &[j], &SimConfig::new(SchedConfig::default()), &mut |_, _| {}).unwrap();
        let end = out.jobs[0].end_s.unwrap();
        assert!((690.0..=715.0).contains(&end), "end {end}");
    }

    #[test]
    fn a_machine_that_never_idles_long_enough_runs_nothing() {
        let mut m = SimMachine::dedicated("ws", 1.0);
        m.owner = Some(trace(&[(100, false), (1, true), (100, false), (1, true), (100, false)]));
        let out = run(&[m], &[job(1, 0.0, 1, 10.0)], &SimConfig::new(SchedConfig::default()), &mut |_, _| {}).unwrap();
        assert_eq!(out.jobs[0].start_s, None);
        assert_eq!(out.completed_share(), 0.0);
        assert!(out.end_s >= 300.0);
    }

    /// Two days of four generated owners, CPU quantised to 25 % so that stretches of
    /// unchanged samples exist (the generator's background noise changes every second),
    /// one machine per eviction mode, a stream of jobs: sleeping to the deadlines must
    /// give exactly the run stepping at every sample gives, with fewer steps.
    #[test]
    fn sleeping_to_the_deadline_gives_the_same_run_as_every_sample() {
        use lull_core::policy::EvictionMode;
        let modes =
            [EvictionMode::ImmediateEviction, EvictionMode::PauseAndMigrate, EvictionMode::LingerLonger, EvictionMode::LingerForever];
        let machines: Vec<SimMachine> = modes
            .iter()
            .enumerate()
            .map(|(i, mode)| {
                let mut t = crate::gen::generate(&crate::gen::GenParams::default(), 7, i as u64, 1_767_225_600, 2);
                for s in &mut t.samples {
                    s.owner_cpu = (s.owner_cpu * 4.0).floor() / 4.0;
                }
                let mut p = PolicyConfig::default();
                p.eviction.mode = *mode;
                p.budget.interruptions_per_day = 3 + i as u32;
                SimMachine::traced(&t, p)
            })
            .collect();
        let jobs: Vec<SimJob> = (0..60)
            .map(|k| {
                let mut j = job(k, k as f64 * 2400.0, if k % 5 == 0 { 2 } else { 1 }, 600.0 + (k % 7) as f64 * 900.0);
                j.checkpointable = k % 3 == 0;
                j
            })
            .collect();
        let mut every = SimConfig::new(SchedConfig::default());
        every.stepping = Stepping::EverySample;
        let sleep = SimConfig::new(SchedConfig::default());
        let a = run(&machines, &jobs, &every, &mut |_, _| {}).unwrap();
        let b = run(&machines, &jobs, &sleep, &mut |_, _| {}).unwrap();
        assert_eq!(a.jobs, b.jobs);
        for (x, y) in a.machines.iter().zip(&b.machines) {
            assert_eq!(x.interruptions, y.interruptions, "{}", x.name);
            assert_eq!(x.owner_delays, y.owner_delays, "{}", x.name);
            let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * a.abs().max(1.0);
            assert!(close(x.guest_s, y.guest_s), "{}: guest time {} vs {}", x.name, x.guest_s, y.guest_s);
            assert!(close(x.guest_cpu_s, y.guest_cpu_s), "{}: donated {} vs {}", x.name, x.guest_cpu_s, y.guest_cpu_s);
            assert!(close(x.owner_cpu_s, y.owner_cpu_s), "{}: owner CPU {} vs {}", x.name, x.owner_cpu_s, y.owner_cpu_s);
        }
        assert_eq!(a.node_samples, b.node_samples);
        assert!(a.jobs.iter().filter(|j| j.end_s.is_some()).count() > 10, "the run must do something");
        assert!(a.machines.iter().map(|m| m.interruptions.values().sum::<u32>()).sum::<u32>() > 0, "and interrupt someone");
        // Owners type most seconds they are present, so about half the steps remain.
        assert!(b.policy_steps * 3 < a.policy_steps * 2, "sleeping took {} steps, every sample {}", b.policy_steps, a.policy_steps);
    }
}
