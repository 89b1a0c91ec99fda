//! FIFO with backfilling (seed 002 §3.1; EASY-style, one reservation for the head job).
//!
//! The pass starts jobs in queue order while they fit. The first job that does not fit
//! is the *head*; it gets a **reservation** ([`Reservation`]), computed once per pass:
//! walk the running jobs by predicted end, returning each unfinished member's slot and
//! declared memory to its machine, until the head's width of distinct machines would be
//! eligible for it (contract allows guests, a free slot, enough memory). The reservation
//! time is the predicted end that completes the count (never before `now`), and the
//! reserved machines are the `width` best of those in placement order: the ones the head
//! job would get at that time.
//!
//! Every later job in queue order that fits now is started if it cannot delay that
//! reservation:
//! 1. its predicted end on the machines greedy placement gives it is no later than the
//!    reservation — only when its prediction comes from history or the author's estimate,
//!    never from the default guess ([`super::PredictionSource::Default`]); or else
//! 2. it fits on machines outside the reserved set (it may then run as long as it likes).
//!
//! If the head cannot fit even when every running job has ended (the pool is too small
//! for it now), there is nothing to protect and later jobs start as with FirstFit; once
//! enough machines join, the reservation applies again.
//!
//! **Guarantee.** If predictions are exact (each job ends at its predicted end) and the
//! machines' reported state does not change, the head job starts no later than the
//! reservation computed when it became head: each pass's reservation is no later than the
//! previous one's, because every job started since either ends by it or stays off its
//! reserved machines. With inexact predictions it is a target, not a promise: a running
//! job that overruns delays it (its prediction is then doubled, moving the reservation
//! later), a backfilled job that overruns can hold a reserved machine, and a machine that
//! leaves or becomes ineligible removes capacity the reservation counted on.
//!
//! **Cost.** The reservation walk visits running jobs by predicted end only until the
//! head's width is reached. When every free machine is reserved (the usual case with a
//! long queue and a full pool), a candidate is rejected in O(1) from its cached
//! prediction: it cannot end before the reservation if `normtime / width` exceeds
//! `(reservation − now) × the fastest free machine's current speed`; and a failed
//! off-reservation placement of (width, memory) rules out every later job at least as
//! wide needing at least as much memory.

use super::assignment::{Assignment, Reason, Reservation};
use super::hash::{IdMap, IdSet};
use super::ids::{JobId, MachineId};
use super::pass::FailMemo;
use super::placement::{rank_key_with_guests, RankKey};
use super::predict::{runtime_from_speed, PredictionSource};
use super::scheduler::Scheduler;
use super::time::Millis;

/// What a pass holds back for the blocked head job.
struct Hold {
    at: Millis,
    /// `at − now`, seconds.
    window_s: f64,
    /// The fastest current speed among the free machines when the reservation was made:
    /// a job with `normtime / width > window_s × speed_bound` cannot end before `at`
    /// (the free machines only get fewer during the pass).
    speed_bound: f64,
    reserved: IdSet<MachineId>,
}

impl Scheduler {
    pub(super) fn pass_backfill(&mut self, now: Millis, out: &mut Vec<Assignment>) {
        let positions = self.queue.positions();
        let floor = self.config.predict.min_cpu_share;
        // Jobs (width, memory) that cannot be placed at all / off the reserved machines.
        let mut memo = FailMemo::default();
        let mut memo_off = FailMemo::default();
        // Set once the head is blocked: the head, and what is held back for it (`None`
        // when it cannot fit even on the whole pool).
        let mut blocked: Option<(JobId, Option<Hold>)> = None;
        for pos in 0..positions {
            let Some(q) = self.queue.live_at(pos) else { continue };
            let (id, width, mem) = (q.id, q.width, q.mem);
            let Some((head, hold)) = &blocked else {
                let found = if self.free.len() == 0 { None } else { self.find_for(&q, None) };
                if let Some(found) = found {
                    let runtime = runtime_from_speed(q.prediction.normtime_s, found.ids.len(), found.slowest);
                    out.push(self.commit(now, &q, found, runtime, Reason::InOrder));
                    continue;
                }
                memo.add(width, mem);
                self.flush_placements();
                self.reservation = self.compute_reservation(now, id);
                let hold = self.reservation.as_ref().map(|r| Hold {
                    at: r.at,
                    window_s: r.at.secs_since(now),
                    speed_bound: self.free.max_speed(floor),
                    reserved: r.machines.iter().copied().collect(),
                });
                blocked = Some((id, hold));
                continue;
            };
            let head = *head;
            if self.free.len() == 0 {
                break;
            }
            if memo.known_to_fail(width, mem) {
                continue;
            }
            let prediction = q.prediction;
            let Some(hold) = hold else {
                match self.find_for(&q, None) {
                    Some(found) => {
                        let runtime = runtime_from_speed(prediction.normtime_s, found.ids.len(), found.slowest);
                        out.push(self.commit(now, &q, found, runtime, Reason::HeadCannotFit { head }));
                    }
                    None => memo.add(width, mem),
                }
                continue;
            };
            // 1. Ends before the reservation (never on the default guess).
            let may_end_before = prediction.source != PredictionSource::Default
                && prediction.normtime_s / f64::from(width) <= hold.window_s * hold.speed_bound;
            if may_end_before {
                let Some(found) = self.find_for(&q, None) else {
                    memo.add(width, mem);
                    continue;
                };
                let runtime = runtime_from_speed(prediction.normtime_s, found.ids.len(), found.slowest);
                let predicted_end = now.plus_secs_ceil(runtime);
                if predicted_end <= hold.at {
                    let reason = Reason::EndsBeforeReservation { head, reservation: hold.at, predicted_end };
                    out.push(self.commit(now, &q, found, runtime, reason));
                    continue;
                }
            }
            // 2. Off the machines the head will need.
            if memo_off.known_to_fail(width, mem) {
                continue;
            }
            match self.find_for(&q, Some(&hold.reserved)) {
                Some(found) => {
                    let runtime = runtime_from_speed(prediction.normtime_s, found.ids.len(), found.slowest);
                    let reason = Reason::OffReservedMachines { head, reservation: hold.at };
                    out.push(self.commit(now, &q, found, runtime, reason));
                }
                None => memo_off.add(width, mem),
            }
        }
    }

    /// The head job's reservation (see the module docs), `None` if it cannot fit even
    /// when every running job has ended.
    pub(super) fn compute_reservation(&self, now: Millis, head: JobId) -> Option<Reservation> {
        let (width, mem) = self.shape(head);
        let need = width as usize;
        let mut avail: Vec<RankKey> = self.free.keys_with(mem);
        let mut at = now;
        if avail.len() < need {
            let mut counted: IdSet<MachineId> = avail.iter().map(|k| k.id).collect();
            // Per machine touched: (free slots, free memory) as running jobs end.
            let mut sim: IdMap<MachineId, (u64, u64)> = IdMap::default();
            let mut reached = false;
            for &(end, job) in &self.ends {
                let Some(j) = self.jobs.get(&job) else { continue };
                let Some(run) = &j.job.running else { continue };
                let job_mem = j.job.spec.memory_needed();
                for m in run.unfinished_machines() {
                    if counted.contains(&m) {
                        continue;
                    }
                    let Some(e) = self.machines.get(&m) else { continue };
                    if !e.m.contract_allows_guests() {
                        continue;
                    }
                    let st = sim.entry(m).or_insert_with(|| (u64::from(e.m.slots).saturating_sub(e.guests.len() as u64), e.free_memory()));
                    st.0 += 1;
                    st.1 = st.1.saturating_add(job_mem);
                    if st.0 >= 1 && st.1 >= mem {
                        counted.insert(m);
                        avail.push(rank_key_with_guests(&e.m, e.guests.len() as u32, e.memory_in_use));
                    }
                }
                if avail.len() >= need {
                    at = end.max(now);
                    reached = true;
                    break;
                }
            }
            if !reached {
                return None;
            }
        }
        avail.sort_unstable();
        avail.truncate(need);
        Some(Reservation { head, at, machines: avail.into_iter().map(|k| k.id).collect(), computed_at: now })
    }
}
