//! Every command and subcommand of the real `lull` binary, found from its own `--help`,
//! given generated bad arguments: an unknown flag, and for each option that takes a value
//! a negative number, a number past every integer type, text with an emoji, and nothing.
//! None may panic; each refusal exits non-zero with one line naming what was wrong. A
//! value the command accepts (free text, say) may run the command: it runs in a throw-away
//! HOME with no agent and an unreachable coordinator, and is stopped after a few seconds.

use lull_e2e::lull_bin;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const BAD_VALUES: &[&str] = &["-1", "99999999999999999999", "not a value 🙂", ""];

fn env_command(home: &Path, args: &[String]) -> Command {
    let mut c = Command::new(lull_bin());
    // Run inside the throw-away HOME: an accepted value may be a relative path (a
    // database named "-1"), which must land there and not in the source tree.
    c.args(args)
        .current_dir(home)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("XDG_RUNTIME_DIR", home.join("run"))
        .env("LULL_CGROUP", "none")
        .env("LULL_COORDINATOR_URL", "http://127.0.0.1:9")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    c
}

fn help(home: &Path, path: &[String]) -> String {
    let mut args = path.to_vec();
    args.push("--help".into());
    let out = env_command(home, &args).stdout(Stdio::piped()).output().expect("lull --help");
    assert!(out.status.success(), "lull {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The lines of one section of clap's help (`Commands:`, `Options:`).
fn section<'a>(help: &'a str, name: &str) -> Vec<&'a str> {
    help.lines().skip_while(|l| l.trim() != name).skip(1).take_while(|l| !l.trim().is_empty()).collect()
}

fn subcommands(help: &str) -> Vec<String> {
    section(help, "Commands:").iter().filter_map(|l| l.split_whitespace().next()).filter(|c| *c != "help").map(str::to_owned).collect()
}

/// Long options that take a value.
fn value_options(help: &str) -> Vec<String> {
    section(help, "Options:")
        .iter()
        .filter_map(|l| {
            let t = l.trim_start();
            let t = if t.starts_with("-") && !t.starts_with("--") { t.split_once(", ").map(|x| x.1)? } else { t };
            let mut words = t.split_whitespace();
            let flag = words.next()?.strip_prefix("--")?;
            words.next().filter(|w| w.starts_with('<')).map(|_| format!("--{flag}"))
        })
        .collect()
}

/// Runs one invocation; `None` when it was still running after `limit` (accepted).
fn attempt(home: &Path, args: &[String], limit: Duration) -> Option<(i32, String)> {
    let mut child = env_command(home, args).spawn().expect("spawn lull");
    let t0 = Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            let mut err = String::new();
            std::io::Read::read_to_string(child.stderr.as_mut().expect("stderr"), &mut err).expect("read stderr");
            return Some((status.code().unwrap_or(128), err));
        }
        if t0.elapsed() > limit {
            // SAFETY: ends the command we spawned, as Ctrl-C would.
            unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn every_command_refuses_bad_arguments_in_one_line_without_panicking() {
    let home = tempfile::tempdir().expect("home");
    std::fs::create_dir_all(home.path().join("run")).expect("run dir");
    let mut todo: Vec<Vec<String>> = vec![Vec::new()];
    let mut commands = Vec::new();
    while let Some(path) = todo.pop() {
        let h = help(home.path(), &path);
        for sub in subcommands(&h) {
            let mut p = path.clone();
            p.push(sub);
            todo.push(p);
        }
        commands.push((path, h));
    }
    assert!(
        commands.len() >= 20,
        "found only {} commands: {:?}",
        commands.len(),
        commands.iter().map(|c| c.0.join(" ")).collect::<Vec<_>>()
    );
    let mut problems = Vec::new();
    let mut tried = 0;
    for (path, h) in &commands {
        let shown = format!("lull {}", path.join(" "));
        let mut args = path.clone();
        args.push("--no-such-flag".into());
        tried += 1;
        match attempt(home.path(), &args, Duration::from_secs(10)) {
            Some((2, err)) if err.trim().lines().count() == 1 && err.contains("--no-such-flag") => {}
            other => problems.push(format!("{shown} --no-such-flag: {other:?}")),
        }
        for opt in value_options(h) {
            for v in BAD_VALUES {
                let mut args = path.clone();
                args.push(format!("{opt}={v}"));
                tried += 1;
                match attempt(home.path(), &args, Duration::from_secs(4)) {
                    None | Some((0, _)) => {}
                    Some((code, err)) => {
                        let lines = err.trim().lines().count();
                        if code == 101 || err.contains("panicked") || lines != 1 || !err.starts_with("lull: ") {
                            problems.push(format!("{shown} {opt}={v:?}: exit {code}, {lines} lines:\n{err}"));
                        }
                    }
                }
            }
        }
    }
    eprintln!("{tried} invocations over {} commands", commands.len());
    assert!(problems.is_empty(), "{} problems:\n{}", problems.len(), problems.join("\n"));
}

/// The benchmarks left `lull` for the developer tool `lull-bench`: `lull bench …` says so
/// in one line and changes nothing (exit 2), and `lull --help` lists no `bench`.
#[test]
fn lull_bench_points_to_lull_bench() {
    let home = tempfile::tempdir().expect("home");
    let (code, err) = attempt(home.path(), &["bench".into(), "idle".into()], Duration::from_secs(10)).expect("lull bench ended");
    assert_eq!(code, 2, "{err}");
    assert!(err.trim().lines().count() == 1 && err.contains("lull-bench"), "{err}");
    assert!(!subcommands(&help(home.path(), &[])).iter().any(|c| c == "bench"));
}
