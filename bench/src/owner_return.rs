//! `lull-bench owner-return`: the owner's return timed end to end on the product's own
//! binaries, from outside the agent.
//!
//! For each case a fresh instance runs in a directory of its own under a private Xvfb:
//! `lull up` (coordinator and enrolled agent in one process) or `lull-tray` enrolled to a
//! `lull coordinator serve`. One job is submitted to the coordinator: a CPU-bound Python
//! guest that writes `CLOCK_MONOTONIC` nanoseconds into `$HOME/lull-heartbeat` in a tight
//! loop. Each round waits until the guest runs (its heartbeat advancing and its cgroup
//! neither frozen nor empty), then this process, a separate X client, sends one relative
//! XTest motion (flushed, no round trip) and at once starts the returning owner's load
//! (0, 1 or 2 busy threads). The stop is observed from outside the agent: the guests'
//! cgroup `frozen 1` or `populated 0` polled every 50 µs by a SCHED_FIFO thread, and the
//! guest's own last heartbeat. Latency = last heartbeat − motion sent; a round whose
//! guest still runs 1 s after the motion is a miss. For recruited guests the new
//! interruption's cause must be `input`.
//!
//! Each round is split: when a listener of ours had the input (a separate X client; for a
//! pty, a SCHED_FIFO watcher of its reads), when the agent's input thread had it and when
//! its fast path froze (the agent's own timestamps, `input_timings` in its status), when
//! the freeze was asked and confirmed, and whether the hypervisor took CPU time from the
//! machine meanwhile (`/proc/stat` steal). The worst round of each case is printed whole.
//!
//! Cases: agent (up, tray) × eviction mode (ie, pm, ll, lf) × load (0, 1, 2 cores) with
//! ordinary recruitment, plus agent × load with *donate until I return* (the mode does
//! not apply: the return ends the offer).
//!
//! `--input pty`: the owner types instead of moving the mouse. The agents run the
//! terminal input backend only (`[input] backend = "terminal"`), and each round writes one
//! line into a `script(1)` session this process keeps open (a pty whose program, `cat`,
//! reads it as a shell reads a typed command), as an owner typing over ssh or in a text
//! console. Latency runs from the write.

use agent_core::control::{call, Request, Response};
use agent_core::policy::{DonateSpan, StateKind};
use anyhow::{bail, Context, Result};
use clap::Args;
use lull_e2e::coordinator::Coordinator;
use lull_e2e::percentile;
use lull_e2e::process::{terminate, wait_until};
use lull_e2e::{agent_env, agent_status, find_unified_base, lull_bin, purge_cgroup_base, try_start_agent, Xvfb};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Args, Debug)]
pub struct OwnerReturnArgs {
    /// Rounds per case.
    #[arg(long, default_value_t = 20)]
    pub rounds: usize,
    /// Agents to run: up, tray (comma-separated).
    #[arg(long, default_value = "up,tray", value_delimiter = ',')]
    pub agents: Vec<String>,
    /// Eviction modes for recruited guests: ie, pm, ll, lf (comma-separated).
    #[arg(long, default_value = "ie,pm,ll,lf", value_delimiter = ',')]
    pub modes: Vec<String>,
    /// Cores the returning owner loads right after the motion (comma-separated).
    #[arg(long, default_value = "0,1,2", value_delimiter = ',')]
    pub loads: Vec<usize>,
    /// Offers: recruit (the recruitment threshold) and donate (donate until I return).
    #[arg(long, default_value = "recruit,donate", value_delimiter = ',')]
    pub offers: Vec<String>,
    /// The owner's input: `x11` (one XTest motion) or `pty` (a line typed into a
    /// terminal session; the agents run the terminal backend).
    #[arg(long, default_value = "x11", value_parser = ["x11", "pty"])]
    pub input: String,
    /// The tray host the `lull-tray` cases run beside: `trayer` (an XEmbed tray on the
    /// private display, as on an owner's desktop: the tray shows its icon and opens no
    /// window) or `none` (no host: the tray opens its status window, a WebKit view drawn
    /// on the same X server while the owner returns).
    #[arg(long, default_value = "trayer", value_parser = ["trayer", "none"])]
    pub tray_host: String,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

/// The guest: CPU-bound, writing its monotonic clock as 20 ASCII digits at offset 0.
const HEARTBEAT_GUEST: &str = "import os, time\n\
fd = os.open(os.path.join(os.environ['HOME'], 'lull-heartbeat'), os.O_WRONLY | os.O_CREAT, 0o644)\n\
while True:\n    os.pwrite(fd, b'%020d' % time.monotonic_ns(), 0)\n";

/// The instance's daily interruption budget: the most the config allows. A recruited round
/// spends one, so a case starts a fresh instance every `BUDGET` rounds.
const BUDGET: usize = 20;

fn mono_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes into a valid timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn mode_name(m: &str) -> Result<&'static str> {
    Ok(match m {
        "ie" => "immediate-eviction",
        "pm" => "pause-and-migrate",
        "ll" => "linger-longer",
        "lf" => "linger-forever",
        other => bail!("--modes: unknown mode {other:?} (allowed: ie, pm, ll, lf)"),
    })
}

/// One case's instance: its processes (killed on drop) and where to look.
struct Instance {
    dir: tempfile::TempDir,
    pool: Option<Coordinator>,
    base: String,
    procs: Vec<Child>,
}

impl Instance {
    fn socket(&self) -> PathBuf {
        self.dir.path().join("agent.sock")
    }

    /// The coordinator's data directory (submit, reports).
    fn pool_dir(&self) -> &Path {
        self.pool.as_ref().map_or(self.dir.path(), |p| p.dir.path())
    }

    fn status(&self) -> Option<agent_core::control::AgentStatus> {
        agent_status(&self.socket())
    }

    fn interruptions(&self) -> Vec<agent_core::ledger::InterruptionRow> {
        match call(&self.socket(), &Request::Today) {
            Ok(Response::Today(t)) => t.interruptions,
            _ => Vec::new(),
        }
    }

    /// The guests' instance cgroup in the unified hierarchy (`…/<base>/guests/<instance>`).
    fn guests_cgroup(&self) -> Option<PathBuf> {
        let g = find_unified_base(&self.base)?.join("guests");
        std::fs::read_dir(&g).ok()?.flatten().map(|e| e.path()).find(|p| p.join("cgroup.events").exists())
    }

    /// Where the instance's guests work (its data directory, or for a root agent the
    /// execute directory its guests' account can reach).
    fn work_root(&self) -> PathBuf {
        agent_core::paths::Paths::under(self.dir.path()).work_root()
    }

    /// The heartbeat file of the running guest (the newest under the work root's jobs/, in
    /// the guest's work directory, its `HOME`).
    fn heartbeat_file(&self) -> Option<PathBuf> {
        let jobs = self.work_root().join("jobs");
        std::fs::read_dir(jobs)
            .ok()?
            .flatten()
            .map(|e| e.path().join("work/lull-heartbeat"))
            .filter(|p| p.exists())
            .max_by_key(|p| std::fs::metadata(p).and_then(|m| m.modified()).ok())
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        for p in &mut self.procs {
            terminate(p, Duration::from_secs(20));
        }
        purge_cgroup_base(&self.base);
        let work = self.work_root();
        if work.starts_with(agent_core::paths::EXECUTE_ROOT) {
            let _ = std::fs::remove_dir_all(work);
        }
    }
}

/// The environment of one bench machine whose data directory is `d`: its own config,
/// ledger, control socket and cgroup base, X on `display`, no D-Bus session, no
/// coordinator from the caller's environment; stderr into `d/instance.log`.
pub(crate) fn machine_env(c: &mut Command, d: &Path, base: &str, display: &str) {
    agent_env(c, d)
        .env("LULL_CGROUP", base)
        .env("DISPLAY", display)
        .env("WAYLAND_DISPLAY", "")
        .env("DBUS_SESSION_BUS_ADDRESS", format!("unix:path={}", d.join("no-bus").display()))
        .env("NO_AT_BRIDGE", "1")
        .env("XDG_CONFIG_HOME", d.join("xdg-config"))
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(d.join("instance.log")).map(Stdio::from).unwrap_or_else(|_| Stdio::null()));
}

/// Starts one instance of `agent` with eviction `mode` and submits the heartbeat job.
fn start_instance(agent: &str, mode: &str, display: &str, input: &str, n: usize) -> Result<Instance> {
    let dir = tempfile::tempdir()?;
    let backend = if input == "pty" { "terminal" } else { "x11" };
    let config = format!(
        "[availability]\nrecruitment_threshold_s = 1\nowner_cpu_max = 0.9\nmemory_growth_max = 1.0\n\n\
         [budget]\ninterruptions_per_day = {BUDGET}\n\n[eviction]\nmode = \"{}\"\n\n[input]\nbackend = \"{backend}\"\n",
        mode_name(mode)?
    );
    std::fs::write(dir.path().join("config.toml"), config)?;
    let base = format!("lull-bench-return-{}-{n}", std::process::id());
    let mut inst = Instance { dir, pool: None, base, procs: Vec::new() };
    let lull = lull_bin();
    let d = inst.dir.path().to_path_buf();
    let mut c = match agent {
        "up" => {
            let mut c = Command::new(&lull);
            c.args(["up", "--listen", "127.0.0.1:0", "--owner", "bench", "--machine", "bench-up"]);
            c
        }
        "tray" => {
            let tray = lull.with_file_name("lull-tray");
            if !tray.exists() {
                bail!("{} is missing: build it first (cargo build --release -p lull-tray)", tray.display());
            }
            let pool = Coordinator::try_start(&[])?;
            pool.enrol(&d, "bench", "bench-tray")?;
            inst.pool = Some(pool);
            Command::new(&tray)
        }
        other => bail!("--agents: unknown agent {other:?} (allowed: up, tray)"),
    };
    machine_env(&mut c, &d, &inst.base, display);
    let child = try_start_agent(&mut c, &inst.socket(), Duration::from_secs(60), |s| s.coordinator.is_some())
        .with_context(|| format!("starting {agent}: {}", std::fs::read_to_string(d.join("instance.log")).unwrap_or_default()))?;
    inst.procs.push(child);
    let out = Command::new(&lull)
        .args(["submit", "--", "python3", "-c", HEARTBEAT_GUEST])
        .env("LULL_DATA_DIR", inst.pool_dir())
        .env_remove("LULL_COORDINATOR_URL")
        .env_remove("LULL_KEY")
        .output()?;
    if !out.status.success() {
        bail!("submit: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(inst)
}

fn read_heartbeat(f: &std::fs::File) -> Option<u64> {
    let mut buf = [0u8; 20];
    let n = f.read_at(&mut buf, 0).ok()?;
    std::str::from_utf8(&buf[..n]).ok()?.trim().parse().ok()
}

fn events_say(events: &std::fs::File, buf: &mut [u8]) -> (bool, bool) {
    let n = events.read_at(buf, 0).unwrap_or(0);
    let s = std::str::from_utf8(&buf[..n]).unwrap_or("");
    (s.contains("populated 1"), s.contains("frozen 1"))
}

#[derive(Default, Debug)]
struct CaseResult {
    latencies_ms: Vec<f64>,
    missed: usize,
    /// Rounds where the guest had stopped before the motion was sent.
    early: usize,
    /// When the kernel reported the guest's cgroup frozen (or empty), after the motion.
    frozen_ms: Vec<f64>,
    /// When the agent asked for the freeze (`cgroup.freeze` read back "1"), after the
    /// motion: the X server's delivery plus the agent's input thread. The rest of the
    /// frozen time is the kernel reaching every guest task.
    asked_ms: Vec<f64>,
    /// When a separate X client at normal priority (standing for any client of the
    /// owner's session, and for the agent's connection) received the motion as an XI2
    /// raw event: the X server's part of `asked_ms`.
    x_ms: Vec<f64>,
    /// Per round, from the listener's receipt to the freeze request: the agent's own part
    /// (its input thread woken by the same delivery, then the write to `cgroup.freeze`).
    agent_ms: Vec<f64>,
    /// When the agent's input thread handed the signal on, after the input (the agent's
    /// own timestamp, `input_timings` in its status): delivery plus the thread's wake-up.
    received_ms: Vec<f64>,
    /// From that hand-over to the freeze request: the agent's work on the signal.
    work_ms: Vec<f64>,
    /// Rounds whose first signal the fast path did not freeze on (the agent's loop did).
    slow_path: usize,
    /// The round that ran on longest, split.
    worst: Option<RoundSplit>,
    /// Rounds during which the hypervisor ran something else on this machine's CPUs
    /// (`/proc/stat` steal time grew): a stall no process here can help.
    stolen: usize,
    wrong_cause: usize,
    no_start: usize,
}

/// One round's times after the input, in ms: where the worst round's time went.
#[derive(Clone, Copy, Debug, serde::Serialize)]
struct RoundSplit {
    /// The headline: the guest's last heartbeat.
    ran_on_ms: f64,
    /// A listener of ours had the input (X: a separate X client; pty: a SCHED_FIFO watcher
    /// of the pty's reads).
    delivered_ms: Option<f64>,
    /// The agent's input thread handed the signal on (the agent's own timestamp).
    received_ms: Option<f64>,
    /// The fast path's freeze written, by the agent's timestamp (none: the loop froze).
    fast_froze_ms: Option<f64>,
    /// `cgroup.freeze` read back "1".
    asked_ms: f64,
    /// The kernel said frozen (or empty).
    frozen_ms: f64,
    /// CPU time the hypervisor took from this machine during the round (`/proc/stat`
    /// steal, in its 10-ms ticks: a tick may stand for less).
    stolen_ms: f64,
}

/// The machine's CPU time stolen by the hypervisor so far, in `USER_HZ` ticks (the
/// eighth number of `/proc/stat`'s `cpu` line; 0 where it is not there).
fn steal_ticks() -> u64 {
    std::fs::read_to_string("/proc/stat")
        .ok()
        .and_then(|s| s.lines().next().and_then(|l| l.split_whitespace().nth(8)).and_then(|v| v.parse().ok()))
        .unwrap_or(0)
}

/// Busy threads standing for the returning owner's build: they spin while `on` is set.
struct Load {
    on: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Load {
    fn start(n: usize) -> Self {
        let on = Arc::new(AtomicBool::new(true));
        let threads = (0..n)
            .map(|_| {
                let on = on.clone();
                std::thread::spawn(move || {
                    let normal = libc::sched_param { sched_priority: 0 };
                    // SAFETY: sets the calling thread's policy with a valid parameter.
                    unsafe { libc::sched_setscheduler(0, libc::SCHED_OTHER, &normal) };
                    let mut x = 0u64;
                    while on.load(Ordering::Relaxed) {
                        x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
                    }
                })
            })
            .collect();
        Self { on, threads }
    }

    fn stop(self) {
        self.on.store(false, Ordering::Relaxed);
        for t in self.threads {
            let _ = t.join();
        }
    }
}

/// The returning owner's side of X: the XTest connection that sends the motion and the
/// listener's clock of when X delivered it; or, with `--input pty`, the terminal session
/// the owner types into.
struct Returner<C> {
    xtest: C,
    root: u32,
    seen: Arc<AtomicU64>,
    pty: Option<Child>,
}

impl<C> Drop for Returner<C> {
    fn drop(&mut self) {
        if let Some(mut script) = self.pty.take() {
            let _ = script.kill();
            let _ = script.wait();
        }
    }
}

/// A separate X client on its own thread at normal priority, selecting XI2 raw input
/// like the agent's backend: the time (`mono_ns`) it last received an event.
fn x_listener(display: &str) -> Result<Arc<AtomicU64>> {
    use x11rb::connection::Connection as _;
    let (conn, screen) = x11rb::connect(Some(display)).context("connecting the X listener")?;
    agent_core::input::x11::select_raw_input(&conn, screen).map_err(|e| anyhow::anyhow!("selecting raw input: {e}"))?;
    conn.flush()?;
    let seen = Arc::new(AtomicU64::new(0));
    let out = seen.clone();
    std::thread::Builder::new().name("x-listener".into()).spawn(move || {
        while let Ok(ev) = conn.wait_for_event() {
            if agent_core::input::x11::is_raw_input(&ev) {
                let _ = out.compare_exchange(0, mono_ns(), Ordering::SeqCst, Ordering::SeqCst);
            }
        }
    })?;
    Ok(seen)
}

/// The running guest's files, opened while it ran: its cgroup's `cgroup.events` and
/// `cgroup.freeze`, and its heartbeat.
struct RunningGuest {
    events: std::fs::File,
    freeze: std::fs::File,
    heartbeat: std::fs::File,
}

/// Offers the machine first with *donate until I return*, then waits for a running guest;
/// with donate, also until the offer is armed. `None` (counted in `no_start`): no guest
/// ran within 90 s.
fn running_guest(inst: &Instance, donate: bool, r: &mut CaseResult) -> Result<Option<RunningGuest>> {
    if donate && !inst.status().is_some_and(|s| s.policy.donate_now) {
        match call(&inst.socket(), &Request::Donate { span: DonateSpan::UntilReturn }) {
            Ok(Response::Status(_)) => {}
            other => bail!("donate: {other:?}"),
        }
    }
    let offered = Instant::now();
    // A recruited (or offered) running guest: the agent donating, the guests' cgroup
    // populated and not frozen, the heartbeat advancing. (A lingering guest also runs,
    // but the owner is already back then.)
    // Some(None): the day's interruptions are used up, no guest will come (a bench bug:
    // each instance is given at most BUDGET recruited rounds).
    let running = wait_until("a running guest", Duration::from_secs(90), || {
        let state = inst.status().map(|s| s.policy.state);
        if state == Some(StateKind::OutOfBudget) {
            return Some(None);
        }
        if state != Some(StateKind::Donating) {
            return None;
        }
        let cg = inst.guests_cgroup()?;
        let events = std::fs::File::open(cg.join("cgroup.events")).ok()?;
        let (populated, frozen) = events_say(&events, &mut [0u8; 256]);
        if !populated || frozen {
            return None;
        }
        let freeze = std::fs::File::open(cg.join("cgroup.freeze")).ok()?;
        let hb = std::fs::File::open(inst.heartbeat_file()?).ok()?;
        let a = read_heartbeat(&hb)?;
        std::thread::sleep(Duration::from_millis(20));
        (read_heartbeat(&hb)? > a).then_some(Some((events, freeze, hb)))
    });
    if matches!(running, Ok(None)) {
        bail!("the agent is out of today's interruption budget ({BUDGET}): no guest can start");
    }
    let Ok(Some((events, freeze, heartbeat))) = running else {
        r.no_start += 1;
        return Ok(None);
    };
    // donate-now arms after 10 s of no input (the click that offered must not end it), at
    // the first sample after that: wait that long plus two sampling intervals.
    if donate {
        let armed = agent_core::policy::DONATE_ARM + Duration::from_millis(2_500);
        std::thread::sleep(armed.saturating_sub(offered.elapsed()));
    }
    Ok(Some(RunningGuest { events, freeze, heartbeat }))
}

/// The owner's input of round `i`: a line typed into the pty session, or one relative
/// XTest motion (flushed, no round trip).
fn send_input(x: &mut Returner<impl x11rb::connection::Connection>, i: usize) -> Result<()> {
    use x11rb::protocol::xproto;
    use x11rb::protocol::xtest::ConnectionExt as _;
    if let Some(script) = x.pty.as_mut() {
        use std::io::Write as _;
        let stdin = script.stdin.as_mut().context("the pty session's stdin")?;
        stdin.write_all(b"x\n")?;
        stdin.flush()?;
    } else {
        let dx = if i.is_multiple_of(2) { 4 } else { -4 };
        x.xtest.xtest_fake_input(xproto::MOTION_NOTIFY_EVENT, 1, x11rb::CURRENT_TIME, x.root, dx, 0, 0)?;
        x.xtest.flush()?;
    }
    Ok(())
}

/// What the watch after the input saw, in `mono_ns`: when `cgroup.freeze` first read
/// "1", and when the kernel said frozen (or empty) with the guest's last heartbeat then
/// (none: the guest still ran 1 s after the input, a miss).
struct Stop {
    asked: Option<u64>,
    stopped: Option<(u64, u64)>,
}

/// Polls the guest's cgroup every 50 µs for up to 1 s after `t0`.
fn watch_stop(guest: &RunningGuest, t0: u64, buf: &mut [u8; 256]) -> Stop {
    let mut stopped = None;
    let mut asked = None;
    while mono_ns() - t0 < 1_000_000_000 {
        if asked.is_none() && guest.freeze.read_at(&mut buf[..1], 0).is_ok_and(|n| n == 1) && buf[0] == b'1' {
            asked = Some(mono_ns());
        }
        let (populated, frozen) = events_say(&guest.events, buf);
        if !populated || frozen {
            // The kernel says frozen (or empty) only once every task has stopped, so no
            // heartbeat write is in flight: the last one is the guest's last sign of life.
            // Read now: a linger mode may thaw it after the next sample.
            stopped = Some((mono_ns(), read_heartbeat(&guest.heartbeat).unwrap_or(0)));
            break;
        }
        std::thread::sleep(Duration::from_micros(50));
    }
    Stop { asked, stopped }
}

/// Adds one round's times after the input at `t0` to the case: `seen` is when our
/// listener had the input (0: never), `timing` the agent's own times for it.
fn tally_round(r: &mut CaseResult, t0: u64, stop: &Stop, seen: u64, timing: Option<agent_core::input::InputTiming>, stolen_ms: f64) {
    let ms = |ns: u64| ns.saturating_sub(t0) as f64 / 1e6;
    let asked = stop.asked;
    match stop.stopped {
        None => r.missed += 1,
        Some((at, last)) => {
            let split = RoundSplit {
                ran_on_ms: ms(last),
                delivered_ms: (seen != 0).then(|| ms(seen)),
                received_ms: timing.map(|t| ms(t.received_ns)),
                fast_froze_ms: timing.and_then(|t| t.froze_ns).map(ms),
                asked_ms: ms(asked.unwrap_or(at)),
                frozen_ms: ms(at),
                stolen_ms,
            };
            if r.worst.is_none_or(|w| split.ran_on_ms > w.ran_on_ms) {
                r.worst = Some(split);
            }
            if let Some(t) = timing {
                r.received_ms.push(ms(t.received_ns));
                r.work_ms.push(split.asked_ms - ms(t.received_ns));
            }
            if timing.is_none_or(|t| t.froze_ns.is_none()) {
                r.slow_path += 1;
            }
            // The headline: how long the guest went on running after the owner's return.
            // (A SCHED_IDLE guest may get no CPU at all once the owner loads the cores:
            // then it ran 0 ms after the return.)
            r.latencies_ms.push(last.saturating_sub(t0) as f64 / 1e6);
            // When the kernel confirmed every task frozen: later under load, as a
            // SCHED_IDLE task must be scheduled once to reach the freezer.
            r.frozen_ms.push(at.saturating_sub(t0) as f64 / 1e6);
            r.asked_ms.push(asked.unwrap_or(at).saturating_sub(t0) as f64 / 1e6);
            if seen != 0 {
                r.x_ms.push(seen.saturating_sub(t0) as f64 / 1e6);
                if let Some(asked) = asked {
                    r.agent_ms.push(asked.saturating_sub(seen) as f64 / 1e6);
                }
            }
        }
    }
}

/// A recruited guest's round must add an interruption whose cause is `input`.
fn check_cause(inst: &Instance, before: usize, r: &mut CaseResult) {
    let rows = wait_until("the interruption", Duration::from_secs(5), || {
        let rows = inst.interruptions();
        (rows.len() > before).then_some(rows)
    })
    .unwrap_or_default();
    if rows.last().is_none_or(|row| row.cause != "input") {
        r.wrong_cause += 1;
    }
}

/// One round: wait for a running guest, send the motion, start the load, time the stop.
fn round(
    inst: &Instance,
    x: &mut Returner<impl x11rb::connection::Connection>,
    load: usize,
    donate: bool,
    i: usize,
    r: &mut CaseResult,
) -> Result<()> {
    let Some(guest) = running_guest(inst, donate, r)? else {
        return Ok(());
    };
    std::thread::sleep(Duration::from_millis(100 + (i as u64 * 37) % 200));
    let before = inst.interruptions().len();
    let mut buf = [0u8; 256];
    // Stopped before the owner came back (by something else): not a measurement.
    let (populated, frozen) = events_say(&guest.events, &mut buf);
    if !populated || frozen {
        r.early += 1;
        return Ok(());
    }
    x.seen.store(0, Ordering::SeqCst);
    let steal0 = steal_ticks();
    let t0 = mono_ns();
    send_input(x, i)?;
    let owner = Load::start(load);
    let stop = watch_stop(&guest, t0, &mut buf);
    owner.stop();
    let stolen_ms = steal_ticks().saturating_sub(steal0) as f64 * 10.0;
    if stolen_ms > 0.0 {
        r.stolen += 1;
    }
    // The agent's own times for the first signal after the input.
    let timing = inst.status().and_then(|s| s.input_timings.into_iter().find(|t| t.received_ns >= t0));
    tally_round(r, t0, &stop, x.seen.load(Ordering::SeqCst), timing, stolen_ms);
    if !donate {
        check_cause(inst, before, r);
    }
    Ok(())
}

/// Refuses arguments out of range and a missing binary before the first case starts, and
/// a caller who cannot read the guests' cgroups.
fn check_preconditions(a: &OwnerReturnArgs) -> Result<()> {
    if !(1..=200).contains(&a.rounds) {
        bail!("--rounds {}: allowed 1..=200", a.rounds);
    }
    for m in &a.modes {
        mode_name(m)?;
    }
    if let Some(l) = a.loads.iter().find(|l| **l > 8) {
        bail!("--loads: {l} cores is more than this benchmark allows (0..=8)");
    }
    for o in &a.offers {
        if o != "recruit" && o != "donate" {
            bail!("--offers: unknown offer {o:?} (allowed: recruit, donate)");
        }
    }
    // Every binary a case needs is there before the first case starts.
    for agent in &a.agents {
        match agent.as_str() {
            "up" => {}
            "tray" => {
                let tray = lull_bin().with_file_name("lull-tray");
                if !tray.exists() {
                    bail!("{} is missing: build it first (cargo build --release -p lull-tray), or pass --agents up", tray.display());
                }
            }
            other => bail!("--agents: unknown agent {other:?} (allowed: up, tray)"),
        }
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        bail!("this benchmark reads the guests' cgroups of agents it starts; run it as root (or where the agent can create cgroups)");
    }
    Ok(())
}

/// The returning owner on `display`: an XTest connection, our X listener and, with
/// `--input pty`, the terminal session. Also makes this (the measuring) thread
/// SCHED_FIFO; the second value says whether that worked.
fn returning_owner(display: &str, input: &str) -> Result<(Returner<x11rb::rust_connection::RustConnection>, bool)> {
    use x11rb::connection::Connection as _;
    let (xtest, screen) = x11rb::connect(Some(display)).context("connecting to the X display")?;
    let root = xtest.setup().roots[screen].root;
    let mut returner = Returner { seen: x_listener(display)?, xtest, root, pty: None };
    // The measuring thread runs SCHED_FIFO so its own wake-ups on a loaded machine do not
    // count. RESET_ON_FORK: the processes it starts (agent, coordinator, hence guests) and
    // the owner's load threads get the normal policy, as on an owner's desktop.
    let p = libc::sched_param { sched_priority: 10 };
    // SAFETY: sets the calling thread's policy with a valid parameter.
    let fifo = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO | libc::SCHED_RESET_ON_FORK, &p) == 0 };
    // Opened before any agent starts, like an ssh session the owner left open.
    if input == "pty" {
        let script = crate::pty::session()?;
        // The pty's reads are the delivery to time from, as the X listener's receipt is.
        let seen = returner.seen.clone();
        crate::pty::watch_reads(&script, move || {
            let _ = seen.compare_exchange(0, mono_ns(), Ordering::SeqCst, Ordering::SeqCst);
        })
        .context("the pty of the script(1) session was not found")?;
        returner.pty = Some(script);
    }
    Ok((returner, fifo))
}

/// One case: the agent (up, tray), the eviction mode, the owner's load in cores and
/// whether the guest was donated (*donate until I return*) rather than recruited.
struct Case {
    agent: String,
    mode: String,
    load: usize,
    donate: bool,
}

/// Every case asked for: agent × offer × mode (recruit only) × load.
fn cases(a: &OwnerReturnArgs) -> Vec<Case> {
    let mut cases = Vec::new();
    for agent in &a.agents {
        for offer in &a.offers {
            let donate = offer == "donate";
            let modes: Vec<String> = if donate { vec!["ie".into()] } else { a.modes.clone() };
            for m in &modes {
                for &load in &a.loads {
                    cases.push(Case { agent: agent.clone(), mode: m.clone(), load, donate });
                }
            }
        }
    }
    cases
}

/// Runs case `n`'s rounds, each `BUDGET` rounds on a fresh instance.
fn measure_case(
    a: &OwnerReturnArgs,
    case: &Case,
    n: usize,
    display: &str,
    returner: &mut Returner<impl x11rb::connection::Connection>,
    bar: &indicatif::ProgressBar,
) -> Result<CaseResult> {
    let Case { agent, mode, load, donate } = case;
    let label = format!("{agent} {} load {load}", if *donate { "donate-now".to_string() } else { format!("recruit {mode}") });
    bar.set_message(label.clone());
    let mut r = CaseResult::default();
    let mut inst = None;
    for i in 0..a.rounds {
        if i % BUDGET == 0 {
            drop(inst.take());
            inst = Some(start_instance(agent, mode, display, &a.input, n * 1000 + i)?);
        }
        let current = inst.as_ref().context("no instance")?;
        round(current, returner, *load, *donate, i, &mut r).with_context(|| format!("case {label}, round {i}"))?;
        bar.inc(1);
    }
    drop(inst);
    Ok(r)
}

/// A case's JSON row and whether it met the goal (p99 ≤ 5 ms, none missed, none without
/// a start or stopped early, cause input).
fn case_row(a: &OwnerReturnArgs, case: &Case, mut r: CaseResult) -> (serde_json::Value, bool) {
    let Case { agent, mode, load, donate } = case;
    let measured = r.latencies_ms.len();
    let (p50, p99, max) = percentile::p50_p99_max(&mut r.latencies_ms);
    let frozen = percentile::p50_p99_max(&mut r.frozen_ms);
    let asked = percentile::p50_p99_max(&mut r.asked_ms);
    let x = percentile::p50_p99_max(&mut r.x_ms);
    let agent_part = percentile::p50_p99_max(&mut r.agent_ms);
    let received = percentile::p50_p99_max(&mut r.received_ms);
    let work = percentile::p50_p99_max(&mut r.work_ms);
    let ok = r.missed == 0 && r.no_start == 0 && r.early == 0 && r.wrong_cause == 0 && p99 <= 5.0;
    let row = serde_json::json!({
        "input": a.input, "agent": agent, "offer": if *donate { "donate-now" } else { "recruit" }, "mode": if *donate { "-" } else { mode.as_str() },
        "load_cores": load, "rounds": a.rounds, "measured": measured, "missed": r.missed, "no_start": r.no_start, "stopped_early": r.early,
        "wrong_cause": r.wrong_cause, "p50_ms": p50, "p99_ms": p99, "max_ms": max,
        "frozen_p50_ms": frozen.0, "frozen_p99_ms": frozen.1, "frozen_max_ms": frozen.2,
        "asked_p50_ms": asked.0, "asked_p99_ms": asked.1, "asked_max_ms": asked.2,
        "x_delivered_p50_ms": x.0, "x_delivered_p99_ms": x.1, "x_delivered_max_ms": x.2,
        "agent_part_p50_ms": agent_part.0, "agent_part_p99_ms": agent_part.1, "agent_part_max_ms": agent_part.2,
        "received_p50_ms": received.0, "received_p99_ms": received.1, "received_max_ms": received.2,
        "agent_work_p50_ms": work.0, "agent_work_p99_ms": work.1, "agent_work_max_ms": work.2,
        "slow_path_rounds": r.slow_path, "rounds_with_steal": r.stolen, "worst_round": r.worst, "goal_met": ok,
    });
    (row, ok)
}

pub fn run(a: OwnerReturnArgs) -> Result<()> {
    check_preconditions(&a)?;
    let xvfb = Xvfb::try_start()?;
    let display = xvfb.display.as_str();
    let _tray_host = tray_host(&a, display)?;
    let (mut returner, fifo) = returning_owner(display, &a.input)?;

    let cases = cases(&a);
    let bar = indicatif::ProgressBar::new((cases.len() * a.rounds) as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template("owner returns {bar:40} {pos}/{len} {msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    if a.json {
        bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    let load_start = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let mut rows = Vec::new();
    let mut all_ok = true;
    for (n, case) in cases.iter().enumerate() {
        let r = measure_case(&a, case, n, display, &mut returner, &bar)?;
        let (row, ok) = case_row(&a, case, r);
        all_ok &= ok;
        rows.push(row);
        if a.json {
            // A long run shows each case as it ends (stdout gets the whole result at the end).
            errln!("{}", rows.last().map(|r| r.to_string()).unwrap_or_default());
        }
    }
    bar.finish_and_clear();
    let load_end = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let result = serde_json::json!({
        "cases": rows, "goal": {"p99_ms": 5.0, "missed": 0}, "measuring_thread_sched_fifo": fifo,
        "loadavg_start": load_start.trim(), "loadavg_end": load_end.trim(), "tray_host": a.tray_host,
        "anchor_boinc_7_20": {"median_s": "0.3-0.6", "max_s": 1.0},
    });
    if a.json {
        outln!("{result}");
    } else {
        print_table(&a, &result, all_ok);
    }
    if !all_ok {
        bail!("the goal (p99 ≤ 5 ms, 0 missed, cause input) was not met in every case");
    }
    Ok(())
}

/// Kills the tray host when the run ends.
struct TrayHost(std::process::Child);

impl Drop for TrayHost {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `trayer` on `display` when a `lull-tray` case runs with `--tray-host trayer`, and
/// waits until it owns the XEmbed tray selection (`_NET_SYSTEM_TRAY_S0`), so the tray finds
/// a host and shows its icon instead of opening its status window.
fn tray_host(a: &OwnerReturnArgs, display: &str) -> Result<Option<TrayHost>> {
    if a.tray_host == "none" || !a.agents.iter().any(|x| x == "tray") {
        return Ok(None);
    }
    let child = Command::new("trayer")
        .args(["--edge", "top", "--align", "right", "--widthtype", "request", "--height", "24"])
        .env("DISPLAY", display)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .context("starting trayer, the tray host of the lull-tray cases (apt install trayer, or pass --tray-host none)")?;
    use x11rb::protocol::xproto::ConnectionExt as _;
    let host = TrayHost(child);
    let (conn, _) = x11rb::connect(Some(display)).context("connecting to the X display")?;
    let atom = conn.intern_atom(false, b"_NET_SYSTEM_TRAY_S0")?.reply()?.atom;
    wait_until("trayer to take the tray selection (pass --tray-host none to run without a tray host)", Duration::from_secs(10), || {
        conn.get_selection_owner(atom).ok().and_then(|c| c.reply().ok()).filter(|r| r.owner != 0)
    })?;
    Ok(Some(host))
}

/// Prints the result as text: what is measured, one line per case, each case's worst
/// round split, the goal and the machine's load.
fn print_table(a: &OwnerReturnArgs, result: &serde_json::Value, all_ok: bool) {
    let fifo = result["measuring_thread_sched_fifo"].as_bool().unwrap_or(false);
    let (load_start, load_end) = (result["loadavg_start"].as_str().unwrap_or(""), result["loadavg_end"].as_str().unwrap_or(""));
    if a.input == "pty" {
        outln!(
            "owner return: one line typed into a pty session (script(1), terminal backend) → the guest's last heartbeat (how long it ran on), and the kernel's word that it is frozen; read p99: when the pty was read (a SCHED_FIFO watcher); recv p99: when the agent's input thread had it (its own timestamp); work p99: from then to the freeze request; slow: rounds the fast path did not freeze; steal: rounds the hypervisor took CPU time in; {} rounds per case; tray host: {}",
            a.rounds, a.tray_host
        );
    } else {
        outln!(
            "owner return: one XTest motion (separate client) → the guest's last heartbeat (how long it ran on), and the kernel's word that it is frozen; X p99: when a separate X client got the motion (the X server's part); agent p99: from then to the agent's freeze request; recv p99: when the agent's input thread had it (its own timestamp); work p99: from then to the freeze request; slow: rounds the fast path did not freeze; steal: rounds the hypervisor took CPU time in; {} rounds per case",
            a.rounds
        );
    }
    outln!(
        "{:<6} {:<10} {:<5} {:>4} {:>8} {:>8} {:>8} {:>9} {:>8} {:>9} {:>9} {:>9} {:>5} {:>5} {:>6} {:>8} {:>7} {:>11}",
        "agent",
        "offer",
        "mode",
        "load",
        "p50 ms",
        "p99 ms",
        "max ms",
        "frozen p99",
        if a.input == "pty" { "read p99" } else { "X p99" },
        "agent p99",
        "recv p99",
        "work p99",
        "slow",
        "steal",
        "missed",
        "no start",
        "early",
        "cause≠input"
    );
    let n = |r: &serde_json::Value, k: &str| r[k].as_u64().unwrap_or(0);
    // A case's name: its agent, offer, input mode and load.
    let case = |r: &serde_json::Value| {
        let s = |k: &str| r[k].as_str().unwrap_or("").to_string();
        (s("agent"), s("offer"), s("mode"), n(r, "load_cores"))
    };
    for r in result["cases"].as_array().into_iter().flatten() {
        let (agent, offer, mode, load) = case(r);
        outln!(
            "{agent:<6} {offer:<10} {mode:<5} {load:>4} {:>8.3} {:>8.3} {:>8.3} {:>9.3} {:>8.3} {:>9.3} {:>9.3} {:>9.3} {:>5} {:>5} {:>6} {:>8} {:>7} {:>11}",
            r["p50_ms"].as_f64().unwrap_or(0.0),
            r["p99_ms"].as_f64().unwrap_or(0.0),
            r["max_ms"].as_f64().unwrap_or(0.0),
            r["frozen_p99_ms"].as_f64().unwrap_or(0.0),
            r["x_delivered_p99_ms"].as_f64().unwrap_or(0.0),
            r["agent_part_p99_ms"].as_f64().unwrap_or(0.0),
            r["received_p99_ms"].as_f64().unwrap_or(0.0),
            r["agent_work_p99_ms"].as_f64().unwrap_or(0.0),
            n(r, "slow_path_rounds"),
            n(r, "rounds_with_steal"),
            n(r, "missed"),
            n(r, "no_start"),
            n(r, "stopped_early"),
            n(r, "wrong_cause")
        );
    }
    outln!("the worst round of each case, ms after the input (delivered to our listener → the agent's input thread → its fast-path freeze → freeze read back → frozen; ran on):");
    let o = |v: &serde_json::Value| v.as_f64().map_or("-".to_string(), |x| format!("{x:.3}"));
    for r in result["cases"].as_array().into_iter().flatten() {
        let w = &r["worst_round"];
        let (agent, offer, mode, load) = case(r);
        outln!(
            "  {agent} {offer} {mode} load {load}: {} → {} → {} → {} → {}; ran on {}; host steal {} ms",
            o(&w["delivered_ms"]),
            o(&w["received_ms"]),
            o(&w["fast_froze_ms"]),
            o(&w["asked_ms"]),
            o(&w["frozen_ms"]),
            o(&w["ran_on_ms"]),
            o(&w["stolen_ms"])
        );
    }
    outln!("goal: p99 ≤ 5 ms, none missed or stopped early, cause input, in every case: {}", if all_ok { "met" } else { "NOT met" });
    outln!("load average at start {} · at end {} · measuring thread SCHED_FIFO: {fifo}", load_start.trim(), load_end.trim());
    outln!("anchor: BOINC 7.20 here, median 0.3–0.6 s, max 1.0 s");
}
