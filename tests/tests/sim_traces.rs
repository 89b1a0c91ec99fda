//! `lull sim` given a real trace file on the command line, as a user gives it: a gzipped
//! Standard Workload Format log with a Latin-1 byte in a comment and one malformed line.
//! Refused by default (exit non-zero, the file and line named, nothing written); with
//! `--bad-lines skip` the report is written and says which line it skipped. An experiment
//! that takes no job log refuses `--swf` and writes nothing.

use lull_e2e::{lull_bin, workspace};
use std::path::Path;
use std::process::{Command, Output};

fn sim(dir: &Path, args: &[&str]) -> Output {
    Command::new(lull_bin()).arg("sim").args(args).current_dir(dir).output().expect("running lull sim")
}

/// The committed hand-written sample plus a Latin-1 comment and a 4-field line 18, gzipped.
fn bad_log(dir: &Path) -> std::path::PathBuf {
    let mut text = std::fs::read(workspace().join("sim/testdata/small.swf")).expect("sample log");
    text.extend_from_slice(b"; caf\xe9 (Latin-1)\n99 1 2 x\n");
    let plain = dir.join("odd.swf");
    std::fs::write(&plain, text).unwrap();
    // gzip(1), as the archive compresses its logs; it leaves odd.swf.gz.
    assert!(Command::new("gzip").arg(&plain).status().expect("gzip").success());
    dir.join("odd.swf.gz")
}

#[test]
fn a_malformed_line_is_refused_by_number_or_skipped_and_reported() {
    let dir = tempfile::tempdir().unwrap();
    let log = bad_log(dir.path());
    let log = log.to_str().unwrap();

    let refused = sim(dir.path(), &["winner", "--small", "--seeds", "2", "--swf", log, "--out", "out"]);
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "a malformed line must refuse the file: {err}");
    assert!(err.contains("odd.swf.gz:18") && err.contains("expected 18 fields"), "names the file and line: {err}");
    assert_eq!(err.lines().count(), 1, "one line of error: {err}");
    assert!(!dir.path().join("out").exists(), "a refused run writes nothing");

    let skipped = sim(dir.path(), &["winner", "--small", "--seeds", "2", "--swf", log, "--bad-lines", "skip", "--out", "out"]);
    let err = String::from_utf8_lossy(&skipped.stderr);
    assert!(skipped.status.success(), "{err}");
    assert!(err.contains("line 18: expected 18 fields"), "lists the skipped line: {err}");
    let report = std::fs::read_to_string(dir.path().join("out/winner-odd.md")).expect("the report is winner-<log>.md");
    assert!(report.contains("1 malformed line(s) skipped (--bad-lines skip): line 18"), "the report says what it skipped:\n{report}");
    assert!(report.contains("4 jobs on 8 dedicated processors"), "{report}");
}

#[test]
fn an_experiment_without_jobs_refuses_a_job_log_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let log = workspace().join("sim/testdata/small.swf");
    let out = sim(dir.path(), &["linger", "--small", "--seeds", "2", "--swf", log.to_str().unwrap(), "--out", "out"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("linger takes no job log (--swf is for winner, now)"), "{err}");
    assert!(!dir.path().join("out").exists());
}
