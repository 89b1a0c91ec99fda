//! Where an agent's guests get their cgroups ([`open`]), and for an ordinary owner on
//! cgroup v2 the delegated subtree asked of the owner's systemd user manager, as podman
//! and flatpak ask for theirs.
//!
//! `[guests] cgroup = "auto"` (the default) means: a root agent creates `lull` in each
//! hierarchy (as before); an ordinary owner's agent on pure cgroup v2 asks its user
//! manager over D-Bus (`org.freedesktop.systemd1.Manager.StartTransientUnit`) for a scope
//! `lull-guests-<agent instance>.scope` with `Delegate=yes`, placed directly below the
//! manager (`Slice=-.slice`, beside `app.slice` and `session.slice`) with
//! `CPUWeight=idle` and `IOWeight=1`, so the guests are the lowest at every level the user
//! manager decides, while the agent itself stays where it runs at normal weight. A
//! scope must hold a process when it is made: it holds the no-orphans watchdog, which the
//! agent then moves into the scope's `watchdog` leaf (no process may stay in a cgroup
//! whose controllers are enabled for its children); guests go to `guests/<instance>`.
//! When the agent ends, the watchdog leaves too and systemd removes the empty scope; if
//! the agent is killed, the watchdog kills the guests through `guests/cgroup.kill` first.
//!
//! Moving a guest from the agent's cgroup into the scope needs write access to the
//! `cgroup.procs` of their common ancestor. Inside the user manager (`lull-agent.service`,
//! an app scope of a systemd-managed desktop) that is the owner's; when the agent runs in
//! a login session's scope (some desktops' autostart, a terminal), the agent first asks
//! for a scope of its own, `lull-agent-<pid>.scope` in `app.slice` (as `systemd-run
//! --user --scope` does; the user manager asks the system manager to move it).
//!
//! The bus: the session bus (`DBUS_SESSION_BUS_ADDRESS`), else the user bus
//! `$XDG_RUNTIME_DIR/bus`. When the manager does not answer, the agent's own cgroup is
//! used if it is a delegated subtree (`lull-agent.service` carries `Delegate=yes`), else
//! the process-group fallback, each said with why.

use super::cgroup::{self, Cgroups};
use super::watchdog::Watchdog;
use crate::guest::GuestError;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use zbus::zvariant::{OwnedObjectPath, Value};

/// Names of the guests' scopes: `lull-guests-<agent instance>.scope`.
pub const SCOPE_PREFIX: &str = "lull-guests-";
/// The leaf of the guests' scope the watchdog moves into.
pub const WATCHDOG_LEAF: &str = "watchdog";
/// How long systemd may take to put a process into a new scope.
const PLACE_TIMEOUT: Duration = Duration::from_secs(5);
/// D-Bus method calls to the user manager.
const CALL_TIMEOUT: Duration = Duration::from_secs(5);
/// The `CPUWeight` that means `idle` (systemd 250+); older managers refuse it and get 1.
const CPU_WEIGHT_IDLE: u64 = 0;

/// How the guests' cgroups are found, from `[guests] cgroup` and who runs the agent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Placement {
    /// A path below each hierarchy's root (`lull` for a root agent).
    Base(String),
    /// The agent's own delegated v2 cgroup (`self`).
    OwnCgroup,
    /// A delegated scope from the owner's systemd user manager, else the agent's own
    /// cgroup if delegated.
    SystemdScope,
    /// No cgroups (`none`): process groups and rlimits.
    Off,
}

/// The placement for `configured` (`auto`, `self`, `none` or a path).
pub fn placement(configured: &str, root: bool, pure_v2: bool) -> Placement {
    match configured {
        "none" => Placement::Off,
        "self" => Placement::OwnCgroup,
        "auto" if root || !pure_v2 => Placement::Base("lull".into()),
        "auto" => Placement::SystemdScope,
        path => Placement::Base(path.into()),
    }
}

/// The guests' cgroups (or why there are none) and the no-orphans watchdog, which kills
/// them if the agent dies.
pub fn open(configured: &str) -> (Result<Cgroups, GuestError>, std::io::Result<Watchdog>) {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let pure_v2 = Path::new("/sys/fs/cgroup/cgroup.controllers").exists();
    let opened = match placement(configured, root, pure_v2) {
        Placement::Off => Err(GuestError::NoCgroups(format!("guests.cgroup = {configured:?}"))),
        Placement::Base(base) => Cgroups::open(&base),
        Placement::OwnCgroup => Cgroups::open("self"),
        Placement::SystemdScope => match on_own_thread(systemd_scope) {
            Ok((c, w)) => return (Ok(c), Ok(w)),
            Err(scope) => Cgroups::open("self").map_err(|own| {
                GuestError::NoCgroups(format!(
                    "the owner's systemd gave no delegated scope ({scope}), and the agent's own cgroup is no delegated subtree either ({})",
                    reason(&own)
                ))
            }),
        },
    };
    if let (Ok(c), Placement::SystemdScope) = (&opened, placement(configured, root, pure_v2)) {
        tracing::warn!("guests in {}: the owner's systemd gave no delegated scope", c.placement);
    }
    let watchdog = Watchdog::start(opened.as_ref().ok().map(|c| c.kill_file()).as_deref());
    (opened, watchdog)
}

/// A cgroup error's reason, without the "cgroups unusable" its display starts with.
fn reason(e: &GuestError) -> String {
    match e {
        GuestError::NoCgroups(why) => why.clone(),
        other => other.to_string(),
    }
}

/// zbus's blocking calls run on its own runtime, which cannot be entered from a thread
/// inside another (the agent is assembled inside tokio): the calls get a thread.
fn on_own_thread<T: Send>(f: impl FnOnce() -> Result<T, String> + Send) -> Result<T, String> {
    std::thread::scope(|s| s.spawn(f).join().unwrap_or_else(|_| Err("the systemd request panicked".into())))
}

/// The guests' cgroups in a scope from the owner's user manager, with the watchdog in it.
fn systemd_scope() -> Result<(Cgroups, Watchdog), String> {
    let manager = UserManager::connect()?;
    let (scope, watchdog) = request_guest_scope(&manager)?;
    let rel = scope.cgroup.trim_start_matches('/');
    let c = Cgroups::open_delegated(rel, WATCHDOG_LEAF, format!("systemd scope {} (Delegate=yes)", scope.name)).map_err(|e| reason(&e))?;
    tracing::info!(scope = %scope.name, cgroup = %scope.cgroup, "the owner's systemd delegated a cgroup subtree for guests");
    Ok((c, watchdog))
}

/// A scope the user manager made.
#[derive(Clone, Debug)]
struct Scope {
    name: String,
    /// Its cgroup, `/user.slice/…/user@UID.service/NAME`.
    cgroup: String,
}

/// Asks the user manager for the guests' scope, holding a new watchdog (which kills
/// `guests/` in it when the agent dies). The agent first gets a scope of its own when it
/// runs outside the user manager, where it could not move its guests into theirs.
fn request_guest_scope(manager: &UserManager) -> Result<(Scope, Watchdog), String> {
    let manager_cg = manager.control_group()?;
    kill_stale_scopes(&Path::new("/sys/fs/cgroup").join(manager_cg.trim_start_matches('/')));
    let name = format!("{SCOPE_PREFIX}{}.scope", cgroup::instance_name());
    let scope = Scope { cgroup: format!("{}/{name}", manager_cg.trim_end_matches('/')), name };
    let own = cgroup::own_unified_path().unwrap_or_default();
    if !may_move_between(&own, &scope.cgroup) {
        let agent_scope = format!("lull-agent-{}.scope", std::process::id());
        manager.start_scope(&agent_scope, &agent_scope_properties(std::process::id()))?;
        let now = wait_for_cgroup(std::process::id(), |cg| cg != own)?;
        tracing::info!(from = %own, to = %now, "the agent moved into a scope of its user manager, so its guests can be moved into theirs");
        if !may_move_between(&now, &scope.cgroup) {
            return Err(format!("the agent's cgroup {now} and the guests' {} have no common ancestor the owner may write", scope.cgroup));
        }
    }
    let kill = Path::new("/sys/fs/cgroup").join(scope.cgroup.trim_start_matches('/')).join("guests/cgroup.kill");
    let watchdog = Watchdog::start(Some(&kill)).map_err(|e| format!("starting the watchdog: {e}"))?;
    let wd_pid = watchdog.pid() as u32;
    match manager.start_scope(&scope.name, &scope_properties(wd_pid, CPU_WEIGHT_IDLE)) {
        Err(e) if e.contains("CPUWeight") => manager.start_scope(&scope.name, &scope_properties(wd_pid, 1))?,
        r => r?,
    };
    wait_for_cgroup(wd_pid, |cg| cg == scope.cgroup)?;
    Ok((scope, watchdog))
}

/// The properties of the guests' scope: delegated, below the user manager itself, the
/// lowest CPU (`cpu_weight`: 0 is idle) and I/O weight, holding `pid`, unloaded however
/// it ends.
pub fn scope_properties(pid: u32, cpu_weight: u64) -> Vec<(&'static str, Value<'static>)> {
    vec![
        ("Description", Value::from("Lull guests (pool work lent this machine's idle time)")),
        ("PIDs", Value::from(vec![pid])),
        ("Delegate", Value::from(true)),
        ("Slice", Value::from("-.slice")),
        ("CPUWeight", Value::from(cpu_weight)),
        ("IOWeight", Value::from(1u64)),
        ("CollectMode", Value::from("inactive-or-failed")),
    ]
}

/// The properties of the agent's own scope (when it runs outside the user manager):
/// beside the owner's applications, normal weight, not delegated.
pub fn agent_scope_properties(pid: u32) -> Vec<(&'static str, Value<'static>)> {
    vec![
        ("Description", Value::from("Lull agent")),
        ("PIDs", Value::from(vec![pid])),
        ("Slice", Value::from("app.slice")),
        ("CollectMode", Value::from("inactive-or-failed")),
    ]
}

/// The deepest cgroup holding both `a` and `b` (paths like `/user.slice/…`).
pub fn common_ancestor(a: &str, b: &str) -> String {
    let parts = |p: &str| p.split('/').filter(|c| !c.is_empty()).map(str::to_owned).collect::<Vec<_>>();
    let common: Vec<String> = parts(a).into_iter().zip(parts(b)).take_while(|(x, y)| x == y).map(|(x, _)| x).collect();
    format!("/{}", common.join("/"))
}

/// Whether this process may move processes from cgroup `from` to `to`: it needs write
/// access to the `cgroup.procs` of their common ancestor.
fn may_move_between(from: &str, to: &str) -> bool {
    let procs = Path::new("/sys/fs/cgroup").join(common_ancestor(from, to).trim_start_matches('/')).join("cgroup.procs");
    let Ok(c) = std::ffi::CString::new(procs.into_os_string().into_encoded_bytes()) else { return false };
    // SAFETY: access reads a NUL-terminated path.
    unsafe { libc::access(c.as_ptr(), libc::W_OK) == 0 }
}

fn cgroup_of(pid: u32) -> Option<String> {
    std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?.lines().find_map(|l| l.strip_prefix("0::").map(str::to_owned))
}

/// Waits until `pid`'s cgroup is `done` (systemd moves a scope's processes when the
/// scope's start job runs, after the call returns), and returns it.
fn wait_for_cgroup(pid: u32, done: impl Fn(&str) -> bool) -> Result<String, String> {
    let deadline = Instant::now() + PLACE_TIMEOUT;
    loop {
        let now = cgroup_of(pid).unwrap_or_default();
        if done(&now) {
            return Ok(now);
        }
        if Instant::now() >= deadline {
            return Err(format!("systemd did not move process {pid} into its scope within {} s (it is in {now})", PLACE_TIMEOUT.as_secs()));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Kills what a dead agent's guests' scope still holds (its watchdog was killed too):
/// systemd then removes the empty scope.
fn kill_stale_scopes(manager_dir: &Path) {
    let Ok(entries) = std::fs::read_dir(manager_dir) else { return };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(instance) = name.strip_prefix(SCOPE_PREFIX).and_then(|n| n.strip_suffix(".scope")) else { continue };
        if !cgroup::instance_alive(instance) {
            tracing::warn!(scope = %name, "killing the guests' scope of an agent that is gone");
            let _ = cgroup::write(&e.path().join("cgroup.kill"), "1");
        }
    }
}

/// The D-Bus addresses where the owner's user manager may answer (it owns
/// `org.freedesktop.systemd1` on the session bus), in order: the session bus's address,
/// else the user bus in the runtime directory (what `dbus-user-session` makes, and where
/// `lull-agent.service` finds it). Its private socket (`systemd/private`) is not used:
/// zbus refuses its replies (their sender is no unique name).
pub fn manager_buses(session_bus: Option<&str>, runtime_dir: Option<&Path>) -> Vec<String> {
    let user_bus = runtime_dir.map(|r| format!("unix:path={}", r.join("bus").display()));
    let mut out: Vec<String> = session_bus.filter(|a| !a.is_empty()).map(str::to_owned).into_iter().collect();
    out.extend(user_bus.filter(|u| !out.contains(u)));
    out
}

/// A connection to the owner's systemd user manager.
struct UserManager {
    conn: zbus::blocking::Connection,
    /// The address where it answered.
    bus: String,
}

impl UserManager {
    fn connect() -> Result<Self, String> {
        let runtime = std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from);
        let session = std::env::var("DBUS_SESSION_BUS_ADDRESS").ok();
        let buses = manager_buses(session.as_deref(), runtime.as_deref());
        if buses.is_empty() {
            return Err("neither DBUS_SESSION_BUS_ADDRESS nor XDG_RUNTIME_DIR is set: no way to reach the user's systemd".into());
        }
        Self::connect_via(buses)
    }

    /// The first of `buses` where the user manager answers.
    fn connect_via(buses: Vec<String>) -> Result<Self, String> {
        let mut why = Vec::new();
        for bus in buses {
            let built = zbus::blocking::connection::Builder::address(bus.as_str()).and_then(|b| b.method_timeout(CALL_TIMEOUT).build());
            match built.map(|conn| Self { conn, bus: bus.clone() }) {
                Ok(m) => match m.control_group() {
                    Ok(_) => {
                        tracing::debug!(bus = ?m.bus, "the user's systemd answered");
                        return Ok(m);
                    }
                    Err(e) => why.push(format!("{bus}: {e}")),
                },
                Err(e) => why.push(format!("{bus}: {e}")),
            }
        }
        Err(format!("the user's systemd did not answer ({})", why.join("; ")))
    }

    fn proxy(&self) -> Result<zbus::blocking::Proxy<'_>, String> {
        zbus::blocking::proxy::Builder::new(&self.conn)
            .destination("org.freedesktop.systemd1")
            .and_then(|b| b.path("/org/freedesktop/systemd1"))
            .and_then(|b| b.interface("org.freedesktop.systemd1.Manager"))
            .map(|b| b.cache_properties(zbus::proxy::CacheProperties::No))
            .and_then(|b| b.build())
            .map_err(|e| e.to_string())
    }

    /// The manager's own cgroup (`/user.slice/user-1000.slice/user@1000.service`).
    fn control_group(&self) -> Result<String, String> {
        let cg: String = self.proxy()?.get_property("ControlGroup").map_err(|e| e.to_string())?;
        if cg.is_empty() || !cg.starts_with('/') {
            return Err(format!("the user's systemd has no cgroup of its own ({cg:?})"));
        }
        Ok(cg)
    }

    /// Starts a transient scope (mode `fail`: never replaces a unit of that name).
    fn start_scope(&self, name: &str, properties: &[(&'static str, Value<'static>)]) -> Result<OwnedObjectPath, String> {
        let aux: Vec<(&str, Vec<(&str, Value<'_>)>)> = Vec::new();
        self.proxy()?.call("StartTransientUnit", &(name, "fail", properties, aux)).map_err(|e| format!("StartTransientUnit {name}: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_asks_systemd_only_for_an_ordinary_owner_on_pure_v2() {
        assert_eq!(placement("auto", true, true), Placement::Base("lull".into()), "a root agent keeps /lull");
        assert_eq!(placement("auto", false, true), Placement::SystemdScope);
        assert_eq!(placement("auto", false, false), Placement::Base("lull".into()), "hybrid: the v1 controllers are root's");
        assert_eq!(placement("self", false, true), Placement::OwnCgroup);
        assert_eq!(placement("none", true, true), Placement::Off);
        assert_eq!(placement("lull-deleg", false, false), Placement::Base("lull-deleg".into()));
    }

    fn signature(v: &Value<'_>) -> String {
        v.value_signature().to_string()
    }

    #[test]
    fn the_guests_scope_is_delegated_idle_and_beside_the_owners_slices() {
        let props = scope_properties(4242, CPU_WEIGHT_IDLE);
        let get = |k: &str| props.iter().find(|(n, _)| *n == k).map(|(_, v)| v.clone()).unwrap_or_else(|| panic!("{k} set"));
        assert_eq!(get("Delegate"), Value::from(true));
        assert_eq!(get("PIDs"), Value::from(vec![4242u32]));
        assert_eq!(signature(&get("PIDs")), "au");
        assert_eq!(get("Slice"), Value::from("-.slice"), "below the user manager itself, not inside app.slice");
        assert_eq!((get("CPUWeight"), signature(&get("CPUWeight"))), (Value::from(0u64), "t".into()), "idle");
        assert_eq!(get("IOWeight"), Value::from(1u64));
        assert_eq!(get("CollectMode"), Value::from("inactive-or-failed"));
        assert_eq!(scope_properties(1, 1).iter().find(|(n, _)| *n == "CPUWeight").map(|p| p.1.clone()), Some(Value::from(1u64)));
        // The agent's own scope is neither delegated nor lowered.
        let agent = agent_scope_properties(7);
        assert!(agent.iter().all(|(n, _)| !["Delegate", "CPUWeight", "IOWeight"].contains(n)), "{agent:?}");
        assert!(agent.contains(&("Slice", Value::from("app.slice"))));
    }

    #[test]
    fn moving_guests_needs_the_common_ancestor() {
        let m = "/user.slice/user-1000.slice/user@1000.service";
        assert_eq!(common_ancestor(&format!("{m}/app.slice/lull-agent.service"), &format!("{m}/lull-guests-a1-2-0.scope")), m);
        assert_eq!(common_ancestor("/user.slice/user-1000.slice/session-2.scope", &format!("{m}/x.scope")), "/user.slice/user-1000.slice");
        assert_eq!(common_ancestor("/", "/a/b"), "/");
        assert_eq!(common_ancestor("/a/bc", "/a/b"), "/a", "components, not characters");
    }

    #[test]
    fn the_session_bus_first_then_the_user_bus() {
        let r = Path::new("/run/user/1000");
        let user_bus = "unix:path=/run/user/1000/bus".to_owned();
        assert_eq!(manager_buses(Some("unix:path=/run/user/1000/bus"), Some(r)), vec![user_bus.clone()], "once");
        assert_eq!(
            manager_buses(Some("unix:abstract=/tmp/dbus-x"), Some(r)),
            vec!["unix:abstract=/tmp/dbus-x".to_owned(), user_bus.clone()]
        );
        assert_eq!(manager_buses(None, Some(r)), vec![user_bus]);
        assert_eq!(manager_buses(Some(""), None), Vec::<String>::new());
    }

    /// A property of a loaded unit, over the manager's own connection.
    fn unit_property<T>(m: &UserManager, unit: &str, iface: &str, name: &str) -> T
    where
        T: TryFrom<zbus::zvariant::OwnedValue>,
        T::Error: Into<zbus::Error>,
    {
        let path: OwnedObjectPath = m.proxy().expect("manager").call("GetUnit", &(unit,)).expect("GetUnit");
        let p = zbus::blocking::proxy::Builder::<zbus::blocking::Proxy<'_>>::new(&m.conn)
            .destination("org.freedesktop.systemd1")
            .and_then(|b| b.path(path))
            .and_then(|b| b.interface(iface.to_owned()))
            .map(|b| b.cache_properties(zbus::proxy::CacheProperties::No))
            .and_then(|b| b.build())
            .expect("unit proxy");
        p.get_property(name).unwrap_or_else(|e| panic!("{unit} {name}: {e}"))
    }

    fn wait(what: &str, mut done: impl FnMut() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !done() {
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Inside `ci/systemd-user.sh`, as the owner in an app scope of a real user manager:
    /// the guests' scope is made with the properties asked for, holds the watchdog, which
    /// moves into its leaf; a process moved into `guests/` is frozen and then killed by the
    /// watchdog when the agent's end of its pipe closes; systemd removes the empty scope.
    fn in_an_app_scope() {
        let m = UserManager::connect().expect("the user manager answers");
        let manager_cg = m.control_group().expect("its cgroup");
        // A bus address that leads nowhere is passed over for the next.
        let runtime = PathBuf::from(std::env::var_os("XDG_RUNTIME_DIR").expect("XDG_RUNTIME_DIR"));
        let buses = vec!["unix:path=/nonexistent/bus".to_owned(), format!("unix:path={}", runtime.join("bus").display())];
        let second = UserManager::connect_via(buses).expect("the second address answers");
        assert_eq!(second.control_group().as_deref(), Ok(manager_cg.as_str()));
        let own = cgroup::own_unified_path().expect("own cgroup");
        assert!(own.starts_with(&format!("{manager_cg}/app.slice/")), "{own} inside {manager_cg}");
        let (scope, wd) = request_guest_scope(&m).expect("a delegated scope");
        assert_eq!(scope.cgroup, format!("{manager_cg}/{}", scope.name), "directly below the manager (Slice=-.slice)");
        assert_eq!(cgroup_of(wd.pid() as u32).as_deref(), Some(scope.cgroup.as_str()), "the scope holds the watchdog");
        let iface = "org.freedesktop.systemd1.Scope";
        assert!(unit_property::<bool>(&m, &scope.name, iface, "Delegate"), "Delegate=yes");
        assert_eq!(unit_property::<String>(&m, &scope.name, iface, "Slice"), "-.slice");
        let weight: u64 = unit_property(&m, &scope.name, iface, "CPUWeight");
        assert!(weight <= 1, "CPUWeight idle (0) or 1: {weight}");
        eprintln!("scope {} in {}, CPUWeight {weight}, asked on {:?}", scope.name, scope.cgroup, m.bus);
        let dir = Path::new("/sys/fs/cgroup").join(scope.cgroup.trim_start_matches('/'));
        // No controllers in a hybrid machine's v2 hierarchy: guests' cgroups need memory.
        match Cgroups::open_delegated(scope.cgroup.trim_start_matches('/'), WATCHDOG_LEAF, "test".into()) {
            Ok(c) => eprintln!("controllers here; missing: {:?}", c.missing),
            Err(e) => assert!(e.to_string().contains("no memory controller for guests in"), "{e}"),
        }
        assert_eq!(cgroup_of(wd.pid() as u32), Some(format!("{}/{WATCHDOG_LEAF}", scope.cgroup)), "the watchdog moved to its leaf");
        let g = dir.join("guests/g1");
        std::fs::create_dir_all(&g).expect("a guest's cgroup in the delegated scope");
        let mut guest = std::process::Command::new("sleep").arg("600").spawn().expect("sleep");
        cgroup::write(&g.join("cgroup.procs"), &guest.id().to_string()).expect("the owner moves its process into the scope");
        cgroup::write(&g.join("cgroup.freeze"), "1").expect("freeze");
        wait("frozen", || cgroup::keyed(&g.join("cgroup.events"), "frozen") == Some(1));
        drop(wd);
        let status = guest.wait().expect("the guest ends");
        assert_eq!(std::os::unix::process::ExitStatusExt::signal(&status), Some(libc::SIGKILL), "killed by the watchdog");
        wait("systemd to remove the empty scope", || !dir.exists());
        // The whole path: with no memory controller it says so, and leaves no scope behind.
        let (opened, _watchdog) = open("auto");
        let e = opened.expect_err("no memory controller in this hierarchy").to_string();
        assert!(e.contains("the owner's systemd gave no delegated scope (no memory controller for guests in"), "{e}");
        let parent = Path::new("/sys/fs/cgroup").join(manager_cg.trim_start_matches('/'));
        let left = || {
            std::fs::read_dir(&parent)
                .map_or(0, |d| d.flatten().filter(|e| e.file_name().to_string_lossy().starts_with(SCOPE_PREFIX)).count())
        };
        wait("no guests' scope left", || left() == 0);
    }

    /// Inside `ci/systemd-user.sh`, as the owner in a login session's scope outside the
    /// user manager: the agent asks to be moved into a scope of its own first (here no
    /// system manager can do that for the user manager, so it says so).
    fn in_a_session_scope() {
        let (opened, _watchdog) = open("auto");
        let e = opened.expect_err("no system manager here to move the agent").to_string();
        assert!(e.contains("did not move process"), "{e}");
    }

    #[test]
    #[ignore = "runs inside ci/systemd-user.sh, started by a_real_systemd_user_manager_delegates_the_guests_scope"]
    fn inside_a_user_manager() {
        assert_eq!(std::env::var("LULL_INSIDE_USER_MANAGER").as_deref(), Ok("1"), "only inside ci/systemd-user.sh");
        match std::env::var("LULL_WHERE_KIND").as_deref() {
            Ok("session") => in_a_session_scope(),
            _ => in_an_app_scope(),
        }
    }

    /// A real `systemd --user` (systemd 252 here) on a pure-v2 view of this machine
    /// (`ci/systemd-user.sh`, root, a private mount namespace): the D-Bus request, the
    /// scope's properties, the watchdog's move into its leaf, freeze and kill through the
    /// delegated subtree, and the fallback's message. The controllers themselves are the
    /// VM bench's (a hybrid machine's v2 hierarchy has none).
    #[test]
    fn a_real_systemd_user_manager_delegates_the_guests_scope() {
        let required = std::env::var("LULL_REQUIRE_SYSTEMD_USER").is_ok_and(|v| v == "1");
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        let owner = std::process::Command::new("id").args(["-u", "lullowner"]).output().is_ok_and(|o| o.status.success());
        let ready = root && owner && Path::new("/lib/systemd/systemd").exists() && Path::new("/usr/bin/unshare").exists();
        if !ready {
            assert!(!required, "LULL_REQUIRE_SYSTEMD_USER=1 but this needs root, lullowner (ci/setup-guest.sh), systemd and unshare");
            eprintln!("SKIPPED: needs root, the lullowner user, /lib/systemd/systemd and unshare; LULL_REQUIRE_SYSTEMD_USER=1 requires it");
            return;
        }
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../ci/systemd-user.sh");
        let exe = std::env::current_exe().expect("test binary");
        for (kind, place) in [("app", None), ("session", Some("session-1.scope"))] {
            let mut c = std::process::Command::new("unshare");
            c.args(["--mount", "--propagation", "private"]).arg(&script).arg("env");
            c.args(["LULL_INSIDE_USER_MANAGER=1", &format!("LULL_WHERE_KIND={kind}"), "RUST_BACKTRACE=1"]);
            c.arg(&exe).args(["--exact", "guest::linux::delegation::tests::inside_a_user_manager", "--ignored", "--nocapture"]);
            c.env_remove("DBUS_SESSION_BUS_ADDRESS");
            match place {
                Some(p) => c.env("WHERE", p),
                None => c.env_remove("WHERE"),
            };
            let out = c.output().expect("unshare");
            let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
            assert!(out.status.success() && text.contains("1 passed"), "{kind}:\n{text}");
        }
    }
}
