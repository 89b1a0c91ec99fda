//! The platform seam: every operating-system call the agent makes outside its guest
//! runtime (`guest/linux/`) and input backends (`input/linux/`), behind one `cfg` pair.
//! On Linux the calls are real ([`linux`]); on Windows the control channel is a named
//! pipe (`windows/ipc.rs`) and Lull's files get owner-only access control lists
//! (`windows/fs.rs`); on macOS the POSIX files of `linux/` serve (`macos/mod.rs`); elsewhere each one either does the portable thing or returns
//! [`std::io::ErrorKind::Unsupported`] (`other.rs`), so the rest of the crate names no
//! `libc` symbol and no `target_os` and a port fills in one file.
//!
//! The module is a leaf: it imports nothing from the rest of the crate. Its types are
//! plain data ([`types`]); the submodules group the calls by concept: [`time`],
//! [`timer`], [`sched`], [`signal`], [`memory`], [`id`], [`cpu`], [`fs`], [`ipc`], [`procfs`], [`proc_events`],
//! [`errno`]. `scripts/check-sys-seam.sh` fails when `libc::`, `std::os::unix` or a
//! `target_os` appears outside it and the platform backends.

pub mod types;

// Windows has its own calls in place of these (`other.rs` names them still).
#[cfg_attr(target_os = "windows", allow(dead_code))]
mod portable;

// The `other-sys` feature builds the other side on Linux too: the seam check compiles
// the whole crate against it (scripts/check-sys-seam.sh); never for a real build.
#[cfg(all(target_os = "linux", not(feature = "other-sys")))]
mod linux;
#[cfg(all(target_os = "linux", not(feature = "other-sys")))]
pub use linux::*;

#[cfg(any(not(target_os = "linux"), feature = "other-sys"))]
// On Windows its control channel gives way to the named pipe's, on macOS its POSIX calls
// to `linux/`'s.
#[cfg_attr(any(target_os = "windows", target_os = "macos"), allow(dead_code))]
mod other;
#[cfg(all(any(not(target_os = "linux"), feature = "other-sys"), not(any(target_os = "windows", target_os = "macos"))))]
pub use other::*;

// Windows: `other.rs`'s fallbacks but for the control channel (a named pipe) and the
// files' access control lists.
#[cfg(target_os = "windows")]
mod windows;
#[cfg(target_os = "windows")]
pub use windows::*;

// macOS: the POSIX calls of `linux/` (files, ids, signals, the control socket), the
// rest `other.rs`'s fallbacks.
#[cfg(target_os = "macos")]
mod macos;
#[cfg(target_os = "macos")]
pub use macos::*;

/// Whether this build has the Linux guest runtime and input backends (the one place the
/// rest of the crate asks which platform it is on).
pub const LINUX: bool = cfg!(target_os = "linux");

/// Whether this build is for Windows (its input backend, `input/windows.rs`).
pub const WINDOWS: bool = cfg!(target_os = "windows");

/// Whether this build is for macOS (its input backend, `input/macos.rs`).
pub const MACOS: bool = cfg!(target_os = "macos");
