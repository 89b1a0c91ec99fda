//! `lull run -- CMD …`: runs one guest job under the policy, without a coordinator, so
//! containment, priority, freezing, eviction modes, memory caps and the sandbox can be
//! tried by hand. It is a whole agent (ledger, control socket, sensors, policy) with the
//! job queued in its guest runtime; the job starts when the policy accepts guest work
//! (after the recruitment threshold, or at once with `--now`), and the command exits when
//! the job has ended: with the job's exit code, 75 if it was evicted, 128+N if killed by
//! signal N.
//!
//! `--activity-fifo PATH` adds a diagnostic input backend: each byte written to the FIFO
//! is one owner input event (tests and benchmarks use it to exercise the fast path).

use crate::agent_cmd::{init_logging, print_notice};
use agent_core::agent::{self, AgentSetup, FastFreeze, GuestHost, Notice};
use agent_core::config::{Config, EvictionMode, NetworkPolicy};
use agent_core::control::{call, Request};
use agent_core::guest::linux::LinuxRuntime;
use agent_core::guest::{GuestInfo, GuestPhase, GuestRuntime, GuestSpec};
use agent_core::input::{InputBackend, InputError, InputSink};
use agent_core::ledger::GuestTotals;
use agent_core::paths::Paths;
use agent_core::policy::{DonateSpan, GuestDirective};
use agent_core::sensors::GuestReading;
use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use std::io::Read;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum Mode {
    /// Immediate eviction.
    Ie,
    /// Pause, then migrate.
    Pm,
    /// Linger longer (default).
    Ll,
    /// Linger forever.
    Lf,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum Network {
    Outbound,
    None,
    Allowed,
}

#[derive(Args, Debug)]
pub struct RunArgs {
    /// Configuration file (default: as for `lull agent`).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Offer the machine now ("donate until I return") instead of waiting to be idle.
    #[arg(long)]
    pub now: bool,
    /// Eviction mode when the owner returns (default: the configured one, LL unless changed).
    #[arg(long, value_enum)]
    pub mode: Option<Mode>,
    /// The job's memory cap, MiB (the configured cap and the owner reserve still apply).
    #[arg(long)]
    pub mem_cap_mib: Option<u64>,
    /// The job checkpoints on SIGTERM: evictions signal it and wait the kill grace.
    #[arg(long)]
    pub checkpoint: bool,
    /// Network policy for the job.
    #[arg(long, value_enum)]
    pub network: Option<Network>,
    /// The job's work directory (default: a new one under the data directory).
    #[arg(long)]
    pub workdir: Option<PathBuf>,
    /// Diagnostic input backend: each byte written to this FIFO is an owner input event.
    #[arg(long)]
    pub activity_fifo: Option<PathBuf>,
    /// Print state changes as JSON lines.
    #[arg(long)]
    pub json: bool,
    /// The job: a program and its arguments.
    #[arg(last = true, required = true)]
    pub command: Vec<String>,
}

/// The runtime plus what `lull run` watches: the job's end.
struct RunHost {
    rt: LinuxRuntime,
    id: String,
    ended: Arc<Mutex<Option<GuestInfo>>>,
    json: bool,
    announced: bool,
}

impl RunHost {
    fn check(&mut self) {
        let info = self.rt.guests().into_iter().find(|g| g.id == self.id);
        let Some(info) = info else { return };
        if !self.announced && info.pid.is_some() {
            self.announced = true;
            let line = if self.json {
                serde_json::json!({"event": "guest_started", "guest": info.id, "pid": info.pid, "workdir": info.workdir,
                    "memory_limit_bytes": info.memory_limit_bytes})
                .to_string()
            } else {
                format!(
                    "guest {} started: pid {}, workdir {}, memory cap {} MiB",
                    info.id,
                    info.pid.unwrap_or(0),
                    info.workdir.display(),
                    info.memory_limit_bytes.map_or("none".into(), |b| (b >> 20).to_string())
                )
            };
            outln!("{line}");
        }
        if matches!(info.phase, GuestPhase::Ended { .. }) {
            let mut e = self.ended.lock().unwrap_or_else(|p| p.into_inner());
            if e.is_none() {
                *e = Some(info);
            }
        }
    }
}

impl GuestHost for RunHost {
    fn describe(&self) -> String {
        self.rt.describe()
    }
    fn apply(&mut self, d: GuestDirective) {
        self.rt.apply(d);
        self.check();
    }
    fn present(&mut self) -> bool {
        let p = self.rt.present();
        self.check();
        p
    }
    fn reading(&mut self) -> GuestReading {
        self.rt.reading()
    }
    fn totals(&mut self) -> Vec<GuestTotals> {
        self.rt.totals()
    }
    fn fast_freeze(&self) -> Option<FastFreeze> {
        self.rt.fast_freeze()
    }
    fn take_restore_time(&mut self) -> Option<Duration> {
        self.rt.take_restore_time()
    }
}

/// Each byte read from a FIFO is one owner input event.
struct FifoInput(PathBuf);

impl InputBackend for FifoInput {
    fn name(&self) -> &'static str {
        "fifo (diagnostic)"
    }
    fn blind_spots(&self) -> &'static str {
        "everything but bytes written to its FIFO"
    }
    fn run(self: Box<Self>, sink: InputSink) -> Result<(), InputError> {
        let fail = |why: String| InputError::Failed { backend: "fifo", why };
        // Read-write, so the FIFO never reports end-of-file when a writer closes it.
        let mut f = std::fs::OpenOptions::new().read(true).write(true).open(&self.0).map_err(|e| fail(e.to_string()))?;
        let mut buf = [0u8; 64];
        loop {
            let n = f.read(&mut buf).map_err(|e| fail(e.to_string()))?;
            for _ in 0..n {
                if !sink.activity() {
                    return Ok(());
                }
            }
        }
    }
}

pub fn run(args: RunArgs) -> Result<u8> {
    crate::out::keep_running_when_closed();
    let mut paths = Paths::from_env()?;
    if let Some(c) = &args.config {
        paths.config_file = c.clone();
    }
    let mut config = Config::load(&paths.config_file)?;
    if let Some(m) = args.mode {
        config.eviction.mode = match m {
            Mode::Ie => EvictionMode::ImmediateEviction,
            Mode::Pm => EvictionMode::PauseAndMigrate,
            Mode::Ll => EvictionMode::LingerLonger,
            Mode::Lf => EvictionMode::LingerForever,
        };
    }
    let _guard = init_logging(&paths, "run")?;
    let (program, rest) = args.command.split_first().context("no command given")?;
    let mut spec = GuestSpec::new(program.clone(), rest.iter().cloned());
    spec.memory_cap_bytes = args.mem_cap_mib.map(|m| m << 20);
    spec.checkpointable = args.checkpoint;
    spec.workdir = args.workdir.clone();
    spec.network = args.network.map(|n| match n {
        Network::Outbound => NetworkPolicy::Outbound,
        Network::None => NetworkPolicy::None,
        Network::Allowed => NetworkPolicy::Allowed,
    });
    std::fs::create_dir_all(&paths.data_dir).with_context(|| format!("creating {}", paths.data_dir.display()))?;
    let mut rt = LinuxRuntime::new(&config, &paths.data_dir);
    let id = rt.submit(spec);
    let ended = Arc::new(Mutex::new(None));
    let host = RunHost { rt, id, ended: ended.clone(), json: args.json, announced: false };
    let mut backends: Vec<Box<dyn InputBackend>> = Vec::new();
    if let Some(fifo) = &args.activity_fifo {
        if !fifo.exists() {
            let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).context("FIFO path")?;
            // SAFETY: mkfifo with a valid NUL-terminated path.
            if unsafe { libc::mkfifo(c.as_ptr(), 0o600) } != 0 {
                bail!("creating FIFO {}: {}", fifo.display(), std::io::Error::last_os_error());
            }
        }
        backends.push(Box::new(FifoInput(fifo.clone())));
    }
    if args.now {
        let socket = paths.socket.clone();
        std::thread::spawn(move || {
            for _ in 0..400 {
                if call(&socket, &Request::Donate { span: DonateSpan::UntilReturn }).is_ok() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(25));
            }
        });
    }
    let json = args.json;
    let observer = Box::new(move |n: &Notice| print_notice(n, json));
    let setup = AgentSetup { paths, config, input_backends: backends, guests: Box::new(host), observer: Some(observer) };
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().context("starting the async runtime")?;
    let done = ended.clone();
    rt.block_on(async move {
        let shutdown = async {
            let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
            let finished = async {
                loop {
                    if done.lock().map(|d| d.is_some()).unwrap_or(true) {
                        return;
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            };
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {},
                _ = async { match term.as_mut() { Some(t) => { t.recv().await; } None => std::future::pending().await } } => {},
                _ = finished => {},
            }
        };
        agent::run(setup, shutdown).await
    })?;
    let info = ended.lock().unwrap_or_else(|p| p.into_inner()).take();
    let Some(info) = info else {
        outln!("stopped before the guest ended (it was evicted on shutdown)");
        return Ok(75);
    };
    let GuestPhase::Ended { code, signal, evicted } = info.phase else { return Ok(1) };
    let cpu_s = (info.cpu_user_us + info.cpu_system_us) as f64 / 1e6;
    if json {
        outln!(
            "{}",
            serde_json::json!({"event": "guest_ended", "guest": info.id, "code": code, "signal": signal, "evicted": evicted,
                "cpu_user_us": info.cpu_user_us, "cpu_system_us": info.cpu_system_us, "wall_ms": info.wall_ms,
                "peak_mem_bytes": info.peak_mem_bytes})
        );
    } else {
        let how = match (evicted, code, signal) {
            (true, _, _) => "evicted".to_string(),
            (_, Some(c), _) => format!("exited with code {c}"),
            (_, _, Some(s)) => format!("killed by signal {s}"),
            _ => "ended".into(),
        };
        outln!(
            "guest {} {how}: {cpu_s:.2} CPU-s donated over {:.1} s, peak memory {:.1} MiB",
            info.id,
            info.wall_ms as f64 / 1000.0,
            info.peak_mem_bytes as f64 / 1048576.0
        );
    }
    Ok(match (evicted, code, signal) {
        (true, _, _) => 75,
        (_, Some(c), _) => c.clamp(0, 255) as u8,
        (_, _, Some(s)) => (128 + s).clamp(0, 255) as u8,
        _ => 1,
    })
}
