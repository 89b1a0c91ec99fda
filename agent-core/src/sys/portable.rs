//! Calls made with `std` alone that more than one side of the seam shares (Linux and
//! `other.rs`); Windows has its own.

use std::io;
use std::path::Path;

/// Renames `from` over `to`, then fsyncs `to`'s directory so the rename survives a power
/// cut (a directory opens and syncs on Unix).
pub fn replace_durably(from: &Path, to: &Path) -> io::Result<()> {
    std::fs::rename(from, to)?;
    match to.parent().filter(|d| !d.as_os_str().is_empty()) {
        Some(dir) => std::fs::File::open(dir)?.sync_all(),
        None => Ok(()),
    }
}
