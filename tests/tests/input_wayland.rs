//! The Wayland backend against a real compositor: Debian's sway 1.7, headless. The
//! agent's `auto` choice probes the compositor's globals, picks the Wayland backend and
//! binds `org_kde_kwin_idle` (sway 1.7 has no `ext-idle-notify-v1`) with a 2-s
//! timeout; `wtype` types through the virtual-keyboard protocol, which sway treats as
//! seat input and so resets its idle timers. "Resumed" holds the owner present until
//! the compositor says "idle" again, so the round trip recruitable → owner_active →
//! recruitable needs both notifications to work.

use agent_core::policy::StateKind;
use lull_e2e::{skip_without, Agent, Sway};
use std::time::Duration;

const REQUIRE: &str = "LULL_REQUIRE_WAYLAND";

#[test]
fn sway_idle_notifications_move_a_real_agent() {
    if skip_without("sway", REQUIRE) || skip_without("wtype", REQUIRE) {
        return;
    }
    let sway = Sway::start();
    let mut a = Agent::new(
        "[sampling]\ninterval_ms = 200\n\n[availability]\nrecruitment_threshold_s = 2\nowner_cpu_max = 1.0\nmemory_growth_max = 1.0\n\n[input]\nbackend = \"auto\"\nidle_notify_s = 2\n",
    );
    a.env.push(("WAYLAND_DISPLAY".into(), sway.display.clone()));
    a.env.push(("XDG_RUNTIME_DIR".into(), sway.runtime_dir.display().to_string()));
    a.env.push(("DISPLAY".into(), String::new()));
    a.start();
    let s = a.status();
    assert!(s.input_backends.iter().any(|b| b.starts_with("wayland (cannot see: ")), "{:?}", s.input_backends);
    a.wait_for("recruitable without input", Duration::from_secs(20), |s| s.policy.state == StateKind::Recruitable);

    for round in 0..2 {
        sway.wtype("hello");
        a.wait_for("owner_active after typing (resumed)", Duration::from_secs(5), |s| s.policy.state == StateKind::OwnerActive);
        // Idle 2 s after the typing, then recruitable 2 s later: the compositor's "idle".
        let s = a.wait_for("recruitable again (idle)", Duration::from_secs(15), |s| s.policy.state == StateKind::Recruitable);
        assert_eq!(s.policy.state, StateKind::Recruitable, "round {round}");
    }
    a.stop();
    let log: String = lull_e2e::all_files(&a.dir)
        .into_iter()
        .filter(|(p, _)| p.to_string_lossy().ends_with(".log"))
        .map(|(_, b)| String::from_utf8_lossy(&b).into_owned())
        .collect();
    assert!(log.contains("using org_kde_kwin_idle with a 2000 ms idle timeout"), "{log}");
    assert!(!log.contains("hello"), "typed text never reaches the log");
}
