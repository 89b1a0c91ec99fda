//! Guest runtime end to end, with real `lull run` agents, real cgroups, real bubblewrap
//! namespaces and real guest process trees: kill -9 of the agent leaves no guest alive
//! (200 times); a daemonizing guest is frozen from the input path and killed with its
//! tree; the accounting reaches the ledger; the unprivileged path — the agent running as
//! an ordinary user with a delegated cgroup subtree (ci/setup-guest.sh) — still gives
//! containment, freezing, caps and the sandbox; and hostile guests, of a root agent and of
//! an owner's, reach nothing of their host while the agent keeps serving.
//!
//! They need cgroups (root here; `LULL_REQUIRE_CGROUPS=1` makes them required). Each test
//! uses its own cgroup base (`LULL_CGROUP`) and removes it, with anything left in it, even
//! when it fails.

use agent_core::control::{call, Request, Response};
use agent_core::policy::StateKind;
use lull_e2e::{
    alive, cgroup_of, cpu_ticks, guest_pid, guest_workdirs, instance_frozen, lull_bin, purge_cgroup_base as purge_base, required,
    skip_without_cgroups,
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

/// A guest that leaves a setsid'ed, double-forked daemon that spins (its main process
/// stays: in its own PID namespace the daemon would end with it).
const DAEMON: &str = r#"(setsid sh -c 'echo $$ > daemon.pid; while :; do :; done' &) ; exec sleep 100000"#;

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
        // Passable (not listable) by the guests' account of a root agent, whose work root
        // (LULL_WORK_DIR) is in it.
        std::fs::set_permissions(dir.path(), <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o711)).expect("chmod");
        std::fs::write(dir.path().join("config.toml"), config).expect("config");
        Self { dir, child: None }
    }

    /// One of its output files, appended to (every command of the run writes there).
    fn log(&self, name: &str) -> std::fs::File {
        std::fs::OpenOptions::new().create(true).append(true).open(self.path(name)).expect("output file")
    }

    fn path(&self, p: &str) -> PathBuf {
        self.dir.path().join(p)
    }

    /// The newest guest's work directory (under LULL_WORK_DIR).
    fn workdir(&self) -> Option<PathBuf> {
        guest_workdirs(&self.path("work")).pop()
    }

    /// The host pid of the newest guest's daemon.
    fn daemon(&self) -> Option<i32> {
        guest_pid(&self.workdir()?, "daemon.pid")
    }

    fn command(&self, program: &Path, base: &str, args: &[&str]) -> Command {
        self.subcommand(program, base, "run", args)
    }

    /// `lull SUB ARGS` in this directory (stdout and stderr to its files).
    fn subcommand(&self, program: &Path, base: &str, sub: &str, args: &[&str]) -> Command {
        let mut c = Command::new(program);
        c.arg(sub)
            .args(args)
            .env("LULL_CONFIG", self.path("config.toml"))
            .env("LULL_DATA_DIR", self.path("data"))
            .env("LULL_SOCKET", self.path("agent.sock"))
            .env("LULL_CGROUP", base)
            .env("LULL_WORK_DIR", self.path("work"))
            .stdout(self.log("stdout.txt"))
            .stderr(self.log("stderr.txt"));
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
        std::fs::set_permissions(r.dir.path(), <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o711))
            .expect("chmod");
        std::fs::write(r.path("config.toml"), EAGER).expect("config");
        r.start(&base.0, &["--", "sh", "-c", DAEMON]);
        wait_until("the daemon", Duration::from_secs(120), || r.daemon().is_some(), || r.output());
        let daemon = r.daemon().expect("pid");
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
    let fifo = r.path("input.fifo");
    let fifo_s = fifo.to_string_lossy().into_owned();
    r.start(&base.0, &["--mode", "pm", "--activity-fifo", &fifo_s, "--", "sh", "-c", DAEMON]);
    wait_until("the daemon", Duration::from_secs(120), || r.daemon().is_some(), || r.output());
    let daemon = r.daemon().expect("pid");
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
    r.child = Some(as_owner(r, bin, "run", args).spawn().expect("spawn lull run as the owner"));
}

/// `lull SUB ARGS` as the unprivileged owner in the delegated subtree (stdout and stderr
/// to the run's files).
fn as_owner(r: &Run, bin: &Path, sub: &str, args: &[&str]) -> Command {
    let unified = lull_e2e::unified_root();
    let inner = r.subcommand(bin, DELEGATED, sub, args);
    let envs: Vec<String> = inner.get_envs().filter_map(|(k, v)| Some(format!("{}={}", k.to_str()?, v?.to_str()?))).collect();
    let quoted: Vec<String> = args.iter().map(|a| format!("'{}'", a.replace('\'', "'\\''"))).collect();
    let script = format!(
        "echo $$ > {unified}/{DELEGATED}/cgroup.procs && exec setpriv --reuid={OWNER} --regid={OWNER} --init-groups env -i HOME=/home/{OWNER} PATH=/usr/bin:/bin {} {} {sub} {}",
        envs.join(" "),
        bin.display(),
        quoted.join(" ")
    );
    let mut c = Command::new("sh");
    c.arg("-c").arg(script).stdin(Stdio::null());
    c.stdout(r.log("stdout.txt"));
    c.stderr(r.log("stderr.txt"));
    c
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
    let fifo = r.path("input.fifo");
    let fifo_s = fifo.to_string_lossy().into_owned();
    let script = format!("id -u > uid.txt; cat /home/{OWNER}/secret.txt > leaked.txt 2> denied.txt; {DAEMON}");
    start_as_owner(&mut r, &bin, &["--mode", "pm", "--activity-fifo", &fifo_s, "--", "sh", "-c", &script]);
    wait_until("the daemon", Duration::from_secs(120), || r.daemon().is_some(), || r.output());
    let daemon = r.daemon().expect("pid");
    let wd = r.workdir().expect("the guest's work directory");
    assert_eq!(std::fs::read_to_string(wd.join("uid.txt")).unwrap_or_default().trim(), uid.to_string(), "guest runs as the owner");
    assert_eq!(std::fs::read_to_string(wd.join("leaked.txt")).unwrap_or_default(), "", "the guest read the owner's secret");
    assert!(!std::fs::read_to_string(wd.join("denied.txt")).unwrap_or_default().is_empty(), "the read was refused");
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

/// What a hostile guest tries, printing `LEAK …` for each reach that worked: the owner's
/// 0600 file and home, a marker on an owner's program's command line and in its
/// environment (in every `/proc/*/cmdline` and `environ` it can read), a signal to that
/// program, the agent's socket (a status request), a TCP port on 127.0.0.1 and on the
/// host's own network address (`network = "none"`, the default), writes into
/// the machine's `/tmp`, the agent's data directory, the owner's home and beside its work
/// directory; then it proves it can work in its own directory.
struct Hostile<'a> {
    secret: &'a Path,
    data: &'a Path,
    socket: &'a Path,
    owner_pid: u32,
    marker: &'a str,
    port: u16,
    host_ip: std::net::IpAddr,
}

impl Hostile<'_> {
    fn script(&self) -> String {
        let (m1, m2) = self.marker.split_at(6);
        let home = self.secret.parent().expect("home");
        // Each probe says `LEAK …` or `denied …`; none relies on /dev/null (a view
        // without a usable one must not make every probe fail vacuously).
        format!(
            r#"echo "uid $(id -u)"
cat {secret} > probe.out 2>&1 && echo "LEAK read {secret}" || echo "denied read"
ls {home} > probe.out 2>&1 && echo "LEAK list {home}" || echo "denied list"
m="{m1}""{m2}"; n=0; for f in /proc/[0-9]*/cmdline /proc/[0-9]*/environ; do n=$((n+1)); grep -q "$m" "$f" 2> probe.err && echo "LEAK marker in $f"; done; echo "denied marker ($n files)"
kill -0 {pid} 2> probe.err && echo "LEAK signal {pid}" || echo "denied signal"
python3 -c 'import socket; s = socket.socket(socket.AF_UNIX); s.connect("{socket}"); s.sendall(b"{{\"op\":\"status\"}}\n"); assert s.recv(64)' 2> probe.err && echo "LEAK socket" || echo "denied socket"
for ip in 127.0.0.1 {host_ip}; do python3 -c "import socket; socket.create_connection(('$ip', {port}), timeout=2)" 2> probe.err && echo "LEAK tcp $ip:{port}" || echo "denied tcp $ip"; done
for w in "/tmp/$m" {data}/planted {home}/planted "$HOME/../planted"; do (echo x > "$w") 2> probe.err && echo "wrote $w"; done
echo inside > inside.txt && echo "wrote inside"
"#,
            secret = self.secret.display(),
            home = home.display(),
            pid = self.owner_pid,
            socket = self.socket.display(),
            port = self.port,
            host_ip = self.host_ip,
            data = self.data.display(),
        )
    }

    /// Nothing reached: no `LEAK` line, every probe ran and said `denied`, nothing
    /// written outside but in its view's own `/tmp`, and its own directory usable.
    fn assert_contained(&self, out: &str) {
        assert!(!out.lines().any(|l| l.starts_with("LEAK")), "the guest reached its host:\n{out}");
        let ip = self.host_ip.to_string();
        let probes = ["read", "list", "marker", "signal", "socket", "tcp 127.0.0.1", &format!("tcp {ip}")];
        for p in probes {
            assert!(out.lines().any(|l| l.starts_with(&format!("denied {p}"))), "the probe '{p}' did not run:\n{out}");
        }
        assert!(out.contains("wrote inside"), "the guest could not work in its own directory:\n{out}");
        let home = self.secret.parent().expect("home");
        for outside in [Path::new("/tmp").join(self.marker), self.data.join("planted"), home.join("planted")] {
            assert!(!outside.exists(), "the guest wrote {}:\n{out}", outside.display());
        }
        let wrote: Vec<&str> = out.lines().filter(|l| l.starts_with("wrote /")).collect();
        assert!(wrote.iter().all(|l| l.starts_with("wrote /tmp/")), "only its own /tmp may take a write: {wrote:?}");
    }
}

/// The host's own (non-loopback) address: the source of its default route, or, with no
/// route, any address of its (the test then still proves loopback unreachable).
fn host_address() -> std::net::IpAddr {
    let probe = std::net::UdpSocket::bind("0.0.0.0:0").expect("udp socket");
    let routed = probe.connect("192.0.2.1:9").ok().and_then(|()| probe.local_addr().ok()).map(|a| a.ip());
    routed.filter(|ip| !ip.is_loopback() && !ip.is_unspecified()).unwrap_or(std::net::IpAddr::from([127, 0, 0, 2]))
}

fn guest_uid(out: &str) -> Option<u32> {
    out.lines().find_map(|l| l.strip_prefix("uid "))?.split_whitespace().next()?.parse().ok()
}

/// An owner's program (`sh -c 'sleep 1000' MARKER`, `LULL_MARKER=MARKER` in its
/// environment), as `uid` when given. Killed on drop.
struct OwnerProgram(Child);

impl OwnerProgram {
    fn start(marker: &str, uid: Option<u32>) -> Self {
        let mut c = match uid {
            Some(u) => {
                let mut c = Command::new("setpriv");
                c.args([format!("--reuid={u}"), format!("--regid={u}"), "--clear-groups".into(), "sh".into()]);
                c
            }
            None => Command::new("sh"),
        };
        c.args(["-c", "sleep 1000", marker]).env("LULL_MARKER", marker).stdin(Stdio::null());
        Self(c.spawn().expect("the owner's program"))
    }
}

impl Drop for OwnerProgram {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A config with small disk and output limits, so hostile guests reach them fast.
fn hostile_config() -> String {
    format!("{EAGER}[guests]\ndisk_mib = 16\noutput_mib = 1\n")
}

/// What a `lull run` gave: its exit code, stdout and stderr.
type RunOutput = (Option<i32>, String, String);

/// Runs the hostile guest, then one filling its disk and one flooding its stdout, each
/// through `lull run` handed to the one running agent (`run` starts each and gives its
/// exit code, stdout and stderr), checking after each that the agent still answers.
fn hostile_jobs(h: &Hostile, run: &dyn Fn(&[&str]) -> RunOutput, serving: &dyn Fn() -> bool) -> String {
    let script = h.script();
    let (code, out, err) = run(&["--now", "--", "sh", "-c", &script]);
    assert_eq!(code, Some(0), "{out}\n{err}");
    h.assert_contained(&out);
    assert!(serving(), "the agent stopped answering after the hostile guest");
    let fill = "for i in 1 2 3 4 5; do head -c 8388608 /dev/zero > f$i; done; echo filled; sleep 1000";
    let (code, out, err) = run(&["--now", "--", "sh", "-c", fill]);
    assert_eq!(code, Some(128 + libc::SIGKILL), "stopped for its disk\n{out}\n{err}");
    assert!(err.contains("failed: stopped by its agent: disk limit") && err.contains("disk_mib = 16"), "{err}");
    assert!(serving(), "the agent stopped answering after the disk filler");
    let (code, out, err) = run(&["--now", "--", "yes", "lull"]);
    assert_eq!(code, Some(128 + libc::SIGPIPE), "its writes failed past the cap\n{err}");
    assert!(err.contains("failed: stopped by its agent: output limit: its stdout was cut"), "the job failed for its output:\n{err}");
    assert!(out.len() >= 1 << 20 && out.len() < (1 << 20) + 200 && out.ends_with("further writes to it fail]\n"), "{} bytes", out.len());
    assert!(serving(), "the agent stopped answering after the flood");
    script
}

#[test]
fn a_hostile_guest_gets_nothing_as_root_or_as_the_owner() {
    if skip_without_cgroups() {
        return;
    }
    let perms = |m: u32| <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(m);
    // Listens on every address: loopback and the host's own network address.
    let listener = std::net::TcpListener::bind("0.0.0.0:0").expect("listener");
    let port = listener.local_addr().unwrap().port();
    let host_ip = host_address();
    let marker = format!("lullmarker{}", std::process::id());

    // 1. The agent runs as root: the guest is not root, and its sandbox holds.
    let base = Base::new("hostile");
    let mut r = Run::new(&hostile_config());
    // Open the test directory to everyone, so only the guest's confinement (not the
    // permissions of a temporary directory) stands between it and these files.
    std::fs::set_permissions(r.dir.path(), perms(0o755)).expect("chmod");
    let secret = r.path("home/secret.txt");
    std::fs::create_dir_all(secret.parent().unwrap()).unwrap();
    std::fs::write(&secret, "the owner's secret").expect("secret");
    std::fs::set_permissions(&secret, perms(0o644)).expect("chmod");
    let owner = OwnerProgram::start(&marker, None);
    r.child = Some(r.subcommand(&lull_bin(), &base.0, "agent", &[]).spawn().expect("lull agent"));
    wait_until("the agent", Duration::from_secs(60), || r.state().is_some(), || r.output());
    let (data, socket) = (r.path("data"), r.path("agent.sock"));
    let h = Hostile { secret: &secret, data: &data, socket: &socket, owner_pid: owner.0.id(), marker: &marker, port, host_ip };
    let run = |args: &[&str]| {
        let o = r.command(&lull_bin(), &base.0, args).stdout(Stdio::piped()).stderr(Stdio::piped()).output().expect("lull run");
        (o.status.code(), String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
    };
    let script = hostile_jobs(&h, &run, &|| r.state().is_some());
    let (_, out, _) = run(&["--now", "--", "sh", "-c", &script]);
    assert_ne!(guest_uid(&out), Some(0), "a guest ran as root:\n{out}");
    drop(r);
    drop(owner);
    drop(base);

    // 2. The agent runs as an ordinary owner: the guest keeps the owner's uid (never
    //    root) and its sandbox alone keeps it from the owner's files, processes and agent.
    let Some(uid) = delegated_owner(" the ordinary-user half") else { return };
    let (_bindir, bin) = lull_for_the_owner();
    let mut r = Run::new(&hostile_config());
    std::fs::set_permissions(r.dir.path(), perms(0o777)).expect("chmod");
    std::fs::set_permissions(r.path("config.toml"), perms(0o644)).expect("chmod");
    let secret = PathBuf::from(format!("/home/{OWNER}/secret.txt"));
    let owner = OwnerProgram::start(&marker, Some(uid));
    r.child = Some(as_owner(&r, &bin, "agent", &[]).spawn().expect("lull agent as the owner"));
    // The owner's socket refuses root: ask as the owner.
    let serving =
        || as_owner(&r, &bin, "status", &["--json"]).stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok_and(|s| s.success());
    wait_until("the owner's agent", Duration::from_secs(60), serving, || r.output());
    let (data, socket) = (r.path("data"), r.path("agent.sock"));
    let h = Hostile { secret: &secret, data: &data, socket: &socket, owner_pid: owner.0.id(), marker: &marker, port, host_ip };
    let run = |args: &[&str]| {
        let o = as_owner(&r, &bin, "run", args).stdout(Stdio::piped()).stderr(Stdio::piped()).output().expect("lull run as the owner");
        (o.status.code(), String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
    };
    let script = hostile_jobs(&h, &run, &serving);
    let (_, out, _) = run(&["--now", "--", "sh", "-c", &script]);
    assert_eq!(guest_uid(&out), Some(uid), "{out}");
    assert!(std::fs::read_to_string(&secret).is_ok_and(|s| !s.is_empty()));
}
