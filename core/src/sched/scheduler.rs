//! The scheduler's state and its event handling: queued jobs, machines, running jobs.
//!
//! [`Scheduler::handle`] applies one [`Event`] at `now`; [`Scheduler::pass`] (in
//! `pass.rs`) decides which jobs start. Both are deterministic functions of the
//! configuration and the sequence of `(now, event)` and `pass(now)` calls.
//!
//! Bookkeeping kept here, beside what the driver reports:
//! * the queue, ordered by (`submitted_at`, arrival order at the scheduler); a job that
//!   fails or is evicted goes back at its original position;
//! * per machine, the guests the scheduler placed there and the memory they were placed
//!   with (`Machine::free_memory` is understood to exclude guests, so a machine's free
//!   memory for a new member is `free_memory − needs of its guests`); with a live memory
//!   report (seed 001), also no more than what keeps its oversize below MT, the demand
//!   being each guest's measured working set (its placed need until measured);
//! * the eligible machines with a free slot, in placement order (`free.rs`);
//! * the running jobs, by predicted end (`BTreeSet<(Millis, JobId)>`);
//! * each queued job's current prediction, refreshed when its program's history changes
//!   (program identifiers are interned on first sight and kept for the scheduler's life).

use super::assignment::{Reason, Reservation};
use super::config::{Algorithm, SchedConfig};
use super::error::SchedError;
use super::event::{Event, Stop, StopWhy};
use super::free::FreeMachines;
use super::hash::{IdMap, IdSet};
use super::ids::{JobId, MachineId};
use super::job::{Job, JobSpec, Member, RunningJob};
use super::machine::Machine;
use super::memory::{self, HostLoad, Migration, Thresholds};
use super::placement::{check_eligible, rank_key_with_guests, Ineligible, RankKey};
use super::predict::{runtime_from_speed, Prediction, Predictor, ProgramStats};
use super::queue::{Queue, QueueKey, Queued};
use super::rng::SplitMix64;
use super::time::Millis;
use std::collections::{BTreeMap, BTreeSet};

#[derive(Clone, Debug)]
pub(super) struct MachineEntry {
    pub(super) m: Machine,
    /// One entry per task (a job has at most one member per machine).
    pub(super) guests: Guests,
    /// Σ memory the guests were placed with, bytes.
    pub(super) memory_in_use: u64,
    pub(super) last_seen: Millis,
    /// The key under which the machine sits in the index, if it does.
    pub(super) key: Option<RankKey>,
}

impl MachineEntry {
    pub(super) fn free_memory(&self) -> u64 {
        self.m.free_memory.saturating_sub(self.memory_in_use)
    }
}

/// Seed 001's demand on a machine: each guest's measured working set when its memory
/// report has it, else the memory it was placed with.
pub(super) fn demand_of(e: &MachineEntry, jobs: &IdMap<JobId, JobEntry>) -> u64 {
    let report = e.m.memory.as_ref();
    e.guests
        .as_slice()
        .iter()
        .map(|&j| {
            report
                .and_then(|r| r.job(j))
                .map(|l| l.working_set)
                .or_else(|| jobs.get(&j).and_then(|x| x.job.running.as_ref()).map(|r| r.memory_per_member))
                .unwrap_or(0)
        })
        .fold(0u64, u64::saturating_add)
}

/// The machine's placement key with its guests, or `None` when it takes no new member:
/// its contract does not allow guests, every slot (CT) is taken, or — with a memory
/// report — its oversize is at or over MT. With a report, the key's `strict_free` is the
/// least of what is free and what a job may add while the oversize stays below MT, and
/// its `free_memory` the same but on an empty machine, which takes any job that fits its
/// memory M at all (seed 001's `FM(k) > WS(d)`; else a job whose working set is near
/// every machine's M could never run again).
pub(super) fn entry_key(e: &MachineEntry, jobs: &IdMap<JobId, JobEntry>, mt: f64) -> Option<RankKey> {
    if !(e.m.contract_allows_guests() && (e.guests.len() as u64) < u64::from(e.m.slots)) {
        return None;
    }
    let mut key = rank_key_with_guests(&e.m, e.guests.len() as u32, e.memory_in_use);
    if let Some(r) = &e.m.memory {
        let room = memory::room_under(mt, r.guest_memory, demand_of(e, jobs))?;
        let first = if e.guests.len() == 0 { room.max(r.guest_memory) } else { room };
        key.strict_free = key.free_memory.min(room);
        key.free_memory = key.free_memory.min(first);
    }
    Some(key)
}

/// The jobs with a member on one machine: up to two inline (the common case, so placing
/// a guest touches no other memory), more on the heap.
#[derive(Clone, Debug)]
pub(super) enum Guests {
    Inline(u8, [JobId; 2]),
    Heap(Vec<JobId>),
}

impl Default for Guests {
    fn default() -> Self {
        Guests::Inline(0, [JobId(0); 2])
    }
}

impl Guests {
    pub(super) fn len(&self) -> usize {
        self.as_slice().len()
    }

    pub(super) fn as_slice(&self) -> &[JobId] {
        match self {
            Guests::Inline(n, a) => &a[..usize::from(*n)],
            Guests::Heap(v) => v,
        }
    }

    pub(super) fn push(&mut self, job: JobId) {
        match self {
            Guests::Inline(n, a) if usize::from(*n) < a.len() => {
                a[usize::from(*n)] = job;
                *n += 1;
            }
            Guests::Inline(_, a) => {
                let mut v = a.to_vec();
                v.push(job);
                *self = Guests::Heap(v);
            }
            Guests::Heap(v) => v.push(job),
        }
    }

    /// Removes one entry of `job`; false if there was none.
    pub(super) fn remove(&mut self, job: JobId) -> bool {
        match self {
            Guests::Inline(n, a) => match a[..usize::from(*n)].iter().position(|&g| g == job) {
                Some(p) => {
                    a[p] = a[usize::from(*n) - 1];
                    *n -= 1;
                    true
                }
                None => false,
            },
            Guests::Heap(v) => match v.iter().position(|&g| g == job) {
                Some(p) => {
                    v.swap_remove(p);
                    true
                }
                None => false,
            },
        }
    }
}

#[derive(Clone, Debug)]
pub(super) struct JobEntry {
    pub(super) job: Job,
    pub(super) key: QueueKey,
    /// Interned program identifier (index into `Scheduler::queued_of`).
    pub(super) program: u32,
    /// The current prediction while queued (refreshed when the program's history or the
    /// job's checkpoint credit changes); the one it was placed with while running.
    pub(super) prediction: Prediction,
}

/// Total order on `f64` (by `total_cmp`) for sort keys.
#[derive(Clone, Copy, Debug)]
pub(super) struct SortF64(pub(super) f64);

impl PartialEq for SortF64 {
    fn eq(&self, other: &Self) -> bool {
        self.0.total_cmp(&other.0).is_eq()
    }
}
impl Eq for SortF64 {}
impl PartialOrd for SortF64 {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for SortF64 {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0)
    }
}

/// SPT / LPT order: (normtime, or its negation for LPT; queue position; id).
pub(super) type TimeKey = (SortF64, QueueKey, JobId);

fn time_key(lpt: bool, q: &Queued) -> TimeKey {
    let n = q.prediction.normtime_s;
    (SortF64(if lpt { -n } else { n }), q.key, q.id)
}

/// The scheduler of one pool. See the [module docs](super) for the model.
#[derive(Clone, Debug)]
pub struct Scheduler {
    pub(super) config: SchedConfig,
    pub(super) predictor: Predictor,
    pub(super) rng: SplitMix64,
    pub(super) machines: IdMap<MachineId, MachineEntry>,
    /// Machines whose contract allows guests and that have a free slot (`free.rs`).
    pub(super) free: FreeMachines,
    pub(super) jobs: IdMap<JobId, JobEntry>,
    pub(super) queue: Queue,
    /// Running jobs by predicted end.
    pub(super) ends: BTreeSet<(Millis, JobId)>,
    pub(super) next_seq: u64,
    pub(super) reservation: Option<Reservation>,
    /// Program identifier → interned index.
    pub(super) program_ix: IdMap<String, u32>,
    /// Per interned program, its queued jobs (to refresh their predictions). Pruned
    /// lazily: a job placed since stays listed until the next refresh of its program.
    pub(super) queued_of: Vec<IdSet<JobId>>,
    /// Queued jobs by predicted normtime; kept only for SPT and LPT.
    pub(super) by_time: Option<BTreeMap<TimeKey, Queued>>,
    /// During a pass: queue positions of the jobs started, removed at its end.
    pub(super) pass_placed: Vec<QueueKey>,
    /// During a pass: the jobs started, not yet written to `jobs`, `machines` and `ends`
    /// (see `Scheduler::flush_placements`).
    pub(super) pass_runs: Vec<(JobId, Box<RunningJob>)>,
    /// During a pass: (machine, job, memory) of each member started, not yet written.
    pub(super) pass_members: Vec<(MachineId, JobId, u64)>,
    /// Running gangs with lost members to replace, oldest submission first (pruned
    /// lazily: an entry whose job no longer runs with vacancies is skipped and dropped).
    pub(super) vacant: BTreeSet<(QueueKey, JobId)>,
}

impl Scheduler {
    /// An empty scheduler, after checking `config`.
    pub fn new(config: SchedConfig) -> Result<Scheduler, SchedError> {
        config.validate()?;
        Ok(Scheduler {
            predictor: Predictor::new(config.predict.clone()),
            rng: SplitMix64::new(config.random_seed),
            config: config.clone(),
            machines: IdMap::default(),
            free: FreeMachines::default(),
            jobs: IdMap::default(),
            queue: Queue::default(),
            ends: BTreeSet::new(),
            next_seq: 0,
            reservation: None,
            program_ix: IdMap::default(),
            queued_of: Vec::new(),
            by_time: matches!(config.algorithm, Algorithm::Spt | Algorithm::Lpt).then(BTreeMap::new),
            pass_placed: Vec::new(),
            pass_runs: Vec::new(),
            pass_members: Vec::new(),
            vacant: BTreeSet::new(),
        })
    }

    /// Applies one event at `now`. Returns the tasks the driver must stop because of it
    /// (other members of a requeued gang, members of a cancelled job); usually empty. On
    /// error nothing changed.
    pub fn handle(&mut self, now: Millis, event: Event) -> Result<Vec<Stop>, SchedError> {
        match event {
            Event::JobSubmitted(spec) => self.submit(spec).map(|()| Vec::new()),
            Event::JobFinished { job, machine, cpu_seconds, wall_seconds } => {
                self.finish(job, machine, cpu_seconds, wall_seconds).map(|()| Vec::new())
            }
            Event::JobFailed { job, machine } => {
                self.check_member(job, machine)?;
                self.jobs.get_mut(&job).expect("checked").job.failures += 1;
                Ok(self.requeue(job, Some(machine)))
            }
            Event::TaskEvicted { job, machine, cpu_seconds } => {
                if !(cpu_seconds.is_finite() && cpu_seconds >= 0.0) {
                    return Err(SchedError::InvalidReport { job, why: "cpu_seconds must be a non-negative number" });
                }
                self.check_member(job, machine)?;
                let s_b = self.machines.get(&machine).map_or(0.0, |e| e.m.base_speed);
                let j = &mut self.jobs.get_mut(&job).expect("checked").job;
                j.evictions += 1;
                if j.spec.checkpointable && j.spec.width == 1 {
                    j.credited_normtime_s += s_b * cpu_seconds;
                }
                Ok(self.requeue(job, Some(machine)))
            }
            Event::MemberLost { job, machine, cpu_seconds } => {
                if !(cpu_seconds.is_finite() && cpu_seconds >= 0.0) {
                    return Err(SchedError::InvalidReport { job, why: "cpu_seconds must be a non-negative number" });
                }
                self.check_member(job, machine)?;
                Ok(self.lose_member(now, job, machine, cpu_seconds))
            }
            Event::JobCancelled { job } => self.cancel(job),
            Event::HaltedGangFound { spec, members, vacancies, started_at, halted_since } => {
                self.adopt_halted_gang(spec, members, vacancies, started_at, halted_since).map(|()| Vec::new())
            }
            Event::JobMigrated { job, from, to, working_set } => {
                self.check_member(job, from)?;
                let j = &mut self.jobs.get_mut(&job).expect("checked").job;
                if j.spec.width != 1 {
                    return Err(SchedError::InvalidReport { job, why: "only a sequential job is moved by a memory migration" });
                }
                j.migrations += 1;
                j.prefer = Some(to);
                j.avoid = Some(from);
                if working_set > 0 {
                    j.last_working_set = Some(working_set);
                }
                Ok(self.requeue(job, Some(from)))
            }
            Event::MachineUpdated(m) => self.update_machine(now, m).map(|()| Vec::new()),
            Event::MachineLost { machine } => self.lose_machine(now, machine),
            Event::Heartbeat { machine } => {
                let e = self.machines.get_mut(&machine).ok_or(SchedError::UnknownMachine(machine))?;
                e.last_seen = e.last_seen.max(now);
                Ok(Vec::new())
            }
        }
    }

    fn submit(&mut self, spec: JobSpec) -> Result<(), SchedError> {
        let id = spec.id;
        if self.jobs.contains_key(&id) {
            return Err(SchedError::DuplicateJob(id));
        }
        if spec.width == 0 {
            return Err(SchedError::InvalidJob { job: id, why: "width must be at least 1" });
        }
        if spec.user_estimate_s.is_some_and(|e| !(e.is_finite() && e >= 0.0)) {
            return Err(SchedError::InvalidJob { job: id, why: "the estimate must be a non-negative number of seconds" });
        }
        let key = (spec.submitted_at, self.next_seq);
        self.next_seq += 1;
        let program = match self.program_ix.get(&spec.program) {
            Some(&ix) => ix,
            None => {
                let ix = self.queued_of.len() as u32;
                self.program_ix.insert(spec.program.clone(), ix);
                self.queued_of.push(IdSet::default());
                ix
            }
        };
        let prediction = self.predictor.predict(&spec.program, spec.width, spec.user_estimate_s, 0.0);
        self.jobs.insert(id, JobEntry { job: Job::new(spec), key, program, prediction });
        self.enqueue(id);
        Ok(())
    }

    /// Takes in a gang found halted at a rebuild (see [`Event::HaltedGangFound`]): held
    /// as running on `members`, with `vacancies` for the next pass to fill.
    fn adopt_halted_gang(
        &mut self,
        spec: JobSpec,
        members: Vec<MachineId>,
        vacancies: u32,
        started_at: Millis,
        halted_since: Millis,
    ) -> Result<(), SchedError> {
        let id = spec.id;
        let width = spec.width;
        if members.is_empty() || vacancies == 0 || members.len() as u64 + u64::from(vacancies) != u64::from(width) {
            return Err(SchedError::InvalidJob { job: id, why: "a halted gang needs members and vacancies adding up to its width" });
        }
        let mut seen = IdSet::default();
        for &m in &members {
            if !self.machines.contains_key(&m) {
                return Err(SchedError::UnknownMachine(m));
            }
            if !seen.insert(m) {
                return Err(SchedError::InvalidJob { job: id, why: "a gang has at most one member per machine" });
            }
        }
        self.submit(spec)?;
        self.dequeue(id);
        let entry = self.jobs.get_mut(&id).expect("submitted just above");
        let mem = entry.job.memory_need();
        let prediction = entry.prediction;
        let slowest = members.iter().map(|m| self.machines[m].m.base_speed).fold(f64::INFINITY, f64::min);
        let runtime_s = runtime_from_speed(prediction.normtime_s, width as usize, slowest);
        let runtime_s = if runtime_s.is_finite() { runtime_s } else { 0.0 };
        let predicted_end = started_at.plus_secs_ceil(runtime_s);
        entry.job.running = Some(Box::new(RunningJob {
            members: members.iter().map(|&machine| Member { machine, finished: false }).collect(),
            started_at,
            prediction,
            predicted_runtime_s: runtime_s,
            predicted_end,
            initial_runtime_s: runtime_s,
            corrections: 0,
            algorithm: self.config.algorithm,
            reason: Reason::FoundAtRebuild,
            normtime_so_far_s: 0.0,
            wall_s: 0.0,
            vacancies,
            halted_since: Some(halted_since),
            memory_per_member: mem,
        }));
        let key = entry.key;
        self.ends.insert((predicted_end, id));
        self.vacant.insert((key, id));
        for m in members {
            let e = self.machines.get_mut(&m).expect("checked above");
            e.guests.push(id);
            e.memory_in_use = e.memory_in_use.saturating_add(mem);
            self.reindex(m);
        }
        Ok(())
    }

    /// Puts a held job in the queue (at its original position), with a fresh prediction.
    fn enqueue(&mut self, id: JobId) {
        let e = self.jobs.get_mut(&id).expect("a held job");
        let s = &e.job.spec;
        e.prediction = self.predictor.predict(&s.program, s.width, s.user_estimate_s, e.job.credited_normtime_s);
        let q = Queued {
            id,
            key: e.key,
            width: s.width,
            mem: e.job.memory_need(),
            prefer: e.job.prefer,
            avoid: e.job.avoid,
            prediction: e.prediction,
        };
        self.queue.insert(e.key, q);
        self.queued_of[e.program as usize].insert(id);
        let lpt = self.config.algorithm == Algorithm::Lpt;
        if let Some(order) = &mut self.by_time {
            order.insert(time_key(lpt, &q), q);
        }
    }

    /// Takes a queued job out of the queue and the SPT/LPT order.
    pub(super) fn dequeue(&mut self, id: JobId) {
        let key = self.jobs[&id].key;
        if let Some(q) = self.queue.get(&key) {
            self.queue.remove(&key);
            self.unorder(&q);
        }
    }

    /// During a pass: leaves the job's queue entry for `end_pass` to remove (in bulk when
    /// many jobs started). (SPT/LPT remove the started prefix of their order themselves.)
    pub(super) fn dequeue_in_pass(&mut self, q: &Queued) {
        self.pass_placed.push(q.key);
    }

    /// Takes a job out of the SPT/LPT order.
    fn unorder(&mut self, q: &Queued) {
        let lpt = self.config.algorithm == Algorithm::Lpt;
        if let Some(order) = &mut self.by_time {
            order.remove(&time_key(lpt, q));
        }
    }

    /// Re-predicts the queued jobs of `program` after its history changed, and forgets
    /// the ones no longer queued.
    fn refresh_program(&mut self, program: &str) {
        let Some(&ix) = self.program_ix.get(program) else { return };
        let lpt = self.config.algorithm == Algorithm::Lpt;
        let ids: Vec<JobId> = self.queued_of[ix as usize].iter().copied().collect();
        for id in ids {
            let queued = self.jobs.get(&id).is_some_and(|e| e.program == ix && e.job.running.is_none());
            if !queued {
                self.queued_of[ix as usize].remove(&id);
                continue;
            }
            let e = self.jobs.get_mut(&id).expect("a queued job");
            let s = &e.job.spec;
            e.prediction = self.predictor.predict(&s.program, s.width, s.user_estimate_s, e.job.credited_normtime_s);
            let Some(q) = self.queue.get_mut(&e.key) else { continue };
            let old = *q;
            q.prediction = e.prediction;
            let new = *q;
            if let Some(order) = &mut self.by_time {
                order.remove(&time_key(lpt, &old));
                order.insert(time_key(lpt, &new), new);
            }
        }
    }

    /// The job runs and has an unfinished member on `machine`.
    fn check_member(&self, job: JobId, machine: MachineId) -> Result<(), SchedError> {
        let entry = self.jobs.get(&job).ok_or(SchedError::UnknownJob(job))?;
        let run = entry.job.running.as_ref().ok_or(SchedError::NotRunning(job))?;
        if run.members.iter().any(|m| m.machine == machine && !m.finished) {
            Ok(())
        } else {
            Err(SchedError::NotRunningOn { job, machine })
        }
    }

    fn finish(&mut self, job: JobId, machine: MachineId, cpu: f64, wall: f64) -> Result<(), SchedError> {
        if !(cpu.is_finite() && cpu >= 0.0 && wall.is_finite() && wall >= 0.0) {
            return Err(SchedError::InvalidReport { job, why: "cpu_seconds and wall_seconds must be non-negative numbers" });
        }
        self.check_member(job, machine)?;
        let s_b = self.machines.get(&machine).map_or(0.0, |e| e.m.base_speed);
        let entry = self.jobs.get_mut(&job).expect("checked");
        let run = entry.job.running.as_mut().expect("checked");
        let mem = run.memory_per_member;
        if let Some(member) = run.members.iter_mut().find(|m| m.machine == machine && !m.finished) {
            member.finished = true;
        }
        run.normtime_so_far_s += s_b * cpu;
        run.wall_s = run.wall_s.max(wall);
        // A gang waiting for a replacement is not done when its remaining members are.
        let done = run.members.iter().all(|m| m.finished) && run.vacancies == 0;
        self.release(machine, job, mem);
        if done {
            let entry = self.jobs.remove(&job).expect("checked");
            let run = *entry.job.running.expect("checked");
            self.ends.remove(&(run.predicted_end, job));
            let actual = entry.job.credited_normtime_s + run.normtime_so_far_s;
            self.predictor.record(&entry.job.spec.program, actual, &run.prediction, run.initial_runtime_s, run.wall_s);
            self.refresh_program(&entry.job.spec.program);
        }
        Ok(())
    }

    /// Frees one task's slot and declared memory on `machine`.
    pub(super) fn release(&mut self, machine: MachineId, job: JobId, mem: u64) {
        if let Some(e) = self.machines.get_mut(&machine) {
            if e.guests.remove(job) {
                e.memory_in_use = e.memory_in_use.saturating_sub(mem);
            }
            self.reindex(machine);
        }
    }

    /// Puts a running job back in the queue at its original position, freeing its
    /// machines; returns stops for its unfinished members other than `reporter`.
    fn requeue(&mut self, job: JobId, reporter: Option<MachineId>) -> Vec<Stop> {
        let Some(entry) = self.jobs.get_mut(&job) else { return Vec::new() };
        let Some(run) = entry.job.running.take() else { return Vec::new() };
        let mem = run.memory_per_member;
        self.ends.remove(&(run.predicted_end, job));
        self.enqueue(job);
        let mut stops = Vec::new();
        for m in run.unfinished_machines() {
            self.release(m, job, mem);
            if Some(m) != reporter {
                stops.push(Stop { job, machine: m, why: StopWhy::GangRequeued });
            }
        }
        stops
    }

    /// One member of a running job was lost. A gang with another member still running
    /// keeps its place: the member's machine is freed, the job gets a vacancy (filled by
    /// the next pass that finds a machine, see `pass.rs`) and is halted from `now` (if
    /// not already). Otherwise the job goes back to the queue as on an eviction (with a
    /// sequential checkpointable job's credit). Counts as an eviction either way.
    fn lose_member(&mut self, now: Millis, job: JobId, machine: MachineId, cpu_seconds: f64) -> Vec<Stop> {
        let s_b = self.machines.get(&machine).map_or(0.0, |e| e.m.base_speed);
        let Some(entry) = self.jobs.get_mut(&job) else { return Vec::new() };
        entry.job.evictions += 1;
        let key = entry.key;
        let mem = entry.job.spec.memory_needed();
        let gang = entry.job.spec.width > 1;
        let Some(run) = entry.job.running.as_mut() else { return Vec::new() };
        let others = run.members.iter().filter(|m| !m.finished && m.machine != machine).count();
        if !gang || others == 0 {
            if entry.job.spec.checkpointable && !gang {
                entry.job.credited_normtime_s += s_b * cpu_seconds;
            }
            return self.requeue(job, Some(machine));
        }
        if let Some(p) = run.members.iter().position(|m| m.machine == machine && !m.finished) {
            run.members.remove(p);
        }
        run.vacancies += 1;
        run.halted_since.get_or_insert(now);
        self.vacant.insert((key, job));
        self.release(machine, job, mem);
        Vec::new()
    }

    fn cancel(&mut self, job: JobId) -> Result<Vec<Stop>, SchedError> {
        let running = self.jobs.get(&job).ok_or(SchedError::UnknownJob(job))?.job.running.is_some();
        if !running {
            self.dequeue(job);
        }
        let entry = self.jobs.remove(&job).expect("checked");
        let mut stops = Vec::new();
        match entry.job.running {
            None => {}
            Some(run) => {
                self.ends.remove(&(run.predicted_end, job));
                let mem = run.memory_per_member;
                for m in run.unfinished_machines() {
                    self.release(m, job, mem);
                    stops.push(Stop { job, machine: m, why: StopWhy::Cancelled });
                }
            }
        }
        Ok(stops)
    }

    fn update_machine(&mut self, now: Millis, m: Machine) -> Result<(), SchedError> {
        if !(m.base_speed.is_finite() && m.base_speed > 0.0) {
            return Err(SchedError::InvalidMachine { machine: m.id, why: "base_speed must be a positive number" });
        }
        let id = m.id;
        if let Some(r) = &m.memory {
            // Seed 001: demand is learnt live; a job placed again needs what it held.
            for load in &r.guests {
                let Some(e) = self.jobs.get_mut(&load.job) else { continue };
                let here = e.job.running.as_ref().is_some_and(|run| run.unfinished_machines().any(|x| x == id));
                if here && load.working_set > 0 {
                    e.job.last_working_set = Some(load.working_set);
                }
            }
        }
        match self.machines.get_mut(&id) {
            Some(e) => {
                e.m = m;
                e.last_seen = e.last_seen.max(now);
            }
            None => {
                let e = MachineEntry { m, guests: Guests::default(), memory_in_use: 0, last_seen: now, key: None };
                self.machines.insert(id, e);
            }
        }
        self.reindex(id);
        Ok(())
    }

    fn lose_machine(&mut self, now: Millis, machine: MachineId) -> Result<Vec<Stop>, SchedError> {
        let guests = self.machines.get(&machine).ok_or(SchedError::UnknownMachine(machine))?.guests.as_slice().to_vec();
        let mut stops = Vec::new();
        for job in guests {
            // A gang member leaves a vacancy (the others halt until it is replaced); a
            // sequential job goes back to the queue.
            stops.extend(self.lose_member(now, job, machine, 0.0));
        }
        if let Some(e) = self.machines.remove(&machine) {
            if let Some(k) = e.key {
                self.free.remove(&k);
            }
        }
        Ok(stops)
    }

    /// Puts the machine in the index, or takes it out, or moves it, as its state says.
    pub(super) fn reindex(&mut self, id: MachineId) {
        let Some(e) = self.machines.get_mut(&id) else { return };
        let new_key = entry_key(e, &self.jobs, self.config.memory_threshold);
        let same = match (&e.key, &new_key) {
            (Some(a), Some(b)) => a.identical(b),
            (None, None) => true,
            _ => false,
        };
        if !same {
            if let Some(k) = e.key {
                self.free.remove(&k);
            }
            if let Some(k) = new_key {
                self.free.insert(k);
            }
            e.key = new_key;
        }
    }

    // ----- read-only views -----

    /// The configuration.
    pub fn config(&self) -> &SchedConfig {
        &self.config
    }

    /// The runtime predictor (per-program history).
    pub fn predictor(&self) -> &Predictor {
        &self.predictor
    }

    /// Takes back a program's runtime history from its kept record (see
    /// [`Predictor::restore`]): the coordinator does this when it rebuilds the scheduler.
    pub fn restore_program_stats(&mut self, stats: &ProgramStats) {
        self.predictor.restore(stats);
    }

    /// Every program's prediction record (for the API), by program identifier.
    pub fn prediction_stats(&self) -> Vec<ProgramStats> {
        self.predictor.stats()
    }

    /// A job held by the scheduler (queued or running).
    pub fn job(&self, id: JobId) -> Option<&Job> {
        self.jobs.get(&id).map(|e| &e.job)
    }

    /// The queued jobs, in queue order (head first).
    pub fn queued(&self) -> impl Iterator<Item = &Job> + '_ {
        self.queue.iter().map(move |q| &self.jobs[&q.id].job)
    }

    /// The running gangs halted for lost members, with their vacancies, oldest
    /// submission first.
    pub fn halted(&self) -> impl Iterator<Item = (JobId, u32)> + '_ {
        self.vacant.iter().filter_map(move |(_, id)| {
            let run = self.jobs.get(id)?.job.running.as_ref()?;
            run.halted().then_some((*id, run.vacancies))
        })
    }

    /// Number of queued jobs.
    pub fn queue_len(&self) -> usize {
        self.queue.len()
    }

    /// Number of running jobs.
    pub fn running_len(&self) -> usize {
        self.ends.len()
    }

    /// The running jobs' ids by predicted end (soonest first).
    pub fn running_by_end(&self) -> impl Iterator<Item = (Millis, JobId)> + '_ {
        self.ends.iter().copied()
    }

    /// A machine's last reported state.
    pub fn machine(&self, id: MachineId) -> Option<&Machine> {
        self.machines.get(&id).map(|e| &e.m)
    }

    /// All known machines, in no particular order.
    pub fn machines(&self) -> impl Iterator<Item = &Machine> + '_ {
        self.machines.values().map(|e| &e.m)
    }

    /// The jobs with a member on `id` (empty for an unknown machine).
    pub fn guests_on(&self, id: MachineId) -> &[JobId] {
        self.machines.get(&id).map_or(&[], |e| e.guests.as_slice())
    }

    /// Bytes of free memory on `id` for a new member: reported free memory minus the
    /// declared needs of its guests.
    pub fn free_memory_for_guests(&self, id: MachineId) -> Option<u64> {
        self.machines.get(&id).map(MachineEntry::free_memory)
    }

    /// Whether one member of `job` could be placed on `machine` now, and why not.
    pub fn eligibility(&self, job: JobId, machine: MachineId) -> Result<Result<(), Ineligible>, SchedError> {
        let j = self.jobs.get(&job).ok_or(SchedError::UnknownJob(job))?;
        let e = self.machines.get(&machine).ok_or(SchedError::UnknownMachine(machine))?;
        let need = j.job.memory_need();
        if let Err(why) = check_eligible(&e.m, e.guests.len() as u32, e.memory_in_use, need) {
            return Ok(Err(why));
        }
        if let Some(r) = &e.m.memory {
            let demand = demand_of(e, &self.jobs);
            let mt = self.config.memory_threshold;
            // An empty machine takes a job that fits its M at all (see `entry_key`).
            let room =
                memory::room_under(mt, r.guest_memory, demand)
                    .map(|room| if e.guests.len() == 0 { room.max(r.guest_memory) } else { room });
            if room.is_none_or(|room| need > room) {
                let oversize = memory::oversize(demand.saturating_add(need), r.guest_memory);
                return Ok(Err(Ineligible::OverMemoryThreshold { oversize, threshold: mt }));
            }
        }
        Ok(Ok(()))
    }

    /// Seed 001's demand on `id` (its guests' measured working sets, or the memory they
    /// were placed with until measured), bytes; `None` for an unknown machine.
    pub fn memory_demand(&self, id: MachineId) -> Option<u64> {
        self.machines.get(&id).map(|e| demand_of(e, &self.jobs))
    }

    /// The memory-centric move due on `from` (seed 001 §4.1), from its latest memory
    /// report: when its oversize reached MT ([`memory::overloaded`], CT = its slots) or
    /// it reports memory pressure, the sequential guest chosen by `migration_choice`
    /// ([`memory::job_to_migrate`] over the guests the report measured) goes to the machine
    /// with the most free memory ([`memory::migration_target`]) among the others that report their
    /// memory and can take a member now (below CT, contract allowing), provided it stays
    /// below MT there (even on an empty machine). `None` when nothing is due or nowhere fits. The driver carries it
    /// out and reports `Event::JobMigrated`.
    pub fn memory_migration(&self, from: MachineId) -> Option<Migration> {
        let e = self.machines.get(&from)?;
        let report = e.m.memory.as_ref()?;
        let mt = self.config.memory_threshold;
        let demand = demand_of(e, &self.jobs);
        let host = HostLoad { machine: from, jobs: e.guests.len(), memory: report.guest_memory, demand };
        let over = memory::overloaded(&host, Thresholds { ct: e.m.slots as usize, mt });
        if !(over || report.pressure) {
            return None;
        }
        let movable: Vec<memory::JobLoad> = e
            .guests
            .as_slice()
            .iter()
            .filter(|j| self.jobs.get(j).is_some_and(|x| x.job.spec.width == 1))
            .filter_map(|&j| report.job(j).copied())
            .collect();
        let job = memory::job_to_migrate(&movable, self.config.migration_choice)?;
        let ws = movable.iter().find(|l| l.job == job).map_or(0, |l| l.working_set);
        let candidates: Vec<(HostLoad, RankKey)> = self
            .machines
            .values()
            .filter(|c| c.m.id != from)
            .filter_map(|c| {
                let r = c.m.memory.as_ref()?;
                let key = entry_key(c, &self.jobs, mt)?;
                Some((HostLoad { machine: c.m.id, jobs: c.guests.len(), memory: r.guest_memory, demand: demand_of(c, &self.jobs) }, key))
            })
            .collect();
        let hosts: Vec<HostLoad> = candidates.iter().map(|(h, _)| *h).collect();
        let to = memory::migration_target(&hosts, Thresholds { ct: usize::MAX, mt }, Some(ws), Some(from))?;
        let (target, key) = candidates.iter().find(|(h, _)| h.machine == to)?;
        // It must fit there below MT (and in what is free), or it would only move the
        // overload (and could move back).
        if key.strict_free < ws {
            return None;
        }
        Some(Migration {
            job,
            from,
            to,
            choice: self.config.migration_choice,
            oversize: host.oversize(),
            threshold: mt,
            pressure: report.pressure,
            working_set: ws,
            target_free: target.free(),
        })
    }

    /// Backfill's reservation for the blocked head job, as computed by the last pass
    /// (`None` for other algorithms, or when the head job started or no reservation was
    /// possible).
    pub fn reservation(&self) -> Option<&Reservation> {
        self.reservation.as_ref()
    }

    /// Machines not heard from (update or heartbeat) for more than `older_than_ms` at
    /// `now`, by id. The driver decides whether to report them lost.
    pub fn stale_machines(&self, now: Millis, older_than_ms: u64) -> Vec<MachineId> {
        let mut v: Vec<MachineId> =
            self.machines.values().filter(|e| now.saturating_ms_since(e.last_seen) > older_than_ms).map(|e| e.m.id).collect();
        v.sort_unstable();
        v
    }
}
