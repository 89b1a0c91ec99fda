//! The macOS input backend: `CGEventSourceSecondsSinceLastEventType` for the combined
//! session state and any input event, the age of the session's last keyboard, mouse or
//! trackpad input, polled once a second on the backend's own thread like Windows'
//! `GetLastInputInfo`. It needs no permission (the event tap beside it,
//! `input/macos_tap.rs`, which sees each event as it comes, needs the owner's Input
//! Monitoring grant). When the
//! age starts again, input happened; when it happened (and only that, never which key or
//! where) goes to the sink, whose fast path freezes the guests. The age arithmetic is
//! `input/last_input.rs`'s ([`IdleAges`]). Built (type-checked), never run, on Lull's
//! machines.
//!
//! `input/mod.rs` picks it for `last-input` and, for `auto`, beside the event tap
//! (`hooks`).

use crate::clock::mono_now;
use crate::input::last_input::{poll_into, IdleAges, POLL_INTERVAL};
use crate::input::{InputBackend, InputError, InputSink};

/// The backend's name in logs and `lull status`.
pub const NAME: &str = "macos-idle-time";

/// `kCGEventSourceStateCombinedSessionState` (CGEventSourceStateID): every source of
/// the login session, hardware and posted events alike.
const COMBINED_SESSION_STATE: i32 = 0;
/// `kCGAnyInputEventType` (CGEventType `~0`): the age of the last input of any kind.
const ANY_INPUT_EVENT_TYPE: u32 = u32::MAX;

#[link(name = "CoreGraphics", kind = "framework")]
extern "C" {
    fn CGEventSourceSecondsSinceLastEventType(state: i32, event_type: u32) -> f64;
}

/// Polls the session's idle time once a second.
#[derive(Debug, Default)]
pub struct IdleTimePolled;

/// How long ago the session's last input was, in ms; an error for an age that is no
/// number of seconds (the call has no error return).
fn read_idle_ms() -> Result<u64, InputError> {
    // SAFETY: plain values in, a double out; the call reads the window server's state.
    let seconds = unsafe { CGEventSourceSecondsSinceLastEventType(COMBINED_SESSION_STATE, ANY_INPUT_EVENT_TYPE) };
    if !seconds.is_finite() || seconds < 0.0 {
        let why = format!("CGEventSourceSecondsSinceLastEventType gave {seconds}");
        return Err(InputError::Failed { backend: NAME, why });
    }
    Ok((seconds * 1000.0) as u64)
}

impl InputBackend for IdleTimePolled {
    fn name(&self) -> &'static str {
        NAME
    }

    fn blind_spots(&self) -> &'static str {
        "input more precisely than the 1-s poll (the event tap beside it sees that, given Input Monitoring); \
         other users' sessions (fast user switching, Screen Sharing); idle inhibitors (video, calls)"
    }

    fn run(self: Box<Self>, sink: InputSink) -> Result<(), InputError> {
        let mut ages = IdleAges::default();
        poll_into(&sink, || Ok(ages.observe(read_idle_ms()?, mono_now(), POLL_INTERVAL.as_millis() as u64)))
    }
}
