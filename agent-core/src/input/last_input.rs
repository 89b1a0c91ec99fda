//! The arithmetic of a "tick of the last input" counter, apart from the call that reads
//! it (Windows' `GetLastInputInfo`, in `input/windows.rs`) so it is tested on every
//! platform: the tick and the clock it is read against are 32-bit milliseconds since
//! boot (`GetTickCount`), wrapping every 49.7 days. A change of the last-input tick
//! between two polls means input happened; when it happened is `now − (tick now − tick
//! of the input)` on the agent's own clock. Only that time is kept.

// Used by the Windows backend and the tests; elsewhere nothing reads a tick counter.
#![cfg_attr(not(windows), allow(dead_code))]

use crate::clock::MonoMs;

/// Follows the last-input tick from one poll to the next.
#[derive(Debug, Default)]
pub struct LastInputTicks {
    seen: Option<u32>,
}

impl LastInputTicks {
    /// One poll: `last_input` and `now` are ticks of the same wrapping millisecond
    /// counter, `now_mono` the agent's clock at the poll. Returns when input happened if
    /// it happened since the previous poll: the last-input tick changed, or (at the first
    /// poll, with nothing to compare) it is less than `fresh_ms` old.
    pub fn observe(&mut self, last_input: u32, now: u32, now_mono: MonoMs, fresh_ms: u64) -> Option<MonoMs> {
        // Wrapping: input at tick 4294967290 seen at tick 10 is 16 ms old.
        let idle_ms = now.wrapping_sub(last_input);
        let new = match self.seen {
            None => u64::from(idle_ms) < fresh_ms,
            Some(before) => before != last_input,
        };
        self.seen = Some(last_input);
        if !new {
            return None;
        }
        // A last-input tick "ahead" of now (more than half the counter's span old) is
        // input that landed between the two reads: it happened now.
        let idle_ms = if idle_ms > u32::MAX / 2 { 0 } else { u64::from(idle_ms) };
        Some(MonoMs(now_mono.0.saturating_sub(idle_ms)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FRESH: u64 = 1000;

    #[test]
    fn a_change_of_the_tick_is_input_at_its_time() {
        let mut t = LastInputTicks::default();
        // The first poll: input 5 s ago is old news; no input ever (Wine: tick 0) too.
        assert_eq!(t.observe(10_000, 15_000, MonoMs(50_000), FRESH), None);
        assert_eq!(LastInputTicks::default().observe(0, 40_227_029, MonoMs(50_000), FRESH), None);
        // The same tick again: nothing happened.
        assert_eq!(t.observe(10_000, 16_000, MonoMs(51_000), FRESH), None);
        // It moved: input 300 ms before this poll.
        assert_eq!(t.observe(16_700, 17_000, MonoMs(52_000), FRESH), Some(MonoMs(51_700)));
        assert_eq!(t.observe(16_700, 18_000, MonoMs(53_000), FRESH), None);
        // Input older than the poll interval still counts once the tick moved (a stalled poll).
        assert_eq!(t.observe(17_500, 21_000, MonoMs(56_000), FRESH), Some(MonoMs(52_500)));
    }

    #[test]
    fn the_first_poll_counts_input_within_the_fresh_window() {
        let mut t = LastInputTicks::default();
        assert_eq!(t.observe(9_800, 10_000, MonoMs(3_000), FRESH), Some(MonoMs(2_800)));
        assert_eq!(t.observe(9_800, 11_000, MonoMs(4_000), FRESH), None);
    }

    #[test]
    fn the_tick_wraps_every_49_7_days() {
        let mut t = LastInputTicks::default();
        // Before the wrap.
        assert_eq!(t.observe(u32::MAX - 2_000, u32::MAX - 100, MonoMs(4_300_000_000), FRESH), None);
        // Input just before the wrap, seen just after it: 120 ms old, not 49.7 days.
        assert_eq!(t.observe(u32::MAX - 19, 100, MonoMs(4_300_001_000), FRESH), Some(MonoMs(4_300_000_880)));
        // Input just after it.
        assert_eq!(t.observe(50, 900, MonoMs(4_300_002_000), FRESH), Some(MonoMs(4_300_001_150)));
        assert_eq!(t.observe(50, 1_900, MonoMs(4_300_003_000), FRESH), None);
        // At the first poll too: 16 ms across the wrap is fresh.
        assert_eq!(LastInputTicks::default().observe(u32::MAX - 5, 10, MonoMs(7_000), FRESH), Some(MonoMs(6_984)));
    }

    #[test]
    fn input_between_the_two_reads_is_now() {
        let mut t = LastInputTicks::default();
        assert_eq!(t.observe(1_000, 5_000, MonoMs(9_000), FRESH), None);
        // The last-input tick read after the clock's: 3 ms "in the future".
        assert_eq!(t.observe(6_003, 6_000, MonoMs(10_000), FRESH), Some(MonoMs(10_000)));
        // An agent clock younger than the idle time saturates at 0.
        assert_eq!(LastInputTicks::default().observe(0, 500, MonoMs(100), FRESH), Some(MonoMs(0)));
    }
}
