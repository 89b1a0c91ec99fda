//! The scheduler's batched writes on both databases: `assign` writes a whole pass with
//! multi-row statements and falls back to job-by-job savepoints when a task is no longer
//! queued (only that job is left untouched); `take_deliveries` hands each waiting lease to
//! at most one poll, several to one agent when it asks for several, lowest job first; a
//! cancel that PostgreSQL ends to break a deadlock is run again.

#[macro_use]
mod common;

use common::{fresh_db, Backend};
use coordinator::auth::Principal;
use coordinator::model::{CreateJoinToken, EnrolRequest, SubmitJob};
use coordinator::scheduling::sql::{self, Planned};
use coordinator::{store, Db};
use sqlx::Row;

async fn agent(db: &Db, machine: &str) -> String {
    let token = coordinator::identity::create_join_token(db, &CreateJoinToken { uses: Some(1), ttl_s: Some(60) }).await.unwrap();
    let req = EnrolRequest { token: token.token, owner: "o".into(), machine: machine.into(), replace: false, cpus: Some(2) };
    let caller = coordinator::identity::Caller { principal: None, addr: "test" };
    coordinator::identity::enrol(db, &req, caller).await.unwrap().agent_id
}

async fn submit(db: &Db, machines: u32) -> i64 {
    let req: SubmitJob = serde_json::from_value(serde_json::json!({"command": "true", "machines": machines})).unwrap();
    store::submit(db, &Principal::Admin, &req).await.unwrap().id
}

fn plan(job: i64, agents: &[&str]) -> Planned {
    Planned {
        replacement: false,
        job,
        members: agents.iter().enumerate().map(|(r, a)| (r as u32, a.to_string())).collect(),
        algorithm: "fifo".into(),
        reason: "test".into(),
        prediction_source: "none".into(),
        predicted_runtime_s: 1.0,
    }
}

async fn states(db: &Db, job: i64) -> (String, Vec<(String, Option<String>)>) {
    let j = sql::job(db, job).await.unwrap().unwrap();
    (j.state, j.tasks.into_iter().map(|t| (t.state, t.agent_id)).collect())
}

async fn batched_assign_and_delivery(backend: Backend) {
    let Some(t) = fresh_db(backend).await else { return };
    let db = Db::connect(&t.url).await.unwrap();
    let (a, b) = (agent(&db, "a").await, agent(&db, "b").await);
    let j1 = submit(&db, 1).await;
    let j2 = submit(&db, 1).await;
    let gang = submit(&db, 2).await;
    let j3 = submit(&db, 1).await;

    // The whole pass in one go.
    let conflicts = sql::assign(&db, &[plan(j1, &[&a]), plan(gang, &[&a, &b]), plan(j3, &[&a])], 10_000).await.unwrap();
    assert!(conflicts.is_empty(), "{conflicts:?}");
    assert_eq!(states(&db, gang).await, ("running".into(), vec![("leased".into(), Some(a.clone())), ("leased".into(), Some(b.clone()))]));

    // A job cancelled meanwhile: left whole and returned, the others of the pass written.
    store::cancel(&db, &Principal::Admin, j2).await.unwrap();
    let j4 = submit(&db, 2).await;
    let conflicts = sql::assign(&db, &[plan(j2, &[&b]), plan(j4, &[&b, &a])], 10_000).await.unwrap();
    assert_eq!(conflicts, vec![j2]);
    assert_eq!(states(&db, j2).await.1, vec![("cancelled".into(), None)]);
    assert_eq!(states(&db, j4).await, ("running".into(), vec![("leased".into(), Some(b.clone())), ("leased".into(), Some(a.clone()))]));
    // Assigning an already leased job again changes nothing.
    assert_eq!(sql::assign(&db, &[plan(j1, &[&b])], 10_000).await.unwrap(), vec![j1]);
    assert_eq!(states(&db, j1).await.1, vec![("leased".into(), Some(a.clone()))]);

    // `a` holds j1, gang rank 0, j3 and j4 rank 1; two asks of `a` and one of `b` in one
    // batch: `a` gets its two lowest, `b` its lowest.
    // Both still have leases waiting after it, and say so.
    let (got, waiting) = sql::take_deliveries(&db, &[(a.clone(), 2), (b.clone(), 1)], 60_000).await.unwrap();
    let got: Vec<(String, i64, u32)> = got.into_iter().map(|(ag, l)| (ag, l.job_id, l.rank)).collect();
    assert_eq!(got, vec![(a.clone(), j1, 0), (a.clone(), gang, 0), (b.clone(), gang, 1)]);
    assert_eq!(waiting, [a.clone(), b.clone()].into(), "a: j3 and j4 rank 1 left; b: j4 rank 0 left");
    // Each lease once: the next asks get the rest, then nothing.
    let l = sql::take_delivery(&db, &a, 60_000).await.unwrap().unwrap();
    assert_eq!((l.job_id, l.rank, l.machines), (j3, 0, 1));
    // `b` gets its last with an ask of exactly one: it has nothing left, and says so.
    let (got, waiting) = sql::take_deliveries(&db, &[(b.clone(), 1)], 60_000).await.unwrap();
    assert_eq!(got.into_iter().map(|(ag, l)| (ag, l.job_id, l.rank)).collect::<Vec<_>>(), vec![(b.clone(), j4, 0)]);
    assert!(waiting.is_empty(), "{waiting:?}");
    let (got, waiting) = sql::take_deliveries(&db, &[(a.clone(), 5), (b.clone(), 5)], 60_000).await.unwrap();
    let got: Vec<(String, i64, u32)> = got.into_iter().map(|(ag, l)| (ag, l.job_id, l.rank)).collect();
    assert_eq!(got, vec![(a.clone(), j4, 1)]);
    assert!(waiting.is_empty());
    let (got, waiting) = sql::take_deliveries(&db, &[(a.clone(), 1), (b.clone(), 1)], 60_000).await.unwrap();
    assert!(got.is_empty() && waiting.is_empty());

    // A delivery given back waits for the next poll again.
    sql::undeliver(&db, &l, 10_000).await.unwrap();
    assert_eq!(sql::take_delivery(&db, &a, 60_000).await.unwrap().map(|l| l.job_id), Some(j3));
    db.close().await;
}

both!(assign_and_delivery_in_batches, batched_assign_and_delivery);

/// The plan SQLite (the bundled library the coordinator runs) makes for a statement.
async fn sqlite_plan(db: &Db, sql: &str, binds: usize) -> String {
    let mut q = sqlx::query(sqlx::AssertSqlSafe(format!("EXPLAIN QUERY PLAN {sql}")));
    for i in 0..binds {
        q = q.bind(i as i64);
    }
    let rows = q.fetch_all(&db.pool).await.unwrap();
    rows.iter().map(|r| sqlx::Row::get::<String, _>(r, "detail")).collect::<Vec<_>>().join("\n")
}

/// With a full chunk of members, each task is looked up by its key: the planner must not
/// walk the queue (`tasks_queue (state=?)`) and scan the members for each queued task,
/// which made every pass's write take ≈ 1 s with 20,000 jobs queued.
#[tokio::test]
async fn leasing_a_chunk_of_tasks_looks_each_up_by_its_key_on_sqlite() {
    let Some(t) = fresh_db(Backend::Sqlite).await else { return };
    let db = Db::connect(&t.url).await.unwrap();
    for members in [1, 3, 500] {
        let plan = sqlite_plan(&db, &sql::lease_tasks_sql(coordinator::Dialect::Sqlite, members), members * 3 + 2).await;
        let tasks: Vec<&str> = plan.lines().filter(|l| l.contains(" tasks ")).collect();
        assert_eq!(tasks.len(), 1, "{plan}");
        assert!(tasks[0].contains("(job_id=? AND rank=?)"), "{members} members: the tasks are not looked up by key:\n{plan}");
        let first = plan.lines().position(|l| l.starts_with("SCAN v")).unwrap_or(usize::MAX);
        let then = plan.lines().position(|l| l.contains(" tasks ")).unwrap_or(0);
        assert!(first < then, "{members} members: the members must drive the join:\n{plan}");
    }
    db.close().await;
}

/// A cancel that PostgreSQL ends to break a deadlock is run again, not answered 503:
/// another transaction holds a gang's rank 1 while the cancel, having locked rank 0,
/// waits for it; then that transaction asks for rank 0. The cancel, waiting longer, is
/// the one PostgreSQL ends (its deadlock check runs first); run again once the other
/// committed, it cancels the whole job. The deadlock is the one `lull bench recruit-api
/// --db postgres` met between a recruit group's release and a batch of deliveries.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_ended_by_a_deadlock_is_run_again_on_postgres() {
    let Some(t) = fresh_db(Backend::Postgres).await else { return };
    let db = Db::connect(&t.url).await.unwrap();
    let (a, b) = (agent(&db, "a").await, agent(&db, "b").await);
    let gang = submit(&db, 2).await;
    assert!(sql::assign(&db, &[plan(gang, &[&a, &b])], 10_000).await.unwrap().is_empty());

    let mut other = db.pool.begin().await.unwrap();
    sqlx::query("SELECT rank FROM tasks WHERE job_id = $1 AND rank = 1 FOR UPDATE").bind(gang).fetch_all(&mut *other).await.unwrap();
    let cancel = tokio::spawn({
        let db = db.clone();
        async move { store::cancel_job(&db, &Principal::Admin, gang).await }
    });
    // Until the cancel waits for rank 1's lock.
    let waiting = "SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'";
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while sqlx::query(waiting).fetch_one(&db.pool).await.unwrap().get::<i64, _>("n") == 0 {
        assert!(std::time::Instant::now() < deadline, "the cancel never waited for the lock");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    // Rank 0 now: a deadlock, which PostgreSQL breaks by ending the cancel's transaction.
    sqlx::query("UPDATE tasks SET lease_delivered = 1 WHERE job_id = $1 AND rank = 0").bind(gang).execute(&mut *other).await.unwrap();
    other.commit().await.unwrap();

    assert!(cancel.await.unwrap().expect("the cancel, run again after the deadlock, succeeds"), "it cancelled the job");
    assert_eq!(states(&db, gang).await, ("cancelled".into(), vec![("cancelled".into(), Some(a)), ("cancelled".into(), Some(b))]));
}

/// The queue ahead of a job, as its waiting explanation says it: the queued jobs submitted
/// before it (a cancelled one no longer counts), counted up to one past
/// `job_view::QUEUED_BEFORE_CAP`, so the count's cost stays bounded however long the queue.
async fn queue_ahead(backend: Backend) {
    use coordinator::store::job_view::{queued_before, QUEUED_BEFORE_CAP};
    let Some(t) = fresh_db(backend).await else { return };
    let db = Db::connect(&t.url).await.unwrap();
    let first = submit(&db, 1).await;
    submit(&db, 1).await;
    let third = submit(&db, 1).await;
    assert_eq!(queued_before(&db, first).await.unwrap(), 0);
    assert_eq!(queued_before(&db, third).await.unwrap(), 2);
    store::cancel(&db, &Principal::Admin, first).await.unwrap();
    assert_eq!(queued_before(&db, third).await.unwrap(), 1, "a cancelled job is not ahead");
    let mut last = third;
    for _ in 0..QUEUED_BEFORE_CAP + 1 {
        last = submit(&db, 1).await;
    }
    assert_eq!(queued_before(&db, last).await.unwrap(), QUEUED_BEFORE_CAP + 1, "counted one past the cap, no further");
}
both!(the_queue_ahead_of_a_job_is_counted_up_to_its_cap, queue_ahead);
