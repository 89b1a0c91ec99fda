//! systemd-logind backend over D-Bus (system bus): the session's `IdleHint` (set by
//! desktops that track idleness) as [`InputSignal::Idled`] / [`InputSignal::Resumed`],
//! and idle inhibitors (a video playing or a call in progress takes one) as
//! [`InputSignal::Inhibited`], which the policy counts as "owner present".
//!
//! `IdleHint` changes arrive as `PropertiesChanged` signals (event-driven). The
//! manager's `BlockInhibited` list is not change-signalled by logind, so it is read every
//! two seconds. Only *changes* of `IdleHint` are forwarded: a desktop that never sets it
//! leaves it `false` forever, which must not read as an owner who never leaves.

use crate::clock::{mono_now, MonoMs};
use crate::input::{InputBackend, InputError, InputSink};
use crate::sample::{InputEvent, InputSignal};
use std::collections::HashMap;
use std::time::Duration;
use zbus::blocking::{Connection, Proxy};
use zbus::zvariant::{OwnedObjectPath, OwnedValue};

const NAME: &str = "logind";
const DEST: &str = "org.freedesktop.login1";
const MANAGER_PATH: &str = "/org/freedesktop/login1";
const MANAGER_IFACE: &str = "org.freedesktop.login1.Manager";
const SESSION_IFACE: &str = "org.freedesktop.login1.Session";
const PROPS_IFACE: &str = "org.freedesktop.DBus.Properties";

/// Which bus logind is on: the system bus, or (in tests) a given address.
#[derive(Clone, Debug)]
pub enum Bus {
    System,
    Session,
    Address(String),
}

impl Bus {
    pub fn connect(&self, backend: &'static str) -> Result<Connection, InputError> {
        let r = match self {
            Bus::System => Connection::system(),
            Bus::Session => Connection::session(),
            Bus::Address(a) => zbus::blocking::connection::Builder::address(a.as_str()).and_then(|b| b.build()),
        };
        r.map_err(|e| InputError::Unavailable { backend, why: format!("cannot connect to the D-Bus {self:?} bus: {e}") })
    }

    /// Whether `name` has an owner on this bus. Callable from anywhere, async code
    /// included: zbus's blocking API runs its futures on zbus's own tokio runtime, which
    /// cannot be entered from a thread already inside one (`lull up` probes from its
    /// runtime), so the probe runs on a short-lived thread of its own.
    pub fn has_name(&self, backend: &'static str, name: &str) -> Result<(), InputError> {
        std::thread::scope(|s| {
            s.spawn(|| self.has_name_here(backend, name)).join().unwrap_or_else(|_| Err(failed_as(backend, "the D-Bus probe panicked")))
        })
    }

    fn has_name_here(&self, backend: &'static str, name: &str) -> Result<(), InputError> {
        let conn = self.connect(backend)?;
        let dbus = zbus::blocking::fdo::DBusProxy::new(&conn).map_err(|e| failed_as(backend, e))?;
        let bus_name = zbus::names::BusName::try_from(name).map_err(|e| failed_as(backend, e))?;
        match dbus.name_has_owner(bus_name) {
            Ok(true) => Ok(()),
            Ok(false) => Err(InputError::Unavailable { backend, why: format!("nobody owns {name} on the {self:?} bus") }),
            Err(e) => Err(failed_as(backend, e)),
        }
    }
}

pub(crate) fn failed_as(backend: &'static str, why: impl std::fmt::Display) -> InputError {
    InputError::Failed { backend, why: why.to_string() }
}

fn failed(why: impl std::fmt::Display) -> InputError {
    failed_as(NAME, why)
}

/// The logind session and inhibitor watcher.
#[derive(Debug)]
pub struct Logind {
    pub bus: Bus,
    /// How often `BlockInhibited` is read.
    pub inhibit_poll: Duration,
}

impl Default for Logind {
    fn default() -> Self {
        Self { bus: Bus::System, inhibit_poll: Duration::from_secs(2) }
    }
}

/// CLOCK_MONOTONIC in µs, logind's clock for `IdleSinceHintMonotonic`.
fn monotonic_us() -> u64 {
    crate::sys::time::monotonic_ns() / 1000
}

/// True when a colon-separated inhibitor list such as `"sleep:idle:handle-lid-switch"`
/// blocks idleness.
pub fn blocks_idle(list: &str) -> bool {
    list.split(':').any(|w| w == "idle")
}

/// Tracks `IdleHint` and turns its changes into signals.
struct IdleTracker {
    last: Option<bool>,
}

impl IdleTracker {
    /// The signal for a new reading, if it is a change that means something.
    fn update(&mut self, idle: bool, since_us: u64, now: MonoMs, mono_us_now: u64) -> Option<InputEvent> {
        let prev = self.last.replace(idle);
        match (prev, idle) {
            (Some(true), true) | (Some(false), false) | (None, false) => None,
            (_, true) => {
                let idle_for_ms = if since_us == 0 { 0 } else { mono_us_now.saturating_sub(since_us) / 1000 };
                Some(InputEvent { at: now, signal: InputSignal::Idled { idle_for_ms } })
            }
            (Some(true), false) => Some(InputEvent { at: now, signal: InputSignal::Resumed }),
        }
    }
}

fn session_path(conn: &Connection) -> Result<OwnedObjectPath, InputError> {
    let manager = Proxy::new(conn, DEST, MANAGER_PATH, MANAGER_IFACE).map_err(failed)?;
    let id = std::env::var("XDG_SESSION_ID").ok().filter(|s| !s.is_empty()).unwrap_or_else(|| "auto".into());
    manager
        .call("GetSession", &(id.as_str(),))
        .map_err(|e| InputError::Unavailable { backend: NAME, why: format!("no logind session: {e}") })
}

fn uncached<'a>(conn: &Connection, path: &'a str, iface: &'a str) -> Result<Proxy<'a>, InputError> {
    zbus::blocking::proxy::Builder::<Proxy>::new(conn)
        .destination(DEST)
        .and_then(|b| b.path(path))
        .and_then(|b| b.interface(iface))
        .map(|b| b.cache_properties(zbus::proxy::CacheProperties::No))
        .and_then(|b| b.build())
        .map_err(failed)
}

fn read_idle(session: &Proxy) -> Result<(bool, u64), InputError> {
    let idle: bool = session.get_property("IdleHint").map_err(failed)?;
    let since: u64 = session.get_property("IdleSinceHintMonotonic").unwrap_or(0);
    Ok((idle, since))
}

/// Forwards the session's `IdleHint` changes until the sink closes or the bus fails.
fn watch_idle_hint(conn: &Connection, path: &str, sink: &InputSink) -> Result<(), InputError> {
    let props = Proxy::new(conn, DEST, path, PROPS_IFACE).map_err(failed)?;
    let changes = props.receive_signal("PropertiesChanged").map_err(failed)?;
    let session = uncached(conn, path, SESSION_IFACE)?;
    let mut tracker = IdleTracker { last: None };
    let (idle, since) = read_idle(&session)?;
    if let Some(ev) = tracker.update(idle, since, mono_now(), monotonic_us()) {
        sink.signal(ev);
    }
    for msg in changes {
        let Ok((iface, changed, invalidated)) = msg.body().deserialize::<(String, HashMap<String, OwnedValue>, Vec<String>)>() else {
            continue;
        };
        if iface != SESSION_IFACE || !(changed.contains_key("IdleHint") || invalidated.iter().any(|p| p == "IdleHint")) {
            continue;
        }
        let (idle, since) = read_idle(&session)?;
        if let Some(ev) = tracker.update(idle, since, mono_now(), monotonic_us()) {
            if !sink.signal(ev) {
                break;
            }
        }
    }
    Ok(())
}

impl InputBackend for Logind {
    fn name(&self) -> &'static str {
        NAME
    }

    fn blind_spots(&self) -> &'static str {
        "individual input events; IdleHint only where the desktop sets it (inhibitors always)"
    }

    fn run(self: Box<Self>, sink: InputSink) -> Result<(), InputError> {
        let conn = self.bus.connect(NAME)?;
        let path = session_path(&conn)?;
        let path = path.as_str().to_owned();
        tracing::info!("input backend {NAME}: watching session {path}");

        // IdleHint: event-driven, on its own thread.
        let idle_conn = conn.clone();
        let idle_sink = sink.clone();
        let idle_path = path.clone();
        let idle_thread = std::thread::Builder::new().name("input-logind-idle".into()).spawn(move || {
            if let Err(e) = watch_idle_hint(&idle_conn, &idle_path, &idle_sink) {
                tracing::warn!("input backend {NAME}: the IdleHint watch stopped: {e}");
            }
        });
        if let Err(e) = idle_thread {
            return Err(failed(format!("cannot start the IdleHint thread: {e}")));
        }

        // BlockInhibited: polled.
        let manager = uncached(&conn, MANAGER_PATH, MANAGER_IFACE)?;
        let mut held = false;
        while !sink.is_closed() {
            let list: String = manager.get_property("BlockInhibited").map_err(failed)?;
            let now_held = blocks_idle(&list);
            if now_held != held {
                held = now_held;
                if !sink.signal(InputEvent { at: mono_now(), signal: InputSignal::Inhibited(held) }) {
                    break;
                }
            }
            std::thread::sleep(self.inhibit_poll);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inhibitor_lists() {
        assert!(blocks_idle("idle"));
        assert!(blocks_idle("handle-power-key:idle:sleep"));
        assert!(!blocks_idle("sleep:handle-lid-switch"));
        assert!(!blocks_idle(""));
        assert!(!blocks_idle("idleness"));
    }

    #[test]
    fn only_idle_hint_changes_count() {
        let mut t = IdleTracker { last: None };
        // Never set by the desktop: nothing, ever.
        assert_eq!(t.update(false, 0, MonoMs(1000), 0), None);
        assert_eq!(t.update(false, 0, MonoMs(2000), 0), None);
        // Idle since 30 s ago on logind's clock.
        let ev = t.update(true, 70_000_000, MonoMs(3000), 100_000_000).expect("idled");
        assert_eq!(ev.signal, InputSignal::Idled { idle_for_ms: 30_000 });
        assert_eq!(t.update(true, 70_000_000, MonoMs(3500), 100_500_000), None);
        assert_eq!(t.update(false, 0, MonoMs(4000), 0).map(|e| e.signal), Some(InputSignal::Resumed));
        // Idle already when we start.
        let mut t = IdleTracker { last: None };
        assert!(matches!(t.update(true, 0, MonoMs(1), 5).map(|e| e.signal), Some(InputSignal::Idled { idle_for_ms: 0 })));
    }
}
