//! The tray's main loop on Windows: a Win32 message loop (`GetMessageW`,
//! `TranslateMessage`, `DispatchMessageW`) on the thread that made the tray icon, which
//! `tray-icon` needs (its hidden window and the icon's menu live on that thread).
//!
//! Other threads hand it work with [`invoke`] (as `glib::MainContext::invoke` does on
//! Linux): the closure is queued and a thread message (`WM_APP`) wakes the loop, which
//! runs what is queued. A modal loop (the tray menu while it is open) drops thread
//! messages, so a thread timer (`SetTimer` with a callback, which modal loops dispatch
//! too) also runs the queue every [`BACKSTOP`]: work queued while the menu is open waits
//! at most that long. [`quit`] ends the loop (`PostQuitMessage` on its thread).

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;
use windows_sys::Win32::Foundation::HWND;
use windows_sys::Win32::System::Threading::GetCurrentThreadId;
use windows_sys::Win32::UI::WindowsAndMessaging::{
    DispatchMessageW, GetMessageW, KillTimer, PeekMessageW, PostQuitMessage, PostThreadMessageW, SetTimer, TranslateMessage, MSG,
    PM_NOREMOVE, WM_APP, WM_USER,
};

type Work = Box<dyn FnOnce() + Send>;

/// The work other threads queued for the loop's thread.
static QUEUE: Mutex<Vec<Work>> = Mutex::new(Vec::new());
/// The loop's thread (0 until [`init`]).
static THREAD: AtomicU32 = AtomicU32::new(0);
/// The thread message that says "the queue holds work".
const WAKE: u32 = WM_APP + 1;
/// How often the timer runs the queue anyway (thread messages are lost in modal loops).
pub const BACKSTOP_MS: u32 = 500;

/// Makes the calling thread the loop's (and gives it its message queue, so wake-ups
/// posted before [`run`] are kept). Call before the tray icon is built.
pub fn init() -> anyhow::Result<()> {
    // SAFETY: MSG is plain data, for which all zeroes is a valid value.
    let mut msg: MSG = unsafe { std::mem::zeroed() };
    // SAFETY: a valid out-pointer; PM_NOREMOVE only creates the queue.
    unsafe { PeekMessageW(&mut msg, std::ptr::null_mut(), WM_USER, WM_USER, PM_NOREMOVE) };
    // SAFETY: no preconditions.
    THREAD.store(unsafe { GetCurrentThreadId() }, Ordering::SeqCst);
    Ok(())
}

/// Runs `f` on the loop's thread, soon (from any thread; queued until [`run`] if it does
/// not run yet).
pub fn invoke(f: impl FnOnce() + Send + 'static) {
    QUEUE.lock().unwrap_or_else(|e| e.into_inner()).push(Box::new(f));
    let thread = THREAD.load(Ordering::SeqCst);
    if thread != 0 {
        // SAFETY: plain values. A failure (the queue full) leaves the work to the timer.
        unsafe { PostThreadMessageW(thread, WAKE, 0, 0) };
    }
}

/// Ends [`run`] (from any thread; also when asked before it runs).
pub fn quit() {
    // SAFETY: called on the loop's thread, which owns the quit it posts.
    invoke(|| unsafe { PostQuitMessage(0) });
}

/// Runs the queued work.
fn drain() {
    let work = std::mem::take(&mut *QUEUE.lock().unwrap_or_else(|e| e.into_inner()));
    for f in work {
        f();
    }
}

unsafe extern "system" fn on_timer(_: HWND, _: u32, _: usize, _: u32) {
    drain();
}

/// The message loop: returns when [`quit`] was called.
pub fn run() {
    // SAFETY: a thread timer (no window) with a callback, killed below.
    let timer = unsafe { SetTimer(std::ptr::null_mut(), 0, BACKSTOP_MS, Some(on_timer)) };
    if timer == 0 {
        tracing::warn!(
            "SetTimer failed ({}): work queued while the tray menu is open waits for it to close",
            std::io::Error::last_os_error()
        );
    }
    drain();
    // SAFETY: MSG is plain data, for which all zeroes is a valid value.
    let mut msg: MSG = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: a valid out-pointer; any window of this thread, any message.
        let got = unsafe { GetMessageW(&mut msg, std::ptr::null_mut(), 0, 0) };
        if got == 0 {
            break; // WM_QUIT
        }
        if got == -1 {
            tracing::error!("GetMessageW failed: {}", std::io::Error::last_os_error());
            break;
        }
        if msg.hwnd.is_null() && msg.message == WAKE {
            drain();
            continue;
        }
        // SAFETY: a message GetMessageW filled in.
        unsafe {
            TranslateMessage(&msg);
            DispatchMessageW(&msg);
        }
    }
    if timer != 0 {
        // SAFETY: the timer made above.
        unsafe { KillTimer(std::ptr::null_mut(), timer) };
    }
}
