//! The free machines during a pass: the eligible machines with a free slot, in placement
//! order, as a pass takes them.
//!
//! Between passes they live in `Scheduler::index`, a `BTreeSet<RankKey>`. A pass that may
//! place many jobs (at least [`VIEW_THRESHOLD`] queued jobs and free machines) works on a
//! [`FreeView`] instead: a sorted copy with a "next untaken position" forest (union–find
//! with path compression), so taking a machine is O(1) instead of a B-tree removal with
//! rebalancing, and skipping taken machines costs nearly nothing. Memory cursors remember,
//! per memory need, the position before which no untaken machine has enough memory, so
//! jobs needing much memory do not rescan the machines that have little. At the end of
//! the pass the index is rebuilt from the view in one sorted bulk load. Small passes use
//! the index directly.
//!
//! Within a pass the free machines only ever lose slots or memory, which is what makes the
//! per-pass shortcuts (fail memo, memory cursors, Backfill's speed bound) valid.

use super::hash::IdSet;
use super::job::JobId;
use super::machine::MachineId;
use super::placement::{rank_key_with_guests, RankKey};
use super::scheduler::Scheduler;
use super::time::Millis;
use std::collections::{BTreeMap, BTreeSet};

/// By default a pass uses a [`FreeView`] when both the queue and the free machines are at
/// least this many.
pub(super) const VIEW_THRESHOLD: usize = 64;

/// A pass's working copy of the free machines.
#[derive(Clone, Debug)]
pub(super) struct FreeView {
    keys: Vec<RankKey>,
    taken: Vec<bool>,
    /// `next[i] == i`: position `i` is untaken (`next[len]` is the end sentinel);
    /// otherwise a pointer towards the next untaken position.
    next: Vec<u32>,
    free: usize,
    dirty: bool,
    /// Memory need → a position before which no untaken machine has that much memory.
    mem_cursor: BTreeMap<u64, usize>,
}

impl FreeView {
    fn new(index: &BTreeSet<RankKey>) -> FreeView {
        let keys: Vec<RankKey> = index.iter().copied().collect();
        let n = keys.len();
        FreeView { taken: vec![false; n], next: (0..=n as u32).collect(), free: n, dirty: false, mem_cursor: BTreeMap::new(), keys }
    }

    /// The first untaken position `≥ i` (`len` if none), compressing the path.
    fn find(&mut self, i: usize) -> usize {
        let mut root = i;
        while self.next[root] as usize != root {
            root = self.next[root] as usize;
        }
        let mut j = i;
        while self.next[j] as usize != root {
            let n = self.next[j] as usize;
            self.next[j] = root as u32;
            j = n;
        }
        root
    }

    fn take(&mut self, pos: usize) {
        if !self.taken[pos] {
            self.taken[pos] = true;
            self.next[pos] = pos as u32 + 1;
            self.free -= 1;
            self.dirty = true;
        }
    }

    fn rekey(&mut self, pos: usize, key: RankKey) {
        self.keys[pos] = key;
        self.dirty = true;
    }

    fn untaken(&self) -> impl Iterator<Item = &RankKey> + '_ {
        self.keys.iter().zip(&self.taken).filter(|(_, t)| !**t).map(|(k, _)| k)
    }
}

/// Machines found for one job.
pub(super) struct Found {
    /// One per member, in placement order.
    pub(super) ids: Vec<MachineId>,
    /// Their positions in the view (empty without a view).
    pos: Vec<usize>,
    /// The slowest current speed among them.
    pub(super) slowest: f64,
}

impl Scheduler {
    /// Sets how many queued jobs and free machines make a pass use a working copy of the
    /// free machines (default 64; 0 = always, `usize::MAX` = never). Only speed differs:
    /// the decisions are the same either way, which is what this knob is for (tests).
    #[doc(hidden)]
    pub fn set_pass_view_threshold(&mut self, n: usize) {
        self.view_threshold = n;
    }

    /// Starts a pass's bookkeeping: a view if the pass may place many jobs.
    pub(super) fn begin_pass(&mut self) {
        self.view = (self.queue.len().min(self.index.len()) >= self.view_threshold).then(|| FreeView::new(&self.index));
        self.pass_placed.clear();
    }

    /// Ends a pass: writes the view back to the index and removes the placed jobs from
    /// the queue.
    pub(super) fn end_pass(&mut self) {
        if let Some(v) = self.view.take() {
            if v.dirty {
                self.index = v.untaken().copied().collect();
            }
        }
        self.flush_ends();
        let mut placed = std::mem::take(&mut self.pass_placed);
        self.queue.remove_all(&mut placed);
        placed.clear();
        self.pass_placed = placed;
    }

    /// Merges the predicted ends of the jobs started so far in this pass into `ends`.
    pub(super) fn flush_ends(&mut self) {
        if self.pass_ends.len() >= 16 && self.pass_ends.len() * 4 >= self.ends.len() {
            self.pass_ends.sort_unstable();
            let mut batch: BTreeSet<(Millis, JobId)> = self.pass_ends.drain(..).collect();
            self.ends.append(&mut batch);
        } else {
            for e in self.pass_ends.drain(..) {
                self.ends.insert(e);
            }
        }
    }

    /// How many machines can take a member now.
    pub(super) fn free_len(&self) -> usize {
        self.view.as_ref().map_or(self.index.len(), |v| v.free)
    }

    /// The free machines' keys (any order) with at least `mem` bytes free.
    pub(super) fn free_keys_with(&self, mem: u64) -> Vec<RankKey> {
        match &self.view {
            Some(v) => v.untaken().filter(|k| k.free_memory >= mem).copied().collect(),
            None => self.index.iter().filter(|k| k.free_memory >= mem).copied().collect(),
        }
    }

    /// The fastest current speed among the free machines (0 if none).
    pub(super) fn max_free_speed(&self, min_cpu_share: f64) -> f64 {
        let f = |k: &RankKey| k.current_speed(min_cpu_share);
        match &self.view {
            Some(v) => v.untaken().map(f).fold(0.0, f64::max),
            None => self.index.iter().map(f).fold(0.0, f64::max),
        }
    }

    /// The first `width` free machines in placement order with `mem` bytes free, skipping
    /// `exclude`; `None` if there are fewer.
    pub(super) fn find_machines(&mut self, width: u32, mem: u64, exclude: Option<&IdSet<MachineId>>) -> Option<Found> {
        let width = width as usize;
        if width > self.free_len() {
            return None;
        }
        let floor = self.config.predict.min_cpu_share;
        let mut ids = Vec::with_capacity(width);
        let mut pos = Vec::new();
        let mut slowest = f64::INFINITY;
        let excluded = |id: &MachineId| exclude.is_some_and(|x| x.contains(id));
        match &mut self.view {
            None => {
                for k in &self.index {
                    if k.free_memory < mem || excluded(&k.id) {
                        continue;
                    }
                    ids.push(k.id);
                    slowest = slowest.min(k.current_speed(floor));
                    if ids.len() == width {
                        return Some(Found { ids, pos, slowest });
                    }
                }
                None
            }
            Some(v) => {
                pos.reserve(width);
                let start = if mem > 0 { v.mem_cursor.range(..=mem).next_back().map_or(0, |(_, &p)| p) } else { 0 };
                let mut first_fit: Option<usize> = None;
                let mut i = v.find(start);
                let n = v.keys.len();
                while i < n {
                    let k = v.keys[i];
                    if k.free_memory >= mem {
                        first_fit.get_or_insert(i);
                        if !excluded(&k.id) {
                            ids.push(k.id);
                            pos.push(i);
                            slowest = slowest.min(k.current_speed(floor));
                            if ids.len() == width {
                                break;
                            }
                        }
                    }
                    i = v.find(i + 1);
                }
                if mem > 0 {
                    // Every untaken position before `first_fit` (or all, if none) lacks `mem`.
                    v.mem_cursor.insert(mem, first_fit.unwrap_or(n));
                }
                (ids.len() == width).then_some(Found { ids, pos, slowest })
            }
        }
    }

    /// After a member was placed on `found.ids[i]`: takes the machine out of the free
    /// machines if it is full, or re-keys it with its smaller free memory.
    pub(super) fn after_placement(&mut self, found: &Found, i: usize) {
        let id = found.ids[i];
        let Some(e) = self.machines.get_mut(&id) else { return };
        let full = e.guests.len() as u64 >= u64::from(e.m.slots);
        let old = e.key;
        let new = (!full).then(|| rank_key_with_guests(&e.m, e.memory_in_use));
        let same = match (&old, &new) {
            (Some(a), Some(b)) => a.identical(b),
            (None, None) => true,
            _ => false,
        };
        if same {
            return;
        }
        e.key = new;
        match &mut self.view {
            Some(v) => {
                let p = found.pos[i];
                match new {
                    None => v.take(p),
                    Some(k) => v.rekey(p, k),
                }
            }
            None => {
                if let Some(k) = old {
                    self.index.remove(&k);
                }
                if let Some(k) = new {
                    self.index.insert(k);
                }
            }
        }
    }
}
