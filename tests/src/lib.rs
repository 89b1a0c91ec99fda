//! The harness of Lull's end-to-end tests and of its benchmarks (`lull-bench`):
//! locating (and if needed building) the real `lull` and `lull-bench` binaries, running
//! agents and coordinators as real child processes in throw-away directories, talking to
//! them over their real control socket, Xvfb, cgroup purge, waiting, one percentile
//! convention, and requiring or skipping environment-dependent tests. Helpers that may
//! fail have a `try_` form returning `io::Result` (for the benchmarks) beside the
//! panicking one the tests use.

pub mod coordinator;
pub mod percentile;
pub mod pool;
pub mod process;

pub use process::cpu_ticks;

use agent_core::control::{call, AgentStatus, Request, Response};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The workspace root.
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("tests/ sits in the workspace").to_path_buf()
}

/// The directory of this build's binaries (`target/<profile>`): a test executable sits
/// in `target/<profile>/deps`, a binary such as `lull-bench` beside `lull` itself.
fn profile_dir() -> std::io::Result<PathBuf> {
    let exe = std::env::current_exe()?;
    let dir = exe.parent().ok_or_else(|| std::io::Error::other("own executable has no directory"))?;
    Ok(if dir.file_name().is_some_and(|n| n == "deps") { dir.parent().unwrap_or(dir) } else { dir }.to_path_buf())
}

/// The binary locator of tests and benchmarks: binary `bin` of workspace package
/// `package`, in this build's profile. `$env_var` when set (a binary to measure from
/// elsewhere); else `cargo build -q -p PACKAGE --bin BIN` in this workspace (a no-op
/// when it is fresh, so a test never runs a stale binary); else, outside a checkout,
/// the one beside this executable.
pub fn try_workspace_bin(package: &str, bin: &str, env_var: &str) -> std::io::Result<PathBuf> {
    if let Some(p) = std::env::var_os(env_var) {
        return Ok(PathBuf::from(p));
    }
    let dir = profile_dir()?;
    let path = dir.join(bin);
    if !workspace().join("Cargo.toml").exists() && path.exists() {
        return Ok(path);
    }
    let mut cmd = Command::new(env!("CARGO"));
    cmd.current_dir(workspace()).args(["build", "-q", "-p", package, "--bin", bin]);
    if dir.file_name().is_some_and(|n| n == "release") {
        cmd.arg("--release");
    }
    let built = cmd.status().is_ok_and(|s| s.success());
    if built && path.exists() {
        return Ok(path);
    }
    Err(std::io::Error::other(format!("could not build {bin} (cargo build -p {package}) at {}; or set {env_var}", path.display())))
}

/// The `lull` binary of this build (`$LULL_BIN`, or built with cargo; see
/// [`try_workspace_bin`]), located once.
pub fn try_lull_bin() -> std::io::Result<PathBuf> {
    static BIN: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    BIN.get_or_init(|| try_workspace_bin("lull", "lull", "LULL_BIN").map_err(|e| e.to_string())).clone().map_err(std::io::Error::other)
}

/// [`try_lull_bin`] for tests: panics when it cannot be built.
pub fn lull_bin() -> PathBuf {
    try_lull_bin().unwrap_or_else(|e| panic!("{e}"))
}

/// The `lull-bench` binary of this build (`$LULL_BENCH_BIN`, or built with cargo).
pub fn bench_bin() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| try_workspace_bin("lull-bench", "lull-bench", "LULL_BENCH_BIN").unwrap_or_else(|e| panic!("{e}"))).clone()
}

/// The `lull-tray` binary of this build (built once if it is missing; it embeds `ui/dist`,
/// so `npm run build` in `ui/` must have run, as scripts/test.sh does).
pub fn tray_bin() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let lull = lull_bin();
        let bin = lull.with_file_name("lull-tray");
        if !bin.exists() {
            let release = lull.parent().and_then(|d| d.file_name()).is_some_and(|n| n == "release");
            let mut cmd = Command::new(env!("CARGO"));
            cmd.current_dir(workspace()).args(["build", "-q", "-p", "lull-tray", "--bin", "lull-tray", "--bin", "lull-window"]);
            if release {
                cmd.arg("--release");
            }
            let ok = cmd.status().expect("running cargo build").success();
            assert!(ok && bin.exists(), "could not build the lull-tray binary at {}", bin.display());
        }
        bin
    })
    .clone()
}

/// True when the environment variable says this kind of test must run (CI sets it).
pub fn required(var: &str) -> bool {
    std::env::var(var).is_ok_and(|v| v == "1")
}

/// Skips (returns true, printing why) unless guest cgroups can be managed here (root and
/// cgroup v2 or hybrid); panics instead when `LULL_REQUIRE_CGROUPS=1`.
pub fn skip_without_cgroups() -> bool {
    let v2_or_hybrid = Path::new("/sys/fs/cgroup/unified/cgroup.procs").exists() || Path::new("/sys/fs/cgroup/cgroup.controllers").exists();
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() == 0 } && v2_or_hybrid {
        return false;
    }
    assert!(!required("LULL_REQUIRE_CGROUPS"), "LULL_REQUIRE_CGROUPS=1 but this test cannot manage cgroups");
    eprintln!("SKIPPED: needs root to create cgroups (set LULL_REQUIRE_CGROUPS=1 to require)");
    true
}

/// Skips (returns true, printing why) unless `tool` is on PATH; panics instead when
/// `require_var` is set, because then the test must run.
pub fn skip_without(tool: &str, require_var: &str) -> bool {
    let found = Command::new("sh").arg("-c").arg(format!("command -v {tool}")).stdout(Stdio::null()).status().is_ok_and(|s| s.success());
    if found {
        return false;
    }
    assert!(!required(require_var), "{require_var}=1 but {tool} is not installed");
    eprintln!("SKIPPED: {tool} is not installed (set {require_var}=1 to require it)");
    true
}

/// A child process killed (and reaped) when dropped.
pub struct Kid(pub Child);

impl Drop for Kid {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The owner's terminal session on a new pty (`script` running `sh`): each line written
/// to its stdin is read by the shell, as a shell reads what is typed, which the terminal
/// input backend sees as the owner's input.
pub fn owner_pty() -> Kid {
    Kid(Command::new("script")
        .args(["-qfc", "sh", "/dev/null"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("script"))
}

/// A real `lull agent` child process in its own directory.
pub struct Agent {
    pub dir: PathBuf,
    pub child: Option<Child>,
    pub env: Vec<(String, String)>,
    pub wrapper: Vec<String>,
    _tmp: Option<tempfile::TempDir>,
}

impl Agent {
    /// A new agent directory with this config text (not started yet).
    pub fn new(config: &str) -> Self {
        let tmp = tempfile::tempdir().expect("temp dir");
        let dir = tmp.path().to_path_buf();
        std::fs::write(dir.join("config.toml"), config).expect("write config");
        // Each agent's guest cgroups live under a base of its own, purged on drop.
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let base = format!("lull-e2e-agent-{}-{n}", std::process::id());
        Self { dir, child: None, env: vec![("LULL_CGROUP".into(), base)], wrapper: Vec::new(), _tmp: Some(tmp) }
    }

    pub fn socket(&self) -> PathBuf {
        self.dir.join("agent.sock")
    }

    /// The command that runs `lull ARGS` against this agent's directory.
    pub fn lull(&self, args: &[&str]) -> Command {
        let mut c = Command::new(lull_bin());
        agent_env(c.args(args), &self.dir);
        for (k, v) in &self.env {
            c.env(k, v);
        }
        c
    }

    /// Starts the agent (stdout to `stdout.txt`, stderr to `stderr.txt` in its dir) and
    /// waits until its socket answers.
    pub fn start(&mut self) {
        let out = std::fs::OpenOptions::new().create(true).append(true).open(self.dir.join("stdout.txt")).expect("stdout file");
        let err = std::fs::OpenOptions::new().create(true).append(true).open(self.dir.join("stderr.txt")).expect("stderr file");
        let mut cmd = if self.wrapper.is_empty() {
            self.lull(&["agent"])
        } else {
            let mut c = Command::new(&self.wrapper[0]);
            agent_env(c.args(&self.wrapper[1..]).arg(lull_bin()).arg("agent"), &self.dir);
            for (k, v) in &self.env {
                c.env(k, v);
            }
            c
        };
        cmd.stdout(out).stderr(err);
        match try_start_agent(&mut cmd, &self.socket(), Duration::from_secs(20), |_| true) {
            Ok(child) => self.child = Some(child),
            Err(e) => panic!("{e}; stderr:\n{}", self.stderr()),
        }
    }

    /// kill -9.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// SIGTERM and wait.
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            // SAFETY: kill with a pid we spawned.
            unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
            let _ = c.wait();
        }
    }

    pub fn try_status(&self) -> Option<AgentStatus> {
        agent_status(&self.socket())
    }

    pub fn status(&self) -> AgentStatus {
        self.try_status().unwrap_or_else(|| panic!("agent status unavailable; stderr:\n{}", self.stderr()))
    }

    pub fn request(&self, req: Request) -> Response {
        call(&self.socket(), &req).expect("control request")
    }

    /// Waits until `pred` holds for the status, or panics with the last status.
    pub fn wait_for(&self, what: &str, timeout: Duration, pred: impl Fn(&AgentStatus) -> bool) -> AgentStatus {
        let deadline = Instant::now() + timeout;
        let mut last = None;
        while Instant::now() < deadline {
            if let Some(s) = self.try_status() {
                if pred(&s) {
                    return s;
                }
                last = Some(s);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("timed out waiting for {what}; last status: {last:#?}\nstdout:\n{}\nstderr:\n{}", self.stdout(), self.stderr());
    }

    pub fn stdout(&self) -> String {
        std::fs::read_to_string(self.dir.join("stdout.txt")).unwrap_or_default()
    }

    pub fn stderr(&self) -> String {
        std::fs::read_to_string(self.dir.join("stderr.txt")).unwrap_or_default()
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        self.kill9();
        if let Some((_, base)) = self.env.iter().find(|(k, _)| k == "LULL_CGROUP") {
            purge_cgroup_base(&base.clone());
        }
    }
}

/// The environment of one agent machine whose data directory is `dir`: its config
/// (`dir/config.toml`), ledger and control socket (`dir/agent.sock`) there, and no
/// coordinator, key or work directory from the caller's environment. The cgroup base
/// (`LULL_CGROUP`) is the caller's to set.
pub fn agent_env<'c>(c: &'c mut Command, dir: &Path) -> &'c mut Command {
    c.env("LULL_DATA_DIR", dir)
        .env("LULL_CONFIG", dir.join("config.toml"))
        .env("LULL_SOCKET", dir.join("agent.sock"))
        .env_remove("LULL_COORDINATOR_URL")
        .env_remove("LULL_KEY")
        .env_remove("LULL_WORK_DIR")
}

/// Starts an agent process (`lull agent`, `lull up`, `lull-tray`: `cmd`, in its
/// environment already), ended with us, and waits up to `timeout` until it answers on
/// `socket` with a status for which `ready` holds. An agent that exits first, or is not
/// ready in time, is an error saying which (and is stopped).
pub fn try_start_agent(
    cmd: &mut Command,
    socket: &Path,
    timeout: Duration,
    ready: impl Fn(&AgentStatus) -> bool,
) -> std::io::Result<Child> {
    let mut child = process::end_with_us(cmd, libc::SIGTERM).spawn()?;
    let deadline = Instant::now() + timeout;
    loop {
        if agent_status(socket).is_some_and(|s| ready(&s)) {
            return Ok(child);
        }
        if let Ok(Some(status)) = child.try_wait() {
            return Err(std::io::Error::other(format!("the agent exited early ({status})")));
        }
        if Instant::now() > deadline {
            process::terminate(&mut child, Duration::from_secs(10));
            let what = format!("the agent did not answer (ready) on {} within {timeout:?}", socket.display());
            return Err(std::io::Error::new(std::io::ErrorKind::TimedOut, what));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The status of the agent answering on `socket`, or `None` while it does not (yet).
pub fn agent_status(socket: &Path) -> Option<AgentStatus> {
    match call(socket, &Request::Status) {
        Ok(Response::Status(s)) => Some(*s),
        _ => None,
    }
}

/// Kills everything under a cgroup base in every hierarchy and removes it.
pub fn purge_cgroup_base(base: &str) {
    for h in ["unified", "memory", "cpu", "pids", ""] {
        let root = Path::new("/sys/fs/cgroup").join(h).join(base);
        if !root.is_dir() {
            continue;
        }
        let mut dirs = Vec::new();
        let mut stack = vec![root.clone()];
        while let Some(d) = stack.pop() {
            if let Ok(rd) = std::fs::read_dir(&d) {
                stack.extend(rd.flatten().map(|e| e.path()).filter(|p| p.is_dir()));
            }
            dirs.push(d);
        }
        let _ = std::fs::write(root.join("cgroup.kill"), "1");
        for d in &dirs {
            for pid in std::fs::read_to_string(d.join("cgroup.procs")).unwrap_or_default().lines() {
                if let Ok(pid) = pid.trim().parse::<i32>() {
                    // SAFETY: kill has no memory-safety preconditions.
                    unsafe { libc::kill(pid, libc::SIGKILL) };
                }
            }
        }
        // Killed idle-priority tasks still have to be scheduled to exit.
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline
            && dirs.iter().any(|d| !std::fs::read_to_string(d.join("cgroup.procs")).unwrap_or_default().trim().is_empty())
        {
            std::thread::sleep(Duration::from_millis(20));
        }
        for d in dirs.iter().rev() {
            if d != &root || !base.starts_with("lull-deleg") {
                let _ = std::fs::remove_dir(d);
            }
        }
    }
}

/// Reads one line from a child's piped stdout, waiting at most `timeout`.
fn read_line_within(child: &mut Child, timeout: Duration) -> Option<String> {
    use std::io::BufRead;
    let out = child.stdout.take()?;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let mut r = std::io::BufReader::new(out);
        let _ = r.read_line(&mut line);
        let _ = tx.send(line);
        // Keep the pipe open (and drained) for the child's lifetime.
        let mut sink = String::new();
        while r.read_line(&mut sink).is_ok_and(|n| n > 0) {
            sink.clear();
        }
    });
    rx.recv_timeout(timeout).ok()
}

/// A real Xvfb X server on a free display number it picks itself (`-displayfd`), with
/// `-noreset` so its idle counter survives clients coming and going. Killed on drop.
pub struct Xvfb {
    child: Child,
    /// `:N`
    pub display: String,
}

impl Xvfb {
    /// Starts Xvfb with an 800×600 screen on a free display number it picks itself
    /// (`-displayfd`); it ends with this process however it ends.
    pub fn try_start() -> std::io::Result<Self> {
        Self::try_start_with_screen("800x600x24")
    }

    /// [`Xvfb::try_start`] with a screen of `screen` (`WxHxDEPTH`, e.g. `1280x960x24` for
    /// the tray's windows and their screenshots).
    pub fn try_start_with_screen(screen: &str) -> std::io::Result<Self> {
        let mut cmd = Command::new("Xvfb");
        let mut child = process::end_with_us(&mut cmd, libc::SIGTERM)
            .args(["-displayfd", "1", "-noreset", "-nolisten", "tcp", "-screen", "0", screen])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| std::io::Error::new(e.kind(), format!("starting Xvfb (Debian package xvfb): {e}")))?;
        let n = read_line_within(&mut child, Duration::from_secs(20)).map(|l| l.trim().to_string()).filter(|l| !l.is_empty());
        let Some(n) = n else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(std::io::Error::new(std::io::ErrorKind::TimedOut, "Xvfb did not report a display number within 20 s"));
        };
        Ok(Self { child, display: format!(":{n}") })
    }

    /// Starts Xvfb on `display` (`:N`) and waits until its socket exists.
    pub fn try_start_on(display: &str) -> std::io::Result<Self> {
        let mut cmd = Command::new("Xvfb");
        let child = process::end_with_us(&mut cmd, libc::SIGTERM)
            .args([display, "-noreset", "-nolisten", "tcp", "-screen", "0", "800x600x24"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| std::io::Error::new(e.kind(), format!("starting Xvfb (Debian package xvfb): {e}")))?;
        let x = Self { child, display: display.to_string() };
        let socket = PathBuf::from(format!("/tmp/.X11-unix/X{}", display.trim_start_matches(':')));
        let what = format!("Xvfb {display} to come up (is the display taken?)");
        process::wait_until(&what, Duration::from_secs(20), || socket.exists().then_some(()))?;
        Ok(x)
    }

    /// [`Xvfb::try_start`] for tests: panics on failure.
    pub fn start() -> Self {
        Self::try_start().unwrap_or_else(|e| panic!("{e}"))
    }

    /// A real Xvfb on the `i`-th display listed in `LULL_E2E_DISPLAYS` (e.g. `:65,:66`,
    /// for runs that must keep to given display numbers), or on a free one it picks.
    pub fn start_listed(i: usize) -> Self {
        let listed = std::env::var("LULL_E2E_DISPLAYS").unwrap_or_default();
        match listed.split(',').map(str::trim).filter(|d| !d.is_empty()).nth(i) {
            Some(display) => Self::try_start_on(display).unwrap_or_else(|e| panic!("{e}")),
            None => Self::start(),
        }
    }

    /// Runs `xdotool ARGS` against this display and asserts it succeeded.
    pub fn xdotool(&self, args: &[&str]) {
        let out = Command::new("xdotool").args(args).env("DISPLAY", &self.display).output().expect("run xdotool");
        assert!(out.status.success(), "xdotool {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
}

impl Drop for Xvfb {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A private, real `dbus-daemon --session` bus. Killed on drop.
pub struct DbusDaemon {
    child: Child,
    pub address: String,
}

impl DbusDaemon {
    pub fn start() -> Self {
        let mut child = Command::new("dbus-daemon")
            .args(["--session", "--nofork", "--print-address=1"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn dbus-daemon");
        let address = read_line_within(&mut child, Duration::from_secs(20)).map(|l| l.trim().to_string()).unwrap_or_default();
        if address.is_empty() {
            let _ = child.kill();
            panic!("dbus-daemon did not print its address within 20 s");
        }
        Self { child, address }
    }
}

impl Drop for DbusDaemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Every file under `dir` (recursively), as (path, bytes).
pub fn all_files(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if let Ok(b) = std::fs::read(&p) {
                out.push((p, b));
            }
        }
    }
    out
}

/// A real headless sway (Debian's sway 1.7: offers `org_kde_kwin_idle`, and the
/// virtual-keyboard protocol `wtype` uses) in its own runtime dir. sway refuses to run
/// as root, so under root it runs as `nobody` (uid 65534) through `setpriv`; root
/// clients can still connect to its socket. Killed on drop.
pub struct Sway {
    child: Child,
    pub runtime_dir: PathBuf,
    /// The socket name, for `WAYLAND_DISPLAY`.
    pub display: String,
    _tmp: tempfile::TempDir,
}

impl Sway {
    pub fn start() -> Self {
        let tmp = tempfile::tempdir().expect("temp dir");
        let dir = tmp.path().join("run");
        std::fs::create_dir(&dir).expect("runtime dir");
        let cfg = tmp.path().join("sway.conf");
        std::fs::write(&cfg, "xwayland disable\noutput HEADLESS-1 resolution 640x480\n").expect("sway config");
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        let mut cmd = if root {
            use std::os::unix::ffi::OsStrExt;
            for p in [tmp.path(), &dir, &cfg] {
                let c = std::ffi::CString::new(p.as_os_str().as_bytes()).expect("path without NUL");
                // SAFETY: chown on a path we just created.
                assert_eq!(unsafe { libc::chown(c.as_ptr(), 65534, 65534) }, 0, "chown {}", p.display());
            }
            let mut c = Command::new("setpriv");
            c.args(["--reuid=65534", "--regid=65534", "--clear-groups", "sway"]);
            c
        } else {
            Command::new("sway")
        };
        cmd.arg("-c")
            .arg(&cfg)
            .env("XDG_RUNTIME_DIR", &dir)
            .env("HOME", tmp.path())
            .env("WLR_BACKENDS", "headless")
            .env("WLR_LIBINPUT_NO_DEVICES", "1")
            .env("WLR_RENDERER", "pixman")
            .env_remove("WAYLAND_DISPLAY")
            .env_remove("DISPLAY")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(tmp.path().join("sway.log")).map(Stdio::from).unwrap_or(Stdio::null()));
        let mut child = cmd.spawn().expect("spawn sway");
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let sock = std::fs::read_dir(&dir).into_iter().flatten().flatten().find_map(|e| {
                let n = e.file_name().to_string_lossy().into_owned();
                (n.starts_with("wayland-") && !n.ends_with(".lock")).then_some(n)
            });
            if let Some(display) = sock {
                return Self { child, runtime_dir: dir, display, _tmp: tmp };
            }
            if let Ok(Some(st)) = child.try_wait() {
                let log = std::fs::read_to_string(tmp.path().join("sway.log")).unwrap_or_default();
                panic!("sway exited ({st}):\n{log}");
            }
            assert!(Instant::now() < deadline, "sway made no Wayland socket within 20 s");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Types `text` through the virtual-keyboard protocol (`wtype`).
    pub fn wtype(&self, text: &str) {
        let out = Command::new("wtype")
            .arg(text)
            .env("XDG_RUNTIME_DIR", &self.runtime_dir)
            .env("WAYLAND_DISPLAY", &self.display)
            .output()
            .expect("run wtype");
        assert!(out.status.success(), "wtype: {}", String::from_utf8_lossy(&out.stderr));
    }
}

impl Drop for Sway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// ── Guest processes as the kernel sees them ──

/// Whether a process exists and is not a zombie.
pub fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rsplit_once(')').map(|(_, r)| r.split_whitespace().next() != Some("Z")))
        .unwrap_or(false)
}

/// The pid a process wrote into a file.
pub fn read_pid(path: &Path) -> Option<i32> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// The unified (v2) cgroup hierarchy's root: `/sys/fs/cgroup` on a pure v2 layout, else
/// (hybrid) `/sys/fs/cgroup/unified`.
pub fn unified_root() -> &'static str {
    if Path::new("/sys/fs/cgroup/cgroup.controllers").exists() {
        "/sys/fs/cgroup"
    } else {
        "/sys/fs/cgroup/unified"
    }
}

/// The directory of the cgroup base named `base` in the unified hierarchy, wherever the
/// agent put it (directly under the root, or in a delegated subtree up to four levels
/// down): the first directory of that name, depth first.
pub fn find_unified_base(base: &str) -> Option<PathBuf> {
    find_dir_named(Path::new(unified_root()), base)
}

/// The first directory named `name` at `root` or up to four levels below it, depth first.
fn find_dir_named(root: &Path, name: &str) -> Option<PathBuf> {
    let mut stack = vec![(root.to_path_buf(), 0)];
    while let Some((d, depth)) = stack.pop() {
        if d.file_name().is_some_and(|n| n == name) {
            return Some(d);
        }
        if depth < 4 {
            for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    stack.push((e.path(), depth + 1));
                }
            }
        }
    }
    None
}

/// A process's cgroup path in hierarchy `key` ("0::" for v2, "memory" …).
pub fn cgroup_of(pid: i32, key: &str) -> Option<String> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    text.lines().find_map(|l| {
        let mut it = l.splitn(3, ':');
        let (_, ctl, path) = (it.next()?, it.next()?, it.next()?);
        let hit = if key == "0::" { l.starts_with("0::") } else { ctl.split(',').any(|c| c == key) };
        hit.then(|| path.to_owned())
    })
}

/// The unified (v2) cgroup directory of process `pid`'s cgroup (v2, or the unified
/// hierarchy of a hybrid layout).
pub fn unified_cgroup_dir(pid: i32) -> Option<PathBuf> {
    let cg = cgroup_of(pid, "0::")?;
    Some(PathBuf::from(format!("{}{cg}", unified_root())))
}

/// The guest cgroup's `cgroup.freeze` and `cgroup.events` `frozen` of process `pid`, read
/// from the kernel's files.
pub fn guest_frozen(pid: i32) -> Option<(String, bool)> {
    let dir = unified_cgroup_dir(pid)?;
    let freeze = std::fs::read_to_string(dir.join("cgroup.freeze")).ok()?.trim().to_string();
    let events = std::fs::read_to_string(dir.join("cgroup.events")).ok()?;
    Some((freeze, events.lines().any(|l| l == "frozen 1")))
}

/// The agent instance's frozen flag (parent of the guest's own cgroup), from the kernel:
/// whether the guest process `daemon` is frozen.
pub fn instance_frozen(daemon: i32) -> bool {
    let Some(cg) = cgroup_of(daemon, "0::") else { return false };
    let inst = Path::new(&format!("{}{cg}", unified_root())).parent().map(|p| p.join("cgroup.events"));
    inst.and_then(|f| std::fs::read_to_string(f).ok()).is_some_and(|t| t.lines().any(|l| l == "frozen 1"))
}

// ── Guests' directories and their own PID namespaces ──

/// Where an agent with data directory `data_dir` puts its guests' directories (for a
/// root agent, under /var/lib/lull/execute).
pub fn work_root_of(data_dir: &Path) -> PathBuf {
    let paths = agent_core::paths::Paths {
        config_file: data_dir.join("config.toml"),
        ledger: data_dir.join("ledger.db"),
        log_dir: data_dir.join("logs"),
        socket: data_dir.join("agent.sock"),
        data_dir: data_dir.to_path_buf(),
    };
    paths.work_root()
}

/// The work directories (`guests/<id>/work`) of the `lull run` guests under an agent's
/// work root ([`work_root_of`] its data directory; an ordinary owner's agent: the data
/// directory itself), in the order of their ids (oldest first).
pub fn guest_workdirs(work_root: &Path) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(work_root.join("guests")) else { return Vec::new() };
    let mut dirs: Vec<PathBuf> = rd.flatten().map(|e| e.path().join("work")).filter(|w| w.is_dir()).collect();
    dirs.sort();
    dirs
}

fn parent_pid(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?.1.split_whitespace().nth(1)?.parse().ok()
}

/// A process's pids from the host's PID namespace inward (`NSpid`).
fn ns_pids(pid: i32) -> Vec<i32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("NSpid:"))
        .map(|l| l.split_whitespace().filter_map(|p| p.parse().ok()).collect())
        .unwrap_or_default()
}

/// The host pid of the guest process that wrote its pid (`echo $$ > FILE`, its pid as it
/// sees it) into `work/FILE`: in its own PID namespace, the process whose inner pid it is
/// and whose sandbox (bwrap, working in `work` on the host) is its ancestor; the same
/// number for a guest without namespaces.
pub fn guest_pid(work: &Path, file: &str) -> Option<i32> {
    let inner = read_pid(&work.join(file))?;
    if ns_pids(inner).len() == 1 && std::fs::read_link(format!("/proc/{inner}/cwd")).is_ok_and(|c| c.starts_with(work)) {
        return Some(inner);
    }
    let work = std::fs::canonicalize(work).ok()?;
    std::fs::read_dir("/proc").ok()?.flatten().filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok()).find(|&pid| {
        let ns = ns_pids(pid);
        if ns.len() < 2 || ns.last() != Some(&inner) {
            return false;
        }
        let mut p = parent_pid(pid);
        for _ in 0..8 {
            let Some(a) = p.filter(|a| *a > 1) else { return false };
            if std::fs::read_link(format!("/proc/{a}/cwd")).is_ok_and(|c| c == work) {
                return true;
            }
            p = parent_pid(a);
        }
        false
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cgroup_base_is_found_up_to_four_levels_down_and_no_deeper() {
        let root = tempfile::tempdir().unwrap();
        let four = root.path().join("a/b/c/lull-x");
        std::fs::create_dir_all(four.join("guests")).unwrap();
        assert_eq!(find_dir_named(root.path(), "lull-x"), Some(four));
        assert_eq!(find_dir_named(root.path(), "guests"), None, "five levels down is past the search");
        assert_eq!(find_dir_named(root.path(), "lull-y"), None);
    }
}
