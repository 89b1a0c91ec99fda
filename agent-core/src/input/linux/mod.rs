//! The Linux input backends and the start-up choice among them: X11 (XInput 2 raw
//! events), MIT-SCREEN-SAVER polling, Wayland and Mutter idle notifications, logind's
//! idle hint, and terminals (for consoles and ssh sessions). Each backend is one file;
//! [`choose_backends`] probes the session for `auto`.

pub mod logind;
pub mod mutter;
pub mod polled;
pub mod terminal;
pub mod wayland;
pub mod x11;

use super::{wanted, InputBackend};
use crate::config::{Input, InputBackendChoice};

/// Picks the input backends at start-up: those asked for by name as they are (their
/// `run` reports it if they cannot work here), or for `auto` the best this session
/// offers, probed now, plus the terminal backend (consoles and ssh sessions are invisible
/// to every desktop backend). Says in the log why each candidate was passed over; the agent
/// logs one line per backend in use with what it cannot see.
pub fn choose_backends(config: &Input) -> Vec<Box<dyn InputBackend>> {
    let timeout = std::time::Duration::from_secs(config.idle_notify_s);
    let mut out: Vec<Box<dyn InputBackend>> = Vec::new();
    for w in wanted(config) {
        match w {
            InputBackendChoice::None => {}
            InputBackendChoice::X11 => out.push(Box::new(x11::X11Raw)),
            InputBackendChoice::Polled => out.push(Box::new(polled::ScreenSaverPolled::default())),
            InputBackendChoice::Wayland => out.push(Box::new(wayland::WaylandIdle { timeout })),
            InputBackendChoice::Mutter => out.push(Box::new(mutter::MutterIdle { bus: logind::Bus::Session, timeout })),
            InputBackendChoice::Logind => out.push(Box::new(logind::Logind::default())),
            InputBackendChoice::Terminal => out.push(Box::new(terminal::Terminal::new(config.all_users))),
            InputBackendChoice::Auto => out.extend(auto(timeout, config.all_users)),
            // The config and LULL_INPUT refuse it here; a config built in code could name it.
            InputBackendChoice::LastInput => tracing::warn!("input: last-input is an input backend on Windows and macOS only"),
            InputBackendChoice::Hooks => tracing::warn!("input: hooks is an input backend on Windows only"),
        }
    }
    out
}

/// X11 extensions that matter here: (XInputExtension, MIT-SCREEN-SAVER).
fn x11_extensions() -> Result<(bool, bool), String> {
    use x11rb::connection::RequestConnection;
    if std::env::var_os("DISPLAY").is_none_or(|d| d.is_empty()) {
        return Err("DISPLAY is not set".into());
    }
    let (conn, _) = x11rb::connect(None).map_err(|e| format!("cannot connect to the X display: {e}"))?;
    let has = |n: &'static str| conn.extension_information(n).map(|i| i.is_some()).map_err(|e| e.to_string());
    Ok((has(x11rb::protocol::xinput::X11_EXTENSION_NAME)?, has(x11rb::protocol::screensaver::X11_EXTENSION_NAME)?))
}

fn auto(timeout: std::time::Duration, all_users: bool) -> Vec<Box<dyn InputBackend>> {
    use tracing::info;
    let mut out: Vec<Box<dyn InputBackend>> = Vec::new();
    let on_wayland = std::env::var_os("WAYLAND_DISPLAY").is_some_and(|d| !d.is_empty());
    if on_wayland {
        // Under Wayland, X11 (XWayland) would only see input to X clients.
        match wayland::WaylandIdle::probe() {
            Ok(_) => out.push(Box::new(wayland::WaylandIdle { timeout })),
            Err(e) => info!("input: not using Wayland idle notifications: {e}"),
        }
    } else {
        // On X11, every single event (XInput 2 raw events) beats "idle for N s" notifications.
        match x11_extensions() {
            Ok((true, _)) => out.push(Box::new(x11::X11Raw)),
            Ok((false, true)) => {
                info!("input: the X server lacks XInput 2; polling MIT-SCREEN-SAVER instead");
                out.push(Box::new(polled::ScreenSaverPolled::default()));
            }
            Ok((false, false)) => info!("input: the X server has neither XInput 2 nor MIT-SCREEN-SAVER"),
            Err(e) => info!("input: not using X11: {e}"),
        }
    }
    if out.is_empty() {
        // GNOME on Wayland offers neither Wayland idle protocol, only Mutter's monitor.
        match logind::Bus::Session.has_name("mutter-idle-monitor", mutter::DEST) {
            Ok(()) => out.push(Box::new(mutter::MutterIdle { bus: logind::Bus::Session, timeout })),
            Err(e) => info!("input: not using Mutter's idle monitor: {e}"),
        }
    }
    match logind::Bus::System.has_name("logind", "org.freedesktop.login1") {
        Ok(()) => out.push(Box::new(logind::Logind::default())),
        Err(e) => info!("input: not using logind (idle hint, inhibitors): {e}"),
    }
    // The owner's terminals, local and remote, beside whatever the desktop offers.
    match terminal::Terminal::probe() {
        Ok(()) => out.push(Box::new(terminal::Terminal::new(all_users))),
        Err(e) => info!("input: not watching terminals: {e}"),
    }
    out
}
