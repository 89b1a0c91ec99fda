//! `reserve`: seed 003's allocation experiment (§3.4, Table 1, Fig. 7): a stream of
//! short parallel jobs recruits instantly-idle machines through lull-core's
//! [`Recruiter`] (windowed-mean load prediction, x % reserve), unchanged.
//!
//! * **Owners:** 32 generated workstations (`sim/src/gen.rs`, tuned to seed 003's 86 %
//!   of idle 1-s samples among others), one whole day (the paper: a day of a heavily
//!   used student lab of 32 Linux PCs). A machine's *load* is its
//!   owner's CPU share; idle = predicted load < 10 % (seed 003's definition).
//! * **Jobs:** the paper's rendering job, 42 s on one workstation, requests arriving
//!   with exponential gaps of mean 20 s. Each request asks for every machine
//!   (`k` = 32) for a 10-s forecast (window 5). A job granted no machine runs
//!   sequentially at home: speedup 1 (the paper counts these too).
//! * **Speedup curve:** Fig. 6 (right) is an image we do not have; we use Amdahl's law
//!   with a 15 % serial share, `S(n) = 1 / (0.15 + 0.85 / n)` (S(17) = 5.0), which the
//!   paper's figures are consistent with (mean speedup up to 4.96 at mean group 12).
//! * **Contention:** mpidled's guests run at normal priority, and the paper derives a
//!   guest's CPU share from the number of runnable processes in each second; with the
//!   owner's load `l` as its runnable processes, a guest gets `1 / (1 + l)`, split between
//!   guests sharing the machine; a parallel job moves at its slowest member.
//! * **Policies:** *random* (17 machines at random whatever their load, the paper's
//!   control), *no reserve* and *x-reserve* for x = 10 … 60 %.
//! * **Measures** (Table 1): jobs refused, idle seconds used, mean group size, mean
//!   speedup, and busy seconds disrupted (an owner-busy second — load ≥ 10 % or input —
//!   with guest work on the machine).

use super::{Report, Scale};
use crate::error::Result;
use crate::gen::{generate, GenParams};
use crate::parallel::map_runs;
use crate::rng::Rng;
use lull_core::chart::Chart;
use lull_core::sched::recruit::{RecruitConfig, Recruiter, Request};
use lull_core::sched::MachineId;
use std::fmt::Write;

const START: i64 = 1_767_225_600;
const MACHINES: u64 = 32;
const JOB_S: f64 = 42.0;
const SERIAL: f64 = 0.15;
const MEAN_GAP_S: f64 = 20.0;
const RANDOM_GROUP: usize = 17;
const FORECAST_S: f64 = 10.0;
const IDLE_MAX: f64 = 0.10;

/// Dedicated speedup on `n` machines.
pub fn speedup(n: usize) -> f64 {
    if n == 0 {
        return 1.0;
    }
    1.0 / (SERIAL + (1.0 - SERIAL) / n as f64)
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Strategy {
    Random,
    Reserve(f64),
}

/// Table 1's measures for one strategy.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Measures {
    pub refused: f64,
    pub idle_used: f64,
    pub mean_group: f64,
    pub mean_speedup: f64,
    pub disrupted: f64,
    pub jobs: usize,
}

struct Job {
    members: Vec<usize>,
    work: f64,
    submit: f64,
}

fn simulate(traces: &[crate::trace::OwnerTrace], arrivals: &[f64], strategy: Strategy, seed: u64) -> Measures {
    let len = traces.iter().map(|t| t.samples.len()).min().unwrap_or(0);
    let cfg = RecruitConfig { idle_load_max: IDLE_MAX, reserve_pct: if let Strategy::Reserve(x) = strategy { x } else { 0.0 } };
    let mut rec = Recruiter::new(cfg).expect("a valid reserve");
    let mut pick = Rng::derive(seed, 0x4e5);
    let mut guests = vec![0u32; traces.len()];
    let mut running: Vec<Job> = Vec::new();
    let (mut refused, mut groups, mut speedups) = (0usize, Vec::new(), Vec::new());
    let (mut idle_s, mut idle_used, mut busy_s, mut busy_hit) = (0u64, 0u64, 0u64, 0u64);
    let mut next = 0usize;
    for t in 0..len {
        for (i, tr) in traces.iter().enumerate() {
            rec.observe(MachineId(i as u64), tr.samples[t].owner_cpu);
        }
        // Requests arriving in this second.
        while next < arrivals.len() && arrivals[next] < (t + 1) as f64 {
            let submit = arrivals[next];
            next += 1;
            let members: Vec<usize> = match strategy {
                Strategy::Random => {
                    let mut all: Vec<usize> = (0..traces.len()).collect();
                    for k in 0..RANDOM_GROUP.min(all.len()) {
                        let j = k + pick.int(0, (all.len() - k - 1) as u64) as usize;
                        all.swap(k, j);
                    }
                    all.truncate(RANDOM_GROUP);
                    all
                }
                Strategy::Reserve(_) => {
                    rec.recruit(Request { k: traces.len(), forecast_s: FORECAST_S }).machines.iter().map(|m| m.0 as usize).collect()
                }
            };
            groups.push(members.len() as f64);
            if members.is_empty() {
                refused += 1;
                speedups.push(1.0);
                continue;
            }
            for &m in &members {
                guests[m] += 1;
            }
            running.push(Job { work: JOB_S / speedup(members.len()), members, submit });
        }
        // One second of progress and of the owners' seconds.
        for (i, tr) in traces.iter().enumerate() {
            let s = tr.samples[t];
            let busy = s.input || s.owner_cpu as f64 >= IDLE_MAX;
            if busy {
                busy_s += 1;
                busy_hit += (guests[i] > 0) as u64;
            } else {
                idle_s += 1;
                idle_used += (guests[i] > 0) as u64;
            }
        }
        let mut k = 0;
        while k < running.len() {
            let j = &mut running[k];
            let rate = j
                .members
                .iter()
                .map(|&m| 1.0 / (1.0 + traces[m].samples[t].owner_cpu as f64) / guests[m].max(1) as f64)
                .fold(f64::INFINITY, f64::min);
            j.work -= rate;
            if j.work <= 1e-9 {
                let j = running.swap_remove(k);
                // Ends within this second: at its fraction of it.
                let end = (t + 1) as f64 + j.work / rate.max(1e-9);
                speedups.push(JOB_S / (end - j.submit).max(1e-9));
                for m in j.members {
                    guests[m] -= 1;
                    rec.release(MachineId(m as u64));
                }
            } else {
                k += 1;
            }
        }
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
    Measures {
        refused: refused as f64 / groups.len().max(1) as f64,
        idle_used: idle_used as f64 / idle_s.max(1) as f64,
        mean_group: mean(&groups),
        mean_speedup: mean(&speedups),
        disrupted: busy_hit as f64 / busy_s.max(1) as f64,
        jobs: speedups.len(),
    }
}

/// Table 1 of seed 003: (strategy label, refused %, idle used %, group, speedup, disrupted %).
const PAPER: [(&str, f64, f64, f64, f64, f64); 8] = [
    ("rand", 0.0, 25.0, 17.0, 3.68, 44.4),
    ("no res", 16.3, 21.6, 17.2, 3.58, 5.28),
    ("10-res", 3.3, 23.3, 15.24, 4.58, 6.3),
    ("20-res", 1.5, 23.2, 13.6, 4.88, 6.5),
    ("30-res", 2.0, 22.6, 12.0, 4.96, 5.9),
    ("40-res", 0.5, 22.1, 10.3, 4.82, 6.0),
    ("50-res", 0.2, 21.5, 8.7, 4.46, 5.9),
    ("60-res", 0.1, 21.0, 7.1, 3.92, 6.2),
];

/// Runs the experiment (see the module doc).
pub fn run(seed: u64, scale: Scale, threads: usize, progress: &mut dyn FnMut(u64, u64)) -> Result<Report> {
    let small = scale == Scale::Small;
    let (from_h, hours) = if small { (10usize, 1usize) } else { (0, 24) };
    let params = GenParams::default();
    let traces: Vec<crate::trace::OwnerTrace> = (0..MACHINES)
        .map(|i| {
            let mut t = generate(&params, seed, i, START, 1);
            t.samples.drain(..from_h * 3600);
            t.samples.truncate(hours * 3600);
            t
        })
        .collect();
    let mut r = Rng::derive(seed, 0xa77);
    let mut arrivals = Vec::new();
    let mut at = r.exp(MEAN_GAP_S);
    while at < (hours * 3600) as f64 - 2.0 * JOB_S {
        arrivals.push(at);
        at += r.exp(MEAN_GAP_S);
    }
    let strategies: Vec<(String, Strategy)> = std::iter::once(("rand".to_string(), Strategy::Random))
        .chain((0..=6).map(|x| (if x == 0 { "no res".into() } else { format!("{}-res", x * 10) }, Strategy::Reserve(x as f64 / 10.0))))
        .collect();
    let rows: Vec<_> =
        map_runs(threads, &strategies, progress, |(label, s)| Ok((label.clone(), *s, simulate(&traces, &arrivals, *s, seed))))?;
    let idle_share = {
        let (mut idle, mut all) = (0u64, 0u64);
        for t in &traces {
            idle += t.samples.iter().filter(|s| !s.input && (s.owner_cpu as f64) < IDLE_MAX).count() as u64;
            all += t.samples.len() as u64;
        }
        idle as f64 / all.max(1) as f64
    };

    let mut md = String::new();
    let _ = writeln!(md, "# `reserve` — seed 003's instant recruitment with and without a reserve, on lull-core's `Recruiter`\n");
    let _ = writeln!(
        md,
        "Generated by `lull_sim::run_experiment(\"reserve\", {seed}, Scale::{scale:?}, …)` (`lull sim reserve --seed {seed}`); the same \
         seed gives this file byte for byte. {MACHINES} generated owners × {hours} h of 1-s samples from {from_h}:00 ({:.0} % of the \
         machine-seconds idle: load < 10 % and no input), {} requests for the paper's 42-s rendering job at exponential gaps of mean \
         {MEAN_GAP_S:.0} s. Recruitment is `lull_core::sched::recruit::Recruiter` (up to 32 machines, 10-s forecast → window of 5 \
         one-second readings, x % of the idle machines kept back, granted machines lent until the job ends). Model and measures: \
         `sim/src/experiments/reserve.rs`.\n",
        idle_share * 100.0,
        arrivals.len()
    );
    let _ = writeln!(md, "## Table 1 — ours beside the paper's\n");
    let _ = writeln!(
        md,
        "| strategy | jobs refused | idle seconds used | mean group size | **mean speedup** | busy seconds disrupted |\n|---|---|---|---|---|---|"
    );
    for ((label, _, m), p) in rows.iter().zip(PAPER.iter()) {
        let _ = writeln!(
            md,
            "| {label} | {:.1} % (paper {:.1} %) | {:.1} % ({:.1} %) | {:.1} ({:.1}) | **{:.2}** ({:.2}) | {:.1} % ({:.1} %) |",
            m.refused * 100.0,
            p.1,
            m.idle_used * 100.0,
            p.2,
            m.mean_group,
            p.3,
            m.mean_speedup,
            p.4,
            m.disrupted * 100.0,
            p.5
        );
    }
    let no_res = rows[1].2.mean_speedup;
    let best = rows[2..].iter().max_by(|a, b| a.2.mean_speedup.total_cmp(&b.2.mean_speedup)).expect("reserve rows");
    let r20 = rows[3].2.mean_speedup;
    let r30 = rows[4].2.mean_speedup;
    let _ = writeln!(
        md,
        "\n**Headline.** Paper: a 20–30 % reserve raised the mean speedup from 3.58 (no reserve) to 4.88–4.96. Ours: {no_res:.2} with \
         no reserve, {r20:.2} with 20 %, {r30:.2} with 30 % ({:+.0} % / {:+.0} %); the best is {} at {:.2}.\n",
        (r20 / no_res - 1.0) * 100.0,
        (r30 / no_res - 1.0) * 100.0,
        best.0,
        best.2.mean_speedup
    );
    let _ = writeln!(
        md,
        "**Where ours differs, and why.** Our speedup curve is an assumption (Amdahl, 15 % serial; the paper's Fig. 6 is an image we \
         lack), so absolute speedups differ; the direction — a moderate reserve beats both no reserve and a large one — is the \
         paper's. Our owners are generated, not the paper's lab traces, so the share of idle seconds, and with it group sizes and \
         refusals, differ. Speedups are counted from submission to the end of the slowest member, including time spent crawling on a \
         machine whose owner came back, as the paper's simulator does. We disrupt more busy seconds (about 2–4 times the paper's 5–6 %): our generated owners' busy seconds come \
         in short bursts (typing, 1-s CPU bursts, seed 000's run-idle model) that a 5-s windowed mean cannot foresee, \
         where the lab's load came in longer stretches. Disruption counts any owner-busy second with a guest present, as the paper does; the guest's own CPU is not in the \
         owner's load (the policy's rule).\n"
    );
    let xs: Vec<f64> = (0..=6).map(|x| x as f64 * 10.0).collect();
    let c1 = Chart::new("Mean speedup vs reserve (cf. seed 003 Table 1)", "reserve x (%)", "mean speedup")
        .line("ours", xs.iter().zip(&rows[1..]).map(|(x, r)| (*x, r.2.mean_speedup)).collect())
        .line("paper", xs.iter().zip(&PAPER[1..]).map(|(x, p)| (*x, p.4)).collect());
    let c2 = Chart::new("Jobs refused and mean group size vs reserve", "reserve x (%)", "% refused / machines")
        .line("ours: refused %", xs.iter().zip(&rows[1..]).map(|(x, r)| (*x, r.2.refused * 100.0)).collect())
        .line("paper: refused %", xs.iter().zip(&PAPER[1..]).map(|(x, p)| (*x, p.1)).collect())
        .line("ours: group", xs.iter().zip(&rows[1..]).map(|(x, r)| (*x, r.2.mean_group)).collect())
        .line("paper: group", xs.iter().zip(&PAPER[1..]).map(|(x, p)| (*x, p.3)).collect());
    let _ = writeln!(md, "![mean speedup vs reserve](reserve-speedup.svg)\n\n![refused and group size](reserve-groups.svg)");
    Ok(Report {
        name: "reserve".into(),
        markdown: md,
        svgs: vec![("reserve-speedup.svg".into(), c1.to_svg()), ("reserve-groups.svg".into(), c2.to_svg())],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_speedup_curve_is_amdahls() {
        assert_eq!(speedup(1), 1.0);
        assert!((speedup(17) - 5.0).abs() < 0.01);
        assert!(speedup(32) < 1.0 / SERIAL);
    }

    #[test]
    fn small_run_is_reproducible_and_a_reserve_refuses_less() {
        let a = run(3, Scale::Small, 1, &mut |_, _| {}).unwrap();
        let b = run(3, Scale::Small, 2, &mut |_, _| {}).unwrap();
        assert_eq!(a, b);
        assert!(a.markdown.contains("| 30-res |"));
        let refused = |label: &str| -> f64 {
            let line = a.markdown.lines().find(|l| l.starts_with(&format!("| {label} |"))).unwrap();
            line.split('|').nth(2).unwrap().trim().split(' ').next().unwrap().parse().unwrap()
        };
        assert!(refused("30-res") <= refused("no res"), "{}", a.markdown);
    }
}
