//! `lull-tray`: Lull's tray app. It runs the agent in-process (the same
//! `agent_core::agent::run` driver as `lull agent`, so there is one policy), shows its
//! state in a tray icon with a menu (the `tray-icon` crate: AppIndicator on GTK on Linux,
//! `Shell_NotifyIcon` on Windows, an `NSStatusItem` in the menu bar on macOS, each in its
//! toolkit's loop, [`mainloop`]), and opens the status and settings windows on demand in
//! a child process, `lull-window` (the Tauri webview app), which ends when its last window
//! closes. This process never loads a web engine.
//!
//! On Linux, before GTK or the tray is touched it checks what the desktop offers, because
//! they panic where something is missing:
//! - no display (or one that cannot be opened): says so, runs the headless agent;
//! - no AppIndicator library: says so, runs with the status window instead of a tray
//!   icon, with the tray menu's actions and a Quit Lull button in it;
//! - no tray host (e.g. GNOME without an AppIndicator extension): says so, builds the
//!   tray anyway (a host may appear) and opens the status window.
//!
//! On Windows the notification area and on macOS the menu bar are always there (tray-icon
//! adds the icon again when the taskbar restarts): no checks.
//!
//! Closing the last window never stops Lull: starting `lull-tray` again while it runs
//! shows its window ([`instance`]) instead of failing on the agent's lock.
//!
//! Windows: `lull-tray.exe` is a console program (no `windows_subsystem = "windows"`), so
//! `--help`, `--version`, its errors and the headless agent's lines reach the terminal it
//! was started from (a GUI-subsystem program has no console: they would be lost).
//!
//! Usage: `lull-tray [--open status|settings] [--no-tray] [--headless]`. The paths are
//! those of `lull` (`LULL_CONFIG`, `LULL_DATA_DIR`, `LULL_SOCKET`).

// Product code handles its errors; `.unwrap()` is for tests (clippy.toml allows it there).
#![warn(clippy::unwrap_used)]

#[cfg(not(any(target_os = "linux", windows, target_os = "macos")))]
compile_error!("lull-tray is built for Linux, Windows and macOS: elsewhere run the headless agent, `lull agent`");

mod actions;
mod embedded;
mod instance;
mod mainloop;
mod notify;
#[cfg(target_os = "linux")]
mod probe;
mod tray;
mod which;
mod windows;

use agent_core::agent::Notice;
use agent_core::config::Config;
use agent_core::paths::Paths;
use agent_core::policy::Action;
use anyhow::{bail, Result};
use std::process::ExitCode;
use std::sync::mpsc;
use which::Which;
use windows::Windows;

const USAGE: &str = "usage: lull-tray [--open status|settings] [--no-tray] [--headless]

  --open WINDOW  open the status or settings window at start
  --no-tray      no tray icon: the status window instead, with Donate now, Pause,
                 Resume and Quit Lull (closing it leaves Lull running)
  --headless     no window and no tray: only the agent (as `lull agent`)

Started again while it runs, lull-tray shows the running one's window and exits.";

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
                let w = it.next();
                match w.as_deref().and_then(Which::parse) {
                    Some(w) => a.open = Some(w),
                    None => bail!("--open takes status or settings, not {w:?}\n{USAGE}"),
                }
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
    // GDK 3 can map Mesa and LLVM for the XEmbed tray icon's visual (seen with a freshly
    // started trayer: 48 instead of 26 MB PSS, docs/BENCHMARKS.md), which the tray
    // process, drawing only an icon and a menu, never uses. `GDK_GL=disable` stops that (GTK 3.24
    // reads GDK_GL; `GDK_DEBUG=gl-disable` needs a debug build of GTK). The window process
    // does not inherit it. LULL_TRAY_GL=1 keeps GL. This runs first, before any thread.
    #[cfg_attr(not(target_os = "linux"), allow(unused_mut))]
    let mut unset = Vec::new();
    // Whatever this process writes is the owner's only (ledger, config, logs, keys).
    agent_core::private_files::owner_only_umask();
    #[cfg(target_os = "linux")]
    if std::env::var_os("GDK_GL").is_none() && std::env::var_os("LULL_TRAY_GL").is_none_or(|v| v != "1") {
        std::env::set_var("GDK_GL", "disable");
        unset.push("GDK_GL");
    }
    match run(unset) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("lull-tray: {}", agent_core::message::once(e.chain()));
            ExitCode::FAILURE
        }
    }
}

fn run(unset: Vec<&'static str>) -> Result<()> {
    let Some(args) = parse_args()? else { return Ok(()) };
    let paths = Paths::from_env()?;
    if !args.headless && show_running(&paths, args.open.unwrap_or(Which::Status))? {
        return Ok(());
    }
    // A bad config is refused before anything starts, naming the field and its range.
    let config = Config::load(&paths.config_file)?;
    let _guard = agent_core::logging::init(&paths.log_dir, "tray")?;
    if args.headless {
        return headless(paths, config, "--headless given");
    }
    desktop(args, paths, config, unset)
}

/// The tray icon in Windows' notification area or macOS's menu bar (or, with
/// `--no-tray`, the status window).
#[cfg(not(target_os = "linux"))]
fn desktop(args: Args, paths: Paths, config: Config, unset: Vec<&'static str>) -> Result<()> {
    let fallback = if args.no_tray { Fallback::WindowOnly("the tray icon is off (--no-tray)".into()) } else { Fallback::None };
    if let Some(why) = fallback.reason() {
        eprintln!("lull-tray: {why}");
        tracing::warn!("{why}");
    }
    gui(paths, config, fallback, args.open, unset)
}

/// The tray icon, or the status window where it cannot be shown; the headless agent
/// where there is no display.
#[cfg(target_os = "linux")]
fn desktop(args: Args, paths: Paths, config: Config, unset: Vec<&'static str>) -> Result<()> {
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
    gui(paths, config, fallback, args.open, unset)
}

/// Asks a `lull-tray` already running for these paths to show `which`: true when it has
/// (this start is done), false when none runs.
fn show_running(paths: &Paths, which: Which) -> Result<bool> {
    match instance::ask_to_show(&instance::socket_path(&paths.socket), which) {
        Ok(true) => {
            eprintln!("lull-tray: Lull is already running: showing its {} window", which.label());
            Ok(true)
        }
        Ok(false) => Ok(false),
        Err(e) => bail!("Lull is already running but cannot show its {} window: {e}", which.label()),
    }
}

/// No GUI: the agent alone, printing its state changes like `lull agent`.
fn headless(paths: Paths, config: Config, why: &str) -> Result<()> {
    eprintln!("lull-tray: {why}: running the headless agent (ask it with `lull status`; stop it with Ctrl-C)");
    tracing::warn!("{why}: running the headless agent");
    let observer: embedded::Observer = Box::new(|n: &Notice| match n {
        Notice::Action(now, Action::StateChanged { from, to, reason }) => {
            println!("{}  {} → {}  ({reason})", now.local.format("%Y-%m-%d %H:%M:%S"), from.as_str(), to.as_str());
        }
        Notice::Alert(a) => println!("attention: {}{}", a.message, a.action.as_deref().map(|x| format!(" — {x}")).unwrap_or_default()),
        _ => {}
    });
    embedded::run_blocking(paths, config, Some(observer), None)
}

/// How the GUI falls short of a tray icon, if it does.
#[derive(Clone, Debug)]
pub enum Fallback {
    None,
    /// No tray icon can be made: the status window stands in, with the menu's actions
    /// and Quit Lull.
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

fn gui(paths: Paths, config: Config, fallback: Fallback, open: Option<Which>, unset: Vec<&'static str>) -> Result<()> {
    // The tray lives on this thread, which runs the main loop below.
    mainloop::init()?;
    let (ntx, nrx) = mpsc::channel::<Notice>();
    let observer: embedded::Observer = Box::new(move |n: &Notice| {
        let _ = ntx.send(n.clone());
    });
    // The agent stopped (Quit, SIGTERM, or an error): the app ends with it.
    let agent = embedded::Embedded::start(paths, config, observer, Box::new(mainloop::quit))?;
    let socket = agent.socket.clone();

    let with_tray = !matches!(fallback, Fallback::WindowOnly(_));
    // Without a (visible) tray icon the window is the owner's only control: it must open.
    let window_needed = fallback.reason().is_some();
    let first_window = match (&fallback, open) {
        (_, Some(w)) => Some(w),
        (Fallback::None, None) => None,
        _ => Some(Which::Status),
    };
    // Lull keeps running when the last window closes (a second start brings it back);
    // Quit Lull in a window stops it.
    let windows = Windows::new(windows::window_bin()?, fallback.reason().map(str::to_owned), unset, mainloop::quit);
    let shower = windows.clone();
    let show = move |w: Which| shower.open(w).map_err(|e| format!("{e:#}"));
    let _listening = instance::listen(&instance::socket_path(&socket), show)
        .map_err(|e| tracing::warn!("starting Lull again will not bring its window back: {e}"))
        .ok();
    if with_tray {
        tray::build(socket.clone(), windows.clone(), || {
            tracing::info!("quit from the tray menu");
            mainloop::quit();
        })
        .map_err(|e| anyhow::anyhow!("building the tray icon: {e}"))?;
        #[cfg(windows)]
        tray::check_shown();
    }
    if let Some(w) = first_window {
        if let Err(e) = windows.open(w) {
            if window_needed {
                return Err(e.context("the window stands in for the tray icon"));
            }
            tracing::error!("cannot open the {} window: {e:#}", w.label());
        }
    }
    std::thread::Builder::new().name("tray-follow".into()).spawn(move || tray::follow(socket, nrx, with_tray))?;
    mainloop::run();
    windows.close();
    drop(agent); // stops the agent: ledger flushed, socket removed
    tracing::info!("lull-tray stopped");
    Ok(())
}
