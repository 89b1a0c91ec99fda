//! The tray's main loop on macOS: AppKit's (`NSApplication::run`) on the main thread,
//! which `tray-icon` needs (its `NSStatusItem` and the menu live there, and AppKit
//! delivers their clicks only to a running application). The application is an
//! *accessory* (`NSApplicationActivationPolicyAccessory`): a menu-bar extra with no Dock
//! icon and no menu bar of its own, as a packaged app's `LSUIElement` makes it.
//!
//! Other threads hand it work through the main dispatch queue (`dispatch_async` on
//! `dispatch_get_main_queue`), which the main run loop serves in every mode, so work also
//! runs while the owner holds the menu open. [`quit`] asks `-[NSApplication stop:]` and
//! posts an empty application-defined event, since `stop:` takes effect only once the
//! loop has handled an event.
//!
//! Type-checked on Linux for `aarch64-apple-darwin` (`scripts/check-platforms.sh`);
//! never run here: no Mac.

use anyhow::Context;
use dispatch2::DispatchQueue;
use objc2::MainThreadMarker;
use objc2_app_kit::{NSApplication, NSApplicationActivationPolicy, NSEvent, NSEventModifierFlags, NSEventType};
use objc2_foundation::NSPoint;

/// The application on the main thread.
fn app() -> anyhow::Result<objc2::rc::Retained<NSApplication>> {
    let mtm = MainThreadMarker::new().context("the tray's loop must run on the main thread")?;
    Ok(NSApplication::sharedApplication(mtm))
}

/// Makes this process an accessory application (a menu-bar extra: no Dock icon). Call on
/// the main thread before the tray icon is built.
pub fn init() -> anyhow::Result<()> {
    let app = app()?;
    if !app.setActivationPolicy(NSApplicationActivationPolicy::Accessory) {
        tracing::warn!("AppKit refused the accessory activation policy: Lull shows a Dock icon");
    }
    Ok(())
}

/// Runs `f` on the main thread, soon (from any thread; queued until [`run`]).
pub fn invoke(f: impl FnOnce() + Send + 'static) {
    DispatchQueue::main().exec_async(f);
}

/// Ends [`run`] (from any thread; also when asked before it runs).
pub fn quit() {
    invoke(|| {
        let app = match app() {
            Ok(app) => app,
            Err(e) => return tracing::error!("cannot stop the main loop: {e:#}"),
        };
        app.stop(None);
        // `stop:` is seen when the loop finishes handling an event: give it one.
        let wake = NSEvent::otherEventWithType_location_modifierFlags_timestamp_windowNumber_context_subtype_data1_data2(
            NSEventType::ApplicationDefined,
            NSPoint::new(0.0, 0.0),
            NSEventModifierFlags::empty(),
            0.0,
            0,
            None,
            0,
            0,
            0,
        );
        match wake {
            Some(event) => app.postEvent_atStart(&event, false),
            None => tracing::warn!("AppKit made no event to wake its loop: Lull stops at the next event"),
        }
    });
}

/// AppKit's loop: returns when [`quit`] was called.
pub fn run() {
    match app() {
        Ok(app) => app.run(),
        Err(e) => tracing::error!("{e:#}"),
    }
}
