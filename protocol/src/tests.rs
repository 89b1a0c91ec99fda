//! The wire format, pinned: each type against a JSON literal captured from what the
//! coordinator and the agent exchanged before the types moved into this crate. A change
//! to a serde attribute (a rename, a default, a skipped field, unknown fields allowed)
//! that alters the JSON fails here.

use super::*;
use serde::de::DeserializeOwned;

/// `json` reads as a `T` that writes back as exactly `json`, and `value` writes as `json`.
fn pinned<T: Serialize + DeserializeOwned>(value: &T, json: &str) {
    let parsed: T = serde_json::from_str(json).unwrap_or_else(|e| panic!("{json} does not read: {e}"));
    assert_eq!(serde_json::to_string(&parsed).unwrap(), json, "read and written back");
    assert_eq!(serde_json::to_string(value).unwrap(), json, "written from Rust");
}

/// `json` is refused (an unknown field where unknown fields are denied, a missing one).
fn refused<T: DeserializeOwned>(json: &str) {
    assert!(serde_json::from_str::<T>(json).is_err(), "{json} was accepted");
}

fn spec() -> JobSpec {
    JobSpec {
        command: "/bin/sh".into(),
        args: vec!["-c".into(), "true".into()],
        env: BTreeMap::from([("A".into(), "1".into())]),
        inputs: BTreeMap::from([("in.txt".into(), "hello\n".into())]),
    }
}

fn record() -> Record {
    Record {
        seq: 1,
        kind: "donation".into(),
        payload: serde_json::json!({"guest": "g1", "day": "2024-05-01", "cpu_us": 1500001, "wall_ms": 2000}),
    }
}

const RECORD: &str = r#"{"seq":1,"kind":"donation","payload":{"cpu_us":1500001,"day":"2024-05-01","guest":"g1","wall_ms":2000}}"#;

#[test]
fn error_body() {
    pinned(&ErrorBody { error: "no such task".into(), code: None }, r#"{"error":"no such task"}"#);
    pinned(
        &ErrorBody { error: "replaced".into(), code: Some(error_code::CREDENTIAL_REPLACED.into()) },
        r#"{"error":"replaced","code":"credential_replaced"}"#,
    );
    // Unknown fields are tolerated: the agent reads `error` from any refusal.
    let e: ErrorBody = serde_json::from_str(r#"{"error":"x","detail":1}"#).unwrap();
    assert_eq!(e.error, "x");
}

#[test]
fn enrolment() {
    let req = EnrolRequest { token: "lull_join_ab12".into(), owner: "alice".into(), machine: "desk".into(), replace: false, cpus: None };
    pinned(&req, r#"{"token":"lull_join_ab12","owner":"alice","machine":"desk"}"#);
    let req = EnrolRequest { replace: true, ..req };
    pinned(&req, r#"{"token":"lull_join_ab12","owner":"alice","machine":"desk","replace":true}"#);
    let req = EnrolRequest { cpus: Some(8), ..req };
    pinned(&req, r#"{"token":"lull_join_ab12","owner":"alice","machine":"desk","replace":true,"cpus":8}"#);
    // Replacing with a credential needs no token.
    let r: EnrolRequest = serde_json::from_str(r#"{"owner":"o","machine":"m","replace":true}"#).unwrap();
    assert_eq!(r.token, "");
    refused::<EnrolRequest>(r#"{"token":"t","owner":"o","machine":"m","extra":1}"#);
    pinned(&Enrolment { agent_id: "a1b2".into(), secret: "lull_agent_cd34".into() }, r#"{"agent_id":"a1b2","secret":"lull_agent_cd34"}"#);
}

#[test]
fn heartbeat_with_and_without_the_limit() {
    let hb = Heartbeat {
        state: "donating".into(),
        available: true,
        budget_left: 2,
        free_mem_bytes: 6442450944,
        base_speed: 812.5,
        current_speed: 406.25,
        interruption_limit: Some(3),
        idle_for_s: None,
        owner_load: Vec::new(),
        memory: None,
        busy: None,
        cpus: None,
    };
    pinned(
        &hb,
        r#"{"state":"donating","available":true,"budget_left":2,"free_mem_bytes":6442450944,"base_speed":812.5,"current_speed":406.25,"interruption_limit":3}"#,
    );
    // Older agents leave the limit out; it is then not written back either.
    pinned(
        &Heartbeat { interruption_limit: None, ..hb.clone() },
        r#"{"state":"donating","available":true,"budget_left":2,"free_mem_bytes":6442450944,"base_speed":812.5,"current_speed":406.25}"#,
    );
    pinned(
        &Heartbeat { interruption_limit: None, cpus: Some(4), ..hb.clone() },
        r#"{"state":"donating","available":true,"budget_left":2,"free_mem_bytes":6442450944,"base_speed":812.5,"current_speed":406.25,"cpus":4}"#,
    );
    refused::<Heartbeat>(
        r#"{"state":"idle","available":true,"budget_left":2,"free_mem_bytes":1,"base_speed":1.0,"current_speed":1.0,"cpu":1}"#,
    );
    // Agents since the pool's reasons say what keeps their machine busy.
    pinned(
        &Heartbeat { state: "owner_active".into(), available: false, busy: Some("owner_cpu".into()), ..hb.clone() },
        r#"{"state":"owner_active","available":false,"budget_left":2,"free_mem_bytes":6442450944,"base_speed":812.5,"current_speed":406.25,"interruption_limit":3,"busy":"owner_cpu"}"#,
    );
    pinned(&HeartbeatAck { next_heartbeat_s: 10 }, r#"{"next_heartbeat_s":10}"#);
}

#[test]
fn heartbeat_with_a_memory_report() {
    let hb = Heartbeat {
        state: "donating".into(),
        available: true,
        budget_left: 2,
        free_mem_bytes: 1000,
        base_speed: 1.0,
        current_speed: 1.0,
        interruption_limit: None,
        idle_for_s: None,
        owner_load: Vec::new(),
        memory: Some(MemoryReport {
            available_bytes: 1000,
            guest_memory_bytes: 800,
            pressure: false,
            guests: vec![GuestMemory {
                job_id: 7,
                rank: 0,
                working_set_bytes: 300,
                major_faults_per_s: 1.5,
                age_s: 12.0,
                io_bytes_per_s: None,
            }],
        }),
        busy: None,
        cpus: None,
    };
    pinned(
        &hb,
        r#"{"state":"donating","available":true,"budget_left":2,"free_mem_bytes":1000,"base_speed":1.0,"current_speed":1.0,"memory":{"available_bytes":1000,"guest_memory_bytes":800,"pressure":false,"guests":[{"job_id":7,"rank":0,"working_set_bytes":300,"major_faults_per_s":1.5,"age_s":12.0}]}}"#,
    );
    refused::<MemoryReport>(r#"{"available_bytes":1,"guest_memory_bytes":1,"swap":3}"#);
}

#[test]
fn lease_request_and_lease() {
    pinned(&LeaseRequest { free_mem_bytes: 1073741824, wait_ms: 20000 }, r#"{"free_mem_bytes":1073741824,"wait_ms":20000}"#);
    let r: LeaseRequest = serde_json::from_str(r#"{"free_mem_bytes":5}"#).unwrap();
    assert_eq!(r.wait_ms, 0, "wait_ms defaults to no wait");
    refused::<LeaseRequest>(r#"{"free_mem_bytes":5,"wait_ms":0,"cpus":1}"#);
    pinned(&spec(), r#"{"command":"/bin/sh","args":["-c","true"],"env":{"A":"1"},"inputs":{"in.txt":"hello\n"}}"#);
    let lease = Lease {
        job_id: 7,
        rank: 1,
        lease: 3,
        expires_ms: 1700000060000,
        machines: 2,
        program: "sh".into(),
        spec: spec(),
        mem_bytes: 67108864,
        checkpointable: false,
    };
    pinned(
        &lease,
        r#"{"job_id":7,"rank":1,"lease":3,"expires_ms":1700000060000,"machines":2,"program":"sh","spec":{"command":"/bin/sh","args":["-c","true"],"env":{"A":"1"},"inputs":{"in.txt":"hello\n"}},"mem_bytes":67108864,"checkpointable":false}"#,
    );
}

#[test]
fn progress_and_its_ack() {
    pinned(&Progress { lease: 3, fraction: None, output: None }, r#"{"lease":3,"fraction":null}"#);
    pinned(&Progress { lease: 3, fraction: Some(0.5), output: None }, r#"{"lease":3,"fraction":0.5}"#);
    // Agents since `lull jobs output --follow` ship what the guest wrote so far.
    pinned(
        &Progress {
            lease: 3,
            fraction: None,
            output: Some(Output { stdout: "step 1\n".into(), stderr: String::new(), stdout_bytes: 7, stderr_bytes: 0 }),
        },
        r#"{"lease":3,"fraction":null,"output":{"stdout":"step 1\n","stderr":"","stdout_bytes":7,"stderr_bytes":0}}"#,
    );
    let p: Progress = serde_json::from_str(r#"{"lease":3}"#).unwrap();
    assert_eq!((p.lease, p.fraction), (3, None), "fraction is optional");
    refused::<Progress>(r#"{"lease":3,"done":true}"#);
    pinned(
        &ProgressAck { expires_ms: 1700000075000, cancel: false, halt: true },
        r#"{"expires_ms":1700000075000,"cancel":false,"halt":true}"#,
    );
    // A coordinator from before gang halts sends no `halt`: not halted.
    let a: ProgressAck = serde_json::from_str(r#"{"expires_ms":1700000075000,"cancel":false}"#).unwrap();
    assert!(!a.halt);
}

#[test]
fn migration_request_and_answer() {
    pinned(
        &MigrateRequest { lease: 4, owner_utilization: 0.5, owner_busy_for_s: 90.0, migration_cost_s: 2.5, cpu_s: 120.25 },
        r#"{"lease":4,"owner_utilization":0.5,"owner_busy_for_s":90.0,"migration_cost_s":2.5,"cpu_s":120.25}"#,
    );
    refused::<MigrateRequest>(r#"{"lease":4,"owner_utilization":0.5,"owner_busy_for_s":90.0,"migration_cost_s":2.5}"#);
    refused::<MigrateRequest>(r#"{"lease":4,"owner_utilization":0.5,"owner_busy_for_s":90.0,"migration_cost_s":2.5,"cpu_s":1.0,"x":1}"#);
    pinned(
        &MigrateAnswer { migrate: true, reason: "migrate: free".into(), stay_s: Some(770.0), move_s: Some(260.0) },
        r#"{"migrate":true,"reason":"migrate: free","stay_s":770.0,"move_s":260.0}"#,
    );
    pinned(
        &MigrateAnswer { migrate: false, reason: "stay: none".into(), stay_s: None, move_s: None },
        r#"{"migrate":false,"reason":"stay: none"}"#,
    );
}

#[test]
fn completion_and_its_ack() {
    pinned(
        &Completion { lease: 3, exit_code: 0, outcome: None, user_cpu_s: 812.5, sys_cpu_s: 3.25, output: None },
        r#"{"lease":3,"exit_code":0,"user_cpu_s":812.5,"sys_cpu_s":3.25}"#,
    );
    pinned(
        &Completion {
            lease: 3,
            exit_code: 0,
            outcome: None,
            user_cpu_s: 0.5,
            sys_cpu_s: 0.25,
            output: Some(Output { stdout: "hello\n".into(), stderr: String::new(), stdout_bytes: 6, stderr_bytes: 0 }),
        },
        r#"{"lease":3,"exit_code":0,"user_cpu_s":0.5,"sys_cpu_s":0.25,"output":{"stdout":"hello\n","stderr":"","stdout_bytes":6,"stderr_bytes":0}}"#,
    );
    refused::<Completion>(r#"{"lease":3,"exit_code":0,"user_cpu_s":1.0}"#);
    // Agents since job outcomes say how the guest ended.
    pinned(
        &Completion {
            lease: 3,
            exit_code: 127,
            outcome: Some(TaskOutcome::ProgramNotFound { program: "nosuch".into() }),
            user_cpu_s: 0.0,
            sys_cpu_s: 0.0,
            output: None,
        },
        r#"{"lease":3,"exit_code":127,"outcome":{"kind":"program_not_found","program":"nosuch"},"user_cpu_s":0.0,"sys_cpu_s":0.0}"#,
    );
    pinned(&CompletionAck { counted: true }, r#"{"counted":true}"#);
}

#[test]
fn task_release_task_and_gang() {
    pinned(
        &TaskRelease { lease: 3, reason: Some("evicted: the owner returned".into()), not_started: false },
        r#"{"lease":3,"reason":"evicted: the owner returned"}"#,
    );
    pinned(&TaskRelease { lease: 3, reason: None, not_started: false }, r#"{"lease":3,"reason":null}"#);
    pinned(&TaskRelease { lease: 3, reason: None, not_started: true }, r#"{"lease":3,"reason":null,"not_started":true}"#);
    refused::<TaskRelease>(r#"{"lease":3,"why":"x"}"#);
    pinned(
        &Task {
            rank: 0,
            state: "completed".into(),
            agent_id: Some("a1b2".into()),
            machine: Some("desk".into()),
            lease: 3,
            attempts: 1,
            retries_used: 0,
            evictions: 0,
            exit_code: Some(0),
            signal: None,
            reason: None,
            user_cpu_s: Some(812.5),
            sys_cpu_s: Some(3.25),
        },
        r#"{"rank":0,"state":"completed","agent_id":"a1b2","machine":"desk","lease":3,"attempts":1,"retries_used":0,"evictions":0,"exit_code":0,"signal":null,"reason":null,"user_cpu_s":812.5,"sys_cpu_s":3.25}"#,
    );
    // What an older coordinator answers an agent's release with still reads.
    let t: Task = serde_json::from_str(
        r#"{"rank":0,"state":"queued","agent_id":null,"lease":3,"attempts":0,"evictions":1,"exit_code":null,"user_cpu_s":null,"sys_cpu_s":null}"#,
    )
    .unwrap();
    assert_eq!((t.machine, t.signal, t.reason, t.retries_used), (None, None, None, 0));
    pinned(
        &Task {
            rank: 1,
            state: "queued".into(),
            agent_id: None,
            machine: None,
            lease: 0,
            attempts: 0,
            retries_used: 0,
            evictions: 0,
            exit_code: None,
            signal: Some("SIGKILL".into()),
            reason: Some("killed by SIGKILL".into()),
            user_cpu_s: None,
            sys_cpu_s: None,
        },
        r#"{"rank":1,"state":"queued","agent_id":null,"machine":null,"lease":0,"attempts":0,"retries_used":0,"evictions":0,"exit_code":null,"signal":"SIGKILL","reason":"killed by SIGKILL","user_cpu_s":null,"sys_cpu_s":null}"#,
    );
    pinned(
        &Gang { machines: 2, leased: 1, ready: false, agents: vec![Some("a1b2".into()), None] },
        r#"{"machines":2,"leased":1,"ready":false,"agents":["a1b2",null]}"#,
    );
}

#[test]
fn records_and_their_ack() {
    pinned(&record(), RECORD);
    refused::<Record>(r#"{"seq":1,"kind":"donation","payload":{},"at":0}"#);
    pinned(&RecordBatch { records: vec![record()] }, &format!(r#"{{"records":[{RECORD}]}}"#));
    refused::<RecordBatch>(r#"{"records":[],"agent":"a"}"#);
    pinned(&RecordsAck { acked_through: 1, stored: 1, uncounted: Vec::new() }, r#"{"acked_through":1,"stored":1}"#);
    pinned(&RecordsAck { acked_through: 3, stored: 2, uncounted: vec![2] }, r#"{"acked_through":3,"stored":2,"uncounted":[2]}"#);
}

#[test]
fn output_tails_are_capped_text_without_nul() {
    assert_eq!(output_tail(b"hello\n"), "hello\n");
    assert_eq!(output_tail(b"a\0b\xff"), "a\u{FFFD}b\u{FFFD}");
    let big: Vec<u8> = (0..OUTPUT_TAIL_MAX * 3).map(|i| b'a' + (i % 26) as u8).collect();
    let t = output_tail(&big);
    assert_eq!(t.len(), OUTPUT_TAIL_MAX);
    assert!(big.ends_with(t.as_bytes()), "the tail, not the head");
    // Invalid bytes grow to three each as U+FFFD: still within the cap, cut at a boundary.
    let t = output_tail(&vec![0xff; OUTPUT_TAIL_MAX + 10]);
    assert!(t.len() <= OUTPUT_TAIL_MAX && t.chars().all(|c| c == '\u{FFFD}'));
}
