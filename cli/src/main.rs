//! The `lull` command: the headless agent and the owner's commands, each with `--json`.

// Product code handles its errors; `.unwrap()` is for tests (clippy.toml allows it there).
#![warn(clippy::unwrap_used)]

// outln!, out!, errln!: standard output that ends quietly on a closed pipe.
#[macro_use]
extern crate agent_core;

mod agent_cmd;
mod calibrate_cmd;
mod coordinator_admin;
mod coordinator_cmd;
mod db_url;
mod jobs_cmd;
mod jobs_view_cmd;
mod machines_cmd;
mod owner_cmd;
mod pool_files;
mod recruit_cmd;
mod run_cmd;
mod sim_cmd;
mod spans;
mod up_cmd;

use clap::{Parser, Subcommand};

/// Lend your workstation's idle time to a shared pool, on terms you set and can see.
#[derive(Parser, Debug)]
#[command(name = "lull", version, about, long_about = None, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Run the agent in the foreground, printing its state changes.
    Agent(agent_cmd::AgentArgs),
    /// Show what the agent is doing and what this machine gave today.
    Status(owner_cmd::JsonFlag),
    /// Stop lending this machine for a while: 1h, 3h, tomorrow, or forever (until resumed).
    Pause(owner_cmd::PauseArgs),
    /// End a pause or a "donate now" offer.
    Resume(owner_cmd::JsonFlag),
    /// Offer this machine now, skipping the idle wait: for a time (2h, 90m) or until-return.
    Donate(owner_cmd::DonateArgs),
    /// Show or set your limits: daily interruptions and lending while light (no options: show them).
    Limits(owner_cmd::LimitsArgs),
    /// Run one guest job under the policy, without a coordinator: `lull run [--now] -- CMD ARGS…`.
    Run(run_cmd::RunArgs),
    /// Enrol this machine's agent with a coordinator (a join token and the owner's name).
    Enrol(agent_cmd::EnrolArgs),
    /// Start a coordinator (embedded SQLite, or --db) and this machine's agent enrolled to it.
    Up(up_cmd::UpArgs),
    /// Run or administer the coordinator (serve, join tokens, API keys).
    Coordinator(coordinator_cmd::CoordinatorArgs),
    /// Submit a job to the coordinator: `lull submit [--machines N] -- COMMAND ARGS…`.
    Submit(jobs_cmd::SubmitArgs),
    /// Get up to K idle machines now, with no queue, and run a command on them as a group:
    /// `lull recruit K --for 10m -- COMMAND ARGS…`.
    Recruit(recruit_cmd::RecruitArgs),
    /// Enrolled machines this key may see (an owner key: the owner's own), with their state.
    Machines(machines_cmd::MachinesArgs),
    /// Submitted jobs: list, `show ID`, `output ID` (what its guests wrote).
    Jobs(jobs_view_cmd::JobsArgs),
    /// Donated-time report per owner or machine, per day or week.
    Report(jobs_cmd::ReportArgs),
    /// Derive this machine's availability and recruitment thresholds from its recorded
    /// trace (needs 3 days); prints the reasoning and a plot, `--apply` writes them.
    Calibrate(calibrate_cmd::CalibrateArgs),
    /// Replay the seeds' experiments through Lull's own policy and scheduler in virtual
    /// time; writes a Markdown report with SVG plots: `lull sim winner`.
    Sim(sim_cmd::SimArgs),
    /// Internal: sends CTRL_BREAK_EVENT to a guest's process group (the Windows agent's
    /// checkpoint signal, which it cannot send from its own console).
    #[cfg(windows)]
    #[command(name = "__ctrl-break", hide = true)]
    CtrlBreak { pid: u32 },
}

fn main() -> std::process::ExitCode {
    // Whatever this process writes is the owner's only (ledger, config, logs, keys, plots).
    agent_core::private_files::owner_only_umask();
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => return usage_error(e, &std::env::args().collect::<Vec<_>>()),
    };
    let result = match cli.command {
        Cmd::Agent(a) => agent_cmd::run(a),
        Cmd::Status(a) => owner_cmd::status(a),
        Cmd::Pause(a) => owner_cmd::pause(a),
        Cmd::Resume(a) => owner_cmd::resume(a),
        Cmd::Donate(a) => owner_cmd::donate(a),
        Cmd::Limits(a) => owner_cmd::limits(a),
        Cmd::Enrol(a) => agent_cmd::enrol(a),
        Cmd::Up(a) => up_cmd::run(a),
        Cmd::Coordinator(a) => coordinator_cmd::run(a),
        Cmd::Submit(a) => jobs_cmd::submit(a),
        Cmd::Recruit(a) => recruit_cmd::run(a),
        Cmd::Jobs(a) => jobs_view_cmd::run(a),
        Cmd::Machines(a) => machines_cmd::run(a),
        Cmd::Report(a) => jobs_cmd::report(a),
        Cmd::Sim(a) => sim_cmd::run(a),
        Cmd::Calibrate(a) => calibrate_cmd::run(a),
        #[cfg(windows)]
        Cmd::CtrlBreak { pid } => agent_core::guest::windows::ctrl_break::send(pid).map_err(anyhow::Error::msg),
        Cmd::Run(a) => match run_cmd::run(a) {
            Ok(code) => return std::process::ExitCode::from(code),
            Err(e) => Err(e),
        },
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            errln!("lull: {}", agent_core::message::once(e.chain()));
            std::process::ExitCode::from(1)
        }
    }
}

/// What `lull bench …` (a subcommand of old) says now.
const MOVED_BENCH: &str = "benchmarks moved to lull-bench, a developer tool not installed with Lull: \
                           `cargo run -p lull-bench --release -- --help` in a checkout";

/// A command-line mistake as one line naming what was wrong (clap's first line, the
/// arguments that are missing with what each takes, the allowed values), pointing to the
/// subcommand's own `--help`; exit code 2. `--help` and `--version` print as usual.
fn usage_error(e: clap::Error, args: &[String]) -> std::process::ExitCode {
    use clap::error::ErrorKind;
    if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand) {
        let _ = e.print();
        return std::process::ExitCode::from(if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand { 2 } else { 0 });
    }
    if e.kind() == ErrorKind::InvalidSubcommand && args.get(1).is_some_and(|a| a == "bench") {
        errln!("lull: {MOVED_BENCH}");
        return std::process::ExitCode::from(2);
    }
    errln!("lull: {}", usage_line(&e.render().to_string(), &subcommand_path(args)));
    std::process::ExitCode::from(2)
}

/// The subcommand the command line named (`["lull", "jobs", "show"]`): its words that
/// name a subcommand of the one before.
fn subcommand_path(args: &[String]) -> Vec<String> {
    use clap::CommandFactory;
    let mut cmd = Cli::command();
    let mut path = vec!["lull".to_string()];
    for a in args.iter().skip(1) {
        if a == "--" {
            break;
        }
        if let Some(sub) = cmd.find_subcommand(a).cloned() {
            path.push(sub.get_name().to_string());
            cmd = sub;
        }
    }
    path
}

/// The one line [`usage_error`] prints for clap's rendered error `text` about the
/// subcommand at `path`.
fn usage_line(text: &str, path: &[String]) -> String {
    let lines: Vec<&str> = text.lines().map(str::trim).collect();
    let first = lines.iter().copied().find(|l| !l.is_empty()).unwrap_or("invalid arguments");
    let first = first.strip_prefix("error: ").unwrap_or(first);
    let path: Vec<&str> = path.iter().map(String::as_str).collect();
    let mut out = first.trim_end_matches(':').to_string();
    let missing: Vec<&str> =
        lines.iter().skip_while(|l| !l.ends_with("were not provided:")).skip(1).take_while(|l| !l.is_empty()).copied().collect();
    if !missing.is_empty() {
        let said: Vec<String> = missing
            .iter()
            .map(|m| match arg_help(&path, m) {
                Some(h) => format!("{m} ({h})"),
                None => m.to_string(),
            })
            .collect();
        out = format!("{out}: {}", said.join(", "));
    }
    if let Some(values) = lines.iter().find_map(|l| l.strip_prefix("[possible values: ")) {
        out = format!("{out}; allowed: {}", values.trim_end_matches(']'));
    }
    if let Some(tip) = lines.iter().find_map(|l| l.strip_prefix("tip: ")) {
        out = format!("{out} ({tip})");
    }
    format!("{out} · see `{} --help`", path.join(" "))
}

/// The first sentence of the help of `shown` (`<SPAN>`, `--url <URL>`) in the subcommand
/// at `path` (`["lull", "pause"]`).
fn arg_help(path: &[&str], shown: &str) -> Option<String> {
    use clap::CommandFactory;
    let mut cmd = Cli::command();
    for name in path.iter().skip(1) {
        cmd = cmd.find_subcommand(name)?.clone();
    }
    let value = shown.split_whitespace().last()?.trim_matches(|c| c == '<' || c == '>' || c == '.');
    let long = shown.strip_prefix("--").map(|l| l.split_whitespace().next().unwrap_or(l));
    let arg = cmd.get_arguments().find(|a| {
        long.is_some_and(|l| a.get_long() == Some(l))
            || a.get_value_names().is_some_and(|v| v.iter().any(|n| n.as_str() == value))
            || a.get_id().as_str().eq_ignore_ascii_case(value)
    })?;
    let help = arg.get_help()?.to_string();
    Some(help.split(". ").next().unwrap_or(&help).trim_end_matches('.').to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn said(args: &[&str]) -> String {
        let owned: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        usage_line(&Cli::try_parse_from(args).unwrap_err().render().to_string(), &subcommand_path(&owned))
    }

    #[test]
    fn a_usage_error_names_what_is_missing_what_is_allowed_and_the_subcommands_help() {
        assert_eq!(
            said(&["lull", "pause"]),
            "the following required arguments were not provided: <SPAN> (1h, 3h, any duration (45m, 2h30m), tomorrow, or forever) · see `lull pause --help`"
        );
        let s = said(&["lull", "jobs", "--state", "bogus"]);
        assert!(s.contains("allowed: queued, running, completed, failed, cancelled, lost") && s.ends_with("see `lull jobs --help`"), "{s}");
        let s = said(&["lull", "jobs", "show"]);
        assert!(s.contains("<ID> (The job's id (as `lull submit` printed it))") && s.ends_with("see `lull jobs show --help`"), "{s}");
        assert!(said(&["lull", "limits", "--interruptions", "30"]).ends_with("see `lull limits --help`"));
    }
}
