//! End-to-end tests of the real `lull-tray` binary: under Xvfb with `trayer` as the tray
//! host, the tray icon is clicked with xdotool and menu items chosen with the keyboard;
//! every effect is checked through the agent's control socket (the endpoint `lull` uses).
//! The status and settings windows are screenshotted into `artifacts/tray/`.
//!
//! Needs Xvfb, trayer, xdotool and ImageMagick's `import`; each test skips when they are
//! missing unless `LULL_REQUIRE_TRAY=1` (scripts/test.sh sets it). The no-display test
//! needs nothing and always runs.

use agent_core::control::{call, AgentStatus, Request, Response};
use agent_core::policy::{PauseSpan, SavedPause, StateKind};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_lull-tray");

fn required() -> bool {
    std::env::var("LULL_REQUIRE_TRAY").is_ok_and(|v| v == "1")
}

/// True (after saying why) when the tools for a GUI test are missing and not required.
fn skip_gui() -> bool {
    let missing: Vec<_> = ["Xvfb", "trayer", "xdotool", "import"]
        .into_iter()
        .filter(|t| !Command::new("sh").arg("-c").arg(format!("command -v {t}")).stdout(Stdio::null()).status().is_ok_and(|s| s.success()))
        .collect();
    if missing.is_empty() {
        return false;
    }
    assert!(!required(), "LULL_REQUIRE_TRAY=1 but {missing:?} are not installed (scripts/deps.sh test)");
    eprintln!("SKIPPED: {missing:?} not installed (set LULL_REQUIRE_TRAY=1 to require them)");
    true
}

/// Where screenshots are kept: `artifacts/tray/` in the workspace.
fn artifacts() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../artifacts/tray");
    std::fs::create_dir_all(&dir).expect("artifacts dir");
    dir
}

/// A child killed on drop.
struct Proc(Child);
impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// An Xvfb server with trayer as tray host. One at a time: the tests of this file run
/// their desktops one after the other (two WebKit windows rendering at once on a 2-core
/// machine made the windows' timeouts flaky), the headless tests beside them.
struct Desktop {
    display: String,
    _xvfb: lull_e2e::Xvfb,
    _trayer: Option<Proc>,
    _one_at_a_time: std::sync::MutexGuard<'static, ()>,
}

static DESKTOP: std::sync::Mutex<()> = std::sync::Mutex::new(());

impl Desktop {
    fn start(with_tray_host: bool) -> Self {
        // A test that failed with the lock held poisons it; the next desktop is still fine.
        let one_at_a_time = DESKTOP.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        // The harness's Xvfb, on a display number it picks (-displayfd), large enough for
        // the windows' screenshots.
        let xvfb = lull_e2e::Xvfb::try_start_with_screen("1280x960x24").expect("start Xvfb");
        let display = xvfb.display.clone();
        let trayer = with_tray_host.then(|| {
            let t = Command::new("trayer")
                .args(["--edge", "top", "--align", "left", "--widthtype", "pixel", "--width", "120", "--height", "32"])
                .args(["--heighttype", "pixel", "--SetDockType", "false", "--transparent", "false", "--tint", "0xeeeeee"])
                .env("DISPLAY", &display)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("start trayer");
            Proc(t)
        });
        let d = Self { display, _xvfb: xvfb, _trayer: trayer, _one_at_a_time: one_at_a_time };
        if with_tray_host {
            wait_until("trayer window", Duration::from_secs(10), || d.find_window(&["--class", "trayer"]).is_some());
        }
        d
    }

    fn xdotool(&self, args: &[&str]) -> Output {
        Command::new("xdotool").args(args).env("DISPLAY", &self.display).output().expect("xdotool")
    }

    fn find_window(&self, query: &[&str]) -> Option<String> {
        let mut args = vec!["search", "--onlyvisible"];
        args.extend_from_slice(query);
        let out = self.xdotool(&args);
        String::from_utf8_lossy(&out.stdout).lines().last().map(str::to_owned)
    }

    /// Window geometry: x, y, width, height.
    fn geometry(&self, win: &str) -> (i32, i32, i32, i32) {
        let out = self.xdotool(&["getwindowgeometry", "--shell", win]);
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        let get = |k: &str| text.lines().find_map(|l| l.strip_prefix(&format!("{k}="))).and_then(|v| v.trim().parse().ok()).unwrap_or(0);
        (get("X"), get("Y"), get("WIDTH"), get("HEIGHT"))
    }

    /// Turns the mouse wheel `clicks` notches down over the middle of `win`.
    fn scroll_down(&self, win: &str, clicks: usize) {
        let (x, y, w, h) = self.geometry(win);
        self.xdotool(&["mousemove", &(x + w / 2).to_string(), &(y + h / 2).to_string()]);
        for _ in 0..clicks {
            self.xdotool(&["click", "5"]);
        }
        std::thread::sleep(Duration::from_millis(500));
    }

    fn screenshot(&self, name: &str) -> PathBuf {
        let path = artifacts().join(name);
        let ok =
            Command::new("import").args(["-window", "root"]).arg(&path).env("DISPLAY", &self.display).status().is_ok_and(|s| s.success());
        assert!(ok, "screenshot {name}");
        path
    }

    fn keys(&self, keys: &[&str]) {
        for k in keys {
            self.xdotool(&["key", "--delay", "60", k]);
            std::thread::sleep(Duration::from_millis(150));
        }
    }
}

/// A `lull-tray` process in its own directories, its guests under a cgroup base of its
/// own (purged on drop: the tray app is a full agent and runs guests).
struct Tray {
    dir: tempfile::TempDir,
    child: Option<Child>,
    display: Option<String>,
    cgroup_base: String,
}

impl Tray {
    fn new(config: &str) -> Self {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::write(dir.path().join("config.toml"), config).expect("config");
        Self { dir, child: None, display: None, cgroup_base: format!("lull-tray-test-{}-{n}", std::process::id()) }
    }

    fn socket(&self) -> PathBuf {
        self.dir.path().join("agent.sock")
    }

    fn command(&self, args: &[&str]) -> Command {
        let d = self.dir.path();
        let mut c = Command::new(BIN);
        c.args(args)
            .env("LULL_CONFIG", d.join("config.toml"))
            .env("LULL_DATA_DIR", d)
            .env("LULL_SOCKET", self.socket())
            .env("LULL_CGROUP", &self.cgroup_base)
            .env("XDG_CONFIG_HOME", d.join("xdg-config"))
            .env("NO_AT_BRIDGE", "1")
            .env("WEBKIT_DISABLE_DMABUF_RENDERER", "1")
            .env("WEBKIT_DISABLE_COMPOSITING_MODE", "1")
            .env("LIBGL_ALWAYS_SOFTWARE", "1")
            .env("LULL_LOG", "info")
            .env_remove("WAYLAND_DISPLAY")
            // No session bus (and none autolaunched): the tray then uses XEmbed (trayer).
            .env("DBUS_SESSION_BUS_ADDRESS", format!("unix:path={}", d.join("no-bus").display()));
        match &self.display {
            Some(dpy) => c.env("DISPLAY", dpy),
            None => c.env_remove("DISPLAY"),
        };
        c
    }

    fn start(&mut self, args: &[&str]) {
        let out = std::fs::OpenOptions::new().create(true).append(true).open(self.dir.path().join("out.txt")).expect("out");
        let err = out.try_clone().expect("clone");
        let child = self.command(args).stdout(out).stderr(err).spawn().expect("spawn lull-tray");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            if self.try_status().is_some() {
                return;
            }
            if let Some(Ok(Some(st))) = self.child.as_mut().map(|c| c.try_wait()) {
                panic!("lull-tray exited early ({st}):\n{}", self.output());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("lull-tray did not answer within 60 s:\n{}", self.output());
    }

    /// The running agent's configuration.
    fn config(&self) -> Box<agent_core::config::Config> {
        match call(&self.socket(), &Request::GetConfig).expect("config") {
            Response::Config { config } => config,
            other => panic!("{other:?}"),
        }
    }

    fn output(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("out.txt")).unwrap_or_default()
    }

    fn log(&self) -> String {
        let mut all = String::new();
        for e in std::fs::read_dir(self.dir.path().join("logs")).into_iter().flatten().flatten() {
            all += &std::fs::read_to_string(e.path()).unwrap_or_default();
        }
        all
    }

    fn try_status(&self) -> Option<AgentStatus> {
        match call(&self.socket(), &Request::Status) {
            Ok(Response::Status(s)) => Some(*s),
            _ => None,
        }
    }

    fn wait_for(&self, what: &str, pred: impl Fn(&AgentStatus) -> bool) -> AgentStatus {
        let deadline = Instant::now() + Duration::from_secs(15);
        let mut last = None;
        while Instant::now() < deadline {
            if let Some(s) = self.try_status() {
                if pred(&s) {
                    return s;
                }
                last = Some(s);
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("timed out waiting for {what}; last status {last:#?}\noutput:\n{}\nlog:\n{}", self.output(), self.log());
    }

    fn sigterm_and_wait(&mut self) -> std::process::ExitStatus {
        let mut c = self.child.take().expect("running");
        // SAFETY: kill with the pid of a child we spawned.
        unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
        let st = wait_exit_or_kill(&mut c, Duration::from_secs(20));
        st.unwrap_or_else(|| panic!("lull-tray did not exit within 20 s of SIGTERM:\n{}\nlog:\n{}", self.output(), self.log()))
    }
}

impl Drop for Tray {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        lull_e2e::purge_cgroup_base(&self.cgroup_base);
    }
}

fn wait_exit_or_kill(c: &mut Child, timeout: Duration) -> Option<std::process::ExitStatus> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Ok(Some(st)) = c.try_wait() {
            return Some(st);
        }
        if Instant::now() > deadline {
            let _ = c.kill();
            let _ = c.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Whether a process has a WebKit library mapped.
fn maps_webkit(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/maps")).expect("maps").contains("libwebkit2gtk")
}

/// The command names of a process's descendants.
fn descendants(pid: u32) -> Vec<String> {
    let out = Command::new("ps").args(["-e", "-o", "pid=,ppid=,comm="]).output().expect("ps");
    let rows: Vec<(u32, u32, String)> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?, it.collect::<Vec<_>>().join(" ")))
        })
        .collect();
    let mut family = vec![pid];
    let mut names = Vec::new();
    let mut grew = true;
    while grew {
        grew = false;
        for (p, pp, name) in &rows {
            if family.contains(pp) && !family.contains(p) {
                family.push(*p);
                names.push(name.clone());
                grew = true;
            }
        }
    }
    names
}

fn wait_until(what: &str, timeout: Duration, f: impl Fn() -> bool) {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if f() {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("timed out waiting for {what}");
}

/// Opens the tray menu by clicking the icon in trayer, then presses `keys`.
fn menu(desk: &Desktop, keys: &[&str]) {
    menu_shot(desk, None, keys)
}

/// As [`menu`], taking a screenshot of the open menu first.
fn menu_shot(desk: &Desktop, shot: Option<&str>, keys: &[&str]) {
    let panel = desk.find_window(&["--class", "trayer"]).expect("trayer window");
    let (x, y, _w, h) = desk.geometry(&panel);
    // The only icon sits at the panel's left end.
    let (cx, cy) = (x + h / 2, y + h / 2);
    desk.xdotool(&["mousemove", &cx.to_string(), &cy.to_string()]);
    std::thread::sleep(Duration::from_millis(200));
    desk.xdotool(&["click", "1"]);
    std::thread::sleep(Duration::from_millis(700));
    if let Some(name) = shot {
        desk.screenshot(name);
    }
    desk.keys(keys);
}

#[test]
fn tray_menu_drives_the_embedded_agent_and_status_window_opens() {
    if skip_gui() {
        return;
    }
    let desk = Desktop::start(true);
    let mut tray = Tray::new("[sampling]\ninterval_ms = 200\n");
    tray.display = Some(desk.display.clone());
    tray.start(&[]);
    wait_until("the tray icon", Duration::from_secs(20), || tray.log().contains("tray shows state"));
    std::thread::sleep(Duration::from_millis(800));
    desk.screenshot("tray-icon.png");
    let pid = tray.child.as_ref().expect("running").id();
    // The only child with no window open: the guest runtime's no-orphans watchdog.
    let children = descendants(pid);
    assert!(children.iter().all(|n| n == "lull-watchdog"), "no window, no child process but the watchdog: {children:?}");
    assert!(!maps_webkit(pid), "the idle tray process maps no WebKit library");

    // Menu: [headline (disabled)], Donate now ▸, Pause ▸, Resume, Open Lull, Settings, Quit.
    // Pause ▸ Until I resume.
    menu_shot(&desk, Some("tray-menu.png"), &["Down", "Down", "Right", "Down", "Down", "Down", "Return"]);
    let s = tray.wait_for("paused until resumed", |s| s.policy.state == StateKind::Paused);
    assert_eq!(s.policy.pause, Some(SavedPause::UntilResumed), "{s:#?}");
    wait_until("paused icon", Duration::from_secs(10), || tray.log().contains("tray shows state state=\"paused\""));
    desk.screenshot("tray-paused.png");

    // Resume.
    menu(&desk, &["Down", "Down", "Down", "Return"]);
    tray.wait_for("resumed", |s| s.policy.state != StateKind::Paused);

    // Pause ▸ For 3 hours.
    menu(&desk, &["Down", "Down", "Right", "Down", "Return"]);
    let s = tray.wait_for("paused for 3 h", |s| s.policy.state == StateKind::Paused);
    let left = s.policy.paused_for_s.expect("a timed pause");
    assert!((3 * 3600 - 60..=3 * 3600).contains(&left), "{left}");

    // Donate now ▸ For 1 hour (overrides the pause).
    menu(&desk, &["Down", "Right", "Return"]);
    let s = tray.wait_for("donating now", |s| s.policy.donate_now);
    let left = s.policy.donate_for_s.expect("a timed offer");
    assert!((3600 - 60..=3600).contains(&left), "{left}");
    // The CLI's request reaches the same agent the menu drove.
    let again = call(&tray.socket(), &Request::Pause { span: PauseSpan::For { secs: 3600 } }).expect("pause over the socket");
    assert!(matches!(again, Response::Status(s) if s.policy.state == StateKind::Paused));

    // Open Lull: the status window.
    menu(&desk, &["Down", "Down", "Down", "Down", "Return"]);
    wait_until("the status window", Duration::from_secs(30), || desk.find_window(&["--name", "^Lull$"]).is_some());
    std::thread::sleep(Duration::from_secs(4)); // let the page load and draw its chart
    let shot = desk.screenshot("status-window.png");
    assert!(std::fs::metadata(&shot).map(|m| m.len()).unwrap_or(0) > 10_000, "a real screenshot");
    // The window runs in a child process, `lull-window`, with WebKit's processes under
    // it; the tray process itself never maps WebKit.
    let family = descendants(pid);
    assert!(family.iter().any(|n| n == "lull-window"), "the window runs in lull-window: {family:?}");
    assert!(family.iter().any(|n| n.starts_with("WebKitWebProces")), "a web process renders the open window: {family:?}");
    assert!(!maps_webkit(pid), "the tray process maps no WebKit library, even with a window open");

    // Settings from the tray while the status window is open: the same window process
    // opens it (one WebKit for both windows). The window sits over trayer's panel: move
    // it aside first.
    let win = desk.find_window(&["--name", "^Lull$"]).expect("status window");
    desk.xdotool(&["windowmove", "--sync", &win, "300", "200"]);
    menu(&desk, &["Down", "Down", "Down", "Down", "Down", "Return"]);
    wait_until("the settings window", Duration::from_secs(30), || desk.find_window(&["--name", "^Lull settings"]).is_some());
    let family = descendants(pid);
    assert_eq!(family.iter().filter(|n| *n == "lull-window").count(), 1, "one window process for both windows: {family:?}");
    std::thread::sleep(Duration::from_secs(3)); // let the page load
    desk.screenshot("settings-over-status.png");
    let win = desk.find_window(&["--name", "^Lull settings"]).expect("settings window");
    desk.xdotool(&["windowfocus", "--sync", &win]);
    desk.keys(&["Escape"]);
    wait_until("the settings window to close", Duration::from_secs(10), || desk.find_window(&["--name", "^Lull settings"]).is_none());
    assert!(descendants(pid).iter().any(|n| n == "lull-window"), "the status window is still open, so its process runs on");

    // Esc closes the window; the app and its agent keep running.
    let win = desk.find_window(&["--name", "^Lull$"]).expect("status window");
    desk.xdotool(&["windowfocus", "--sync", &win]);
    desk.keys(&["Escape"]);
    wait_until("the status window to close", Duration::from_secs(10), || desk.find_window(&["--name", "^Lull$"]).is_none());
    assert!(tray.try_status().is_some(), "the agent runs on with no window open");
    // The window's WebKit processes went with it: nothing of WebKit runs while no window
    // is open.
    wait_until("the window process and WebKit's to end", Duration::from_secs(15), || {
        !descendants(pid).iter().any(|n| n.starts_with("WebKit") || n == "lull-window")
    });

    // And a window opens again afterwards (WebKit starts new helpers).
    menu(&desk, &["Down", "Down", "Down", "Down", "Return"]);
    wait_until("the status window again", Duration::from_secs(30), || desk.find_window(&["--name", "^Lull$"]).is_some());
    std::thread::sleep(Duration::from_secs(3));
    let shot = desk.screenshot("status-window-reopened.png");
    assert!(std::fs::metadata(&shot).map(|m| m.len()).unwrap_or(0) > 10_000, "the reopened window draws");
    assert!(descendants(pid).iter().any(|n| n.starts_with("WebKitNetworkPr")), "a new network process serves it");
    let win = desk.find_window(&["--name", "^Lull$"]).expect("status window");
    desk.xdotool(&["windowfocus", "--sync", &win]);
    desk.keys(&["Escape"]);
    wait_until("the status window to close again", Duration::from_secs(10), || desk.find_window(&["--name", "^Lull$"]).is_none());

    // Quit: the app ends, and its agent with it (socket removed).
    menu(&desk, &["Up", "Return"]);
    let mut child = tray.child.take().expect("running");
    let st = wait_exit_or_kill(&mut child, Duration::from_secs(20))
        .unwrap_or_else(|| panic!("lull-tray did not exit within 20 s of Quit:\n{}\nlog:\n{}", tray.output(), tray.log()));
    assert!(st.success(), "{st}\n{}", tray.output());
    assert!(!tray.socket().exists(), "socket removed on quit");
}

#[test]
fn settings_round_trip_and_invalid_value_is_refused_in_the_window() {
    if skip_gui() {
        return;
    }
    let desk = Desktop::start(true);
    let mut tray = Tray::new("");
    tray.display = Some(desk.display.clone());
    tray.start(&["--open", "settings"]);
    wait_until("the settings window", Duration::from_secs(30), || desk.find_window(&["--name", "^Lull settings$"]).is_some());
    std::thread::sleep(Duration::from_secs(3));
    let win = desk.find_window(&["--name", "^Lull settings$"]).expect("settings window");
    desk.xdotool(&["windowfocus", "--sync", &win]);
    desk.screenshot("settings-window.png");

    // The limit field has the focus: type an out-of-range value and press Enter.
    desk.keys(&["ctrl+a", "2", "5", "Return"]);
    wait_until("the refusal", Duration::from_secs(10), || {
        desk.find_window(&["--name", r"not saved \(budget.interruptions_per_day\)"]).is_some()
    });
    desk.screenshot("settings-refused.png");
    assert!(tray.log().contains("settings refused"), "{}", tray.log());
    let cfg = tray.config();
    assert_eq!(cfg.budget.interruptions_per_day, 5, "the refused value was not applied");

    // A valid value is saved and applied at once.
    desk.keys(&["ctrl+a", "3", "Return"]);
    wait_until("the save", Duration::from_secs(10), || desk.find_window(&["--name", "Lull settings: saved"]).is_some());
    desk.screenshot("settings-saved.png");
    // The rest of the form: scroll down over the window.
    desk.scroll_down(&win, 25);
    desk.screenshot("settings-bottom.png");
    tray.wait_for("limit 3", |s| s.policy.interruption_limit == 3);

    // After a restart the agent enforces what the window set.
    let st = tray.sigterm_and_wait();
    assert!(st.success(), "{st}\n{}", tray.output());
    tray.start(&[]);
    let s = tray.wait_for("limit 3 after restart", |s| s.policy.interruption_limit == 3);
    assert_eq!(s.policy.interruption_limit, 3);
    let text = std::fs::read_to_string(tray.dir.path().join("config.toml")).expect("config file");
    assert!(text.contains("interruptions_per_day = 3"), "{text}");
    tray.sigterm_and_wait();
}

/// The owner's books in the tray (issue 27): a tray app whose ledger and today's record
/// were both deleted while it was stopped starts with today's budget used up, and says so
/// in the tray's headline (the menu's first line, which Linux hosts show instead of a
/// tooltip: logged as "tray shows attention") and in the status window, whose title then
/// names the alert's kind.
#[test]
fn a_lost_ledger_is_said_in_the_tray_and_the_status_window() {
    if skip_gui() {
        return;
    }
    let desk = Desktop::start(true);
    let mut tray = Tray::new("");
    tray.display = Some(desk.display.clone());
    tray.start(&[]);
    wait_until("the tray icon", Duration::from_secs(20), || tray.log().contains("tray shows state"));
    assert!(!tray.log().contains("tray shows attention"), "nothing to say at first:\n{}", tray.log());
    let st = tray.sigterm_and_wait();
    assert!(st.success(), "{st}\n{}", tray.output());
    std::fs::remove_file(tray.dir.path().join("ledger.db")).expect("rm ledger");
    let _ = std::fs::remove_file(tray.dir.path().join("ledger.today"));

    tray.start(&["--open", "status"]);
    let s = tray.wait_for("the day used up", |s| s.policy.state == StateKind::OutOfBudget);
    assert_eq!(s.policy.interruptions_today, s.policy.interruption_limit, "{s:#?}");
    wait_until("the tray's attention line", Duration::from_secs(20), || {
        tray.log().contains("tray shows attention attention=\"Attention: the ledger was damaged or lost (Open Lull says what was kept)\"")
    });
    wait_until("the status window naming the alert", Duration::from_secs(30), || {
        desk.find_window(&["--name", r"^Lull: attention \(ledger_recovered\)$"]).is_some()
    });
    std::thread::sleep(Duration::from_secs(2));
    desk.screenshot("status-window-ledger-recovered.png");
    let win = desk.find_window(&["--name", r"^Lull: attention"]).expect("status window");
    desk.xdotool(&["windowmove", "--sync", &win, "300", "200"]);
    menu_shot(&desk, Some("tray-menu-ledger-recovered.png"), &["Escape"]);
    tray.sigterm_and_wait();
}

/// The "lend while light" switch (issue 13, seed 000's lingering that starts work): off by
/// default; flipped in the real Settings window with the keyboard and saved, the running
/// agent's configuration and its status say it is on, the owner's config file holds it,
/// and a restarted agent still lends while light.
#[test]
fn settings_turns_lend_while_light_on_and_the_agent_reports_it() {
    if skip_gui() {
        return;
    }
    let desk = Desktop::start(true);
    let mut tray = Tray::new("");
    tray.display = Some(desk.display.clone());
    tray.start(&["--open", "settings"]);
    let s = tray.wait_for("the agent", |_| true);
    assert!(!s.policy.lend_while_light && !tray.config().availability.lend_while_light, "off by default");
    wait_until("the settings window", Duration::from_secs(30), || desk.find_window(&["--name", "^Lull settings$"]).is_some());
    std::thread::sleep(Duration::from_secs(3));
    let win = desk.find_window(&["--name", "^Lull settings$"]).expect("settings window");
    desk.xdotool(&["windowfocus", "--sync", &win]);
    // From the limit field (focused): the CPU field, the threshold field, the calibrate
    // button, the eviction mode (one stop for the radio group), the switch; space flips it.
    desk.keys(&["Tab", "Tab", "Tab", "Tab", "Tab", "space"]);
    std::thread::sleep(Duration::from_millis(500));
    desk.screenshot("settings-lend-while-light.png");
    // Switched on, the form shows the light limits: Tab to the first, Enter saves.
    desk.keys(&["Tab", "Return"]);
    wait_until("the save", Duration::from_secs(10), || desk.find_window(&["--name", "Lull settings: saved"]).is_some());
    // The running agent, over its control socket (what `lull limits --json` and `lull
    // status --json` print): the status's policy and its configuration say on.
    tray.wait_for("lend while light on", |s| s.policy.lend_while_light);
    let cfg = tray.config();
    assert!(cfg.availability.lend_while_light, "the agent's configuration");
    assert!(tray.log().contains("settings saved"), "{}", tray.log());
    let text = std::fs::read_to_string(tray.dir.path().join("config.toml")).expect("config file");
    assert!(text.contains("lend_while_light = true"), "{text}");
    // Nothing else was changed by the form.
    assert_eq!(cfg.budget.interruptions_per_day, agent_core::config::Config::default().budget.interruptions_per_day);

    // After a restart the agent still lends while light.
    let st = tray.sigterm_and_wait();
    assert!(st.success(), "{st}\n{}", tray.output());
    tray.start(&[]);
    tray.wait_for("lend while light on after restart", |s| s.policy.lend_while_light);
    tray.sigterm_and_wait();
}

/// Four days of the owner's recorded activity, ending now, in the tray's own ledger:
/// nights away at 2 % CPU, working hours at 60 % with input, a long break at noon.
fn four_days_of_history(ledger: &std::path::Path) {
    let mut l = agent_core::ledger::Ledger::open(ledger).expect("ledger");
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock after 1970").as_secs() as i64;
    let from = now - 4 * 86_400;
    let rows: Vec<_> = (from..now)
        .step_by(10)
        .map(|t| {
            let (owner_cpu, input) = match (t % 86_400) / 3600 {
                9..=11 | 14..=17 => (0.6, true),
                _ => (0.02, false),
            };
            agent_core::ledger::TraceRow { t, owner_cpu, owner_mem_bytes: 1 << 30, input }
        })
        .collect();
    l.append_trace(&rows).expect("trace");
}

#[test]
fn settings_calibrates_from_the_recorded_trace_and_saves_it() {
    if skip_gui() {
        return;
    }
    let desk = Desktop::start(true);
    let mut tray = Tray::new("[budget]\ninterruptions_per_day = 3\n");
    four_days_of_history(&tray.dir.path().join("ledger.db"));
    // What `lull calibrate` derives from the same ledger (the same function).
    let expected = agent_core::calibration::of_this_machine(&tray.dir.path().join("ledger.db"), 3, {
        use chrono::Offset as _;
        chrono::Local::now().offset().fix().local_minus_utc() as i64
    })
    .expect("ledger")
    .expect("four days are enough");
    tray.display = Some(desk.display.clone());
    tray.start(&["--open", "settings"]);
    wait_until("the settings window", Duration::from_secs(30), || desk.find_window(&["--name", "^Lull settings$"]).is_some());
    std::thread::sleep(Duration::from_secs(3));
    let win = desk.find_window(&["--name", "^Lull settings$"]).expect("settings window");
    desk.xdotool(&["windowfocus", "--sync", &win]);
    // From the limit field (focused): the CPU field, the threshold field, the button.
    desk.keys(&["Tab", "Tab", "Tab", "space"]);
    wait_until("the calibration", Duration::from_secs(20), || desk.find_window(&["--name", "Lull settings: calibration ready"]).is_some());
    std::thread::sleep(Duration::from_millis(500));
    desk.screenshot("settings-calibration.png");
    // The plot, below the reasoning (the wheel scrolls; the focus stays on the button).
    desk.scroll_down(&win, 6);
    desk.screenshot("settings-calibration-plot.png");
    // The next button is "Use these values"; back to the threshold field and Enter saves.
    desk.keys(&["Tab", "space"]);
    wait_until("the values in the form", Duration::from_secs(10), || {
        desk.find_window(&["--name", "Lull settings: calibrated values not saved yet"]).is_some()
    });
    desk.keys(&["shift+Tab", "shift+Tab", "Return"]);
    wait_until("the save", Duration::from_secs(10), || desk.find_window(&["--name", "Lull settings: saved"]).is_some());
    let cfg = tray.config();
    assert_eq!(cfg.availability.recruitment_threshold_s, expected.recruitment_threshold_s);
    assert!(
        (cfg.availability.owner_cpu_max - expected.owner_cpu_max).abs() < 1e-6,
        "{} vs {}",
        cfg.availability.owner_cpu_max,
        expected.owner_cpu_max
    );
    assert!(tray.log().contains("calibration asked for from the settings window"), "{}", tray.log());
    tray.sigterm_and_wait();
}

#[test]
fn without_a_display_it_runs_the_headless_agent() {
    let mut tray = Tray::new("[sampling]\ninterval_ms = 200\n");
    tray.start(&[]);
    let s = tray.wait_for("a running agent", |_| true);
    assert_eq!(s.pid, tray.child.as_ref().expect("running").id(), "the agent runs inside lull-tray");
    let st = tray.sigterm_and_wait();
    assert!(st.success(), "{st}\n{}", tray.output());
    let out = tray.output();
    assert!(out.contains("no display") && out.contains("headless agent"), "{out}");
    assert!(!out.contains("panicked"), "{out}");
}

#[test]
fn a_display_that_cannot_be_opened_also_falls_back() {
    let mut tray = Tray::new("");
    tray.display = Some(":7391".into()); // nothing listens there
    tray.start(&[]);
    let st = tray.sigterm_and_wait();
    assert!(st.success(), "{st}\n{}", tray.output());
    let out = tray.output();
    assert!(out.contains("cannot open the display") && out.contains("headless agent"), "{out}");
}

#[test]
fn without_the_appindicator_library_it_shows_the_status_window_instead() {
    if skip_gui() {
        return;
    }
    // SAFETY: getuid has no preconditions.
    if unsafe { libc::getuid() } != 0 {
        assert!(!required(), "LULL_REQUIRE_TRAY=1: this test hides the library with a private bind mount, which needs root");
        eprintln!("SKIPPED: hiding the AppIndicator library needs root (a private mount namespace)");
        return;
    }
    // Hide the real library from this one process: in a private mount namespace, bind
    // /dev/null over it, so dlopen fails exactly as on a machine without it.
    let lib = Path::new("/usr/lib/x86_64-linux-gnu/libayatana-appindicator3.so.1.0.0");
    if !lib.exists() {
        assert!(!required(), "LULL_REQUIRE_TRAY=1 but {} is missing", lib.display());
        eprintln!("SKIPPED: no {} to hide", lib.display());
        return;
    }
    let desk = Desktop::start(true);
    let mut tray = Tray::new("");
    tray.display = Some(desk.display.clone());
    let cmd = tray.command(&[]);
    let inner = format!("mount --bind /dev/null {} && exec \"$0\"", lib.display());
    let prog = cmd.get_program().to_owned();
    let mut wrapped = Command::new("unshare");
    wrapped.args(["-m", "sh", "-c", &inner]).arg(prog);
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => wrapped.env(k, v),
            None => wrapped.env_remove(k),
        };
    }
    let out = std::fs::File::create(tray.dir.path().join("out.txt")).expect("out");
    wrapped.stdout(out.try_clone().expect("clone")).stderr(out);
    tray.child = Some(wrapped.spawn().expect("spawn under unshare"));
    wait_until("the status window", Duration::from_secs(60), || desk.find_window(&["--name", "^Lull$"]).is_some());
    let s = tray.wait_for("a running agent", |_| true);
    assert_eq!(s.pid, tray.child.as_ref().expect("running").id(), "the agent runs inside lull-tray");
    std::thread::sleep(Duration::from_secs(3));
    desk.screenshot("no-appindicator-window.png");
    let out = tray.output();
    assert!(out.contains("no AppIndicator library"), "{out}");
    assert!(!out.contains("panicked"), "{out}");
    assert!(!tray.log().contains("tray shows state"), "no tray icon was made");
    the_fallback_window_is_the_owners_control(&desk, &mut tray);
}

/// Without a tray icon the status window is the owner's only control (issue 28): its
/// buttons do what the tray menu does, Esc only closes it (Lull runs on), starting
/// `lull-tray` again brings it back, and its Quit Lull stops Lull. Driven with the
/// keyboard from the top of the page, whose buttons come in this order: Donate now ▸ For
/// 1 hour, Until I return; Pause ▸ For 1 hour, For 3 hours, Until tomorrow, Until I
/// resume; Resume (skipped while disabled); Settings…; Quit Lull.
fn the_fallback_window_is_the_owners_control(desk: &Desktop, tray: &mut Tray) {
    let pid = tray.child.as_ref().expect("running").id();
    let win = desk.find_window(&["--name", "^Lull$"]).expect("status window");
    desk.xdotool(&["windowfocus", "--sync", &win]);
    desk.keys(&["Tab", "space"]);
    let s = tray.wait_for("donating now, from the window", |s| s.policy.donate_now);
    let left = s.policy.donate_for_s.expect("a timed offer");
    assert!((3600 - 60..=3600).contains(&left), "{left}");
    desk.keys(&["Tab", "Tab", "Tab", "space"]);
    let s = tray.wait_for("paused for 3 h, from the window", |s| s.policy.state == StateKind::Paused);
    let left = s.policy.paused_for_s.expect("a timed pause");
    assert!((3 * 3600 - 60..=3 * 3600).contains(&left), "{left}");
    std::thread::sleep(Duration::from_millis(500));
    desk.screenshot("no-appindicator-window-paused.png");
    desk.keys(&["Tab", "Tab", "Tab", "space"]);
    tray.wait_for("resumed, from the window", |s| s.policy.state != StateKind::Paused && !s.policy.donate_now);

    // Esc closes the window, and only the window: the agent runs on.
    desk.keys(&["Escape"]);
    wait_until("the status window to close", Duration::from_secs(10), || desk.find_window(&["--name", "^Lull$"]).is_none());
    wait_until("the window process to end", Duration::from_secs(15), || !descendants(pid).iter().any(|n| n == "lull-window"));
    std::thread::sleep(Duration::from_secs(2));
    let c = tray.child.as_mut().expect("running");
    assert!(matches!(c.try_wait(), Ok(None)), "lull-tray ended with its window:\n{}\n{}", tray.output(), tray.log());
    assert_eq!(tray.try_status().map(|s| s.pid), Some(pid), "the agent runs on with no window open");

    // Starting Lull again shows the running one's window, and the second start ends.
    let mut again = tray.command(&[]).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("start lull-tray again");
    let st = wait_exit_or_kill(&mut again, Duration::from_secs(30)).expect("the second start ends");
    let out = again.wait_with_output().expect("its output");
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(st.success() && said.contains("already running"), "{st}: {said}");
    wait_until("the status window again", Duration::from_secs(30), || desk.find_window(&["--name", "^Lull$"]).is_some());
    assert_eq!(tray.try_status().map(|s| s.pid), Some(pid), "still the first agent");
    std::thread::sleep(Duration::from_secs(3));
    desk.screenshot("no-appindicator-window-again.png");

    // Quit Lull stops it, agent included (Resume is disabled: Settings…, then Quit Lull).
    let win = desk.find_window(&["--name", "^Lull$"]).expect("status window");
    desk.xdotool(&["windowfocus", "--sync", &win]);
    desk.keys(&["Tab", "Tab", "Tab", "Tab", "Tab", "Tab", "Tab", "Tab", "space"]);
    let mut c = tray.child.take().expect("running");
    let st = wait_exit_or_kill(&mut c, Duration::from_secs(20))
        .unwrap_or_else(|| panic!("lull-tray did not exit on Quit Lull:\n{}\n{}", tray.output(), tray.log()));
    assert!(st.success(), "{st}");
    assert!(tray.log().contains("Quit Lull from the status window"), "{}", tray.log());
    assert!(!tray.socket().exists(), "the agent's socket is removed");
    assert!(!tray.dir.path().join("agent-tray.sock").exists(), "the tray's socket is removed");
}

/// Skips (true) unless cgroups can be managed here; panics when they are required.
fn skip_without_cgroups() -> bool {
    let v2_or_hybrid = Path::new("/sys/fs/cgroup/unified/cgroup.procs").exists() || Path::new("/sys/fs/cgroup/cgroup.controllers").exists();
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() == 0 } && v2_or_hybrid {
        return false;
    }
    assert!(!lull_e2e::required("LULL_REQUIRE_CGROUPS"), "LULL_REQUIRE_CGROUPS=1 but this test cannot manage cgroups");
    eprintln!("SKIPPED: needs root to create cgroups");
    true
}

/// The tray app is the full agent (issue 10): enrolled to a real coordinator, it leases a
/// submitted job and runs it as a guest in a cgroup; one relative pointer motion from a
/// separate X client (xdotool) evicts it at once, the interruption's cause is input, and
/// the coordinator's report shows the machine's donated time.
#[test]
fn a_submitted_job_runs_in_the_tray_app_is_evicted_by_x_input_and_reported() {
    if skip_gui() || skip_without_cgroups() {
        return;
    }
    let lull = lull_e2e::lull_bin();
    let desk = Desktop::start(true);
    let pool = tempfile::tempdir().expect("dir");
    let pool_cmd = |args: &[&str]| {
        let mut c = Command::new(&lull);
        c.args(args).env("LULL_DATA_DIR", pool.path()).env_remove("LULL_COORDINATOR_URL").env_remove("LULL_KEY");
        c
    };
    let _coordinator = Proc(
        pool_cmd(&["coordinator", "serve", "--listen", "127.0.0.1:0", "--heartbeat-s", "1"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("coordinator"),
    );
    wait_until("the coordinator", Duration::from_secs(30), || {
        !std::fs::read_to_string(pool.path().join("coordinator.url")).unwrap_or_default().trim().is_empty()
    });
    let url = std::fs::read_to_string(pool.path().join("coordinator.url")).expect("url").trim().to_string();
    let out = pool_cmd(&["coordinator", "token", "create"]).output().expect("token");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let token = String::from_utf8_lossy(&out.stdout).trim().to_string();

    let mut tray = Tray::new(
        "[sampling]\ninterval_ms = 100\n[availability]\nrecruitment_threshold_s = 1\nowner_cpu_max = 1.0\nmemory_growth_max = 1.0\n\
         [eviction]\nmode = \"immediate-eviction\"\n[input]\nbackend = \"x11\"\n",
    );
    tray.display = Some(desk.display.clone());
    let out = Command::new(&lull)
        .args(["enrol", "--url", &url, "--token", &token, "--owner", "tess", "--machine", "traybox"])
        .env("LULL_DATA_DIR", tray.dir.path())
        .output()
        .expect("enrol");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    tray.start(&[]);
    let s = tray.wait_for("the full agent", |s| s.coordinator.is_some());
    assert!(s.input_backends.iter().any(|b| b.starts_with("x11-xi2")), "real X11 input: {:?}", s.input_backends);
    assert!(s.guest_runtime.starts_with("linux: cgroup"), "real guests: {}", s.guest_runtime);
    let pid = tray.child.as_ref().expect("running").id();
    assert_eq!(s.pid, pid, "the agent runs inside lull-tray");

    let out = pool_cmd(&["submit", "--", "sh", "-c", "while :; do :; done"]).output().expect("submit");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let deadline = Instant::now() + Duration::from_secs(60);
    while !tray.try_status().is_some_and(|s| s.policy.state == StateKind::Donating && s.policy.guests_present) {
        assert!(Instant::now() < deadline, "the job never ran in the tray app:\n{}\n{}", tray.output(), tray.log());
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_secs(2));

    // The owner moves the mouse: the guest is gone at once, the cause is input.
    let t0 = Instant::now();
    let out = desk.xdotool(&["mousemove_relative", "--", "7", "0"]);
    assert!(out.status.success());
    while tray.try_status().is_some_and(|s| s.policy.guests_present) {
        assert!(t0.elapsed() < Duration::from_secs(5), "the guest outlived the owner's return:\n{}", tray.log());
        std::thread::sleep(Duration::from_millis(5));
    }
    eprintln!("xdotool motion → no guest present (seen through the control socket): {:?}", t0.elapsed());
    let today = match call(&tray.socket(), &Request::Today).expect("today") {
        Response::Today(t) => t,
        other => panic!("{other:?}"),
    };
    let last = today.interruptions.last().expect("an interruption was counted");
    assert_eq!(last.cause, "input", "{last:?}");

    // The donated time reaches the coordinator's report: all the CPU time the agent
    // accounted today (how much the lowest-priority guest got in its 2 s depends on the
    // machine's load; that it all arrives does not).
    let donated = today.donated_days.iter().map(|d| d.cpu_s).sum::<f64>();
    assert!(donated > 0.0, "the guest donated no CPU time: {today:?}");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let out = pool_cmd(&["report", "--by", "machine", "--since", "1d", "--json"]).output().expect("report");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("report JSON");
        let cpu = v["rows"].as_array().map(|r| r.iter().filter_map(|r| r["cpu_s"].as_f64()).sum::<f64>()).unwrap_or(0.0);
        if cpu >= donated - 1e-6 {
            break;
        }
        assert!(Instant::now() < deadline, "the donated time never reached the report: {v}\n{}", tray.log());
        std::thread::sleep(Duration::from_millis(250));
    }
    let st = tray.sigterm_and_wait();
    assert!(st.success(), "{st}\n{}", tray.output());
}
