//! The agent's clocks: reads the OS's monotonic (`CLOCK_BOOTTIME`) and wall clocks into
//! the pure core's [`Now`] ([`lull_core::clock`]), and the boot's identity. Only drivers
//! use this module; the core never reads a clock.

use chrono::{Local, Utc};

pub use lull_core::clock::{MonoMs, Now};

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

/// Nanoseconds on `CLOCK_MONOTONIC`: the clock other processes time with (a benchmark, a
/// guest's `time.monotonic_ns()`), for the input timings the status shows
/// ([`crate::input::InputTiming`]).
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: as in `mono_now`.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The identity of the current boot, so a persisted monotonic deadline is only trusted
/// within the boot that wrote it. Empty where the OS does not say.
pub fn boot_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id").map(|s| s.trim().to_owned()).unwrap_or_default()
}
