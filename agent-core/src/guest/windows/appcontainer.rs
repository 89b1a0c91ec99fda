//! The AppContainer the guests run in (Windows 8 and later): a per-user profile,
//! [`CONTAINER_NAME`], made once with `CreateAppContainerProfile` (its SID derived when
//! it exists already) and given to each guest's process as it is created
//! (`PROC_THREAD_ATTRIBUTE_SECURITY_CAPABILITIES`, with no capabilities). Windows grants
//! a process in an AppContainer only what names its container's SID (or ALL APPLICATION
//! PACKAGES) beside the owner's: not the owner's files, registry or processes, not the
//! agent's pipe (granted to the owner alone), and no network (no `internetClient` or
//! `privateNetworkClientServer` capability). Each guest's work directory is granted to
//! the container ([`GuestContainer::grant`]).
//!
//! Nothing is taken on trust. At start a probe (`cmd.exe`, created suspended in the
//! container and terminated before it runs) has its token read back
//! (`TokenIsAppContainer`, `TokenAppContainerSid`); every guest's token is read back the
//! same way before its first thread runs ([`GuestContainer::verify`]). Only a container
//! read back in effect lifts the refusal of the pool's guests. The profile calls are
//! looked up at run time, since `userenv.dll` may lack them (Windows 7; Wine 8.0): each
//! failure is kept with its call and said by `lull status`.

use super::spawn::{self, Launch};
use super::token::read_token;
use std::io;
use std::os::windows::io::AsRawHandle;
use std::path::Path;
use windows_sys::core::{HRESULT, PCWSTR, PWSTR};
use windows_sys::Win32::Foundation::{LocalFree, HANDLE};
use windows_sys::Win32::Security::Authorization::{
    GetNamedSecurityInfoW, SetEntriesInAclW, SetNamedSecurityInfoW, EXPLICIT_ACCESS_W, GRANT_ACCESS, NO_MULTIPLE_TRUSTEE, SE_FILE_OBJECT,
    TRUSTEE_IS_SID, TRUSTEE_IS_WELL_KNOWN_GROUP, TRUSTEE_W,
};
use windows_sys::Win32::Security::{
    EqualSid, FreeSid, GetTokenInformation, TokenAppContainerSid, TokenIsAppContainer, ACL, DACL_SECURITY_INFORMATION,
    PSECURITY_DESCRIPTOR, PSID, SID_AND_ATTRIBUTES, SUB_CONTAINERS_AND_OBJECTS_INHERIT, TOKEN_APPCONTAINER_INFORMATION, TOKEN_QUERY,
};
use windows_sys::Win32::Storage::FileSystem::FILE_ALL_ACCESS;
use windows_sys::Win32::System::LibraryLoader::{GetProcAddress, LoadLibraryW};
use windows_sys::Win32::System::Threading::{OpenProcessToken, TerminateProcess};

/// The profile's name, the same for every guest of this owner.
pub const CONTAINER_NAME: &str = "Lull.Guests";

/// `HRESULT_FROM_WIN32(ERROR_ALREADY_EXISTS)`: the profile was made by an earlier start.
const ALREADY_EXISTS: HRESULT = 0x8007_00B7_u32 as HRESULT;

type CreateProfile = unsafe extern "system" fn(PCWSTR, PCWSTR, PCWSTR, *const SID_AND_ATTRIBUTES, u32, *mut PSID) -> HRESULT;
type DeriveSid = unsafe extern "system" fn(PCWSTR, *mut PSID) -> HRESULT;

fn wide(s: &str) -> Vec<u16> {
    s.encode_utf16().chain(std::iter::once(0)).collect()
}

/// A SID the profile calls allocated, freed with `FreeSid`.
struct ProfileSid(PSID);

impl Drop for ProfileSid {
    fn drop(&mut self) {
        // SAFETY: allocated by CreateAppContainerProfile or DeriveAppContainerSidFromAppContainerName.
        unsafe { FreeSid(self.0) };
    }
}

// SAFETY: the SID is immutable memory owned by this value alone.
unsafe impl Send for ProfileSid {}

/// The guests' AppContainer, and whether it was read back in effect.
pub struct GuestContainer {
    sid: Option<ProfileSid>,
    /// A probe started in the container read back as in it: guests run there.
    pub in_effect: bool,
    /// Whether the guests' restricted token goes with the container (the probe with it
    /// worked); otherwise the container is made from the agent's own token.
    with_token: bool,
    /// Each call that failed, with its error.
    pub failed: Vec<String>,
}

impl GuestContainer {
    /// Makes (or finds) the profile and probes it with the guests' `token`, then without
    /// a token when that failed.
    pub fn build(token: Option<HANDLE>) -> Self {
        let mut failed = Vec::new();
        let sid = match profile_sid() {
            Ok(sid) => sid,
            Err(e) => {
                failed.push(e);
                return Self { sid: None, in_effect: false, with_token: false, failed };
            }
        };
        let mut tries = Vec::new();
        if token.is_some() {
            tries.push(token);
        }
        tries.push(None);
        for t in tries {
            match probe(Launch { token: t, container: Some(sid.0) }, sid.0) {
                Ok(()) => return Self { sid: Some(sid), in_effect: true, with_token: t.is_some(), failed },
                Err(e) => failed.push(format!("{e} (probe {} the restricted token)", if t.is_some() { "with" } else { "without" })),
            }
        }
        Self { sid: Some(sid), in_effect: false, with_token: false, failed }
    }

    /// How guests are created: in the container when it is in effect (with the token if
    /// the probe took it), else by `token` alone.
    pub fn launch(&self, token: Option<HANDLE>) -> Launch {
        match (&self.sid, self.in_effect) {
            (Some(sid), true) => Launch { token: if self.with_token { token } else { None }, container: Some(sid.0) },
            _ => Launch { token, container: None },
        }
    }

    /// Grants the container everything in `dir` (inherited by what is made there).
    pub fn grant(&self, dir: &Path) -> io::Result<()> {
        let Some(sid) = &self.sid else { return Ok(()) };
        grant_dir(dir, sid.0)
    }

    /// Reads back that `process` runs in this container; the call and what it read when not.
    pub fn verify(&self, process: HANDLE) -> Result<(), String> {
        match &self.sid {
            Some(sid) => in_container(process, sid.0),
            None => Err("no AppContainer profile".into()),
        }
    }
}

/// One function of `userenv.dll`, looked up now.
fn userenv(name: &str) -> Result<unsafe extern "system" fn() -> isize, String> {
    let dll = wide("userenv.dll");
    // SAFETY: a NUL-terminated name; the library stays loaded for the process.
    let module = unsafe { LoadLibraryW(dll.as_ptr()) };
    if module.is_null() {
        return Err(format!("LoadLibraryW(userenv.dll): {}", io::Error::last_os_error()));
    }
    let cname = std::ffi::CString::new(name).map_err(|e| e.to_string())?;
    // SAFETY: a loaded module and a NUL-terminated name.
    unsafe { GetProcAddress(module, cname.as_ptr().cast()) }.ok_or_else(|| format!("{name}: not in this system's userenv.dll"))
}

/// The profile's SID: made now, or derived from its name when an earlier start made it.
fn profile_sid() -> Result<ProfileSid, String> {
    let create = userenv("CreateAppContainerProfile")?;
    // SAFETY: the documented signature of CreateAppContainerProfile.
    let create: CreateProfile = unsafe { std::mem::transmute(create) };
    let (name, display) = (wide(CONTAINER_NAME), wide("Lull guests"));
    let about = wide("Pool work lent this machine's idle time by its owner, kept from the owner's files, processes and network");
    let mut sid: PSID = std::ptr::null_mut();
    // SAFETY: NUL-terminated strings, no capabilities; `sid` receives a SID freed by ProfileSid.
    let hr = unsafe { create(name.as_ptr(), display.as_ptr(), about.as_ptr(), std::ptr::null(), 0, &mut sid) };
    if hr >= 0 && !sid.is_null() {
        return Ok(ProfileSid(sid));
    }
    if hr != ALREADY_EXISTS {
        return Err(format!("CreateAppContainerProfile({CONTAINER_NAME}): HRESULT 0x{:08x}", hr as u32));
    }
    let derive = userenv("DeriveAppContainerSidFromAppContainerName")?;
    // SAFETY: the documented signature of DeriveAppContainerSidFromAppContainerName.
    let derive: DeriveSid = unsafe { std::mem::transmute(derive) };
    // SAFETY: a NUL-terminated name; `sid` receives a SID freed by ProfileSid.
    let hr = unsafe { derive(name.as_ptr(), &mut sid) };
    if hr < 0 || sid.is_null() {
        return Err(format!("DeriveAppContainerSidFromAppContainerName({CONTAINER_NAME}): HRESULT 0x{:08x}", hr as u32));
    }
    Ok(ProfileSid(sid))
}

/// Creates `cmd.exe` suspended by `launch`, reads back that it is in the container
/// `sid`, and ends it before it ran.
fn probe(launch: Launch, sid: PSID) -> Result<(), String> {
    let root = std::env::var("SystemRoot").unwrap_or_else(|_| r"C:\Windows".into());
    let mut line = wide(&format!(r#""{root}\System32\cmd.exe" /c exit 0"#));
    let started = spawn::create_suspended(launch, &mut line, None, None, None).map_err(|e| e.to_string())?;
    let found = in_container(started.process.as_raw_handle(), sid);
    // SAFETY: the probe's process handle is open; it never ran.
    unsafe { TerminateProcess(started.process.as_raw_handle(), 1) };
    found
}

/// Whether `process`'s token is an AppContainer token of the container `sid`.
fn in_container(process: HANDLE, sid: PSID) -> Result<(), String> {
    let mut token: HANDLE = std::ptr::null_mut();
    // SAFETY: an open process handle; `token` receives a handle owned below.
    if unsafe { OpenProcessToken(process, TOKEN_QUERY, &mut token) } == 0 {
        return Err(format!("OpenProcessToken(a guest in the AppContainer): {}", io::Error::last_os_error()));
    }
    // SAFETY: a fresh handle owned here alone.
    let token = unsafe { <std::os::windows::io::OwnedHandle as std::os::windows::io::FromRawHandle>::from_raw_handle(token) };
    let is =
        read_token(token.as_raw_handle(), TokenIsAppContainer).map_err(|e| format!("GetTokenInformation(TokenIsAppContainer): {e}"))?;
    if is.get(..4).is_none_or(|b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]) == 0) {
        return Err("the AppContainer is not in effect: the process's token reads back TokenIsAppContainer = 0".into());
    }
    // The answer holds the SID it points to: read into a buffer that outlives the compare.
    let mut buf = vec![0u64; 16];
    let mut len = 0u32;
    // SAFETY: `buf` is 128 bytes, 8-aligned, enough for the pointer and a container SID.
    if unsafe { GetTokenInformation(token.as_raw_handle(), TokenAppContainerSid, buf.as_mut_ptr().cast(), 128, &mut len) } == 0 {
        return Err(format!("GetTokenInformation(TokenAppContainerSid): {}", io::Error::last_os_error()));
    }
    // SAFETY: Windows wrote a TOKEN_APPCONTAINER_INFORMATION at the start of `buf`; its SID
    // points into `buf`, alive until the end of this function.
    let theirs = unsafe { (*buf.as_ptr().cast::<TOKEN_APPCONTAINER_INFORMATION>()).TokenAppContainer };
    // SAFETY: two valid SIDs.
    if theirs.is_null() || unsafe { EqualSid(theirs, sid) } == 0 {
        return Err(format!("the process runs in another AppContainer than {CONTAINER_NAME}"));
    }
    Ok(())
}

/// Adds an inherited full-access entry for `sid` to `dir`'s access control list.
fn grant_dir(dir: &Path, sid: PSID) -> io::Result<()> {
    use std::os::windows::ffi::OsStrExt;
    let path: Vec<u16> = dir.as_os_str().encode_wide().chain(std::iter::once(0)).collect();
    let (mut old, mut sd): (*mut ACL, PSECURITY_DESCRIPTOR) = (std::ptr::null_mut(), std::ptr::null_mut());
    let (none, no_acl): (*mut PSID, *mut *mut ACL) = (std::ptr::null_mut(), std::ptr::null_mut());
    // SAFETY: a NUL-terminated path; `sd` (which `old` points into) is freed below.
    let code =
        unsafe { GetNamedSecurityInfoW(path.as_ptr(), SE_FILE_OBJECT, DACL_SECURITY_INFORMATION, none, none, &mut old, no_acl, &mut sd) };
    if code != 0 {
        return Err(io::Error::other(format!("GetNamedSecurityInfoW: {}", io::Error::from_raw_os_error(code as i32))));
    }
    let entry = EXPLICIT_ACCESS_W {
        grfAccessPermissions: FILE_ALL_ACCESS,
        grfAccessMode: GRANT_ACCESS,
        grfInheritance: SUB_CONTAINERS_AND_OBJECTS_INHERIT,
        Trustee: TRUSTEE_W {
            pMultipleTrustee: std::ptr::null_mut(),
            MultipleTrusteeOperation: NO_MULTIPLE_TRUSTEE,
            TrusteeForm: TRUSTEE_IS_SID,
            TrusteeType: TRUSTEE_IS_WELL_KNOWN_GROUP,
            ptstrName: sid as PWSTR,
        },
    };
    let mut new: *mut ACL = std::ptr::null_mut();
    // SAFETY: one entry; `old` is the directory's list (or null); `new` is freed below.
    let code = unsafe { SetEntriesInAclW(1, &entry, old, &mut new) };
    let result = if code != 0 {
        Err(io::Error::other(format!("SetEntriesInAclW: {}", io::Error::from_raw_os_error(code as i32))))
    } else {
        // SAFETY: a NUL-terminated path and the new list, both live for the call.
        let code = unsafe {
            SetNamedSecurityInfoW(
                path.as_ptr(),
                SE_FILE_OBJECT,
                DACL_SECURITY_INFORMATION,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                new,
                std::ptr::null(),
            )
        };
        if code == 0 {
            Ok(())
        } else {
            Err(io::Error::other(format!("SetNamedSecurityInfoW(DACL): {}", io::Error::from_raw_os_error(code as i32))))
        }
    };
    // SAFETY: both were allocated with LocalAlloc by the calls above (or are null).
    unsafe {
        LocalFree(new.cast());
        LocalFree(sd);
    }
    result
}
