//! The owner's return must stop the guests at once, even when the owner's first act is to
//! load every core (a build). The input threads sleep until the X server (or the bus)
//! writes an event, and then run the fast path that freezes the guests. On a saturated
//! machine a woken thread with the default slice may wait for the running task's slice to
//! end (EEVDF's run-to-parity): a few milliseconds per hop. Since Linux 6.12 a
//! `SCHED_OTHER` thread may ask for a shorter slice (`sched_attr.sched_runtime`), with no
//! privilege, and a woken task with a shorter slice preempts the running one
//! (`PREEMPT_SHORT`). The input threads ask for 0.1 ms: their work between sleeps is a
//! few microseconds, so they take nothing from the owner. Older kernels refuse the
//! request (EINVAL) and keep the default, which is said once in the log.
//! `LULL_INPUT_SLICE=0` skips it (for A/B measurements).

/// The slice the input threads ask for, in nanoseconds (the kernel's minimum).
pub const INPUT_SLICE_NS: u64 = 100_000;

/// Asks the scheduler for a short slice for the calling thread, keeping its policy
/// (`SCHED_OTHER`) and nice value. `Ok(false)` when turned off by `LULL_INPUT_SLICE=0`.
pub fn short_slice_for_this_thread() -> std::io::Result<bool> {
    if std::env::var_os("LULL_INPUT_SLICE").is_some_and(|v| v == "0") {
        return Ok(false);
    }
    crate::sys::sched::short_slice_for_this_thread(INPUT_SLICE_NS)?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_slice_is_granted_on_this_kernel_or_refused_cleanly() {
        let t = std::thread::spawn(|| (super::short_slice_for_this_thread(), crate::sys::sched::this_thread_slice_ns()));
        let (r, slice) = t.join().expect("thread");
        match r {
            Ok(true) => {
                if let Some(s) = slice {
                    assert_eq!(s, super::INPUT_SLICE_NS, "se.slice {s}");
                }
            }
            Ok(false) => {}
            Err(e) => assert!(crate::sys::sched::is_unsupported_slice(&e), "an older kernel refuses with EINVAL only: {e}"),
        }
    }
}
