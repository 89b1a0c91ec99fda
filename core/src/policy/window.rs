//! Sliding windows over samples: owner memory growth (the "memory steady" test of the
//! availability definition, [`GrowthWindow`]) and the mean owner utilisation h used by
//! Linger-Longer ([`Window`]).

use crate::clock::MonoMs;
use std::collections::VecDeque;
use std::time::Duration;

/// A time-bounded window of readings.
#[derive(Clone, Debug, Default)]
pub(crate) struct Window<T> {
    span: Duration,
    points: VecDeque<(MonoMs, T)>,
}

impl<T: Copy> Window<T> {
    /// A window covering the last `span`.
    pub(crate) fn new(span: Duration) -> Self {
        Self { span, points: VecDeque::new() }
    }

    /// Adds a reading and drops those older than the span.
    pub(crate) fn push(&mut self, at: MonoMs, v: T) {
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
    pub(crate) fn values(&self) -> impl Iterator<Item = T> + '_ {
        self.points.iter().map(|(_, v)| *v)
    }

    /// Number of readings held.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.points.len()
    }
}

impl Window<f32> {
    /// Mean of the readings, 0 when empty.
    pub(crate) fn mean(&self) -> f32 {
        if self.points.is_empty() {
            return 0.0;
        }
        self.values().sum::<f32>() / self.points.len() as f32
    }
}

impl Window<u64> {
    /// How far the newest reading is above the smallest one in the window.
    #[cfg(test)]
    pub(crate) fn growth(&self) -> u64 {
        match (self.values().min(), self.points.back()) {
            (Some(min), Some((_, last))) => last.saturating_sub(min),
            _ => 0,
        }
    }
}

/// The same window as [`Window<u64>`] for [`Window::growth`] alone, in O(1) per reading:
/// it keeps only the readings that can still be the window's minimum (each smaller than
/// every later one; the newest always), so the front is the minimum and the back the
/// newest. Readings leave by the same rule as in [`Window::push`], so `growth()` is the
/// same number (the test `growth_window_matches_the_full_window` compares them).
#[derive(Clone, Debug, Default)]
pub(crate) struct GrowthWindow {
    span: Duration,
    candidates: VecDeque<(MonoMs, u64)>,
}

impl GrowthWindow {
    /// A window covering the last `span`.
    pub(crate) fn new(span: Duration) -> Self {
        Self { span, candidates: VecDeque::new() }
    }

    /// Adds a reading and drops those older than the span (a reading from before the
    /// newest one is ignored, as in [`Window::push`]).
    pub(crate) fn push(&mut self, at: MonoMs, v: u64) {
        if self.candidates.back().is_some_and(|(t, _)| *t > at) {
            return;
        }
        // A reading no smaller than this one, pushed earlier, leaves the window earlier:
        // it can never be the minimum again.
        while self.candidates.back().is_some_and(|(_, b)| *b >= v) {
            self.candidates.pop_back();
        }
        self.candidates.push_back((at, v));
        while let Some((t, _)) = self.candidates.front() {
            if at.since(*t) > self.span {
                self.candidates.pop_front();
            } else {
                break;
            }
        }
    }

    /// How far the newest reading is above the smallest one in the window.
    pub(crate) fn growth(&self) -> u64 {
        match (self.candidates.front(), self.candidates.back()) {
            (Some((_, min)), Some((_, last))) => last.saturating_sub(*min),
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

    /// Random readings at random (sometimes repeated, sometimes earlier) times: the
    /// O(1) window gives the full window's growth after every push.
    #[test]
    fn growth_window_matches_the_full_window() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        for span_s in [0, 1, 10, 60] {
            let mut full = Window::new(Duration::from_secs(span_s));
            let mut fast = GrowthWindow::new(Duration::from_secs(span_s));
            let mut t = 0u64;
            for _ in 0..20_000 {
                // Mostly forward, sometimes the same instant, now and then backwards.
                t = match next(20) {
                    0 => t.saturating_sub(next(5_000)),
                    1 => t,
                    _ => t + next(3_000),
                };
                let v = [100, 200, 200, 300, 50, 1 << 40][next(6) as usize] + next(3);
                full.push(MonoMs(t), v);
                fast.push(MonoMs(t), v);
                assert_eq!(full.growth(), fast.growth(), "span {span_s} s at {t} ms");
            }
        }
    }
}
