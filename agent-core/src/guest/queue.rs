//! What the Windows and macOS guest runtimes keep alike, whatever contains their guests:
//! the queue of guests waiting for admission (the memory rules of
//! [`guest_memory::admit`]), the guests that ended, and the figures of a running one
//! ([`Figures`]). Each runtime adds its container (a Job Object, a process group).

use super::{EndedGuest, GuestDir, GuestError, GuestInfo, GuestPhase, GuestSpec};
use crate::ledger::GuestTotals;
pub use lull_core::guest_memory::MIB;
use lull_core::guest_memory::{self, MemoryReading};
use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::time::Instant;
use tracing::{error, warn};

/// What a runtime knows of one running guest, whatever contains it.
#[derive(Debug)]
pub struct Figures {
    pub id: String,
    pub dir: GuestDir,
    pub pid: u32,
    pub started: Instant,
    pub memory_limit: u64,
    /// CPU time (user, system), µs.
    pub cpu: (u64, u64),
    pub mem: u64,
    pub peak: u64,
    pub evicted: bool,
    pub held: bool,
}

impl Figures {
    /// A guest started now with this pid and memory limit.
    pub fn new(id: &str, dir: GuestDir, pid: u32, memory_limit: u64) -> Self {
        Self {
            id: id.to_owned(),
            dir,
            pid,
            started: Instant::now(),
            memory_limit,
            cpu: (0, 0),
            mem: 0,
            peak: 0,
            evicted: false,
            held: false,
        }
    }

    pub fn info(&self, frozen: bool) -> GuestInfo {
        let phase = if self.evicted {
            GuestPhase::Stopping
        } else if frozen || self.held {
            GuestPhase::Frozen
        } else {
            GuestPhase::Running
        };
        let mut info = GuestInfo::without_process(self.id.clone(), phase, &self.dir);
        info.pid = Some(self.pid);
        (info.cpu_user_us, info.cpu_system_us) = self.cpu;
        info.wall_ms = self.started.elapsed().as_millis() as u64;
        info.mem_bytes = self.mem;
        info.peak_mem_bytes = self.peak;
        info.memory_limit_bytes = Some(self.memory_limit);
        info
    }

    pub fn totals(&self) -> GuestTotals {
        GuestTotals {
            guest: self.id.clone(),
            cpu_us: self.cpu.0 + self.cpu.1,
            wall_ms: self.started.elapsed().as_millis() as u64,
            peak_mem_bytes: self.peak,
        }
    }
}

/// The guests waiting for admission and those that ended.
pub struct GuestQueue {
    pub cfg: crate::config::Guests,
    caps: crate::config::Caps,
    work_root: PathBuf,
    queue: VecDeque<(String, GuestSpec)>,
    /// Ended guests: their last snapshot, totals, and whether the totals were reported.
    pub ended: Vec<EndedGuest>,
    /// The CPU time of the ended guests, µs.
    pub ended_cpu_us: u64,
    seq: u64,
    /// Why the first queued guest waits (said once).
    refused: Option<String>,
    /// The system's memory, for admission (or why it cannot be read).
    system: Result<sysinfo::System, String>,
}

impl GuestQueue {
    pub fn new(config: &crate::config::Config, work_root: &Path) -> Self {
        Self {
            cfg: config.guests.clone(),
            caps: config.caps.clone(),
            work_root: work_root.to_path_buf(),
            queue: VecDeque::new(),
            ended: Vec::new(),
            ended_cpu_us: 0,
            seq: 0,
            refused: None,
            system: sysinfo::System::new().map_err(|e| e.to_string()),
        }
    }

    /// Queues a guest; returns its new id.
    pub fn submit(&mut self, spec: GuestSpec) -> String {
        self.seq += 1;
        let id = format!("g{}-{}-{}", chrono::Utc::now().timestamp_millis(), std::process::id(), self.seq);
        self.queue.push_back((id.clone(), spec));
        id
    }

    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// The guest's directory: the job's own, or a new one under the work root.
    pub fn dir_of(&self, id: &str, spec: &GuestSpec) -> GuestDir {
        GuestDir::new(spec.job_dir.clone().unwrap_or_else(|| self.work_root.join("guests").join(id)))
    }

    /// The directory a guest starts in, refused outside the work root.
    pub fn start_dir(&self, id: &str, spec: &GuestSpec) -> Result<GuestDir, GuestError> {
        let dir = self.dir_of(id, spec);
        if !dir.root.starts_with(&self.work_root) {
            return Err(GuestError::OutsideWorkRoot(dir.root.display().to_string()));
        }
        Ok(dir)
    }

    /// The cap a new guest gets beside guests holding `held` bytes, or why it may not
    /// start now ([`guest_memory::admit`]).
    fn admit(&mut self, held: u64, spec_cap: Option<u64>) -> Result<u64, String> {
        let system = self.system.as_mut().map_err(|e| format!("the system's memory cannot be read: {e}"))?;
        system.refresh_memory();
        let reading = MemoryReading { total: system.total_memory(), available: system.available_memory() };
        let rules = super::memory_rules(&self.cfg, &self.caps);
        guest_memory::admit(&rules, reading, held, spec_cap).map_err(|r| r.to_string())
    }

    /// The first queued guest with its memory cap, taken off the queue, if it is admitted
    /// now beside guests holding `held` bytes; `None` (why said once) while it waits.
    pub fn next_admitted(&mut self, held: u64) -> Option<(String, GuestSpec, u64)> {
        let (id, spec) = self.queue.front().cloned()?;
        match self.admit(held, spec.memory_cap_bytes) {
            Ok(limit) => {
                self.refused = None;
                self.queue.pop_front();
                Some((id, spec, limit))
            }
            Err(why) => {
                if self.refused.as_deref() != Some(&why) {
                    warn!("guest {id} not admitted yet: {why}");
                    self.refused = Some(why);
                }
                None
            }
        }
    }

    /// Records a guest that could not start, with why.
    pub fn start_failed(&mut self, id: String, spec: &GuestSpec, e: &GuestError) {
        error!(guest = %id, "guest not started: {e}");
        let dir = self.dir_of(&id, spec);
        let mut info = GuestInfo::without_process(id.clone(), GuestPhase::Ended { code: None, signal: None, evicted: false }, &dir);
        info.failure = Some(e.to_string());
        info.start_error = Some(super::start_failure(e, &spec.command));
        let totals = GuestTotals { guest: id, cpu_us: 0, wall_ms: 0, peak_mem_bytes: 0 };
        self.ended.push((info, totals, true));
    }

    /// Drops a queued guest as evicted; false if it is not queued.
    pub fn drop_queued(&mut self, id: &str) -> bool {
        let Some(i) = self.queue.iter().position(|(q, _)| q == id) else { return false };
        let (id, spec) = self.queue.remove(i).expect("position() just found this index");
        let info =
            GuestInfo::without_process(id.clone(), GuestPhase::Ended { code: None, signal: None, evicted: true }, &self.dir_of(&id, &spec));
        self.ended.push((info, GuestTotals { guest: id, cpu_us: 0, wall_ms: 0, peak_mem_bytes: 0 }, true));
        true
    }

    /// Records a guest that ended (its last snapshot and totals).
    pub fn ended(&mut self, info: GuestInfo, totals: GuestTotals) {
        self.ended_cpu_us += totals.cpu_us;
        self.ended.push((info, totals, false));
    }

    /// Every guest: the ended ones, then `live`, then the queued ones.
    pub fn all(&self, live: impl Iterator<Item = GuestInfo>) -> Vec<GuestInfo> {
        let mut out: Vec<GuestInfo> = self.ended.iter().map(|e| e.0.clone()).collect();
        out.extend(live);
        out.extend(self.queue.iter().map(|(id, spec)| GuestInfo::without_process(id.clone(), GuestPhase::Queued, &self.dir_of(id, spec))));
        out
    }

    /// An ended guest's last snapshot.
    pub fn ended_info(&self, id: &str) -> Option<GuestInfo> {
        self.ended.iter().rev().find(|e| e.0.id == id).map(|e| e.0.clone())
    }
}
