//! Instant recruitment (`POST /api/v1/recruit`, seed 003) against a real coordinator on
//! SQLite and PostgreSQL, with enrolled agents that heartbeat owner-load readings and
//! hold a long poll open (as `lull agent` does while it wants work): back-to-back
//! requests never share a machine, the reserve holds (with n idle machines a request
//! gets at most n − ⌊reserve·n⌋), busy machines and machines out of interruption budget
//! are never recruited, a group is leased to exactly its machines and released together
//! (by the API or when its job ends), and malformed requests are refused with 4xx.

#[macro_use]
mod common;

use common::*;
use coordinator::model::*;
use serde_json::{json, Value};
use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The leases each agent received, by agent id.
type Leases = Arc<Mutex<HashMap<String, Vec<Lease>>>>;

/// Enrols an agent that reports `cpu_pct` owner load and `budget_left`, then keeps one
/// long poll open for the rest of the test (a lease received is recorded and the next
/// poll opens at once, so the machine always offers a free slot).
async fn agent(s: &Server, machine: &str, cpu_pct: u8, budget_left: u32, leases: &Leases) -> (String, Client) {
    let (id, c) = s.enrol("alice", machine).await;
    let hb = json!({"state": "recruitable", "available": true, "budget_left": budget_left, "free_mem_bytes": 1u64 << 32,
        "base_speed": 1.0, "current_speed": 1.0, "idle_for_s": 600, "owner_load": [{"cpu_pct": cpu_pct, "secs": 10}, {"cpu_pct": cpu_pct, "secs": 10}]});
    let (st, body) = c.post("/api/v1/heartbeat", hb).await;
    assert_eq!(st, 200, "{body}");
    let (leases, me, poller) = (leases.clone(), id.clone(), c.clone());
    tokio::spawn(async move {
        let c = poller;
        loop {
            if let Some(l) = c.lease(1 << 32, 30_000).await {
                leases.lock().unwrap().entry(me.clone()).or_default().push(l);
            }
        }
    });
    (id, c)
}

fn agents_of(grant: &Value) -> BTreeSet<String> {
    grant["machines"].as_array().unwrap().iter().map(|m| m["agent_id"].as_str().unwrap().to_string()).collect()
}

async fn recruit(c: &Client, k: u32) -> Value {
    let (st, g) = c.post("/api/v1/recruit", json!({"k": k, "seconds": 10, "command": "sh", "args": ["-c", "true"]})).await;
    assert_eq!(st, 200, "{g}");
    g
}

/// Waits until the group's job is written, then until each of its agents holds a lease of it.
async fn leased(c: &Client, group: &str, leases: &Leases) -> i64 {
    for _ in 0..200 {
        let g: Value = c.get_ok(&format!("/api/v1/recruit/{group}")).await;
        if let Some(job) = g["job_id"].as_i64() {
            let agents: Vec<String> = g["agents"].as_array().unwrap().iter().map(|a| a.as_str().unwrap().to_string()).collect();
            let all = {
                let l = leases.lock().unwrap();
                agents
                    .iter()
                    .enumerate()
                    .all(|(rank, a)| l.get(a).is_some_and(|v| v.iter().any(|x| x.job_id == job && x.rank == rank as u32)))
            };
            if all {
                assert_eq!(g["state"], "leased", "{g}");
                return job;
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("group {group} was not leased to its machines");
}

async fn back_to_back_requests_never_share_and_the_reserve_holds(backend: Backend) {
    let Some(db) = fresh_db(backend).await else { return };
    let s = Server::start(&db.url, test_config()).await;
    let leases: Leases = Default::default();
    let mut idle = BTreeSet::new();
    let mut clients = HashMap::new();
    for i in 0..10 {
        let (id, c) = agent(&s, &format!("idle{i}"), 2, 5, &leases).await;
        idle.insert(id.clone());
        clients.insert(id, c);
    }
    let busy = agent(&s, "busy", 50, 5, &leases).await.0;
    let spent = agent(&s, "spent", 0, 0, &leases).await.0;
    let who = s.owner("bob").await;

    // Wait until the scheduler has seen every poll: a probe gets the most it can.
    let mut first = Value::Null;
    for _ in 0..100 {
        first = recruit(&who, 100).await;
        if first["idle"] == 10 {
            break;
        }
        if let Some(g) = first["group"].as_str() {
            let (st, body) = who.post(&format!("/api/v1/recruit/{g}/release"), json!({})).await;
            assert_eq!(st, 200, "{body}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // n = 10 idle, reserve 20 %: 2 kept back, 8 granted; busy and out-of-budget never.
    assert_eq!((first["idle"].as_u64(), first["reserved"].as_u64()), (Some(10), Some(2)), "{first}");
    let a = agents_of(&first);
    assert_eq!(a.len(), 8, "{first}");
    assert!(a.is_subset(&idle) && !a.contains(&busy) && !a.contains(&spent));
    for m in first["machines"].as_array().unwrap() {
        assert!(m["predicted_load"].as_f64().unwrap() < 0.1, "{m}");
        assert_eq!(m["predicted_idle_s"], 10);
        assert!(m["machine"].as_str().unwrap().starts_with("idle"), "{m}");
    }
    // Back to back: the next request sees the 2 left (⌊0.4⌋ = 0 kept back), shares nothing.
    let second = recruit(&who, 100).await;
    let b = agents_of(&second);
    assert_eq!((second["idle"].as_u64(), b.len()), (Some(2), 2), "{second}");
    assert!(a.is_disjoint(&b));
    let third = recruit(&who, 1).await;
    assert!(third["group"].is_null() && agents_of(&third).is_empty(), "{third}");

    // Each group is leased to exactly its machines, as one gang job.
    let ga = first["group"].as_str().unwrap().to_string();
    let job_a = leased(&who, &ga, &leases).await;
    let gb = second["group"].as_str().unwrap().to_string();
    let job_b = leased(&who, &gb, &leases).await;
    let j: Job = who.get_ok(&format!("/api/v1/jobs/{job_a}")).await;
    assert_eq!(j.machines, 8);
    let on: BTreeSet<String> = j.tasks.iter().map(|t| t.agent_id.clone().unwrap()).collect();
    assert_eq!(on, a);

    // Released by the API: its job is cancelled and its machines come back.
    let (st, r) = who.post(&format!("/api/v1/recruit/{ga}/release"), json!({})).await;
    assert_eq!((st, r["state"].as_str()), (200, Some("released")), "{r}");
    let j: Job = who.get_ok(&format!("/api/v1/jobs/{job_a}")).await;
    assert_eq!(j.state, "cancelled");
    let again = recruit(&who, 100).await;
    // 8 idle again, ⌊1.6⌋ = 1 kept back: 7 of A's machines.
    assert_eq!((again["idle"].as_u64(), again["reserved"].as_u64()), (Some(8), Some(1)), "{again}");
    assert!(agents_of(&again).is_subset(&a) && agents_of(&again).len() == 7);

    // Released when its job ends: B's members complete, B's machines come back.
    let done: Vec<(String, Lease)> = {
        let l = leases.lock().unwrap();
        l.iter().flat_map(|(a, v)| v.iter().filter(|x| x.job_id == job_b).map(|x| (a.clone(), x.clone()))).collect()
    };
    assert_eq!(done.len(), 2);
    for (agent_id, lease) in &done {
        assert!(b.contains(agent_id));
        let (st, body) = clients[agent_id].complete(lease, 0.1, 0.0).await;
        assert_eq!(st, 200, "{body}");
    }
    let mut state = Value::Null;
    for _ in 0..100 {
        state = who.get_ok(&format!("/api/v1/recruit/{gb}")).await;
        if state["state"] == "released" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(state["state"], "released", "{state}");
    // The 3 left idle (A's one in reserve and B's two): ⌊0.6⌋ = 0 kept back, all 3 granted.
    let last = recruit(&who, 100).await;
    assert_eq!(last["idle"].as_u64(), Some(3), "{last}");
    assert!(b.is_subset(&agents_of(&last)), "{last}");
    s.stop().await;
}

both!(back_to_back, back_to_back_requests_never_share_and_the_reserve_holds);

async fn malformed_requests_are_refused_with_4xx(backend: Backend) {
    let Some(db) = fresh_db(backend).await else { return };
    let s = Server::start(&db.url, test_config()).await;
    let who = s.owner("bob").await;
    let ok = json!({"k": 2, "seconds": 10, "command": "true"});
    let (st, g) = who.post("/api/v1/recruit", ok.clone()).await;
    assert_eq!(st, 200, "{g}");
    assert!(g["group"].is_null(), "no machine: nothing granted");
    for (body, field) in [
        (json!({"k": 0, "seconds": 10, "command": "true"}), "k"),
        (json!({"k": 5000, "seconds": 10, "command": "true"}), "k"),
        (json!({"k": 2, "seconds": 0, "command": "true"}), "seconds"),
        (json!({"k": 2, "seconds": 100000, "command": "true"}), "seconds"),
        (json!({"k": 2, "seconds": 10, "command": ""}), "command"),
        (json!({"k": 2, "seconds": 10}), "command"),
        (json!({"k": -1, "seconds": 10, "command": "true"}), "k"),
        (json!({"k": 2, "seconds": 10, "command": "true", "colour": "red"}), "colour"),
        (json!([1, 2]), ""),
    ] {
        let (st, e) = who.post("/api/v1/recruit", body.clone()).await;
        assert!((400..500).contains(&st), "{body} → {st} {e}");
        assert!(e["error"].as_str().unwrap().contains(field), "{body} → {e}");
    }
    // An agent may not recruit; a stranger may not; an unknown group is 404.
    let (_, agent) = s.enrol("alice", "m").await;
    // Heartbeats' owner-load readings out of range are refused, naming the field.
    let hb = |load: Value| json!({"state": "idle", "available": true, "budget_left": 1, "free_mem_bytes": 0, "base_speed": 1.0, "current_speed": 1.0, "owner_load": load});
    for (load, field) in [
        (json!([{"cpu_pct": 101, "secs": 1}]), "cpu_pct"),
        (json!([{"cpu_pct": 5, "secs": 0}]), "secs"),
        (json!([{"cpu_pct": 5, "secs": 601}]), "secs"),
        (json!(vec![json!({"cpu_pct": 5, "secs": 1}); 121]), "owner_load"),
        (json!([{"cpu_pct": 5}]), "secs"),
    ] {
        let (st, e) = agent.post("/api/v1/heartbeat", hb(load.clone())).await;
        assert!((400..500).contains(&st), "{load} → {st} {e}");
        assert!(e["error"].as_str().unwrap().contains(field), "{load} → {e}");
    }
    assert_eq!(agent.post("/api/v1/heartbeat", hb(json!([{"cpu_pct": 5, "secs": 10}]))).await.0, 200);
    assert_eq!(agent.post("/api/v1/recruit", ok.clone()).await.0, 403);
    assert_eq!(s.client("").post("/api/v1/recruit", ok).await.0, 401);
    assert_eq!(who.post("/api/v1/recruit/g1/release", json!({})).await.0, 404);
    assert_eq!(who.get("/api/v1/recruit/nope").await.0, 404);
    // The OpenAPI document describes the routes.
    let (_, doc) = s.client("").get("/api/openapi.json").await;
    assert!(doc["paths"]["/api/v1/recruit"]["post"].is_object());
    assert!(doc["paths"]["/api/v1/recruit/{group}/release"]["post"].is_object());
    s.stop().await;
}

both!(bad_input, malformed_requests_are_refused_with_4xx);
