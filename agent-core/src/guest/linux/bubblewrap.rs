//! The guest's own view of the machine, built by bubblewrap (`bwrap`, Debian package
//! `bubblewrap`) in new user, PID, mount, IPC, UTS, cgroup and network namespaces. The
//! agent starts bwrap as the guest (after the cgroup join, rlimits, lowest priority and,
//! for a root agent, the switch to the guests' account: see [`super::spawn`]), so bwrap
//! and everything under it are the guest's.
//!
//! What the guest sees: the system directories read-only (`/usr`, `/etc`, `/bin`, `/sbin`,
//! `/lib*`, and `/sys/devices/system/cpu` for programs that count CPUs — not the rest of
//! `/sys`, whose cgroup and device names tell of the owner's programs), a `/proc` of its
//! own PID namespace (its own processes only), a minimal `/dev`, and its work directory
//! read-write at [`WORK_IN_VIEW`] (also its `HOME`), whose `tmp/` is its `/tmp` and
//! `TMPDIR`. Not `/home`, `/root`, `/run`, `/var`, `/tmp` or `/opt` of the host: the
//! owner's files, the agent's socket and data directory do not exist there. Its network
//! namespace has a loopback interface of its own and, only for outbound network, a
//! `slirp4netns` link that cannot reach the host's loopback ([`super::outbound`]). It has
//! no capabilities, cannot make user namespaces of its own, dies with the agent, and runs
//! in a new session (no controlling terminal). Its arguments reach bwrap through a memory
//! file (`--args`), so `/proc/1/cmdline` in the sandbox shows none of the host's paths;
//! its environment is bwrap's, never on a command line. The kernel still names the work
//! directory's source path in the guest's `/proc/self/mountinfo`; nothing under it is
//! reachable.

use crate::guest::GuestError;
use std::ffi::OsString;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::process::CommandExt;
use std::path::{Component, Path, PathBuf};
use std::process::{Command, Stdio};

/// The guest's work directory as it sees it (its `HOME`).
pub const WORK_IN_VIEW: &str = "/work";
/// Its temporary directory as it sees it (`TMPDIR`): its work directory's `tmp/`.
pub const TMP_IN_VIEW: &str = "/tmp";
/// The guest's default `PATH`.
pub const GUEST_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// System directories bound read-only (a symbolic link, as `/bin` → `usr/bin` on a merged
/// `/usr`, is recreated as the same link).
const SYSTEM_DIRS: &[&str] = &["/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"];
/// The one part of `/sys` a guest sees: CPU topology, for programs that count CPUs.
const SYS_CPU: &str = "/sys/devices/system/cpu";

/// Where bwrap reads its arguments (`--args`), and the resolver file for outbound network,
/// the start report (`--info-fd`) and the start gate (`--block-fd`) in bwrap's process.
pub const ARGS_FD: i32 = 3;
pub const RESOLV_FD: i32 = 4;
pub const INFO_FD: i32 = 5;
pub const BLOCK_FD: i32 = 6;

/// A usable bwrap.
#[derive(Clone, Debug)]
pub struct Bubblewrap {
    pub program: PathBuf,
    /// `bubblewrap 0.8.0`.
    pub version: String,
}

/// How one guest's sandbox is built.
pub struct Options<'a> {
    /// Its work directory on the host.
    pub work: &'a Path,
    /// A new session for the sandbox (with cgroups; without them the guest must stay in
    /// its process group, which the agent's own `setsid` already made sessionless).
    pub new_session: bool,
    /// Outbound network: the sandbox waits at [`BLOCK_FD`] for its link, reports its pid
    /// at [`INFO_FD`], and gets the resolver in [`RESOLV_FD`] as its `resolv.conf`.
    pub outbound: bool,
}

impl Bubblewrap {
    /// The bwrap on the agent's `PATH` (or `/usr/bin/bwrap`) with its version.
    pub fn find() -> Result<Self, String> {
        let program = which("bwrap").unwrap_or_else(|| PathBuf::from("/usr/bin/bwrap"));
        let out = Command::new(&program)
            .arg("--version")
            .output()
            .map_err(|e| format!("{} ({e}): install the Debian package bubblewrap", program.display()))?;
        let version = String::from_utf8_lossy(&out.stdout).trim().to_string();
        if !out.status.success() || version.is_empty() {
            return Err(format!("{} --version failed", program.display()));
        }
        Ok(Self { program, version })
    }

    /// Checks that a sandbox can be built here by the account guests run as (`None`: the
    /// agent's own): unprivileged user namespaces allowed, `/proc` mountable in one.
    pub fn probe(&self, account: Option<(u32, u32)>) -> Result<(), String> {
        let mut args = namespace_args(true);
        args.extend(system_args());
        args.extend(["--proc", "/proc", "--dev", "/dev", "--", "true"].map(OsString::from));
        let mut cmd = Command::new(&self.program);
        cmd.args(&args).env_clear().stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped());
        // SAFETY: the closure makes only async-signal-safe system calls.
        unsafe {
            cmd.pre_exec(move || {
                if let Some((uid, gid)) = account {
                    super::account::switch_to(uid, gid)?;
                }
                if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            })
        };
        let out = cmd.output().map_err(|e| format!("running {}: {e}", self.program.display()))?;
        if out.status.success() {
            return Ok(());
        }
        let why = String::from_utf8_lossy(&out.stderr).trim().to_string();
        Err(if why.is_empty() { format!("{} failed ({})", self.program.display(), out.status) } else { why })
    }

    /// bwrap's arguments for one guest, for its `--args` file (NUL-separated), and the
    /// command line it runs with: `bwrap --args 3 -- COMMAND ARGS…`.
    pub fn command_line(&self, opts: &Options, command: &str, args: &[String]) -> (Vec<u8>, Vec<OsString>) {
        let mut a = namespace_args(opts.new_session);
        a.extend(system_args());
        let work = opts.work.as_os_str().to_owned();
        let mut tmp = work.clone();
        tmp.push("/tmp");
        a.extend([
            "--proc".into(),
            "/proc".into(),
            "--dev".into(),
            "/dev".into(),
            "--bind".into(),
            work,
            WORK_IN_VIEW.into(),
            "--bind".into(),
            tmp,
            TMP_IN_VIEW.into(),
            "--dir".into(),
            "/var".into(),
            "--symlink".into(),
            "../tmp".into(),
            "/var/tmp".into(),
            "--chdir".into(),
            WORK_IN_VIEW.into(),
        ]);
        if opts.outbound {
            let resolv = resolv_conf_in_view();
            if let Some(dir) = resolv.parent().filter(|d| !under_system_dirs(d)) {
                a.extend(["--dir".into(), dir.as_os_str().to_owned()]);
            }
            a.extend(["--ro-bind-data".into(), RESOLV_FD.to_string().into(), resolv.into_os_string()]);
            a.extend(["--info-fd", &INFO_FD.to_string(), "--block-fd", &BLOCK_FD.to_string()].map(OsString::from));
        }
        // Last, once every mount point is made: nothing of the view but its work directory
        // (and /dev, in memory) is writable.
        a.extend(["--remount-ro", "/"].map(OsString::from));
        let mut file = Vec::new();
        for arg in a {
            file.extend_from_slice(arg.as_bytes());
            file.push(0);
        }
        let mut line: Vec<OsString> = ["--args", &ARGS_FD.to_string(), "--", command].map(OsString::from).to_vec();
        line.extend(args.iter().map(OsString::from));
        (file, line)
    }
}

/// The namespaces and the guest's powers: none beyond its own namespaces.
fn namespace_args(new_session: bool) -> Vec<OsString> {
    let mut a: Vec<OsString> = [
        "--unshare-user",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup",
        "--unshare-net",
        "--disable-userns",
        "--die-with-parent",
        "--cap-drop",
        "ALL",
        "--hostname",
        "lull-guest",
    ]
    .map(OsString::from)
    .to_vec();
    if new_session {
        a.push("--new-session".into());
    }
    a
}

/// The system directories, read-only, as on the host.
fn system_args() -> Vec<OsString> {
    let mut a: Vec<OsString> = Vec::new();
    for dir in SYSTEM_DIRS {
        match std::fs::symlink_metadata(dir) {
            Ok(m) if m.file_type().is_symlink() => {
                if let Ok(target) = std::fs::read_link(dir) {
                    a.extend(["--symlink".into(), target.into_os_string(), OsString::from(dir)]);
                }
            }
            Ok(m) if m.is_dir() => a.extend(["--ro-bind", dir, dir].map(OsString::from)),
            _ => {}
        }
    }
    a.extend(["--ro-bind-try", SYS_CPU, SYS_CPU].map(OsString::from));
    a
}

fn under_system_dirs(p: &Path) -> bool {
    SYSTEM_DIRS.iter().any(|d| p.starts_with(d))
}

/// Where `/etc/resolv.conf` leads (a link into `/run` on many desktops): outbound guests
/// get their own resolver file there, naming slirp4netns's DNS forwarder.
fn resolv_conf_in_view() -> PathBuf {
    let link = Path::new("/etc/resolv.conf");
    if let Ok(real) = std::fs::canonicalize(link) {
        return real;
    }
    match std::fs::read_link(link) {
        Ok(target) => normalize(&Path::new("/etc").join(target)),
        Err(_) => link.to_path_buf(),
    }
}

/// `path` with `.` and `..` resolved lexically.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    for c in path.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(n) => out.push(n),
            _ => {}
        }
    }
    out
}

/// A program on the agent's own `PATH`.
pub fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    std::env::split_paths(&path).map(|d| d.join(name)).find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Checks that the guest can find `command` in its view before anything is started: on
/// `path` (its `PATH`) when it has no slash, else at that path (relative to `cwd`, its
/// work directory as it sees it). `view` maps a path as the guest sees it to the host's,
/// `None` for what is not in its view.
pub fn find_program(command: &str, path: &str, cwd: &Path, view: impl Fn(&Path) -> Option<PathBuf>) -> Result<(), GuestError> {
    let not_found = |looked_in: String| GuestError::ProgramNotFound { program: command.to_string(), looked_in };
    if command.is_empty() {
        return Err(not_found("an empty program name".into()));
    }
    if command.contains('/') {
        let in_view = cwd.join(command);
        // In the work directory a link may lead anywhere in the view: its existence is
        // enough here (the exec itself happens inside the view).
        let found = view(&normalize(&in_view)).and_then(|host| std::fs::symlink_metadata(&host).ok());
        let Some(meta) = found else {
            return Err(not_found(format!("no such file at {} in the guest's view", normalize(&in_view).display())));
        };
        use std::os::unix::fs::PermissionsExt;
        let not_executable = |reason: &str| GuestError::NotExecutable { program: command.to_string(), reason: reason.into() };
        return if meta.is_dir() {
            Err(not_executable("is a directory"))
        } else if meta.is_file() && meta.permissions().mode() & 0o111 == 0 {
            Err(not_executable("permission denied"))
        } else {
            Ok(())
        };
    }
    let found = path.split(':').filter(|d| d.starts_with('/')).filter_map(|d| view(&Path::new(d).join(command))).any(|h| is_executable(&h));
    if found {
        Ok(())
    } else {
        Err(not_found(format!("not on the guest's PATH={path}")))
    }
}

/// The host path of `in_view` in a guest's namespace view whose work directory is `work`,
/// or `None` when the guest does not see it.
pub fn host_path(work: &Path, in_view: &Path) -> Option<PathBuf> {
    let in_view = normalize(in_view);
    if let Ok(rest) = in_view.strip_prefix(WORK_IN_VIEW) {
        return Some(work.join(rest));
    }
    if let Ok(rest) = in_view.strip_prefix(TMP_IN_VIEW) {
        return Some(work.join("tmp").join(rest));
    }
    (under_system_dirs(&in_view) || in_view.starts_with(SYS_CPU)).then_some(in_view)
}

/// A NUL-separated argument file back into arguments (for tests and diagnostics).
pub fn split_args(file: &[u8]) -> Vec<OsString> {
    file.split(|b| *b == 0).filter(|a| !a.is_empty()).map(|a| OsString::from_vec(a.to_vec())).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_view_holds_the_work_directory_and_system_directories_only() {
        let work = Path::new("/home/owner/.local/share/lull/guests/g1/work");
        assert_eq!(host_path(work, Path::new("/work/a/b")), Some(work.join("a/b")));
        assert_eq!(host_path(work, Path::new("/tmp/x")), Some(work.join("tmp/x")));
        assert_eq!(host_path(work, Path::new("/usr/bin/sh")), Some(PathBuf::from("/usr/bin/sh")));
        assert_eq!(host_path(work, Path::new("/work/../home/owner")), None, "no way out through ..");
        for outside in ["/home/owner/secret", "/root", "/run/user/1000/lull/agent.sock", "/var/lib/lull", "/sys/fs/cgroup", "/opt/x"] {
            assert_eq!(host_path(work, Path::new(outside)), None, "{outside}");
        }
    }

    #[test]
    fn programs_are_looked_up_as_the_guest_sees_them() {
        let dir = tempfile::tempdir().unwrap();
        let work = dir.path();
        let view = |p: &Path| host_path(work, p);
        let w = Path::new(WORK_IN_VIEW);
        find_program("sh", GUEST_PATH, w, view).expect("sh is in the view");
        let e = find_program("no-such-program-lull", GUEST_PATH, w, view).unwrap_err();
        assert!(e.to_string().starts_with("program not found: no-such-program-lull"), "{e}");
        // The agent's own PATH does not count: a directory outside the view is not searched.
        let e = find_program("sh", "/home/owner/bin:/opt/bin", w, view).unwrap_err();
        assert!(matches!(e, GuestError::ProgramNotFound { .. }), "{e}");
        // A path: relative to the work directory, absolute within the view only.
        std::fs::write(work.join("run.sh"), "echo hi\n").unwrap();
        let e = find_program("./run.sh", GUEST_PATH, w, view).unwrap_err();
        assert!(matches!(&e, GuestError::NotExecutable { reason, .. } if reason == "permission denied"), "without its x bit: {e}");
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(work.join("run.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
        find_program("./run.sh", GUEST_PATH, w, view).expect("in the work directory");
        find_program("/work/run.sh", GUEST_PATH, w, view).expect("the same file by its absolute name");
        find_program("/usr/bin/env", GUEST_PATH, w, view).expect("a system program");
        let e = find_program("/etc", GUEST_PATH, w, view).unwrap_err();
        assert!(matches!(&e, GuestError::NotExecutable { reason, .. } if reason == "is a directory"), "{e}");
        let secret = tempfile::NamedTempFile::new().unwrap();
        let e = find_program(&secret.path().display().to_string(), GUEST_PATH, w, view).unwrap_err();
        assert!(matches!(e, GuestError::ProgramNotFound { .. }), "a host file outside the view: {e}");
    }

    #[test]
    fn the_command_line_shows_no_host_path_and_the_argument_file_binds_the_work_directory() {
        let bw = Bubblewrap { program: "/usr/bin/bwrap".into(), version: "bubblewrap 0.8.0".into() };
        let work = Path::new("/home/owner/.local/share/lull/guests/g1/work");
        let (file, line) = bw.command_line(&Options { work, new_session: true, outbound: false }, "sh", &["-c".into(), "true".into()]);
        let line: Vec<String> = line.iter().map(|a| a.to_string_lossy().into_owned()).collect();
        assert_eq!(line, ["--args", "3", "--", "sh", "-c", "true"]);
        let args: Vec<String> = split_args(&file).iter().map(|a| a.to_string_lossy().into_owned()).collect();
        let joined = args.join(" ");
        for wanted in
            ["--unshare-user", "--unshare-pid", "--unshare-net", "--disable-userns", "--die-with-parent", "--new-session", "--cap-drop ALL"]
        {
            assert!(joined.contains(wanted), "{wanted} missing: {joined}");
        }
        assert!(joined.contains(&format!("--bind {} /work", work.display())), "{joined}");
        assert!(joined.contains(&format!("--bind {}/tmp /tmp", work.display())), "{joined}");
        assert!(joined.contains("--ro-bind /usr /usr") && joined.contains("--proc /proc") && joined.contains("--dev /dev"), "{joined}");
        for never in ["/home ", "/root", "/run", "/sys/fs"] {
            assert!(!joined.contains(never), "{never} in the view: {joined}");
        }
        assert!(!joined.contains("--info-fd"), "no start gate without outbound network");
        assert!(joined.ends_with("--remount-ro /"), "{joined}");
        let (file, _) = bw.command_line(&Options { work, new_session: false, outbound: true }, "sh", &[]);
        let joined = split_args(&file).iter().map(|a| a.to_string_lossy().into_owned()).collect::<Vec<_>>().join(" ");
        assert!(joined.contains("--info-fd 5 --block-fd 6") && joined.contains("--ro-bind-data 4"), "{joined}");
        assert!(joined.ends_with("--remount-ro /"), "{joined}");
        assert!(!joined.contains("--new-session"), "{joined}");
    }
}
