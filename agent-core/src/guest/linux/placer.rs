//! The thread that keeps running guests off the owner's CPUs: every
//! [`placement::INTERVAL`](crate::guest::placement::INTERVAL) while guests are thawed it
//! reads `/proc/stat`, asks [`placement`](crate::guest::placement) which CPUs are free of
//! the owner, and sets every guest thread's CPU affinity to them. It sleeps on a condition
//! variable while no guest runs, so an idle agent pays nothing for it.
//!
//! Affinity (not a cpuset cgroup) because it works the same on v2, hybrid and the
//! process-group fallback without another controller. A guest may widen its own affinity
//! again; the next re-application (at least once a second) narrows it back, and all it
//! could win meanwhile is the idle-weight share of the owner's CPU.

use crate::guest::linux::fallback;
use crate::guest::placement;
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use tracing::debug;

/// Where a guest's threads are found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// A unified-hierarchy cgroup directory (its `cgroup.threads`).
    Cgroup(PathBuf),
    /// A process group (the fallback).
    Group(i32),
}

#[derive(Default)]
struct State {
    targets: Vec<Target>,
    running: bool,
    enabled: bool,
    stop: bool,
    /// Bumped whenever the targets change, so the thread re-applies at once.
    generation: u64,
    /// The CPUs last applied (for `lull status` and tests).
    applied: Option<Vec<usize>>,
}

struct Shared {
    state: Mutex<State>,
    wake: Condvar,
}

/// Handle to the placement thread; dropping it stops the thread.
pub struct Placer {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl Placer {
    /// Starts the thread (asleep until guests run). `enabled` false keeps it asleep for
    /// good (A/B measurements: `LULL_PLACEMENT=0`).
    pub fn start(enabled: bool) -> std::io::Result<Self> {
        let shared = Arc::new(Shared { state: Mutex::new(State { enabled, ..State::default() }), wake: Condvar::new() });
        let s = shared.clone();
        let thread = std::thread::Builder::new().name("lull-placement".into()).stack_size(64 * 1024).spawn(move || run(&s))?;
        Ok(Self { shared, thread: Some(thread) })
    }

    /// Tells the thread which guests exist and whether they are thawed.
    pub fn update(&self, targets: Vec<Target>, running: bool) {
        let mut st = lock(&self.shared);
        let wake = running && !targets.is_empty() && !(st.running && !st.targets.is_empty());
        if st.targets != targets {
            st.targets = targets;
            st.generation += 1;
        }
        st.running = running;
        drop(st);
        if wake {
            self.shared.wake.notify_all();
        }
    }

    /// Turns placement on or off; off gives the guests every CPU back at once.
    pub fn set_enabled(&self, enabled: bool) {
        let mut st = lock(&self.shared);
        st.enabled = enabled;
        let targets = st.targets.clone();
        drop(st);
        if !enabled {
            apply(&targets, &all_cpus());
        }
        self.shared.wake.notify_all();
    }

    /// The CPUs guests were last pinned to (None while placement is idle).
    pub fn applied(&self) -> Option<Vec<usize>> {
        lock(&self.shared).applied.clone()
    }
}

impl Drop for Placer {
    fn drop(&mut self) {
        lock(&self.shared).stop = true;
        self.shared.wake.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn lock(s: &Shared) -> std::sync::MutexGuard<'_, State> {
    s.state.lock().unwrap_or_else(|p| p.into_inner())
}

fn read_times() -> Vec<placement::CpuTimes> {
    placement::parse_proc_stat(&std::fs::read_to_string("/proc/stat").unwrap_or_default())
}

fn all_cpus() -> Vec<usize> {
    read_times().iter().map(|t| t.cpu).collect()
}

fn run(shared: &Shared) {
    let mut before: Option<Vec<placement::CpuTimes>> = None;
    let mut last: Option<(Vec<usize>, u64)> = None;
    let mut ticks_since_apply = 0u32;
    let mut st = lock(shared);
    loop {
        while !st.stop && !(st.enabled && st.running && !st.targets.is_empty()) {
            if st.applied.take().is_some() {
                // Leave guests unpinned while idle, so a thaw starts from every CPU.
                let targets = st.targets.clone();
                drop(st);
                apply(&targets, &all_cpus());
                st = lock(shared);
            }
            before = None;
            last = None;
            st = shared.wake.wait(st).unwrap_or_else(|p| p.into_inner());
        }
        if st.stop {
            return;
        }
        let (targets, generation) = (st.targets.clone(), st.generation);
        drop(st);
        let now = read_times();
        if let Some(b) = &before {
            let cpus = placement::guest_cpus(&placement::owner_busy(b, &now), placement::OWNER_BUSY);
            ticks_since_apply += 1;
            let changed = last.as_ref() != Some(&(cpus.clone(), generation));
            // Re-applied on a change and once a second (threads that widened their own
            // affinity; new threads inherit it from their creator).
            if !cpus.is_empty() && (changed || ticks_since_apply >= 10) {
                if changed {
                    debug!(?cpus, "guests placed");
                }
                apply(&targets, &cpus);
                ticks_since_apply = 0;
                last = Some((cpus.clone(), generation));
                lock(shared).applied = Some(cpus);
            }
        }
        before = Some(now);
        st = lock(shared);
        if !st.stop {
            st = shared.wake.wait_timeout(st, placement::INTERVAL).unwrap_or_else(|p| p.into_inner()).0;
        }
    }
}

/// The thread ids of one target.
fn threads(target: &Target) -> Vec<i32> {
    match target {
        Target::Cgroup(dir) => {
            std::fs::read_to_string(dir.join("cgroup.threads")).unwrap_or_default().lines().filter_map(|l| l.trim().parse().ok()).collect()
        }
        Target::Group(pgid) => fallback::members(*pgid)
            .into_iter()
            .flat_map(|pid| {
                std::fs::read_dir(format!("/proc/{pid}/task"))
                    .into_iter()
                    .flatten()
                    .flatten()
                    .filter_map(|e| e.file_name().to_str()?.parse().ok())
                    .collect::<Vec<i32>>()
            })
            .collect(),
    }
}

/// Sets every thread of every target to run on `cpus` only.
fn apply(targets: &[Target], cpus: &[usize]) {
    if cpus.is_empty() {
        return;
    }
    // SAFETY: cpu_set_t is plain data; zeroed is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &c in cpus {
        if c < libc::CPU_SETSIZE as usize {
            // SAFETY: c is below CPU_SETSIZE, the set's capacity.
            unsafe { libc::CPU_SET(c, &mut set) };
        }
    }
    for tid in targets.iter().flat_map(threads) {
        // SAFETY: `set` is a valid cpu_set_t of the size passed; a thread that has
        // exited in the meantime gives ESRCH, which is fine.
        unsafe { libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    }
}
