//! The policy's own section of the owner's configuration: the availability definition,
//! the social contract (budget), the eviction mode and the rules of when the machine may
//! be used. Pure values; each numeric field's default, range and unit are one constant
//! in `fields.rs`. The agent's whole configuration file (with its IO and error messages)
//! lives in `agent-core::config`, holds these sections unchanged and checks them against
//! [`numeric_fields`].

use super::fields;
use crate::field::Checked;
use chrono::{NaiveTime, Weekday};
use serde::{Deserialize, Serialize};

/// Everything the policy reads from the configuration.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PolicyConfig {
    pub availability: Availability,
    pub budget: Budget,
    pub eviction: Eviction,
    pub rules: Rules,
}

/// How guest work is treated when the owner comes back (seed 000).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "kebab-case")]
pub enum EvictionMode {
    /// IE: stop guest work at once (checkpoint signal, then kill after a grace).
    ImmediateEviction,
    /// PM: keep it frozen for a fixed pause, then evict if the owner is still there.
    PauseAndMigrate,
    /// LL: keep it running at lowest priority while the owner is only lightly active,
    /// migrating after `T_lingr`.
    LingerLonger,
    /// LF: linger and never migrate.
    LingerForever,
}

impl EvictionMode {
    /// The short name used in seed 000 (IE, PM, LL, LF).
    pub fn short(self) -> &'static str {
        match self {
            Self::ImmediateEviction => "IE",
            Self::PauseAndMigrate => "PM",
            Self::LingerLonger => "LL",
            Self::LingerForever => "LF",
        }
    }
}

/// The availability definition and the recruitment threshold (seed 004, §3.4).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(default, deny_unknown_fields)]
pub struct Availability {
    /// Owner CPU (fraction of the machine) below which the machine can be idle; 1.0
    /// leaves CPU out of the availability definition.
    pub owner_cpu_max: f64,
    /// Window over which owner memory must be steady, seconds.
    pub memory_window_s: u64,
    /// Largest growth of owner memory over the window, as a fraction of total memory.
    pub memory_growth_max: f64,
    /// Continuous idleness required before guest work is recruited, seconds.
    pub recruitment_threshold_s: u64,
    /// Lend while light (seed 000's lingering that starts work): new guest work may also
    /// start while the owner is present, once every reading for `light_for_s` has shown
    /// their CPU below `light_cpu_max` (and their memory steady). Off by default: the
    /// owner opts in (`lull limits --lend-while-light on`, or Settings).
    pub lend_while_light: bool,
    /// l: owner CPU (fraction of the machine, guests excluded) below which a present
    /// owner counts as light. Seed 000 finds lingering pays up to 20 % local utilisation
    /// (§5.2, Fig. 8; §7.1) with about 1 % slowdown of the owner's jobs (§5.1, Fig. 7).
    /// 1.0 (the whole machine) leaves CPU out of the light test, as `owner_cpu_max` does.
    pub light_cpu_max: f64,
    /// How long the owner must have stayed light before guest work starts, seconds (seed
    /// 000's traces call a machine idle after one minute of low use).
    pub light_for_s: u64,
}

/// The social contract (seed 004, §3.5).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(default, deny_unknown_fields)]
pub struct Budget {
    /// At most this many interruptions per local day; then the machine leaves the pool
    /// until the next local day.
    pub interruptions_per_day: u32,
    /// An owner returning within this many seconds after guest work finished still
    /// counts as interrupted (they may find their state changed by it).
    pub after_guest_window_s: u64,
}

/// What happens to guest work when the owner returns (seed 000).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(default, deny_unknown_fields)]
pub struct Eviction {
    pub mode: EvictionMode,
    /// Owner utilisation h (over `linger_window_s`) up to which lingering is allowed.
    pub linger_cpu_max: f64,
    /// Window for the owner utilisation h, seconds.
    pub linger_window_s: u64,
    /// PM: how long guest work stays frozen before it is evicted, seconds.
    pub pause_s: u64,
    /// Estimated migration cost T_migr = suspend + image/bandwidth + resume, seconds,
    /// until the guest runtime measures one.
    pub migration_cost_s: u64,
    /// Seconds between the checkpoint signal and the kill.
    pub kill_grace_s: u64,
}

/// When the machine may be used at all.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(default, deny_unknown_fields)]
pub struct Rules {
    /// Donate while running on battery (default false: "not on battery").
    pub allow_on_battery: bool,
    /// No guest work while the hottest CPU sensor is at or above this, °C.
    pub cpu_temp_max_c: f64,
    /// Allowed hours per weekday, e.g. `mon = ["09:00-12:00", "13:00-17:00"]`. A day
    /// not listed is allowed all day; an empty list means not at all that day.
    pub hours: AllowedHours,
    /// Programs that hold the machine while they run (games, video calls, renders): no
    /// guest work then, and evicting guests for them is no interruption. Matched by
    /// executable name (`steam`), or by full path when the entry starts with `/`.
    pub exclusive_programs: Vec<String>,
}

/// Allowed hours, one list of `HH:MM-HH:MM` ranges per weekday.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(default, deny_unknown_fields)]
pub struct AllowedHours {
    pub mon: Option<Vec<String>>,
    pub tue: Option<Vec<String>>,
    pub wed: Option<Vec<String>>,
    pub thu: Option<Vec<String>>,
    pub fri: Option<Vec<String>>,
    pub sat: Option<Vec<String>>,
    pub sun: Option<Vec<String>>,
}

impl Default for Availability {
    fn default() -> Self {
        Self {
            owner_cpu_max: fields::OWNER_CPU_MAX.default,
            memory_window_s: fields::MEMORY_WINDOW_S.default,
            memory_growth_max: fields::MEMORY_GROWTH_MAX.default,
            recruitment_threshold_s: fields::RECRUITMENT_THRESHOLD_S.default,
            lend_while_light: false,
            light_cpu_max: fields::LIGHT_CPU_MAX.default,
            light_for_s: fields::LIGHT_FOR_S.default,
        }
    }
}
impl Default for Budget {
    fn default() -> Self {
        Self { interruptions_per_day: fields::INTERRUPTIONS_PER_DAY.default, after_guest_window_s: fields::AFTER_GUEST_WINDOW_S.default }
    }
}
impl Default for Eviction {
    fn default() -> Self {
        Self {
            mode: EvictionMode::LingerLonger,
            linger_cpu_max: fields::LINGER_CPU_MAX.default,
            linger_window_s: fields::LINGER_WINDOW_S.default,
            pause_s: fields::PAUSE_S.default,
            migration_cost_s: fields::MIGRATION_COST_S.default,
            kill_grace_s: fields::KILL_GRACE_S.default,
        }
    }
}
impl Default for Rules {
    fn default() -> Self {
        Self {
            allow_on_battery: false,
            cpu_temp_max_c: fields::CPU_TEMP_MAX_C.default,
            hours: AllowedHours::default(),
            exclusive_programs: Vec::new(),
        }
    }
}

/// The longest entry of `rules.exclusive_programs` (a path can be long; a name is at
/// most 255 bytes on Linux).
pub(crate) const EXCLUSIVE_PROGRAM_MAX: usize = 4096;

impl Rules {
    /// The first entry of `exclusive_programs` that cannot name a program, as (dotted
    /// field, message): empty, surrounding blanks, control characters, a relative path,
    /// a path ending in `/`, or longer than `EXCLUSIVE_PROGRAM_MAX`.
    pub fn first_invalid_program(&self) -> Option<(String, String)> {
        for (i, p) in self.exclusive_programs.iter().enumerate() {
            let why = if p.trim().is_empty() {
                Some("is empty; give a program's name like \"steam\" or its full path")
            } else if p.trim() != p {
                Some("has blanks around the name")
            } else if p.chars().any(char::is_control) {
                Some("has control characters")
            } else if p.len() > EXCLUSIVE_PROGRAM_MAX {
                Some("is longer than 4096 bytes")
            } else if p.contains('/') && !p.starts_with('/') {
                Some("is a relative path; give the executable's name (\"blender\") or its full path (\"/opt/blender/blender\")")
            } else if p.ends_with('/') {
                Some("is a directory, not a program")
            } else {
                None
            };
            if let Some(why) = why {
                return Some((format!("rules.exclusive_programs[{i}]"), format!("{p:?} {why}")));
            }
        }
        None
    }
}

/// A parsed allowed-hours range within one day, `[start, end)` in minutes from midnight.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MinuteRange {
    pub start: u16,
    pub end: u16,
}

fn parse_hhmm(s: &str) -> Option<u16> {
    if s == "24:00" {
        return Some(24 * 60);
    }
    let t = NaiveTime::parse_from_str(s, "%H:%M").ok()?;
    Some((chrono::Timelike::hour(&t) * 60 + chrono::Timelike::minute(&t)) as u16)
}

/// Parses one `HH:MM-HH:MM` range (end after start; `24:00` allowed as end).
pub fn parse_range(s: &str) -> Option<MinuteRange> {
    let (a, b) = s.trim().split_once('-')?;
    let (start, end) = (parse_hhmm(a.trim())?, parse_hhmm(b.trim())?);
    (start < end && start < 24 * 60).then_some(MinuteRange { start, end })
}

impl AllowedHours {
    fn day(&self, wd: Weekday) -> (&'static str, &Option<Vec<String>>) {
        match wd {
            Weekday::Mon => ("mon", &self.mon),
            Weekday::Tue => ("tue", &self.tue),
            Weekday::Wed => ("wed", &self.wed),
            Weekday::Thu => ("thu", &self.thu),
            Weekday::Fri => ("fri", &self.fri),
            Weekday::Sat => ("sat", &self.sat),
            Weekday::Sun => ("sun", &self.sun),
        }
    }

    /// The allowed ranges for a weekday; `None` means all day.
    pub(crate) fn ranges(&self, wd: Weekday) -> Option<Vec<MinuteRange>> {
        self.day(wd).1.as_ref().map(|v| v.iter().filter_map(|s| parse_range(s)).collect())
    }

    /// The first entry that is not a valid range, as (dotted field, message).
    pub fn first_invalid(&self) -> Option<(String, String)> {
        for wd in [Weekday::Mon, Weekday::Tue, Weekday::Wed, Weekday::Thu, Weekday::Fri, Weekday::Sat, Weekday::Sun] {
            let (name, v) = self.day(wd);
            for (i, s) in v.iter().flatten().enumerate() {
                if parse_range(s).is_none() {
                    return Some((
                        format!("rules.hours.{name}[{i}]"),
                        format!("{s:?} is not a range like \"09:00-17:30\" (HH:MM-HH:MM, end after start, 00:00..=24:00)"),
                    ));
                }
            }
        }
        None
    }
}

/// Every numeric field of the policy's sections with its current value and range, in the
/// order of the configuration file.
pub fn numeric_fields(a: &Availability, b: &Budget, e: &Eviction, r: &Rules) -> Vec<Checked> {
    vec![
        fields::OWNER_CPU_MAX.check(a.owner_cpu_max),
        fields::MEMORY_WINDOW_S.check(a.memory_window_s),
        fields::MEMORY_GROWTH_MAX.check(a.memory_growth_max),
        fields::RECRUITMENT_THRESHOLD_S.check(a.recruitment_threshold_s),
        fields::LIGHT_CPU_MAX.check(a.light_cpu_max),
        fields::LIGHT_FOR_S.check(a.light_for_s),
        fields::INTERRUPTIONS_PER_DAY.check(b.interruptions_per_day),
        fields::AFTER_GUEST_WINDOW_S.check(b.after_guest_window_s),
        fields::LINGER_CPU_MAX.check(e.linger_cpu_max),
        fields::LINGER_WINDOW_S.check(e.linger_window_s),
        fields::PAUSE_S.check(e.pause_s),
        fields::MIGRATION_COST_S.check(e.migration_cost_s),
        fields::KILL_GRACE_S.check(e.kill_grace_s),
        fields::CPU_TEMP_MAX_C.check(r.cpu_temp_max_c),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

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
