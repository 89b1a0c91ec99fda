//! Jobs that tell the truth (issue 28), on SQLite and PostgreSQL: how a task ended
//! (`completed` only for exit 0; `failed` with the exit code, the signal or why the
//! program never ran; `lost` once its retries are used up; `cancelled` by whom), who may
//! cancel, why a queued job waits (and a job the pool cannot run said at submit), a
//! lease given back before it ran is no eviction, an agent that (re)starts gives its
//! tasks back at once, output shipped with renewals, and an old database migrated in
//! place.

#[macro_use]
mod common;

use common::*;
use coordinator::model::*;
use serde_json::json;
use std::time::Duration;

async fn server(b: Backend) -> Option<(TestDb, Server)> {
    let db = fresh_db(b).await?;
    let s = Server::start(&db.url, test_config()).await;
    Some((db, s))
}

/// Completes `l` with `outcome` (and the shell's exit code for it).
async fn end(c: &Client, l: &Lease, outcome: serde_json::Value, code: i32) -> u16 {
    let body = json!({"lease": l.lease, "exit_code": code, "outcome": outcome, "user_cpu_s": 0.5, "sys_cpu_s": 0.0});
    c.post(&format!("/api/v1/tasks/{}/{}/complete", l.job_id, l.rank), body).await.0
}

async fn get_job(c: &Client, id: i64) -> Job {
    c.get_ok(&format!("/api/v1/jobs/{id}")).await
}

both!(each_way_a_task_ends_is_its_own_state_with_its_reason, outcomes_on);
async fn outcomes_on(b: Backend) {
    let Some((_db, s)) = server(b).await else { return };
    let admin = s.admin();
    let (_, a) = s.enrol("alice", "vm").await;
    let cases = [
        (json!({"kind": "exited", "code": 0}), 0, "completed", Some("0"), None),
        (json!({"kind": "exited", "code": 3}), 3, "failed", Some("3"), Some("exit code 3")),
        (json!({"kind": "signalled", "signal": 9}), 137, "failed", Some("SIGKILL"), Some("killed by SIGKILL")),
        (json!({"kind": "program_not_found", "program": "nosuch"}), 127, "failed", None, Some("program not found: nosuch")),
        (json!({"kind": "file_size_limit"}), 153, "failed", Some("SIGXFSZ"), Some("file size limit reached (SIGXFSZ)")),
        (json!({"kind": "sandbox_refused", "error": "no account"}), 126, "failed", None, Some("sandbox refused the guest: no account")),
        (json!({"kind": "stopped", "error": "disk limit"}), 126, "failed", None, Some("stopped by its agent: disk limit")),
    ];
    for (outcome, code, state, exit, reason) in cases {
        let j: Job = admin.post_ok("/api/v1/jobs", job("/bin/sh")).await;
        let l = a.lease(1 << 30, 2000).await.expect("work");
        assert_eq!(end(&a, &l, outcome.clone(), code).await, 200);
        let j = get_job(&admin, j.id).await;
        assert_eq!((j.state.as_str(), j.exit.as_deref(), j.reason.as_deref()), (state, exit, reason), "{outcome}: {j:?}");
        assert_eq!((j.tasks[0].state.as_str(), j.tasks[0].machine.as_deref()), (state, Some("vm")), "{j:?}");
        // A retry of the same completion is not counted again.
        let (st, v) = a
            .post(
                &format!("/api/v1/tasks/{}/0/complete", l.job_id),
                json!({"lease": l.lease, "exit_code": code, "outcome": outcome, "user_cpu_s": 0.5, "sys_cpu_s": 0.0}),
            )
            .await;
        assert_eq!((st, v["counted"].as_bool()), (200, Some(false)));
    }
    // An older agent's bare -1 (a guest that never started) is a failure too.
    let j: Job = admin.post_ok("/api/v1/jobs", job("/bin/sh")).await;
    let l = a.lease(1 << 30, 2000).await.expect("work");
    let body = json!({"lease": l.lease, "exit_code": -1, "user_cpu_s": 0.0, "sys_cpu_s": 0.0});
    assert_eq!(a.post(&format!("/api/v1/tasks/{}/0/complete", j.id), body).await.0, 200);
    let j = get_job(&admin, j.id).await;
    assert_eq!((j.state.as_str(), j.exit.as_deref()), ("failed", None), "{j:?}");
    assert!(j.reason.unwrap().starts_with("guest could not be started: its agent sent no reason"));
    // The filter finds them; the report counts only the success as a completed job.
    let failed: Vec<Job> = admin.get_ok("/api/v1/jobs?state=failed").await;
    assert_eq!(failed.len(), 7);
    let r: Report = admin.get_ok("/api/v1/reports?by=machine&since=1d").await;
    assert_eq!(r.rows.iter().map(|r| r.jobs_completed).sum::<u32>(), 1);
    // A malformed outcome is refused whole.
    let j: Job = admin.post_ok("/api/v1/jobs", job("/bin/sh")).await;
    let l = a.lease(1 << 30, 2000).await.expect("work");
    assert_eq!(end(&a, &l, json!({"kind": "vanished"}), 1).await, 422);
    let long = "x".repeat(5000);
    assert_eq!(end(&a, &l, json!({"kind": "start_failed", "error": long}), 126).await, 400);
    assert_eq!(get_job(&admin, j.id).await.state, "running");
    s.stop().await;
}

both!(a_job_is_read_as_of_one_moment, one_moment_on);
/// A job's row, tasks and placement are read in a snapshot: while jobs are placed and
/// completed one after another, no reading (one job, or the list) shows a job `queued`
/// beside a task already on a machine, `running` with no task out, or ended with a task
/// still out. The CI run of `2c0972c` read `queued` beside `box2` in `lull jobs`' view
/// (tests/tests/job_truth.rs), when a placement committed between the job's row and its
/// tasks.
async fn one_moment_on(b: Backend) {
    use coordinator::auth::Principal;
    use coordinator::store::job_view::{get_job, list_jobs};
    use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
    use std::sync::Arc;
    let Some((_db, s)) = server(b).await else { return };
    let admin = s.admin();
    let (_, a) = s.enrol("alice", "vm").await;
    let latest = Arc::new(AtomicI64::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let torn = |j: &Job| -> Option<String> {
        let out = |t: &Task| t.machine.is_some() && matches!(t.state.as_str(), "leased" | "running");
        let ok = match j.state.as_str() {
            "queued" => j.tasks.iter().all(|t| t.state == "queued" && t.machine.is_none()),
            "running" => j.tasks.iter().any(out),
            _ => !j.tasks.iter().any(out),
        };
        (!ok).then(|| format!("{} {:?}", j.state, j.tasks.iter().map(|t| (&t.state, &t.machine)).collect::<Vec<_>>()))
    };
    let reader = {
        let (db, latest, done) = (s.db.clone(), latest.clone(), done.clone());
        tokio::spawn(async move {
            let (mut reads, mut seen, mut torn_views) = (0u32, std::collections::BTreeSet::new(), Vec::new());
            while !done.load(Ordering::SeqCst) {
                let id = latest.load(Ordering::SeqCst);
                if id == 0 {
                    tokio::task::yield_now().await;
                    continue;
                }
                let mut jobs = vec![get_job(&db, &Principal::Admin, id).await.unwrap()];
                if reads % 8 == 0 {
                    jobs.extend(list_jobs(&db, &Principal::Admin, None, 3).await.unwrap());
                }
                for j in &jobs {
                    seen.insert(j.state.clone());
                    torn_views.extend(torn(j));
                }
                reads += 1;
            }
            (reads, seen, torn_views)
        })
    };
    for _ in 0..300 {
        let j: Job = admin.post_ok("/api/v1/jobs", job("/bin/sh")).await;
        latest.store(j.id, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(2)).await;
        let l = a.lease(1 << 30, 2000).await.expect("work");
        tokio::time::sleep(Duration::from_millis(2)).await;
        assert_eq!(a.complete(&l, 0.1, 0.0).await.0, 200);
    }
    done.store(true, Ordering::SeqCst);
    let (reads, seen, torn_views) = reader.await.unwrap();
    eprintln!("{b:?}: {reads} readings, states seen {seen:?}, {} torn", torn_views.len());
    assert!(seen.contains("queued") && seen.contains("running") && seen.contains("completed"), "{seen:?} in {reads} readings");
    assert!(torn_views.is_empty(), "{} of {reads} readings were torn, e.g. {:?}", torn_views.len(), &torn_views[..torn_views.len().min(5)]);
}

both!(a_failed_gang_rank_ends_the_gang, failed_gang_on);
async fn failed_gang_on(b: Backend) {
    let Some((_db, s)) = server(b).await else { return };
    let admin = s.admin();
    let (_, a) = s.enrol("alice", "a").await;
    let (_, b2) = s.enrol("bob", "b").await;
    let g: Job = admin.post_ok("/api/v1/jobs", json!({"command": "mpi", "machines": 2})).await;
    let (la, lb) = tokio::join!(a.lease(0, 5000), b2.lease(0, 5000));
    let (la, lb) = (la.unwrap(), lb.unwrap());
    assert_eq!(end(&a, &la, json!({"kind": "exited", "code": 2}), 2).await, 200);
    let p: ProgressAck = b2.post_ok(&format!("/api/v1/tasks/{}/{}/progress", g.id, lb.rank), json!({"lease": lb.lease})).await;
    assert!(p.cancel, "the other rank is told to stop");
    let j = get_job(&admin, g.id).await;
    assert_eq!((j.state.as_str(), j.reason.as_deref()), ("failed", Some("exit code 2")), "{j:?}");
    s.stop().await;
}

both!(owners_cancel_their_own_jobs_and_see_those_that_ran_on_their_machines, cancel_rights_on);
async fn cancel_rights_on(b: Backend) {
    let Some((_db, s)) = server(b).await else { return };
    let admin = s.admin();
    let carol = s.owner("carol").await;
    let alice = s.owner("alice").await;
    let (_, desk) = s.enrol("alice", "desk").await;
    let j: Job = carol.post_ok("/api/v1/jobs", job("/bin/sh")).await;
    assert!(j.may_cancel, "the submitter may cancel: {j:?}");
    assert_eq!(alice.get(&format!("/api/v1/jobs/{}", j.id)).await.0, 404, "nothing of it ran on alice's machines yet");
    let l = desk.lease(1 << 30, 2000).await.expect("work");
    // Now it runs on alice's desk: she sees it, may not cancel it.
    let seen = get_job(&alice, j.id).await;
    assert!(!seen.may_cancel);
    let list: Vec<Job> = alice.get_ok("/api/v1/jobs").await;
    assert_eq!(list.iter().map(|j| j.id).collect::<Vec<_>>(), vec![j.id]);
    let (st, v) = alice.post(&format!("/api/v1/jobs/{}/cancel", j.id), json!({})).await;
    assert_eq!(st, 403, "{v}");
    assert!(v["error"].as_str().unwrap().contains("submitted by carol"), "{v}");
    let c: Job = carol.post_ok(&format!("/api/v1/jobs/{}/cancel", j.id), json!({})).await;
    assert_eq!((c.state.as_str(), c.reason.as_deref(), c.may_cancel), ("cancelled", Some("cancelled by carol"), false));
    let p: ProgressAck = desk.post_ok(&format!("/api/v1/tasks/{}/0/progress", j.id), json!({"lease": l.lease})).await;
    assert!(p.cancel);
    // Admins cancel anyone's.
    let j2: Job = carol.post_ok("/api/v1/jobs", job("/bin/sh")).await;
    let c: Job = admin.post_ok(&format!("/api/v1/jobs/{}/cancel", j2.id), json!({})).await;
    assert_eq!(c.reason.as_deref(), Some("cancelled by admin"));
    s.stop().await;
}

both!(a_queued_job_says_why_it_waits, waiting_on);
async fn waiting_on(b: Backend) {
    let Some((_db, s)) = server(b).await else { return };
    let admin = s.admin();
    let (_, vm) = s.enrol("alice", "vm").await;
    let busy = json!({"state": "owner_active", "available": false, "budget_left": 3, "free_mem_bytes": 2u64 << 30,
        "base_speed": 100.0, "current_speed": 1.0, "busy": "owner_cpu"});
    let _: HeartbeatAck = vm.post_ok("/api/v1/heartbeat", busy).await;
    // A gang wider than the pool, or more memory than any machine offers: said at submit.
    let wide: Job = admin.post_ok("/api/v1/jobs", json!({"command": "x", "machines": 5})).await;
    assert_eq!(wide.waiting, Some(Waiting { reason: "needs 5 machines, the pool has 1".into(), cannot_run: true }));
    let big: Job = admin.post_ok("/api/v1/jobs", json!({"command": "x", "mem_bytes": 8u64 << 30})).await;
    let w = big.waiting.expect("waiting");
    assert!(w.cannot_run && w.reason.contains("the most any machine offers guests now is 2.0 GiB (vm)"), "{w:?}");
    // An ordinary job waits for the owner.
    let j: Job = admin.post_ok("/api/v1/jobs", job("/bin/sh")).await;
    let w = get_job(&admin, j.id).await.waiting.expect("waiting");
    assert_eq!(w.reason, "no machine idle — vm: owner active (CPU 99 %)");
    assert!(!w.cannot_run);
    // Another owner's key is told how many machines are busy, not which.
    let bob = s.owner("bob").await;
    let mine: Job = bob.post_ok("/api/v1/jobs", job("/bin/sh")).await;
    assert_eq!(mine.waiting.unwrap().reason, "no machine idle — 1 machine busy");
    let list: Vec<Job> = admin.get_ok("/api/v1/jobs?state=queued").await;
    assert!(list.iter().all(|j| j.waiting.is_some()), "{list:?}");
    s.stop().await;
}

both!(a_machine_enrolled_or_removed_counts_at_the_next_submission, pool_change_on);
/// Submissions reuse the coordinator's list of enrolled machines for a few seconds
/// (`live::ENROLLED_TTL`), never across an enrolment or a removal made through it.
async fn pool_change_on(b: Backend) {
    let Some((_db, s)) = server(b).await else { return };
    let admin = s.admin();
    let wide = json!({"command": "x", "machines": 3});
    let (first, _) = s.enrol("alice", "a").await;
    let j: Job = admin.post_ok("/api/v1/jobs", wide.clone()).await;
    assert_eq!(j.waiting.expect("waiting").reason, "needs 3 machines, the pool has 1");
    let _second = s.enrol("bob", "b").await;
    let j: Job = admin.post_ok("/api/v1/jobs", wide.clone()).await;
    assert_eq!(j.waiting.expect("waiting").reason, "needs 3 machines, the pool has 2", "the enrolment is seen at once");
    let (st, v) = admin.delete(&format!("/api/v1/agents/{first}")).await;
    assert_eq!(st, 200, "{v}");
    let j: Job = admin.post_ok("/api/v1/jobs", wide).await;
    assert_eq!(j.waiting.expect("waiting").reason, "needs 3 machines, the pool has 1", "the removal is seen at once");
    s.stop().await;
}

both!(a_lease_given_back_unstarted_is_no_eviction_and_a_restarted_agent_gives_back_at_once, give_back_on);
async fn give_back_on(b: Backend) {
    let Some((_db, s)) = server(b).await else { return };
    let admin = s.admin();
    let (_, a) = s.enrol("alice", "a").await;
    let (_, b2) = s.enrol("bob", "b").await;
    let j: Job = admin.post_ok("/api/v1/jobs", json!({"command": "x", "max_retries": 0})).await;
    let l = a.lease(0, 2000).await.expect("work");
    let body = json!({"lease": l.lease, "reason": "the machine stopped accepting guest work", "not_started": true});
    let t: Task = a.post_ok(&format!("/api/v1/tasks/{}/0/evicted", j.id), body).await;
    assert_eq!((t.state.as_str(), t.evictions, t.attempts, t.retries_used), ("queued", 0, 0, 0), "{t:?}");
    let r: Report = admin.get_ok("/api/v1/reports?by=machine&since=1d").await;
    assert_eq!(r.rows.iter().map(|r| r.evictions).sum::<u32>(), 0);
    // Leased again and running on a; a's agent restarts: its task is back at once (a
    // lease that would otherwise hold it for its TTL, 30 s here), no retry used.
    let l = a.lease(0, 2000).await.expect("work again");
    let g: GivenBack = a.post_ok("/api/v1/give-back", json!({})).await;
    assert_eq!(g.tasks_requeued, 1);
    assert_eq!(a.post(&format!("/api/v1/tasks/{}/0/progress", j.id), json!({"lease": l.lease})).await.0, 409);
    let t0 = std::time::Instant::now();
    let lb = b2.lease(0, 5000).await.expect("given to b at once");
    assert!(t0.elapsed() < Duration::from_secs(5));
    assert_eq!(lb.job_id, j.id);
    let job = get_job(&admin, j.id).await;
    assert_eq!((job.tasks[0].retries_used, job.tasks[0].evictions, job.tasks[0].attempts), (0, 0, 2), "{job:?}");
    // Nothing held: nothing given back; agents only.
    let g: GivenBack = a.post_ok("/api/v1/give-back", json!({})).await;
    assert_eq!(g.tasks_requeued, 0);
    assert_eq!(admin.post("/api/v1/give-back", json!({})).await.0, 403);
    s.stop().await;
}

both!(a_running_jobs_output_arrives_with_its_renewals, output_on);
async fn output_on(b: Backend) {
    let Some((_db, s)) = server(b).await else { return };
    let admin = s.admin();
    let (_, a) = s.enrol("alice", "a").await;
    let j: Job = admin.post_ok("/api/v1/jobs", job("/bin/sh")).await;
    let l = a.lease(0, 2000).await.expect("work");
    let o: JobOutput = admin.get_ok(&format!("/api/v1/jobs/{}/output", j.id)).await;
    assert!(o.tasks[0].output.is_none());
    let out = json!({"stdout": "step 1\n", "stderr": "", "stdout_bytes": 7, "stderr_bytes": 0});
    let _: ProgressAck = a.post_ok(&format!("/api/v1/tasks/{}/0/progress", j.id), json!({"lease": l.lease, "output": out})).await;
    // A renewal without output keeps what arrived.
    let _: ProgressAck = a.post_ok(&format!("/api/v1/tasks/{}/0/progress", j.id), json!({"lease": l.lease})).await;
    let o: JobOutput = admin.get_ok(&format!("/api/v1/jobs/{}/output", j.id)).await;
    assert_eq!((o.state.as_str(), o.tasks[0].output.as_ref().map(|x| x.stdout.as_str())), ("running", Some("step 1\n")));
    let bad = json!({"stdout": "x".repeat(70_000), "stderr": "", "stdout_bytes": 1, "stderr_bytes": 0});
    assert_eq!(a.post(&format!("/api/v1/tasks/{}/0/progress", j.id), json!({"lease": l.lease, "output": bad})).await.0, 400);
    s.stop().await;
}

both!(an_older_database_is_migrated_in_place, migration_on);
/// A database at the schema before job outcomes (migrations 0001–0008) with a completed
/// task that exited 1, one that never started (-1), one that succeeded and one that
/// failed for good (retries used up): once the coordinator opens it, they read as
/// `failed` (with the exit code or why), `failed`, `completed` and `lost`.
async fn migration_on(b: Backend) {
    let Some(db) = fresh_db(b).await else { return };
    let dialect = if b == Backend::Sqlite { "sqlite" } else { "postgres" };
    let old = tempfile::tempdir().unwrap();
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations").join(dialect);
    for e in std::fs::read_dir(&src).unwrap() {
        let p = e.unwrap().path();
        if p.file_name().unwrap().to_str().unwrap() < "0009" {
            std::fs::copy(&p, old.path().join(p.file_name().unwrap())).unwrap();
        }
    }
    sqlx::any::install_default_drivers();
    let url = if b == Backend::Sqlite { format!("{}?mode=rwc", db.url.replacen("sqlite:", "sqlite://", 1)) } else { db.url.clone() };
    {
        let pool = sqlx::any::AnyPoolOptions::new().max_connections(1).connect(&url).await.unwrap();
        sqlx::migrate::Migrator::new(old.path()).await.unwrap().run(&pool).await.unwrap();
        for (id, state, exit, attempts) in [(1, "completed", 1, 1), (2, "completed", -1, 1), (3, "completed", 0, 1), (4, "failed", 0, 4)] {
            sqlx::query(
                "INSERT INTO jobs(submitter, program, spec, mem_bytes, checkpointable, gang, max_retries, state, created_ms)
                 VALUES ('admin', 'sh', '{\"command\":\"sh\",\"args\":[],\"env\":{},\"inputs\":{}}', 0, 0, 1, 3, $1, 0)",
            )
            .bind(if state == "failed" { "failed" } else { "completed" })
            .execute(&pool)
            .await
            .unwrap();
            sqlx::query(
                "INSERT INTO tasks(job_id, rank, state, agent_id, lease_epoch, attempts, max_retries, evictions, mem_bytes, exit_code)
                 VALUES ($1, 0, $2, NULL, 1, $3, 3, 1, 0, $4)",
            )
            .bind(id as i64)
            .bind(state)
            .bind(attempts as i64)
            .bind(if state == "failed" { None } else { Some(exit as i64) })
            .execute(&pool)
            .await
            .unwrap();
        }
        pool.close().await;
    }
    let s = Server::start(&db.url, test_config()).await;
    let admin = s.admin();
    let want = [
        (1, "failed", Some("exit code 1")),
        (2, "failed", Some("the guest never started (its agent sent no reason)")),
        (3, "completed", None),
        (4, "lost", Some("retries used up (leases lost or given back as failed)")),
    ];
    for (id, state, reason) in want {
        let j = get_job(&admin, id).await;
        assert_eq!((j.state.as_str(), j.reason.as_deref(), j.tasks[0].state.as_str()), (state, reason, state), "{j:?}");
    }
    assert_eq!(get_job(&admin, 4).await.tasks[0].attempts, 5, "runs: the retries charged and the eviction");
    let failed: Vec<Job> = admin.get_ok("/api/v1/jobs?state=failed").await;
    assert_eq!(failed.len(), 2);
    s.stop().await;
}
