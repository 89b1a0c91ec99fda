//! Prometheus metrics in the text exposition format, kept with atomics (no registry
//! crate): requests by route and status class, a request-latency histogram, and the
//! coordinator's own counters.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

const BUCKETS_S: [f64; 12] = [0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0];

/// The coordinator's metrics.
#[derive(Debug, Default)]
pub struct Metrics {
    /// route → status → count (looked up by `&str`: no allocation once a route is known).
    requests: Mutex<HashMap<String, BTreeMap<u16, u64>>>,
    buckets: [AtomicU64; 12],
    count: AtomicU64,
    sum_us: AtomicU64,
    pub heartbeats: AtomicU64,
    pub leases: AtomicU64,
    /// Jobs placed by the scheduler.
    pub placements: AtomicU64,
    /// Passes that placed something, and how many placements they wrote (see `placements`).
    pub placing_passes: AtomicU64,
    /// Long polls' looks for a waiting lease that went to the database, the transactions
    /// they were batched into, and the looks the leader skipped (nothing was waiting).
    pub delivery_looks: AtomicU64,
    pub delivery_batches: AtomicU64,
    pub delivery_looks_skipped: AtomicU64,
    /// The last scheduling pass's duration (placement only, no database), microseconds.
    pub last_pass_us: AtomicU64,
    pub completions: AtomicU64,
    pub records_stored: AtomicU64,
    pub requeued: AtomicU64,
    pub flush_errors: AtomicU64,
    /// Duration of the last heartbeat flush, µs, and how many agents it wrote.
    pub last_flush_us: AtomicU64,
    pub last_flush_agents: AtomicU64,
}

impl Metrics {
    /// Counts one request on `route` answered with `status` after `secs`.
    pub fn observe(&self, route: &str, status: u16, secs: f64) {
        {
            let mut map = self.requests.lock().unwrap_or_else(|e| e.into_inner());
            match map.get_mut(route) {
                Some(by_status) => *by_status.entry(status).or_insert(0) += 1,
                None => {
                    map.insert(route.to_string(), BTreeMap::from([(status, 1)]));
                }
            }
        }
        for (i, b) in BUCKETS_S.iter().enumerate() {
            if secs <= *b {
                self.buckets[i].fetch_add(1, Ordering::Relaxed);
            }
        }
        self.count.fetch_add(1, Ordering::Relaxed);
        self.sum_us.fetch_add((secs * 1e6) as u64, Ordering::Relaxed);
    }

    /// The text exposition.
    pub fn render(&self, live_agents: usize) -> String {
        let mut s = String::new();
        s.push_str("# HELP lull_http_requests_total HTTP requests by route and status.\n# TYPE lull_http_requests_total counter\n");
        let requests = self.requests.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let mut routes: Vec<_> = requests.into_iter().collect();
        routes.sort();
        for (route, by_status) in routes {
            for (status, n) in by_status {
                let _ = writeln!(s, "lull_http_requests_total{{route=\"{route}\",status=\"{status}\"}} {n}");
            }
        }
        s.push_str("# HELP lull_http_request_duration_seconds Request latency.\n# TYPE lull_http_request_duration_seconds histogram\n");
        for (i, b) in BUCKETS_S.iter().enumerate() {
            let _ = writeln!(s, "lull_http_request_duration_seconds_bucket{{le=\"{b}\"}} {}", self.buckets[i].load(Ordering::Relaxed));
        }
        let count = self.count.load(Ordering::Relaxed);
        let _ = writeln!(s, "lull_http_request_duration_seconds_bucket{{le=\"+Inf\"}} {count}");
        let _ = writeln!(s, "lull_http_request_duration_seconds_sum {}", self.sum_us.load(Ordering::Relaxed) as f64 / 1e6);
        let _ = writeln!(s, "lull_http_request_duration_seconds_count {count}");
        for (name, help, v) in [
            ("lull_heartbeats_total", "Heartbeats received.", &self.heartbeats),
            ("lull_leases_total", "Tasks leased.", &self.leases),
            ("lull_placements_total", "Jobs placed by the scheduler.", &self.placements),
            ("lull_sched_placing_passes_total", "Scheduling passes that placed at least one job.", &self.placing_passes),
            ("lull_delivery_looks_total", "Long polls' looks for a waiting lease made in the database.", &self.delivery_looks),
            ("lull_delivery_batches_total", "Transactions the looks for waiting leases were batched into.", &self.delivery_batches),
            (
                "lull_delivery_looks_skipped_total",
                "Looks for a waiting lease the leader skipped: nothing was waiting for the agent.",
                &self.delivery_looks_skipped,
            ),
            ("lull_completions_total", "Task completions counted (retries excluded).", &self.completions),
            ("lull_records_stored_total", "New ledger records stored.", &self.records_stored),
            ("lull_tasks_requeued_total", "Tasks re-queued or failed after their lease expired.", &self.requeued),
            ("lull_heartbeat_flush_errors_total", "Failed heartbeat flushes (retried).", &self.flush_errors),
        ] {
            let _ = writeln!(s, "# HELP {name} {help}\n# TYPE {name} counter\n{name} {}", v.load(Ordering::Relaxed));
        }
        let _ = writeln!(
            s,
            "# HELP lull_live_agents Agents heard from by this replica.\n# TYPE lull_live_agents gauge\nlull_live_agents {live_agents}"
        );
        let _ = writeln!(
            s,
            "# HELP lull_heartbeat_flush_seconds Duration of the last heartbeat flush.\n# TYPE lull_heartbeat_flush_seconds gauge\nlull_heartbeat_flush_seconds {}",
            self.last_flush_us.load(Ordering::Relaxed) as f64 / 1e6
        );
        let _ = writeln!(
            s,
            "# HELP lull_heartbeat_flush_agents Agents written by the last heartbeat flush.\n# TYPE lull_heartbeat_flush_agents gauge\nlull_heartbeat_flush_agents {}",
            self.last_flush_agents.load(Ordering::Relaxed)
        );
        let _ = writeln!(
            s,
            "# HELP lull_sched_last_pass_seconds Duration of the last scheduling pass that placed something (placement only, no database).\n# TYPE lull_sched_last_pass_seconds gauge\nlull_sched_last_pass_seconds {}",
            self.last_pass_us.load(Ordering::Relaxed) as f64 / 1e6
        );
        s
    }
}
