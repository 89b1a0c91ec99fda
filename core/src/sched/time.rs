//! Time as the scheduler sees it: [`Millis`], milliseconds since the Unix epoch (UTC).
//!
//! The scheduler never reads a clock. Every event and every pass carries `now` as a
//! `Millis` chosen by the driver (the coordinator's wall clock, or the simulator's
//! virtual time). Durations inside the scheduler are seconds as `f64` (runtimes,
//! normtimes); instants are `Millis`. Converting a duration to an instant rounds up to
//! the next whole millisecond ([`Millis::plus_secs_ceil`]), so a predicted end is never
//! earlier than the prediction it came from.

use serde::{Deserialize, Serialize};
use std::fmt;

/// An instant: milliseconds since 1970-01-01T00:00:00Z. Supplied by the driver; never
/// read from a clock here. Serialized as a bare integer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Millis(pub u64);

impl Millis {
    /// The epoch itself (also the "idle since forever" value).
    pub const ZERO: Millis = Millis(0);
    /// The latest representable instant (used for "never").
    pub(crate) const MAX: Millis = Millis(u64::MAX);

    /// The instant `secs` whole seconds after the epoch.
    pub const fn from_secs(secs: u64) -> Millis {
        Millis(secs.saturating_mul(1000))
    }

    /// Milliseconds from `earlier` to `self`, 0 if `earlier` is later.
    pub(crate) const fn saturating_ms_since(self, earlier: Millis) -> u64 {
        self.0.saturating_sub(earlier.0)
    }

    /// Seconds from `earlier` to `self` as `f64`, 0 if `earlier` is later.
    pub fn secs_since(self, earlier: Millis) -> f64 {
        self.saturating_ms_since(earlier) as f64 / 1000.0
    }

    /// `self` plus a duration in seconds, rounded up to the next whole millisecond and
    /// saturating at [`Millis::MAX`]. A negative or NaN duration adds nothing; an
    /// infinite one gives `MAX`.
    pub(crate) fn plus_secs_ceil(self, secs: f64) -> Millis {
        if secs.is_nan() || secs <= 0.0 {
            return self;
        }
        let ms = (secs * 1000.0).ceil();
        if ms >= u64::MAX as f64 {
            return Millis::MAX;
        }
        Millis(self.0.saturating_add(ms as u64))
    }

    /// The instant as a UTC date-time (for display), `None` past chrono's range.
    pub(crate) fn to_utc(self) -> Option<chrono::DateTime<chrono::Utc>> {
        i64::try_from(self.0).ok().and_then(chrono::DateTime::from_timestamp_millis)
    }
}

impl fmt::Display for Millis {
    /// RFC 3339 in UTC with milliseconds (`2026-05-01T12:00:00.000Z`), or `never` for
    /// `Millis::MAX`, or the raw number when chrono cannot represent it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if *self == Millis::MAX {
            return f.write_str("never");
        }
        match self.to_utc() {
            Some(t) => write!(f, "{}", t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)),
            None => write!(f, "{} ms", self.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plus_secs_rounds_up_and_saturates() {
        assert_eq!(Millis(0).plus_secs_ceil(1.0001), Millis(1001));
        assert_eq!(Millis(5).plus_secs_ceil(0.0), Millis(5));
        assert_eq!(Millis(5).plus_secs_ceil(-3.0), Millis(5));
        assert_eq!(Millis(5).plus_secs_ceil(f64::NAN), Millis(5));
        assert_eq!(Millis(5).plus_secs_ceil(f64::INFINITY), Millis::MAX);
        assert_eq!(Millis(u64::MAX - 1).plus_secs_ceil(1.0), Millis::MAX);
    }

    #[test]
    fn displays_rfc3339() {
        assert_eq!(Millis::from_secs(0).to_string(), "1970-01-01T00:00:00.000Z");
        assert_eq!(Millis::MAX.to_string(), "never");
    }
}
