//! `memory`: seed 001's memory-centric load sharing (§5–6, Figs. 2, 3) with lull-core's
//! choice functions (`core/src/sched/memory.rs`) making every decision: whether a
//! machine accepts work, when it must shed a job, which job, and where it goes.
//!
//! * **Farm:** 32 machines, 112 MB of memory for jobs each (the paper's 128 MB less the
//!   system's share), a 10 Mbps network: remote submission costs 0.1 s, a migration
//!   `0.1 s + working set / 10 Mbps` during which the job does not run (§5.1).
//! * **Jobs:** the paper's benchmark programs (Table 1) with their dedicated lifetimes,
//!   working sets and I/O counts; a job's working set grows during its first quarter
//!   (from 20 % of its size, or across its published range), so demand is only known
//!   live. `m-m` (4,902 s) is left out: one in seven jobs that long would keep the farm
//!   saturated for hours after the last submission and measure nothing but m-m (swept
//!   in the report: with m-m).
//! * **Traces:** Trace 1 (503 jobs in 1,365 s), Trace 2 (420 in 2,503 s), Trace 3
//!   (359 in 3,634 s), each job submitted to a random home machine; gaps are
//!   exponential with the trace's mean rate (the paper draws a lognormal rate whose
//!   parameters do not reproduce its counts).
//! * **Time sharing:** the jobs on a machine share its CPU equally; while the machine
//!   pages (seed 001 eq. 1: `R_p(Q_o)` faults/s at 10 ms each) that share of every
//!   second is lost. Faults are attributed to the jobs whose working sets grew, else by
//!   working set (the LRU behaviour of §2). At most 95 % of a second is lost to paging
//!   (eq. 1's R_max × 10 ms would stop a thrashing machine outright).
//! * **Policies:** *no-LS* (jobs stay home, blocked while home is over its thresholds)
//!   and the four choices with CT = 4 jobs and MT (0 % unless swept).
//! * **Measure:** mean slowdown = wall time (submission to end) / dedicated lifetime,
//!   and the total paging, migration and queueing time (Fig. 2 right).

use super::claims::{self, Assumption, Claim, Expect, Row, Summary};
use super::options::{Options, Scale};
use super::report::{preamble, Report};
use crate::error::Result;
use crate::rng::Rng;
use lull_core::chart::Chart;
use lull_core::sched::{accepts, job_to_migrate, migration_target, overloaded, paging_rate, Choice, HostLoad, JobLoad, Thresholds};
use lull_core::sched::{JobId, MachineId};
use std::fmt::Write;

const MB: f64 = 1024.0 * 1024.0;
const NODES: usize = 32;
const MEMORY: u64 = 112 << 20;
const CT: usize = 4;
const REMOTE_S: f64 = 0.1;
const NET_BPS: f64 = 10e6;
const FAULT_S: f64 = 0.010;
/// At R_max (120 faults/s × 10 ms) a machine would make no progress at all; a thrashing
/// machine still runs a little, so at most this share of a second is lost to paging.
const MAX_LOST: f64 = 0.95;

/// (name, working set from, to (MB), lifetime (s), I/Os) from seed 001 Table 1; m-m last.
const PROGRAMS: [(&str, f64, f64, f64, f64); 7] = [
    ("bit-r", 64.22, 64.22, 192.26, 9.0),
    ("m-sort", 64.27, 64.27, 82.76, 18.0),
    ("t-sim", 4.64, 4.64, 41.63, 225.0),
    ("metis", 1.37, 4.30, 124.41, 292.0),
    ("r-sphere", 36.84, 39.66, 318.64, 1624.0),
    ("r-wing", 19.53, 23.39, 72.78, 3541.0),
    ("m-m", 66.37, 66.37, 4902.29, 4.0),
];

/// The three traces: (label, jobs, seconds).
const TRACES: [(&str, usize, f64); 3] = [("Trace 1", 503, 1365.0), ("Trace 2", 420, 2503.0), ("Trace 3", 359, 3634.0)];

/// The model's parameters of ours (see the report's list).
#[derive(Clone, Copy, Debug, PartialEq)]
struct Model {
    /// Programs drawn from: 6 (without m-m) or 7.
    programs: usize,
    /// Share of its lifetime over which a job's working set grows to its size.
    growth: f64,
    /// Gaps between arrivals: exponential (`None`), or log-normal of this σ, both at the
    /// trace's mean rate.
    lognormal_gaps: Option<f64>,
    /// Most of a second lost to paging.
    max_lost: f64,
}

const MODEL: Model = Model { programs: 6, growth: 0.25, lognormal_gaps: None, max_lost: MAX_LOST };

#[derive(Clone, Copy, Debug, PartialEq)]
enum Policy {
    NoLs,
    Ls(Choice),
}

impl Policy {
    fn name(self) -> &'static str {
        match self {
            Policy::NoLs => "no-LS",
            Policy::Ls(c) => c.name(),
        }
    }
}

#[derive(Clone, Debug)]
struct Job {
    program: usize,
    submit: f64,
    home: usize,
    done_cpu: f64,
    started: Option<f64>,
    ws_prev: u64,
    faults: f64,
    growth: f64,
}

impl Job {
    fn life(&self) -> f64 {
        PROGRAMS[self.program].3
    }
    /// Working set now: grows over the first `growth` of the job's CPU time.
    fn ws(&self) -> u64 {
        let (_, from, to, life, _) = PROGRAMS[self.program];
        let lo = if from == to { 0.2 * to } else { from };
        let f = (self.done_cpu / (self.growth * life)).min(1.0);
        ((lo + (to - lo) * f) * MB) as u64
    }
}

/// Outcome of one run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Totals {
    pub mean_slowdown: f64,
    pub paging_s: f64,
    pub migration_s: f64,
    pub queue_s: f64,
    pub migrations: u32,
}

fn arrivals(seed: u64, n: usize, span: f64, model: Model) -> Vec<Job> {
    let mut r = Rng::derive(seed, 0x001);
    let mean = span / n as f64;
    let mut t = 0.0;
    (0..n)
        .map(|_| {
            t += match model.lognormal_gaps {
                None => r.exp(mean),
                // Box–Muller normal, then mean · exp(σz − σ²/2): a log-normal of this mean.
                Some(sigma) => {
                    let z = (-2.0 * (1.0 - r.f64()).ln()).sqrt() * (std::f64::consts::TAU * r.f64()).cos();
                    mean * (sigma * z - sigma * sigma / 2.0).exp()
                }
            };
            Job {
                program: r.int(0, model.programs as u64 - 1) as usize,
                submit: t,
                home: r.int(0, NODES as u64 - 1) as usize,
                done_cpu: 0.0,
                started: None,
                ws_prev: 0,
                faults: 0.0,
                growth: model.growth,
            }
        })
        .collect()
}

/// The farm during a run: per node its running jobs and its blocked arrivals, and the
/// jobs in flight (job, to, arrives at).
struct Farm {
    jobs: Vec<Job>,
    running: Vec<Vec<usize>>,
    queued: Vec<Vec<usize>>,
    flying: Vec<(usize, usize, f64)>,
    end: Vec<Option<f64>>,
    finished: usize,
    tot: Totals,
    th: Thresholds,
    /// Most of a second lost to paging.
    max_lost: f64,
}

impl Farm {
    fn host(&self, n: usize, with_inbound: bool) -> HostLoad {
        let inbound: Vec<usize> = if with_inbound { self.flying.iter().filter(|f| f.1 == n).map(|f| f.0).collect() } else { Vec::new() };
        let demand: u64 = self.running[n].iter().chain(inbound.iter()).map(|&j| self.jobs[j].ws()).sum();
        HostLoad { machine: MachineId(n as u64), jobs: self.running[n].len() + inbound.len(), memory: MEMORY, demand }
    }
    fn hosts(&self) -> Vec<HostLoad> {
        (0..NODES).map(|n| self.host(n, true)).collect()
    }

    /// An arrival: home if it accepts, else (with load sharing) the best other machine,
    /// else blocked at home.
    fn arrive(&mut self, j: usize, t: f64, policy: Policy) {
        let home = self.jobs[j].home;
        if accepts(&self.host(home, true), self.th) {
            self.running[home].push(j);
        } else if let Policy::Ls(_) = policy {
            match migration_target(&self.hosts(), self.th, None, Some(MachineId(home as u64))) {
                Some(k) => {
                    self.flying.push((j, k.0 as usize, t + REMOTE_S));
                    self.tot.migration_s += REMOTE_S;
                }
                None => self.queued[home].push(j),
            }
        } else {
            self.queued[home].push(j);
        }
    }

    /// Jobs in flight land; blocked arrivals start when their machine accepts again.
    fn land_and_unblock(&mut self, t: f64) {
        let mut k = 0;
        while k < self.flying.len() {
            if self.flying[k].2 <= t {
                let (j, to, _) = self.flying.swap_remove(k);
                self.running[to].push(j);
            } else {
                k += 1;
            }
        }
        for n in 0..NODES {
            while !self.queued[n].is_empty() && accepts(&self.host(n, true), self.th) {
                let j = self.queued[n].remove(0);
                self.running[n].push(j);
            }
        }
    }

    /// Load sharing: each overloaded machine sheds one job per second (the choice's).
    fn shed(&mut self, t: f64, choice: Choice) {
        for n in 0..NODES {
            if self.running[n].is_empty() || !overloaded(&self.host(n, true), self.th) {
                continue;
            }
            let loads: Vec<JobLoad> = self.running[n]
                .iter()
                .map(|&j| {
                    let jb = &self.jobs[j];
                    JobLoad {
                        job: JobId(j as u64),
                        age_s: jb.started.map_or(0.0, |s| t - s),
                        working_set: jb.ws(),
                        fault_rate: jb.faults,
                        io_rate: PROGRAMS[jb.program].4 / PROGRAMS[jb.program].3,
                    }
                })
                .collect();
            let Some(d) = job_to_migrate(&loads, choice) else { continue };
            let j = d.0 as usize;
            if let Some(k) = migration_target(&self.hosts(), self.th, Some(self.jobs[j].ws()), Some(MachineId(n as u64))) {
                let cost = REMOTE_S + self.jobs[j].ws() as f64 * 8.0 / NET_BPS;
                self.running[n].retain(|x| *x != j);
                self.flying.push((j, k.0 as usize, t + cost));
                self.tot.migration_s += cost;
                self.tot.migrations += 1;
            }
        }
    }

    /// One second of time sharing and paging on node `n`.
    fn time_share(&mut self, n: usize, t: f64) {
        let dt = 1.0;
        self.tot.queue_s += self.queued[n].len() as f64 * dt;
        if self.running[n].is_empty() {
            return;
        }
        let rate = paging_rate(self.host(n, false).oversize());
        let lost = (rate * FAULT_S).min(self.max_lost);
        let k_jobs = self.running[n].len() as f64;
        let share = (1.0 - lost) / k_jobs;
        self.tot.paging_s += lost * dt * k_jobs;
        self.tot.queue_s += (k_jobs - 1.0) * dt;
        let growth: Vec<u64> = self.running[n].iter().map(|&j| self.jobs[j].ws().saturating_sub(self.jobs[j].ws_prev)).collect();
        let gsum: u64 = growth.iter().sum();
        let wsum: u64 = self.running[n].iter().map(|&j| self.jobs[j].ws()).sum();
        let mut k = 0;
        while k < self.running[n].len() {
            let j = self.running[n][k];
            let jb = &mut self.jobs[j];
            jb.started.get_or_insert(t);
            jb.faults = if gsum > 0 { rate * growth[k] as f64 / gsum as f64 } else { rate * jb.ws() as f64 / wsum.max(1) as f64 };
            jb.ws_prev = jb.ws();
            jb.done_cpu += share * dt;
            if jb.done_cpu >= jb.life() {
                self.end[j] = Some(t + dt);
                self.finished += 1;
                self.running[n].remove(k);
            } else {
                k += 1;
            }
        }
    }
}

fn simulate(jobs: &[Job], policy: Policy, mt: f64, max_lost: f64) -> Totals {
    let mut farm = Farm {
        jobs: jobs.to_vec(),
        running: vec![Vec::new(); NODES],
        queued: vec![Vec::new(); NODES],
        flying: Vec::new(),
        end: vec![None; jobs.len()],
        finished: 0,
        tot: Totals::default(),
        th: Thresholds { ct: CT, mt },
        max_lost,
    };
    let mut next = 0usize;
    let mut t = 0.0f64;
    while farm.finished < jobs.len() && t < 200_000.0 {
        while next < jobs.len() && jobs[next].submit <= t {
            farm.arrive(next, t, policy);
            next += 1;
        }
        farm.land_and_unblock(t);
        if let Policy::Ls(choice) = policy {
            farm.shed(t, choice);
        }
        for n in 0..NODES {
            farm.time_share(n, t);
        }
        t += 1.0;
    }
    let sd: Vec<f64> = farm.jobs.iter().zip(&farm.end).map(|(j, e)| (e.unwrap_or(t) - j.submit) / j.life()).collect();
    farm.tot.mean_slowdown = sd.iter().sum::<f64>() / sd.len().max(1) as f64;
    farm.tot
}

/// The paper's no-LS-blocking slowdowns at MT = 0 on 10 Mbps (§6.1).
const PAPER_NOLS: [f64; 3] = [37.88, 25.58, 22.25];

/// One run of a seed: (trace, policy, MT, model).
type Spec = (usize, Policy, f64, Model);

fn specs(traces: usize, mts: &[f64], sweeps: bool) -> Vec<Spec> {
    let policies: Vec<Policy> = std::iter::once(Policy::NoLs).chain(Choice::ALL.iter().map(|c| Policy::Ls(*c))).collect();
    let mut v: Vec<Spec> = Vec::new();
    for ti in 0..traces {
        v.extend(policies.iter().map(|p| (ti, *p, 0.0, MODEL)));
    }
    for c in Choice::ALL {
        v.extend(mts.iter().map(|&mt| (0, Policy::Ls(c), mt, MODEL)));
    }
    if sweeps {
        for m in [Model { programs: 7, ..MODEL }, Model { growth: 0.1, ..MODEL }, Model { growth: 0.5, ..MODEL }] {
            v.extend(Choice::ALL.iter().map(|c| (0, Policy::Ls(*c), 0.0, m)));
        }
        // The later sweeps run only the headline's choice.
        v.extend(LATER_SWEEPS.iter().map(|&m| (0, Policy::Ls(Choice::Combined), 0.0, m)));
    }
    v
}

/// Log-normal gaps' σ in the arrivals' sweep: eq. 6's σ for Trace 1 (0.5, smoother than
/// exponential gaps: CV² 0.28) and 1 (burstier: CV² 1.72).
const GAP_SIGMAS: [f64; 2] = [0.5, 1.0];
/// Most of a second lost to paging, swept.
const MAX_LOST_SWEEP: [f64; 2] = [0.90, 0.99];
/// The models of the arrivals' and the paging cap's sweeps.
const LATER_SWEEPS: [Model; 4] = [
    Model { lognormal_gaps: Some(GAP_SIGMAS[0]), ..MODEL },
    Model { lognormal_gaps: Some(GAP_SIGMAS[1]), ..MODEL },
    Model { max_lost: MAX_LOST_SWEEP[0], ..MODEL },
    Model { max_lost: MAX_LOST_SWEEP[1], ..MODEL },
];

fn find(specs: &[Spec], outs: &[Totals], s: Spec) -> f64 {
    specs.iter().zip(outs).find(|(x, _)| **x == s).map_or(f64::NAN, |(_, o)| o.mean_slowdown)
}

/// Every seed's runs and what they gave.
struct Runs {
    traces: Vec<(&'static str, usize, f64)>,
    mts: Vec<f64>,
    small: bool,
    sweep_seeds: u64,
    /// Per seed: its specs and their totals, in the same order.
    spec_of: Vec<Vec<Spec>>,
    per_seed: Vec<Vec<Totals>>,
}

impl Runs {
    /// Seed `k`'s mean slowdown for `s`.
    fn get(&self, k: usize, s: Spec) -> f64 {
        find(&self.spec_of[k], &self.per_seed[k], s)
    }
    /// Every seed's mean slowdown for `s`.
    fn over(&self, s: Spec) -> Vec<f64> {
        (0..self.spec_of.len()).map(|k| self.get(k, s)).collect()
    }
}

fn policies() -> Vec<Policy> {
    std::iter::once(Policy::NoLs).chain(Choice::ALL.iter().map(|c| Policy::Ls(*c))).collect()
}

/// Runs the experiment (see the module doc).
pub fn run(opts: &Options, progress: &mut dyn FnMut(u64, u64)) -> Result<Report> {
    let small = opts.scale == Scale::Small;
    let traces: Vec<(&'static str, usize, f64)> = if small { vec![("Trace 1 (small)", 120, 330.0)] } else { TRACES.to_vec() };
    let mts: Vec<f64> = if small { vec![0.0, 0.15] } else { vec![-0.15, -0.05, 0.0, 0.05, 0.15] };
    let sweep_seeds = opts.seeds.min(5) as u64;
    let first = opts.first_seed;
    let with = |seed: u64| !small && seed < first + sweep_seeds;
    let per_seed = claims::over_seeds(
        opts,
        |seed| specs(traces.len(), &mts, with(seed)),
        progress,
        |seed, &(ti, p, mt, m)| Ok(simulate(&arrivals(seed.wrapping_add(ti as u64), traces[ti].1, traces[ti].2, m), p, mt, m.max_lost)),
    )?;
    let spec_of: Vec<Vec<Spec>> = claims::seeds(opts).iter().map(|&s| specs(traces.len(), &mts, with(s))).collect();
    let r = Runs { traces, mts, small, sweep_seeds, spec_of, per_seed };
    let mut md = String::new();
    preamble(&mut md, "`memory` — seed 001's memory-centric load sharing on lull-core's choice functions", "memory", opts);
    let _ = writeln!(
        md,
        "Per seed: {NODES} machines of {} MB for jobs, CT = {CT}, 10 Mbps; the paper's benchmark programs (Table 1, without m-m) with working sets that grow while they run; each trace's arrivals drawn from the seed; every decision (accept, shed, which job, where) is `lull_core::sched`'s memory functions (`core/src/sched/memory.rs`). Model: `sim/src/experiments/memory.rs`.\n",
        MEMORY >> 20
    );
    let mut rows = fig2_section(&mut md, &r);
    rows.extend(fig3_section(&mut md, &r));
    let _ = writeln!(md, "## Summary\n\n{}\n", claims::tally(&rows));
    let svgs = charts(&mut md, &r);
    Ok(Report { name: opts.report_name("memory"), markdown: md, svgs, rows })
}

/// Fig. 2 (left): every trace under every policy at MT = 0, and its claims.
fn fig2_section(md: &mut String, r: &Runs) -> Vec<Row> {
    let (traces, small) = (&r.traces, r.small);
    let seeds = &r.spec_of;
    let get = |k: usize, s: Spec| r.get(k, s);
    let over = |s: Spec| r.over(s);
    let policies = policies();
    let _ = writeln!(md, "## Fig. 2 (left) — mean slowdown at MT = 0 %\n");
    let _ = writeln!(
        md,
        "| trace | {} |\n|---|{}",
        policies.iter().map(|p| p.name()).collect::<Vec<_>>().join(" | "),
        "---|".repeat(policies.len())
    );
    for (ti, (label, _, _)) in traces.iter().enumerate() {
        let cells: Vec<String> = policies.iter().map(|p| Summary::of(&over((ti, *p, 0.0, MODEL))).show(2, 1.0)).collect();
        let _ = writeln!(md, "| {label} | {} |", cells.join(" | "));
    }
    let _ = writeln!(md);
    let mut rows = Vec::new();
    let comb = Policy::Ls(Choice::Combined);
    for (ti, (label, _, _)) in traces.iter().enumerate() {
        let best: Vec<f64> = (0..seeds.len())
            .map(|k| {
                (Choice::ALL.iter().all(|c| get(k, (ti, comb, 0.0, MODEL)) <= get(k, (ti, Policy::Ls(*c), 0.0, MODEL)) + 1e-9)) as u8 as f64
            })
            .collect();
        rows.push(
            Claim {
                claim: &format!("§6.1, {label}: combined (CPU-Memory-I/O) has the lowest slowdown of the four choices"),
                paper: "combined best",
                expect: Expect::True,
                decimals: 0,
                scale: 1.0,
                unit: "",
                why: if ti == 0 {
                    "our working sets grow over the first quarter of a job, so the largest working set is a good pick and worksize often wins; the paper replays 10-ms traces of the real programs"
                } else {
                    "without m-m the farm rarely overflows at these rates, so the four choices tie within noise and a tie counts as combined best"
                },
            }
            .check(&best),
        );
        if !small {
            rows.push(
                Claim {
                    claim: &format!("§6.1, {label}: no-LS-blocking's mean slowdown (ours: ±50 %)"),
                    paper: &format!("{:.2}", PAPER_NOLS[ti]),
                    expect: Expect::Near { claimed: PAPER_NOLS[ti], tol: PAPER_NOLS[ti] / 2.0 },
                    decimals: 2,
                    scale: 1.0,
                    unit: "",
                    why: "blocked arrivals wait for their home machine; how long depends on the arrival process (ours exponential, the paper's lognormal rate) and the missing m-m",
                }
                .check(&over((ti, Policy::NoLs, 0.0, MODEL))),
            );
        }
    }
    if !small {
        let pf: Vec<f64> = (0..seeds.len())
            .map(|k| get(k, (0, Policy::Ls(Choice::PageFaultRate), 0.0, MODEL)) / get(k, (0, comb, 0.0, MODEL)) - 1.0)
            .collect();
        rows.push(
            Claim {
                claim: "§6.1, Trace 1: pf-rate's slowdown is about 100 % higher than combined's",
                paper: "+100 %",
                expect: Expect::Change { claimed: 1.0, tol: 0.5 },
                decimals: 0,
                scale: 100.0,
                unit: " %",
                why: "pf-rate moves the job whose working set is growing now, often a small one about to finish",
            }
            .check(&pf),
        );
        let ws3: Vec<f64> = (0..seeds.len())
            .map(|k| {
                let others = [Choice::PageFaultRate, Choice::Age, Choice::Combined]
                    .iter()
                    .map(|c| get(k, (2, Policy::Ls(*c), 0.0, MODEL)))
                    .fold(f64::INFINITY, f64::min);
                get(k, (2, Policy::Ls(Choice::WorkingSet), 0.0, MODEL)) / others - 1.0
            })
            .collect();
        rows.push(
            Claim {
                claim: "§6.1, Trace 3: worksize's slowdown is more than 60 % above the other three",
                paper: "> +60 %",
                expect: Expect::AtLeast(0.6),
                decimals: 0,
                scale: 100.0,
                unit: " %",
                why: "at Trace 3's rate our farm seldom overflows, so worksize's costly moves are rare",
            }
            .check(&ws3),
        );
    }
    let _ = writeln!(md, "### Fig. 2's claims\n");
    claims::table(md, &rows);
    rows
}

/// Fig. 3: Trace 1 under each choice at every MT, its claims, and our parameters' sweeps.
fn fig3_section(md: &mut String, r: &Runs) -> Vec<Row> {
    let (traces, mts, small, sweep_seeds) = (&r.traces, &r.mts, r.small, r.sweep_seeds);
    let seeds = &r.spec_of;
    let get = |k: usize, s: Spec| r.get(k, s);
    let over = |s: Spec| r.over(s);
    let comb = Policy::Ls(Choice::Combined);
    let _ = writeln!(md, "## Fig. 3 — memory threshold MT, {}\n", traces[0].0);
    let _ = writeln!(
        md,
        "| choice | {} |\n|---|{}",
        mts.iter().map(|m| format!("MT {:+.0} %", m * 100.0)).collect::<Vec<_>>().join(" | "),
        "---|".repeat(mts.len())
    );
    for c in Choice::ALL {
        let cells: Vec<String> = mts.iter().map(|&mt| Summary::of(&over((0, Policy::Ls(c), mt, MODEL))).show(2, 1.0)).collect();
        let _ = writeln!(md, "| {} | {} |", c.name(), cells.join(" | "));
    }
    let _ = writeln!(md);
    let mut fig3 = Vec::new();
    if !small {
        let flat: Vec<f64> = (0..seeds.len())
            .map(|k| {
                let v: Vec<f64> = [-0.05, 0.0, 0.05].iter().map(|&mt| get(k, (0, comb, mt, MODEL))).collect();
                v.iter().cloned().fold(0.0, f64::max) / v.iter().cloned().fold(f64::INFINITY, f64::min) - 1.0
            })
            .collect();
        fig3.push(
            Claim {
                claim: "§6.2: combined's slowdown stays unchanged over MT = −5…+5 % (ours: max/min − 1 ≤ 10 %)",
                paper: "flat",
                expect: Expect::AtMost(0.10),
                decimals: 0,
                scale: 100.0,
                unit: " %",
                why: "one second's shedding decision flips which jobs thrash; the paper's 10-ms traces average that out",
            }
            .check(&flat),
        );
        let rises: Vec<f64> =
            (0..seeds.len()).map(|k| (get(k, (0, comb, 0.15, MODEL)) > get(k, (0, comb, 0.0, MODEL))) as u8 as f64).collect();
        fig3.push(
            Claim {
                claim: "§6.2: combined's slowdown rises when MT grows to 15 %",
                paper: "rises",
                expect: Expect::True,
                decimals: 0,
                scale: 1.0,
                unit: "",
                why: "a looser threshold lets machines page before shedding",
            }
            .check(&rises),
        );
        claims::table(md, &fig3);
        let list = vec![
            Assumption {
                name: "m-m left out".into(),
                value: "6 programs".into(),
                source: "ours: one job in seven running 4,902 s keeps the farm saturated for hours after the last submission".into(),
                sweep: vec![(
                    "with m-m".into(),
                    Summary::of(
                        &(0..sweep_seeds as usize).map(|k| get(k, (0, comb, 0.0, Model { programs: 7, ..MODEL }))).collect::<Vec<_>>(),
                    ),
                )],
            },
            Assumption {
                name: "working-set growth".into(),
                value: "over the first 25 % of a job's CPU time".into(),
                source: "ours: Table 1 gives each program's range, not its course in time".into(),
                sweep: [0.1, 0.5]
                    .iter()
                    .map(|&g| {
                        (
                            format!("{:.0} %", g * 100.0),
                            Summary::of(
                                &(0..sweep_seeds as usize)
                                    .map(|k| get(k, (0, comb, 0.0, Model { growth: g, ..MODEL })))
                                    .collect::<Vec<_>>(),
                            ),
                        )
                    })
                    .collect(),
            },
            Assumption {
                name: "arrivals".into(),
                value: "exponential gaps at the trace's mean rate".into(),
                source: "ours: eq. 6's lognormal rate with the printed μ, σ does not reproduce the printed counts; swept as log-normal gaps of σ 0.5 (eq. 6's for Trace 1; CV² 0.28, smoother) and σ 1 (CV² 1.72, burstier) at the same mean rate".into(),
                sweep: GAP_SIGMAS
                    .iter()
                    .map(|&sigma| {
                        let m = Model { lognormal_gaps: Some(sigma), ..MODEL };
                        (format!("log-normal gaps, σ {sigma}"), Summary::of(&(0..sweep_seeds as usize).map(|k| get(k, (0, comb, 0.0, m))).collect::<Vec<_>>()))
                    })
                    .collect(),
            },
            Assumption {
                name: "most of a second lost to paging".into(),
                value: "95 %".into(),
                source: "ours: eq. 1's R_max × 10 ms would stop a thrashing machine outright".into(),
                sweep: MAX_LOST_SWEEP
                    .iter()
                    .map(|&x| {
                        let m = Model { max_lost: x, ..MODEL };
                        (format!("{:.0} %", x * 100.0), Summary::of(&(0..sweep_seeds as usize).map(|k| get(k, (0, comb, 0.0, m))).collect::<Vec<_>>()))
                    })
                    .collect(),
            },
        ];
        let _ = writeln!(md, "## Parameters of ours\n\nSweeps over the first {sweep_seeds} seeds.\n");
        claims::assumptions(md, "combined's mean slowdown on Trace 1 at MT = 0", 2, 1.0, &list);
    }
    fig3
}

fn charts(md: &mut String, r: &Runs) -> Vec<(String, String)> {
    let (traces, mts) = (&r.traces, &r.mts);
    let over = |s: Spec| r.over(s);
    let policies = policies();
    let mean = |s: Spec| Summary::of(&over(s)).mean;
    let c2 = policies
        .iter()
        .fold(Chart::new("Mean slowdown at MT = 0, mean of seeds (cf. seed 001 Fig. 2)", "trace", "mean slowdown"), |c, p| {
            c.line(p.name(), (0..traces.len()).map(|ti| ((ti + 1) as f64, mean((ti, *p, 0.0, MODEL)))).collect())
        });
    let c3 = Choice::ALL
        .iter()
        .fold(Chart::new("Mean slowdown vs memory threshold, Trace 1 (cf. seed 001 Fig. 3)", "MT (%)", "mean slowdown"), |c, ch| {
            c.line(ch.name(), mts.iter().map(|&m| (m * 100.0, mean((0, Policy::Ls(*ch), m, MODEL)))).collect())
        });
    let _ = writeln!(md, "![slowdown by policy](memory-fig2.svg)\n\n![slowdown vs MT](memory-fig3.svg)");
    vec![("memory-fig2.svg".into(), c2.to_svg()), ("memory-fig3.svg".into(), c3.to_svg())]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn working_sets_grow_then_hold() {
        let mut j = Job { program: 0, submit: 0.0, home: 0, done_cpu: 0.0, started: None, ws_prev: 0, faults: 0.0, growth: 0.25 };
        let a = j.ws();
        j.done_cpu = 100.0;
        assert!(j.ws() > a);
        assert_eq!(j.ws(), (64.22 * MB) as u64);
    }

    #[test]
    fn small_run_is_reproducible_and_load_sharing_beats_none() {
        let opts = Options::new(4, 2, Scale::Small, 1);
        let a = run(&opts, &mut |_, _| {}).unwrap();
        let b = run(&opts, &mut |_, _| {}).unwrap();
        assert_eq!(a, b, "the same seed gave two different reports");
        // The same on two threads: sim/tests/parallel_reports.rs.
        let js = arrivals(4, 120, 330.0, MODEL);
        let none = simulate(&js, Policy::NoLs, 0.0, MAX_LOST);
        let comb = simulate(&js, Policy::Ls(Choice::Combined), 0.0, MAX_LOST);
        assert!(comb.mean_slowdown < none.mean_slowdown, "{comb:?} vs {none:?}");
        assert!(comb.migrations > 0);
    }
}
