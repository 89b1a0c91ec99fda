//! The agent's job-side client against a real coordinator (SQLite): checkpoints moved
//! between leases (download into a new work directory, upload only when changed, a
//! late upload from a lost lease refused, an oversized one never sent), renewals that
//! learn of a cancel or a lost lease, a gang member that starts only once its gang
//! has filled and otherwise gives its lease back, a halted member told so by its
//! renewals, and migration requests answered (and the link's own request: its
//! checkpoint uploaded first, "stay" and an unreachable coordinator changing nothing).

mod common;

use agent_core::checkpoint;
use agent_core::coordinator_client::{self, CoordinatorClient, GangWait, Stopped};
use common::*;
use coordinator::model::*;
use serde_json::json;
use std::time::Duration;

/// An enrolled agent's client (through the real enrolment).
async fn agent(s: &Server, machine: &str) -> CoordinatorClient {
    let token: JoinToken = s.admin().post_ok("/api/v1/join-tokens", json!({})).await;
    let creds = coordinator_client::enrol(&s.base, &token.token, "alice", machine, false, None).await.unwrap();
    CoordinatorClient::new(&creds).unwrap()
}

/// A heartbeat of an idle machine with interruptions left: a free machine to move to.
fn idle_heartbeat() -> Heartbeat {
    Heartbeat {
        state: "recruitable".into(),
        available: true,
        budget_left: 2,
        free_mem_bytes: 1 << 30,
        base_speed: 1.0,
        current_speed: 1.0,
        interruption_limit: None,
        idle_for_s: None,
        owner_load: Vec::new(),
        memory: None,
        busy: None,
        cpus: None,
    }
}

fn env<'a>(spec: &'a agent_core::guest::GuestSpec, name: &str) -> Option<&'a str> {
    spec.env.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
}

/// The guest's work directory in the directory the link prepared for a task.
fn workdir_of(spec: &agent_core::guest::GuestSpec) -> std::path::PathBuf {
    agent_core::guest::GuestDir::new(spec.job_dir.clone().expect("a prepared directory")).work()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_checkpoint_moves_from_one_lease_to_the_next() {
    let db = fresh_db(Backend::Sqlite).await.unwrap();
    let s = Server::start(&db.url, test_config()).await;
    let (a, b) = (agent(&s, "a").await, agent(&s, "b").await);
    let job: Job = s.admin().post_ok("/api/v1/jobs", json!({"command": "sh", "args": ["-c", "true"], "checkpointable": true})).await;
    let plain: Job = s.admin().post_ok("/api/v1/jobs", json!({"command": "sh", "args": ["-c", "true"]})).await;

    // First lease, on A: no checkpoint yet, so nothing is put in the work directory.
    let root_a = tempfile::tempdir().unwrap();
    let first = a.lease(1 << 30, Duration::ZERO).await.unwrap().expect("a task for A");
    assert_eq!(first.job_id, job.id);
    let spec = coordinator_client::guest_spec(&first, root_a.path()).unwrap();
    let workdir = workdir_of(&spec);
    assert!(workdir.is_dir() && workdir.starts_with(root_a.path().join("jobs")), "{}", workdir.display());
    // The runtime tells the guest where its checkpoint goes, as the guest sees it.
    assert_eq!(env(&spec, "LULL_CHECKPOINT"), None);
    let ck = checkpoint::path_in(&workdir);
    assert_eq!(coordinator_client::fetch_checkpoint(&a, &first, &ck).await, Ok(None), "404: none");
    assert!(!ck.exists());

    // Nothing written: nothing uploaded. Then the guest writes its state.
    let mut last = None;
    assert!(coordinator_client::upload_checkpoint(&a, &first, &ck, &mut last, false).await);
    assert!(last.is_none());
    assert_eq!(a.get_checkpoint(&first).await.unwrap(), None);
    std::fs::write(&ck, b"count=3").unwrap();
    assert!(coordinator_client::upload_checkpoint(&a, &first, &ck, &mut last, false).await);
    assert!(last.is_some());
    assert_eq!(a.get_checkpoint(&first).await.unwrap().as_deref(), Some(&b"count=3"[..]));
    // The guest writes again (write + rename): the new state replaces the old.
    let tmp = workdir.join("ck.tmp");
    std::fs::write(&tmp, b"count=4").unwrap();
    std::fs::rename(&tmp, &ck).unwrap();
    let before = last;
    assert!(coordinator_client::upload_checkpoint(&a, &first, &ck, &mut last, true).await);
    assert_ne!(before, last, "the new file was uploaded");
    assert_eq!(a.get_checkpoint(&first).await.unwrap().as_deref(), Some(&b"count=4"[..]));
    // Too big for the coordinator: not sent, reported as not uploaded, the last one kept.
    let f = std::fs::File::create(&ck).unwrap();
    f.set_len(lull_protocol::CHECKPOINT_MAX as u64 + 1).unwrap();
    assert!(!coordinator_client::upload_checkpoint(&a, &first, &ck, &mut last, false).await);
    assert_eq!(a.get_checkpoint(&first).await.unwrap().as_deref(), Some(&b"count=4"[..]));

    // A is evicted; B takes the task under a new lease and finds the checkpoint in its own
    // new work directory before its guest starts.
    a.evicted(&first, "evicted: the owner returned").await.unwrap();
    let root_b = tempfile::tempdir().unwrap();
    let second = b.lease(1 << 30, Duration::ZERO).await.unwrap().expect("the re-queued task for B");
    assert_eq!((second.job_id, second.rank), (job.id, 0));
    assert!(second.lease > first.lease);
    let spec_b = coordinator_client::guest_spec(&second, root_b.path()).unwrap();
    let ck_b = checkpoint::path_in(&workdir_of(&spec_b));
    let stamp = coordinator_client::fetch_checkpoint(&b, &second, &ck_b).await.unwrap();
    assert!(stamp.is_some());
    assert_eq!(std::fs::read(&ck_b).unwrap(), b"count=4");
    // What was downloaded is not uploaded back unchanged.
    let mut last_b = stamp;
    assert!(coordinator_client::upload_checkpoint(&b, &second, &ck_b, &mut last_b, false).await);
    assert_eq!(last_b, stamp);

    // A late upload from A's lost lease is refused and changes nothing.
    match a.put_checkpoint(&first, b"stale".to_vec()).await {
        Err(coordinator_client::ClientError::Refused { status: 409, .. }) => {}
        other => panic!("a stale upload was not refused: {other:?}"),
    }
    let mut stale = None;
    std::fs::write(&ck, b"stale").unwrap();
    assert!(!coordinator_client::upload_checkpoint(&a, &first, &ck, &mut stale, true).await);
    assert_eq!(b.get_checkpoint(&second).await.unwrap().as_deref(), Some(&b"count=4"[..]));
    // B's own renewal holds; and its newer state is stored.
    assert_eq!(coordinator_client::renewal(b.progress(&second, None).await), Ok(false));
    std::fs::write(&ck_b, b"count=9").unwrap();
    assert!(coordinator_client::upload_checkpoint(&b, &second, &ck_b, &mut last_b, false).await);
    assert_eq!(b.get_checkpoint(&second).await.unwrap().as_deref(), Some(&b"count=9"[..]));

    // A job that is not checkpointable gets no LULL_CHECKPOINT.
    let other = a.lease(1 << 30, Duration::ZERO).await.unwrap().expect("the plain job");
    assert_eq!(other.job_id, plain.id);
    assert_eq!(env(&coordinator_client::guest_spec(&other, root_a.path()).unwrap(), "LULL_CHECKPOINT"), None);

    // Renewals: a cancel is learnt; a lease that moved on is lost (409).
    let _: Job = s.admin().post_ok(&format!("/api/v1/jobs/{}/cancel", job.id), json!({})).await;
    assert_eq!(coordinator_client::renewal(b.progress(&second, None).await), Err(Some(Stopped::Cancelled)));
    assert_eq!(coordinator_client::renewal(a.progress(&first, None).await), Err(Some(Stopped::LeaseLost)));
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gang_member_starts_once_its_gang_fills_and_gives_back_a_lease_that_does_not() {
    let db = fresh_db(Backend::Sqlite).await.unwrap();
    let s = Server::start(&db.url, test_config()).await;
    let (a, b) = (agent(&s, "a").await, agent(&s, "b").await);
    let (_yes, accepting) = tokio::sync::watch::channel(true);
    let both = || async { tokio::join!(a.lease(1 << 30, Duration::from_secs(3)), b.lease(1 << 30, Duration::from_secs(3))) };

    // A gang of three on a pool of two is never placed: no member waits for a third machine.
    let big: Job = s.admin().post_ok("/api/v1/jobs", json!({"command": "sh", "args": ["-c", "true"], "machines": 3})).await;
    let (la, lb) = both().await;
    assert!(la.unwrap().is_none() && lb.unwrap().is_none(), "a gang wider than the pool is not leased");
    let (_, _) = s.admin().post(&format!("/api/v1/jobs/{}/cancel", big.id), json!({})).await;

    // A gang of two: placed on both machines at once; each member is ready once both have
    // taken their lease.
    let pair: Job = s.admin().post_ok("/api/v1/jobs", json!({"command": "sh", "args": ["-c", "true"], "machines": 2})).await;
    let (la, lb) = both().await;
    let (la, lb) = (la.unwrap().expect("rank for A"), lb.unwrap().expect("rank for B"));
    assert_eq!((la.job_id, lb.job_id), (pair.id, pair.id));
    assert_eq!(coordinator_client::wait_for_gang(&a, &la, &accepting, Duration::from_secs(5)).await, GangWait::Ready);
    assert_eq!(coordinator_client::wait_for_gang(&b, &lb, &accepting, Duration::from_secs(5)).await, GangWait::Ready);
    for (c, l) in [(&a, &la), (&b, &lb)] {
        assert!(c.complete(l, &lull_protocol::TaskOutcome::Exited { code: 0 }, 0.1, 0.0, None).await.unwrap(), "the completion counts");
    }

    // The machine stops accepting guest work while a member waits: it gives the lease back,
    // and the coordinator re-queues the gang, so the other member's lease is lost.
    let lone: Job = s.admin().post_ok("/api/v1/jobs", json!({"command": "sh", "args": ["-c", "true"], "machines": 2})).await;
    let (la, lb) = both().await;
    let (la, lb) = (la.unwrap().expect("a rank of the third gang"), lb.unwrap().expect("the other rank"));
    assert_eq!(la.job_id, lone.id);
    let (_no, not_accepting) = tokio::sync::watch::channel(false);
    let w = coordinator_client::wait_for_gang(&a, &la, &not_accepting, Duration::from_secs(30)).await;
    assert!(matches!(&w, GangWait::GiveBack(why) if why.contains("no longer available")), "{w:?}");
    a.evicted(&la, "the machine is no longer available").await.unwrap();
    let w = coordinator_client::wait_for_gang(&b, &lb, &accepting, Duration::from_secs(2)).await;
    assert_eq!(w, GangWait::Gone(Stopped::LeaseLost));
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_halted_member_learns_it_from_its_renewal_and_its_migration_request_is_answered() {
    let db = fresh_db(Backend::Sqlite).await.unwrap();
    let s = Server::start(&db.url, test_config()).await;
    let (a, b) = (agent(&s, "a").await, agent(&s, "b").await);
    let (_yes, accepting) = tokio::sync::watch::channel(true);
    let g: Job =
        s.admin().post_ok("/api/v1/jobs", json!({"command": "sh", "args": ["-c", "true"], "machines": 2, "estimate_s": 1000.0})).await;
    let (la, lb) = tokio::join!(a.lease(1 << 30, Duration::from_secs(3)), b.lease(1 << 30, Duration::from_secs(3)));
    let (la, lb) = (la.unwrap().expect("rank for A"), lb.unwrap().expect("rank for B"));
    assert_eq!(coordinator_client::wait_for_gang(&a, &la, &accepting, Duration::from_secs(5)).await, GangWait::Ready);
    assert_eq!(coordinator_client::wait_for_gang(&b, &lb, &accepting, Duration::from_secs(5)).await, GangWait::Ready);
    assert_eq!(coordinator_client::renewal(b.progress(&lb, None).await), Ok(false), "whole: not halted");
    // A's owner comes back: B's renewal says halt (freeze the guest), not a lost lease.
    a.evicted(&la, "evicted: the owner returned").await.unwrap();
    assert_eq!(coordinator_client::renewal(b.progress(&lb, None).await), Ok(true));
    // B's owner comes back too and B asks to move: no machine is free.
    let ask = MigrateRequest { lease: lb.lease, owner_utilization: 0.9, owner_busy_for_s: 300.0, migration_cost_s: 5.0, cpu_s: 1.0 };
    let m = b.migrate(&lb, &ask).await.unwrap();
    assert!(!m.migrate, "{m:?}");
    // A is idle again (its heartbeat says available, and it holds no lease): B's rank moves.
    let hb = idle_heartbeat();
    a.heartbeat(&hb).await.unwrap();
    let m = b.migrate(&lb, &ask).await.unwrap();
    assert!(m.migrate, "{m:?}");
    assert_eq!(coordinator_client::renewal(b.progress(&lb, None).await), Err(Some(Stopped::LeaseLost)), "given back: stop the guest");
    let job: Job = s.admin().get_ok(&format!("/api/v1/jobs/{}", g.id)).await;
    assert!(job.tasks.iter().all(|t| t.state == "queued"), "{job:?}");
    assert_eq!(job.tasks[lb.rank as usize].evictions, 0, "a migration is not an eviction");
    // A malformed request is refused (a number out of range, named).
    match b.migrate(&lb, &MigrateRequest { owner_utilization: 7.0, ..ask }).await {
        Err(coordinator_client::ClientError::Refused { status: 400, message, .. }) => {
            assert!(message.contains("owner_utilization"), "{message}")
        }
        other => panic!("{other:?}"),
    }
    s.stop().await;
}

/// The link's migration request (`coordinator_client::ask_migration`, what the agent runs
/// for a lingering guest it has frozen): the checkpoint goes up first, so a "yes" hands
/// the next lease exactly the state the guest stopped at; "stay", a checkpoint that
/// cannot be uploaded and an unreachable coordinator all leave the lease held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_links_migration_request_uploads_the_checkpoint_first_and_only_a_yes_gives_the_task_back() {
    use agent_core::driver_link::{MigrationAsk, MigrationOutcome};
    let db = fresh_db(Backend::Sqlite).await.unwrap();
    let s = Server::start(&db.url, test_config()).await;
    let a = agent(&s, "a").await;
    let job: Job = s
        .admin()
        .post_ok("/api/v1/jobs", json!({"command": "sh", "args": ["-c", "true"], "checkpointable": true, "estimate_s": 1000.0}))
        .await;
    let root_a = tempfile::tempdir().unwrap();
    let task = a.lease(1 << 30, Duration::ZERO).await.unwrap().expect("a task for A");
    assert_eq!(task.job_id, job.id);
    let spec = coordinator_client::guest_spec(&task, root_a.path()).unwrap();
    let ck = checkpoint::path_in(&workdir_of(&spec));
    let ask = MigrationAsk { owner_utilization: 0.9, owner_busy_for_s: 300.0, migration_cost_s: 5.0, cpu_s: 1.0 };
    let mut uploaded = None;

    // No other machine: stay, the checkpoint uploaded all the same, the lease held.
    std::fs::write(&ck, b"count=7").unwrap();
    match coordinator_client::ask_migration(&a, &task, Some(&ck), &mut uploaded, &ask).await {
        MigrationOutcome::Stays(why) => assert!(why.contains("no other machine"), "{why}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(a.get_checkpoint(&task).await.unwrap().as_deref(), Some(&b"count=7"[..]));
    assert_eq!(coordinator_client::renewal(a.progress(&task, None).await), Ok(false), "a 'stay' keeps the lease");

    // B is free now. A checkpoint that cannot be uploaded: not asked, nothing changes.
    let b = agent(&s, "b").await;
    let hb = idle_heartbeat();
    b.heartbeat(&hb).await.unwrap();
    let f = std::fs::File::create(&ck).unwrap();
    f.set_len(lull_protocol::CHECKPOINT_MAX as u64 + 1).unwrap();
    assert!(matches!(coordinator_client::ask_migration(&a, &task, Some(&ck), &mut uploaded, &ask).await, MigrationOutcome::Failed(_)));
    assert_eq!(coordinator_client::renewal(a.progress(&task, None).await), Ok(false), "not asked: the lease is held");

    // The coordinator unreachable: a failure, within the timeout, and nothing changes.
    let gone = coordinator_client::Credentials {
        url: "http://127.0.0.1:9".into(),
        agent_id: "a".into(),
        secret: "x".into(),
        machine: None,
        owner: None,
    };
    let unreachable = CoordinatorClient::new(&gone).unwrap();
    std::fs::write(&ck, b"count=8").unwrap();
    let t0 = std::time::Instant::now();
    let mut not_sent = uploaded;
    assert!(matches!(
        coordinator_client::ask_migration(&unreachable, &task, Some(&ck), &mut not_sent, &ask).await,
        MigrationOutcome::Failed(_)
    ));
    assert!(t0.elapsed() <= coordinator_client::MIGRATE_TIMEOUT + Duration::from_secs(1));
    assert_eq!(coordinator_client::renewal(a.progress(&task, None).await), Ok(false));

    // Asked again with B free: yes. The checkpoint B's lease downloads is the last one.
    match coordinator_client::ask_migration(&a, &task, Some(&ck), &mut uploaded, &ask).await {
        MigrationOutcome::Migrated(why) => assert!(why.starts_with("migrate:"), "{why}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(coordinator_client::renewal(a.progress(&task, None).await), Err(Some(Stopped::LeaseLost)), "given back: stop the guest");
    let root_b = tempfile::tempdir().unwrap();
    let next = b.lease(1 << 30, Duration::from_secs(3)).await.unwrap().expect("the migrated task for B");
    assert_eq!((next.job_id, next.rank), (job.id, 0));
    let ck_b = checkpoint::path_in(&workdir_of(&coordinator_client::guest_spec(&next, root_b.path()).unwrap()));
    assert!(coordinator_client::fetch_checkpoint(&b, &next, &ck_b).await.unwrap().is_some());
    assert_eq!(std::fs::read(&ck_b).unwrap(), b"count=8");
    let j: Job = s.admin().get_ok(&format!("/api/v1/jobs/{}", job.id)).await;
    assert_eq!(j.tasks[0].evictions, 0, "a migration is not an eviction: {j:?}");
    s.stop().await;
}
