//! Polled fallback for X servers where no event-driven source works (no RECORD
//! extension, or rdev could not start): the MIT-SCREEN-SAVER extension's "milliseconds
//! since the last user input", read once a second over one persistent connection. When
//! that counter moves back, input happened at `now − idle`, and that time (only) goes to
//! the sink.

use crate::clock::{mono_now, MonoMs};
use crate::input::{InputBackend, InputError, InputSink};
use std::time::Duration;
use x11rb::connection::{Connection, RequestConnection};
use x11rb::protocol::screensaver::ConnectionExt as _;

const NAME: &str = "x11-screensaver-polled";

/// A new input time must be this much later than the last one seen to count, so the
/// jitter between our clock and the server's does not make up input.
const JITTER_MS: u64 = 20;

/// Polls the X server's idle time.
#[derive(Debug)]
pub struct ScreenSaverPolled {
    pub interval: Duration,
}

impl Default for ScreenSaverPolled {
    fn default() -> Self {
        Self { interval: Duration::from_secs(1) }
    }
}

fn failed(why: impl std::fmt::Display) -> InputError {
    InputError::Failed { backend: NAME, why: why.to_string() }
}

/// One persistent connection to the X server with the screen-saver extension.
pub struct IdleClock {
    conn: x11rb::rust_connection::RustConnection,
    root: u32,
}

impl IdleClock {
    /// Connects to `$DISPLAY` (checked first: with no display there is nothing to poll).
    pub fn connect() -> Result<Self, InputError> {
        if std::env::var_os("DISPLAY").is_none_or(|d| d.is_empty()) {
            return Err(InputError::Unavailable { backend: NAME, why: "DISPLAY is not set".into() });
        }
        let (conn, screen) = x11rb::connect(None)
            .map_err(|e| InputError::Unavailable { backend: NAME, why: format!("cannot connect to the X display: {e}") })?;
        let root = conn.setup().roots.get(screen).map(|s| s.root).ok_or_else(|| failed("the X server reported no screens"))?;
        let ext = conn.extension_information(x11rb::protocol::screensaver::X11_EXTENSION_NAME).map_err(failed)?;
        if ext.is_none() {
            return Err(InputError::Unavailable { backend: NAME, why: "the X server lacks MIT-SCREEN-SAVER".into() });
        }
        Ok(Self { conn, root })
    }

    /// Milliseconds since the last user input, as the X server counts them.
    pub fn idle_ms(&self) -> Result<u64, InputError> {
        let reply = self.conn.screensaver_query_info(self.root).map_err(failed)?.reply().map_err(failed)?;
        Ok(reply.ms_since_user_input as u64)
    }
}

impl InputBackend for ScreenSaverPolled {
    fn name(&self) -> &'static str {
        NAME
    }

    fn blind_spots(&self) -> &'static str {
        "input more precisely than the 1-s poll; native Wayland clients; idle inhibitors unless logind runs beside it"
    }

    fn run(self: Box<Self>, sink: InputSink) -> Result<(), InputError> {
        let clock = IdleClock::connect()?;
        let mut last_input: Option<MonoMs> = None;
        while !sink.is_closed() {
            let idle = clock.idle_ms()?;
            let now = mono_now();
            let input_at = MonoMs(now.0.saturating_sub(idle));
            let new = match last_input {
                None => idle < self.interval.as_millis() as u64,
                Some(t) => input_at.0 > t.0 + JITTER_MS,
            };
            if new && !sink.activity_at(input_at) {
                break;
            }
            if last_input.is_none_or(|t| input_at > t) {
                last_input = Some(input_at);
            }
            std::thread::sleep(self.interval);
        }
        Ok(())
    }
}
