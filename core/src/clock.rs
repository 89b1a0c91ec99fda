//! Time as the policy sees it: a monotonic reading for durations plus the wall clock in
//! UTC and local time for calendar rules (local days, allowed hours).
//!
//! The pure core never reads a clock; drivers build a [`Now`] (the live agent from
//! `agent_core::clock::SystemClock`, tests and the simulator from virtual time) and pass
//! it in.

use chrono::{DateTime, NaiveDate, NaiveDateTime, Utc};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Milliseconds on a monotonic clock that keeps counting through suspend
/// (`CLOCK_BOOTTIME` on Linux). It never jumps when the wall clock is set, so every
/// duration in the policy (idle for, paused for, lingering for) is measured on it.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(transparent)]
pub struct MonoMs(pub u64);

impl MonoMs {
    /// Time from `earlier` to `self`, zero if `earlier` is later.
    pub fn since(self, earlier: MonoMs) -> Duration {
        Duration::from_millis(self.0.saturating_sub(earlier.0))
    }
    /// This instant moved forward by `d`.
    pub fn plus(self, d: Duration) -> MonoMs {
        MonoMs(self.0.saturating_add(d.as_millis() as u64))
    }
}

/// One reading of "now" handed to the pure core.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Now {
    /// Monotonic time, for durations.
    pub mono: MonoMs,
    /// Wall clock, for persistence across reboots.
    pub utc: DateTime<Utc>,
    /// Local civil time (with the time zone's current offset applied), for local days
    /// and allowed hours.
    pub local: NaiveDateTime,
}

impl Now {
    /// The local calendar day of this instant.
    pub fn local_date(&self) -> NaiveDate {
        self.local.date()
    }
}
