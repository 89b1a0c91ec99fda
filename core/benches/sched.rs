//! Benchmark of `lull_core::sched` (plain `main`, no criterion: `harness = false`).
//!
//! 1. **One full pass**: 10,000 queued jobs (95 % sequential, 5 % gangs of 2–16; half
//!    declare memory; 50 programs with history, some jobs with estimates) and 10,000
//!    machines (varied speed, owner load, memory, budgets; ~5 % not eligible), built from
//!    a seeded generator (three seeds in turn). Each repetition builds the state (not
//!    timed) and times one `pass`. Median, p99 and max per algorithm.
//! 2. **Sustained placements**: 10,000 machines all busy and 1,000 jobs waiting; each step
//!    finishes the running job with the earliest predicted end (one `JobFinished` per
//!    member), submits one job and runs a pass. Steps, events and placements per second.
//!
//! Run with `cargo bench -p lull-core` (release). Timing uses `std::time::Instant`, which
//! is fine here: benches are not part of the pure library.

use lull_core::sched::*;
use std::time::{Duration, Instant};

const MACHINES: u64 = 10_000;
const JOBS: u64 = 10_000;
const PROGRAMS: u64 = 50;
const GB: u64 = 1 << 30;
const REPS: usize = 60;

fn pick(r: &mut SplitMix64, lo: f64, hi: f64) -> f64 {
    lo + (hi - lo) * (r.next_u64() >> 11) as f64 / (1u64 << 53) as f64
}

fn machine(r: &mut SplitMix64, id: u64, now: Millis) -> Machine {
    let mut m = Machine::new(id, format!("owner{}", id % 997), pick(r, 0.5, 3.0));
    m.load = if r.below(10) < 3 { pick(r, 0.0, 0.3) } else { 0.0 };
    m.free_memory = (1 + r.below(16)) * GB;
    m.interruptions_left = r.below(11) as u32; // 0 for ~9 %
    m.available = r.below(100) >= 3;
    m.idle_since = Millis(now.0.saturating_sub(r.below(3_600_000)));
    m.slots = if r.below(10) == 0 { 2 } else { 1 };
    m
}

fn job(r: &mut SplitMix64, id: u64, at: Millis) -> JobSpec {
    let mut j = JobSpec::sequential(id, format!("prog{}", r.below(PROGRAMS + 20)), at);
    if r.below(100) < 5 {
        j = j.with_width(2 + r.below(15) as u32);
    }
    if r.below(2) == 0 {
        j = j.with_memory((256 + r.below(1792)) << 20);
    }
    if r.below(3) == 0 {
        j = j.with_estimate(pick(r, 10.0, 7200.0));
    }
    j
}

/// Machines plus per-program history (two completed jobs per program), no jobs queued.
fn base(alg: Algorithm, seed: u64, now: Millis) -> Scheduler {
    let mut r = SplitMix64::new(seed);
    let mut s = Scheduler::new(SchedConfig { algorithm: alg, random_seed: seed, ..SchedConfig::default() }).unwrap();
    for id in 0..MACHINES {
        s.handle(now, Event::MachineUpdated(machine(&mut r, id, now))).unwrap();
    }
    // History: run and finish two jobs of each program.
    for round in 0..2u64 {
        for p in 0..PROGRAMS {
            let id = 1_000_000_000 + round * PROGRAMS + p;
            s.handle(now, Event::JobSubmitted(JobSpec::sequential(id, format!("prog{p}"), Millis::ZERO))).unwrap();
            let a = s.pass(now);
            for a in a {
                for m in &a.machines {
                    let cpu = pick(&mut r, 60.0, 3600.0);
                    s.handle(now, Event::JobFinished { job: a.job, machine: *m, cpu_seconds: cpu, wall_seconds: cpu }).unwrap();
                }
            }
        }
    }
    s
}

fn full_state(alg: Algorithm, seed: u64, now: Millis) -> Scheduler {
    let mut s = base(alg, seed, now);
    let mut r = SplitMix64::new(seed ^ 0xABCD);
    for id in 0..JOBS {
        s.handle(now, Event::JobSubmitted(job(&mut r, id, Millis(now.0 - 1_000_000 + id)))).unwrap();
    }
    s
}

/// This thread's CPU time (excludes time the OS gave other processes).
fn thread_cpu() -> Duration {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a valid out-pointer for clock_gettime.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn main() {
    // `cargo bench` passes `--bench` (ignored); `--pass-only` skips the sustained part.
    let now = Millis::from_secs(1_780_000_000);
    println!("lull-core sched bench: {JOBS} queued jobs, {MACHINES} machines, {REPS} repetitions per algorithm");
    println!("wall time per pass (CPU time of the pass's thread in the last two columns)");
    println!(
        "{:<10} {:>9} {:>9} {:>9} {:>9} {:>10} {:>9} {:>8} {:>10}",
        "algorithm", "min", "median", "p99", "max", "cpu median", "cpu p99", "placed", "reserved"
    );
    // `--only NAME` restricts the bench to one algorithm (for profiling).
    let args: Vec<String> = std::env::args().collect();
    let only = args.iter().position(|a| a == "--only").and_then(|i| args.get(i + 1)).cloned();
    let algorithms: Vec<Algorithm> = Algorithm::ALL.into_iter().filter(|a| only.as_deref().is_none_or(|o| o == a.name())).collect();
    for &alg in &algorithms {
        let mut times = Vec::with_capacity(REPS);
        let mut cpu = Vec::with_capacity(REPS);
        let mut placed = 0;
        let mut reserved = String::from("-");
        for rep in 0..REPS {
            // A fresh state each time (built, not cloned: as a long-running coordinator's
            // would be), the same one for every algorithm at a given repetition.
            let mut s = full_state(alg, 42 + rep as u64 % 3, now);
            let c0 = thread_cpu();
            let t0 = Instant::now();
            let a = s.pass(now);
            times.push(t0.elapsed());
            cpu.push(thread_cpu() - c0);
            placed = a.len();
            if let Some(r) = s.reservation() {
                reserved = format!("w{} +{:.0}s", s.job(r.head).unwrap().spec.width, r.at.secs_since(now));
            }
            drop(std::hint::black_box(a));
        }
        times.sort();
        cpu.sort();
        println!(
            "{:<10} {:>7.2}ms {:>7.2}ms {:>7.2}ms {:>7.2}ms {:>8.2}ms {:>7.2}ms {:>8} {:>10}",
            alg.name(),
            ms(times[0]),
            ms(percentile(&times, 0.5)),
            ms(percentile(&times, 0.99)),
            ms(*times.last().unwrap()),
            ms(percentile(&cpu, 0.5)),
            ms(percentile(&cpu, 0.99)),
            placed,
            reserved
        );
    }

    if args.iter().any(|a| a == "--pass-only") {
        return;
    }
    println!();
    println!("sustained: {MACHINES} machines busy, 1000 jobs waiting; step = finish the earliest job + submit one + pass");
    println!("{:<10} {:>8} {:>11} {:>12} {:>14} {:>10}", "algorithm", "steps", "steps/s", "events/s", "placements/s", "p99 step");
    for &alg in &algorithms {
        let mut s = base(alg, 7, now);
        let mut r = SplitMix64::new(99);
        let mut next_id = 0u64;
        for _ in 0..(MACHINES + 3_000) {
            s.handle(now, Event::JobSubmitted(job(&mut r, next_id, now))).unwrap();
            next_id += 1;
        }
        s.pass(now);
        let steps = 20_000;
        let mut t = now;
        let mut events = 0u64;
        let mut placements = 0u64;
        let mut step_times = Vec::with_capacity(steps);
        let start = Instant::now();
        for _ in 0..steps {
            let t0 = Instant::now();
            let Some((end, id)) = s.running_by_end().next() else { break };
            t = t.max(end);
            let members: Vec<MachineId> = s.job(id).unwrap().running.as_ref().unwrap().unfinished_machines().collect();
            for m in members {
                s.handle(t, Event::JobFinished { job: id, machine: m, cpu_seconds: 100.0, wall_seconds: 100.0 }).unwrap();
                events += 1;
            }
            s.handle(t, Event::JobSubmitted(job(&mut r, next_id, t))).unwrap();
            next_id += 1;
            events += 1;
            placements += s.pass(t).len() as u64;
            step_times.push(t0.elapsed());
        }
        let secs = start.elapsed().as_secs_f64();
        step_times.sort();
        println!(
            "{:<10} {:>8} {:>11.0} {:>12.0} {:>14.0} {:>8.3}ms",
            alg.name(),
            step_times.len(),
            step_times.len() as f64 / secs,
            events as f64 / secs,
            placements as f64 / secs,
            ms(percentile(&step_times, 0.99))
        );
    }
}
