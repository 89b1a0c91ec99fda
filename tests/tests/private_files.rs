//! Every file Lull's agent and CLI write is the owner's only: the real `lull` binary run
//! with a fresh home (config, data and runtime directories as the platform puts them),
//! as root and as the ordinary owner `lullowner` (ci/setup-guest.sh), once on a new
//! install and once on an install an earlier version left readable by others, which the
//! agent must tighten at start and say so in its log.

use lull_e2e::{lull_bin, required};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const OWNER: &str = "lullowner";

/// Who runs the binaries: root, or the owner (through runuser, with a copy of `lull` it
/// can reach).
struct User {
    name: &'static str,
    uid: u32,
    bin: PathBuf,
    _bindir: Option<tempfile::TempDir>,
}

fn id_of(name: &str) -> Option<u32> {
    let out = Command::new("id").args(["-u", name]).output().ok()?;
    String::from_utf8_lossy(&out.stdout).trim().parse().ok()
}

fn root() -> User {
    User { name: "root", uid: 0, bin: lull_bin(), _bindir: None }
}

fn owner() -> Option<User> {
    let uid = id_of(OWNER)?;
    let perms = |m: u32| std::fs::Permissions::from_mode(m);
    let bindir = tempfile::tempdir().expect("bin dir");
    let bin = bindir.path().join("lull");
    std::fs::copy(lull_bin(), &bin).expect("copy lull");
    std::fs::set_permissions(bindir.path(), perms(0o755)).expect("chmod");
    std::fs::set_permissions(&bin, perms(0o755)).expect("chmod");
    Some(User { name: OWNER, uid, bin, _bindir: Some(bindir) })
}

/// A fresh home and runtime directory for `user`.
struct Home {
    dir: tempfile::TempDir,
}

impl Home {
    fn new(user: &User) -> Self {
        let dir = tempfile::tempdir().expect("home");
        for d in [dir.path().to_path_buf(), dir.path().join("run")] {
            std::fs::create_dir_all(&d).expect("mkdir");
            std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700)).expect("chmod");
            std::os::unix::fs::chown(&d, Some(user.uid), Some(user.uid)).expect("chown");
        }
        Self { dir }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    fn lull_dirs(&self) -> [PathBuf; 3] {
        [self.path(".config/lull"), self.path(".local/share/lull"), self.path("run/lull")]
    }

    /// `lull ARGS` as `user` in this home, with a clean environment (no cgroups: this is
    /// about files).
    fn command(&self, user: &User, args: &[&str]) -> Command {
        let mut c = if user.uid == 0 {
            Command::new(&user.bin)
        } else {
            let mut c = Command::new("/usr/sbin/runuser");
            // -m: keep the environment below (runuser would set HOME to the real one).
            c.args(["-m", "-u", user.name, "--"]).arg(&user.bin);
            c
        };
        c.args(args).env_clear().env("HOME", self.dir.path()).env("XDG_RUNTIME_DIR", self.path("run"));
        c.env("PATH", "/usr/bin:/bin").env("LULL_CGROUP", "none").env("LULL_INPUT", "terminal").current_dir(self.dir.path());
        c
    }

    fn run(&self, user: &User, args: &[&str]) -> Output {
        let out = self.command(user, args).stdin(Stdio::null()).output().expect("lull");
        assert!(
            out.status.success(),
            "lull {args:?} as {}: {}{}",
            user.name,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }

    /// Every file and directory under Lull's directories that group or others may use.
    fn too_open(&self, uid: u32) -> Vec<String> {
        let mut bad = Vec::new();
        let mut stack: Vec<PathBuf> = self.lull_dirs().into_iter().filter(|d| d.exists()).collect();
        while let Some(p) = stack.pop() {
            let m = std::fs::symlink_metadata(&p).expect("stat");
            if m.file_type().is_symlink() {
                continue;
            }
            if m.mode() & 0o077 != 0 || m.uid() != uid {
                bad.push(format!("{} {:o} uid {}", p.display(), m.mode() & 0o7777, m.uid()));
            }
            if m.is_dir() {
                stack.extend(std::fs::read_dir(&p).expect("list").flatten().map(|e| e.path()));
            }
        }
        bad
    }
}

/// The agent in the background until stopped (SIGTERM to the agent itself, whose pid its
/// status names).
struct Running(Child);

fn start_agent(home: &Home, user: &User) -> Running {
    let log = std::fs::File::create(home.dir.path().with_extension("agent.log")).expect("log");
    let child = home.command(user, &["agent"]).stdin(Stdio::null()).stdout(Stdio::null()).stderr(log).spawn().expect("lull agent");
    let deadline = Instant::now() + Duration::from_secs(30);
    let socket = home.path("run/lull/agent.sock");
    while !socket.exists() {
        assert!(Instant::now() < deadline, "the agent made no socket at {}", socket.display());
        std::thread::sleep(Duration::from_millis(50));
    }
    Running(child)
}

fn stop_agent(home: &Home, user: &User, mut agent: Running) {
    let status = home.run(user, &["status", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&status.stdout).expect("status JSON");
    let pid = v["pid"].as_i64().expect("pid") as i32;
    // SAFETY: signals the agent this test started.
    unsafe { libc::kill(pid, libc::SIGTERM) };
    let deadline = Instant::now() + Duration::from_secs(30);
    while agent.0.try_wait().expect("wait").is_none() {
        assert!(Instant::now() < deadline, "the agent did not stop");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Agent, settings written by `lull limits`, a pause and a resume, then every file of
/// Lull's checked.
fn exercise(home: &Home, user: &User) {
    let agent = start_agent(home, user);
    home.run(user, &["limits", "--interruptions", "7"]);
    home.run(user, &["pause", "1h"]);
    home.run(user, &["resume"]);
    stop_agent(home, user, agent);
    let config = std::fs::read_to_string(home.path(".config/lull/config.toml")).expect("lull limits wrote the config");
    assert!(config.contains("interruptions_per_day = 7"), "{config}");
    for f in [".local/share/lull/ledger.db", ".local/share/lull/agent.lock", ".local/share/lull/logs"] {
        assert!(home.path(f).exists(), "{f} written");
    }
    let bad = home.too_open(user.uid);
    assert!(bad.is_empty(), "as {}, readable by others (or not the user's): {bad:#?}", user.name);
}

/// An install an earlier version made: 0755 directories, 0644 files.
fn old_install(home: &Home, user: &User) {
    let perms = |m: u32| std::fs::Permissions::from_mode(m);
    for d in home.lull_dirs().iter().chain([&home.path(".local/share/lull/logs")]) {
        std::fs::create_dir_all(d).expect("mkdir");
    }
    let files = [".config/lull/config.toml", ".local/share/lull/coordinator.url", ".local/share/lull/logs/lull.2026-01-01.log"];
    for f in files {
        std::fs::write(home.path(f), "\n").expect("write");
    }
    for p in home.lull_dirs().iter().chain([&home.path(".local/share/lull/logs")]).chain(files.map(|f| home.path(f)).iter()) {
        let m = if p.is_dir() { 0o755 } else { 0o644 };
        std::fs::set_permissions(p, perms(m)).expect("chmod");
        std::os::unix::fs::chown(p, Some(user.uid), Some(user.uid)).expect("chown");
    }
    for d in [".config", ".local", ".local/share"] {
        std::os::unix::fs::chown(home.path(d), Some(user.uid), Some(user.uid)).expect("chown");
    }
    assert!(!home.too_open(user.uid).is_empty(), "the old install is readable by others");
}

fn tightened_in_log(home: &Home) -> bool {
    let logs = home.path(".local/share/lull/logs");
    std::fs::read_dir(logs)
        .expect("logs")
        .flatten()
        .any(|e| std::fs::read_to_string(e.path()).unwrap_or_default().contains("tightened Lull's files"))
}

fn check(user: &User) {
    let fresh = Home::new(user);
    exercise(&fresh, user);
    assert!(!tightened_in_log(&fresh), "a new install had nothing to tighten");
    let old = Home::new(user);
    old_install(&old, user);
    exercise(&old, user);
    assert!(tightened_in_log(&old), "the agent says what it tightened");
}

#[test]
fn every_file_lull_writes_is_private_as_root() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        assert!(!required("LULL_REQUIRE_CGROUPS"), "needs root");
        eprintln!("SKIPPED: run as root (it also runs the binaries as {OWNER})");
        return;
    }
    check(&root());
}

#[test]
fn every_file_lull_writes_is_private_as_the_owner() {
    // SAFETY: geteuid has no preconditions.
    let Some(user) = owner().filter(|_| unsafe { libc::geteuid() } == 0) else {
        assert!(!required("LULL_REQUIRE_CGROUPS"), "LULL_REQUIRE_CGROUPS=1 but there is no {OWNER} (ci/setup-guest.sh) or no root");
        eprintln!("SKIPPED: needs root and the {OWNER} user (ci/setup-guest.sh)");
        return;
    };
    check(&user);
}
