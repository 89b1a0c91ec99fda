//! The memory-pressure guard of the runtimes whose system grades its own pressure
//! (macOS's `kern.memorystatus_vm_pressure_level`, Windows's low-memory notification):
//! each reading stepped through lull-core's [`LevelWatch`], what it decides turned into
//! what the runtime does ([`Act`]), and a reading that fails said once (and kept for
//! `lull status` until one succeeds again).

use crate::policy::GuestDirective;
use lull_core::guest_memory::{LevelWatch, PressureDecision, PressureLevel};
use std::time::Duration;
use tracing::{info, warn};

/// What the runtime does to its guests after a reading.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Act {
    Freeze,
    Evict,
    Thaw,
    Nothing,
}

/// The watch and the last reading's failure.
#[derive(Debug, Default)]
pub struct LevelGuard {
    watch: LevelWatch,
    /// The last reading failed: the call and its error.
    unread: Option<String>,
}

impl LevelGuard {
    /// Whether the guard holds the guests frozen (the policy must not thaw them).
    pub fn frozen(&self) -> bool {
        self.watch.frozen()
    }

    /// Whether the pressure is raised: no new guest may start.
    pub fn raised(&self) -> bool {
        self.watch.raised()
    }

    /// The last reading's failure (the call and its error), if it failed.
    pub fn unread(&self) -> Option<&String> {
        self.unread.as_ref()
    }

    /// One `reading` (the level, or the call that failed and its error), with `active`
    /// true while a guest runs: freeze while raised, evict when critical lasts
    /// `pressure_kill_s`, thaw when normal again if `directive` lets guests run.
    pub fn step(&mut self, reading: Result<PressureLevel, String>, active: bool, pressure_kill_s: u64, directive: GuestDirective) -> Act {
        let level = match reading {
            Ok(level) => {
                self.unread = None;
                level
            }
            Err(why) => {
                if self.unread.as_deref() != Some(&why) {
                    warn!("memory pressure not read: {why}");
                    self.unread = Some(why);
                }
                return Act::Nothing;
            }
        };
        match self.watch.step(crate::clock::mono_now(), level, active, Duration::from_secs(pressure_kill_s)) {
            PressureDecision::Freeze => {
                warn!(?level, "the system's memory pressure is raised: guests frozen");
                Act::Freeze
            }
            PressureDecision::Kill => {
                warn!("the system's memory pressure stayed critical for [guests] pressure_kill_s: guests evicted");
                Act::Evict
            }
            PressureDecision::Thaw if matches!(directive, GuestDirective::Accept | GuestDirective::Linger) => {
                info!("the system's memory pressure is normal again: guests thawed");
                Act::Thaw
            }
            PressureDecision::Thaw | PressureDecision::Hold => Act::Nothing,
        }
    }
}
