//! The Windows guest runtime: each guest in a Job Object of its own ([`job`]: kill on
//! close, idle priority class, the job's memory from admission, a process cap as Linux's
//! `pids.max`), started suspended in the guests' AppContainer ([`appcontainer`]: no
//! owner's files, processes or network) by a restricted, low-integrity token ([`token`],
//! [`spawn`]), its token read back, and resumed once in its job; frozen by suspending
//! every thread of its job ([`freeze`]); evicted with a checkpoint signal when it is
//! checkpointable (thawed, sent `CTRL_BREAK_EVENT` by a helper, [`ctrl_break`], and
//! killed when `[eviction] kill_grace_s` ends) and killed with `TerminateJobObject`;
//! accounted from the job's accounting (CPU, bytes written) and its processes' memory;
//! held to `[guests] output_mib` per stream (each file's size read every tick: past it
//! the guest is killed, its job fails "output limit: ..." and the file is cut back to
//! the cap once nothing writes it; it can pass the cap by what it writes in one tick)
//! and `[guests] disk_mib` (its work directory walked when the bytes its job wrote could
//! put it over, and every 30 s, or every 2 s while the written count reads 0:
//! [`super::caps::WalkPlan`]; over, killed, the job fails "disk limit: ..."); frozen, and
//! none started, while Windows signals low memory ([`pressure`]: a low-memory resource
//! notification read each tick), evicted without a grace when that lasts
//! `[guests] pressure_kill_s` (decided by lull-core's `LevelWatch`, as on macOS). Where
//! Windows (or Wine) refuses a call, the guest runs with what was built, `lull status`
//! says what is missing (a checkpoint signal that could not be sent names its call), and
//! the pool's guests are refused unless the AppContainer read back in effect.
//!
//! Not as on Linux: no single file is stopped at the disk cap as it is written
//! (RLIMIT_FSIZE), so a guest may pass `disk_mib` by what it writes between two walks.

mod appcontainer;
pub mod ctrl_break;
mod freeze;
mod job;
mod pressure;
mod spawn;
mod token;

use super::caps::{self, WalkPlan};
use super::host::{FastFreeze, GuestHost};
use super::level_guard::{Act, LevelGuard};
use super::queue::{Figures, GuestQueue, MIB};
use super::{Containment, ContainmentStatus, GuestError, GuestInfo, GuestPhase, GuestRuntime, GuestSpec, RestoreReport};
use crate::ledger::GuestTotals;
use crate::policy::GuestDirective;
use crate::sensors::GuestReading;
use freeze::Freezer;
use job::{Job, Limits};
use pressure::LowMemory;
use std::os::windows::io::{AsRawHandle, OwnedHandle};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tracing::{error, info, warn};
use windows_sys::Win32::Foundation::WAIT_OBJECT_0;
use windows_sys::Win32::System::Threading::{GetExitCodeProcess, WaitForSingleObject};

/// The exit code a guest's processes get when the runtime ends its job.
const KILLED_EXIT: u32 = 0xC000_013A;

/// One running guest.
struct Guest {
    figures: Figures,
    job: Arc<Job>,
    process: OwnedHandle,
    checkpointable: bool,
    /// Being stopped (evicted, stopped, or over a cap): nothing more is asked of it.
    stopping: bool,
    /// Its checkpoint signal's helper, while it runs.
    signal: Option<ctrl_break::Signal>,
    /// When its kill grace ends (it was sent the checkpoint signal).
    kill_at: Option<Instant>,
    /// Why the runtime stopped it (a cap).
    failure: Option<String>,
    /// When its work directory is walked for `[guests] disk_mib`.
    disk: WalkPlan,
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

impl Guest {
    /// The main process's exit code once it has ended.
    fn exit_code(&self) -> Option<u32> {
        let handle = self.process.as_raw_handle();
        // SAFETY: the process handle is open.
        if unsafe { WaitForSingleObject(handle, 0) } != WAIT_OBJECT_0 {
            return None;
        }
        let mut code = 0u32;
        // SAFETY: as above; `code` receives the exit code.
        (unsafe { GetExitCodeProcess(handle, &mut code) } != 0).then_some(code)
    }
}

/// The Windows guest runtime.
pub struct WindowsRuntime {
    queue: GuestQueue,
    token: token::GuestToken,
    container: appcontainer::GuestContainer,
    freezer: Arc<Freezer>,
    guests: Vec<Guest>,
    directive: GuestDirective,
    /// The job limits Windows refused at the last start, each with its call.
    limits_refused: Vec<String>,
    /// The work directories' low label could not be set (the call and its error).
    label_refused: Option<String>,
    /// The low-memory notification, or the call that failed to create it and its error.
    low_memory: Result<LowMemory, String>,
    /// The memory-pressure guard (the core decides, this runtime reads and acts).
    pressure: LevelGuard,
    /// `[eviction] kill_grace_s`: how long a checkpointable guest has after its signal.
    kill_grace: Duration,
    /// The last checkpoint signal that could not be sent (the call and its error).
    signal_failed: Option<String>,
    /// The jobs' I/O accounting was refused (the call and its error).
    io_refused: Option<String>,
}

impl WindowsRuntime {
    pub fn new(config: &crate::config::Config, work_root: &Path) -> Self {
        let token = token::GuestToken::build();
        for failed in &token.failed {
            warn!("guests' token: {failed}");
        }
        let container = appcontainer::GuestContainer::build(token.raw());
        for failed in &container.failed {
            warn!("guests' AppContainer: {failed}");
        }
        if container.in_effect {
            info!("guests run in the AppContainer {} (read back from a probe's token)", appcontainer::CONTAINER_NAME);
        }
        let low_memory = LowMemory::create().map_err(|e| format!("{}: {e}", pressure::CREATE_CALL));
        match &low_memory {
            Ok(n) => info!(level = ?n.level().ok(), "memory-pressure guard: the low-memory notification created"),
            Err(e) => warn!("no memory-pressure guard: {e}"),
        }
        Self {
            queue: GuestQueue::new(config, work_root),
            token,
            container,
            freezer: Arc::new(Freezer::default()),
            guests: Vec::new(),
            directive: GuestDirective::Freeze,
            limits_refused: Vec::new(),
            label_refused: None,
            low_memory,
            pressure: LevelGuard::default(),
            kill_grace: Duration::from_secs(config.eviction.kill_grace_s),
            signal_failed: None,
            io_refused: None,
        }
    }

    fn start_admitted(&mut self) {
        while let Some((id, spec, limit)) = self.queue.next_admitted(self.guests.iter().map(|g| g.mem).sum()) {
            match self.start(&id, &spec, limit) {
                Ok(g) => {
                    info!(guest = %g.id, pid = g.pid, limit_mib = limit / MIB, "guest started in its Job Object");
                    self.guests.push(g);
                }
                Err(e) => self.queue.start_failed(id, &spec, &e),
            }
        }
    }

    /// Prepares the guest's directory, creates its process suspended, puts it in a new
    /// job with its limits, and lets it run (frozen at once if the guests are frozen).
    fn start(&mut self, id: &str, spec: &GuestSpec, limit: u64) -> Result<Guest, GuestError> {
        let dir = self.queue.start_dir(id, spec)?;
        let io = |what: &str| {
            let what = what.to_owned();
            move |source| GuestError::Io { what, source }
        };
        std::fs::create_dir_all(dir.work()).map_err(io("creating the guest's work directory"))?;
        if self.container.in_effect {
            self.container.grant(&dir.work()).map_err(io("granting the guests' AppContainer their work directory"))?;
        }
        // An AppContainer's process is at low integrity too: it writes only below a low label.
        if self.token.low_integrity || self.container.in_effect {
            self.label_refused =
                token::label_low(&dir.work()).err().map(|e| format!("SetNamedSecurityInfoW(low label on the work directory): {e}"));
        }
        let job = Job::create().map_err(io("CreateJobObjectW"))?;
        let limits = Limits { memory_bytes: limit, processes: u32::try_from(self.queue.cfg.pids_max).unwrap_or(u32::MAX) };
        self.limits_refused = job.set_limits(limits).map_err(io("SetInformationJobObject(JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE)"))?;
        let launch = self.container.launch(self.token.raw());
        let started = spawn::spawn_suspended(launch, spec, &dir).map_err(|source| GuestError::Spawn { id: id.to_owned(), source })?;
        // Read back before it runs: never a guest outside the container once it is in effect.
        if self.container.in_effect {
            if let Err(e) = self.container.verify(started.process.as_raw_handle()) {
                // SAFETY: the process handle is open; its main thread never ran.
                unsafe { windows_sys::Win32::System::Threading::TerminateProcess(started.process.as_raw_handle(), KILLED_EXIT) };
                return Err(GuestError::Io { what: format!("the guest's AppContainer, read back: {e}"), source: std::io::Error::other(e) });
            }
        }
        if let Err(e) = job.assign(&started.process) {
            // Never let it run outside its job: it is still suspended, end it.
            // SAFETY: the process handle is open.
            unsafe { windows_sys::Win32::System::Threading::TerminateProcess(started.process.as_raw_handle(), KILLED_EXIT) };
            return Err(GuestError::Io { what: "AssignProcessToJobObject".into(), source: e });
        }
        let job = Arc::new(job);
        self.freezer.add(job.clone());
        if let Err(e) = started.resume() {
            self.freezer.remove(&job);
            let _ = job.terminate(KILLED_EXIT);
            return Err(GuestError::Io { what: "ResumeThread (the guest's main thread)".into(), source: e });
        }
        let disk = WalkPlan::new(self.queue.cfg.disk_mib * MIB);
        Ok(Guest {
            figures: Figures::new(id, dir, started.pid, limit),
            job,
            process: started.process,
            checkpointable: spec.checkpointable,
            stopping: false,
            signal: None,
            kill_at: None,
            failure: None,
            disk,
        })
    }

    /// Ends every process of the guest's job at once.
    fn kill(g: &mut Guest) {
        g.kill_at = None;
        if let Err(e) = g.job.terminate(KILLED_EXIT) {
            error!(guest = %g.id, "TerminateJobObject failed: {e}");
        }
    }

    /// Stops a guest as an eviction does: a checkpointable one, thawed first, is sent
    /// CTRL_BREAK_EVENT ([`ctrl_break`]) and killed when `grace` ends; any other (or when
    /// `grace` is zero, or the signal cannot be sent) is killed at once. Never waits.
    fn stop_within(&mut self, i: usize, grace: Duration) {
        let g = &mut self.guests[i];
        if g.stopping {
            if grace.is_zero() && g.kill_at.is_some() {
                // Stopping within a grace already: end it now.
                Self::kill(g);
            }
            return;
        }
        g.stopping = true;
        g.evicted = true;
        if !g.checkpointable || grace.is_zero() {
            Self::kill(g);
            return;
        }
        // Frozen guests cannot checkpoint: let this one run its handler.
        self.freezer.release(&g.job);
        if std::mem::take(&mut g.held) {
            if let Err(e) = freeze::suspend_job(&g.job, false) {
                warn!(guest = %g.id, "could not thaw the guest for its checkpoint: {e}");
            }
        }
        match ctrl_break::Signal::start(g.pid) {
            Ok(signal) => {
                g.signal = Some(signal);
                g.kill_at = Some(Instant::now() + grace);
            }
            Err(e) => {
                Self::kill(g);
                Self::note_signal_failed(&mut self.signal_failed, &g.id, e);
            }
        }
    }

    /// A checkpoint signal that could not be sent: logged when its call (the words before
    /// the first parenthesis: the pid differs each time) differs from the last one's.
    fn note_signal_failed(last: &mut Option<String>, id: &str, why: String) {
        let call = |w: &str| w.split('(').next().unwrap_or_default().to_owned();
        if last.as_deref().map(call) != Some(call(&why)) {
            warn!(guest = %id, "no checkpoint signal (the guest is killed without its grace): {why}");
        }
        *last = Some(why);
    }

    fn evict_all(&mut self, grace: Duration) {
        for i in 0..self.guests.len() {
            if !self.guests[i].stopping {
                self.stop_within(i, grace);
                let g = &self.guests[i];
                info!(guest = %g.id, checkpoint = g.kill_at.is_some(), "guest evicted");
            }
        }
    }

    fn stop_one_within(&mut self, id: &str, grace: Duration) -> bool {
        if self.queue.drop_queued(id) {
            return true;
        }
        let Some(i) = self.guests.iter().position(|g| g.id == id) else { return false };
        self.stop_within(i, grace);
        info!(guest = %id, "guest stopped on request");
        true
    }

    fn hold_one(&mut self, id: &str, hold: bool) -> bool {
        let Some(g) = self.guests.iter_mut().find(|g| g.id == id && !g.stopping) else { return false };
        if g.held != hold {
            g.held = hold;
            if let Err(e) = freeze::suspend_job(&g.job, hold) {
                warn!(guest = %g.id, "could not {} the guest: {e}", if hold { "freeze" } else { "thaw" });
            }
        }
        true
    }

    /// Accounts every guest, acts on its signal's helper, kill deadline and caps,
    /// collects those whose job is empty, follows the memory pressure, starts admitted ones.
    fn maintain(&mut self) {
        let now = Instant::now();
        let mut i = 0;
        while i < self.guests.len() {
            let g = &mut self.guests[i];
            let (active, written) = match g.job.accounting() {
                Ok(a) => {
                    g.cpu = (a.cpu_user_us, a.cpu_system_us);
                    if let (Err(e), None) = (&a.written, &self.io_refused) {
                        warn!("{e}: the disk cap walks each guest's work directory every 2 s");
                        self.io_refused = Some(e.clone());
                    }
                    (Some(a.active), a.written.ok())
                }
                Err(_) => (None, None),
            };
            g.mem = process_memory(&g.job);
            g.peak = g.peak.max(g.mem).max(g.job.peak_memory());
            if let Some(result) = g.signal.as_mut().and_then(ctrl_break::Signal::poll) {
                g.signal = None;
                match result {
                    Ok(()) => info!(guest = %g.id, "checkpoint signal sent (CTRL_BREAK_EVENT)"),
                    Err(e) => {
                        Self::kill(g);
                        Self::note_signal_failed(&mut self.signal_failed, &g.id, e);
                    }
                }
            }
            if g.kill_at.is_some_and(|t| now >= t) {
                Self::kill(g);
            }
            if !g.stopping {
                let over = output_over(g, self.queue.cfg.output_mib).or_else(|| disk_over(g, now, written));
                if let Some(why) = over {
                    warn!(guest = %g.id, "{why}: guest stopped");
                    g.failure = Some(why);
                    g.stopping = true;
                    Self::kill(g);
                }
            }
            // Gone: the main process ended and nothing is left in its job.
            let code = g.exit_code();
            if code.is_some() && active.unwrap_or(0) == 0 {
                let g = self.guests.remove(i);
                self.collect_ended(g, code);
                continue;
            }
            i += 1;
        }
        self.follow_pressure();
        if self.directive == GuestDirective::Accept && !self.pressure.raised() {
            self.start_admitted();
        }
    }

    /// Freezes the guests while Windows signals low memory and thaws them (if the policy
    /// lets them run) once it no longer does; evicts them when it lasts
    /// `[guests] pressure_kill_s` (decided by lull-core's `LevelWatch`, through [`LevelGuard`]).
    fn follow_pressure(&mut self) {
        let Ok(low_memory) = &self.low_memory else { return };
        let reading = low_memory.level().map_err(|e| format!("{}: {e}", pressure::QUERY_CALL));
        let active = self.guests.iter().any(|g| !g.stopping);
        match self.pressure.step(reading, active, self.queue.cfg.pressure_kill_s, self.directive) {
            Act::Freeze => self.freezer.set_frozen(true),
            // Lasting pressure: no grace, as on Linux.
            Act::Evict => self.evict_all(Duration::ZERO),
            Act::Thaw => self.freezer.set_frozen(false),
            Act::Nothing => {}
        }
    }

    fn collect_ended(&mut self, g: Guest, code: Option<u32>) {
        self.freezer.remove(&g.job);
        // Nothing writes them any more: each stream is cut back to the cap.
        let cap = self.queue.cfg.output_mib * MIB;
        for path in [g.dir.stdout(), g.dir.stderr()] {
            if std::fs::metadata(&path).is_ok_and(|m| m.len() > cap) {
                if let Err(e) = std::fs::OpenOptions::new().write(true).open(&path).and_then(|f| f.set_len(cap)) {
                    warn!(guest = %g.id, "could not cut {} at the output cap: {e}", path.display());
                }
            }
        }
        let mut info = g.info(false);
        info.failure = g.failure.clone();
        // Exit codes are DWORDs; NTSTATUS values read back negative as on Windows' own tools.
        info.phase = GuestPhase::Ended { code: code.map(|c| c as i32), signal: None, evicted: g.evicted };
        info!(guest = %g.id, code = ?info.phase, "guest ended");
        self.queue.ended(info, g.totals());
    }
}

/// The memory the job's processes hold now (their private commit), bytes.
fn process_memory(job: &Job) -> u64 {
    use windows_sys::Win32::System::ProcessStatus::{GetProcessMemoryInfo, PROCESS_MEMORY_COUNTERS};
    use windows_sys::Win32::System::Threading::{OpenProcess, PROCESS_QUERY_LIMITED_INFORMATION};
    let mut total = 0u64;
    for pid in job.process_ids().unwrap_or_default() {
        // SAFETY: a query-only handle, closed below.
        let process = unsafe { OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, 0, pid) };
        if process.is_null() {
            continue;
        }
        let mut counters = PROCESS_MEMORY_COUNTERS { cb: std::mem::size_of::<PROCESS_MEMORY_COUNTERS>() as u32, ..Default::default() };
        // SAFETY: `counters` is a whole PROCESS_MEMORY_COUNTERS of its `cb` size.
        if unsafe { GetProcessMemoryInfo(process, &mut counters, counters.cb) } != 0 {
            total += counters.PagefileUsage as u64;
        }
        // SAFETY: closing the handle opened above.
        unsafe { windows_sys::Win32::Foundation::CloseHandle(process) };
    }
    total
}

/// The guest's output over `[guests] output_mib` (a stream's file past it): the failure.
fn output_over(g: &Guest, output_mib: u64) -> Option<String> {
    let cap = output_mib * MIB;
    [("stdout", g.dir.stdout()), ("stderr", g.dir.stderr())]
        .into_iter()
        .find(|(_, path)| std::fs::metadata(path).is_ok_and(|m| m.len() > cap))
        .map(|(name, _)| caps::output_limit(name, output_mib))
}

/// The guest's work directory over `[guests] disk_mib`, walked when its plan says (the
/// job having written `written` bytes): the failure.
fn disk_over(g: &mut Guest, now: Instant, written: Option<u64>) -> Option<String> {
    if !g.disk.due(now, written) {
        return None;
    }
    let start = Instant::now();
    let (used, complete) = work_dir_bytes(&g.dir.work());
    g.disk.walked(now, used, complete, start.elapsed(), written).map(|over| over.to_string())
}

/// The sizes of the files under `dir` summed (links not followed), and whether every
/// entry was seen (at most [`caps::MAX_ENTRIES`]).
fn work_dir_bytes(dir: &Path) -> (u64, bool) {
    let (mut total, mut seen) = (0u64, 0usize);
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else { continue };
        for e in entries.flatten() {
            seen += 1;
            if seen > caps::MAX_ENTRIES {
                return (total, false);
            }
            let Ok(meta) = e.metadata() else { continue };
            if meta.is_dir() {
                todo.push(e.path());
            } else if meta.is_file() {
                total += meta.len();
            }
        }
    }
    (total, true)
}

impl WindowsRuntime {
    /// The token's (and the container's) line for `describe`.
    fn token_words(&self) -> &'static str {
        if self.container.in_effect {
            return "AppContainer Lull.Guests (no capabilities: no network), low integrity";
        }
        match (self.token.token.is_some(), self.token.privileges_removed, self.token.low_integrity) {
            (true, true, true) => "restricted token (no privileges), low integrity",
            (true, true, false) => "restricted token (no privileges), NOT low integrity",
            (true, false, true) => "low integrity, privileges NOT removed",
            (true, false, false) | (false, _, _) => "the agent's privileges and integrity level (NO restricted token in effect)",
        }
    }

    /// Everything the guests lack here, each with what it costs the owner.
    fn missing(&self) -> Vec<String> {
        let mut out: Vec<String> = self.token.failed.iter().map(|f| format!("{f}: guests run with {}", self.token_words())).collect();
        out.extend(self.container.failed.iter().map(|f| format!("{f}: guests run outside the AppContainer")));
        if !self.container.in_effect {
            out.push(if self.token.low_integrity {
                "the owner's files: low integrity blocks writing them, not reading them: a guest can read what the owner's account can read (no AppContainer in effect)".into()
            } else {
                "the owner's files: NOT protected: a guest can read and write what the owner's account can".into()
            });
            out.push("network not isolated: guests reach the network as the owner's account does".into());
        }
        out.extend(self.limits_refused.iter().map(|r| format!("{r}: that limit is not applied")));
        out.extend(self.label_refused.iter().map(|r| format!("{r}: a low-integrity guest may not write its work directory")));
        let unguarded = self.low_memory.as_ref().err().or(self.pressure.unread());
        out.extend(unguarded.map(|r| format!("{r}: no memory-pressure guard: guests are not frozen for the owner's memory pressure")));
        out.extend(self.io_refused.iter().map(|r| {
            format!("{r}: no count of the bytes a guest writes: the disk cap walks each work directory every 2 s, so a guest may pass disk_mib by what it writes in 2 s")
        }));
        out.extend(
            self.signal_failed
                .iter()
                .map(|r| format!("{r}: no checkpoint signal: checkpointable guests are killed at eviction without a grace")),
        );
        out
    }
}

impl GuestHost for WindowsRuntime {
    fn describe(&self) -> String {
        format!(
            "windows: Job Object per guest (kill on close, idle priority class, job memory, {} processes) · {} · frozen by suspending the job's threads{} · disk {} MiB, output {} MiB per stream · checkpoint signal CTRL_BREAK_EVENT, {} s grace",
            self.queue.cfg.pids_max,
            self.token_words(),
            if self.low_memory.is_ok() { ", also while Windows signals low memory" } else { "" },
            self.queue.cfg.disk_mib,
            self.queue.cfg.output_mib,
            self.kill_grace.as_secs()
        )
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
            GuestDirective::Evict => self.evict_all(self.kill_grace),
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
        if self.container.in_effect {
            return None;
        }
        Some(if self.token.low_integrity {
            "Windows guests run at low integrity without an AppContainer in effect (see `lull status`), so a guest could read the owner's files".into()
        } else {
            "Windows guests run without a restricted token in effect, so a guest could read and write the owner's files".into()
        })
    }

    fn containment_status(&self) -> Option<ContainmentStatus> {
        Some(ContainmentStatus {
            summary: format!("Windows Job Object ({})", self.token_words()),
            kind: Containment::JobObject.id().into(),
            placement: "one Job Object per guest, killed when the agent's handle closes".into(),
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
        self.stop_one_within(id, self.kill_grace)
    }

    /// At once, checkpointable or not (a cancelled job, a lost lease).
    fn kill_guest(&mut self, id: &str) -> bool {
        self.stop_one_within(id, Duration::ZERO)
    }

    fn hold_guest(&mut self, id: &str, hold: bool) -> bool {
        self.hold_one(id, hold)
    }
}

impl GuestRuntime for WindowsRuntime {
    fn submit(&mut self, spec: GuestSpec) -> String {
        self.queue.submit(spec)
    }

    fn guests(&mut self) -> Vec<GuestInfo> {
        let frozen = self.freezer.frozen();
        self.queue.all(self.guests.iter().map(|g| g.info(frozen)))
    }

    fn containment(&self) -> Containment {
        Containment::JobObject
    }

    fn idle(&mut self) -> bool {
        self.queue.is_empty() && self.guests.is_empty()
    }
}

impl Drop for WindowsRuntime {
    /// No orphans: every job is terminated (closing its handle would too: kill on close).
    fn drop(&mut self) {
        for g in &mut self.guests {
            Self::kill(g);
        }
    }
}
