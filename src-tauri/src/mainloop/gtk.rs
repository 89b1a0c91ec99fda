//! The tray's main loop on Linux: GTK's (`gtk::main`), on the main thread, where
//! `tray-icon`'s AppIndicator and its menu live. GTK was initialised by the display probe
//! (`probe::display`) before anything here runs.

/// Nothing to do: `gtk::init` ran in the display probe, on this thread.
pub fn init() -> anyhow::Result<()> {
    Ok(())
}

/// Runs `f` on the main thread, soon (from any thread; queued until [`run`]).
pub fn invoke(f: impl FnOnce() + Send + 'static) {
    gtk::glib::MainContext::default().invoke(f);
}

/// Ends [`run`] (from any thread; also when asked before it runs).
pub fn quit() {
    gtk::glib::idle_add_once(gtk::main_quit);
}

/// GTK's main loop: returns when [`quit`] was called.
pub fn run() {
    gtk::main();
}
