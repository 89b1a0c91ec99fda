//! Starting one guest process on Windows, suspended: `CreateProcessAsUserW` with the
//! guests' token (or `CreateProcessW` without one), in the guests' AppContainer when
//! there is one (`PROC_THREAD_ATTRIBUTE_SECURITY_CAPABILITIES`), `CREATE_SUSPENDED |
//! CREATE_NEW_PROCESS_GROUP | IDLE_PRIORITY_CLASS | CREATE_NO_WINDOW`, its output to the
//! guest's files, a minimal environment and its work directory as the current one. The
//! caller puts it in its job before resuming its main thread.

use crate::guest::{GuestDir, GuestSpec};
use std::io;
use std::os::windows::ffi::OsStrExt;
use std::os::windows::io::{AsRawHandle, FromRawHandle, OwnedHandle};
use windows_sys::Win32::Foundation::{SetHandleInformation, HANDLE, HANDLE_FLAG_INHERIT};
use windows_sys::Win32::Security::{PSID, SECURITY_CAPABILITIES};
use windows_sys::Win32::System::Threading::{
    CreateProcessAsUserW, CreateProcessW, DeleteProcThreadAttributeList, InitializeProcThreadAttributeList, ResumeThread,
    UpdateProcThreadAttribute, CREATE_NEW_PROCESS_GROUP, CREATE_NO_WINDOW, CREATE_SUSPENDED, CREATE_UNICODE_ENVIRONMENT,
    EXTENDED_STARTUPINFO_PRESENT, IDLE_PRIORITY_CLASS, PROCESS_INFORMATION, PROC_THREAD_ATTRIBUTE_SECURITY_CAPABILITIES,
    STARTF_USESTDHANDLES, STARTUPINFOEXW,
};

/// How a guest's process is made: by which token, in which AppContainer.
#[derive(Debug, Clone, Copy, Default)]
pub struct Launch {
    /// The primary token (`CreateProcessAsUserW`); the agent's own when `None`.
    pub token: Option<HANDLE>,
    /// The AppContainer's SID, when the process is made in one.
    pub container: Option<PSID>,
}

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

/// Creates the guest's process suspended, as `launch` says.
pub fn spawn_suspended(launch: Launch, spec: &GuestSpec, dir: &GuestDir) -> io::Result<Started> {
    let stdout = std::fs::File::create(dir.stdout())?;
    let stderr = std::fs::File::create(dir.stderr())?;
    let handles = (inheritable(&stdout)?, inheritable(&stderr)?);
    let mut line = command_line(spec);
    let env = environment(spec, dir);
    let cwd: Vec<u16> = dir.work().as_os_str().encode_wide().chain(std::iter::once(0)).collect();
    create_suspended(launch, &mut line, Some(&env), Some(&cwd), Some(handles))
}

/// An attribute list holding one AppContainer, deleted when dropped.
struct Attributes {
    list: Vec<u64>,
    /// The list points at this; it lives as long as the list.
    capabilities: Box<SECURITY_CAPABILITIES>,
}

impl Attributes {
    fn container(sid: PSID) -> io::Result<Self> {
        let named = |call: &str| io::Error::other(format!("{call}: {}", io::Error::last_os_error()));
        let mut size = 0usize;
        // SAFETY: the size query (no list): it fails with ERROR_INSUFFICIENT_BUFFER and sets `size`.
        unsafe { InitializeProcThreadAttributeList(std::ptr::null_mut(), 1, 0, &mut size) };
        let mut list = vec![0u64; size.div_ceil(8).max(1)];
        // SAFETY: `list` holds at least `size` bytes, 8-aligned.
        if unsafe { InitializeProcThreadAttributeList(list.as_mut_ptr().cast(), 1, 0, &mut size) } == 0 {
            return Err(named("InitializeProcThreadAttributeList"));
        }
        let capabilities =
            Box::new(SECURITY_CAPABILITIES { AppContainerSid: sid, Capabilities: std::ptr::null_mut(), CapabilityCount: 0, Reserved: 0 });
        let attrs = Self { list, capabilities };
        let value = std::ptr::from_ref::<SECURITY_CAPABILITIES>(&attrs.capabilities).cast();
        let len = std::mem::size_of::<SECURITY_CAPABILITIES>();
        let attribute = PROC_THREAD_ATTRIBUTE_SECURITY_CAPABILITIES as usize;
        let list = attrs.list.as_ptr().cast_mut().cast();
        // SAFETY: an initialised list; the value lives in a box as long as the list.
        if unsafe { UpdateProcThreadAttribute(list, 0, attribute, value, len, std::ptr::null_mut(), std::ptr::null()) } == 0 {
            return Err(named("UpdateProcThreadAttribute(PROC_THREAD_ATTRIBUTE_SECURITY_CAPABILITIES)"));
        }
        Ok(attrs)
    }
}

impl Drop for Attributes {
    fn drop(&mut self) {
        // SAFETY: initialised by InitializeProcThreadAttributeList.
        unsafe { DeleteProcThreadAttributeList(self.list.as_mut_ptr().cast()) };
    }
}

/// Creates a process suspended from its command `line`, its environment block (the
/// agent's when `None`), current directory and standard output and error (none when
/// `None`), as `launch` says.
pub fn create_suspended(
    launch: Launch,
    line: &mut [u16],
    env: Option<&[u16]>,
    cwd: Option<&[u16]>,
    std_handles: Option<(HANDLE, HANDLE)>,
) -> io::Result<Started> {
    let mut startup = STARTUPINFOEXW::default();
    startup.StartupInfo.cb = std::mem::size_of::<STARTUPINFOEXW>() as u32;
    if let Some((out, err)) = std_handles {
        startup.StartupInfo.dwFlags = STARTF_USESTDHANDLES;
        startup.StartupInfo.hStdOutput = out;
        startup.StartupInfo.hStdError = err;
    }
    let attributes = launch.container.map(Attributes::container).transpose()?;
    let mut flags = CREATE_SUSPENDED | CREATE_NEW_PROCESS_GROUP | IDLE_PRIORITY_CLASS | CREATE_NO_WINDOW | CREATE_UNICODE_ENVIRONMENT;
    if let Some(a) = &attributes {
        startup.lpAttributeList = a.list.as_ptr().cast_mut().cast();
        flags |= EXTENDED_STARTUPINFO_PRESENT;
    }
    let mut info = PROCESS_INFORMATION::default();
    let (app, attrs) = (std::ptr::null(), std::ptr::null());
    let envp = env.map_or(std::ptr::null(), |e| e.as_ptr().cast());
    let cwd = cwd.map_or(std::ptr::null(), <[u16]>::as_ptr);
    let inherit = i32::from(std_handles.is_some());
    let startup_ptr = std::ptr::from_ref(&startup).cast();
    let call = match (launch.token, launch.container) {
        (Some(_), Some(_)) => "CreateProcessAsUserW (in the AppContainer)",
        (Some(_), None) => "CreateProcessAsUserW",
        (None, Some(_)) => "CreateProcessW (in the AppContainer)",
        (None, None) => "CreateProcessW",
    };
    // SAFETY: every buffer is NUL-terminated and lives for the call; the handles are open;
    // `startup` is a STARTUPINFOEXW whose list (if any) lives in `attributes`.
    let ok = unsafe {
        match launch.token {
            Some(t) => CreateProcessAsUserW(t, app, line.as_mut_ptr(), attrs, attrs, inherit, flags, envp, cwd, startup_ptr, &mut info),
            None => CreateProcessW(app, line.as_mut_ptr(), attrs, attrs, inherit, flags, envp, cwd, startup_ptr, &mut info),
        }
    };
    drop(attributes);
    if ok == 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(e.kind(), format!("{call}: {e}")));
    }
    // SAFETY: both handles are fresh and owned here alone.
    let (process, main_thread) = unsafe { (OwnedHandle::from_raw_handle(info.hProcess), OwnedHandle::from_raw_handle(info.hThread)) };
    Ok(Started { process, pid: info.dwProcessId, main_thread })
}
