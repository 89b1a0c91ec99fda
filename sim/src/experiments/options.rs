//! What an experiment is given: its [`Options`] (seeds, [`Scale`], threads) and the
//! [`Inputs`] a user may hand it in place of the generated ones (a job log, owner traces).

use crate::driver::SimJob;
use crate::trace::OwnerTrace;

/// How big a run: `Full` for the committed reports, `Small` for tests (fewer
/// iterations, jobs and sweep points; same code).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scale {
    /// The committed report's size.
    Full,
    /// A quick run for tests.
    Small,
}

/// A real job log given on the command line (`lull sim winner --swf FILE`).
#[derive(Clone, Debug, PartialEq)]
pub struct JobLog {
    /// Its name in reports (the file's stem): the report is `<experiment>-<name>.md`.
    pub name: String,
    /// Its jobs, submissions relative to the log's start.
    pub jobs: Vec<SimJob>,
    /// Processors the log's machine had (`MaxProcs`, else the widest job).
    pub processors: u32,
    /// A line or two on where it came from, quoted in the report.
    pub about: String,
}

/// Real owner traces given on the command line (`--fta FILE`).
#[derive(Clone, Debug, PartialEq)]
pub struct OwnerLog {
    /// Its name in reports.
    pub name: String,
    /// One trace per machine.
    pub traces: Vec<OwnerTrace>,
    /// A line or two on where it came from.
    pub about: String,
}

/// What an experiment runs on besides its generated owners and jobs.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Inputs {
    /// Jobs from a log, in place of the paper's generated workload.
    pub jobs: Option<JobLog>,
    /// Owners from a trace archive, in place of the generated owners.
    pub owners: Option<OwnerLog>,
}

/// How to run an experiment.
#[derive(Clone, Debug, PartialEq)]
pub struct Options {
    /// The first seed; the run uses `first_seed .. first_seed + seeds`.
    pub first_seed: u64,
    /// Independent seeds (every figure is their mean and 95 % interval).
    pub seeds: usize,
    pub scale: Scale,
    /// Worker threads for the independent runs (the report is the same on any number).
    pub threads: usize,
    pub inputs: Inputs,
}

/// The default number of seeds (issue 31: at least 10).
pub const DEFAULT_SEEDS: usize = 10;

impl Options {
    /// `seeds` seeds from `first_seed`, generated inputs.
    pub fn new(first_seed: u64, seeds: usize, scale: Scale, threads: usize) -> Options {
        Options { first_seed, seeds, scale, threads, inputs: Inputs::default() }
    }
    /// The command that regenerates the report, for its first lines.
    pub(crate) fn command(&self, name: &str) -> String {
        let mut c = format!("lull sim {name} --seed {} --seeds {}", self.first_seed, self.seeds);
        if self.scale == Scale::Small {
            c.push_str(" --small");
        }
        if let Some(j) = &self.inputs.jobs {
            let _ = std::fmt::Write::write_fmt(&mut c, format_args!(" --swf {}", j.name));
        }
        if let Some(o) = &self.inputs.owners {
            let _ = std::fmt::Write::write_fmt(&mut c, format_args!(" --fta {}", o.name));
        }
        c
    }
    /// The report's name: the experiment's, with the input logs' names appended.
    pub(crate) fn report_name(&self, name: &str) -> String {
        let mut n = name.to_string();
        for extra in [self.inputs.jobs.as_ref().map(|j| &j.name), self.inputs.owners.as_ref().map(|o| &o.name)].into_iter().flatten() {
            n.push('-');
            n.push_str(extra);
        }
        n
    }
}
