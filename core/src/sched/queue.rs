//! The waiting queue: jobs in (`submitted_at`, arrival) order, as a sorted vector.
//!
//! A pass reads the whole queue front to back and may start thousands of jobs, so the
//! queue is kept contiguous: a `Vec` sorted by [`QueueKey`] whose removed entries are
//! first marked dead and compacted away once they are a quarter of it. Submissions
//! usually append (they arrive in submission order); a failed or evicted job goes back
//! under its original key, reviving its dead slot if it is still there or inserting in
//! place otherwise. A pass removes the jobs it started in one merge walk at its end.

use super::ids::{JobId, MachineId};
use super::predict::Prediction;
use super::time::Millis;

/// Queue position: (`submitted_at`, arrival sequence number). Unique per job; a job
/// keeps it for life.
pub(super) type QueueKey = (Millis, u64);

/// A queued job as the queue holds it: what a pass needs without looking the job up.
#[derive(Clone, Copy, Debug)]
pub(super) struct Queued {
    pub(super) id: JobId,
    /// Its queue position.
    pub(super) key: QueueKey,
    pub(super) width: u32,
    /// Memory per member, bytes (0 = none declared or measured).
    pub(super) mem: u64,
    /// The machine tried first (set by a memory migration).
    pub(super) prefer: Option<MachineId>,
    /// The machine not to use (the one a memory migration took it off).
    pub(super) avoid: Option<MachineId>,
    /// The job's current prediction (as `JobEntry::prediction`).
    pub(super) prediction: Prediction,
}

#[derive(Clone, Debug)]
struct Slot {
    key: QueueKey,
    live: bool,
    q: Queued,
}

/// The queue. See the module docs.
#[derive(Clone, Debug, Default)]
pub(super) struct Queue {
    slots: Vec<Slot>,
    live: usize,
}

impl Queue {
    /// Live entries.
    pub(super) fn len(&self) -> usize {
        self.live
    }

    pub(super) fn is_empty(&self) -> bool {
        self.live == 0
    }

    fn search(&self, key: &QueueKey) -> Result<usize, usize> {
        self.slots.binary_search_by(|s| s.key.cmp(key))
    }

    /// Adds (or revives) the entry under `key`.
    pub(super) fn insert(&mut self, key: QueueKey, q: Queued) {
        if self.slots.last().is_none_or(|s| s.key < key) {
            self.slots.push(Slot { key, live: true, q });
            self.live += 1;
            return;
        }
        match self.search(&key) {
            Ok(i) => {
                let s = &mut self.slots[i];
                if !s.live {
                    self.live += 1;
                }
                s.live = true;
                s.q = q;
            }
            Err(i) => {
                self.slots.insert(i, Slot { key, live: true, q });
                self.live += 1;
            }
        }
    }

    /// Removes the entry under `key`, if live.
    pub(super) fn remove(&mut self, key: &QueueKey) {
        if let Ok(i) = self.search(key) {
            if self.slots[i].live {
                self.slots[i].live = false;
                self.live -= 1;
            }
        }
        self.maybe_compact();
    }

    /// Removes the live entries under `keys` (any order; sorted in place).
    pub(super) fn remove_all(&mut self, keys: &mut [QueueKey]) {
        if keys.len() < 16 {
            for k in keys.iter() {
                if let Ok(i) = self.search(k) {
                    if self.slots[i].live {
                        self.slots[i].live = false;
                        self.live -= 1;
                    }
                }
            }
        } else {
            keys.sort_unstable();
            let mut gone = keys.iter().peekable();
            for s in &mut self.slots {
                while gone.peek().is_some_and(|g| **g < s.key) {
                    gone.next();
                }
                if gone.peek().is_some_and(|g| **g == s.key) && s.live {
                    s.live = false;
                    self.live -= 1;
                }
            }
        }
        self.maybe_compact();
    }

    fn maybe_compact(&mut self) {
        let dead = self.slots.len() - self.live;
        if dead > 32 && dead * 4 > self.slots.len() {
            self.slots.retain(|s| s.live);
        }
    }

    /// A copy of the live entry under `key`.
    pub(super) fn get(&self, key: &QueueKey) -> Option<Queued> {
        match self.search(key) {
            Ok(i) if self.slots[i].live => Some(self.slots[i].q),
            _ => None,
        }
    }

    /// The live entry under `key`.
    pub(super) fn get_mut(&mut self, key: &QueueKey) -> Option<&mut Queued> {
        match self.search(key) {
            Ok(i) if self.slots[i].live => Some(&mut self.slots[i].q),
            _ => None,
        }
    }

    /// Positions of the live entries, in queue order. Positions stay valid until the
    /// queue is next changed (a pass changes it only at its end).
    pub(super) fn live_positions(&self) -> Vec<u32> {
        self.slots.iter().enumerate().filter(|(_, s)| s.live).map(|(i, _)| i as u32).collect()
    }

    /// Number of positions, dead ones included.
    pub(super) fn positions(&self) -> u32 {
        self.slots.len() as u32
    }

    /// The entry at `pos`, if live (see [`Queue::live_positions`]).
    pub(super) fn live_at(&self, pos: u32) -> Option<Queued> {
        let s = &self.slots[pos as usize];
        s.live.then_some(s.q)
    }

    /// The live entries in queue order.
    pub(super) fn iter(&self) -> impl Iterator<Item = &Queued> + '_ {
        self.slots.iter().filter(|s| s.live).map(|s| &s.q)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sched::predict::PredictionSource;

    fn q(id: u64) -> Queued {
        let prediction = Prediction { normtime_s: 1.0, total_normtime_s: 1.0, source: PredictionSource::Default };
        Queued { id: JobId(id), key: (Millis(id), id), width: 1, mem: 0, prefer: None, avoid: None, prediction }
    }

    fn ids(queue: &Queue) -> Vec<u64> {
        queue.iter().map(|q| q.id.0).collect()
    }

    #[test]
    fn keeps_key_order_through_removal_revival_batches_and_compaction() {
        let mut queue = Queue::default();
        for id in [1, 2, 3, 5] {
            queue.insert((Millis(id), id), q(id));
        }
        queue.insert((Millis(4), 4), q(4)); // in the middle
        assert_eq!(ids(&queue), vec![1, 2, 3, 4, 5]);
        queue.remove(&(Millis(2), 2));
        assert_eq!((ids(&queue), queue.len()), (vec![1, 3, 4, 5], 4));
        queue.insert((Millis(2), 2), q(2)); // back under its old key: revived
        assert_eq!(ids(&queue), vec![1, 2, 3, 4, 5]);
        assert_eq!(queue.get(&(Millis(3), 3)).map(|x| x.id), Some(JobId(3)));
        // A batch larger than the small-batch path, then enough dead to compact.
        for id in 6..200 {
            queue.insert((Millis(id), id), q(id));
        }
        let mut gone: Vec<QueueKey> = (1..150).rev().map(|id| (Millis(id), id)).collect();
        queue.remove_all(&mut gone);
        assert_eq!(ids(&queue), (150..200).collect::<Vec<_>>());
        assert_eq!(queue.positions() as usize, 50, "compacted");
        assert!(queue.get(&(Millis(3), 3)).is_none());
        queue.insert((Millis(3), 3), q(3));
        assert_eq!(ids(&queue)[..2], [3, 150]);
    }
}
