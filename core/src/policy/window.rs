//! Sliding windows over samples: owner memory growth (the "memory steady" test of the
//! availability definition) and the mean owner utilisation h used by Linger-Longer.

use crate::clock::MonoMs;
use std::collections::VecDeque;
use std::time::Duration;

/// A time-bounded window of readings.
#[derive(Clone, Debug, Default)]
pub struct Window<T> {
    span: Duration,
    points: VecDeque<(MonoMs, T)>,
}

impl<T: Copy> Window<T> {
    /// A window covering the last `span`.
    pub fn new(span: Duration) -> Self {
        Self { span, points: VecDeque::new() }
    }

    /// Adds a reading and drops those older than the span.
    pub fn push(&mut self, at: MonoMs, v: T) {
        // A reading from before the newest one (clock confusion in a driver) replaces
        // nothing and is ignored, so the window stays ordered.
        if self.points.back().is_some_and(|(t, _)| *t > at) {
            return;
        }
        self.points.push_back((at, v));
        while let Some((t, _)) = self.points.front() {
            if at.since(*t) > self.span {
                self.points.pop_front();
            } else {
                break;
            }
        }
    }

    /// The readings in the window, oldest first.
    pub fn values(&self) -> impl Iterator<Item = T> + '_ {
        self.points.iter().map(|(_, v)| *v)
    }

    /// Number of readings held.
    pub fn len(&self) -> usize {
        self.points.len()
    }

    /// True when no reading is held.
    pub fn is_empty(&self) -> bool {
        self.points.is_empty()
    }
}

impl Window<f32> {
    /// Mean of the readings, 0 when empty.
    pub fn mean(&self) -> f32 {
        if self.points.is_empty() {
            return 0.0;
        }
        self.values().sum::<f32>() / self.points.len() as f32
    }
}

impl Window<u64> {
    /// How far the newest reading is above the smallest one in the window.
    pub fn growth(&self) -> u64 {
        match (self.values().min(), self.points.back()) {
            (Some(min), Some((_, last))) => last.saturating_sub(min),
            _ => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn old_points_fall_out() {
        let mut w = Window::new(Duration::from_secs(10));
        w.push(MonoMs(0), 1.0f32);
        w.push(MonoMs(5_000), 3.0);
        assert_eq!(w.mean(), 2.0);
        w.push(MonoMs(12_000), 5.0);
        assert_eq!(w.len(), 2);
        assert_eq!(w.mean(), 4.0);
    }

    #[test]
    fn growth_is_rise_above_window_minimum() {
        let mut w = Window::new(Duration::from_secs(60));
        for (t, v) in [(0, 100u64), (10, 80), (20, 150)] {
            w.push(MonoMs(t * 1000), v);
        }
        assert_eq!(w.growth(), 70);
    }
}
