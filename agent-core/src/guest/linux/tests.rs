//! Real-process tests of the Linux guest runtime: real cgroups, real forks and daemons,
//! real bubblewrap namespaces (and the Landlock fallback), real OOM kills. They need
//! permission to create cgroups (root, or a delegated subtree); without it they skip,
//! unless `LULL_REQUIRE_CGROUPS=1` makes them required. Each test uses its own cgroup base
//! and removes it, even on failure.

use super::*;
use crate::guest::{GuestPhase, TaskOutcome};
use std::os::unix::process::CommandExt;
use std::path::Path;

/// A runtime on its own cgroup base, removed (with every process in it) when dropped.
struct Rig {
    rt: Option<LinuxRuntime>,
    base: String,
    _dir: tempfile::TempDir,
}

impl Rig {
    fn rt(&mut self) -> &mut LinuxRuntime {
        self.rt.as_mut().expect("runtime present until drop")
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        drop(self.rt.take());
        if let Ok(c) = Cgroups::open(&self.base) {
            c.cleanup_stale();
            c.remove_all();
        }
        for h in ["unified", "memory", "cpu", "pids", ""] {
            let d = Path::new("/sys/fs/cgroup").join(h).join(&self.base);
            let _ = std::fs::remove_dir(d.join("guests"));
            let _ = std::fs::remove_dir(d.join("agent"));
            let _ = std::fs::remove_dir(&d);
        }
    }
}

fn rig(name: &str, tweak: impl FnOnce(&mut Config)) -> Option<Rig> {
    let base = format!("lull-test-{name}-{}", std::process::id());
    match Cgroups::open(&base) {
        Ok(probe) => {
            probe.remove_all();
        }
        Err(e) => {
            let required = std::env::var("LULL_REQUIRE_CGROUPS").is_ok_and(|v| v == "1");
            assert!(!required, "LULL_REQUIRE_CGROUPS=1 but cgroups are unusable: {e}");
            eprintln!("SKIPPED: cannot create cgroups here ({e}); set LULL_REQUIRE_CGROUPS=1 to require");
            return None;
        }
    }
    let mut cfg = Config::default();
    cfg.guests.cgroup = base.clone();
    cfg.guests.owner_reserve_mib = 256;
    // Memory pressure is machine-wide: other tests (and builds) must not freeze this one's
    // guests. The pressure test sets its own threshold.
    cfg.guests.pressure_freeze_pct = 100.0;
    tweak(&mut cfg);
    let dir = tempfile::tempdir().expect("temp dir");
    // As root, guests run as an unprivileged account: let it pass through, as the agent's
    // own work root (/var/lib/lull/execute) does.
    std::fs::set_permissions(dir.path(), std::os::unix::fs::PermissionsExt::from_mode(0o711)).expect("chmod");
    let rt = LinuxRuntime::new(&cfg, dir.path());
    assert_ne!(rt.containment(), Containment::ProcessGroup);
    Some(Rig { rt: Some(rt), base, _dir: dir })
}

/// Tests that move the machine's available memory (hundreds of MiB allocated, a cgroup
/// pushing page cache out) run one at a time: the owner-pressure test reads the
/// machine-wide available memory and must not see another test's allocation come and go
/// (it did: a guest killed because a parallel test's allocation kept the pressure up).
static MACHINE_MEMORY: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Holds the machine's memory for the calling test (a failed test's poison is harmless).
fn machine_memory() -> std::sync::MutexGuard<'static, ()> {
    MACHINE_MEMORY.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn wait_until(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn alive(pid: i32) -> bool {
    // A zombie is dead; only a live process counts.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rsplit_once(')').map(|(_, r)| r.split_whitespace().next() != Some("Z")))
        .unwrap_or(false)
}

fn cpu_ticks(pid: i32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let f: Vec<u64> = s.rsplit_once(')').map(|(_, r)| r.split_whitespace().filter_map(|v| v.parse().ok()).collect()).unwrap_or_default();
    // utime and stime are fields 14 and 15 (the 12th and 13th numeric after the state).
    f.get(10).copied().unwrap_or(0) + f.get(11).copied().unwrap_or(0)
}

fn read_pid(path: &Path) -> Option<i32> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

fn workdir(rt: &mut LinuxRuntime, id: &str) -> PathBuf {
    rt.guests().into_iter().find(|g| g.id == id).expect("guest known").workdir
}

/// What the guest wrote to its stdout.
fn stdout_of(rt: &mut LinuxRuntime, id: &str) -> String {
    let info = rt.guests().into_iter().find(|g| g.id == id).expect("guest known");
    std::fs::read_to_string(info.stdout_log).unwrap_or_default()
}

/// What the guest wrote to its stderr (bwrap's own complaints too).
fn stderr_of(rt: &mut LinuxRuntime, id: &str) -> String {
    let info = rt.guests().into_iter().find(|g| g.id == id).expect("guest known");
    std::fs::read_to_string(info.stderr_log).unwrap_or_default()
}

/// The last pid of a process's `NSpid` line: its pid in its own PID namespace.
fn pid_in_own_namespace(pid: i32) -> Option<i32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status.lines().find_map(|l| l.strip_prefix("NSpid:"))?.split_whitespace().last()?.parse().ok()
}

/// The host pid of a guest's process whose pid file (`echo $$ > FILE`, as the guest sees
/// its pid) is `file` in its work directory: the same number without namespaces.
fn guest_pid(rt: &mut LinuxRuntime, id: &str, file: &str) -> i32 {
    let wd = workdir(rt, id);
    wait_until("the guest's pid file", Duration::from_secs(120), || read_pid(&wd.join(file)).is_some());
    let inner = read_pid(&wd.join(file)).expect("pid");
    if !rt.isolation.namespaces() {
        return inner;
    }
    let g = rt.guests.iter().find(|g| g.id == id).expect("guest running");
    let mut found = None;
    wait_until("the guest's process", Duration::from_secs(10), || {
        found = LinuxRuntime::pids_of(g.cg.as_ref(), g.pid).into_iter().find(|&p| pid_in_own_namespace(p) == Some(inner));
        found.is_some()
    });
    found.expect("found")
}

fn ended(rt: &mut LinuxRuntime, id: &str) -> Option<GuestPhase> {
    rt.present();
    rt.guests().into_iter().find(|g| g.id == id).map(|g| g.phase).filter(|p| matches!(p, GuestPhase::Ended { .. }))
}

/// Every cgroup level from the top of Lull's subtree down to the guest has the lowest CPU
/// weight (v1: cpu.shares 2 or cpu.idle 1; v2: cpu.weight 1): a default weight anywhere
/// above would let the guest compete with the owner at that level.
fn assert_lowest_cpu_weight_on_every_level(pid: i32) {
    let cg = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
    let (root, path) = if Path::new("/sys/fs/cgroup/cgroup.controllers").exists() {
        ("/sys/fs/cgroup".to_string(), cg.lines().find_map(|l| l.strip_prefix("0::")).unwrap().to_string())
    } else {
        let line = cg.lines().find(|l| l.split(':').nth(1).is_some_and(|c| c.split(',').any(|c| c == "cpu"))).unwrap();
        ("/sys/fs/cgroup/cpu".to_string(), line.splitn(3, ':').nth(2).unwrap().to_string())
    };
    let mut dir = PathBuf::from(&root);
    for part in path.split('/').filter(|p| !p.is_empty()) {
        dir = dir.join(part);
        let read = |f: &str| std::fs::read_to_string(dir.join(f)).map(|s| s.trim().to_string()).unwrap_or_default();
        let lowest = read("cpu.idle") == "1" || read("cpu.shares") == "2" || read("cpu.weight") == "1";
        assert!(lowest, "{} has a default CPU weight", dir.display());
    }
}

/// A guest that leaves a setsid'ed, double-forked daemon that spins (its main process
/// stays: in its own PID namespace the daemon would end with it).
const DAEMON: &str = r#"(setsid sh -c 'echo $$ > daemon.pid; while :; do :; done' &) ; exec sleep 100000"#;

#[test]
fn daemonized_guest_is_contained_frozen_and_killed_with_its_tree() {
    let Some(mut rig) = rig("daemon", |_| {}) else { return };
    let rt = rig.rt();
    let id = rt.submit(GuestSpec::new("sh", ["-c", DAEMON]));
    rt.apply(GuestDirective::Accept);
    let daemon = guest_pid(rt, &id, "daemon.pid");
    // Its parent has exited; the daemon is in its own session yet still in the guest's cgroup.
    let cg = std::fs::read_to_string(format!("/proc/{daemon}/cgroup")).unwrap();
    assert!(cg.contains(&id), "daemon escaped its cgroup: {cg}");
    // SAFETY: getsid on a pid.
    assert_eq!(unsafe { libc::getsid(daemon) }, daemon, "the daemon did call setsid");
    assert_eq!(crate::sys::sched::of(daemon).unwrap(), crate::sys::sched::LOWEST, "lowest priority inherited by the daemon");
    assert_lowest_cpu_weight_on_every_level(daemon);
    rt.tick();
    assert!(rt.present());

    // The fast path (what the input thread calls) freezes synchronously enough that the
    // kernel reports the cgroup frozen within milliseconds.
    let freeze = rt.fast_freeze().expect("a fast path");
    let t0 = Instant::now();
    freeze();
    wait_until("the cgroup to report frozen", Duration::from_secs(10), || rt.frozen());
    eprintln!("frozen after {:?}", t0.elapsed());
    let before = cpu_ticks(daemon);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(cpu_ticks(daemon), before, "a frozen daemon used CPU");
    assert!(alive(daemon));
    // The freeze-time weight boost is undone once the kernel reports the guests frozen.
    rt.tick();
    assert_lowest_cpu_weight_on_every_level(daemon);

    // Thaw (linger): the kernel reports it thawed (whether it then gets CPU depends on
    // the owner's load: it is SCHED_IDLE).
    rt.apply(GuestDirective::Linger);
    wait_until("the cgroup to thaw", Duration::from_secs(10), || !rt.frozen());
    assert_lowest_cpu_weight_on_every_level(daemon);
    // Freeze and thaw at once (before any tick): the boost never outlives the freeze.
    freeze();
    rt.apply(GuestDirective::Linger);
    assert_lowest_cpu_weight_on_every_level(daemon);

    // Evict (not checkpointable): the whole tree dies, frozen or not.
    rt.apply(GuestDirective::Freeze);
    rt.apply(GuestDirective::Evict);
    wait_until("the daemon to die", Duration::from_secs(20), || !alive(daemon));
    wait_until("the guest to end", Duration::from_secs(20), || ended(rt, &id).is_some());
    assert!(matches!(ended(rt, &id), Some(GuestPhase::Ended { evicted: true, .. })));
    assert!(!rt.present());
    let unified = rt.cgroups().expect("cgroups").unified.join(&id);
    assert!(!unified.exists(), "the guest's cgroup was not removed");
}

/// A file only the owner may read, in the owner's home (the agent's user's).
fn owners_secret() -> (tempfile::TempDir, PathBuf) {
    let home = std::env::var_os("HOME").map(PathBuf::from).filter(|h| h.is_dir()).expect("HOME is set");
    let secret_dir = tempfile::Builder::new().prefix(".lull-test-home-").tempdir_in(&home).expect("dir in home");
    let secret = secret_dir.path().join("secret.txt");
    std::fs::write(&secret, "owner's secret\n").unwrap();
    std::fs::set_permissions(&secret, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    (secret_dir, secret)
}

#[test]
fn a_guest_in_its_namespaces_sees_and_reaches_nothing_of_the_host() {
    let Some(mut rig) = rig("ns", |_| {}) else { return };
    assert!(rig.rt().isolation.namespaces(), "bubblewrap must work here: {}", rig.rt().describe());
    let (_home, secret) = owners_secret();
    // One of the owner's programs, with a marker on its command line and in its environment.
    let marker = format!("lull-owner-marker-{}", std::process::id());
    // Its own process group, killed whole below: sh's `sleep` child must not outlive the test.
    let mut owner =
        std::process::Command::new("sh").args(["-c", "sleep 1000", &marker]).env("LULL_MARKER", &marker).process_group(0).spawn().unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("listener");
    let port = listener.local_addr().unwrap().port();
    let data_dir = rig._dir.path().to_path_buf();
    let (m1, m2) = marker.split_at(8);
    let script = format!(
        r#"cat {secret} && echo LEAK-read-secret
ls {home} > /dev/null 2>&1 && echo LEAK-list-home
m="{m1}""{m2}"; for f in /proc/[0-9]*/cmdline /proc/[0-9]*/environ; do grep -q "$m" "$f" 2>/dev/null && echo "LEAK-marker $f"; done
kill -0 {owner_pid} 2> /dev/null && echo LEAK-signal
python3 -c 'import socket; socket.create_connection(("127.0.0.1", {port}), timeout=2); print("LEAK-tcp")' 2> /dev/null
for w in /usr/lull-x /etc/lull-x {data}/lull-x {home}/lull-x /lull-x; do (echo x > "$w") 2> /dev/null && echo "LEAK-write $w"; done
echo x > /tmp/lull-inside-$$ && echo x > /var/tmp/lull-inside2-$$ && echo wrote-tmp
ls /sys/fs/cgroup > /dev/null 2>&1 && echo LEAK-sys
echo inside > inside.txt && echo wrote-inside
echo "pid1: $(tr '\0' ' ' < /proc/1/cmdline)"
echo "home: $HOME tmp: $TMPDIR pwd: $(pwd)"
echo done"#,
        secret = secret.display(),
        home = secret.parent().unwrap().parent().unwrap().display(),
        owner_pid = owner.id(),
        data = data_dir.display(),
    );
    let rt = rig.rt();
    let id = rt.submit(GuestSpec::new("sh", ["-c", &script]));
    rt.apply(GuestDirective::Accept);
    wait_until("the guest to end", Duration::from_secs(120), || ended(rt, &id).is_some());
    fallback::signal_group(owner.id() as i32, libc::SIGKILL);
    let _ = owner.wait();
    let out = stdout_of(rt, &id);
    let wd = workdir(rt, &id);
    assert!(out.contains("done") && out.contains("wrote-inside") && out.contains("wrote-tmp"), "{out}");
    assert!(!out.lines().any(|l| l.starts_with("LEAK")), "the guest reached the host:\n{out}");
    assert!(!out.contains("owner's secret"), "{out}");
    assert!(out.contains("home: /work tmp: /tmp pwd: /work"), "{out}");
    let pid1 = out.lines().find(|l| l.starts_with("pid1:")).unwrap_or_default();
    assert!(pid1.contains("bwrap --args 3 -- sh") && !pid1.contains(&wd.display().to_string()), "no host path in its pid 1: {pid1}");
    assert_eq!(std::fs::read_to_string(wd.join("inside.txt")).unwrap(), "inside\n");
    assert!(std::fs::read_dir(wd.join("tmp")).unwrap().count() >= 2, "its /tmp and /var/tmp are its own work directory's tmp/");
    assert!(!data_dir.join("lull-x").exists() && !Path::new("/lull-x").exists());
}

#[test]
fn the_landlock_fallback_keeps_the_owners_home_and_the_machines_tmp_from_a_guest() {
    let Some(mut rig) = rig("landlock", |_| {}) else { return };
    rig.rt().isolation = isolation::Isolation::Landlock { why: "test".into() };
    let (_home, secret) = owners_secret();
    let home = secret.parent().unwrap().parent().unwrap().to_path_buf();
    let script = format!(
        "cat {s}; echo cat=$?; ls {h} >/dev/null; echo ls=$?; echo mine > own.txt; echo write=$?; \
         echo x > /tmp/lull-guest-escape-$$; echo tmp=$?",
        s = secret.display(),
        h = home.display()
    );
    let rt = rig.rt();
    assert!(rt.describe().contains("LANDLOCK ONLY"), "{}", rt.describe());
    let id = rt.submit(GuestSpec::new("sh", ["-c", &script]));
    rt.apply(GuestDirective::Accept);
    wait_until("the guest to end", Duration::from_secs(120), || ended(rt, &id).is_some());
    let wd = workdir(rt, &id);
    let info = rt.guests().into_iter().find(|g| g.id == id).unwrap();
    let out = std::fs::read_to_string(&info.stdout_log).unwrap();
    let err = std::fs::read_to_string(&info.stderr_log).unwrap();
    assert!(!out.contains("owner's secret"), "the guest read the owner's file: {out}");
    assert!(out.contains("cat=1") && out.contains("ls=2"), "{out}\n{err}");
    assert!(err.contains("Permission denied"), "{err}");
    assert!(out.contains("write=0") && std::fs::read_to_string(wd.join("own.txt")).unwrap() == "mine\n", "{out}");
    assert!(out.contains("tmp=1") || out.contains("tmp=2"), "the guest wrote to /tmp: {out}");
}

#[test]
fn a_guests_daemons_end_with_its_main_process() {
    let Some(mut rig) = rig("orphans", |_| {}) else { return };
    let rt = rig.rt();
    // The main process leaves a spinning, setsid'ed, double-forked daemon and exits.
    let id = rt.submit(GuestSpec::new("sh", ["-c", "(setsid sh -c 'while :; do :; done' &); echo started"]));
    rt.apply(GuestDirective::Accept);
    wait_until("the guest, daemon and all, to end", Duration::from_secs(60), || ended(rt, &id).is_some());
    assert_eq!(stdout_of(rt, &id), "started\n", "{}", stderr_of(rt, &id));
    assert!(matches!(ended(rt, &id), Some(GuestPhase::Ended { code: Some(0), evicted: false, .. })));
}

#[test]
fn a_program_the_guest_cannot_see_is_not_found_and_nothing_starts() {
    let Some(mut rig) = rig("notfound", |_| {}) else { return };
    let rt = rig.rt();
    // On the agent's own PATH, but not in the guest's view.
    let exe = std::env::current_exe().expect("test binary");
    for program in ["no-such-program-lull", exe.to_str().unwrap()] {
        let id = rt.submit(GuestSpec::new(program, Vec::<String>::new()));
        rt.apply(GuestDirective::Accept);
        let info = rt.guests().into_iter().find(|g| g.id == id).unwrap();
        assert_eq!(info.phase, GuestPhase::Ended { code: None, signal: None, evicted: false }, "{info:?}");
        assert_eq!(info.pid, None);
        let why = info.failure.unwrap_or_default();
        assert!(why.starts_with(&format!("program not found: {program}")), "{why}");
    }
    assert!(!rt.present());
}

#[test]
fn a_program_that_cannot_start_ends_with_why_in_its_outcome_and_its_output() {
    let Some(mut rig) = rig("nostart", |_| {}) else { return };
    let rt = rig.rt();
    let missing = rt.submit(GuestSpec::new("lull-no-such-program", Vec::<String>::new()));
    // A file in the guest's view that is not executable.
    let not_exec = rt.submit(GuestSpec::new("/etc/passwd", Vec::<String>::new()));
    let ran = rt.submit(GuestSpec::new("sh", ["-c", "exit 3"]));
    rt.apply(GuestDirective::Accept);
    for id in [&missing, &not_exec, &ran] {
        wait_until("the guest to end", Duration::from_secs(60), || ended(rt, id).is_some());
    }
    let info = |rt: &mut LinuxRuntime, id: &str| rt.guests().into_iter().find(|g| g.id == id).unwrap();
    let m = info(rt, &missing);
    assert_eq!(m.outcome(), Some(TaskOutcome::ProgramNotFound { program: "lull-no-such-program".into() }));
    assert!(m.failure.as_deref().is_some_and(|f| f.starts_with("program not found: lull-no-such-program")), "{m:?}");
    let said = std::fs::read_to_string(&m.stderr_log).unwrap();
    assert_eq!(said, "lull: program not found: lull-no-such-program\n", "the job's own output says it");
    let n = info(rt, &not_exec).outcome().unwrap();
    assert_eq!(n, TaskOutcome::NotExecutable { program: "/etc/passwd".into(), error: "permission denied".into() });
    assert_eq!(info(rt, &ran).outcome(), Some(TaskOutcome::Exited { code: 3 }));
}

#[test]
fn a_guest_filling_its_disk_is_stopped_and_no_file_grows_past_the_limit() {
    let Some(mut rig) = rig("disk", |c| c.guests.disk_mib = 16) else { return };
    let rt = rig.rt();
    // One file past the limit: the write fails (SIGXFSZ) at 16 MiB.
    let id = rt.submit(GuestSpec::new("sh", ["-c", "head -c 20971520 /dev/zero > big; echo rc=$?; sleep 1000"]));
    rt.apply(GuestDirective::Accept);
    let wd = workdir(rt, &id);
    wait_until("the write to fail", Duration::from_secs(120), || stdout_of(rt, &id).contains("rc="));
    assert_eq!(std::fs::metadata(wd.join("big")).unwrap().len(), 16 << 20, "{}", stdout_of(rt, &id));
    assert!(stdout_of(rt, &id).contains(&format!("rc={}", 128 + libc::SIGXFSZ)), "{}", stdout_of(rt, &id));
    // At the limit (16 MiB) the guest is still within it; one more file and it is over.
    rt.tick();
    assert!(ended(rt, &id).is_none(), "stopped at its limit, not over it");
    rt.apply(GuestDirective::Evict);
    wait_until("the guest to end", Duration::from_secs(30), || ended(rt, &id).is_some());
    // Many files under the limit each, over it together, one held open after deletion.
    let fill = "exec 3> hidden; head -c 6291456 /dev/zero >&3; rm hidden; for i in 1 2 3; do head -c 4194304 /dev/zero > f$i; done; echo written; sleep 1000";
    let id = rt.submit(GuestSpec::new("sh", ["-c", fill]));
    rt.apply(GuestDirective::Accept);
    wait_until("the guest to be stopped for its disk", Duration::from_secs(120), || ended(rt, &id).is_some());
    let info = rt.guests().into_iter().find(|g| g.id == id).unwrap();
    let why = info.failure.clone().unwrap_or_default();
    assert!(why.contains("disk limit") && why.contains("disk_mib = 16"), "{why}");
    assert!(matches!(info.phase, GuestPhase::Ended { signal: Some(libc::SIGKILL), evicted: false, .. }), "{info:?}");
    // The job fails with the runtime's reason, not as killed by SIGKILL.
    assert_eq!(info.outcome(), Some(TaskOutcome::Stopped { error: why }));
}

/// Blocks allocated under `dir`, in MiB.
fn allocated_mib(dir: &Path) -> f64 {
    let mut total = 0u64;
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        total += e.metadata().map(|m| std::os::unix::fs::MetadataExt::blocks(&m) * 512).unwrap_or(0);
    }
    total as f64 / (1u64 << 20) as f64
}

#[test]
fn a_guest_cannot_preallocate_and_a_fast_writer_is_stopped_within_a_poll_of_its_limit() {
    let Some(mut rig) = rig("disk-fast", |c| c.guests.disk_mib = 64) else { return };
    let rt = rig.rt();
    // Preallocation is refused outright; then files written as fast as the disk takes them.
    let fill = "fallocate -l 32M pre; echo fallocate=$?; i=0; while head -c 8388608 /dev/zero > f$i; do i=$((i+1)); done; sleep 1000";
    let id = rt.submit(GuestSpec::new("sh", ["-c", fill]));
    rt.apply(GuestDirective::Accept);
    let wd = workdir(rt, &id);
    wait_until("the guest to be stopped for its disk", Duration::from_secs(120), || ended(rt, &id).is_some());
    assert!(stdout_of(rt, &id).contains("fallocate=1"), "{} {}", stdout_of(rt, &id), stderr_of(rt, &id));
    let used = allocated_mib(&wd);
    eprintln!("disk_mib 64: the guest held {used:.1} MiB when stopped");
    assert!((60.0..=64.0 + 16.0 + 32.0).contains(&used), "held {used:.1} MiB of 64 (+16 MiB of slack)");
    let info = rt.guests().into_iter().find(|g| g.id == id).unwrap();
    assert!(info.failure.as_deref().is_some_and(|f| f.contains("disk_mib = 64")), "{info:?}");
}

#[test]
fn a_guest_flooding_its_output_is_cut_at_the_cap() {
    let Some(mut rig) = rig("flood", |c| c.guests.output_mib = 1) else { return };
    let rt = rig.rt();
    let id = rt.submit(GuestSpec::new("yes", ["lull"]));
    rt.apply(GuestDirective::Accept);
    wait_until("the flood to end", Duration::from_secs(120), || ended(rt, &id).is_some());
    let info = rt.guests().into_iter().find(|g| g.id == id).unwrap();
    let len = std::fs::metadata(&info.stdout_log).unwrap().len();
    assert!((1 << 20..(1 << 20) + 200).contains(&len), "stdout.log is {len} bytes");
    assert!(stdout_of(rt, &id).ends_with("the guest's further writes to it fail]\n"));
    // Its writes failed: `yes` ended by SIGPIPE, not by the runtime.
    assert_eq!(info.phase, GuestPhase::Ended { code: None, signal: Some(libc::SIGPIPE), evicted: false }, "{info:?}");
    // The job fails saying its output was cut, not as killed by SIGPIPE.
    let why = info.failure.clone().unwrap_or_default();
    assert_eq!(why, "output limit: its stdout was cut at [guests] output_mib = 1");
    assert_eq!(info.outcome(), Some(TaskOutcome::Stopped { error: why }));
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(&info.stdout_log).unwrap().permissions().mode() & 0o777, 0o600);
    assert!(!info.stdout_log.starts_with(&info.workdir), "the guest cannot reach its output files");
}

#[test]
fn guest_allocating_past_its_cap_is_oom_killed_inside_its_cgroup() {
    let _memory = machine_memory();
    let Some(mut rig) = rig("cap", |c| c.guests.memory_cap_mib = 64) else { return };
    let rt = rig.rt();
    // Touches 400 MiB, 1 MiB at a time.
    let alloc = "b = []\nfor i in range(400):\n    b.append(bytearray(1 << 20))\nprint('survived')\n";
    let id = rt.submit(GuestSpec::new("python3", ["-c", alloc]));
    rt.apply(GuestDirective::Accept);
    let limit = rt.guests().into_iter().find(|g| g.id == id).and_then(|g| g.memory_limit_bytes);
    assert_eq!(limit, Some(64 * MIB), "the configured cap was applied");
    let mut oom = 0;
    wait_until("the guest to end", Duration::from_secs(120), || {
        if let Some(g) = rt.guests.iter().find(|g| g.id == id) {
            oom = oom.max(g.cg.as_ref().map_or(0, |c| c.oom_kills()));
        }
        ended(rt, &id).is_some()
    });
    let info = rt.guests().into_iter().find(|g| g.id == id).unwrap();
    let out = std::fs::read_to_string(&info.stdout_log).unwrap();
    assert!(!out.contains("survived"), "the guest got past its cap");
    assert_eq!(info.phase, GuestPhase::Ended { code: None, signal: Some(libc::SIGKILL), evicted: false }, "OOM-killed");
    assert!(info.peak_mem_bytes <= 64 * MIB, "peak {} above the cap", info.peak_mem_bytes);
    assert!(info.peak_mem_bytes >= 32 * MIB, "the guest never allocated: peak {}", info.peak_mem_bytes);
    let _ = oom;
}

#[test]
fn the_memory_report_measures_each_guests_working_set_from_its_cgroup() {
    let _memory = machine_memory();
    let Some(mut rig) = rig("memrep", |c| c.guests.memory_cap_mib = 128) else { return };
    let rt = rig.rt();
    // With no guest: nothing measured, and M is at most the fixed cap for its one slot.
    let idle = rt.memory().expect("the Linux runtime measures memory");
    assert!(idle.guests.is_empty() && !idle.pressure, "{idle:?}");
    assert!(idle.guest_memory_bytes > 0 && idle.guest_memory_bytes <= 128 * MIB, "{idle:?}");
    assert!(idle.available_bytes >= idle.guest_memory_bytes);
    // A guest that touches 48 MiB and holds it.
    let hold = "b = b'x' * (48 << 20)\nopen('ready', 'w').write('1')\nimport time\ntime.sleep(600)\n";
    let id = rt.submit(GuestSpec::new("python3", ["-c", hold]));
    rt.apply(GuestDirective::Accept);
    let wd = workdir(rt, &id);
    wait_until("the guest to hold its memory", Duration::from_secs(120), || wd.join("ready").exists());
    rt.present();
    let m = rt.memory().unwrap();
    let g = m.guests.iter().find(|g| g.id == id).unwrap_or_else(|| panic!("the guest is measured: {m:?}"));
    assert!(g.working_set_bytes >= 44 * MIB && g.working_set_bytes <= 128 * MIB, "working set {} MiB", g.working_set_bytes / MIB);
    assert!(m.guest_memory_bytes <= 128 * MIB, "{m:?}");
    rt.apply(GuestDirective::Evict);
    wait_until("the guest to end", Duration::from_secs(30), || ended(rt, &id).is_some());
    rt.present();
    assert!(rt.memory().unwrap().guests.is_empty(), "an ended guest is not reported");
}

#[test]
fn checkpointable_guest_gets_a_signal_then_a_kill_after_the_grace() {
    let Some(mut rig) = rig("ckpt", |c| c.eviction.kill_grace_s = 1) else { return };
    let rt = rig.rt();
    // Checkpoints on SIGTERM but then refuses to exit: the kill after the grace ends it.
    let script = "trap 'echo checkpointed > ckpt.txt' TERM; echo \"$LULL_CHECKPOINT\" > main.pid; while :; do sleep 0.05; done";
    let mut spec = GuestSpec::new("sh", ["-c", script]);
    spec.checkpointable = true;
    let id = rt.submit(spec);
    rt.apply(GuestDirective::Accept);
    let wd = workdir(rt, &id);
    wait_until("the guest to start", Duration::from_secs(120), || wd.join("main.pid").exists());
    rt.apply(GuestDirective::Freeze);
    let t0 = Instant::now();
    rt.apply(GuestDirective::Evict);
    wait_until("the checkpoint", Duration::from_secs(20), || wd.join("ckpt.txt").exists());
    wait_until("the kill after the grace", Duration::from_secs(20), || ended(rt, &id).is_some());
    assert!(t0.elapsed() >= Duration::from_millis(900), "killed before the grace ended: {:?}", t0.elapsed());
    // Its checkpoint's path as it sees it (its work directory is /work in its view).
    assert_eq!(std::fs::read_to_string(wd.join("main.pid")).unwrap().trim(), "/work/lull-checkpoint");
}

#[test]
fn donated_cpu_comes_from_the_cgroup_and_reaches_the_totals() {
    let Some(mut rig) = rig("acct", |_| {}) else { return };
    let rt = rig.rt();
    // Spins until it has had 0.2 CPU-s: as a SCHED_IDLE guest on a busy machine that can
    // take a while, which is the point.
    let spin = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.2:\n    pass\n";
    let id = rt.submit(GuestSpec::new("python3", ["-c", spin]));
    rt.apply(GuestDirective::Accept);
    wait_until("the guest to end", Duration::from_secs(120), || ended(rt, &id).is_some());
    let totals = rt.totals();
    let t = totals.iter().find(|t| t.guest == id).expect("final totals reported");
    assert!(t.cpu_us >= 200_000, "cpu {} µs", t.cpu_us);
    assert!(t.wall_ms >= 200, "wall {} ms", t.wall_ms);
    assert!(rt.totals().iter().all(|t| t.guest != id), "final totals reported once");
    assert!(rt.reading().cpu_us_total >= t.cpu_us, "readings keep ended guests' CPU (monotone)");
}

#[test]
fn leftovers_of_a_dead_agent_are_killed_at_the_next_start() {
    let Some(mut rig) = rig("stale", |_| {}) else { return };
    // A dead agent's instance (no process has this pid) with a guest process still in it.
    let ours = rig.rt().cgroups().expect("cgroups").clone();
    let dead = ours.unified.parent().expect("guests dir").join("a999999999-1-0");
    let guest = dead.join("g-left-behind");
    std::fs::create_dir_all(&guest).unwrap();
    let mut orphan = std::process::Command::new("sleep").arg("1000").spawn().unwrap();
    std::fs::write(guest.join("cgroup.procs"), orphan.id().to_string()).unwrap();
    let (pid, base) = (orphan.id() as i32, rig.base.clone());
    // A live agent's instance (ours) is left alone by the next start.
    let id = rig.rt().submit(GuestSpec::new("sleep", ["1000"]));
    rig.rt().apply(GuestDirective::Accept);
    assert!(rig.rt().present());
    let mut cfg = Config::default();
    cfg.guests.cgroup = base;
    let next = LinuxRuntime::new(&cfg, rig._dir.path());
    let _ = orphan.wait();
    assert!(!alive(pid), "the dead agent's guest survived the next start");
    assert!(!dead.exists(), "the dead agent's cgroups were not removed");
    assert!(rig.rt().present(), "a live agent's guest was killed");
    assert!(rig.rt().guests().iter().any(|g| g.id == id && !matches!(g.phase, GuestPhase::Ended { .. })));
    drop(next);
}

#[test]
fn nothing_starts_without_admission() {
    // An owner reserve larger than this machine's memory: never admitted.
    let Some(mut rig) = rig("admit", |c| c.guests.owner_reserve_mib = 1 << 20) else { return };
    let rt = rig.rt();
    let id = rt.submit(GuestSpec::new("true", Vec::<String>::new()));
    rt.apply(GuestDirective::Accept);
    rt.tick();
    assert_eq!(rt.guests().into_iter().find(|g| g.id == id).unwrap().phase, GuestPhase::Queued);
    assert!(!rt.present());
}

#[test]
fn owner_memory_pressure_freezes_then_kills_the_guest() {
    let _memory = machine_memory();
    // The owner reserve is set just under what is available now, so the test's own
    // allocation (the owner's demand growing) pushes available memory below it.
    let avail_mib = memory::meminfo().available / MIB;
    let Some(mut rig) = rig("pressure", |c| {
        c.guests.owner_reserve_mib = avail_mib.saturating_sub(1024);
        // Long enough that the thaw after the first freeze comes before any kill, even on
        // a loaded machine; the stall threshold high enough that only the reserve, the
        // trigger under test, freezes (a build beside the test stalls memory too).
        // (4 s was not: right after the owner's demand is dropped the kernel may still be
        // reclaiming, the owner's stall stays above half the threshold and the thaw waits.)
        c.guests.pressure_kill_s = 10;
        c.guests.pressure_freeze_pct = 60.0;
    }) else {
        return;
    };
    let rt = rig.rt();
    let id = rt.submit(GuestSpec::new("sleep", ["1000"]));
    rt.apply(GuestDirective::Accept);
    rt.tick();
    assert!(rt.present() && !rt.frozen(), "admitted and running");
    // The owner's demand grows until the runtime sees available memory below the reserve:
    // the machine is shared (builds start and end), so a fixed allocation is not enough
    // to know where available memory will be. Grows in 256-MiB steps, never past what
    // is available, ticking the runtime as the agent would.
    fn grow(demand: &mut Vec<Vec<u8>>) {
        if memory::meminfo().available / MIB > 512 {
            let mut v = vec![0u8; (256 * MIB) as usize];
            for i in (0..v.len()).step_by(4096) {
                v[i] = 1;
            }
            demand.push(v);
        }
    }
    fn grow_until_frozen(rt: &mut LinuxRuntime, what: &str) -> Vec<Vec<u8>> {
        let mut demand: Vec<Vec<u8>> = Vec::new();
        wait_until(what, Duration::from_secs(30), || {
            rt.tick();
            if rt.frozen() {
                return true;
            }
            grow(&mut demand);
            std::thread::sleep(Duration::from_millis(50));
            false
        });
        demand
    }
    let demand = grow_until_frozen(rt, "frozen with available memory below the owner reserve");
    drop(demand);
    wait_until("thaw once the pressure clears", Duration::from_secs(20), || {
        rt.tick();
        !rt.frozen()
    });
    assert!(
        ended(rt, &id).is_none(),
        "the guest was killed before the pressure cleared, not thawed (available now {} MiB, reserve {} MiB)",
        memory::meminfo().available / MIB,
        avail_mib.saturating_sub(1024)
    );
    let mut demand = grow_until_frozen(rt, "frozen again");
    // Half a GiB further below the reserve: just under it, the machine's own ups and
    // downs (a build's memory freed beside the test) lifted available memory back over
    // it, the guest was thawed, and the 10-s clock to the kill started again (CI, once).
    grow(&mut demand);
    grow(&mut demand);
    std::thread::sleep(Duration::from_millis(10_100));
    wait_until("the guest to be killed", Duration::from_secs(20), || {
        rt.tick();
        if !rt.frozen() {
            // Thawed all the same: the owner's demand grows again, as it would.
            grow(&mut demand);
        }
        ended(rt, &id).is_some()
    });
    drop(demand);
    assert!(matches!(ended(rt, &id), Some(GuestPhase::Ended { evicted: true, .. })));
}

/// This machine's address on its outward interface (no packet is sent to find it).
fn outward_ip() -> Option<std::net::IpAddr> {
    let s = std::net::UdpSocket::bind("0.0.0.0:0").ok()?;
    s.connect("192.0.2.1:9").ok()?;
    s.local_addr().ok().map(|a| a.ip()).filter(|ip| !ip.is_loopback())
}

#[test]
fn a_guest_has_no_network_unless_asked_and_allowed_and_never_the_hosts_loopback() {
    use crate::config::NetworkPolicy;
    let Some(mut rig) = rig("net", |c| c.guests.network = NetworkPolicy::Outbound) else { return };
    // A service of this machine on every address, as a database or a coordinator may be.
    let listener = std::net::TcpListener::bind("0.0.0.0:0").expect("listener");
    let port = listener.local_addr().unwrap().port();
    let outward = outward_ip().map_or("192.0.2.1".to_string(), |ip| ip.to_string());
    let probe = format!(
        "import socket\nfor name, host in (('loopback', '127.0.0.1'), ('slirp-host', '10.0.2.2'), ('outward', '{outward}')):\n    try:\n        socket.create_connection((host, {port}), timeout=3).close(); print(name + '=ok')\n    except OSError as e:\n        print(name + '=%d' % e.errno)\n"
    );
    let run = |rt: &mut LinuxRuntime, network: Option<NetworkPolicy>| {
        let mut spec = GuestSpec::new("python3", ["-c", probe.as_str()]);
        spec.network = network;
        let id = rt.submit(spec);
        rt.apply(GuestDirective::Accept);
        wait_until("the probe", Duration::from_secs(120), || ended(rt, &id).is_some());
        let info = rt.guests().into_iter().find(|g| g.id == id).unwrap();
        (stdout_of(rt, &id), info.failure)
    };
    let rt = rig.rt();
    // Not asked: no network at all (its own loopback, nothing else).
    let (none, _) = run(rt, None);
    assert!(!none.contains("=ok"), "no network: {none}");
    assert!(none.contains(&format!("loopback={}", libc::ECONNREFUSED)), "its own loopback, where nothing listens: {none}");
    // Asked and allowed: outward, never the host's loopback.
    match outbound::unavailable() {
        None => {
            let (out, failure) = run(rt, Some(NetworkPolicy::Outbound));
            assert_eq!(failure, None);
            assert!(!out.contains("loopback=ok") && !out.contains("slirp-host=ok"), "the host's loopback reached: {out}");
            if outward_ip().is_some() {
                assert!(out.contains("outward=ok"), "outbound network works: {out}");
            }
        }
        Some(why) => {
            assert!(!required("LULL_REQUIRE_OUTBOUND"), "LULL_REQUIRE_OUTBOUND=1 but {why}");
            eprintln!("SKIPPED outbound: {why}");
            let (_, failure) = run(rt, Some(NetworkPolicy::Outbound));
            assert!(failure.is_some_and(|f| f.contains("outbound network unavailable")));
        }
    }
    // Asked, but the owner allows none: not started, saying why.
    rt.cfg.network = NetworkPolicy::None;
    let (out, failure) = run(rt, Some(NetworkPolicy::Outbound));
    assert_eq!(out, "");
    let why = failure.unwrap_or_default();
    assert!(why.contains("network") && why.contains("\"none\""), "{why}");
}

fn required(var: &str) -> bool {
    std::env::var(var).is_ok_and(|v| v == "1")
}

#[test]
fn fallback_without_cgroups_stops_kills_and_caps_by_process_group() {
    let _memory = machine_memory();
    // Needs no privilege: the process-group fallback is what runs where no cgroup can be made.
    let dir = tempfile::tempdir().expect("temp dir");
    let mut cfg = Config::default();
    cfg.guests.cgroup = "none".into();
    cfg.guests.memory_cap_mib = 128;
    cfg.guests.owner_reserve_mib = 256;
    cfg.guests.pressure_freeze_pct = 100.0;
    let mut rt = LinuxRuntime::new(&cfg, dir.path());
    assert_eq!(rt.containment(), Containment::ProcessGroup);
    assert!(rt.describe().contains("NO cgroup"), "{}", rt.describe());
    // A child in the guest's process group, and the group's leader.
    let id = rt.submit(GuestSpec::new("sh", ["-c", "sleep 1000 & echo $! > child.pid; wait"]));
    rt.apply(GuestDirective::Accept);
    let child = guest_pid(&mut rt, &id, "child.pid");
    let state = |pid: i32| {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|s| s.rsplit_once(')').and_then(|(_, r)| r.split_whitespace().next().map(str::to_owned)))
    };
    rt.fast_freeze().expect("fast path")();
    wait_until("SIGSTOP to reach the group", Duration::from_secs(20), || state(child).as_deref() == Some("T"));
    rt.apply(GuestDirective::Linger);
    wait_until("SIGCONT", Duration::from_secs(20), || state(child).as_deref() != Some("T"));
    rt.apply(GuestDirective::Evict);
    wait_until("the group to die", Duration::from_secs(20), || !alive(child));
    wait_until("the guest to end", Duration::from_secs(20), || ended(&mut rt, &id).is_some());
    // RLIMIT_AS holds the cap: allocating past it fails inside the guest.
    let alloc = "try:\n    b = bytearray(400 << 20)\n    print('survived')\nexcept MemoryError:\n    print('capped')\n";
    let id = rt.submit(GuestSpec::new("python3", ["-c", alloc]));
    rt.apply(GuestDirective::Accept);
    wait_until("the allocator", Duration::from_secs(60), || ended(&mut rt, &id).is_some());
    assert_eq!(stdout_of(&mut rt, &id).trim(), "capped");
}

#[test]
fn migration_cost_follows_the_checkpoint_size() {
    // T_migr = 1 s suspend/resume + size / bandwidth.
    assert_eq!(migration_cost(0, 50.0), Duration::from_secs(1));
    assert_eq!(migration_cost(100 * MIB, 50.0), Duration::from_secs(3));
    let Some(mut rig) = rig("migr", |c| c.guests.migration_bandwidth_mib_s = 1.0) else { return };
    let rt = rig.rt();
    assert_eq!(rt.migration_cost(), None, "no guest, no estimate");
    let id = rt.submit(GuestSpec::new("sh", ["-c", "head -c 3145728 /dev/zero > state.bin; echo done > done.txt; sleep 1000"]));
    rt.apply(GuestDirective::Accept);
    let wd = workdir(rt, &id);
    wait_until("the checkpoint file", Duration::from_secs(60), || wd.join("done.txt").exists());
    rt.tick();
    let t = rt.migration_cost().expect("an estimate");
    // 3 MiB of checkpoint at 1 MiB/s, plus the guest's memory, plus 1 s.
    assert!(t >= Duration::from_secs(4) && t < Duration::from_secs(30), "{t:?}");
}

#[test]
fn owner_caps_limit_guest_cpu_bandwidth_and_memory_share() {
    // The settings window's caps: a quarter of the machine's CPU, 1 % of its memory.
    let Some(mut rig) = rig("caps", |c| {
        c.caps.cpu_max = 0.25;
        c.caps.memory_max = 0.01;
    }) else {
        return;
    };
    let rt = rig.rt();
    let id = rt.submit(GuestSpec::new("sh", ["-c", "while :; do :; done"]));
    rt.apply(GuestDirective::Accept);
    let total = memory::meminfo().total;
    let limit = rt.guests().into_iter().find(|g| g.id == id).and_then(|g| g.memory_limit_bytes).expect("a memory limit");
    assert!(limit <= total / 100 + MIB, "memory cap {limit} above 1 % of {total}");
    let g = rt.guests.iter().find(|g| g.id == id).expect("guest running");
    let cpu = &g.cg.as_ref().expect("in a cgroup").cpu;
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let want = cgroup::cpu_quota_us(0.25, cpus);
    let (quota, period) = match std::fs::read_to_string(cpu.join("cpu.max")) {
        Ok(v2) => {
            let mut f = v2.split_whitespace().map(|x| x.parse::<u64>().unwrap_or(0));
            (f.next().unwrap_or(0), f.next().unwrap_or(0))
        }
        Err(_) => (
            std::fs::read_to_string(cpu.join("cpu.cfs_quota_us")).expect("v1 quota").trim().parse().expect("number"),
            std::fs::read_to_string(cpu.join("cpu.cfs_period_us")).expect("v1 period").trim().parse().expect("number"),
        ),
    };
    assert_eq!((quota, period), (want, cgroup::CPU_PERIOD_US), "CPU bandwidth quota");
    rt.apply(GuestDirective::Evict);
    wait_until("the capped guest to end", Duration::from_secs(30), || ended(rt, &id).is_some());
}

#[test]
fn a_held_guest_stays_frozen_through_the_policys_thaws_and_counts_no_wall_time() {
    let Some(mut rig) = rig("hold", |c| c.eviction.kill_grace_s = 5) else { return };
    let rt = rig.rt();
    let mut spec = GuestSpec::new("sh", ["-c", "trap 'echo term > got; exit 0' TERM; echo $$ > pid; while :; do i=$((i+1)); done"]);
    spec.checkpointable = true;
    let id = rt.submit(spec);
    rt.apply(GuestDirective::Accept);
    let wd = workdir(rt, &id);
    let pid = guest_pid(rt, &id, "pid");
    let own_freeze = rt.cgroups().expect("cgroups").unified.join(&id).join("cgroup.freeze");
    assert!(rt.hold_guest(&id, true));
    assert_eq!(std::fs::read_to_string(&own_freeze).unwrap().trim(), "1");
    wait_until("the held guest to stop using CPU", Duration::from_secs(10), || {
        let before = cpu_ticks(pid);
        std::thread::sleep(Duration::from_millis(200));
        cpu_ticks(pid) == before
    });
    assert!(matches!(rt.guest_info(&id).map(|g| g.phase), Some(GuestPhase::Frozen)));
    // The policy's directives thaw the agent instance's cgroup, not the held guest.
    rt.apply(GuestDirective::Freeze);
    rt.apply(GuestDirective::Accept);
    rt.tick();
    let wall = rt.guest_info(&id).unwrap().wall_ms;
    std::thread::sleep(Duration::from_millis(400));
    rt.tick();
    let before = cpu_ticks(pid);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(cpu_ticks(pid), before, "a held guest used CPU after the policy's thaw");
    let events = std::fs::read_to_string(own_freeze.with_file_name("cgroup.events")).unwrap();
    assert!(events.lines().any(|l| l == "frozen 1"), "the kernel reports the held guest frozen after the policy's thaw: {events}");
    assert!(!rt.frozen(), "while the agent instance itself is thawed");
    assert_eq!(rt.guest_info(&id).unwrap().wall_ms, wall, "held time is not donated wall time");
    // Released, it runs again; evicted while held, it is released first and checkpoints.
    assert!(rt.hold_guest(&id, false));
    assert_eq!(std::fs::read_to_string(&own_freeze).unwrap().trim(), "0");
    // (Whether it then gets CPU depends on the machine's load: it is SCHED_IDLE.)
    let events_file = own_freeze.with_file_name("cgroup.events");
    wait_until("the kernel to report the released guest thawed", Duration::from_secs(10), || {
        std::fs::read_to_string(&events_file).is_ok_and(|t| t.lines().any(|l| l == "frozen 0"))
    });
    assert!(rt.hold_guest(&id, true));
    rt.apply(GuestDirective::Evict);
    wait_until("the held guest to handle SIGTERM and end", Duration::from_secs(20), || ended(rt, &id).is_some());
    assert!(wd.join("got").exists(), "the evicted held guest ran its checkpoint handler");
    assert!(!rt.hold_guest(&id, true), "an ended guest cannot be held");
}

/// A memory cgroup of its own for the owner-cache test: `<root>/lull-test-warm-PID` with a
/// hard limit, holding the owner (`owner/`) and Lull's guests (`pool/`), so the guest's
/// allocation really pushes the owner's file cache out on a machine with plenty of memory.
struct WarmMachine {
    top: PathBuf,
    v2: bool,
}

impl WarmMachine {
    fn new(limit: u64) -> Option<Self> {
        let v2 = Path::new("/sys/fs/cgroup/cgroup.controllers").exists();
        let root = if v2 { PathBuf::from("/sys/fs/cgroup") } else { PathBuf::from("/sys/fs/cgroup/memory") };
        let top = root.join(format!("lull-test-warmcache-{}", std::process::id()));
        if std::fs::create_dir_all(top.join("owner")).is_err() {
            return None;
        }
        if v2 {
            let _ = std::fs::write(root.join("cgroup.subtree_control"), "+memory");
            let _ = std::fs::write(top.join("cgroup.subtree_control"), "+memory");
            std::fs::write(top.join("memory.max"), limit.to_string()).expect("memory.max");
        } else {
            std::fs::write(top.join("memory.limit_in_bytes"), limit.to_string()).expect("memory.limit_in_bytes");
        }
        Some(Self { top, v2 })
    }

    fn owner_protect_value(&self) -> String {
        let f = if self.v2 { "memory.low" } else { "memory.soft_limit_in_bytes" };
        std::fs::read_to_string(self.top.join("owner").join(f)).unwrap_or_default().trim().to_string()
    }
}

impl Drop for WarmMachine {
    fn drop(&mut self) {
        let name = self.top.file_name().map(PathBuf::from).unwrap_or_default();
        for h in ["", "unified", "memory", "cpu", "cpu,cpuacct", "pids"] {
            let top = Path::new("/sys/fs/cgroup").join(h).join(&name);
            // The root itself is the v2 hierarchy only (on a hybrid system it holds the v1 ones).
            if !top.exists() || (h.is_empty() && !self.v2) {
                continue;
            }
            for d in [top.join("owner"), top.join("pool/guests"), top.join("pool/agent"), top.join("pool"), top.clone()] {
                if let Ok(procs) = std::fs::read_to_string(d.join("cgroup.procs")) {
                    for pid in procs.lines().filter_map(|l| l.trim().parse::<i32>().ok()) {
                        // SAFETY: kill has no memory-safety preconditions.
                        unsafe { libc::kill(pid, libc::SIGKILL) };
                    }
                }
                for _ in 0..100 {
                    if std::fs::remove_dir(&d).is_ok() || !d.exists() {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
        }
    }
}

/// A child killed and reaped when dropped, however the test ends.
struct Reaped(std::process::Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn resident_mib(path: &Path) -> f64 {
    let v = owner_cache::file_residency(path).expect("mincore");
    v.iter().filter(|b| *b & 1 != 0).count() as f64 * owner_cache::page_size() as f64 / MIB as f64
}

#[test]
fn a_guest_that_pushes_the_owners_file_cache_out_is_followed_by_its_restore() {
    let _memory = machine_memory();
    const FILE_MIB: usize = 96;
    let Some(machine) = WarmMachine::new(400 * MIB) else {
        let required = std::env::var("LULL_REQUIRE_CGROUPS").is_ok_and(|v| v == "1");
        assert!(!required, "LULL_REQUIRE_CGROUPS=1 but no memory cgroup can be made");
        eprintln!("SKIPPED: cannot create a memory cgroup here");
        return;
    };
    let top_rel = machine.top.file_name().and_then(|n| n.to_str()).expect("name").to_string();
    // The owner's files, written and dropped from the cache so the owner's reads charge
    // them to the owner's cgroup.
    let files_dir = tempfile::tempdir_in(std::env::temp_dir()).expect("temp dir");
    let files: Vec<PathBuf> = (0..2)
        .map(|i| {
            let p = files_dir.path().join(format!("owner-{i}"));
            let chunk = vec![i as u8 + 1; MIB as usize];
            let mut f = std::fs::File::create(&p).expect("create");
            for _ in 0..FILE_MIB {
                std::io::Write::write_all(&mut f, &chunk).expect("write");
            }
            f.sync_all().expect("sync");
            rustix::fs::fadvise(&f, 0, None, rustix::fs::Advice::DontNeed).expect("DONTNEED");
            p
        })
        .collect();
    // The owner: joins its cgroup, reads both files (they stay open), then waits.
    let script = format!(
        "echo $$ > {procs}; exec 3<{a} 4<{b}; cat {a} {b} > /dev/null; echo read > {dir}/owner-ready; sleep 600",
        procs = machine.top.join("owner/cgroup.procs").display(),
        a = files[0].display(),
        b = files[1].display(),
        dir = files_dir.path().display()
    );
    let _owner = Reaped(std::process::Command::new("sh").args(["-c", &script]).spawn().expect("owner"));
    wait_until("the owner's reads", Duration::from_secs(60), || files_dir.path().join("owner-ready").exists());
    let before: Vec<f64> = files.iter().map(|f| resident_mib(f)).collect();
    assert!(before.iter().all(|&m| m >= FILE_MIB as f64 * 0.95), "the owner's files are cached: {before:?}");
    let protect_before = machine.owner_protect_value();

    let Some(mut rig) = rig("warm", |c| {
        c.guests.cgroup = format!("{top_rel}/pool");
        c.guests.memory_cap_mib = 360;
        c.guests.owner_reserve_mib = 64;
        c.memory.owner_cgroup = format!("/{top_rel}/owner");
        c.memory.owner_protect_mib = 128;
    }) else {
        return;
    };
    let rt = rig.rt();
    // The guest fills 300 MiB: with the owner's 192 MiB of cache, over the 400-MiB limit.
    let hog = "import time\nb = []\nfor i in range(300 // 4):\n    b.append(bytearray(4 << 20))\n    for j in range(0, 4 << 20, 4096):\n        b[-1][j] = 1\nopen('allocated', 'w').close()\ntime.sleep(600)\n";
    let id = rt.submit(GuestSpec::new("python3", ["-c", hog]));
    rt.apply(GuestDirective::Accept);
    let snap = rt.cache_snapshot().expect("a snapshot before the guest started").clone();
    for f in &files {
        let rec = snap.files.iter().find(|c| &c.path == f).map(|c| lull_core::owner_memory::pages_in(&c.resident));
        assert!(rec.is_some_and(|p| p * owner_cache::page_size() >= FILE_MIB as u64 * MIB * 95 / 100), "{} recorded: {rec:?}", f.display());
    }
    // Only the owner's session is looked at: not this test process (the agent) and its binary.
    let me = std::env::current_exe().expect("test binary");
    assert!(!snap.files.iter().any(|c| c.path == me), "the agent's own files are not the owner's");
    // While the guest runs the owner's session is protected.
    let protect_during = machine.owner_protect_value();
    assert_eq!(protect_during, (128 * MIB).to_string(), "protection written on the owner's cgroup");
    assert!(rt.protection().contains("MiB on"), "{}", rt.protection());
    let wd = workdir(rt, &id);
    wait_until("the guest's allocation", Duration::from_secs(120), || {
        rt.tick();
        wd.join("allocated").exists()
    });
    let pushed: Vec<f64> = files.iter().map(|f| resident_mib(f)).collect();
    let pushed_total: f64 = pushed.iter().sum();
    assert!(pushed_total < (2 * FILE_MIB) as f64 * 0.7, "the guest pushed the owner's cache out: {pushed:?}");
    // Evicted: the guest goes, the restore reads the owner's pages back.
    rt.apply(GuestDirective::Evict);
    wait_until("the restore", Duration::from_secs(120), || {
        rt.tick();
        rt.last_cache_restore().is_some()
    });
    let r = rt.last_cache_restore().expect("restore figures");
    eprintln!("file-cache restore: {r:?}");
    let after: Vec<f64> = files.iter().map(|f| resident_mib(f)).collect();
    for (a, b) in after.iter().zip(&before) {
        assert!(*a >= b * 0.95, "restored {after:?} vs before {before:?} ({r:?})");
    }
    assert!(r.missing_bytes as f64 / MIB as f64 >= (2 * FILE_MIB) as f64 - pushed_total - 1.0, "{r:?}");
    assert!(r.stopped.is_none(), "{r:?}");
    // One report for the eviction, with the file-cache time and no swap time (no swap was used).
    let report = rt.take_restore().expect("a restore report");
    assert!(report.file_cache_ms.is_some() && report.file_cache_restored_mib > 0.0, "{report:?}");
    assert_eq!(rt.take_restore(), None, "reported once");
    // The protection is put back once no guest is left.
    assert_eq!(machine.owner_protect_value(), protect_before, "the owner's previous value is back");
    drop(rig);
    drop(_owner);
    drop(machine);
}
