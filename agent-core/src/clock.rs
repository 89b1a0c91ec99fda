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
    MonoMs(crate::sys::time::boot_us() / 1000)
}

/// Microseconds on the same monotonic clock, for latency measurements.
pub fn mono_now_us() -> u64 {
    crate::sys::time::boot_us()
}

/// Nanoseconds on `CLOCK_MONOTONIC`: the clock other processes time with (a benchmark, a
/// guest's `time.monotonic_ns()`), for the input timings the status shows
/// ([`crate::input::InputTiming`]).
pub fn monotonic_ns() -> u64 {
    crate::sys::time::monotonic_ns()
}

/// The identity of the current boot, so a persisted monotonic deadline is only trusted
/// within the boot that wrote it. Empty where the OS does not say.
pub fn boot_id() -> String {
    crate::sys::time::boot_id()
}
