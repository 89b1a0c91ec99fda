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
    // SAFETY: getpriority on the calling thread (who 0); -1 is a valid nice value, so errno
    // is cleared first and checked after.
    let nice = unsafe {
        *libc::__errno_location() = 0;
        let n = libc::getpriority(libc::PRIO_PROCESS, 0);
        if n == -1 && *libc::__errno_location() != 0 {
            return Err(std::io::Error::last_os_error());
        }
        n
    };
    let attr = libc::sched_attr {
        size: std::mem::size_of::<libc::sched_attr>() as u32,
        sched_policy: libc::SCHED_OTHER as u32,
        sched_flags: 0,
        sched_nice: nice,
        sched_priority: 0,
        sched_runtime: INPUT_SLICE_NS,
        sched_deadline: 0,
        sched_period: 0,
    };
    // SAFETY: sched_setattr reads `attr`, a valid struct of the size it is told.
    let rc = unsafe { libc::syscall(libc::SYS_sched_setattr, 0, &attr as *const libc::sched_attr, 0u32) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_slice_is_granted_on_this_kernel_or_refused_cleanly() {
        let t = std::thread::spawn(|| {
            let r = super::short_slice_for_this_thread();
            // The thread's slice as the kernel reports it (`se.slice` in ns, 6.12+).
            // SAFETY: gettid has no preconditions.
            let tid = unsafe { libc::gettid() };
            let sched = std::fs::read_to_string(format!("/proc/self/task/{tid}/sched")).unwrap_or_default();
            let slice = sched.lines().find(|l| l.starts_with("se.slice")).and_then(|l| l.split(':').nth(1)).map(|v| v.trim().to_string());
            (r.map_err(|e| e.raw_os_error()), slice)
        });
        let (r, slice) = t.join().expect("thread");
        match r {
            Ok(true) => {
                if let Some(s) = slice {
                    assert_eq!(s.parse::<f64>().ok(), Some(super::INPUT_SLICE_NS as f64), "se.slice {s}");
                }
            }
            Ok(false) => {}
            Err(code) => assert_eq!(code, Some(libc::EINVAL), "an older kernel refuses with EINVAL only"),
        }
    }
}
