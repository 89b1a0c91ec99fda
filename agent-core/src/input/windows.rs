//! The Windows input backend: `GetLastInputInfo`, the tick (`GetTickCount`'s
//! milliseconds since boot) of the session's last keyboard or mouse input, polled once a
//! second on the backend's own thread like the X11 screen-saver poll on Linux. A change
//! of that tick means input happened; when it happened (and only that, never which key
//! or where) goes to the sink, whose fast path freezes the guests. The tick arithmetic
//! (its 49.7-day wrap) is `input/last_input.rs`'s.
//!
//! `input/mod.rs` picks it for `last-input` and, for `auto`, beside the low-level
//! hooks (`input/windows_hooks.rs`, `hooks`), which see each event as it happens: the
//! poll still sees input the hooks cannot (to elevated windows), up to a second late.

use crate::clock::mono_now;
use crate::input::last_input::{poll_into, LastInputTicks, POLL_INTERVAL};
use crate::input::{InputBackend, InputError, InputSink};
use windows_sys::Win32::System::SystemInformation::GetTickCount;
use windows_sys::Win32::UI::Input::KeyboardAndMouse::{GetLastInputInfo, LASTINPUTINFO};

/// The backend's name in logs and `lull status`.
pub const NAME: &str = "windows-last-input";

/// Polls the session's last-input tick once a second.
#[derive(Debug, Default)]
pub struct LastInputPolled;

/// The tick of the session's last input and the tick now, read in that order (so input
/// landing between the two reads looks at most a few ms "ahead", which
/// [`LastInputTicks`] takes for now).
fn read_ticks() -> Result<(u32, u32), InputError> {
    let mut info = LASTINPUTINFO { cbSize: std::mem::size_of::<LASTINPUTINFO>() as u32, dwTime: 0 };
    // SAFETY: `info` is a writable LASTINPUTINFO whose cbSize is set, as the call requires.
    if unsafe { GetLastInputInfo(&mut info) } == 0 {
        let why = std::io::Error::last_os_error();
        return Err(InputError::Failed { backend: NAME, why: format!("GetLastInputInfo: {why}") });
    }
    // SAFETY: no arguments; it reads the system's tick count.
    let now = unsafe { GetTickCount() };
    Ok((info.dwTime, now))
}

impl InputBackend for LastInputPolled {
    fn name(&self) -> &'static str {
        NAME
    }

    fn blind_spots(&self) -> &'static str {
        "input more precisely than the 1-s poll; other sessions (Remote Desktop, another signed-in user); \
         idle inhibitors (video, calls)"
    }

    fn run(self: Box<Self>, sink: InputSink) -> Result<(), InputError> {
        let mut ticks = LastInputTicks::default();
        poll_into(&sink, || {
            let (last_input, now) = read_ticks()?;
            Ok(ticks.observe(last_input, now, mono_now(), POLL_INTERVAL.as_millis() as u64))
        })
    }
}
