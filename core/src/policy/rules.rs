//! "Not allowed now": the owner's calendar, power and heat rules, evaluated on a local
//! time and a sample handed in by the caller.

use super::config::Rules;
use crate::sample::Sample;
use chrono::{Datelike, NaiveDateTime, Timelike};
use serde::{Deserialize, Serialize};

/// Why the machine may not be used now.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "snake_case")]
pub enum NotAllowedReason {
    /// Outside the allowed hours for today.
    Hours,
    /// Running on battery and the owner said "not on battery".
    Battery,
    /// The CPU is at or above the temperature ceiling.
    Heat,
}

impl NotAllowedReason {
    /// A phrase for people.
    pub fn describe(self) -> &'static str {
        match self {
            Self::Hours => "outside allowed hours",
            Self::Battery => "on battery",
            Self::Heat => "CPU too hot",
        }
    }
}

/// True when `local` falls inside the allowed hours of its weekday.
pub fn within_hours(rules: &Rules, local: NaiveDateTime) -> bool {
    match rules.hours.ranges(local.weekday()) {
        None => true,
        Some(ranges) => {
            let minute = (local.hour() * 60 + local.minute()) as u16;
            ranges.iter().any(|r| r.start <= minute && minute < r.end)
        }
    }
}

/// The hardware rules (battery, heat), which even "Donate now" respects.
pub fn hardware_block(rules: &Rules, sample: Option<&Sample>) -> Option<NotAllowedReason> {
    let s = sample?;
    if !rules.allow_on_battery && s.on_battery == Some(true) {
        return Some(NotAllowedReason::Battery);
    }
    if s.cpu_temp_c.is_some_and(|t| t as f64 >= rules.cpu_temp_max_c) {
        return Some(NotAllowedReason::Heat);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::NaiveDate;

    fn at(d: u32, h: u32, m: u32) -> NaiveDateTime {
        // 2026-11-23 is a Monday.
        NaiveDate::from_ymd_opt(2026, 11, d).unwrap().and_hms_opt(h, m, 0).unwrap()
    }

    #[test]
    fn hours_per_weekday() {
        let mut r = Rules::default();
        r.hours.mon = Some(vec!["09:00-12:00".into(), "13:00-24:00".into()]);
        r.hours.tue = Some(vec![]);
        assert!(!within_hours(&r, at(23, 8, 59)));
        assert!(within_hours(&r, at(23, 9, 0)));
        assert!(!within_hours(&r, at(23, 12, 30)));
        assert!(within_hours(&r, at(23, 23, 59)));
        assert!(!within_hours(&r, at(24, 10, 0)), "empty list: not at all on Tuesday");
        assert!(within_hours(&r, at(25, 3, 0)), "Wednesday unlisted: all day");
    }

    #[test]
    fn battery_and_heat() {
        let r = Rules::default();
        let mut s = Sample { on_battery: Some(true), ..Default::default() };
        assert_eq!(hardware_block(&r, Some(&s)), Some(NotAllowedReason::Battery));
        s.on_battery = Some(false);
        s.cpu_temp_c = Some(95.0);
        assert_eq!(hardware_block(&r, Some(&s)), Some(NotAllowedReason::Heat));
        s.cpu_temp_c = None;
        assert_eq!(hardware_block(&r, Some(&s)), None);
    }
}
