//! Scheduling: the calling thread's slice (EEVDF's `sched_runtime`, Linux 6.12+) and the
//! lowest priorities (`SCHED_IDLE`, nice 19, idle I/O class).

use std::io;

const IOPRIO_WHO_PROCESS: libc::c_int = 1;
const IOPRIO_CLASS_IDLE: libc::c_int = 3;
const IOPRIO_CLASS_SHIFT: libc::c_int = 13;

/// Asks for a slice of `ns` nanoseconds for the calling thread, keeping its policy
/// (`SCHED_OTHER`) and nice value. Kernels before 6.12 refuse with EINVAL.
pub fn short_slice_for_this_thread(ns: u64) -> io::Result<()> {
    // SAFETY: getpriority on the calling thread (who 0); -1 is a valid nice value, so errno
    // is cleared first and checked after.
    let nice = unsafe {
        *libc::__errno_location() = 0;
        let n = libc::getpriority(libc::PRIO_PROCESS, 0);
        if n == -1 && *libc::__errno_location() != 0 {
            return Err(io::Error::last_os_error());
        }
        n
    };
    let attr = libc::sched_attr {
        size: std::mem::size_of::<libc::sched_attr>() as u32,
        sched_policy: libc::SCHED_OTHER as u32,
        sched_flags: 0,
        sched_nice: nice,
        sched_priority: 0,
        sched_runtime: ns,
        sched_deadline: 0,
        sched_period: 0,
    };
    // SAFETY: sched_setattr reads `attr`, a valid struct of the size it is told.
    let rc = unsafe { libc::syscall(libc::SYS_sched_setattr, 0, &attr as *const libc::sched_attr, 0u32) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The calling thread's slice as the kernel reports it (`se.slice`, ns; 6.12+).
pub fn this_thread_slice_ns() -> Option<u64> {
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::gettid() };
    let sched = std::fs::read_to_string(format!("/proc/self/task/{tid}/sched")).ok()?;
    let v = sched.lines().find(|l| l.starts_with("se.slice"))?.split(':').nth(1)?.trim().to_string();
    v.parse::<f64>().ok().map(|f| f as u64)
}

/// Whether `e` is the refusal of a kernel that has no settable slice.
pub fn is_unsupported_slice(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::EINVAL)
}

/// Puts the calling thread at the lowest priorities: `SCHED_IDLE`, nice 19 and the idle
/// I/O class (Linux applies all three per thread; a child forked after inherits them).
/// Async-signal-safe: a guest's process calls it between fork and exec.
pub fn lowest_for_this_thread() -> io::Result<()> {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: plain syscalls on the calling thread (who/pid 0) with a valid param.
    unsafe {
        if libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) != 0 {
            return Err(io::Error::last_os_error());
        }
        if libc::setpriority(libc::PRIO_PROCESS, 0, 19) != 0 {
            return Err(io::Error::last_os_error());
        }
        if libc::syscall(libc::SYS_ioprio_set, IOPRIO_WHO_PROCESS, 0, IOPRIO_CLASS_IDLE << IOPRIO_CLASS_SHIFT) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// A process's scheduling as (policy, nice, I/O priority class), for checks and tests.
pub fn of(pid: i32) -> io::Result<(i32, i32, i32)> {
    // SAFETY: plain queries; errno is reset before getpriority, whose -1 is a valid value.
    unsafe {
        let policy = libc::sched_getscheduler(pid);
        if policy < 0 {
            return Err(io::Error::last_os_error());
        }
        *libc::__errno_location() = 0;
        let nice = libc::getpriority(libc::PRIO_PROCESS, pid as libc::id_t);
        if nice == -1 && *libc::__errno_location() != 0 {
            return Err(io::Error::last_os_error());
        }
        let io = libc::syscall(libc::SYS_ioprio_get, IOPRIO_WHO_PROCESS, pid);
        if io < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok((policy & !libc::SCHED_RESET_ON_FORK, nice, (io as i32) >> IOPRIO_CLASS_SHIFT))
    }
}

/// `SCHED_IDLE`, nice 19 and the idle I/O class, as [`of`] reads them.
pub const LOWEST: (i32, i32, i32) = (libc::SCHED_IDLE, 19, IOPRIO_CLASS_IDLE);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lowest_priority_is_inherited_across_exec() {
        use std::os::unix::process::CommandExt;
        let mut cmd = std::process::Command::new("sleep");
        cmd.arg("5");
        // SAFETY: lowest_for_this_thread only makes async-signal-safe system calls.
        unsafe { cmd.pre_exec(lowest_for_this_thread) };
        let mut child = cmd.spawn().unwrap();
        let got = of(child.id() as i32);
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(got.unwrap(), LOWEST);
        // The test process itself is untouched.
        assert_ne!(of(0).unwrap().0, libc::SCHED_IDLE);
    }
}
