//! The coordinator client's own tests: bounded answers, refusals, lease specs, poll spread, memory rates.

use crate::driver_link::{HealthSender, LinkHealth};
use crate::guest::GuestDir;
use lull_protocol::limits::{INPUTS_MAX, VALUE_MAX};
use lull_protocol::{Lease, CHECKPOINT_MAX};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use super::http::{ClientError, CoordinatorClient, Credentials, ANSWER_MAX};

use super::machine::MemoryReporter;

use super::guest_io::guest_spec;

use super::link::{lease_wait, note_refused, LEASE_WAIT};
use crate::guest::{GuestMemoryReading, GuestsMemory};

/// A one-shot HTTP server on a real socket that answers every request with `head`
/// and then `body_bytes` bytes of body (chunked when `head` declares no length).
async fn serve(head: &'static str, body_bytes: usize) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut req = vec![0u8; 64 << 10];
                let _ = s.read(&mut req).await;
                let _ = s.write_all(head.as_bytes()).await;
                let chunked = head.contains("chunked");
                let chunk = vec![b' '; 64 << 10];
                let mut left = body_bytes;
                while left > 0 {
                    let n = left.min(chunk.len());
                    let framed = if chunked {
                        [format!("{n:x}\r\n").into_bytes(), chunk[..n].to_vec(), b"\r\n".to_vec()].concat()
                    } else {
                        chunk[..n].to_vec()
                    };
                    if s.write_all(&framed).await.is_err() {
                        return;
                    }
                    left -= n;
                }
                if chunked {
                    let _ = s.write_all(b"0\r\n\r\n").await;
                }
            });
        }
    });
    url
}

fn client(url: &str) -> CoordinatorClient {
    CoordinatorClient::new(&Credentials { url: url.into(), agent_id: "a".into(), secret: "s".into(), machine: None, owner: None })
        .expect("client")
}

fn lease() -> Lease {
    serde_json::from_str(r#"{"job_id":7,"rank":0,"lease":3,"expires_ms":1,"machines":1,"program":"sh","spec":{"command":"/bin/sh","args":[],"env":{},"inputs":{}},"mem_bytes":0,"checkpointable":true}"#).expect("lease")
}

#[tokio::test]
async fn answers_beyond_the_protocols_limits_are_refused_unread() {
    // Declared too large: refused before a byte of the body is read.
    let url = serve("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2000000\r\n\r\n", 0).await;
    let e = client(&url).lease(1, Duration::from_millis(1)).await.expect_err("too large");
    assert!(matches!(e, ClientError::TooLarge { size: Some(2_000_000), .. }), "{e:?}");
    // Sent chunked past the limit: refused once the limit is passed.
    let url = serve("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n", ANSWER_MAX + 1).await;
    let e = client(&url).lease(1, Duration::from_millis(1)).await.expect_err("too large");
    assert!(matches!(e, ClientError::TooLarge { size: None, max } if max == ANSWER_MAX), "{e:?}");
    assert!(e.to_string().contains(&ANSWER_MAX.to_string()), "{e}");
    // A checkpoint may be 64 MiB, not a byte more.
    let url =
        serve("HTTP/1.1 200 OK\r\ncontent-type: application/octet-stream\r\ntransfer-encoding: chunked\r\n\r\n", CHECKPOINT_MAX + 1).await;
    let e = client(&url).get_checkpoint(&lease()).await.expect_err("too large");
    assert!(matches!(e, ClientError::TooLarge { max: CHECKPOINT_MAX, .. }), "{e:?}");
    let url = serve("HTTP/1.1 200 OK\r\ncontent-type: application/octet-stream\r\ncontent-length: 1000\r\n\r\n", 1000).await;
    assert_eq!(client(&url).get_checkpoint(&lease()).await.expect("a checkpoint").map(|d| d.len()), Some(1000));
}

#[tokio::test]
async fn a_401_is_a_refused_credential_with_the_coordinators_reason_and_code() {
    let body = r#"{"error":"unknown credential","code":"machine_removed"}"#;
    let head = format!("HTTP/1.1 401 Unauthorized\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}", body.len());
    let url = serve(Box::leak(head.into_boxed_str()), 0).await;
    let hb = serde_json::json!({"state": "idle", "available": true, "budget_left": 5, "free_mem_bytes": 1, "base_speed": 1.0, "current_speed": 1.0});
    let e = client(&url).heartbeat(&serde_json::from_value(hb).expect("hb")).await.expect_err("refused");
    assert!(e.credential_refused(), "{e:?}");
    assert!(
        matches!(&e, ClientError::Refused { message, code: Some(c), .. } if message == "unknown credential" && c == "machine_removed"),
        "{e:?}"
    );
    let health: HealthSender = Arc::new(tokio::sync::watch::channel(LinkHealth::Working).0);
    note_refused(&health, &url, &e);
    let a = health.borrow().alert().expect("said");
    assert!(a.message.contains("unknown credential") && a.message.contains(&url), "{a:?}");
    assert!(a.action.as_deref().is_some_and(|x| x.contains("removed this machine") && x.contains("--token")), "{a:?}");
    let replaced = LinkHealth::refused(&url, "replaced", Some("credential_replaced")).alert().expect("said");
    assert!(replaced.action.as_deref().is_some_and(|x| x.contains("admin key")), "{replaced:?}");
    assert_eq!(LinkHealth::Working.alert(), None);
}

#[test]
fn a_lease_with_too_many_or_too_large_inputs_is_not_written() {
    let root = tempfile::tempdir().expect("dir");
    let mut t = lease();
    t.spec.inputs = (0..=INPUTS_MAX).map(|i| (format!("in{i}"), String::new())).collect();
    let e = guest_spec(&t, root.path()).expect_err("too many");
    assert!(e.contains("65 input files") && e.contains("64"), "{e}");
    t.spec.inputs = [("big".to_string(), "x".repeat(VALUE_MAX + 1))].into();
    let e = guest_spec(&t, root.path()).expect_err("too large");
    assert!(e.contains("\"big\"") && e.contains(&VALUE_MAX.to_string()), "{e}");
    assert!(!root.path().join("jobs").exists(), "nothing written");
    t.spec.inputs = [("ok".to_string(), "x".repeat(VALUE_MAX))].into();
    let spec = guest_spec(&t, root.path()).expect("at the limit");
    assert_eq!(std::fs::metadata(GuestDir::new(spec.job_dir.expect("dir")).work().join("ok")).expect("written").len(), VALUE_MAX as u64);
}

#[test]
fn lease_polls_wait_15_to_25_s_spread_evenly_and_within_the_coordinators_limit() {
    let waits: Vec<u64> =
        (0..10_000u64).map(|i| lease_wait(i.wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(17)).as_millis() as u64).collect();
    assert_eq!((lease_wait(0), lease_wait(10_000)), (Duration::from_secs(15), Duration::from_secs(25)));
    assert!(waits.iter().all(|w| (15_000..=25_000).contains(w)), "outside 15–25 s");
    assert!(*waits.iter().max().unwrap() <= lull_protocol::MAX_LEASE_WAIT_MS as u64);
    // Evenly: each 2.5-s quarter of the range holds about a quarter of the polls, and
    // the mean is the fixed wait it replaces (so the rate of polls is unchanged).
    for q in 0..4u64 {
        let n = waits.iter().filter(|w| (*w - 15_000) * 4 / 10_001 == q).count();
        assert!((2_200..=2_800).contains(&n), "quarter {q} holds {n} of 10,000");
    }
    let mean = waits.iter().sum::<u64>() as f64 / waits.len() as f64;
    assert!((mean - LEASE_WAIT.as_millis() as f64).abs() < 200.0, "mean {mean} ms");
}

#[test]
fn the_memory_report_names_tasks_and_turns_counters_into_rates() {
    let reading = |age_ms, faults, io| GuestsMemory {
        available_bytes: 5 << 30,
        guest_memory_bytes: 2 << 30,
        pressure: false,
        guests: vec![
            GuestMemoryReading { id: "g1".into(), working_set_bytes: 64 << 20, major_faults: faults, io_bytes: io, age_ms },
            GuestMemoryReading { id: "local".into(), working_set_bytes: 1, major_faults: 0, io_bytes: None, age_ms: 1 },
        ],
    };
    let tasks: HashMap<String, (i64, u32)> = [("g1".to_string(), (7, 0))].into();
    let mut r = MemoryReporter::default();
    // First report: since the guest started (10 s, 50 faults, 1000 bytes).
    let a = r.report(&reading(10_000, 50, Some(1000)), &tasks);
    assert_eq!((a.available_bytes, a.guest_memory_bytes, a.guests.len()), (5 << 30, 2 << 30, 1), "only leased tasks' guests: {a:?}");
    let g = &a.guests[0];
    assert_eq!((g.job_id, g.rank, g.working_set_bytes, g.age_s), (7, 0, 64 << 20, 10.0));
    assert_eq!((g.major_faults_per_s, g.io_bytes_per_s), (5.0, Some(100.0)));
    // Then since the previous report: 30 faults and 600 bytes in 2 s.
    let b = r.report(&reading(12_000, 80, Some(1600)), &tasks);
    assert_eq!((b.guests[0].major_faults_per_s, b.guests[0].io_bytes_per_s), (15.0, Some(300.0)));
    // No time passed (a frozen guest): no rate, not a division by zero.
    let c = r.report(&reading(12_000, 90, None), &tasks);
    assert_eq!((c.guests[0].major_faults_per_s, c.guests[0].io_bytes_per_s), (0.0, None));
}
