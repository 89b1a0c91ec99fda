//! Child processes of a test or benchmark: ended with their parent however it ends
//! (Ctrl-C included), stopped politely (SIGTERM, then SIGKILL after a grace), and waited
//! for with a deadline.

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
