//! Freezing guests on Windows: every thread of every process in a guest's job is
//! suspended (`SuspendThread`, found with a Toolhelp thread snapshot) and later resumed
//! (`ResumeThread`). Suspensions count, so the policy's freeze and a gang hold of one
//! guest compose: a thread runs again only when both are lifted. [`Freezer`] holds the
//! jobs for the input thread's fast path.

use super::job::Job;
use std::io;
use std::os::windows::io::{FromRawHandle, OwnedHandle};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use windows_sys::Win32::Foundation::{CloseHandle, INVALID_HANDLE_VALUE};
use windows_sys::Win32::System::Diagnostics::ToolHelp::{
    CreateToolhelp32Snapshot, Thread32First, Thread32Next, TH32CS_SNAPTHREAD, THREADENTRY32,
};
use windows_sys::Win32::System::Threading::{OpenThread, ResumeThread, SuspendThread, THREAD_SUSPEND_RESUME};

/// The ids of every thread of the processes `pids`, from one Toolhelp snapshot.
fn threads_of(pids: &[u32]) -> io::Result<Vec<u32>> {
    // SAFETY: a snapshot of all threads; the handle is checked, then owned.
    let raw = unsafe { CreateToolhelp32Snapshot(TH32CS_SNAPTHREAD, 0) };
    if raw == INVALID_HANDLE_VALUE || raw.is_null() {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh handle owned here alone.
    let snapshot = unsafe { OwnedHandle::from_raw_handle(raw) };
    let mut entry = THREADENTRY32 { dwSize: std::mem::size_of::<THREADENTRY32>() as u32, ..Default::default() };
    let mut out = Vec::new();
    let handle = std::os::windows::io::AsRawHandle::as_raw_handle(&snapshot);
    // SAFETY: `entry` is a THREADENTRY32 with its size set; the snapshot is open.
    let mut more = unsafe { Thread32First(handle, &mut entry) } != 0;
    while more {
        if pids.contains(&entry.th32OwnerProcessID) {
            out.push(entry.th32ThreadID);
        }
        // SAFETY: as above.
        more = unsafe { Thread32Next(handle, &mut entry) } != 0;
    }
    Ok(out)
}

/// Suspends (or resumes) every thread of the processes in `job`. Returns how many
/// threads were suspended or resumed; threads that ended meanwhile are skipped.
pub fn suspend_job(job: &Job, suspend: bool) -> io::Result<usize> {
    let pids = job.process_ids()?;
    if pids.is_empty() {
        return Ok(0);
    }
    let mut done = 0;
    for tid in threads_of(&pids)? {
        // SAFETY: a thread handle with only suspend/resume rights, closed below.
        let thread = unsafe { OpenThread(THREAD_SUSPEND_RESUME, 0, tid) };
        if thread.is_null() {
            continue;
        }
        // SAFETY: `thread` is open; (DWORD)-1 is the failure value of both calls.
        let previous = unsafe {
            if suspend {
                SuspendThread(thread)
            } else {
                ResumeThread(thread)
            }
        };
        // SAFETY: closing the handle opened above.
        unsafe { CloseHandle(thread) };
        if previous != u32::MAX {
            done += 1;
        }
    }
    Ok(done)
}

/// The running guests' jobs and whether the policy has them frozen, shared with the input
/// thread's fast path.
#[derive(Debug, Default)]
pub struct Freezer {
    jobs: Mutex<Vec<Arc<Job>>>,
    frozen: AtomicBool,
}

impl Freezer {
    /// Whether the guests are frozen (by the policy or the fast path).
    pub fn frozen(&self) -> bool {
        self.frozen.load(Ordering::Acquire)
    }

    /// Adds a new guest's job; suspended at once when the guests are frozen. Its main
    /// thread, still suspended from its creation, is resumed by the caller afterwards.
    pub fn add(&self, job: Arc<Job>) {
        let mut jobs = self.jobs.lock().unwrap_or_else(|e| e.into_inner());
        if self.frozen() {
            if let Err(e) = suspend_job(&job, true) {
                tracing::error!("could not freeze a new guest: {e}");
            }
        }
        jobs.push(job);
    }

    /// Forgets a job (its guest ended or was killed).
    pub fn remove(&self, job: &Arc<Job>) {
        self.jobs.lock().unwrap_or_else(|e| e.into_inner()).retain(|j| !Arc::ptr_eq(j, job));
    }

    /// Forgets a job and thaws it if the freezer had it frozen, so that a guest being
    /// stopped runs its checkpoint handler (later freezes leave it be).
    pub fn release(&self, job: &Arc<Job>) {
        let mut jobs = self.jobs.lock().unwrap_or_else(|e| e.into_inner());
        jobs.retain(|j| !Arc::ptr_eq(j, job));
        if self.frozen() {
            if let Err(e) = suspend_job(job, false) {
                tracing::warn!("could not thaw a guest being stopped: {e}");
            }
        }
    }

    /// Freezes (true) or thaws every guest, once per change.
    pub fn set_frozen(&self, frozen: bool) {
        let jobs = self.jobs.lock().unwrap_or_else(|e| e.into_inner());
        if self.frozen.swap(frozen, Ordering::AcqRel) == frozen {
            return;
        }
        for job in jobs.iter() {
            if let Err(e) = suspend_job(job, frozen) {
                tracing::error!("could not {} a guest: {e}", if frozen { "freeze" } else { "thaw" });
            }
        }
    }
}
