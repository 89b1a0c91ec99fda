//! The free machines: eligible machines with a free slot, in placement order.
//!
//! Kept as a sorted vector of [`RankKey`]s with tombstones, plus a small `BTreeSet` of
//! keys added since the vector was last rebuilt:
//! * a pass takes machines from the front of the vector; taking one marks it dead, and a
//!   "next live position" forest (union–find with path compression) makes skipping dead
//!   entries nearly free, so a pass that starts thousands of jobs never rebalances a tree
//!   and never copies the index;
//! * per power of two of memory, a cursor remembers the position before which no live
//!   machine has that much free memory, so jobs needing much memory do not rescan
//!   machines with little (free memory of a live entry only ever goes down until it is
//!   re-keyed outside a pass, which goes through the pending set; rebuilding the vector
//!   resets the cursors);
//! * outside passes, a machine whose key changes (freed slot, new report) is killed in
//!   the vector and its new key goes to the pending set. A pass walks the vector and the
//!   pending set together in placement order; only when more than [`MERGE_PENDING`] keys
//!   are pending, or the dead outnumber the live, does a pass first rebuild the vector
//!   (one sequential O(n) merge), so a small pass on a large idle pool stays cheap.
//!
//! Within a pass the free machines only ever lose slots or memory, which is what makes
//! the per-pass shortcuts (fail memo, memory cursors, Backfill's speed bound) valid.

use super::hash::IdSet;
use super::ids::MachineId;
use super::placement::RankKey;
use std::collections::BTreeSet;

/// A pass merges the pending keys into the sorted vector first when more than this many
/// are pending.
pub(super) const MERGE_PENDING: usize = 32;

/// The free machines. See the module docs.
#[derive(Clone, Debug)]
pub(super) struct FreeMachines {
    keys: Vec<RankKey>,
    dead: Vec<bool>,
    /// `next[i] == i`: position `i` is live (`next[len]` is the end sentinel); otherwise
    /// a pointer towards the next live position.
    next: Vec<u32>,
    live: usize,
    pending: BTreeSet<RankKey>,
    /// `mem_cursor[j]`: a position before which no live entry has `2^j` bytes free.
    mem_cursor: [usize; 64],
    /// Rebuild at every pass start even without changes (tests compare both ways).
    always_rebuild: bool,
}

impl Default for FreeMachines {
    fn default() -> Self {
        FreeMachines {
            keys: Vec::new(),
            dead: Vec::new(),
            next: vec![0],
            live: 0,
            pending: BTreeSet::new(),
            mem_cursor: [0; 64],
            always_rebuild: false,
        }
    }
}

impl FreeMachines {
    /// Machines that can take a member now.
    pub(super) fn len(&self) -> usize {
        self.live + self.pending.len()
    }

    /// Adds a machine's key (outside passes).
    pub(super) fn insert(&mut self, key: RankKey) {
        self.pending.insert(key);
    }

    /// Removes a machine's key.
    pub(super) fn remove(&mut self, key: &RankKey) {
        if self.pending.remove(key) {
            return;
        }
        if let Ok(p) = self.keys.binary_search(key) {
            self.kill(p);
        }
    }

    fn kill(&mut self, p: usize) {
        if !self.dead[p] {
            self.dead[p] = true;
            self.next[p] = p as u32 + 1;
            self.live -= 1;
        }
    }

    /// Merges the pending keys in and drops the dead ones, if there is anything to do
    /// (or always, in the test mode).
    pub(super) fn settle(&mut self) {
        let dead = self.keys.len() - self.live;
        if self.pending.len() <= MERGE_PENDING && dead <= self.live + MERGE_PENDING && !self.always_rebuild {
            return;
        }
        let pending = std::mem::take(&mut self.pending);
        let mut merged = Vec::with_capacity(self.live + pending.len());
        let mut old = self.keys.iter().zip(&self.dead).filter(|(_, d)| !**d).map(|(k, _)| *k).peekable();
        for k in pending {
            while old.peek().is_some_and(|o| *o < k) {
                merged.push(old.next().expect("peeked"));
            }
            merged.push(k);
        }
        merged.extend(old);
        let n = merged.len();
        self.keys = merged;
        self.dead = vec![false; n];
        self.next = (0..=n as u32).collect();
        self.live = n;
        self.mem_cursor = [0; 64];
    }

    /// All keys, live entries then pending ones (not in placement order).
    fn all(&self) -> impl Iterator<Item = &RankKey> + '_ {
        self.keys.iter().zip(&self.dead).filter(|(_, d)| !**d).map(|(k, _)| k).chain(&self.pending)
    }
}

/// The first live position `≥ i` in a "next live" forest (`len` if none), compressing
/// the path.
fn find_live(next: &mut [u32], i: usize) -> usize {
    let mut root = i;
    while next[root] as usize != root {
        root = next[root] as usize;
    }
    let mut j = i;
    while next[j] as usize != root {
        let n = next[j] as usize;
        next[j] = root as u32;
        j = n;
    }
    root
}

/// Where a found machine's key is.
#[derive(Clone, Copy)]
enum Loc {
    /// At this position of the sorted vector.
    Vec(usize),
    /// In the pending set, under this key.
    Pending(RankKey),
}

/// Machines found for one job.
pub(super) struct Found {
    /// One per member, in placement order.
    pub(super) ids: Vec<MachineId>,
    /// Where the first one's key is.
    first: Loc,
    /// Where the others' keys are (empty for one member: no allocation).
    rest: Vec<Loc>,
    /// The slowest current speed among them.
    pub(super) slowest: f64,
}

/// Finding machines during a pass.
impl FreeMachines {
    /// Makes every pass start from a rebuilt vector (tests: decisions must not differ).
    pub(super) fn set_always_rebuild(&mut self, on: bool) {
        self.always_rebuild = on;
    }

    /// The keys (any order) with at least `mem` bytes free.
    pub(super) fn keys_with(&self, mem: u64) -> Vec<RankKey> {
        self.all().filter(|k| k.free_memory >= mem).copied().collect()
    }

    /// The fastest current speed among the free machines (0 if none).
    pub(super) fn max_speed(&self, min_cpu_share: f64) -> f64 {
        self.all().map(|k| k.current_speed(min_cpu_share)).fold(0.0, f64::max)
    }

    /// During a pass: the first `width` free machines in placement order with `mem` bytes
    /// free, skipping `exclude`; `None` if there are fewer. `floor` is the least CPU share
    /// a machine's current speed counts (`PredictConfig::min_cpu_share`).
    pub(super) fn find(&mut self, width: u32, mem: u64, exclude: Option<&IdSet<MachineId>>, floor: f64) -> Option<Found> {
        let width = width as usize;
        if width > self.len() {
            return None;
        }
        let FreeMachines { keys, next, pending, mem_cursor, .. } = self;
        let mut ids = Vec::new();
        let mut first = Loc::Vec(0);
        let mut rest = Vec::new();
        let mut slowest = f64::INFINITY;
        // Memory bucket: 2^bucket <= mem.
        let bucket = (mem > 0).then(|| mem.ilog2() as usize);
        let bucket_min = bucket.map_or(0, |b| 1u64 << b);
        let start = bucket.map_or(0, |b| mem_cursor[b]);
        let mut first_in_bucket: Option<usize> = None;
        let n = keys.len();
        let mut i = find_live(next, start.min(n));
        let mut pend = pending.iter().peekable();
        loop {
            // The next key in placement order, from the vector or the pending set.
            let from_vec = match (i < n, pend.peek()) {
                (false, None) => break,
                (true, None) => true,
                (false, Some(_)) => false,
                (true, Some(p)) => keys[i] < **p,
            };
            let (k, loc) = if from_vec {
                let at = i;
                i = find_live(next, i + 1);
                (keys[at], Loc::Vec(at))
            } else {
                let k = *pend.next().expect("peeked");
                (k, Loc::Pending(k))
            };
            if let Loc::Vec(at) = loc {
                if k.free_memory >= bucket_min {
                    first_in_bucket.get_or_insert(at);
                }
            }
            if k.free_memory < mem || exclude.is_some_and(|x| x.contains(&k.id)) {
                continue;
            }
            if ids.is_empty() {
                ids.reserve_exact(width);
                first = loc;
            } else {
                rest.push(loc);
            }
            ids.push(k.id);
            slowest = slowest.min(k.current_speed(floor));
            if ids.len() == width {
                break;
            }
        }
        if let Some(b) = bucket {
            // Every live vector position before `first_in_bucket` has less than 2^b free;
            // all do if the walk reached the end of the vector without one.
            match first_in_bucket {
                Some(p) => mem_cursor[b] = p,
                None if i >= n => mem_cursor[b] = n,
                None => {}
            }
        }
        (ids.len() == width).then_some(Found { ids, first, rest, slowest })
    }

    /// During a pass: the machine whose key is kept in the machine table as `order_key`,
    /// if it is still free with `id`, a free slot and `mem` bytes free. Its key's place in
    /// the order does not change during a pass, so `order_key` finds its current entry.
    pub(super) fn find_key(&self, order_key: &RankKey, id: MachineId, mem: u64, floor: f64) -> Option<Found> {
        let (key, loc) = match self.keys.binary_search(order_key) {
            Ok(p) if !self.dead[p] => (self.keys[p], Loc::Vec(p)),
            _ => {
                let k = *self.pending.get(order_key)?;
                (k, Loc::Pending(k))
            }
        };
        (key.id == id && key.free_memory >= mem && key.free_slots > 0).then(|| Found {
            ids: vec![id],
            first: loc,
            rest: Vec::new(),
            slowest: key.current_speed(floor),
        })
    }

    /// During a pass, after a member needing `mem` bytes was placed on `found.ids[i]`:
    /// takes the machine out if that was its last free slot, or
    /// re-keys it with one slot and `mem` bytes less (in place in the vector: its position
    /// in the order does not depend on them). Needs no machine look-up.
    pub(super) fn take(&mut self, found: &Found, i: usize, mem: u64) {
        let loc = if i == 0 { found.first } else { found.rest[i - 1] };
        let old = match loc {
            Loc::Vec(p) => self.keys[p],
            Loc::Pending(k) => k,
        };
        // Its last slot, or (with a memory report) the member took it to MT: out.
        let new = (old.free_slots > 1 && mem <= old.strict_free).then(|| RankKey {
            free_slots: old.free_slots - 1,
            free_memory: old.free_memory.min(old.strict_free).saturating_sub(mem),
            strict_free: old.strict_free.saturating_sub(mem),
            ..old
        });
        match loc {
            Loc::Vec(p) => match new {
                None => self.kill(p),
                Some(k) => self.keys[p] = k,
            },
            Loc::Pending(k) => {
                self.pending.remove(&k);
                if let Some(k) = new {
                    self.pending.insert(k);
                }
            }
        }
    }
}
