//! The owner's recent CPU readings, kept for the coordinator's instant recruitment
//! (seed 003: a machine's next seconds are predicted by the windowed mean of its recent
//! load). The driver pushes each reading it takes anyway ([`OwnerLoadLog::push`]), the
//! status carries the log, and the coordinator link sends the readings taken since its
//! previous heartbeat ([`OwnerLoadLog::since`]): no wake-up or sensor read of its own.

use lull_protocol::{LoadReading, OWNER_LOAD_MAX};
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// The last [`OWNER_LOAD_MAX`] readings and the number the next one will get.
/// Readings closer than a second apart are folded into one of at least a second.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct OwnerLoadLog {
    /// The sequence number of the next reading (the first kept is `next_seq - readings.len()`).
    pub next_seq: u64,
    pub readings: VecDeque<LoadReading>,
    /// Sub-second readings not yet a full second: (CPU × ms summed, ms).
    #[serde(skip)]
    partial: (f64, u64),
}

impl OwnerLoadLog {
    /// Records a reading: owner CPU `cpu` (fraction of the machine, guests excluded),
    /// its mean over the last `covers_ms` milliseconds.
    pub fn push(&mut self, cpu: f32, covers_ms: u64) {
        let cpu = if cpu.is_finite() { cpu.clamp(0.0, 1.0) as f64 } else { 1.0 };
        let covers_ms = covers_ms.max(1);
        self.partial.0 += cpu * covers_ms as f64;
        self.partial.1 += covers_ms;
        if self.partial.1 < 1000 {
            return;
        }
        let (sum, ms) = std::mem::take(&mut self.partial);
        let pct = (sum / ms as f64 * 100.0).round() as u8;
        let secs = ((ms as f64 / 1000.0).round() as u64).clamp(1, 600) as u16;
        if self.readings.len() == OWNER_LOAD_MAX {
            self.readings.pop_front();
        }
        self.readings.push_back(LoadReading { cpu_pct: pct, secs });
        self.next_seq += 1;
    }

    /// The readings numbered `from` onwards (those still kept) and the number to ask
    /// from next time.
    pub fn since(&self, from: u64) -> (Vec<LoadReading>, u64) {
        let first = self.next_seq - self.readings.len() as u64;
        let skip = from.saturating_sub(first).min(self.readings.len() as u64) as usize;
        (self.readings.iter().skip(skip).copied().collect(), self.next_seq)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_reading_is_sent_once_and_the_log_keeps_the_latest() {
        let mut log = OwnerLoadLog::default();
        log.push(0.034, 1000);
        log.push(0.5, 10_200);
        let (r, next) = log.since(0);
        assert_eq!(r, vec![LoadReading { cpu_pct: 3, secs: 1 }, LoadReading { cpu_pct: 50, secs: 10 }]);
        assert!(log.since(next).0.is_empty());
        // Sub-second readings are folded into one of a second: (0.2·300 + 1.0·700) / 1000.
        log.push(0.2, 300);
        assert!(log.since(next).0.is_empty());
        log.push(f32::NAN, 700);
        assert_eq!(log.since(next).0, vec![LoadReading { cpu_pct: 76, secs: 1 }]);
        for _ in 0..OWNER_LOAD_MAX + 5 {
            log.push(0.0, 1000);
        }
        assert_eq!(log.readings.len(), OWNER_LOAD_MAX);
        assert_eq!(log.since(next).0.len(), OWNER_LOAD_MAX, "a link far behind gets what is kept");
    }
}
