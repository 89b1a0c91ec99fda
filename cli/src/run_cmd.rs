//! `lull run -- CMD …`: runs one guest job under the policy, without a coordinator, so
//! containment, priority, freezing, eviction modes, memory caps and the sandbox can be
//! tried by hand.
//!
//! With an agent already running (`lull agent`, `lull up`, the tray app), the job is
//! handed to that agent over its control socket and followed to its end. With none, this
//! command runs its own complete agent (`agent_core::assembly`, as every entry point
//! does: real input, the guest runtime, the coordinator link when enrolled) and hands it
//! the job the same way. The job starts when the policy accepts guest work (after the
//! recruitment threshold, or at once with `--now`, an offer that is never saved and ends
//! with the job). The command exits when the job has ended: with the job's exit code, 75
//! if it was evicted, 128+N if killed by signal N. SIGINT, SIGTERM or SIGHUP stop the
//! job as an eviction would (75). A command that fails changes nothing.
//!
//! `--activity-fifo PATH` adds a diagnostic input backend: each byte written to the FIFO
//! is one owner input event (tests and benchmarks use it to exercise the fast path).

use crate::agent_cmd::{init_logging, print_notice};
use agent_core::agent::Notice;
use agent_core::assembly::{assemble, stop_signal, Extras};
use agent_core::config::{Config, EvictionMode, NetworkPolicy};
use agent_core::control::{call, ControlError, Request, Response};
use agent_core::guest::{GuestInfo, GuestPhase, GuestSpec, TaskOutcome};
use agent_core::input::{InputBackend, InputError, InputSink};
use agent_core::paths::Paths;
use anyhow::{anyhow, bail, Context, Result};
use clap::{Args, ValueEnum};
use std::io::Read;
use std::path::{Path, PathBuf};
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
    /// No network (the default).
    None,
    /// Outbound connections to the internet, never to this machine's own services; only
    /// where `[guests] network = "outbound"` allows it.
    Outbound,
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
    /// Network for the job (default: none).
    #[arg(long, value_enum)]
    pub network: Option<Network>,
    /// Removed: a guest always works in a new directory under Lull's data directory.
    #[arg(long, hide = true)]
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

fn job_spec(args: &RunArgs) -> Result<GuestSpec> {
    let (program, rest) = args.command.split_first().context("no command given")?;
    let mut spec = GuestSpec::new(program.clone(), rest.iter().cloned());
    spec.memory_cap_bytes = args.mem_cap_mib.map(|m| m << 20);
    spec.checkpointable = args.checkpoint;
    if let Some(dir) = &args.workdir {
        bail!(
            "--workdir {} was removed: a guest always works in a new directory under Lull's data directory (printed when it starts), never one a command names",
            dir.display()
        );
    }
    spec.network = args.network.map(|n| match n {
        Network::Outbound => NetworkPolicy::Outbound,
        Network::None => NetworkPolicy::None,
    });
    Ok(spec)
}

/// Whether an agent answers on `socket`, and its pid.
fn running_agent(socket: &Path) -> Option<u32> {
    match call(socket, &Request::Status) {
        Ok(Response::Status(s)) => Some(s.pid),
        _ => None,
    }
}

pub fn run(args: RunArgs) -> Result<u8> {
    agent_core::stdout::keep_running_when_closed();
    let mut paths = Paths::from_env()?;
    let spec = job_spec(&args)?;
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().context("starting the async runtime")?;
    if let Some(pid) = running_agent(&paths.socket) {
        // Everything is checked before anything is asked of the running agent.
        let own: Vec<&str> =
            [(args.config.is_some(), "--config"), (args.mode.is_some(), "--mode"), (args.activity_fifo.is_some(), "--activity-fifo")]
                .into_iter()
                .filter_map(|(given, name)| given.then_some(name))
                .collect();
        if !own.is_empty() {
            bail!(
                "an agent is already running (pid {pid}) and {} only apply to an agent `lull run` starts itself: drop {} or stop that agent first",
                own.join(", "),
                if own.len() == 1 { "it" } else { "them" }
            );
        }
        return rt.block_on(follow(paths.socket.clone(), spec, args.now, args.json));
    }
    let mut config = match &args.config {
        Some(c) => {
            paths.config_file = c.clone();
            Config::load_named(&paths.config_file)?
        }
        None => Config::load(&paths.config_file)?,
    };
    if let Some(m) = args.mode {
        config.eviction.mode = match m {
            Mode::Ie => EvictionMode::ImmediateEviction,
            Mode::Pm => EvictionMode::PauseAndMigrate,
            Mode::Ll => EvictionMode::LingerLonger,
            Mode::Lf => EvictionMode::LingerForever,
        };
    }
    let _guard = init_logging(&paths, "run")?;
    let mut extra_input: Vec<Box<dyn InputBackend>> = Vec::new();
    if let Some(fifo) = &args.activity_fifo {
        if !fifo.exists() {
            if let Err(e) = agent_core::sys::fs::make_fifo(fifo, 0o600) {
                bail!("creating FIFO {}: {e}", fifo.display());
            }
        }
        extra_input.push(Box::new(FifoInput(fifo.clone())));
    }
    let json = args.json;
    let observer: Box<dyn FnMut(&Notice) + Send> = Box::new(move |n: &Notice| print_notice(n, json));
    let agent = assemble(paths.clone(), config, Extras { observer: Some(observer), extra_input, ..Extras::default() })?;
    rt.block_on(async move {
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let mut own = tokio::spawn(agent.run(async move {
            let _ = stop_rx.await;
        }));
        // Hand the job over once this agent answers (or say why it never did).
        let socket = paths.socket.clone();
        let ready = async {
            loop {
                let s = socket.clone();
                if tokio::task::spawn_blocking(move || running_agent(&s)).await.ok().flatten() == Some(std::process::id()) {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        };
        tokio::select! {
            _ = ready => {}
            r = &mut own => {
                return match r {
                    Ok(Ok(())) => Err(anyhow!("the agent stopped during start-up")),
                    Ok(Err(e)) => Err(e.into()),
                    Err(e) => Err(anyhow!("the agent task failed: {e}")),
                };
            }
        }
        let code = follow(socket, spec, args.now, json).await;
        let _ = stop_tx.send(());
        match own.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!("the agent reported on stopping: {e}"),
            Err(e) => tracing::warn!("the agent task failed: {e}"),
        }
        code
    })
}

/// One control request, off the async thread (the agent may be on this very runtime).
async fn request(socket: &Path, req: Request) -> Result<Response, ControlError> {
    let socket = socket.to_path_buf();
    tokio::task::spawn_blocking(move || call(&socket, &req))
        .await
        .unwrap_or_else(|e| Err(ControlError::Protocol(format!("request task failed: {e}"))))
}

fn guest_of(r: Result<Response, ControlError>) -> Result<GuestInfo> {
    match r? {
        Response::Guest(g) => Ok(*g),
        Response::Error { message } => Err(anyhow!(message)),
        other => Err(anyhow!("unexpected answer from the agent: {other:?}")),
    }
}

/// Hands `spec` to the agent on `socket` and follows the guest to its end: its output
/// as it is written (the job's stdout.log and stderr.log), then its exit as the code.
async fn follow(socket: PathBuf, spec: GuestSpec, now: bool, json: bool) -> Result<u8> {
    // Listening before the job is handed over: a Ctrl-C as the guest starts stops it.
    let signal = stop_signal();
    let info = guest_of(request(&socket, Request::RunJob { spec: Box::new(spec), donate_now: now }).await)?;
    let id = info.id.clone();
    if !json {
        errln!("lull: job queued as guest {id}{}", if now { " (machine offered until you return)" } else { "" });
    }
    let mut out = Tail::new(info.stdout_log.clone());
    let mut err = Tail::new(info.stderr_log.clone());
    let mut announced = false;
    let mut stop_asked = false;
    tokio::pin!(signal);
    let mut poll = tokio::time::interval(Duration::from_millis(50));
    let info = loop {
        tokio::select! {
            _ = &mut signal, if !stop_asked => {
                stop_asked = true;
                errln!("lull: stopping guest {id}");
                if let Err(e) = guest_of(request(&socket, Request::StopGuest { id: id.clone() }).await) {
                    tracing::warn!("stopping guest {id}: {e}");
                }
            }
            _ = poll.tick() => {
                let info = match guest_of(request(&socket, Request::Guest { id: id.clone() }).await) {
                    Ok(i) => i,
                    Err(e) => bail!("lost the guest {id}: {e:#}"),
                };
                // A guest that could not start has only the runtime's note of why in its
                // stderr.log: the end report below says it.
                if !json && info.start_error.is_none() {
                    out.copy_to(&mut std::io::stdout());
                    err.copy_to(&mut std::io::stderr());
                }
                if !announced && info.pid.is_some() {
                    announced = true;
                    announce_start(&info, json);
                }
                // Ended: its output was all written before the answer above, so the copy
                // just made is the last.
                if matches!(info.phase, GuestPhase::Ended { .. }) {
                    break info;
                }
            }
        }
    };
    Ok(report_end(&info, json))
}

fn announce_start(info: &GuestInfo, json: bool) {
    if json {
        outln!(
            "{}",
            serde_json::json!({"event": "guest_started", "guest": info.id, "pid": info.pid, "workdir": info.workdir,
                "memory_limit_bytes": info.memory_limit_bytes})
        );
    } else {
        errln!(
            "lull: guest {} started: pid {}, workdir {}, memory cap {} MiB",
            info.id,
            info.pid.unwrap_or(0),
            info.workdir.display(),
            info.memory_limit_bytes.map_or("none".into(), |b| (b >> 20).to_string())
        );
    }
}

/// Says how the job ended and returns the command's exit code: the job's own, 128 + N
/// for signal N (also for a job the runtime stopped at a limit: the signal it ended by),
/// 127 for a program not found, 126 for one that could not be executed or was refused by
/// the sandbox, 75 if it was evicted.
fn report_end(info: &GuestInfo, json: bool) -> u8 {
    let GuestPhase::Ended { code, signal, evicted } = info.phase else { return 1 };
    let outcome = info.outcome();
    let cpu_s = (info.cpu_user_us + info.cpu_system_us) as f64 / 1e6;
    if json {
        outln!(
            "{}",
            serde_json::json!({"event": "guest_ended", "guest": info.id, "code": code, "signal": signal, "evicted": evicted,
                "outcome": outcome, "reason": outcome.as_ref().map(|o| o.describe()),
                "cpu_user_us": info.cpu_user_us, "cpu_system_us": info.cpu_system_us, "wall_ms": info.wall_ms,
                "peak_mem_bytes": info.peak_mem_bytes, "failure": info.failure})
        );
    } else {
        match (&outcome, evicted) {
            (_, true) => errln!("lull: guest {} evicted: {cpu_s:.2} CPU-s donated over {:.1} s", info.id, info.wall_ms as f64 / 1000.0),
            (Some(o), _) if info.start_error.is_some() => {
                // The runtime's words when they say more ("… (not on the guest's PATH=…)").
                let words = o.describe();
                let why = info.failure.as_ref().filter(|f| f.starts_with(&words)).unwrap_or(&words);
                errln!("lull: guest {} not started: {why}", info.id)
            }
            (Some(o), _) => errln!(
                "lull: guest {} {}: {cpu_s:.2} CPU-s donated over {:.1} s, peak memory {:.1} MiB",
                info.id,
                if o.succeeded() { "exited with code 0".to_string() } else { format!("failed: {}", o.describe()) },
                info.wall_ms as f64 / 1000.0,
                info.peak_mem_bytes as f64 / 1048576.0
            ),
            (None, _) => errln!("lull: guest {} ended without an exit status", info.id),
        }
    }
    match (evicted, outcome) {
        (true, _) => 75,
        // Stopped at a limit: as a shell would see the process end (SIGKILL for the disk,
        // SIGPIPE past the output cap), 126 when it ended otherwise (on Windows the job is
        // terminated with an NTSTATUS, which no u8 holds: clamped, it would read 0).
        (_, Some(TaskOutcome::Stopped { .. })) => match (code, signal) {
            (Some(c), _) if (0..=255).contains(&c) => c as u8,
            (_, Some(s)) => (128 + s).clamp(0, 255) as u8,
            _ => 126,
        },
        (_, Some(o)) => o.shell_code().clamp(0, 255) as u8,
        (_, None) => 1,
    }
}

/// Follows a file another process appends to, copying what is new.
struct Tail {
    path: PathBuf,
    at: u64,
}

impl Tail {
    fn new(path: PathBuf) -> Self {
        Self { path, at: 0 }
    }

    fn copy_to(&mut self, to: &mut impl std::io::Write) {
        use std::io::{Seek, SeekFrom};
        let Ok(mut f) = std::fs::File::open(&self.path) else { return };
        if f.seek(SeekFrom::Start(self.at)).is_err() {
            return;
        }
        let mut buf = Vec::new();
        if let Ok(n) = f.read_to_end(&mut buf) {
            self.at += n as u64;
            // A closed stdout or stderr loses the job's output, never the job.
            let _ = to.write_all(&buf).and_then(|()| to.flush());
        }
    }
}
