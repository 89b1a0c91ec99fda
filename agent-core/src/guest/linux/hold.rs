//! A guest's own freeze (its cgroup's `cgroup.freeze`), held for any of several reasons at
//! once: its gang is halted, or its disk use is being measured ([`super::disk`]). The
//! guest is frozen while any reason holds and thawed only when the last one lets go, so
//! the disk guard's thaw never releases a halted gang member, nor the gang's release a
//! guest still being measured. The policy's freezes act on the agent instance's cgroup
//! above and are not counted here.

use std::path::PathBuf;
use std::sync::Mutex;

/// Why a guest is held frozen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    /// Its gang is halted while a lost member is replaced.
    Gang = 1,
    /// It could be over its disk limit and is being measured.
    Disk = 2,
}

/// One guest's own freeze.
#[derive(Debug)]
pub struct Hold {
    freeze_file: PathBuf,
    reasons: Mutex<u8>,
}

impl Hold {
    /// The hold of the guest whose cgroup's freeze file is `freeze_file`.
    pub fn new(freeze_file: PathBuf) -> Self {
        Self { freeze_file, reasons: Mutex::new(0) }
    }

    /// Holds (`on`) or lets go for `reason`; writes the freeze file only when the guest's
    /// state changes.
    pub fn set(&self, reason: Reason, on: bool) -> std::io::Result<()> {
        let mut reasons = self.reasons.lock().unwrap_or_else(|p| p.into_inner());
        let was = *reasons != 0;
        if on {
            *reasons |= reason as u8;
        } else {
            *reasons &= !(reason as u8);
        }
        let now = *reasons != 0;
        if was == now {
            return Ok(());
        }
        std::fs::write(&self.freeze_file, if now { "1" } else { "0" })
    }

    /// Whether `reason` holds the guest now.
    pub fn held_for(&self, reason: Reason) -> bool {
        *self.reasons.lock().unwrap_or_else(|p| p.into_inner()) & reason as u8 != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_guest_thaws_only_when_the_last_reason_lets_go() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("cgroup.freeze");
        std::fs::write(&file, "0").unwrap();
        let h = Hold::new(file.clone());
        let state = || std::fs::read_to_string(&file).unwrap();
        h.set(Reason::Gang, true).unwrap();
        assert_eq!(state(), "1");
        h.set(Reason::Disk, true).unwrap();
        h.set(Reason::Disk, false).unwrap();
        assert_eq!(state(), "1", "the disk guard's thaw kept the gang's hold");
        assert!(h.held_for(Reason::Gang) && !h.held_for(Reason::Disk));
        // Written only on a change: a file reset behind its back is not rewritten.
        std::fs::write(&file, "x").unwrap();
        h.set(Reason::Gang, true).unwrap();
        assert_eq!(state(), "x");
        h.set(Reason::Gang, false).unwrap();
        assert_eq!(state(), "0");
    }
}
