//! Owner-only files, the coordinator's one platform choice: on Unix a new file is created
//! 0600 and an existing one's group and other bits are taken off; on Windows both are the
//! agent's owner-only access control lists (`agent_core::private_files`, whose Windows
//! side is `agent-core/src/sys/windows/fs.rs`: one implementation for the whole of Lull);
//! elsewhere files keep what they inherit, and nothing here reports a mode as set that was
//! not.

use std::fs::{File, OpenOptions};
use std::path::Path;

/// Opens `path` with `opts` (which create it) readable and writable by its owner only
/// (0600 on Unix; the owner-only access control list on Windows).
pub fn open_owner_only(opts: &mut OpenOptions, path: &Path) -> std::io::Result<File> {
    #[cfg(unix)]
    return std::os::unix::fs::OpenOptionsExt::mode(opts, 0o600).open(path);
    #[cfg(windows)]
    return agent_core::private_files::open_private(opts, path);
    #[cfg(not(any(unix, windows)))]
    opts.open(path)
}

/// Whether others than the owner may open `path` (group or other bits on Unix; anyone but
/// the owner and SYSTEM in its access control list on Windows); never known elsewhere.
pub fn others_may_access(path: &Path) -> std::io::Result<bool> {
    #[cfg(unix)]
    return Ok(std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(path)?.permissions()) & 0o077 != 0);
    #[cfg(windows)]
    return agent_core::private_files::others_may_access(path);
    #[cfg(not(any(unix, windows)))]
    {
        let _ = path;
        Ok(false)
    }
}

/// Makes `path` owner-only (0600 on Unix, the owner-only list on Windows); elsewhere
/// `Unsupported`, as nothing is set.
pub fn set_owner_only(path: &Path) -> std::io::Result<()> {
    #[cfg(unix)]
    return std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(0o600));
    #[cfg(windows)]
    return agent_core::private_files::make_owner_only(path);
    #[cfg(not(any(unix, windows)))]
    {
        let _ = path;
        Err(std::io::Error::new(std::io::ErrorKind::Unsupported, "owner-only files are not implemented on this platform yet"))
    }
}
