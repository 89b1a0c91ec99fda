//! The one percentile convention of Lull's benchmarks and tests: the **rounded rank**.
//! The q-quantile (q in 0..=1) of n sorted values is the value at index
//! `round(q · (n − 1))` (halves away from zero), i.e. one of the measured values, the
//! one nearest to the linear-interpolation position; q = 0 is the minimum, q = 1 the
//! maximum, q = 0.5 of an even count the upper middle value. Every figure in
//! docs/BENCHMARKS.md was taken with this convention, so they reproduce.

/// The q-quantile of `sorted` (ascending), by the rounded rank; `None` when empty.
pub fn of_sorted<T: Copy>(sorted: &[T], q: f64) -> Option<T> {
    let last = sorted.len().checked_sub(1)?;
    let i = (q.clamp(0.0, 1.0) * last as f64).round() as usize;
    Some(sorted[i.min(last)])
}

/// The q-quantile of `values` (sorted in place first), by the rounded rank; 0 when empty.
pub fn of(values: &mut [f64], q: f64) -> f64 {
    values.sort_by(f64::total_cmp);
    of_sorted(values, q).unwrap_or(0.0)
}

/// The median, 99th percentile and maximum of `values` (sorted in place first), by the
/// rounded rank; zeros when empty.
pub fn p50_p99_max(values: &mut [f64]) -> (f64, f64, f64) {
    (of(values, 0.5), of(values, 0.99), of(values, 1.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rounded_rank_picks_a_measured_value() {
        let v: Vec<u32> = (1..=100).collect();
        // index round(0.99 · 99) = 98 → 99; round(0.5 · 99) = round(49.5) = 50 → 51.
        assert_eq!(of_sorted(&v, 0.99), Some(99));
        assert_eq!(of_sorted(&v, 0.5), Some(51));
        assert_eq!(of_sorted(&v, 0.0), Some(1));
        assert_eq!(of_sorted(&v, 1.0), Some(100));
        assert_eq!(of_sorted::<u32>(&[], 0.5), None);
        assert_eq!(of_sorted(&[7u64], 0.99), Some(7));
    }

    #[test]
    fn unsorted_values_are_sorted_first_and_empty_gives_zero() {
        assert_eq!(of(&mut [3.0, 1.0, 2.0], 0.5), 2.0);
        assert_eq!(of(&mut [3.0, 1.0, 2.0], 1.0), 3.0);
        assert_eq!(of(&mut [], 0.9), 0.0);
    }

    #[test]
    fn p50_p99_max_of_twenty_values() {
        // 1..=20 reversed: p50 at index round(0.5 · 19) = 10 → 11; p99 at round(18.81) = 19 → 20.
        let mut v: Vec<f64> = (1..=20).rev().map(f64::from).collect();
        assert_eq!(p50_p99_max(&mut v), (11.0, 20.0, 20.0));
        assert_eq!(p50_p99_max(&mut []), (0.0, 0.0, 0.0));
    }
}
