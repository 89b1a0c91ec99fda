//! A scheduling pass: the six algorithms' job selection, sharing one placement rule.
//!
//! Every pass first raises the predictions of running jobs that outlived them, then:
//! * **fifo** tries the queue in order and stops at the first job that does not fit;
//! * **first_fit** tries the queue in order and skips jobs that do not fit;
//! * **random** tries the queue in a seeded uniformly random order, skipping jobs that do
//!   not fit. Because a pass only ever takes resources away, a job that did not fit
//!   earlier in the pass cannot fit later, so this is the same as repeatedly drawing
//!   uniformly among the waiting jobs that fit (seed 002 §3.1);
//! * **spt** / **lpt** try jobs by predicted normtime ascending / descending (ties in
//!   queue order) and stop at the first that does not fit, as in the paper;
//! * **backfill**: see `backfill.rs`.
//!
//! Placement ([`super::placement`]) takes the first `width` eligible machines with enough
//! free memory from the front of the index. Cost per placed job: O(width · log M) plus,
//! for jobs that declare memory, the machines skipped for too little memory. Jobs that
//! cannot fit are recognised in O(1) when the index has fewer machines than their width,
//! or when an earlier job no wider and needing no more memory already failed this pass.

use super::assignment::{Assignment, Reason};
use super::config::Algorithm;
use super::hash::IdSet;
use super::job::{JobId, Member, RunningJob};
use super::machine::MachineId;
use super::predict::{corrected_runtime, current_speed, runtime_from_speed, Prediction};
use super::scheduler::Scheduler;
use super::time::Millis;

/// Jobs (width, memory) known not to fit during this pass: resources only shrink within a
/// pass, so any job at least as wide and needing at least as much memory fails too.
#[derive(Default)]
pub(super) struct FailMemo {
    fails: Vec<(u32, u64)>,
}

impl FailMemo {
    pub(super) fn known_to_fail(&self, width: u32, mem: u64) -> bool {
        self.fails.iter().any(|&(w, m)| w <= width && m <= mem)
    }

    pub(super) fn add(&mut self, width: u32, mem: u64) {
        if !self.known_to_fail(width, mem) {
            self.fails.retain(|&(w, m)| !(width <= w && mem <= m));
            self.fails.push((width, mem));
        }
    }
}

impl Scheduler {
    /// Runs one scheduling pass at `now` with the configured algorithm and returns the
    /// jobs started, in the order they were chosen. Their tasks count as running from
    /// `now`; the driver turns each [`Assignment`] into leases and later reports
    /// `JobFinished` / `JobFailed` / `TaskEvicted` per member.
    pub fn pass(&mut self, now: Millis) -> Vec<Assignment> {
        self.correct_outlived(now);
        self.reservation = None;
        let mut out = Vec::new();
        if self.queue.is_empty() {
            return out;
        }
        let algorithm = self.config.algorithm;
        if algorithm == Algorithm::Backfill {
            self.pass_backfill(now, &mut out);
            return out;
        }
        if self.index.is_empty() {
            return out;
        }
        match algorithm {
            Algorithm::Fifo => {
                let order = self.queue_order();
                self.run_in_order(now, &order, true, |_, _| Reason::FifoHead, &mut out);
            }
            Algorithm::FirstFit => {
                let order = self.queue_order();
                self.run_in_order(now, &order, false, |passed_over, _| Reason::FirstFit { passed_over }, &mut out);
            }
            Algorithm::Random => {
                let mut order = self.queue_order();
                self.rng.shuffle(&mut order);
                self.run_in_order(now, &order, false, |_, _| Reason::Random, &mut out);
            }
            Algorithm::Spt | Algorithm::Lpt => {
                let mut keyed: Vec<(f64, (Millis, u64), JobId)> =
                    self.queue.iter().map(|(&key, &id)| (self.predict_job(id).normtime_s, key, id)).collect();
                if algorithm == Algorithm::Spt {
                    keyed.sort_unstable_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
                } else {
                    keyed.sort_unstable_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
                }
                let order: Vec<JobId> = keyed.into_iter().map(|k| k.2).collect();
                let spt = algorithm == Algorithm::Spt;
                self.run_in_order(
                    now,
                    &order,
                    true,
                    |_, p| {
                        if spt {
                            Reason::ShortestFirst { normtime_s: p.normtime_s }
                        } else {
                            Reason::LongestFirst { normtime_s: p.normtime_s }
                        }
                    },
                    &mut out,
                );
            }
            Algorithm::Backfill => unreachable!("handled above"),
        }
        out
    }

    /// The queued job ids in queue order.
    pub(super) fn queue_order(&self) -> Vec<JobId> {
        self.queue.values().copied().collect()
    }

    /// Tries `order`; `block` stops at the first job that does not fit.
    fn run_in_order(
        &mut self,
        now: Millis,
        order: &[JobId],
        block: bool,
        reason: impl Fn(u32, &Prediction) -> Reason,
        out: &mut Vec<Assignment>,
    ) {
        let mut memo = FailMemo::default();
        let mut passed_over = 0u32;
        for &id in order {
            if self.index.is_empty() {
                break;
            }
            let (width, mem) = self.shape(id);
            let found = if memo.known_to_fail(width, mem) { None } else { self.find_machines(width, mem, None) };
            match found {
                Some(machines) => {
                    let prediction = self.predict_job(id);
                    let runtime = self.runtime_on(prediction.normtime_s, &machines);
                    let why = reason(passed_over, &prediction);
                    out.push(self.commit(now, id, machines, prediction, runtime, why));
                }
                None => {
                    memo.add(width, mem);
                    if block {
                        break;
                    }
                    passed_over += 1;
                }
            }
        }
    }

    /// (width, memory per member) of a held job.
    pub(super) fn shape(&self, id: JobId) -> (u32, u64) {
        let spec = &self.jobs[&id].job.spec;
        (spec.width, spec.memory_needed())
    }

    /// The prediction for a held job now.
    pub(super) fn predict_job(&self, id: JobId) -> Prediction {
        let job = &self.jobs[&id].job;
        let s = &job.spec;
        self.predictor.predict(&s.program, s.width, s.user_estimate_s, job.credited_normtime_s)
    }

    /// Predicted runtime of `normtime_s` on `machines` (seed 002 eq. 6).
    pub(super) fn runtime_on(&self, normtime_s: f64, machines: &[MachineId]) -> f64 {
        let floor = self.config.predict.min_cpu_share;
        let slowest =
            machines.iter().filter_map(|id| self.machines.get(id)).map(|e| current_speed(&e.m, floor)).fold(f64::INFINITY, f64::min);
        runtime_from_speed(normtime_s, machines.len(), slowest)
    }

    /// The first `width` machines in placement order with `mem` bytes free, skipping
    /// `exclude`; `None` if there are fewer.
    pub(super) fn find_machines(&self, width: u32, mem: u64, exclude: Option<&IdSet<MachineId>>) -> Option<Vec<MachineId>> {
        let width = width as usize;
        if width > self.index.len() {
            return None;
        }
        let mut chosen = Vec::with_capacity(width);
        for k in &self.index {
            if exclude.is_some_and(|x| x.contains(&k.id)) {
                continue;
            }
            if mem > 0 && self.machines[&k.id].free_memory() < mem {
                continue;
            }
            chosen.push(k.id);
            if chosen.len() == width {
                return Some(chosen);
            }
        }
        None
    }

    /// Starts `id` on `machines` at `now`.
    pub(super) fn commit(
        &mut self,
        now: Millis,
        id: JobId,
        machines: Vec<MachineId>,
        prediction: Prediction,
        runtime_s: f64,
        reason: Reason,
    ) -> Assignment {
        let predicted_end = now.plus_secs_ceil(runtime_s);
        let algorithm = self.config.algorithm;
        let entry = self.jobs.get_mut(&id).expect("a queued job");
        let mem = entry.job.spec.memory_needed();
        let key = entry.key;
        entry.job.running = Some(RunningJob {
            members: machines.iter().map(|&machine| Member { machine, finished: false }).collect(),
            started_at: now,
            prediction,
            predicted_runtime_s: runtime_s,
            predicted_end,
            initial_runtime_s: runtime_s,
            corrections: 0,
            algorithm,
            reason,
            normtime_so_far_s: 0.0,
            wall_s: 0.0,
        });
        self.queue.remove(&key);
        self.ends.insert((predicted_end, id));
        for &m in &machines {
            if let Some(e) = self.machines.get_mut(&m) {
                e.guests.push(id);
                e.memory_in_use = e.memory_in_use.saturating_add(mem);
            }
            self.reindex(m);
        }
        Assignment { job: id, machines, algorithm, reason, prediction, predicted_runtime_s: runtime_s, predicted_end }
    }

    /// Raises the prediction of every running job whose predicted end is before `now`
    /// (see [`corrected_runtime`]), so predicted ends are never in the past.
    pub(super) fn correct_outlived(&mut self, now: Millis) {
        while let Some(&(end, id)) = self.ends.first() {
            if end >= now {
                break;
            }
            self.ends.pop_first();
            let Some(run) = self.jobs.get_mut(&id).and_then(|e| e.job.running.as_mut()) else { continue };
            let elapsed = now.secs_since(run.started_at);
            let mut r = corrected_runtime(run.predicted_runtime_s, elapsed);
            let mut new_end = run.started_at.plus_secs_ceil(r);
            while new_end <= now {
                r *= 2.0;
                new_end = run.started_at.plus_secs_ceil(r);
            }
            run.predicted_runtime_s = r;
            run.predicted_end = new_end;
            run.corrections += 1;
            self.ends.insert((new_end, id));
        }
    }
}
