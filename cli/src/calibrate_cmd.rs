//! `lull calibrate`: derives this machine's availability threshold (owner CPU) and
//! recruitment threshold from its own recorded trace (the ledger's `trace` table, or a
//! CSV export of it), prints the reasoning, writes a plot, and with `--apply` writes the
//! result to the owner's configuration — through the running agent (`SetConfig`, which
//! saves the file) or, with none running, into the config file directly. The logic is
//! `lull_core::calibrate`; this file reads, prints and writes.

use agent_core::config::Config;
use agent_core::control::{call, ControlError, Request, Response};
use agent_core::paths::Paths;
use anyhow::{bail, Context, Result};
use clap::Args;
use lull_core::calibrate::OwnerSample;
use lull_core::calibrate::{calibrate, CalibrateError};
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct CalibrateArgs {
    /// Read the trace from a CSV export of the ledger (see sim/README.md) instead of the
    /// agent's ledger.
    #[arg(long)]
    pub trace: Option<PathBuf>,
    /// The daily interruption budget to calibrate for (default: the configured one).
    #[arg(long, value_parser = clap::value_parser!(u32).range(0..=20))]
    pub budget: Option<u32>,
    /// Where to write the plot (default: calibration.svg in the agent's data directory).
    #[arg(long)]
    pub plot: Option<PathBuf>,
    /// Write the derived thresholds into the owner's configuration.
    #[arg(long)]
    pub apply: bool,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

/// The configuration in force: the running agent's, else the file's; and whether an
/// agent answered.
fn current_config(paths: &Paths) -> Result<(Config, bool)> {
    match call(&paths.socket, &Request::GetConfig) {
        Ok(Response::Config { config }) => Ok((*config, true)),
        Ok(Response::Error { message }) => bail!("the agent refused to give its configuration: {message}"),
        Ok(_) => bail!("the agent answered GetConfig with something else"),
        Err(ControlError::NotRunning(_)) => {
            Ok((Config::load(&paths.config_file).with_context(|| format!("reading {}", paths.config_file.display()))?, false))
        }
        Err(e) => Err(e).context("asking the agent for its configuration"),
    }
}

fn rows(a: &CalibrateArgs, paths: &Paths) -> Result<Vec<(i64, OwnerSample)>> {
    if let Some(csv) = &a.trace {
        let text = std::fs::read_to_string(csv).with_context(|| format!("reading {}", csv.display()))?;
        return lull_sim::trace::parse_ledger_rows(csv, &text).with_context(|| format!("reading {}", csv.display()));
    }
    // No ledger yet is no history: refused below with the days needed.
    agent_core::calibration::ledger_rows(&paths.ledger)
        .with_context(|| format!("reading the trace from the ledger {}", paths.ledger.display()))
}

pub fn run(a: CalibrateArgs) -> Result<()> {
    let paths = Paths::from_env()?;
    let (config, agent_running) = current_config(&paths)?;
    let budget = a.budget.unwrap_or(config.budget.interruptions_per_day);
    let rows = rows(&a, &paths)?;
    let offset = chrono::Local::now().offset().local_minus_utc() as i64;
    let c = match calibrate(&rows, budget, offset) {
        Ok(c) => c,
        Err(e @ CalibrateError::NotEnoughHistory { have_days }) => {
            if a.json {
                outln!(
                    "{}",
                    serde_json::json!({"calibrated": false, "have_days": have_days, "need_days": lull_core::calibrate::MIN_DAYS - have_days,
                        "reason": e.to_string(), "owner_cpu_max": config.availability.owner_cpu_max,
                        "recruitment_threshold_s": config.availability.recruitment_threshold_s})
                );
            }
            bail!(
                "{e} (owner CPU < {:.0} %, recruitment threshold {} s)",
                config.availability.owner_cpu_max * 100.0,
                config.availability.recruitment_threshold_s
            );
        }
    };
    let plot = a.plot.clone().unwrap_or_else(|| paths.data_dir.join("calibration.svg"));
    if let Some(dir) = plot.parent().filter(|d| !d.as_os_str().is_empty()) {
        agent_core::private_files::create_dir(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    // The plot shows when the owner was at the machine: owner-only.
    agent_core::private_files::write(&plot, c.svg().as_bytes()).with_context(|| format!("writing the plot {}", plot.display()))?;
    let mut applied = None;
    if a.apply {
        let mut wanted = config.clone();
        wanted.availability.owner_cpu_max = c.owner_cpu_max;
        wanted.availability.recruitment_threshold_s = c.recruitment_threshold_s;
        if agent_running {
            match call(&paths.socket, &Request::SetConfig { config: Box::new(wanted) })? {
                Response::Config { .. } => applied = Some(format!("the running agent (saved to {})", paths.config_file.display())),
                Response::Error { message } => bail!("the agent refused the calibrated configuration: {message}"),
                _ => bail!("the agent answered SetConfig with something else"),
            }
        } else {
            agent_core::config_file::save_changes(&paths.config_file, &config, &wanted)
                .with_context(|| format!("writing {}", paths.config_file.display()))?;
            applied = Some(paths.config_file.display().to_string());
        }
    }
    if a.json {
        let cands: Vec<serde_json::Value> = c
            .candidates
            .iter()
            .map(|k| {
                serde_json::json!({"threshold_s": k.threshold_s, "donated_h_per_day": k.donated_h_per_day,
                "interruptions_per_day": k.interruptions_per_day, "worst_day_uncapped": k.worst_day_uncapped})
            })
            .collect();
        outln!(
            "{}",
            serde_json::json!({"calibrated": true, "days": c.days, "rows": c.rows, "budget": c.budget,
                "owner_cpu_max": c.owner_cpu_max, "recruitment_threshold_s": c.recruitment_threshold_s,
                "background_cpu": c.background_cpu, "active_cpu_p50": c.active_p50, "active_cpu_p90": c.active_p90,
                "idle_periods": c.idle_periods, "candidates": cands, "reasoning": c.reasoning,
                "plot": plot, "applied_to": applied})
        );
        return Ok(());
    }
    out!("{}", c.explain());
    outln!(
        "\nCalibrated: owner CPU < {:.0} % (now {:.0} %), recruitment threshold {} s (now {} s). Plot: {}",
        c.owner_cpu_max * 100.0,
        config.availability.owner_cpu_max * 100.0,
        c.recruitment_threshold_s,
        config.availability.recruitment_threshold_s,
        plot.display()
    );
    match applied {
        Some(to) => outln!("Applied to {to}."),
        None => outln!("Nothing changed; `lull calibrate --apply` writes these into your configuration."),
    }
    Ok(())
}
