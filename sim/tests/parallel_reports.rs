//! Every experiment's report is the same, byte for byte, whether its independent runs go
//! to one thread or to a pool of two (`lull_sim::parallel::map_runs`), over several
//! seeds, and the progress callback still counts every run up to the total; and no small
//! report shows a NaN or an infinity (a figure that cannot be computed is "— (why)").

use lull_sim::{run_experiment, Options, Scale, EXPERIMENTS};

#[test]
fn every_experiment_reports_the_same_on_one_and_two_threads() {
    for name in EXPERIMENTS {
        let mut calls = Vec::new();
        let one = run_experiment(name, &Options::new(7, 2, Scale::Small, 1), &mut |d, t| calls.push((d, t))).unwrap();
        let mut calls_two = Vec::new();
        let two = run_experiment(name, &Options::new(7, 2, Scale::Small, 2), &mut |d, t| calls_two.push((d, t))).unwrap();
        assert_eq!(one.markdown, two.markdown, "{name}: markdown differs between 1 and 2 threads");
        assert_eq!(one.svgs, two.svgs, "{name}: plots differ between 1 and 2 threads");
        assert!(calls.len() > 1, "{name}: more than one run to share");
        assert_eq!(calls, calls_two, "{name}: progress differs");
        let total = calls[0].1;
        assert_eq!(calls, (1..=total).map(|d| (d, total)).collect::<Vec<_>>(), "{name}: progress counts every run once");
        assert!(one.markdown.contains("2 independent seeds"), "{name}: the report says how many seeds");
        for (file, text) in std::iter::once(("the report", &one.markdown)).chain(one.svgs.iter().map(|(f, s)| (f.as_str(), s))) {
            let bad = text.split(|c: char| !c.is_alphanumeric()).find(|w| matches!(*w, "NaN" | "inf"));
            assert!(bad.is_none(), "{name}: {file} shows {bad:?}");
        }
    }
}
