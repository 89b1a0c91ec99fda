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
//!   queue order) and stop at the first that does not fit, as in the paper. The order is
//!   a `BTreeMap` kept up to date when a job is queued or its program's history changes,
//!   so a pass does not sort; since they block, the jobs a pass starts are a prefix of
//!   that order, split off in O(log n) at the end;
//! * **backfill**: see `backfill.rs`.
//!
//! Predictions are cached per queued job, so a pass does no string look-ups. Placement
//! ([`super::placement`]) takes the first `width` eligible machines with enough free
//! memory from the front of the free machines (`free.rs`). A job that cannot fit is
//! recognised in O(1) when there are fewer free machines than its width, or when an
//! earlier job no wider and needing no more memory already failed this pass. The job,
//! machine and running-job tables, and the queue, are written once at the end of the
//! pass (or before Backfill computes a reservation), in batches.

use super::assignment::{Assignment, Reason};
use super::config::Algorithm;
use super::free::Found;
use super::hash::IdSet;
use super::ids::{JobId, MachineId};
use super::job::{Member, RunningJob};
use super::placement::rank_key_with_guests;
use super::predict::{corrected_runtime, runtime_from_speed, Prediction};
use super::queue::{QueueKey, Queued};
use super::scheduler::{entry_key, Scheduler, TimeKey};
use super::time::Millis;
use std::collections::BTreeSet;
use std::ops::Bound;

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
        let mut out = Vec::with_capacity(self.queue.len().min(self.free.len()));
        if self.queue.is_empty() && self.vacant.is_empty() {
            return out;
        }
        self.begin_pass();
        self.place_replacements(&mut out);
        if !self.queue.is_empty() {
            self.select(now, &mut out);
        }
        self.end_pass();
        out
    }

    /// Places replacements for the lost members of halted gangs, oldest submission
    /// first, before any queued job: the halted members hold their machines idle until
    /// then. Each gang gets all its vacancies filled at once (on machines it does not
    /// use, by the usual placement order) or waits for a later pass.
    fn place_replacements(&mut self, out: &mut Vec<Assignment>) {
        if self.vacant.is_empty() {
            return;
        }
        let algorithm = self.config.algorithm;
        let entries: Vec<(QueueKey, JobId)> = self.vacant.iter().copied().collect();
        for entry in entries {
            let id = entry.1;
            let wanted = self.jobs.get(&id).and_then(|e| {
                let run = e.job.running.as_ref().filter(|r| r.vacancies > 0)?;
                let exclude: IdSet<MachineId> = run.members.iter().map(|m| m.machine).collect();
                Some((run.vacancies, e.job.spec.memory_needed(), exclude))
            });
            let Some((need, mem, exclude)) = wanted else {
                self.vacant.remove(&entry);
                continue;
            };
            if self.free.len() < need as usize {
                continue;
            }
            let Some(found) = self.free.find(need, mem, Some(&exclude), self.config.predict.min_cpu_share) else { continue };
            for (i, &m) in found.ids.iter().enumerate() {
                self.pass_members.push((m, id, mem));
                self.free.take(&found, i, mem);
            }
            self.vacant.remove(&entry);
            let e = self.jobs.get_mut(&id).expect("looked up above");
            let run = e.job.running.as_mut().expect("running, looked up above");
            let halted = run.members.iter().filter(|m| !m.finished).count() as u32;
            run.members.extend(found.ids.iter().map(|&machine| Member { machine, finished: false }));
            run.vacancies = 0;
            run.halted_since = None;
            out.push(Assignment {
                job: id,
                machines: found.ids,
                algorithm,
                reason: Reason::ReplacesLostMembers { halted },
                prediction: e.prediction,
                predicted_runtime_s: run.predicted_runtime_s,
                predicted_end: run.predicted_end,
            });
        }
    }

    fn select(&mut self, now: Millis, out: &mut Vec<Assignment>) {
        let algorithm = self.config.algorithm;
        if algorithm == Algorithm::Backfill {
            return self.pass_backfill(now, out);
        }
        if self.free.len() == 0 {
            return;
        }
        match algorithm {
            Algorithm::Fifo => {
                let order = 0..self.queue.positions();
                self.run_in_order(now, order, true, |_, _| Reason::FifoHead, out);
            }
            Algorithm::FirstFit => {
                let order = 0..self.queue.positions();
                self.run_in_order(now, order, false, |passed_over, _| Reason::FirstFit { passed_over }, out);
            }
            Algorithm::Random => {
                let mut order = self.queue.live_positions();
                self.rng.shuffle(&mut order);
                self.run_in_order(now, order, false, |_, _| Reason::Random, out);
            }
            Algorithm::Spt | Algorithm::Lpt => {
                // `by_time` holds the queued jobs by predicted normtime (negated for LPT),
                // ties in queue order; the first that does not fit blocks the rest.
                // SPT/LPT block at the first job that cannot start, so the jobs started are
                // a prefix of the order: walk it in chunks, then split the prefix off.
                let mut after: Option<TimeKey> = None;
                let mut first_unplaced: Option<TimeKey> = None;
                'walk: while let Some(order) = &self.by_time {
                    let chunk: Vec<(TimeKey, Queued)> = match &after {
                        None => order.iter().take(64).map(|(k, q)| (*k, *q)).collect(),
                        Some(a) => order.range((Bound::Excluded(a), Bound::Unbounded)).take(64).map(|(k, q)| (*k, *q)).collect(),
                    };
                    if chunk.is_empty() {
                        break;
                    }
                    for (k, q) in chunk {
                        let found = if self.free.len() == 0 { None } else { self.find_for(&q, None) };
                        let Some(found) = found else {
                            first_unplaced = Some(k);
                            break 'walk;
                        };
                        let normtime_s = q.prediction.normtime_s;
                        let runtime = runtime_from_speed(normtime_s, found.ids.len(), found.slowest);
                        let why = if algorithm == Algorithm::Spt {
                            Reason::ShortestFirst { normtime_s }
                        } else {
                            Reason::LongestFirst { normtime_s }
                        };
                        out.push(self.commit(now, &q, found, runtime, why));
                        after = Some(k);
                    }
                }
                if let Some(order) = &mut self.by_time {
                    match first_unplaced {
                        Some(k) => *order = order.split_off(&k),
                        None => order.clear(),
                    }
                }
            }
            Algorithm::Backfill => unreachable!("handled above"),
        }
    }

    /// Tries the live queue entries at the positions `order` (the queue does not change
    /// during a pass); `block` stops at the first job that does not fit.
    fn run_in_order(
        &mut self,
        now: Millis,
        order: impl IntoIterator<Item = u32>,
        block: bool,
        reason: impl Fn(u32, &Prediction) -> Reason,
        out: &mut Vec<Assignment>,
    ) {
        let mut memo = FailMemo::default();
        let mut passed_over = 0u32;
        for pos in order {
            if self.free.len() == 0 {
                break;
            }
            let Some(q) = self.queue.live_at(pos) else { continue };
            let found = if memo.known_to_fail(q.width, q.mem) { None } else { self.find_for(&q, None) };
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
        let job = &self.jobs[&id].job;
        (job.spec.width, job.memory_need())
    }

    /// Starts queued job `q` on the machines found, at `now`, with its cached prediction.
    /// The free machines are updated at once; the job and machine tables, `ends` and the
    /// queue at the end of the pass (or before a reservation is computed), in one batch.
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
            vacancies: 0,
            halted_since: None,
            memory_per_member: mem,
        });
        self.pass_runs.push((id, run));
        for (i, &m) in found.ids.iter().enumerate() {
            self.pass_members.push((m, id, mem));
            self.free.take(&found, i, mem);
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

/// The pass's use of the free machines (`free.rs`) and its batched writes.
impl Scheduler {
    /// Makes every pass start from a freshly rebuilt index (no tombstones, no cursors). Only
    /// speed differs: decisions are the same either way, which is what this knob is for
    /// (tests).
    #[doc(hidden)]
    pub fn set_rebuild_index_every_pass(&mut self, on: bool) {
        self.free.set_always_rebuild(on);
    }

    /// Starts a pass: merges pending keys into the sorted vector if there are many.
    pub(super) fn begin_pass(&mut self) {
        self.free.settle();
        self.pass_placed.clear();
    }

    /// Ends a pass: writes the jobs started to the tables and removes them from the queue.
    pub(super) fn end_pass(&mut self) {
        self.flush_placements();
        let mut placed = std::mem::take(&mut self.pass_placed);
        self.queue.remove_all(&mut placed);
        placed.clear();
        self.pass_placed = placed;
    }

    /// During a pass: machines for queued job `q` — its preferred machine (chosen by a
    /// memory migration) when it is free with room for it, else as `FreeMachines::find`,
    /// never the machine a memory migration took it off.
    pub(super) fn find_for(&mut self, q: &Queued, exclude: Option<&IdSet<MachineId>>) -> Option<Found> {
        let with_avoid;
        let exclude = match q.avoid {
            Some(a) => {
                let mut x = exclude.cloned().unwrap_or_default();
                x.insert(a);
                with_avoid = x;
                Some(&with_avoid)
            }
            None => exclude,
        };
        if let Some(p) = q.prefer.filter(|p| q.width == 1 && !exclude.is_some_and(|x| x.contains(p))) {
            if let Some(found) = self.find_on(p, q.mem) {
                return Some(found);
            }
        }
        self.free.find(q.width, q.mem, exclude, self.config.predict.min_cpu_share)
    }

    /// During a pass: machine `id` alone, if it is among the free machines with `mem`
    /// bytes free.
    fn find_on(&mut self, id: MachineId, mem: u64) -> Option<Found> {
        let order_key = self.machines.get(&id)?.key?;
        self.free.find_key(&order_key, id, mem, self.config.predict.min_cpu_share)
    }

    /// Writes the jobs started so far in this pass to the job and machine tables and to
    /// `ends`. Done in batches of independent look-ups (rather than one placement at a
    /// time), which lets the processor overlap their cache misses.
    pub(super) fn flush_placements(&mut self) {
        let mut runs = std::mem::take(&mut self.pass_runs);
        let mut ends = Vec::with_capacity(runs.len());
        for (id, run) in runs.drain(..) {
            ends.push((run.predicted_end, id));
            if let Some(e) = self.jobs.get_mut(&id) {
                e.job.running = Some(run);
                e.job.prefer = None;
                e.job.avoid = None;
            }
        }
        self.pass_runs = runs;
        let mut members = std::mem::take(&mut self.pass_members);
        for (m, id, mem) in members.drain(..) {
            if let Some(e) = self.machines.get_mut(&m) {
                e.guests.push(id);
                e.memory_in_use = e.memory_in_use.saturating_add(mem);
                e.key = entry_key(e, &self.jobs, self.config.memory_threshold);
                let full = e.guests.len() as u64 >= u64::from(e.m.slots);
                if e.key.is_none() && !full {
                    // A slot is left but the oversize reached MT: out of the free machines
                    // (keys compare by placement order only).
                    self.free.remove(&rank_key_with_guests(&e.m, e.guests.len() as u32, e.memory_in_use));
                }
            }
        }
        self.pass_members = members;
        if ends.len() >= 16 && ends.len() * 4 >= self.ends.len() {
            ends.sort_unstable();
            let mut batch: BTreeSet<(Millis, JobId)> = ends.into_iter().collect();
            self.ends.append(&mut batch);
        } else {
            for e in ends {
                self.ends.insert(e);
            }
        }
    }
}
