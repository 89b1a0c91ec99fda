//! Owner-only security descriptors, shared by the control channel's pipe (`ipc.rs`) and
//! Lull's files and directories (`fs.rs`): the current user's SID, a descriptor built from
//! SDDL, and the memory the system allocates for both.

use std::io;
use std::os::windows::io::{AsRawHandle, FromRawHandle, OwnedHandle};
use windows_sys::Win32::Foundation::{LocalFree, HANDLE};
use windows_sys::Win32::Security::Authorization::{
    ConvertSidToStringSidW, ConvertStringSecurityDescriptorToSecurityDescriptorW, SDDL_REVISION_1,
};
use windows_sys::Win32::Security::{
    GetSecurityDescriptorDacl, GetTokenInformation, TokenUser, ACL, PSECURITY_DESCRIPTOR, SECURITY_ATTRIBUTES, TOKEN_QUERY, TOKEN_USER,
};
use windows_sys::Win32::System::Threading::{GetCurrentProcess, OpenProcessToken};

/// Memory the system allocated with `LocalAlloc`, freed when dropped.
pub struct LocalMemory(pub *mut core::ffi::c_void);

impl Drop for LocalMemory {
    fn drop(&mut self) {
        // SAFETY: the pointer came from a call that allocates with LocalAlloc (or is null).
        unsafe { LocalFree(self.0) };
    }
}

/// A NUL-terminated wide string's text.
///
/// # Safety
/// `text` points to a NUL-terminated UTF-16 string.
pub unsafe fn wide_to_string(text: *const u16) -> String {
    // SAFETY: the caller's promise: the string ends with a NUL.
    let len = (0..).take_while(|&i| unsafe { *text.add(i) } != 0).count();
    // SAFETY: `len` wide characters precede the NUL.
    String::from_utf16_lossy(unsafe { std::slice::from_raw_parts(text, len) })
}

/// The current user's SID as a string (`S-1-5-21-…`).
pub fn current_user_sid() -> io::Result<String> {
    let mut token: HANDLE = std::ptr::null_mut();
    // SAFETY: the pseudo-handle of this process and a valid out-pointer.
    if unsafe { OpenProcessToken(GetCurrentProcess(), TOKEN_QUERY, &mut token) } == 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: OpenProcessToken gave a handle we own.
    let token = unsafe { OwnedHandle::from_raw_handle(token) };
    let mut buf = vec![0u64; 64];
    let mut len = 0u32;
    // SAFETY: buf is 512 bytes, 8-aligned, as large as the length passed.
    let ok = unsafe { GetTokenInformation(token.as_raw_handle(), TokenUser, buf.as_mut_ptr().cast(), 512, &mut len) };
    if ok == 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: GetTokenInformation filled a TOKEN_USER at the start of buf.
    let sid = unsafe { (*buf.as_ptr().cast::<TOKEN_USER>()).User.Sid };
    let mut text: *mut u16 = std::ptr::null_mut();
    // SAFETY: sid points into buf, alive here; text is an out-pointer.
    if unsafe { ConvertSidToStringSidW(sid, &mut text) } == 0 {
        return Err(io::Error::last_os_error());
    }
    let _free = LocalMemory(text.cast());
    // SAFETY: ConvertSidToStringSidW returned a NUL-terminated wide string.
    Ok(unsafe { wide_to_string(text) })
}

/// A self-relative security descriptor, from SDDL.
pub struct Descriptor(LocalMemory);

impl Descriptor {
    /// The descriptor `sddl` describes, `{user}` standing for the current user's SID.
    pub fn from_sddl(sddl: &str) -> io::Result<Self> {
        let sddl: Vec<u16> = sddl.replace("{user}", &current_user_sid()?).encode_utf16().chain([0]).collect();
        let mut sd: PSECURITY_DESCRIPTOR = std::ptr::null_mut();
        // SAFETY: a NUL-terminated wide string and a valid out-pointer.
        let ok =
            unsafe { ConvertStringSecurityDescriptorToSecurityDescriptorW(sddl.as_ptr(), SDDL_REVISION_1, &mut sd, std::ptr::null_mut()) };
        if ok == 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Self(LocalMemory(sd)))
    }

    /// Security attributes pointing at the descriptor (valid while `self` lives).
    pub fn attributes(&self) -> SECURITY_ATTRIBUTES {
        SECURITY_ATTRIBUTES {
            nLength: std::mem::size_of::<SECURITY_ATTRIBUTES>() as u32,
            lpSecurityDescriptor: self.0 .0,
            bInheritHandle: 0,
        }
    }

    /// The descriptor's access control list (valid while `self` lives).
    pub fn dacl(&self) -> io::Result<*const ACL> {
        let (mut present, mut defaulted) = (0, 0);
        let mut dacl: *mut ACL = std::ptr::null_mut();
        // SAFETY: a descriptor from ConvertStringSecurityDescriptorToSecurityDescriptorW and valid out-pointers.
        if unsafe { GetSecurityDescriptorDacl(self.0 .0, &mut present, &mut dacl, &mut defaulted) } == 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(dacl)
    }
}
