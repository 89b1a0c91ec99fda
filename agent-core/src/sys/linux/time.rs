//! The kernel's clocks: `CLOCK_BOOTTIME` (counts suspend; the policy's clock) and
//! `CLOCK_MONOTONIC` (what other processes and logind time with).

fn read(clock: libc::clockid_t) -> libc::timespec {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime only writes into the timespec we own.
    let rc = unsafe { libc::clock_gettime(clock, &mut ts) };
    debug_assert_eq!(rc, 0, "CLOCK_BOOTTIME and CLOCK_MONOTONIC exist on every Linux since 2.6.39");
    ts
}

/// Microseconds on `CLOCK_BOOTTIME`.
pub fn boot_us() -> u64 {
    let ts = read(libc::CLOCK_BOOTTIME);
    ts.tv_sec as u64 * 1_000_000 + ts.tv_nsec as u64 / 1000
}

/// Nanoseconds on `CLOCK_MONOTONIC`.
pub fn monotonic_ns() -> u64 {
    let ts = read(libc::CLOCK_MONOTONIC);
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The identity of the current boot; empty where the kernel does not say.
pub fn boot_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id").map(|s| s.trim().to_owned()).unwrap_or_default()
}
