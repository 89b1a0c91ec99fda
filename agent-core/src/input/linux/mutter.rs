//! GNOME backend: Mutter's `org.gnome.Mutter.IdleMonitor` on the session bus, the way
//! GNOME on Wayland exposes idleness (its compositor offers neither Wayland idle
//! protocol to ordinary clients). An idle watch fires after the set time without input
//! ([`InputSignal::Idled`]); a one-shot user-active watch, added each time the owner went
//! idle, fires at the next input ([`InputSignal::Resumed`]).

use super::logind::{failed_as, Bus};
use crate::clock::mono_now;
use crate::input::{InputBackend, InputError, InputSink};
use crate::sample::{InputEvent, InputSignal};
use std::time::Duration;
use zbus::blocking::Proxy;

const NAME: &str = "mutter-idle-monitor";
pub const DEST: &str = "org.gnome.Mutter.IdleMonitor";
pub const PATH: &str = "/org/gnome/Mutter/IdleMonitor/Core";
pub const IFACE: &str = "org.gnome.Mutter.IdleMonitor";

/// Idle and user-active watches on Mutter's idle monitor.
#[derive(Debug)]
pub struct MutterIdle {
    pub bus: Bus,
    /// "Idled" after this long without input.
    pub timeout: Duration,
}

fn failed(why: impl std::fmt::Display) -> InputError {
    failed_as(NAME, why)
}

impl InputBackend for MutterIdle {
    fn name(&self) -> &'static str {
        NAME
    }

    fn blind_spots(&self) -> &'static str {
        "individual input events (only \"idle for the set time\" and \"resumed\"); idle inhibitors unless logind runs beside it"
    }

    fn run(self: Box<Self>, sink: InputSink) -> Result<(), InputError> {
        let conn = self.bus.connect(NAME)?;
        let monitor = Proxy::new(&conn, DEST, PATH, IFACE).map_err(failed)?;
        // Subscribe before adding watches, so no firing is missed.
        let fired = monitor.receive_signal("WatchFired").map_err(failed)?;
        let timeout_ms = self.timeout.as_millis().min(u64::MAX as u128) as u64;
        let idle_watch: u32 = monitor.call("AddIdleWatch", &(timeout_ms,)).map_err(failed)?;
        let idle_now: u64 = monitor.call("GetIdletime", &()).map_err(failed)?;
        let mut active_watch = None;
        let first = if idle_now >= timeout_ms {
            active_watch = Some(monitor.call::<_, _, u32>("AddUserActiveWatch", &()).map_err(failed)?);
            InputSignal::Idled { idle_for_ms: idle_now }
        } else {
            InputSignal::Resumed
        };
        if !sink.signal(InputEvent { at: mono_now(), signal: first }) {
            return Ok(());
        }
        for msg in fired {
            let Ok(id) = msg.body().deserialize::<u32>() else { continue };
            let signal = if id == idle_watch {
                if active_watch.is_none() {
                    active_watch = Some(monitor.call::<_, _, u32>("AddUserActiveWatch", &()).map_err(failed)?);
                }
                InputSignal::Idled { idle_for_ms: timeout_ms }
            } else if Some(id) == active_watch {
                // User-active watches fire once and are gone.
                active_watch = None;
                InputSignal::Resumed
            } else {
                continue;
            };
            if !sink.signal(InputEvent { at: mono_now(), signal }) {
                break;
            }
        }
        let _ = monitor.call::<_, _, ()>("RemoveWatch", &(idle_watch,));
        Ok(())
    }
}
