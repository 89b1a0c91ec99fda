//! The checkpoint signal on Windows: `CTRL_BREAK_EVENT` to a guest's process group (as
//! SIGTERM on Linux: Python's `signal.SIGBREAK`, C's `SetConsoleCtrlHandler`). A guest is
//! made with `CREATE_NEW_PROCESS_GROUP | CREATE_NO_WINDOW` ([`super::spawn`]): its group's
//! id is its main process's id and it has a console of its own, which the agent cannot
//! signal without leaving its own (a console is the whole process's). So a short-lived
//! helper does it: `lull.exe __ctrl-break PID` ([`send`]: `AttachConsole(PID)`, the event
//! ignored by itself, `GenerateConsoleCtrlEvent(CTRL_BREAK_EVENT, PID)`), started detached
//! by [`Signal::start`] and read back, never waited for, by [`Signal::poll`] on later
//! ticks. The helper is the running `lull.exe`, or the `lull.exe` beside the running
//! program (the tray app's agent).

use std::io::{self, Read};
use std::os::windows::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use windows_sys::Win32::System::Console::{AttachConsole, FreeConsole, GenerateConsoleCtrlEvent, SetConsoleCtrlHandler, CTRL_BREAK_EVENT};
use windows_sys::Win32::System::Threading::{CREATE_NO_WINDOW, DETACHED_PROCESS};

/// The hidden subcommand of `lull.exe` that runs [`send`].
pub const SUBCOMMAND: &str = "__ctrl-break";

/// The helper's side: sends `CTRL_BREAK_EVENT` to the process group `pid` from its console.
/// The error names the call that failed.
pub fn send(pid: u32) -> Result<(), String> {
    let failed = |call: &str| format!("{call}: {}", io::Error::last_os_error());
    // SAFETY: none of these calls takes a pointer; a failure is read from GetLastError.
    unsafe {
        // Started detached it has no console; leaving one it had is harmless.
        FreeConsole();
        if AttachConsole(pid) == 0 {
            return Err(failed(&format!("AttachConsole({pid})")));
        }
        if SetConsoleCtrlHandler(None, 1) == 0 {
            return Err(failed("SetConsoleCtrlHandler(NULL, TRUE)"));
        }
        if GenerateConsoleCtrlEvent(CTRL_BREAK_EVENT, pid) == 0 {
            return Err(failed(&format!("GenerateConsoleCtrlEvent(CTRL_BREAK_EVENT, {pid})")));
        }
    }
    Ok(())
}

/// The helper program: this one when it is `lull.exe`, else the `lull.exe` beside it.
fn helper() -> io::Result<PathBuf> {
    let me = std::env::current_exe()?;
    if me.file_stem().is_some_and(|s| s.eq_ignore_ascii_case("lull")) {
        return Ok(me);
    }
    let beside = me.with_file_name("lull.exe");
    if beside.is_file() {
        return Ok(beside);
    }
    Err(io::Error::new(io::ErrorKind::NotFound, format!("no lull.exe beside {}", me.display())))
}

/// One checkpoint signal on its way: its helper, running.
#[derive(Debug)]
pub struct Signal {
    child: Child,
}

impl Signal {
    /// Starts the helper for the group `pid`; returns at once.
    pub fn start(pid: u32) -> Result<Self, String> {
        let exe = helper().map_err(|e| format!("the checkpoint signal's helper: {e}"))?;
        let child = Command::new(&exe)
            .args([SUBCOMMAND, &pid.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .creation_flags(DETACHED_PROCESS | CREATE_NO_WINDOW)
            .spawn()
            .map_err(|e| format!("starting {} {SUBCOMMAND}: {e}", exe.display()))?;
        Ok(Self { child })
    }

    /// `None` while the helper runs; then `Ok` once it sent the event, or what failed.
    pub fn poll(&mut self) -> Option<Result<(), String>> {
        let status = match self.child.try_wait() {
            Ok(None) => return None,
            Ok(Some(s)) => s,
            Err(e) => return Some(Err(format!("waiting for the checkpoint signal's helper: {e}"))),
        };
        if status.success() {
            return Some(Ok(()));
        }
        // It has ended: its few lines are all in the pipe.
        let mut said = String::new();
        if let Some(mut err) = self.child.stderr.take() {
            let _ = err.read_to_string(&mut said);
        }
        let said = said.trim().strip_prefix("lull: ").unwrap_or(said.trim()).to_owned();
        Some(Err(if said.is_empty() { format!("the checkpoint signal's helper ended with {status}") } else { said }))
    }
}

impl Drop for Signal {
    /// A helper still running when its guest is gone is of no use.
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
        }
    }
}
