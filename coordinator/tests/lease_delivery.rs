//! The leader's shortcuts on the long poll's way to a lease, on a real coordinator over
//! both databases: a poll of an agent known to have nothing waiting makes no database
//! look, yet a lease placed for it afterwards still reaches its poll at once; and under
//! many concurrent polls (passes coalesced, looks skipped) every job is leased exactly
//! once and every poll answered.

#[macro_use]
mod common;

use common::*;
use coordinator::model::*;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// A counter from `/metrics`.
async fn metric(s: &Server, name: &str) -> u64 {
    let (st, text) = s.client("").get_text("/metrics").await;
    assert_eq!(st, 200);
    text.lines()
        .find_map(|l| l.strip_prefix(name).and_then(|v| v.strip_prefix(' ')))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("{name} missing from /metrics"))
}

/// Looks for a waiting lease made in the database, and skipped.
async fn looks(s: &Server) -> (u64, u64) {
    (metric(s, "lull_delivery_looks_total").await, metric(s, "lull_delivery_looks_skipped_total").await)
}

both!(looks_skipped_only_while_nothing_waits, looks_skipped_on);
async fn looks_skipped_on(b: Backend) {
    let Some(db) = fresh_db(b).await else { return };
    let s = Server::start(&db.url, test_config()).await;
    let (_, a) = s.enrol("alice", "a").await;
    // Nothing queued: the poll's first look finds nothing, its looks after opening are
    // skipped.
    assert!(a.lease(0, 0).await.is_none());
    let (n, skipped) = looks(&s).await;
    assert_eq!(n, 1);
    assert!(skipped >= 1, "{skipped}");
    // Known empty now: the next poll makes no look at all.
    assert!(a.lease(0, 0).await.is_none());
    let (n, skipped_then) = looks(&s).await;
    assert_eq!(n, 1);
    assert!(skipped_then >= skipped + 2, "{skipped} → {skipped_then}");

    // A job submitted while the agent waits: the pass's wake-up sends the look to the
    // database and the poll gets its lease at once, not at the end of its wait.
    let t0 = Instant::now();
    let poll = tokio::spawn({
        let a = a.clone();
        async move { a.lease(0, 10_000).await }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let j: Job = s.admin().post_ok("/api/v1/jobs", job("sh")).await;
    let l = poll.await.unwrap().expect("the waiting poll got the job");
    assert_eq!(l.job_id, j.id);
    assert!(t0.elapsed() < Duration::from_secs(3), "woken, not timed out: {:?}", t0.elapsed());
    let (n, _) = looks(&s).await;
    assert_eq!(n, 2, "one look, after the wake-up");

    // The look that delivered it also learnt nothing else waits: the next poll skips.
    assert!(a.lease(0, 0).await.is_none());
    assert_eq!(looks(&s).await.0, 2);

    // Two jobs for the agent, two polls at once: each gets one, neither is skipped past.
    let j2: Job = s.admin().post_ok("/api/v1/jobs", job("sh")).await;
    let j3: Job = s.admin().post_ok("/api/v1/jobs", job("sh")).await;
    let (p1, p2) = tokio::join!(a.lease(0, 10_000), a.lease(0, 10_000));
    let mut got = vec![p1.expect("first poll leased").job_id, p2.expect("second poll leased").job_id];
    got.sort_unstable();
    assert_eq!(got, vec![j2.id, j3.id]);
    assert_eq!(metric(&s, "lull_leases_total").await, 3);
    s.stop().await;
}

both!(many_polls_each_job_leased_once, many_polls_on);
async fn many_polls_on(b: Backend) {
    let Some(db) = fresh_db(b).await else { return };
    let s = Server::start(&db.url, test_config()).await;
    const AGENTS: usize = 12;
    const JOBS: usize = 120;
    let mut agents = Vec::new();
    for i in 0..AGENTS {
        agents.push(s.enrol("o", &format!("m{i}")).await.1);
    }
    // Half the jobs wait before any poll (a backlog), half arrive while the polls run.
    let mut submitted = Vec::new();
    for _ in 0..JOBS / 2 {
        submitted.push(s.admin().post_ok::<Job>("/api/v1/jobs", job("sh")).await.id);
    }
    let leased = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut polls = Vec::new();
    for a in agents {
        let leased = leased.clone();
        polls.push(tokio::spawn(async move {
            let deadline = Instant::now() + Duration::from_secs(60);
            while leased.lock().unwrap().len() < JOBS && Instant::now() < deadline {
                if let Some(l) = a.lease(0, 500).await {
                    leased.lock().unwrap().push(l.job_id);
                }
            }
        }));
    }
    for _ in 0..JOBS / 2 {
        submitted.push(s.admin().post_ok::<Job>("/api/v1/jobs", job("sh")).await.id);
    }
    for p in polls {
        p.await.unwrap();
    }
    let leased = leased.lock().unwrap().clone();
    let mut count: HashMap<i64, u32> = HashMap::new();
    for j in &leased {
        *count.entry(*j).or_default() += 1;
    }
    assert!(count.values().all(|n| *n == 1), "a job leased twice: {count:?}");
    let missing: Vec<&i64> = submitted.iter().filter(|j| !count.contains_key(j)).collect();
    assert!(missing.is_empty(), "never leased: {missing:?}");
    assert_eq!(leased.len(), JOBS);
    s.stop().await;
}
