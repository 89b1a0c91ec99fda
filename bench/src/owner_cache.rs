//! `lull-bench owner-cache`: the owner's file cache after a memory-hungry guest, with and
//! without Lull's file-cache restore, timed on the real `lull agent` from outside.
//!
//! The machine: a memory cgroup of the bench's own with a hard limit (`--limit-mib`)
//! holding the owner (`owner/`) and the agent's guests (`pool/`, the agent's
//! `LULL_CGROUP`), so that the guest's allocation really pushes the owner's page cache
//! out on a machine with far more memory than the working set (the agent itself stays
//! outside). The owner: a Python program in `owner/` holding `--files` files of the
//! working set open, which on each request reads them all through (1-MiB `preadv`) and
//! reports the time it took.
//!
//! Each round and case: the files' pages are dropped (`POSIX_FADV_DONTNEED`) and read
//! once by the owner (charged to the owner's cgroup; the cold time), then read
//! `--before-reads` times (**before**). A fresh `lull agent` (immediate eviction, X11
//! input on a private Xvfb, `[memory] owner_cgroup` naming the owner's cgroup) is handed
//! the memory-hungry guest over its control socket (`RunJob`, as `lull run` does); the
//! guest allocates `--guest-mib` and says so. The owner's return is one `xdotool
//! mousemove_relative` on the Xvfb; the agent evicts the guest and runs its restore
//! (`lull status` shows it done). Then the owner reads its files once more (**after**).
//! Cases, alternated within each round: `no-restore` (`[memory] cache_snapshot_mib = 0`:
//! only the swapped-page restore, which has nothing to do without swap), `restore` (the
//! default) and `restore-4mib-reads` (the restore reading in 4-MiB steps, as it did
//! before 128-KiB reads: `LULL_RESTORE_READ_KIB=4096` in the agent's environment; run the
//! bench with `LULL_RESTORE_READ_KIB` set to measure `restore` at another size). The
//! restore times come from the agent's ledger (`Today`).

use crate::owner_return::machine_env;
use agent_core::control::{call, AgentStatus, Request, Response};
use agent_core::guest::linux::owner_cache::{file_residency, page_size};
use agent_core::guest::{GuestPhase, GuestSpec};
use anyhow::{bail, Context, Result};
use clap::Args;
use lull_e2e::percentile;
use lull_e2e::process::{end_with_us, terminate, wait_until};
use lull_e2e::{agent_status, lull_bin, purge_cgroup_base, try_start_agent, Xvfb};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Duration;

#[derive(Args, Debug)]
pub struct OwnerCacheArgs {
    /// Rounds (each runs both cases).
    #[arg(long, default_value_t = 5)]
    pub rounds: usize,
    /// The owner's working set, MiB, spread over `--files` files.
    #[arg(long, default_value_t = 384)]
    pub working_set_mib: u64,
    /// Files of the working set.
    #[arg(long, default_value_t = 8)]
    pub files: usize,
    /// The hard limit of the memory cgroup holding the owner and the guests, MiB.
    #[arg(long, default_value_t = 1024)]
    pub limit_mib: u64,
    /// What the guest allocates, MiB.
    #[arg(long, default_value_t = 960)]
    pub guest_mib: u64,
    /// Timed reads before the guest, per round and case.
    #[arg(long, default_value_t = 3)]
    pub before_reads: usize,
    /// Cases: no-restore, restore, restore-4mib-reads (comma-separated).
    #[arg(long, default_value = "no-restore,restore", value_delimiter = ',')]
    pub cases: Vec<String>,
    /// Where the working set's files go (a disk-backed directory; not tmpfs).
    #[arg(long, default_value = "/var/tmp")]
    pub dir: PathBuf,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

/// The owner: reads every file named on its command line through on each line of stdin
/// and prints the nanoseconds it took, wall and its own CPU time (user + system).
const OWNER: &str = "import os, sys, time\n\
fds = [os.open(p, os.O_RDONLY) for p in sys.argv[1:]]\n\
buf = bytearray(1 << 20)\n\
for line in sys.stdin:\n    t = time.monotonic_ns()\n    c = time.process_time_ns()\n    for fd in fds:\n        off = 0\n        while True:\n            n = os.preadv(fd, [buf], off)\n            if n <= 0:\n                break\n            off += n\n    print(time.monotonic_ns() - t, time.process_time_ns() - c, flush=True)\n";

/// The guest: allocates and touches MiB in 8-MiB pieces, then says so and waits.
fn hog(mib: u64) -> String {
    format!(
        "import time\nb = []\nfor i in range({mib} // 8):\n    b.append(bytearray(8 << 20))\n    for j in range(0, 8 << 20, 4096):\n        b[-1][j] = 1\n\
         open('allocated', 'w').close()\ntime.sleep(3600)\n"
    )
}

/// The bench's memory cgroup (`lull-bench-cache-PID`): owner and pool under one limit.
struct Machine {
    name: String,
    root: PathBuf,
    v2: bool,
}

impl Machine {
    fn new(limit: u64) -> Result<Self> {
        let v2 = Path::new("/sys/fs/cgroup/cgroup.controllers").exists();
        let root = if v2 { PathBuf::from("/sys/fs/cgroup") } else { PathBuf::from("/sys/fs/cgroup/memory") };
        let name = format!("lull-bench-cache-{}", std::process::id());
        let top = root.join(&name);
        std::fs::create_dir_all(top.join("owner")).with_context(|| format!("creating {} (run as root)", top.display()))?;
        if v2 {
            let _ = std::fs::write(root.join("cgroup.subtree_control"), "+memory");
            std::fs::write(top.join("cgroup.subtree_control"), "+memory")?;
            std::fs::write(top.join("memory.max"), limit.to_string())?;
        } else {
            std::fs::write(top.join("memory.limit_in_bytes"), limit.to_string())?;
        }
        Ok(Self { name, root, v2 })
    }

    fn owner_procs(&self) -> PathBuf {
        self.root.join(&self.name).join("owner/cgroup.procs")
    }

    /// The owner's protection file's value (v2 memory.low, v1 soft limit).
    fn owner_protection(&self) -> String {
        let f = if self.v2 { "memory.low" } else { "memory.soft_limit_in_bytes" };
        std::fs::read_to_string(self.root.join(&self.name).join("owner").join(f)).unwrap_or_default().trim().to_string()
    }
}

impl Drop for Machine {
    fn drop(&mut self) {
        // Owner, pool and the agent's guests under it, in every hierarchy.
        purge_cgroup_base(&self.name);
    }
}

/// The owner program, in the owner's cgroup.
struct Owner {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Owner {
    fn start(procs: &Path, files: &[PathBuf]) -> Result<Self> {
        let mut c = Command::new("sh");
        c.arg("-c")
            .arg(format!("echo $$ > {} && exec python3 -c \"$0\" \"$@\"", procs.display()))
            .arg(OWNER)
            .args(files)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped());
        end_with_us(&mut c, libc::SIGKILL);
        let mut child = c.spawn().context("starting the owner program (python3)")?;
        let stdin = child.stdin.take().context("owner stdin")?;
        let stdout = BufReader::new(child.stdout.take().context("owner stdout")?);
        Ok(Self { child, stdin, stdout })
    }

    /// Bytes the owner has had read from storage (`/proc/PID/io` `read_bytes`).
    fn disk_bytes(&self) -> u64 {
        std::fs::read_to_string(format!("/proc/{}/io", self.child.id()))
            .ok()
            .and_then(|s| s.lines().find_map(|l| l.strip_prefix("read_bytes: ").and_then(|v| v.trim().parse().ok())))
            .unwrap_or(0)
    }

    /// One read of the whole working set: wall ms, and MiB of it that came from storage.
    fn read_with_disk(&mut self) -> Result<(Read, f64)> {
        let before = self.disk_bytes();
        let read = self.read()?;
        Ok((read, (self.disk_bytes().saturating_sub(before)) as f64 / 1048576.0))
    }

    /// One read of the whole working set.
    fn read(&mut self) -> Result<Read> {
        self.stdin.write_all(b"go\n")?;
        self.stdin.flush()?;
        let mut line = String::new();
        self.stdout.read_line(&mut line)?;
        let said = || format!("the owner program said {line:?}");
        let mut it = line.split_whitespace().map(|v| v.parse::<u64>());
        let (Some(Ok(wall)), Some(Ok(cpu))) = (it.next(), it.next()) else { bail!(said()) };
        Ok(Read { wall_ms: wall as f64 / 1e6, cpu_ms: cpu as f64 / 1e6 })
    }
}

/// One read of the owner's working set: wall time, and the owner's own CPU time (less
/// disturbed than wall time by other work on a shared machine).
#[derive(Clone, Copy)]
struct Read {
    wall_ms: f64,
    cpu_ms: f64,
}

impl Drop for Owner {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn resident_mib(files: &[PathBuf]) -> f64 {
    let pages: usize = files.iter().map(|f| file_residency(f).map(|v| v.iter().filter(|b| *b & 1 != 0).count()).unwrap_or(0)).sum();
    pages as f64 * page_size() as f64 / 1048576.0
}

fn drop_cache(files: &[PathBuf]) -> Result<()> {
    for f in files {
        let file = std::fs::File::open(f)?;
        rustix::fs::fadvise(&file, 0, None, rustix::fs::Advice::DontNeed)?;
    }
    Ok(())
}

/// One agent instance (a `lull agent` of its own), stopped on drop.
struct Agent {
    child: Child,
    dir: tempfile::TempDir,
}

impl Agent {
    fn socket(&self) -> PathBuf {
        self.dir.path().join("agent.sock")
    }

    fn status(&self) -> Option<AgentStatus> {
        agent_status(&self.socket())
    }

    /// The agent's log (its log directory and stderr), for an error's context.
    fn log(&self) -> String {
        let mut text = std::fs::read_to_string(self.dir.path().join("instance.log")).unwrap_or_default();
        for e in std::fs::read_dir(self.dir.path().join("logs")).into_iter().flatten().flatten() {
            text += &std::fs::read_to_string(e.path()).unwrap_or_default();
        }
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }

    fn stop(mut self) -> Result<()> {
        if !terminate(&mut self.child, Duration::from_secs(20)) {
            bail!("the agent did not stop within 20 s of SIGTERM");
        }
        Ok(())
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        // SIGTERM first: the agent puts the owner's protection back as it exits.
        terminate(&mut self.child, Duration::from_secs(10));
    }
}

/// The cases the bench knows.
const CASES: [&str; 3] = ["no-restore", "restore", "restore-4mib-reads"];

fn start_agent(machine: &Machine, a: &OwnerCacheArgs, case: &str, display: &str) -> Result<Agent> {
    let restore = case != "no-restore";
    let dir = tempfile::tempdir()?;
    let config = format!(
        "# CPU out of the definition: other work shares this machine; the owner's return is input.\n[availability]\nrecruitment_threshold_s = 1\nowner_cpu_max = 1.0\nmemory_growth_max = 1.0\n\n\
         [eviction]\nmode = \"immediate-eviction\"\n\n[input]\nbackend = \"x11\"\n\n\
         [guests]\nmemory_cap_mib = {cap}\nowner_reserve_mib = 256\n# The machine is shared: other work's stalls must not freeze the guest.\npressure_freeze_pct = 100.0\n\n\
         [memory]\nowner_cgroup = \"/{name}/owner\"\ncache_snapshot_mib = {snap}\n",
        cap = a.guest_mib + 64,
        name = machine.name,
        snap = if restore { 2048 } else { 0 },
    );
    std::fs::write(dir.path().join("config.toml"), config)?;
    let mut c = Command::new(lull_bin());
    c.arg("agent");
    machine_env(&mut c, dir.path(), &format!("{}/pool", machine.name), display);
    // `restore` reads at the agent's default size, or at the bench's own
    // `LULL_RESTORE_READ_KIB` when it has one (to measure another size).
    if case == "restore-4mib-reads" {
        c.env("LULL_RESTORE_READ_KIB", "4096");
    }
    let child = try_start_agent(&mut c, &dir.path().join("agent.sock"), Duration::from_secs(60), |_| true)
        .with_context(|| std::fs::read_to_string(dir.path().join("instance.log")).unwrap_or_default())?;
    Ok(Agent { child, dir })
}

#[derive(Default, Debug, serde::Serialize)]
struct CaseResult {
    cold_ms: Vec<f64>,
    before_ms: Vec<f64>,
    after_ms: Vec<f64>,
    /// The owner's second read after its return (warm in every case).
    after_second_ms: Vec<f64>,
    /// The owner's CPU time of the same reads (before: median of the reads).
    before_cpu_ms: Vec<f64>,
    after_cpu_ms: Vec<f64>,
    after_second_cpu_ms: Vec<f64>,
    /// MiB the owner's first read after its return had to fetch from storage.
    after_disk_mib: Vec<f64>,
    /// The owner's files in memory (MiB) while the guest held its memory, and after.
    left_under_guest_mib: Vec<f64>,
    resident_after_mib: Vec<f64>,
    /// From the agent's ledger (`Today`): the swapped-page and file-cache restore times.
    ledger_anon_ms: Vec<Option<u64>>,
    ledger_cache_ms: Vec<Option<u64>>,
    /// The owner's protection as written while the guest ran, and after the agent exited.
    protection_during: Vec<String>,
    protection_after_exit: Vec<String>,
    /// Rounds that failed, and why (the run goes on).
    failed: Vec<String>,
}

#[allow(clippy::too_many_arguments)]
fn round(
    machine: &Machine,
    a: &OwnerCacheArgs,
    owner: &mut Owner,
    files: &[PathBuf],
    case: &str,
    display: &str,
    protection_before: &str,
    r: &mut CaseResult,
) -> Result<()> {
    drop_cache(files)?;
    r.cold_ms.push(owner.read()?.wall_ms);
    let before: Vec<Read> = (0..a.before_reads).map(|_| owner.read()).collect::<Result<_>>()?;
    r.before_ms.push(percentile::of(&mut before.iter().map(|b| b.wall_ms).collect::<Vec<_>>(), 0.5));
    r.before_cpu_ms.push(percentile::of(&mut before.iter().map(|b| b.cpu_ms).collect::<Vec<_>>(), 0.5));
    let agent = start_agent(machine, a, case, display)?;
    let spec = GuestSpec::new("python3", ["-c", hog(a.guest_mib).as_str()]);
    let id = match call(&agent.socket(), &Request::RunJob { spec: Box::new(spec), donate_now: false })? {
        Response::Guest(g) => g.id,
        other => bail!("the agent refused the guest: {other:?}"),
    };
    let guest = || match call(&agent.socket(), &Request::Guest { id: id.clone() }) {
        Ok(Response::Guest(g)) => Some(*g),
        _ => None,
    };
    let workdir = wait_until("the guest to start", Duration::from_secs(60), || guest().filter(|g| g.pid.is_some()).map(|g| g.workdir))
        .with_context(|| format!("status {:?}\n{}", agent.status().map(|s| s.policy.state), agent.log()))?;
    wait_until("the guest's allocation", Duration::from_secs(180), || workdir.join("allocated").exists().then_some(()))
        .with_context(|| format!("guest: {:?}", guest()))?;
    r.left_under_guest_mib.push(resident_mib(files));
    r.protection_during.push(machine.owner_protection());
    let restores_before = agent.status().and_then(|s| s.owner_memory).and_then(|m| m.last_restore);
    // The owner returns: one relative pointer motion on the agent's display.
    let out = Command::new("xdotool").args(["mousemove_relative", "--", "7", "7"]).env("DISPLAY", display).output().context("xdotool")?;
    if !out.status.success() {
        bail!("xdotool: {}", String::from_utf8_lossy(&out.stderr));
    }
    wait_until("the eviction", Duration::from_secs(60), || guest().filter(|g| matches!(g.phase, GuestPhase::Ended { .. })).map(|_| ()))?;
    wait_until("the restore", Duration::from_secs(120), || {
        agent.status().and_then(|s| s.owner_memory).and_then(|m| m.last_restore).filter(|l| Some(l) != restores_before.as_ref())
    })?;
    r.resident_after_mib.push(resident_mib(files));
    let (after, disk) = owner.read_with_disk()?;
    r.after_ms.push(after.wall_ms);
    r.after_cpu_ms.push(after.cpu_ms);
    r.after_disk_mib.push(disk);
    let second = owner.read()?;
    r.after_second_ms.push(second.wall_ms);
    r.after_second_cpu_ms.push(second.cpu_ms);
    let today = match call(&agent.socket(), &Request::Today)? {
        Response::Today(t) => t,
        other => bail!("today: {other:?}"),
    };
    let i =
        today.interruptions.last().with_context(|| format!("the owner's return was not counted as an interruption\n{}", agent.log()))?;
    r.ledger_anon_ms.push(i.restore_ms);
    r.ledger_cache_ms.push(i.cache_restore_ms);
    agent.stop()?;
    let after_exit = machine.owner_protection();
    if after_exit != protection_before {
        bail!("the owner's protection was not put back: {after_exit} (was {protection_before})");
    }
    r.protection_after_exit.push(after_exit);
    Ok(())
}

pub fn run(a: OwnerCacheArgs) -> Result<()> {
    if a.files == 0 || a.working_set_mib < a.files as u64 {
        bail!("--files: allowed 1..=--working-set-mib (one MiB per file at least)");
    }
    let mib = 1u64 << 20;
    let machine = Machine::new(a.limit_mib * mib)?;
    let files_dir = tempfile::tempdir_in(&a.dir).with_context(|| format!("a directory under {}", a.dir.display()))?;
    let per_file = a.working_set_mib / a.files as u64;
    let files: Vec<PathBuf> = (0..a.files)
        .map(|i| -> Result<PathBuf> {
            let p = files_dir.path().join(format!("working-set-{i}"));
            let mut f = std::fs::File::create(&p)?;
            let chunk: Vec<u8> = (0..mib).map(|b| (b as u8).wrapping_mul(31).wrapping_add(i as u8)).collect();
            for _ in 0..per_file {
                f.write_all(&chunk)?;
            }
            f.sync_all()?;
            Ok(p)
        })
        .collect::<Result<_>>()?;
    let xvfb = Xvfb::try_start()?;
    let display = xvfb.display.clone();
    let mut owner = Owner::start(&machine.owner_procs(), &files)?;
    let protection_before = machine.owner_protection();
    let mut results: Vec<(String, CaseResult)> = a.cases.iter().map(|c| (c.clone(), CaseResult::default())).collect();
    for (name, _) in &results {
        if !CASES.contains(&name.as_str()) {
            bail!("--cases: unknown case {name:?} (allowed: {})", CASES.join(", "));
        }
    }
    for n in 0..a.rounds {
        for (name, r) in results.iter_mut() {
            if let Err(e) = round(&machine, &a, &mut owner, &files, name, &display, &protection_before, r) {
                eprintln!("round {n}, case {name} failed: {e:#}");
                r.failed.push(format!("round {n}: {e:#}"));
                // Keep the per-round vectors aligned: drop what this round had pushed.
                let n_ok = n + 1 - r.failed.len();
                for v in [
                    &mut r.cold_ms,
                    &mut r.before_ms,
                    &mut r.after_ms,
                    &mut r.after_second_ms,
                    &mut r.before_cpu_ms,
                    &mut r.after_cpu_ms,
                    &mut r.after_second_cpu_ms,
                    &mut r.after_disk_mib,
                    &mut r.left_under_guest_mib,
                    &mut r.resident_after_mib,
                ] {
                    v.truncate(n_ok);
                }
                r.ledger_anon_ms.truncate(n_ok);
                r.ledger_cache_ms.truncate(n_ok);
                r.protection_during.truncate(n_ok);
                r.protection_after_exit.truncate(n_ok);
                continue;
            }
            if !a.json {
                eprintln!(
                    "round {n} {name:18}: before {:.0} ms (CPU {:.0}) · cache left under the guest {:.0} MiB · after {:.0} ms (CPU {:.0}; {:.0} MiB from disk), then {:.0} ms (CPU {:.0}) · ledger restore {:?} ms / file cache {:?} ms",
                    r.before_ms.last().unwrap_or(&0.0),
                    r.before_cpu_ms.last().unwrap_or(&0.0),
                    r.left_under_guest_mib.last().unwrap_or(&0.0),
                    r.after_ms.last().unwrap_or(&0.0),
                    r.after_cpu_ms.last().unwrap_or(&0.0),
                    r.after_disk_mib.last().unwrap_or(&0.0),
                    r.after_second_ms.last().unwrap_or(&0.0),
                    r.after_second_cpu_ms.last().unwrap_or(&0.0),
                    r.ledger_anon_ms.last().copied().flatten(),
                    r.ledger_cache_ms.last().copied().flatten()
                );
            }
        }
    }
    let med = |v: &[f64]| percentile::of(&mut v.to_vec(), 0.5);
    let cases: Vec<serde_json::Value> = results
        .iter()
        .map(|(name, r)| {
            let (b, af) = (med(&r.before_ms), med(&r.after_ms));
            let cache: Vec<f64> = r.ledger_cache_ms.iter().flatten().map(|&v| v as f64).collect();
            serde_json::json!({
                "case": name, "rounds": r.before_ms.len(), "failed_rounds": r.failed.len(),
                "cold_ms_median": med(&r.cold_ms),
                "before_ms_median": b, "after_ms_median": af, "after_over_before": af / b,
                "after_ms_p99": percentile::of(&mut r.after_ms.clone(), 0.99),
                "after_second_ms_median": med(&r.after_second_ms),
                "before_cpu_ms_median": med(&r.before_cpu_ms), "after_cpu_ms_median": med(&r.after_cpu_ms),
                "after_over_before_cpu": med(&r.after_cpu_ms) / med(&r.before_cpu_ms),
                "after_second_cpu_ms_median": med(&r.after_second_cpu_ms),
                "after_disk_mib_median": med(&r.after_disk_mib),
                "left_under_guest_mib_median": med(&r.left_under_guest_mib),
                "resident_after_mib_median": med(&r.resident_after_mib),
                "ledger_cache_restore_ms_median": if cache.is_empty() { None } else { Some(med(&cache)) },
                "detail": r,
            })
        })
        .collect();
    let out = serde_json::json!({
        "working_set_mib": per_file * a.files as u64, "files": a.files, "limit_mib": a.limit_mib, "guest_mib": a.guest_mib,
        "rounds": a.rounds, "agent": "lull agent (real binary), guest via RunJob, owner's return by xdotool on a private Xvfb",
        "cases": cases,
    });
    print_report(&a, &out, &cases, per_file)
}

/// Prints the result: `out` pretty JSON with `--json`, else a headline and a line per case.
fn print_report(a: &OwnerCacheArgs, out: &serde_json::Value, cases: &[serde_json::Value], per_file: u64) -> Result<()> {
    if a.json {
        outln!("{}", serde_json::to_string_pretty(out)?);
    } else {
        outln!(
            "owner-cache: {} MiB working set in {} files, owner + guests under a {} MiB memory cgroup, guest {} MiB, {} rounds",
            per_file * a.files as u64,
            a.files,
            a.limit_mib,
            a.guest_mib,
            a.rounds
        );
        for c in cases {
            outln!(
                "  {:18}  before {:.0} ms · after {:.0} ms ({:.2}×; CPU {:.0} → {:.0} ms, {:.2}×; {:.0} MiB from disk), second read {:.0} ms · cold {:.0} ms · cache left under the guest {:.0} MiB, after {:.0} MiB · file-cache restore {} (ledger)",
                c["case"].as_str().unwrap_or(""),
                c["before_ms_median"].as_f64().unwrap_or(0.0),
                c["after_ms_median"].as_f64().unwrap_or(0.0),
                c["after_over_before"].as_f64().unwrap_or(0.0),
                c["before_cpu_ms_median"].as_f64().unwrap_or(0.0),
                c["after_cpu_ms_median"].as_f64().unwrap_or(0.0),
                c["after_over_before_cpu"].as_f64().unwrap_or(0.0),
                c["after_disk_mib_median"].as_f64().unwrap_or(0.0),
                c["after_second_ms_median"].as_f64().unwrap_or(0.0),
                c["cold_ms_median"].as_f64().unwrap_or(0.0),
                c["left_under_guest_mib_median"].as_f64().unwrap_or(0.0),
                c["resident_after_mib_median"].as_f64().unwrap_or(0.0),
                c["ledger_cache_restore_ms_median"].as_f64().map_or("none".into(), |v| format!("{v:.0} ms")),
            );
        }
    }
    Ok(())
}
