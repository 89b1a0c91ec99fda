//! The pool's trust boundary (issue 27) against a real server over real SQLite and
//! PostgreSQL: join tokens and API keys listed (each use with its time and address, never
//! a secret) and revoked; what an agent claims checked against its CPUs, its joining and
//! its lease; and a property test that throws random and extreme ledger records at the
//! API and then asserts every report still answers 200 and equals the sum of the records
//! the API accepted.

#[macro_use]
mod common;

use common::*;
use coordinator::model::*;
use proptest::prelude::*;
use serde_json::{json, Value};
use std::collections::BTreeMap;

async fn server(b: Backend) -> Option<(TestDb, Server)> {
    let db = fresh_db(b).await?;
    let s = Server::start(&db.url, test_config()).await;
    Some((db, s))
}

both!(tokens_and_keys_are_listed_and_revoked, tokens_and_keys_on);
async fn tokens_and_keys_on(b: Backend) {
    let Some((_db, s)) = server(b).await else { return };
    let admin = s.admin();
    let anon = s.client("");
    let t: JoinToken = admin.post_ok("/api/v1/join-tokens", json!({"uses": 2})).await;
    assert_eq!(t.id.len(), 12);
    let e: Enrolment = anon.post_ok("/api/v1/enrol", json!({"token": t.token, "owner": "alice", "machine": "desk", "cpus": 2})).await;
    // Listed with each use (time, address, what it enrolled), never the token.
    let (st, raw) = admin.get_text("/api/v1/join-tokens").await;
    assert_eq!(st, 200);
    assert!(!raw.contains("lull_join_"), "a list shows no token: {raw}");
    let list: Vec<JoinTokenInfo> = serde_json::from_str(&raw).unwrap();
    let info = list.iter().find(|x| x.id == t.id).expect("listed");
    assert_eq!((info.uses, info.uses_left, info.state.as_str()), (Some(2), 1, "active"));
    let used = &info.used[0];
    assert_eq!((used.addr.as_str(), used.outcome.as_str(), used.agent_id.as_deref()), ("127.0.0.1", "enrolled", Some(e.agent_id.as_str())));
    assert!((now_ms() - used.at_ms).abs() < 60_000, "{used:?}");
    // Revoked: it enrols no one; revoking again changes nothing; unknown and malformed ids.
    let (st, v) = admin.delete(&format!("/api/v1/join-tokens/{}", t.id)).await;
    assert_eq!((st, v["state"].as_str()), (200, Some("revoked")), "{v}");
    let (st, _) = anon.post("/api/v1/enrol", json!({"token": t.token, "owner": "alice", "machine": "laptop", "cpus": 2})).await;
    assert_eq!(st, 401, "a revoked token enrols no one");
    assert_eq!(admin.delete(&format!("/api/v1/join-tokens/{}", t.id)).await.0, 200);
    assert_eq!(admin.delete("/api/v1/join-tokens/0123456789ab").await.0, 404);
    assert_eq!(admin.delete("/api/v1/join-tokens/xyz").await.0, 400);

    // Keys: each use counted per address; the list writes this replica's pending uses first.
    let owner: ApiKey = admin.post_ok("/api/v1/keys", json!({"role": "owner", "owner": "alice"})).await;
    let alice = s.client(&owner.key);
    for _ in 0..3 {
        assert_eq!(alice.get("/api/v1/agents").await.0, 200);
    }
    let (st, raw) = admin.get_text("/api/v1/keys").await;
    assert_eq!(st, 200);
    assert!(!raw.contains("lull_admin_") && !raw.contains("lull_owner_"), "a list shows no key: {raw}");
    let keys: Vec<ApiKeyInfo> = serde_json::from_str(&raw).unwrap();
    let k = keys.iter().find(|k| k.id == owner.id).expect("listed");
    assert_eq!((k.role.as_str(), k.owner.as_deref(), k.uses, k.used_from[0].addr.as_str()), ("owner", Some("alice"), 3, "127.0.0.1"));
    assert!(keys.iter().any(|k| k.role == "admin" && k.uses >= 3), "the admin key's own uses: {keys:?}");
    // Only the admin lists or revokes.
    let agent = s.client(&e.secret);
    for c in [&alice, &agent] {
        assert_eq!(c.get("/api/v1/keys").await.0, 403);
        assert_eq!(c.get("/api/v1/join-tokens").await.0, 403);
        assert_eq!(c.delete(&format!("/api/v1/keys/{}", owner.id)).await.0, 403);
    }
    // A revoked key answers 401 saying so, at once on this replica.
    assert_eq!(admin.delete(&format!("/api/v1/keys/{}", owner.id)).await.0, 200);
    let (st, v) = alice.get("/api/v1/agents").await;
    assert_eq!((st, v["code"].as_str()), (401, Some("key_revoked")), "{v}");
    // The last admin key stays; with a second one, the first may go.
    let first_admin = keys.iter().find(|k| k.role == "admin").unwrap().id.clone();
    let (st, v) = admin.delete(&format!("/api/v1/keys/{first_admin}")).await;
    assert_eq!(st, 409, "{v}");
    assert!(v["error"].as_str().unwrap().contains("last admin key"), "{v}");
    let second: ApiKey = admin.post_ok("/api/v1/keys", json!({"role": "admin"})).await;
    assert_eq!(s.client(&second.key).delete(&format!("/api/v1/keys/{first_admin}")).await.0, 200);
    assert_eq!(admin.get("/api/v1/agents").await.0, 401);
    let doc: Value = anon.get_ok("/api/openapi.json").await;
    for p in ["/api/v1/keys", "/api/v1/keys/{id}", "/api/v1/join-tokens", "/api/v1/join-tokens/{id}"] {
        assert!(doc["paths"][p].is_object(), "{p} is in the OpenAPI document");
    }
    s.stop().await;
}

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

fn today() -> chrono::NaiveDate {
    chrono::Utc::now().date_naive()
}

both!(claims_are_bounded_by_the_machine_and_the_lease, claims_on);
async fn claims_on(b: Backend) {
    let Some((_db, s)) = server(b).await else { return };
    let t: JoinToken = s.admin().post_ok("/api/v1/join-tokens", json!({"uses": 2})).await;
    let e: Enrolment =
        s.client("").post_ok("/api/v1/enrol", json!({"token": t.token, "owner": "alice", "machine": "two", "cpus": 2})).await;
    let two = s.client(&e.secret);
    // Joined ten minutes ago (an hour's grace before that): 10 hours of CPU today cannot be.
    backdate_enrolment(&s.db, 10 * 60_000).await;
    let day = today().to_string();
    let at = chrono::Utc::now().to_rfc3339();
    let rec = |seq: i64, cpu_s: i64| json!({"seq": seq, "kind": "donation", "payload": {"guest": "g", "day": day, "cpu_us": cpu_s * 1_000_000, "wall_ms": 1000, "at_utc": at}});
    let (st, v) = two.post("/api/v1/records", json!({"records": [rec(1, 36_000)]})).await;
    assert_eq!((st, v["code"].as_str()), (400, Some("record_out_of_range")), "{v}");
    let msg = v["error"].as_str().unwrap();
    assert!(msg.contains("record 1") && msg.contains("payload.cpu_us") && msg.contains("2 CPUs"), "{msg}");
    // 2 CPUs over the 75 minutes (and the 5-minute clock skew) it can have given: up to 9,600 CPU-s; 3 per second is refused.
    assert_eq!(two.post("/api/v1/records", json!({"records": [rec(2, 3 * 80 * 60)]})).await.0, 400, "3 CPU-s a second");
    let ok: RecordsAck = two.post_ok("/api/v1/records", json!({"records": [rec(3, 2 * 70 * 60)]})).await;
    assert_eq!(ok.stored, 1);
    assert_eq!(
        two.post("/api/v1/records", json!({"records": [rec(4, 2 * 20 * 60)]})).await.0,
        400,
        "the day's sum is checked, not each record"
    );
    // Made a day before it joined: stored, not counted, and said so.
    let old_day = (today() - chrono::Duration::days(3)).to_string();
    let before = json!({"seq": 5, "kind": "donation", "payload": {"day": old_day, "cpu_us": 1_000_000, "wall_ms": 1000, "at_utc": format!("{old_day}T12:00:00Z")}});
    let ack: RecordsAck = two.post_ok("/api/v1/records", json!({"records": [before]})).await;
    assert_eq!(ack.uncounted, vec![5]);
    // A day that has not begun anywhere, a time in the future.
    let future = json!({"seq": 6, "kind": "donation", "payload": {"day": "2999-01-01", "cpu_us": 1, "wall_ms": 1}});
    assert!(two.post("/api/v1/records", json!({"records": [future]})).await.1["error"].as_str().unwrap().contains("payload.day"));
    let ahead = (chrono::Utc::now() + chrono::Duration::hours(1)).to_rfc3339();
    let future = json!({"seq": 6, "kind": "donation", "payload": {"day": day, "cpu_us": 1, "wall_ms": 1, "at_utc": ahead}});
    assert!(two.post("/api/v1/records", json!({"records": [future]})).await.1["error"].as_str().unwrap().contains("payload.at_utc"));
    let r: Report = s.admin().get_ok("/api/v1/reports?by=owner&since=7d").await;
    let cpu: f64 = r.rows.iter().map(|x| x.cpu_s).sum();
    assert_eq!(cpu, (2 * 70 * 60) as f64, "only the accepted, counted record: {r:?}");

    // A lease assigned a moment ago cannot have used 10 hours of CPU.
    let hb = json!({"state": "idle", "available": true, "budget_left": 5, "free_mem_bytes": 1u64 << 30, "base_speed": 1.0, "current_speed": 1.0, "cpus": 2});
    let _: HeartbeatAck = two.post_ok("/api/v1/heartbeat", hb).await;
    let j: Job = s.admin().post_ok("/api/v1/jobs", job("/bin/true")).await;
    let l = two.lease(1 << 30, 5000).await.expect("the job");
    assert_eq!(l.job_id, j.id);
    let (st, v) = two.complete(&l, 36_000.0, 0.0).await;
    assert_eq!(st, 400, "{v}");
    assert!(v["error"].as_str().unwrap().contains("user_cpu_s + sys_cpu_s"), "{v}");
    let (st, v) = two.complete(&l, 1.5, 0.5).await;
    assert_eq!(st, 200, "{v}");
    // A heartbeat's numbers too.
    for (field, bad) in [
        ("cpus", json!(0)),
        ("cpus", json!(100_000)),
        ("free_mem_bytes", json!(1u64 << 60)),
        ("current_speed", json!(2.0)),
        ("budget_left", json!(1000)),
    ] {
        let mut hb =
            json!({"state": "idle", "available": true, "budget_left": 5, "free_mem_bytes": 1, "base_speed": 1.0, "current_speed": 1.0});
        hb[field] = bad;
        let (st, v) = two.post("/api/v1/heartbeat", hb).await;
        assert_eq!(st, 400, "{field}: {v}");
        assert!(v["error"].as_str().unwrap().contains(field), "{field}: {v}");
    }
    // A new machine says how many CPUs it has.
    let (st, v) = s.client("").post("/api/v1/enrol", json!({"token": t.token, "owner": "bob", "machine": "box"})).await;
    assert_eq!(st, 400, "{v}");
    assert!(v["error"].as_str().unwrap().contains("cpus"), "{v}");
    s.stop().await;
}

/// One generated ledger record (some of them nonsense on purpose).
#[derive(Clone, Debug)]
struct Gen {
    agent: usize,
    /// `None`: the agent's next sequence number; else a replayed or extreme one.
    seq: Option<i64>,
    kind: &'static str,
    day: Value,
    at: Value,
    cpu: Value,
    wall: Value,
    number: Value,
}

fn extreme_number() -> impl Strategy<Value = Value> {
    prop_oneof![
        4 => (0u64..5_000_000_000).prop_map(Value::from),
        2 => (0u64..100_000_000_000_000).prop_map(Value::from),
        1 => Just(json!(0)),
        1 => Just(json!(i64::MAX)),
        1 => Just(json!(u64::MAX)),
        1 => Just(json!(-1)),
        1 => Just(json!(1.5)),
        1 => Just(json!("12")),
        1 => Just(Value::Null),
    ]
}

/// A record an honest agent could send: a recent day, a time within it that has passed
/// (or none), amounts from nothing to large.
fn plausible() -> impl Strategy<Value = Gen> {
    let kinds = prop_oneof![6 => Just("donation"), 2 => Just("interruption"), 1 => Just("linger"), 1 => Just("note")];
    (0usize..3, kinds, 0i64..12, 0.0f64..1.0, prop::bool::ANY, 0u64..20_000_000_000, 0u64..40_000_000, 1u64..6).prop_map(
        |(agent, kind, days_ago, within, with_at, cpu, wall, number)| {
            let day = today() - chrono::Duration::days(days_ago);
            let noon = day.and_hms_opt(12, 0, 0).unwrap().and_utc();
            let at =
                (noon - chrono::Duration::hours(10) + chrono::Duration::seconds((within * 20.0 * 3600.0) as i64)).min(chrono::Utc::now());
            Gen {
                agent,
                seq: None,
                kind,
                day: json!(day.to_string()),
                at: if with_at { json!(at.to_rfc3339()) } else { Value::Null },
                cpu: json!(cpu),
                wall: json!(wall),
                number: json!(number),
            }
        },
    )
}

/// A record with something odd or extreme in it: days that cannot be, times in the
/// future or unreadable, numbers past `i64`, negative, fractional, text; replayed and
/// impossible sequence numbers.
fn extreme() -> impl Strategy<Value = Gen> {
    let days = prop_oneof![
        3 => (0i64..12).prop_map(|d| json!((today() - chrono::Duration::days(d)).to_string())),
        1 => Just(json!("2999-01-01")),
        1 => Just(json!("1970-01-01")),
        1 => Just(json!("yesterday")),
        1 => Just(Value::Null),
    ];
    let ats = prop_oneof![
        2 => Just(Value::Null),
        2 => (0i64..20 * 86_400).prop_map(|s| json!((chrono::Utc::now() - chrono::Duration::seconds(s)).to_rfc3339())),
        1 => Just(json!((chrono::Utc::now() + chrono::Duration::days(2)).to_rfc3339())),
        1 => Just(json!("not a time")),
    ];
    let seqs =
        prop_oneof![4 => Just(None), 1 => (1i64..40).prop_map(Some), 1 => prop_oneof![Just(0i64), Just(-1), Just(i64::MAX)].prop_map(Some)];
    let kinds = prop_oneof![6 => Just("donation"), 2 => Just("interruption"), 1 => Just("linger"), 1 => Just("note")];
    let numbers =
        prop_oneof![2 => (1u64..6).prop_map(Value::from), 1 => Just(json!(0)), 1 => Just(json!(1000)), 1 => Just(json!(u64::MAX))];
    (0usize..3, seqs, kinds, days, ats, extreme_number(), extreme_number(), numbers)
        .prop_map(|(agent, seq, kind, day, at, cpu, wall, number)| Gen { agent, seq, kind, day, at, cpu, wall, number })
}

fn gen_record() -> impl Strategy<Value = Gen> {
    prop_oneof![4 => plausible(), 1 => extreme()]
}

/// What the model expects a report to show per (owner, day): CPU-µs, wall-ms, linger-ms,
/// interruptions; summed as integers (in i128: no overflow in the model either).
type Sums = BTreeMap<(String, String), (i128, i128, i128, i128)>;

fn payload(g: &Gen) -> Value {
    let mut p = serde_json::Map::new();
    p.insert("guest".into(), json!("g1"));
    for (k, v) in [("day", &g.day), ("at_utc", &g.at)] {
        if !v.is_null() {
            p.insert(k.into(), v.clone());
        }
    }
    let (a, b) = match g.kind {
        "interruption" => ("number", "limit"),
        "linger" => ("linger_ms", "unused"),
        _ => ("cpu_us", "wall_ms"),
    };
    let (va, vb) = if g.kind == "interruption" { (&g.number, &g.number) } else { (&g.cpu, &g.wall) };
    p.insert(a.into(), va.clone());
    p.insert(b.into(), vb.clone());
    Value::Object(p)
}

/// The agents of the property test: (owner, client, next seq, stored seqs).
struct Fleet {
    agents: Vec<(String, Client, i64, std::collections::BTreeSet<i64>)>,
    sums: Sums,
    accepted: usize,
    refused: usize,
}

impl Fleet {
    /// Posts `batch` as agent `a`'s; on 200, adds the new, counted records to the model.
    async fn post(&mut self, a: usize, batch: Vec<(i64, &Gen)>) {
        let records: Vec<Value> = batch.iter().map(|(seq, g)| json!({"seq": seq, "kind": g.kind, "payload": payload(g)})).collect();
        let (st, v) = self.agents[a].1.post("/api/v1/records", json!({ "records": records })).await;
        assert!(st == 200 || st == 400, "every batch answers 200 or 400, not {st}: {v}");
        if st == 400 {
            self.refused += 1;
            let msg = v["error"].as_str().unwrap_or_default();
            assert!(["payload.", "seq", "kind", "payload"].iter().any(|f| msg.contains(f)), "a refusal names the field: {msg}");
            return;
        }
        self.accepted += 1;
        let ack: RecordsAck = serde_json::from_value(v).unwrap();
        let owner = self.agents[a].0.clone();
        for ((seq, g), r) in batch.iter().zip(&records) {
            if !self.agents[a].3.insert(*seq) {
                continue; // stored before (or earlier in this batch): left as it was
            }
            if ack.uncounted.contains(seq) || !matches!(g.kind, "donation" | "interruption" | "linger") {
                continue;
            }
            let day = r["payload"]["day"].as_str().unwrap().to_string();
            let e = self.sums.entry((owner.clone(), day)).or_default();
            let n = |k: &str| i128::from(r["payload"][k].as_u64().unwrap_or(0));
            match g.kind {
                "donation" => {
                    e.0 += n("cpu_us");
                    e.1 += n("wall_ms");
                }
                "linger" => e.2 += n("linger_ms"),
                _ => e.3 += 1,
            }
        }
    }

    /// Every report (the admin's by owner and by machine, each owner's own) answers 200
    /// and shows what the model holds.
    async fn check_reports(&self, admin: &Client) {
        let (st, v) = admin.get("/api/v1/reports?by=owner&since=30d").await;
        assert_eq!(st, 200, "{v}");
        let r: Report = serde_json::from_value(v).unwrap();
        self.same(&r.rows, None);
        let (st, _) = admin.get("/api/v1/reports?by=machine&since=30d&period=week").await;
        assert_eq!(st, 200);
        for owner in ["alice", "bob"] {
            let k: ApiKey = admin.post_ok("/api/v1/keys", json!({"role": "owner", "owner": owner})).await;
            let c = Client { secret: k.key, ..admin.clone() };
            let r: Report = c.get_ok("/api/v1/reports?by=owner&since=30d").await;
            self.same(&r.rows, Some(owner));
            let (st, _) = c.get("/api/v1/reports?by=owner&since=30d&format=csv").await;
            assert_eq!(st, 200);
        }
    }

    fn same(&self, rows: &[ReportRow], only: Option<&str>) {
        let close = |a: f64, b: i128, unit: f64| (a - b as f64 / unit).abs() <= 1e-9 * (1.0 + a.abs());
        for ((owner, day), (cpu, wall, linger, n)) in self.sums.iter().filter(|((o, _), _)| only.is_none_or(|x| x == o)) {
            let row = rows.iter().find(|r| &r.key == owner && &r.period == day).cloned().unwrap_or_default();
            assert!(close(row.cpu_s, *cpu, 1e6), "{owner} {day}: cpu_s {} != {cpu} µs", row.cpu_s);
            assert!(close(row.wall_s, *wall, 1e3), "{owner} {day}: wall_s {} != {wall} ms", row.wall_s);
            assert!(close(row.linger_s, *linger, 1e3), "{owner} {day}: linger_s {} != {linger} ms", row.linger_s);
            assert_eq!(i128::from(row.interruptions), *n, "{owner} {day}: interruptions");
        }
        let expected: f64 = self.sums.iter().filter(|((o, _), _)| only.is_none_or(|x| x == o)).map(|(_, v)| v.0 as f64 / 1e6).sum();
        let shown: f64 = rows.iter().map(|r| r.cpu_s).sum();
        assert!((expected - shown).abs() <= 1e-6 * (1.0 + expected), "no row the model lacks: {shown} != {expected}");
    }
}

fn property_on(b: Backend) {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let Some((_db, s)) = rt.block_on(server(b)) else { return };
    let mut fleet = rt.block_on(async {
        let mut agents = Vec::new();
        // Two machines enrolled 10 days ago (1 and 2 CPUs), one that joins now (2 CPUs).
        for (owner, machine, cpus) in [("alice", "one", 1), ("alice", "two", 2)] {
            let t: JoinToken = s.admin().post_ok("/api/v1/join-tokens", json!({})).await;
            let e: Enrolment =
                s.client("").post_ok("/api/v1/enrol", json!({"token": t.token, "owner": owner, "machine": machine, "cpus": cpus})).await;
            agents.push((owner.to_string(), s.client(&e.secret), 1, Default::default()));
        }
        backdate_enrolment(&s.db, 10 * 86_400_000).await;
        let t: JoinToken = s.admin().post_ok("/api/v1/join-tokens", json!({})).await;
        let e: Enrolment =
            s.client("").post_ok("/api/v1/enrol", json!({"token": t.token, "owner": "bob", "machine": "new", "cpus": 2})).await;
        agents.push(("bob".to_string(), s.client(&e.secret), 1, Default::default()));
        Fleet { agents, sums: Sums::new(), accepted: 0, refused: 0 }
    });
    let cases = std::env::var("LULL_TRUST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(48);
    let mut runner =
        proptest::test_runner::TestRunner::new(ProptestConfig { cases, failure_persistence: None, ..ProptestConfig::default() });
    let batches = proptest::collection::vec(proptest::collection::vec(gen_record(), 1..5), 1..6);
    let admin = s.admin();
    let fleet = tokio::sync::Mutex::new(&mut fleet);
    runner
        .run(&batches, |batches| {
            rt.block_on(async {
                let mut f = fleet.lock().await;
                for batch in &batches {
                    // A batch is one agent's: the first record's agent sends it.
                    let a = batch[0].agent;
                    let with_seqs: Vec<(i64, &Gen)> = batch
                        .iter()
                        .map(|g| {
                            let seq = g.seq.unwrap_or_else(|| {
                                f.agents[a].2 += 1;
                                f.agents[a].2
                            });
                            (seq, g)
                        })
                        .collect();
                    f.post(a, with_seqs).await;
                }
                f.check_reports(&admin).await;
            });
            Ok(())
        })
        .unwrap();
    // Something was accepted and something refused, or the test proved little.
    let f = fleet.into_inner();
    assert!(f.sums.values().any(|v| v.0 > 0), "no donation was accepted: {:?}", f.sums);
    assert!(f.refused > 0 && f.accepted > 0, "accepted {} batches, refused {}", f.accepted, f.refused);
    eprintln!("{b:?}: {} batches accepted, {} refused; {} (owner, day) sums checked", f.accepted, f.refused, f.sums.len());
    rt.block_on(s.stop());
}

#[test]
fn random_and_extreme_records_never_break_a_report_sqlite() {
    property_on(Backend::Sqlite);
}

#[test]
fn random_and_extreme_records_never_break_a_report_postgres() {
    property_on(Backend::Postgres);
}
