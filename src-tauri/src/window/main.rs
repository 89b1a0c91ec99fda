//! `lull-window`: Lull's status and settings windows, a Tauri webview app. The tray app
//! (`lull-tray`) starts it when the owner asks for a window and it ends when its last
//! window closes, so WebKit (its libraries, its web and network processes) is in memory
//! only while a window is open. It holds no agent: every command speaks the control
//! protocol on the agent's socket (`LULL_SOCKET`), like `lull`.
//!
//! Usage: `lull-window [--open status|settings] [--note TEXT] [--from-tray]`.
//! `--from-tray`: each line on stdin names a window to open (`status`, `settings`), and
//! stdin closing (the tray quit or died) ends the process. When its last window closes,
//! it does not end by itself: it says `idle N` on stdout (N: the window requests taken,
//! the first included) and the tray, which knows whether it has sent another since,
//! closes stdin or not (`src-tauri/src/windows.rs`); Quit Lull says `quit` there.
//! `--note` is shown atop the status window (why there is no tray icon), which then offers
//! Quit Lull. If it cannot start (on Windows: no WebView2 runtime), it says `fail TEXT`
//! there before it ends, so that the tray can tell the owner why no window opened.

// Product code handles its errors; `.unwrap()` is for tests (clippy.toml allows it there).
#![warn(clippy::unwrap_used)]

#[path = "../actions.rs"]
mod actions;
mod autostart;
mod bindings;
mod commands;
mod pipe;
#[path = "../which.rs"]
mod which;
mod windows;

use agent_core::paths::Paths;
use anyhow::{bail, Context, Result};
use std::io::BufRead;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use tauri::Manager;
use windows::Which;

const USAGE: &str = "usage: lull-window [--open status|settings] [--note TEXT] [--from-tray]

  --open WINDOW  the window to open (default: status)
  --note TEXT    a line shown atop the status window
  --from-tray    take further windows to open from stdin, one name a line; end when stdin closes";

/// Why no window opens on a Windows machine without the WebView2 runtime (one line).
#[cfg(windows)]
const NO_WEBVIEW2: &str = "Lull's windows need the Microsoft Edge WebView2 Runtime, which is not installed: \
get it from https://developer.microsoft.com/microsoft-edge/webview2/";

#[derive(Debug, Default)]
struct Args {
    open: Option<Which>,
    note: Option<String>,
    from_tray: bool,
}

fn parse_args() -> Result<Option<Args>> {
    let mut a = Args::default();
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--open" => {
                let w = it.next();
                a.open = Some(
                    w.as_deref().and_then(Which::parse).with_context(|| format!("--open takes status or settings, not {w:?}\n{USAGE}"))?,
                );
            }
            "--note" => a.note = Some(it.next().with_context(|| format!("--note takes a text\n{USAGE}"))?),
            "--from-tray" => a.from_tray = true,
            "--version" | "-V" => {
                println!("lull-window {}", env!("CARGO_PKG_VERSION"));
                return Ok(None);
            }
            "--help" | "-h" => {
                println!("{USAGE}");
                return Ok(None);
            }
            other => bail!("unknown argument {other:?}\n{USAGE}"),
        }
    }
    Ok(Some(a))
}

fn main() -> ExitCode {
    // Whatever this process writes is the owner's only (the config, WebKit's caches).
    agent_core::private_files::owner_only_umask();
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("lull-window: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<()> {
    let Some(args) = parse_args()? else { return Ok(()) };
    let from_tray = args.from_tray;
    let r = open_windows(args);
    if let (true, Err(e)) = (from_tray, &r) {
        // The tray logs it and tells the owner (it has no other way to learn why).
        let _ = pipe::tell_tray(&format!("fail {}", format!("{e:#}").replace('\n', " ")));
    }
    r
}

/// Checks, before Tauri starts, that WebView2 (which draws the windows on Windows) is
/// there: without its runtime Tauri's setup fails with a panic. Asked of the WebView2
/// loader (WebView2Loader.dll, beside this executable), through
/// `tauri::webview_version` (`GetAvailableCoreWebView2BrowserVersionString`).
#[cfg(windows)]
fn check_webview2() -> Result<()> {
    match tauri::webview_version() {
        Ok(v) => {
            tracing::info!("WebView2 runtime {v}");
            Ok(())
        }
        Err(e) => {
            // At info: to the log file only (warnings go to stderr too), so that the
            // owner's terminal gets the one line below.
            tracing::info!("no WebView2 runtime (the WebView2 loader said: {e})");
            bail!(NO_WEBVIEW2)
        }
    }
}

fn open_windows(args: Args) -> Result<()> {
    let paths = Paths::from_env()?;
    let _guard = agent_core::logging::init(&paths.log_dir, "window")?;
    #[cfg(windows)]
    check_webview2()?;
    let first = args.open.unwrap_or(Which::Status);
    let from_tray = args.from_tray;
    // Window requests taken from the tray: the first (from the arguments), then stdin's.
    let taken = Arc::new(AtomicU32::new(1));
    let taken_by_follower = taken.clone();
    let app = tauri::Builder::default()
        .manage(commands::Ctx { socket: paths.socket.clone(), ledger: paths.ledger.clone(), fallback: args.note, from_tray })
        .invoke_handler(tauri::generate_handler![
            commands::status,
            commands::today,
            commands::get_settings,
            commands::save_settings,
            commands::running_programs,
            commands::calibrate,
            commands::open_window,
            commands::fallback,
            commands::owner_actions,
            commands::act,
            commands::quit_lull
        ])
        .setup(move |app| {
            let h = app.handle().clone();
            windows::open(&h, first)?;
            if from_tray {
                std::thread::Builder::new().name("tray-requests".into()).spawn(move || follow_tray(h, &taken_by_follower))?;
            }
            Ok(())
        })
        .build(tauri::generate_context!())
        .context("starting the window app")?;
    // The last window closed: on its own, the process ends (Tauri's default), WebKit's
    // with it; under the tray, it tells the tray, which ends it unless a request is on
    // its way.
    app.run(move |_, event| {
        if let tauri::RunEvent::ExitRequested { code: None, api, .. } = event {
            if from_tray {
                api.prevent_exit();
                say_idle(&taken);
            }
        }
    });
    tracing::info!("lull-window stopped");
    Ok(())
}

/// Tells the tray that no window is open, after `taken` requests.
fn say_idle(taken: &AtomicU32) {
    let n = taken.load(Ordering::SeqCst);
    tracing::info!(taken = n, "no window left: telling the tray");
    if pipe::tell_tray(&format!("idle {n}")).is_err() {
        // The tray is gone: nobody will ask for a window again.
        std::process::exit(0);
    }
}

/// Opens the windows the tray asks for, one name a line on stdin; ends the app when the
/// tray closes stdin (it quit, or died, or found this process idle).
fn follow_tray(app: tauri::AppHandle, taken: &AtomicU32) {
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        match Which::parse(line.trim()) {
            Some(w) => {
                if let Err(e) = windows::open(&app, w) {
                    tracing::error!("cannot open the {} window: {e}", w.label());
                }
            }
            None => tracing::warn!("the tray asked for an unknown window {line:?}"),
        }
        taken.fetch_add(1, Ordering::SeqCst);
        // A request that opened nothing leaves the process idle: say so again.
        if app.webview_windows().is_empty() {
            say_idle(taken);
        }
    }
    tracing::info!("the tray closed its pipe: closing the windows");
    app.exit(0);
}
