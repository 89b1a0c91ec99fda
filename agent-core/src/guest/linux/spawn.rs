//! Starting a guest process. Everything the guest must be bound by is applied in its own
//! process between fork and exec, in this order, with async-signal-safe calls only on
//! data prepared before the fork: its own process group; joining its cgroups (writing "0" to each
//! `cgroup.procs`, so the whole future tree is contained before the first instruction of
//! the job runs); rlimits; lowest priority; the unprivileged account when the agent is
//! root (after which the parent-death signal is set, as a credential change clears it,
//! and checked against a parent that already died); no-new-privileges and the Landlock
//! ruleset.

use super::priority;
use super::sandbox;
use crate::guest::GuestSpec;
use std::ffi::CString;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// Everything prepared for one guest before the fork.
pub struct Launch {
    pub procs_files: Vec<CString>,
    pub sandbox: Option<sandbox::Prepared>,
    /// RLIMIT_AS, for the no-cgroup fallback.
    pub address_space: Option<u64>,
    /// The unprivileged (uid, gid) to switch to, when the agent is root.
    pub account: Option<(u32, u32)>,
}

fn err() -> std::io::Error {
    std::io::Error::last_os_error()
}

/// Spawns the guest with its stdout and stderr in `workdir`.
pub fn spawn(spec: &GuestSpec, workdir: &Path, launch: Launch) -> std::io::Result<Child> {
    let log = |name: &str| std::fs::OpenOptions::new().create(true).append(true).open(workdir.join(name));
    let mut cmd = Command::new(&spec.command);
    cmd.args(&spec.args)
        .current_dir(workdir)
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", workdir)
        .env("TMPDIR", workdir.join("tmp"))
        .env("LANG", "C.UTF-8")
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(log("stdout.log")?)
        .stderr(log("stderr.log")?);
    // SAFETY: getpid has no preconditions.
    let parent = unsafe { libc::getpid() };
    let Launch { procs_files, sandbox, address_space, account } = launch;
    let pre_exec = move || -> std::io::Result<()> {
        // SAFETY: only async-signal-safe system calls on memory prepared before the fork.
        unsafe {
            if libc::setpgid(0, 0) != 0 {
                return Err(err());
            }
            for f in &procs_files {
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
            let core = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
            libc::setrlimit(libc::RLIMIT_CORE, &core);
            if let Some(bytes) = address_space {
                let lim = libc::rlimit { rlim_cur: bytes, rlim_max: bytes };
                if libc::setrlimit(libc::RLIMIT_AS, &lim) != 0 {
                    return Err(err());
                }
            }
        }
        priority::lowest_for_self()?;
        if let Some((uid, gid)) = account {
            super::account::switch_to(uid, gid)?;
        }
        // SAFETY: prctl and getppid on the calling process.
        unsafe {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
                return Err(err());
            }
            if libc::getppid() != parent {
                return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
            }
        }
        match &sandbox {
            Some(s) => s.enforce(),
            None => {
                // SAFETY: prctl on the calling process.
                if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
                    return Err(err());
                }
                Ok(())
            }
        }
    };
    // SAFETY: the closure is async-signal-safe (see above).
    unsafe { cmd.pre_exec(pre_exec) };
    cmd.spawn()
}
