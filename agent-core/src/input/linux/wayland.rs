//! Wayland input backend: the compositor tells us when the seat has been idle for a set
//! time and when input resumed; no Wayland client can see other clients' input, so this
//! is the only kind of signal there is. Prefers `ext-idle-notify-v1` (the standard one,
//! which also honours idle inhibitors), else KDE's `org_kde_kwin_idle` (KWin, and sway
//! 1.7 as in Debian 12). Both become [`InputSignal::Idled`] / [`InputSignal::Resumed`].

use crate::clock::mono_now;
use crate::input::{InputBackend, InputError, InputSink};
use crate::sample::{InputEvent, InputSignal};
use std::time::Duration;
use wayland_client::globals::{registry_queue_init, GlobalListContents};
use wayland_client::protocol::{wl_registry, wl_seat};
use wayland_client::{Connection, Dispatch, QueueHandle};
use wayland_protocols::ext::idle_notify::v1::client::{ext_idle_notification_v1, ext_idle_notifier_v1};
use wayland_protocols_plasma::idle::client::{org_kde_kwin_idle, org_kde_kwin_idle_timeout};

const NAME: &str = "wayland";

/// Which idle protocol the compositor offers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IdleProtocol {
    ExtIdleNotify,
    KdeKwinIdle,
}

impl IdleProtocol {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ExtIdleNotify => "ext_idle_notifier_v1",
            Self::KdeKwinIdle => "org_kde_kwin_idle",
        }
    }
}

/// Idle notifications from the Wayland compositor.
#[derive(Debug)]
pub struct WaylandIdle {
    /// "Idled" after this long without input.
    pub timeout: Duration,
}

fn unavailable(why: impl std::fmt::Display) -> InputError {
    InputError::Unavailable { backend: NAME, why: why.to_string() }
}

fn failed(why: impl std::fmt::Display) -> InputError {
    InputError::Failed { backend: NAME, why: why.to_string() }
}

impl WaylandIdle {
    /// Connects to `$WAYLAND_DISPLAY` and says which idle protocol the compositor offers.
    pub fn probe() -> Result<IdleProtocol, InputError> {
        if std::env::var_os("WAYLAND_DISPLAY").is_none_or(|d| d.is_empty()) {
            return Err(unavailable("WAYLAND_DISPLAY is not set"));
        }
        let conn = Connection::connect_to_env().map_err(unavailable)?;
        let (globals, _queue) = registry_queue_init::<State>(&conn).map_err(unavailable)?;
        let names: Vec<String> = globals.contents().with_list(|l| l.iter().map(|g| g.interface.clone()).collect());
        pick(&names).ok_or_else(|| unavailable("the compositor offers neither ext_idle_notifier_v1 nor org_kde_kwin_idle"))
    }
}

fn pick(interfaces: &[String]) -> Option<IdleProtocol> {
    let has = |n: &str| interfaces.iter().any(|i| i == n);
    if !has("wl_seat") {
        return None;
    }
    if has(IdleProtocol::ExtIdleNotify.as_str()) {
        Some(IdleProtocol::ExtIdleNotify)
    } else if has(IdleProtocol::KdeKwinIdle.as_str()) {
        Some(IdleProtocol::KdeKwinIdle)
    } else {
        None
    }
}

/// Dispatch state: where the notifications go.
struct State {
    sink: Option<InputSink>,
    timeout_ms: u64,
    open: bool,
}

impl State {
    fn idled(&mut self) {
        let at = mono_now();
        self.send(InputEvent { at, signal: InputSignal::Idled { idle_for_ms: self.timeout_ms } });
    }
    fn resumed(&mut self) {
        self.send(InputEvent { at: mono_now(), signal: InputSignal::Resumed });
    }
    fn send(&mut self, ev: InputEvent) {
        if let Some(s) = &self.sink {
            self.open = s.signal(ev);
        }
    }
}

impl Dispatch<wl_registry::WlRegistry, GlobalListContents> for State {
    fn event(
        _: &mut Self,
        _: &wl_registry::WlRegistry,
        _: wl_registry::Event,
        _: &GlobalListContents,
        _: &Connection,
        _: &QueueHandle<Self>,
    ) {
    }
}

impl Dispatch<wl_seat::WlSeat, ()> for State {
    fn event(_: &mut Self, _: &wl_seat::WlSeat, _: wl_seat::Event, _: &(), _: &Connection, _: &QueueHandle<Self>) {}
}

impl Dispatch<ext_idle_notifier_v1::ExtIdleNotifierV1, ()> for State {
    fn event(
        _: &mut Self,
        _: &ext_idle_notifier_v1::ExtIdleNotifierV1,
        _: ext_idle_notifier_v1::Event,
        _: &(),
        _: &Connection,
        _: &QueueHandle<Self>,
    ) {
    }
}

impl Dispatch<ext_idle_notification_v1::ExtIdleNotificationV1, ()> for State {
    fn event(
        state: &mut Self,
        _: &ext_idle_notification_v1::ExtIdleNotificationV1,
        event: ext_idle_notification_v1::Event,
        _: &(),
        _: &Connection,
        _: &QueueHandle<Self>,
    ) {
        match event {
            ext_idle_notification_v1::Event::Idled => state.idled(),
            ext_idle_notification_v1::Event::Resumed => state.resumed(),
            _ => {}
        }
    }
}

impl Dispatch<org_kde_kwin_idle::OrgKdeKwinIdle, ()> for State {
    fn event(
        _: &mut Self,
        _: &org_kde_kwin_idle::OrgKdeKwinIdle,
        _: org_kde_kwin_idle::Event,
        _: &(),
        _: &Connection,
        _: &QueueHandle<Self>,
    ) {
    }
}

impl Dispatch<org_kde_kwin_idle_timeout::OrgKdeKwinIdleTimeout, ()> for State {
    fn event(
        state: &mut Self,
        _: &org_kde_kwin_idle_timeout::OrgKdeKwinIdleTimeout,
        event: org_kde_kwin_idle_timeout::Event,
        _: &(),
        _: &Connection,
        _: &QueueHandle<Self>,
    ) {
        match event {
            org_kde_kwin_idle_timeout::Event::Idle => state.idled(),
            org_kde_kwin_idle_timeout::Event::Resumed => state.resumed(),
            _ => {}
        }
    }
}

impl InputBackend for WaylandIdle {
    fn name(&self) -> &'static str {
        NAME
    }

    fn blind_spots(&self) -> &'static str {
        "individual input events (only \"idle for the set time\" and \"resumed\"); idle inhibitors with org_kde_kwin_idle"
    }

    fn run(self: Box<Self>, sink: InputSink) -> Result<(), InputError> {
        if std::env::var_os("WAYLAND_DISPLAY").is_none_or(|d| d.is_empty()) {
            return Err(unavailable("WAYLAND_DISPLAY is not set"));
        }
        let conn = Connection::connect_to_env().map_err(unavailable)?;
        let (globals, mut queue) = registry_queue_init::<State>(&conn).map_err(unavailable)?;
        let qh = queue.handle();
        let names: Vec<String> = globals.contents().with_list(|l| l.iter().map(|g| g.interface.clone()).collect());
        let proto = pick(&names).ok_or_else(|| unavailable("the compositor offers neither ext_idle_notifier_v1 nor org_kde_kwin_idle"))?;
        let timeout_ms = self.timeout.as_millis().min(u32::MAX as u128) as u32;
        let seat: wl_seat::WlSeat = globals.bind(&qh, 1..=1, ()).map_err(failed)?;
        // The notification objects live as long as these bindings are held.
        let _keep: Box<dyn std::any::Any> = match proto {
            IdleProtocol::ExtIdleNotify => {
                let notifier: ext_idle_notifier_v1::ExtIdleNotifierV1 = globals.bind(&qh, 1..=1, ()).map_err(failed)?;
                Box::new((notifier.get_idle_notification(timeout_ms, &seat, &qh, ()), notifier))
            }
            IdleProtocol::KdeKwinIdle => {
                let idle: org_kde_kwin_idle::OrgKdeKwinIdle = globals.bind(&qh, 1..=1, ()).map_err(failed)?;
                Box::new((idle.get_idle_timeout(&seat, timeout_ms, &qh, ()), idle))
            }
        };
        tracing::info!("input backend {NAME}: using {} with a {timeout_ms} ms idle timeout", proto.as_str());
        let mut state = State { sink: Some(sink), timeout_ms: timeout_ms as u64, open: true };
        while state.open {
            queue.blocking_dispatch(&mut state).map_err(failed)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefers_ext_idle_notify_and_needs_a_seat() {
        let v = |l: &[&str]| l.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(pick(&v(&["wl_seat", "org_kde_kwin_idle", "ext_idle_notifier_v1"])), Some(IdleProtocol::ExtIdleNotify));
        assert_eq!(pick(&v(&["wl_seat", "org_kde_kwin_idle"])), Some(IdleProtocol::KdeKwinIdle));
        assert_eq!(pick(&v(&["org_kde_kwin_idle"])), None);
        assert_eq!(pick(&v(&["wl_seat", "wl_compositor"])), None);
    }
}
