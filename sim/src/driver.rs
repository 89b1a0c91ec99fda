//! The virtual-time driver: lull-core's [`Policy`] on every traced machine and its
//! [`Scheduler`] for the pool, run unchanged; this file only moves time and carries
//! their decisions out, as the agent and the coordinator do live.
//!
//! * **Time** is seconds since the run's start (`f64`); the policy sees it as
//!   [`Now`] (monotonic ms, and UTC = local = `start_unix + t`, shifted by
//!   `utc_offset_s` for local days), the scheduler as [`Millis`].
//! * **Owners.** A machine with an [`OwnerTrace`] gets its own policy, stepped at each of
//!   its samples: input first (when the definition uses input), then the sample. A
//!   machine without a trace is *dedicated*: always available, no owner load (seed 002's
//!   simulator model).
//! * **The pool.** After every step that changes a machine's availability the scheduler
//!   gets a `MachineUpdated`; after every arrival, finish, eviction or availability change
//!   it runs a pass, and each assignment becomes a guest on its machines.
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
//! Stepping is per sample for now. `NEXT_DEADLINE` marks where the driver switches to
//! stepping each machine only at its next sample *change* or its policy's
//! `next_deadline()`, once the policy offers it.

use crate::error::Result;
use crate::trace::OwnerTrace;
use chrono::{DateTime, NaiveDate, Utc};
use lull_core::clock::{MonoMs, Now};
use lull_core::policy::config::PolicyConfig;
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
}

/// A machine of the simulated pool.
#[derive(Clone, Debug)]
pub struct SimMachine {
    /// Name (the owner's, for reports).
    pub name: String,
    /// Base speed `S_b`.
    pub base_speed: f64,
    /// The owner's activity; `None` = a dedicated machine.
    pub owner: Option<OwnerTrace>,
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
}

impl SimConfig {
    /// The given scheduler configuration, everything else default.
    pub fn new(sched: SchedConfig) -> SimConfig {
        SimConfig { sched, start_unix: None, utc_offset_s: 0, horizon_s: None }
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
    /// Next sample index to apply.
    next_sample: usize,
    guest: Option<JobId>,
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
    members: Vec<usize>,
    remaining: f64,
    started: f64,
}

/// Runs `jobs` on `machines` (see the module doc). `progress(done, total)` is called as
/// jobs end (total = number of jobs).
pub fn run(machines: &[SimMachine], jobs: &[SimJob], cfg: &SimConfig, progress: &mut dyn FnMut(u64, u64)) -> Result<Outcome> {
    let mut sched = Scheduler::new(cfg.sched.clone())?;
    let start_unix =
        cfg.start_unix.or_else(|| machines.iter().filter_map(|m| m.owner.as_ref().map(|t| t.start_unix)).min()).unwrap_or(1_767_225_600);
    let to_millis = |t: f64| Millis((start_unix as u64) * 1000 + (t * 1000.0).round().max(0.0) as u64);
    let now_of = |t: f64| {
        let ms = (t * 1000.0).round().max(0.0) as u64;
        let utc = DateTime::<Utc>::from_timestamp_millis(start_unix * 1000 + ms as i64).unwrap_or_default();
        Now { mono: MonoMs(ms + 1), utc, local: utc.naive_utc() + chrono::Duration::seconds(cfg.utc_offset_s) }
    };
    let mut order: Vec<usize> = (0..jobs.len()).collect();
    order.sort_by(|a, b| jobs[*a].submit_s.total_cmp(&jobs[*b].submit_s).then(a.cmp(b)));
    let job_ix: HashMap<u64, usize> = jobs.iter().enumerate().map(|(i, j)| (j.id, i)).collect();
    let mut outcomes: Vec<JobOutcome> = jobs
        .iter()
        .map(|j| JobOutcome { id: j.id, width: j.width, submit_s: j.submit_s, start_s: None, end_s: None, evictions: 0 })
        .collect();

    // Machines and their sample queue: (time in ms, machine).
    let mut ms: Vec<MState> = Vec::with_capacity(machines.len());
    let mut samples: BinaryHeap<Reverse<(u64, usize)>> = BinaryHeap::new();
    let mut trace_end = 0.0f64;
    for (i, m) in machines.iter().enumerate() {
        let mut st = MState {
            policy: None,
            next_sample: 0,
            guest: None,
            share: 0.0,
            owner_cpu: 0.0,
            available: m.owner.is_none(),
            left: 10,
            used_today: 0,
            idle_since: Millis::ZERO,
            last_input: None,
            out: MachineOutcome { name: m.name.clone(), ..Default::default() },
        };
        if let Some(tr) = &m.owner {
            let t0 = (tr.start_unix - start_unix) as f64;
            st.policy = Some(Policy::new(m.policy.clone(), now_of(t0.max(0.0)), Saved::default(), 0, "sim"));
            st.left = m.policy.budget.interruptions_per_day;
            st.out.traced_s = tr.samples.len() as f64 * tr.step_s as f64;
            trace_end = trace_end.max((tr.end_unix() - start_unix) as f64);
            if !tr.samples.is_empty() {
                samples.push(Reverse((((tr.start_unix - start_unix).max(0) as u64) * 1000, i)));
            }
        }
        sched.handle(to_millis(0.0), Event::MachineUpdated(machine_of(i, m, &st)))?;
        ms.push(st);
    }
    let horizon = cfg.horizon_s.unwrap_or(f64::INFINITY);

    let mut runs: HashMap<JobId, Run> = HashMap::new();
    // Work left of evicted checkpointable jobs.
    let mut kept: HashMap<JobId, f64> = HashMap::new();
    let mut next_job = 0usize;
    let mut t = 0.0f64;
    let mut done = 0u64;
    let total = jobs.len() as u64;
    let mut passes = 0u64;
    let mut steps = 0u64;
    let mut dirty = true;

    let rate = |run: &Run, ms: &[MState]| -> f64 {
        let slowest = run.members.iter().map(|&i| machines[i].base_speed * ms[i].share).fold(f64::INFINITY, f64::min);
        run.members.len() as f64 * slowest
    };

    loop {
        // Pass when something changed.
        if dirty {
            dirty = false;
            passes += 1;
            for a in sched.pass(to_millis(t)) {
                let ix = job_ix[&a.job.0];
                let members: Vec<usize> = a.machines.iter().map(|m| m.0 as usize).collect();
                for &mi in &members {
                    let st = &mut ms[mi];
                    st.guest = Some(a.job);
                    if let Some(p) = st.policy.as_mut() {
                        steps += 1;
                        let acts = p.handle(now_of(t), PEvent::GuestsPresent(true));
                        apply_actions(st, &acts, now_of(t));
                    }
                    st.share = share_of(st);
                }
                outcomes[ix].start_s.get_or_insert(t);
                let remaining = kept.remove(&a.job).unwrap_or(jobs[ix].normtime_s);
                runs.insert(a.job, Run { members, remaining, started: t });
            }
        }
        // The next event.
        let t_arr = order.get(next_job).map_or(f64::INFINITY, |&i| jobs[i].submit_s.max(t));
        let t_done = runs
            .values()
            .map(|r| (r, rate(r, &ms)))
            .filter(|(_, v)| *v > 0.0)
            .map(|(r, v)| t + r.remaining / v)
            .fold(f64::INFINITY, f64::min);
        let t_samp = samples.peek().map_or(f64::INFINITY, |Reverse((at, _))| *at as f64 / 1000.0);
        let mut t_next = t_arr.min(t_done).min(t_samp);
        let work_left = next_job < order.len() || !runs.is_empty() || sched.queue_len() > 0;
        if !work_left && cfg.horizon_s.is_none() {
            break;
        }
        if !t_next.is_finite() || t_next > horizon {
            t_next = horizon.min(if t_next.is_finite() { t_next } else { t.max(trace_end) });
            advance(&mut runs, &ms, machines, t_next - t, &rate);
            account(&mut ms, t_next - t);
            t = t_next;
            break;
        }
        advance(&mut runs, &ms, machines, t_next - t, &rate);
        account(&mut ms, t_next - t);
        t = t_next;
        let now = to_millis(t);

        // Completions.
        // Done when nothing is left, or what is left would not move the clock.
        let finished: Vec<JobId> = runs
            .iter()
            .filter(|(_, r)| {
                let v = rate(r, &ms);
                r.remaining <= EPS || (v > 0.0 && t + r.remaining / v <= t)
            })
            .map(|(id, _)| *id)
            .collect();
        for id in finished {
            let r = runs.remove(&id).expect("running");
            let wall = t - r.started;
            for &mi in &r.members {
                let cpu = wall * ms[mi].share.max(0.0);
                sched.handle(now, Event::JobFinished { job: id, machine: MachineId(mi as u64), cpu_seconds: cpu, wall_seconds: wall })?;
                release(&mut ms[mi], now_of(t), &mut steps);
            }
            outcomes[job_ix[&id.0]].end_s = Some(t);
            done += 1;
            progress(done, total);
            dirty = true;
        }
        // Arrivals.
        while let Some(&i) = order.get(next_job) {
            if jobs[i].submit_s > t + EPS {
                break;
            }
            let j = &jobs[i];
            let mut spec = JobSpec::sequential(j.id, j.program.clone(), to_millis(j.submit_s)).with_width(j.width);
            spec.user_estimate_s = j.estimate_s;
            sched.handle(now, Event::JobSubmitted(spec))?;
            next_job += 1;
            dirty = true;
        }
        // Owner samples due now.
        // NEXT_DEADLINE: step a machine at min(next sample change, policy.next_deadline())
        // instead of at every sample once the policy offers next_deadline().
        while let Some(&Reverse((at, mi))) = samples.peek() {
            if at as f64 / 1000.0 > t + EPS {
                break;
            }
            samples.pop();
            let m = &machines[mi];
            let tr = m.owner.as_ref().expect("traced");
            let st = &mut ms[mi];
            let s = tr.samples[st.next_sample];
            let unix = tr.start_unix + (st.next_sample as i64) * tr.step_s as i64;
            let nw = now_of(t);
            if s.input {
                if st.guest.is_some() && st.last_input.is_none_or(|l| unix - l >= RETURN_AFTER_S) {
                    *st.out.owner_delays.entry(nw.local_date()).or_default() += 1;
                }
                st.last_input = Some(unix);
            }
            let p = st.policy.as_mut().expect("traced machines have a policy");
            let mut acts = Vec::new();
            if s.input && m.sees_input {
                acts.extend(p.handle(nw, PEvent::Input(InputEvent { at: nw.mono, signal: InputSignal::Activity })));
                steps += 1;
            }
            let sample = Sample {
                at: nw.mono,
                owner_cpu: s.owner_cpu,
                owner_mem_bytes: s.owner_mem_bytes,
                mem_total_bytes: tr.mem_total_bytes,
                mem_available_bytes: tr.mem_total_bytes.saturating_sub(s.owner_mem_bytes),
                swap_total_bytes: 0,
                swap_free_bytes: 0,
                guest_cpu: 0.0,
                guest_mem_bytes: 0,
                on_battery: None,
                cpu_temp_c: None,
                exclusive_program: None,
            };
            acts.extend(p.handle(nw, PEvent::Sample(sample)));
            steps += 1;
            st.owner_cpu = s.owner_cpu as f64;
            apply_actions(st, &acts, nw);
            st.next_sample += 1;
            let ended = st.next_sample >= tr.samples.len();
            if !ended {
                samples.push(Reverse((at + tr.step_s as u64 * 1000, mi)));
            }
            // The pool's view of the machine.
            let p = st.policy.as_ref().expect("policy");
            let available =
                !ended && matches!(p.state(), StateKind::Recruitable | StateKind::Donating) && p.directive() == GuestDirective::Accept;
            let left = m.policy.budget.interruptions_per_day.saturating_sub(st.used_today);
            if available && !st.available {
                st.idle_since = now;
            }
            if available != st.available || left != st.left {
                st.available = available;
                st.left = left;
                sched.handle(now, Event::MachineUpdated(machine_of(mi, m, st)))?;
                dirty = true;
            }
            // Guest directives.
            let evict = ended || p.directive() == GuestDirective::Evict;
            st.share = share_of(st);
            if let (true, Some(job)) = (evict, st.guest) {
                let r = runs.get(&job).expect("a guest's job runs");
                let cpu = (t - r.started) * machines[mi].base_speed;
                let stops = sched.handle(now, Event::TaskEvicted { job, machine: MachineId(mi as u64), cpu_seconds: cpu.max(0.0) })?;
                outcomes[job_ix[&job.0]].evictions += 1;
                let r = runs.remove(&job).expect("running");
                if jobs[job_ix[&job.0]].checkpointable {
                    kept.insert(job, r.remaining.max(0.0));
                }
                for &o in &r.members {
                    release(&mut ms[o], nw, &mut steps);
                }
                let _ = stops; // every member is released above; the scheduler has requeued the job
                dirty = true;
            }
        }
        if t >= horizon {
            break;
        }
    }
    let machines_out = ms.into_iter().map(|s| s.out).collect();
    Ok(Outcome { jobs: outcomes, machines: machines_out, end_s: t, passes, policy_steps: steps })
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
fn release(st: &mut MState, now: Now, steps: &mut u64) {
    st.guest = None;
    st.share = 0.0;
    if let Some(p) = st.policy.as_mut() {
        *steps += 1;
        let acts = p.handle(now, PEvent::GuestsPresent(false));
        apply_actions(st, &acts, now);
    }
}

fn advance(runs: &mut HashMap<JobId, Run>, ms: &[MState], machines: &[SimMachine], dt: f64, rate: &dyn Fn(&Run, &[MState]) -> f64) {
    let _ = machines;
    if dt <= 0.0 {
        return;
    }
    for r in runs.values_mut() {
        r.remaining -= rate(r, ms) * dt;
    }
}

fn account(ms: &mut [MState], dt: f64) {
    if dt <= 0.0 {
        return;
    }
    for st in ms.iter_mut().filter(|s| s.guest.is_some()) {
        st.out.guest_s += dt;
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

    fn trace(pattern: &[(u32, bool)]) -> OwnerTrace {
        // (seconds, owner present) runs at 1-s samples.
        let mut samples = Vec::new();
        for &(n, present) in pattern {
            for _ in 0..n {
                samples.push(OwnerSample { owner_cpu: if present { 0.5 } else { 0.0 }, owner_mem_bytes: 1 << 30, input: present });
            }
        }
        OwnerTrace { machine: "ws".into(), start_unix: 1_767_254_400, step_s: 1, mem_total_bytes: 16 << 30, samples }
    }

    #[test]
    fn the_policy_recruits_after_the_threshold_and_an_owner_return_evicts_and_counts() {
        let mut m = SimMachine::dedicated("ws", 1.0);
        m.owner = Some(trace(&[(10, true), (400, false), (30, true), (2000, false)]));
        m.policy.eviction.mode = lull_core::policy::config::EvictionMode::ImmediateEviction;
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
        m.policy.eviction.mode = lull_core::policy::config::EvictionMode::ImmediateEviction;
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
}
