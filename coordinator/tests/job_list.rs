//! `GET /api/v1/jobs` reads a constant number of statements however many jobs it lists
//! (it read 1 + 2N once: each job's placement, then its machines' names; then one
//! statement per 450 ids on SQLite), the same at 1, 600 and 2,000 jobs. Counted
//! from sqlx's own statement log (`sqlx::query` events) with the server stopped, so no
//! background flush or sweep adds to the count (on PostgreSQL the snapshot the reads share
//! adds its `SET TRANSACTION`); one test per binary, because the
//! counter is the process's global tracing subscriber.

mod common;
use common::*;
use coordinator::auth::Principal;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;
use tracing::span;

/// Counts sqlx's statement log events.
struct Statements(Arc<AtomicUsize>);

impl tracing::Subscriber for Statements {
    fn enabled(&self, m: &tracing::Metadata<'_>) -> bool {
        m.target() == "sqlx::query"
    }
    fn new_span(&self, _: &span::Attributes<'_>) -> span::Id {
        span::Id::from_u64(1)
    }
    fn record(&self, _: &span::Id, _: &span::Record<'_>) {}
    fn record_follows_from(&self, _: &span::Id, _: &span::Id) {}
    fn event(&self, e: &tracing::Event<'_>) {
        if e.metadata().target() == "sqlx::query" {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    fn enter(&self, _: &span::Id) {}
    fn exit(&self, _: &span::Id) {}
}

/// The numbers of jobs listed: one, more than one SQLite statement's worth of `IN (…)`
/// ids (the old chunking read 450 a statement), and many more.
const SIZES: [usize; 3] = [1, 600, 2_000];

/// Submits jobs up to each of [`SIZES`], places every other one on two machines (as the
/// scheduler records a placement), times the HTTP list of them all, then counts the
/// statements one listing reads: one count per size.
async fn statements_per_listing(backend: Backend, counter: &AtomicUsize) -> Option<Vec<usize>> {
    let db = fresh_db(backend).await?;
    let mut s = Server::start(&db.url, test_config()).await;
    let (a1, _) = s.enrol("alice", "m1").await;
    let (a2, _) = s.enrol("alice", "m2").await;
    let mut ids = Vec::new();
    let mut counts = Vec::new();
    for jobs in SIZES {
        let alice = s.owner("alice").await;
        while ids.len() < jobs {
            let j: coordinator::model::Job = alice.post_ok("/api/v1/jobs", job("/bin/sh")).await;
            ids.push(j.id);
        }
        for id in ids.iter().step_by(2) {
            sqlx::query("INSERT INTO placements (job_id, agents, algorithm, reason, prediction_source, predicted_runtime_s, placed_ms) VALUES ($1, $2, 'fifo', 'test', 'estimate', 1.0, 0) ON CONFLICT (job_id) DO UPDATE SET agents = $2")
                .bind(*id)
                .bind(format!("{a1},{a2}"))
                .execute(&s.db.pool)
                .await
                .unwrap();
        }
        let mut times = Vec::new();
        for _ in 0..21 {
            let t = Instant::now();
            let (status, body) = alice.get(&format!("/api/v1/jobs?limit={jobs}")).await;
            times.push(t.elapsed().as_secs_f64() * 1000.0);
            assert_eq!(status, 200);
            assert_eq!(body.as_array().unwrap().len(), jobs);
        }
        times.sort_by(|a, b| a.partial_cmp(b).unwrap());
        eprintln!(
            "{backend:?}: GET /api/v1/jobs?limit={jobs}: median {:.1} ms (min {:.1}, max {:.1}) over 21",
            times[10], times[0], times[20]
        );
        s.stop().await;
        let dbh = coordinator::Db::connect(&db.url).await.unwrap();
        let who = Principal::Owner { owner: "alice".into() };
        let before = counter.load(Ordering::SeqCst);
        let listed = coordinator::store::job_view::list_jobs(&dbh, &who, None, jobs as u32).await.unwrap();
        let n = counter.load(Ordering::SeqCst) - before;
        dbh.close().await;
        assert_eq!(listed.len(), jobs);
        assert!(listed.windows(2).all(|w| w[0].id > w[1].id), "newest first");
        assert!(listed.iter().all(|j| j.tasks.len() == 1 && j.tasks[0].rank == 0), "every job has its task");
        let placed: Vec<_> = listed.iter().filter_map(|j| j.placement.as_ref()).collect();
        assert_eq!(placed.len(), jobs.div_ceil(2));
        assert!(placed.iter().all(|p| p.machines == ["m1", "m2"]), "a placement names its machines");
        eprintln!("{backend:?}: listing {jobs} jobs read {n} statements");
        counts.push(n);
        s = Server::start(&db.url, test_config()).await;
    }
    s.stop().await;
    Some(counts)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listing_jobs_reads_a_constant_number_of_statements() {
    let counter = Arc::new(AtomicUsize::new(0));
    tracing::subscriber::set_global_default(Statements(counter.clone())).unwrap();
    for backend in [Backend::Sqlite, Backend::Postgres] {
        if let Some(counts) = statements_per_listing(backend, &counter).await {
            assert!(counts[0] > 0, "the counter sees sqlx's statements");
            // Four reads, in one snapshot: on PostgreSQL its `SET TRANSACTION` is one more.
            let most = if backend == Backend::Postgres { 5 } else { 4 };
            assert!(counts[0] <= most, "{backend:?}: {counts:?} statements (jobs, tasks, placements, machine names)");
            assert!(counts.iter().all(|n| *n == counts[0]), "{backend:?}: {counts:?} statements for {SIZES:?} jobs");
        }
    }
}
