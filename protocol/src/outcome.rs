//! How a task's guest ended, as its agent saw it ([`TaskOutcome`]), and how the
//! coordinator, the CLI and the dashboard say it: an exit code, a signal's name, or why
//! the program never ran ("program not found: NAME"). One type, so an exec failure, an
//! exit code and a signal travel the same way from the guest runtime to `lull jobs`.

use serde::{Deserialize, Serialize};

/// How a guest ended. The agent sends it with a completion (agents since job outcomes;
/// older agents send only `exit_code`). Only [`TaskOutcome::Exited`] with code 0 is a
/// success: every other outcome fails the task for good (no retry: running it again
/// would end the same way), unlike a lost lease, which is retried.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum TaskOutcome {
    /// The program ran and exited with `code`.
    Exited { code: i32 },
    /// A signal ended the program (`signal` is its number; [`signal_name`] names it).
    Signalled { signal: i32 },
    /// A file the guest wrote grew past its size limit (RLIMIT_FSIZE: the agent's
    /// `[guests] disk_mib`), and the kernel's SIGXFSZ ended it.
    FileSizeLimit,
    /// The program does not exist on that machine (exec failed with ENOENT).
    ProgramNotFound { program: String },
    /// The program exists but could not be executed (permission, format).
    NotExecutable { program: String, error: String },
    /// The guest's sandbox or account refused to start it.
    SandboxRefused { error: String },
    /// The guest could not be started for another reason (its work directory, cgroup…).
    StartFailed { error: String },
    /// Its agent stopped it at one of the guest's limits (its work directory over the disk
    /// limit, its output cut at the output limit): `error` says which.
    Stopped { error: String },
}

/// The longest `error` or `program` text an outcome may carry (bytes).
pub const OUTCOME_TEXT_MAX: usize = 4096;

impl TaskOutcome {
    /// Whether the task succeeded: exited with code 0.
    pub fn succeeded(&self) -> bool {
        matches!(self, TaskOutcome::Exited { code: 0 })
    }

    /// The exit code, when the program exited.
    pub fn exit_code(&self) -> Option<i32> {
        match self {
            TaskOutcome::Exited { code } => Some(*code),
            _ => None,
        }
    }

    /// The signal's name when a signal ended it (`SIGXFSZ` for the file size limit).
    pub fn signal(&self) -> Option<String> {
        match self {
            TaskOutcome::Signalled { signal } => Some(signal_name(*signal)),
            TaskOutcome::FileSizeLimit => Some("SIGXFSZ".into()),
            _ => None,
        }
    }

    /// The code a shell (and `lull run`) gives it: the exit code, 128 + the signal, 127
    /// for a program not found, 126 for one that cannot be executed, was refused or was
    /// stopped at a limit by its agent.
    pub fn shell_code(&self) -> i32 {
        match self {
            TaskOutcome::Exited { code } => *code,
            TaskOutcome::Signalled { signal } => 128 + signal,
            TaskOutcome::FileSizeLimit => 128 + SIGXFSZ,
            TaskOutcome::ProgramNotFound { .. } => 127,
            TaskOutcome::NotExecutable { .. }
            | TaskOutcome::SandboxRefused { .. }
            | TaskOutcome::StartFailed { .. }
            | TaskOutcome::Stopped { .. } => 126,
        }
    }

    /// From an exit status: the code if it exited, else the signal (SIGXFSZ is the file
    /// size limit); `None` when neither is known.
    pub fn from_status(code: Option<i32>, signal: Option<i32>) -> Option<TaskOutcome> {
        match (code, signal) {
            (Some(code), _) => Some(TaskOutcome::Exited { code }),
            (None, Some(SIGXFSZ)) => Some(TaskOutcome::FileSizeLimit),
            (None, Some(signal)) => Some(TaskOutcome::Signalled { signal }),
            (None, None) => None,
        }
    }

    /// What an older agent's bare exit code says: 0 and other codes as exits, and -1
    /// (the code old agents sent for a guest that never started) as a start failure.
    pub fn from_legacy_code(code: i32) -> TaskOutcome {
        if code == -1 {
            TaskOutcome::StartFailed {
                error: "its agent sent no reason (an agent older than job outcomes; often a program not found)".into(),
            }
        } else {
            TaskOutcome::Exited { code }
        }
    }

    /// Why, in words: "exit code 3", "killed by SIGKILL", "program not found: NAME".
    pub fn describe(&self) -> String {
        match self {
            TaskOutcome::Exited { code } => format!("exit code {code}"),
            TaskOutcome::Signalled { signal } => format!("killed by {}", signal_name(*signal)),
            TaskOutcome::FileSizeLimit => "file size limit reached (SIGXFSZ)".into(),
            TaskOutcome::ProgramNotFound { program } => format!("program not found: {program}"),
            TaskOutcome::NotExecutable { program, error } => format!("program not executable: {program} ({error})"),
            TaskOutcome::SandboxRefused { error } => format!("sandbox refused the guest: {error}"),
            TaskOutcome::StartFailed { error } => format!("guest could not be started: {error}"),
            TaskOutcome::Stopped { error } => format!("stopped by its agent: {error}"),
        }
    }

    /// The texts it carries, for the coordinator's length checks.
    pub fn texts(&self) -> Vec<&str> {
        match self {
            TaskOutcome::ProgramNotFound { program } => vec![program],
            TaskOutcome::NotExecutable { program, error } => vec![program, error],
            TaskOutcome::SandboxRefused { error } | TaskOutcome::StartFailed { error } | TaskOutcome::Stopped { error } => vec![error],
            _ => Vec::new(),
        }
    }
}

/// SIGXFSZ on Linux: a file grew past RLIMIT_FSIZE (a guest's file size limit).
pub const SIGXFSZ: i32 = 25;

/// A Linux signal's name (`SIGKILL`), or `signal N` for one without a name here.
pub fn signal_name(signal: i32) -> String {
    const NAMES: [&str; 31] = [
        "SIGHUP",
        "SIGINT",
        "SIGQUIT",
        "SIGILL",
        "SIGTRAP",
        "SIGABRT",
        "SIGBUS",
        "SIGFPE",
        "SIGKILL",
        "SIGUSR1",
        "SIGSEGV",
        "SIGUSR2",
        "SIGPIPE",
        "SIGALRM",
        "SIGTERM",
        "SIGSTKFLT",
        "SIGCHLD",
        "SIGCONT",
        "SIGSTOP",
        "SIGTSTP",
        "SIGTTIN",
        "SIGTTOU",
        "SIGURG",
        "SIGXCPU",
        "SIGXFSZ",
        "SIGVTALRM",
        "SIGPROF",
        "SIGWINCH",
        "SIGIO",
        "SIGPWR",
        "SIGSYS",
    ];
    usize::try_from(signal)
        .ok()
        .and_then(|s| s.checked_sub(1))
        .and_then(|i| NAMES.get(i))
        .map_or_else(|| format!("signal {signal}"), |n| n.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_exit_zero_succeeds_and_each_outcome_says_why() {
        assert!(TaskOutcome::Exited { code: 0 }.succeeded());
        let cases = [
            (TaskOutcome::Exited { code: 3 }, "exit code 3", 3, None),
            (TaskOutcome::Signalled { signal: 9 }, "killed by SIGKILL", 137, Some("SIGKILL")),
            (TaskOutcome::FileSizeLimit, "file size limit reached (SIGXFSZ)", 153, Some("SIGXFSZ")),
            (TaskOutcome::Stopped { error: "output limit".into() }, "stopped by its agent: output limit", 126, None),
            (TaskOutcome::ProgramNotFound { program: "nosuch".into() }, "program not found: nosuch", 127, None),
            (
                TaskOutcome::NotExecutable { program: "./x".into(), error: "permission denied".into() },
                "program not executable: ./x (permission denied)",
                126,
                None,
            ),
        ];
        for (o, words, code, signal) in cases {
            assert!(!o.succeeded(), "{o:?}");
            assert_eq!((o.describe().as_str(), o.shell_code(), o.signal().as_deref()), (words, code, signal));
        }
    }

    #[test]
    fn statuses_and_legacy_codes_map_to_outcomes() {
        assert_eq!(TaskOutcome::from_status(Some(1), None), Some(TaskOutcome::Exited { code: 1 }));
        assert_eq!(TaskOutcome::from_status(None, Some(15)), Some(TaskOutcome::Signalled { signal: 15 }));
        assert_eq!(TaskOutcome::from_status(None, Some(SIGXFSZ)), Some(TaskOutcome::FileSizeLimit));
        assert_eq!(TaskOutcome::from_status(None, None), None);
        assert!(matches!(TaskOutcome::from_legacy_code(-1), TaskOutcome::StartFailed { .. }));
        assert_eq!(TaskOutcome::from_legacy_code(2), TaskOutcome::Exited { code: 2 });
        assert_eq!((signal_name(31), signal_name(64), signal_name(0)), ("SIGSYS".into(), "signal 64".into(), "signal 0".into()));
    }

    #[test]
    fn the_wire_form_is_tagged_by_kind() {
        let o = TaskOutcome::ProgramNotFound { program: "nosuch".into() };
        assert_eq!(serde_json::to_string(&o).unwrap(), r#"{"kind":"program_not_found","program":"nosuch"}"#);
        assert_eq!(serde_json::to_string(&TaskOutcome::Exited { code: 0 }).unwrap(), r#"{"kind":"exited","code":0}"#);
        assert!(serde_json::from_str::<TaskOutcome>(r#"{"kind":"exited","code":0,"x":1}"#).is_err());
        assert!(serde_json::from_str::<TaskOutcome>(r#"{"kind":"vanished"}"#).is_err());
    }
}
