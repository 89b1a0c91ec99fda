//! Benchmark of the simulator (plain `main`, no criterion: `harness = false`). Run with
//! `cargo bench -p lull-sim` (release); `cargo bench -p lull-sim -- year` runs only the
//! year, `-- samples` only the first part, `-- samples-1s` only its generated 1-s owners,
//! `-- sweep` only the third part.
//!
//! 1. **Node-samples per second with the full policy**: 200 generated owners × one day
//!    of 1-s samples (`gen.rs`, every sample different: the generator draws background
//!    CPU afresh each second) with 2,000 jobs, lull-core's `Policy` (linger-longer) on
//!    every machine and its Backfill `Scheduler`; the same on 200 availability-level
//!    owners (FTA-like, 60-s samples, × 30 days). Node-samples = trace samples replayed,
//!    whether the driver fed them to the policy or slept over them. Sleeping
//!    (`Stepping::Sleep`, the default) and stepping every sample, median of 5.
//! 2. **A year of a 10,000-machine pool**: 10,000 availability-level owners (60-s
//!    samples, sessions of mean 2 h shaped by seed 004's hourly activity, built directly
//!    as runs), 365 days, 36,500 sequential jobs (1–4 h, 100 a day), every machine's
//!    policy and the pool's scheduler. Wall time of one run (trace building timed apart).
//! 3. **A sweep of independent runs on the pool** (`sweep`): part 1's generated 1-s owners
//!    workload replayed as 8 independent runs (job streams from seeds 1–8), as an
//!    experiment does, through `lull_sim::parallel::map_runs` on 1 thread and on every
//!    core, alternately in one process, 3 rounds: aggregate node-samples per wall second of
//!    the whole sweep (median), the ratio, and each run's own rate (wall and thread CPU).

use lull_core::policy::PolicyConfig;
use lull_core::sched::SchedConfig;
use lull_sim::driver::{run, SimConfig, SimJob, SimMachine, Stepping};
use lull_sim::gen::{generate, GenParams, HOURLY_ACTIVITY};
use lull_sim::rng::Rng;
use lull_sim::trace::{OwnerSample, RunTrace};
use std::time::Instant;

const START: i64 = 1_767_225_600;

fn jobs(n: u64, span_s: f64, seed: u64) -> Vec<SimJob> {
    let mut r = Rng::derive(seed, 0xbe);
    (0..n)
        .map(|id| SimJob {
            id,
            program: format!("p{}", id % 20),
            submit_s: r.range(0.0, span_s),
            width: 1,
            normtime_s: r.range(3600.0, 4.0 * 3600.0),
            estimate_s: None,
            checkpointable: true,
            migration_s: 0.0,
        })
        .collect()
}

/// An availability-level owner: away / present sessions at `step_s` resolution, present
/// = owner CPU 60 % (no input is recorded at this level, as in the FTA).
fn availability_owner(seed: u64, i: u64, days: u32, step_s: u32) -> RunTrace {
    let mut r = Rng::derive(seed, i);
    let mut t = RunTrace::new(format!("n{i}"), START, step_s, 16 << 30);
    let away = OwnerSample { owner_cpu: 0.01, owner_mem_bytes: 2 << 30, input: false };
    let busy = OwnerSample { owner_cpu: 0.6, owner_mem_bytes: 2 << 30, input: false };
    let total = days * 86_400 / step_s;
    let mean_w = 100.0 / 24.0;
    while t.len < total {
        let hour = ((t.len as u64 * step_s as u64) % 86_400 / 3600) as usize;
        let p = (0.44 * HOURLY_ACTIVITY[hour] / mean_w).clamp(0.02, 0.95);
        // Sessions of mean 2 h; away gaps sized so the hour's presence share is p.
        let present = (r.exp(7200.0) / step_s as f64).ceil() as u32;
        let gap = (r.exp(7200.0 * (1.0 - p) / p) / step_s as f64).ceil() as u32;
        t.push(away, gap.min(total - t.len));
        if t.len < total {
            t.push(busy, present.min(total - t.len));
        }
    }
    t
}

/// This thread's CPU time: what a run costs on its own, whatever else shares the cores.
fn thread_cpu() -> f64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a valid out-pointer for clock_gettime.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn samples_part(only_1s: bool) {
    println!("== node-samples per second, full policy (median of 5) ==");
    let params = GenParams::default();
    let gen_ms: Vec<SimMachine> =
        (0..200).map(|i| SimMachine::traced(&generate(&params, 1, i, START, 1), PolicyConfig::default())).collect();
    let avail: Vec<SimMachine> = (0..200)
        .map(|i| SimMachine {
            name: format!("n{i}"),
            base_speed: 1.0,
            owner: Some(availability_owner(2, i, 30, 60)),
            policy: PolicyConfig::default(),
            sees_input: true,
        })
        .collect();
    for (label, ms, js) in [
        ("generated 1-s owners, 200 × 1 day, 2,000 jobs", &gen_ms, jobs(2000, 86_400.0, 1)),
        ("availability-level 60-s owners, 200 × 30 days, 2,000 jobs", &avail, jobs(2000, 30.0 * 86_400.0, 2)),
    ] {
        if only_1s && !label.starts_with("generated") {
            continue;
        }
        for stepping in [Stepping::Sleep, Stepping::EverySample] {
            let mut cfg = SimConfig::new(SchedConfig::default());
            cfg.stepping = stepping;
            let mut rates = Vec::new();
            let mut cpu_rates = Vec::new();
            let mut steps = 0;
            let mut samples = 0;
            let mut quiet = 0;
            for _ in 0..5 {
                let (t0, c0) = (Instant::now(), thread_cpu());
                let out = run(ms, &js, &cfg, &mut |_, _| {}).expect("run");
                let (s, c) = (t0.elapsed().as_secs_f64(), thread_cpu() - c0);
                rates.push(out.node_samples as f64 / s);
                cpu_rates.push(out.node_samples as f64 / c);
                steps = out.policy_steps;
                samples = out.node_samples;
                quiet = out.quiet_readings;
            }
            println!(
                "{label}, {stepping:?}: {:.1} M node-samples/s (median; min {:.1}, max {:.1}); per CPU-second of the run's thread {:.1} M (median); {samples} node-samples, {steps} policy steps ({quiet} readings on the quiet fast path) per run",
                median(rates.clone()) / 1e6,
                rates.iter().cloned().fold(f64::INFINITY, f64::min) / 1e6,
                rates.iter().cloned().fold(0.0, f64::max) / 1e6,
                median(cpu_rates) / 1e6,
            );
        }
    }
}

fn year_part() {
    println!("== a year of a 10,000-machine pool ==");
    let t0 = Instant::now();
    let ms: Vec<SimMachine> = (0..10_000)
        .map(|i| SimMachine {
            name: format!("n{i}"),
            base_speed: 1.0,
            owner: Some(availability_owner(3, i, 365, 60)),
            policy: PolicyConfig::default(),
            sees_input: true,
        })
        .collect();
    let runs: usize = ms.iter().map(|m| m.owner.as_ref().map_or(0, |t| t.runs.len())).sum();
    println!("built 10,000 machine-years ({runs} runs of samples) in {:.1} s (not part of the replay)", t0.elapsed().as_secs_f64());
    let js = jobs(36_500, 365.0 * 86_400.0, 3);
    let cfg = SimConfig::new(SchedConfig::default());
    let (t1, c1) = (Instant::now(), thread_cpu());
    let out = run(&ms, &js, &cfg, &mut |_, _| {}).expect("run");
    let (s, c) = (t1.elapsed().as_secs_f64(), thread_cpu() - c1);
    println!(
        "replayed 365 days × 10,000 machines in {s:.1} s ({c:.1} s of the thread's CPU time): {} node-samples ({:.1} M/s), {} policy steps, {} scheduler passes, {:.1} % of jobs completed",
        out.node_samples,
        out.node_samples as f64 / s / 1e6,
        out.policy_steps,
        out.passes,
        out.completed_share() * 100.0
    );
}

fn sweep_part() {
    const RUNS: u64 = 8;
    const ROUNDS: usize = 3;
    let cores = lull_sim::parallel::default_threads();
    println!("== a sweep of {RUNS} independent runs on the pool: 1 thread vs {cores} (median of {ROUNDS} rounds, alternating) ==");
    let params = GenParams::default();
    let ms: Vec<SimMachine> = (0..200).map(|i| SimMachine::traced(&generate(&params, 1, i, START, 1), PolicyConfig::default())).collect();
    let streams: Vec<Vec<SimJob>> = (1..=RUNS).map(|seed| jobs(2000, 86_400.0, seed)).collect();
    let cfg = SimConfig::new(SchedConfig::default());
    let mut aggregate: Vec<(usize, Vec<f64>)> = vec![(1, Vec::new()), (cores, Vec::new())];
    let mut per_run: Vec<(Vec<f64>, Vec<f64>)> = vec![(Vec::new(), Vec::new()), (Vec::new(), Vec::new())];
    for _ in 0..ROUNDS {
        for (k, (threads, rates)) in aggregate.iter_mut().enumerate() {
            let t0 = Instant::now();
            let outs = lull_sim::parallel::map_runs(*threads, &streams, &mut |_, _| {}, |js| {
                let (t, c) = (Instant::now(), thread_cpu());
                let out = run(&ms, js, &cfg, &mut |_, _| {})?;
                Ok((out.node_samples, t.elapsed().as_secs_f64(), thread_cpu() - c))
            })
            .expect("sweep");
            let wall = t0.elapsed().as_secs_f64();
            rates.push(outs.iter().map(|o| o.0).sum::<u64>() as f64 / wall);
            for (n, s, c) in outs {
                per_run[k].0.push(n as f64 / s);
                per_run[k].1.push(n as f64 / c);
            }
        }
    }
    let medians: Vec<f64> = aggregate.iter().map(|(_, r)| median(r.clone())).collect();
    for (k, (threads, rates)) in aggregate.iter().enumerate() {
        println!(
            "{threads} thread(s): {:.1} M node-samples per wall second of the sweep (median; min {:.1}, max {:.1}); each run {:.1} M/s of wall time, {:.1} M per CPU-second of its thread (medians of {} runs)",
            medians[k] / 1e6,
            rates.iter().cloned().fold(f64::INFINITY, f64::min) / 1e6,
            rates.iter().cloned().fold(0.0, f64::max) / 1e6,
            median(per_run[k].0.clone()) / 1e6,
            median(per_run[k].1.clone()) / 1e6,
            per_run[k].0.len(),
        );
    }
    println!("ratio {cores} threads / 1 thread: {:.2}×", medians[1] / medians[0]);
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with("--")).collect();
    let want = |p: &str| args.is_empty() || args.iter().any(|a| a == p);
    if want("samples") || want("samples-1s") {
        samples_part(!want("samples"));
    }
    if want("year") {
        year_part();
    }
    if want("sweep") {
        sweep_part();
    }
}
