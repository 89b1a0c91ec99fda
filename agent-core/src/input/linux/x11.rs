//! X11 input backend: every keyboard and pointer event of the X display, event-driven,
//! through XInput 2 *raw* events (XI_RawKeyPress, XI_RawButtonPress, XI_RawMotion)
//! selected on the root window for all master devices, spoken by x11rb's pure-Rust
//! connection (no Xlib). Each event becomes [`InputSink::activity`] and nothing else: the
//! fields carrying the key, button, valuators and device are dropped unread, before
//! anything can store, log or send them.
//!
//! Why XI2 and not RECORD (which this backend used before): the X server writes RECORD
//! data into the recording client's buffer but flushes it only when it next flushes
//! clients with output pending, i.e. when *some* client gets a reply or event. An owner
//! whose first action after returning goes nowhere else (an XTest motion flushed without
//! a round trip, then a busy core) left the recorded event sitting in the server for
//! 0.35-1.2 s, or until the next unrelated reply: the guest ran on and the interruption
//! was put down to the owner's CPU load instead of their input. Raw events are ordinary
//! events, written and flushed to the client as they are generated, and they are
//! delivered whatever window has focus or grabs the device (XI 2.1+).
//!
//! Blind spot: a pointer *warp* (XWarpPointer, `xdotool mousemove X Y`) moves the
//! pointer without a device event, so no raw event is generated. Real hands move devices.

use crate::input::{InputBackend, InputError, InputSink};
use x11rb::connection::Connection as _;
use x11rb::protocol::xinput::{self, ConnectionExt as _};
use x11rb::protocol::Event;

const NAME: &str = "x11-xi2";

/// Raw X11 input through XInput 2 raw events.
#[derive(Debug, Default)]
pub struct X11Raw;

impl X11Raw {
    /// Whether this session has an X display to listen to (`DISPLAY` is set).
    pub fn available() -> Result<(), InputError> {
        match std::env::var_os("DISPLAY") {
            Some(d) if !d.is_empty() => Ok(()),
            _ => Err(InputError::Unavailable { backend: NAME, why: "DISPLAY is not set".into() }),
        }
    }
}

/// The events selected: key and button presses and pointer motion, raw (before any
/// window, grab or acceleration), for every master device.
pub fn raw_input_mask() -> xinput::EventMask {
    let mask = xinput::XIEventMask::RAW_KEY_PRESS
        | xinput::XIEventMask::RAW_BUTTON_PRESS
        | xinput::XIEventMask::RAW_MOTION
        | xinput::XIEventMask::RAW_TOUCH_BEGIN;
    xinput::EventMask { deviceid: xinput::Device::ALL_MASTER.into(), mask: vec![mask] }
}

/// Whether an event is one of the raw input events selected by [`raw_input_mask`].
pub fn is_raw_input(event: &Event) -> bool {
    matches!(
        event,
        Event::XinputRawKeyPress(_) | Event::XinputRawButtonPress(_) | Event::XinputRawMotion(_) | Event::XinputRawTouchBegin(_)
    )
}

/// Selects raw input events on `conn`'s root window after checking the server speaks
/// XInput 2.1 or later (2.0 withholds raw events while a client grabs the device).
pub fn select_raw_input(conn: &impl x11rb::connection::Connection, screen: usize) -> Result<(), InputError> {
    if conn.extension_information(xinput::X11_EXTENSION_NAME).map_err(failed)?.is_none() {
        return Err(InputError::Unavailable { backend: NAME, why: "the X server lacks the XInputExtension".into() });
    }
    let version = conn.xinput_xi_query_version(2, 2).map_err(failed)?.reply().map_err(|e| failed(format!("XIQueryVersion: {e}")))?;
    if (version.major_version, version.minor_version) < (2, 1) {
        return Err(InputError::Unavailable {
            backend: NAME,
            why: format!("the X server speaks XInput {}.{}, 2.1 is needed", version.major_version, version.minor_version),
        });
    }
    let root = conn.setup().roots.get(screen).map(|s| s.root).ok_or_else(|| failed("the X display has no such screen"))?;
    conn.xinput_xi_select_events(root, &[raw_input_mask()]).map_err(failed)?.check().map_err(|e| failed(format!("XISelectEvents: {e}")))?;
    Ok(())
}

fn failed(why: impl std::fmt::Display) -> InputError {
    InputError::Failed { backend: NAME, why: why.to_string() }
}

impl InputBackend for X11Raw {
    fn name(&self) -> &'static str {
        NAME
    }

    fn blind_spots(&self) -> &'static str {
        "input to other displays and to native Wayland clients; pointer warps; idle inhibitors (video, calls) unless logind runs beside it"
    }

    fn run(self: Box<Self>, sink: InputSink) -> Result<(), InputError> {
        Self::available()?;
        let (conn, screen) = x11rb::connect(None).map_err(|e| failed(format!("cannot connect to the X display: {e}")))?;
        select_raw_input(&conn, screen)?;
        tracing::debug!("input backend {NAME}: listening");
        loop {
            // A broken connection (the X server went away) ends the backend with an
            // error the agent logs; the agent keeps running without X11 input.
            let event = conn.wait_for_event().map_err(|e| failed(format!("the X display connection broke: {e}")))?;
            // Privacy: the event's detail (key, button), valuators (position) and device
            // are dropped here unread; only its presence counts.
            if is_raw_input(&event) && !sink.activity() {
                return Ok(());
            }
        }
    }
}
