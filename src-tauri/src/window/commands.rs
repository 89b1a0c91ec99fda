//! The commands the windows invoke. Each speaks the agent's control protocol on its
//! socket (the same one `lull` uses), on a blocking thread so the GTK main loop never
//! waits. Settings are checked with the agent's own `Config::validate` first, so a refused
//! value comes back naming its field and range.

use crate::bindings::{FieldError, OwnerActions, Settings};
use crate::{actions, autostart, pipe, windows};
use agent_core::calibration::CalibrationView;
use agent_core::config::{Config, ConfigError};
use agent_core::control::{call, AgentStatus, Request, Response, TodayReport};
use std::path::PathBuf;
use tauri::AppHandle;

/// What the commands need: where the agent listens.
pub struct Ctx {
    pub socket: PathBuf,
    /// The agent's ledger, read (never written) for calibration.
    pub ledger: PathBuf,
    /// Why the app runs without a (visible) tray icon, if it does.
    pub fallback: Option<String>,
    /// Started by the tray app (`--from-tray`), which reads this process's stdout.
    pub from_tray: bool,
}

async fn ask(socket: PathBuf, req: Request) -> Result<Response, String> {
    tauri::async_runtime::spawn_blocking(move || call(&socket, &req).map_err(|e| e.to_string())).await.map_err(|e| e.to_string())?
}

async fn status_for(socket: PathBuf, req: Request) -> Result<AgentStatus, String> {
    match ask(socket, req).await? {
        Response::Status(s) => Ok(*s),
        other => Err(format!("unexpected answer: {other:?}")),
    }
}

#[tauri::command]
pub async fn status(ctx: tauri::State<'_, Ctx>) -> Result<AgentStatus, String> {
    status_for(ctx.socket.clone(), Request::Status).await
}

/// The tray menu's Donate now, Pause and Resume choices, for the status window.
#[tauri::command]
pub fn owner_actions() -> OwnerActions {
    OwnerActions::from_choices()
}

/// Does one of [`owner_actions`]' choices: the same control request the tray menu sends.
#[tauri::command]
pub async fn act(choice: String, ctx: tauri::State<'_, Ctx>) -> Result<AgentStatus, String> {
    let req = actions::request_for(&choice).ok_or_else(|| format!("no action called {choice:?}"))?;
    tracing::info!(choice = %choice, "status window");
    status_for(ctx.socket.clone(), req).await
}

/// Quit Lull: asks the tray app to stop (its agent with it), as its menu's Quit does.
#[tauri::command]
pub fn quit_lull(ctx: tauri::State<'_, Ctx>) -> Result<(), String> {
    if !ctx.from_tray {
        return Err("this window was not opened by the Lull tray app, so it cannot stop Lull (stop the agent where it runs)".into());
    }
    tracing::info!("Quit Lull from the status window");
    pipe::tell_tray("quit").map_err(|e| format!("cannot reach the Lull tray app: {e}"))
}

#[tauri::command]
pub async fn today(ctx: tauri::State<'_, Ctx>) -> Result<TodayReport, String> {
    match ask(ctx.socket.clone(), Request::Today).await? {
        Response::Today(t) => Ok(*t),
        other => Err(format!("unexpected answer: {other:?}")),
    }
}

async fn config(socket: PathBuf) -> Result<Config, String> {
    match ask(socket, Request::GetConfig).await? {
        Response::Config { config } => Ok(*config),
        other => Err(format!("unexpected answer: {other:?}")),
    }
}

#[tauri::command]
pub async fn get_settings(ctx: tauri::State<'_, Ctx>) -> Result<Settings, String> {
    Ok(Settings { config: config(ctx.socket.clone()).await?, autostart: autostart::enabled() })
}

/// A configuration error as the settings window shows it.
pub fn field_error(e: &ConfigError) -> FieldError {
    match e {
        ConfigError::OutOfRange { field, value, allowed } => {
            let range = allowed.split_once("..=").and_then(|(a, b)| Some((a.parse().ok()?, b.parse().ok()?)));
            FieldError { field: field.clone(), message: format!("{value} is out of range (allowed {allowed})"), range }
        }
        ConfigError::Invalid { field, message } => FieldError { field: field.clone(), message: message.clone(), range: None },
        // The owner's file broken by hand: the field, and where in which file.
        ConfigError::InFile { error, .. } => FieldError { message: e.to_string(), ..field_error(error) },
        other => FieldError { field: String::new(), message: other.to_string(), range: None },
    }
}

#[tauri::command]
pub async fn save_settings(settings: Settings, ctx: tauri::State<'_, Ctx>) -> Result<Settings, FieldError> {
    let general = |message: String| FieldError { field: String::new(), message, range: None };
    if let Err(e) = settings.config.validate() {
        let fe = field_error(&e);
        tracing::info!(field = %fe.field, "settings refused: {}", fe.message);
        return Err(fe);
    }
    let saved = match ask(ctx.socket.clone(), Request::SetConfig { config: Box::new(settings.config) }).await.map_err(general)? {
        Response::Config { config } => *config,
        other => return Err(general(format!("unexpected answer: {other:?}"))),
    };
    if settings.autostart != autostart::enabled() {
        autostart::set(settings.autostart).map_err(|e| FieldError {
            field: "autostart".into(),
            message: format!("cannot change the autostart entry: {e}"),
            range: None,
        })?;
    }
    tracing::info!("settings saved");
    Ok(Settings { config: saved, autostart: autostart::enabled() })
}

/// The names of the programs running now, for the exclusive-programs picker.
#[tauri::command]
pub async fn running_programs(ctx: tauri::State<'_, Ctx>) -> Result<Vec<String>, String> {
    match ask(ctx.socket.clone(), Request::RunningPrograms).await? {
        Response::Programs { names } => Ok(names),
        other => Err(format!("unexpected answer: {other:?}")),
    }
}

/// This machine's calibration from its own recorded trace, for a daily budget of
/// `budget` interruptions (`lull calibrate`'s logic; applying is the window's Save).
#[tauri::command]
pub async fn calibrate(budget: u32, ctx: tauri::State<'_, Ctx>) -> Result<CalibrationView, String> {
    let ledger = ctx.ledger.clone();
    let offset = chrono::Local::now().offset().local_minus_utc() as i64;
    tauri::async_runtime::spawn_blocking(move || {
        let result = agent_core::calibration::of_this_machine(&ledger, budget, offset).map_err(|e| format!("reading the trace: {e}"))?;
        tracing::info!(budget, calibrated = result.is_ok(), "calibration asked for from the settings window");
        Ok(CalibrationView::new(result, budget))
    })
    .await
    .map_err(|e| e.to_string())?
}

/// Why the app runs without a visible tray icon (shown atop the status window).
#[tauri::command]
pub fn fallback(ctx: tauri::State<'_, Ctx>) -> Option<String> {
    ctx.fallback.clone()
}

#[tauri::command]
pub fn open_window(app: AppHandle, which: String) -> Result<(), String> {
    let w = windows::Which::parse(&which).ok_or_else(|| format!("no window called {which:?}"))?;
    windows::open(&app, w).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn out_of_range_keeps_field_and_range() {
        let mut c = Config::default();
        c.budget.interruptions_per_day = 25;
        let fe = field_error(&c.validate().unwrap_err());
        assert_eq!(fe.field, "budget.interruptions_per_day");
        assert_eq!(fe.range, Some((0.0, 20.0)));
        assert!(fe.message.contains("25"), "{}", fe.message);
        let mut c = Config::default();
        c.rules.hours.tue = Some(vec!["17:00-09:00".into()]);
        let fe = field_error(&c.validate().unwrap_err());
        assert_eq!((fe.field.as_str(), fe.range), ("rules.hours.tue[0]", None));
    }
}
