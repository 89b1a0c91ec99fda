//! X11 input backend: every keyboard and pointer event of the X display, event-driven,
//! through the RECORD extension (XRecord) spoken by x11rb's pure-Rust connection (no
//! Xlib). Each recorded batch of device events becomes [`InputSink::activity`] and
//! nothing else: the bytes carrying the key, button, position and window are dropped
//! unread, before anything can store, log or send them.

use super::{InputBackend, InputError, InputSink};
use x11rb::connection::{Connection as _, RequestConnection as _};
use x11rb::protocol::record::{self, ConnectionExt as _};
use x11rb::protocol::xproto;

const NAME: &str = "x11-xrecord";

/// Raw X11 input through XRecord.
#[derive(Debug, Default)]
pub struct X11Record;

impl X11Record {
    /// Whether this session has an X display to listen to (`DISPLAY` is set).
    pub fn available() -> Result<(), InputError> {
        match std::env::var_os("DISPLAY") {
            Some(d) if !d.is_empty() => Ok(()),
            _ => Err(InputError::Unavailable { backend: NAME, why: "DISPLAY is not set".into() }),
        }
    }
}

/// XRecord reply categories (RECORD protocol, "EnableContext" reply `category`).
const FROM_SERVER: u8 = 0;
const START_OF_DATA: u8 = 4;

/// The one range recorded: device events from KeyPress to MotionNotify (keys, buttons,
/// pointer motion), as seen by the server before delivery, so input to every client counts.
pub fn device_events() -> record::Range {
    let none = record::Range8 { first: 0, last: 0 };
    let none_ext = record::ExtRange { major: none, minor: record::Range16 { first: 0, last: 0 } };
    record::Range {
        core_requests: none,
        core_replies: none,
        ext_requests: none_ext,
        ext_replies: none_ext,
        delivered_events: none,
        device_events: record::Range8 { first: xproto::KEY_PRESS_EVENT, last: xproto::MOTION_NOTIFY_EVENT },
        errors: none,
        client_started: false,
        client_died: false,
    }
}

fn failed(why: impl std::fmt::Display) -> InputError {
    InputError::Failed { backend: NAME, why: why.to_string() }
}

impl InputBackend for X11Record {
    fn name(&self) -> &'static str {
        NAME
    }

    fn blind_spots(&self) -> &'static str {
        "input to other displays and to native Wayland clients; idle inhibitors (video, calls) unless logind runs beside it"
    }

    fn run(self: Box<Self>, sink: InputSink) -> Result<(), InputError> {
        Self::available()?;
        // One connection: it creates the context, then carries the enabled context's
        // stream of replies (it may send nothing else meanwhile, which it does not). The
        // context is the connection's resource, so the server frees it when it closes.
        let (conn, _) = x11rb::connect(None).map_err(|e| failed(format!("cannot connect to the X display: {e}")))?;
        if conn.extension_information(record::X11_EXTENSION_NAME).map_err(failed)?.is_none() {
            return Err(InputError::Unavailable { backend: NAME, why: "the X server lacks the RECORD extension".into() });
        }
        let rc = conn.generate_id().map_err(failed)?;
        conn.record_create_context(rc, 0, &[record::CS::ALL_CLIENTS.into()], &[device_events()])
            .map_err(failed)?
            .check()
            .map_err(|e| failed(format!("RecordCreateContext: {e}")))?;
        let replies = conn.record_enable_context(rc).map_err(failed)?;
        for reply in replies {
            // A broken connection (the X server went away) ends the backend with an
            // error the agent logs; the agent keeps running without X11 input.
            let reply = reply.map_err(|e| failed(format!("the X display connection broke: {e}")))?;
            // Privacy: `reply.data` (the raw events: key, button, position, window) is
            // dropped here unread; only its presence counts.
            if reply.category == FROM_SERVER && !reply.data.is_empty() && !sink.activity() {
                return Ok(());
            }
            if reply.category == START_OF_DATA {
                tracing::debug!("input backend {NAME}: recording");
            }
        }
        Err(failed("the X server ended the recording"))
    }
}
