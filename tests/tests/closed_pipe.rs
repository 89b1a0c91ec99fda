//! Every `lull` command ends quietly when its reader has gone (`lull status --json | head
//! -c 1`): exit status 0, no panic, no backtrace, and nothing said twice. The pipe's read
//! end is closed before the command starts, so its first write fails with EPIPE every
//! time, not only when the reader wins a race.

use lull_e2e::{bench_bin, Agent};
use std::process::{Command, Stdio};

/// Runs `cmd` with stdout on a pipe whose reader is already closed; returns (exit code, stderr).
fn with_closed_stdout(mut cmd: Command) -> (Option<i32>, String) {
    let mut fds = [0; 2];
    // SAFETY: `fds` is a valid array of two ints for pipe(2) to fill.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0, "pipe");
    // SAFETY: both fds were just returned by pipe(2) and are owned here alone.
    let (read, write) = unsafe {
        use std::os::fd::FromRawFd;
        (std::fs::File::from_raw_fd(fds[0]), std::fs::File::from_raw_fd(fds[1]))
    };
    drop(read);
    let out = cmd.stdout(Stdio::from(write)).stderr(Stdio::piped()).output().expect("run lull");
    (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn every_command_ends_quietly_on_a_closed_pipe() {
    let mut a = Agent::new("[sampling]\ninterval_ms = 200\n");
    a.start();
    let commands: &[&[&str]] = &[
        &["--help"],
        &["--version"],
        &["status"],
        &["status", "--json"],
        &["pause", "1h"],
        &["pause", "1h", "--json"],
        &["resume"],
        &["resume", "--json"],
        &["donate", "2h"],
        &["donate", "2h", "--json"],
        &["resume"],
        &["limits", "--interruptions", "4"],
        &["limits", "--interruptions", "4", "--json"],
        &["coordinator", "--help"],
    ];
    for args in commands {
        let (code, stderr) = with_closed_stdout(a.lull(args));
        assert_eq!(code, Some(0), "lull {args:?} on a closed pipe: {stderr}");
        assert!(!stderr.contains("panicked") && !stderr.contains("Broken pipe"), "lull {args:?}: {stderr}");
    }
    // The commands that changed something did so before their output was lost.
    assert_eq!(a.status().policy.interruption_limit, 4);
    // The agent itself is unharmed.
    assert!(a.try_status().is_some());
}

/// `lull run … 2>&1 | head -c 1`: stdout and stderr both on a pipe whose reader is gone.
/// The job still runs to its end, its exit code comes back, and the agent `lull run`
/// started cleans up (its socket removed) instead of dying on a failed stderr write.
#[test]
fn lull_run_with_stdout_and_stderr_closed_runs_its_job_to_the_end() {
    let a = Agent::new("[sampling]\ninterval_ms = 200\n");
    let mut fds = [0; 2];
    // SAFETY: `fds` is a valid array of two ints for pipe(2) to fill.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0, "pipe");
    // SAFETY: both fds were just returned by pipe(2) and are owned here alone.
    let (read, write) = unsafe {
        use std::os::fd::FromRawFd;
        (std::fs::File::from_raw_fd(fds[0]), std::fs::File::from_raw_fd(fds[1]))
    };
    drop(read);
    let job = "echo one; echo two >&2; sleep 0.3; echo done > done.txt";
    let mut cmd = a.lull(&["run", "--now", "--", "sh", "-c", job]);
    let status = cmd.stdout(Stdio::from(write.try_clone().expect("dup"))).stderr(Stdio::from(write)).status().expect("lull run");
    assert_eq!(status.code(), Some(0), "the job's exit code");
    let work = lull_e2e::guest_workdirs(&lull_e2e::work_root_of(&a.dir)).pop().expect("the guest's work directory");
    assert_eq!(std::fs::read_to_string(work.join("done.txt")).unwrap_or_default().trim(), "done", "the job ran to its end");
    assert!(!a.socket().exists(), "lull run's agent did not clean up");
}

/// `lull-bench`'s help on a closed pipe ends quietly too (it prints as `lull` does).
#[test]
fn lull_bench_help_ends_quietly_on_a_closed_pipe() {
    for args in [&["--help"][..], &["placements", "--help"][..]] {
        let mut cmd = Command::new(bench_bin());
        cmd.args(args);
        let (code, stderr) = with_closed_stdout(cmd);
        assert_eq!(code, Some(0), "lull-bench {args:?} on a closed pipe: {stderr}");
        assert!(!stderr.contains("panicked") && !stderr.contains("Broken pipe"), "lull-bench {args:?}: {stderr}");
    }
}
