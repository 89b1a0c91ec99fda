//! Clocks on Windows: `other.rs`'s process-local monotonic clock for the agent's own
//! timing, and for [`monotonic_ns`] (the input timings `lull status` shows) the
//! performance counter (`QueryPerformanceCounter`), which every process on the machine
//! reads alike, so a program outside the agent (`scripts/wine/send_input.c`) times the
//! way from its input to the agent's freeze on the same clock.

pub use super::super::other::time::{boot_id, boot_us};
use windows_sys::Win32::System::Performance::{QueryPerformanceCounter, QueryPerformanceFrequency};

/// Nanoseconds on the performance counter: `counter × 10⁹ / frequency`, in that order of
/// operations (as `send_input.c` does), without overflow.
pub fn monotonic_ns() -> u64 {
    let (mut counter, mut frequency) = (0i64, 0i64);
    // SAFETY: both point to writable i64s; neither call fails on Windows XP or later.
    unsafe {
        QueryPerformanceCounter(&mut counter);
        QueryPerformanceFrequency(&mut frequency);
    }
    let (counter, frequency) = (counter.max(0) as u128, frequency.max(1) as u128);
    (counter * 1_000_000_000 / frequency) as u64
}
