//! Terminal input backend: the owner typing in a text console (`/dev/tty1`…) or in any
//! terminal or remote login (ssh, `script`, terminal emulators: `/dev/pts/N`), seen as a
//! *read* of their tty, by inotify. Every `IN_ACCESS` on a tty owned by the owner becomes
//! [`InputSink::activity`] at once (the fast path freezes guests from this thread).
//!
//! Only reads count: the shell or editor reading what the owner typed. Writes
//! (`IN_MODIFY`) are output, which a build or `tail -f` produces with nobody there.
//! Privacy: the backend never opens a tty. It learns from the kernel that a tty it
//! watches was read, and when; the content is never within its reach.
//!
//! Which ttys: each tty owned by the owner gets a watch of its own (the kernel does not
//! pass a tty's reads on to a watch of its directory). `/dev/pts` is watched for ptys
//! appearing, being opened or handed to a user (sshd creates a pty as root, then gives
//! it to the user), `/dev` for text consoles handed to a user at a console login; each
//! then gets its watch, and each read's tty is `stat`ed for its owner again. A watch
//! ends by itself when its pty goes away. The owner is the
//! agent's user, and for a root agent also the user it was started for (`SUDO_UID`,
//! `PKEXEC_UID`, or `XDG_RUNTIME_DIR=/run/user/UID`); with `input.all_users` every
//! user's terminals count.
//!
//! Where inotify cannot be had, the backend falls back to polling the ttys' access times
//! once a second; the kernel updates those only every 8 s on ttys (to hide keystroke
//! timing), so that fallback sees the owner late.

use crate::input::{InputBackend, InputError, InputSink};
use std::collections::HashMap;
use std::ffi::CString;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

const NAME: &str = "terminal";
const PTS: &str = "/dev/pts";
const DEV: &str = "/dev";
/// Text consoles watched: `/dev/tty1` to `/dev/tty63` (`tty0` is "the current console",
/// an alias).
const CONSOLES: std::ops::RangeInclusive<u32> = 1..=63;

/// Whose terminals count.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Owners {
    /// Every user's.
    All,
    /// These users'.
    Uids(Vec<u32>),
}

impl Owners {
    /// The owner's terminals, or everyone's with `all_users`: the agent's uid, and for a
    /// root agent the user it was started for, found in `env`.
    pub fn from_env(all_users: bool, euid: u32, env: impl Fn(&str) -> Option<String>) -> Self {
        if all_users {
            return Self::All;
        }
        let mut uids = vec![euid];
        if euid == 0 {
            let runtime = env("XDG_RUNTIME_DIR").and_then(|d| d.strip_prefix("/run/user/").map(str::to_owned));
            for v in [env("SUDO_UID"), env("PKEXEC_UID"), runtime].into_iter().flatten() {
                if let Ok(u) = v.trim_end_matches('/').parse::<u32>() {
                    if !uids.contains(&u) {
                        uids.push(u);
                    }
                }
            }
        }
        Self::Uids(uids)
    }

    /// Whether a tty owned by `uid` counts.
    pub fn count(&self, uid: u32) -> bool {
        match self {
            Self::All => true,
            Self::Uids(u) => u.contains(&uid),
        }
    }

    fn describe(&self) -> String {
        match self {
            Self::All => "every user".into(),
            Self::Uids(u) => format!("uid {}", u.iter().map(|u| u.to_string()).collect::<Vec<_>>().join(", ")),
        }
    }
}

/// The terminal backend.
#[derive(Debug)]
pub struct Terminal {
    pub owners: Owners,
}

impl Terminal {
    /// The backend for the agent's configuration (`input.all_users`).
    pub fn new(all_users: bool) -> Self {
        // SAFETY: geteuid has no preconditions.
        let euid = unsafe { libc::geteuid() };
        Self { owners: Owners::from_env(all_users, euid, |k| std::env::var(k).ok()) }
    }

    /// Whether this machine has ptys to watch (`/dev/pts` is mounted).
    pub fn probe() -> Result<(), String> {
        if Path::new(PTS).join("ptmx").exists() || Path::new(PTS).is_dir() {
            Ok(())
        } else {
            Err(format!("{PTS} is not there"))
        }
    }
}

fn failed(why: impl std::fmt::Display) -> InputError {
    InputError::Failed { backend: NAME, why: why.to_string() }
}

/// Whether a `/dev` entry name is a text console this backend watches.
fn is_console(name: &str) -> bool {
    name.strip_prefix("tty").and_then(|n| n.parse::<u32>().ok()).is_some_and(|n| CONSOLES.contains(&n))
}

/// One inotify instance and what its watches stand for.
struct Inotify {
    fd: std::os::fd::OwnedFd,
    /// Watch descriptor → the watched path and what it is.
    watches: HashMap<i32, (PathBuf, WatchKind)>,
    /// The ttys watched, by path.
    ttys: HashMap<PathBuf, i32>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum WatchKind {
    /// `/dev/pts`: ptys appearing, opened or handed to a user (the kernel does not pass
    /// a tty's reads on to a watch of its directory, so each tty needs its own watch).
    Ptys,
    /// `/dev`: consoles handed to a user (attribute changes).
    Dev,
    /// One tty: its reads.
    Tty,
}

impl Inotify {
    fn new() -> std::io::Result<Self> {
        use std::os::fd::FromRawFd;
        // SAFETY: inotify_init1 takes flags only; a non-negative result is a new fd we own.
        let fd = unsafe { libc::inotify_init1(libc::IN_CLOEXEC) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: fd is a fresh descriptor owned by nobody else.
        Ok(Self { fd: unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) }, watches: HashMap::new(), ttys: HashMap::new() })
    }

    fn add(&mut self, path: &Path, mask: u32, kind: WatchKind) -> std::io::Result<()> {
        use std::os::fd::AsRawFd;
        use std::os::unix::ffi::OsStrExt;
        let c = CString::new(path.as_os_str().as_bytes()).map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
        // SAFETY: a valid inotify fd and a NUL-terminated path.
        let wd = unsafe { libc::inotify_add_watch(self.fd.as_raw_fd(), c.as_ptr(), mask) };
        if wd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        self.watches.insert(wd, (path.to_path_buf(), kind));
        if kind == WatchKind::Tty {
            self.ttys.insert(path.to_path_buf(), wd);
        }
        Ok(())
    }

    /// Watches a tty's reads if it is the owner's and not watched yet. Fails quietly
    /// where the agent may not read it (another user's, to a non-root agent).
    fn watch_tty(&mut self, path: &Path, owners: &Owners) -> bool {
        if self.ttys.contains_key(path) || !owner_of(path).is_some_and(|u| owners.count(u)) {
            return false;
        }
        self.add(path, libc::IN_ACCESS, WatchKind::Tty).is_ok()
    }

    /// The kernel dropped a watch (its tty went away).
    fn forget(&mut self, wd: i32) {
        if let Some((path, _)) = self.watches.remove(&wd) {
            self.ttys.remove(&path);
        }
    }

    /// Blocks for the next batch of events; calls `each(wd, mask, name)` per event.
    fn read(&self, buf: &mut [u8], mut each: impl FnMut(i32, u32, &[u8])) -> std::io::Result<()> {
        use std::os::fd::AsRawFd;
        // SAFETY: reading into a buffer we own, at most its length.
        let n = unsafe { libc::read(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            return if e.kind() == std::io::ErrorKind::Interrupted { Ok(()) } else { Err(e) };
        }
        let (n, head) = (n as usize, std::mem::size_of::<libc::inotify_event>());
        let mut off = 0;
        while off + head <= n {
            // SAFETY: the kernel wrote whole events; read_unaligned copes with the
            // byte buffer's alignment.
            let ev: libc::inotify_event = unsafe { std::ptr::read_unaligned(buf[off..].as_ptr().cast()) };
            let name_end = (off + head + ev.len as usize).min(n);
            let raw = &buf[off + head..name_end];
            let name = &raw[..raw.iter().position(|b| *b == 0).unwrap_or(raw.len())];
            each(ev.wd, ev.mask, name);
            off = name_end;
        }
        Ok(())
    }
}

fn owner_of(path: &Path) -> Option<u32> {
    std::fs::metadata(path).ok().map(|m| m.uid())
}

impl InputBackend for Terminal {
    fn name(&self) -> &'static str {
        NAME
    }

    fn blind_spots(&self) -> &'static str {
        "terminal output (only reads of what is typed count); serial lines; sessions without a tty (ssh commands without -t, file transfers); other users' terminals unless input.all_users"
    }

    fn run(self: Box<Self>, sink: InputSink) -> Result<(), InputError> {
        Self::probe().map_err(|why| InputError::Unavailable { backend: NAME, why })?;
        let mut ino = match Inotify::new() {
            Ok(i) => i,
            Err(e) => {
                tracing::warn!("input backend {NAME}: no inotify ({e}); polling tty access times every second instead");
                return poll_atimes(&self.owners, &sink);
            }
        };
        let owners = &self.owners;
        ino.add(Path::new(PTS), libc::IN_CREATE | libc::IN_ATTRIB | libc::IN_OPEN, WatchKind::Ptys)
            .map_err(|e| failed(format!("cannot watch {PTS}: {e}")))?;
        if let Err(e) = ino.add(Path::new(DEV), libc::IN_ATTRIB | libc::IN_CREATE, WatchKind::Dev) {
            tracing::info!("input backend {NAME}: cannot watch {DEV} for console logins: {e}");
        }
        for e in std::fs::read_dir(PTS).into_iter().flatten().flatten() {
            if e.file_name() != "ptmx" {
                ino.watch_tty(&e.path(), owners);
            }
        }
        for n in CONSOLES {
            ino.watch_tty(Path::new(&format!("/dev/tty{n}")), owners);
        }
        tracing::debug!("input backend {NAME}: watching {} ttys of {}", ino.ttys.len(), owners.describe());
        let mut buf = vec![0u8; 4096];
        loop {
            let mut hit = false;
            let mut check: Vec<PathBuf> = Vec::new();
            let mut gone: Vec<i32> = Vec::new();
            ino.read(&mut buf, |wd, mask, name| {
                let Some((path, kind)) = ino.watches.get(&wd) else { return };
                match kind {
                    WatchKind::Tty if mask & libc::IN_IGNORED != 0 => gone.push(wd),
                    WatchKind::Tty if mask & libc::IN_ACCESS != 0 => hit |= owner_of(path).is_some_and(|u| owners.count(u)),
                    WatchKind::Ptys if !name.is_empty() && name != b"ptmx" => {
                        check.push(path.join(<std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(name)))
                    }
                    WatchKind::Dev => {
                        if let Some(n) = std::str::from_utf8(name).ok().filter(|n| is_console(n)) {
                            check.push(PathBuf::from(format!("/dev/{n}")));
                        }
                    }
                    _ => {}
                }
            })
            .map_err(|e| failed(format!("reading inotify events: {e}")))?;
            // Privacy: only that a tty was read, and now, goes on.
            if hit && !sink.activity() {
                return Ok(());
            }
            for wd in gone {
                ino.forget(wd);
            }
            for p in check {
                if ino.watch_tty(&p, owners) {
                    tracing::debug!("input backend {NAME}: watching {}", p.display());
                }
            }
            if sink.is_closed() {
                return Ok(());
            }
        }
    }
}

/// The fallback: the owner's ttys' access times, once a second.
fn poll_atimes(owners: &Owners, sink: &InputSink) -> Result<(), InputError> {
    let mut seen: HashMap<PathBuf, i64> = HashMap::new();
    loop {
        let ptys = std::fs::read_dir(PTS).into_iter().flatten().flatten().map(|e| e.path());
        let consoles = CONSOLES.map(|n| PathBuf::from(format!("/dev/tty{n}")));
        let mut hit = false;
        for p in ptys.chain(consoles) {
            let Ok(m) = std::fs::metadata(&p) else { continue };
            if !owners.count(m.uid()) {
                continue;
            }
            let t = m.atime() * 1_000_000_000 + m.atime_nsec();
            if seen.insert(p, t).is_some_and(|old| t > old) {
                hit = true;
            }
        }
        if (hit && !sink.activity()) || sink.is_closed() {
            return Ok(());
        }
        std::thread::sleep(std::time::Duration::from_secs(1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owners_of_a_root_agent_include_the_user_it_serves() {
        let env =
            |vars: &'static [(&'static str, &'static str)]| move |k: &str| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string());
        assert_eq!(Owners::from_env(false, 1000, env(&[("SUDO_UID", "1001")])), Owners::Uids(vec![1000]));
        assert_eq!(
            Owners::from_env(false, 0, env(&[("SUDO_UID", "1001"), ("XDG_RUNTIME_DIR", "/run/user/1002")])),
            Owners::Uids(vec![0, 1001, 1002])
        );
        assert_eq!(Owners::from_env(true, 1000, env(&[])), Owners::All);
        assert!(Owners::All.count(4242) && !Owners::Uids(vec![0]).count(1000));
        assert!(is_console("tty1") && is_console("tty63") && !is_console("tty0") && !is_console("ttyS0") && !is_console("tty"));
    }

    /// A real pty: a read of its slave side (what a shell does with typed input) is
    /// activity; a write (output) is not; another user's pty is not.
    #[test]
    fn a_read_of_an_owned_pty_is_activity_and_output_is_not() {
        use std::io::{Read, Write};
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let sink = InputSink::new(tx, None);
        // SAFETY: plain libc calls on descriptors this test owns.
        let (master, slave_path) = unsafe {
            let m = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY);
            assert!(m >= 0);
            assert_eq!(libc::grantpt(m), 0);
            assert_eq!(libc::unlockpt(m), 0);
            let name = std::ffi::CStr::from_ptr(libc::ptsname(m)).to_string_lossy().into_owned();
            (std::fs::File::from(<std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(m)), PathBuf::from(name))
        };
        let mut slave = std::fs::OpenOptions::new().read(true).write(true).open(&slave_path).unwrap();
        let uid = owner_of(&slave_path).unwrap();
        let other = Owners::Uids(vec![uid.wrapping_add(4242)]);
        for (owners, counts) in [(other, false), (Owners::Uids(vec![uid]), true)] {
            let b = Box::new(Terminal { owners });
            let s = sink.clone();
            std::thread::spawn(move || b.run(s));
            std::thread::sleep(std::time::Duration::from_millis(200));
            // Output to the terminal: not the owner.
            slave.write_all(b"build output\n").unwrap();
            std::thread::sleep(std::time::Duration::from_millis(200));
            let mut drain = [0u8; 64];
            let _ = (&master).read(&mut drain);
            assert!(rx.try_recv().is_err(), "output counted as input");
            // The owner types; the shell reads it.
            (&master).write_all(b"x\n").unwrap();
            let mut got = [0u8; 8];
            let _ = slave.read(&mut got).unwrap();
            std::thread::sleep(std::time::Duration::from_millis(300));
            assert_eq!(rx.try_recv().is_ok(), counts, "a read of a pty owned by uid {uid}");
            while rx.try_recv().is_ok() {}
            std::thread::sleep(std::time::Duration::from_millis(250));
        }
    }
}
