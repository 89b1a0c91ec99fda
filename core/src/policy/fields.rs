//! The policy's numeric configuration fields, each defined once with its default, allowed
//! range and unit (`Field`). The `Default` impls of `config.rs` take their values from
//! here, and `config.rs::numeric_fields` lists every field's current value beside its
//! range for validation (the agent's configuration checker names the field and the range
//! from it). This file imports nothing of the policy, so `config.rs` alone imports it.

use crate::field::Field;

/// Owner CPU (fraction of the machine) below which the machine can be idle.
pub(crate) const OWNER_CPU_MAX: Field<f64> =
    Field { name: "availability.owner_cpu_max", default: 0.20, min: 0.01, max: 1.0, unit: "fraction of the machine" };
/// Window over which owner memory must be steady.
pub(crate) const MEMORY_WINDOW_S: Field<u64> =
    Field { name: "availability.memory_window_s", default: 60, min: 5, max: 3600, unit: "seconds" };
/// Largest growth of owner memory over the window.
pub(crate) const MEMORY_GROWTH_MAX: Field<f64> =
    Field { name: "availability.memory_growth_max", default: 0.05, min: 0.0, max: 1.0, unit: "fraction of total memory" };
/// Continuous idleness required before guest work is recruited (seed 004: 180 s).
pub(crate) const RECRUITMENT_THRESHOLD_S: Field<u64> =
    Field { name: "availability.recruitment_threshold_s", default: 180, min: 0, max: 86_400, unit: "seconds" };
/// Owner CPU below which a present owner counts as light (lend while light).
pub(crate) const LIGHT_CPU_MAX: Field<f64> =
    Field { name: "availability.light_cpu_max", default: 0.20, min: 0.01, max: 1.0, unit: "fraction of the machine" };
/// How long the owner must have stayed light before guest work starts.
pub(crate) const LIGHT_FOR_S: Field<u64> = Field { name: "availability.light_for_s", default: 60, min: 1, max: 3600, unit: "seconds" };
/// The daily interruption budget (seed 004 §3.5).
pub(crate) const INTERRUPTIONS_PER_DAY: Field<u32> =
    Field { name: "budget.interruptions_per_day", default: 5, min: 0, max: 20, unit: "interruptions per local day" };
/// How long after guest work an owner's return still counts as an interruption.
pub(crate) const AFTER_GUEST_WINDOW_S: Field<u64> =
    Field { name: "budget.after_guest_window_s", default: 60, min: 0, max: 3600, unit: "seconds" };
/// Owner utilisation h up to which lingering is allowed.
pub(crate) const LINGER_CPU_MAX: Field<f64> =
    Field { name: "eviction.linger_cpu_max", default: 0.20, min: 0.0, max: 1.0, unit: "fraction of the machine" };
/// Window for the owner utilisation h.
pub(crate) const LINGER_WINDOW_S: Field<u64> = Field { name: "eviction.linger_window_s", default: 10, min: 1, max: 600, unit: "seconds" };
/// PM: how long guest work stays frozen before it is evicted.
pub(crate) const PAUSE_S: Field<u64> = Field { name: "eviction.pause_s", default: 300, min: 0, max: 86_400, unit: "seconds" };
/// Estimated migration cost until the guest runtime measures one.
pub(crate) const MIGRATION_COST_S: Field<u64> =
    Field { name: "eviction.migration_cost_s", default: 30, min: 0, max: 86_400, unit: "seconds" };
/// Seconds between the checkpoint signal and the kill.
pub(crate) const KILL_GRACE_S: Field<u64> = Field { name: "eviction.kill_grace_s", default: 10, min: 0, max: 600, unit: "seconds" };
/// No guest work while the hottest CPU sensor is at or above this.
pub(crate) const CPU_TEMP_MAX_C: Field<f64> = Field { name: "rules.cpu_temp_max_c", default: 90.0, min: 30.0, max: 120.0, unit: "°C" };
