//! What a leased task gives its guest and gets back: the guest spec built from the lease
//! ([`guest_spec`]: command, environment, memory cap, work directory and input files) and
//! what the guest wrote, shipped with renewals and the completion ([`OutputShipper`],
//! [`guest_output`]).

use crate::guest::{GuestDir, GuestInfo, GuestSpec};
use crate::sys::fs as sysfs;
use lull_protocol::limits::{INPUTS_MAX, VALUE_MAX};
use lull_protocol::{Lease, Output};
use std::path::Path;

/// A leased task's guest spec: its command, arguments and environment (plus
/// `LULL_JOB_ID`, `LULL_RANK`, `LULL_MACHINES`; the runtime adds `LULL_CHECKPOINT` for a
/// checkpointable job, see [`crate::checkpoint`]), its memory request as the guest's cap,
/// checkpointable as submitted, and its directory `jobs/<job>-<rank>-<lease>` under
/// `work_root` (made absolute) with the job's input files in its work directory `work/`.
pub fn guest_spec(task: &Lease, work_root: &Path) -> std::result::Result<GuestSpec, String> {
    let s = &task.spec;
    if s.inputs.len() > INPUTS_MAX {
        return Err(format!("the job has {} input files, more than the {INPUTS_MAX} a job may carry", s.inputs.len()));
    }
    if let Some((name, content)) = s.inputs.iter().find(|(_, c)| c.len() > VALUE_MAX) {
        return Err(format!("input file {name:?} holds {} bytes, more than the {VALUE_MAX} an input file may hold", content.len()));
    }
    let dir = work_root.join("jobs").join(format!("{}-{}-{}", task.job_id, task.rank, task.lease));
    let dir = GuestDir::new(std::path::absolute(&dir).map_err(|e| format!("resolving {}: {e}", dir.display()))?);
    let workdir = dir.work();
    sysfs::dir_builder(0o700).create(&workdir).map_err(|e| format!("creating {}: {e}", workdir.display()))?;
    for (name, content) in &s.inputs {
        let plain = Path::new(name).components().all(|c| matches!(c, std::path::Component::Normal(_)));
        if !plain || name.is_empty() {
            return Err(format!("input file name {name:?} is not a plain relative path"));
        }
        let path = workdir.join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| format!("creating {}: {e}", parent.display()))?;
        }
        sysfs::no_follow(sysfs::create_mode(std::fs::OpenOptions::new().write(true).create(true).truncate(true), 0o600))
            .open(&path)
            .and_then(|mut f| std::io::Write::write_all(&mut f, content.as_bytes()))
            .map_err(|e| format!("writing {}: {e}", path.display()))?;
    }
    let mut spec = GuestSpec::new(s.command.clone(), s.args.clone());
    spec.env = s.env.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    spec.env.push(("LULL_JOB_ID".into(), task.job_id.to_string()));
    spec.env.push(("LULL_RANK".into(), task.rank.to_string()));
    spec.env.push(("LULL_MACHINES".into(), task.machines.to_string()));
    spec.job_dir = Some(dir.root);
    spec.memory_cap_bytes = (task.mem_bytes > 0).then_some(task.mem_bytes);
    spec.checkpointable = task.checkpointable;
    Ok(spec)
}

/// The tail (at most [`lull_protocol::OUTPUT_TAIL_MAX`] bytes) of one of a guest's
/// output files, and the file's whole size; a missing file is empty. Never through a
/// symbolic link (the files are the agent's, beside the guest's work directory).
pub(crate) fn file_tail(path: &Path) -> (String, u64) {
    use std::io::{Read, Seek, SeekFrom};
    let Ok(mut f) = sysfs::no_follow(std::fs::OpenOptions::new().read(true)).open(path) else { return (String::new(), 0) };
    let size = f.metadata().map_or(0, |m| m.len());
    let from = size.saturating_sub(lull_protocol::OUTPUT_TAIL_MAX as u64);
    let mut buf = Vec::new();
    if f.seek(SeekFrom::Start(from)).is_err() || f.read_to_end(&mut buf).is_err() {
        return (String::new(), size);
    }
    (lull_protocol::output_tail(&buf), size)
}

/// What a guest wrote so far to its output files (`stdout.log` and `stderr.log` beside
/// its work directory), as a renewal or a completion carries it.
pub(crate) fn written_output(stdout_log: &Path, stderr_log: &Path) -> Output {
    let (stdout, stdout_bytes) = file_tail(stdout_log);
    let (stderr, stderr_bytes) = file_tail(stderr_log);
    Output { stdout, stderr, stdout_bytes, stderr_bytes }
}

/// What a guest wrote to its `stdout.log` and `stderr.log`, as a completion carries it;
/// why the runtime did not start it or stopped it (its program not found, its disk limit)
/// ends its stderr as a `lull:` line, unless the runtime already wrote its outcome there.
pub fn guest_output(info: &GuestInfo) -> Output {
    let Output { stdout, mut stderr, stdout_bytes, mut stderr_bytes } = written_output(&info.stdout_log, &info.stderr_log);
    let said = info.start_error.as_ref().is_some_and(|o| stderr.contains(&format!("lull: {}\n", o.describe())));
    if let Some(why) = info.failure.as_ref().filter(|_| !said) {
        let line = format!("lull: {why}\n");
        stderr_bytes += line.len() as u64;
        let mut tail = stderr.into_bytes();
        tail.extend_from_slice(line.as_bytes());
        stderr = lull_protocol::output_tail(&tail);
    }
    Output { stdout, stderr, stdout_bytes, stderr_bytes }
}

/// What a running guest wrote, shipped with its lease renewals (`lull jobs output
/// --follow`): a renewal carries the tails (at most [`lull_protocol::OUTPUT_TAIL_MAX`]
/// of each stream) only when the guest wrote more since the last tails shipped, so a
/// quiet guest costs nothing and a chatty one at most 128 KiB per renewal.
#[derive(Debug, Default)]
pub struct OutputShipper {
    /// The streams' sizes when their tails were last shipped (`None`: nothing shipped,
    /// or the last renewal failed).
    shipped: Option<(u64, u64)>,
}

impl OutputShipper {
    /// The tails to send with the next renewal, if the guest in `dir` wrote more.
    pub fn next(&mut self, dir: &GuestDir) -> Option<Output> {
        let size = |p: std::path::PathBuf| std::fs::metadata(p).map_or(0, |m| m.len());
        let now = (size(dir.stdout()), size(dir.stderr()));
        if self.shipped == Some(now) || (self.shipped.is_none() && now == (0, 0)) {
            return None;
        }
        let out = written_output(&dir.stdout(), &dir.stderr());
        self.shipped = Some((out.stdout_bytes, out.stderr_bytes));
        Some(out)
    }

    /// The renewal carrying the last tails failed: send them again next time.
    pub fn unsent(&mut self) {
        self.shipped = None;
    }
}
