//! The coordinator's API against a real server on 127.0.0.1 over real databases: each
//! test runs on a fresh SQLite file and, when `LULL_TEST_PG_URL` is set (CI sets it and
//! `LULL_REQUIRE_POSTGRES=1`), on a fresh PostgreSQL database.

#[macro_use]
mod common;

use common::*;
use coordinator::model::*;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

async fn server(b: Backend) -> Option<(TestDb, Server)> {
    server_with(b, test_config()).await
}

async fn server_with(b: Backend, c: coordinator::Config) -> Option<(TestDb, Server)> {
    let db = fresh_db(b).await?;
    let s = Server::start(&db.url, c).await;
    Some((db, s))
}

both!(enrolment_tokens_and_roles, enrolment_tokens_and_roles_on);
async fn enrolment_tokens_and_roles_on(b: Backend) {
    let Some((_db, s)) = server(b).await else { return };
    let admin = s.admin();
    let anon = s.client("");
    let t: JoinToken = admin.post_ok("/api/v1/join-tokens", json!({"uses": 1})).await;
    let e: Enrolment = anon.post_ok("/api/v1/enrol", json!({"token": t.token, "owner": "alice", "machine": "desk-1", "cpus": 2})).await;
    assert!(e.secret.starts_with("lull_agent_"));
    // Single use: the token is spent.
    let (st, _) = anon.post("/api/v1/enrol", json!({"token": t.token, "owner": "alice", "machine": "desk-2", "cpus": 2})).await;
    assert_eq!(st, 401);
    // The secret is stored hashed, never in clear.
    let stored: String = sqlx::query_scalar("SELECT secret_hash FROM agents").fetch_one(&s.db.pool).await.unwrap();
    assert_ne!(stored, e.secret);
    assert_eq!(stored, coordinator::auth::hash_secret(&e.secret));

    let agent = s.client(&e.secret);
    let hb =
        json!({"state": "idle", "available": true, "budget_left": 5, "free_mem_bytes": 1_000_000, "base_speed": 1.5, "current_speed": 1.2});
    let ack: HeartbeatAck = agent.post_ok("/api/v1/heartbeat", hb.clone()).await;
    assert!(ack.next_heartbeat_s >= 1);
    assert_eq!(anon.post("/api/v1/heartbeat", hb.clone()).await.0, 401);
    assert_eq!(
        s.client("lull_agent_0000000000000000000000000000000000000000000000000000000000000000")
            .post("/api/v1/heartbeat", hb.clone())
            .await
            .0,
        401
    );
    assert_eq!(admin.post("/api/v1/heartbeat", hb.clone()).await.0, 403, "admins are not agents");
    // Agents cannot mint tokens or keys.
    assert_eq!(agent.post("/api/v1/join-tokens", json!({})).await.0, 403);
    assert_eq!(agent.post("/api/v1/keys", json!({"role": "admin"})).await.0, 403);

    let (_bob_id, _bob) = s.enrol("bob", "lab-7").await;
    let alice = s.owner("alice").await;
    assert_eq!(alice.post("/api/v1/join-tokens", json!({})).await.0, 403, "owners cannot mint tokens");
    let mine: Vec<AgentInfo> = alice.get_ok("/api/v1/agents").await;
    assert_eq!(mine.len(), 1);
    assert_eq!(mine[0].owner, "alice");
    assert_eq!(mine[0].heartbeat.as_ref().map(|h| h.base_speed), Some(1.5), "live heartbeat is shown");
    let all: Vec<AgentInfo> = admin.get_ok("/api/v1/agents").await;
    assert_eq!(all.len(), 2);
    // The heartbeat reaches the database in the next flush.
    tokio::time::sleep(Duration::from_millis(400)).await;
    let seen: Option<i64> =
        sqlx::query_scalar("SELECT last_seen_ms FROM agents WHERE id = $1").bind(&e.agent_id).fetch_one(&s.db.pool).await.unwrap();
    assert!(seen.is_some(), "heartbeat was flushed");
    s.stop().await;
}

both!(fifo_leases_and_idempotent_completion, fifo_leases_and_idempotent_completion_on);
async fn fifo_leases_and_idempotent_completion_on(b: Backend) {
    let Some((_db, s)) = server(b).await else { return };
    let admin = s.admin();
    let mut ids = vec![];
    for i in 0..3 {
        let j: Job = admin.post_ok("/api/v1/jobs", json!({"command": "/bin/echo", "args": [i.to_string()], "env": {"A": "1"}})).await;
        assert_eq!(j.state, "queued");
        assert_eq!(j.program, "echo");
        ids.push(j.id);
    }
    let (_, a) = s.enrol("alice", "a").await;
    let (_, b2) = s.enrol("bob", "b").await;
    let l1 = a.lease(1 << 30, 0).await.expect("work");
    let l2 = b2.lease(1 << 30, 0).await.expect("work");
    assert_eq!((l1.job_id, l2.job_id), (ids[0], ids[1]), "FIFO");
    assert_eq!(l1.spec.args, vec!["0"]);
    let running: Job = admin.get_ok(&format!("/api/v1/jobs/{}", ids[0])).await;
    assert_eq!(running.state, "running");
    // A completion under someone else's lease is refused.
    assert_eq!(b2.complete(&l1, 1.0, 0.0).await.0, 409);
    let (st, v) = a.complete(&l1, 2.5, 0.5).await;
    assert_eq!((st, v["counted"].as_bool()), (200, Some(true)));
    let (st, v) = a.complete(&l1, 2.5, 0.5).await;
    assert_eq!((st, v["counted"].as_bool()), (200, Some(false)), "a retried completion is not counted twice");
    let done: Job = admin.get_ok(&format!("/api/v1/jobs/{}", ids[0])).await;
    assert_eq!(done.state, "completed");
    assert_eq!(done.tasks[0].user_cpu_s, Some(2.5));
    let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM task_events WHERE kind = 'completed'").fetch_one(&s.db.pool).await.unwrap();
    assert_eq!(n, 1);
    let l3 = a.lease(1 << 30, 0).await.expect("third job");
    assert_eq!(l3.job_id, ids[2]);
    assert!(a.lease(1 << 30, 0).await.is_none(), "queue empty");
    let queued: Vec<Job> = admin.get_ok("/api/v1/jobs?state=running").await;
    assert_eq!(queued.len(), 2);
    s.stop().await;
}

both!(lost_leases_requeue_with_bounded_retries, lost_leases_requeue_on);
async fn lost_leases_requeue_on(b: Backend) {
    let mut c = test_config();
    // Long enough that a loaded CI machine answers each renewal well inside it; the
    // renewals below still span more than one TTL, so only renewal keeps the lease.
    c.lease_ttl = Duration::from_millis(1200);
    let Some((_db, s)) = server_with(b, c).await else { return };
    let admin = s.admin();
    let j: Job = admin.post_ok("/api/v1/jobs", json!({"command": "x", "max_retries": 1})).await;
    let (_, a) = s.enrol("alice", "a").await;
    let (_, b2) = s.enrol("bob", "b").await;
    let la = a.lease(0, 0).await.expect("work");
    // Progress renews the lease.
    for _ in 0..4 {
        tokio::time::sleep(Duration::from_millis(400)).await;
        let p: ProgressAck = a.post_ok(&format!("/api/v1/tasks/{}/0/progress", j.id), json!({"lease": la.lease})).await;
        assert!(!p.cancel);
    }
    assert!(b2.lease(0, 0).await.is_none(), "a renewed lease is not re-queued");
    // Agent a is lost: its lease expires and b gets the task (long-poll wakes on re-queue).
    let lb = b2.lease(0, 5000).await.expect("re-queued work");
    assert_eq!((lb.job_id, lb.lease), (j.id, la.lease + 1));
    assert_eq!(a.complete(&la, 1.0, 0.0).await.0, 409, "the lost agent's late completion is refused");
    // b is lost too: past max_retries the job is lost.
    let t0 = Instant::now();
    loop {
        let job: Job = admin.get_ok(&format!("/api/v1/jobs/{}", j.id)).await;
        if job.state == "lost" {
            let t = &job.tasks[0];
            assert_eq!((t.state.as_str(), t.attempts, t.retries_used), ("lost", 2, 1), "{t:?}");
            let why = "retries used up: its lease expired on b (the machine stopped answering)";
            assert_eq!((t.reason.as_deref(), job.reason.as_deref()), (Some(why), Some(why)));
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(10), "job did not fail: {job:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Explicit failure uses a retry too; eviction does not.
    let j2: Job = admin.post_ok("/api/v1/jobs", json!({"command": "y", "max_retries": 0})).await;
    let l = a.lease(0, 0).await.unwrap();
    let t: Task = a.post_ok(&format!("/api/v1/tasks/{}/0/evicted", j2.id), json!({"lease": l.lease, "reason": "owner back"})).await;
    assert_eq!((t.state.as_str(), t.evictions, t.retries_used, t.attempts), ("queued", 1, 0, 1));
    let l = b2.lease(0, 0).await.unwrap();
    let t: Task = b2.post_ok(&format!("/api/v1/tasks/{}/0/fail", j2.id), json!({"lease": l.lease, "reason": "disk full"})).await;
    assert_eq!((t.state.as_str(), t.reason.as_deref(), t.attempts), ("lost", Some("retries used up: disk full"), 2));
    let r: Report = admin.get_ok("/api/v1/reports?by=machine&since=1d").await;
    assert_eq!(r.rows.iter().map(|r| r.evictions).sum::<u32>(), 1);
    s.stop().await;
}

both!(cancel_gang_memory_and_checkpoints, cancel_gang_memory_and_checkpoints_on);
async fn cancel_gang_memory_and_checkpoints_on(b: Backend) {
    let Some((_db, s)) = server(b).await else { return };
    let owner = s.owner("carol").await;
    let (_, a) = s.enrol("alice", "a").await;
    let (_, b2) = s.enrol("bob", "b").await;
    // Memory: a job needing 1 GiB is not leased to a machine with 1 MiB free.
    let big: Job = owner.post_ok("/api/v1/jobs", json!({"command": "big", "mem_bytes": 1u64 << 30})).await;
    assert!(a.lease(1 << 20, 0).await.is_none());
    // Cancel a leased job: the holder learns it from its next progress report.
    let l = a.lease(2 << 30, 0).await.unwrap();
    assert_eq!(l.job_id, big.id);
    let c: Job = owner.post_ok(&format!("/api/v1/jobs/{}/cancel", big.id), json!({})).await;
    assert_eq!(c.state, "cancelled");
    let p: ProgressAck = a.post_ok(&format!("/api/v1/tasks/{}/0/progress", big.id), json!({"lease": l.lease})).await;
    assert!(p.cancel);
    assert_eq!(a.complete(&l, 0.0, 0.0).await.0, 409);
    // Another owner cannot see or cancel carol's job.
    let dave = s.owner("dave").await;
    assert_eq!(dave.get(&format!("/api/v1/jobs/{}", big.id)).await.0, 404);
    assert_eq!(dave.post(&format!("/api/v1/jobs/{}/cancel", big.id), json!({})).await.0, 404);
    // Gang: two ranks on two different machines, placed together only when two machines
    // ask for work at once (one machine never holds two ranks of a gang).
    let g: Job = owner.post_ok("/api/v1/jobs", json!({"command": "mpi", "machines": 2, "checkpointable": true})).await;
    assert_eq!(g.tasks.len(), 2);
    assert!(a.lease(0, 0).await.is_none(), "one free machine cannot start a 2-machine gang");
    let (ga, gb) = tokio::join!(a.lease(0, 5000), b2.lease(0, 5000));
    let (mut ga, mut gb) = (ga.unwrap(), gb.unwrap());
    let (mut a, mut b2) = (a, b2);
    if ga.rank == 1 {
        // Placement decides which machine gets rank 0; name them so that `a` holds it.
        std::mem::swap(&mut ga, &mut gb);
        std::mem::swap(&mut a, &mut b2);
    }
    assert_eq!((ga.job_id, ga.rank, ga.machines), (g.id, 0, 2));
    assert_eq!(gb.rank, 1);
    let gang: Gang = a.get_ok(&format!("/api/v1/tasks/{}/0/gang", g.id)).await;
    assert!(gang.ready);
    assert_eq!(gang.agents.iter().filter(|a| a.is_some()).count(), 2);
    assert_eq!(b2.get(&format!("/api/v1/tasks/{}/0/gang", g.id)).await.0, 404, "only the holder asks about its rank");
    // Checkpoints: the holder uploads and downloads; others cannot.
    let data: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    assert_eq!(a.put_bytes(&format!("/api/v1/tasks/{}/0/checkpoint", g.id), data.clone()).await, 204);
    assert_eq!(b2.put_bytes(&format!("/api/v1/tasks/{}/0/checkpoint", g.id), vec![1]).await, 409);
    let r = a.http.get(format!("{}/api/v1/tasks/{}/0/checkpoint", s.base, g.id)).bearer_auth(&a.secret).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(r.bytes().await.unwrap().to_vec(), data);
    assert_eq!(b2.get(&format!("/api/v1/tasks/{}/0/checkpoint", g.id)).await.0, 404);
    s.stop().await;
}

both!(long_poll_wakes_on_submit, long_poll_wakes_on_submit_on);
async fn long_poll_wakes_on_submit_on(b: Backend) {
    let Some((_db, s)) = server(b).await else { return };
    let (_, a) = s.enrol("alice", "a").await;
    let t0 = Instant::now();
    let waiter = tokio::spawn(async move { a.lease(0, 10_000).await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let _: Job = s.admin().post_ok("/api/v1/jobs", job("sh")).await;
    let l = waiter.await.unwrap().expect("long poll got the job");
    assert!(t0.elapsed() < Duration::from_secs(3), "woken by the submit, not the timeout");
    assert_eq!(l.rank, 0);
    // Graceful shutdown returns a pending long-poll at once with 204.
    let (_, b2) = s.enrol("bob", "b").await;
    let waiter = tokio::spawn(async move { b2.lease(0, 30_000).await });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let t1 = Instant::now();
    s.stop().await;
    assert!(waiter.await.unwrap().is_none());
    assert!(t1.elapsed() < Duration::from_secs(5));
}

fn donation(seq: i64, day: &str, cpu_us: u64, wall_ms: u64) -> serde_json::Value {
    json!({"seq": seq, "kind": "donation", "payload": {"guest": "g", "day": day, "cpu_us": cpu_us, "wall_ms": wall_ms, "at_utc": at_utc(day)}})
}

/// A time within `day` that has passed: its noon UTC, or now for today before noon.
fn at_utc(day: &str) -> String {
    let noon = chrono::NaiveDate::parse_from_str(day, "%Y-%m-%d").unwrap().and_hms_opt(12, 0, 0).unwrap().and_utc();
    noon.min(chrono::Utc::now()).to_rfc3339()
}

both!(records_are_idempotent_and_reports_isolated, records_and_reports_on);
async fn records_and_reports_on(b: Backend) {
    let Some((_db, s)) = server(b).await else { return };
    let admin = s.admin();
    let today = chrono::Utc::now().date_naive();
    let d0 = today.to_string();
    let d1 = (today - chrono::Duration::days(1)).to_string();
    let (a_id, a) = s.enrol("alice", "desk").await;
    let (_, a2) = s.enrol("alice", "laptop").await;
    let (_, bob) = s.enrol("bob", "lab").await;
    backdate_enrolment(&s.db, 3 * 86_400_000).await;
    let ack: RecordsAck = a
        .post_ok(
            "/api/v1/records",
            json!({"records": [donation(1, &d0, 1_234_567, 2000), donation(2, &d0, 1, 1), donation(3, &d1, 5_000_000, 6000)]}),
        )
        .await;
    assert_eq!((ack.acked_through, ack.stored), (3, 3));
    // A replay overlapping the last batch (the agent crashed before it marked them sent).
    let ack: RecordsAck = a
        .post_ok(
            "/api/v1/records",
            json!({"records": [donation(2, &d0, 1, 1), donation(3, &d1, 5_000_000, 6000),
                {"seq": 4, "kind": "interruption", "payload": {"day": d0, "number": 1, "limit": 5, "cause": "input", "mode": "LL"}},
                {"seq": 5, "kind": "linger", "payload": {"day": d0, "linger_ms": 1500}}]}),
        )
        .await;
    assert_eq!((ack.acked_through, ack.stored), (5, 2), "replayed records are not stored twice");
    let _: RecordsAck = a2.post_ok("/api/v1/records", json!({"records": [donation(1, &d0, 10_000_000, 10_000)]})).await;
    let _: RecordsAck = bob.post_ok("/api/v1/records", json!({"records": [donation(1, &d0, 7_000_000, 7000)]})).await;
    // Bad records: the whole batch is refused, nothing stored.
    let (st, _) = a
        .post(
            "/api/v1/records",
            json!({"records": [donation(6, &d0, 1, 1), {"seq": 7, "kind": "donation", "payload": {"day": "yesterday"}}]}),
        )
        .await;
    assert_eq!(st, 400);
    let (st, _) = a.post("/api/v1/records", json!({"records": [donation(6, &d0, u64::MAX, 1)]})).await;
    assert_eq!(st, 400);

    let r: Report = admin.get_ok("/api/v1/reports?by=owner&since=7d").await;
    let row = |key: &str, day: &str| r.rows.iter().find(|x| x.key == key && x.period == day).cloned().unwrap_or_default();
    assert_eq!(row("alice", &d0).cpu_s, 11.234568);
    assert_eq!(row("alice", &d0).wall_s, 12.001);
    assert_eq!(row("alice", &d0).interruptions, 1);
    assert_eq!(row("alice", &d0).interruption_limit, 5);
    assert_eq!(row("alice", &d0).linger_s, 1.5);
    assert_eq!(row("alice", &d1).cpu_s, 5.0);
    assert_eq!(row("bob", &d0).cpu_s, 7.0);
    let by_machine: Report = admin.get_ok("/api/v1/reports?by=machine&since=1d").await;
    let desk = by_machine.rows.iter().find(|x| x.key == a_id).unwrap();
    assert_eq!((desk.machine.as_deref(), desk.cpu_s), (Some("desk"), 1.234568));
    assert!(by_machine.rows.iter().all(|x| x.period == d0), "since=1d is today only");
    let week: Report = admin.get_ok("/api/v1/reports?by=owner&since=14d&period=week").await;
    assert!((week.rows.iter().filter(|x| x.key == "alice").map(|x| x.cpu_s).sum::<f64>() - 16.234568).abs() < 1e-9);
    let (st, csv) = admin.get_text("/api/v1/reports?by=owner&since=7d&format=csv").await;
    assert_eq!(st, 200);
    assert!(csv.starts_with("key,machine,period,cpu_s,"));
    assert!(csv.contains(&format!("alice,,{d0},11.234568,12.001,1,5,")), "{csv}");

    // Owner isolation.
    let alice = s.owner("alice").await;
    let mine: Report = alice.get_ok("/api/v1/reports?by=machine&since=7d").await;
    assert!(!mine.rows.is_empty());
    assert!(mine.rows.iter().all(|x| x.machine.as_deref() != Some("lab")), "alice sees only her machines");
    let mine: Report = alice.get_ok("/api/v1/reports?by=owner&since=7d").await;
    assert!(mine.rows.iter().all(|x| x.key == "alice"));
    assert_eq!(alice.get("/api/v1/reports?owner=bob").await.0, 403);
    assert_eq!(a.get("/api/v1/reports").await.0, 403, "agents read no reports");
    assert_eq!(s.client("").get("/api/v1/reports").await.0, 401);
    s.stop().await;
}

both!(availability_from_heartbeats, availability_from_heartbeats_on);
async fn availability_from_heartbeats_on(b: Backend) {
    let Some((_db, s)) = server(b).await else { return };
    let (_, a) = s.enrol("alice", "desk").await;
    let hb = |avail: bool| json!({"state": "idle", "available": avail, "budget_left": 5, "free_mem_bytes": 1, "base_speed": 1.0, "current_speed": 1.0});
    for _ in 0..4 {
        let _: HeartbeatAck = a.post_ok("/api/v1/heartbeat", hb(true)).await;
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let r: Report = s.admin().get_ok("/api/v1/reports?by=owner&since=1d").await;
    let f = r.rows.iter().find(|x| x.key == "alice").expect("row").available_fraction;
    // ~0.75 s available of 86400 s.
    assert!(f > 0.5 / 86400.0 && f < 2.0 / 86400.0, "{f}");
    s.stop().await;
}

both!(bad_requests_get_4xx, bad_requests_on);
async fn bad_requests_on(b: Backend) {
    let Some((_db, s)) = server(b).await else { return };
    let (_, agent) = s.enrol("alice", "desk").await;
    let admin = s.admin();
    let http = reqwest::Client::new();
    let bodies: Vec<(&str, &str, Option<&str>, String)> = vec![
        ("POST", "/api/v1/heartbeat", Some(&agent.secret), "{".into()),
        ("POST", "/api/v1/heartbeat", Some(&agent.secret), "[]".into()),
        ("POST", "/api/v1/heartbeat", Some(&agent.secret), r#"{"state":"x"}"#.into()),
        (
            "POST",
            "/api/v1/heartbeat",
            Some(&agent.secret),
            r#"{"state":"","available":true,"budget_left":1,"free_mem_bytes":1,"base_speed":1,"current_speed":1}"#.into(),
        ),
        (
            "POST",
            "/api/v1/heartbeat",
            Some(&agent.secret),
            r#"{"state":"a","available":true,"budget_left":-1,"free_mem_bytes":1,"base_speed":1,"current_speed":1}"#.into(),
        ),
        (
            "POST",
            "/api/v1/heartbeat",
            Some(&agent.secret),
            r#"{"state":"a","available":true,"budget_left":1,"free_mem_bytes":1,"base_speed":1e400,"current_speed":1}"#.into(),
        ),
        ("POST", "/api/v1/heartbeat", Some("Bearer"), "{}".into()),
        ("POST", "/api/v1/heartbeat", None, "{}".into()),
        ("POST", "/api/v1/enrol", None, r#"{"token":"lull_join_00","owner":"a","machine":"m"}"#.into()),
        ("POST", "/api/v1/enrol", None, r#"{"token":"x","owner":"","machine":"m"}"#.into()),
        ("POST", "/api/v1/enrol", None, "{\"token\":\"x\",\"owner\":\"a\\u0000b\",\"machine\":\"m\"}".into()),
        ("POST", "/api/v1/jobs", Some(&s.admin), r#"{"command":""}"#.into()),
        ("POST", "/api/v1/jobs", Some(&s.admin), "{\"command\":\"a\\u0000\"}".into()),
        ("POST", "/api/v1/jobs", Some(&s.admin), r#"{"command":"a","machines":0}"#.into()),
        ("POST", "/api/v1/jobs", Some(&s.admin), r#"{"command":"a","machines":99999999999}"#.into()),
        ("POST", "/api/v1/jobs", Some(&s.admin), r#"{"command":"a","mem_bytes":18446744073709551615}"#.into()),
        ("POST", "/api/v1/jobs", Some(&s.admin), r#"{"command":"a","max_retries":1000}"#.into()),
        ("POST", "/api/v1/jobs", Some(&s.admin), r#"{"command":"a","surprise":1}"#.into()),
        ("POST", "/api/v1/jobs", Some(&agent.secret), r#"{"command":"a"}"#.into()),
        ("GET", "/api/v1/jobs/abc", Some(&s.admin), String::new()),
        ("GET", "/api/v1/jobs/99999999999999999999999", Some(&s.admin), String::new()),
        ("GET", "/api/v1/jobs/-1", Some(&s.admin), String::new()),
        ("GET", "/api/v1/jobs?limit=-5", Some(&s.admin), String::new()),
        ("GET", "/api/v1/jobs?nope=1", Some(&s.admin), String::new()),
        ("POST", "/api/v1/jobs/1/cancel", Some(&s.admin), String::new()),
        ("POST", "/api/v1/lease", Some(&agent.secret), r#"{"free_mem_bytes":1,"wait_ms":999999}"#.into()),
        ("POST", "/api/v1/lease", Some(&s.admin), r#"{"free_mem_bytes":1}"#.into()),
        ("POST", "/api/v1/tasks/1/0/complete", Some(&agent.secret), r#"{"lease":1,"exit_code":0,"user_cpu_s":-1,"sys_cpu_s":0}"#.into()),
        ("POST", "/api/v1/tasks/1/0/complete", Some(&agent.secret), r#"{"lease":1,"exit_code":0,"user_cpu_s":1,"sys_cpu_s":0}"#.into()),
        ("POST", "/api/v1/tasks/x/y/progress", Some(&agent.secret), r#"{"lease":1}"#.into()),
        ("POST", "/api/v1/tasks/1/0/fail", Some(&agent.secret), r#"{"lease":1}"#.into()),
        ("PUT", "/api/v1/tasks/1/0/checkpoint", Some(&agent.secret), "abc".into()),
        ("GET", "/api/v1/tasks/1/0/gang", Some(&agent.secret), String::new()),
        ("POST", "/api/v1/tasks/1/0/migrate", Some(&agent.secret), r#"{"lease":1}"#.into()),
        (
            "POST",
            "/api/v1/tasks/1/0/migrate",
            Some(&agent.secret),
            r#"{"lease":1,"owner_utilization":1.5,"owner_busy_for_s":1,"migration_cost_s":1,"cpu_s":1}"#.into(),
        ),
        (
            "POST",
            "/api/v1/tasks/1/0/migrate",
            Some(&s.admin),
            r#"{"lease":1,"owner_utilization":0.5,"owner_busy_for_s":1,"migration_cost_s":1,"cpu_s":1}"#.into(),
        ),
        ("POST", "/api/v1/records", Some(&agent.secret), r#"{"records":[]}"#.into()),
        ("POST", "/api/v1/records", Some(&agent.secret), r#"{"records":[{"seq":0,"kind":"donation","payload":{}}]}"#.into()),
        (
            "POST",
            "/api/v1/records",
            Some(&agent.secret),
            r#"{"records":[{"seq":1,"kind":"donation","payload":{"day":"2026-13-40","cpu_us":1,"wall_ms":1}}]}"#.into(),
        ),
        (
            "POST",
            "/api/v1/records",
            Some(&agent.secret),
            r#"{"records":[{"seq":1,"kind":"donation","payload":{"day":"2026-01-01","cpu_us":-5,"wall_ms":1}}]}"#.into(),
        ),
        ("POST", "/api/v1/records", Some(&s.admin), r#"{"records":[{"seq":1,"kind":"x","payload":{}}]}"#.into()),
        ("GET", "/api/v1/reports?by=planet", Some(&s.admin), String::new()),
        ("GET", "/api/v1/reports?since=forever", Some(&s.admin), String::new()),
        ("GET", "/api/v1/reports?since=99999999999999d", Some(&s.admin), String::new()),
        ("GET", "/api/v1/reports?format=xml", Some(&s.admin), String::new()),
        ("GET", "/api/v1/agents", Some(&agent.secret), String::new()),
        ("DELETE", "/api/v1/jobs", Some(&s.admin), String::new()),
        ("GET", "/nope", None, String::new()),
        ("POST", "/api/v1/keys", Some(&s.admin), r#"{"role":"root"}"#.into()),
        ("POST", "/api/v1/keys", Some(&s.admin), r#"{"role":"owner"}"#.into()),
        ("POST", "/api/v1/join-tokens", Some(&s.admin), r#"{"uses":0}"#.into()),
        ("POST", "/api/v1/join-tokens", Some(&s.admin), r#"{"ttl_s":4294967295}"#.into()),
    ];
    for (method, path, secret, body) in &bodies {
        let mut r = http.request(method.parse().unwrap(), format!("{}{}", s.base, path)).body(body.clone());
        if !body.is_empty() {
            r = r.header("content-type", "application/json");
        }
        if let Some(sec) = secret {
            r = if *sec == "Bearer" { r.header("authorization", "Bearer") } else { r.bearer_auth(sec) };
        }
        let st = r.send().await.unwrap().status().as_u16();
        assert!((400..500).contains(&st), "{method} {path} {}: got {st}", &body[..body.len().min(80)]);
    }
    // Oversized bodies: 413 from the declared length, without reading them whole.
    for (path, declared) in [("/api/v1/records", 3usize << 20), ("/api/v1/heartbeat", 2 << 20), ("/api/v1/tasks/1/0/checkpoint", 65 << 20)]
    {
        let st = raw_status(&s.base, path, &agent.secret, declared).await;
        assert_eq!(st, 413, "{path}");
    }
    // Missing content type.
    let st = agent
        .http
        .post(format!("{}/api/v1/heartbeat", s.base))
        .bearer_auth(&agent.secret)
        .body("{}")
        .send()
        .await
        .unwrap()
        .status()
        .as_u16();
    assert_eq!(st, 415);
    // Still serving, and nothing 5xx in the metrics.
    assert_eq!(s.client("").get_text("/healthz").await, (200, "ok".to_string()));
    let (_, m) = admin.get_text("/metrics").await;
    assert!(!m.lines().any(|l| l.starts_with("lull_http_requests_total") && l.contains("status=\"5")), "{m}");
    s.stop().await;
}

/// Sends a request declaring a `declared`-byte body but sending only 64 KiB of it, and
/// returns the status the server answers with.
async fn raw_status(base: &str, path: &str, secret: &str, declared: usize) -> u16 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let addr = base.trim_start_matches("http://");
    let mut c = tokio::net::TcpStream::connect(addr).await.unwrap();
    let method = if path.ends_with("checkpoint") { "PUT" } else { "POST" };
    let head = format!(
        "{method} {path} HTTP/1.1\r\nhost: {addr}\r\nauthorization: Bearer {secret}\r\ncontent-type: application/json\r\ncontent-length: {declared}\r\n\r\n"
    );
    c.write_all(head.as_bytes()).await.unwrap();
    let _ = c.write_all(&vec![b' '; 64 << 10]).await;
    let mut buf = vec![0u8; 4096];
    let n = tokio::time::timeout(Duration::from_secs(10), c.read(&mut buf)).await.expect("an answer before the body ends").unwrap();
    let line = String::from_utf8_lossy(&buf[..n]);
    line.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or_else(|| panic!("no status in {line:?}"))
}

both!(openapi_and_metrics_are_served, openapi_and_metrics_on);
async fn openapi_and_metrics_on(b: Backend) {
    let Some((_db, s)) = server(b).await else { return };
    let anon = s.client("");
    let doc: serde_json::Value = anon.get_ok("/api/openapi.json").await;
    assert!(doc["openapi"].as_str().unwrap().starts_with("3."));
    for p in
        ["/api/v1/heartbeat", "/api/v1/lease", "/api/v1/records", "/api/v1/reports", "/api/v1/pool", "/api/v1/tasks/{job}/{rank}/complete"]
    {
        assert!(doc["paths"].get(p).is_some(), "{p} documented");
    }
    assert!(doc["components"]["securitySchemes"]["bearer"].is_object());
    let (_, a) = s.enrol("alice", "desk").await;
    let _: HeartbeatAck = a
        .post_ok(
            "/api/v1/heartbeat",
            json!({"state": "idle", "available": false, "budget_left": 5, "free_mem_bytes": 1, "base_speed": 1.0, "current_speed": 1.0}),
        )
        .await;
    let (st, m) = anon.get_text("/metrics").await;
    assert_eq!(st, 200);
    assert!(m.contains("lull_heartbeats_total 1"), "{m}");
    assert!(m.contains("lull_http_requests_total{route=\"/api/v1/heartbeat\",status=\"200\"} 1"), "{m}");
    assert!(m.contains("lull_http_request_duration_seconds_count"));
    let (st, page) = anon.get_text("/").await;
    assert_eq!(st, 200);
    assert!(page.contains("dashboard"));
    s.stop().await;
}

both!(heartbeat_flush_writes_many_agents, heartbeat_flush_on);
async fn heartbeat_flush_on(b: Backend) {
    let Some((_db, s)) = server(b).await else { return };
    // More agents than one flush statement holds (500), each with its own heartbeat.
    let mut agents = vec![];
    let t: JoinToken = s.admin().post_ok("/api/v1/join-tokens", json!({"uses": 1200})).await;
    for i in 0..1200 {
        let req =
            EnrolRequest { token: t.token.clone(), owner: format!("o{}", i % 7), machine: format!("m{i}"), replace: false, cpus: Some(2) };
        let e = coordinator::identity::enrol(&s.db, &req, coordinator::identity::Caller { principal: None, addr: "test" }).await.unwrap();
        agents.push((e.agent_id.clone(), s.client(&e.secret)));
    }
    for round in 0..2 {
        for (i, (_, c)) in agents.iter().enumerate() {
            let hb = json!({"state": "idle", "available": true, "budget_left": (i % 6) as u32, "free_mem_bytes": i as u64 * 1000 + round,
                "base_speed": i as f64, "current_speed": i as f64 * 0.5});
            let _: HeartbeatAck = c.post_ok("/api/v1/heartbeat", hb).await;
        }
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let rows: Vec<(String, i64, f64)> =
        sqlx::query_as("SELECT id, free_mem_bytes, base_speed FROM agents").fetch_all(&s.db.pool).await.unwrap();
    let want: std::collections::HashMap<String, usize> = agents.iter().enumerate().map(|(i, (id, _))| (id.clone(), i)).collect();
    assert_eq!(rows.len(), 1200);
    for (id, mem, speed) in rows {
        let i = want[&id];
        assert_eq!((mem, speed), (i as i64 * 1000 + 1, i as f64), "agent {i} has its own last heartbeat");
    }
    let avail: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM availability").fetch_one(&s.db.pool).await.unwrap();
    assert!(avail > 0 && avail <= 1200);
    s.stop().await;
}

both!(a_gang_restarts_together_and_fails_together, gang_restart_on);
async fn gang_restart_on(b: Backend) {
    let Some((_db, s)) = server(b).await else { return };
    let admin = s.admin();
    let (_, a) = s.enrol("alice", "a").await;
    let (_, b2) = s.enrol("bob", "b").await;
    let g: Job = admin.post_ok("/api/v1/jobs", json!({"command": "mpi", "machines": 2, "max_retries": 1})).await;
    // Both machines ask at once: the scheduler places the two ranks together.
    let pair = || async { tokio::join!(a.lease(0, 5000), b2.lease(0, 5000)) };
    let (la, lb) = pair().await;
    let (la, lb) = (la.unwrap(), lb.unwrap());
    assert_eq!(la.rank + lb.rank, 1, "one rank each");
    let task = |l: &Lease, what: &str| format!("/api/v1/tasks/{}/{}/{what}", g.id, l.rank);
    // The owner of machine a comes back: a's rank is evicted, and b's goes back with it.
    let t: Task = a.post_ok(&task(&la, "evicted"), json!({"lease": la.lease})).await;
    assert_eq!(t.state, "queued");
    let (st, _) = b2.post(&task(&lb, "progress"), json!({"lease": lb.lease})).await;
    assert_eq!(st, 409, "the peer's lease was revoked: the gang restarts together");
    let job: Job = admin.get_ok(&format!("/api/v1/jobs/{}", g.id)).await;
    assert!(job.tasks.iter().all(|t| t.state == "queued" && t.retries_used == 0 && t.attempts == 1), "{job:?}");
    // Both ranks leased again; now a's rank fails: one retry left, the gang restarts.
    let (la, lb) = pair().await;
    let (la, lb) = (la.unwrap(), lb.unwrap());
    let t: Task = a.post_ok(&task(&la, "fail"), json!({"lease": la.lease})).await;
    assert_eq!((t.state.as_str(), t.retries_used), ("queued", 1), "one retry left");
    assert_eq!(b2.post(&task(&lb, "progress"), json!({"lease": lb.lease})).await.0, 409, "restarted together");
    let (la, lb) = pair().await;
    let (la, lb) = (la.unwrap(), lb.unwrap());
    // Whichever machine holds the rank that already failed once fails it for good.
    let failed_once = job_rank_attempts(&admin, g.id).await;
    let (fl, fc, sl, sc) = if failed_once[la.rank as usize] == 1 { (&la, &a, &lb, &b2) } else { (&lb, &b2, &la, &a) };
    let t: Task = fc.post_ok(&task(fl, "fail"), json!({"lease": fl.lease})).await;
    assert_eq!(t.state, "lost");
    let p: ProgressAck = sc.post_ok(&task(sl, "progress"), json!({"lease": sl.lease})).await;
    assert!(p.cancel, "the surviving rank is told to stop");
    let job: Job = admin.get_ok(&format!("/api/v1/jobs/{}", g.id)).await;
    assert_eq!(job.state, "lost");
    s.stop().await;
}

/// Two machines lease a 2-rank gang together and both see it whole (it has started).
async fn started_gang(admin: &Client, a: &Client, b: &Client, extra: Value) -> (Job, Lease, Lease) {
    let mut body = json!({"command": "mpi", "machines": 2, "checkpointable": true});
    body.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    let g: Job = admin.post_ok("/api/v1/jobs", body).await;
    let (la, lb) = tokio::join!(a.lease(0, 5000), b.lease(0, 5000));
    let (la, lb) = (la.unwrap(), lb.unwrap());
    assert_eq!(la.rank + lb.rank, 1, "one rank each");
    for (c, l) in [(a, &la), (b, &lb)] {
        let gang: Gang = c.get_ok(&format!("/api/v1/tasks/{}/{}/gang", g.id, l.rank)).await;
        assert!(gang.ready);
        let p: ProgressAck = c.post_ok(&format!("/api/v1/tasks/{}/{}/progress", g.id, l.rank), json!({"lease": l.lease})).await;
        assert!(!p.halt, "a whole gang is not halted");
    }
    (g, la, lb)
}

/// Machines a, b and c enrolled; a 2-rank gang started on a and b, then a's owner came
/// back: a's rank is queued again (one eviction) and b's member is told to halt. Returns
/// the job, both first leases, and b's and c's clients.
async fn halted_gang(s: &Server) -> (Job, Lease, Lease, Client, Client) {
    let admin = s.admin();
    let (_, a) = s.enrol("alice", "a").await;
    let (_, b2) = s.enrol("bob", "b").await;
    let (_, c) = s.enrol("carol", "c").await;
    let (g, la, lb) = started_gang(&admin, &a, &b2, json!({})).await;
    let task = |rank: u32, what: &str| format!("/api/v1/tasks/{}/{rank}/{what}", g.id);
    let t: Task = a.post_ok(&task(la.rank, "evicted"), json!({"lease": la.lease})).await;
    assert_eq!((t.state.as_str(), t.evictions), ("queued", 1));
    let p: ProgressAck = b2.post_ok(&task(lb.rank, "progress"), json!({"lease": lb.lease})).await;
    assert!(p.halt && !p.cancel, "the remaining member is halted, not re-queued");
    (g, la, lb, b2, c)
}

both!(a_started_gang_halts_until_its_lost_rank_is_replaced, gang_halt_on);
/// Once a gang has started, losing one member (its owner came back) re-queues only that
/// rank: the other keeps its lease and is told to halt; a third machine asking for work
/// gets the lost rank alone (the scheduler places only the replacement), the halt ends
/// when it takes the lease, and the job completes with both ranks.
async fn gang_halt_on(b: Backend) {
    let Some((_db, s)) = server(b).await else { return };
    let admin = s.admin();
    let (g, la, lb, b2, c) = halted_gang(&s).await;
    let task = |rank: u32, what: &str| format!("/api/v1/tasks/{}/{rank}/{what}", g.id);
    let job: Job = admin.get_ok(&format!("/api/v1/jobs/{}", g.id)).await;
    assert_eq!(job.state, "running");
    assert_eq!(job.tasks[lb.rank as usize].state, "leased");
    let gang: Gang = b2.get_ok(&task(lb.rank, "gang")).await;
    assert!(!gang.ready);
    let halted: Option<i64> =
        sqlx::query_scalar("SELECT halted_ms FROM jobs WHERE id = $1").bind(g.id).fetch_one(&s.db.pool).await.unwrap();
    assert!(halted.is_some());
    // The third machine gets the lost rank, and only it.
    let lc = c.lease(0, 5000).await.expect("the replacement is placed");
    assert_eq!((lc.job_id, lc.rank, lc.machines), (g.id, la.rank, 2));
    let p: ProgressAck = b2.post_ok(&task(lb.rank, "progress"), json!({"lease": lb.lease})).await;
    assert!(!p.halt, "the lost rank's lease was taken: the gang is whole again");
    let gang: Gang = c.get_ok(&task(lc.rank, "gang")).await;
    assert!(gang.ready);
    // The halt is cleared (the sweeper or the gang answer), so it never times out.
    let cleared = async {
        loop {
            let h: Option<i64> =
                sqlx::query_scalar("SELECT halted_ms FROM jobs WHERE id = $1").bind(g.id).fetch_one(&s.db.pool).await.unwrap();
            if h.is_none() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(5), cleared).await.expect("halt cleared");
    assert_eq!(b2.complete(&lb, 1.0, 0.0).await.0, 200);
    assert_eq!(c.complete(&lc, 1.0, 0.0).await.0, 200);
    let job: Job = admin.get_ok(&format!("/api/v1/jobs/{}", g.id)).await;
    assert_eq!(job.state, "completed");
    assert_eq!(job.tasks[la.rank as usize].evictions, 1);
    // The placement record is the gang's first placement, not the replacement's.
    assert_eq!(job.placement.as_ref().map(|p| p.agents.len()), Some(2));
    // A lost lease (expiry) after the start halts too; before the start it re-queues the
    // gang (the existing test `a_gang_restarts_together_and_fails_together`).
    s.stop().await;
}

both!(a_gang_halted_under_one_leader_gets_its_replacement_from_the_next, gang_halt_rebuild_on);
/// The leader that saw the loss stops (a restart, or another replica taking over): the
/// next one rebuilds its scheduler from the database with the gang still halted, and
/// places the lost rank on the next free machine at once — not after the halt's timeout
/// (here a minute) re-queues the whole gang.
async fn gang_halt_rebuild_on(b: Backend) {
    let mut config = test_config();
    config.gang_halt_timeout = Duration::from_secs(60);
    let Some((db, s)) = server_with(b, config.clone()).await else { return };
    let (g, la, lb, b2, c) = halted_gang(&s).await;
    let task = |rank: u32, what: &str| format!("/api/v1/tasks/{}/{rank}/{what}", g.id);
    s.stop().await;
    // The next leader, on the same database.
    let s = Server::start(&db.url, config).await;
    let rebase = |cl: &Client| Client { base: s.base.clone(), ..cl.clone() };
    let (b2, c) = (rebase(&b2), rebase(&c));
    let p: ProgressAck = b2.post_ok(&task(lb.rank, "progress"), json!({"lease": lb.lease})).await;
    assert!(p.halt, "still halted under the new leader");
    let started = std::time::Instant::now();
    let lc = c.lease(0, 5000).await.expect("the new leader places the lost rank");
    assert_eq!((lc.job_id, lc.rank), (g.id, la.rank), "the replacement, alone");
    assert!(started.elapsed() < Duration::from_secs(5), "placed at once, not after the halt timeout: {:?}", started.elapsed());
    let p: ProgressAck = b2.post_ok(&task(lb.rank, "progress"), json!({"lease": lb.lease})).await;
    assert!(!p.halt, "whole again");
    assert_eq!(b2.complete(&lb, 1.0, 0.0).await.0, 200);
    assert_eq!(c.complete(&lc, 1.0, 0.0).await.0, 200);
    let job: Job = s.admin().get_ok(&format!("/api/v1/jobs/{}", g.id)).await;
    assert_eq!(job.state, "completed");
    assert!(job.tasks.iter().all(|t| t.retries_used == 0), "{job:?}");
    s.stop().await;
}

both!(a_halted_gang_not_replaced_in_time_is_requeued_whole, gang_halt_timeout_on);
async fn gang_halt_timeout_on(b: Backend) {
    let mut c = test_config();
    c.gang_halt_timeout = Duration::from_millis(800);
    let Some((_db, s)) = server_with(b, c).await else { return };
    let admin = s.admin();
    let (_, a) = s.enrol("alice", "a").await;
    let (_, b2) = s.enrol("bob", "b").await;
    let (g, la, lb) = started_gang(&admin, &a, &b2, json!({})).await;
    let task = |rank: u32, what: &str| format!("/api/v1/tasks/{}/{rank}/{what}", g.id);
    let _: Task = a.post_ok(&task(la.rank, "evicted"), json!({"lease": la.lease})).await;
    let p: ProgressAck = b2.post_ok(&task(lb.rank, "progress"), json!({"lease": lb.lease})).await;
    assert!(p.halt);
    // Nobody replaces it: after the timeout the whole gang is queued again, as before.
    let requeued = async {
        loop {
            if b2.post(&task(lb.rank, "progress"), json!({"lease": lb.lease})).await.0 == 409 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(10), requeued).await.expect("re-queued whole after the timeout");
    let job: Job = admin.get_ok(&format!("/api/v1/jobs/{}", g.id)).await;
    assert_eq!(job.state, "queued");
    assert!(job.tasks.iter().all(|t| t.state == "queued"), "{job:?}");
    assert_eq!(job.tasks[lb.rank as usize].retries_used, 0, "the halted rank used no retry");
    // Both machines ask again: the gang starts again, whole.
    let (la, lb) = tokio::join!(a.lease(0, 5000), b2.lease(0, 5000));
    assert_eq!(la.unwrap().rank + lb.unwrap().rank, 1);
    s.stop().await;
}

both!(a_lingering_task_migrates_when_a_free_machine_finishes_it_sooner, migrate_on);
/// `POST …/migrate`: malformed → 4xx naming the field; only the holder; no free machine
/// or not sooner → stay; a free machine where it finishes sooner → the task is given back
/// (no eviction counted) with its checkpoint, and leased to that machine.
async fn migrate_on(b: Backend) {
    let Some((_db, s)) = server(b).await else { return };
    let admin = s.admin();
    let (_, a) = s.enrol("alice", "a").await;
    let (_, c) = s.enrol("carol", "c").await;
    let j: Job = admin.post_ok("/api/v1/jobs", json!({"command": "sim", "checkpointable": true, "estimate_s": 1000.0})).await;
    let l = a.lease(0, 5000).await.unwrap();
    backdate_leases(&s.db, 60_000).await; // the 100 CPU-s asked below: a minute's run on 4 CPUs
    let path = format!("/api/v1/tasks/{}/0/migrate", j.id);
    let ask = |lease: i64, h: f64, busy: f64| json!({"lease": lease, "owner_utilization": h, "owner_busy_for_s": busy, "migration_cost_s": 5.0, "cpu_s": 100.0});
    // Malformed.
    let (st, body) =
        a.post(&path, json!({"lease": l.lease, "owner_utilization": 1.5, "owner_busy_for_s": 1, "migration_cost_s": 1, "cpu_s": 1})).await;
    assert_eq!(st, 400);
    assert!(body.to_string().contains("owner_utilization must be a number from 0 to 1"), "{body}");
    let (st, _) =
        a.post(&path, json!({"lease": l.lease, "owner_utilization": 0.5, "owner_busy_for_s": -1, "migration_cost_s": 1, "cpu_s": 1})).await;
    assert_eq!(st, 400);
    let (st, _) = a.post(&path, json!({"lease": l.lease})).await;
    assert!((400..500).contains(&st), "{st}");
    assert_eq!(c.post(&path, ask(l.lease, 0.9, 300.0)).await.0, 404, "only the holder asks");
    assert_eq!(a.post(&path, ask(l.lease + 1, 0.9, 300.0)).await.0, 409, "an old lease");
    assert_eq!(admin.post(&path, ask(l.lease, 0.9, 300.0)).await.0, 403);
    // No other machine has said it is available: stay.
    let m: MigrateAnswer = a.post_ok(&path, ask(l.lease, 0.9, 300.0)).await;
    assert!(!m.migrate);
    assert_eq!(m.reason, "stay: no other machine can take it now");
    // c is idle and available.
    let hb = json!({"state": "recruitable", "available": true, "budget_left": 3, "free_mem_bytes": 1u64 << 30, "base_speed": 1.0, "current_speed": 1.0});
    let _: HeartbeatAck = c.post_ok("/api/v1/heartbeat", hb).await;
    // A light, short return: lingering is sooner (1-s episode at 90 %, then full speed).
    let m: MigrateAnswer = a.post_ok(&path, ask(l.lease, 0.1, 1.0)).await;
    assert!(!m.migrate, "{m:?}");
    assert!(m.reason.starts_with("stay: predicted to finish in"), "{}", m.reason);
    assert!(m.stay_s.unwrap() < m.move_s.unwrap());
    // The checkpoint the guest wrote last, uploaded before asking.
    assert_eq!(a.put_bytes(&format!("/api/v1/tasks/{}/0/checkpoint?lease={}", j.id, l.lease), b"step 40".to_vec()).await, 204);
    // A heavy return that has lasted 5 min: 900 s left, 1170 s here, 905 s on c.
    let m: MigrateAnswer = a.post_ok(&path, ask(l.lease, 0.9, 300.0)).await;
    assert!(m.migrate, "{m:?}");
    assert!(m.reason.starts_with("migrate: "), "{}", m.reason);
    assert!((m.stay_s.unwrap() - 1170.0).abs() < 1e-6 && (m.move_s.unwrap() - 905.0).abs() < 1e-6, "{m:?}");
    assert_eq!(a.post(&format!("/api/v1/tasks/{}/0/progress", j.id), json!({"lease": l.lease})).await.0, 409, "given back");
    assert_eq!(a.post(&path, ask(l.lease, 0.9, 300.0)).await.0, 404, "no longer the holder");
    let job: Job = admin.get_ok(&format!("/api/v1/jobs/{}", j.id)).await;
    assert_eq!((job.tasks[0].state.as_str(), job.tasks[0].evictions, job.tasks[0].retries_used), ("queued", 0, 0));
    // c takes it, with the checkpoint.
    let lc = c.lease(0, 5000).await.expect("placed again");
    assert_eq!(lc.job_id, j.id);
    let r = c.http.get(format!("{}/api/v1/tasks/{}/0/checkpoint", s.base, j.id)).bearer_auth(&c.secret).send().await.unwrap();
    assert_eq!(r.bytes().await.unwrap().to_vec(), b"step 40".to_vec());
    let doc: Value = s.client("").get_ok("/api/openapi.json").await;
    assert!(doc["paths"]["/api/v1/tasks/{job}/{rank}/migrate"]["post"].is_object(), "the route is in the OpenAPI document");
    assert!(doc["components"]["schemas"]["MigrateRequest"].is_object() && doc["components"]["schemas"]["MigrateAnswer"].is_object());
    assert!(doc["components"]["schemas"]["ProgressAck"]["properties"]["halt"].is_object());
    s.stop().await;
}

/// Each rank's retries used so far, by rank.
async fn job_rank_attempts(admin: &Client, id: i64) -> Vec<u32> {
    let job: Job = admin.get_ok(&format!("/api/v1/jobs/{id}")).await;
    job.tasks.iter().map(|t| t.retries_used).collect()
}

both!(pool_summary_and_limits_for_the_dashboard, pool_summary_on);
/// The dashboard's pool overview counts machines by reported state (silent ones offline,
/// never heard from as never_seen) and jobs by state, each limited to what the caller may
/// see; the daily interruption limit heartbeats carry reaches `/agents` and the report's
/// `interruption_limit` on a day without any interruption; and `/` serves a page.
async fn pool_summary_on(b: Backend) {
    let mut c = test_config();
    c.heartbeat_interval = Duration::from_secs(1);
    let Some((_db, s)) = server_with(b, c).await else { return };
    let admin = s.admin();
    let hb = |state: &str, limit: Option<u32>| {
        let mut v = json!({"state": state, "available": state == "idle", "budget_left": 3, "free_mem_bytes": 1, "base_speed": 1.0,
            "current_speed": 1.0});
        if let Some(l) = limit {
            v["interruption_limit"] = json!(l);
        }
        v
    };
    let (a_id, a) = s.enrol("alice", "desk").await;
    let (_, a2) = s.enrol("alice", "laptop").await;
    let (_, b1) = s.enrol("bob", "lab").await;
    let (_, _never) = s.enrol("bob", "spare").await;
    let _: HeartbeatAck = a.post_ok("/api/v1/heartbeat", hb("idle", Some(7))).await;
    let _: HeartbeatAck = a2.post_ok("/api/v1/heartbeat", hb("donating", None)).await;
    let _: HeartbeatAck = b1.post_ok("/api/v1/heartbeat", hb("owner_active", Some(2))).await;
    let alice = s.owner("alice").await;
    let bob = s.owner("bob").await;
    for (who, n) in [(&admin, 2), (&alice, 1), (&bob, 1)] {
        for _ in 0..n {
            let _: Job = who.post_ok("/api/v1/jobs", job("/bin/sh")).await;
        }
    }
    let l = a.lease(1 << 30, 0).await.expect("work");
    assert_eq!(a.complete(&l, 1.0, 0.0).await.0, 200);
    let _ = a2.lease(1 << 30, 0).await.expect("work");

    let p: PoolSummary = admin.get_ok("/api/v1/pool").await;
    assert_eq!(p.viewer, Viewer { role: "admin".into(), owner: None });
    assert_eq!(p.machines_total, 4);
    let m = |p: &PoolSummary, k: &str| p.machines.get(k).copied().unwrap_or(0);
    assert_eq!((m(&p, "idle"), m(&p, "donating"), m(&p, "owner_active"), m(&p, "never_seen")), (1, 1, 1, 1), "{:?}", p.machines);
    assert_eq!(p.jobs_total, 4);
    assert_eq!(p.jobs.get("completed"), Some(&1));
    assert_eq!(p.jobs.get("running"), Some(&1));
    assert_eq!(p.jobs.get("queued"), Some(&2));
    assert_eq!(p.jobs.values().sum::<u32>(), p.jobs_total);
    // Owners see their own machines, their own jobs and the jobs that ran on their
    // machines (the admin's two, on desk and laptop).
    let pa: PoolSummary = alice.get_ok("/api/v1/pool").await;
    assert_eq!(pa.viewer, Viewer { role: "owner".into(), owner: Some("alice".into()) });
    assert_eq!((pa.machines_total, m(&pa, "idle"), m(&pa, "donating"), pa.jobs_total), (2, 1, 1, 3));
    let pb: PoolSummary = bob.get_ok("/api/v1/pool").await;
    assert_eq!(pb.jobs_total, 1, "nothing ran on bob's machines: his own job only");
    assert_eq!(a.get("/api/v1/pool").await.0, 403, "agents have no pool view");
    assert_eq!(s.client("").get("/api/v1/pool").await.0, 401);

    // The limit reaches the agent list (live, then from the database after a flush).
    tokio::time::sleep(Duration::from_millis(400)).await;
    let agents: Vec<AgentInfo> = admin.get_ok("/api/v1/agents").await;
    let desk = agents.iter().find(|x| x.id == a_id).unwrap();
    assert_eq!(desk.heartbeat.as_ref().and_then(|h| h.interruption_limit), Some(7));
    let stored: Option<i64> =
        sqlx::query_scalar("SELECT interruption_limit FROM agents WHERE id = $1").bind(&a_id).fetch_one(&s.db.pool).await.unwrap();
    assert_eq!(stored, Some(7));
    // A second heartbeat opens an availability interval; the day's row keeps the limit,
    // so the report shows it although no interruption happened.
    let _: HeartbeatAck = a.post_ok("/api/v1/heartbeat", hb("idle", Some(7))).await;
    let _: HeartbeatAck = b1.post_ok("/api/v1/heartbeat", hb("owner_active", Some(2))).await;
    tokio::time::sleep(Duration::from_millis(400)).await;
    let r: Report = admin.get_ok("/api/v1/reports?by=machine&since=1d").await;
    let row = r.rows.iter().find(|x| x.key == a_id).expect("desk row");
    assert_eq!((row.interruptions, row.interruption_limit), (0, 7), "{row:?}");
    let r: Report = admin.get_ok("/api/v1/reports?by=owner&since=1d").await;
    let limits: Vec<(String, u32)> = r.rows.iter().map(|x| (x.key.clone(), x.interruption_limit)).collect();
    assert_eq!(limits, vec![("alice".to_string(), 7), ("bob".to_string(), 2)], "the laptop sent no limit");

    let (st, page) = s.client("").get_text("/").await;
    assert_eq!(st, 200);
    assert!(page.contains("<title>Lull"), "{page}");
    assert_eq!(s.client("").get("/assets/..%2F..%2FCargo.toml").await.0, 404);
    assert_eq!(s.client("").get("/assets/no-such-file.js").await.0, 404);
    s.stop().await;
}

both!(job_output_is_kept_and_shown_to_its_submitter, job_output_is_kept_and_shown_to_its_submitter_on);
async fn job_output_is_kept_and_shown_to_its_submitter_on(b: Backend) {
    let Some((_db, s)) = server(b).await else { return };
    let alice = s.owner("alice").await;
    let bob = s.owner("bob").await;
    let j: Job = alice.post_ok("/api/v1/jobs", json!({"command": "/bin/sh", "args": ["-c", "echo hello"]})).await;
    let path = format!("/api/v1/jobs/{}/output", j.id);
    let o: JobOutput = alice.get_ok(&path).await;
    assert_eq!((o.state.as_str(), o.tasks.len()), ("queued", 1));
    assert!(o.tasks[0].output.is_none(), "nothing before completion");
    let (_, agent) = s.enrol("carol", "box").await;
    let l = agent.lease(1 << 30, 0).await.expect("work");
    let done = format!("/api/v1/tasks/{}/{}/complete", l.job_id, l.rank);
    let body = |stdout: &str| {
        json!({"lease": l.lease, "exit_code": 0, "user_cpu_s": 0.1, "sys_cpu_s": 0.0,
            "output": {"stdout": stdout, "stderr": "warn\n", "stdout_bytes": 100000, "stderr_bytes": 5}})
    };
    // Over the cap, or with NUL (PostgreSQL text cannot hold it): refused, nothing stored.
    assert_eq!(agent.post(&done, body(&"x".repeat(OUTPUT_TAIL_MAX + 1))).await.0, 400);
    assert_eq!(agent.post(&done, body("a\u{0}b")).await.0, 400);
    let tail = format!("{}hello\n", "é".repeat(100));
    let ack: CompletionAck = agent.post_ok(&done, body(&tail)).await;
    assert!(ack.counted);

    let o: JobOutput = alice.get_ok(&path).await;
    assert_eq!(o.state, "completed");
    let out = o.tasks[0].output.as_ref().expect("output kept");
    assert_eq!((out.stdout.as_str(), out.stderr.as_str(), out.stdout_bytes, out.stderr_bytes), (tail.as_str(), "warn\n", 100_000, 5));
    assert_eq!(o.tasks[0].exit_code, Some(0));
    let all: JobOutput = s.admin().get_ok(&path).await;
    assert_eq!(all.tasks[0].output.as_ref(), Some(out), "admins see every job's output");
    assert_eq!(bob.get(&path).await.0, 404, "another owner's job is not there for bob");
    assert_eq!(agent.get(&path).await.0, 403, "agents read no job output");
    assert_eq!(alice.get("/api/v1/jobs/999999/output").await.0, 404);
    assert_eq!(alice.get("/api/v1/jobs/x/output").await.0, 400);
    assert_eq!(s.client("").get(&path).await.0, 401);
    // An agent that sends no output (older agents) completes as before.
    let j2: Job = alice.post_ok("/api/v1/jobs", json!({"command": "/bin/true"})).await;
    let l2 = agent.lease(1 << 30, 0).await.expect("work");
    assert_eq!(agent.complete(&l2, 0.0, 0.0).await.0, 200);
    let o: JobOutput = alice.get_ok(&format!("/api/v1/jobs/{}/output", j2.id)).await;
    assert_eq!((o.state.as_str(), o.tasks[0].output.is_none()), ("completed", true));
    let doc: serde_json::Value = s.client("").get_ok("/api/openapi.json").await;
    assert!(doc["paths"]["/api/v1/jobs/{id}/output"]["get"].is_object(), "the route is in the OpenAPI document");
    s.stop().await;
}

both!(re_enrolling_replaces_or_refuses_and_admins_remove_machines, re_enrolling_and_removal_on);
async fn re_enrolling_and_removal_on(b: Backend) {
    let Some((_db, s)) = server(b).await else { return };
    let admin = s.admin();
    let anon = s.client("");
    let t: JoinToken = admin.post_ok("/api/v1/join-tokens", json!({"uses": 2})).await;
    let first: Enrolment = anon.post_ok("/api/v1/enrol", json!({"token": t.token, "owner": "alice", "machine": "desk", "cpus": 2})).await;
    // The same owner and machine name again: refused, saying how, and the token's use is not spent.
    let (st, v) = anon.post("/api/v1/enrol", json!({"token": t.token, "owner": "alice", "machine": "desk", "cpus": 2})).await;
    assert_eq!(st, 409, "{v}");
    assert!(v["error"].as_str().unwrap().contains("replace"), "{v}");
    let mine: Vec<AgentInfo> = admin.get_ok("/api/v1/agents").await;
    assert_eq!(mine.len(), 1, "no ghost machine: {mine:?}");
    // Another owner may have a machine of that name.
    let bobs: Enrolment = anon.post_ok("/api/v1/enrol", json!({"token": t.token, "owner": "bob", "machine": "desk", "cpus": 2})).await;
    // Replacing keeps the id and history; the old secret stops working at once.
    let old = s.client(&first.secret);
    let hb = json!({"state": "idle", "available": true, "budget_left": 5, "free_mem_bytes": 1, "base_speed": 1.0, "current_speed": 1.0});
    assert_eq!(old.post("/api/v1/heartbeat", hb.clone()).await.0, 200);
    let rec = json!({"records": [{"seq": 1, "kind": "donation", "payload": {"guest": "g", "day": chrono::Utc::now().date_naive().to_string(), "cpu_us": 2_000_000, "wall_ms": 3000}}]});
    assert_eq!(old.post("/api/v1/records", rec).await.0, 200);
    // A join token alone never takes an enrolled machine over (issue 27): 403, nothing
    // changes, the token is not spent, and the attempt is on the token's record.
    let t2: JoinToken = admin.post_ok("/api/v1/join-tokens", json!({"uses": 1})).await;
    let takeover = json!({"token": t2.token, "owner": "alice", "machine": "desk", "replace": true});
    let (st, v) = anon.post("/api/v1/enrol", takeover.clone()).await;
    assert_eq!((st, v["code"].as_str()), (403, Some("replace_needs_credential")), "{v}");
    assert_eq!(old.post("/api/v1/heartbeat", hb.clone()).await.0, 200, "the real agent keeps working");
    // Nor another machine's credential, nor an owner key.
    let bob_agent = s.client(&bobs.secret);
    assert_eq!(bob_agent.post("/api/v1/enrol", takeover.clone()).await.0, 403);
    assert_eq!(s.owner("alice").await.post("/api/v1/enrol", takeover.clone()).await.0, 403);
    let tokens: Vec<JoinTokenInfo> = admin.get_ok("/api/v1/join-tokens").await;
    let t2_info = tokens.iter().find(|t| t.id == t2.id).unwrap();
    assert_eq!((t2_info.uses_left, t2_info.state.as_str()), (1, "active"), "{t2_info:?}");
    assert_eq!(t2_info.used.len(), 3, "each refused attempt is recorded: {t2_info:?}");
    assert!(t2_info.used.iter().all(|u| u.outcome == "refused: replace_needs_credential" && u.addr == "127.0.0.1"), "{t2_info:?}");
    // The machine itself, with its current credential, may re-enrol (no token needed).
    let again: Enrolment = old.post_ok("/api/v1/enrol", json!({"owner": "alice", "machine": "desk", "replace": true})).await;
    assert_eq!(again.agent_id, first.agent_id, "the machine keeps its id");
    let (st, v) = old.post("/api/v1/heartbeat", hb.clone()).await;
    assert_eq!((st, v["code"].as_str()), (401, Some("credential_replaced")), "the replaced secret is refused, saying why: {v}");
    assert!(v["error"].as_str().unwrap().contains("replaced"), "{v}");
    // An admin key may too (a machine whose credential is lost).
    let by_admin: Enrolment = admin.post_ok("/api/v1/enrol", json!({"owner": "alice", "machine": "desk", "replace": true})).await;
    assert_eq!(by_admin.agent_id, first.agent_id);
    assert_eq!(s.client(&again.secret).post("/api/v1/heartbeat", hb.clone()).await.0, 401);
    let new = s.client(&by_admin.secret);
    assert_eq!(new.post("/api/v1/heartbeat", hb.clone()).await.0, 200);
    let all: Vec<AgentInfo> = admin.get_ok("/api/v1/agents").await;
    assert_eq!(all.len(), 2, "{all:?}");

    // Removal: admins only; the machine's leased task goes back to the queue.
    let j: Job = admin.post_ok("/api/v1/jobs", job("/bin/sh")).await;
    let l = new.lease(1 << 30, 0).await.expect("work");
    assert_eq!(l.job_id, j.id);
    let path = format!("/api/v1/agents/{}", first.agent_id);
    let del = |c: &Client, p: &str| {
        let (c, p) = (c.clone(), p.to_string());
        async move {
            let r = c.http.delete(format!("{}{p}", c.base)).bearer_auth(&c.secret).send().await.unwrap();
            let st = r.status().as_u16();
            (st, r.json::<serde_json::Value>().await.unwrap_or_default())
        }
    };
    let alice = s.owner("alice").await;
    assert_eq!(del(&alice, &path).await.0, 403, "owners cannot remove machines");
    assert_eq!(del(&new, &path).await.0, 403, "agents cannot remove machines");
    let (st, v) = del(&admin, &path).await;
    assert_eq!(st, 200, "{v}");
    let r: MachineRemoved = serde_json::from_value(v).unwrap();
    assert_eq!((r.owner.as_str(), r.machine.as_str(), r.tasks_requeued), ("alice", "desk", 1));
    let j: Job = admin.get_ok(&format!("/api/v1/jobs/{}", j.id)).await;
    assert_eq!((j.state.as_str(), j.tasks[0].state.as_str(), j.tasks[0].retries_used), ("queued", "queued", 0), "{j:?}");
    let (st, v) = new.post("/api/v1/heartbeat", hb.clone()).await;
    assert_eq!((st, v["code"].as_str()), (401, Some("machine_removed")), "a removed machine's secret is refused, saying why: {v}");
    let all: Vec<AgentInfo> = admin.get_ok("/api/v1/agents").await;
    assert_eq!(all.iter().map(|a| a.id.as_str()).collect::<Vec<_>>(), vec![bobs.agent_id.as_str()]);
    assert_eq!(del(&admin, &path).await.0, 404, "removed already");
    assert_eq!(del(&admin, "/api/v1/agents/nosuch").await.0, 404);
    // Its donated time stays in the reports.
    let rep: Report = admin.get_ok("/api/v1/reports?by=owner&since=7d").await;
    assert_eq!(rep.rows.iter().find(|r| r.key == "alice").map(|r| r.cpu_s), Some(2.0), "{rep:?}");
    // The name is free again: a plain enrolment makes a new machine.
    let t3: JoinToken = admin.post_ok("/api/v1/join-tokens", json!({"uses": 1})).await;
    let fresh: Enrolment = anon.post_ok("/api/v1/enrol", json!({"token": t3.token, "owner": "alice", "machine": "desk", "cpus": 2})).await;
    assert_ne!(fresh.agent_id, first.agent_id);
    let doc: serde_json::Value = anon.get_ok("/api/openapi.json").await;
    assert!(doc["paths"]["/api/v1/agents/{id}"]["delete"].is_object(), "the route is in the OpenAPI document");
    s.stop().await;
}

both!(metrics_may_require_a_key, metrics_may_require_a_key_on);
async fn metrics_may_require_a_key_on(b: Backend) {
    let Some((_db, s)) = server_with(b, coordinator::Config { metrics_key: Some("m3tr1cs".into()), ..test_config() }).await else {
        return;
    };
    assert_eq!(s.client("").get_text("/metrics").await.0, 401);
    assert_eq!(s.client("wrong").get_text("/metrics").await.0, 401);
    assert_eq!(s.admin().get_text("/metrics").await.0, 401, "the metrics key is its own");
    let (st, text) = s.client("m3tr1cs").get_text("/metrics").await;
    assert_eq!(st, 200);
    assert!(text.contains("lull_"), "{text}");
    s.stop().await;
}

both!(the_contract_decides_where_a_job_goes, contract_placement_on);
/// Placement follows the owners' contract as the heartbeats report it: of two equally
/// fast machines asking for work at once, the job goes to the one idle for hours rather
/// than minutes (seed 004 Fig. 7); a machine with no interruption left gets nothing, however
/// long it has been idle; and the job shows where it went and why.
async fn contract_placement_on(b: Backend) {
    let Some((_db, s)) = server(b).await else { return };
    let admin = s.admin();
    let hb = |budget: u32, idle_s: u64| {
        json!({"state": "recruitable", "available": true, "budget_left": budget, "free_mem_bytes": 1u64 << 32,
            "base_speed": 1.0, "current_speed": 1.0, "interruption_limit": 5, "idle_for_s": idle_s})
    };
    let (_, minutes) = s.enrol("alice", "idle-minutes").await;
    let (_, hours) = s.enrol("bob", "idle-hours").await;
    let _: HeartbeatAck = minutes.post_ok("/api/v1/heartbeat", hb(3, 300)).await;
    let _: HeartbeatAck = hours.post_ok("/api/v1/heartbeat", hb(3, 4 * 3600)).await;
    // Both ask first; the job arrives while both wait (an event-driven scheduler gives a
    // job to the first free machine, so both must be free when it comes).
    let submit_later = |cmd: &'static str| {
        let admin = s.admin();
        async move {
            tokio::time::sleep(Duration::from_millis(500)).await;
            let j: Job = admin.post_ok("/api/v1/jobs", json!({"command": cmd})).await;
            j
        }
    };
    let (m, h, j) = tokio::join!(minutes.lease(1 << 30, 3000), hours.lease(1 << 30, 3000), submit_later("sim"));
    assert!(m.is_none(), "the machine idle for minutes is passed over");
    assert_eq!(h.expect("the machine idle for hours gets the job").job_id, j.id);
    let placed: Job = admin.get_ok(&format!("/api/v1/jobs/{}", j.id)).await;
    let p = placed.placement.expect("placement recorded");
    assert_eq!((p.machines.clone(), p.algorithm.as_str()), (vec!["idle-hours".to_string()], "backfill"));
    assert!(p.predicted_runtime_s > 0.0 && !p.reason.is_empty(), "{p:?}");

    // No interruption left: nothing, even idle for eight hours beside one idle for minutes.
    let (_, spent) = s.enrol("carol", "no-budget").await;
    let _: HeartbeatAck = spent.post_ok("/api/v1/heartbeat", hb(0, 8 * 3600)).await;
    let (m, z, j2) = tokio::join!(minutes.lease(1 << 30, 3000), spent.lease(1 << 30, 3000), submit_later("sim"));
    assert_eq!(m.expect("the machine with budget gets it").job_id, j2.id);
    assert!(z.is_none(), "a machine with no interruption left gets no work");
    s.stop().await;
}

both!(runtime_history_survives_a_restart, runtime_history_survives_a_restart_on);
/// A program's runtime history is the scheduler's, rebuilt from the database: a job
/// placed after the coordinator restarts is predicted from the runs before it, not from
/// the default.
async fn runtime_history_survives_a_restart_on(b: Backend) {
    let Some((db, s)) = server(b).await else { return };
    let admin = s.admin();
    let (_, a) = s.enrol("alice", "a").await;
    for cpu in [40.0, 60.0] {
        let j: Job = admin.post_ok("/api/v1/jobs", json!({"command": "/opt/bin/render"})).await;
        let l = a.lease(0, 5000).await.expect("leased");
        assert_eq!(l.job_id, j.id);
        backdate_leases(&s.db, 60_000).await; // a minute's run on 4 CPUs
        assert_eq!(a.complete(&l, cpu, 0.0).await.0, 200);
    }
    // The leader records the history when it hears of the end: wait for it.
    let deadline = Instant::now() + Duration::from_secs(10);
    let before = loop {
        let p: serde_json::Value = admin.get_ok("/api/v1/predictions").await;
        let render = p.as_array().and_then(|v| v.iter().find(|x| x["program"] == "render").cloned());
        if let Some(r) = render.filter(|r| r["completed"] == 2) {
            break r;
        }
        assert!(Instant::now() < deadline, "no history recorded: {p}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    s.stop().await;

    let s = Server::start(&db.url, test_config()).await;
    let admin = s.admin();
    let p: serde_json::Value = admin.get_ok("/api/v1/predictions").await;
    let after = p.as_array().and_then(|v| v.iter().find(|x| x["program"] == "render").cloned()).expect("kept");
    assert_eq!(after, before, "the record reads back unchanged");
    let (_, b2) = s.enrol("bob", "b").await;
    let j: Job = admin.post_ok("/api/v1/jobs", json!({"command": "/opt/bin/render"})).await;
    let l = b2.lease(0, 5000).await.expect("leased after the restart");
    assert_eq!(l.job_id, j.id);
    let placed: Job = admin.get_ok(&format!("/api/v1/jobs/{}", j.id)).await;
    let p = placed.placement.expect("placement recorded");
    assert_eq!(p.prediction_source, "history", "{p:?}");
    // 50 s of normtime (the last two runs' mean at speed 1) on a speed-1 machine.
    assert!((p.predicted_runtime_s - 50.0).abs() < 1.0, "{p:?}");
    s.stop().await;
}
