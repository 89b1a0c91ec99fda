//! The local control endpoint: a Unix socket readable by the owner only (mode 0600 in a
//! 0700 directory), speaking one JSON request and one JSON response per line.
//! `lull status|pause|resume|donate|limits` and the tray app use it. Each connecting
//! process is checked ([`refusal`]): it must run as the agent's user, in the agent's user
//! and PID namespaces, and outside the guests' cgroups — a guest, which runs as the owner
//! when the owner runs the agent, never commands it, even where it could reach the socket.

use crate::config::Config;
use crate::guest::{GuestInfo, GuestSpec};
use crate::ledger::{DayDonation, InterruptionRow, TransitionRow};
use crate::policy::{DonateSpan, PauseSpan, PolicyStatus};
use serde::{Deserialize, Serialize};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A request to the agent.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Request {
    Status,
    Pause {
        span: PauseSpan,
    },
    Resume,
    Donate {
        span: DonateSpan,
    },
    SetLimits {
        interruptions_per_day: u32,
    },
    GetConfig,
    /// Replaces the whole configuration (validated; saved to the config file).
    SetConfig {
        config: Box<Config>,
    },
    /// Today's timeline, interruptions and the last 7 days' donated time.
    Today,
    /// The names of the programs running now, for picking `rules.exclusive_programs`.
    RunningPrograms,
    /// Queue one guest job (`lull run` beside a running agent). With `donate_now`, the
    /// machine is offered until the owner returns for as long as this job lasts: the offer
    /// is never saved and ends with the job (an owner's own command replaces it).
    RunJob {
        spec: Box<GuestSpec>,
        #[serde(default)]
        donate_now: bool,
    },
    /// A snapshot of one guest this agent started.
    Guest {
        id: String,
    },
    /// Stop one guest as an eviction would (checkpoint signal and grace if it has one).
    StopGuest {
        id: String,
    },
}

/// The agent's status for the owner.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct AgentStatus {
    #[serde(flatten)]
    pub policy: PolicyStatus,
    pub donated_cpu_s_today: f64,
    pub donated_wall_s_today: f64,
    /// The part of today's donated CPU given while the owner was present (lingering, or
    /// lent while light).
    #[serde(default)]
    pub donated_present_cpu_s_today: f64,
    /// Input backends in use, with what each cannot see.
    pub input_backends: Vec<String>,
    pub guest_runtime: String,
    pub agent_version: String,
    pub pid: u32,
    /// The agent's local wall-clock time, `YYYY-MM-DDTHH:MM:SS`.
    pub local_time: String,
    /// Input backends that have stopped (name: why); the agent runs on without them.
    #[serde(default)]
    pub input_stopped: Vec<String>,
    /// The coordinator this agent is linked to, if enrolled.
    #[serde(default)]
    pub coordinator: Option<CoordinatorLink>,
    /// The owner's recent CPU readings, for the coordinator link's heartbeats.
    #[serde(default)]
    #[cfg_attr(feature = "ts", ts(skip))]
    pub owner_load: crate::owner_load::OwnerLoadLog,
    /// The guests' memory, read when the status is asked for: the coordinator link sends
    /// it with each heartbeat for memory-centric placement (seed 001).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ts", ts(skip))]
    pub guest_memory: Option<crate::guest::GuestsMemory>,
    /// How the owner's memory is kept warm (protection while guests run, the last
    /// restore after an eviction); `None` without a guest runtime.
    #[serde(default)]
    pub owner_memory: Option<crate::guest::OwnerMemoryStatus>,
    /// How guests are contained and what they lack; `None` without a guest runtime.
    #[serde(default)]
    pub containment: Option<crate::guest::ContainmentStatus>,
    /// What the owner should know about the agent's own books and link (its ledger
    /// recovered or damaged, a write that failed, the coordinator refusing this
    /// machine's credential), each once; empty when all is in order.
    #[serde(default)]
    pub alerts: Vec<Alert>,
    /// The owner's last returns (input after >= 1 s of silence, or input the fast path froze
    /// the guests on): when each reached the agent's input thread and when the freeze was
    /// written. What lets an outside measurement of the owner's return say where its time
    /// went. Times only, never the gaps within typing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "ts", ts(skip))]
    pub input_timings: Vec<crate::input::InputTiming>,
}

/// Something about the agent itself the owner should know, with what to do.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct Alert {
    pub kind: AlertKind,
    /// What happened, in the owner's words.
    pub message: String,
    /// What to do about it, if anything.
    pub action: Option<String>,
}

/// The kinds of [`Alert`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "snake_case")]
pub enum AlertKind {
    /// The ledger was missing, truncated or damaged at start: today's count was
    /// recovered from what survived (or the day counts as used up).
    LedgerRecovered,
    /// Today's record beside the ledger was missing or damaged, and rebuilt from the
    /// intact ledger (the count is whole).
    RecordRebuilt,
    /// The background integrity check found the running ledger damaged.
    LedgerDamaged,
    /// An interruption could not be written to the ledger.
    LedgerWriteFailed,
    /// The coordinator refuses this machine's credential (401).
    CredentialRefused,
}

/// The coordinator an agent is linked to (never its secret).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct CoordinatorLink {
    pub url: String,
    pub agent_id: String,
    /// The machine's name as enrolled (what `lull machines` and the dashboard call it),
    /// when its credentials keep it.
    #[serde(default)]
    pub machine: Option<String>,
}

/// Today's record for the status window.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct TodayReport {
    pub day: chrono::NaiveDate,
    pub timeline: Vec<TransitionRow>,
    pub interruptions: Vec<InterruptionRow>,
    pub donated_days: Vec<DayDonation>,
}

/// The agent's answer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Response {
    Status(Box<AgentStatus>),
    Config {
        config: Box<Config>,
    },
    Today(Box<TodayReport>),
    Guest(Box<GuestInfo>),
    /// The names of the running programs (sorted, each once; no paths or arguments).
    Programs {
        names: Vec<String>,
    },
    Error {
        message: String,
    },
}

/// A client-side failure.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    #[error("no Lull agent is listening on {0} (start one with `lull agent`)")]
    NotRunning(PathBuf),
    #[error("control socket {path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("the agent{} on {} did not answer within 10 s (is it stopped or stuck?)", pid.map(|p| format!(" (pid {p})")).unwrap_or_default(), path.display())]
    NoAnswer { path: PathBuf, pid: Option<u32> },
    #[error("the agent sent an answer this client does not understand: {0}")]
    Protocol(String),
    #[error("{0}")]
    Refused(String),
}

/// Sends one request and waits for the answer (blocking; for the CLI and tests).
pub fn call(socket: &Path, req: &Request) -> Result<Response, ControlError> {
    let io = |source| ControlError::Io { path: socket.to_path_buf(), source };
    let mut line = serde_json::to_string(req).map_err(|e| ControlError::Protocol(e.to_string()))?;
    line.push('\n');
    if line.len() > MAX_REQUEST_BYTES {
        return Err(ControlError::Refused(too_large(line.len())));
    }
    let mut stream = crate::sys::ipc::connect(socket).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused => ControlError::NotRunning(socket.to_path_buf()),
        _ => io(e),
    })?;
    stream.set_read_timeout(Some(Duration::from_secs(10))).map_err(io)?;
    stream.write_all(line.as_bytes()).map_err(io)?;
    let mut answer = String::new();
    BufReader::new(&stream).read_line(&mut answer).map_err(|e| match e.kind() {
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
            ControlError::NoAnswer { path: socket.to_path_buf(), pid: crate::sys::ipc::peer_pid(&stream) }
        }
        _ => io(e),
    })?;
    let resp: Response = serde_json::from_str(&answer).map_err(|e| ControlError::Protocol(format!("{e}: {answer:?}")))?;
    match resp {
        Response::Error { message } => Err(ControlError::Refused(message)),
        r => Ok(r),
    }
}

/// Creates the socket's directory (0700) and binds the listener (0600), replacing a
/// stale socket left by a crashed agent but refusing to steal a live one.
pub fn bind(socket: &Path) -> std::io::Result<crate::sys::ipc::Listener> {
    if let Some(dir) = socket.parent() {
        if !dir.exists() {
            crate::private_files::create_dir(dir)?;
            crate::sys::fs::set_mode(dir, 0o700)?;
        }
    }
    if let Ok(meta) = std::fs::symlink_metadata(socket) {
        if !crate::sys::fs::is_socket(&meta) {
            // Not ours to delete: the owner's file (or a link) sits where the socket goes.
            return Err(std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                "something that is not a socket is in the way (move it, or set LULL_SOCKET)",
            ));
        }
        if crate::sys::ipc::connect(socket).is_ok() {
            let pid = match call(socket, &Request::Status) {
                Ok(Response::Status(s)) => format!(" (pid {})", s.pid),
                _ => String::new(),
            };
            return Err(std::io::Error::new(std::io::ErrorKind::AddrInUse, format!("another Lull agent{pid} is already listening here")));
        }
        std::fs::remove_file(socket)?;
    }
    // Never briefly world-accessible.
    crate::sys::ipc::bind_owner_only(socket)
}

/// What the control socket knows of guests, to refuse them.
#[derive(Clone, Debug, Default)]
pub struct PeerRules {
    /// The guests' cgroup as `/proc/PID/cgroup` names it (a process in it or below is a
    /// guest); `None` without cgroups.
    pub guest_cgroup: Option<String>,
}

/// Why the process at the other end of `stream` may not use the control socket, or `None`.
pub fn refused_peer(conn: &crate::sys::ipc::Connection, rules: &PeerRules) -> Option<String> {
    match crate::sys::ipc::peer(conn) {
        Ok(p) => refusal(p.uid, p.pid, rules),
        Err(e) => Some(format!("its credentials are unreadable ({e})")),
    }
}

/// Why a process (its uid and pid as `SO_PEERCRED` gives them) may not use the control
/// socket, or `None`: another user; no pid (it sits in a PID namespace the agent cannot
/// see into); another user or PID namespace than the agent's (a guest's sandbox); a
/// cgroup under the guests'; or namespaces that cannot be read.
pub fn refusal(uid: u32, pid: Option<i32>, rules: &PeerRules) -> Option<String> {
    let me = crate::sys::id::uid();
    if uid != me {
        return Some(format!("another user (uid {uid})"));
    }
    let Some(pid) = pid.filter(|p| *p > 0) else { return Some("a process of another PID namespace".into()) };
    if pid as u32 == std::process::id() {
        return None;
    }
    for ns in ["user", "pid"] {
        match crate::sys::procfs::in_other_namespace(pid, ns) {
            Ok(false) => {}
            Ok(true) => return Some(format!("pid {pid}, in a {ns} namespace of its own (a guest's sandbox)")),
            Err(e) => return Some(format!("pid {pid}, whose {ns} namespace is unreadable ({e})")),
        }
    }
    if let Some(guests) = rules.guest_cgroup.as_deref().filter(|g| !g.is_empty()) {
        let inside = crate::sys::procfs::cgroups_of(pid)
            .iter()
            .any(|path| path.strip_prefix(guests).is_some_and(|rest| rest.is_empty() || rest.starts_with('/')));
        if inside {
            return Some(format!("pid {pid}, inside the guests' cgroup {guests}"));
        }
    }
    None
}

/// Largest request line accepted, newline included (a full configuration fits easily).
pub const MAX_REQUEST_BYTES: usize = 64 * 1024;

/// Why a request over [`MAX_REQUEST_BYTES`] is refused.
pub fn too_large(bytes: usize) -> String {
    format!("request refused: {bytes} bytes or more, over the control socket's limit of {MAX_REQUEST_BYTES} bytes (64 KiB) for one request")
}

/// Reads one request line of at most [`MAX_REQUEST_BYTES`] from the agent's side of a
/// connection: the request, or the answer that refuses it (too large, unreadable, not
/// a request).
pub async fn read_request<R: tokio::io::AsyncRead + Unpin>(rd: &mut R) -> Result<Request, String> {
    use tokio::io::{AsyncBufReadExt, AsyncReadExt};
    let mut line = Vec::new();
    let mut reader = tokio::io::BufReader::new(rd.take(MAX_REQUEST_BYTES as u64 + 1));
    reader.read_until(b'\n', &mut line).await.map_err(|e| format!("unreadable request: {e}"))?;
    if line.len() > MAX_REQUEST_BYTES {
        return Err(too_large(line.len()));
    }
    serde_json::from_slice::<Request>(&line).map_err(|e| format!("malformed request: {e}"))
}

/// After a refused request has been answered: reads what the client is still sending
/// (at most 16 MiB, for at most 2 s) and drops it, so the client reads the refusal
/// rather than a connection reset.
pub async fn discard_rest<R: tokio::io::AsyncRead + Unpin>(rd: &mut R) {
    use tokio::io::AsyncReadExt;
    let mut rest = rd.take(16 << 20);
    let _ = tokio::time::timeout(Duration::from_secs(2), tokio::io::copy(&mut rest, &mut tokio::io::sink())).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wait_for_ns_change(pid: u32) {
        // `unshare` enters its namespace and then execs: wait until it has.
        let ours = std::fs::read_link("/proc/self/ns/user").unwrap();
        for _ in 0..500 {
            if std::fs::read_link(format!("/proc/{pid}/ns/user")).is_ok_and(|l| l != ours) {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!("pid {pid} never entered a user namespace of its own");
    }

    #[test]
    fn guests_and_other_users_are_refused_the_owner_is_not() {
        // SAFETY: getuid has no preconditions.
        let me = unsafe { libc::getuid() };
        let rules = PeerRules::default();
        assert_eq!(refusal(me, Some(std::process::id() as i32), &rules), None, "the agent itself");
        assert!(refusal(me + 1, Some(std::process::id() as i32), &rules).is_some_and(|w| w.contains("another user")));
        assert!(refusal(me, None, &rules).is_some(), "a peer without a pid here is in another PID namespace");

        // An ordinary process of the owner's (lull status, the tray's windows) is let in.
        let mut plain = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        let plain_pid = plain.id() as i32;
        assert_eq!(refusal(me, Some(plain_pid), &rules), None);
        // The same process inside the guests' cgroup is refused.
        let own = std::fs::read_to_string(format!("/proc/{plain_pid}/cgroup")).unwrap();
        let cg = own.lines().find_map(|l| l.strip_prefix("0::")).unwrap_or("/").to_string();
        if cg != "/" {
            let guests = PeerRules { guest_cgroup: Some(cg.clone()) };
            assert!(refusal(me, Some(plain_pid), &guests).is_some_and(|w| w.contains("guests' cgroup")), "{cg}");
            let sibling = PeerRules { guest_cgroup: Some(format!("{cg}-other")) };
            assert_eq!(refusal(me, Some(plain_pid), &sibling), None, "a cgroup whose name only begins the same is not inside");
        }
        let _ = plain.kill();
        let _ = plain.wait();

        // A process in a user namespace of its own (a guest's sandbox) is refused.
        let mut sandboxed = match std::process::Command::new("unshare").args(["--user", "--map-current-user", "sleep", "30"]).spawn() {
            Ok(c) => c,
            Err(e) => {
                eprintln!("SKIPPED the user-namespace half: unshare: {e}");
                return;
            }
        };
        wait_for_ns_change(sandboxed.id());
        let why = refusal(me, Some(sandboxed.id() as i32), &rules);
        let _ = sandboxed.kill();
        let _ = sandboxed.wait();
        assert!(why.as_deref().is_some_and(|w| w.contains("user namespace of its own")), "{why:?}");
    }

    #[tokio::test]
    async fn a_request_over_the_limit_is_refused_naming_the_limit() {
        let ok = format!("{}\n", serde_json::to_string(&Request::Status).expect("json"));
        assert_eq!(read_request(&mut ok.as_bytes()).await, Ok(Request::Status));
        // A whole configuration fits; 64 KiB and one byte of anything does not.
        let config = format!("{}\n", serde_json::to_string(&Request::SetConfig { config: Box::default() }).expect("json"));
        assert!(config.len() < MAX_REQUEST_BYTES && read_request(&mut config.as_bytes()).await.is_ok());
        let big = format!("{{\"op\":\"status\",\"pad\":\"{}\"}}\n", "x".repeat(MAX_REQUEST_BYTES));
        let e = read_request(&mut big.as_bytes()).await.expect_err("too large");
        assert!(e.contains("65536 bytes") && e.contains("refused"), "{e}");
        // Endless input without a newline is cut at the limit, not read on.
        let e = read_request(&mut tokio::io::repeat(b'x')).await.expect_err("endless");
        assert!(e.contains("over the control socket's limit"), "{e}");
        let e = read_request(&mut "{not json}\n".as_bytes()).await.expect_err("malformed");
        assert!(e.starts_with("malformed request"), "{e}");
    }

    #[test]
    fn the_client_refuses_to_send_a_request_over_the_limit() {
        let mut config = Config::default();
        config.rules.exclusive_programs = vec!["x".repeat(4000); 20];
        let e = call(Path::new("/nonexistent/agent.sock"), &Request::SetConfig { config: Box::new(config) }).expect_err("refused");
        assert!(matches!(&e, ControlError::Refused(m) if m.contains("64 KiB")), "{e}");
    }
}
