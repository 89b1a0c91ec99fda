//! Placement: which machines a job goes to, the same rule for every algorithm.
//!
//! Seed 002 §3.2: a *greedy* scheme gives the selected job the currently fastest idle
//! machine(s). Here "fastest" is the effective speed `S_b × (1 − load)`; exact ties are
//! broken by the social contract, preferring the machine whose owner has **more
//! interruptions left** today, then the one **idle longer** (`now − idle_since`; a long
//! idle period predicts a long one ahead, seed 004 §3.5), then the lower id. The order is
//! [`RankKey`]'s: [`rank_key`] and [`placement_order`] expose it, and the scheduler keeps
//! its eligible machines in a `BTreeSet<RankKey>` so a pass takes them from the front.
//!
//! *Eligible* ([`check_eligible`]): available, allowed now, at least one interruption
//! left, a free slot, and enough free memory for one member. A gang takes the first
//! `width` eligible machines in this order, all distinct, or nothing.
//!
//! Ordering by `idle_since` ascending equals ordering by idle time descending for every
//! `now ≥ idle_since`, so the key does not depend on `now` and needs no re-sorting as time
//! passes.

use super::ids::MachineId;
use super::machine::Machine;
use super::time::Millis;
use serde::Serialize;
use std::cmp::Ordering;
use std::fmt;

/// A machine's position in the placement order; smaller = placed first.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct RankKey {
    /// Effective speed `S_b × (1 − load)` (higher first).
    pub speed: f64,
    /// Interruptions left today (more first).
    pub interruptions_left: u32,
    /// Idle since (earlier, i.e. idle longer, first).
    pub idle_since: Millis,
    /// The id (lower first), so the order is total.
    pub id: MachineId,
    /// Base speed `S_b` (not part of the order; kept so a pass can compute the guest's
    /// current speed without looking the machine up).
    pub base_speed: f64,
    /// Bytes free for a new guest (not part of the order; kept so a pass can check
    /// memory without looking the machine up).
    pub free_memory: u64,
    /// Bytes a guest may take once another is here: `free_memory` but for an empty
    /// machine with a memory report, which takes any job that fits its memory at all
    /// (seed 001: `FM(k) > WS(d)`), whereas a second guest must keep the oversize below
    /// MT. `u64::MAX` without a report.
    pub strict_free: u64,
    /// Free slots (not part of the order; kept so a pass can tell when the machine is
    /// full without looking it up).
    pub free_slots: u32,
}

impl RankKey {
    /// Every field equal, `base_speed` included (bitwise for the floats).
    pub(crate) fn identical(&self, other: &RankKey) -> bool {
        self.speed.to_bits() == other.speed.to_bits()
            && self.base_speed.to_bits() == other.base_speed.to_bits()
            && self.interruptions_left == other.interruptions_left
            && self.idle_since == other.idle_since
            && self.id == other.id
            && self.free_memory == other.free_memory
            && self.strict_free == other.strict_free
            && self.free_slots == other.free_slots
    }

    /// The speed a guest gets: `S_b · max(1 − load, min_cpu_share)`, as
    /// [`super::predict::current_speed`].
    pub(crate) fn current_speed(&self, min_cpu_share: f64) -> f64 {
        self.speed.max(self.base_speed * min_cpu_share)
    }
}

impl PartialEq for RankKey {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for RankKey {}

impl PartialOrd for RankKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for RankKey {
    fn cmp(&self, other: &Self) -> Ordering {
        other
            .speed
            .total_cmp(&self.speed)
            .then_with(|| other.interruptions_left.cmp(&self.interruptions_left))
            .then_with(|| self.idle_since.cmp(&other.idle_since))
            .then_with(|| self.id.cmp(&other.id))
    }
}

/// The placement key of `m` with no guests (a NaN speed sorts as 0, i.e. last among the
/// loaded).
pub fn rank_key(m: &Machine) -> RankKey {
    rank_key_with_guests(m, 0, 0)
}

/// The placement key of `m` holding `guests` guests that declared `memory_in_use` bytes.
pub(crate) fn rank_key_with_guests(m: &Machine, guests: u32, memory_in_use: u64) -> RankKey {
    let speed = m.effective_speed();
    RankKey {
        speed: if speed.is_nan() { 0.0 } else { speed },
        interruptions_left: m.interruptions_left,
        idle_since: m.idle_since,
        id: m.id,
        base_speed: m.base_speed,
        free_memory: m.free_memory.saturating_sub(memory_in_use),
        strict_free: u64::MAX,
        free_slots: m.slots.saturating_sub(guests),
    }
}

/// `Less` when `a` is placed before `b`: faster effective speed first; on equal speed,
/// more interruptions left; then idle longer; then lower id.
pub fn placement_order(a: &Machine, b: &Machine) -> Ordering {
    rank_key(a).cmp(&rank_key(b))
}

/// The ids of the machines whose contract allows guests (available, allowed, budget
/// left), in placement order. Slots and memory are the scheduler's bookkeeping and are
/// not checked here; see [`check_eligible`].
pub fn rank_machines<'a>(machines: impl IntoIterator<Item = &'a Machine>) -> Vec<MachineId> {
    let mut keys: Vec<RankKey> = machines.into_iter().filter(|m| m.contract_allows_guests()).map(rank_key).collect();
    keys.sort_unstable();
    keys.into_iter().map(|k| k.id).collect()
}

/// Why a machine cannot take a member of a job now.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Ineligible {
    /// Not recruited / not donating now.
    NotAvailable,
    /// The owner's rules do not allow guests now.
    NotAllowed,
    /// The owner's daily interruption budget is used up.
    NoInterruptionsLeft,
    /// Every slot holds a guest.
    NoFreeSlot,
    /// Less free memory than one member needs.
    NotEnoughMemory {
        /// Bytes free for a new guest.
        free: u64,
        /// Bytes one member needs.
        needed: u64,
    },
    /// The machine reports its memory (seed 001) and the member would bring its
    /// oversize to MT (or it is there already).
    OverMemoryThreshold {
        /// `Q_o` with the member.
        oversize: f64,
        /// MT.
        threshold: f64,
    },
}

impl fmt::Display for Ineligible {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Ineligible::NotAvailable => f.write_str("not available"),
            Ineligible::NotAllowed => f.write_str("the owner does not allow guests now"),
            Ineligible::NoInterruptionsLeft => f.write_str("the owner's interruption budget for today is used up"),
            Ineligible::NoFreeSlot => f.write_str("no free slot"),
            Ineligible::NotEnoughMemory { free, needed } => write!(f, "{free} bytes free, {needed} needed"),
            Ineligible::OverMemoryThreshold { oversize, threshold } => {
                write!(f, "memory oversize {:+.1} % would reach the threshold MT {:+.1} %", oversize * 100.0, threshold * 100.0)
            }
        }
    }
}

/// Whether `m`, already holding `guests` guests that declared `memory_in_use` bytes, can
/// take one member needing `memory_needed` bytes. The first reason found is returned, in
/// the order of [`Ineligible`]'s variants.
pub fn check_eligible(m: &Machine, guests: u32, memory_in_use: u64, memory_needed: u64) -> Result<(), Ineligible> {
    if !m.available {
        return Err(Ineligible::NotAvailable);
    }
    if !m.allowed {
        return Err(Ineligible::NotAllowed);
    }
    if m.interruptions_left == 0 {
        return Err(Ineligible::NoInterruptionsLeft);
    }
    if guests >= m.slots {
        return Err(Ineligible::NoFreeSlot);
    }
    let free = m.free_memory.saturating_sub(memory_in_use);
    if free < memory_needed {
        return Err(Ineligible::NotEnoughMemory { free, needed: memory_needed });
    }
    Ok(())
}
