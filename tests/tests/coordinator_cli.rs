//! The coordinator's administrative commands as a new user meets them, with the real
//! `lull` binary in fresh data directories: a database password never shows in any
//! output and an unreachable database fails within seconds, in one line; the admin
//! commands refuse where no coordinator is set up (creating nothing); an enrolled machine
//! is enrolled again only with `--replace` (same id, no ghost), and `lull coordinator
//! machine rm` removes it; `lull up --db` puts the coordinator's database where it says.

use lull_e2e::lull_bin;
use serde_json::Value;
use std::path::Path;
use std::process::{Child, Command, Output};
use std::time::{Duration, Instant};

fn lull(dir: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(lull_bin());
    c.args(args).env("LULL_DATA_DIR", dir).env("LULL_CONFIG", dir.join("config.toml")).env("LULL_SOCKET", dir.join("agent.sock"));
    c.env_remove("LULL_COORDINATOR_URL").env_remove("LULL_KEY").env_remove("LULL_COORDINATOR_DB").env_remove("LULL_METRICS_KEY");
    c
}

fn text(o: &Output) -> (String, String) {
    (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}

/// The command fails with exactly one line on stderr and nothing on stdout; returns the line.
fn fails_in_one_line(o: &Output) -> String {
    let (out, err) = text(o);
    assert!(!o.status.success(), "it succeeded: {out} {err}");
    assert_eq!(out, "", "nothing on stdout");
    assert_eq!(err.lines().count(), 1, "one line: {err:?}");
    err
}

/// PostgreSQL's host and port from `LULL_TEST_PG_URL` (default: the CI server).
fn pg_host() -> String {
    let url = std::env::var("LULL_TEST_PG_URL").unwrap_or_else(|_| "postgres://lull:lull@127.0.0.1:5432/lull".into());
    let rest = url.split("://").nth(1).unwrap_or("");
    let authority = rest.split('/').next().unwrap_or("");
    authority.rsplit('@').next().unwrap_or("127.0.0.1:5432").to_string()
}

/// The commands that open the coordinator's database (with `all`, `lull up` and the
/// backup commands too), with `extra` arguments.
fn db_commands(extra: &[&str], all: bool) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut all_of = vec![
        &["coordinator", "token", "create"][..],
        &["coordinator", "key", "create", "--role", "admin"][..],
        &["coordinator", "serve", "--listen", "127.0.0.1:0"][..],
    ];
    if all {
        all_of.extend([
            &["up", "--listen", "127.0.0.1:0"][..],
            &["coordinator", "backup", "/nonexistent/b.db"][..],
            &["coordinator", "restore", "/nonexistent/b.db"][..],
        ]);
    }
    for args in all_of {
        out.push(args.iter().chain(extra).map(|s| s.to_string()).collect());
    }
    out
}

#[test]
fn a_password_on_the_command_line_is_refused_and_never_shown() {
    let dir = tempfile::tempdir().unwrap();
    for url in ["postgres://lull:s3cret@127.0.0.1:1/lull", "postgres://lull@127.0.0.1:1/lull?password=s3cret"] {
        for args in db_commands(&["--db", url], true) {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let err = fails_in_one_line(&lull(dir.path(), &args).output().unwrap());
            assert!(!err.contains("s3cret"), "{args:?} shows the password: {err}");
            assert!(err.contains("--db must not hold a password") && err.contains("--db-password-file"), "{args:?}: {err}");
            assert!(err.contains("LULL_COORDINATOR_DB") && err.contains("pgpass"), "{args:?} says where it goes: {err}");
        }
    }
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "nothing was created");
}

#[test]
fn database_passwords_never_show_and_unreachable_databases_fail_fast() {
    let dir = tempfile::tempdir().unwrap();
    lull_bin(); // built (if need be) before anything is timed
    let pw = dir.path().join("pw");
    std::fs::write(&pw, "s3cret\n").unwrap();
    std::fs::set_permissions(&pw, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let pw = pw.display().to_string();
    // (how the URL is given, the URL): the whole URL in LULL_COORDINATOR_DB, or --db
    // without a password and the password in a file.
    let cases = [
        // A real PostgreSQL server, a user it does not know.
        (true, format!("postgres://nobody:s3cret@{}/lull", pg_host())),
        (false, format!("postgres://nobody@{}/lull", pg_host())),
        // Nothing listens there.
        (true, "postgres://lull:s3cret@127.0.0.1:1/lull".to_string()),
        (false, "postgres://lull@127.0.0.1:1/lull".to_string()),
        // The password in the query string.
        (true, "postgres://lull@127.0.0.1:1/lull?password=s3cret".to_string()),
        // An address nothing answers from (no route, or a silent drop).
        (true, "postgres://lull:s3cret@10.255.255.1:5432/lull".to_string()),
        (false, "postgres://lull@10.255.255.1:5432/lull".to_string()),
    ];
    for (in_env, url) in &cases {
        let extra: Vec<&str> = if *in_env { vec![] } else { vec!["--db", url.as_str(), "--db-password-file", pw.as_str()] };
        for args in db_commands(&extra, false) {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let mut cmd = lull(dir.path(), &args);
            if *in_env {
                cmd.env("LULL_COORDINATOR_DB", url);
            }
            let t0 = Instant::now();
            let o = cmd.output().unwrap();
            let took = t0.elapsed();
            let (out, err) = text(&o);
            assert!(!o.status.success(), "{args:?} succeeded: {out} {err}");
            assert!(!out.contains("s3cret") && !err.contains("s3cret"), "{args:?} shows the password: {out} {err}");
            assert!(took < Duration::from_secs(10), "{args:?} took {took:?}: {err}");
            let errors: Vec<&str> = err.lines().filter(|l| l.starts_with("lull:")).collect();
            assert_eq!(errors.len(), 1, "{args:?}: one error line: {err}");
            assert!(errors[0].contains("***"), "{args:?}: it says which database, password hidden: {err}");
            assert!(!err.contains("pool timed out"), "{args:?}: {err}");
        }
    }
    // A password file others may read is refused, saying how to fix it.
    std::fs::set_permissions(&pw, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    let o = lull(dir.path(), &["coordinator", "token", "create", "--db", "postgres://lull@127.0.0.1:1/lull", "--db-password-file", &pw])
        .output()
        .unwrap();
    let err = fails_in_one_line(&o);
    assert!(err.contains("chmod 600") && !err.contains("s3cret"), "{err}");
}

#[test]
fn admin_commands_refuse_where_no_coordinator_is_set_up() {
    let home = tempfile::tempdir().unwrap();
    let data = home.path().join("data");
    for args in [
        vec!["coordinator", "token", "create"],
        vec!["coordinator", "key", "create", "--role", "admin"],
        vec!["coordinator", "machine", "list"],
        vec!["coordinator", "machine", "rm", "box1"],
    ] {
        let o = lull(&data, &args).output().unwrap();
        let err = fails_in_one_line(&o);
        assert!(err.contains("no coordinator is set up here") && err.contains("lull up"), "{args:?}: {err}");
        assert!(!data.exists(), "{args:?} created {}", data.display());
    }
    let missing = home.path().join("elsewhere.db");
    let o = lull(&data, &["coordinator", "token", "create", "--db", &format!("sqlite:{}", missing.display())]).output().unwrap();
    let err = fails_in_one_line(&o);
    assert!(err.contains("no coordinator database at"), "{err}");
    assert!(!missing.exists() && !data.exists());
}

/// `lull coordinator serve` in `dir`; returns it and its address (the caller stops and waits for it).
#[allow(clippy::zombie_processes)]
fn serve(dir: &Path) -> (Child, String) {
    let mut child = lull(dir, &["coordinator", "serve", "--listen", "127.0.0.1:0"])
        .stdout(std::fs::File::create(dir.join("serve.txt")).unwrap())
        .stderr(std::fs::File::create(dir.join("serve-err.txt")).unwrap())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    loop {
        if let Ok(url) = std::fs::read_to_string(dir.join("coordinator.url")) {
            return (child, url.trim().to_string());
        }
        if t0.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the coordinator did not come up: {}", std::fs::read_to_string(dir.join("serve-err.txt")).unwrap_or_default());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn re_enrolling_needs_replace_keeps_the_machine_and_admins_remove_machines() {
    let pool = tempfile::tempdir().unwrap();
    let (mut server, url) = serve(pool.path());
    let admin = std::fs::read_to_string(pool.path().join("coordinator-admin.key")).unwrap().trim().to_string();
    let o = lull(pool.path(), &["coordinator", "token", "create", "--uses", "2"]).output().unwrap();
    assert!(o.status.success(), "{:?}", text(&o));
    let token = text(&o).0.trim().to_string();
    let desk = tempfile::tempdir().unwrap();
    let enrol = |extra: &[&str]| {
        let mut args = vec!["enrol", "--url", &url, "--token", &token, "--owner", "bob", "--machine", "box2"];
        args.extend_from_slice(extra);
        lull(desk.path(), &args).output().unwrap()
    };
    let o = enrol(&[]);
    assert!(o.status.success(), "{:?}", text(&o));
    let creds_path = desk.path().join("coordinator.json");
    let creds = std::fs::read_to_string(&creds_path).unwrap();
    // Again: refused before the token is spent, saying how; the credentials stay as they were.
    let err = fails_in_one_line(&enrol(&[]));
    assert!(err.contains("already enrolled") && err.contains("--replace"), "{err}");
    assert_eq!(std::fs::read_to_string(&creds_path).unwrap(), creds);
    // A second data directory with the same owner and machine name: the coordinator refuses.
    let twin = tempfile::tempdir().unwrap();
    let o = lull(twin.path(), &["enrol", "--url", &url, "--token", &token, "--owner", "bob", "--machine", "box2"]).output().unwrap();
    let err = fails_in_one_line(&o);
    assert!(err.contains("409") && err.contains("replace"), "{err}");
    assert!(!twin.path().join("coordinator.json").exists());
    // --replace: the same machine, new credentials.
    let o = enrol(&["--replace"]);
    assert!(o.status.success(), "{:?}", text(&o));
    let id = |s: &str| serde_json::from_str::<Value>(s).unwrap()["agent_id"].as_str().unwrap().to_string();
    let after = std::fs::read_to_string(&creds_path).unwrap();
    assert_eq!(id(&after), id(&creds), "the machine keeps its id");
    assert_ne!(after, creds, "with a new secret");

    let machines = |key: &str| {
        let o = lull(desk.path(), &["machines", "--json", "--url", &url, "--key", key]).output().unwrap();
        assert!(o.status.success(), "{:?}", text(&o));
        serde_json::from_slice::<Value>(&o.stdout).unwrap().as_array().cloned().unwrap()
    };
    let all = machines(&admin);
    assert_eq!(all.len(), 1, "no ghost machine: {all:?}");
    // Owners see their own machines.
    let o = lull(pool.path(), &["coordinator", "key", "create", "--role", "owner", "--owner", "bob"]).output().unwrap();
    let bob_key = text(&o).0.trim().to_string();
    assert_eq!(machines(&bob_key).len(), 1);
    let o = lull(pool.path(), &["coordinator", "key", "create", "--role", "owner", "--owner", "eve"]).output().unwrap();
    assert_eq!(machines(text(&o).0.trim()).len(), 0);

    // Removal by name; then the name is unknown.
    let o = lull(pool.path(), &["coordinator", "machine", "rm", "box2"]).output().unwrap();
    assert!(o.status.success(), "{:?}", text(&o));
    assert!(text(&o).0.contains("removed box2"), "{:?}", text(&o));
    assert_eq!(machines(&admin).len(), 0);
    let err = fails_in_one_line(&lull(pool.path(), &["coordinator", "machine", "rm", "box2"]).output().unwrap());
    assert!(err.contains("no enrolled machine"), "{err}");
    // SAFETY: kill with a pid we spawned.
    unsafe { libc::kill(server.id() as i32, libc::SIGTERM) };
    let _ = server.wait();
}

#[test]
fn up_puts_its_database_where_db_says() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("pool").join("other.db");
    std::fs::create_dir_all(db.parent().unwrap()).unwrap();
    let db_url = format!("sqlite:{}", db.display());
    let mut child = lull(dir.path(), &["up", "--listen", "127.0.0.1:0", "--owner", "alice", "--machine", "box1", "--db", &db_url])
        .stdout(std::fs::File::create(dir.path().join("up.txt")).unwrap())
        .stderr(std::fs::File::create(dir.path().join("up-err.txt")).unwrap())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    let banner = loop {
        let t = std::fs::read_to_string(dir.path().join("up.txt")).unwrap_or_default();
        if t.contains("dashboard") {
            break t;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "{t}\n{}",
            std::fs::read_to_string(dir.path().join("up-err.txt")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(banner.contains(&db.display().to_string()), "{banner}");
    assert!(db.exists());
    assert!(!dir.path().join("coordinator.db").exists(), "the data directory's default database was not made");
    // The admin commands reach the same database with the same --db.
    let o = lull(dir.path(), &["coordinator", "machine", "list", "--json", "--db", &db_url]).output().unwrap();
    assert!(o.status.success(), "{:?}", text(&o));
    let list: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(list[0]["machine"], "box1", "{list}");
    // Stopped once its agent is up (its control socket answers).
    let t0 = Instant::now();
    while !lull(dir.path(), &["status", "--json"]).output().unwrap().status.success() {
        assert!(t0.elapsed() < Duration::from_secs(60), "{}", std::fs::read_to_string(dir.path().join("up-err.txt")).unwrap_or_default());
        std::thread::sleep(Duration::from_millis(100));
    }
    // SAFETY: kill with a pid we spawned.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let st = child.wait().unwrap();
    assert!(st.success(), "lull up exited with {st}: {}", std::fs::read_to_string(dir.path().join("up-err.txt")).unwrap_or_default());
}
