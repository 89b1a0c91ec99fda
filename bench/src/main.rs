//! `lull-bench`: Lull's benchmarks, run as real processes (`lull agent`, `lull coordinator
//! serve`, `lull up`, `lull-tray`, Xvfb, cgroups) and reported with percentiles, for
//! `docs/BENCHMARKS.md`. A developer tool built from the workspace, not shipped in the
//! .deb; it finds the `lull` binary it measures with the harness's binary locator
//! (`lull_e2e::lull_bin`: `$LULL_BIN`, or `cargo build -p lull` in this workspace).

// The `lull` command's own printing (agent_core::stdout: a closed pipe ends it quietly):
// lull-bench prints its reports the way `lull` does.
#[macro_use]
extern crate agent_core;

mod guest;
mod heartbeats;
mod idle;
mod input_latency;
mod lend;
mod owner_cache;
mod owner_return;
mod placements;
mod pty;
mod recruit;
mod recruit_api;

use clap::{Parser, Subcommand};

/// Lull's benchmarks with real processes (results go in docs/BENCHMARKS.md).
#[derive(Parser, Debug)]
#[command(name = "lull-bench", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    which: Which,
}

#[derive(Subcommand, Debug)]
enum Which {
    /// The agent's own CPU and RSS while idle (goal: ≤ 0.03 % of a core, ≤ 12 MB).
    Idle(idle::IdleArgs),
    /// Time from an XTest input event to the agent seeing it (goal: p99 ≤ 2 ms).
    InputLatency(input_latency::InputLatencyArgs),
    /// Eviction latency: XTest input under Xvfb → guests' cgroup frozen (goal: p99 ≤ 5 ms).
    Evict(guest::EvictArgs),
    /// Owner slowdown (LDR), wake-up latency and harvest (FCSR): alone, Lull guest, nice-19 guest.
    Slowdown(guest::SlowdownArgs),
    /// Memory: owner pages swapped out by a capped guest; restore time with the cap disabled.
    Memory(guest::MemoryArgs),
    /// The owner's return end to end on the product (lull up, lull-tray): one XTest motion
    /// from a separate client → the guest's last heartbeat (goal: p99 ≤ 5 ms, 0 missed).
    OwnerReturn(owner_return::OwnerReturnArgs),
    /// Lend while light on a real `lull agent`: a light owner task (5 % of a core) with
    /// XTest input, alone / with a lent guest / with a normal-priority control; owner
    /// slowdown by median response time (goal: ≤ 1 %).
    LendLight(lend::LendLightArgs),
    /// The owner's file cache after a memory-hungry guest on the real agent: the owner's
    /// reads before, after eviction without and with Lull's restore (goal: within 5 %).
    OwnerCache(owner_cache::OwnerCacheArgs),
    /// Coordinator heartbeats/s and latency with N simulated agents over loopback
    /// (goal on SQLite: ≥ 20,000/s, p99 ≤ 10 ms with 10,000 agents).
    Heartbeats(heartbeats::HeartbeatArgs),
    /// Coordinator placements/s and recruited → running latency with N simulated agents
    /// long-polling over loopback (goal: ≥ 5,000 placements/s, p99 ≤ 1 s).
    Placements(placements::PlacementArgs),
    /// Instant recruitment's answer time: `POST /api/v1/recruit` latency from a separate
    /// client with N simulated agents polling and heartbeating (goal: p99 ≤ 2 ms at 10,000).
    RecruitApi(recruit_api::RecruitApiArgs),
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let result = match cli.which {
        Which::Idle(a) => idle::run(a),
        Which::InputLatency(a) => input_latency::run(a),
        Which::Evict(a) => guest::evict(a),
        Which::Slowdown(a) => guest::slowdown(a),
        Which::Memory(a) => guest::memory_bench(a),
        Which::Heartbeats(a) => heartbeats::run(a),
        Which::Placements(a) => placements::run(a),
        Which::RecruitApi(a) => recruit_api::run(a),
        Which::OwnerReturn(a) => owner_return::run(a),
        Which::LendLight(a) => lend::run(a),
        Which::OwnerCache(a) => owner_cache::run(a),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            errln!("lull-bench: {}", agent_core::message::once(e.chain()));
            std::process::ExitCode::from(1)
        }
    }
}
