//! The waiting queue: jobs in (`submitted_at`, arrival) order, as a sorted vector.
//!
//! A pass reads the whole queue front to back and may start thousands of jobs, so the
//! queue is kept contiguous: a `Vec` sorted by [`QueueKey`] whose removed entries are
//! first marked dead and compacted away once they are a quarter of it. Submissions
//! usually append (they arrive in submission order); a failed or evicted job goes back
//! under its original key, reviving its dead slot if it is still there or inserting in
//! place otherwise. A pass removes the jobs it started in one merge walk at its end.

use super::job::JobId;
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
    /// Memory per member, bytes (0 = none declared).
    pub(super) mem: u64,
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

    /// The entry at `pos` (see [`Queue::live_positions`]).
    pub(super) fn at(&self, pos: u32) -> Queued {
        self.slots[pos as usize].q
    }

    /// The live entries in queue order.
    pub(super) fn iter(&self) -> impl Iterator<Item = &Queued> + '_ {
        self.slots.iter().filter(|s| s.live).map(|s| &s.q)
    }
}
