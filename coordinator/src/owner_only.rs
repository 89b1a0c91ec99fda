//! Owner-only files, the coordinator's one platform choice: on Unix a new file is created
//! 0600 and an existing one's group and other bits are taken off; elsewhere (Windows, issue
//! 30) files keep the access control list they inherit from their directory, and nothing
//! here reports a mode as set that was not.

use std::fs::{Metadata, OpenOptions};
use std::path::Path;

/// Makes `opts` create its file readable and writable by its owner only (0600 on Unix;
/// the inherited access control list elsewhere).
pub fn create_owner_only(opts: &mut OpenOptions) -> &mut OpenOptions {
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(opts, 0o600);
    opts
}

/// Whether the file's mode lets others (group or other) in: never known off Unix.
pub fn others_may_access(meta: &Metadata) -> bool {
    #[cfg(unix)]
    return std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & 0o077 != 0;
    #[cfg(not(unix))]
    {
        let _ = meta;
        false
    }
}

/// Sets `path` to 0600 (Unix); elsewhere `Unsupported`, as nothing is set.
pub fn set_owner_only(path: &Path) -> std::io::Result<()> {
    #[cfg(unix)]
    return std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(0o600));
    #[cfg(not(unix))]
    {
        let _ = path;
        Err(std::io::Error::new(std::io::ErrorKind::Unsupported, "owner-only files are not implemented on this platform yet"))
    }
}
