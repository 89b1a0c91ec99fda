//! Outbound network for a guest that asked for it where the owner allows it: a
//! `slirp4netns --disable-host-loopback` link (Debian package `slirp4netns`) into the
//! guest's network namespace. The guest reaches the internet through a user-space TCP/IP
//! stack, never the host's loopback, so never the services this machine keeps there (its
//! PostgreSQL, its coordinator); `10.0.2.2`, slirp's name for the host, is refused too.
//! Addresses of the machine's other interfaces are reached as any outside machine would
//! reach them. DNS goes to slirp's forwarder at `10.0.2.3`, which the guest's
//! `resolv.conf` names.
//!
//! The sandbox waits at bwrap's `--block-fd` until the link is up, so the job's first
//! connection already has it. slirp4netns runs as the guest (its cgroup, account, lowest
//! priority), joined to the guest's user namespace (the owner of its network namespace,
//! found with `NS_GET_USERNS`); it ends when the agent closes its exit pipe, which the
//! agent does once the guest's sandbox has ended, or when the agent dies.

use super::spawn::{self, Confinement, Exec};
use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// How long the link may take to come up (measured: 9–15 ms).
const READY_WITHIN: Duration = Duration::from_secs(5);
/// `NS_GET_USERNS`: the user namespace owning a namespace.
const NS_GET_USERNS: libc::c_ulong = 0xb7 << 8 | 1;
/// `/dev/net/tun`, which slirp4netns opens inside the guest's user namespace (so it must
/// be usable by everyone, as Debian makes it: 0666).
pub const TUN: &str = "/dev/net/tun";

/// A guest's running link.
pub struct Link {
    pub child: Child,
    /// Closing it ends slirp4netns.
    exit: Option<OwnedFd>,
}

impl Link {
    /// Ends the link (the guest's sandbox has ended) and waits briefly for it to go.
    pub fn close(&mut self) {
        self.exit.take();
        let deadline = Instant::now() + Duration::from_millis(500);
        while Instant::now() < deadline {
            if self.child.try_wait().ok().flatten().is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        if self.exit.is_some() {
            self.close();
        }
    }
}

/// Why outbound network cannot be given here, or `None` when it can: slirp4netns present
/// and `/dev/net/tun` usable by the guests' account.
pub fn unavailable() -> Option<String> {
    use std::os::unix::fs::PermissionsExt;
    if super::bubblewrap::which("slirp4netns").is_none() {
        return Some("slirp4netns is not installed (Debian package slirp4netns)".into());
    }
    match std::fs::metadata(TUN) {
        Ok(m) if m.permissions().mode() & 0o006 == 0o006 => None,
        Ok(m) => Some(format!("{TUN} is mode {:o}, not usable in a user namespace (Debian makes it 0666)", m.permissions().mode() & 0o777)),
        Err(e) => Some(format!("{TUN}: {e}")),
    }
}

/// The pipes between the agent and one outbound guest's bwrap: bwrap's ends go to it at
/// [`super::bubblewrap::INFO_FD`] and [`super::bubblewrap::BLOCK_FD`].
pub struct Gate {
    info: OwnedFd,
    block: OwnedFd,
}

impl Gate {
    /// Makes the pipes and hands bwrap its ends (and the resolver file) in `confinement`.
    pub fn new(confinement: &mut Confinement) -> std::io::Result<Self> {
        use super::bubblewrap::{BLOCK_FD, INFO_FD, RESOLV_FD};
        let (info, info_w) = spawn::pipe()?;
        let (block_r, block) = spawn::pipe()?;
        confinement.hand(info_w, INFO_FD)?;
        confinement.hand(block_r, BLOCK_FD)?;
        confinement.hand(spawn::memfd_with("lull-resolv", b"nameserver 10.0.2.3\n")?, RESOLV_FD)?;
        Ok(Self { info, block })
    }

    /// Once bwrap runs: links its sandbox's network namespace to the outside through
    /// slirp4netns, confined as `confinement` says, then lets the sandbox go on.
    pub fn open(self, confinement: Confinement) -> Result<Link, String> {
        let pid = read_child_pid(self.info)?;
        let netns = open_ns(&format!("/proc/{pid}/ns/net"))?;
        // SAFETY: NS_GET_USERNS on a namespace descriptor returns a new descriptor or -1.
        let userns = unsafe { libc::ioctl(netns.as_raw_fd(), NS_GET_USERNS) };
        if userns < 0 {
            return Err(format!("the sandbox's user namespace: {}", std::io::Error::last_os_error()));
        }
        // SAFETY: a new descriptor owned by nobody else.
        let userns = unsafe { OwnedFd::from_raw_fd(userns) };
        let link = start_slirp(netns, userns, confinement)?;
        // The sandbox reads one byte and goes on to run the job.
        // SAFETY: a one-byte write from a valid buffer to a descriptor we own.
        if unsafe { libc::write(self.block.as_raw_fd(), b"1".as_ptr().cast(), 1) } != 1 {
            return Err(format!("releasing the sandbox: {}", std::io::Error::last_os_error()));
        }
        Ok(link)
    }
}

/// Starts slirp4netns on the namespaces and waits until it reports the link configured.
fn start_slirp(netns: OwnedFd, userns: OwnedFd, mut confinement: Confinement) -> Result<Link, String> {
    let io = |what: &'static str| move |e: std::io::Error| format!("{what}: {e}");
    let (ready_r, ready_w) = spawn::pipe().map_err(io("a pipe"))?;
    let (exit_r, exit_w) = spawn::pipe().map_err(io("a pipe"))?;
    for (fd, at) in [(userns, 3), (netns, 4), (exit_r, 5), (ready_w, 6)] {
        confinement.hand(fd, at).map_err(io("handing a descriptor"))?;
    }
    // Its messages, read back if it fails (an in-memory file: never blocks it).
    let errors = spawn::memfd_with("lull-slirp-errors", b"").map_err(io("a memory file"))?;
    let program = super::bubblewrap::which("slirp4netns").unwrap_or_else(|| PathBuf::from("/usr/bin/slirp4netns"));
    let args = [
        "--userns-path=/proc/self/fd/3",
        "--netns-type=path",
        "--configure",
        "--mtu=65520",
        "--disable-host-loopback",
        "--exit-fd=5",
        "--ready-fd=6",
        "/proc/self/fd/4",
        "tap0",
    ];
    let exec = Exec {
        program: program.into_os_string(),
        args: args.iter().map(Into::into).collect(),
        cwd: Path::new("/").to_path_buf(),
        env: vec![("PATH".into(), "/usr/bin:/bin".into())],
        stdout: Stdio::null(),
        stderr: Stdio::from(errors.try_clone().map_err(io("a descriptor"))?),
    };
    let mut child = spawn::spawn(exec, confinement).map_err(io("starting slirp4netns"))?;
    let ready = wait_readable(&ready_r, READY_WITHIN).map_err(io("waiting for slirp4netns"))?;
    let mut byte = [0u8; 1];
    // SAFETY: reads at most one byte into a valid buffer.
    if ready && unsafe { libc::read(ready_r.as_raw_fd(), byte.as_mut_ptr().cast(), 1) } == 1 {
        return Ok(Link { child, exit: Some(exit_w) });
    }
    drop(exit_w);
    let _ = child.kill();
    let _ = child.wait();
    let (mut why, mut errors) = (String::new(), std::fs::File::from(errors));
    let _ = std::io::Seek::rewind(&mut errors).and_then(|()| errors.read_to_string(&mut why));
    Err(format!("slirp4netns did not bring the link up within {} s: {}", READY_WITHIN.as_secs(), why.trim()))
}

/// The sandbox's pid from bwrap's start report (`{"child-pid": N, …}`).
fn read_child_pid(info: OwnedFd) -> Result<u32, String> {
    let deadline = Instant::now() + READY_WITHIN;
    let mut f = std::fs::File::from(info);
    let mut text = Vec::new();
    let mut buf = [0u8; 1024];
    while !text.contains(&b'}') {
        let left = deadline.saturating_duration_since(Instant::now());
        if !wait_readable(&f, left).map_err(|e| format!("bwrap's start report: {e}"))? {
            return Err("bwrap did not report its sandbox within 5 s".into());
        }
        let n = f.read(&mut buf).map_err(|e| format!("bwrap's start report: {e}"))?;
        if n == 0 {
            return Err("bwrap ended before reporting its sandbox".into());
        }
        text.extend_from_slice(&buf[..n]);
    }
    let v: serde_json::Value = serde_json::from_slice(&text).map_err(|e| format!("bwrap's start report: {e}"))?;
    v.get("child-pid").and_then(|p| p.as_u64()).map(|p| p as u32).ok_or_else(|| "bwrap's start report has no child-pid".into())
}

fn open_ns(path: &str) -> Result<OwnedFd, String> {
    let f = std::fs::File::open(path).map_err(|e| format!("{path}: {e}"))?;
    Ok(f.into())
}

/// Waits until `fd` is readable (data or end of file), at most `within`.
fn wait_readable(fd: &impl AsRawFd, within: Duration) -> std::io::Result<bool> {
    let mut p = libc::pollfd { fd: fd.as_raw_fd(), events: libc::POLLIN, revents: 0 };
    let ms = within.as_millis().min(i32::MAX as u128) as i32;
    // SAFETY: poll on one valid pollfd.
    let n = unsafe { libc::poll(&mut p, 1, ms) };
    if n < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(n > 0)
}
