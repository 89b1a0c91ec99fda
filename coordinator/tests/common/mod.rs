//! Test harness: a real coordinator on 127.0.0.1 (ephemeral port) over a real database,
//! either a fresh SQLite file or a fresh PostgreSQL database created on the server named
//! by `LULL_TEST_PG_URL` (skipped when unset, unless `LULL_REQUIRE_POSTGRES=1`).

#![allow(dead_code)]

use coordinator::model::*;
use coordinator::{Config, Db};
use serde_json::{json, Value};
use std::time::Duration;

/// `both!(name, body)`: a module `name` with the tests `sqlite` and `postgres`, each
/// running the async `body(Backend)` (the second skipped without PostgreSQL).
#[allow(unused_macros)]
macro_rules! both {
    ($name:ident, $body:ident) => {
        mod $name {
            use super::*;
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                $body(Backend::Sqlite).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                $body(Backend::Postgres).await;
            }
        }
    };
}

/// Which database a test runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// A database for one test. Dropped with it when the test passes; a failing test's
/// PostgreSQL database is kept for inspection (an SQLite file goes with its temporary
/// directory either way).
pub struct TestDb {
    pub url: String,
    _dir: Option<tempfile::TempDir>,
    /// (server URL, database name) of a PostgreSQL test database.
    pg: Option<(String, String)>,
}

impl Drop for TestDb {
    fn drop(&mut self) {
        let Some((base, name)) = self.pg.take() else { return };
        if std::thread::panicking() {
            eprintln!("kept the failed test's database {name} for inspection");
            return;
        }
        // Hundreds of leftover databases made a restarted server spend minutes syncing
        // them. `psql` comes with the server the tests need; FORCE ends the pool's
        // connections the test left open.
        let _ = std::process::Command::new("psql")
            .args([base.as_str(), "-qc", &format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status();
    }
}

/// The PostgreSQL server URL, or None (and a printed SKIPPED) when the test must skip.
pub fn pg_base() -> Option<String> {
    match std::env::var("LULL_TEST_PG_URL") {
        Ok(u) if !u.is_empty() => Some(u),
        _ => {
            assert!(
                std::env::var("LULL_REQUIRE_POSTGRES").as_deref() != Ok("1"),
                "LULL_REQUIRE_POSTGRES=1 but LULL_TEST_PG_URL is not set (run ci/setup-postgres.sh)"
            );
            eprintln!("SKIPPED: LULL_TEST_PG_URL is not set (set LULL_REQUIRE_POSTGRES=1 to require it)");
            None
        }
    }
}

/// A fresh database of `backend`, or None if PostgreSQL is not configured here.
pub async fn fresh_db(backend: Backend) -> Option<TestDb> {
    match backend {
        Backend::Sqlite => {
            let dir = tempfile::tempdir().unwrap();
            let url = format!("sqlite:{}", dir.path().join("coordinator.db").display());
            Some(TestDb { url, _dir: Some(dir), pg: None })
        }
        Backend::Postgres => {
            let base = pg_base()?;
            sqlx::any::install_default_drivers();
            let name = format!("lull_test_{}", coordinator::auth::random_hex(8));
            let mut conn = <sqlx::AnyConnection as sqlx::Connection>::connect(&base).await.expect("connect to LULL_TEST_PG_URL");
            sqlx::Executor::execute(&mut conn, sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}"))).await.expect("create test database");
            // postgres://user:pass@host:port/db[?query] → the same with the new database.
            let i = base.rfind('/').filter(|i| *i > "postgresql://".len()).expect("LULL_TEST_PG_URL must be postgres://user:pass@host/db");
            let query = base[i..].find('?').map(|q| base[i + q..].to_string()).unwrap_or_default();
            let url = format!("{}/{name}{query}", &base[..i]);
            Some(TestDb { url, _dir: None, pg: Some((base, name)) })
        }
    }
}

/// The logical CPUs the test machines enrol with.
pub const CPUS: u32 = 4;

/// A running coordinator.
pub struct Server {
    pub base: String,
    pub admin: String,
    pub db: Db,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    pub task: Option<tokio::task::JoinHandle<()>>,
}

/// Fast timings for tests.
pub fn test_config() -> Config {
    Config {
        lease_ttl: Duration::from_secs(30),
        heartbeat_interval: Duration::from_secs(1),
        flush_interval: Duration::from_millis(100),
        sweep_interval: Duration::from_millis(100),
        metrics_key: None,
        scheduler: Default::default(),
        gang_halt_timeout: Duration::from_secs(120),
        recruit: Config::default().recruit,
    }
}

impl Server {
    /// Starts a coordinator on `url` and mints an admin key.
    pub async fn start(url: &str, config: Config) -> Server {
        let db = Db::connect(url).await.expect("connect");
        let admin = coordinator::identity::create_key(&db, "admin", None).await.expect("admin key").key;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let db2 = db.clone();
        let task = tokio::spawn(async move {
            coordinator::serve(listener, db2, config, async move {
                let _ = rx.await;
            })
            .await
            .expect("serve");
        });
        Server { base, admin, db, stop: Some(tx), task: Some(task) }
    }

    /// Signals shutdown and waits for `serve` to return.
    pub async fn stop(mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.task.take() {
            tokio::time::timeout(Duration::from_secs(10), t).await.expect("serve returns after shutdown").unwrap();
        }
    }

    pub fn client(&self, secret: &str) -> Client {
        Client { http: reqwest::Client::new(), base: self.base.clone(), secret: secret.to_string() }
    }

    pub fn admin(&self) -> Client {
        self.client(&self.admin)
    }

    /// Creates a join token and enrols an agent of `owner`.
    pub async fn enrol(&self, owner: &str, machine: &str) -> (String, Client) {
        let t: JoinToken = self.admin().post_ok("/api/v1/join-tokens", json!({})).await;
        let e: Enrolment =
            self.client("").post_ok("/api/v1/enrol", json!({"token": t.token, "owner": owner, "machine": machine, "cpus": CPUS})).await;
        (e.agent_id.clone(), self.client(&e.secret))
    }

    /// An owner API key client.
    pub async fn owner(&self, owner: &str) -> Client {
        let k: ApiKey = self.admin().post_ok("/api/v1/keys", json!({"role": "owner", "owner": owner})).await;
        self.client(&k.key)
    }
}

/// An HTTP client with a bearer secret.
#[derive(Clone)]
pub struct Client {
    pub http: reqwest::Client,
    pub base: String,
    pub secret: String,
}

impl Client {
    fn req(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let r = self.http.request(method, format!("{}{}", self.base, path));
        if self.secret.is_empty() {
            r
        } else {
            r.bearer_auth(&self.secret)
        }
    }

    pub async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        let r = self.req(reqwest::Method::POST, path).json(&body).send().await.expect("request");
        let s = r.status().as_u16();
        let text = r.text().await.unwrap_or_default();
        (s, serde_json::from_str(&text).unwrap_or(Value::String(text)))
    }

    pub async fn get(&self, path: &str) -> (u16, Value) {
        let r = self.req(reqwest::Method::GET, path).send().await.expect("request");
        let s = r.status().as_u16();
        let text = r.text().await.unwrap_or_default();
        (s, serde_json::from_str(&text).unwrap_or(Value::String(text)))
    }

    pub async fn delete(&self, path: &str) -> (u16, Value) {
        let r = self.req(reqwest::Method::DELETE, path).send().await.expect("request");
        let s = r.status().as_u16();
        let text = r.text().await.unwrap_or_default();
        (s, serde_json::from_str(&text).unwrap_or(Value::String(text)))
    }

    pub async fn get_text(&self, path: &str) -> (u16, String) {
        let r = self.req(reqwest::Method::GET, path).send().await.expect("request");
        (r.status().as_u16(), r.text().await.unwrap_or_default())
    }

    pub async fn put_bytes(&self, path: &str, body: Vec<u8>) -> u16 {
        self.req(reqwest::Method::PUT, path).body(body).send().await.expect("request").status().as_u16()
    }

    pub async fn post_ok<T: serde::de::DeserializeOwned>(&self, path: &str, body: Value) -> T {
        let (s, v) = self.post(path, body).await;
        assert_eq!(s, 200, "POST {path}: {v}");
        serde_json::from_value(v).expect("response shape")
    }

    pub async fn get_ok<T: serde::de::DeserializeOwned>(&self, path: &str) -> T {
        let (s, v) = self.get(path).await;
        assert_eq!(s, 200, "GET {path}: {v}");
        serde_json::from_value(v).expect("response shape")
    }

    /// Leases a task, or None on 204.
    pub async fn lease(&self, free_mem: u64, wait_ms: u32) -> Option<Lease> {
        let (s, v) = self.post("/api/v1/lease", json!({"free_mem_bytes": free_mem, "wait_ms": wait_ms})).await;
        match s {
            200 => Some(serde_json::from_value(v).unwrap()),
            204 => None,
            _ => panic!("lease: {s} {v}"),
        }
    }

    pub async fn complete(&self, l: &Lease, user: f64, sys: f64) -> (u16, Value) {
        self.post(
            &format!("/api/v1/tasks/{}/{}/complete", l.job_id, l.rank),
            json!({"lease": l.lease, "exit_code": 0, "user_cpu_s": user, "sys_cpu_s": sys}),
        )
        .await
    }
}

/// Makes every enrolled machine look enrolled `ms` milliseconds earlier (records of the
/// time since then count for the pool).
pub async fn backdate_enrolment(db: &Db, ms: i64) {
    sqlx::query("UPDATE agents SET enrolled_ms = enrolled_ms - $1").bind(ms).execute(&db.pool).await.unwrap();
}

/// Makes every lease look assigned `ms` milliseconds earlier (its holder may then report
/// that much CPU time per CPU).
pub async fn backdate_leases(db: &Db, ms: i64) {
    sqlx::query("UPDATE tasks SET leased_ms = leased_ms - $1 WHERE leased_ms IS NOT NULL").bind(ms).execute(&db.pool).await.unwrap();
}

/// A job submission body.
pub fn job(command: &str) -> Value {
    json!({"command": command, "args": ["-c", "true"]})
}
