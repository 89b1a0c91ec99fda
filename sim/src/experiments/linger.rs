//! `linger`: seed 000's cluster experiment (§6, Table 1, Fig. 10; the owner-side view of
//! Fig. 7): Immediate-Eviction, Pause-and-Migrate, Linger-Longer and Linger-Forever as
//! lull-core's own eviction modes, on 64 generated owners, with the driver's policy and
//! scheduler unchanged.
//!
//! * **Owners:** 64 machines, each a generated owner (`sim/src/gen.rs`: seed 000's
//!   two-level run-idle model, 46 % non-idle) started at a random offset into its day
//!   (the paper maps a random trace at a random offset onto each node, §6).
//! * **Policy:** lull-core's defaults (CPU < 20 %, steady memory, no input, 180 s) with
//!   the mode under test; no daily limit (seed 000 has none); `T_migr` = 22 s (an 8 MB
//!   image at the paper's effective 3 Mbps, plus suspend and resume); PM pauses 300 s.
//!   The owner utilisation h that LL and LF weigh is read over 120 s (the default 10 s
//!   reacts to every one-second burst; seed 000 weighs the non-idle episode's
//!   utilisation). With no free available machine in the pool, the driver tells a
//!   machine with guest work that migrating costs a day (`SimConfig::migration_sees_pool`):
//!   seed 000's LL weighs lingering against the best idle node, and there is none.
//! * **Jobs:** Workload-1, 128 jobs of 600 CPU-seconds; Workload-2, 16 of 1,800; all
//!   submitted at once. Evicted jobs keep their progress (they migrate, §6); the
//!   migration itself takes no time here (the paper suspends for it).
//! * **Measures:** average job time (submission to end), variation (standard deviation
//!   of start-to-end time over its mean), family time (the last end), and throughput —
//!   guest CPU-seconds per second with the number of jobs held constant for an hour
//!   (128 or 16 jobs that never finish). *Harvested fraction*: guest CPU over the idle
//!   CPU the owners left, in the throughput run. *Owner delay ratio*: the owner's
//!   CPU-seconds spent beside a running guest, times the per-second delay seed 000 Fig. 7
//!   measured for a lowest-priority guest (about 1 % at a 100 µs effective context
//!   switch) — our driver does not simulate the owner's dispatches, so this is an
//!   estimate from the paper's own figure, not a measurement.

use super::{Report, Scale};
use crate::driver::{self, Outcome, SimConfig, SimJob, SimMachine};
use crate::error::Result;
use crate::gen::{generate, GenParams};
use crate::parallel::map_runs;
use crate::rng::Rng;
use lull_core::chart::Chart;
use lull_core::policy::config::{EvictionMode, PolicyConfig};
use lull_core::sched::SchedConfig;
use std::fmt::Write;

const START: i64 = 1_767_225_600;
/// The window of owner utilisation h the linger decision reads (see the module doc).
const LINGER_WINDOW_S: u64 = 120;
/// Seed 000 Fig. 7: a lowest-priority guest delays its owner's CPU requests by about 1 %
/// at a 100 µs effective context-switch time.
const LDR_PER_SHARED_S: f64 = 0.01;

const MODES: [(EvictionMode, &str); 4] = [
    (EvictionMode::LingerLonger, "LL"),
    (EvictionMode::LingerForever, "LF"),
    (EvictionMode::ImmediateEviction, "IE"),
    (EvictionMode::PauseAndMigrate, "PM"),
];

/// Seed 000 Table 1, in MODES order: (avg job time, variation %, family time, throughput).
/// (avg job time, variation %, family time, throughput).
type Paper = (f64, f64, f64, f64);

const PAPER_W1: [Paper; 4] =
    [(1044.0, 13.7, 1847.0, 52.2), (1026.0, 20.5, 1844.0, 55.5), (1531.0, 27.7, 2616.0, 34.6), (1531.0, 22.5, 2521.0, 34.6)];
const PAPER_W2: [Paper; 4] =
    [(1859.0, 0.9, 1896.0, 15.0), (1861.0, 1.3, 1925.0, 14.7), (1860.0, 1.3, 1925.0, 14.5), (1862.0, 1.6, 1956.0, 14.5)];

fn machines(traces: &[crate::trace::OwnerTrace], mode: EvictionMode) -> Vec<SimMachine> {
    traces
        .iter()
        .map(|t| {
            let mut p = PolicyConfig::default();
            p.eviction.mode = mode;
            p.eviction.migration_cost_s = 22;
            p.eviction.linger_window_s = LINGER_WINDOW_S;
            p.budget.interruptions_per_day = 10_000;
            SimMachine::traced(t, p)
        })
        .collect()
}

fn jobs(n: u64, cpu_s: f64) -> Vec<SimJob> {
    (0..n)
        .map(|id| SimJob {
            id,
            program: "foreign".into(),
            submit_s: 0.0,
            width: 1,
            normtime_s: cpu_s,
            estimate_s: Some(cpu_s),
            checkpointable: true,
        })
        .collect()
}

/// One workload under one mode.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Row {
    pub avg_job: f64,
    pub variation: f64,
    pub family: f64,
    pub completed: f64,
    pub throughput: f64,
    pub harvested: f64,
    pub exposed: f64,
    pub lingered_share: f64,
    pub evictions: u32,
}

fn job_stats(out: &Outcome) -> (f64, f64, f64, u32) {
    let done: Vec<(f64, f64, f64)> = out.jobs.iter().filter_map(|j| Some((j.submit_s, j.start_s?, j.end_s?))).collect();
    let n = done.len().max(1) as f64;
    let avg = done.iter().map(|(s, _, e)| e - s).sum::<f64>() / n;
    let exec: Vec<f64> = done.iter().map(|(_, st, e)| e - st).collect();
    let m = exec.iter().sum::<f64>() / n;
    let sd = (exec.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / n).sqrt();
    (avg, if m > 0.0 { sd / m } else { 0.0 }, out.makespan(), out.jobs.iter().map(|j| j.evictions).sum())
}

/// Runs the experiment (see the module doc).
pub fn run(seed: u64, scale: Scale, threads: usize, progress: &mut dyn FnMut(u64, u64)) -> Result<Report> {
    let small = scale == Scale::Small;
    let (nodes, w1, w2, hour) = if small { (16u64, 32u64, 4u64, 1200.0) } else { (64, 128, 16, 3600.0) };
    let params = GenParams::default();
    let mut r = Rng::derive(seed, 0x111);
    let traces: Vec<crate::trace::OwnerTrace> = (0..nodes)
        .map(|i| {
            let mut t = generate(&params, seed, i, START, 2);
            let off = r.int(0, 86_399) as usize;
            t.samples.drain(..off);
            t.samples.truncate(86_400);
            t.start_unix = START;
            t
        })
        .collect();
    // Per mode and workload: the jobs run to completion, then the same number of jobs that
    // never finish for an hour (throughput). All independent: run together on the pool.
    let workloads = [(w1, 600.0), (w2, 1800.0)];
    let mode_machines: Vec<Vec<SimMachine>> = MODES.iter().map(|(mode, _)| machines(&traces, *mode)).collect();
    let mut specs = Vec::new();
    for m in 0..MODES.len() {
        for k in 0..workloads.len() {
            specs.extend([(m, k, false), (m, k, true)]);
        }
    }
    let outs = map_runs(threads, &specs, progress, |&(m, k, throughput)| {
        let (n, cpu) = workloads[k];
        let mut cfg = SimConfig::new(SchedConfig::default());
        cfg.migration_sees_pool = true;
        if throughput {
            cfg.horizon_s = Some(hour);
            driver::run(&mode_machines[m], &jobs(n, 1e12), &cfg, &mut |_, _| {})
        } else {
            driver::run(&mode_machines[m], &jobs(n, cpu), &cfg, &mut |_, _| {})
        }
    })?;
    let mut rows: Vec<[Row; 2]> = Vec::new();
    for per_mode in outs.chunks(2 * workloads.len()) {
        let mut pair: [Row; 2] = Default::default();
        for (k, runs) in per_mode.chunks(2).enumerate() {
            let (out, tout) = (&runs[0], &runs[1]);
            let (avg, var, fam, ev) = job_stats(out);
            let sum = |f: fn(&driver::MachineOutcome) -> f64| tout.machines.iter().map(f).sum::<f64>();
            pair[k] = Row {
                avg_job: avg,
                variation: var,
                family: fam,
                completed: out.completed_share(),
                throughput: sum(|m| m.guest_cpu_s) / hour,
                harvested: sum(|m| m.guest_cpu_s) / sum(|m| m.idle_cpu_s).max(1e-9),
                exposed: sum(|m| m.shared_owner_cpu_s) / sum(|m| m.owner_cpu_s).max(1e-9),
                lingered_share: sum(|m| m.lingered_s) / sum(|m| m.guest_s).max(1e-9),
                evictions: ev,
            };
        }
        rows.push(pair);
    }

    let mut md = String::new();
    let _ = writeln!(md, "# `linger` — seed 000's Linger-Longer cluster experiment on Lull's eviction modes\n");
    let _ = writeln!(
        md,
        "Generated by `lull_sim::run_experiment(\"linger\", {seed}, Scale::{scale:?}, …)` (`lull sim linger --seed {seed}`); the same \
         seed gives this file byte for byte. {nodes} generated owners (1-s samples, each from a random offset into its day), \
         lull-core's `Policy` per machine with `eviction.mode` = IE / PM / LL / LF, lull-core's Backfill scheduler, the driver \
         sleeping to each policy's deadline. Model and measures: `sim/src/experiments/linger.rs`.\n"
    );
    for (k, (title, paper)) in
        [("Workload-1 (many jobs: 128 × 600 s)", PAPER_W1), ("Workload-2 (few jobs: 16 × 1,800 s)", PAPER_W2)].iter().enumerate()
    {
        let _ = writeln!(md, "## Table 1 — {title}\n");
        let _ = writeln!(
            md,
            "| metric | {} |\n|---|{}",
            MODES.iter().map(|(_, n)| format!("{n} (paper)")).collect::<Vec<_>>().join(" | "),
            "---|".repeat(MODES.len())
        );
        let cell = |f: &dyn Fn(&Row) -> String, p: &dyn Fn(&Paper) -> String| {
            rows.iter().zip(paper.iter()).map(|(r, pp)| format!("{} ({})", f(&r[k]), p(pp))).collect::<Vec<_>>().join(" | ")
        };
        let _ = writeln!(md, "| avg job time (s) | {} |", cell(&|r| format!("{:.0}", r.avg_job), &|p| format!("{:.0}", p.0)));
        let _ = writeln!(md, "| variation | {} |", cell(&|r| format!("{:.1} %", r.variation * 100.0), &|p| format!("{:.1} %", p.1)));
        let _ = writeln!(md, "| family time (s) | {} |", cell(&|r| format!("{:.0}", r.family), &|p| format!("{:.0}", p.2)));
        let _ =
            writeln!(md, "| **throughput** (CPU-s/s) | {} |", cell(&|r| format!("**{:.1}**", r.throughput), &|p| format!("{:.1}", p.3)));
        let _ = writeln!(
            md,
            "| jobs completed | {} |",
            rows.iter().map(|r| format!("{:.0} %", r[k].completed * 100.0)).collect::<Vec<_>>().join(" | ")
        );
        let _ = writeln!(md, "| evictions | {} |", rows.iter().map(|r| r[k].evictions.to_string()).collect::<Vec<_>>().join(" | "));
        let _ = writeln!(
            md,
            "| harvested fraction of idle CPU | {} |",
            rows.iter().map(|r| format!("{:.0} %", r[k].harvested * 100.0)).collect::<Vec<_>>().join(" | ")
        );
        let _ = writeln!(
            md,
            "| guest time spent lingering | {} |",
            rows.iter().map(|r| format!("{:.1} %", r[k].lingered_share * 100.0)).collect::<Vec<_>>().join(" | ")
        );
        let _ = writeln!(
            md,
            "| owner CPU beside a guest → owner delay ratio | {} |\n",
            rows.iter()
                .map(|r| format!("{:.1} % → {:.2} %", r[k].exposed * 100.0, r[k].exposed * LDR_PER_SHARED_S * 100.0))
                .collect::<Vec<_>>()
                .join(" | ")
        );
    }
    let t = |i: usize| rows[i][0].throughput;
    let _ = writeln!(
        md,
        "**Headline.** Paper, Workload-1: LL's throughput 52.2 vs IE's 34.6 (+51 %), LF +60 %, with under 0.5 % delay to local jobs. \
         Ours: LL {:.1} vs IE {:.1} ({:+.0} %), LF {:.1} ({:+.0} %), PM {:.1}; estimated owner delay ratio with LL {:.2} %. \
         Average job time LL {:.0} s vs IE {:.0} s ({:+.0} %; paper −32 %).\n",
        t(0),
        t(2),
        (t(0) / t(2).max(1e-9) - 1.0) * 100.0,
        t(1),
        (t(1) / t(2).max(1e-9) - 1.0) * 100.0,
        t(3),
        rows[0][0].exposed * LDR_PER_SHARED_S * 100.0,
        rows[0][0].avg_job,
        rows[2][0].avg_job,
        (rows[0][0].avg_job / rows[2][0].avg_job.max(1e-9) - 1.0) * 100.0
    );
    let _ = writeln!(
        md,
        "**Where ours differs, and why.** Our owners are generated from seed 000's published statistics, not the paper's traces; \
         lull-core's policy recruits only after 180 s of idleness, where the paper's IE and PM take a node as soon as it is idle, \
         and its LL lingers only while the owner's utilisation over the last {} s stays at most 20 %, then migrates: our \
         generated owners' builds and bursts cross 20 % often enough that LL evicts where the paper's LL kept lingering, so \
         LL gains less over IE than in the paper while LF, which freezes instead and lingers again, gains about as much; \
         migration costs no time in our driver (the paper suspends the job for 8 MB at 3 Mbps), which flatters IE and PM. \
         Workload-2 leaves most nodes unused, so all four modes finish alike, as in the paper. The owner delay ratio is the \
         paper's own per-second figure applied to our exposure, not a simulated dispatch-level measurement.\n",
        LINGER_WINDOW_S
    );
    let xs = [1.0, 2.0, 3.0, 4.0];
    let c1 = Chart::new("Throughput, Workload-1 (cf. seed 000 Table 1): 1 LL, 2 LF, 3 IE, 4 PM", "mode", "guest CPU-s per s")
        .line("ours", xs.iter().zip(&rows).map(|(x, r)| (*x, r[0].throughput)).collect())
        .line("paper", xs.iter().zip(&PAPER_W1).map(|(x, p)| (*x, p.3)).collect());
    let c2 = Chart::new("Average job time, Workload-1 (cf. seed 000 Table 1, Fig. 10)", "mode (1 LL, 2 LF, 3 IE, 4 PM)", "seconds")
        .line("ours", xs.iter().zip(&rows).map(|(x, r)| (*x, r[0].avg_job)).collect())
        .line("paper", xs.iter().zip(&PAPER_W1).map(|(x, p)| (*x, p.0)).collect());
    let _ = writeln!(md, "![throughput](linger-throughput.svg)\n\n![job time](linger-jobtime.svg)");
    Ok(Report {
        name: "linger".into(),
        markdown: md,
        svgs: vec![("linger-throughput.svg".into(), c1.to_svg()), ("linger-jobtime.svg".into(), c2.to_svg())],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_run_is_reproducible_and_lingering_harvests_more() {
        let a = run(5, Scale::Small, 1, &mut |_, _| {}).unwrap();
        assert_eq!(a, run(5, Scale::Small, 2, &mut |_, _| {}).unwrap());
        let line = a.markdown.lines().find(|l| l.starts_with("| **throughput**")).unwrap();
        let v: Vec<f64> = line.split("**").filter_map(|c| c.trim().parse().ok()).collect();
        assert_eq!(v.len(), 4, "{line}");
        assert!(v[0] > v[2], "LL above IE: {line}");
    }
}
