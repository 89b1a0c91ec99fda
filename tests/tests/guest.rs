//! Guest runtime end to end, with real `lull run` agents, real cgroups and real guest
//! process trees: kill -9 of the agent leaves no guest alive (200 times); a daemonizing
//! guest is frozen from the input path and killed with its tree; the accounting reaches
//! the ledger; and the unprivileged path — the agent running as an ordinary user with a
//! delegated cgroup subtree (ci/setup-guest.sh) — still gives containment, freezing, caps
//! and the sandbox.
//!
//! They need cgroups (root here; `LULL_REQUIRE_CGROUPS=1` makes them required). Each test
//! uses its own cgroup base (`LULL_CGROUP`) and removes it, with anything left in it, even
//! when it fails.

use agent_core::control::{call, Request, Response};
use agent_core::policy::StateKind;
use lull_e2e::{
    alive, cgroup_of, cpu_ticks, instance_frozen, lull_bin, purge_cgroup_base as purge_base, read_pid, required, skip_without_cgroups,
};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A config under which guest work is accepted at once, whatever the build load.
const EAGER: &str =
    "[sampling]\ninterval_ms = 100\n[availability]\nowner_cpu_max = 1.0\nmemory_growth_max = 1.0\nrecruitment_threshold_s = 0\n";

/// EAGER, but once the owner has been seen, guest work waits 5 s of idleness again: long
/// enough to observe a freeze caused by input (with 0 the guest is thawed at once).
fn eager_with_pause() -> String {
    EAGER.replace("recruitment_threshold_s = 0", "recruitment_threshold_s = 5")
}

/// A guest whose parent exits at once, leaving a setsid'ed, double-forked daemon that spins.
const DAEMON: &str = r#"(setsid sh -c 'echo $$ > daemon.pid; while :; do :; done' &) ; exit 0"#;

/// A cgroup base owned by one test, purged on drop.
struct Base(String);

impl Base {
    fn new(name: &str) -> Self {
        Self(format!("lull-e2e-{name}-{}", std::process::id()))
    }
}

impl Drop for Base {
    fn drop(&mut self) {
        purge_base(&self.0);
    }
}

/// A `lull run` child in a throw-away directory, killed on drop.
struct Run {
    dir: tempfile::TempDir,
    child: Option<Child>,
}

impl Run {
    fn new(config: &str) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::write(dir.path().join("config.toml"), config).expect("config");
        Self { dir, child: None }
    }

    fn path(&self, p: &str) -> PathBuf {
        self.dir.path().join(p)
    }

    fn command(&self, program: &Path, base: &str, args: &[&str]) -> Command {
        let mut c = Command::new(program);
        c.arg("run")
            .args(args)
            .env("LULL_CONFIG", self.path("config.toml"))
            .env("LULL_DATA_DIR", self.path("data"))
            .env("LULL_SOCKET", self.path("agent.sock"))
            .env("LULL_CGROUP", base)
            .stdout(std::fs::File::create(self.path("stdout.txt")).expect("stdout"))
            .stderr(std::fs::File::create(self.path("stderr.txt")).expect("stderr"));
        c
    }

    fn start(&mut self, base: &str, args: &[&str]) {
        self.child = Some(self.command(&lull_bin(), base, args).spawn().expect("spawn lull run"));
    }

    fn output(&self) -> String {
        format!(
            "stdout:\n{}\nstderr:\n{}",
            std::fs::read_to_string(self.path("stdout.txt")).unwrap_or_default(),
            std::fs::read_to_string(self.path("stderr.txt")).unwrap_or_default()
        )
    }

    fn state(&self) -> Option<StateKind> {
        match call(&self.path("agent.sock"), &Request::Status) {
            Ok(Response::Status(s)) => Some(s.policy.state),
            _ => None,
        }
    }

    fn pid(&self) -> i32 {
        self.child.as_ref().expect("started").id() as i32
    }

    fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// SIGTERM, then the exit code.
    fn stop(&mut self) -> Option<i32> {
        let mut c = self.child.take()?;
        // SAFETY: signals our own child.
        unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
        c.wait().ok()?.code()
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        self.kill9();
    }
}

fn wait_until(what: &str, timeout: Duration, mut f: impl FnMut() -> bool, ctx: impl Fn() -> String) {
    let deadline = Instant::now() + timeout;
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}\n{}", ctx());
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn kill_minus_nine_of_the_agent_leaves_no_guest_alive() {
    if skip_without_cgroups() {
        return;
    }
    let base = Base::new("kill9");
    let iterations: usize = std::env::var("LULL_KILL9_ITERATIONS").ok().and_then(|v| v.parse().ok()).unwrap_or(200);
    let run = Run::new(EAGER);
    let mut survivors = Vec::new();
    for i in 0..iterations {
        let mut r = Run { dir: tempfile::tempdir_in(run.dir.path()).expect("dir"), child: None };
        std::fs::write(r.path("config.toml"), EAGER).expect("config");
        let wd = r.path("work");
        let wd_s = wd.to_string_lossy().into_owned();
        r.start(&base.0, &["--workdir", &wd_s, "--", "sh", "-c", DAEMON]);
        wait_until("the daemon", Duration::from_secs(120), || read_pid(&wd.join("daemon.pid")).is_some(), || r.output());
        let daemon = read_pid(&wd.join("daemon.pid")).expect("pid");
        if i == 0 {
            let cg = cgroup_of(daemon, "0::").unwrap_or_default();
            assert!(cg.contains(&base.0), "the daemon is not in the guest cgroup: {cg}");
        }
        r.kill9();
        let deadline = Instant::now() + Duration::from_secs(20);
        while alive(daemon) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(2));
        }
        if alive(daemon) {
            survivors.push((i, daemon));
            // SAFETY: clean up the survivor so later iterations are independent.
            unsafe { libc::kill(daemon, libc::SIGKILL) };
        }
    }
    assert!(survivors.is_empty(), "guests outlived a kill -9'ed agent in {} of {iterations} runs: {survivors:?}", survivors.len());
}

#[test]
fn daemonizing_guest_is_frozen_from_the_input_path_and_killed_with_its_tree() {
    if skip_without_cgroups() {
        return;
    }
    let base = Base::new("freeze");
    let mut r = Run::new(&eager_with_pause());
    let wd = r.path("work");
    let (wd_s, fifo) = (wd.to_string_lossy().into_owned(), r.path("input.fifo"));
    let fifo_s = fifo.to_string_lossy().into_owned();
    r.start(&base.0, &["--mode", "pm", "--activity-fifo", &fifo_s, "--workdir", &wd_s, "--", "sh", "-c", DAEMON]);
    wait_until("the daemon", Duration::from_secs(120), || read_pid(&wd.join("daemon.pid")).is_some(), || r.output());
    let daemon = read_pid(&wd.join("daemon.pid")).expect("pid");
    wait_until("donating", Duration::from_secs(30), || r.state() == Some(StateKind::Donating), || r.output());
    assert!(!instance_frozen(daemon));
    assert!(cgroup_of(daemon, "0::").unwrap_or_default().contains(&base.0), "daemon outside its cgroup");

    // One owner input event: frozen from the input thread, before any sampling tick.
    let t0 = Instant::now();
    std::fs::OpenOptions::new().write(true).open(&fifo).expect("fifo").write_all(b"x").expect("input event");
    wait_until("frozen", Duration::from_secs(10), || instance_frozen(daemon), || r.output());
    let latency = t0.elapsed();
    eprintln!("input event → cgroup frozen: {latency:?}");
    let before = cpu_ticks(daemon);
    std::thread::sleep(Duration::from_millis(400));
    assert_eq!(cpu_ticks(daemon), before, "the frozen daemon ran");
    assert!(alive(daemon), "PM keeps the guest frozen, not killed, during the pause");

    // Stopping the agent evicts: the whole tree dies, frozen as it is.
    let code = r.stop();
    assert_eq!(code, Some(75), "evicted on shutdown\n{}", r.output());
    wait_until("the daemon to die with the agent", Duration::from_secs(20), || !alive(daemon), || r.output());
}

#[test]
fn donated_cpu_reaches_the_ledger() {
    if skip_without_cgroups() {
        return;
    }
    let base = Base::new("ledger");
    let mut r = Run::new(EAGER);
    // Spins until it has had 0.2 CPU-s (a SCHED_IDLE guest on a busy machine waits for them).
    let spin = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.2:\n    pass\n";
    r.start(&base.0, &["--", "python3", "-c", spin]);
    let mut child = r.child.take().expect("child");
    let status = child.wait().expect("lull run ends with its guest");
    assert_eq!(status.code(), Some(0), "{}", r.output());
    let ledger = agent_core::ledger::Ledger::open(&r.path("data/ledger.db")).expect("ledger");
    let day = ledger.donated_on(chrono::Local::now().date_naive()).expect("donated today");
    assert!(day.cpu_s >= 0.2, "donated CPU {} s\n{}", day.cpu_s, r.output());
    assert!(day.wall_s >= 0.2, "donated wall {} s\n{}", day.wall_s, r.output());
}

/// The unprivileged owner: the user and delegated subtree come from ci/setup-guest.sh.
const OWNER: &str = "lullowner";
const DELEGATED: &str = "lull-deleg";

fn owner_uid() -> Option<u32> {
    let out = Command::new("id").args(["-u", OWNER]).output().ok()?;
    String::from_utf8_lossy(&out.stdout).trim().parse().ok()
}

/// The owner's uid when ci/setup-guest.sh made the user and its delegated cgroup subtree;
/// otherwise says what is SKIPPED (`what`: which part) and gives None.
fn delegated_owner(what: &str) -> Option<u32> {
    let uid = owner_uid()
        .filter(|_| Path::new("/sys/fs/cgroup/unified").join(DELEGATED).exists() || Path::new("/sys/fs/cgroup").join(DELEGATED).exists());
    if uid.is_none() {
        assert!(!required("LULL_REQUIRE_CGROUPS"), "LULL_REQUIRE_CGROUPS=1 but ci/setup-guest.sh has not been run");
        eprintln!("SKIPPED{what}: no {OWNER} user with a delegated cgroup subtree (run ci/setup-guest.sh as root)");
    }
    uid
}

/// A copy of `lull` the owner can reach and run (the build's directory may not be).
fn lull_for_the_owner() -> (tempfile::TempDir, PathBuf) {
    let perms = |m: u32| <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(m);
    let bindir = tempfile::tempdir().expect("bin dir");
    let bin = bindir.path().join("lull");
    std::fs::copy(lull_bin(), &bin).expect("copy lull");
    std::fs::set_permissions(bindir.path(), perms(0o755)).expect("chmod");
    std::fs::set_permissions(&bin, perms(0o755)).expect("chmod");
    (bindir, bin)
}

/// Runs `lull run ARGS` as the unprivileged owner, placed (by root, as systemd or an
/// install step would) into the delegated subtree, which it then manages itself.
fn start_as_owner(r: &mut Run, bin: &Path, args: &[&str]) {
    let unified = if Path::new("/sys/fs/cgroup/cgroup.controllers").exists() { "/sys/fs/cgroup" } else { "/sys/fs/cgroup/unified" };
    let inner = r.command(bin, DELEGATED, args);
    let envs: Vec<String> = inner.get_envs().filter_map(|(k, v)| Some(format!("{}={}", k.to_str()?, v?.to_str()?))).collect();
    let quoted: Vec<String> = args.iter().map(|a| format!("'{}'", a.replace('\'', "'\\''"))).collect();
    let script = format!(
        "echo $$ > {unified}/{DELEGATED}/cgroup.procs && exec setpriv --reuid={OWNER} --regid={OWNER} --init-groups env -i HOME=/home/{OWNER} PATH=/usr/bin:/bin {} {} run {}",
        envs.join(" "),
        bin.display(),
        quoted.join(" ")
    );
    let mut c = Command::new("sh");
    c.arg("-c").arg(script).stdin(Stdio::null());
    c.stdout(std::fs::File::create(r.path("stdout.txt")).expect("stdout"));
    c.stderr(std::fs::File::create(r.path("stderr.txt")).expect("stderr"));
    r.child = Some(c.spawn().expect("spawn lull run as the owner"));
}

#[test]
fn unprivileged_owner_still_gets_containment_freezing_caps_and_sandbox() {
    if skip_without_cgroups() {
        return;
    }
    let Some(uid) = delegated_owner("") else { return };
    // The binary and the run directory must be reachable by the owner.
    let (_bindir, bin) = lull_for_the_owner();
    let perms = |_: &Path, m: u32| <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(m);
    let config = format!("{}[guests]\nmemory_cap_mib = 64\n", eager_with_pause());

    // 1. Containment, sandbox, freezing, eviction of a daemonizing guest.
    let mut r = Run::new(&config);
    std::fs::set_permissions(r.dir.path(), perms(r.dir.path(), 0o777)).expect("chmod");
    std::fs::set_permissions(r.path("config.toml"), perms(&r.path("config.toml"), 0o644)).expect("chmod");
    let wd = r.path("work");
    let (wd_s, fifo) = (wd.to_string_lossy().into_owned(), r.path("input.fifo"));
    let fifo_s = fifo.to_string_lossy().into_owned();
    let script = format!(
        "id -u > uid.txt; cat /home/{OWNER}/secret.txt > leaked.txt 2> denied.txt; {DAEMON}",
        DAEMON = DAEMON.trim_end_matches("; exit 0")
    );
    start_as_owner(&mut r, &bin, &["--mode", "pm", "--activity-fifo", &fifo_s, "--workdir", &wd_s, "--", "sh", "-c", &script]);
    wait_until("the daemon", Duration::from_secs(120), || read_pid(&wd.join("daemon.pid")).is_some(), || r.output());
    let daemon = read_pid(&wd.join("daemon.pid")).expect("pid");
    assert_eq!(std::fs::read_to_string(wd.join("uid.txt")).unwrap_or_default().trim(), uid.to_string(), "guest runs as the owner");
    assert_eq!(std::fs::read_to_string(wd.join("leaked.txt")).unwrap_or_default(), "", "the guest read the owner's secret");
    assert!(std::fs::read_to_string(wd.join("denied.txt")).unwrap_or_default().contains("Permission denied"));
    let cg = cgroup_of(daemon, "0::").unwrap_or_default();
    assert!(cg.starts_with(&format!("/{DELEGATED}/guests/")), "daemon not contained in the delegated subtree: {cg}");
    if let Some(mem) = cgroup_of(daemon, "memory").filter(|m| m != "/") {
        let limit = std::fs::read_to_string(format!("/sys/fs/cgroup/memory{mem}/memory.limit_in_bytes")).unwrap_or_default();
        assert_eq!(limit.trim(), (64u64 << 20).to_string(), "the cap holds in the delegated memory cgroup {mem}");
    }
    // The owner's control socket refuses other users (root included): read its output instead.
    wait_until("donating", Duration::from_secs(30), || r.output().contains("→ donating"), || r.output());
    std::thread::sleep(Duration::from_millis(300));
    std::fs::OpenOptions::new().write(true).open(&fifo).expect("fifo").write_all(b"x").expect("input event");
    wait_until("frozen", Duration::from_secs(10), || instance_frozen(daemon), || r.output());
    let before = cpu_ticks(daemon);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(cpu_ticks(daemon), before, "the frozen daemon ran");
    // SAFETY: signals the owner's agent (our grandchild via exec).
    unsafe { libc::kill(r.pid(), libc::SIGTERM) };
    let code = r.child.take().and_then(|mut c| c.wait().ok()).and_then(|s| s.code());
    assert_eq!(code, Some(75), "{}", r.output());
    wait_until("the daemon to die with the owner's agent", Duration::from_secs(20), || !alive(daemon), || r.output());

    // 2. A guest allocating past its cap is OOM-killed inside its cgroup.
    let mut r = Run::new(&config);
    std::fs::set_permissions(r.dir.path(), perms(r.dir.path(), 0o777)).expect("chmod");
    std::fs::set_permissions(r.path("config.toml"), perms(&r.path("config.toml"), 0o644)).expect("chmod");
    let alloc = "b = []\nfor i in range(300):\n    b.append(bytearray(1 << 20))\nprint('survived')\n";
    start_as_owner(&mut r, &bin, &["--", "python3", "-c", alloc]);
    let code = r.child.take().and_then(|mut c| c.wait().ok()).and_then(|s| s.code());
    assert_eq!(code, Some(128 + libc::SIGKILL), "OOM-killed at the cap\n{}", r.output());
    assert!(!r.output().contains("survived"));
}

/// A guest that tries to read and write what it must not, printing `LEAK …` for each
/// attempt that worked and `denied …` for each refused, then proves it could work at all.
/// `signal`: also try to signal the agent (refused across users, and within one user by
/// Landlock's scopes from ABI 6).
fn hostile_script(data_dir: &Path, config: &Path, notes: &Path, signal: bool) -> String {
    let (data, config, notes) = (data_dir.display(), config.display(), notes.display());
    let signal = if signal { "yes" } else { "no" };
    format!(
        r#"echo "uid $(id -u) groups $(id -G)"
for f in /etc/shadow /home/{OWNER}/secret.txt {notes} {data}/ledger.db {config} /proc/1/environ /proc/$PPID/environ; do
  if head -c 1 "$f" > /dev/null 2>&1; then echo "LEAK read $f"; else echo "denied read $f"; fi
done
for d in /root /home/{OWNER} {data}; do
  if ls "$d" > /dev/null 2>&1; then echo "LEAK list $d"; else echo "denied list $d"; fi
done
for w in /tmp/lull-hostile-$$ /var/tmp/lull-hostile-$$ {data}/planted $HOME/../planted; do
  if (echo x > "$w") 2> /dev/null; then echo "LEAK write $w"; rm -f "$w"; else echo "denied write $w"; fi
done
if [ {signal} = yes ]; then
  if kill -0 $PPID 2> /dev/null; then echo "LEAK signal the agent"; else echo "denied signal the agent"; fi
fi
echo inside > inside.txt && echo "wrote inside"
"#
    )
}

/// The hostile guest's report: every attempt refused (14, and the signal), work inside
/// its own directory possible.
fn assert_nothing_leaked(out: &str, signal: bool) {
    assert!(!out.contains("LEAK"), "the guest got out:\n{out}");
    assert_eq!(out.lines().filter(|l| l.starts_with("denied ")).count(), 14 + usize::from(signal), "not every attempt ran:\n{out}");
    assert!(out.contains("wrote inside"), "the guest could not work in its own directory:\n{out}");
}

fn guest_uid(out: &str) -> Option<u32> {
    out.lines().find_map(|l| l.strip_prefix("uid "))?.split_whitespace().next()?.parse().ok()
}

#[test]
fn a_hostile_guest_gets_nothing_as_root_or_as_the_owner() {
    if skip_without_cgroups() {
        return;
    }
    let perms = |m: u32| <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(m);

    // 1. The agent runs as root: the guest is not root, and the sandbox holds.
    let base = Base::new("hostile");
    let r = Run::new(EAGER);
    // Open the test directory to everyone, so only the guest's confinement (not the
    // permissions of a temporary directory) stands between it and these files.
    std::fs::set_permissions(r.dir.path(), perms(0o755)).expect("chmod");
    let notes = r.path("owner-notes.txt");
    std::fs::write(&notes, "the owner's notes").expect("notes");
    std::fs::set_permissions(&notes, perms(0o644)).expect("chmod");
    let data = r.path("data");
    let script = hostile_script(&data, &r.path("config.toml"), &notes, true);
    let out = r.command(&lull_bin(), &base.0, &["--now", "--", "sh", "-c", &script]).output().expect("lull run");
    let text = format!("{}\n{}", r.output(), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert_nothing_leaked(&text, true);
    let uid = guest_uid(&text).expect("the guest printed its uid");
    assert_ne!(uid, 0, "a guest ran as root:\n{text}");
    assert!(!std::fs::read_to_string(&notes).unwrap_or_default().is_empty());
    drop(base);

    // 2. The agent runs as an ordinary owner: the guest keeps the owner's uid (never
    //    root) and the sandbox alone keeps it from the owner's files and processes.
    let Some(owner) = delegated_owner(" the ordinary-user half") else { return };
    let (_bindir, bin) = lull_for_the_owner();
    let mut r = Run::new(EAGER);
    std::fs::set_permissions(r.dir.path(), perms(0o777)).expect("chmod");
    std::fs::set_permissions(r.path("config.toml"), perms(0o644)).expect("chmod");
    let notes = r.path("owner-notes.txt");
    std::fs::write(&notes, "the owner's notes").expect("notes");
    std::os::unix::fs::chown(&notes, Some(owner), Some(owner)).expect("chown");
    std::fs::set_permissions(&notes, perms(0o600)).expect("chmod");
    let scoped = agent_core::guest::linux::sandbox::kernel_abi() >= 6;
    let script = hostile_script(&r.path("data"), &r.path("config.toml"), &notes, scoped);
    start_as_owner(&mut r, &bin, &["--now", "--", "sh", "-c", &script]);
    let code = r.child.take().and_then(|mut c| c.wait().ok()).and_then(|s| s.code());
    let text = r.output();
    assert_eq!(code, Some(0), "{text}");
    assert_nothing_leaked(&text, scoped);
    assert_eq!(guest_uid(&text), Some(owner), "{text}");
}
