//! The account guests run as. An agent run by an ordinary owner runs guests as that owner
//! (confined by cgroups and Landlock). An agent running as root never runs a guest as
//! root: guests take the dedicated unprivileged account `guests.run_as` (`lull-guest`,
//! made by the package's install step or `ci/setup-guest.sh`), else `nobody`, and have
//! no supplementary groups. Their work directories then live where that account can
//! reach them (see [`crate::paths::Paths::work_root`]) and are handed to it.

use crate::guest::GuestError;
use std::ffi::CString;
use std::path::Path;

/// The account used when the configured one does not exist.
pub const FALLBACK: &str = "nobody";

/// An unprivileged account guests switch to before exec.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GuestAccount {
    pub name: String,
    pub uid: u32,
    pub gid: u32,
}

/// Looks a user up by name (`None` when there is no such user).
fn lookup(name: &str) -> Option<GuestAccount> {
    let c = CString::new(name).ok()?;
    // SAFETY: `passwd` is plain old data (integers and pointers); all-zero is a valid value.
    let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
    let mut buf = vec![0 as libc::c_char; 16 * 1024];
    let mut out: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: getpwnam_r writes into `pw` and `buf`, both valid for their given sizes, and
    // sets `out` to `&pw` or null; nothing is kept past the call.
    let rc = unsafe { libc::getpwnam_r(c.as_ptr(), &mut pw, buf.as_mut_ptr(), buf.len(), &mut out) };
    (rc == 0 && !out.is_null()).then(|| GuestAccount { name: name.to_string(), uid: pw.pw_uid, gid: pw.pw_gid })
}

/// The account guests switch to: `None` when the agent is not root (guests keep the
/// owner's identity); for root, `run_as`, else [`FALLBACK`] (with the reason, to be
/// logged). An account that is root itself is refused.
pub fn resolve(run_as: &str) -> Result<(Option<GuestAccount>, Option<String>), GuestError> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Ok((None, None));
    }
    let (account, note) = match lookup(run_as) {
        Some(a) => (a, None),
        None => match lookup(FALLBACK) {
            Some(a) => {
                (a, Some(format!("no user {run_as:?} (guests.run_as) on this machine: guests run as {FALLBACK:?}; create it with `useradd --system --no-create-home --shell /usr/sbin/nologin {run_as}`")))
            }
            None => {
                return Err(GuestError::Sandbox(format!(
                    "the agent runs as root and neither {run_as:?} (guests.run_as) nor {FALLBACK:?} exists: no guest may run as root"
                )))
            }
        },
    };
    if account.uid == 0 || account.gid == 0 {
        return Err(GuestError::Sandbox(format!(
            "guests.run_as = {:?} is root (uid {}, gid {}): guests never run as root",
            account.name, account.uid, account.gid
        )));
    }
    Ok((Some(account), note))
}

/// Hands `dir` and everything in it to the account (symlinks themselves, never their
/// targets).
pub fn hand_over(dir: &Path, account: &GuestAccount) -> std::io::Result<()> {
    std::os::unix::fs::lchown(dir, Some(account.uid), Some(account.gid))?;
    if std::fs::symlink_metadata(dir)?.is_dir() {
        for e in std::fs::read_dir(dir)? {
            hand_over(&e?.path(), account)?;
        }
    }
    Ok(())
}

/// Switches the calling process to the account: no supplementary groups, then the group,
/// then the user (real, effective and saved), which drops every capability.
/// Async-signal-safe: for use between fork and exec.
pub fn switch_to(uid: u32, gid: u32) -> std::io::Result<()> {
    // SAFETY: plain system calls on integers.
    unsafe {
        if libc::setgroups(0, std::ptr::null()) != 0 || libc::setresgid(gid, gid, gid) != 0 || libc::setresuid(uid, uid, uid) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_and_missing_accounts() {
        assert!(lookup("root").is_some_and(|a| a.uid == 0));
        assert!(lookup("no-such-user-lull").is_none());
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        match resolve("root") {
            Err(e) => assert!(root && e.to_string().contains("never run as root"), "{e}"),
            Ok((None, None)) => assert!(!root),
            other => panic!("{other:?}"),
        }
        if root {
            let (a, note) = resolve("no-such-user-lull").expect("falls back");
            assert_eq!(a.map(|a| a.name), Some(FALLBACK.to_string()));
            assert!(note.is_some_and(|n| n.contains("guests.run_as")));
        }
    }
}
