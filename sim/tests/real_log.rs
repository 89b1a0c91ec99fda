//! The committed Parallel Workloads Archive log (`testdata/UniLu-Gaia-2014-2.swf.gz`, see
//! `testdata/README.md`) read through the gzip path and run through the driver: its size
//! and header are what the archive published, and the outcome of its first 5,000 jobs
//! under Backfill and FIFO on its own 2,004 processors is pinned, and so is the outcome of
//! the whole log (all 51,859 jobs; the run of `lull sim winner --swf …`, whose report is
//! docs/experiments/winner-UniLu-Gaia-2014-2.md); the whole log takes about 10 s in a
//! debug build.

use lull_core::sched::{Algorithm, SchedConfig};
use lull_sim::driver::{run, Outcome, SimConfig, SimMachine};
use lull_sim::swf::read_swf;
use std::path::Path;

fn digest(o: &Outcome) -> u64 {
    format!("{o:?}").bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3))
}

fn gaia() -> lull_sim::JobLog {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/UniLu-Gaia-2014-2.swf.gz");
    read_swf(&path).unwrap().job_log("UniLu-Gaia-2014-2")
}

/// The outcomes' digests of `jobs` under Backfill and FIFO on the log's own processors.
fn digests(processors: u32, jobs: &[lull_sim::driver::SimJob]) -> Vec<u64> {
    let machines: Vec<SimMachine> = (0..processors).map(|i| SimMachine::dedicated(format!("p{i}"), 1.0)).collect();
    let mut got = Vec::new();
    for alg in [Algorithm::Backfill, Algorithm::Fifo] {
        let out = run(&machines, jobs, &SimConfig::new(SchedConfig::with_algorithm(alg)), &mut |_, _| {}).unwrap();
        assert_eq!(out.completed_share(), 1.0, "{alg}");
        println!("{alg}: {:#018x} (makespan {:.0} s, max wait {:.0} s)", digest(&out), out.makespan(), out.max_wait());
        got.push(digest(&out));
    }
    got
}

#[test]
fn the_whole_gaia_log_runs_as_pinned() {
    let jl = gaia();
    assert_eq!(jl.jobs.len(), 51_859);
    assert_eq!(digests(jl.processors, &jl.jobs), WHOLE_PINNED);
}

/// Backfill, FIFO over the whole log.
const WHOLE_PINNED: [u64; 2] = [0xb525_d72c_ecb0_5f9a, 0x2864_02f0_b5c0_b4cf];

#[test]
fn the_gaia_log_reads_and_its_first_jobs_run_as_pinned() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/UniLu-Gaia-2014-2.swf.gz");
    let log = read_swf(&path).unwrap();
    assert_eq!(log.records.len(), 51_987);
    assert_eq!(log.unix_start(), Some(1_400_749_079));
    let jl = log.job_log("UniLu-Gaia-2014-2");
    assert_eq!((jl.jobs.len(), jl.processors), (51_859, 2004));
    assert!(jl.about.contains("UNILU Gaia Cluster"), "{}", jl.about);
    assert_eq!(digests(jl.processors, &jl.jobs[..5000]), PINNED);
}

/// Backfill, FIFO.
const PINNED: [u64; 2] = [0x288a_c90a_274f_43dd, 0x2740_7fbd_6c20_0cc6];
