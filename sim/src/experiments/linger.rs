//! `linger`: seed 000's experiments on Lull's eviction modes — the cluster (§6, Table 1),
//! the owner's delay at dispatch level (§5.1, Fig. 7), one job's migration timing (§5.2,
//! Fig. 8) and parallel jobs lingering (§7.1, Fig. 11).
//!
//! * **Owners:** 64 generated owners per seed (`sim/src/gen.rs`: seed 000's two-level
//!   run-idle model, 46 % non-idle), each started at a random offset into its day (§6),
//!   as 2-s samples (the Berkeley traces' resolution, §4.2).
//! * **Policy, the paper's parameters:** idle = CPU < 10 % and no keyboard for a minute
//!   (§4.2's recruitment threshold, for every mode); LL lingers by eq. 4 alone (no CPU
//!   cap: `linger_cpu_max` = 1) and LF never leaves; no daily limit (seed 000 has none).
//! * **Migration** (§5.2, §6): every job is 8 MB moved at an effective 3 Mbps, the job
//!   suspended meanwhile: `T_migr` = 21.3 s + suspend and resume (ours, 0.7 s), paid by
//!   an evicted job where it resumes (`SimJob::migration_s`) and weighed by LL's eq. 4.
//!   With no free available machine the driver tells the policy migrating costs a day
//!   (`SimConfig::migration_sees_pool`): LL weighs lingering against the best idle node.
//! * **Jobs:** Workload-1, 128 jobs of 600 CPU-seconds; Workload-2, 16 of 1,800; all
//!   submitted at once, checkpointed on eviction.
//! * **Measures** (Table 1): average job time, variation (sd of start-to-end over its
//!   mean), family time, throughput (guest CPU-s per s with the job count held for an
//!   hour). **Owner delay** (§5.1): the driver records the seconds a guest ran beside its
//!   owner at each 5-% level of owner CPU; [`crate::dispatch`] simulates those seconds at
//!   dispatch level (run/idle bursts, 100 µs effective context switch) and the delay is
//!   summed over the cluster's local CPU time.
//!
//! Parameters of ours are listed in the report and swept there.

use super::claims::{self, Assumption, Claim, Expect, Row, Summary};
use super::options::{Options, Scale};
use super::report::{preamble, Report};
use crate::dispatch::{self, BurstModel};
use crate::driver::{self, Outcome, SimConfig, SimJob, SimMachine};
use crate::error::Result;
use crate::gen::{generate, GenParams};
use crate::rng::Rng;
use crate::trace::{OwnerSample, OwnerTrace, RunTrace};
use lull_core::chart::Chart;
use lull_core::policy::{EvictionMode, PolicyConfig};
use lull_core::sched::SchedConfig;
use std::fmt::Write;

const START: i64 = 1_767_225_600;
/// 8 MB at an effective 3 Mbps (§5.2, §6).
const IMAGE_S: f64 = 8.0 * 8.0 / 3.0;
/// The effective context-switch time seed 000 chose (§5.1).
const SWITCH_S: f64 = 100e-6;

const MODES: [(EvictionMode, &str); 4] = [
    (EvictionMode::LingerLonger, "LL"),
    (EvictionMode::LingerForever, "LF"),
    (EvictionMode::ImmediateEviction, "IE"),
    (EvictionMode::PauseAndMigrate, "PM"),
];

/// Seed 000 Table 1, in MODES order: (avg job time, variation %, family time, throughput).
type Paper = (f64, f64, f64, f64);
const PAPER_W1: [Paper; 4] =
    [(1044.0, 13.7, 1847.0, 52.2), (1026.0, 20.5, 1844.0, 55.5), (1531.0, 27.7, 2616.0, 34.6), (1531.0, 22.5, 2521.0, 34.6)];
const PAPER_W2: [Paper; 4] =
    [(1859.0, 0.9, 1896.0, 15.0), (1861.0, 1.3, 1925.0, 14.7), (1860.0, 1.3, 1925.0, 14.5), (1862.0, 1.6, 1956.0, 14.5)];

/// The settings of a cluster run: the paper's, or one parameter of ours moved.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Setting {
    /// Window of the owner utilisation h that LL weighs (ours).
    linger_window_s: u64,
    /// Owner utilisation above which lingering stops (1.0: the paper's LL, eq. 4 alone).
    linger_cpu_max: f64,
    /// Suspend + resume, s (ours).
    suspend_resume_s: f64,
    /// PM's pause, s (ours).
    pause_s: u64,
    /// Presence of the generated owners (the generator's fit to seed 000 §4).
    presence: f64,
}

const PAPER_SETTING: Setting = Setting { linger_window_s: 120, linger_cpu_max: 1.0, suspend_resume_s: 0.7, pause_s: 300, presence: 0.44 };

impl Setting {
    fn t_migr(&self) -> f64 {
        IMAGE_S + self.suspend_resume_s
    }
}

/// One sweep of our parameters: (name, value, source, [(label, setting)]).
type Sweep = (&'static str, String, &'static str, Vec<(String, Setting)>);

/// The sweeps of our parameters.
fn sweeps() -> Vec<Sweep> {
    let p = PAPER_SETTING;
    vec![
        (
            "window of owner utilisation h for LL",
            "120 s".into(),
            "ours: seed 000 weighs the non-idle episode's utilisation and gives no window; the policy's default 10 s reacts to every 1-s burst",
            [10u64, 30, 300].iter().map(|&w| (format!("{w} s"), Setting { linger_window_s: w, ..p })).collect(),
        ),
        (
            "suspend + resume time in T_migr",
            "0.7 s".into(),
            "ours: eq. 5 names both and gives no value",
            [0.0, 5.0].iter().map(|&s| (format!("{s} s"), Setting { suspend_resume_s: s, ..p })).collect(),
        ),
        (
            "LL's cap on owner utilisation",
            "none (1.0)".into(),
            "the paper's LL migrates by eq. 4 only; Lull's default lingers only up to 20 %",
            [0.2, 0.5].iter().map(|&c| (format!("{:.0} %", c * 100.0), Setting { linger_cpu_max: c, ..p })).collect(),
        ),
        (
            "owners' presence (generator)",
            "0.44".into(),
            "fitted to seed 000 §4's 46 % non-idle time (generator report); the Berkeley traces are not available",
            [0.33, 0.55].iter().map(|&x| (format!("{x:.2}"), Setting { presence: x, ..p })).collect(),
        ),
        (
            "PM's pause",
            "300 s".into(),
            "ours (the policy's default): §3.1 says only that it \"should not be long\"; the headline (LL vs IE) does not involve PM, and the sweep runs LL and IE with it to show that",
            [60u64, 900].iter().map(|&s| (format!("{s} s"), Setting { pause_s: s, ..p })).collect(),
        ),
    ]
}

fn traces(seed: u64, nodes: u64, presence: f64) -> Vec<OwnerTrace> {
    let params = GenParams { presence, ..GenParams::default() };
    let mut r = Rng::derive(seed, 0x111);
    (0..nodes)
        .map(|i| {
            let mut t = generate(&params, seed, i, START, 2);
            let off = r.int(0, 86_399) as usize;
            t.samples.drain(..off);
            t.samples.truncate(86_400);
            t.start_unix = START;
            t.coarsen(2)
        })
        .collect()
}

fn machines(traces: &[OwnerTrace], mode: EvictionMode, s: &Setting) -> Vec<SimMachine> {
    traces
        .iter()
        .map(|t| {
            let mut p = PolicyConfig::default();
            p.availability.owner_cpu_max = 0.10;
            p.availability.recruitment_threshold_s = 60;
            p.eviction.mode = mode;
            p.eviction.migration_cost_s = s.t_migr().round() as u64;
            p.eviction.linger_window_s = s.linger_window_s;
            p.eviction.linger_cpu_max = s.linger_cpu_max;
            p.eviction.pause_s = s.pause_s;
            p.budget.interruptions_per_day = 10_000;
            SimMachine::traced(t, p)
        })
        .collect()
}

fn jobs(n: u64, cpu_s: f64, s: &Setting) -> Vec<SimJob> {
    (0..n)
        .map(|id| SimJob {
            id,
            program: "foreign".into(),
            submit_s: 0.0,
            width: 1,
            normtime_s: cpu_s,
            estimate_s: Some(cpu_s),
            checkpointable: true,
            migration_s: s.t_migr(),
        })
        .collect()
}

/// One cluster run of a seed.
#[derive(Clone, Copy, Debug)]
enum Spec {
    /// Mode, workload, throughput (else completion), setting (None: the paper's).
    Cluster { mode: usize, workload: usize, throughput: bool, sweep: Option<(usize, usize)> },
    /// Fig. 8: LL (true) or IE, episode length.
    Episode { ll: bool, episode: usize },
}

/// Fig. 8's episode lengths, seconds.
const EPISODES: [f64; 9] = [5.0, 10.0, 20.0, 30.0, 45.0, 60.0, 90.0, 120.0, 180.0];

fn specs(sweeps: usize, sweep_points: &[usize], with_sweeps: bool) -> Vec<Spec> {
    let mut v = Vec::new();
    for mode in 0..MODES.len() {
        for workload in 0..2 {
            for throughput in [false, true] {
                v.push(Spec::Cluster { mode, workload, throughput, sweep: None });
            }
        }
    }
    if with_sweeps {
        for (k, &n) in sweep_points.iter().enumerate().take(sweeps) {
            for point in 0..n {
                for mode in [0, 2] {
                    v.push(Spec::Cluster { mode, workload: 0, throughput: true, sweep: Some((k, point)) });
                }
            }
        }
    }
    for ll in [true, false] {
        for episode in 0..EPISODES.len() {
            v.push(Spec::Episode { ll, episode });
        }
    }
    v
}

/// What a run gives back.
enum Out {
    Cluster(Box<Outcome>),
    /// Fig. 8: the job's completion, seconds after it started.
    Episode(f64),
}

fn run_cluster(seed: u64, nodes: u64, hour: f64, mode: usize, workload: usize, throughput: bool, s: &Setting) -> Result<Outcome> {
    let tr = traces(seed, nodes, s.presence);
    let ms = machines(&tr, MODES[mode].0, s);
    let (n, cpu) = workload_of(workload, nodes);
    let mut cfg = SimConfig::new(SchedConfig::default());
    cfg.migration_sees_pool = true;
    if throughput {
        cfg.horizon_s = Some(hour);
        driver::run(&ms, &jobs(n, 1e12, s), &cfg, &mut |_, _| {})
    } else {
        driver::run(&ms, &jobs(n, cpu, s), &cfg, &mut |_, _| {})
    }
}

fn workload_of(k: usize, nodes: u64) -> (u64, f64) {
    if k == 0 {
        (nodes * 2, 600.0)
    } else {
        (nodes / 4, 1800.0)
    }
}

/// Fig. 8 on two machines: a 50-s job starts on machine A; A's owner returns a second
/// later at 20 % CPU for `episode` seconds; machine B is free. Returns the job's time
/// from its start to its end under LL or IE, with the paper's `T_migr`.
fn run_episode(ll: bool, episode: f64) -> Result<f64> {
    let away = OwnerSample { owner_cpu: 0.0, owner_mem_bytes: 1 << 30, input: false };
    let busy = OwnerSample { owner_cpu: 0.2, owner_mem_bytes: 1 << 30, input: true };
    let mut a = RunTrace::new("A", START, 1, 16 << 30);
    a.push(away, 61);
    a.push(busy, episode as u32);
    a.push(away, 2000);
    let mut b = RunTrace::new("B", START, 1, 16 << 30);
    b.push(busy, 1);
    b.push(away, 2000 + 60 + episode as u32);
    let mode = if ll { EvictionMode::LingerLonger } else { EvictionMode::ImmediateEviction };
    let ms: Vec<SimMachine> = [a, b]
        .into_iter()
        .map(|t| {
            let mut m = SimMachine::dedicated(t.machine.clone(), 1.0);
            m.owner = Some(t);
            m.policy.availability.owner_cpu_max = 0.10;
            m.policy.availability.recruitment_threshold_s = 60;
            m.policy.eviction.mode = mode;
            m.policy.eviction.migration_cost_s = PAPER_SETTING.t_migr().round() as u64;
            m.policy.eviction.linger_window_s = 10;
            m.policy.eviction.linger_cpu_max = 1.0;
            m
        })
        .collect();
    let mut cfg = SimConfig::new(SchedConfig::default());
    cfg.migration_sees_pool = true;
    let job = SimJob { migration_s: PAPER_SETTING.t_migr(), ..jobs(1, 50.0, &PAPER_SETTING).remove(0) };
    let out = driver::run(&ms, &[job], &cfg, &mut |_, _| {})?;
    let j = &out.jobs[0];
    Ok(j.end_s.unwrap_or(f64::NAN) - j.start_s.unwrap_or(f64::NAN))
}

/// Table 1's measures of one mode and workload on one seed.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Row1 {
    pub avg_job: f64,
    pub variation: f64,
    pub family: f64,
    pub completed: f64,
    pub throughput: f64,
    pub harvested: f64,
    pub lingered_share: f64,
    pub evictions: f64,
    /// Simulated owner delay over the cluster's local CPU time.
    pub ldr: f64,
}

fn job_stats(out: &Outcome) -> (f64, f64, f64, f64) {
    let done: Vec<(f64, f64, f64)> = out.jobs.iter().filter_map(|j| Some((j.submit_s, j.start_s?, j.end_s?))).collect();
    let n = done.len().max(1) as f64;
    let avg = done.iter().map(|(s, _, e)| e - s).sum::<f64>() / n;
    let exec: Vec<f64> = done.iter().map(|(_, st, e)| e - st).collect();
    let m = exec.iter().sum::<f64>() / n;
    let sd = (exec.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / n).sqrt();
    (avg, if m > 0.0 { sd / m } else { 0.0 }, out.makespan(), out.jobs.iter().map(|j| j.evictions as f64).sum())
}

/// The owner delay ratio of a run: its shared seconds at each level through the
/// dispatch-level table, over all local CPU time.
fn ldr(out: &Outcome, table: &[f64; dispatch::LEVELS]) -> f64 {
    let delay: f64 = out.machines.iter().flat_map(|m| m.shared_by_level.iter().zip(table).map(|(s, d)| s * d)).sum();
    delay / out.machines.iter().map(|m| m.owner_cpu_s).sum::<f64>().max(1e-9)
}

fn row1(out: &Outcome, tout: &Outcome, hour: f64, table: &[f64; dispatch::LEVELS]) -> Row1 {
    let (avg, var, fam, ev) = job_stats(out);
    let sum = |f: fn(&driver::MachineOutcome) -> f64| tout.machines.iter().map(f).sum::<f64>();
    Row1 {
        avg_job: avg,
        variation: var,
        family: fam,
        completed: out.completed_share(),
        throughput: sum(|m| m.guest_cpu_s) / hour,
        harvested: sum(|m| m.guest_cpu_s) / sum(|m| m.idle_cpu_s).max(1e-9),
        lingered_share: sum(|m| m.lingered_s) / sum(|m| m.guest_s).max(1e-9),
        evictions: ev,
        ldr: ldr(tout, table),
    }
}

/// One seed's results.
struct Seed {
    /// [mode][workload].
    table: Vec<[Row1; 2]>,
    /// Per sweep, per point: W1 throughput gain of LL over IE.
    sweeps: Vec<Vec<f64>>,
    /// Fig. 8: (LL, IE) completion per episode.
    episodes: Vec<(f64, f64)>,
    /// LL's Workload-1 owner delay through each of [`BURST_SWEEP`]'s tables.
    ldr_by_burst: Vec<f64>,
}

/// The burst model's sweep: mean local run bursts of 5 and 20 ms (ours: 10 ms), CV² 4.
const BURST_SWEEP: [f64; 2] = [0.005, 0.020];

fn gather(
    seed_specs: &[Spec],
    outs: Vec<Out>,
    hour: f64,
    table: &[f64; dispatch::LEVELS],
    burst_tables: &[[f64; dispatch::LEVELS]],
    sweep_points: &[usize],
) -> Seed {
    let mut cluster: Vec<[[Option<Outcome>; 2]; 2]> = (0..MODES.len()).map(|_| Default::default()).collect();
    let mut sw: Vec<Vec<[f64; 2]>> = sweep_points.iter().map(|&n| vec![[0.0; 2]; n]).collect();
    let mut episodes = vec![(0.0, 0.0); EPISODES.len()];
    for (spec, out) in seed_specs.iter().zip(outs) {
        match (*spec, out) {
            (Spec::Cluster { mode, workload, throughput, sweep: None }, Out::Cluster(o)) => {
                cluster[mode][workload][throughput as usize] = Some(*o);
            }
            (Spec::Cluster { mode, sweep: Some((k, p)), .. }, Out::Cluster(o)) => {
                sw[k][p][(mode != 0) as usize] = o.machines.iter().map(|m| m.guest_cpu_s).sum::<f64>() / hour;
            }
            (Spec::Episode { ll, episode }, Out::Episode(t)) => {
                if ll {
                    episodes[episode].0 = t;
                } else {
                    episodes[episode].1 = t;
                }
            }
            _ => unreachable!("a spec's outcome has its kind"),
        }
    }
    let ldr_by_burst = burst_tables.iter().map(|t| cluster[0][0][1].as_ref().map_or(f64::NAN, |o| ldr(o, t))).collect();
    let table_rows = cluster
        .iter()
        .map(|w| {
            std::array::from_fn(|k| match (&w[k][0], &w[k][1]) {
                (Some(o), Some(t)) => row1(o, t, hour, table),
                _ => Row1::default(),
            })
        })
        .collect();
    Seed {
        table: table_rows,
        sweeps: sw.iter().map(|pts| pts.iter().map(|[ll, ie]| ll / ie.max(1e-9) - 1.0).collect()).collect(),
        episodes,
        ldr_by_burst,
    }
}

/// Runs the experiment (see the module doc).
pub fn run(opts: &Options, progress: &mut dyn FnMut(u64, u64)) -> Result<Report> {
    let small = opts.scale == Scale::Small;
    let (nodes, hour) = if small { (16u64, 1200.0) } else { (64, 3600.0) };
    let sw = sweeps();
    let sweep_points: Vec<usize> = sw.iter().map(|s| s.3.len()).collect();
    let table = dispatch::delay_table(SWITCH_S, BurstModel::default(), if small { 20.0 } else { 200.0 }, 0x000);
    let burst_tables: Vec<[f64; dispatch::LEVELS]> = BURST_SWEEP
        .iter()
        .map(|&m| {
            let model = BurstModel { run_mean_s: m, ..BurstModel::default() };
            dispatch::delay_table(SWITCH_S, model, if small { 20.0 } else { 200.0 }, 0x000)
        })
        .collect();
    let seed_specs = |with: bool| specs(sw.len(), &sweep_points, with && !small);
    let sweep_seeds = opts.seeds.min(5);
    let first = opts.first_seed;
    let per_seed = claims::over_seeds(
        opts,
        |seed| seed_specs(seed < first + sweep_seeds as u64),
        progress,
        |seed, spec| match *spec {
            Spec::Cluster { mode, workload, throughput, sweep } => {
                let s = sweep.map_or(PAPER_SETTING, |(k, p)| sw[k].3[p].1);
                Ok(Out::Cluster(Box::new(run_cluster(seed, nodes, hour, mode, workload, throughput, &s)?)))
            }
            Spec::Episode { ll, episode } => Ok(Out::Episode(run_episode(ll, EPISODES[episode])?)),
        },
    )?;
    let seeds: Vec<Seed> = per_seed
        .into_iter()
        .enumerate()
        .map(|(k, outs)| gather(&seed_specs(k < sweep_seeds), outs, hour, &table, &burst_tables, &sweep_points))
        .collect();

    let mut md = String::new();
    preamble(&mut md, "`linger` — seed 000's Linger-Longer experiments on Lull's eviction modes", "linger", opts);
    let _ = writeln!(
        md,
        "Per seed: {nodes} generated owners (2-s samples, each from a random offset into its day), lull-core's `Policy` per machine with `eviction.mode` = IE / PM / LL / LF on the paper's parameters (idle: CPU < 10 % and no input for 60 s; LL by eq. 4 alone; `T_migr` = 8 MB at 3 Mbps + 0.7 s = {:.1} s, paid by every resumed job), lull-core's Backfill scheduler. Model and measures: `sim/src/experiments/linger.rs`; the owner's delay at dispatch level: `sim/src/dispatch.rs`.\n",
        PAPER_SETTING.t_migr()
    );
    let mut rows = Vec::new();
    rows.extend(table1_section(&mut md, &seeds, nodes));
    rows.extend(fig7_section(&mut md, small));
    rows.extend(fig8_section(&mut md, &seeds));
    rows.extend(fig11_section(&mut md, small, opts));
    assumptions_section(&mut md, &seeds, &sw, sweep_seeds);
    let _ = writeln!(md, "## Summary\n\n{}\n", claims::tally(&rows));
    let svgs = charts(&mut md, &seeds);
    Ok(Report { name: opts.report_name("linger"), markdown: md, svgs, rows })
}

fn per_mode(seeds: &[Seed], mode: usize, w: usize, f: fn(&Row1) -> f64) -> Vec<f64> {
    seeds.iter().map(|s| f(&s.table[mode][w])).collect()
}

fn table1_section(md: &mut String, seeds: &[Seed], nodes: u64) -> Vec<Row> {
    // The paper's 128 and 16 jobs on 64 nodes; `--small` keeps the jobs per node.
    let ((n1, _), (n2, _)) = (workload_of(0, nodes), workload_of(1, nodes));
    let titles = [format!("Workload-1 (many jobs: {n1} × 600 s)"), format!("Workload-2 (few jobs: {n2} × 1,800 s)")];
    for (k, (title, paper)) in titles.iter().zip([PAPER_W1, PAPER_W2]).enumerate() {
        let _ = writeln!(md, "## Table 1 — {title}\n");
        let _ = writeln!(
            md,
            "| metric | {} |\n|---|{}",
            MODES.iter().map(|(_, n)| format!("{n} (paper)")).collect::<Vec<_>>().join(" | "),
            "---|".repeat(MODES.len())
        );
        let line = |md: &mut String, name: &str, f: fn(&Row1) -> f64, d: usize, scale: f64, unit: &str, p: Option<fn(&Paper) -> f64>| {
            let cells: Vec<String> = (0..MODES.len())
                .map(|m| {
                    let ours = format!("{}{unit}", Summary::of(&per_mode(seeds, m, k, f)).show(d, scale));
                    match p {
                        Some(p) => format!("{ours} ({:.*}{unit})", d, p(&paper[m])),
                        None => ours,
                    }
                })
                .collect();
            let _ = writeln!(md, "| {name} | {} |", cells.join(" | "));
        };
        line(md, "avg job time (s)", |r| r.avg_job, 0, 1.0, "", Some(|p| p.0));
        line(md, "variation", |r| r.variation, 1, 100.0, " %", Some(|p| p.1));
        line(md, "family time (s)", |r| r.family, 0, 1.0, "", Some(|p| p.2));
        line(md, "**throughput** (CPU-s/s)", |r| r.throughput, 1, 1.0, "", Some(|p| p.3));
        line(md, "jobs completed", |r| r.completed, 0, 100.0, " %", None);
        line(md, "evictions", |r| r.evictions, 0, 1.0, "", None);
        line(md, "harvested fraction of idle CPU", |r| r.harvested, 0, 100.0, " %", None);
        line(md, "guest time spent lingering", |r| r.lingered_share, 1, 100.0, " %", None);
        line(md, "owner delay (dispatch level, 100 µs)", |r| r.ldr, 2, 100.0, " %", None);
        let _ = writeln!(md);
    }
    let gain = |a: usize, b: usize, w: usize, f: fn(&Row1) -> f64| -> Vec<f64> {
        seeds.iter().map(|s| f(&s.table[a][w]) / f(&s.table[b][w]).max(1e-9) - 1.0).collect()
    };
    let thr = |r: &Row1| r.throughput;
    let change = |claim, paper, claimed, why, v: &[f64]| {
        Claim { claim, paper, expect: Expect::Change { claimed, tol: 0.5 }, decimals: 0, scale: 100.0, unit: " %", why }.check(v)
    };
    let truth =
        |claim, paper, why, v: &[f64]| Claim { claim, paper, expect: Expect::True, decimals: 0, scale: 1.0, unit: "", why }.check(v);
    let rows = vec![
        change(
            "Table 1, W1: LL's throughput over IE's",
            "52.2 vs 34.6: +51 %",
            0.51,
            "lingering keeps a recruited node's idle cycles through the owner's short non-idle episodes, for which IE pays a 22-s migration each time, as in the paper",
            &gain(0, 2, 0, thr),
        )
        .unless_holds("our generated owners' non-idle episodes are not the Berkeley traces': how many are short enough to linger through sets the gain"),
        change(
            "Table 1, W1: LF's throughput over IE's",
            "55.5 vs 34.6: +60 %",
            0.60,
            "LF never leaves a busy node, so it keeps every recruited node's idle cycles, as in the paper",
            &gain(1, 2, 0, thr),
        )
        .unless_holds("with the paper's 10 % idle test IE evicts at every 2-s burst of our owners over 10 % and pays 22 s to move each time, so LF, which never moves, gains more over IE than in the paper"),
        change(
            "Table 1, W1: LL's average job time against IE's",
            "1044 vs 1531 s: −32 %",
            -0.32,
            "jobs linger instead of queueing for a free node (the paper's Fig. 10a)",
            &gain(0, 2, 0, |r| r.avg_job),
        )
        .unless_holds("most of the paper's gain is queueing saved, and our queue depends on how many of our owners are recruitable at once"),
        change(
            "§6: LL's and LF's family time improve on IE's by 42 %",
            "2616 vs 1847 s: +42 %",
            0.42,
            "the last jobs finish sooner when no node time is lost to migrations",
            &gain(2, 0, 0, |r| r.family),
        )
        .unless_holds("the family ends with the last jobs, and how long they wait depends on our owners' idle nodes"),
        truth(
            "§6: in W1, LL's variation is much lower than IE's and PM's",
            "13.7 % vs 27.7 % and 22.5 %",
            "evicted jobs restart later and run longer under IE and PM, as in the paper",
            &seeds.iter().map(|s| ((s.table[0][0].variation < s.table[2][0].variation) && (s.table[0][0].variation < s.table[3][0].variation)) as u8 as f64).collect::<Vec<_>>(),
        ),
        truth(
            "§6: in W2 the four policies' average job times are almost identical (ours: within 3 %)",
            "1859–1862 s",
            "16 jobs on 64 nodes always find idle nodes, whatever the mode",
            &seeds
                .iter()
                .map(|s| {
                    let v: Vec<f64> = (0..4).map(|m| s.table[m][1].avg_job).collect();
                    (v.iter().cloned().fold(0.0, f64::max) / v.iter().cloned().fold(f64::INFINITY, f64::min) - 1.0 <= 0.03) as u8 as f64
                })
                .collect::<Vec<_>>(),
        )
        .unless_holds("IE's evictions at every owner burst over 10 % still cost 22-s migrations with idle nodes to spare, so IE and PM finish later than LL and LF"),
        Claim {
            claim: "§6: for both workloads the owners' delay (average increase of a local CPU request's completion) stays under 0.5 %",
            paper: "< 0.5 %",
            expect: Expect::AtMost(0.005),
            decimals: 2,
            scale: 100.0,
            unit: " %",
            why: "simulated at dispatch level from the seconds LL's guests ran beside their owners; our burst model is ours (listed below)",
        }
        .check(&seeds.iter().map(|s| s.table[0][0].ldr.max(s.table[0][1].ldr)).collect::<Vec<_>>()),
    ];
    let _ = writeln!(md, "### Table 1's claims\n");
    claims::table(md, &rows);
    rows
}

fn fig7_section(md: &mut String, small: bool) -> Vec<Row> {
    let _ = writeln!(md, "## Fig. 7 — the owner's delay and the stolen cycles at dispatch level (§5.1)\n");
    let _ = writeln!(
        md,
        "One node, a compute-bound guest at the lowest priority, the owner's run and idle bursts from our burst model (10-ms mean run bursts, seed 001's time slice; CV² 4; Fig. 4's measured means are an image we lack). The model has no seed of ours: the rows below are one long run per point.\n"
    );
    let secs = if small { 20.0 } else { 200.0 };
    let levels = [0.1, 0.2, 0.3, 0.5, 0.7, 0.9];
    let costs = [100e-6, 300e-6, 500e-6];
    let _ = writeln!(
        md,
        "| owner utilisation | {} |\n|---|---|---|---|",
        costs.map(|c| format!("LDR / FCSR at {:.0} µs", c * 1e6)).join(" | ")
    );
    let mut worst = [0.0f64; 3];
    let mut least_fcsr = 1.0f64;
    for &u in &levels {
        let cells: Vec<String> = costs
            .iter()
            .enumerate()
            .map(|(k, &c)| {
                let n = dispatch::simulate_node(u, c, BurstModel::default(), secs, &mut Rng::derive(7, (u * 100.0) as u64));
                worst[k] = worst[k].max(n.ldr);
                least_fcsr = least_fcsr.min(n.fcsr);
                format!("{:.1} % / {:.1} %", n.ldr * 100.0, n.fcsr * 100.0)
            })
            .collect();
        let _ = writeln!(md, "| {:.0} % | {} |", u * 100.0, cells.join(" | "));
    }
    let _ = writeln!(md);
    let one = |claim, paper, expect, v: f64, why| Claim { claim, paper, expect, decimals: 1, scale: 100.0, unit: " %", why }.check(&[v]);
    let rows = vec![
        one("§5.1: at 100 µs the delay to local jobs is about 1 % (ours: 0.5–1.5 %)", "about 1 %", Expect::Near { claimed: 0.01, tol: 0.005 }, worst[0], "one switch per 10-ms run burst costs 1 %; the paper's measured burst lengths set its curve"),
        one("§5.1: up to 300 µs the delay stays under 5 %", "< 5 %", Expect::AtMost(0.05), worst[1], "3 % at 10-ms bursts"),
        one("§5.1: at 500 µs the overhead is 8 % (ours: 4–12 %)", "8 %", Expect::Near { claimed: 0.08, tol: 0.04 }, worst[2], "5 % at 10-ms bursts; the paper's shorter bursts at some utilisations cost more"),
        one("§5.1: in all cases the guest uses over 90 % of the idle cycles", "> 90 %", Expect::AtLeast(0.9), least_fcsr, "each idle burst loses one reload; at 90 % utilisation our idle bursts average about 1 ms, so a 500-µs reload eats much of them (the paper's measured idle bursts must be longer there)"),
    ];
    claims::table(md, &rows);
    rows
}

fn fig8_section(md: &mut String, seeds: &[Seed]) -> Vec<Row> {
    let _ = writeln!(md, "## Fig. 8 — migration timing of a 50-s job (§5.2)\n");
    let _ = writeln!(
        md,
        "Two machines through the driver: a 50-s job starts on A, A's owner returns a second later at 20 % CPU for the episode, B is free; Lull's LL (eq. 4, `T_migr` = {:.1} s) against IE. Deterministic: the same on every seed.\n",
        PAPER_SETTING.t_migr()
    );
    let e = &seeds[0].episodes;
    let _ = writeln!(md, "| episode (s) | LL completion (s) | IE completion (s) |\n|---|---|---|");
    for (x, (ll, ie)) in EPISODES.iter().zip(e) {
        let _ = writeln!(md, "| {x:.0} | {ll:.1} | {ie:.1} |");
    }
    let cross = EPISODES.iter().zip(e).find(|(_, (ll, ie))| ll > ie).map_or(f64::INFINITY, |(x, _)| *x);
    let _ = writeln!(md);
    let t_lingr = 5.0 * PAPER_SETTING.t_migr();
    let mut rows = vec![Claim {
        claim: "§5.2: LL finishes first when the episode is shorter than about 30 s, IE when longer (ours: the first episode where IE wins, ±50 %)",
        paper: "30 s",
        expect: Expect::Near { claimed: 30.0, tol: 15.0 },
        decimals: 0,
        scale: 1.0,
        unit: " s",
        why: if cross > 45.0 {
            "eq. 4 with h = 0.2, l = 0 lingers 5·T_migr ≈ 110 s with the paper's own 8 MB at 3 Mbps, and a 50-s job lingering at 80 % ends in 62.5 s, before IE's 50 + 22 s: IE can only win if T_migr < 12.5 s; the paper's 30 s implies T_migr ≈ 6 s"
        } else {
            "eq. 4 with h = 0.2, l = 0 lingers 5·T_migr"
        },
    }
    .check(&seeds.iter().map(|s| s.episodes.iter().zip(EPISODES).find(|((ll, ie), _)| ll > ie).map_or(f64::INFINITY, |(_, x)| x)).collect::<Vec<_>>())];
    if cross.is_infinite() {
        rows[0].ours = format!("never: LL first at every episode up to {:.0} s", EPISODES[EPISODES.len() - 1]);
    }
    let _ = writeln!(md, "Eq. 4 gives T_lingr = (1 − l)/(h − l) · T_migr = 5 × {:.1} = {t_lingr:.0} s here.\n", PAPER_SETTING.t_migr());
    claims::table(md, &rows);
    rows
}

fn fig11_section(md: &mut String, small: bool, opts: &Options) -> Vec<Row> {
    let _ = writeln!(md, "## Fig. 11 — an 8-process bulk-synchronous job lingering (§7.1)\n");
    let _ = writeln!(
        md,
        "Eight processes computing 100 ms between barriers (the paper's granularity), communication taken as free (ours: not in the text), nonidle nodes' owners from the dispatch-level burst model at the given utilisation; slowdown against eight idle nodes. Per seed one run of {} iterations.\n",
        if small { 50 } else { 500 }
    );
    let iters = if small { 50 } else { 500 };
    let seeds = claims::seeds(opts);
    let slow = |nonidle: usize, u: f64| -> Vec<f64> {
        seeds
            .iter()
            .map(|&s| {
                dispatch::bsp_slowdown(
                    8,
                    nonidle,
                    u,
                    0.1,
                    SWITCH_S,
                    BurstModel::default(),
                    iters,
                    &mut Rng::derive(s, 0xb5b ^ nonidle as u64 ^ (u * 1000.0) as u64),
                )
            })
            .collect()
    };
    let us = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.8];
    let _ = writeln!(md, "| owner utilisation | 1 nonidle node | 2 | 4 | 8 |\n|---|---|---|---|---|");
    for &u in &us {
        let cells: Vec<String> = [1, 2, 4, 8].iter().map(|&n| Summary::of(&slow(n, u)).show(2, 1.0)).collect();
        let _ = writeln!(md, "| {:.0} % | {} |", u * 100.0, cells.join(" | "));
    }
    let _ = writeln!(md);
    let low: Vec<f64> = (0..seeds.len()).map(|k| [0.1, 0.2, 0.3].iter().map(|&u| slow(1, u)[k]).fold(0.0, f64::max)).collect();
    let rows = vec![
        Claim {
            claim: "§7.1: with one nonidle node, slowdown is only 1.1 to 1.5 when the load is below 40 % (ours: the worst of 10–30 %)",
            paper: "1.1–1.5",
            expect: Expect::AtMost(1.5),
            decimals: 2,
            scale: 1.0,
            unit: "",
            why: "the lingering process gets the idle share 1 − u of its node, and the barrier waits for it",
        }
        .check(&low),
        Claim {
            claim: "§7.1: at up to 20 % utilisation the slowdown is at most a factor of two even with all eight nodes nonidle",
            paper: "≤ 2",
            expect: Expect::AtMost(2.0),
            decimals: 2,
            scale: 1.0,
            unit: "",
            why: "the slowest of eight nodes sets each phase: 1/(1 − u) plus the spread of their bursts",
        }
        .check(&slow(8, 0.2)),
        Claim {
            claim: "§7.1: above 50 % utilisation lingering slows the job dramatically (ours: ≥ 2× at 60 %, one nonidle node)",
            paper: "dramatic",
            expect: Expect::AtLeast(2.0),
            decimals: 2,
            scale: 1.0,
            unit: "",
            why: "the node gives the guest under half its cycles",
        }
        .check(&slow(1, 0.6)),
    ];
    claims::table(md, &rows);
    rows
}

fn assumptions_section(md: &mut String, seeds: &[Seed], sw: &[Sweep], sweep_seeds: usize) {
    let base = Summary::of(&seeds.iter().map(|s| s.table[0][0].throughput / s.table[2][0].throughput.max(1e-9) - 1.0).collect::<Vec<_>>());
    let mut list: Vec<Assumption> = sw
        .iter()
        .enumerate()
        .map(|(k, (name, value, source, points))| Assumption {
            name: name.to_string(),
            value: value.clone(),
            source: source.to_string(),
            sweep: points
                .iter()
                .enumerate()
                .map(|(p, (label, _))| {
                    (
                        label.clone(),
                        Summary::of(
                            &seeds.iter().take(sweep_seeds).map(|s| s.sweeps.get(k).map_or(f64::NAN, |v| v[p])).collect::<Vec<_>>(),
                        ),
                    )
                })
                .collect(),
        })
        .collect();
    // The cluster runs never read the burst model (only the owner-delay table does), so
    // the headline at each swept burst is the paper setting's, over the same seeds.
    let head = Summary::of(
        &seeds.iter().take(sweep_seeds).map(|s| s.table[0][0].throughput / s.table[2][0].throughput.max(1e-9) - 1.0).collect::<Vec<_>>(),
    );
    let ldr_at = |k: Option<usize>| {
        Summary::of(
            &seeds.iter().map(|s| k.map_or(s.table[0][0].ldr, |k| s.ldr_by_burst.get(k).copied().unwrap_or(f64::NAN))).collect::<Vec<_>>(),
        )
        .show(2, 100.0)
    };
    list.push(Assumption {
        name: "dispatch-level burst model".into(),
        value: "10-ms mean run bursts, CV² 4".into(),
        source: format!(
            "ours: seed 001 §5.1's 10-ms time slice; seed 000's Fig. 4 is an image; moves the owner delay (LDR ≈ 100 µs / mean run burst), not the throughput: the cluster runs do not read it, so the headline cannot move (swept: the same runs); LL's Workload-1 owner delay on all seeds is {} % at 5 ms, {} % at 10 ms, {} % at 20 ms",
            ldr_at(Some(0)),
            ldr_at(None),
            ldr_at(Some(1))
        ),
        sweep: BURST_SWEEP.iter().map(|m| (format!("{:.0} ms", m * 1e3), head)).collect(),
    });
    let _ = writeln!(
        md,
        "## Parameters of ours\n\nSweeps over the first {sweep_seeds} seeds; the paper's setting gives {} on all seeds.\n",
        base.show(0, 100.0) + " %"
    );
    claims::assumptions(md, "Workload-1 throughput of LL over IE (Table 1: +51 %)", 0, 100.0, &list);
}

fn charts(md: &mut String, seeds: &[Seed]) -> Vec<(String, String)> {
    let xs = [1.0, 2.0, 3.0, 4.0];
    let mean = |m: usize, f: fn(&Row1) -> f64| Summary::of(&per_mode(seeds, m, 0, f)).mean;
    let c1 = Chart::new("Throughput, Workload-1 (cf. seed 000 Table 1): 1 LL, 2 LF, 3 IE, 4 PM", "mode", "guest CPU-s per s")
        .line("ours (mean)", xs.iter().enumerate().map(|(m, x)| (*x, mean(m, |r| r.throughput))).collect())
        .line("paper", xs.iter().zip(&PAPER_W1).map(|(x, p)| (*x, p.3)).collect());
    let c2 = Chart::new("Average job time, Workload-1 (cf. seed 000 Table 1, Fig. 10)", "mode (1 LL, 2 LF, 3 IE, 4 PM)", "seconds")
        .line("ours (mean)", xs.iter().enumerate().map(|(m, x)| (*x, mean(m, |r| r.avg_job))).collect())
        .line("paper", xs.iter().zip(&PAPER_W1).map(|(x, p)| (*x, p.0)).collect());
    let e = &seeds[0].episodes;
    let c3 = Chart::new("Completion of a 50-s job vs the owner's episode (cf. seed 000 Fig. 8)", "episode (s)", "completion (s)")
        .line("LL", EPISODES.iter().zip(e).map(|(x, p)| (*x, p.0)).collect())
        .line("IE", EPISODES.iter().zip(e).map(|(x, p)| (*x, p.1)).collect());
    let _ = writeln!(md, "![throughput](linger-throughput.svg)\n\n![job time](linger-jobtime.svg)\n\n![migration timing](linger-fig8.svg)");
    vec![("linger-throughput.svg".into(), c1.to_svg()), ("linger-jobtime.svg".into(), c2.to_svg()), ("linger-fig8.svg".into(), c3.to_svg())]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_run_is_reproducible_and_reports_every_section() {
        let opts = Options::new(5, 2, Scale::Small, 1);
        let a = run(&opts, &mut |_, _| {}).unwrap();
        // The same on two threads: sim/tests/parallel_reports.rs.
        for s in ["Table 1 — Workload-1", "Fig. 7", "Fig. 8", "Fig. 11", "Parameters of ours"] {
            assert!(a.markdown.contains(s), "{s}");
        }
        assert!(a.rows.iter().all(|r| r.seeds == 2 || r.seeds == 1));
    }

    #[test]
    fn an_evicted_job_pays_its_migration_and_ll_lingers_through_a_short_episode() {
        // IE: evicted at the return, moves to B in T_migr, finishes the rest there.
        let ie = run_episode(false, 30.0).unwrap();
        assert!(ie > 50.0 + 0.9 * PAPER_SETTING.t_migr(), "IE {ie}");
        // LL lingers through 30 s at 80 % speed: about 6 s late, no migration.
        let ll = run_episode(true, 30.0).unwrap();
        assert!(ll < ie && ll < 60.0, "LL {ll} vs IE {ie}");
    }
}
