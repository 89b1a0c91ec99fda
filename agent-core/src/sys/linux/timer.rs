//! A one-shot kernel timer on `CLOCK_BOOTTIME` (`timerfd`), watched by the tokio reactor.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use tokio::io::unix::AsyncFd;

/// A non-blocking `timerfd` on the boot clock, registered with the current tokio runtime.
pub struct BootTimer {
    fd: AsyncFd<OwnedFd>,
}

impl BootTimer {
    /// A new, unset timer. Must be called inside a tokio runtime with IO enabled.
    pub fn new() -> io::Result<Self> {
        // SAFETY: timerfd_create takes no pointers; the result is checked before use.
        let raw = unsafe { libc::timerfd_create(libc::CLOCK_BOOTTIME, libc::TFD_NONBLOCK | libc::TFD_CLOEXEC) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a fresh descriptor owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: the AsyncFd owns the OwnedFd, which keeps the descriptor open and
        // unchanged until both are dropped together.
        Ok(Self { fd: unsafe { AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE)? } })
    }

    /// Sets the timer to expire once, `us` microseconds from now (at least 1: a zero
    /// value would disarm it). Relative, not absolute: libfaketime, which the clock tests
    /// run the agent under, shifts clock readings but not the kernel's absolute timers,
    /// and a relative timer on the boot clock keeps counting through suspend all the same.
    pub fn set_in(&self, us: u64) -> io::Result<()> {
        let us = us.max(1);
        let value = libc::timespec { tv_sec: (us / 1_000_000) as libc::time_t, tv_nsec: ((us % 1_000_000) * 1000) as libc::c_long };
        let zero = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        let spec = libc::itimerspec { it_interval: zero, it_value: value };
        // SAFETY: `spec` is a valid itimerspec; the old value is not asked for.
        if unsafe { libc::timerfd_settime(self.fd.get_ref().as_raw_fd(), 0, &spec, std::ptr::null_mut()) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Waits until the timer expires, with one wake-up and one 8-byte read: `Some(Ok)`
    /// when it rang, `Some(Err)` when reading it failed, `None` when the reactor is gone
    /// (the runtime is shutting down). Cancel-safe: an expiry while the future is dropped
    /// is seen by the next call.
    pub async fn expired(&self) -> Option<io::Result<()>> {
        loop {
            let mut ready = self.fd.readable().await.ok()?;
            match ready.try_io(|inner| read_expirations(inner.get_ref())) {
                Ok(r) => {
                    // The read drained the timer: no need for the next call to read
                    // once more just to learn that (one syscall a wake-up saved).
                    ready.clear_ready();
                    return Some(r.map(drop));
                }
                // Spurious readiness: wait again.
                Err(_would_block) => continue,
            }
        }
    }
}

/// How many expirations happened since the last read; `WouldBlock` if none.
fn read_expirations(fd: &OwnedFd) -> io::Result<u64> {
    let mut buf = [0u8; 8];
    // SAFETY: reads at most 8 bytes into our 8-byte buffer.
    let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
    match n {
        8 => Ok(u64::from_ne_bytes(buf)),
        n if n < 0 => Err(io::Error::last_os_error()),
        _ => Err(io::Error::new(io::ErrorKind::UnexpectedEof, "a short read from a timerfd")),
    }
}
