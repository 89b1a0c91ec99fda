//! The system's memory pressure on Windows: one low-memory resource notification
//! (`CreateMemoryResourceNotification(LowMemoryResourceNotification)`), created with the
//! runtime and read with `QueryMemoryResourceNotification` on every tick. Windows signals
//! it when free physical memory runs low; it has no grade between, so a signalled
//! notification reads as [`PressureLevel::Critical`] and the rest as `Normal`.

use lull_core::guest_memory::PressureLevel;
use std::io;
use std::os::windows::io::{AsRawHandle, FromRawHandle, OwnedHandle};
use windows_sys::Win32::System::Memory::{
    CreateMemoryResourceNotification, LowMemoryResourceNotification, QueryMemoryResourceNotification,
};

/// The calls, as `lull status` names them when one fails.
pub const CREATE_CALL: &str = "CreateMemoryResourceNotification(LowMemoryResourceNotification)";
pub const QUERY_CALL: &str = "QueryMemoryResourceNotification";

/// The low-memory notification, open for the runtime's life.
#[derive(Debug)]
pub struct LowMemory(OwnedHandle);

impl LowMemory {
    pub fn create() -> io::Result<Self> {
        // SAFETY: no pointer arguments; the handle is checked, then owned.
        let raw = unsafe { CreateMemoryResourceNotification(LowMemoryResourceNotification) };
        if raw.is_null() {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a fresh handle owned here alone.
        Ok(Self(unsafe { OwnedHandle::from_raw_handle(raw) }))
    }

    /// The level now: `Critical` while Windows signals low memory.
    pub fn level(&self) -> io::Result<PressureLevel> {
        let mut low = 0;
        // SAFETY: the handle is open; `low` receives the state.
        if unsafe { QueryMemoryResourceNotification(self.0.as_raw_handle(), &mut low) } == 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(if low != 0 { PressureLevel::Critical } else { PressureLevel::Normal })
    }
}
