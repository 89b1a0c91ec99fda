//! The token guests run by: the agent's own token restricted (`CreateRestrictedToken`
//! with `DISABLE_MAX_PRIVILEGE`: every privilege but SeChangeNotify removed) and lowered
//! to the low integrity level. A low-integrity process cannot write to, or delete, what
//! has a higher label (the owner's files, the registry outside its low part) — but it can
//! still **read** whatever the owner's account can read: the integrity level's
//! no-read-up is not set on files by default. No AppContainer (which would deny reads)
//! is built. Each guest's work directory is labelled low so the guest can write there.
//!
//! Every step that fails is said, with the call: the guests then run with what was
//! built (under Wine, the agent's own token).

use std::io;
use std::os::windows::io::{AsRawHandle, FromRawHandle, OwnedHandle};
use std::path::Path;
use windows_sys::Win32::Foundation::{LocalFree, HANDLE};
use windows_sys::Win32::Security::Authorization::{
    ConvertStringSecurityDescriptorToSecurityDescriptorW, ConvertStringSidToSidW, SetNamedSecurityInfoW, SDDL_REVISION_1, SE_FILE_OBJECT,
};
use windows_sys::Win32::Security::{
    CreateRestrictedToken, GetLengthSid, GetSecurityDescriptorSacl, GetSidSubAuthority, GetSidSubAuthorityCount, GetTokenInformation,
    SetTokenInformation, TokenIntegrityLevel, TokenPrivileges, DISABLE_MAX_PRIVILEGE, LABEL_SECURITY_INFORMATION, PSECURITY_DESCRIPTOR,
    PSID, SID_AND_ATTRIBUTES, TOKEN_ADJUST_DEFAULT, TOKEN_ASSIGN_PRIMARY, TOKEN_DUPLICATE, TOKEN_MANDATORY_LABEL, TOKEN_QUERY,
};
use windows_sys::Win32::System::Threading::{GetCurrentProcess, OpenProcessToken};

/// `SE_GROUP_INTEGRITY` (winnt.h): the group is the token's integrity label.
const SE_GROUP_INTEGRITY: u32 = 0x20;
/// The low mandatory level's SID.
const LOW_INTEGRITY_SID: &str = "S-1-16-4096";
/// The low mandatory level's RID (the last sub-authority of [`LOW_INTEGRITY_SID`]).
const LOW_INTEGRITY_RID: u32 = 0x1000;
/// A SACL holding one mandatory label: low, no write-up, inherited by files and folders.
const LOW_LABEL_SDDL: &str = "S:(ML;OICI;NW;;;LW)";

fn wide(s: &str) -> Vec<u16> {
    s.encode_utf16().chain(std::iter::once(0)).collect()
}

/// What the guests' token is, and which calls failed building it.
#[derive(Debug)]
pub struct GuestToken {
    /// The restricted token, `None` when it could not be made (guests then run with the
    /// agent's own token).
    pub token: Option<OwnedHandle>,
    /// Whether the token holds no privilege but SeChangeNotify, read back from it.
    pub privileges_removed: bool,
    /// Whether the token is at the low integrity level, read back from it.
    pub low_integrity: bool,
    /// Each call that failed, with its error.
    pub failed: Vec<String>,
}

impl GuestToken {
    /// Builds the guests' token from the agent's own.
    pub fn build() -> Self {
        let mut failed = Vec::new();
        let token = match restricted_token() {
            Ok(t) => Some(t),
            Err(e) => {
                failed.push(e);
                None
            }
        };
        let Some(t) = &token else { return Self { token, privileges_removed: false, low_integrity: false, failed } };
        if let Err(e) = lower_to_low_integrity(t.as_raw_handle()) {
            failed.push(format!("SetTokenInformation(TokenIntegrityLevel, low): {e}"));
        }
        // Read back: a call that returned success without doing it (Wine's stubs) is not
        // taken for isolation.
        let privileges_removed = match read_token(t.as_raw_handle(), TokenPrivileges) {
            Ok(buf) if buf.len() >= 4 && u32::from_ne_bytes([buf[0], buf[1], buf[2], buf[3]]) <= 1 => true,
            Ok(buf) => {
                let count = buf.get(..4).map_or(0, |b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]));
                failed.push(format!("CreateRestrictedToken(DISABLE_MAX_PRIVILEGE) succeeded but the token still holds {count} privileges"));
                false
            }
            Err(e) => {
                failed.push(format!("GetTokenInformation(TokenPrivileges): {e}"));
                false
            }
        };
        let low_integrity = match integrity_rid(t.as_raw_handle()) {
            Ok(LOW_INTEGRITY_RID) => true,
            Ok(rid) => {
                failed.push(format!("SetTokenInformation(TokenIntegrityLevel, low) succeeded but the token's level is still 0x{rid:x}"));
                false
            }
            Err(e) => {
                failed.push(format!("GetTokenInformation(TokenIntegrityLevel): {e}"));
                false
            }
        };
        Self { token, privileges_removed, low_integrity, failed }
    }

    /// The raw token for CreateProcessAsUserW, if there is one.
    pub fn raw(&self) -> Option<HANDLE> {
        self.token.as_ref().map(AsRawHandle::as_raw_handle)
    }
}

/// The agent's primary token with every privilege it may drop dropped.
fn restricted_token() -> Result<OwnedHandle, String> {
    let mut own: HANDLE = std::ptr::null_mut();
    let access = TOKEN_DUPLICATE | TOKEN_QUERY | TOKEN_ASSIGN_PRIMARY | TOKEN_ADJUST_DEFAULT;
    // SAFETY: the current process's pseudo-handle; `own` receives a handle owned below.
    if unsafe { OpenProcessToken(GetCurrentProcess(), access, &mut own) } == 0 {
        return Err(format!("OpenProcessToken: {}", io::Error::last_os_error()));
    }
    // SAFETY: a fresh handle owned here alone.
    let own = unsafe { OwnedHandle::from_raw_handle(own) };
    let mut restricted: HANDLE = std::ptr::null_mut();
    let (sids, privileges) = (std::ptr::null(), std::ptr::null());
    // SAFETY: no SIDs or privileges listed; `restricted` receives a new token handle.
    let ok = unsafe { CreateRestrictedToken(own.as_raw_handle(), DISABLE_MAX_PRIVILEGE, 0, sids, 0, privileges, 0, sids, &mut restricted) };
    if ok == 0 || restricted.is_null() {
        return Err(format!("CreateRestrictedToken(DISABLE_MAX_PRIVILEGE): {}", io::Error::last_os_error()));
    }
    // SAFETY: a fresh handle owned here alone.
    Ok(unsafe { OwnedHandle::from_raw_handle(restricted) })
}

/// One class of information about `token`, as the bytes Windows wrote, aligned for it.
pub(super) fn read_token(token: HANDLE, class: windows_sys::Win32::Security::TOKEN_INFORMATION_CLASS) -> io::Result<Vec<u8>> {
    let mut buf = vec![0u64; 128];
    let mut len = 0u32;
    let size = (buf.len() * 8) as u32;
    // SAFETY: `buf` is `size` bytes, 8-aligned; `len` receives the length written.
    if unsafe { GetTokenInformation(token, class, buf.as_mut_ptr().cast(), size, &mut len) } == 0 {
        return Err(io::Error::last_os_error());
    }
    let bytes: Vec<u8> = buf.iter().flat_map(|w| w.to_ne_bytes()).collect();
    Ok(bytes[..(len as usize).min(bytes.len())].to_vec())
}

/// The RID of `token`'s integrity level (0x1000 low, 0x2000 medium, 0x3000 high).
fn integrity_rid(token: HANDLE) -> io::Result<u32> {
    let mut buf = vec![0u64; 16];
    let mut len = 0u32;
    // SAFETY: `buf` is 128 bytes, 8-aligned, enough for a TOKEN_MANDATORY_LABEL and its SID.
    if unsafe { GetTokenInformation(token, TokenIntegrityLevel, buf.as_mut_ptr().cast(), 128, &mut len) } == 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: Windows wrote a TOKEN_MANDATORY_LABEL at the start of `buf`, its SID inside it.
    unsafe {
        let label = &*buf.as_ptr().cast::<TOKEN_MANDATORY_LABEL>();
        let count = *GetSidSubAuthorityCount(label.Label.Sid);
        Ok(*GetSidSubAuthority(label.Label.Sid, u32::from(count.saturating_sub(1))))
    }
}

/// Sets `token`'s integrity level to low.
fn lower_to_low_integrity(token: HANDLE) -> io::Result<()> {
    let mut sid: PSID = std::ptr::null_mut();
    let name = wide(LOW_INTEGRITY_SID);
    // SAFETY: a NUL-terminated string; `sid` is freed with LocalFree below.
    if unsafe { ConvertStringSidToSidW(name.as_ptr(), &mut sid) } == 0 {
        return Err(io::Error::last_os_error());
    }
    let label = TOKEN_MANDATORY_LABEL { Label: SID_AND_ATTRIBUTES { Sid: sid, Attributes: SE_GROUP_INTEGRITY } };
    // SAFETY: `sid` is a valid SID.
    let size = std::mem::size_of::<TOKEN_MANDATORY_LABEL>() as u32 + unsafe { GetLengthSid(sid) };
    // SAFETY: `label` points at the SID, both live for the call.
    let ok = unsafe { SetTokenInformation(token, TokenIntegrityLevel, std::ptr::from_ref(&label).cast(), size) };
    let result = if ok == 0 { Err(io::Error::last_os_error()) } else { Ok(()) };
    // SAFETY: allocated by ConvertStringSidToSidW.
    unsafe { LocalFree(sid) };
    result
}

/// Labels `dir` (and what is created in it) low integrity, so a low-integrity guest can
/// write there.
pub fn label_low(dir: &Path) -> io::Result<()> {
    let mut sd: PSECURITY_DESCRIPTOR = std::ptr::null_mut();
    let sddl = wide(LOW_LABEL_SDDL);
    // SAFETY: a NUL-terminated string; `sd` is freed with LocalFree below.
    if unsafe { ConvertStringSecurityDescriptorToSecurityDescriptorW(sddl.as_ptr(), SDDL_REVISION_1, &mut sd, std::ptr::null_mut()) } == 0 {
        return Err(io::Error::last_os_error());
    }
    let (mut present, mut defaulted, mut sacl) = (0, 0, std::ptr::null_mut());
    // SAFETY: `sd` is the descriptor just made; the SACL points into it.
    let result = if unsafe { GetSecurityDescriptorSacl(sd, &mut present, &mut sacl, &mut defaulted) } == 0 {
        Err(io::Error::last_os_error())
    } else {
        let path: Vec<u16> = dir.as_os_str().encode_wide_nul();
        // SAFETY: a NUL-terminated path and the SACL, both live for the call.
        let code = unsafe {
            SetNamedSecurityInfoW(
                path.as_ptr(),
                SE_FILE_OBJECT,
                LABEL_SECURITY_INFORMATION,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                std::ptr::null(),
                sacl,
            )
        };
        if code == 0 {
            Ok(())
        } else {
            Err(io::Error::from_raw_os_error(code as i32))
        }
    };
    // SAFETY: allocated by ConvertStringSecurityDescriptorToSecurityDescriptorW.
    unsafe { LocalFree(sd) };
    result
}

/// A path as a NUL-terminated wide string.
trait EncodeWideNul {
    fn encode_wide_nul(&self) -> Vec<u16>;
}

impl EncodeWideNul for std::ffi::OsStr {
    fn encode_wide_nul(&self) -> Vec<u16> {
        use std::os::windows::ffi::OsStrExt;
        self.encode_wide().chain(std::iter::once(0)).collect()
    }
}
