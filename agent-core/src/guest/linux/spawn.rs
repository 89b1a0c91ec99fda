//! Starting a process for a guest: the guest itself (bubblewrap building its sandbox, or
//! in the Landlock fallback the job's program) and its network helper. Everything it must
//! be bound by is applied in its own process between fork and exec, in this order, with
//! async-signal-safe calls only on data prepared before the fork: a new session (its own
//! process group, no controlling terminal, so no keystrokes pushed into the owner's
//! terminal); joining its cgroups (writing "0" to each `cgroup.procs`, so the whole future
//! tree is contained before the first instruction of the job runs); rlimits (no core
//! files, the largest file it may write, and without cgroups its address space); lowest
//! priority; the unprivileged account when the agent is root (after which the
//! parent-death signal is set, as a credential change clears it, and checked against a
//! parent that already died); the file descriptors it is handed, at fixed numbers; then
//! no-new-privileges and, in the fallback, the Landlock ruleset; last the seccomp filter
//! ([`super::syscall_filter`]).

use super::sandbox;
use std::ffi::{CString, OsString};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

/// What binds one process Lull starts for a guest, prepared before the fork.
#[derive(Default)]
pub struct Confinement {
    /// The guest's `cgroup.procs` files to join.
    pub procs_files: Vec<CString>,
    /// RLIMIT_AS, for the no-cgroup fallback.
    pub address_space: Option<u64>,
    /// RLIMIT_FSIZE: the largest file it may write (`[guests] disk_mib`).
    pub file_size: Option<u64>,
    /// The unprivileged (uid, gid) to switch to, when the agent is root.
    pub account: Option<(u32, u32)>,
    /// The Landlock ruleset, in the fallback without namespaces.
    pub landlock: Option<sandbox::Prepared>,
    /// Descriptors handed to the process: each (descriptor, the number it gets there).
    pub fds: Vec<(OwnedFd, RawFd)>,
    /// The system calls it may not make ([`super::syscall_filter`]).
    pub syscalls: Option<seccompiler::BpfProgram>,
}

/// The lowest descriptor number a handed descriptor is moved to before the fork, so that
/// placing one at its fixed number never overwrites another still to be placed.
const FD_STAGING: RawFd = 100;

impl Confinement {
    /// The same cgroups, rlimits, priority and account, without the Landlock ruleset or
    /// any descriptor: for a helper that runs beside the guest (its network link).
    pub fn like(&self) -> Self {
        Self {
            procs_files: self.procs_files.clone(),
            address_space: self.address_space,
            file_size: self.file_size,
            account: self.account,
            landlock: None,
            fds: Vec::new(),
            syscalls: self.syscalls.clone(),
        }
    }

    /// Hands `fd` to the process as descriptor `at` (3 or more).
    pub fn hand(&mut self, fd: OwnedFd, at: RawFd) -> std::io::Result<()> {
        // SAFETY: fcntl(F_DUPFD_CLOEXEC) on a descriptor we own returns a new one or -1.
        let staged = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, FD_STAGING) };
        if staged < 0 {
            return Err(err());
        }
        // SAFETY: `staged` is a new descriptor nobody else owns.
        self.fds.push((unsafe { OwnedFd::from_raw_fd(staged) }, at));
        Ok(())
    }

    /// Applies everything in the calling process (a child between fork and exec).
    /// Async-signal-safe: system calls on data prepared before the fork.
    fn apply(&self, parent: libc::pid_t) -> std::io::Result<()> {
        // SAFETY: only async-signal-safe system calls on memory prepared before the fork.
        unsafe {
            if libc::setsid() < 0 {
                return Err(err());
            }
            for f in &self.procs_files {
                let fd = libc::open(f.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
                if fd < 0 {
                    return Err(err());
                }
                let w = libc::write(fd, b"0".as_ptr().cast(), 1);
                let e = err();
                libc::close(fd);
                if w != 1 {
                    return Err(e);
                }
            }
            let limit = |resource, bytes: u64| {
                let lim = libc::rlimit { rlim_cur: bytes, rlim_max: bytes };
                if libc::setrlimit(resource, &lim) != 0 {
                    return Err(err());
                }
                Ok(())
            };
            limit(libc::RLIMIT_CORE, 0)?;
            if let Some(bytes) = self.address_space {
                limit(libc::RLIMIT_AS, bytes)?;
            }
            if let Some(bytes) = self.file_size {
                limit(libc::RLIMIT_FSIZE, bytes)?;
            }
        }
        crate::sys::sched::lowest_for_this_thread()?;
        if let Some((uid, gid)) = self.account {
            super::account::switch_to(uid, gid)?;
        }
        // SAFETY: prctl, getppid and dup2 on the calling process and descriptors it holds.
        unsafe {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
                return Err(err());
            }
            if libc::getppid() != parent {
                return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
            }
            for (fd, at) in &self.fds {
                // dup2 clears close-on-exec on the new number: the process keeps it.
                if libc::dup2(fd.as_raw_fd(), *at) < 0 {
                    return Err(err());
                }
            }
        }
        match &self.landlock {
            Some(s) => s.enforce()?,
            None => {
                // SAFETY: prctl on the calling process.
                if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
                    return Err(err());
                }
            }
        }
        match &self.syscalls {
            // prctl and seccomp on a program built before the fork: async-signal-safe.
            Some(p) => seccompiler::apply_filter(p).map_err(|e| match e {
                seccompiler::Error::Seccomp(e) | seccompiler::Error::Prctl(e) => e,
                _ => std::io::Error::from_raw_os_error(libc::EINVAL),
            }),
            None => Ok(()),
        }
    }
}

fn err() -> std::io::Error {
    std::io::Error::last_os_error()
}

/// A program to start: what, where, with which environment and output.
pub struct Exec {
    pub program: OsString,
    pub args: Vec<OsString>,
    pub cwd: PathBuf,
    /// The whole environment (nothing of the agent's is inherited).
    pub env: Vec<(OsString, OsString)>,
    pub stdout: Stdio,
    pub stderr: Stdio,
}

/// Starts `exec` bound by `confinement` (stdin is /dev/null).
pub fn spawn(exec: Exec, confinement: Confinement) -> std::io::Result<Child> {
    let mut cmd = Command::new(&exec.program);
    cmd.args(&exec.args)
        .current_dir(&exec.cwd)
        .env_clear()
        .envs(exec.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(exec.stdout)
        .stderr(exec.stderr);
    // SAFETY: getpid has no preconditions.
    let parent = unsafe { libc::getpid() };
    // SAFETY: the closure only calls `Confinement::apply`, which is async-signal-safe.
    unsafe { cmd.pre_exec(move || confinement.apply(parent)) };
    cmd.spawn()
}

/// A pipe (read end, write end), both close-on-exec.
pub fn pipe() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two descriptors into `fds`.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(err());
    }
    // SAFETY: both are new descriptors owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// An anonymous in-memory file holding `data`, positioned at its start (close-on-exec).
pub fn memfd_with(name: &str, data: &[u8]) -> std::io::Result<OwnedFd> {
    use std::io::{Seek, Write};
    let c = CString::new(name).map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
    // SAFETY: memfd_create with a valid name returns a new descriptor or -1.
    let fd = unsafe { libc::memfd_create(c.as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(err());
    }
    // SAFETY: a new descriptor owned by nobody else.
    let mut f = std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) });
    f.write_all(data)?;
    f.rewind()?;
    Ok(f.into())
}
