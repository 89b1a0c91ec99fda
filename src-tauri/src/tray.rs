//! The tray icon and its menu. The icon and the tooltip follow the agent's state: a
//! distinct icon per state (colour and shape), and a tooltip with today's donated time
//! and "interruptions 2 of 5". Linux tray hosts (AppIndicator) show no tooltips, so the
//! same line heads the menu as a disabled item. Menu actions are control requests to the
//! embedded agent, on its socket, exactly as `lull pause 1h` sends them; their choices
//! are [`crate::actions`]'s, which the status window offers too.
//!
//! Built on the `tray-icon` and `muda` crates (what Tauri's tray is made of) in the
//! platform's own loop ([`crate::mainloop`]: GTK, Win32 or AppKit), so the tray process
//! never loads Tauri's webview runtime. Icon and menu live on the main
//! loop's thread; other threads hand statuses over with [`show`].

use crate::actions::{self, Choice};
use crate::notify::{self, Limiter};
use crate::windows::{Which, Windows};
use agent_core::agent::Notice;
use agent_core::control::{call, AgentStatus, Request, Response};
use agent_core::policy::{NotAllowedReason, StateKind};
use std::cell::RefCell;
use std::path::PathBuf;
use std::sync::mpsc;
use std::time::{Duration, Instant};
use tray_icon::menu::{IsMenuItem, Menu, MenuEvent, MenuItem, PredefinedMenuItem, Submenu};
use tray_icon::{Icon, TrayIcon, TrayIconBuilder};

/// The seven icons the owner sees (recruitable looks idle; evicting looks owner-active).
pub fn icon_bytes(state: StateKind) -> &'static [u8] {
    match state {
        StateKind::Idle | StateKind::Recruitable => include_bytes!("../icons/state-idle.png"),
        StateKind::Donating => include_bytes!("../icons/state-donating.png"),
        // Lending while light looks like lingering: guest work beside a light owner.
        StateKind::Lingering | StateKind::LendingLight => include_bytes!("../icons/state-lingering.png"),
        StateKind::OwnerActive | StateKind::Evicting => include_bytes!("../icons/state-owner_active.png"),
        StateKind::Paused => include_bytes!("../icons/state-paused.png"),
        StateKind::OutOfBudget => include_bytes!("../icons/state-out_of_budget.png"),
        StateKind::NotAllowed => include_bytes!("../icons/state-not_allowed.png"),
    }
}

/// A short phrase for the state.
pub fn state_phrase(s: &AgentStatus) -> String {
    let p = &s.policy;
    match p.state {
        StateKind::Idle | StateKind::Recruitable => "idle".into(),
        StateKind::Donating if p.donate_now => "donating (you offered it)".into(),
        StateKind::Donating => "donating".into(),
        StateKind::Lingering => "donating quietly while you work".into(),
        StateKind::LendingLight => "lending while you work lightly".into(),
        StateKind::OwnerActive | StateKind::Evicting => "you are active".into(),
        StateKind::Paused => match p.paused_for_s {
            Some(left) => format!("paused, {} left", short(left)),
            None => "paused".into(),
        },
        StateKind::OutOfBudget => "out of today's interruptions".into(),
        StateKind::NotAllowed => match (&p.not_allowed, &p.exclusive_program) {
            (Some(NotAllowedReason::ExclusiveProgram), Some(program)) => format!("not allowed while {program} runs"),
            (r, _) => format!("not allowed now ({})", r.map(|r| r.describe()).unwrap_or("rules")),
        },
    }
}

/// "1 h 20 min", "12 min", "40 s".
pub fn short(secs: u64) -> String {
    match secs {
        s if s < 60 => format!("{s} s"),
        s if s < 3600 => format!("{} min", s / 60),
        s if s % 3600 < 60 => format!("{} h", s / 3600),
        s => format!("{} h {} min", s / 3600, (s % 3600) / 60),
    }
}

/// The tooltip: state, then today's donated time (wall time lent, and the CPU time the
/// guests used in it: a guest that mostly waits lends hours and uses seconds) and
/// interruptions, then what needs the owner's attention, if anything ("Open Lull" says
/// it whole).
pub fn tooltip(s: &AgentStatus) -> String {
    let mut tip = format!(
        "Lull: {}\nToday: donated {} ({} CPU) · interruptions {} of {}",
        state_phrase(s),
        short(s.donated_wall_s_today as u64),
        short(s.donated_cpu_s_today as u64),
        s.policy.interruptions_today,
        s.policy.interruption_limit
    );
    if let Some(first) = s.alerts.first() {
        let more = s.alerts.len() - 1;
        tip += &format!("\nAttention: {}", notify::alert_phrase(first.kind));
        if more > 0 {
            tip += &format!(" (and {more} more)");
        }
    }
    tip
}

/// The menu's line about how guests are contained, naming whatever they lack
/// ("Guests: cgroup v2 (no io controller: guests' disk I/O not weighted)"); `None` while
/// the agent has not said.
pub fn containment_line(s: &AgentStatus) -> Option<String> {
    s.containment.as_ref().map(|c| format!("Guests: {}", c.summary))
}

/// The ids of the tray's own menu items (the owner's actions have [`crate::actions`]'s).
pub mod id {
    pub const OPEN: &str = "open";
    pub const SETTINGS: &str = "settings";
    pub const QUIT: &str = "quit";
}

/// Decodes one of the PNG icons to RGBA.
pub fn decode_png(bytes: &[u8]) -> Result<(Vec<u8>, u32, u32), String> {
    let mut d = png::Decoder::new(std::io::Cursor::new(bytes));
    d.set_transformations(png::Transformations::normalize_to_color8() | png::Transformations::ALPHA);
    let mut r = d.read_info().map_err(|e| e.to_string())?;
    let mut buf = vec![0; r.output_buffer_size().ok_or("the image is too large")?];
    let info = r.next_frame(&mut buf).map_err(|e| e.to_string())?;
    if info.color_type != png::ColorType::Rgba {
        return Err(format!("{:?} pixels, not RGBA", info.color_type));
    }
    buf.truncate(info.buffer_size());
    Ok((buf, info.width, info.height))
}

/// The tray icon for a state.
pub fn icon(state: StateKind) -> Result<Icon, String> {
    let (rgba, w, h) = decode_png(icon_bytes(state))?;
    Icon::from_rgba(rgba, w, h).map_err(|e| e.to_string())
}

/// The live parts of the tray (main loop's thread only).
struct Tray {
    icon: TrayIcon,
    headline: MenuItem,
    /// How guests are contained, with what they lack ([`containment_line`]).
    containment: MenuItem,
    resume: MenuItem,
    /// The state and tooltip shown, so the icon is replaced only on a change.
    shown: Option<(StateKind, String)>,
}

thread_local! {
    // Debian's clippy 1.96 asks for a `const` initializer for Windows, where it is one.
    #[allow(clippy::missing_const_for_thread_local)]
    static TRAY: RefCell<Option<Tray>> = const { RefCell::new(None) };
}

/// Builds the tray icon and menu; call on the main loop's thread, after
/// [`crate::mainloop::init`]. Menu
/// items become control requests on `socket`; Open Lull and Settings open windows; `quit`
/// runs on Quit.
pub fn build(socket: PathBuf, windows: Windows, quit: impl Fn() + Send + Sync + 'static) -> Result<(), String> {
    let err = |e: tray_icon::menu::Error| e.to_string();
    let headline = MenuItem::with_id("headline", "Lull: starting…", false, None);
    let containment = MenuItem::with_id("containment", "Guests: …", false, None);
    let submenu = |title: &str, choices: &[Choice]| {
        let items: Vec<MenuItem> = choices.iter().map(|c| MenuItem::with_id(c.id, c.label, true, None)).collect();
        let refs: Vec<&dyn IsMenuItem> = items.iter().map(|i| i as &dyn IsMenuItem).collect();
        Submenu::with_items(title, true, &refs)
    };
    let donate = submenu("Donate now", &actions::DONATE).map_err(err)?;
    let pause = submenu("Pause", &actions::PAUSE).map_err(err)?;
    let resume = MenuItem::with_id(actions::RESUME.id, actions::RESUME.label, true, None);
    let menu = Menu::with_items(&[
        &headline,
        &containment,
        &PredefinedMenuItem::separator(),
        &donate,
        &pause,
        &resume,
        &PredefinedMenuItem::separator(),
        &MenuItem::with_id(id::OPEN, "Open Lull", true, None),
        &MenuItem::with_id(id::SETTINGS, "Settings", true, None),
        &PredefinedMenuItem::separator(),
        &MenuItem::with_id(id::QUIT, "Quit", true, None),
    ])
    .map_err(err)?;
    MenuEvent::set_event_handler(Some(move |event: MenuEvent| {
        let item = event.id().as_ref().to_string();
        tracing::info!(item = %item, "tray menu");
        match item.as_str() {
            id::OPEN => open_logged(&windows, Which::Status),
            id::SETTINGS => open_logged(&windows, Which::Settings),
            id::QUIT => quit(),
            _ => {
                if let Some(req) = actions::request_for(&item) {
                    let socket = socket.clone();
                    std::thread::spawn(move || match call(&socket, &req) {
                        Ok(Response::Status(s)) => show(*s),
                        Ok(_) => {}
                        Err(e) => tracing::error!("menu {item}: {e}"),
                    });
                }
            }
        }
    }));
    let icon = TrayIconBuilder::new()
        .with_id("lull")
        .with_icon(icon(StateKind::Idle)?)
        .with_tooltip("Lull")
        .with_menu(Box::new(menu))
        .build()
        .map_err(|e| e.to_string())?;
    TRAY.with(|t| *t.borrow_mut() = Some(Tray { icon, headline, containment, resume, shown: None }));
    Ok(())
}

fn open_logged(windows: &Windows, w: Which) {
    if let Err(e) = windows.open(w) {
        tracing::error!("cannot open the {} window: {e:#}", w.label());
    }
}

/// Shows a status in the tray, from any thread (it runs on the main loop's thread).
pub fn show(s: AgentStatus) {
    crate::mainloop::invoke(move || TRAY.with(|t| refresh(t.borrow_mut().as_mut(), &s)));
}

/// Logs whether the notification area took the icon just built. tray-icon ignores a
/// failed `Shell_NotifyIconW(NIM_ADD)` (the taskbar may not run yet: it adds the icon
/// again on `TaskbarCreated`), so this asks for a change (`NIM_MODIFY`, the tooltip),
/// which fails for an icon the shell does not have.
#[cfg(windows)]
pub fn check_shown() {
    TRAY.with(|t| match t.borrow().as_ref().map(|tray| tray.icon.set_tooltip(Some("Lull: starting…"))) {
        Some(Ok(())) => tracing::info!("tray icon created: Shell_NotifyIconW accepted it"),
        Some(Err(e)) => tracing::warn!(
            "the notification area has not taken the tray icon (Shell_NotifyIconW: {e}); it will be added when the taskbar starts"
        ),
        None => {}
    });
}

/// Updates icon, tooltip and menu headline from a status.
fn refresh(tray: Option<&mut Tray>, s: &AgentStatus) {
    let Some(tray) = tray else { return };
    let tip = tooltip(s);
    let state_changed = tray.shown.as_ref().is_none_or(|(st, _)| *st != s.policy.state);
    if state_changed {
        match icon(s.policy.state) {
            Ok(img) => {
                if let Err(e) = tray.icon.set_icon(Some(img)) {
                    tracing::warn!("cannot set the tray icon: {e}");
                }
            }
            Err(e) => tracing::warn!("bad tray icon: {e}"),
        }
        tray.resume.set_enabled(s.policy.state == StateKind::Paused || s.policy.donate_now);
        tracing::info!(state = s.policy.state.as_str(), "tray shows state");
    }
    if tray.shown.as_ref().is_none_or(|(_, t)| *t != tip) {
        let _ = tray.icon.set_tooltip(Some(&tip));
        tray.headline.set_text(tip.replace('\n', " · "));
        let attention = |t: &str| t.lines().find(|l| l.starts_with("Attention: ")).map(str::to_owned);
        let now = attention(&tip);
        if tray.shown.as_ref().map_or(now.is_some(), |(_, t)| attention(t) != now) {
            tracing::info!(attention = now.as_deref().unwrap_or("none"), "tray shows attention");
        }
    }
    if let Some(line) = containment_line(s).filter(|l| *l != tray.containment.text()) {
        tray.containment.set_text(line);
    }
    tray.shown = Some((s.policy.state, tip));
}

/// How long the tray waits for a notice before refreshing from the agent's status
/// anyway. Every state change and owner setting arrives as a notice at once; the poll is
/// only for the tooltip's moving counters: donated time while guest work runs, time left
/// while paused. Without a tray icon nothing is shown, so only notices matter.
pub fn refresh_every(shown: Option<StateKind>, with_tray: bool) -> Duration {
    const MOVING: Duration = Duration::from_secs(10);
    const STILL: Duration = Duration::from_secs(60);
    if !with_tray {
        return Duration::from_secs(3600);
    }
    match shown {
        Some(StateKind::Donating | StateKind::Lingering | StateKind::LendingLight | StateKind::Evicting | StateKind::Paused) | None => {
            MOVING
        }
        Some(_) => STILL,
    }
}

/// Follows the agent: every notice (and, without one, every [`refresh_every`])
/// refreshes the tray from the agent's status; notices that deserve it become desktop
/// notifications, rate-limited. Returns when the agent is gone (its notice channel
/// closed).
pub fn follow(socket: PathBuf, notices: mpsc::Receiver<Notice>, with_tray: bool) {
    let mut limiter = Limiter::default();
    let mut shown: Option<StateKind> = None;
    loop {
        match notices.recv_timeout(refresh_every(shown, with_tray)) {
            Ok(n) => {
                if let Some(m) = notify::message_for(&n) {
                    let cfg = match call(&socket, &Request::GetConfig) {
                        Ok(Response::Config { config }) => Some(config.notifications),
                        _ => None,
                    };
                    if let Some(cfg) = cfg.filter(|c| c.enabled) {
                        if limiter.allow(m.kind, Instant::now(), Duration::from_secs(cfg.min_interval_s)) {
                            tracing::info!(kind = ?m.kind, "notification: {}", m.body);
                            if let Err(e) = notify::show(&m) {
                                tracing::warn!("cannot show a notification: {e}");
                            }
                        }
                    }
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => return,
        }
        if with_tray {
            if let Ok(Response::Status(s)) = call(&socket, &Request::Status) {
                shown = Some(s.policy.state);
                show(*s);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_owner_visible_state_has_its_own_icon() {
        let states = [
            StateKind::Idle,
            StateKind::Donating,
            StateKind::Lingering,
            StateKind::OwnerActive,
            StateKind::Paused,
            StateKind::OutOfBudget,
            StateKind::NotAllowed,
        ];
        let mut seen = std::collections::HashSet::new();
        for s in states {
            let b = icon_bytes(s);
            assert!(b.starts_with(b"\x89PNG"), "{s:?} icon is a PNG");
            assert!(seen.insert(b.as_ptr() as usize), "{s:?} shares an icon");
            let (rgba, w, h) = decode_png(b).unwrap_or_else(|e| panic!("{s:?} icon decodes: {e}"));
            assert_eq!((rgba.len(), w, h), (64 * 64 * 4, 64, 64), "{s:?} icon is 64×64 RGBA");
            icon(s).unwrap_or_else(|e| panic!("{s:?} icon makes a tray icon: {e}"));
        }
    }

    #[test]
    fn the_tray_s_own_items_are_no_control_requests() {
        for item in [id::OPEN, id::SETTINGS, id::QUIT] {
            assert_eq!(actions::request_for(item), None, "{item}");
        }
    }

    fn status(state: &str, extra: serde_json::Value) -> AgentStatus {
        let mut v = serde_json::json!({
            "state": state, "not_allowed": null, "state_for_s": 5, "idle_for_s": 0, "available": false,
            "directive": "freeze", "guests_present": false, "budget_day": "2026-11-22", "interruptions_today": 2,
            "interruption_limit": 5, "paused_for_s": null, "pause": null, "donate_now": false, "donate_for_s": null,
            "owner_utilisation_h": 0.1, "eviction_mode": "linger-longer", "owner_cpu": 0.1, "recruitment_threshold_s": 180,
            "donated_cpu_s_today": 4800.0, "donated_wall_s_today": 6000.0, "input_backends": [], "guest_runtime": "none",
            "agent_version": "0.1.0", "pid": 1, "local_time": "2026-11-22T12:00:00"
        });
        if let (Some(o), Some(e)) = (v.as_object_mut(), extra.as_object()) {
            o.extend(e.clone());
        }
        serde_json::from_value(v).expect("a status")
    }

    #[test]
    fn tooltip_tells_state_donated_time_and_interruptions() {
        let t = tooltip(&status("donating", serde_json::json!({})));
        assert_eq!(t, "Lull: donating\nToday: donated 1 h 40 min (1 h 20 min CPU) · interruptions 2 of 5");
        // Twelve minutes lent to a guest that used 4 s of CPU are not "donated 0 s".
        let t = tooltip(&status("donating", serde_json::json!({"donated_wall_s_today": 720.0, "donated_cpu_s_today": 4.2})));
        assert_eq!(t, "Lull: donating\nToday: donated 12 min (4 s CPU) · interruptions 2 of 5");
        let t = tooltip(&status("paused", serde_json::json!({"paused_for_s": 3000})));
        assert!(t.starts_with("Lull: paused, 50 min left\n"), "{t}");
        let t = tooltip(&status("not_allowed", serde_json::json!({"not_allowed": "battery"})));
        assert!(t.starts_with("Lull: not allowed now (on battery)"), "{t}");
        let t = tooltip(&status("not_allowed", serde_json::json!({"not_allowed": "exclusive_program", "exclusive_program": "steam"})));
        assert!(t.starts_with("Lull: not allowed while steam runs\n"), "{t}");
    }

    #[test]
    fn the_menu_names_what_guests_lack() {
        let containment = |summary: &str| serde_json::json!({"containment": {"summary": summary, "kind": "cgroup-v2", "placement": "systemd scope lull-guests-a1-2-0.scope (Delegate=yes)", "missing": []}});
        let full = status("idle", containment("cgroup v2"));
        assert_eq!(containment_line(&full).as_deref(), Some("Guests: cgroup v2"));
        let less = status("idle", containment("cgroup v2 (no io controller: guests' disk I/O not weighted)"));
        assert_eq!(containment_line(&less).as_deref(), Some("Guests: cgroup v2 (no io controller: guests' disk I/O not weighted)"));
        assert_eq!(containment_line(&status("idle", serde_json::json!({}))), None, "an older agent says nothing");
    }

    #[test]
    fn the_tooltip_says_what_needs_attention() {
        let alert = |kind: &str| serde_json::json!({"kind": kind, "message": "m", "action": null});
        let t = tooltip(&status("out_of_budget", serde_json::json!({"alerts": [alert("ledger_recovered")]})));
        assert!(t.ends_with("\nAttention: the ledger was damaged or lost (Open Lull says what was kept)"), "{t}");
        let t = tooltip(&status("idle", serde_json::json!({"alerts": [alert("credential_refused"), alert("ledger_write_failed")]})));
        assert!(t.ends_with("\nAttention: the pool refuses this machine's credential; enrol it again (and 1 more)"), "{t}");
        assert!(!tooltip(&status("idle", serde_json::json!({}))).contains("Attention"));
    }

    #[test]
    fn the_tray_polls_only_while_its_counters_move() {
        use StateKind::*;
        let every = |s| refresh_every(Some(s), true);
        for moving in [Donating, Lingering, Evicting, Paused] {
            assert_eq!(every(moving), Duration::from_secs(10), "{moving:?}");
        }
        for still in [Idle, Recruitable, OwnerActive, OutOfBudget, NotAllowed] {
            assert_eq!(every(still), Duration::from_secs(60), "{still:?}");
        }
        // Before the first status, soon; without a tray icon, notices alone.
        assert_eq!(refresh_every(None, true), Duration::from_secs(10));
        assert!(refresh_every(Some(Donating), false) >= Duration::from_secs(3600));
    }

    #[test]
    fn durations_read_short() {
        assert_eq!(short(40), "40 s");
        assert_eq!(short(12 * 60 + 5), "12 min");
        assert_eq!(short(3 * 3600 + 20), "3 h");
        assert_eq!(short(3600 + 20 * 60), "1 h 20 min");
    }
}
