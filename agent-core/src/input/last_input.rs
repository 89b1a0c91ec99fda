//! The arithmetic of a "tick of the last input" counter, apart from the call that reads
//! it (Windows' `GetLastInputInfo`, in `input/windows.rs`) so it is tested on every
//! platform: the tick and the clock it is read against are 32-bit milliseconds since
//! boot (`GetTickCount`), wrapping every 49.7 days. A change of the last-input tick
//! between two polls means input happened; when it happened is `now − (tick now − tick
//! of the input)` on the agent's own clock. Only that time is kept.
//!
//! macOS gives the same fact as an age instead (`CGEventSourceSecondsSinceLastEventType`,
//! in `input/macos.rs`): [`IdleAges`] turns each poll's "input N ms ago" into a time on
//! the agent's clock and says when it moved forward.

// Used by the Windows and macOS backends and the tests; elsewhere nothing reads them.
#![cfg_attr(not(windows), allow(dead_code))]

use crate::clock::MonoMs;
use crate::input::{InputError, InputSink};
use std::time::Duration;

/// The poll interval of both backends: once a second.
pub const POLL_INTERVAL: Duration = Duration::from_secs(1);

/// Runs a polled last-input backend on its thread until the sink closes: `read` is
/// called every [`POLL_INTERVAL`] and each input it reports (its time) goes to the sink.
pub fn poll_into(sink: &InputSink, mut read: impl FnMut() -> Result<Option<MonoMs>, InputError>) -> Result<(), InputError> {
    while !sink.is_closed() {
        if let Some(at) = read()? {
            if !sink.activity_at(at) {
                break;
            }
        }
        std::thread::sleep(POLL_INTERVAL);
    }
    Ok(())
}

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

/// How far the time of the last input, as `now − age` on the agent's clock, may move
/// between two polls without being new input: the two clocks are read a few microseconds
/// apart, and the age is a rounded float.
pub const AGE_JITTER_MS: u64 = 50;

/// Follows "the last input was N ms ago" from one poll to the next (macOS's idle time).
#[derive(Debug, Default)]
pub struct IdleAges {
    /// When the last input happened on the agent's clock, as last estimated.
    last_input: Option<u64>,
}

impl IdleAges {
    /// One poll: `idle_ms` is how long ago the last input was, `now_mono` the agent's
    /// clock at the poll. Returns when input happened if it happened since the previous
    /// poll: its time moved forward by more than [`AGE_JITTER_MS`], or (at the first
    /// poll) it is less than `fresh_ms` old. Input within [`AGE_JITTER_MS`] after the
    /// input a poll last saw goes unseen until the next.
    pub fn observe(&mut self, idle_ms: u64, now_mono: MonoMs, fresh_ms: u64) -> Option<MonoMs> {
        let at = now_mono.0.saturating_sub(idle_ms);
        let new = match self.last_input {
            None => idle_ms < fresh_ms,
            Some(before) => at > before.saturating_add(AGE_JITTER_MS),
        };
        // The latest estimate, never moved back by jitter (nor by a clock that counted a
        // sleep the other did not).
        self.last_input = Some(self.last_input.map_or(at, |before| before.max(at)));
        new.then_some(MonoMs(at))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_age_that_starts_again_is_input_at_its_time() {
        let mut a = IdleAges::default();
        // The first poll: input 5 s ago is old news; 300 ms ago is fresh.
        assert_eq!(a.observe(5_000, MonoMs(50_000), FRESH), None);
        assert_eq!(IdleAges::default().observe(300, MonoMs(50_000), FRESH), Some(MonoMs(49_700)));
        // The age grows with the clock (give or take the jitter): nothing happened.
        assert_eq!(a.observe(6_000, MonoMs(51_000), FRESH), None);
        assert_eq!(a.observe(6_990, MonoMs(52_030), FRESH), None);
        // It started again: input 250 ms before this poll.
        assert_eq!(a.observe(250, MonoMs(53_000), FRESH), Some(MonoMs(52_750)));
        assert_eq!(a.observe(1_250, MonoMs(54_000), FRESH), None);
        // The age ran ahead of the agent's clock (a sleep one counted): not input, and
        // the next input is still seen.
        assert_eq!(a.observe(60_000, MonoMs(55_000), FRESH), None);
        assert_eq!(a.observe(100, MonoMs(56_000), FRESH), Some(MonoMs(55_900)));
        // A clock younger than the age saturates at 0.
        assert_eq!(IdleAges::default().observe(500, MonoMs(100), FRESH), Some(MonoMs(0)));
    }

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
