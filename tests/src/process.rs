//! Child processes of a test or benchmark: ended with their parent however it ends
//! (Ctrl-C included), stopped politely (SIGTERM, then SIGKILL after a grace), waited for
//! with a deadline, and the CPU time they used.

use std::os::unix::process::CommandExt;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

/// The child gets `sig` when this process ends, however it ends, so that a stopped run
/// leaves no agent, coordinator or X server behind. (Linux sends it when the spawning
/// *thread* ends: spawn from the thread that owns the child, as tests and benches do.)
pub fn end_with_us(c: &mut Command, sig: i32) -> &mut Command {
    // SAFETY: prctl is async-signal-safe and touches no memory.
    unsafe {
        c.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, sig, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        })
    }
}

/// SIGTERM, then up to `grace` for the child to exit (an agent ends its guests and puts
/// the owner's protection back), then SIGKILL; reaped either way. True when it exited
/// within the grace.
pub fn terminate(child: &mut Child, grace: Duration) -> bool {
    if matches!(child.try_wait(), Ok(Some(_))) {
        return true;
    }
    // SAFETY: signals a child of ours, not yet reaped.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let deadline = Instant::now() + grace;
    while !matches!(child.try_wait(), Ok(Some(_))) {
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

/// Polls `f` every 20 ms until it gives a value, for at most `timeout`; the error
/// (`TimedOut`) names `what`.
pub fn wait_until<T>(what: &str, timeout: Duration, mut f: impl FnMut() -> Option<T>) -> std::io::Result<T> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return Ok(v);
        }
        if Instant::now() > deadline {
            return Err(std::io::Error::new(std::io::ErrorKind::TimedOut, format!("{what}: not within {timeout:?}")));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The CPU time (user + system, in clock ticks) process `pid` has used, its exited
/// threads included: fields 14 and 15 of `/proc/PID/stat`, counted after the
/// parenthesised command name as text (a field such as `tpgid` may be -1). 0 when the
/// process is gone.
pub fn cpu_ticks(pid: i32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<&str> = stat.rsplit_once(')').map_or(Vec::new(), |(_, rest)| rest.split_whitespace().collect());
    let field = |i: usize| fields.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    // After ')': state is field 3, so utime (14) and stime (15) sit at 11 and 12.
    field(11) + field(12)
}

/// Clock ticks per second (`sysconf(_SC_CLK_TCK)`), the unit of [`cpu_ticks`].
pub fn clock_ticks_per_s() -> u64 {
    // SAFETY: sysconf has no preconditions.
    unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64
}

/// [`cpu_ticks`] in seconds.
pub fn cpu_seconds(pid: u32) -> f64 {
    cpu_ticks(pid as i32) as f64 / clock_ticks_per_s() as f64
}

#[cfg(test)]
mod tests {
    /// This process's CPU time as the kernel's clock says (`CLOCK_PROCESS_CPUTIME_ID`).
    fn own_cpu_s() -> f64 {
        let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: `t` is a valid timespec for clock_gettime to fill.
        assert_eq!(unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut t) }, 0);
        t.tv_sec as f64 + t.tv_nsec as f64 / 1e9
    }

    #[test]
    fn cpu_ticks_counts_this_process_busy_time() {
        // Busy until the kernel's own clock says 0.3 s of CPU (however loaded the
        // machine is); /proc's reading must then say about as much (ticks are 10 ms).
        // (User time: the clock is asked only every million additions.)
        let mut x = 0u64;
        while own_cpu_s() < 0.3 {
            for _ in 0..1_000_000 {
                x = std::hint::black_box(x.wrapping_add(1));
            }
        }
        let s = super::cpu_seconds(std::process::id());
        assert!(s >= 0.25, "{s} s of CPU in /proc after 0.3 s by the kernel's clock");
        assert_eq!(super::cpu_ticks(i32::MAX), 0, "a process that does not exist used nothing");
    }
}
