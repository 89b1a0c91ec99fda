//! The pool that runs an experiment's independent simulation runs on several threads.
//!
//! An experiment is many `driver::run`s (or model runs) over independent configurations;
//! [`map_runs`] hands them to `threads` workers that take the next item from an atomic
//! index, and puts each result back at its item's position. Each run is deterministic on
//! its own (its randomness comes from its seed, never from a shared generator), so the
//! results — and the report built from them in input order — are the same, byte for byte,
//! on 1 or N threads. One run still uses one core: the pool speeds up an experiment, not a
//! run.

use crate::error::{Result, SimError};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;

/// The default number of workers: the cores this process may use (1 if unknown).
pub fn default_threads() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
}

/// Runs `run` on every item with up to `threads` workers (0 counts as 1) and returns the
/// results in `items`' order. `progress(done, total)` is called on the calling thread as
/// each run finishes. On failure, no new item is started and the error of the earliest
/// failing item is returned: every item before it was started (the index only grows), so
/// that is the error a sequential loop would have returned.
pub fn map_runs<T, R, F>(threads: usize, items: &[T], progress: &mut dyn FnMut(u64, u64), run: F) -> Result<Vec<R>>
where
    T: Sync,
    R: Send,
    F: Fn(&T) -> Result<R> + Sync,
{
    let total = items.len() as u64;
    let threads = threads.clamp(1, items.len().max(1));
    if threads == 1 {
        let mut out = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            out.push(run(item)?);
            progress(i as u64 + 1, total);
        }
        return Ok(out);
    }
    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let mut slots: Vec<Option<R>> = items.iter().map(|_| None).collect();
    let mut first_error: Option<(usize, SimError)> = None;
    std::thread::scope(|scope| {
        let (tx, rx) = mpsc::channel::<(usize, Result<R>)>();
        for _ in 0..threads {
            let (tx, next, failed, run) = (tx.clone(), &next, &failed, &run);
            scope.spawn(move || {
                while !failed.load(Ordering::Relaxed) {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(item) = items.get(i) else { break };
                    let result = run(item);
                    if result.is_err() {
                        failed.store(true, Ordering::Relaxed);
                    }
                    if tx.send((i, result)).is_err() {
                        break;
                    }
                }
            });
        }
        drop(tx);
        let mut done = 0u64;
        for (i, result) in rx {
            match result {
                Ok(r) => {
                    slots[i] = Some(r);
                    done += 1;
                    progress(done, total);
                }
                Err(e) => {
                    if first_error.as_ref().is_none_or(|(j, _)| i < *j) {
                        first_error = Some((i, e));
                    }
                }
            }
        }
    });
    if let Some((_, e)) = first_error {
        return Err(e);
    }
    // Invariant: with no error every item was taken (the index passed the end) and its
    // result sent before its worker exited, so every slot is filled.
    Ok(slots.into_iter().map(|r| r.expect("every item ran")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_come_back_in_input_order_with_progress_to_the_total() {
        let items: Vec<u64> = (0..50).collect();
        for threads in [0, 1, 2, 7, 100] {
            let mut seen = Vec::new();
            let out = map_runs(threads, &items, &mut |d, t| seen.push((d, t)), |&x| {
                // Uneven work so workers finish out of order.
                std::thread::sleep(std::time::Duration::from_micros((50 - x) * 20));
                Ok(x * x)
            })
            .unwrap();
            assert_eq!(out, items.iter().map(|x| x * x).collect::<Vec<_>>(), "threads {threads}");
            assert_eq!(seen, (1..=50).map(|d| (d, 50)).collect::<Vec<_>>(), "threads {threads}");
        }
    }

    #[test]
    fn the_earliest_failing_item_wins_as_in_a_sequential_loop() {
        let items: Vec<u64> = (0..40).collect();
        for threads in [1, 2, 4] {
            let err = map_runs(threads, &items, &mut |_, _| {}, |&x| {
                if x == 30 {
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
                if x == 30 || x == 31 || x == 39 {
                    Err(SimError::Invalid(format!("item {x}")))
                } else {
                    Ok(x)
                }
            })
            .unwrap_err();
            assert_eq!(err.to_string(), "invalid parameter: item 30", "threads {threads}");
        }
    }

    #[test]
    fn no_items_gives_no_results() {
        let out: Vec<u8> = map_runs(4, &[] as &[u8], &mut |_, _| panic!("no progress"), |_| Ok(0)).unwrap();
        assert!(out.is_empty());
    }
}
