//! The owner's commands, spoken to the running agent over its control socket:
//! `status`, `pause`, `resume`, `donate`, `limits`. Each prints a readable summary, or
//! the agent's JSON answer with `--json`.

use crate::spans::{donate_span, human, pause_span};
use agent_core::control::{call, AgentStatus, Request, Response};
use agent_core::paths::Paths;
use agent_core::policy::{PauseSpan, SavedPause, StateKind};
use anyhow::{bail, Context, Result};
use clap::Args;

#[derive(Args, Debug)]
pub struct JsonFlag {
    /// Print the agent's answer as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct PauseArgs {
    /// 1h, 3h, any duration (45m, 2h30m), tomorrow, or forever.
    #[arg(value_parser = pause_span)]
    pub span: PauseSpan,
    #[command(flatten)]
    pub json: JsonFlag,
}

#[derive(Args, Debug)]
pub struct DonateArgs {
    /// A duration (2h, 90m) or until-return.
    #[arg(value_parser = donate_span)]
    pub span: agent_core::policy::DonateSpan,
    #[command(flatten)]
    pub json: JsonFlag,
}

#[derive(Args, Debug)]
pub struct LimitsArgs {
    /// Interruptions allowed per local day (0–20). At the limit the machine leaves the
    /// pool until tomorrow; 0 means guest work only when you click "Donate now".
    #[arg(long, value_parser = clap::value_parser!(u64).range(0..=20))]
    pub interruptions: Option<u64>,
    /// Lend while light: let guest work start while you use the machine lightly (your
    /// CPU below --light-cpu for --light-for), at lowest priority. Off by default. A lent
    /// guest counts as an interruption only if your activity stops it.
    #[arg(long, value_name = "on|off", value_parser = on_off)]
    pub lend_while_light: Option<bool>,
    /// The light-load limit l for lending while light, in % of the machine's CPU (1–100;
    /// default 20; 100 leaves CPU out and lends whenever your memory use is steady).
    #[arg(long, value_name = "PERCENT", value_parser = clap::value_parser!(u64).range(1..=100))]
    pub light_cpu: Option<u64>,
    /// How long your CPU must have stayed below the limit before guest work starts while
    /// you are here (1s–1h, e.g. 60s, 5m; default 60s).
    #[arg(long, value_name = "DURATION", value_parser = light_for)]
    pub light_for: Option<u64>,
    #[command(flatten)]
    pub json: JsonFlag,
}

fn on_off(s: &str) -> Result<bool, String> {
    match s.to_ascii_lowercase().as_str() {
        "on" | "true" | "yes" => Ok(true),
        "off" | "false" | "no" => Ok(false),
        _ => Err(format!("{s:?} is neither on nor off")),
    }
}

fn light_for(s: &str) -> Result<u64, String> {
    let secs = crate::spans::parse_secs(s)?;
    if !(1..=3600).contains(&secs) {
        return Err(format!("{s:?} is outside 1s..=1h (availability.light_for_s 1..=3600)"));
    }
    Ok(secs)
}

fn ask(req: Request) -> Result<Response> {
    let paths = Paths::from_env()?;
    Ok(call(&paths.socket, &req)?)
}

fn print_status(resp: Response, json: bool) -> Result<()> {
    let Response::Status(s) = resp else { bail!("the agent answered with something other than a status") };
    if json {
        outln!("{}", serde_json::to_string_pretty(&s).context("status as JSON")?);
    } else {
        out!("{}", describe(&s));
    }
    Ok(())
}

/// Why the machine is not available, in the owner's words: their own input, or what
/// else keeps it busy (never "you" for CPU or memory the owner may not have caused).
fn busy_words(p: &agent_core::policy::PolicyStatus) -> String {
    use agent_core::policy::ReturnCause;
    match p.busy {
        Some(ReturnCause::OwnerCpu) => format!("busy: CPU {:.0} % (not your input)", p.owner_cpu * 100.0),
        Some(ReturnCause::OwnerMemory) => "busy: memory use is growing (not your input)".to_string(),
        Some(ReturnCause::Inhibitor) => "you are present: a program holds an idle inhibitor (a call, a video)".to_string(),
        Some(ReturnCause::ExclusiveProgram) => match &p.exclusive_program {
            Some(name) => format!("busy: {name} runs (an exclusive program: no guest work beside it)"),
            None => "busy: an exclusive program runs".to_string(),
        },
        _ => "owner active (you are using this machine)".to_string(),
    }
}

/// When a local day starts, as people say it: "Sat 28 Nov 00:00 (tomorrow)".
fn day_start(day: chrono::NaiveDate) -> String {
    let today = chrono::Local::now().date_naive();
    let rel = match (day - today).num_days() {
        0 => " (today)",
        1 => " (tomorrow)",
        _ => "",
    };
    format!("{} 00:00{rel}", day.format("%a %-d %b"))
}

/// The human-readable status.
pub fn describe(s: &AgentStatus) -> String {
    let p = &s.policy;
    let state = match p.state {
        StateKind::OwnerActive => busy_words(p),
        StateKind::Idle => format!("idle for {} (guest work may start after {})", human(p.idle_for_s), human(p.recruitment_threshold_s)),
        StateKind::Recruitable => format!("idle for {}: ready for guest work", human(p.idle_for_s)),
        StateKind::Donating if p.donate_now => "donating (you offered this machine now)".to_string(),
        StateKind::Donating => "donating: guest work is running while you are away".to_string(),
        StateKind::Lingering => {
            format!("lingering: guest work runs at lowest priority (your CPU h = {:.0} %)", p.owner_utilisation_h * 100.0)
        }
        StateKind::Evicting => format!("evicting: guest work is being stopped ({})", p.reason),
        StateKind::LendingLight => format!(
            "lending while light: you are here but your CPU has stayed below the light limit for {}; guest work runs at lowest priority",
            human(p.light_for_s)
        ),
        StateKind::Paused => match (&p.pause, p.paused_for_s) {
            (_, Some(left)) => format!("paused for another {}", human(left)),
            (Some(SavedPause::UntilDay { day }), _) => format!("paused until {}", day_start(*day)),
            _ => "paused until you resume".to_string(),
        },
        StateKind::OutOfBudget if p.interruption_limit == 0 => {
            "out of the pool: your limit is 0 interruptions a day, so guest work runs only when you offer the machine (lull donate)"
                .to_string()
        }
        StateKind::OutOfBudget => "out of budget: today's interruptions are used up, back in the pool tomorrow".to_string(),
        StateKind::NotAllowed => format!("not allowed now ({})", p.not_allowed.map(|r| r.describe()).unwrap_or("rules")),
    };
    let mut out = String::new();
    out += &format!("Lull agent {} (pid {})\n", s.agent_version, s.pid);
    out += &format!("State:          {state}\n");
    for a in &s.alerts {
        out += &format!("Attention:      {}\n", a.message);
        if let Some(action) = &a.action {
            out += &format!("                What to do: {action}\n");
        }
    }
    if let Some(left) = p.donate_for_s {
        out += &format!("Donate now:     {} left\n", human(left));
    }
    out += &format!(
        "Today {}:  donated {} CPU ({} wall) · interruptions {} of {}\n",
        p.budget_day,
        human(s.donated_cpu_s_today as u64),
        human(s.donated_wall_s_today as u64),
        p.interruptions_today,
        p.interruption_limit
    );
    out += &format!(
        // The CPU that keeps a machine busy is every account's but the guests' (a root
        // build counts for an ordinary owner's agent): say so rather than call it theirs.
        "CPU:            {:.0} % now (every account's programs but the guests', not only yours), h = {:.0} % · eviction mode {}\n",
        p.owner_cpu * 100.0,
        p.owner_utilisation_h * 100.0,
        p.eviction_mode.short()
    );
    out += &format!("Guest work:     {}\n", if p.guests_present { "present" } else { "none" });
    if p.lend_while_light {
        out += &format!("Lend while light: on (your CPU light for {})\n", human(p.light_for_s));
    }
    if s.donated_present_cpu_s_today > 0.0 {
        out += &format!("While you were here: {} CPU of today's donation\n", human(s.donated_present_cpu_s_today as u64));
    }
    out += &format!("Guest runtime:  {}\n", s.guest_runtime);
    if s.input_backends.is_empty() {
        out += "Input:          none (availability from CPU and memory only)\n";
    }
    for b in &s.input_backends {
        out += &format!("Input:          {b}\n");
    }
    for b in &s.input_stopped {
        out += &format!("Input stopped:  {b}\n");
    }
    if let Some(m) = &s.owner_memory {
        out += &format!("Owner memory:   {}\n", m.protection);
        if let Some(r) = &m.last_restore {
            let anon = r.anon_ms.map_or("nothing in swap".to_string(), |ms| format!("{ms} ms ({:.0} MiB swapped)", r.anon_swapped_mib));
            let cache = match r.file_cache_ms {
                Some(ms) => format!(
                    "{ms} ms ({:.0} of {:.0} MiB missing read back{})",
                    r.file_cache_restored_mib,
                    r.file_cache_missing_mib,
                    r.file_cache_stopped.as_deref().map(|w| format!("; stopped: {w}")).unwrap_or_default()
                ),
                None => "no snapshot".to_string(),
            };
            out += &format!("Last restore:   swapped pages {anon} · file cache {cache}\n");
        }
    }
    match &s.coordinator {
        Some(c) => match &c.machine {
            Some(m) => out += &format!("Coordinator:    {} (this machine is {m} there)\n", c.url),
            None => out += &format!("Coordinator:    {} (agent {})\n", c.url, c.agent_id),
        },
        None => out += "Coordinator:    none (not enrolled: `lull enrol` or `lull up`)\n",
    }
    out
}

pub fn status(a: JsonFlag) -> Result<()> {
    print_status(ask(Request::Status)?, a.json)
}

pub fn pause(a: PauseArgs) -> Result<()> {
    print_status(ask(Request::Pause { span: a.span })?, a.json.json)
}

pub fn resume(a: JsonFlag) -> Result<()> {
    print_status(ask(Request::Resume)?, a.json)
}

pub fn donate(a: DonateArgs) -> Result<()> {
    print_status(ask(Request::Donate { span: a.span })?, a.json.json)
}

/// `lull limits` with nothing to set: the limits in force and today's use of them.
fn show_limits(json: bool) -> Result<()> {
    let Response::Config { config } = ask(Request::GetConfig)? else {
        bail!("the agent answered with something other than its configuration")
    };
    let Response::Status(s) = ask(Request::Status)? else { bail!("the agent answered with something other than a status") };
    let (av, p) = (&config.availability, &s.policy);
    let light_cpu_pct = (av.light_cpu_max * 100.0).round() as u64;
    if json {
        let limits = serde_json::json!({
            "interruptions_per_day": p.interruption_limit,
            "interruptions_today": p.interruptions_today,
            "lend_while_light": av.lend_while_light,
            "light_cpu_pct": light_cpu_pct,
            "light_for_s": av.light_for_s,
        });
        outln!("{}", serde_json::to_string_pretty(&limits).context("limits as JSON")?);
        return Ok(());
    }
    outln!("Interruptions:     at most {} a day · {} used today ({})", p.interruption_limit, p.interruptions_today, p.budget_day);
    outln!(
        "Lend while light:  {} · light = your CPU under {light_cpu_pct} % for {}",
        if av.lend_while_light { "on" } else { "off" },
        human(av.light_for_s)
    );
    outln!(
        "Change with:       lull limits --interruptions N (0–20) · --lend-while-light on|off · --light-cpu PERCENT · --light-for DURATION"
    );
    Ok(())
}

/// `lull limits`: sets what is given (the agent validates and keeps it), then shows the
/// limits in force; with nothing given, shows them.
pub fn limits(a: LimitsArgs) -> Result<()> {
    if a.interruptions.is_none() && a.lend_while_light.is_none() && a.light_cpu.is_none() && a.light_for.is_none() {
        return show_limits(a.json.json);
    }
    if a.lend_while_light.is_some() || a.light_cpu.is_some() || a.light_for.is_some() {
        // The agent validates and writes only the changed fields into the owner's file.
        let Response::Config { config } = ask(Request::GetConfig)? else {
            bail!("the agent answered with something other than its configuration")
        };
        let mut config = *config;
        let av = &mut config.availability;
        if let Some(on) = a.lend_while_light {
            av.lend_while_light = on;
        }
        if let Some(pct) = a.light_cpu {
            av.light_cpu_max = pct as f64 / 100.0;
        }
        if let Some(secs) = a.light_for {
            av.light_for_s = secs;
        }
        ask(Request::SetConfig { config: Box::new(config) })?;
    }
    if let Some(n) = a.interruptions {
        // The range is clap's (0..=20, one error for 21 and for 99999999999).
        ask(Request::SetLimits { interruptions_per_day: u32::try_from(n).context("--interruptions: allowed 0..=20")? })?;
    }
    // What was set, as the limits now stand (the agent validated and kept them).
    show_limits(a.json.json)
}
