//! The policy's numeric configuration fields, each defined once with its default, allowed
//! range and unit (`Field`). The `Default` impls of `config.rs` take their values from
//! here, and [`numeric_fields`] lists every field's current value beside its range for
//! validation (the agent's configuration checker names the field and the range from it).

use super::config::{Availability, Budget, Eviction, Rules};
use crate::field::{Checked, Field};

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

/// Every numeric field of the policy's sections with its current value and range, in the
/// order of the configuration file.
pub fn numeric_fields(a: &Availability, b: &Budget, e: &Eviction, r: &Rules) -> Vec<Checked> {
    vec![
        OWNER_CPU_MAX.check(a.owner_cpu_max),
        MEMORY_WINDOW_S.check(a.memory_window_s),
        MEMORY_GROWTH_MAX.check(a.memory_growth_max),
        RECRUITMENT_THRESHOLD_S.check(a.recruitment_threshold_s),
        LIGHT_CPU_MAX.check(a.light_cpu_max),
        LIGHT_FOR_S.check(a.light_for_s),
        INTERRUPTIONS_PER_DAY.check(b.interruptions_per_day),
        AFTER_GUEST_WINDOW_S.check(b.after_guest_window_s),
        LINGER_CPU_MAX.check(e.linger_cpu_max),
        LINGER_WINDOW_S.check(e.linger_window_s),
        PAUSE_S.check(e.pause_s),
        MIGRATION_COST_S.check(e.migration_cost_s),
        KILL_GRACE_S.check(e.kill_grace_s),
        CPU_TEMP_MAX_C.check(r.cpu_temp_max_c),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::config::PolicyConfig;

    fn default_rows() -> Vec<Checked> {
        let c = PolicyConfig::default();
        numeric_fields(&c.availability, &c.budget, &c.eviction, &c.rules)
    }

    #[test]
    fn every_default_lies_inside_its_range() {
        let rows = default_rows();
        assert_eq!(rows.len(), 14, "a numeric policy field was added or dropped: list it in numeric_fields");
        for row in rows {
            assert!(row.in_range(), "default of {} = {} lies outside {}", row.name, row.value, row.range_text());
        }
    }

    #[test]
    fn names_are_distinct_and_dotted() {
        let rows = default_rows();
        for (i, r) in rows.iter().enumerate() {
            assert!(r.name.contains('.') && !r.unit.is_empty(), "{r:?}");
            assert!(rows[..i].iter().all(|o| o.name != r.name), "{} twice", r.name);
        }
    }

    #[test]
    fn a_value_outside_the_range_is_refused_and_nan_too() {
        let mut c = PolicyConfig::default();
        c.budget.interruptions_per_day = 21;
        c.availability.owner_cpu_max = f64::NAN;
        let bad: Vec<_> = numeric_fields(&c.availability, &c.budget, &c.eviction, &c.rules)
            .into_iter()
            .filter(|r| !r.in_range())
            .map(|r| (r.name, r.range_text()))
            .collect();
        assert_eq!(
            bad,
            vec![("availability.owner_cpu_max", "0.01..=1".to_string()), ("budget.interruptions_per_day", "0..=20".to_string())]
        );
    }
}
