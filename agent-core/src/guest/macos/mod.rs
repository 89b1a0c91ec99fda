//! The macOS guest runtime: each guest a process group of its own ([`group`]) at the
//! background priority band (`PRIO_DARWIN_BG`), its memory limited by `RLIMIT_AS` and
//! `RLIMIT_DATA` from admission; frozen with `SIGSTOP` to every group at once
//! ([`freeze`], also the input path's fast freeze), thawed with `SIGCONT`, evicted and
//! killed with `SIGKILL` to the group; accounted from `libproc` (CPU time, resident
//! memory); frozen while the system's memory pressure is raised (its notifications, a
//! dispatch source, [`pressure`]; the `kern.memorystatus_vm_pressure_level` sysctl until
//! one comes), evicted when it stays critical. Built (type-checked), never run, on Lull's machines.
//!
//! Not here (said in [`MacosRuntime::containment_status`]): a sandbox (guests run as the
//! owner's account and can read and write what it can, so an agent enrolled with a
//! coordinator refuses to start: [`GuestHost::pool_refusal`]), network isolation, the
//! disk and output caps, a checkpoint signal, and a group a guest cannot leave (`setsid`).

mod freeze;
mod group;
mod pressure;

use super::host::{FastFreeze, GuestHost};
use super::level_guard::{Act, LevelGuard};
use super::queue::{Figures, GuestQueue, MIB};
use super::{Containment, ContainmentStatus, GuestError, GuestInfo, GuestPhase, GuestRuntime, GuestSpec, RestoreReport};
use crate::ledger::GuestTotals;
use crate::policy::GuestDirective;
use crate::sensors::GuestReading;
use freeze::Freezer;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::Child;
use std::sync::Arc;
use tracing::{error, info, warn};

/// One running guest: its main process leads its process group (its pid is the group's).
struct Guest {
    figures: Figures,
    child: Child,
    /// The main process's end, once seen.
    status: Option<std::process::ExitStatus>,
}

impl Guest {
    fn pgid(&self) -> i32 {
        self.figures.pid as i32
    }
}

impl std::ops::Deref for Guest {
    type Target = Figures;
    fn deref(&self) -> &Figures {
        &self.figures
    }
}

impl std::ops::DerefMut for Guest {
    fn deref_mut(&mut self) -> &mut Figures {
        &mut self.figures
    }
}

/// The macOS guest runtime.
pub struct MacosRuntime {
    queue: GuestQueue,
    freezer: Arc<Freezer>,
    guests: Vec<Guest>,
    directive: GuestDirective,
    /// The background band refused at the last start (its error).
    band_refused: Option<String>,
    /// The memory-pressure guard (the core decides, this runtime reads and acts).
    pressure: LevelGuard,
    /// The system's memory-pressure notifications, which the guard reads.
    notifications: pressure::Notifications,
}

impl MacosRuntime {
    pub fn new(config: &crate::config::Config, work_root: &Path) -> Self {
        Self {
            queue: GuestQueue::new(config, work_root),
            freezer: Arc::new(Freezer::default()),
            guests: Vec::new(),
            directive: GuestDirective::Freeze,
            band_refused: None,
            pressure: LevelGuard::default(),
            notifications: pressure::Notifications::start(),
        }
    }

    fn start_admitted(&mut self) {
        while let Some((id, spec, limit)) = self.queue.next_admitted(self.guests.iter().map(|g| g.mem).sum()) {
            match self.start(&id, &spec, limit) {
                Ok(g) => {
                    info!(guest = %g.id, pid = g.pid, limit_mib = limit / MIB, "guest started in its process group");
                    self.guests.push(g);
                }
                Err(e) => self.queue.start_failed(id, &spec, &e),
            }
        }
    }

    /// Prepares the guest's directory and starts it in its own process group (frozen at
    /// once if the guests are frozen).
    fn start(&mut self, id: &str, spec: &GuestSpec, limit: u64) -> Result<Guest, GuestError> {
        let dir = self.queue.start_dir(id, spec)?;
        crate::sys::fs::create_private_dir(&dir.work())
            .map_err(|source| GuestError::Io { what: "creating the guest's work directory".into(), source })?;
        let (child, band) = group::spawn(spec, &dir, limit).map_err(|source| GuestError::Spawn { id: id.to_owned(), source })?;
        self.band_refused = band.map(|e| format!("setpriority(PRIO_DARWIN_PROCESS, PRIO_DARWIN_BG): {e}"));
        let figures = Figures::new(id, dir, child.id(), limit);
        let guest = Guest { figures, child, status: None };
        self.freezer.add(guest.pgid());
        Ok(guest)
    }

    /// Kills every process of the guest's group at once (checkpointable or not: no
    /// checkpoint signal on macOS yet).
    fn kill(g: &mut Guest, evicted: bool) {
        g.evicted |= evicted;
        if let Err(e) = group::kill_group(g.pgid()) {
            if g.status.is_none() {
                error!(guest = %g.id, "SIGKILL to its process group failed: {e}");
            }
        }
    }

    fn evict_all(&mut self) {
        for g in self.guests.iter_mut().filter(|g| !g.evicted) {
            Self::kill(g, true);
            info!(guest = %g.id, checkpoint = false, "guest evicted (its process group killed)");
        }
    }

    fn stop_one(&mut self, id: &str) -> bool {
        if self.queue.drop_queued(id) {
            return true;
        }
        let Some(g) = self.guests.iter_mut().find(|g| g.id == id) else { return false };
        Self::kill(g, true);
        info!(guest = %g.id, "guest stopped on request");
        true
    }

    /// Holds one guest frozen outside the freezer (which then leaves its group alone),
    /// or gives it back to it.
    fn hold_one(&mut self, id: &str, hold: bool) -> bool {
        let Some(g) = self.guests.iter_mut().find(|g| g.id == id && !g.evicted) else { return false };
        if g.held != hold {
            g.held = hold;
            if hold {
                self.freezer.remove(g.pgid());
                if let Err(e) = group::freeze_group(g.pgid(), true) {
                    warn!(guest = %g.id, "could not freeze the guest: {e}");
                }
            } else {
                if !self.freezer.frozen() {
                    if let Err(e) = group::freeze_group(g.pgid(), false) {
                        warn!(guest = %g.id, "could not thaw the guest: {e}");
                    }
                }
                self.freezer.add(g.pgid());
            }
        }
        true
    }

    /// Accounts every guest, collects those whose group is empty, follows the memory
    /// pressure, starts admitted ones.
    fn maintain(&mut self) {
        let mut i = 0;
        while i < self.guests.len() {
            let g = &mut self.guests[i];
            let (cpu, mem) = group::usage(g.pgid());
            g.cpu = (g.cpu.0.max(cpu.0), g.cpu.1.max(cpu.1));
            g.mem = mem;
            g.peak = g.peak.max(mem);
            if g.status.is_none() {
                g.status = g.child.try_wait().ok().flatten();
            }
            // Gone: the main process ended and nothing is left in its group.
            if g.status.is_some() && group::members(g.pgid()).is_empty() {
                let g = self.guests.remove(i);
                self.collect_ended(g);
                continue;
            }
            i += 1;
        }
        self.follow_pressure();
        if self.directive == GuestDirective::Accept && !self.pressure.raised() {
            self.start_admitted();
        }
    }

    /// Freezes the guests while the system's memory pressure is raised and thaws them
    /// (if the policy lets them run) once it is normal; evicts them when it stays
    /// critical for `[guests] pressure_kill_s` (decided by lull-core's `LevelWatch`, through [`LevelGuard`]).
    fn follow_pressure(&mut self) {
        let reading = match self.notifications.level() {
            Some(told) => Ok(told),
            None => group::memory_pressure().map_err(|e| format!("kern.memorystatus_vm_pressure_level: {e}")),
        };
        let active = self.guests.iter().any(|g| !g.evicted);
        match self.pressure.step(reading, active, self.queue.cfg.pressure_kill_s, self.directive) {
            Act::Freeze => self.freezer.set_frozen(true),
            Act::Evict => self.evict_all(),
            Act::Thaw => self.freezer.set_frozen(false),
            Act::Nothing => {}
        }
    }

    fn collect_ended(&mut self, g: Guest) {
        self.freezer.remove(g.pgid());
        let mut info = g.info(false);
        let status = g.status;
        info.phase = GuestPhase::Ended { code: status.and_then(|s| s.code()), signal: status.and_then(|s| s.signal()), evicted: g.evicted };
        info!(guest = %g.id, code = ?info.phase, "guest ended");
        self.queue.ended(info, g.totals());
    }

    /// Everything the guests lack here, each with what it costs the owner.
    fn missing(&self) -> Vec<String> {
        let mut out = vec![
            "the owner's files: NOT protected: guests run as the owner's account, with no sandbox, and can read and write what it can"
                .to_owned(),
        ];
        out.extend(self.band_refused.iter().map(|r| format!("{r}: guests run at the owner's priority")));
        out.extend(self.pressure.unread().into_iter().map(|r| format!("{r}: no memory-pressure guard")));
        out.extend(
            [
                "a guest that calls setsid leaves its process group and escapes freezing, eviction and accounting",
                "memory: RLIMIT_AS and RLIMIT_DATA per process, not per guest (macOS may not enforce them)",
                "network not isolated: guests reach the network as the owner's account does",
                "no disk or output cap: a guest's work directory and logs are not limited",
                "no checkpoint signal: checkpointable guests are killed at eviction without a grace",
            ]
            .map(String::from),
        );
        out
    }
}

impl GuestHost for MacosRuntime {
    fn describe(&self) -> String {
        "macos: process group per guest (background band, RLIMIT_AS/DATA, frozen by SIGSTOP, memory-pressure notifications) · \
         the owner's account, NO sandbox"
            .into()
    }

    fn apply(&mut self, directive: GuestDirective) {
        self.directive = directive;
        match directive {
            GuestDirective::Accept | GuestDirective::Linger => {
                if !self.pressure.frozen() {
                    self.freezer.set_frozen(false);
                }
                if directive == GuestDirective::Accept && !self.pressure.raised() {
                    self.start_admitted();
                }
            }
            GuestDirective::Freeze => self.freezer.set_frozen(true),
            GuestDirective::Evict => self.evict_all(),
        }
    }

    fn present(&mut self) -> bool {
        self.maintain();
        !self.guests.is_empty()
    }

    fn reading(&mut self) -> GuestReading {
        let live: u64 = self.guests.iter().map(|g| g.cpu.0 + g.cpu.1).sum();
        GuestReading { cpu_us_total: self.queue.ended_cpu_us + live, mem_bytes: self.guests.iter().map(|g| g.mem).sum() }
    }

    fn totals(&mut self) -> Vec<GuestTotals> {
        crate::guest::totals_to_report(self.guests.iter().map(|g| g.totals()), &mut self.queue.ended)
    }

    fn fast_freeze(&self) -> Option<FastFreeze> {
        let freezer = self.freezer.clone();
        Some(Arc::new(move || freezer.set_frozen(true)))
    }

    fn take_restore(&mut self) -> Option<RestoreReport> {
        None
    }

    fn pool_refusal(&self) -> Option<String> {
        Some("macOS guests run as the owner's account without a sandbox, so a guest could read and write the owner's files".into())
    }

    fn containment_status(&self) -> Option<ContainmentStatus> {
        Some(ContainmentStatus {
            summary: "macOS process group (background band, no sandbox)".into(),
            kind: Containment::ProcessGroup.id().into(),
            placement: "one process group per guest, killed with the group when evicted".into(),
            missing: self.missing(),
        })
    }

    fn start_guest(&mut self, spec: GuestSpec) -> Option<String> {
        Some(self.submit(spec))
    }

    fn guest_info(&mut self, id: &str) -> Option<GuestInfo> {
        self.queue.ended_info(id).or_else(|| self.guests().into_iter().find(|g| g.id == id))
    }

    fn stop_guest(&mut self, id: &str) -> bool {
        self.stop_one(id)
    }

    fn kill_guest(&mut self, id: &str) -> bool {
        self.stop_one(id)
    }

    fn hold_guest(&mut self, id: &str, hold: bool) -> bool {
        self.hold_one(id, hold)
    }
}

impl GuestRuntime for MacosRuntime {
    fn submit(&mut self, spec: GuestSpec) -> String {
        self.queue.submit(spec)
    }

    fn guests(&mut self) -> Vec<GuestInfo> {
        let frozen = self.freezer.frozen();
        self.queue.all(self.guests.iter().map(|g| g.info(frozen)))
    }

    fn containment(&self) -> Containment {
        Containment::ProcessGroup
    }

    fn idle(&mut self) -> bool {
        self.queue.is_empty() && self.guests.is_empty()
    }
}

impl Drop for MacosRuntime {
    /// No orphans: every guest's group is killed, and its main process reaped.
    fn drop(&mut self) {
        for g in &mut self.guests {
            Self::kill(g, true);
            let _ = g.child.wait();
        }
    }
}
