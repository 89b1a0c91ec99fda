//! Memory-centric placement and migration (seed 001) through the coordinator's API, on a
//! real server over SQLite and PostgreSQL: agents' heartbeats carry memory reports; a
//! machine whose report puts it over MT takes no job and has its job moved — re-queued
//! with its checkpoint for the machine with the most free memory, the old holder's lease
//! taken back (409 on its next renewal), not counted as an eviction, and the reason shown
//! in `GET /api/v1/jobs/{id}`; malformed reports are refused with 400 naming the field.

#[macro_use]
mod common;

use common::*;
use coordinator::model::*;
use serde_json::{json, Value};
use std::time::Duration;

const MIB: u64 = 1 << 20;

/// A heartbeat of an available machine whose guests may hold `m_mib` MiB, with `guests`
/// as (job, working set MiB).
fn heartbeat(m_mib: u64, guests: &[(i64, u64)], pressure: bool) -> Value {
    let guests: Vec<Value> = guests
        .iter()
        .map(|(job, ws)| json!({"job_id": job, "rank": 0, "working_set_bytes": ws * MIB, "major_faults_per_s": 3.0, "age_s": 20.0}))
        .collect();
    json!({"state": "recruitable", "available": true, "budget_left": 5, "free_mem_bytes": 1u64 << 34,
        "base_speed": 1.0, "current_speed": 1.0, "interruption_limit": 5, "idle_for_s": 600,
        "memory": {"available_bytes": 1u64 << 34, "guest_memory_bytes": m_mib * MIB, "pressure": pressure, "guests": guests}})
}

both!(a_job_over_mt_moves_to_the_machine_with_most_free_memory, over_mt_on);
async fn over_mt_on(b: Backend) {
    let mut config = test_config();
    config.scheduler.memory_threshold = 0.0;
    let Some(db) = fresh_db(b).await else { return };
    let s = Server::start(&db.url, config).await;
    let admin = s.admin();
    let (a_id, a) = s.enrol("alice", "small").await;
    let (b_id, bm) = s.enrol("bob", "big").await;
    let _: HeartbeatAck = a.post_ok("/api/v1/heartbeat", heartbeat(1000, &[], false)).await;
    let _: HeartbeatAck = bm.post_ok("/api/v1/heartbeat", heartbeat(4000, &[], false)).await;

    // A declared 1200 MiB does not fit under MT on `small` (M 1000 MiB) although its free
    // memory (16 GiB) would hold it; nothing is leased to it.
    let big: Job = admin.post_ok("/api/v1/jobs", json!({"command": "big", "mem_bytes": 1200 * MIB})).await;
    assert!(a.lease(1 << 34, 1500).await.is_none(), "a job that takes Q_o to MT is not placed there");
    let _: Job = admin.post_ok(&format!("/api/v1/jobs/{}/cancel", big.id), json!({})).await;

    // A job with no declared memory runs on `small`, with a checkpoint.
    let j: Job = admin.post_ok("/api/v1/jobs", json!({"command": "grow", "checkpointable": true})).await;
    let la = a.lease(1 << 34, 3000).await.expect("small gets the job");
    assert_eq!(la.job_id, j.id);
    assert_eq!(a.put_bytes(&format!("/api/v1/tasks/{}/0/checkpoint?lease={}", j.id, la.lease), b"step 17".to_vec()).await, 204);

    // `big` waits for work; `small` reports the guest grown to 1100 MiB (Q_o +10 % ≥ MT 0).
    let waiter = {
        let bm = bm.clone();
        tokio::spawn(async move { bm.lease(1 << 34, 10_000).await })
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    let _: HeartbeatAck = a.post_ok("/api/v1/heartbeat", heartbeat(1000, &[(j.id, 1100)], false)).await;
    let lb = waiter.await.unwrap().expect("the job moves to big");
    assert_eq!((lb.job_id, lb.lease), (j.id, la.lease + 1));
    let (st, ck) = bm.get_text(&format!("/api/v1/tasks/{}/0/checkpoint", j.id)).await;
    assert_eq!((st, ck.as_str()), (200, "step 17"), "the next lease resumes from the checkpoint");

    // The old holder learns it as a lease taken back, and its late upload is refused.
    let (st, _) = a.post(&format!("/api/v1/tasks/{}/0/progress", j.id), json!({"lease": la.lease})).await;
    assert_eq!(st, 409);
    assert_eq!(a.put_bytes(&format!("/api/v1/tasks/{}/0/checkpoint?lease={}", j.id, la.lease), b"late".to_vec()).await, 409);

    let moved: Job = admin.get_ok(&format!("/api/v1/jobs/{}", j.id)).await;
    let p = moved.placement.expect("placement");
    assert_eq!(p.agents, vec![b_id.clone()], "{p:?}");
    // Machines by name (ids are in `agents`).
    assert!(p.reason.contains("memory migration") && p.reason.contains("small (alice)") && p.reason.contains("big (bob)"), "{}", p.reason);
    assert!(!p.reason.contains(&a_id), "{}", p.reason);
    assert!(p.reason.contains("combined") && p.reason.contains("MT"), "{}", p.reason);
    let t = &moved.tasks[0];
    assert_eq!((t.evictions, t.retries_used, t.attempts), (0, 0, 2), "a migration is neither an eviction nor a retry (two runs): {t:?}");
    let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM task_events WHERE kind = 'migrated'").fetch_one(&s.db.pool).await.unwrap();
    assert_eq!(n, 1);

    // It completes on `big`.
    let (st, _) = bm.complete(&lb, 3.0, 0.1).await;
    assert_eq!(st, 200);
    let done: Job = admin.get_ok(&format!("/api/v1/jobs/{}", j.id)).await;
    assert_eq!(done.state, "completed");
    s.stop().await;
}

both!(memory_pressure_moves_a_job_and_stays_put_without_a_target, pressure_on);
async fn pressure_on(b: Backend) {
    let Some(db) = fresh_db(b).await else { return };
    let s = Server::start(&db.url, test_config()).await;
    let admin = s.admin();
    let (_, a) = s.enrol("alice", "a").await;
    let _: HeartbeatAck = a.post_ok("/api/v1/heartbeat", heartbeat(8000, &[], false)).await;
    let j: Job = admin.post_ok("/api/v1/jobs", json!({"command": "sim"})).await;
    let la = a.lease(1 << 34, 3000).await.expect("a gets it");
    // Pressure, but no other machine: the job stays where it is.
    let _: HeartbeatAck = a.post_ok("/api/v1/heartbeat", heartbeat(8000, &[(j.id, 100)], true)).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let p: ProgressAck = a.post_ok(&format!("/api/v1/tasks/{}/0/progress", j.id), json!({"lease": la.lease})).await;
    assert!(!p.cancel);
    // A machine with room asks for work; the next report under pressure moves the job.
    let (_, c) = s.enrol("carol", "c").await;
    let _: HeartbeatAck = c.post_ok("/api/v1/heartbeat", heartbeat(8000, &[], false)).await;
    let waiter = tokio::spawn(async move { c.lease(1 << 34, 10_000).await });
    tokio::time::sleep(Duration::from_millis(500)).await;
    let _: HeartbeatAck = a.post_ok("/api/v1/heartbeat", heartbeat(8000, &[(j.id, 100)], true)).await;
    assert_eq!(waiter.await.unwrap().expect("moved").job_id, j.id);
    let moved: Job = admin.get_ok(&format!("/api/v1/jobs/{}", j.id)).await;
    assert!(moved.placement.unwrap().reason.contains("pressure"));
    s.stop().await;
}

both!(malformed_memory_reports_are_refused, malformed_on);
async fn malformed_on(b: Backend) {
    let Some(db) = fresh_db(b).await else { return };
    let s = Server::start(&db.url, test_config()).await;
    let (_, a) = s.enrol("alice", "a").await;
    let mut hb = heartbeat(1000, &[(1, 10)], false);
    hb["memory"]["guests"][0]["age_s"] = json!(-1.0);
    let (st, v) = a.post("/api/v1/heartbeat", hb).await;
    assert_eq!(st, 400);
    assert!(v.to_string().contains("memory.guests[0].age_s"), "{v}");
    let mut hb = heartbeat(1000, &[(0, 10)], false);
    let (st, v) = a.post("/api/v1/heartbeat", hb.clone()).await;
    assert!(st == 400 && v.to_string().contains("memory.guests[0].job_id"), "{st} {v}");
    hb["memory"]["swap"] = json!(1);
    assert_eq!(a.post("/api/v1/heartbeat", hb).await.0, 422, "unknown fields are refused");
    let many: Vec<(i64, u64)> = (1..=300).map(|j| (j, 1)).collect();
    let (st, v) = a.post("/api/v1/heartbeat", heartbeat(1000, &many, false)).await;
    assert!(st == 400 && v.to_string().contains("at most 256"), "{st} {v}");
    // A well-formed one is taken.
    let _: HeartbeatAck = a.post_ok("/api/v1/heartbeat", heartbeat(1000, &[(1, 10)], false)).await;
    s.stop().await;
}
