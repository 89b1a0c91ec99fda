//! The coordinator's database as its files meet the world, with the real `lull` binary:
//! an emptied, cut, overwritten, damaged or foreign SQLite file is refused at start within
//! seconds, naming the file and the fix, and neither it nor the admin key file is
//! touched; `lull coordinator backup` copies a serving pool and `lull coordinator restore`
//! brings it back (refused while a coordinator serves; the replaced file kept); every
//! file the coordinator writes is owner-only, existing ones tightened at start; and a
//! PostgreSQL password reaches the coordinator from a file, `~/.pgpass` or the
//! environment, never from its command line.

use lull_e2e::lull_bin;
use serde_json::{json, Value};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

fn lull(dir: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(lull_bin());
    c.args(args).env("LULL_DATA_DIR", dir).env("LULL_CONFIG", dir.join("config.toml")).env("LULL_SOCKET", dir.join("agent.sock"));
    c.env_remove("LULL_COORDINATOR_URL").env_remove("LULL_KEY").env_remove("LULL_COORDINATOR_DB").env_remove("PGPASSWORD");
    c.env_remove("PGPASSFILE");
    c
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap_or_else(|e| panic!("{}: {e}", p.display())).permissions().mode() & 0o777
}

/// A running `lull coordinator serve` in `dir`.
struct Serving {
    child: Child,
    url: String,
    dir: PathBuf,
}

impl Serving {
    /// Starts it and waits until it answers (panics with its log if it does not).
    fn start(dir: &Path, extra_env: &[(&str, &str)], args: &[&str]) -> Serving {
        let _ = std::fs::remove_file(dir.join("coordinator.url"));
        let mut all = vec!["coordinator", "serve", "--listen", "127.0.0.1:0"];
        all.extend_from_slice(args);
        let mut cmd = lull(dir, &all);
        for (k, v) in extra_env {
            cmd.env(k, v);
        }
        std::fs::create_dir_all(dir).unwrap();
        let child = cmd.stdout(Stdio::null()).stderr(std::fs::File::create(dir.join("serve.log")).unwrap()).spawn().unwrap();
        let mut s = Serving { child, url: String::new(), dir: dir.to_path_buf() };
        let t0 = Instant::now();
        loop {
            if let Ok(u) = std::fs::read_to_string(dir.join("coordinator.url")) {
                s.url = u.trim().to_string();
                if reqwest::blocking::get(format!("{}/healthz", s.url)).is_ok_and(|r| r.status().is_success()) {
                    return s;
                }
            }
            if t0.elapsed() > Duration::from_secs(30) || s.child.try_wait().unwrap().is_some() {
                let log = std::fs::read_to_string(dir.join("serve.log")).unwrap_or_default();
                let _ = s.child.kill();
                panic!("the coordinator did not come up: {log}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn admin(&self) -> String {
        std::fs::read_to_string(self.dir.join("coordinator-admin.key")).unwrap().trim().to_string()
    }

    fn jobs(&self) -> Vec<Value> {
        let r = reqwest::blocking::Client::new().get(format!("{}/api/v1/jobs", self.url)).bearer_auth(self.admin()).send().unwrap();
        r.json::<Vec<Value>>().unwrap()
    }

    fn submit(&self, n: usize) {
        let http = reqwest::blocking::Client::new();
        for _ in 0..n {
            let r = http
                .post(format!("{}/api/v1/jobs", self.url))
                .bearer_auth(self.admin())
                .json(&json!({"command": "/bin/true"}))
                .send()
                .unwrap();
            assert!(r.status().is_success());
        }
    }

    /// SIGTERM, then waits: a clean stop (the WAL checkpointed into the file).
    fn stop(mut self) {
        // SAFETY: kill with a pid we spawned.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let st = self.child.wait().unwrap();
        assert!(st.success(), "serve exited with {st}: {}", std::fs::read_to_string(self.dir.join("serve.log")).unwrap_or_default());
    }
}

/// A test that fails half-way must not leave its coordinator running (it would retry its
/// database, dropped with the test, for ever).
impl Drop for Serving {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// `lull coordinator serve` on a database it must refuse: it exits non-zero within
/// `secs`, with one error line; returns that line.
fn refused_within(dir: &Path, secs: u64) -> String {
    let t0 = Instant::now();
    let mut child =
        lull(dir, &["coordinator", "serve", "--listen", "127.0.0.1:0"]).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    while child.try_wait().unwrap().is_none() {
        if t0.elapsed() > Duration::from_secs(secs) {
            let _ = child.kill();
            panic!("still running after {secs} s: it neither served nor refused");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let o = child.wait_with_output().unwrap();
    assert!(!o.status.success(), "it started: {}", text(&o));
    let errors: Vec<String> = String::from_utf8_lossy(&o.stderr).lines().filter(|l| l.starts_with("lull:")).map(str::to_string).collect();
    assert_eq!(errors.len(), 1, "one error line: {}", text(&o));
    errors[0].clone()
}

#[test]
fn a_damaged_or_foreign_database_is_refused_at_start_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let s = Serving::start(&data, &[], &[]);
    s.submit(5);
    s.stop();
    let db = data.join("coordinator.db");
    let key_file = data.join("coordinator-admin.key");
    let good = std::fs::read(&db).unwrap();
    let key = std::fs::read(&key_file).unwrap();
    assert!(!data.join("coordinator.db-wal").exists() || std::fs::metadata(data.join("coordinator.db-wal")).unwrap().len() == 0);
    let page = u16::from_be_bytes([good[16], good[17]]) as usize;
    let mut damaged = good.clone();
    // A table's b-tree page overwritten in the middle of the file: its header first.
    let victim = (good.len() / page / 2).max(2) * page;
    for b in &mut damaged[victim..victim + 64] {
        *b = 0xA5;
    }
    let foreign = dir.path().join("photos.db");
    let c = rusqlite::Connection::open(&foreign).unwrap();
    c.execute_batch("CREATE TABLE photos(x); INSERT INTO photos VALUES (1);").unwrap();
    drop(c);
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("emptied", Vec::new(), "empty"),
        ("cut in half", good[..good.len() / 2 / page * page].to_vec(), "truncated"),
        ("cut mid-page", good[..good.len() - 100].to_vec(), "truncated"),
        ("overwritten", (0..good.len()).map(|i| (i * 7 % 251) as u8).collect(), "not an SQLite database"),
        ("damaged", damaged, "damaged"),
        ("foreign", std::fs::read(&foreign).unwrap(), "not a Lull coordinator database"),
    ];
    for (what, bytes, says) in cases {
        std::fs::write(&db, &bytes).unwrap();
        let line = refused_within(&data, 5);
        assert!(line.contains(&db.display().to_string()), "{what}: names the file: {line}");
        assert!(line.contains(says), "{what}: says {says:?}: {line}");
        let fix = if what == "foreign" || what == "overwritten" { "move this file away" } else { "lull coordinator restore" };
        assert!(line.contains(fix), "{what}: says what to do: {line}");
        assert_eq!(std::fs::read(&db).unwrap(), bytes, "{what}: the file is left as it was");
        assert_eq!(std::fs::read(&key_file).unwrap(), key, "{what}: the admin key file is never overwritten");
    }
    // The good file serves again, its jobs there.
    std::fs::write(&db, &good).unwrap();
    let s = Serving::start(&data, &[], &[]);
    assert_eq!(s.jobs().len(), 5);
    s.stop();
    // A database without an admin key beside someone else's key file: refused, the file kept.
    std::fs::remove_file(&db).unwrap();
    let line = refused_within(&data, 5);
    assert!(line.contains("coordinator-admin.key") && line.contains("does not exist"), "{line}");
    assert_eq!(std::fs::read(&key_file).unwrap(), key);
    assert!(!db.exists(), "no new pool was made");
}

#[test]
fn backup_while_serving_and_restore_bring_the_pool_back() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let s = Serving::start(&data, &[], &[]);
    s.submit(3);
    let backup = dir.path().join("backups").join("pool-1.db");
    std::fs::create_dir_all(backup.parent().unwrap()).unwrap();
    let o = lull(&data, &["coordinator", "backup", backup.to_str().unwrap(), "--json"]).output().unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let summary: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(summary["jobs"], 3, "{summary}");
    assert_eq!(mode(&backup), 0o600, "a backup is owner-only");
    // A backup never overwrites; a restore never replaces a served database.
    let o = lull(&data, &["coordinator", "backup", backup.to_str().unwrap()]).output().unwrap();
    assert!(!o.status.success() && text(&o).contains("never overwrites"), "{}", text(&o));
    let o = lull(&data, &["coordinator", "restore", backup.to_str().unwrap()]).output().unwrap();
    assert!(!o.status.success() && text(&o).contains("a coordinator is serving"), "{}", text(&o));
    s.submit(1);
    assert_eq!(s.jobs().len(), 4);
    s.stop();
    // The database lost (emptied): refused at start; restored: back as backed up.
    let db = data.join("coordinator.db");
    std::fs::write(&db, b"").unwrap();
    refused_within(&data, 5);
    let o = lull(&data, &["coordinator", "restore", backup.to_str().unwrap()]).output().unwrap();
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("kept as"), "{}", text(&o));
    let kept: Vec<PathBuf> = std::fs::read_dir(&data)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("coordinator.db.replaced-"))
        .collect();
    assert_eq!(kept.len(), 1, "the replaced file is kept: {kept:?}");
    assert_eq!(std::fs::metadata(&kept[0]).unwrap().len(), 0);
    assert_eq!(mode(&db), 0o600);
    let s = Serving::start(&data, &[], &[]);
    assert_eq!(s.jobs().len(), 3, "the pool as it was when backed up");
    s.stop();
    // A backup that is not one is refused, changing nothing.
    let junk = dir.path().join("junk.db");
    std::fs::write(&junk, b"not a database").unwrap();
    let before = std::fs::read(&db).unwrap();
    let o = lull(&data, &["coordinator", "restore", junk.to_str().unwrap()]).output().unwrap();
    assert!(!o.status.success() && text(&o).contains("not a usable backup"), "{}", text(&o));
    assert_eq!(std::fs::read(&db).unwrap(), before);
}

#[test]
fn files_the_coordinator_writes_are_owner_only() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let s = Serving::start(&data, &[], &[]);
    s.submit(1);
    let files = ["coordinator.db", "coordinator.db-wal", "coordinator.db-shm", "coordinator-admin.key", "coordinator.url"];
    for f in files {
        assert_eq!(mode(&data.join(f)), 0o600, "{f}");
    }
    assert_eq!(mode(&data), 0o700);
    s.stop();
    // An existing install is tightened at start.
    std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o755)).unwrap();
    for f in ["coordinator.db", "coordinator-admin.key", "coordinator.url"] {
        std::fs::set_permissions(data.join(f), std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    let s = Serving::start(&data, &[], &[]);
    assert_eq!(mode(&data), 0o700);
    for f in files {
        assert_eq!(mode(&data.join(f)), 0o600, "{f} tightened");
    }
    s.stop();
}

/// A fresh PostgreSQL database for one test, dropped at the end; `None` (skipped) without
/// `LULL_TEST_PG_URL` unless `LULL_REQUIRE_POSTGRES=1`.
struct PgDb {
    base: String,
    name: String,
}

impl PgDb {
    fn create() -> Option<PgDb> {
        let Ok(base) = std::env::var("LULL_TEST_PG_URL") else {
            assert!(std::env::var("LULL_REQUIRE_POSTGRES").is_err(), "LULL_REQUIRE_POSTGRES=1 but LULL_TEST_PG_URL is unset");
            return None;
        };
        let name = format!("lull_secrets_{}", std::process::id());
        let o = Command::new("psql").args([base.as_str(), "-qc", &format!("CREATE DATABASE {name}")]).output().unwrap();
        assert!(o.status.success(), "{}", text(&o));
        Some(PgDb { base, name })
    }

    /// (URL without password, the password, host, port, user).
    fn parts(&self) -> (String, String, String, String, String) {
        let rest = self.base.split("://").nth(1).unwrap();
        let (userinfo, hostpart) = rest.split_once('@').unwrap();
        let (user, pass) = userinfo.split_once(':').unwrap();
        let host = hostpart.split('/').next().unwrap();
        let (h, p) = host.split_once(':').unwrap_or((host, "5432"));
        (format!("postgres://{user}@{host}/{}", self.name), pass.to_string(), h.to_string(), p.to_string(), user.to_string())
    }
}

impl Drop for PgDb {
    fn drop(&mut self) {
        let _ =
            Command::new("psql").args([self.base.as_str(), "-qc", &format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name)]).output();
    }
}

#[test]
fn a_postgres_password_comes_from_a_file_pgpass_or_the_environment_never_argv() {
    let Some(pg) = PgDb::create() else { return };
    let (url, password, host, port, user) = pg.parts();
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let data = dir.path().join("data");
    // 1. --db-password-file (owner-only).
    let pw = dir.path().join("db-password");
    std::fs::write(&pw, format!("{password}\n")).unwrap();
    std::fs::set_permissions(&pw, std::fs::Permissions::from_mode(0o600)).unwrap();
    let home_s = home.to_str().unwrap();
    let s = Serving::start(&data, &[("HOME", home_s)], &["--db", &url, "--db-password-file", pw.to_str().unwrap()]);
    let cmdline = std::fs::read(format!("/proc/{}/cmdline", s.child.id())).unwrap();
    let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
    assert!(cmdline.contains(&url) && !cmdline.contains(&format!(":{password}@")), "the password is not on the command line: {cmdline}");
    s.submit(2);
    s.stop();
    // 2. ~/.pgpass (0600), found by the PostgreSQL driver; one others may read is refused.
    let pgpass = home.join(".pgpass");
    std::fs::write(&pgpass, format!("{host}:{port}:{}:{user}:{password}\n", pg.name)).unwrap();
    std::fs::set_permissions(&pgpass, std::fs::Permissions::from_mode(0o644)).unwrap();
    let o = lull(&data, &["coordinator", "token", "create", "--db", &url]).env("HOME", home_s).output().unwrap();
    assert!(!o.status.success() && text(&o).contains("chmod 600"), "{}", text(&o));
    std::fs::set_permissions(&pgpass, std::fs::Permissions::from_mode(0o600)).unwrap();
    let o = lull(&data, &["coordinator", "token", "create", "--db", &url]).env("HOME", home_s).output().unwrap();
    assert!(o.status.success(), "{}", text(&o));
    // 3. The whole URL in LULL_COORDINATOR_DB.
    std::fs::remove_file(&pgpass).unwrap();
    let full = url.replacen(&format!("{user}@"), &format!("{user}:{password}@"), 1);
    let s = Serving::start(&data, &[("HOME", home_s), ("LULL_COORDINATOR_DB", &full)], &[]);
    assert_eq!(s.jobs().len(), 2, "the same pool");
    s.stop();
    // A backup of PostgreSQL says how (pg_dump), backing nothing up.
    let o = lull(&data, &["coordinator", "backup", dir.path().join("b.db").to_str().unwrap(), "--db", &url])
        .env("HOME", home_s)
        .output()
        .unwrap();
    assert!(!o.status.success() && text(&o).contains("pg_dump"), "{}", text(&o));
    assert!(!dir.path().join("b.db").exists());
}
