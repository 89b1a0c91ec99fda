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
//!   queue order) and stop at the first that does not fit, as in the paper; the order is
//!   kept as a `BTreeSet` updated when a job is queued or placed or its program's history
//!   changes, so a pass does not sort;
//! * **backfill**: see `backfill.rs`.
//!
//! Predictions are cached per queued job (refreshed when the program's history changes),
//! so a pass does no string look-ups. Placement ([`super::placement`]) takes the first
//! `width` eligible machines with enough free memory from the front of the index. Cost
//! per placed job: O(width · log M) plus,
//! for jobs that declare memory, the machines skipped for too little memory. Jobs that
//! cannot fit are recognised in O(1) when the index has fewer machines than their width,
//! or when an earlier job no wider and needing no more memory already failed this pass.

use super::assignment::{Assignment, Reason};
use super::config::Algorithm;
use super::free::Found;
use super::job::{JobId, Member, RunningJob};
use super::predict::{corrected_runtime, runtime_from_speed, Prediction};
use super::queue::Queued;
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
        // At most one job per free machine can start.
        let mut out = Vec::with_capacity(self.queue.len().min(self.index.len()));
        if self.queue.is_empty() {
            return out;
        }
        self.begin_pass();
        self.select(now, &mut out);
        self.end_pass();
        out
    }

    fn select(&mut self, now: Millis, out: &mut Vec<Assignment>) {
        let algorithm = self.config.algorithm;
        if algorithm == Algorithm::Backfill {
            return self.pass_backfill(now, out);
        }
        if self.free_len() == 0 {
            return;
        }
        match algorithm {
            Algorithm::Fifo => {
                let order = self.queue.live_positions();
                self.run_in_order(now, &order, true, |_, _| Reason::FifoHead, out);
            }
            Algorithm::FirstFit => {
                let order = self.queue.live_positions();
                self.run_in_order(now, &order, false, |passed_over, _| Reason::FirstFit { passed_over }, out);
            }
            Algorithm::Random => {
                let mut order = self.queue.live_positions();
                self.rng.shuffle(&mut order);
                self.run_in_order(now, &order, false, |_, _| Reason::Random, out);
            }
            Algorithm::Spt | Algorithm::Lpt => {
                // `by_time` holds the queued jobs by predicted normtime (negated for LPT),
                // ties in queue order; the first that does not fit blocks the rest.
                while self.free_len() > 0 {
                    let Some((_, &q)) = self.by_time.as_ref().and_then(|o| o.first_key_value()) else { break };
                    let Some(found) = self.find_machines(q.width, q.mem, None) else { break };
                    let normtime_s = q.prediction.normtime_s;
                    let runtime = runtime_from_speed(normtime_s, found.ids.len(), found.slowest);
                    let why = if algorithm == Algorithm::Spt {
                        Reason::ShortestFirst { normtime_s }
                    } else {
                        Reason::LongestFirst { normtime_s }
                    };
                    out.push(self.commit(now, &q, found, runtime, why));
                }
            }
            Algorithm::Backfill => unreachable!("handled above"),
        }
    }

    /// Tries the queue entries at the positions `order`; `block` stops at the first job
    /// that does not fit.
    fn run_in_order(
        &mut self,
        now: Millis,
        order: &[u32],
        block: bool,
        reason: impl Fn(u32, &Prediction) -> Reason,
        out: &mut Vec<Assignment>,
    ) {
        let mut memo = FailMemo::default();
        let mut passed_over = 0u32;
        for &pos in order {
            if self.free_len() == 0 {
                break;
            }
            let q = self.queue.at(pos);
            let found = if memo.known_to_fail(q.width, q.mem) { None } else { self.find_machines(q.width, q.mem, None) };
            match found {
                Some(found) => {
                    let runtime = runtime_from_speed(q.prediction.normtime_s, found.ids.len(), found.slowest);
                    let why = reason(passed_over, &q.prediction);
                    out.push(self.commit(now, &q, found, runtime, why));
                }
                None => {
                    memo.add(q.width, q.mem);
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

    /// Starts queued job `id` on the machines found, at `now`, with its cached
    /// prediction. (Its queue entry is removed at the end of the pass.)
    pub(super) fn commit(&mut self, now: Millis, q: &Queued, found: Found, runtime_s: f64, reason: Reason) -> Assignment {
        let predicted_end = now.plus_secs_ceil(runtime_s);
        let algorithm = self.config.algorithm;
        self.dequeue_in_pass(q);
        let (id, mem, prediction) = (q.id, q.mem, q.prediction);
        let run = Box::new(RunningJob {
            members: found.ids.iter().map(|&machine| Member { machine, finished: false }).collect(),
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
        self.jobs.get_mut(&id).expect("a queued job").job.running = Some(run);
        if self.view.is_some() {
            self.pass_ends.push((predicted_end, id));
        } else {
            self.ends.insert((predicted_end, id));
        }
        for (i, &m) in found.ids.iter().enumerate() {
            if let Some(e) = self.machines.get_mut(&m) {
                e.guests.push(id);
                e.memory_in_use = e.memory_in_use.saturating_add(mem);
            }
            self.after_placement(&found, i);
        }
        let machines = found.ids;
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
