//! The Landlock sandbox: the fallback where user namespaces are unavailable (see
//! [`super::bubblewrap`], which is the sandbox wherever they work). A ruleset built in the
//! agent (allocation is not safe between fork and exec) and enforced in the guest's
//! process just before exec, together with no-new-privileges.
//!
//! Guests may read and execute system directories, read and write only their own work
//! directory, and use a few device files; everything else — the owner's home above all
//! — is denied by the kernel. They may not signal or connect to abstract sockets of
//! processes outside their sandbox (Landlock scopes, ABI 6). TCP bind and connect are
//! denied (ABI 4; Landlock does not cover UDP, and outbound network is refused without
//! namespaces). Weaker than the namespaces, and said so at start-up: the guest sees every
//! process of the machine (command lines in `/proc`), a kernel before ABI 6 lets it
//! signal the owner's processes, and UDP and Unix sockets are open to it; the agent's
//! control socket refuses it by its cgroup or ancestry instead.
//!
//! Landlock is not layered inside the namespaces: it forbids mount(2), so it cannot be
//! enforced before bubblewrap builds the view; enforcing it inside would need an exec shim
//! in the view (a second exec per start and a binary to ship). In the view, what it adds
//! here is already held by the namespaces: only the bound directories exist (system ones
//! read-only), the PID namespace hides and shields every outside process, and the network
//! namespace holds TCP, UDP and abstract sockets.

use crate::guest::GuestError;
use landlock::{path_beneath_rules, Access, AccessFs, AccessNet, Ruleset, RulesetAttr, RulesetCreatedAttr, Scope, ABI};
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;

/// Read-only (and executable) system locations.
pub const SYSTEM_RO: &[&str] = &["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", "/proc", "/sys"];
/// Device files guests may read and write.
const DEVICES_RW: &[&str] = &["/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty"];

const ABI_TARGET: ABI = ABI::V6;

/// The kernel's Landlock ABI version (0 when unsupported).
pub fn kernel_abi() -> i64 {
    // SAFETY: landlock_create_ruleset with a NULL attribute, size 0 and the VERSION flag
    // only returns the ABI version.
    let v = unsafe { libc::syscall(libc::SYS_landlock_create_ruleset, std::ptr::null::<u8>(), 0usize, 1u32) };
    v.max(0)
}

/// A ruleset ready to be enforced in a guest.
#[derive(Debug)]
pub struct Prepared {
    fd: OwnedFd,
}

impl Prepared {
    /// Enforces it on the calling process (with no-new-privileges). Async-signal-safe.
    pub fn enforce(&self) -> std::io::Result<()> {
        // SAFETY: prctl and landlock_restrict_self on an fd we own; no memory is touched.
        unsafe {
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if libc::syscall(libc::SYS_landlock_restrict_self, self.fd.as_raw_fd(), 0u32) != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
        Ok(())
    }
}

/// Builds the ruleset for a guest working in `workdir`. `Ok(None)` when the kernel has
/// no Landlock (the runtime then says so loudly).
pub fn prepare(workdir: &Path) -> Result<Option<Prepared>, GuestError> {
    if kernel_abi() < 1 {
        return Ok(None);
    }
    let e = |e: landlock::RulesetError| GuestError::Sandbox(e.to_string());
    let mut rs = Ruleset::default().handle_access(AccessFs::from_all(ABI_TARGET)).map_err(e)?;
    rs = rs.handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp).map_err(e)?;
    if kernel_abi() >= 6 {
        rs = rs.scope(Scope::from_all(ABI_TARGET)).map_err(e)?;
    }
    let read = AccessFs::from_read(ABI_TARGET);
    let created = rs
        .create()
        .map_err(e)?
        .add_rules(path_beneath_rules(SYSTEM_RO, read))
        .map_err(e)?
        .add_rules(path_beneath_rules(DEVICES_RW, read | AccessFs::WriteFile))
        .map_err(e)?
        .add_rules(path_beneath_rules([workdir], AccessFs::from_all(ABI_TARGET)))
        .map_err(e)?;
    let fd: Option<OwnedFd> = created.into();
    Ok(fd.map(|fd| Prepared { fd }))
}
