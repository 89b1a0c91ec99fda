//! The tray's main loop: the one thread that owns the tray icon and its menu, on each
//! platform the loop its toolkit needs. Every platform's file offers the same four calls:
//! - `init()`: makes the calling thread the loop's; call before the tray icon is built;
//! - `invoke(f)`: runs `f` on the loop's thread soon, from any thread (queued until `run`);
//! - `quit()`: ends `run`, from any thread (also when asked before it runs);
//! - `run()`: runs the loop until `quit`.
//!
//! Linux: GTK's (`gtk::main`, [`gtk.rs`](gtk.rs)); Windows: a Win32 message loop
//! ([`win32.rs`](win32.rs)); macOS: AppKit's (`NSApplication::run`, [`appkit.rs`](appkit.rs)).

#[cfg(target_os = "linux")]
mod gtk;
#[cfg(target_os = "linux")]
pub use self::gtk::*;

#[cfg(windows)]
mod win32;
#[cfg(windows)]
pub use win32::*;

#[cfg(target_os = "macos")]
mod appkit;
#[cfg(target_os = "macos")]
pub use appkit::*;
