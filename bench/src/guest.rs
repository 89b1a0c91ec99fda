//! Guest-runtime benchmarks (`lull-bench evict | slowdown | memory`), run with real
//! processes and real cgroups and reported with medians and percentiles for
//! `docs/BENCHMARKS.md`. They need root (or a delegated cgroup subtree) like the runtime.
//!
//! - `evict`: an XTest input event under Xvfb → the agent's X11 input backend (XI2 raw
//!   events) in process → the
//!   runtime's fast path (`GuestHost::fast_freeze`) → the kernel reports the guests'
//!   cgroup frozen. Latency from sending the event to `frozen 1`, p50/p99/max. With
//!   `--source pty` the event is a line written into a `script` session (a pty whose
//!   program reads it, as a shell reads what the owner types) and the backend is the
//!   terminal one (inotify on the pty).
//! - `slowdown`: an owner workload (a fixed CPU task plus a 1 ms periodic wake-up probe)
//!   alone, with a CPU-bound guest under Lull, and with the same guest at plain nice 19
//!   (BOINC-style), interleaved round by round in one run: LDR (owner slowdown), wake-up
//!   latency and FCSR (share of the idle cycles the guest used).
//! - `memory`: with swap on, an owner working set and a guest trying to allocate past its
//!   cap inside a simulated smaller machine (a parent memory cgroup): owner pages swapped
//!   out because of the guest; then with the cap disabled, the restore step's time.

use agent_core::config::Config;
use agent_core::guest::linux::{memory, LinuxRuntime};
use agent_core::guest::GuestHost;
use agent_core::guest::{GuestPhase, GuestRuntime, GuestSpec};
use agent_core::policy::GuestDirective;
use anyhow::{bail, Context, Result};
use clap::Args;
use lull_e2e::{percentile, purge_cgroup_base, unified_root, Xvfb};
use std::ffi::CString;
use std::os::unix::fs::FileExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A runtime on its own cgroup base with one guest started.
fn runtime_with(base: &str, tweak: impl FnOnce(&mut Config), spec: GuestSpec) -> Result<(LinuxRuntime, String, tempfile::TempDir)> {
    let dir = tempfile::tempdir()?;
    let mut cfg = Config::default();
    cfg.guests.cgroup = base.into();
    cfg.guests.owner_reserve_mib = 256;
    tweak(&mut cfg);
    // As root, guests run as an unprivileged account, which must pass through.
    std::fs::set_permissions(dir.path(), std::os::unix::fs::PermissionsExt::from_mode(0o711))?;
    let mut rt = LinuxRuntime::new(&cfg, dir.path());
    if rt.cgroups().is_none() {
        bail!("this benchmark needs cgroups (run as root or in a delegated subtree)");
    }
    let id = rt.submit(spec);
    rt.apply(GuestDirective::Accept);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !rt.present() {
        if Instant::now() > deadline {
            bail!("the guest did not start: {:?}", rt.guests());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Ok((rt, id, dir))
}

/// A CPU-bound guest's shell script: one spinner per CPU for `n` CPUs.
pub(crate) fn spinner_script(n: usize) -> String {
    format!("for i in $(seq {n}); do (while :; do :; done) & done; wait")
}

fn spinners(n: usize) -> GuestSpec {
    let script = spinner_script(n);
    GuestSpec::new("sh", ["-c", script.as_str()])
}

// ───────────────────────────── eviction latency ─────────────────────────────

#[derive(Args, Debug)]
pub struct EvictArgs {
    /// Number of input events (the recorded figure uses 300).
    #[arg(long, default_value_t = 300)]
    pub events: usize,
    /// X display to use; without one (and without $DISPLAY) a private Xvfb is started on a free display.
    #[arg(long)]
    pub display: Option<String>,
    /// Where the owner's input comes from: `x11` (XTest motion, the X11 backend) or `pty`
    /// (a line typed into a `script -qfc 'cat >/dev/null'` session, the terminal backend).
    #[arg(long, default_value = "x11", value_parser = ["x11", "pty"])]
    pub source: String,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

/// The owner's input in `lull-bench evict`: XTest motions to an X display, or lines
/// typed into a pty session.
enum OwnerInput {
    X11 { conn: Box<x11rb::rust_connection::RustConnection>, root: u32, display: String, _xvfb: Option<Xvfb> },
    Pty { script: Child },
}

impl OwnerInput {
    fn open(a: &EvictArgs) -> Result<Self> {
        use x11rb::connection::Connection;
        if a.source == "pty" {
            let script = crate::pty::session()?;
            return Ok(Self::Pty { script });
        }
        let env_display = std::env::var("DISPLAY").ok().filter(|d| !d.is_empty());
        let (display, xvfb) = match (a.display.clone(), env_display) {
            (Some(d), _) => (d, None),
            (None, Some(d)) => (d, None),
            (None, None) => {
                let x = Xvfb::try_start()?;
                (x.display.clone(), Some(x))
            }
        };
        // SAFETY (edition 2021: safe fn): set before the backend thread reads it.
        std::env::set_var("DISPLAY", &display);
        let (conn, screen) = x11rb::connect(Some(&display)).context("connecting to X")?;
        let root = conn.setup().roots[screen].root;
        Ok(Self::X11 { conn: Box::new(conn), root, display, _xvfb: xvfb })
    }

    fn backend(&self) -> Box<dyn agent_core::input::InputBackend> {
        match self {
            Self::X11 { .. } => Box::new(agent_core::input::x11::X11Raw),
            Self::Pty { .. } => Box::new(agent_core::input::terminal::Terminal::new(false)),
        }
    }

    /// One input event now.
    fn send(&mut self, i: usize) -> Result<()> {
        use std::io::Write;
        use x11rb::connection::Connection;
        use x11rb::protocol::xproto;
        use x11rb::protocol::xtest::ConnectionExt as _;
        match self {
            Self::X11 { conn, root, .. } => {
                let x = if i.is_multiple_of(2) { 100 } else { 200 };
                conn.xtest_fake_input(xproto::MOTION_NOTIFY_EVENT, 0, x11rb::CURRENT_TIME, *root, x, x, 0)?;
                conn.flush()?;
            }
            Self::Pty { script } => {
                let stdin = script.stdin.as_mut().context("script's stdin")?;
                stdin.write_all(b"x\n")?;
                stdin.flush()?;
            }
        }
        Ok(())
    }

    /// For a pty: a watcher of our own, at a real-time priority, on the session's pty
    /// (inotify `IN_ACCESS`, as the terminal backend watches it): when the kernel says
    /// the program in the pty read the line. Splits "event → callback" into the
    /// terminal's part (script and the reader being scheduled) and the backend's.
    fn kernel_read_watch(&self) -> Option<Arc<Mutex<Option<Instant>>>> {
        let Self::Pty { script } = self else { return None };
        let at: Arc<Mutex<Option<Instant>>> = Arc::new(Mutex::new(None));
        let out = at.clone();
        crate::pty::watch_reads(script, move || *at.lock().unwrap_or_else(|p| p.into_inner()) = Some(Instant::now()))?;
        Some(out)
    }

    fn describe(&self) -> String {
        match self {
            Self::X11 { display, .. } => format!("XTest motions on {display}"),
            Self::Pty { .. } => "lines typed into a script(1) pty session".into(),
        }
    }
}

impl Drop for OwnerInput {
    fn drop(&mut self) {
        if let Self::Pty { script } = self {
            let _ = script.kill();
            let _ = script.wait();
        }
    }
}

/// When the fast path last ran (the backend's callback), cleared before each event.
type CallbackAt = Arc<Mutex<Option<Instant>>>;

/// Starts the agent's own input backend (X11: XInput 2 raw events; pty: the terminal
/// backend's inotify) with `freeze` as its fast path, run on every event as in the
/// agent; no window of ours selects input, so nothing else flushes. Returns when the
/// callback last ran and a channel told of each run.
fn start_input_backend(input: &OwnerInput, freeze: agent_core::guest::FastFreeze) -> (CallbackAt, std::sync::mpsc::Receiver<()>) {
    let callback_at: CallbackAt = Arc::new(Mutex::new(None));
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<()>();
    {
        let callback_at = callback_at.clone();
        let fast: agent_core::input::FastPath = Arc::new(move |_| {
            freeze();
            *callback_at.lock().unwrap_or_else(|p| p.into_inner()) = Some(Instant::now());
            let _ = ready_tx.send(());
            true
        });
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let sink = agent_core::input::InputSink::new(tx, Some(fast));
        let backend = input.backend();
        std::thread::spawn(move || {
            let _ = agent_core::latency::short_slice_for_this_thread();
            let _ = backend.run(sink);
        });
        std::thread::spawn(move || while rx.blocking_recv().is_some() {});
    }
    (callback_at, ready_rx)
}

/// Warm-up: inject until the backend has selected its events and sees one.
fn warm_up(input: &mut OwnerInput, ready_rx: &std::sync::mpsc::Receiver<()>, display: &str) -> Result<()> {
    let mut started = false;
    for i in 0..100 {
        input.send(i)?;
        if ready_rx.recv_timeout(Duration::from_millis(100)).is_ok() {
            started = true;
            break;
        }
    }
    if !started {
        bail!("the input backend saw no injected input within 10 s ({display})");
    }
    std::thread::sleep(Duration::from_millis(50));
    while ready_rx.try_recv().is_ok() {}
    Ok(())
}

/// The measuring thread (this one) waits for the kernel's "frozen" notification at a
/// real-time priority when allowed, so its own wake-up delay on a loaded machine does not
/// count as freeze latency. Only the measurement gets it, never the agent or a guest.
/// Whether it got it.
fn measure_at_realtime_priority() -> bool {
    let p = libc::sched_param { sched_priority: 10 };
    // SAFETY: sets the calling thread's policy with a valid parameter.
    unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &p) == 0 }
}

/// What the events gave, ms after each input: the kernel's "frozen", the backend's
/// callback, the guest's CPU µs meanwhile and (pty) the reader's read with the time from
/// it to the callback; and the events never frozen within 1 s.
#[derive(Default)]
struct EvictSamples {
    to_frozen: Vec<f64>,
    to_callback: Vec<f64>,
    cpu_after: Vec<f64>,
    to_kernel_read: Vec<(f64, f64)>,
    missed: usize,
}

/// The stimulus: `a.events` inputs, each after the guest ran 5–25 ms, each timed to the
/// guest's cgroup frozen (read every 50 µs) and to the backend's callback.
fn measure_events(
    a: &EvictArgs,
    input: &mut OwnerInput,
    rt: &mut LinuxRuntime,
    cgroup: &Path,
    callback_at: &CallbackAt,
    kernel_read: Option<&CallbackAt>,
) -> Result<EvictSamples> {
    let events = std::fs::File::open(cgroup.join("cgroup.events"))?;
    let frozen = |buf: &mut [u8]| -> bool {
        let n = events.read_at(buf, 0).unwrap_or(0);
        std::str::from_utf8(&buf[..n]).is_ok_and(|s| s.contains("frozen 1"))
    };
    let usage = || -> u64 {
        let s = std::fs::read_to_string(cgroup.join("cpu.stat")).unwrap_or_default();
        s.lines().find_map(|l| l.strip_prefix("usage_usec ")?.trim().parse().ok()).unwrap_or(0)
    };
    let mut buf = [0u8; 256];
    let mut s = EvictSamples::default();
    let bar = indicatif::ProgressBar::new(a.events as u64);
    if a.json {
        bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    for i in 0..a.events {
        rt.apply(GuestDirective::Accept);
        let t = Instant::now();
        while frozen(&mut buf) && t.elapsed() < Duration::from_secs(1) {
            std::thread::yield_now();
        }
        // The guest runs a little between events (5–25 ms).
        std::thread::sleep(Duration::from_millis(5 + (i as u64 * 7) % 21));
        *callback_at.lock().unwrap_or_else(|p| p.into_inner()) = None;
        if let Some(k) = kernel_read {
            *k.lock().unwrap_or_else(|p| p.into_inner()) = None;
        }
        let u0 = usage();
        let t0 = Instant::now();
        input.send(i)?;
        // Read cgroup.events every 50 µs (the kernel rate-limits its change notifications
        // on that file to one per 10 ms, too coarse to time a freeze with).
        let mut ok = false;
        while t0.elapsed() < Duration::from_secs(1) {
            if frozen(&mut buf) {
                ok = true;
                break;
            }
            std::thread::sleep(Duration::from_micros(50));
        }
        let t1 = t0.elapsed();
        if !ok {
            s.missed += 1;
            if std::env::var_os("LULL_BENCH_DEBUG").is_some() {
                let cb = *callback_at.lock().unwrap_or_else(|p| p.into_inner());
                errln!("event {i}: not frozen within 1 s; callback {:?}", cb.map(|c| c.saturating_duration_since(t0)));
            }
            continue;
        }
        s.to_frozen.push(t1.as_secs_f64() * 1000.0);
        s.cpu_after.push(usage().saturating_sub(u0) as f64);
        if let Some(cb) = *callback_at.lock().unwrap_or_else(|p| p.into_inner()) {
            s.to_callback.push(cb.saturating_duration_since(t0).as_secs_f64() * 1000.0);
            if let Some(k) = kernel_read.and_then(|k| *k.lock().unwrap_or_else(|p| p.into_inner())) {
                // The backend's own part: from the kernel's read event to the fast path.
                s.to_kernel_read
                    .push((k.saturating_duration_since(t0).as_secs_f64() * 1000.0, cb.saturating_duration_since(k).as_secs_f64() * 1000.0));
            }
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    Ok(s)
}

/// Where and how the events were measured: the input's description, the guests'
/// containment, the load average before and after, and whether the measuring thread ran
/// SCHED_FIFO.
struct EvictSetting<'a> {
    display: &'a str,
    containment: &'static str,
    load: &'a str,
    load_end: &'a str,
    rt_measure: bool,
}

/// Tallies the samples and prints them: JSON with `--json`, else a few lines against
/// the goal.
fn report_evict(a: &EvictArgs, mut s: EvictSamples, setting: &EvictSetting) {
    let EvictSetting { display, containment, load, load_end, rt_measure } = *setting;
    let (n, missed) = (s.to_frozen.len(), s.missed);
    let (f50, f99, fmax) = percentile::p50_p99_max(&mut s.to_frozen);
    let (c50, c99, cmax) = percentile::p50_p99_max(&mut s.to_callback);
    let (u50, u99, umax) = percentile::p50_p99_max(&mut s.cpu_after);
    let (mut kr, mut kb): (Vec<f64>, Vec<f64>) = s.to_kernel_read.into_iter().unzip();
    let pty_split = (!kr.is_empty()).then(|| {
        serde_json::json!({
            "event_to_kernel_read_ms": {"p50": percentile::of(&mut kr, 0.5), "p99": percentile::of(&mut kr, 0.99), "max": percentile::of(&mut kr, 1.0)},
            "kernel_read_to_callback_ms": {"p50": percentile::of(&mut kb, 0.5), "p99": percentile::of(&mut kb, 0.99), "max": percentile::of(&mut kb, 1.0)},
        })
    });
    let result = serde_json::json!({
        "events": n, "missed": missed, "containment": containment, "source": a.source, "input": display,
        "event_to_frozen_ms": {"p50": f50, "p99": f99, "max": fmax},
        "event_to_input_callback_ms": {"p50": c50, "p99": c99, "max": cmax},
        "pty_split": pty_split,
        "guest_cpu_us_between_event_and_frozen": {"p50": u50, "p99": u99, "max": umax},
        "loadavg_start": load.trim(), "loadavg_end": load_end.trim(), "measuring_thread_sched_fifo": rt_measure,
        "goal_p99_ms": 5.0, "anchor_boinc_7_20": {"median_s": "0.3-0.6", "max_s": 1.0},
    });
    if a.json {
        outln!("{result}");
    } else {
        outln!("eviction latency over {n} events ({missed} missed), {display}, {containment}:");
        outln!("  event → cgroup frozen      p50 {f50:.3} ms  p99 {f99:.3} ms  max {fmax:.3} ms   · goal p99 ≤ 5 ms");
        outln!("  event → backend callback   p50 {c50:.3} ms  p99 {c99:.3} ms  max {cmax:.3} ms  (fast path runs here)");
        if let Some(split) = &pty_split {
            outln!(
                "  pty: event → the reader's read (kernel, SCHED_FIFO watcher) {}; read → backend callback {}",
                split["event_to_kernel_read_ms"],
                split["kernel_read_to_callback_ms"]
            );
        }
        outln!("  guest CPU between event and frozen  p50 {u50:.0} µs  p99 {u99:.0} µs  max {umax:.0} µs");
        outln!("  load average at start {} · at end {} · measuring thread SCHED_FIFO: {rt_measure}", load.trim(), load_end.trim());
        outln!("  anchor: BOINC 7.20 here, median 0.3–0.6 s, max 1.0 s");
    }
}

pub fn evict(a: EvictArgs) -> Result<()> {
    let mut input = OwnerInput::open(&a)?;
    let display = input.describe();

    let base = format!("lull-bench-evict-{}", std::process::id());
    let (mut rt, _id, _dir) = runtime_with(&base, |_| {}, spinners(1))?;
    let cg = rt.cgroups().context("cgroups")?.clone();
    let freeze = rt.fast_freeze().context("fast path")?;
    let (callback_at, ready_rx) = start_input_backend(&input, freeze);
    warm_up(&mut input, &ready_rx, &display)?;

    let rt_measure = measure_at_realtime_priority();
    let kernel_read = input.kernel_read_watch();
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let samples = measure_events(&a, &mut input, &mut rt, &cg.unified, &callback_at, kernel_read.as_ref())?;
    rt.apply(GuestDirective::Evict);
    let containment = rt.containment().as_str();
    let load_end = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    drop(rt);
    purge_cgroup_base(&base);
    report_evict(&a, samples, &EvictSetting { display: &display, containment, load: &load, load_end: &load_end, rt_measure });
    Ok(())
}

// ───────────────────────────── owner slowdown and harvest ─────────────────────────────

#[derive(Args, Debug)]
pub struct SlowdownArgs {
    /// Rounds; each runs the three configurations once, interleaved.
    #[arg(long, default_value_t = 5)]
    pub rounds: usize,
    /// Length of the owner's fixed CPU task when alone, seconds (calibrated at start).
    #[arg(long, default_value_t = 3.0)]
    pub task_s: f64,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

/// The owner's fixed CPU task: `iters` rounds of xorshift.
fn owner_task(iters: u64) -> u64 {
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    for _ in 0..iters {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
    }
    std::hint::black_box(x)
}

/// Idle + iowait jiffies of the whole machine.
fn idle_jiffies() -> u64 {
    let s = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let f: Vec<u64> = s.lines().next().unwrap_or("").split_whitespace().skip(1).filter_map(|v| v.parse().ok()).collect();
    f.get(3).copied().unwrap_or(0) + f.get(4).copied().unwrap_or(0)
}

struct OwnerRun {
    task_s: f64,
    wake_us: Vec<f64>,
    guest_cpu_s: f64,
    idle_s: f64,
}

/// Runs the owner workload once; `guest_cpu` reads the guest's cumulative CPU µs.
fn owner_run(iters: u64, guest_cpu: &dyn Fn() -> u64) -> OwnerRun {
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let probe = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut lat = Vec::new();
            let period = Duration::from_millis(1);
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let t = Instant::now();
                std::thread::sleep(period);
                lat.push((t.elapsed().saturating_sub(period)).as_secs_f64() * 1e6);
            }
            lat
        })
    };
    let (g0, i0) = (guest_cpu(), idle_jiffies());
    let t0 = Instant::now();
    owner_task(iters);
    let task_s = t0.elapsed().as_secs_f64();
    let (g1, i1) = (guest_cpu(), idle_jiffies());
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let wake_us = probe.join().unwrap_or_default();
    OwnerRun {
        task_s,
        wake_us,
        guest_cpu_s: (g1 - g0) as f64 / 1e6,
        idle_s: (i1 - i0) as f64 / lull_e2e::process::clock_ticks_per_s() as f64,
    }
}

/// The same spinners at plain nice 19 (BOINC-style), in a unified cgroup with no
/// controllers, used only to read their CPU time.
struct NiceGuest {
    child: Child,
    dir: PathBuf,
}

impl NiceGuest {
    fn start(n: usize) -> Result<Self> {
        let dir = PathBuf::from(format!("{}/lull-bench-nice-{}", unified_root(), std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let procs = CString::new(dir.join("cgroup.procs").into_os_string().into_encoded_bytes())?;
        let script = spinner_script(n);
        let mut cmd = Command::new("sh");
        cmd.args(["-c", &script]).stdout(Stdio::null()).stderr(Stdio::null());
        // SAFETY: async-signal-safe calls only, on a path prepared before the fork.
        unsafe {
            cmd.pre_exec(move || {
                let fd = libc::open(procs.as_ptr(), libc::O_WRONLY);
                if fd >= 0 {
                    libc::write(fd, b"0".as_ptr().cast(), 1);
                    libc::close(fd);
                }
                libc::setpriority(libc::PRIO_PROCESS, 0, 19);
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
                Ok(())
            })
        };
        Ok(Self { child: cmd.spawn()?, dir })
    }
    fn cpu_us(&self) -> u64 {
        let s = std::fs::read_to_string(self.dir.join("cpu.stat")).unwrap_or_default();
        s.lines().find_map(|l| l.strip_prefix("usage_usec ")?.trim().parse().ok()).unwrap_or(0)
    }
}

impl Drop for NiceGuest {
    fn drop(&mut self) {
        let _ = std::fs::write(self.dir.join("cgroup.kill"), "1");
        let _ = self.child.kill();
        let _ = self.child.wait();
        std::thread::sleep(Duration::from_millis(50));
        let _ = std::fs::remove_dir(&self.dir);
    }
}

pub fn slowdown(a: SlowdownArgs) -> Result<()> {
    let ncpu = std::thread::available_parallelism().map_or(1, |n| n.get());
    // Calibrate the fixed task to about task_s alone.
    let probe_iters = 20_000_000u64;
    let t = Instant::now();
    owner_task(probe_iters);
    let iters = (probe_iters as f64 * a.task_s / t.elapsed().as_secs_f64().max(1e-6)) as u64;

    let base = format!("lull-bench-slow-{}", std::process::id());
    let (mut rt, _id, _dir) = runtime_with(&base, |_| {}, spinners(ncpu))?;
    rt.apply(GuestDirective::Freeze);
    let mut runs: [Vec<OwnerRun>; 3] = [Vec::new(), Vec::new(), Vec::new()];
    let bar = indicatif::ProgressBar::new(a.rounds as u64 * 3);
    if a.json {
        bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    for _ in 0..a.rounds {
        // Alone (the Lull guest frozen: it uses no CPU).
        runs[0].push(owner_run(iters, &|| 0));
        bar.inc(1);
        // With the guest under Lull.
        rt.apply(GuestDirective::Accept);
        std::thread::sleep(Duration::from_millis(300));
        let cell = Mutex::new(&mut rt);
        runs[1].push(owner_run(iters, &|| {
            let mut g = cell.lock().unwrap_or_else(|p| p.into_inner());
            g.tick();
            g.reading().cpu_us_total
        }));
        rt.apply(GuestDirective::Freeze);
        bar.inc(1);
        // With the same guest at plain nice 19.
        let nice = NiceGuest::start(ncpu)?;
        std::thread::sleep(Duration::from_millis(300));
        runs[2].push(owner_run(iters, &|| nice.cpu_us()));
        drop(nice);
        bar.inc(1);
    }
    bar.finish_and_clear();
    rt.apply(GuestDirective::Evict);

    let names = ["alone", "lull", "nice19"];
    let mut rows = Vec::new();
    let mut med_task = [0.0; 3];
    let mut p99_wake = [0.0; 3];
    for (k, rs) in runs.iter().enumerate() {
        let mut task: Vec<f64> = rs.iter().map(|r| r.task_s).collect();
        let mut wake: Vec<f64> = rs.iter().flat_map(|r| r.wake_us.iter().copied()).collect();
        let mut fcsr: Vec<f64> =
            rs.iter().map(|r| if r.guest_cpu_s + r.idle_s > 0.0 { r.guest_cpu_s / (r.guest_cpu_s + r.idle_s) } else { 0.0 }).collect();
        med_task[k] = percentile::of(&mut task, 0.5);
        let (w50, w99) = (percentile::of(&mut wake, 0.5), percentile::of(&mut wake, 0.99));
        p99_wake[k] = w99;
        rows.push(serde_json::json!({
            "config": names[k], "task_s_median": med_task[k], "wake_overshoot_us": {"p50": w50, "p99": w99, "samples": wake.len()},
            "guest_cpu_s_per_run_median": percentile::of(&mut rs.iter().map(|r| r.guest_cpu_s).collect::<Vec<_>>(), 0.5),
            "fcsr_median": percentile::of(&mut fcsr, 0.5),
        }));
    }
    let ldr = |k: usize| med_task[k] / med_task[0];
    let containment = rt.containment().as_str();
    drop(rt);
    purge_cgroup_base(&base);
    let result = serde_json::json!({
        "cpus": ncpu, "rounds": a.rounds, "containment": containment, "configs": rows,
        "ldr": {"lull": ldr(1), "nice19": ldr(2)},
        "wake_p99_increase_us": {"lull": p99_wake[1] - p99_wake[0], "nice19": p99_wake[2] - p99_wake[0]},
        "goal": {"owner_slowdown_max": 0.005, "wake_p99_increase_max_us": 50, "fcsr_min": 0.95},
    });
    if a.json {
        outln!("{result}");
    } else {
        outln!("owner slowdown and harvest, {ncpu} CPUs, {} rounds interleaved, guest = {ncpu} spinning processes:", a.rounds);
        for r in &rows {
            outln!(
                "  {:7} task {:.3} s (median)  wake-up overshoot p50 {:.0} µs p99 {:.0} µs  FCSR {:.3}",
                r["config"].as_str().unwrap_or(""),
                r["task_s_median"].as_f64().unwrap_or(0.0),
                r["wake_overshoot_us"]["p50"].as_f64().unwrap_or(0.0),
                r["wake_overshoot_us"]["p99"].as_f64().unwrap_or(0.0),
                r["fcsr_median"].as_f64().unwrap_or(0.0)
            );
        }
        outln!(
            "  LDR lull {:.4} · nice19 {:.4}   (goal ≤ 1.005) · wake p99 increase lull {:+.0} µs · nice19 {:+.0} µs (goal ≤ 50)",
            ldr(1),
            ldr(2),
            p99_wake[1] - p99_wake[0],
            p99_wake[2] - p99_wake[0]
        );
    }
    Ok(())
}

// ───────────────────────────── memory ─────────────────────────────

#[derive(Args, Debug)]
pub struct MemoryArgs {
    /// Memory of the simulated machine (a parent memory cgroup holding owner and guest), MiB.
    #[arg(long, default_value_t = 1024)]
    pub machine_mib: u64,
    /// The owner's working set, MiB.
    #[arg(long, default_value_t = 600)]
    pub owner_mib: u64,
    /// What the guest tries to allocate, MiB.
    #[arg(long, default_value_t = 900)]
    pub guest_mib: u64,
    /// The guest's cap in the capped run, MiB.
    #[arg(long, default_value_t = 256)]
    pub cap_mib: u64,
    /// Swap file to create when no swap is on (removed afterwards).
    #[arg(long, default_value = "/var/tmp/lull-bench.swap")]
    pub swapfile: PathBuf,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

struct Swap(Option<PathBuf>);
impl Drop for Swap {
    fn drop(&mut self) {
        if let Some(p) = self.0.take() {
            let _ = Command::new("swapoff").arg(&p).status();
            let _ = std::fs::remove_file(&p);
        }
    }
}

fn ensure_swap(path: &Path, mib: u64) -> Result<Swap> {
    if memory::meminfo().swap_total > 0 {
        return Ok(Swap(None));
    }
    let ok = |c: &mut Command| c.stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok_and(|s| s.success());
    if !ok(Command::new("dd").args(["if=/dev/zero", &format!("of={}", path.display()), "bs=1M", &format!("count={mib}")])) {
        bail!("could not write the swap file {}", path.display());
    }
    let swap = Swap(Some(path.to_path_buf()));
    std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(0o600))?;
    if !ok(Command::new("mkswap").arg(path)) || !ok(Command::new("swapon").arg(path)) {
        bail!("mkswap/swapon {} failed (needs root)", path.display());
    }
    Ok(swap)
}

/// The simulated machine: a v1 (hybrid) or v2 memory cgroup with an owner child.
struct Machine {
    dirs: Vec<PathBuf>,
    owner_procs: PathBuf,
}

impl Machine {
    fn new(name: &str, mib: u64) -> Result<Self> {
        let bytes = (mib << 20).to_string();
        if Path::new("/sys/fs/cgroup/cgroup.controllers").exists() {
            let d = PathBuf::from("/sys/fs/cgroup").join(name);
            std::fs::create_dir_all(d.join("owner"))?;
            std::fs::write(d.join("cgroup.subtree_control"), "+memory")?;
            std::fs::write(d.join("memory.max"), &bytes)?;
            Ok(Self { owner_procs: d.join("owner/cgroup.procs"), dirs: vec![d] })
        } else {
            let m = PathBuf::from("/sys/fs/cgroup/memory").join(name);
            std::fs::create_dir_all(m.join("owner"))?;
            std::fs::write(m.join("memory.limit_in_bytes"), &bytes)?;
            let _ = std::fs::write(m.join("memory.swappiness"), "60");
            let _ = std::fs::write(m.join("owner/memory.swappiness"), "60");
            Ok(Self { owner_procs: m.join("owner/cgroup.procs"), dirs: vec![m] })
        }
    }
}

impl Drop for Machine {
    fn drop(&mut self) {
        for d in &self.dirs {
            for sub in ["owner", ""] {
                let p = d.join(sub);
                for pid in std::fs::read_to_string(p.join("cgroup.procs")).unwrap_or_default().lines() {
                    if let Ok(pid) = pid.trim().parse::<i32>() {
                        // SAFETY: kill has no memory-safety preconditions.
                        unsafe { libc::kill(pid, libc::SIGKILL) };
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(100));
            for sub in ["lull/guests", "lull", "owner", ""] {
                let _ = std::fs::remove_dir(d.join(sub));
            }
        }
    }
}

/// The owner: a process holding a touched working set, placed in the machine's owner cgroup.
fn start_owner(procs: &Path, mib: u64, ready: &Path) -> Result<Child> {
    let procs = CString::new(procs.as_os_str().as_encoded_bytes())?;
    let code = format!(
        "import time\nb = bytearray({mib} << 20)\nfor i in range(0, len(b), 4096):\n    b[i] = 1\nopen({:?}, 'w').close()\ntime.sleep(3600)\n",
        ready.display().to_string()
    );
    let mut cmd = Command::new("python3");
    cmd.args(["-c", &code]).stdout(Stdio::null()).stderr(Stdio::null());
    // SAFETY: async-signal-safe calls only, on a path prepared before the fork.
    unsafe {
        cmd.pre_exec(move || {
            let fd = libc::open(procs.as_ptr(), libc::O_WRONLY);
            if fd < 0 {
                return Err(std::io::Error::last_os_error());
            }
            libc::write(fd, b"0".as_ptr().cast(), 1);
            libc::close(fd);
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
            Ok(())
        })
    };
    let child = cmd.spawn().context("starting the owner (python3)")?;
    let deadline = Instant::now() + Duration::from_secs(60);
    while !ready.exists() {
        if Instant::now() > deadline {
            bail!("the owner did not build its working set");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(child)
}

fn vm_swap(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("VmSwap:")).and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok()))
        .unwrap_or(0)
        * 1024
}

fn guest_alloc(mib: u64) -> GuestSpec {
    let code = format!(
        "import time\nb = []\nfor i in range({mib} // 8):\n    b.append(bytearray(8 << 20))\n    for j in range(0, 8 << 20, 4096):\n        b[-1][j] = 1\nopen('allocated', 'w').close()\ntime.sleep(3600)\n"
    );
    GuestSpec::new("python3", ["-c", code.as_str()])
}

/// One guest run in the machine; returns (owner bytes swapped by the guest, guest ended by OOM, restore).
fn memory_case(a: &MemoryArgs, capped: bool) -> Result<serde_json::Value> {
    let name = format!("lull-bench-mem-{}-{}", std::process::id(), if capped { "cap" } else { "nocap" });
    let machine = Machine::new(&name, a.machine_mib)?;
    let tmp = tempfile::tempdir()?;
    let mut owner = start_owner(&machine.owner_procs, a.owner_mib, &tmp.path().join("ready"))?;
    let swapped_before = vm_swap(owner.id());
    let (cap, psi) = if capped { (a.cap_mib, 10.0) } else { (0, 100.0) };
    let (mut rt, id, _dir) = runtime_with(
        &format!("{name}/lull"),
        |c| {
            c.guests.memory_cap_mib = cap;
            c.guests.owner_reserve_mib = 0;
            // The uncapped run measures restore: the pressure guard would freeze the guest first.
            c.guests.pressure_freeze_pct = psi;
        },
        guest_alloc(a.guest_mib),
    )?;
    let wd = rt.guests().into_iter().find(|g| g.id == id).map(|g| g.workdir).context("guest")?;
    let deadline = Instant::now() + Duration::from_secs(120);
    let outcome = loop {
        rt.tick();
        let g = rt.guests().into_iter().find(|g| g.id == id).context("guest")?;
        if let GuestPhase::Ended { signal, .. } = g.phase {
            break format!("ended (signal {signal:?}, OOM at its cap)");
        }
        if wd.join("allocated").exists() {
            break "allocated everything".into();
        }
        if Instant::now() > deadline {
            break "timed out".into();
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let peak = rt.guests().into_iter().find(|g| g.id == id).map(|g| g.peak_mem_bytes).unwrap_or(0);
    let swapped_by_guest = vm_swap(owner.id()).saturating_sub(swapped_before);
    // Evict; the runtime restores the owner's pages and times it.
    rt.apply(GuestDirective::Evict);
    let deadline = Instant::now() + Duration::from_secs(120);
    let restore = loop {
        rt.tick();
        if !rt.present() {
            if let Some(r) = rt.last_restore() {
                break Some(r);
            }
        }
        if Instant::now() > deadline {
            break None;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let restore_ms = rt.take_restore().and_then(|r| r.anon_ms).map(|ms| ms as f64);
    let after = vm_swap(owner.id());
    let _ = owner.kill();
    let _ = owner.wait();
    drop(rt);
    purge_cgroup_base(&format!("{name}/lull"));
    drop(machine);
    purge_cgroup_base(&name);
    Ok(serde_json::json!({
        "capped": capped, "cap_mib": if capped { Some(a.cap_mib) } else { None }, "guest_outcome": outcome,
        "guest_peak_mib": peak as f64 / 1048576.0,
        "owner_swapped_by_guest_mib": swapped_by_guest as f64 / 1048576.0,
        "restore_ms": restore_ms,
        "restore": restore.map(|r| serde_json::json!({"processes": r.processes, "before_mib": r.swapped_before as f64 / 1048576.0,
            "after_mib": r.swapped_after as f64 / 1048576.0, "advised_ranges": r.advised, "read_ranges": r.read})),
        "owner_swapped_after_restore_mib": after as f64 / 1048576.0,
    }))
}

pub fn memory_bench(a: MemoryArgs) -> Result<()> {
    let _swap = ensure_swap(&a.swapfile, 2048)?;
    let capped = memory_case(&a, true)?;
    let uncapped = memory_case(&a, false)?;
    let result = serde_json::json!({
        "machine_mib": a.machine_mib, "owner_mib": a.owner_mib, "guest_mib": a.guest_mib,
        "swap_total_mib": memory::meminfo().swap_total >> 20, "capped": capped, "uncapped": uncapped,
        "goal": {"owner_swapped_by_guest_mib_with_cap": 0},
    });
    if a.json {
        outln!("{result}");
    } else {
        outln!(
            "memory: simulated machine {} MiB, owner working set {} MiB, guest tries {} MiB, swap {} MiB",
            a.machine_mib,
            a.owner_mib,
            a.guest_mib,
            memory::meminfo().swap_total >> 20
        );
        for (label, c) in [("capped", &capped), ("cap disabled", &uncapped)] {
            outln!(
                "  {label:13} guest {} (peak {:.0} MiB) · owner pages swapped out by the guest {:.1} MiB · restore {} · owner in swap after {:.1} MiB",
                c["guest_outcome"].as_str().unwrap_or(""),
                c["guest_peak_mib"].as_f64().unwrap_or(0.0),
                c["owner_swapped_by_guest_mib"].as_f64().unwrap_or(0.0),
                c["restore_ms"].as_f64().map_or("not needed".into(), |m| format!("{m:.0} ms")),
                c["owner_swapped_after_restore_mib"].as_f64().unwrap_or(0.0),
            );
        }
    }
    Ok(())
}
