//! X11 input backend: every keyboard and pointer event of the X display, event-driven,
//! through rdev's listener (the XRecord extension). Each event becomes
//! [`InputSink::activity`] and nothing else: the key, button, position and window are
//! dropped inside the callback, before anything can store, log or send them.

use super::{InputBackend, InputError, InputSink};

const NAME: &str = "x11-xrecord";

/// Raw X11 input through XRecord.
#[derive(Debug, Default)]
pub struct X11Record;

impl X11Record {
    /// Whether this session has an X display to listen to (`DISPLAY` is set). rdev's
    /// keyboard set-up opens the display before it checks for one, so the variable is
    /// checked first.
    pub fn available() -> Result<(), InputError> {
        match std::env::var_os("DISPLAY") {
            Some(d) if !d.is_empty() => Ok(()),
            _ => Err(InputError::Unavailable { backend: NAME, why: "DISPLAY is not set".into() }),
        }
    }
}

/// Xlib exits the whole process when the display connection breaks (the X server went
/// away), unless the I/O error handler never returns. The listener thread parks here
/// instead, so the agent keeps running (and says so) without input sensing.
unsafe extern "C" fn on_io_error(_dpy: *mut ::x11::xlib::Display) -> std::os::raw::c_int {
    tracing::warn!("input backend {NAME}: the X display connection broke; no more X11 input events");
    loop {
        std::thread::park();
    }
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
        // SAFETY: installs a process-wide handler; it is called by Xlib with a display
        // pointer it does not read, and never returns (see `on_io_error`).
        unsafe { ::x11::xlib::XSetIOErrorHandler(Some(on_io_error)) };
        // rdev keeps one global callback, so one listener per process. It blocks for as
        // long as the display lives; once the sink has closed the events are ignored.
        rdev::listen(move |event| {
            // Privacy: the event (key, button, position) is dropped here unread.
            drop(event);
            sink.activity();
        })
        .map_err(|e| InputError::Failed { backend: NAME, why: format!("{e:?}") })
    }
}
