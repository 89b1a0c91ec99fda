//! The no-orphans watchdog: a tiny forked process that outlives the agent by a few
//! microseconds. It blocks reading a pipe whose only write end the agent holds (close-on-
//! exec, so guests never inherit it). When the agent dies — even by kill -9 — the read
//! returns end-of-file and the watchdog writes "1" to the guests' `cgroup.kill` (killing
//! every guest tree, daemons and setsid'ed children included) and SIGKILLs the process
//! groups the agent told it about (the no-cgroup fallback), then exits.
//!
//! For an ordinary owner's agent it is also the process the guests' systemd scope holds
//! ([`super::delegation`]): a scope needs one when it is made, and the watchdog lives
//! exactly as long as the guests may. It then kills the scope's whole `guests/` subtree,
//! and once it exits systemd removes the empty scope.
//!
//! Between fork and exit the child makes only async-signal-safe system calls on buffers
//! prepared before the fork: the agent is multi-threaded.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

const MAX_GROUPS: usize = 4096;

/// The agent's handle on its watchdog.
#[derive(Debug)]
pub struct Watchdog {
    tx: Option<OwnedFd>,
    pid: libc::pid_t,
}

impl Watchdog {
    /// Starts the watchdog; `kill_file` is the guests' parent `cgroup.kill`, if any.
    pub fn start(kill_file: Option<&std::path::Path>) -> io::Result<Self> {
        let kill = kill_file.and_then(|p| CString::new(p.as_os_str().as_encoded_bytes()).ok());
        let mut fds = [0; 2];
        // SAFETY: pipe2 fills the two-element array.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: both fds were just created and are owned here.
        let (rx, tx) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        let mut groups = vec![0i32; MAX_GROUPS];
        // SAFETY: fork; the child only runs `watch`, which is async-signal-safe and exits.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(io::Error::last_os_error());
        }
        if pid == 0 {
            // SAFETY: in the forked child; see `watch`.
            unsafe { watch(rx.as_raw_fd(), tx.as_raw_fd(), kill.as_ref(), &mut groups) }
        }
        drop(rx);
        Ok(Self { tx: Some(tx), pid })
    }

    /// Tells the watchdog about a guest process group to kill if the agent dies.
    pub fn watch_group(&self, pgid: i32) {
        if let Some(tx) = &self.tx {
            let b = pgid.to_ne_bytes();
            // SAFETY: writes 4 bytes from a local buffer to our pipe.
            unsafe { libc::write(tx.as_raw_fd(), b.as_ptr().cast(), 4) };
        }
    }

    /// The watchdog's pid.
    pub fn pid(&self) -> i32 {
        self.pid
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.tx.take();
        let mut status = 0;
        // SAFETY: reaps our own child.
        unsafe { libc::waitpid(self.pid, &mut status, 0) };
    }
}

/// The watchdog child's whole life. Never returns.
///
/// # Safety
/// Only in the child just forked by [`Watchdog::start`]: it closes descriptors it does
/// not own and `_exit`s.
unsafe fn watch(rx: i32, tx: i32, kill_file: Option<&CString>, groups: &mut [i32]) -> ! {
    // SAFETY: async-signal-safe libc calls in the forked child, on the pipe, a local
    // buffer and the cgroup.kill path it was handed; nothing here allocates.
    unsafe {
        libc::close(tx);
        // Keep only stdio and the pipe: hold no socket or database of the agent's.
        let rx = if rx != 3 { libc::dup2(rx, 3) } else { rx };
        libc::syscall(libc::SYS_close_range, 4u32, u32::MAX, 0u32);
        libc::signal(libc::SIGINT, libc::SIG_IGN);
        libc::signal(libc::SIGTERM, libc::SIG_IGN);
        // A closed terminal (SIGHUP to the foreground group) must not end it before the agent.
        libc::signal(libc::SIGHUP, libc::SIG_IGN);
        // Its own name in ps/top (a forked agent or tray would show as another copy of them).
        libc::prctl(libc::PR_SET_NAME, c"lull-watchdog".as_ptr(), 0, 0, 0);
        let mut n = 0usize;
        let mut buf = [0u8; 4];
        let mut have = 0usize;
        loop {
            let r = libc::read(rx, buf.as_mut_ptr().add(have).cast(), 4 - have);
            if r < 0 && *libc::__errno_location() == libc::EINTR {
                continue;
            }
            if r <= 0 {
                break;
            }
            have += r as usize;
            if have == 4 {
                have = 0;
                if n < groups.len() {
                    groups[n] = i32::from_ne_bytes(buf);
                    n += 1;
                }
            }
        }
        if let Some(k) = kill_file {
            let fd = libc::open(k.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
            if fd >= 0 {
                libc::write(fd, b"1".as_ptr().cast(), 1);
                libc::close(fd);
            }
        }
        for &g in &groups[..n] {
            if g > 1 {
                libc::kill(-g, libc::SIGKILL);
            }
        }
        libc::_exit(0)
    }
}
