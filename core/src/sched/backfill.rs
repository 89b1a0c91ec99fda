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

use super::assignment::{Assignment, Reason};
use super::hash::{IdMap, IdSet};
use super::job::JobId;
use super::machine::MachineId;
use super::pass::FailMemo;
use super::placement::{rank_key, RankKey};
use super::predict::PredictionSource;
use super::scheduler::Scheduler;
use super::time::Millis;
use serde::{Deserialize, Serialize};

/// The blocked head job's reservation, as computed by the last Backfill pass.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reservation {
    /// The head job.
    pub head: JobId,
    /// When it is predicted to be able to start.
    pub at: Millis,
    /// The machines it would get then, in placement order (one per member).
    pub machines: Vec<MachineId>,
    /// The pass that computed it.
    pub computed_at: Millis,
}

/// What a pass holds back for the blocked head: its reservation time and reserved
/// machines, or `None` when the head cannot fit at all.
type Hold = Option<(Millis, IdSet<MachineId>)>;

impl Scheduler {
    pub(super) fn pass_backfill(&mut self, now: Millis, out: &mut Vec<Assignment>) {
        let order = self.queue_order();
        let mut memo = FailMemo::default();
        // Set once the head is blocked.
        let mut blocked: Option<(JobId, Hold)> = None;
        for &id in &order {
            let (width, mem) = self.shape(id);
            let Some((head, hold)) = &blocked else {
                let found = if self.index.is_empty() { None } else { self.find_machines(width, mem, None) };
                if let Some(machines) = found {
                    let prediction = self.predict_job(id);
                    let runtime = self.runtime_on(prediction.normtime_s, &machines);
                    out.push(self.commit(now, id, machines, prediction, runtime, Reason::InOrder));
                    continue;
                }
                memo.add(width, mem);
                self.reservation = self.compute_reservation(now, id);
                let hold = self.reservation.as_ref().map(|r| (r.at, r.machines.iter().copied().collect::<IdSet<_>>()));
                blocked = Some((id, hold));
                continue;
            };
            let head = *head;
            if self.index.is_empty() {
                break;
            }
            if memo.known_to_fail(width, mem) {
                continue;
            }
            let Some(machines) = self.find_machines(width, mem, None) else {
                memo.add(width, mem);
                continue;
            };
            let prediction = self.predict_job(id);
            let runtime = self.runtime_on(prediction.normtime_s, &machines);
            let Some((at, reserved)) = hold else {
                out.push(self.commit(now, id, machines, prediction, runtime, Reason::HeadCannotFit { head }));
                continue;
            };
            let at = *at;
            let end = now.plus_secs_ceil(runtime);
            if prediction.source != PredictionSource::Default && end <= at {
                let reason = Reason::EndsBeforeReservation { head, reservation: at, predicted_end: end };
                out.push(self.commit(now, id, machines, prediction, runtime, reason));
            } else if let Some(off) = self.find_machines(width, mem, Some(reserved)) {
                let runtime = self.runtime_on(prediction.normtime_s, &off);
                out.push(self.commit(now, id, off, prediction, runtime, Reason::OffReservedMachines { head, reservation: at }));
            }
        }
    }

    /// The head job's reservation (see the module docs), `None` if it cannot fit even
    /// when every running job has ended.
    pub(super) fn compute_reservation(&self, now: Millis, head: JobId) -> Option<Reservation> {
        let (width, mem) = self.shape(head);
        let need = width as usize;
        let mut avail: Vec<RankKey> =
            self.index.iter().filter(|k| mem == 0 || self.machines[&k.id].free_memory() >= mem).copied().collect();
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
                        avail.push(rank_key(&e.m));
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
