//! Helpers for Lull's end-to-end tests: locating (and if needed building) the real
//! `lull` binary, running agents as real child processes in throw-away directories,
//! talking to them over their real control socket, and requiring or skipping
//! environment-dependent tests.

use agent_core::control::{call, AgentStatus, Request, Response};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The workspace root.
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("tests/ sits in the workspace").to_path_buf()
}

/// The `lull` binary of this build (built once if it is missing).
pub fn lull_bin() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        if let Some(p) = std::env::var_os("LULL_BIN") {
            return PathBuf::from(p);
        }
        // target/<profile>/deps/<test> → target/<profile>/lull
        let exe = std::env::current_exe().expect("test executable path");
        let profile_dir = exe.parent().and_then(|d| d.parent()).expect("target/<profile>");
        let bin = profile_dir.join("lull");
        let release = profile_dir.file_name().is_some_and(|n| n == "release");
        let mut cmd = Command::new(env!("CARGO"));
        cmd.current_dir(workspace()).args(["build", "-q", "-p", "lull"]);
        if release {
            cmd.arg("--release");
        }
        let ok = cmd.status().expect("running cargo build").success();
        assert!(ok && bin.exists(), "could not build the lull binary at {}", bin.display());
        bin
    })
    .clone()
}

/// True when the environment variable says this kind of test must run (CI sets it).
pub fn required(var: &str) -> bool {
    std::env::var(var).is_ok_and(|v| v == "1")
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
        c.args(args).env("LULL_CONFIG", self.dir.join("config.toml")).env("LULL_DATA_DIR", &self.dir).env("LULL_SOCKET", self.socket());
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
            c.args(&self.wrapper[1..]).arg(lull_bin()).arg("agent");
            c.env("LULL_CONFIG", self.dir.join("config.toml")).env("LULL_DATA_DIR", &self.dir).env("LULL_SOCKET", self.socket());
            for (k, v) in &self.env {
                c.env(k, v);
            }
            c
        };
        cmd.stdout(out).stderr(err);
        self.child = Some(cmd.spawn().expect("spawn lull agent"));
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if self.try_status().is_some() {
                return;
            }
            if let Some(Ok(Some(status))) = self.child.as_mut().map(|c| c.try_wait()) {
                panic!("agent exited early ({status}); stderr:\n{}", self.stderr());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("agent did not answer on {} within 20 s; stderr:\n{}", self.socket().display(), self.stderr());
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
        match call(&self.socket(), &Request::Status) {
            Ok(Response::Status(s)) => Some(*s),
            _ => None,
        }
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
