//! The agent loop's alarm: one kernel timer (Linux `timerfd` on `CLOCK_BOOTTIME`, the
//! clock of the policy's [`MonoMs`]) set for an absolute moment and watched by the tokio
//! reactor. The loop sets it for the earliest of the policy's
//! [`next_deadline`](lull_core::policy::Policy::next_deadline) and its next reading, so
//! an idle agent wakes only when something can change, each time with one wake-up and
//! one 8-byte read.
//!
//! Why not tokio's timer: its hierarchical wheel reaches a deadline seconds away in
//! steps (a wake-up at each coarser slot's start to cascade the entry down, then the
//! real one, plus a self-wake), three to four wake-ups where one is enough; in an agent
//! that does nothing else while the machine is idle those wake-ups are most of its CPU
//! (measured in `docs/BENCHMARKS.md`). Elsewhere, or if the timer cannot be created, the
//! alarm falls back to a tokio `Sleep` (also for comparisons, `LULL_TOKIO_TICK=1`).
//!
//! The timer runs on the boot clock: time spent suspended counts, as it does for the
//! policy, and an alarm set for a moment already past rings at once.

use crate::clock::{mono_now, mono_now_us, MonoMs};
use crate::sys::timer::BootTimer;
use std::pin::Pin;
use std::time::Duration;

/// A one-shot alarm, re-set by its owner before each wait.
pub struct Alarm {
    inner: Inner,
    /// The moment the alarm is set for, until it rings.
    set_for: Option<MonoMs>,
}

enum Inner {
    Kernel(BootTimer),
    Tokio(Pin<Box<tokio::time::Sleep>>),
}

impl Alarm {
    /// An alarm on the kernel timer where there is one. Must be called inside a tokio
    /// runtime with IO and time enabled. Not set until [`Self::set`].
    pub fn new() -> Self {
        match BootTimer::new() {
            Ok(timer) => return Self { inner: Inner::Kernel(timer), set_for: None },
            // Elsewhere than Linux this is the rule, not news.
            Err(e) if e.kind() == std::io::ErrorKind::Unsupported => {}
            Err(e) => tracing::warn!("no kernel timer for the agent's alarm ({e}); using tokio's timer"),
        }
        Self::with_tokio_timer()
    }

    /// An alarm on tokio's own timer (the fallback; also for comparisons).
    pub fn with_tokio_timer() -> Self {
        // Far in the future until set.
        let sleep = tokio::time::sleep(Duration::from_secs(86_400 * 365));
        Self { inner: Inner::Tokio(Box::pin(sleep)), set_for: None }
    }

    /// Which timer drives the alarm, for logs: `"timerfd"` or `"tokio"`.
    pub fn kind(&self) -> &'static str {
        match self.inner {
            Inner::Kernel(_) => "timerfd",
            Inner::Tokio(_) => "tokio",
        }
    }

    /// Sets the alarm for `at` on the boot clock (a moment past rings at once). Setting
    /// it again for the moment it is already set for costs nothing.
    pub fn set(&mut self, at: MonoMs) {
        if self.set_for == Some(at) {
            return;
        }
        match &mut self.inner {
            Inner::Kernel(timer) => {
                if let Err(e) = timer.set_in((at.0 * 1000).saturating_sub(mono_now_us())) {
                    tracing::warn!("setting the agent's timer failed: {e}");
                }
            }
            Inner::Tokio(sleep) => {
                let left = at.0.saturating_sub(mono_now().0);
                sleep.as_mut().reset(tokio::time::Instant::now() + Duration::from_millis(left));
            }
        }
        self.set_for = Some(at);
    }

    /// Waits until the alarm rings; pending forever while it is not set. Cancel-safe: a
    /// ring that comes while the future is dropped is delivered to the next call.
    pub async fn wait(&mut self) {
        if self.set_for.is_none() {
            return std::future::pending().await;
        }
        match &mut self.inner {
            Inner::Kernel(timer) => match timer.expired().await {
                Some(Ok(())) => {}
                Some(Err(e)) => tracing::warn!("reading the agent's timer failed: {e}"),
                // The reactor is gone (runtime shutting down): never ring again.
                None => return std::future::pending().await,
            },
            Inner::Tokio(sleep) => sleep.as_mut().await,
        }
        self.set_for = None;
    }
}

impl Default for Alarm {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime")
    }

    /// Sets `alarm` for `ms` from now and returns how long the wait took.
    async fn ring_in(alarm: &mut Alarm, ms: u64) -> Duration {
        let start = Instant::now();
        alarm.set(MonoMs(mono_now().0 + ms));
        alarm.wait().await;
        start.elapsed()
    }

    fn rings_on_time(make: fn() -> Alarm, kind: &str) {
        rt().block_on(async {
            let mut a = make();
            if crate::sys::LINUX {
                assert_eq!(a.kind(), kind);
            }
            for ms in [30u64, 80, 5] {
                let took = ring_in(&mut a, ms).await;
                // Never early (the clock reads whole ms: allow that much), not very late.
                assert!(took + Duration::from_millis(1) >= Duration::from_millis(ms), "{ms} ms alarm rang after {took:?}");
                assert!(took < Duration::from_millis(ms + 400), "{ms} ms alarm rang after {took:?}");
            }
            // A moment already past rings at once.
            let start = Instant::now();
            a.set(MonoMs(mono_now().0.saturating_sub(50)));
            a.wait().await;
            assert!(start.elapsed() < Duration::from_millis(50), "{:?}", start.elapsed());
        });
    }

    #[test]
    fn the_kernel_alarm_rings_at_the_moment_set() {
        rings_on_time(Alarm::new, "timerfd");
    }

    #[test]
    fn the_fallback_rings_the_same_way() {
        rings_on_time(Alarm::with_tokio_timer, "tokio");
    }

    #[test]
    fn set_later_or_earlier_before_it_rings_the_last_setting_wins() {
        rt().block_on(async {
            let mut a = Alarm::new();
            a.set(MonoMs(mono_now().0 + 10_000));
            let start = Instant::now();
            a.set(MonoMs(mono_now().0 + 20));
            a.wait().await;
            let took = start.elapsed();
            assert!(took >= Duration::from_millis(19) && took < Duration::from_millis(500), "{took:?}");
            // Not set again: waiting does not return.
            let waited = tokio::time::timeout(Duration::from_millis(100), a.wait()).await;
            assert!(waited.is_err(), "an alarm that rang and was not set again rang twice");
        });
    }
}
