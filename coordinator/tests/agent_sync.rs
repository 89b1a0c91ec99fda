//! The agent's coordinator client against a real coordinator: enrolment, heartbeats, and
//! the ledger outbox synced idempotently — through a lost acknowledgement, and through a
//! coordinator outage during which the agent keeps accounting — so the coordinator's
//! report equals the agent ledger's donated time to the microsecond.

mod common;

use agent_core::coordinator_client::{self, CoordinatorClient};
use agent_core::ledger::{GuestTotals, Ledger};
use agent_core::policy::{Interruption, ReturnCause, Saved};
use chrono::Utc;
use common::*;
use coordinator::model::*;
use std::sync::Mutex;

fn totals(guest: &str, cpu_us: u64, wall_ms: u64) -> GuestTotals {
    GuestTotals { guest: guest.into(), cpu_us, wall_ms, peak_mem_bytes: 1 }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outbox_sync_survives_lost_acks_and_outages_without_loss_or_double() {
    let db = fresh_db(Backend::Sqlite).await.unwrap();
    let s = Server::start(&db.url, test_config()).await;
    let token: JoinToken = s.admin().post_ok("/api/v1/join-tokens", serde_json::json!({})).await;
    let creds = coordinator_client::enrol(&s.base, &token.token, "alice", "desk", false, None).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("coordinator.json");
    creds.save(&path).unwrap();
    assert_eq!(coordinator_client::Credentials::load(&path).unwrap(), Some(creds.clone()));
    let client = CoordinatorClient::new(&creds).unwrap();
    let speed = coordinator_client::base_speed();
    assert!(speed > 1.0, "S_b {speed}");
    let hb = Heartbeat {
        state: "donating".into(),
        available: true,
        budget_left: 4,
        free_mem_bytes: coordinator_client::free_memory(),
        base_speed: speed,
        current_speed: speed,
        interruption_limit: Some(5),
        idle_for_s: None,
        owner_load: Vec::new(),
        memory: None,
        busy: None,
        cpus: None,
    };
    client.heartbeat(&hb).await.unwrap();

    let ledger = Mutex::new(Ledger::open(&dir.path().join("ledger.db")).unwrap());
    let day = chrono::Local::now().date_naive();
    {
        let mut l = ledger.lock().unwrap();
        l.record_guest_totals(day, Utc::now(), &totals("g1", 1_500_001, 2_000)).unwrap();
        l.record_guest_totals(day, Utc::now(), &totals("g1", 4_000_003, 5_000)).unwrap();
        let i = Interruption {
            day,
            number: 1,
            limit: 5,
            cause: ReturnCause::Input,
            at_utc: Utc::now(),
            at_mono: agent_core::clock::MonoMs(1),
            mode: agent_core::config::EvictionMode::LingerLonger,
        };
        l.record_interruption(&i, &Saved::default()).unwrap();
    }
    // A lost acknowledgement: the records reach the coordinator but the agent never
    // marks them sent (as if it crashed right after posting).
    let pending = ledger.lock().unwrap().outbox_pending(100).unwrap();
    assert_eq!(pending.len(), 3);
    let last = pending.last().unwrap().seq;
    assert_eq!(client.post_records(pending).await.unwrap(), last);
    let stats = client.sync_outbox(&ledger).await.unwrap();
    assert_eq!(stats.sent, 3, "resent after restart");
    assert!(ledger.lock().unwrap().outbox_pending(100).unwrap().is_empty());

    // The coordinator goes away; the agent keeps accounting and fails to sync.
    let url = db.url.clone();
    s.stop().await;
    for k in 1..=1200u64 {
        ledger.lock().unwrap().record_guest_totals(day, Utc::now(), &totals("g2", k * 1_001, k * 3)).unwrap();
    }
    assert!(client.sync_outbox(&ledger).await.is_err());
    assert_eq!(ledger.lock().unwrap().outbox_pending(5000).unwrap().len(), 1200, "kept while offline");

    // Back on the same database (a new port: the client follows the credentials' URL).
    let s = Server::start(&url, test_config()).await;
    let mut creds2 = creds.clone();
    creds2.url = s.base.clone();
    let client = CoordinatorClient::new(&creds2).unwrap();
    let stats = client.sync_outbox(&ledger).await.unwrap();
    assert_eq!((stats.sent, stats.batches), (1200, 3));
    assert_eq!(client.sync_outbox(&ledger).await.unwrap().sent, 0);

    let ledger_day = ledger.lock().unwrap().donated_on(day).unwrap();
    let r: Report = s.admin().get_ok("/api/v1/reports?by=owner&since=2d").await;
    let row = r.rows.iter().find(|x| x.key == "alice" && x.period == day.to_string()).expect("alice today");
    assert_eq!(row.cpu_s, ledger_day.cpu_s, "report equals the ledger to the microsecond");
    assert_eq!(row.wall_s, ledger_day.wall_s);
    assert_eq!(row.cpu_s, (4_000_003 + 1200 * 1_001) as f64 / 1e6);
    assert_eq!(row.interruptions, 1);
    let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM records").fetch_one(&s.db.pool).await.unwrap();
    assert_eq!(n, 1203, "each record stored once");
    s.stop().await;
}
