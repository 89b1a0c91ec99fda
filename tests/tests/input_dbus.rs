//! The D-Bus input backends against a real bus: a private `dbus-daemon --session`, with
//! a test peer on it that owns the well-known names and serves the logind Manager and
//! Session objects, or Mutter's IdleMonitor, the way the real services do (same names,
//! paths, interfaces, properties, methods and signals). The backends run unchanged on
//! that bus: logind in-process through a real `InputSink`, Mutter inside a real `lull
//! agent` whose state follows the watches firing.

use agent_core::input::logind::{Bus, Logind};
use agent_core::input::mutter::{MutterIdle, DEST, IFACE, PATH};
use agent_core::input::{InputBackend, InputSink};
use agent_core::policy::StateKind;
use agent_core::sample::{InputEvent, InputSignal};
use lull_e2e::{skip_without, Agent, DbusDaemon};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;
use zbus::zvariant::{OwnedObjectPath, Value};

const REQUIRE: &str = "LULL_REQUIRE_DBUS";
const SESSION: &str = "/org/freedesktop/login1/session/_3";

/// Runs `backend` on its own thread and hands its events over a std channel.
fn run_backend(backend: Box<dyn InputBackend>) -> mpsc::Receiver<InputEvent> {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let sink = InputSink::new(tx, None);
    std::thread::spawn(move || {
        if let Err(e) = backend.run(sink) {
            eprintln!("backend stopped: {e}");
        }
    });
    let (out_tx, out_rx) = mpsc::channel();
    std::thread::spawn(move || {
        while let Some(ev) = rx.blocking_recv() {
            if out_tx.send(ev).is_err() {
                break;
            }
        }
    });
    out_rx
}

fn next(rx: &mpsc::Receiver<InputEvent>, what: &str) -> InputSignal {
    rx.recv_timeout(Duration::from_secs(5)).unwrap_or_else(|_| panic!("no event within 5 s: expected {what}")).signal
}

fn monotonic_us() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime only writes into the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000 + ts.tv_nsec as u64 / 1000
}

struct FakeManager {
    block: Arc<Mutex<String>>,
    asked: Arc<Mutex<Vec<String>>>,
}

#[zbus::interface(name = "org.freedesktop.login1.Manager")]
impl FakeManager {
    fn get_session(&self, id: &str) -> OwnedObjectPath {
        self.asked.lock().expect("test lock").push(id.to_string());
        OwnedObjectPath::try_from(SESSION).expect("valid path")
    }
    #[zbus(property)]
    fn block_inhibited(&self) -> String {
        self.block.lock().expect("test lock").clone()
    }
}

struct FakeSession {
    idle: Arc<AtomicBool>,
    since_us: Arc<AtomicU64>,
}

#[zbus::interface(name = "org.freedesktop.login1.Session")]
impl FakeSession {
    #[zbus(property)]
    fn idle_hint(&self) -> bool {
        self.idle.load(Ordering::SeqCst)
    }
    #[zbus(property)]
    fn idle_since_hint_monotonic(&self) -> u64 {
        self.since_us.load(Ordering::SeqCst)
    }
}

#[test]
fn logind_idle_hint_and_idle_inhibitors_on_a_real_bus() {
    if skip_without("dbus-daemon", REQUIRE) {
        return;
    }
    let bus = DbusDaemon::start();
    let (idle, since_us) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicU64::new(0)));
    let block = Arc::new(Mutex::new("handle-power-key:sleep".to_string()));
    let asked = Arc::new(Mutex::new(Vec::new()));
    let peer = zbus::blocking::connection::Builder::address(bus.address.as_str())
        .and_then(|b| b.name("org.freedesktop.login1"))
        .and_then(|b| b.serve_at("/org/freedesktop/login1", FakeManager { block: block.clone(), asked: asked.clone() }))
        .and_then(|b| b.serve_at(SESSION, FakeSession { idle: idle.clone(), since_us: since_us.clone() }))
        .and_then(|b| b.build())
        .expect("test peer on the private bus");
    let set_idle = |v: bool, since: u64| {
        idle.store(v, Ordering::SeqCst);
        since_us.store(since, Ordering::SeqCst);
        let changed = HashMap::from([("IdleHint", Value::from(v)), ("IdleSinceHintMonotonic", Value::from(since))]);
        peer.emit_signal(
            None::<&str>,
            SESSION,
            "org.freedesktop.DBus.Properties",
            "PropertiesChanged",
            &("org.freedesktop.login1.Session", changed, Vec::<&str>::new()),
        )
        .expect("emit PropertiesChanged");
    };

    let rx = run_backend(Box::new(Logind { bus: Bus::Address(bus.address.clone()), inhibit_poll: Duration::from_millis(100) }));
    // IdleHint false from the start, no idle inhibitor: nothing at all (a desktop that
    // never sets IdleHint must not look like an owner who never leaves).
    assert!(rx.recv_timeout(Duration::from_millis(1500)).is_err(), "no event while nothing changed");
    assert_eq!(asked.lock().expect("test lock").len(), 1, "the backend asked the manager for its session");

    // Idle since 30 s ago on logind's clock → Idled for about 30 s.
    set_idle(true, monotonic_us() - 30_000_000);
    match next(&rx, "Idled") {
        InputSignal::Idled { idle_for_ms } => assert!((29_000..=35_000).contains(&idle_for_ms), "{idle_for_ms}"),
        other => panic!("expected Idled, got {other:?}"),
    }
    set_idle(false, 0);
    assert_eq!(next(&rx, "Resumed"), InputSignal::Resumed);

    // A video player takes an idle inhibitor, then lets go.
    *block.lock().expect("test lock") = "handle-power-key:idle:sleep".into();
    assert_eq!(next(&rx, "Inhibited(true)"), InputSignal::Inhibited(true));
    *block.lock().expect("test lock") = "sleep".into();
    assert_eq!(next(&rx, "Inhibited(false)"), InputSignal::Inhibited(false));
    assert!(rx.recv_timeout(Duration::from_millis(500)).is_err(), "nothing more");
}

/// Mutter's idle monitor: numbered watches, a persistent idle watch and one-shot
/// user-active watches, each announced by `WatchFired(id)`.
#[derive(Clone, Default)]
struct Monitor {
    next_id: Arc<AtomicU32>,
    idle_watches: Arc<Mutex<Vec<(u32, u64)>>>,
    active_watches: Arc<Mutex<Vec<u32>>>,
    idletime_ms: Arc<AtomicU64>,
}

#[zbus::interface(name = "org.gnome.Mutter.IdleMonitor")]
impl Monitor {
    fn add_idle_watch(&self, interval: u64) -> u32 {
        let id = self.next_id.fetch_add(1, Ordering::SeqCst) + 1;
        self.idle_watches.lock().expect("test lock").push((id, interval));
        id
    }
    fn add_user_active_watch(&self) -> u32 {
        let id = self.next_id.fetch_add(1, Ordering::SeqCst) + 1;
        self.active_watches.lock().expect("test lock").push(id);
        id
    }
    fn remove_watch(&self, id: u32) {
        self.idle_watches.lock().expect("test lock").retain(|w| w.0 != id);
    }
    fn get_idletime(&self) -> u64 {
        self.idletime_ms.load(Ordering::SeqCst)
    }
}

fn serve_monitor(address: &str) -> (zbus::blocking::Connection, Monitor) {
    let m = Monitor::default();
    let conn = zbus::blocking::connection::Builder::address(address)
        .and_then(|b| b.name(DEST))
        .and_then(|b| b.serve_at(PATH, m.clone()))
        .and_then(|b| b.build())
        .expect("test peer on the private bus");
    (conn, m)
}

fn fire(conn: &zbus::blocking::Connection, id: u32) {
    conn.emit_signal(None::<&str>, PATH, IFACE, "WatchFired", &(id,)).expect("emit WatchFired");
}

fn wait_until(what: &str, f: impl Fn() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !f() {
        assert!(std::time::Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn mutter_idle_monitor_watches_on_a_real_bus() {
    if skip_without("dbus-daemon", REQUIRE) {
        return;
    }
    let bus = DbusDaemon::start();
    let (conn, m) = serve_monitor(&bus.address);
    let rx = run_backend(Box::new(MutterIdle { bus: Bus::Address(bus.address.clone()), timeout: Duration::from_secs(7) }));
    // Active at start (idle 0 ms): present until the idle watch fires.
    assert_eq!(next(&rx, "Resumed at start"), InputSignal::Resumed);
    let (idle_id, interval) = m.idle_watches.lock().expect("test lock")[0];
    assert_eq!(interval, 7000, "the idle watch uses the configured timeout in ms");
    fire(&conn, idle_id + 100);
    fire(&conn, idle_id);
    assert_eq!(next(&rx, "Idled"), InputSignal::Idled { idle_for_ms: 7000 }, "an unknown watch id is ignored");
    wait_until("a user-active watch", || m.active_watches.lock().expect("test lock").len() == 1);
    let active = m.active_watches.lock().expect("test lock")[0];
    fire(&conn, active);
    assert_eq!(next(&rx, "Resumed"), InputSignal::Resumed);
    // The user-active watch was one-shot: firing it again means nothing; the next idle
    // period adds a new one.
    fire(&conn, active);
    assert!(rx.recv_timeout(Duration::from_millis(500)).is_err(), "a spent user-active watch is ignored");
    fire(&conn, idle_id);
    assert_eq!(next(&rx, "Idled again"), InputSignal::Idled { idle_for_ms: 7000 });
    wait_until("a second user-active watch", || m.active_watches.lock().expect("test lock").len() == 2);
}

#[test]
fn a_real_agent_follows_mutter_idle_watches() {
    if skip_without("dbus-daemon", REQUIRE) {
        return;
    }
    let bus = DbusDaemon::start();
    let (conn, m) = serve_monitor(&bus.address);
    let mut a = Agent::new(
        "[sampling]\ninterval_ms = 200\n\n[availability]\nrecruitment_threshold_s = 2\nowner_cpu_max = 1.0\nmemory_growth_max = 1.0\n\n[input]\nidle_notify_s = 3\n",
    );
    a.env.push(("LULL_INPUT".into(), "mutter".into()));
    a.env.push(("DBUS_SESSION_BUS_ADDRESS".into(), bus.address.clone()));
    a.start();
    let s = a.status();
    assert!(s.input_backends.iter().any(|b| b.starts_with("mutter-idle-monitor (cannot see: ")), "{:?}", s.input_backends);
    wait_until("the agent's idle watch", || !m.idle_watches.lock().expect("test lock").is_empty());
    let (idle_id, interval) = m.idle_watches.lock().expect("test lock")[0];
    assert_eq!(interval, 3000);
    // Owner present (idle 0 at start): owner_active, and it stays so without a firing.
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(a.status().policy.state, StateKind::OwnerActive);
    fire(&conn, idle_id);
    a.wait_for("recruitable after the idle watch fired", Duration::from_secs(10), |s| s.policy.state == StateKind::Recruitable);
    wait_until("a user-active watch", || m.active_watches.lock().expect("test lock").len() == 1);
    let active = m.active_watches.lock().expect("test lock")[0];
    fire(&conn, active);
    a.wait_for("owner_active after input resumed", Duration::from_secs(5), |s| s.policy.state == StateKind::OwnerActive);
    // Resumed holds presence until the next idle firing.
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(a.status().policy.state, StateKind::OwnerActive);
    a.stop();
}
