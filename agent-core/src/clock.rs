//! Time as the policy sees it: a monotonic reading for durations plus the wall clock in
//! UTC and local time for calendar rules (local days, allowed hours).
//!
//! The pure core never reads a clock; drivers build a [`Now`] (the live agent from
//! [`SystemClock`], tests and the simulator from virtual time) and pass it in.

use chrono::{DateTime, Local, NaiveDate, NaiveDateTime, Utc};
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

/// Reads the operating system's clocks; used only by drivers.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl SystemClock {
    /// The current time from the OS.
    pub fn now(&self) -> Now {
        let local = Local::now();
        Now { mono: mono_now(), utc: local.with_timezone(&Utc), local: local.naive_local() }
    }
}

/// The current monotonic reading (`CLOCK_BOOTTIME`).
pub fn mono_now() -> MonoMs {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime only writes into the timespec we own.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut ts) };
    debug_assert_eq!(rc, 0, "CLOCK_BOOTTIME exists on every Linux since 2.6.39");
    MonoMs(ts.tv_sec as u64 * 1000 + ts.tv_nsec as u64 / 1_000_000)
}

/// Microseconds on the same monotonic clock, for latency measurements.
pub fn mono_now_us() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: as in `mono_now`.
    unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut ts) };
    ts.tv_sec as u64 * 1_000_000 + ts.tv_nsec as u64 / 1000
}

/// The identity of the current boot, so a persisted monotonic deadline is only trusted
/// within the boot that wrote it. Empty where the OS does not say.
pub fn boot_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id").map(|s| s.trim().to_owned()).unwrap_or_default()
}
