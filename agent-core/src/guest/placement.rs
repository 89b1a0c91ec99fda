//! Keeping guests off the CPUs the owner is using: the pure decision.
//!
//! SCHED_IDLE and an idle-weight cgroup are not a strict priority. A guest thread that
//! shares a CPU with a busy owner thread still gets its weight's share of that CPU
//! (3 / 1027 ≈ 0.3 %) plus the context switches and cache refills that come with it,
//! which is most of what a lingering guest costs a CPU-bound owner (measured by
//! `lull bench slowdown`). So while guests run, the runtime re-reads the per-CPU times
//! every [`INTERVAL`] and pins the guests' threads to the CPUs the owner is not
//! using; owner threads can still run anywhere, and a CPU the owner leaves is given back
//! at the next reading.
//!
//! Owner time on a CPU is its user + system + irq + softirq time from `/proc/stat`.
//! Guests run at nice 19, so their user time is counted in the *nice* column and does
//! not make a CPU look owner-busy (their small system time does; owner processes the
//! owner runs at a positive nice count as background, like the guests). Everything here
//! takes text and numbers and returns a decision; the runtime does the reading and the
//! `sched_setaffinity`.

use std::time::Duration;

/// How often the runtime re-reads the CPU times while guests run.
pub const INTERVAL: Duration = Duration::from_millis(100);
/// A CPU whose owner time over the last interval reaches this fraction is the owner's.
pub const OWNER_BUSY: f64 = 0.5;

/// One CPU's cumulative times from `/proc/stat`, in clock ticks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuTimes {
    /// The CPU's number (`cpuN`).
    pub cpu: usize,
    /// user + system + irq + softirq: what owner (nice ≤ 0) work and the kernel used.
    pub owner: u64,
    /// Every column but guest/guest_nice (which user already includes).
    pub total: u64,
}

/// Parses the per-CPU lines of `/proc/stat` (the aggregate `cpu` line is skipped).
pub fn parse_proc_stat(text: &str) -> Vec<CpuTimes> {
    text.lines()
        .filter_map(|line| {
            let rest = line.strip_prefix("cpu")?;
            let (num, fields) = rest.split_once(' ')?;
            let cpu = num.parse().ok()?;
            let f: Vec<u64> = fields.split_whitespace().filter_map(|v| v.parse().ok()).collect();
            // user nice system idle iowait irq softirq steal [guest guest_nice]
            let col = |i: usize| f.get(i).copied().unwrap_or(0);
            Some(CpuTimes { cpu, owner: col(0) + col(2) + col(5) + col(6), total: (0..8).map(col).sum() })
        })
        .collect()
}

/// The owner's busy fraction of each CPU between two readings. A CPU missing from
/// either reading (hot-unplugged) is left out; a CPU with no elapsed ticks reads 0.
pub fn owner_busy(before: &[CpuTimes], after: &[CpuTimes]) -> Vec<(usize, f64)> {
    after
        .iter()
        .filter_map(|a| {
            let b = before.iter().find(|b| b.cpu == a.cpu)?;
            let total = a.total.saturating_sub(b.total);
            let owner = a.owner.saturating_sub(b.owner);
            Some((a.cpu, if total == 0 { 0.0 } else { (owner as f64 / total as f64).min(1.0) }))
        })
        .collect()
}

/// The CPUs guests may use: those the owner is not busy on. When the owner is busy on
/// every CPU, the least busy one (an empty set cannot be applied, and whether guests
/// run at all then is the policy's call, not placement's). Sorted; empty only when
/// `busy` is.
pub fn guest_cpus(busy: &[(usize, f64)], owner_busy_min: f64) -> Vec<usize> {
    let mut free: Vec<usize> = busy.iter().filter(|(_, b)| *b < owner_busy_min).map(|(c, _)| *c).collect();
    if free.is_empty() {
        free.extend(busy.iter().min_by(|a, b| a.1.total_cmp(&b.1)).map(|(c, _)| *c));
    }
    free.sort_unstable();
    free
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAT: &str = "cpu  300 500 40 1000 5 1 2 0 0 0
cpu0 250 10 30 100 1 1 2 0 0 0
cpu1 50 490 10 900 4 0 0 0 0 0
intr 12345
ctxt 999
";

    #[test]
    fn parses_per_cpu_lines_only() {
        let t = parse_proc_stat(STAT);
        assert_eq!(t, vec![CpuTimes { cpu: 0, owner: 250 + 30 + 1 + 2, total: 394 }, CpuTimes { cpu: 1, owner: 60, total: 1454 }]);
    }

    #[test]
    fn nice_time_does_not_make_a_cpu_the_owners() {
        let before = [CpuTimes { cpu: 0, owner: 0, total: 0 }, CpuTimes { cpu: 1, owner: 0, total: 0 }];
        // CPU 0: the owner's task all interval; CPU 1: guests (nice) all interval.
        let after = [CpuTimes { cpu: 0, owner: 10, total: 10 }, CpuTimes { cpu: 1, owner: 0, total: 10 }];
        let busy = owner_busy(&before, &after);
        assert_eq!(busy, vec![(0, 1.0), (1, 0.0)]);
        assert_eq!(guest_cpus(&busy, OWNER_BUSY), vec![1]);
    }

    #[test]
    fn an_idle_owner_gives_guests_every_cpu() {
        let busy = [(0, 0.1), (1, 0.0), (2, 0.49)];
        assert_eq!(guest_cpus(&busy, OWNER_BUSY), vec![0, 1, 2]);
    }

    #[test]
    fn an_owner_busy_everywhere_leaves_the_least_busy_cpu() {
        let busy = [(0, 0.9), (1, 0.6), (2, 1.0)];
        assert_eq!(guest_cpus(&busy, OWNER_BUSY), vec![1]);
        assert!(guest_cpus(&[], OWNER_BUSY).is_empty());
    }

    #[test]
    fn counters_that_go_backwards_or_vanish_are_safe() {
        let before = [CpuTimes { cpu: 0, owner: 50, total: 100 }, CpuTimes { cpu: 3, owner: 0, total: 0 }];
        let after = [CpuTimes { cpu: 0, owner: 40, total: 100 }, CpuTimes { cpu: 1, owner: 5, total: 10 }];
        assert_eq!(owner_busy(&before, &after), vec![(0, 0.0)]);
    }
}
