//! Lowest priority for guest processes: SCHED_IDLE, nice 19 and the idle I/O class.
//! Applied in the guest's own process between fork and exec (so inherited by its whole
//! tree), using only async-signal-safe system calls. The cgroup side (cpu.weight 1 on v2,
//! cpu.shares 2 and cpu.idle on v1) is set in `cgroup.rs`.

use std::io;

const IOPRIO_WHO_PROCESS: libc::c_int = 1;
const IOPRIO_CLASS_IDLE: libc::c_int = 3;
const IOPRIO_CLASS_SHIFT: libc::c_int = 13;

/// Makes the calling process (and its future children) lowest priority. Async-signal-safe.
pub fn lowest_for_self() -> io::Result<()> {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: plain system calls on the calling process with a valid parameter struct.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guest_priority_is_lowest_and_inherited() {
        use std::os::unix::process::CommandExt;
        let mut cmd = std::process::Command::new("sleep");
        cmd.arg("5");
        // SAFETY: lowest_for_self only makes async-signal-safe system calls.
        unsafe { cmd.pre_exec(lowest_for_self) };
        let mut child = cmd.spawn().unwrap();
        let got = of(child.id() as i32);
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(got.unwrap(), (libc::SCHED_IDLE, 19, IOPRIO_CLASS_IDLE));
        // The test process itself is untouched.
        assert_ne!(of(0).unwrap().0, libc::SCHED_IDLE);
    }
}
