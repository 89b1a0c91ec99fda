//! The agent driver: the outer loop that feeds the pure [`Policy`] with readings from the
//! world (clock, sensors, input backends, guest runtime, owner commands over the control
//! socket) and carries out its actions (ledger writes, guest directives). It is the only
//! part of the agent that touches the world; the tray app runs this same loop in-process.

use crate::alarm::Alarm;
use crate::clock::{boot_id, mono_now, MonoMs, Now, SystemClock};
use crate::config::Config;
use crate::control::{self, AgentStatus, Alert, AlertKind, Request, Response, TodayReport};
use crate::data_lock::DataDirLock;
use crate::driver_link::{DriverInbox, DriverMsg, JobRequest, LinkHealth, MigrationAsk, MigrationOutcome};
use crate::guest::{GuestHost, GuestInfo, GuestPhase, GuestSpec};
use crate::input::{InputBackend, InputSink};
use crate::ledger::{Ledger, LedgerError, TraceRow};
use crate::ledger_integrity::{self, Finding, StartFacts};
use crate::paths::Paths;
use crate::policy::{Action, Command, Event, GuestDirective, Interruption, Policy, StateKind, Watch};
use crate::sample::InputEvent;
use crate::sensors::Sensors;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::sync::{mpsc, oneshot};
use tracing::{debug, error, info, warn};

/// A start-up failure of the agent.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error(transparent)]
    Ledger(#[from] LedgerError),
    #[error(transparent)]
    Sensors(#[from] crate::sensors::SensorError),
    #[error("control socket {path}: {source}")]
    Socket { path: String, source: std::io::Error },
    #[error("the data directory {path} was removed while the agent ran; the agent stopped so that nothing is accounted where it would be lost. Start it again to begin anew")]
    DataDirGone { path: String },
}

/// Something the driver tells its observer (the CLI prints these in the foreground).
#[derive(Clone, Debug)]
pub enum Notice {
    Started {
        state: StateKind,
        input: Vec<String>,
        guests: String,
    },
    Action(Now, Action),
    /// The owner's memory was restored after an eviction: swapped pages and file cache,
    /// each taking this long (`None`: that part had nothing to do).
    Restored {
        anon_ms: Option<u64>,
        file_cache_ms: Option<u64>,
    },
    /// The policy counted an interruption that the ledger did not take (the write
    /// failed): it still counts against today's budget — in memory, and in today's
    /// record when `kept_in_record` — but it is never announced as "counted".
    InterruptionNotRecorded {
        at: Now,
        interruption: Interruption,
        /// Why the ledger refused it.
        error: String,
        /// Today's record beside the ledger holds it (it survives a restart).
        kept_in_record: bool,
    },
    /// Something about the agent itself the owner should know (as `lull status` says it).
    Alert(Alert),
}

/// Told every notice of the driver (the CLI prints them, the tray notifies the owner).
pub type Observer = Box<dyn FnMut(&Notice) + Send>;

/// Everything the agent runs with.
pub struct AgentSetup {
    pub paths: Paths,
    pub config: Config,
    pub input_backends: Vec<Box<dyn InputBackend>>,
    pub guests: Box<dyn GuestHost>,
    pub observer: Option<Observer>,
    /// The coordinator the agent is linked to, for `lull status` (the link itself runs
    /// beside the driver: [`crate::assembly`]).
    pub coordinator: Option<control::CoordinatorLink>,
    /// Where the driver publishes whether it wants guest work now
    /// ([`crate::driver_link::may_lease_now`]), after every step: the link's job
    /// slots wait on it instead of asking the agent's status every second.
    pub accepting: Option<tokio::sync::watch::Sender<bool>>,
    /// The data directory's lock, held for the driver's life; on its wake-ups (at most
    /// every [`DATA_DIR_CHECK`]) the driver checks the directory is still in place
    /// (removed under the agent, it says so and stops with [`AgentError::DataDirGone`]
    /// rather than account into files that no longer exist). No timer of its own.
    pub data_lock: Option<crate::data_lock::DataDirLock>,
    /// How the coordinator link stands (a refused credential is said in the status).
    pub link_health: Option<tokio::sync::watch::Receiver<LinkHealth>>,
}

type ControlMsg = (Request, oneshot::Sender<Response>);

/// How many trace rows are buffered before they are written (a crash loses at most
/// this much trace; accounting is never buffered).
const TRACE_BATCH: usize = 30;

/// The reason of the transition that records the state an agent started in (its from and
/// to are that state).
pub const STARTED: &str = "agent started";
/// Set (to anything) to drive the agent's alarm with tokio's timer instead of the
/// kernel timer: for side-by-side idle-cost measurements (`lull bench idle --tokio-tick`).
pub const TOKIO_TICK_ENV: &str = "LULL_TOKIO_TICK";

/// The longest the driver sleeps: calendar deadlines are computed with the current
/// offset between the wall and the boot clock, so a wall clock set meanwhile (or a
/// daylight-saving change) is noticed within this.
const MAX_SLEEP: Duration = Duration::from_secs(60);

/// How often, at most, the driver checks that its data directory is still in place.
const DATA_DIR_CHECK: Duration = Duration::from_secs(2);

/// At most this long after it stopped, the driver still answers its link's last sync.
const LINK_DRAIN_MAX: Duration = Duration::from_secs(5);

/// Guests' totals are written to the ledger this often while they run.
const TOTALS_EVERY: Duration = Duration::from_secs(10);

struct Driver {
    paths: Paths,
    /// The owner's whole configuration in force; the policy holds its own sections.
    config: Config,
    policy: Policy,
    ledger: Ledger,
    guests: Box<dyn GuestHost>,
    observer: Option<Observer>,
    clock: SystemClock,
    boot: String,
    armed: Arc<AtomicBool>,
    fast_fired: Arc<AtomicBool>,
    last_interruption: Option<i64>,
    /// Each input backend: its name, and its name with what it cannot see.
    input_names: Vec<(String, String)>,
    /// Backends that stopped (name, why), written by their threads.
    input_stopped: StoppedInputs,
    /// The latest input signals' timings, written by the input threads.
    input_times: Arc<crate::input::InputTimes>,
    coordinator: Option<control::CoordinatorLink>,
    /// Whether guest work is wanted now, for the coordinator link's job slots.
    accepting: Option<tokio::sync::watch::Sender<bool>>,
    /// A `lull run --now` job's guest while its unsaved donate-now offer lasts.
    transient_donate: Option<String>,
    sensors: Sensors,
    /// Finds the owner's exclusive programs for each reading.
    programs: crate::programs::ProgramWatch,
    /// The exclusive programs as the process-connector thread matches them.
    exclusive: Arc<std::sync::RwLock<Vec<String>>>,
    /// Wakes the loop for a reading when a named program starts or ends; `None` once the
    /// connector thread has it (started when the list first has an entry).
    exec_wake: Option<mpsc::UnboundedSender<()>>,
    /// The process connector, subscribed only while guests are present.
    exec_watch: Option<crate::programs::ExecWatch>,
    /// Whether the sensors have had their first (discarded) reading.
    primed: bool,
    /// When the last reading was taken (none yet: the first is due at once).
    last_sample_at: Option<MonoMs>,
    /// Readings fed to the policy so far (the first after priming comes a sampling
    /// interval after start-up, whatever the watch).
    readings: u64,
    // Trace accumulation.
    trace_buf: Vec<TraceRow>,
    trace_start: i64,
    trace_cpu: (f32, u32),
    /// The owner's recent CPU readings, for the coordinator's instant recruitment.
    owner_load: crate::owner_load::OwnerLoadLog,
    trace_mem: u64,
    trace_input: bool,
    last_totals: std::time::Instant,
    /// Whether the totals written last were taken while the owner was present (guest
    /// work lingering or lent while light): the next write's growth is theirs.
    totals_owner_present: bool,
    /// The last seed 000 §5.2 migration decision logged (its kind), while lingering.
    migration_logged: Option<std::mem::Discriminant<crate::policy::MigrationDecision>>,
    guests_present: bool,
    /// Guests started for jobs (see [`JobGuest`]).
    jobs: Vec<JobGuest>,
    /// The guest whose migration request is under way (frozen until its answer).
    migration_asked: Option<String>,
    /// No migration request before this (the last answer was to stay).
    next_migration_ask: Option<MonoMs>,
    /// What the start-up check of the ledger found (said until its day ends).
    ledger_finding: Option<Finding>,
    /// The last interruption the ledger did not take, and for which day.
    write_failure: Option<(chrono::NaiveDate, Alert)>,
    /// Damage the background check found in the running ledger.
    ledger_damage: Option<String>,
    /// How the coordinator link stands.
    link_health: Option<tokio::sync::watch::Receiver<LinkHealth>>,
}

/// A guest started for a job.
struct JobGuest {
    id: String,
    /// Whom to tell when it ends (none for `lull run`'s jobs, which their command follows
    /// over the control socket).
    ended: Option<oneshot::Sender<GuestInfo>>,
    /// Its link's migration requests (a coordinator's task that may move on request).
    migration: Option<mpsc::Sender<MigrationAsk>>,
}

/// After an answer to stay, the next migration request waits `T_lingr` (for l = 0) again,
/// but at least this long…
const MIGRATION_REASK_MIN: Duration = Duration::from_secs(5);
/// …and at most this long.
const MIGRATION_REASK_MAX: Duration = Duration::from_secs(60);

/// Runs the agent until `shutdown` resolves.
pub async fn run(setup: AgentSetup, shutdown: impl Future<Output = ()>) -> Result<(), AgentError> {
    run_with_jobs(setup, None, shutdown).await
}

/// Where input backends that stopped say why (name, why), written by their threads.
type StoppedInputs = Arc<std::sync::Mutex<Vec<(String, String)>>>;

/// Each input backend on a thread of its own, feeding `sink`: their names (and each with
/// what it cannot see), and where a backend that stops says why.
fn start_input_threads(backends: Vec<Box<dyn InputBackend>>, sink: InputSink) -> (Vec<(String, String)>, StoppedInputs) {
    let mut input_names = Vec::new();
    let input_stopped = Arc::new(std::sync::Mutex::new(Vec::new()));
    for backend in backends {
        let name = format!("{} (cannot see: {})", backend.name(), backend.blind_spots());
        info!("input backend: {name}");
        let bname = backend.name();
        input_names.push((bname.to_string(), name));
        let sink = sink.clone();
        let stopped = input_stopped.clone();
        let spawned = std::thread::Builder::new().name(format!("input-{bname}")).spawn(move || {
            // Woken by the owner's first event while their build loads every core, this
            // thread must run at once: it freezes the guests (see `latency`).
            match crate::latency::short_slice_for_this_thread() {
                Ok(true) => tracing::debug!("input thread {bname}: short scheduler slice"),
                Ok(false) => {}
                Err(e) => tracing::info!("input thread {bname}: no short scheduler slice on this kernel ({e})"),
            }
            let why = match backend.run(sink) {
                Err(e) => e.to_string(),
                Ok(()) => "ended".to_string(),
            };
            warn!("input backend {bname} stopped: {why}");
            stopped.lock().unwrap_or_else(|p| p.into_inner()).push((bname.to_string(), why));
        });
        if let Err(e) = spawned {
            warn!("could not start input backend thread: {e}");
        }
    }
    if input_names.is_empty() {
        warn!("no input backend: availability rests on CPU and memory alone");
    }
    drop(sink);
    (input_names, input_stopped)
}

/// What the driver's loop listens to besides its own timer.
struct Inboxes {
    input: mpsc::UnboundedReceiver<InputEvent>,
    exec: mpsc::UnboundedReceiver<()>,
    control: mpsc::Receiver<ControlMsg>,
    /// The ledger's full check, until it answers.
    full_check: Option<oneshot::Receiver<Result<Option<String>, String>>>,
    link: Option<DriverInbox>,
}

/// Why the loop ended.
enum LoopEnd {
    Shutdown,
    /// The data directory was removed under the agent (its path).
    DataDirGone(String),
}

/// Runs the agent until `shutdown` resolves, also answering its coordinator link through
/// `link` (the driver's end of the link's [`crate::driver_link::DriverHandle`]): jobs run
/// as guests, the status, the outbox.
pub async fn run_with_jobs(setup: AgentSetup, link: Option<DriverInbox>, shutdown: impl Future<Output = ()>) -> Result<(), AgentError> {
    let (mut d, mut inboxes, data_lock) = Driver::start(setup, link)?;
    let end = d.serve(&mut inboxes, data_lock.as_ref(), shutdown).await;
    d.shutdown();
    if let Some(rx) = inboxes.link.as_mut() {
        d.serve_final_sync(rx).await;
    }
    drop(data_lock);
    match end {
        LoopEnd::DataDirGone(path) => Err(AgentError::DataDirGone { path }),
        LoopEnd::Shutdown => Ok(()),
    }
}

impl Driver {
    /// Opens the ledger (checked), binds the control socket, starts the input backends'
    /// threads and says the agent has started: the driver and what its loop listens to.
    fn start(setup: AgentSetup, link: Option<DriverInbox>) -> Result<(Self, Inboxes, Option<DataDirLock>), AgentError> {
        let AgentSetup { paths, config, input_backends, guests, observer, coordinator, accepting, data_lock, link_health } = setup;
        let clock = SystemClock;
        let now = clock.now();
        let boot = boot_id();
        // The ledger checked (and, damaged, set aside and salvaged) before anything counts.
        let facts = StartFacts {
            now,
            limit: config.budget.interruptions_per_day,
            ran_before: data_lock.as_ref().is_some_and(|l| l.existed_before()),
        };
        let checked = ledger_integrity::open_checked(&paths.ledger, &facts)?;
        let (mut ledger, ledger_finding) = (checked.ledger, checked.finding);
        let policy = Policy::new(config.policy(), now, checked.saved, checked.used, &boot);
        let full_check = Some(ledger_integrity::check_in_background(paths.ledger.clone()));
        let retention = config.sampling.trace_retention_days as i64 * 86_400;
        match ledger.prune_trace(now.utc.timestamp() - retention) {
            Ok(n) if n > 0 => info!(rows = n, "pruned old trace rows"),
            Ok(_) => {}
            Err(e) => warn!("could not prune the trace: {e}"),
        }
        let _ = &mut ledger;
        let sensors = Sensors::new()?;
        if !sensors.has_temperature() {
            info!("no CPU temperature sensor exposed by the OS: the temperature rule cannot apply");
        }

        // Input: each backend on its own thread; the fast path freezes guests directly.
        let (in_tx, in_rx) = mpsc::unbounded_channel::<InputEvent>();
        let armed = Arc::new(AtomicBool::new(false));
        let fast_fired = Arc::new(AtomicBool::new(false));
        let fast = guests.fast_freeze().map(|freeze| {
            let (armed, fired) = (armed.clone(), fast_fired.clone());
            Arc::new(move |_| {
                let fire = armed.swap(false, Ordering::AcqRel);
                if fire {
                    freeze();
                    fired.store(true, Ordering::Release);
                }
                fire
            }) as crate::input::FastPath
        });
        let sink = InputSink::new(in_tx, fast);
        let input_times = sink.times();
        let (input_names, input_stopped) = start_input_threads(input_backends, sink);

        let (exec_tx, exec_rx) = mpsc::unbounded_channel::<()>();

        // Control socket.
        let listener =
            control::bind(&paths.socket).map_err(|source| AgentError::Socket { path: paths.socket.display().to_string(), source })?;
        let (ctl_tx, ctl_rx) = mpsc::channel::<ControlMsg>(16);
        tokio::spawn(serve_control(listener, ctl_tx, control::PeerRules { guest_cgroup: guests.guest_cgroup() }));
        info!(socket = %paths.socket.display(), ledger = %paths.ledger.display(), "agent started");

        let mut d = Driver {
            paths,
            config,
            policy,
            ledger,
            guests,
            observer,
            clock,
            boot,
            armed,
            fast_fired,
            last_interruption: None,
            input_names,
            input_stopped,
            input_times,
            coordinator,
            accepting,
            transient_donate: None,
            sensors,
            programs: Default::default(),
            exclusive: Arc::new(std::sync::RwLock::new(Vec::new())),
            exec_wake: Some(exec_tx),
            exec_watch: None,
            primed: false,
            last_sample_at: None,
            readings: 0,
            trace_buf: Vec::new(),
            trace_start: now.utc.timestamp(),
            trace_cpu: (0.0, 0),
            owner_load: Default::default(),
            trace_mem: 0,
            trace_input: false,
            last_totals: std::time::Instant::now(),
            totals_owner_present: false,
            migration_logged: None,
            guests_present: false,
            jobs: Vec::new(),
            migration_asked: None,
            next_migration_ask: None,
            ledger_finding,
            write_failure: None,
            ledger_damage: None,
            link_health,
        };
        d.watch_execs();
        let first = d.policy.state();
        // The state the agent starts in opens today's timeline (a transition from and to it):
        // without it the time until the first change would be missing from Today.
        if let Err(e) = d.ledger.record_transition(now.utc, first, first, STARTED) {
            error!("could not record the state at start: {e}");
        }
        let (inputs, gdesc) = (d.input_names.iter().map(|(_, n)| n.clone()).collect(), d.guests.describe());
        d.notify(&Notice::Started { state: first, input: inputs, guests: gdesc });
        if let Some(alert) = d.finding_alert() {
            d.notify(&Notice::Alert(alert));
        }
        d.step(Event::Tick);
        let inboxes = Inboxes { input: in_rx, exec: exec_rx, control: ctl_rx, full_check, link };
        Ok((d, inboxes, data_lock))
    }

    /// The loop: one kernel timer set for the next moment anything can change, input,
    /// control requests and the coordinator link, until `shutdown` (or the data directory
    /// goes).
    async fn serve(&mut self, inboxes: &mut Inboxes, data_lock: Option<&DataDirLock>, shutdown: impl Future<Output = ()>) -> LoopEnd {
        let Inboxes { input: in_rx, exec: exec_rx, control: ctl_rx, full_check, link: link_rx } = inboxes;
        // One kernel timer, set for the next moment anything can change (see `alarm`).
        let mut alarm = if std::env::var_os(TOKIO_TICK_ENV).is_some() { Alarm::with_tokio_timer() } else { Alarm::new() };
        debug!(timer = alarm.kind(), "agent alarm");
        tokio::pin!(shutdown);
        let mut input_open = true;
        let mut dir_checked = std::time::Instant::now();
        let mut gone = None;
        loop {
            alarm.set(self.next_wake());
            tokio::select! {
                _ = &mut shutdown => break,
                _ = alarm.wait() => {
                    self.on_tick();
                    if let Some(lock) = data_lock.filter(|_| dir_checked.elapsed() >= DATA_DIR_CHECK) {
                        dir_checked = std::time::Instant::now();
                        if !lock.still_in_place() {
                            error!("the data directory {} was removed while the agent ran: stopping", self.paths.data_dir.display());
                            gone = Some(self.paths.data_dir.display().to_string());
                            break;
                        }
                    }
                }
                ev = in_rx.recv(), if input_open => match ev {
                    Some(ev) => {
                        self.trace_input = true;
                        self.step(Event::Input(ev));
                    }
                    None => input_open = false,
                },
                Some(()) = exec_rx.recv() => self.on_tick(),
                found = async { match full_check.as_mut() { Some(rx) => rx.await, None => std::future::pending().await } } => {
                    *full_check = None;
                    self.on_full_check(found.unwrap_or_else(|_| Err("the check's thread ended without an answer".into())));
                }
                changed = async { match self.link_health.as_mut() { Some(rx) => rx.changed().await, None => std::future::pending().await } } => {
                    match changed {
                        Ok(()) => self.on_link_health(),
                        Err(_) => self.link_health = None,
                    }
                }
                Some((req, reply)) = ctl_rx.recv() => {
                    let resp = self.on_request(req);
                    let _ = reply.send(resp);
                }
                msg = async { match link_rx.as_mut() { Some(rx) => rx.recv().await, None => std::future::pending().await } } => match msg {
                    Some(msg) => self.on_link(msg),
                    None => *link_rx = None,
                },
            }
        }
        match gone {
            Some(path) => LoopEnd::DataDirGone(path),
            None => LoopEnd::Shutdown,
        }
    }

    /// The link's last sync reads the outbox through this driver, final totals included:
    /// it is served (status and outbox only) until the link lets go, at most
    /// [`LINK_DRAIN_MAX`].
    async fn serve_final_sync(&mut self, rx: &mut DriverInbox) {
        let _ = tokio::time::timeout(LINK_DRAIN_MAX, async {
            while let Some(msg) = rx.recv().await {
                if matches!(msg, DriverMsg::Status(_) | DriverMsg::OutboxPending { .. } | DriverMsg::OutboxAcked { .. }) {
                    self.on_link(msg);
                }
            }
        })
        .await;
    }
}

impl Driver {
    fn notify(&mut self, n: &Notice) {
        if let Some(o) = self.observer.as_mut() {
            o(n);
        }
    }

    /// When the loop must next wake with no event: the policy's next deadline or the
    /// next reading, whichever is first. Readings come every sampling interval while a
    /// reading can stop guest work ([`Watch::Close`]), every relaxed interval otherwise;
    /// never more than [`MAX_SLEEP`] apart.
    fn next_wake(&self) -> MonoMs {
        let now = self.clock.now();
        let Some(last) = self.last_sample_at else { return now.mono };
        let every = match self.policy.watch() {
            _ if self.readings == 0 => self.config.sample_interval(),
            Watch::Close => self.config.sample_interval(),
            Watch::Relaxed => self.config.relaxed_sample_interval(),
        };
        let mut wake = last.plus(every.min(MAX_SLEEP));
        if let Some(deadline) = self.policy.next_deadline(now) {
            wake = wake.min(deadline);
        }
        wake
    }

    /// Takes a reading now unless the last one is younger than the sampling interval:
    /// guest work starts on a fresh reading, not on one a relaxed interval old.
    fn fresh_reading(&mut self) {
        let now = mono_now();
        if self.last_sample_at.is_none_or(|t| now.since(t) >= self.config.sample_interval()) {
            self.on_tick();
        }
    }

    /// A wake-up of the loop: notes the guests' comings and goings, takes a reading and
    /// feeds it to the policy (which also lets its deadlines expire).
    fn on_tick(&mut self) {
        let now = self.clock.now();
        let previous_sample = self.last_sample_at.replace(now.mono);
        let present = self.guests.present();
        if present != self.guests_present {
            self.guests_present = present;
            self.write_totals(now);
            self.step(Event::GuestsPresent(present));
        }
        if !self.jobs.is_empty() {
            self.check_jobs(now);
        }
        let t_migr = self.guests.migration_cost();
        self.policy.set_migration_cost(t_migr);
        let mut sample = self.sensors.sample(now.mono, self.guests.reading());
        // Folded into the reading: no wake-up of its own, nothing when the list is empty.
        sample.exclusive_program = self.programs.scan(&self.config.rules.exclusive_programs);
        if !self.primed {
            // The first tick comes at once after start-up: its CPU figure covers a few
            // milliseconds since the sensors were opened, too short to mean anything.
            self.primed = true;
            return;
        }
        self.trace_cpu.0 += sample.owner_cpu;
        self.trace_cpu.1 += 1;
        if let Some(prev) = previous_sample {
            self.owner_load.push(sample.owner_cpu, now.mono.since(prev).as_millis() as u64);
        }
        self.trace_mem = sample.owner_mem_bytes;
        self.readings += 1;
        self.step(Event::Sample(sample));
        if present && self.last_totals.elapsed() >= TOTALS_EVERY {
            self.write_totals(now);
        }
        if let Some(r) = self.guests.take_restore() {
            // One restore per eviction, recorded with the interruption that caused it and
            // never again with an older one (an eviction without an interruption, e.g.
            // for memory pressure, records nothing).
            if let Some(id) = self.last_interruption.take() {
                if let Err(e) = self.ledger.set_restore_times(id, r.anon_ms, r.file_cache_ms) {
                    error!("could not record the memory restore times: {e}");
                }
            }
            if r.anon_ms.is_some() || r.file_cache_ms.is_some() {
                info!(anon_ms = r.anon_ms, file_cache_ms = r.file_cache_ms, "owner memory restored after eviction");
                self.notify(&Notice::Restored { anon_ms: r.anon_ms, file_cache_ms: r.file_cache_ms });
            }
        }
        let t = now.utc.timestamp();
        let every = self.config.sampling.trace_interval_s as i64;
        if t - self.trace_start >= every {
            let (sum, n) = self.trace_cpu;
            self.trace_buf.push(TraceRow {
                t,
                owner_cpu: if n > 0 { sum / n as f32 } else { 0.0 },
                owner_mem_bytes: self.trace_mem,
                input: self.trace_input,
            });
            self.trace_start = t;
            self.trace_cpu = (0.0, 0);
            self.trace_input = false;
            if self.trace_buf.len() >= TRACE_BATCH {
                self.flush_trace();
            }
        }
    }

    /// Queues a job's guest; it starts once the policy accepts guest work and the
    /// runtime admits it.
    fn on_job(&mut self, job: JobRequest) {
        self.fresh_reading();
        match self.guests.start_guest(job.spec) {
            Some(id) => {
                info!(guest = %id, "job queued as a guest");
                let _ = job.started.send(Ok(id.clone()));
                self.jobs.push(JobGuest { id, ended: Some(job.ended), migration: job.migration });
                // Admission runs when the runtime is maintained: start it now if allowed.
                let present = self.guests.present();
                if present != self.guests_present {
                    self.guests_present = present;
                    self.write_totals(self.clock.now());
                    self.step(Event::GuestsPresent(present));
                }
            }
            None => {
                let _ = job.started.send(Err(format!("this agent runs no guest work ({})", self.guests.describe())));
            }
        }
    }

    /// Kills a job's guest at the link's request; the next tick notices its end and
    /// tells the link as for any other end.
    fn stop_job(&mut self, guest: &str) {
        if self.guests.kill_guest(guest) {
            info!(guest = %guest, "job's guest killed: its job was cancelled or its lease lost");
        } else {
            debug!(guest = %guest, "asked to stop a job's guest that is not queued or running");
        }
    }

    /// Tells the link about jobs' guests that have ended, after writing their final
    /// totals to the ledger.
    fn check_jobs(&mut self, now: Now) {
        let mut ended = Vec::new();
        let mut i = 0;
        while i < self.jobs.len() {
            let info = self.guests.guest_info(&self.jobs[i].id);
            match info {
                Some(info) if !matches!(info.phase, GuestPhase::Ended { .. }) => i += 1,
                other => {
                    let JobGuest { id, ended: tx, .. } = self.jobs.remove(i);
                    if self.migration_asked.as_ref() == Some(&id) {
                        // Gone while its link asked (cancelled, lease lost): no answer to wait for.
                        self.migration_asked = None;
                    }
                    match other {
                        Some(info) => ended.push((info, tx)),
                        None => warn!(guest = %id, "a job's guest vanished from the runtime"),
                    }
                }
            }
        }
        if ended.is_empty() {
            return;
        }
        self.write_totals(now);
        for (info, tx) in ended {
            if self.transient_donate.as_deref() == Some(info.id.as_str()) {
                // The job's own offer ends with it (unsaved, like the offer itself).
                if self.policy.status(now).donate_now {
                    info!(guest = %info.id, "the job's donate-now offer ends with the job");
                    self.step(Event::Command(Command::Resume));
                }
                self.transient_donate = None;
            }
            if let Some(tx) = tx {
                let _ = tx.send(info);
            }
        }
    }

    /// Accounts the guests' growth since the last write, as donated while the owner was
    /// present if the state then said so; then notes the current state for the next.
    fn write_totals(&mut self, now: Now) {
        self.last_totals = std::time::Instant::now();
        let day = self.policy.status(now).budget_day;
        for g in self.guests.totals() {
            if let Err(e) = self.ledger.record_guest_totals_while(day, now.utc, &g, self.totals_owner_present) {
                error!("could not account guest {}: {e}", g.guest);
            }
        }
        self.totals_owner_present = owner_present(self.policy.state());
    }

    fn flush_trace(&mut self) {
        if self.trace_buf.is_empty() {
            return;
        }
        if let Err(e) = self.ledger.append_trace(&self.trace_buf) {
            warn!("could not write {} trace rows: {e}", self.trace_buf.len());
        }
        self.trace_buf.clear();
    }

    fn step(&mut self, event: Event) {
        if matches!(event, Event::GuestsPresent(_)) {
            self.subscribe_execs();
        }
        // The pool decides whether its guests move (the driver asks it), unless guest work
        // of the owner's own (`lull run`) is here too: then the policy migrates as before.
        let pool_decides = !self.jobs.is_empty() && self.jobs.iter().all(|j| j.migration.is_some());
        self.policy.set_pool_view(crate::policy::PoolView { pool_decides, ..Default::default() });
        let now = self.clock.now();
        let command = match &event {
            Event::Command(c) => Some(*c),
            _ => None,
        };
        let actions = self.policy.handle(now, event);
        let mut accepted = false;
        for a in actions {
            match &a {
                Action::StateChanged { from, to, reason } => {
                    info!(from = from.as_str(), to = to.as_str(), reason = %reason, "state changed");
                    if self.guests_present && owner_present(*from) != owner_present(*to) {
                        // What ran until now ran in the state left.
                        self.write_totals(now);
                    }
                    if let Err(e) = self.ledger.record_transition(now.utc, *from, *to, reason) {
                        error!("could not record a transition: {e}");
                    }
                }
                Action::Directive(d) => {
                    info!(directive = ?d, "guest directive");
                    self.guests.apply(*d);
                    accepted |= *d == GuestDirective::Accept;
                }
                Action::InterruptionCounted(i) => {
                    if !self.record_interruption(now, i) {
                        // Said as not recorded, never as counted.
                        continue;
                    }
                }
                Action::OwnerSettingsChanged | Action::DayRolled { .. } => {
                    let mut saved = self.policy.saved(now, &self.boot);
                    let transient = self.transient_donate.is_some();
                    if transient {
                        // A `lull run --now` offer is never saved: a restart must not
                        // find the machine donated by a job that is gone.
                        saved.donate = None;
                    }
                    let written = match command {
                        Some(c) if !transient => self.ledger.record_command(now.utc, &c, &saved),
                        _ => self.ledger.store_saved(&saved),
                    };
                    if let Err(e) = written {
                        error!("could not persist the owner's settings: {e}");
                    }
                }
                Action::ClockStepped { by_ms } => warn!(by_ms, "wall clock was set; durations keep running on the monotonic clock"),
            }
            self.notify(&Notice::Action(now, a));
        }
        // The fast path froze guests on input; if the policy wants them running, thaw.
        if self.fast_fired.swap(false, Ordering::AcqRel) {
            let d = self.policy.directive();
            if matches!(d, GuestDirective::Accept | GuestDirective::Linger) {
                self.guests.apply(d);
            }
        }
        self.armed.store(self.policy.freeze_on_input(), Ordering::Release);
        self.log_migration_decision(now);
        self.ask_migration(now);
        if let Some(tx) = &self.accepting {
            let wanted = crate::driver_link::may_lease_now(self.policy.state(), self.policy.directive());
            tx.send_if_modified(|cur| std::mem::replace(cur, wanted) != wanted);
        }
        // Accept may have started queued guests: the policy learns it now, not at the next
        // relaxed reading (up to 10 s later), or an owner returning meanwhile would find
        // guest work the policy did not know it had recruited, evicted uncounted.
        if accepted && !self.guests_present && self.guests.present() {
            self.guests_present = true;
            self.write_totals(now);
            self.step(Event::GuestsPresent(true));
        }
    }

    /// Logs seed 000 §5.2's decision for lingering guest work whenever its kind changes
    /// (stay for want of a free machine, stay for now, the job ends first, migrate). The
    /// policy acts on it itself (LL evicts to migrate), except for a coordinator's guests,
    /// for which it says when to ask ([`Self::ask_migration`]).
    fn log_migration_decision(&mut self, now: Now) {
        let decision = self.policy.migration_decision(now);
        let kind = decision.map(|d| std::mem::discriminant(&d));
        if kind != self.migration_logged {
            if let Some(d) = decision {
                info!(decision = %d.describe(), h = self.policy.status(now).owner_utilisation_h, "lingering guest work: migration decision");
            }
            self.migration_logged = kind;
        }
    }

    /// Seed 000 §5.2 with a coordinator. Once a leased guest has lingered `T_lingr` for a
    /// free machine at l = 0 (the policy's decision: the earliest a move to any machine
    /// could pay), the driver asks the coordinator, which knows the free machines, their
    /// load and the job's predicted remaining time, whether to move it; after an answer
    /// to stay it asks again every `T_lingr` (5 to 60 s) while the guest lingers, since
    /// the episode's age and the free machines change the answer. The guest is frozen on
    /// its own while its link uploads its checkpoint and asks (the paper's guest is
    /// suspended for its migration), then killed (moved) or thawed
    /// ([`Self::on_migration_answer`]); the request runs in the link's task, never here.
    fn ask_migration(&mut self, now: Now) {
        let Some(lingered) = self.policy.lingered_for(now) else {
            self.next_migration_ask = None;
            return;
        };
        if self.migration_asked.is_some() || self.next_migration_ask.is_some_and(|t| now.mono < t) {
            return;
        }
        if self.policy.migration_decision(now) != Some(crate::policy::MigrationDecision::Migrate) {
            return;
        }
        let guests = &mut self.guests;
        let Some((id, tx, cpu_us)) = self.jobs.iter().find_map(|j| {
            let tx = j.migration.as_ref()?;
            let info = guests.guest_info(&j.id).filter(|i| i.phase == GuestPhase::Running)?;
            Some((j.id.clone(), tx.clone(), info.cpu_user_us + info.cpu_system_us))
        }) else {
            return;
        };
        let ask = MigrationAsk {
            owner_utilization: f64::from(self.policy.status(now).owner_utilisation_h).clamp(0.0, 1.0),
            owner_busy_for_s: lingered.as_secs_f64(),
            migration_cost_s: self.policy.migration_cost().as_secs_f64(),
            cpu_s: cpu_us as f64 / 1e6,
        };
        if !self.guests.hold_guest(&id, true) {
            debug!(guest = %id, "cannot freeze the lingering guest to ask for its migration");
            self.next_migration_ask = Some(now.mono.plus(MIGRATION_REASK_MIN));
            return;
        }
        match tx.try_send(ask) {
            Ok(()) => {
                info!(guest = %id, h = ask.owner_utilization, lingered_s = ask.owner_busy_for_s, t_migr_s = ask.migration_cost_s, cpu_s = ask.cpu_s,
                    "lingering guest: asking the coordinator whether to migrate it (frozen meanwhile)");
                self.migration_asked = Some(id);
            }
            Err(_) => {
                self.guests.hold_guest(&id, false);
                self.next_migration_ask = Some(now.mono.plus(MIGRATION_REASK_MIN));
            }
        }
    }

    /// Carries out a migration answer: moved, the guest is killed here outside the policy
    /// (no interruption; its donated time is accounted once, by this agent's ledger as it
    /// ends); else it is thawed and lingers on, asked about again later.
    fn on_migration_answer(&mut self, guest: &str, outcome: MigrationOutcome) {
        if self.migration_asked.as_deref() == Some(guest) {
            self.migration_asked = None;
        }
        let now = self.clock.now();
        match outcome {
            MigrationOutcome::Migrated(reason) => {
                info!(guest = %guest, reason = %reason, "lingering guest migrated: the coordinator took its task back with its checkpoint; stopped here");
                if !self.guests.kill_guest(guest) {
                    debug!(guest = %guest, "the migrated guest had already ended");
                }
            }
            MigrationOutcome::Stays(reason) | MigrationOutcome::Failed(reason) => {
                self.guests.hold_guest(guest, false);
                let h = self.policy.status(now).owner_utilisation_h;
                let again = crate::policy::Policy::linger_time(h, 0.0, self.policy.migration_cost())
                    .unwrap_or(MIGRATION_REASK_MAX)
                    .clamp(MIGRATION_REASK_MIN, MIGRATION_REASK_MAX);
                info!(guest = %guest, reason = %reason, again_in_s = again.as_secs_f64(), "lingering guest stays (thawed)");
                self.next_migration_ask = Some(now.mono.plus(again));
            }
        }
    }

    fn status(&mut self) -> AgentStatus {
        let now = self.clock.now();
        let policy = self.policy.status(now);
        let donated = self.ledger.donated_on(policy.budget_day).unwrap_or_default();
        let alerts = self.alerts(policy.budget_day);
        AgentStatus {
            policy,
            donated_cpu_s_today: donated.cpu_s,
            donated_wall_s_today: donated.wall_s,
            donated_present_cpu_s_today: donated.present_cpu_s,
            // What is live, and apart from it what stopped and why.
            input_backends: {
                let stopped = self.input_stopped.lock().unwrap_or_else(|p| p.into_inner());
                self.input_names.iter().filter(|(b, _)| !stopped.iter().any(|(s, _)| s == b)).map(|(_, n)| n.clone()).collect()
            },
            guest_runtime: self.guests.describe(),
            agent_version: env!("CARGO_PKG_VERSION").into(),
            pid: std::process::id(),
            local_time: now.local.format("%Y-%m-%dT%H:%M:%S").to_string(),
            input_stopped: self
                .input_stopped
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .iter()
                .map(|(b, why)| format!("{b}: {why}"))
                .collect(),
            coordinator: self.coordinator.clone(),
            owner_load: self.owner_load.clone(),
            guest_memory: self.guests.memory(),
            owner_memory: self.guests.owner_memory(),
            containment: self.guests.containment_status(),
            alerts,
            input_timings: self.input_times.recent(),
        }
    }

    /// Writes a counted interruption to the ledger, then today's record beside it; true
    /// when the ledger took it (only then is it announced as counted). Either way the
    /// policy keeps it counted: the budget stays conservative.
    fn record_interruption(&mut self, now: Now, i: &Interruption) -> bool {
        let saved = self.policy.saved(now, &self.boot);
        let written = self.ledger.record_interruption(i, &saved);
        let kept = ledger_integrity::keep_count(&self.paths.ledger, now, i.day, i.number, i.limit, self.ledger_damage.clone());
        if let Err(e) = &kept {
            error!("today's record beside the ledger could not be written: {e}");
        }
        match written {
            Ok(id) => {
                self.last_interruption = Some(id);
                info!(day = %i.day, number = i.number, limit = i.limit, cause = ?i.cause, "interruption counted");
                true
            }
            Err(e) => {
                let kept_in_record = kept.is_ok();
                error!(day = %i.day, number = i.number, limit = i.limit, cause = ?i.cause, kept_in_record, "interruption NOT written to the ledger: {e}");
                let alert = write_failure_alert(i, &e.to_string(), kept.err(), &self.paths.ledger);
                self.write_failure = Some((i.day, alert));
                self.notify(&Notice::InterruptionNotRecorded { at: now, interruption: i.clone(), error: e.to_string(), kept_in_record });
                false
            }
        }
    }

    /// The start-up check's finding as an alert, while its day lasts.
    fn finding_alert(&self) -> Option<Alert> {
        let f = self.ledger_finding.as_ref()?;
        Some(Alert { kind: f.kind, message: f.message.clone(), action: f.action.clone() })
    }

    /// What the status says about the agent itself on `day`.
    fn alerts(&self, day: chrono::NaiveDate) -> Vec<Alert> {
        let mut out = Vec::new();
        if self.ledger_finding.as_ref().is_some_and(|f| f.day == day) {
            out.extend(self.finding_alert());
        }
        if let Some(problem) = &self.ledger_damage {
            out.push(damage_alert(problem, &self.paths.ledger));
        }
        if let Some((_, a)) = self.write_failure.as_ref().filter(|(d, _)| *d == day) {
            out.push(a.clone());
        }
        if let Some(a) = self.link_health.as_ref().and_then(|h| h.borrow().alert()) {
            out.push(a);
        }
        out
    }

    /// The background `quick_check` answered: damage is said at once and noted in
    /// today's record, so the next start sets the ledger aside.
    fn on_full_check(&mut self, found: Result<Option<String>, String>) {
        match found {
            Ok(None) => {}
            Ok(Some(problem)) => {
                error!(ledger = %self.paths.ledger.display(), "the ledger is damaged (background quick_check): {problem}");
                if let Err(e) = ledger_integrity::remember_damage(&self.paths.ledger, self.clock.now(), &problem) {
                    warn!("the damage could not be noted in today's record: {e}");
                }
                let alert = damage_alert(&problem, &self.paths.ledger);
                self.ledger_damage = Some(problem);
                self.notify(&Notice::Alert(alert));
            }
            Err(e) => warn!("the ledger's background check could not run: {e}"),
        }
    }

    /// The coordinator link changed how it stands: a refused credential is said; once a
    /// credential works again, the link is shown as `coordinator.json` now names it
    /// (`lull enrol --replace` may have given this machine a new agent id).
    fn on_link_health(&mut self) {
        let alert = self.link_health.as_mut().and_then(|h| h.borrow_and_update().alert());
        match alert {
            Some(a) => self.notify(&Notice::Alert(a)),
            None => {
                let path = crate::coordinator_client::Credentials::path(&self.paths);
                if let (Some(link), Ok(Some(c))) = (self.coordinator.as_mut(), crate::coordinator_client::Credentials::load(&path)) {
                    if link.url.trim_end_matches('/') == c.url.trim_end_matches('/') {
                        link.agent_id = c.agent_id;
                    }
                }
            }
        }
    }

    /// One request of the coordinator link (see [`DriverMsg`]).
    fn on_link(&mut self, msg: DriverMsg) {
        match msg {
            DriverMsg::Run(job) => self.on_job(job),
            DriverMsg::Stop { guest } => self.stop_job(&guest),
            DriverMsg::Hold { guest, hold } => {
                if !self.guests.hold_guest(&guest, hold) {
                    debug!(guest = %guest, hold, "asked to hold or release a guest that is not running");
                }
            }
            DriverMsg::MigrationAnswered { guest, outcome } => self.on_migration_answer(&guest, outcome),
            DriverMsg::Status(reply) => {
                let _ = reply.send(self.status());
            }
            DriverMsg::OutboxPending { max, reply } => {
                let _ = reply.send(self.ledger.outbox_pending(max));
            }
            DriverMsg::OutboxAcked { through, reply } => {
                let _ = reply.send(self.ledger.outbox_acked(through));
            }
        }
    }

    fn on_request(&mut self, req: Request) -> Response {
        if matches!(req, Request::Pause { .. } | Request::Resume | Request::Donate { .. }) {
            // The owner's own word replaces a job's unsaved offer.
            self.transient_donate = None;
        }
        match req {
            Request::Status => {}
            Request::RunJob { spec, donate_now } => return self.run_job(*spec, donate_now),
            Request::Guest { id } => {
                return match self.guests.guest_info(&id) {
                    Some(info) => Response::Guest(Box::new(info)),
                    None => Response::Error { message: format!("no guest {id} on this agent") },
                };
            }
            Request::StopGuest { id } => {
                if !self.guests.stop_guest(&id) {
                    return Response::Error { message: format!("guest {id} is not queued or running on this agent") };
                }
                return match self.guests.guest_info(&id) {
                    Some(info) => Response::Guest(Box::new(info)),
                    None => Response::Error { message: format!("no guest {id} on this agent") },
                };
            }
            Request::Pause { span } => self.step(Event::Command(Command::Pause(span))),
            Request::Resume => self.step(Event::Command(Command::Resume)),
            Request::Donate { span } => self.step(Event::Command(Command::Donate(span))),
            Request::SetLimits { interruptions_per_day } => {
                let mut cfg = self.config.clone();
                cfg.budget.interruptions_per_day = interruptions_per_day;
                if let Err(e) = self.apply_config(cfg) {
                    return Response::Error { message: e };
                }
                self.step(Event::Command(Command::SetLimit(interruptions_per_day)));
            }
            Request::GetConfig => return Response::Config { config: Box::new(self.config.clone()) },
            Request::SetConfig { config } => {
                if let Err(e) = self.apply_config(*config) {
                    return Response::Error { message: e };
                }
                self.step(Event::Tick);
                return Response::Config { config: Box::new(self.config.clone()) };
            }
            Request::Today => return self.today(),
            Request::RunningPrograms => return Response::Programs { names: self.programs.running() },
        }
        Response::Status(Box::new(self.status()))
    }

    /// Queues a `lull run` job; with `donate_now`, offers the machine until the owner
    /// returns for as long as the job lasts, without saving the offer.
    fn run_job(&mut self, spec: GuestSpec, donate_now: bool) -> Response {
        self.fresh_reading();
        let Some(id) = self.guests.start_guest(spec) else {
            return Response::Error { message: format!("this agent runs no guest work ({})", self.guests.describe()) };
        };
        info!(guest = %id, donate_now, "job queued as a guest (lull run)");
        self.jobs.push(JobGuest { id: id.clone(), ended: None, migration: None });
        let now = self.clock.now();
        if donate_now && !self.policy.status(now).donate_now {
            self.transient_donate = Some(id.clone());
            self.step(Event::Command(Command::Donate(crate::policy::DonateSpan::UntilReturn)));
        }
        let present = self.guests.present();
        if present != self.guests_present {
            self.guests_present = present;
            self.write_totals(now);
            self.step(Event::GuestsPresent(present));
        }
        match self.guests.guest_info(&id) {
            Some(info) => Response::Guest(Box::new(info)),
            None => Response::Error { message: format!("guest {id} vanished as it was queued") },
        }
    }

    /// Writes what changed into the owner's config file (in place, keeping what they
    /// wrote) and adopts what the file then holds.
    fn apply_config(&mut self, cfg: Config) -> Result<(), String> {
        let merged = crate::config_file::save_changes(&self.paths.config_file, &self.config, &cfg).map_err(|e| e.to_string())?;
        info!(file = %self.paths.config_file.display(), "configuration changed");
        self.policy.set_config(merged.policy());
        self.config = merged;
        self.watch_execs();
        Ok(())
    }

    /// Hands the exclusive programs to the process-connector thread, starting it when
    /// the list first has an entry (an empty list costs no thread and no wake-up). Where
    /// it cannot run (no CAP_NET_ADMIN), readings alone find the programs.
    fn watch_execs(&mut self) {
        let list = &self.config.rules.exclusive_programs;
        *self.exclusive.write().unwrap_or_else(|p| p.into_inner()) = list.clone();
        if list.is_empty() {
            return;
        }
        let Some(tx) = self.exec_wake.take() else { return };
        match crate::programs::ExecWatch::start(self.exclusive.clone(), move || {
            let _ = tx.send(());
        }) {
            Ok(w) => {
                info!("exclusive programs: watching process starts while guests run (netlink process connector)");
                self.exec_watch = Some(w);
                self.subscribe_execs();
            }
            Err(e) => info!("exclusive programs: no process connector ({e}); each reading looks for them"),
        }
    }

    /// Process starts matter at once only while guests run (see `programs::ExecWatch`).
    fn subscribe_execs(&mut self) {
        let on = self.guests_present && !self.config.rules.exclusive_programs.is_empty();
        if let Some(w) = self.exec_watch.as_mut() {
            if let Err(e) = w.set_active(on) {
                warn!("exclusive programs: the process connector refused ({e}); each reading looks for them");
                self.exec_watch = None;
            }
        }
    }

    fn today(&mut self) -> Response {
        let now = self.clock.now();
        let day = self.policy.status(now).budget_day;
        let offset = now.local - now.utc.naive_utc();
        let start = day.and_hms_opt(0, 0, 0).map(|t| (t - offset).and_utc());
        let result = (|| -> Result<TodayReport, LedgerError> {
            let start = start.unwrap_or(now.utc);
            Ok(TodayReport {
                day,
                timeline: self.ledger.transitions(start, start + chrono::Duration::days(1))?,
                interruptions: self.ledger.interruptions(day)?,
                donated_days: self.ledger.donated_days(day, 7)?,
            })
        })();
        match result {
            Ok(r) => Response::Today(Box::new(r)),
            Err(e) => Response::Error { message: e.to_string() },
        }
    }

    fn shutdown(&mut self) {
        let now = self.clock.now();
        self.write_totals(now);
        self.guests.apply(GuestDirective::Evict);
        self.flush_trace();
        let _ = std::fs::remove_file(&self.paths.socket);
        info!(at_mono = mono_now().0, "agent stopped");
    }
}

async fn serve_control(listener: crate::sys::ipc::Listener, tx: mpsc::Sender<ControlMsg>, rules: control::PeerRules) {
    loop {
        let Ok(stream) = crate::sys::ipc::accept(&listener).await else { continue };
        let tx = tx.clone();
        let rules = rules.clone();
        tokio::spawn(async move {
            if let Some(who) = control::refused_peer(&stream, &rules) {
                warn!("refused a control connection from {who}");
                return;
            }
            let (mut rd, mut wr) = tokio::io::split(stream);
            let (resp, refused) = match control::read_request(&mut rd).await {
                Ok(req) => {
                    let (rtx, rrx) = oneshot::channel();
                    if tx.send((req, rtx)).await.is_err() {
                        return;
                    }
                    (rrx.await.unwrap_or(Response::Error { message: "agent is stopping".into() }), false)
                }
                Err(message) => {
                    warn!("control request refused: {message}");
                    (Response::Error { message }, true)
                }
            };
            let mut out = serde_json::to_string(&resp).unwrap_or_else(|_| r#"{"kind":"error","message":"unserializable"}"#.into());
            out.push('\n');
            let _ = wr.write_all(out.as_bytes()).await;
            if refused {
                let _ = wr.shutdown().await;
                control::discard_rest(&mut rd).await;
            }
        });
    }
}

/// The alert for an interruption the ledger did not take.
fn write_failure_alert(i: &Interruption, error: &str, record_error: Option<std::io::Error>, ledger: &std::path::Path) -> Alert {
    let kept = match record_error {
        None => {
            format!("it is kept in today's record {} and counts against today's budget", crate::budget_record::path_for(ledger).display())
        }
        Some(e) => format!("today's record could not be written either ({e}): the budget keeps it as used until the agent stops"),
    };
    Alert {
        kind: AlertKind::LedgerWriteFailed,
        message: format!("Interruption {} of {} could not be written to the ledger ({error}); {kept}.", i.number, i.limit),
        action: Some(format!("Check the disk that holds {} (full, read-only or failing).", ledger.display())),
    }
}

/// The alert for damage the background check found.
fn damage_alert(problem: &str, ledger: &std::path::Path) -> Alert {
    Alert {
        kind: AlertKind::LedgerDamaged,
        message: format!(
            "The ledger {} is damaged (SQLite's quick_check: {problem}). Today's count is safe in the record beside it.",
            ledger.display()
        ),
        action: Some(
            "Restart the agent: at start it sets the damaged file aside (kept, not deleted) and copies what it can into a new ledger."
                .into(),
        ),
    }
}

/// Guest work in this state runs (or is being stopped) while the owner is present: its
/// donated time is also recorded as the day's `present_*` part.
fn owner_present(state: crate::policy::StateKind) -> bool {
    use crate::policy::StateKind;
    matches!(state, StateKind::Lingering | StateKind::LendingLight | StateKind::Evicting)
}
