//! The Windows input backend that sees each keyboard and mouse event as it happens:
//! low-level hooks (`SetWindowsHookExW` with `WH_KEYBOARD_LL` and `WH_MOUSE_LL`) on the
//! backend's own thread, which runs the message loop the hooks are called from. The hook
//! procedure reads nothing of the event (its `lParam`, which key or where, is passed on
//! untouched): it notes *that* input happened and *when*, hands that to a second thread
//! and returns at once, so the owner's input is never held up (Windows drops a hook that
//! answers too slowly) and the sink's fast path, which may freeze the guests, runs off
//! the input path.
//!
//! Why hooks and not raw input (`RegisterRawInputDevices` with `RIDEV_INPUTSINK` on a
//! message-only window): both see every event on Windows, but Wine 8's server sends
//! `WM_INPUT` only while the desktop has a foreground thread, so under Wine without a
//! display (CI) raw input sees nothing, while it calls the low-level hooks of every
//! event `SendInput` injects. What hooks cannot see: input to windows of a higher
//! integrity level (an elevated program in front, the secure desktop) and other sessions
//! (Remote Desktop, another signed-in user); `auto` runs the `GetLastInputInfo` poll
//! (`input/windows.rs`) beside it for the first.

use crate::clock::{mono_now, MonoMs};
use crate::input::{InputBackend, InputError, InputSink};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::sync::Mutex;
use std::time::Duration;
use windows_sys::Win32::Foundation::{LPARAM, LRESULT, WPARAM};
use windows_sys::Win32::System::LibraryLoader::GetModuleHandleW;
use windows_sys::Win32::System::Threading::GetCurrentThreadId;
use windows_sys::Win32::UI::WindowsAndMessaging::{
    CallNextHookEx, GetMessageW, PeekMessageW, PostThreadMessageW, SetWindowsHookExW, UnhookWindowsHookEx, HHOOK, MSG, PM_NOREMOVE,
    WH_KEYBOARD_LL, WH_MOUSE_LL, WINDOWS_HOOK_ID, WM_QUIT,
};

/// The backend's name in logs and `lull status`.
pub const NAME: &str = "windows-hooks";

/// How often the forwarding thread looks whether the sink closed while no input came.
const CLOSED_CHECK: Duration = Duration::from_secs(1);

/// Where the hook procedure (which has no context of its own) sends each event's time:
/// the running backend's channel, if one runs in this process.
static EVENT_TIMES: Mutex<Option<Sender<MonoMs>>> = Mutex::new(None);

/// Low-level keyboard and mouse hooks.
#[derive(Debug, Default)]
pub struct LowLevelHooks;

/// Called by Windows on this backend's thread for every keyboard or mouse event: notes
/// the time and passes the event on, reading nothing of it.
unsafe extern "system" fn on_input(code: i32, wparam: WPARAM, lparam: LPARAM) -> LRESULT {
    if code >= 0 {
        if let Some(times) = EVENT_TIMES.lock().unwrap_or_else(|p| p.into_inner()).as_ref() {
            let _ = times.send(mono_now());
        }
    }
    // SAFETY: the arguments are the ones Windows called this hook with; a null hook
    // handle is allowed.
    unsafe { CallNextHookEx(std::ptr::null_mut(), code, wparam, lparam) }
}

/// Installs one global low-level hook calling [`on_input`].
fn install(id: WINDOWS_HOOK_ID, what: &str) -> Result<HHOOK, InputError> {
    // SAFETY: a null name asks for this program's own module handle.
    let module = unsafe { GetModuleHandleW(std::ptr::null()) };
    // SAFETY: `on_input` is a hook procedure of the required signature that lives as
    // long as the program; thread 0 with a low-level hook id makes it global.
    let hook = unsafe { SetWindowsHookExW(id, Some(on_input), module, 0) };
    if hook.is_null() {
        let why = std::io::Error::last_os_error();
        return Err(InputError::Unavailable { backend: NAME, why: format!("SetWindowsHookExW({what}): {why}") });
    }
    Ok(hook)
}

/// Hands each event's time to the sink until it closes, then ends `hook_thread`'s
/// message loop.
fn forward(times: Receiver<MonoMs>, sink: InputSink, hook_thread: u32) {
    loop {
        match times.recv_timeout(CLOSED_CHECK) {
            Ok(at) if sink.activity_at(at) => {}
            Ok(_) => break,
            Err(RecvTimeoutError::Timeout) if !sink.is_closed() => {}
            Err(RecvTimeoutError::Timeout) => break,
            Err(RecvTimeoutError::Disconnected) => return,
        }
    }
    // SAFETY: posts WM_QUIT to the hooks' thread, whose message queue exists (made
    // before this thread started); a thread already gone makes it fail harmlessly.
    unsafe { PostThreadMessageW(hook_thread, WM_QUIT, 0, 0) };
}

/// Runs the message loop the hooks are called from until `WM_QUIT` (or an error).
fn message_loop() {
    // SAFETY: MSG is plain data; GetMessageW fills it.
    let mut msg: MSG = unsafe { std::mem::zeroed() };
    // SAFETY: `msg` is writable; a null window takes this thread's messages.
    while unsafe { GetMessageW(&mut msg, std::ptr::null_mut(), 0, 0) } > 0 {}
}

impl InputBackend for LowLevelHooks {
    fn name(&self) -> &'static str {
        NAME
    }

    fn blind_spots(&self) -> &'static str {
        "input to elevated windows and the secure desktop (the GetLastInputInfo poll beside it sees it, \
         up to a second late); other sessions (Remote Desktop, another signed-in user); idle inhibitors (video, calls)"
    }

    fn run(self: Box<Self>, sink: InputSink) -> Result<(), InputError> {
        let (tx, rx) = channel();
        {
            let mut slot = EVENT_TIMES.lock().unwrap_or_else(|p| p.into_inner());
            if slot.is_some() {
                return Err(InputError::Unavailable { backend: NAME, why: "already running in this process".into() });
            }
            *slot = Some(tx);
        }
        let clear = || *EVENT_TIMES.lock().unwrap_or_else(|p| p.into_inner()) = None;
        // SAFETY: MSG is plain data; peeking makes this thread's message queue, so the
        // forwarding thread can post WM_QUIT to it.
        let mut msg: MSG = unsafe { std::mem::zeroed() };
        // SAFETY: `msg` is writable; PM_NOREMOVE leaves any message where it is.
        unsafe { PeekMessageW(&mut msg, std::ptr::null_mut(), 0, 0, PM_NOREMOVE) };
        let (keyboard, mouse) = (install(WH_KEYBOARD_LL, "WH_KEYBOARD_LL"), install(WH_MOUSE_LL, "WH_MOUSE_LL"));
        let hooks: Vec<HHOOK> = [&keyboard, &mouse].into_iter().filter_map(|h| h.as_ref().ok().copied()).collect();
        let unhook_all = || {
            for &hook in &hooks {
                // SAFETY: each handle came from SetWindowsHookExW above and is removed once.
                unsafe { UnhookWindowsHookEx(hook) };
            }
            clear();
        };
        if let Some(e) = [keyboard, mouse].into_iter().find_map(Result::err) {
            unhook_all();
            return Err(e);
        }
        // SAFETY: no arguments.
        let me = unsafe { GetCurrentThreadId() };
        let forwarder = std::thread::Builder::new().name("input-hooks".into()).spawn(move || forward(rx, sink, me));
        if forwarder.is_ok() {
            message_loop();
        }
        unhook_all();
        match forwarder {
            Ok(f) => {
                let _ = f.join();
                Ok(())
            }
            Err(e) => Err(InputError::Failed { backend: NAME, why: format!("starting its forwarding thread: {e}") }),
        }
    }
}
