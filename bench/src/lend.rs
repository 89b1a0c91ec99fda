//! `lull-bench lend-light`: lending while the owner works lightly (seed 000's lingering
//! that starts work), measured on a real `lull agent` from outside.
//!
//! Under a private Xvfb the agent runs with the X11 input backend and a recruitment
//! threshold of an hour, so a guest can only start by lending. This process is the
//! owner: `xdotool` moves the pointer every half second (the owner is present) and a
//! light task wakes every `--period-ms`, does a fixed piece of work calibrated to
//! `--duty` of a core and sleeps again. First, with lending off (the default), the agent
//! must not accept guest work for a few seconds; then `lull limits --lend-while-light on`
//! turns it on and the agent must reach `lending_light` with the input still going.
//!
//! Then a CPU-bound guest (one spinner per CPU) is handed to the agent by `lull run`; it
//! starts while the owner is present and runs at the agent's lowest priority. Round by
//! round, in rotating order so drift falls on all alike, the owner's task is measured
//! alone (the guest's own cgroup frozen by this process: it uses no CPU), with the guest
//! running, and (`--control`) twice more with the guest frozen: the same spinners run by
//! the owner at normal priority (what the owner would feel without Lull; on a quiet
//! machine the kernel's fair scheduler already favours a light task that sleeps, so this
//! may move by a few per cent only), and the positive control, in which the owner's task
//! does a known [`KNOWN_EXTRA`] more work: a slowdown of known size that the measurement
//! must see above its bound, or it could not tell a slowdown from noise. The owner's slowdown is the ratio of
//! the medians of the task's response time (from its period's start to the end of its
//! work) with and without the guest; the noise floor is the same ratio between the
//! alone rounds of even and odd index. The guest's CPU comes from the agent's ledger
//! (all of it must be accounted as given while the owner was present) and no
//! interruption may be counted.

use crate::guest::spinner_script;
use crate::owner_return::machine_env;
use agent_core::control::AgentStatus;
use agent_core::policy::{GuestDirective, StateKind};
use anyhow::{bail, Context, Result};
use clap::Args;
use lull_e2e::percentile;
use lull_e2e::process::{end_with_us, terminate, wait_until};
use lull_e2e::{agent_status, find_unified_base, lull_bin, purge_cgroup_base, try_start_agent, Xvfb};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(Args, Debug)]
pub struct LendLightArgs {
    /// Rounds; each measures every configuration once, in rotating order.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(2..=200))]
    pub rounds: u64,
    /// Seconds each configuration is measured in a round.
    #[arg(long, default_value_t = 2.0)]
    pub round_s: f64,
    /// The owner's light task: its period, milliseconds.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(2..=1000))]
    pub period_ms: u64,
    /// The owner's light task: the share of one core its work takes when alone (0.01–0.5).
    #[arg(long, default_value_t = 0.05)]
    pub duty: f64,
    /// The agent's light-load limit l, % of the machine (1–100). The default, 100, leaves
    /// CPU out of the light test, so that other users' load on a shared machine (which
    /// the agent counts as the owner's) cannot stop the lending under test.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..=100))]
    pub light_cpu: u64,
    /// Also measure the control: the same spinners at normal priority, outside Lull.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub control: bool,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

/// The configurations measured, in the order of the first round.
const CONFIGS: [&str; 4] = ["alone", "lull", "plain", "known"];

/// The positive control's extra work: the owner's task does this much more (the guest
/// frozen), a slowdown of known size the measurement must be able to see.
pub const KNOWN_EXTRA: f64 = 0.25;

/// The index of the positive control in [`CONFIGS`].
const KNOWN: u8 = 3;

/// Fixed work: `iters` rounds of xorshift.
fn work(iters: u64) -> u64 {
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    for _ in 0..iters {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
    }
    std::hint::black_box(x)
}

/// One period of the owner's task: how late it started and how long its work took, µs.
#[derive(Clone, Copy)]
struct Tick {
    config: u8,
    round: u32,
    late_us: f64,
    compute_us: f64,
}

/// The owner's light task on its own thread: every period it does the same work and
/// records it under the configuration being measured (none: not recorded).
struct Owner {
    stop: Arc<AtomicBool>,
    measuring: Arc<AtomicU8>,
    round: Arc<std::sync::atomic::AtomicU32>,
    ticks: Arc<Mutex<Vec<Tick>>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

const NOT_MEASURING: u8 = u8::MAX;

impl Owner {
    fn start(period: Duration, iters: u64) -> Self {
        let known_iters = (iters as f64 * (1.0 + KNOWN_EXTRA)) as u64;
        let stop = Arc::new(AtomicBool::new(false));
        let measuring = Arc::new(AtomicU8::new(NOT_MEASURING));
        let round = Arc::new(std::sync::atomic::AtomicU32::new(0));
        let ticks = Arc::new(Mutex::new(Vec::new()));
        let (s, m, r, t) = (stop.clone(), measuring.clone(), round.clone(), ticks.clone());
        let thread = std::thread::spawn(move || {
            let mut next = Instant::now() + period;
            while !s.load(Ordering::Relaxed) {
                let now = Instant::now();
                if next > now {
                    std::thread::sleep(next - now);
                }
                let config = m.load(Ordering::Relaxed);
                let started = Instant::now();
                work(if config == KNOWN { known_iters } else { iters });
                let done = Instant::now();
                if config != NOT_MEASURING {
                    let tick = Tick {
                        config,
                        round: r.load(Ordering::Relaxed),
                        late_us: started.saturating_duration_since(next).as_secs_f64() * 1e6,
                        compute_us: (done - started).as_secs_f64() * 1e6,
                    };
                    t.lock().unwrap_or_else(|p| p.into_inner()).push(tick);
                }
                // Fixed periods: a late period does not shift the ones after it.
                next += period;
                while next < done {
                    next += period;
                }
            }
        });
        Self { stop, measuring, round, ticks, thread: Some(thread) }
    }

    fn measure(&self, config: u8, round: u32, for_s: f64) {
        self.round.store(round, Ordering::Relaxed);
        self.measuring.store(config, Ordering::Relaxed);
        std::thread::sleep(Duration::from_secs_f64(for_s));
        self.measuring.store(NOT_MEASURING, Ordering::Relaxed);
    }
}

impl Drop for Owner {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The owner's hand: a relative pointer motion every half second (XTest, through
/// `xdotool`), so the agent sees the owner present throughout.
struct Hand {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Hand {
    fn start(display: &str) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let (s, display) = (stop.clone(), display.to_owned());
        let thread = std::thread::spawn(move || {
            let mut i = 0;
            while !s.load(Ordering::Relaxed) {
                let dx = if i % 2 == 0 { "3" } else { "-3" };
                let _ = Command::new("xdotool")
                    .args(["mousemove_relative", "--", dx, "0"])
                    .env("DISPLAY", &display)
                    .stderr(Stdio::null())
                    .status();
                i += 1;
                std::thread::sleep(Duration::from_millis(500));
            }
        });
        Self { stop, thread: Some(thread) }
    }
}

impl Drop for Hand {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The agent under test, stopped (SIGTERM) and its cgroups removed on drop.
struct Lender {
    dir: tempfile::TempDir,
    base: String,
    display: String,
    agent: Child,
}

impl Lender {
    fn socket(&self) -> std::path::PathBuf {
        self.dir.path().join("agent.sock")
    }

    fn status(&self) -> Option<AgentStatus> {
        agent_status(&self.socket())
    }

    fn lull(&self, args: &[&str]) -> Result<Command> {
        let mut c = Command::new(lull_bin());
        c.args(args);
        machine_env(&mut c, self.dir.path(), &self.base, &self.display);
        Ok(c)
    }
}

impl Drop for Lender {
    fn drop(&mut self) {
        terminate(&mut self.agent, Duration::from_secs(20));
        purge_cgroup_base(&self.base);
    }
}

/// The control: the same spinners run by the owner at normal priority. Killed on drop.
struct Plain(Child);

impl Drop for Plain {
    fn drop(&mut self) {
        // SAFETY: signals the process group of a child we made its leader.
        unsafe { libc::kill(-(self.0.id() as i32), libc::SIGKILL) };
        let _ = self.0.wait();
    }
}

fn plain_spinners(n: usize) -> Result<Plain> {
    use std::os::unix::process::CommandExt;
    let mut c = Command::new("sh");
    c.args(["-c", &spinner_script(n)]).stdout(Stdio::null()).stderr(Stdio::null()).process_group(0);
    end_with_us(&mut c, libc::SIGKILL);
    Ok(Plain(c.spawn().context("starting the control spinners")?))
}

/// Starts a guest through `lull run` and waits until it runs while lending.
fn start_guest(l: &Lender, n: usize) -> Result<Child> {
    let mut run = l.lull(&["run", "--", "sh", "-c", &spinner_script(n)])?;
    run.stdout(Stdio::null()).stderr(Stdio::null());
    end_with_us(&mut run, libc::SIGKILL);
    let child = run.spawn().context("lull run")?;
    wait_until("the guest to run while lending", Duration::from_secs(30), || {
        l.status().filter(|s| {
            s.policy.guests_present && s.policy.state == StateKind::LendingLight && s.policy.directive == GuestDirective::Accept
        })
    })?;
    Ok(child)
}

/// The guest's own leaf cgroups in the unified hierarchy (`…/<base>/guests/<agent
/// instance>/<guest>`): freezing one stops that guest whatever the agent does with the
/// instance above it.
fn guest_leaves(base: &str) -> Vec<std::path::PathBuf> {
    let Some(d) = find_unified_base(base) else { return Vec::new() };
    let instances = std::fs::read_dir(d.join("guests")).into_iter().flatten().flatten().map(|e| e.path());
    instances
        .flat_map(|i| std::fs::read_dir(i).into_iter().flatten().flatten().map(|e| e.path()))
        .filter(|p| p.join("cgroup.freeze").exists())
        .collect()
}

/// Freezes or thaws the guest's leaf cgroups and waits until the kernel says so.
fn freeze(leaves: &[std::path::PathBuf], frozen: bool) -> Result<()> {
    for l in leaves {
        std::fs::write(l.join("cgroup.freeze"), if frozen { "1" } else { "0" })
            .with_context(|| format!("writing {}", l.join("cgroup.freeze").display()))?;
    }
    let want = if frozen { "frozen 1" } else { "frozen 0" };
    wait_until("the guest's cgroup to freeze or thaw", Duration::from_secs(10), || {
        leaves.iter().all(|l| std::fs::read_to_string(l.join("cgroup.events")).is_ok_and(|e| e.lines().any(|x| x == want))).then_some(())
    })?;
    Ok(())
}

/// Stops the guest as its owner's Ctrl-C would (`lull run` asks the agent to stop it).
fn stop_guest(l: &Lender, mut run: Child) -> Result<()> {
    // SAFETY: signals a child of ours.
    unsafe { libc::kill(run.id() as i32, libc::SIGINT) };
    if wait_until("lull run to end", Duration::from_secs(20), || matches!(run.try_wait(), Ok(Some(_))).then_some(())).is_err() {
        let _ = run.kill();
        bail!("lull run did not end within 20 s of Ctrl-C");
    }
    wait_until("the guest to be gone", Duration::from_secs(20), || l.status().filter(|s| !s.policy.guests_present))?;
    Ok(())
}

fn start_lender(display: &str, light_cpu: u64) -> Result<Lender> {
    let dir = tempfile::tempdir()?;
    // An hour's recruitment threshold: while the owner moves the pointer every half
    // second nothing is ever recruited; guest work can only start by lending. Memory
    // growth is left out (other processes on a shared machine grow and shrink).
    let config = format!(
        "[sampling]\ninterval_ms = 200\nrelaxed_interval_ms = 500\n\n\
         [availability]\nrecruitment_threshold_s = 3600\nmemory_growth_max = 1.0\nlight_cpu_max = {}\nlight_for_s = 2\n\n\
         [input]\nbackend = \"x11\"\n",
        light_cpu as f64 / 100.0
    );
    std::fs::write(dir.path().join("config.toml"), config)?;
    let base = format!("lull-bench-lend-{}", std::process::id());
    let mut c = Command::new(lull_bin());
    c.arg("agent");
    machine_env(&mut c, dir.path(), &base, display);
    let agent = try_start_agent(&mut c, &dir.path().join("agent.sock"), Duration::from_secs(60), |_| true).with_context(|| {
        purge_cgroup_base(&base);
        std::fs::read_to_string(dir.path().join("instance.log")).unwrap_or_default()
    })?;
    Ok(Lender { dir, base, display: display.to_owned(), agent })
}

/// Median, p90, p99 and mean of a set of µs figures.
fn summary(mut v: Vec<f64>) -> serde_json::Value {
    let n = v.len();
    let mean = if n > 0 { v.iter().sum::<f64>() / n as f64 } else { 0.0 };
    serde_json::json!({"p50": percentile::of(&mut v, 0.5), "p90": percentile::of(&mut v, 0.9), "p99": percentile::of(&mut v, 0.99), "mean": mean, "n": n})
}

fn mean(v: &[f64]) -> f64 {
    if v.is_empty() {
        0.0
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

/// The owner's work per period: `iters` of [`work`] calibrated to `duty` of the period
/// when alone (best of a few timings).
fn calibrate_work(period: Duration, duty: f64) -> u64 {
    let probe = 200_000u64;
    let best = (0..20)
        .map(|_| {
            let t = Instant::now();
            work(probe);
            t.elapsed().as_secs_f64()
        })
        .fold(f64::MAX, f64::min);
    ((probe as f64) * period.as_secs_f64() * duty / best.max(1e-9)) as u64
}

/// Lending is off by default: for 4 s the agent must see the owner present and accept
/// no guest work.
fn check_lending_off_by_default(lender: &Lender) -> Result<()> {
    let t0 = Instant::now();
    let mut seen_present = false;
    while t0.elapsed() < Duration::from_secs(4) {
        let s = lender.status().context("the agent stopped answering")?;
        if s.policy.state == StateKind::LendingLight || s.policy.directive == GuestDirective::Accept {
            bail!("with lending off the agent accepted guest work while the owner was present (state {})", s.policy.state.as_str());
        }
        seen_present |= s.policy.state == StateKind::OwnerActive;
        std::thread::sleep(Duration::from_millis(100));
    }
    if !seen_present {
        bail!(
            "the agent never saw the owner present (X11 input from xdotool): {}",
            std::fs::read_to_string(lender.dir.path().join("instance.log")).unwrap_or_default()
        );
    }
    Ok(())
}

/// The owner opts in, from outside, as they would (`lull limits --lend-while-light on`);
/// returns the agent's status once it lends while light.
fn opt_in_to_lending(lender: &Lender) -> Result<AgentStatus> {
    let out = lender.lull(&["limits", "--lend-while-light", "on", "--json"])?.stderr(Stdio::piped()).stdout(Stdio::piped()).output()?;
    if !out.status.success() {
        bail!("lull limits --lend-while-light on: {}", String::from_utf8_lossy(&out.stderr));
    }
    let saved = std::fs::read_to_string(lender.dir.path().join("config.toml"))?;
    if !saved.contains("lend_while_light = true") {
        bail!("lull limits did not write lend_while_light into the owner's file:\n{saved}");
    }
    Ok(wait_until("lending while light", Duration::from_secs(30), || {
        lender.status().filter(|s| s.policy.state == StateKind::LendingLight)
    })?)
}

/// What the rounds left besides the owner's ticks: the seconds measured with the guest
/// running and the agent's states seen meanwhile.
struct GuestRounds {
    lull_s: f64,
    states_while_guest: std::collections::BTreeSet<&'static str>,
}

/// Measures each configuration once per round, in rotating order: alone (the guest
/// frozen), with the guest running, the plain spinners, the known extra work.
fn measure_rounds(
    a: &LendLightArgs,
    configs: &[u8],
    lender: &Lender,
    owner: &Owner,
    leaves: &[std::path::PathBuf],
    ncpu: usize,
) -> Result<GuestRounds> {
    let bar = indicatif::ProgressBar::new(a.rounds * if a.control { 4 } else { 2 });
    if a.json {
        bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    let mut lull_s = 0.0;
    let mut states_while_guest = std::collections::BTreeSet::new();
    for round in 0..a.rounds as u32 {
        let k = configs.len();
        let order: Vec<u8> = (0..k).map(|i| configs[(i + round as usize) % k]).collect();
        for c in order {
            match c {
                0 => {
                    freeze(leaves, true)?;
                    owner.measure(0, round, a.round_s);
                }
                1 => {
                    freeze(leaves, false)?;
                    let t = Instant::now();
                    owner.measure(1, round, a.round_s);
                    lull_s += t.elapsed().as_secs_f64();
                    let s = lender.status().context("the agent stopped answering")?;
                    if !s.policy.guests_present {
                        bail!("the guest ended during the benchmark");
                    }
                    states_while_guest.insert(s.policy.state.as_str());
                }
                KNOWN => {
                    freeze(leaves, true)?;
                    owner.measure(KNOWN, round, a.round_s);
                }
                _ => {
                    freeze(leaves, true)?;
                    let plain = plain_spinners(ncpu)?;
                    std::thread::sleep(Duration::from_millis(100));
                    owner.measure(2, round, a.round_s);
                    drop(plain);
                }
            }
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    Ok(GuestRounds { lull_s, states_while_guest })
}

/// The owner's response times per configuration and the slowdowns they give, each
/// indexed by the configuration's place in [`CONFIGS`].
struct Slowdowns {
    /// One row per configuration measured: response, compute and lateness summaries.
    rows: Vec<serde_json::Value>,
    /// The median response over the alone median, minus one.
    by_median: [f64; 4],
    /// The mean response over the alone mean, minus one.
    by_mean: [f64; 4],
    /// The median over rounds of each round's median over the same round's alone median.
    per_round_median: [f64; 4],
    /// The same ratio between the alone rounds of even and odd index.
    noise: f64,
}

/// Tallies the owner's ticks into response summaries and slowdowns.
fn tally(ticks: &[Tick], configs: &[u8], rounds: u64) -> Slowdowns {
    let response = |c: u8, f: &dyn Fn(&Tick) -> bool| -> Vec<f64> {
        ticks.iter().filter(|t| t.config == c && f(t)).map(|t| t.late_us + t.compute_us).collect()
    };
    let all = |_: &Tick| true;
    let mut rows = Vec::new();
    let mut p50 = [0.0f64; 4];
    let mut means = [0.0f64; 4];
    for &c in configs {
        let r = response(c, &all);
        means[c as usize] = mean(&r);
        let comp: Vec<f64> = ticks.iter().filter(|t| t.config == c).map(|t| t.compute_us).collect();
        let late: Vec<f64> = ticks.iter().filter(|t| t.config == c).map(|t| t.late_us).collect();
        p50[c as usize] = percentile::of(&mut r.clone(), 0.5);
        rows.push(serde_json::json!({
            "config": CONFIGS[c as usize], "response_us": summary(r), "compute_us": summary(comp), "late_us": summary(late),
        }));
    }
    // Per round: the guest's response median over the same round's alone median.
    let per_round = |c: u8| -> f64 {
        let mut ratios: Vec<f64> = (0..rounds as u32)
            .filter_map(|r| {
                let alone = percentile::of(&mut response(0, &|t: &Tick| t.round == r), 0.5);
                let with = percentile::of(&mut response(c, &|t: &Tick| t.round == r), 0.5);
                (alone > 0.0 && with > 0.0).then(|| with / alone - 1.0)
            })
            .collect();
        percentile::of(&mut ratios, 0.5)
    };
    let even = percentile::of(&mut response(0, &|t: &Tick| t.round.is_multiple_of(2)), 0.5);
    let odd = percentile::of(&mut response(0, &|t: &Tick| !t.round.is_multiple_of(2)), 0.5);
    let noise = if even > 0.0 { (odd / even - 1.0).abs() } else { 0.0 };
    let ratio = |v: &[f64; 4], c: usize| if v[0] > 0.0 { v[c] / v[0] - 1.0 } else { 0.0 };
    let mut per_round_median = [0.0f64; 4];
    for &c in configs {
        per_round_median[c as usize] = per_round(c);
    }
    Slowdowns {
        rows,
        by_median: std::array::from_fn(|c| ratio(&p50, c)),
        by_mean: std::array::from_fn(|c| ratio(&means, c)),
        per_round_median,
        noise,
    }
}

pub fn run(a: LendLightArgs) -> Result<()> {
    if !(0.01..=0.5).contains(&a.duty) {
        bail!("--duty {}: allowed 0.01..=0.5", a.duty);
    }
    if !(0.5..=600.0).contains(&a.round_s) {
        bail!("--round-s {}: allowed 0.5..=600", a.round_s);
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        bail!("this benchmark runs a real agent's guests in cgroups; run it as root (or where the agent can create cgroups)");
    }
    let ncpu = std::thread::available_parallelism().map_or(1, |n| n.get());
    let period = Duration::from_millis(a.period_ms);
    let iters = calibrate_work(period, a.duty);

    let xvfb = Xvfb::try_start()?;
    let display = xvfb.display.clone();
    let lender = start_lender(&display, a.light_cpu)?;
    let _hand = Hand::start(&display);
    let owner = Owner::start(period, iters);

    check_lending_off_by_default(&lender)?;
    let lending = opt_in_to_lending(&lender)?;
    let before = lender.status().context("status")?;

    let configs: Vec<u8> = if a.control { vec![0, 1, 2, KNOWN] } else { vec![0, 1] };
    let run = start_guest(&lender, ncpu)?;
    let leaves = guest_leaves(&lender.base);
    if leaves.is_empty() {
        bail!("found no cgroup of the guest under {}", lender.base);
    }
    let guest_rounds = measure_rounds(&a, &configs, &lender, &owner, &leaves, ncpu)?;
    freeze(&leaves, false)?;
    stop_guest(&lender, run)?;
    let after = lender.status().context("status")?;
    let ticks = owner.ticks.lock().unwrap_or_else(|p| p.into_inner()).clone();
    drop(owner);

    let slowdowns = tally(&ticks, &configs, a.rounds);
    report(&a, ncpu, iters, &AgentFigures::new(&lending, guest_rounds, &before, &after), &slowdowns);
    Ok(())
}

/// The agent's side of the result: the state lending reached, the states and seconds
/// measured with the guest running, and the ledger's guest CPU and interruptions.
struct AgentFigures {
    state_reached: &'static str,
    states_while_guest: std::collections::BTreeSet<&'static str>,
    lull_s: f64,
    cpu_s: f64,
    present_cpu_s: f64,
    interruptions: u32,
}

impl AgentFigures {
    fn new(lending: &AgentStatus, rounds: GuestRounds, before: &AgentStatus, after: &AgentStatus) -> Self {
        Self {
            state_reached: lending.policy.state.as_str(),
            states_while_guest: rounds.states_while_guest,
            lull_s: rounds.lull_s,
            cpu_s: after.donated_cpu_s_today - before.donated_cpu_s_today,
            present_cpu_s: after.donated_present_cpu_s_today - before.donated_present_cpu_s_today,
            interruptions: after.policy.interruptions_today,
        }
    }
}

/// Prints the result: JSON with `--json`, else a few lines against the goal.
fn report(a: &LendLightArgs, ncpu: usize, iters: u64, agent: &AgentFigures, s: &Slowdowns) {
    let (rows, noise, lull_s, cpu_s, present_cpu_s) = (&s.rows, s.noise, agent.lull_s, agent.cpu_s, agent.present_cpu_s);
    let slowdown = |c: usize| s.by_median[c];
    let slowdown_mean = |c: usize| s.by_mean[c];
    let per_round = |c: u8| s.per_round_median[c as usize];
    let result = serde_json::json!({
        "cpus": ncpu,
        "rounds": a.rounds,
        "round_s": a.round_s,
        "owner": {"period_ms": a.period_ms, "duty": a.duty, "work_iters": iters, "input_every_ms": 500},
        "light_cpu_max": a.light_cpu as f64 / 100.0,
        "lending": {
            "off_by_default": true,
            "state_reached": agent.state_reached,
            "states_while_guest_ran": agent.states_while_guest,
        },
        "configs": rows,
        "slowdown": {
            "lull": slowdown(1),
            "plain": a.control.then(|| slowdown(2)),
            "known": a.control.then(|| slowdown(KNOWN as usize)),
        },
        "slowdown_per_round_median": {
            "lull": per_round(1),
            "plain": a.control.then(|| per_round(2)),
            "known": a.control.then(|| per_round(KNOWN)),
        },
        "slowdown_of_mean": {
            "lull": slowdown_mean(1),
            "plain": a.control.then(|| slowdown_mean(2)),
            "known": a.control.then(|| slowdown_mean(KNOWN as usize)),
        },
        "known_extra_work": a.control.then_some(KNOWN_EXTRA),
        "noise_alone_even_vs_odd": noise,
        "guest": {
            "cpu_s": cpu_s,
            "present_cpu_s": present_cpu_s,
            "share_of_machine_while_running": if lull_s > 0.0 { cpu_s / (lull_s * ncpu as f64) } else { 0.0 },
        },
        "interruptions": agent.interruptions,
        "goal": {"owner_slowdown_max": 0.01},
    });
    if a.json {
        outln!("{result}");
    } else {
        outln!(
            "lend while light: owner task {} ms every {} ms (+ a pointer motion every 500 ms), {ncpu} CPUs, {} rounds × {} s, guest = {ncpu} spinners",
            (a.duty * a.period_ms as f64),
            a.period_ms,
            a.rounds,
            a.round_s
        );
        for r in rows {
            outln!(
                "  {:6} response p50 {:.0} µs p99 {:.0} µs (n {})",
                r["config"].as_str().unwrap_or(""),
                r["response_us"]["p50"].as_f64().unwrap_or(0.0),
                r["response_us"]["p99"].as_f64().unwrap_or(0.0),
                r["response_us"]["n"].as_u64().unwrap_or(0)
            );
        }
        outln!(
            "  owner slowdown with the lent guest {:+.2} % by median (goal ≤ 1 %), {:+.2} % by mean; noise floor {:.2} %",
            slowdown(1) * 100.0,
            slowdown_mean(1) * 100.0,
            noise * 100.0
        );
        if a.control {
            outln!(
                "  the same spinners at normal priority, outside Lull: {:+.2} % by median, {:+.2} % by mean",
                slowdown(2) * 100.0,
                slowdown_mean(2) * 100.0
            );
            outln!(
                "  positive control, the owner's work {:.0} % longer: {:+.2} % by median (it must show above 1 % + noise floor)",
                KNOWN_EXTRA * 100.0,
                slowdown(KNOWN as usize) * 100.0
            );
        }
        outln!(
            "  guest CPU {cpu_s:.1} s ({present_cpu_s:.1} s accounted as given while the owner was present), interruptions {}",
            agent.interruptions
        );
    }
}
