//! What the desktop offers, checked *before* Tauri builds anything, because Tauri panics
//! where it is missing: GTK init panics with no display, and building a tray icon panics
//! when no AppIndicator library can be loaded. A tray host (a StatusNotifier watcher on
//! D-Bus, or an XEmbed system tray) is checked too: without one the icon is silently
//! invisible (GNOME without an AppIndicator extension), so the app opens a window.

/// The library names libappindicator-sys tries, in its order.
pub const APPINDICATOR_LIBS: [&str; 4] =
    ["libayatana-appindicator3.so.1", "libappindicator3.so.1", "libayatana-appindicator3.so", "libappindicator3.so"];

/// Opens the display with GTK; an error says why it cannot be used.
#[cfg(target_os = "linux")]
pub fn display() -> Result<(), String> {
    let set = |k: &str| std::env::var_os(k).is_some_and(|v| !v.is_empty());
    if !set("DISPLAY") && !set("WAYLAND_DISPLAY") {
        return Err("no display: neither DISPLAY nor WAYLAND_DISPLAY is set".into());
    }
    gtk::init().map_err(|e| {
        let which = std::env::var("WAYLAND_DISPLAY").or_else(|_| std::env::var("DISPLAY")).unwrap_or_default();
        format!("cannot open the display {which:?}: {e}")
    })
}

/// Which AppIndicator library can be loaded, or what is missing.
pub fn appindicator() -> Result<&'static str, String> {
    for name in APPINDICATOR_LIBS {
        let c = std::ffi::CString::new(name).map_err(|e| e.to_string())?;
        // SAFETY: dlopen with a valid C string; the handle is kept open (the tray loads the
        // same library moments later, so closing it would only unload and reload it).
        let h = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_LAZY | libc::RTLD_LOCAL) };
        if !h.is_null() {
            return Ok(name);
        }
    }
    Err(format!("no AppIndicator library ({}) can be loaded: install libayatana-appindicator3-1 for the tray icon", APPINDICATOR_LIBS[0]))
}

/// Whether something will show a tray icon: a StatusNotifierWatcher on the session bus
/// (KDE, GNOME with the AppIndicator extension, most panels) or an XEmbed tray manager
/// (`_NET_SYSTEM_TRAY_Sn`: trayer, stalonetray, XFCE, MATE…). Returns what was found.
#[cfg(target_os = "linux")]
pub fn tray_host() -> Option<String> {
    if sni_watcher() {
        return Some("StatusNotifierWatcher on D-Bus".into());
    }
    xembed_tray().then(|| "XEmbed system tray".into())
}

#[cfg(target_os = "linux")]
fn sni_watcher() -> bool {
    use gio::prelude::*;
    let Ok(bus) = gio::bus_get_sync(gio::BusType::Session, None::<&gio::Cancellable>) else { return false };
    let args = ("org.kde.StatusNotifierWatcher",).to_variant();
    let reply = bus.call_sync(
        Some("org.freedesktop.DBus"),
        "/org/freedesktop/DBus",
        "org.freedesktop.DBus",
        "NameHasOwner",
        Some(&args),
        Some(glib_bool_tuple()),
        gio::DBusCallFlags::NONE,
        1000,
        None::<&gio::Cancellable>,
    );
    reply.ok().and_then(|v| v.get::<(bool,)>()).is_some_and(|(b,)| b)
}

#[cfg(target_os = "linux")]
fn glib_bool_tuple() -> &'static gio::glib::VariantTy {
    gio::glib::VariantTy::new("(b)").expect("\"(b)\" is a valid variant type string")
}

#[cfg(target_os = "linux")]
fn xembed_tray() -> bool {
    let Ok(xlib) = x11_dl::xlib::Xlib::open() else { return false };
    // SAFETY: plain Xlib calls on a display we open and close here; a null display
    // (no X server) is checked before use.
    unsafe {
        let dpy = (xlib.XOpenDisplay)(std::ptr::null());
        if dpy.is_null() {
            return false;
        }
        let screen = (xlib.XDefaultScreen)(dpy);
        let name = std::ffi::CString::new(format!("_NET_SYSTEM_TRAY_S{screen}")).unwrap_or_default();
        let atom = (xlib.XInternAtom)(dpy, name.as_ptr(), 0);
        let owner = (xlib.XGetSelectionOwner)(dpy, atom);
        (xlib.XCloseDisplay)(dpy);
        owner != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn appindicator_probe_agrees_with_the_filesystem() {
        // The probe must find the library exactly when one of the names resolves in
        // the linker's usual places (this machine has it installed, or not).
        let dirs = ["/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib", "/lib/x86_64-linux-gnu"];
        let present = APPINDICATOR_LIBS.iter().any(|n| dirs.iter().any(|d| std::path::Path::new(d).join(n).exists()));
        assert_eq!(appindicator().is_ok(), present, "{:?}", appindicator());
    }
}
