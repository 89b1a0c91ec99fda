//! Starting one guest process on Windows, suspended: `CreateProcessAsUserW` with the
//! guests' token (or `CreateProcessW` without one), `CREATE_SUSPENDED |
//! CREATE_NEW_PROCESS_GROUP | IDLE_PRIORITY_CLASS | CREATE_NO_WINDOW`, its output to the
//! guest's files, a minimal environment and its work directory as the current one. The
//! caller puts it in its job before resuming its main thread.

use crate::guest::{GuestDir, GuestSpec};
use std::io;
use std::os::windows::ffi::OsStrExt;
use std::os::windows::io::{AsRawHandle, FromRawHandle, OwnedHandle};
use windows_sys::Win32::Foundation::{SetHandleInformation, HANDLE, HANDLE_FLAG_INHERIT};
use windows_sys::Win32::System::Threading::{
    CreateProcessAsUserW, CreateProcessW, ResumeThread, CREATE_NEW_PROCESS_GROUP, CREATE_NO_WINDOW, CREATE_SUSPENDED,
    CREATE_UNICODE_ENVIRONMENT, IDLE_PRIORITY_CLASS, PROCESS_INFORMATION, STARTF_USESTDHANDLES, STARTUPINFOW,
};

/// The agent's variables a Windows program needs to start at all; the rest is not passed.
const PASSED_ENV: [&str; 6] = ["PATH", "PATHEXT", "SystemRoot", "SystemDrive", "windir", "ComSpec"];

/// A guest's process, created suspended.
#[derive(Debug)]
pub struct Started {
    pub process: OwnedHandle,
    pub pid: u32,
    main_thread: OwnedHandle,
}

impl Started {
    /// Lets the main thread run (it was created suspended).
    pub fn resume(&self) -> io::Result<()> {
        // SAFETY: the thread handle is open.
        if unsafe { ResumeThread(self.main_thread.as_raw_handle()) } == u32::MAX {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

/// One argument quoted as the C runtime's parser reads it back.
fn quote(arg: &str) -> String {
    if !arg.is_empty() && !arg.contains([' ', '\t', '\n', '\u{b}', '"']) {
        return arg.to_owned();
    }
    let mut out = String::from('"');
    let mut backslashes = 0;
    for c in arg.chars() {
        if c == '\\' {
            backslashes += 1;
            continue;
        }
        // Backslashes before a quote are doubled and the quote escaped; others stay.
        let doubled = if c == '"' { backslashes * 2 + 1 } else { backslashes };
        out.extend(std::iter::repeat_n('\\', doubled));
        out.push(c);
        backslashes = 0;
    }
    out.extend(std::iter::repeat_n('\\', backslashes * 2));
    out.push('"');
    out
}

/// The command line: the program and its arguments, each quoted.
fn command_line(spec: &GuestSpec) -> Vec<u16> {
    let parts: Vec<String> = std::iter::once(&spec.command).chain(&spec.args).map(|a| quote(a)).collect();
    parts.join(" ").encode_utf16().chain(std::iter::once(0)).collect()
}

/// The guest's environment block: [`PASSED_ENV`], TEMP, TMP and USERPROFILE in its work
/// directory, then the job's own variables; sorted, as Windows keeps it.
fn environment(spec: &GuestSpec, dir: &GuestDir) -> Vec<u16> {
    let work = dir.work().display().to_string();
    let mut vars: Vec<(String, String)> = PASSED_ENV.iter().filter_map(|k| std::env::var(k).ok().map(|v| ((*k).to_owned(), v))).collect();
    for k in ["TEMP", "TMP", "USERPROFILE", "HOME"] {
        vars.push((k.to_owned(), work.clone()));
    }
    for (k, v) in &spec.env {
        vars.retain(|(have, _)| !have.eq_ignore_ascii_case(k));
        vars.push((k.clone(), v.clone()));
    }
    vars.sort_by_key(|(k, _)| k.to_uppercase());
    let mut block: Vec<u16> =
        vars.iter().flat_map(|(k, v)| format!("{k}={v}").encode_utf16().chain(std::iter::once(0)).collect::<Vec<_>>()).collect();
    block.push(0);
    block
}

/// A file the child inherits as one of its standard handles.
fn inheritable(file: &std::fs::File) -> io::Result<HANDLE> {
    let handle = file.as_raw_handle();
    // SAFETY: the file's handle is open for the call.
    if unsafe { SetHandleInformation(handle, HANDLE_FLAG_INHERIT, HANDLE_FLAG_INHERIT) } == 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(handle)
}

/// Creates the guest's process suspended, by `token` when there is one.
pub fn spawn_suspended(token: Option<HANDLE>, spec: &GuestSpec, dir: &GuestDir) -> io::Result<Started> {
    let stdout = std::fs::File::create(dir.stdout())?;
    let stderr = std::fs::File::create(dir.stderr())?;
    let mut startup = STARTUPINFOW { cb: std::mem::size_of::<STARTUPINFOW>() as u32, ..Default::default() };
    startup.dwFlags = STARTF_USESTDHANDLES;
    startup.hStdOutput = inheritable(&stdout)?;
    startup.hStdError = inheritable(&stderr)?;
    let mut line = command_line(spec);
    let env = environment(spec, dir);
    let cwd: Vec<u16> = dir.work().as_os_str().encode_wide().chain(std::iter::once(0)).collect();
    let flags = CREATE_SUSPENDED | CREATE_NEW_PROCESS_GROUP | IDLE_PRIORITY_CLASS | CREATE_NO_WINDOW | CREATE_UNICODE_ENVIRONMENT;
    let mut info = PROCESS_INFORMATION::default();
    let (app, envp, attrs) = (std::ptr::null(), env.as_ptr().cast(), std::ptr::null());
    // SAFETY: every buffer is NUL-terminated and lives for the call; the handles are open.
    let ok = unsafe {
        match token {
            Some(t) => CreateProcessAsUserW(t, app, line.as_mut_ptr(), attrs, attrs, 1, flags, envp, cwd.as_ptr(), &startup, &mut info),
            None => CreateProcessW(app, line.as_mut_ptr(), attrs, attrs, 1, flags, envp, cwd.as_ptr(), &startup, &mut info),
        }
    };
    if ok == 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both handles are fresh and owned here alone.
    let (process, main_thread) = unsafe { (OwnedHandle::from_raw_handle(info.hProcess), OwnedHandle::from_raw_handle(info.hThread)) };
    Ok(Started { process, pid: info.dwProcessId, main_thread })
}
