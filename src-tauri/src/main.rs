//! `lull-tray`: Lull's tray app. It runs the agent in-process (the same
//! `agent_core::agent::run` driver as `lull agent`, so there is one policy), shows its
//! state in a tray icon with a menu, and opens the status and settings windows on demand.
//!
//! Before Tauri touches GTK or the tray it checks what the desktop offers, because Tauri
//! panics where something is missing:
//! - no display (or one that cannot be opened): says so, runs the headless agent;
//! - no AppIndicator library: says so, runs with the status window instead of a tray
//!   icon (closing the window quits);
//! - no tray host (e.g. GNOME without an AppIndicator extension): says so, builds the
//!   tray anyway (a host may appear) and opens the status window.
//!
//! Usage: `lull-tray [--open status|settings] [--no-tray] [--headless]`. The paths are
//! those of `lull` (`LULL_CONFIG`, `LULL_DATA_DIR`, `LULL_SOCKET`).

mod autostart;
mod bindings;
mod commands;
mod embedded;
mod notify;
mod probe;
mod tray;
mod windows;

use agent_core::agent::Notice;
use agent_core::config::Config;
use agent_core::paths::Paths;
use agent_core::policy::Action;
use anyhow::{bail, Context, Result};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex, OnceLock};
use tauri::{AppHandle, Manager, RunEvent};
use windows::Which;

const USAGE: &str = "usage: lull-tray [--open status|settings] [--no-tray] [--headless]

  --open WINDOW  open the status or settings window at start
  --no-tray      no tray icon: the status window instead (closing it quits)
  --headless     no window and no tray: only the agent (as `lull agent`)";

#[derive(Debug, Default)]
struct Args {
    open: Option<Which>,
    no_tray: bool,
    headless: bool,
}

fn parse_args() -> Result<Option<Args>> {
    let mut a = Args::default();
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--open" => {
                a.open = Some(match it.next().as_deref() {
                    Some("status") => Which::Status,
                    Some("settings") => Which::Settings,
                    other => bail!("--open takes status or settings, not {other:?}\n{USAGE}"),
                })
            }
            "--no-tray" => a.no_tray = true,
            "--headless" => a.headless = true,
            "--version" | "-V" => {
                println!("lull-tray {}", env!("CARGO_PKG_VERSION"));
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
    // GDK 3 probes GL visuals when it opens an X display, which maps Mesa (and LLVM):
    // ~25 MB that an idle tray app never uses. The windows are plain documents that WebKit
    // draws fine without GL in this process. LULL_TRAY_GL=1 keeps GDK's GL. This runs
    // first, before any thread exists.
    if std::env::var_os("GDK_DEBUG").is_none() && std::env::var_os("LULL_TRAY_GL").is_none_or(|v| v != "1") {
        std::env::set_var("GDK_DEBUG", "gl-disable");
    }
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("lull-tray: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<()> {
    let Some(args) = parse_args()? else { return Ok(()) };
    let paths = Paths::from_env()?;
    // A bad config is refused before anything starts, naming the field and its range.
    let config = Config::load(&paths.config_file)?;
    let _guard = agent_core::logging::init(&paths.log_dir, "tray")?;
    if args.headless {
        return headless(paths, config, "--headless given");
    }
    #[cfg(target_os = "linux")]
    if let Err(why) = probe::display() {
        return headless(paths, config, &why);
    }
    let fallback = if args.no_tray {
        Fallback::WindowOnly("the tray icon is off (--no-tray)".into())
    } else if let Err(why) = probe::appindicator() {
        Fallback::WindowOnly(why)
    } else {
        match probe::tray_host() {
            Some(host) => {
                tracing::info!("tray host: {host}");
                Fallback::None
            }
            None => Fallback::NoHost(
                "no tray host found (no StatusNotifierWatcher on D-Bus and no XEmbed tray): the tray icon may be invisible. \
                 On GNOME, install the AppIndicator extension."
                    .into(),
            ),
        }
    };
    if let Some(why) = fallback.reason() {
        eprintln!("lull-tray: {why}");
        tracing::warn!("{why}");
    }
    gui(paths, config, fallback, args.open)
}

/// No GUI: the agent alone, printing its state changes like `lull agent`.
fn headless(paths: Paths, config: Config, why: &str) -> Result<()> {
    eprintln!("lull-tray: {why}: running the headless agent (ask it with `lull status`; stop it with Ctrl-C)");
    tracing::warn!("{why}: running the headless agent");
    let observer: embedded::Observer = Box::new(|n: &Notice| {
        if let Notice::Action(now, Action::StateChanged { from, to, reason }) = n {
            println!("{}  {} → {}  ({reason})", now.local.format("%Y-%m-%d %H:%M:%S"), from.as_str(), to.as_str());
        }
    });
    embedded::run_blocking(paths, config, Some(observer), None)
}

/// How the GUI falls short of a tray icon, if it does.
#[derive(Clone, Debug)]
pub enum Fallback {
    None,
    /// No tray icon can be made: the status window stands in; closing it quits.
    WindowOnly(String),
    /// A tray icon is made but nothing may show it: the status window opens too.
    NoHost(String),
}

impl Fallback {
    pub fn reason(&self) -> Option<&str> {
        match self {
            Self::None => None,
            Self::WindowOnly(s) | Self::NoHost(s) => Some(s),
        }
    }
}

fn gui(paths: Paths, config: Config, fallback: Fallback, open: Option<Which>) -> Result<()> {
    let (ntx, nrx) = mpsc::channel::<Notice>();
    let handle: Arc<OnceLock<AppHandle>> = Arc::new(OnceLock::new());
    let agent_stopped = Arc::new(AtomicBool::new(false));
    let on_exit = {
        let (handle, stopped) = (handle.clone(), agent_stopped.clone());
        // The agent stopped (Quit, SIGTERM, or an error): the app ends with it. If the
        // app is not up yet, `setup` sees the flag and ends it there.
        Box::new(move || {
            stopped.store(true, Ordering::SeqCst);
            if let Some(h) = handle.get() {
                h.exit(0);
            }
        })
    };
    let observer: embedded::Observer = Box::new(move |n: &Notice| {
        let _ = ntx.send(n.clone());
    });
    let agent = embedded::Embedded::start(paths, config, observer, on_exit)?;
    let socket = agent.socket.clone();
    let agent = Arc::new(Mutex::new(Some(agent)));

    let with_tray = !matches!(fallback, Fallback::WindowOnly(_));
    let keep_running = matches!(fallback, Fallback::None);
    let first_window = match (&fallback, open) {
        (_, Some(w)) => Some(w),
        (Fallback::None, None) => None,
        _ => Some(Which::Status),
    };
    let app = tauri::Builder::default()
        .manage(commands::Ctx { socket: socket.clone(), fallback: fallback.reason().map(str::to_owned) })
        .manage(tray::ShownState::default())
        .invoke_handler(tauri::generate_handler![
            commands::status,
            commands::today,
            commands::get_settings,
            commands::save_settings,
            commands::open_window,
            commands::fallback
        ])
        .setup(move |app| {
            let h = app.handle().clone();
            let _ = handle.set(h.clone());
            if agent_stopped.load(Ordering::SeqCst) {
                h.exit(0);
                return Ok(());
            }
            if with_tray {
                let t = tray::build(&h, socket.clone(), |app| {
                    tracing::info!("quit from the tray menu");
                    app.exit(0)
                })?;
                app.manage(t);
            }
            if let Some(w) = first_window {
                windows::open(&h, w)?;
            }
            std::thread::Builder::new().name("tray-follow".into()).spawn(move || tray::follow(h, socket, nrx))?;
            Ok(())
        })
        .build(tauri::generate_context!())
        .context("starting the tray app")?;
    app.run(move |app, event| match event {
        RunEvent::WindowEvent { event: tauri::WindowEvent::Destroyed, .. } => windows::reap_helpers(app),
        // The last window closed: with a tray icon Lull keeps running; without one the
        // window was the app, so it ends.
        RunEvent::ExitRequested { api, code: None, .. } if keep_running => api.prevent_exit(),
        RunEvent::Exit => {
            if let Some(mut a) = agent.lock().unwrap_or_else(|e| e.into_inner()).take() {
                a.stop();
            }
            tracing::info!("lull-tray stopped");
        }
        _ => {}
    });
    Ok(())
}
