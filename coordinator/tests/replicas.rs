//! Two coordinator replicas on one real PostgreSQL database: agents alternate between
//! them while claiming 300 tasks concurrently; every task is leased exactly once and
//! every completion counted once. (Skipped without `LULL_TEST_PG_URL`, unless
//! `LULL_REQUIRE_POSTGRES=1`.)

mod common;

use common::*;
use coordinator::model::*;
use serde_json::json;
use std::collections::HashSet;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_replicas_never_lease_a_task_twice() {
    let Some(db) = fresh_db(Backend::Postgres).await else { return };
    let r1 = Server::start(&db.url, test_config()).await;
    let r2 = Server::start(&db.url, test_config()).await;
    const JOBS: usize = 300;
    let admin = r1.admin();
    for i in 0..JOBS {
        let _: Job = admin.post_ok("/api/v1/jobs", json!({"command": "t", "args": [i.to_string()]})).await;
    }
    let mut agents = vec![];
    for i in 0..8 {
        let (_, c) = r1.enrol("alice", &format!("m{i}")).await;
        // The same secret works on both replicas: they share the database.
        let mut c2 = c.clone();
        c2.base = r2.base.clone();
        agents.push((c, c2));
    }
    let mut tasks = vec![];
    for (a1, a2) in agents {
        tasks.push(tokio::spawn(async move {
            let mut got = vec![];
            let mut n = 0u64;
            loop {
                n += 1;
                let (lease_via, complete_via) = if n.is_multiple_of(2) { (&a1, &a2) } else { (&a2, &a1) };
                // A poll that finds nothing within 3 s: the queue is empty.
                let Some(l) = lease_via.lease(0, 3000).await else { break };
                let (st, v) = complete_via.complete(&l, 0.01, 0.0).await;
                assert_eq!((st, v["counted"].as_bool()), (200, Some(true)), "{v}");
                got.push((l.job_id, l.rank, l.lease));
            }
            got
        }));
    }
    let mut all = vec![];
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    let unique: HashSet<(i64, u32)> = all.iter().map(|(j, r, _)| (*j, *r)).collect();
    assert_eq!(all.len(), JOBS, "each task leased exactly once ({} unique)", unique.len());
    assert_eq!(unique.len(), JOBS);
    assert!(all.iter().all(|(_, _, lease)| *lease == 1), "no task was ever leased a second time");
    let done: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM jobs WHERE state = 'completed'").fetch_one(&r1.db.pool).await.unwrap();
    let events: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM task_events WHERE kind = 'completed'").fetch_one(&r1.db.pool).await.unwrap();
    assert_eq!((done, events), (JOBS as i64, JOBS as i64));
    r1.stop().await;
    r2.stop().await;
}
