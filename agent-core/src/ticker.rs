//! The agent loop's sampling tick: a periodic kernel timer (Linux `timerfd`, on
//! `CLOCK_MONOTONIC`) watched by the tokio reactor, so each period costs the idle agent
//! one wake-up and one 8-byte read.
//!
//! Why not `tokio::time::interval`: tokio's hierarchical timer wheel reaches a deadline
//! one second away in steps (a wake-up at the coarse slot's start to cascade the entry
//! down, then the real one, plus a self-wake), three to four wake-ups per tick where one
//! is enough. In an agent that does nothing else while the machine is idle, those
//! wake-ups are most of its CPU cost (measured in `docs/BENCHMARKS.md`). Elsewhere, and
//! if the timer cannot be created, the tick falls back to tokio's interval.
//!
//! Periods missed while the process was stopped or the machine suspended are coalesced
//! into one tick (the policy reads the clock itself; it needs no catch-up ticks).

use std::time::Duration;

/// A periodic tick whose first tick completes at once.
pub struct Ticker {
    inner: Inner,
}

enum Inner {
    #[cfg(target_os = "linux")]
    TimerFd(tokio::io::unix::AsyncFd<std::os::fd::OwnedFd>),
    Interval(tokio::time::Interval),
}

impl Ticker {
    /// A tick every `period`, the first at once. Must be called inside a tokio runtime
    /// with IO and time enabled.
    pub fn new(period: Duration) -> Self {
        #[cfg(target_os = "linux")]
        match timerfd::periodic(period) {
            Ok(fd) => {
                // SAFETY: the AsyncFd owns the OwnedFd, which keeps the descriptor open
                // and unchanged until both are dropped together.
                match unsafe { tokio::io::unix::AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE) } {
                    Ok(fd) => return Self { inner: Inner::TimerFd(fd) },
                    Err(e) => tracing::warn!("cannot watch the sampling timer ({e}); using tokio's timer"),
                }
            }
            Err(e) => tracing::warn!("no kernel timer for the sampling tick ({e}); using tokio's timer"),
        }
        Self::with_tokio_timer(period)
    }

    /// A tick on tokio's own timer (the fallback; also for comparisons).
    pub fn with_tokio_timer(period: Duration) -> Self {
        let mut interval = tokio::time::interval(period);
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        Self { inner: Inner::Interval(interval) }
    }

    /// Which timer drives the tick, for logs: `"timerfd"` or `"tokio"`.
    pub fn kind(&self) -> &'static str {
        match self.inner {
            #[cfg(target_os = "linux")]
            Inner::TimerFd(_) => "timerfd",
            Inner::Interval(_) => "tokio",
        }
    }

    /// Waits for the next tick. Cancel-safe: a tick that fires while the future is
    /// dropped is delivered to the next call.
    pub async fn tick(&mut self) {
        match &mut self.inner {
            #[cfg(target_os = "linux")]
            Inner::TimerFd(fd) => loop {
                let Ok(mut ready) = fd.readable().await else {
                    // The reactor is gone (runtime shutting down): never tick again.
                    return std::future::pending().await;
                };
                match ready.try_io(|inner| timerfd::read_expirations(inner.get_ref())) {
                    Ok(Ok(_expirations)) => {
                        // The read drained the timer: no need for the next call to
                        // read once more just to learn that (one syscall a tick saved).
                        ready.clear_ready();
                        return;
                    }
                    Ok(Err(e)) => {
                        tracing::warn!("reading the sampling timer failed: {e}");
                        return;
                    }
                    // Spurious readiness: wait again.
                    Err(_would_block) => continue,
                }
            },
            Inner::Interval(i) => {
                i.tick().await;
            }
        }
    }
}

#[cfg(target_os = "linux")]
mod timerfd {
    //! The few `timerfd` calls the ticker needs.

    use std::io;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::time::Duration;

    fn timespec(d: Duration) -> libc::timespec {
        libc::timespec { tv_sec: d.as_secs() as libc::time_t, tv_nsec: d.subsec_nanos() as libc::c_long }
    }

    /// A non-blocking timer that expires at once and then every `period`.
    pub fn periodic(period: Duration) -> io::Result<OwnedFd> {
        if period.is_zero() {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "a zero period"));
        }
        // SAFETY: timerfd_create takes no pointers; the result is checked before use.
        let raw = unsafe { libc::timerfd_create(libc::CLOCK_MONOTONIC, libc::TFD_NONBLOCK | libc::TFD_CLOEXEC) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a fresh descriptor owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // it_value must be non-zero to arm the timer: 1 ns is "at once".
        let spec = libc::itimerspec { it_interval: timespec(period), it_value: timespec(Duration::from_nanos(1)) };
        // SAFETY: `spec` is a valid itimerspec; the old value is not asked for.
        if unsafe { libc::timerfd_settime(fd.as_raw_fd(), 0, &spec, std::ptr::null_mut()) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(fd)
    }

    /// Reads how many periods elapsed since the last read; `WouldBlock` if none.
    pub fn read_expirations(fd: &OwnedFd) -> io::Result<u64> {
        let mut buf = [0u8; 8];
        // SAFETY: reads at most 8 bytes into our 8-byte buffer.
        let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        match n {
            8 => Ok(u64::from_ne_bytes(buf)),
            n if n < 0 => Err(io::Error::last_os_error()),
            _ => Err(io::Error::new(io::ErrorKind::UnexpectedEof, "a short read from a timerfd")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    /// When each of `n` ticks of `make()` completed, from its creation.
    fn ticks_of(make: impl FnOnce() -> Ticker, n: u32) -> (&'static str, Vec<Duration>) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        rt.block_on(async {
            let mut t = make();
            let start = Instant::now();
            let mut at = Vec::new();
            for _ in 0..n {
                t.tick().await;
                at.push(start.elapsed());
            }
            (t.kind(), at)
        })
    }

    fn assert_periodic(at: &[Duration]) {
        assert!(at[0] < Duration::from_millis(40), "first tick at once: {at:?}");
        // The schedule is absolute (missed periods coalesce): tick k is never before
        // k periods, though a late tick may be followed by a shorter gap (a loaded
        // machine: 56.7 ms then 100.1 ms).
        for (k, t) in at.iter().enumerate() {
            assert!(*t >= Duration::from_millis(50 * k as u64).saturating_sub(Duration::from_millis(5)), "tick {k} early: {at:?}");
        }
        for w in at.windows(2) {
            let gap = w[1] - w[0];
            assert!(gap >= Duration::from_millis(5) && gap < Duration::from_millis(500), "period ~50 ms: {at:?}");
        }
        assert!(at[4] >= Duration::from_millis(195) && at[4] < Duration::from_millis(900), "{at:?}");
    }

    #[test]
    fn the_kernel_timer_ticks_at_once_then_every_period() {
        let (kind, at) = ticks_of(|| Ticker::new(Duration::from_millis(50)), 5);
        #[cfg(target_os = "linux")]
        assert_eq!(kind, "timerfd");
        let _ = kind;
        assert_periodic(&at);
    }

    #[test]
    fn the_fallback_ticks_the_same_way() {
        let (kind, at) = ticks_of(|| Ticker::with_tokio_timer(Duration::from_millis(50)), 5);
        assert_eq!(kind, "tokio");
        assert_periodic(&at);
    }

    #[test]
    fn missed_periods_coalesce_into_one_tick() {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        rt.block_on(async {
            let mut t = Ticker::new(Duration::from_millis(10));
            t.tick().await;
            // Miss about ten periods, then tick twice: the first returns at once, the
            // second waits for a fresh period.
            std::thread::sleep(Duration::from_millis(105));
            let start = Instant::now();
            t.tick().await;
            let first = start.elapsed();
            t.tick().await;
            let second = start.elapsed();
            assert!(first < Duration::from_millis(5), "{first:?}");
            assert!(second >= Duration::from_millis(1), "{second:?}");
        });
    }

    #[test]
    fn a_zero_period_is_refused_by_the_kernel_timer() {
        #[cfg(target_os = "linux")]
        assert!(timerfd::periodic(Duration::ZERO).is_err());
    }
}
