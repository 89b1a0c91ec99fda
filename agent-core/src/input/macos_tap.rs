//! The macOS input backend that sees each keyboard, mouse and trackpad event as it
//! happens: a listen-only event tap on the login session (`CGEventTapCreate` with
//! `kCGSessionEventTap` and `kCGEventTapOptionListenOnly`) run by the backend's own thread
//! in its own run loop. The tap's callback reads nothing of the event (which key, where
//! the pointer is): it notes *that* input happened and *when*, hands that to a second
//! thread and returns the event untouched, so the owner's input is never held up (macOS
//! disables a tap whose callback is slow, `kCGEventTapDisabledByTimeout`; it is then
//! enabled again) and the sink's fast path, which may freeze the guests, runs off the
//! input path. This is the Windows hooks' design (`input/windows_hooks.rs`).
//!
//! **The permission.** A listen-only tap needs the owner to grant the program *Input
//! Monitoring* (System Settings › Privacy & Security › Input Monitoring; macOS 10.15 and
//! later). Without it `CGPreflightListenEventAccess` says no: the backend stops at once,
//! and `lull status` lists it as stopped with how to grant it, while the idle-time poll
//! beside it (`input/macos.rs`, which needs no permission) keeps seeing input up to a
//! second late. The agent never asks macOS to prompt the owner
//! (`CGRequestListenEventAccess`): a background agent's prompt would come from nowhere.
//! What the tap cannot see: other users' sessions (fast user switching, Screen Sharing),
//! and input while secure event input is on (a password field) in some versions.
//!
//! Configured as `input.backend = "hooks"` (the name Windows' event-by-event backend
//! has); `auto` runs it beside the poll. Built (type-checked), never run, on Lull's
//! machines.

use crate::clock::{mono_now, MonoMs};
use crate::input::{InputBackend, InputError, InputSink};
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The backend's name in logs and `lull status`.
pub const NAME: &str = "macos-event-tap";

/// How often the forwarding thread looks whether the sink closed while no input came,
/// and how long the tap's run loop runs between looks at the stop flag.
const CLOSED_CHECK: Duration = Duration::from_secs(1);

type CFMachPortRef = *mut c_void;
type CFRunLoopSourceRef = *mut c_void;
type CFRunLoopRef = *mut c_void;
type CFStringRef = *const c_void;
type CGEventRef = *mut c_void;
type CGEventTapProxy = *mut c_void;
type CGEventTapCallBack = unsafe extern "C" fn(CGEventTapProxy, u32, CGEventRef, *mut c_void) -> CGEventRef;

/// `kCGSessionEventTap`: events as they enter the login session.
const SESSION_EVENT_TAP: u32 = 1;
/// `kCGHeadInsertEventTap`.
const HEAD_INSERT: u32 = 0;
/// `kCGEventTapOptionListenOnly`: the tap observes; it can neither change nor drop events.
const LISTEN_ONLY: u32 = 1;
/// `kCGEventTapDisabledByTimeout` and `kCGEventTapDisabledByUserInput`: not input, the tap
/// was switched off.
const DISABLED_BY_TIMEOUT: u32 = 0xFFFF_FFFE;
const DISABLED_BY_USER_INPUT: u32 = 0xFFFF_FFFF;

/// The owner's input, by `CGEventType`: mouse buttons down and up (left 1–2, right 3–4,
/// other 25–26), moves and drags (5, 6, 7, 27), keys down and up and modifier changes
/// (10, 11, 12), scrolling and trackpad gestures' scroll (22), tablets (23, 24).
const INPUT_TYPES: [u32; 16] = [1, 2, 3, 4, 5, 6, 7, 10, 11, 12, 22, 23, 24, 25, 26, 27];

/// The event mask of [`INPUT_TYPES`] (`CGEventMaskBit` of each).
pub fn input_mask() -> u64 {
    INPUT_TYPES.iter().fold(0, |mask, t| mask | (1u64 << t))
}

#[link(name = "CoreGraphics", kind = "framework")]
extern "C" {
    fn CGPreflightListenEventAccess() -> bool;
    fn CGEventTapCreate(
        tap: u32,
        place: u32,
        options: u32,
        events_of_interest: u64,
        callback: CGEventTapCallBack,
        user_info: *mut c_void,
    ) -> CFMachPortRef;
    fn CGEventTapEnable(tap: CFMachPortRef, enable: bool);
}

#[link(name = "CoreFoundation", kind = "framework")]
extern "C" {
    static kCFRunLoopDefaultMode: CFStringRef;
    fn CFMachPortCreateRunLoopSource(allocator: *const c_void, port: CFMachPortRef, order: isize) -> CFRunLoopSourceRef;
    fn CFMachPortInvalidate(port: CFMachPortRef);
    fn CFRunLoopGetCurrent() -> CFRunLoopRef;
    fn CFRunLoopAddSource(rl: CFRunLoopRef, source: CFRunLoopSourceRef, mode: CFStringRef);
    fn CFRunLoopRunInMode(mode: CFStringRef, seconds: f64, return_after_source_handled: u8) -> i32;
    fn CFRelease(cf: *const c_void);
}

/// Where the callback (whose `user_info` is this) sends each event's time, and the tap
/// to enable again when macOS switches it off.
struct Tap {
    times: Mutex<Sender<MonoMs>>,
    port: AtomicPtr<c_void>,
}

/// A listen-only event tap on the login session.
#[derive(Debug, Default)]
pub struct EventTap;

/// Called by macOS on the tap's thread for every event of the mask: notes the time and
/// returns the event, reading nothing of it.
unsafe extern "C" fn on_event(_proxy: CGEventTapProxy, ty: u32, event: CGEventRef, user_info: *mut c_void) -> CGEventRef {
    // SAFETY: `user_info` is the `Tap` that `run` made, which outlives the tap (the port is
    // invalidated before it is dropped).
    let tap = unsafe { &*(user_info as *const Tap) };
    if ty == DISABLED_BY_TIMEOUT || ty == DISABLED_BY_USER_INPUT {
        let port = tap.port.load(Ordering::Acquire);
        if !port.is_null() {
            // SAFETY: the tap's own port, valid while its run loop runs this callback.
            unsafe { CGEventTapEnable(port, true) };
        }
    } else {
        let _ = tap.times.lock().unwrap_or_else(|p| p.into_inner()).send(mono_now());
    }
    event
}

/// Hands each event's time to the sink until it closes, then raises `stop`.
fn forward(times: Receiver<MonoMs>, sink: InputSink, stop: Arc<AtomicBool>) {
    loop {
        match times.recv_timeout(CLOSED_CHECK) {
            Ok(at) if sink.activity_at(at) => {}
            Ok(_) => break,
            Err(RecvTimeoutError::Timeout) if !sink.is_closed() => {}
            Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => break,
        }
    }
    stop.store(true, Ordering::Release);
}

impl InputBackend for EventTap {
    fn name(&self) -> &'static str {
        NAME
    }

    fn blind_spots(&self) -> &'static str {
        "anything without the owner's Input Monitoring grant (then it stops, and the 1-s idle-time poll beside it \
         sees input); other users' sessions (fast user switching, Screen Sharing); idle inhibitors (video, calls)"
    }

    fn run(self: Box<Self>, sink: InputSink) -> Result<(), InputError> {
        // SAFETY: no arguments; it asks the system whether this program may listen.
        if !unsafe { CGPreflightListenEventAccess() } {
            return Err(InputError::Unavailable {
                backend: NAME,
                why: "macOS has not granted Lull Input Monitoring (CGPreflightListenEventAccess: no): grant it in \
                      System Settings › Privacy & Security › Input Monitoring and restart Lull; until then the idle-time \
                      poll sees input, up to a second late"
                    .into(),
            });
        }
        let (tx, rx) = channel();
        let tap = Box::new(Tap { times: Mutex::new(tx), port: AtomicPtr::new(std::ptr::null_mut()) });
        let user_info = &*tap as *const Tap as *mut c_void;
        // SAFETY: `on_event` has the callback's signature and `user_info` points to `tap`,
        // which lives until after the port is invalidated below.
        let port = unsafe { CGEventTapCreate(SESSION_EVENT_TAP, HEAD_INSERT, LISTEN_ONLY, input_mask(), on_event, user_info) };
        if port.is_null() {
            return Err(InputError::Unavailable {
                backend: NAME,
                why: "CGEventTapCreate made no tap (Input Monitoring withdrawn, or no login session)".into(),
            });
        }
        tap.port.store(port, Ordering::Release);
        // SAFETY: a valid port; the default allocator.
        let source = unsafe { CFMachPortCreateRunLoopSource(std::ptr::null(), port, 0) };
        let release_port = || {
            // SAFETY: the port made above, invalidated (no more callbacks) and released once.
            unsafe {
                CFMachPortInvalidate(port);
                CFRelease(port as *const c_void);
            }
        };
        if source.is_null() {
            release_port();
            return Err(InputError::Failed { backend: NAME, why: "CFMachPortCreateRunLoopSource made no source".into() });
        }
        let stop = Arc::new(AtomicBool::new(false));
        let stop_seen = stop.clone();
        let forwarder = std::thread::Builder::new().name("input-event-tap".into()).spawn(move || forward(rx, sink, stop));
        if forwarder.is_ok() {
            // SAFETY: this thread's run loop, the source made above and a mode constant of
            // CoreFoundation's; the tap is enabled once its source is in the loop.
            unsafe {
                CFRunLoopAddSource(CFRunLoopGetCurrent(), source, kCFRunLoopDefaultMode);
                CGEventTapEnable(port, true);
            }
            while !stop_seen.load(Ordering::Acquire) {
                // SAFETY: runs this thread's loop in the mode the source was added to.
                unsafe { CFRunLoopRunInMode(kCFRunLoopDefaultMode, CLOSED_CHECK.as_secs_f64(), 0) };
            }
        }
        release_port();
        // SAFETY: the source made above, released once after its port is invalidated.
        unsafe { CFRelease(source as *const c_void) };
        drop(tap);
        match forwarder {
            Ok(f) => {
                let _ = f.join();
                Ok(())
            }
            Err(e) => Err(InputError::Failed { backend: NAME, why: format!("starting its forwarding thread: {e}") }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mask_holds_every_input_type_and_no_other() {
        let mask = input_mask();
        assert_eq!(mask.count_ones(), 16);
        for t in [1, 5, 10, 12, 22, 27] {
            assert_ne!(mask & (1 << t), 0, "type {t}");
        }
        // kCGEventNull (0), kCGEventTapDisabledBy* are not input.
        assert_eq!(mask & 1, 0);
    }
}
