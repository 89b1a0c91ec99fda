//! End to end through the public API: hand-written archive files → readers → the
//! virtual-time driver running lull-core's policy and scheduler.

use lull_core::sched::{Algorithm, SchedConfig};
use lull_sim::driver::{run, SimConfig, SimMachine};
use lull_sim::{fta, swf};
use std::path::Path;

fn testdata(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata").join(name)
}

#[test]
fn an_swf_stream_runs_to_completion_on_dedicated_machines() {
    let (jobs, skipped) = swf::read_swf(&testdata("small.swf")).unwrap().jobs(8);
    assert_eq!(skipped, 2);
    let machines: Vec<SimMachine> = (0..8).map(|i| SimMachine::dedicated(format!("n{i}"), 1.0)).collect();
    for alg in Algorithm::ALL {
        let out = run(&machines, &jobs, &SimConfig::new(SchedConfig::with_algorithm(alg)), &mut |_, _| {}).unwrap();
        assert_eq!(out.completed_share(), 1.0, "{alg}");
        // Each job runs for its SWF run time once started (speed 1, no owner).
        for (j, o) in jobs.iter().zip(&out.jobs) {
            let ran = o.end_s.unwrap() - o.start_s.unwrap();
            assert!((ran - j.normtime_s / j.width as f64).abs() < 1e-3, "{alg}: job {} ran {ran}", j.id);
        }
    }
}

#[test]
fn fta_availability_drives_recruitment() {
    let traces = fta::read_fta(&testdata("event_trace.tab"), 1).unwrap();
    let ws01 = traces.into_iter().next().unwrap();
    let mut m = SimMachine::dedicated("ws01", 1.0);
    m.owner = Some((&ws01).into());
    let job = lull_sim::driver::SimJob {
        id: 1,
        program: "p".into(),
        submit_s: 0.0,
        width: 1,
        normtime_s: 600.0,
        estimate_s: Some(600.0),
        checkpointable: false,
        migration_s: 0.0,
    };
    let out = run(&[m], &[job], &SimConfig::new(SchedConfig::default()), &mut |_, _| {}).unwrap();
    // Available from the trace's start: recruited after the 180-s threshold, done 600 s later.
    let j = &out.jobs[0];
    assert!((179.0..=182.0).contains(&j.start_s.unwrap()), "{j:?}");
    assert!((779.0..=782.0).contains(&j.end_s.unwrap()), "{j:?}");
    assert_eq!(out.machines[0].interruptions.values().sum::<u32>(), 0);
}
