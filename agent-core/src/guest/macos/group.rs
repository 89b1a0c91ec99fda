//! One guest as a process group on macOS: started in a group of its own (`setpgid`, by
//! `process_group(0)`), at the background priority band (`setpriority(PRIO_DARWIN_PROCESS,
//! 0, PRIO_DARWIN_BG)`: low CPU, I/O and network priority) with its memory limited by
//! `RLIMIT_AS` and `RLIMIT_DATA`, all three in `pre_exec`, so the program never runs
//! outside them (the band is set again from the agent after the spawn, whose answer is
//! what `lull status` reports); frozen with `SIGSTOP` to the group,
//! thawed with `SIGCONT`, killed with `SIGKILL`; its members, CPU time and resident
//! memory from `libproc`; the system's memory pressure from the
//! `kern.memorystatus_vm_pressure_level` sysctl (read until a notification comes). A guest that calls `setsid`
//! leaves its group and escapes all three, as with Linux's fallback.

use crate::guest::{GuestDir, GuestSpec};
use lull_core::guest_memory::PressureLevel;
use std::io;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};

/// Starts the guest's program in a process group of its own (its pid is the group's
/// id), in its work directory, with a minimal environment, its output to the guest's
/// files, its address space limited to `memory_bytes` and in the background band before
/// its program runs; the band is set once more after the spawn, and that call's refusal is
/// returned beside the child, not as an error.
pub fn spawn(spec: &GuestSpec, dir: &GuestDir, memory_bytes: u64) -> io::Result<(Child, Option<io::Error>)> {
    let work = dir.work();
    let mut command = Command::new(&spec.command);
    command
        .args(&spec.args)
        .current_dir(&work)
        .env_clear()
        .env("PATH", "/usr/bin:/bin:/usr/sbin:/sbin")
        .env("LANG", "C.UTF-8")
        .env("HOME", &work)
        .env("TMPDIR", &work)
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(dir.stdout())?)
        .stderr(std::fs::File::create(dir.stderr())?)
        .process_group(0);
    let limit = libc::rlimit { rlim_cur: memory_bytes as libc::rlim_t, rlim_max: memory_bytes as libc::rlim_t };
    // SAFETY: between fork and exec the closure makes two system calls only, setrlimit
    // on a limit built before the fork and setpriority on this process (0), neither of
    // which allocates or takes a lock.
    unsafe {
        command.pre_exec(move || {
            for resource in [libc::RLIMIT_AS, libc::RLIMIT_DATA] {
                if libc::setrlimit(resource, &limit) != 0 {
                    return Err(io::Error::last_os_error());
                }
            }
            // Its refusal is seen by the call after the spawn, which reports it.
            libc::setpriority(libc::PRIO_DARWIN_PROCESS, 0, libc::PRIO_DARWIN_BG);
            Ok(())
        });
    }
    let child = command.spawn()?;
    // SAFETY: setpriority on the child's pid, a process of this user. Already set in the
    // child; this call's answer is the one reported.
    let band = unsafe { libc::setpriority(libc::PRIO_DARWIN_PROCESS, child.id(), libc::PRIO_DARWIN_BG) };
    Ok((child, (band != 0).then(io::Error::last_os_error)))
}

/// Sends `signal` to the process group `pgid` (never to group 0 or 1: this process's
/// own, or every process).
pub fn signal_group(pgid: i32, signal: i32) -> io::Result<()> {
    if pgid <= 1 {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("no guest's process group: {pgid}")));
    }
    // SAFETY: killpg has no memory-safety preconditions.
    if unsafe { libc::killpg(pgid, signal) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Freezes (`SIGSTOP`) or thaws (`SIGCONT`) the group.
pub fn freeze_group(pgid: i32, frozen: bool) -> io::Result<()> {
    signal_group(pgid, if frozen { libc::SIGSTOP } else { libc::SIGCONT })
}

/// Kills every member of the group; a frozen one dies too.
pub fn kill_group(pgid: i32) -> io::Result<()> {
    signal_group(pgid, libc::SIGKILL)
}

/// The live members of a process group (`proc_listpgrppids`, which returns how many
/// pids it wrote).
pub fn members(pgid: i32) -> Vec<i32> {
    let mut pids = vec![0 as libc::pid_t; 1024];
    let size = (pids.len() * std::mem::size_of::<libc::pid_t>()) as libc::c_int;
    // SAFETY: the buffer holds `size` bytes.
    let n = unsafe { libc::proc_listpgrppids(pgid, pids.as_mut_ptr().cast(), size) };
    pids.truncate(usize::try_from(n).unwrap_or(0).min(1024));
    pids.retain(|&p| p > 0);
    pids
}

/// Nanoseconds per tick of the Mach clock `proc_taskinfo`'s CPU times count in (1 on
/// Intel, 125/3 on Apple silicon), as numerator and denominator. libc marks the call
/// deprecated in favour of the mach2 crate, which Lull does not otherwise need.
#[allow(deprecated)]
fn mach_tick() -> (u64, u64) {
    let mut info = libc::mach_timebase_info { numer: 0, denom: 0 };
    // SAFETY: the call fills the struct it is given.
    let rc = unsafe { libc::mach_timebase_info(&mut info) };
    if rc != 0 || info.denom == 0 {
        return (1, 1);
    }
    (u64::from(info.numer), u64::from(info.denom))
}

/// CPU time (user, system) in µs and resident bytes of the group's live members
/// (`proc_pidinfo(PROC_PIDTASKINFO)`); a member gone meanwhile counts nothing.
pub fn usage(pgid: i32) -> ((u64, u64), u64) {
    let (numer, denom) = mach_tick();
    let (mut user, mut system, mut resident) = (0u64, 0u64, 0u64);
    for pid in members(pgid) {
        // SAFETY: proc_taskinfo is plain old data; zeroed is a valid value to fill.
        let mut task: libc::proc_taskinfo = unsafe { std::mem::zeroed() };
        let size = std::mem::size_of::<libc::proc_taskinfo>() as libc::c_int;
        // SAFETY: the buffer is a whole proc_taskinfo of `size` bytes.
        let got = unsafe { libc::proc_pidinfo(pid, libc::PROC_PIDTASKINFO, 0, (&mut task as *mut libc::proc_taskinfo).cast(), size) };
        if got == size {
            user += task.pti_total_user.saturating_mul(numer) / denom / 1000;
            system += task.pti_total_system.saturating_mul(numer) / denom / 1000;
            resident += task.pti_resident_size;
        }
    }
    ((user, system), resident)
}

/// `kern.memorystatus_vm_pressure_level` now (1 normal, 2 warning, 4 critical): the
/// level until the first notification (`pressure.rs`) comes.
pub fn memory_pressure() -> io::Result<PressureLevel> {
    let mut level: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>();
    // SAFETY: a NUL-terminated name; `level` holds `len` bytes.
    let rc = unsafe {
        libc::sysctlbyname(
            c"kern.memorystatus_vm_pressure_level".as_ptr(),
            (&mut level as *mut libc::c_int).cast(),
            &mut len,
            std::ptr::null_mut(),
            0,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(match level {
        4.. => PressureLevel::Critical,
        2..=3 => PressureLevel::Warning,
        _ => PressureLevel::Normal,
    })
}
