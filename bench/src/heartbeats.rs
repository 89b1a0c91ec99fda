//! `lull-bench heartbeats`: heartbeats per second and latency percentiles of a real
//! `lull coordinator serve` process with N enrolled simulated agents, driven over
//! loopback by keep-alive HTTP/1.1 connections (closed loop: each connection sends the
//! next heartbeat, for the next of its agents, when the previous answer arrived).
//! SQLite (a fresh file) or PostgreSQL (a fresh database on `--pg-url`).

use anyhow::{bail, Context, Result};
use clap::Args;
use coordinator::db::redact_url as redact;
use lull_e2e::process::cpu_seconds as cpu_s;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The variable that carries the coordinator's database URL to `lull coordinator serve`
/// (cli/src/db_url.rs::DB_ENV): a URL with a password never goes on a command line.
const COORDINATOR_DB_ENV: &str = "LULL_COORDINATOR_DB";

#[derive(Args, Debug)]
pub struct HeartbeatArgs {
    /// Simulated agents (each enrolled, each with its own secret).
    #[arg(long, default_value_t = 10_000)]
    pub agents: usize,
    /// Measured seconds (after a 2 s warm-up).
    #[arg(long, default_value_t = 10)]
    pub seconds: u64,
    /// Concurrent keep-alive connections (closed loop: more connections means more
    /// requests queued inside the server, so higher latency at the same rate).
    #[arg(long, default_value_t = 8)]
    pub connections: usize,
    #[command(flatten)]
    pub db: BenchDb,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

const BODY: &str =
    r#"{"state":"idle","available":true,"budget_left":5,"free_mem_bytes":1073741824,"base_speed":100.0,"current_speed":90.0}"#;

/// The database a coordinator benchmark runs on.
#[derive(Args, Debug)]
pub struct BenchDb {
    /// `sqlite` or `postgres`.
    #[arg(long, default_value = "sqlite", value_parser = ["sqlite", "postgres"])]
    pub db: String,
    /// PostgreSQL server for `--db postgres` (a fresh database is created and dropped).
    #[arg(long, env = "LULL_TEST_PG_URL", default_value = "postgres://lull:lull@127.0.0.1:5432/lull")]
    pub pg_url: String,
    /// The `lull` binary whose `coordinator serve` is measured (default: this build's), e.g.
    /// an older build, to compare two coordinators under the same harness.
    #[arg(long, value_name = "PATH")]
    pub coordinator_exe: Option<std::path::PathBuf>,
}

/// A keep-alive HTTP/1.1 connection to the coordinator that sends one request at a time
/// and reads its answer (`content-length` bodies, as the coordinator sends them).
pub(crate) struct Http {
    s: tokio::net::TcpStream,
    buf: Vec<u8>,
}

impl Http {
    pub(crate) async fn connect(addr: &str) -> Result<Http> {
        let s = tokio::net::TcpStream::connect(addr).await?;
        s.set_nodelay(true)?;
        Ok(Http { s, buf: vec![0u8; 8192] })
    }

    /// Sends `req` (a whole request, see [`post`]) and returns the answer's status and body.
    pub(crate) async fn call(&mut self, req: &[u8]) -> Result<(u16, &[u8])> {
        self.s.write_all(req).await?;
        let mut have = 0usize;
        let (status, head_end, body_len) = loop {
            if have == self.buf.len() {
                self.buf.resize(have * 2, 0);
            }
            let n = self.s.read(&mut self.buf[have..]).await?;
            if n == 0 {
                bail!("connection closed by the coordinator");
            }
            have += n;
            if let Some(p) = self.buf[..have].windows(4).position(|w| w == b"\r\n\r\n") {
                let head = std::str::from_utf8(&self.buf[..p]).unwrap_or("");
                let cl = head
                    .lines()
                    .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse::<usize>().unwrap_or(0)))
                    .unwrap_or(0);
                let status = head.get(9..12).and_then(|c| c.parse().ok()).unwrap_or(0);
                break (status, p + 4, cl);
            }
        };
        if self.buf.len() < head_end + body_len {
            self.buf.resize(head_end + body_len, 0);
        }
        while have < head_end + body_len {
            let n = self.s.read(&mut self.buf[have..]).await?;
            if n == 0 {
                bail!("connection closed mid-answer");
            }
            have += n;
        }
        Ok((status, &self.buf[head_end..head_end + body_len]))
    }
}

/// A POST request with a bearer secret and a JSON body.
pub(crate) fn post(addr: &str, path: &str, secret: &str, body: &str) -> Vec<u8> {
    format!(
        "POST {path} HTTP/1.1\r\nhost: {addr}\r\nauthorization: Bearer {secret}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// One keep-alive connection cycling over its agents; returns latencies (µs) measured
/// between `from` and `until`, and the count of non-200 answers.
async fn drive(addr: String, secrets: Vec<String>, from: Instant, until: Instant, stop: Arc<AtomicBool>) -> Result<(Vec<u32>, u64)> {
    let mut http = Http::connect(&addr).await?;
    let reqs: Vec<Vec<u8>> = secrets.iter().map(|sec| post(&addr, "/api/v1/heartbeat", sec, BODY)).collect();
    let mut lat = Vec::with_capacity(1 << 16);
    let mut bad = 0u64;
    let mut i = 0usize;
    while !stop.load(Ordering::Relaxed) {
        let t = Instant::now();
        if t >= until {
            break;
        }
        let (status, _) = http.call(&reqs[i % reqs.len()]).await?;
        i += 1;
        if status != 200 {
            bad += 1;
        }
        let done = Instant::now();
        if t >= from {
            lat.push(done.duration_since(t).as_micros().min(u32::MAX as u128) as u32);
        }
    }
    Ok((lat, bad))
}

/// The coordinator's `/metrics` text (empty when it does not answer).
pub(crate) fn metrics_text(addr: &str) -> String {
    use std::io::{Read, Write};
    let Ok(mut s) = std::net::TcpStream::connect(addr) else { return String::new() };
    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
    let _ = write!(s, "GET /metrics HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\n\r\n");
    let mut text = String::new();
    let _ = s.read_to_string(&mut text);
    text
}

/// One unlabelled value of a `/metrics` text (0 when absent).
pub(crate) fn metric(text: &str, name: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name).and_then(|v| v.strip_prefix(' ')).and_then(|v| v.trim().parse::<f64>().ok()))
        .unwrap_or(0.0)
}

/// The q-quantile of sorted µs values (the harness's rounded rank), in ms; 0 when none.
pub(crate) fn pct(sorted: &[u32], q: f64) -> f64 {
    lull_e2e::percentile::of_sorted(sorted, q).map_or(0.0, |us| f64::from(us) / 1000.0)
}

/// A real `lull coordinator serve` child on a fresh database (a SQLite file in a
/// temporary directory, or a new PostgreSQL database on `pg_url`, dropped at the end)
/// with `agents` simulated machines enrolled (through the store, before it starts) and
/// an admin key, listening on a loopback port.
pub(crate) struct BenchCoordinator {
    /// The harness's coordinator process (SIGTERM when dropped).
    server: lull_e2e::coordinator::Coordinator,
    pub(crate) pid: u32,
    pub(crate) addr: String,
    /// The agents' secrets, in enrolment order.
    pub(crate) secrets: Vec<String>,
    pub(crate) admin_key: String,
    pg: Option<(String, String)>,
}

impl BenchCoordinator {
    /// Creates the database, enrols the agents and starts the coordinator with `extra`
    /// arguments to `lull coordinator serve`; returns once it accepts connections.
    pub(crate) fn start(
        rt: &tokio::runtime::Runtime,
        bench_db: &BenchDb,
        agents: usize,
        extra: &[&str],
        quiet: bool,
    ) -> Result<BenchCoordinator> {
        let (db, pg_url) = (bench_db.db.as_str(), bench_db.pg_url.as_str());
        let tmp = tempfile::tempdir()?;
        let (url, pg) = rt.block_on(async {
            if db == "sqlite" {
                return Ok::<_, anyhow::Error>((format!("sqlite:{}", tmp.path().join("bench.db").display()), None));
            }
            sqlx::any::install_default_drivers();
            let name = format!("lull_bench_{}", coordinator::auth::random_hex(6));
            let mut conn = <sqlx::AnyConnection as sqlx::Connection>::connect(pg_url)
                .await
                .with_context(|| format!("connecting to {}", redact(pg_url)))?;
            sqlx::Executor::execute(&mut conn, sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}"))).await?;
            let i = pg_url.rfind('/').context("--pg-url must be postgres://user:pass@host/db")?;
            Ok((format!("{}/{name}", &pg_url[..i]), Some((pg_url.to_string(), name))))
        })?;
        if !quiet {
            errln!("enrolling {agents} agents in {} …", redact(&url));
        }
        let (secrets, admin_key) = rt.block_on(async {
            let db = coordinator::Db::connect(&url).await?;
            let err = |e: coordinator::store::StoreError| anyhow::anyhow!("{e}");
            let token = coordinator::identity::create_join_token(
                &db,
                &coordinator::model::CreateJoinToken { uses: Some(agents.clamp(1, 100_000) as u32), ttl_s: Some(3600) },
            )
            .await
            .map_err(err)?;
            let mut out = Vec::with_capacity(agents);
            for i in 0..agents {
                let req = coordinator::model::EnrolRequest {
                    token: token.token.clone(),
                    owner: format!("owner{}", i % 100),
                    machine: format!("sim{i}"),
                    replace: false,
                    cpus: Some(agent_core::coordinator_client::machine_cpus()),
                };
                let caller = coordinator::identity::Caller { principal: None, addr: "lull-bench" };
                out.push(coordinator::identity::enrol(&db, &req, caller).await.map_err(err)?.secret);
            }
            let admin = coordinator::identity::create_key(&db, "admin", None).await.map_err(err)?.key;
            db.close().await;
            Ok::<_, anyhow::Error>((out, admin))
        })?;
        let exe = match &bench_db.coordinator_exe {
            Some(p) => p.clone(),
            None => lull_e2e::try_lull_bin()?,
        };
        // The URL (password included) by the environment, never the command line.
        let env = [(COORDINATOR_DB_ENV, url.as_str()), ("LULL_LOG", "warn")];
        let server = lull_e2e::coordinator::Coordinator::try_start_in(tmp, &exe, &env, extra)
            .with_context(|| format!("starting {} coordinator serve", exe.display()))?;
        let addr = server.url.trim_start_matches("http://").to_string();
        let c = BenchCoordinator { pid: server.child.id(), server, addr, secrets, admin_key, pg };
        Ok(c)
    }

    /// What the coordinator wrote to stderr.
    pub(crate) fn log(&self) -> String {
        self.server.log()
    }

    /// Stops the coordinator (SIGTERM) and drops the PostgreSQL database.
    pub(crate) fn stop(self, rt: &tokio::runtime::Runtime) {
        let BenchCoordinator { server, pg, .. } = self;
        drop(server);
        if let Some((pg_url, name)) = pg {
            let _ = rt.block_on(async {
                let mut conn = <sqlx::AnyConnection as sqlx::Connection>::connect(&pg_url).await?;
                sqlx::Executor::execute(&mut conn, sqlx::AssertSqlSafe(format!("DROP DATABASE IF EXISTS {name}"))).await?;
                Ok::<_, anyhow::Error>(())
            });
        }
    }
}

pub fn run(a: HeartbeatArgs) -> Result<()> {
    let rt = runtime()?;
    let c = BenchCoordinator::start(&rt, &a.db, a.agents, &[], a.json)?;
    let (addr, pid, secrets) = (c.addr.clone(), c.pid, c.secrets.clone());
    let result = rt.block_on(async {
        let from = Instant::now() + Duration::from_secs(2);
        let until = from + Duration::from_secs(a.seconds);
        let stop = Arc::new(AtomicBool::new(false));
        let per = a.agents.div_ceil(a.connections.max(1));
        let mut tasks = Vec::new();
        for chunk in secrets.chunks(per.max(1)) {
            tasks.push(tokio::spawn(drive(addr.clone(), chunk.to_vec(), from, until, stop.clone())));
        }
        tokio::time::sleep_until(from.into()).await;
        let cpu0 = cpu_s(pid);
        let mut lat = Vec::new();
        let mut bad = 0;
        for t in tasks {
            let (l, b) = t.await??;
            lat.extend(l);
            bad += b;
        }
        let cpu1 = cpu_s(pid);
        Ok::<_, anyhow::Error>((lat, bad, cpu1 - cpu0))
    });
    let m = metrics_text(&addr);
    let flush = (metric(&m, "lull_heartbeat_flush_seconds") * 1e3, metric(&m, "lull_heartbeat_flush_agents") as u64);
    c.stop(&rt);
    let (mut lat, bad, server_cpu) = result?;
    lat.sort_unstable();
    let n = lat.len();
    let rate = n as f64 / a.seconds as f64;
    let out = serde_json::json!({
        "bench": "heartbeats",
        "db": a.db.db,
        "agents": a.agents,
        "connections": a.connections,
        "seconds": a.seconds,
        "heartbeats": n,
        "non_200": bad,
        "heartbeats_per_s": rate.round(),
        "p50_ms": pct(&lat, 0.50),
        "p99_ms": pct(&lat, 0.99),
        "p999_ms": pct(&lat, 0.999),
        "max_ms": pct(&lat, 1.0),
        "server_cpu_cores": server_cpu / a.seconds as f64,
        "last_flush_ms": flush.0,
        "last_flush_agents": flush.1,
    });
    if a.json {
        outln!("{out}");
    } else {
        outln!("heartbeats ({}, {} agents, {} connections, {} s):", a.db.db, a.agents, a.connections, a.seconds);
        outln!(
            "  {rate:.0} heartbeats/s · p50 {:.2} ms · p99 {:.2} ms · p99.9 {:.2} ms · max {:.2} ms",
            pct(&lat, 0.5),
            pct(&lat, 0.99),
            pct(&lat, 0.999),
            pct(&lat, 1.0)
        );
        outln!(
            "  non-200 answers: {bad} · coordinator CPU: {:.2} cores · goal (SQLite): ≥ 20000/s, p99 ≤ 10 ms",
            server_cpu / a.seconds as f64
        );
    }
    if bad > 0 {
        bail!("{bad} heartbeats were not answered 200");
    }
    Ok(())
}

/// The async runtime the coordinator benchmarks (this one, placements, recruit-api and
/// `placements --real-agents`) drive their simulated agents on (two
/// workers, as `lull coordinator serve`'s own).
pub(crate) fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    use anyhow::Context as _;
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().context("starting the async runtime")
}
