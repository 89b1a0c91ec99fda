//! "Not allowed now": the owner's calendar, power and heat rules, evaluated on a local
//! time and a sample handed in by the caller.

use super::config::{AllowedHours, MinuteRange, Rules};
use crate::sample::Sample;
use chrono::{Datelike, NaiveDateTime, Timelike, Weekday};
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
    /// A program named in `rules.exclusive_programs` is running (the status names it in
    /// `exclusive_program`).
    ExclusiveProgram,
}

impl NotAllowedReason {
    /// A phrase for people.
    pub fn describe(self) -> &'static str {
        match self {
            Self::Hours => "outside allowed hours",
            Self::Battery => "on battery",
            Self::Heat => "CPU too hot",
            Self::ExclusiveProgram => "an exclusive program is running",
        }
    }
}

/// The allowed hours parsed once per configuration (the policy evaluates them on every
/// event), with what [`crate::policy::Policy::next_deadline`] needs: the next minute at
/// which they may change.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct CompiledHours {
    /// Per weekday from Monday: `None` is all day, an empty list not at all.
    days: [Option<Vec<MinuteRange>>; 7],
}

impl CompiledHours {
    /// Parses the configured ranges (invalid entries were refused when the
    /// configuration was loaded; any left are skipped).
    pub(crate) fn new(hours: &AllowedHours) -> Self {
        const WEEK: [Weekday; 7] = [Weekday::Mon, Weekday::Tue, Weekday::Wed, Weekday::Thu, Weekday::Fri, Weekday::Sat, Weekday::Sun];
        Self { days: WEEK.map(|wd| hours.ranges(wd)) }
    }

    fn day(&self, wd: Weekday) -> Option<&[MinuteRange]> {
        self.days[wd.num_days_from_monday() as usize].as_deref()
    }

    /// True when `local` falls inside the allowed hours of its weekday.
    pub(crate) fn allows(&self, local: NaiveDateTime) -> bool {
        match self.day(local.weekday()) {
            None => true,
            Some(ranges) => {
                let minute = (local.hour() * 60 + local.minute()) as u16;
                ranges.iter().any(|r| r.start <= minute && minute < r.end)
            }
        }
    }

    /// The first whole minute after `local` at which [`Self::allows`] gives another
    /// answer, looking at most a week and a day ahead; `None` when it never changes
    /// (no hours set, or every day the same all-or-nothing).
    pub(crate) fn next_change(&self, local: NaiveDateTime) -> Option<NaiveDateTime> {
        let now = self.allows(local);
        let start_of_minute = local.date().and_hms_opt(local.hour(), local.minute(), 0)?;
        // Candidates are the ranges' edges and midnights; walk them in order.
        for day in 0..=8i64 {
            let date = local.date() + chrono::Duration::days(day);
            let midnight = date.and_hms_opt(0, 0, 0)?;
            let mut edges: Vec<u16> = vec![0];
            if let Some(ranges) = self.day(date.weekday()) {
                edges.extend(ranges.iter().flat_map(|r| [r.start, r.end]).filter(|m| *m < 24 * 60));
            }
            edges.sort_unstable();
            for m in edges {
                let at = midnight + chrono::Duration::minutes(m as i64);
                if at > start_of_minute && self.allows(at) != now {
                    return Some(at);
                }
            }
        }
        None
    }
}

/// True when `local` falls inside the allowed hours of its weekday (parses the rules
/// each call; the policy keeps a [`CompiledHours`]).
#[cfg(test)]
pub(crate) fn within_hours(rules: &Rules, local: NaiveDateTime) -> bool {
    CompiledHours::new(&rules.hours).allows(local)
}

/// The hardware rules (battery, heat), which even "Donate now" respects.
pub(crate) fn hardware_block(rules: &Rules, sample: Option<&Sample>) -> Option<NotAllowedReason> {
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
    fn the_next_change_of_the_allowed_hours() {
        let mut r = Rules::default();
        r.hours.mon = Some(vec!["09:00-12:00".into(), "13:00-24:00".into()]);
        r.hours.tue = Some(vec![]);
        let c = CompiledHours::new(&r.hours);
        let t = |d, h, m| at(d, h, m);
        assert_eq!(c.next_change(t(23, 8, 59)), Some(t(23, 9, 0)));
        assert_eq!(c.next_change(t(23, 9, 0)), Some(t(23, 12, 0)));
        assert_eq!(c.next_change(t(23, 12, 30)), Some(t(23, 13, 0)));
        // Monday evening runs to midnight; Tuesday is closed all day; Wednesday open.
        assert_eq!(c.next_change(t(23, 23, 59)), Some(t(24, 0, 0)));
        assert_eq!(c.next_change(t(24, 10, 0)), Some(t(25, 0, 0)));
        // Wednesday to Sunday are open all day: the next change is the next Monday 00:00.
        assert_eq!(c.next_change(t(25, 3, 0)), Some(t(30, 0, 0)));
        // No hours at all: nothing ever changes.
        assert_eq!(CompiledHours::new(&Rules::default().hours).next_change(t(25, 3, 0)), None);
        // Every answer agrees with a minute-by-minute walk over the coming week.
        let mut x = t(23, 0, 0);
        while x < t(30, 0, 0) {
            let next = c.next_change(x).expect("hours change weekly");
            let mut y = x + chrono::Duration::minutes(1);
            while y < next {
                assert_eq!(c.allows(y), c.allows(x), "{x} → {y} changed before {next}");
                y += chrono::Duration::minutes(1);
            }
            assert_ne!(c.allows(next), c.allows(x), "{x}: {next} is no change");
            x += chrono::Duration::minutes(53);
        }
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
