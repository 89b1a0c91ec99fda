//! What a heartbeat says of this machine: its CPUs, its base speed `S_b`, the memory
//! guests may use, the guests' memory rates ([`MemoryReporter`], seed 001), and the
//! heartbeat built from the agent's status ([`heartbeat_from`]).

use crate::control::{self};
use lull_protocol::{GuestMemory, Heartbeat, MemoryReport};
use std::collections::HashMap;
use std::time::Instant;

/// This machine's logical CPUs, as the coordinator checks donated CPU-seconds against
/// them: the CPUs online (not this process's share of them, which may be smaller than
/// what its guests can use), at least 1.
pub fn machine_cpus() -> u32 {
    let mine = std::thread::available_parallelism().map_or(1, |n| n.get());
    let online = crate::sys::cpu::online();
    u32::try_from(mine.max(online).max(1)).unwrap_or(u32::MAX).min(lull_protocol::limits::CPUS_MAX)
}

/// The base speed `S_b`: a short standard benchmark (a fixed integer mixing loop, about
/// 50 ms on a current core) in millions of loop iterations per second, best of three.
pub fn base_speed() -> f64 {
    let mut best = 0.0f64;
    for _ in 0..3 {
        let t = Instant::now();
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        const N: u64 = 20_000_000;
        for i in 0..N {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x = x.wrapping_add(i);
        }
        std::hint::black_box(x);
        best = best.max(N as f64 / 1e6 / t.elapsed().as_secs_f64().max(1e-9));
    }
    best
}

/// Free memory guests may use now (`MemAvailable`), in bytes.
pub fn free_memory() -> u64 {
    match sysinfo::System::new() {
        Ok(mut sys) => {
            sys.refresh_memory();
            sys.available_memory()
        }
        Err(_) => 0,
    }
}
/// Turns the guests' cumulative memory counters into a heartbeat's memory report (seed
/// 001): page faults and I/O per second since the previous report (since the guest
/// started, for its first), for the guests of leased tasks only.
#[derive(Debug, Default)]
pub struct MemoryReporter {
    /// Per guest: (age ms, major faults, I/O bytes) at the previous report.
    prev: HashMap<String, (u64, u64, Option<u64>)>,
}

impl MemoryReporter {
    /// The report for `m`, naming each guest by its task in `tasks`.
    pub fn report(&mut self, m: &crate::guest::GuestsMemory, tasks: &HashMap<String, (i64, u32)>) -> MemoryReport {
        let mut next = HashMap::new();
        let guests = m
            .guests
            .iter()
            .filter_map(|g| {
                let &(job_id, rank) = tasks.get(&g.id)?;
                let (age0, faults0, io0) = self.prev.get(&g.id).copied().unwrap_or((0, 0, Some(0)));
                let dt_s = g.age_ms.saturating_sub(age0) as f64 / 1000.0;
                let rate = |d: u64| if dt_s > 0.0 { d as f64 / dt_s } else { 0.0 };
                next.insert(g.id.clone(), (g.age_ms, g.major_faults, g.io_bytes));
                Some(GuestMemory {
                    job_id,
                    rank,
                    working_set_bytes: g.working_set_bytes,
                    major_faults_per_s: rate(g.major_faults.saturating_sub(faults0)),
                    age_s: g.age_ms as f64 / 1000.0,
                    io_bytes_per_s: g.io_bytes.map(|b| rate(b.saturating_sub(io0.unwrap_or(0)))),
                })
            })
            .collect();
        self.prev = next;
        MemoryReport { available_bytes: m.available_bytes, guest_memory_bytes: m.guest_memory_bytes, pressure: m.pressure, guests }
    }
}

/// A heartbeat from the agent's status: `S_c` is `S_b` scaled by the CPU share the owner
/// leaves free; free memory at most what guests may hold ([`GuestsMemory`]'s M, which
/// the guest cap and the owner's share bound); what keeps the machine busy, by cause
/// only. It always carries the owner's daily interruption limit (coordinators
/// before the dashboard refuse unknown heartbeat fields: upgrade the coordinator first),
/// the owner-load readings numbered `load_from` onwards (see [`crate::owner_load`]), and
/// `memory` when the agent measures it (see [`MemoryReporter`]); also returns the number
/// to send from next time, once this heartbeat is acknowledged.
pub fn heartbeat_from(
    status: &control::AgentStatus,
    base_speed: f64,
    free_mem_bytes: u64,
    load_from: u64,
    memory: Option<MemoryReport>,
) -> (Heartbeat, u64) {
    let p = &status.policy;
    let owner = (p.owner_cpu as f64).clamp(0.0, 1.0);
    let (owner_load, next) = status.owner_load.since(load_from);
    // What guests may really hold: the free memory, at most what the guest runtime
    // allows them in all (the guest cap and the owner's share).
    let free_mem_bytes = match &status.guest_memory {
        Some(m) => free_mem_bytes.min(m.guest_memory_bytes),
        None => free_mem_bytes,
    };
    let busy = p.busy.and_then(|c| serde_json::to_value(c).ok()).and_then(|v| v.as_str().map(str::to_string));
    let hb = Heartbeat {
        state: p.state.as_str().to_string(),
        available: p.available,
        budget_left: p.interruption_limit.saturating_sub(p.interruptions_today),
        free_mem_bytes,
        base_speed,
        current_speed: base_speed * (1.0 - owner),
        interruption_limit: Some(p.interruption_limit),
        idle_for_s: Some(p.idle_for_s),
        owner_load,
        memory,
        busy,
        cpus: Some(machine_cpus()),
    };
    (hb, next)
}
