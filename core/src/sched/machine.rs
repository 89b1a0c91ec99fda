//! Machines as the scheduler sees them: the owner's terms and the machine's current
//! state, reported by the driver in `Event::MachineUpdated` snapshots.
//!
//! *Effective speed* is `S_b × (1 − load)`: the base speed from a standard benchmark
//! (seed 002 §4.1) scaled by the share of the CPU the owner leaves (`load` is the owner's
//! CPU fraction and excludes guests). The *social contract* (seed 004 §3.5) enters as
//! `interruptions_left`: a machine whose owner has used up today's interruption budget
//! takes no guest work until the budget resets (the driver reports the new count).

use super::ids::MachineId;
use super::memory::MachineMemory;
use super::time::Millis;
use serde::{Deserialize, Serialize};

fn one() -> u32 {
    1
}

/// A machine's reported state. The scheduler adds its own bookkeeping of the guests it
/// placed there (slots and memory in use); everything here comes from the driver.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Machine {
    /// The machine's id.
    pub id: MachineId,
    /// The owner's name (for reports; placement does not use it).
    pub owner: String,
    /// Base speed `S_b` from the standard benchmark, finite and > 0 (1.0 = reference).
    pub base_speed: f64,
    /// The owner's current CPU use as a fraction 0..=1 (guests excluded). Values outside
    /// are clamped.
    pub load: f64,
    /// Memory free for guests, bytes, not counting the guests the scheduler placed here
    /// (the scheduler subtracts their declared needs itself).
    pub free_memory: u64,
    /// Interruptions the owner's daily budget still allows today. 0 = no guests.
    pub interruptions_left: u32,
    /// The owner's rules allow guests now (schedule, pause, "donate now").
    pub allowed: bool,
    /// The agent has recruited the machine: idle long enough and donating now.
    pub available: bool,
    /// Since when the machine has been idle; longer idle predicts longer idle ahead
    /// (seed 004 §3.5, Douglis & Ousterhout), so placement prefers it on ties.
    pub idle_since: Millis,
    /// How many guests may run here at once (default 1, as WINNER: one process per
    /// workstation, to spare the owner's memory).
    #[serde(default = "one")]
    pub slots: u32,
    /// The agent's live memory report (seed 001), if it sends one: M, each guest's
    /// measured working set, and memory pressure. `slots` is the machine's CT. Without a
    /// report only `free_memory` is checked.
    #[serde(default)]
    pub memory: Option<MachineMemory>,
}

impl Machine {
    /// A convenience constructor: available, allowed, no owner load, 10 interruptions
    /// left, no free memory recorded (jobs that declare a memory need will not fit until
    /// `free_memory` is set), idle since the epoch, one slot.
    pub fn new(id: u64, owner: impl Into<String>, base_speed: f64) -> Machine {
        Machine {
            id: MachineId(id),
            owner: owner.into(),
            base_speed,
            load: 0.0,
            free_memory: 0,
            interruptions_left: 10,
            allowed: true,
            available: true,
            idle_since: Millis::ZERO,
            slots: 1,
            memory: None,
        }
    }

    /// Effective speed `S_b × (1 − load)`, with `load` clamped to 0..=1 (NaN counts as
    /// fully loaded). 0 on a machine the owner uses fully.
    pub(crate) fn effective_speed(&self) -> f64 {
        self.base_speed * (1.0 - clamp_load(self.load))
    }

    /// How long the machine has been idle at `now`, ms (0 if `idle_since` is later).
    pub fn idle_for_ms(&self, now: Millis) -> u64 {
        now.saturating_ms_since(self.idle_since)
    }

    /// The contract's part of eligibility: available, allowed now and with
    /// interruptions left today. (Free slots and memory are checked by the scheduler.)
    pub(crate) fn contract_allows_guests(&self) -> bool {
        self.available && self.allowed && self.interruptions_left > 0
    }
}

/// `load` clamped to 0..=1; NaN is treated as 1 (unknown = assume the owner uses it).
pub(crate) fn clamp_load(load: f64) -> f64 {
    if load.is_nan() {
        1.0
    } else {
        load.clamp(0.0, 1.0)
    }
}
