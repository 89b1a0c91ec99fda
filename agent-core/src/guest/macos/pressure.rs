//! The system's memory-pressure notifications on macOS: a dispatch source of type
//! `DISPATCH_SOURCE_TYPE_MEMORYPRESSURE` for the normal, warning and critical levels,
//! whose handler (on a utility-class global queue) stores each level the system announces
//! where the runtime's tick reads it ([`Notifications::level`]). A source tells changes
//! only, so the level at start, and the level whenever no notification came yet, is the
//! `kern.memorystatus_vm_pressure_level` sysctl's ([`super::group::memory_pressure`]).
//! Built (type-checked), never run, on Lull's machines.

use dispatch2::{
    _dispatch_source_type_memorypressure, DispatchObject, DispatchQoS, DispatchQueue, DispatchRetained, DispatchSource,
    GlobalQueueIdentifier,
};
use lull_core::guest_memory::PressureLevel;
use std::ffi::c_void;
use std::sync::atomic::{AtomicUsize, Ordering};

/// `DISPATCH_MEMORYPRESSURE_NORMAL`, `_WARN` and `_CRITICAL`: the levels asked for and told.
const NORMAL: usize = 0x1;
const WARN: usize = 0x2;
const CRITICAL: usize = 0x4;

/// The last level a notification told (0: none yet). One per process: the runtime is.
static TOLD: AtomicUsize = AtomicUsize::new(0);

/// The level a notification's data says (the highest flag set).
pub fn level_of(data: usize) -> Option<PressureLevel> {
    if data & CRITICAL != 0 {
        Some(PressureLevel::Critical)
    } else if data & WARN != 0 {
        Some(PressureLevel::Warning)
    } else if data & NORMAL != 0 {
        Some(PressureLevel::Normal)
    } else {
        None
    }
}

/// Runs on the source's queue for each notification; its context is the source.
extern "C" fn on_pressure(context: *mut c_void) {
    if context.is_null() {
        return;
    }
    // SAFETY: the context is the source itself, set before it was resumed and kept alive
    // (by `Notifications`) until it is cancelled.
    let source = unsafe { &*(context as *const DispatchSource) };
    TOLD.store(source.data(), Ordering::Release);
}

/// The memory-pressure source while it is held; dropping it cancels the source.
pub struct Notifications {
    source: DispatchRetained<DispatchSource>,
}

impl std::fmt::Debug for Notifications {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Notifications")
    }
}

impl Notifications {
    /// Asks the system for its memory-pressure notifications.
    pub fn start() -> Self {
        let queue = DispatchQueue::global_queue(GlobalQueueIdentifier::QualityOfService(DispatchQoS::Utility));
        let kind = (&raw const _dispatch_source_type_memorypressure).cast_mut();
        // SAFETY: the memory-pressure type with its own flags as the mask and no handle,
        // on a global queue.
        let source = unsafe { DispatchSource::new(kind, 0, NORMAL | WARN | CRITICAL, Some(&queue)) };
        let raw = &*source as *const DispatchSource as *mut c_void;
        // SAFETY: the context is the source, which outlives its handler's calls (cancelled
        // in `drop` while still retained here).
        unsafe { source.set_context(raw) };
        source.set_event_handler_f(on_pressure);
        source.resume();
        Self { source }
    }

    /// The last level the system told, or `None` when it has told none since the start
    /// (then read the sysctl).
    pub fn level(&self) -> Option<PressureLevel> {
        level_of(TOLD.load(Ordering::Acquire))
    }
}

impl Drop for Notifications {
    fn drop(&mut self) {
        self.source.cancel();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_highest_flag_told_is_the_level() {
        assert_eq!(level_of(0), None);
        assert_eq!(level_of(NORMAL), Some(PressureLevel::Normal));
        assert_eq!(level_of(WARN), Some(PressureLevel::Warning));
        assert_eq!(level_of(NORMAL | CRITICAL), Some(PressureLevel::Critical));
    }
}
