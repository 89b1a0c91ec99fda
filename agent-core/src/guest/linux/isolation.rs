//! How guests are sandboxed on this machine, chosen once at start-up, and how one guest is
//! launched in it.
//!
//! Namespaces ([`super::bubblewrap`]) wherever bwrap can build a sandbox as the guests'
//! account (unprivileged user namespaces allowed); otherwise the Landlock sandbox
//! ([`super::sandbox`]), said loudly in the log, on stderr and in `lull status`, which
//! names what the guest can then see. `LULL_GUEST_SANDBOX=landlock` picks the fallback on
//! purpose (tests, side-by-side measurements).
//!
//! Launching: the program is looked up in the guest's view first ("program not found" is
//! an error of its own, [`GuestError::ProgramNotFound`]); the guest's output goes through
//! pipes into capped files ([`super::output`]); a guest that asked for outbound network,
//! where the owner allows it, gets its link before its job starts ([`super::outbound`]).

use super::bubblewrap::{self, Bubblewrap, GUEST_PATH, TMP_IN_VIEW, WORK_IN_VIEW};
use super::spawn::{self, Confinement, Exec};
use super::{outbound, output, sandbox};
use crate::config::NetworkPolicy;
use crate::guest::{GuestDir, GuestError, GuestSpec};
use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::{Child, ExitStatus, Stdio};
use tracing::{error, info};

/// The sandbox guests get here.
#[derive(Debug)]
pub enum Isolation {
    /// Namespaces built by bubblewrap; `outbound`: why outbound network cannot be given
    /// here, if it cannot.
    Namespaces { bwrap: Bubblewrap, outbound: Option<String> },
    /// The Landlock fallback, and why namespaces are unavailable.
    Landlock { why: String },
}

/// One launched guest.
pub struct Launched {
    /// bwrap (namespaces) or the job's own process (Landlock).
    pub child: Child,
    /// Processes of the guest's that are not the job's (bwrap's outer process, the
    /// network link): a checkpoint signal is not theirs.
    pub helpers: Vec<i32>,
    pub link: Option<outbound::Link>,
    pub pump: output::Pump,
}

impl Isolation {
    /// Chooses the sandbox for guests running as `account` (`None`: the agent's own user).
    pub fn choose(account: Option<(u32, u32)>, network: NetworkPolicy) -> Self {
        let chosen = if std::env::var("LULL_GUEST_SANDBOX").is_ok_and(|v| v == "landlock") {
            Self::Landlock { why: "LULL_GUEST_SANDBOX=landlock".into() }
        } else {
            match Bubblewrap::find().and_then(|bw| bw.probe(account).map(|()| bw)) {
                Ok(bwrap) => Self::Namespaces { bwrap, outbound: outbound::unavailable() },
                Err(why) => Self::Landlock { why },
            }
        };
        match &chosen {
            Self::Namespaces { bwrap, outbound } => {
                info!(bwrap = %bwrap.version, "guests run in their own namespaces");
                if let (NetworkPolicy::Outbound, Some(why)) = (network, outbound) {
                    eprintln!("lull: guests.network = \"outbound\" but {why}: guests that ask for network are refused");
                    error!("guests.network = \"outbound\" but {why}: guests that ask for network are refused");
                }
            }
            Self::Landlock { why } => {
                eprintln!("lull: NO NAMESPACES FOR GUESTS ({why}): Landlock only — guests see this machine's processes");
                error!(
                    "NO NAMESPACES FOR GUESTS ({why}): guests run under Landlock only. They see every process's command \
                     line, have this machine's network stack (TCP denied by Landlock, UDP not) and no outbound network; \
                     install bubblewrap and allow unprivileged user namespaces to contain them fully."
                );
            }
        }
        chosen
    }

    /// For `lull status`.
    pub fn describe(&self) -> String {
        match self {
            Self::Namespaces { bwrap, outbound } => format!(
                "namespaces ({}: user, pid, mount, ipc, uts, cgroup, net; outbound network {})",
                bwrap.version,
                outbound.as_ref().map_or("via slirp4netns".to_string(), |why| format!("unavailable: {why}"))
            ),
            Self::Landlock { why } => {
                format!("LANDLOCK ONLY, NO NAMESPACES ({why}): guests see this machine's processes; landlock ABI {}", sandbox::kernel_abi())
            }
        }
    }

    pub fn namespaces(&self) -> bool {
        matches!(self, Self::Namespaces { .. })
    }

    /// Whether a job gets outbound network: only if it asks, the owner allows it
    /// (`allowed`) and this machine can give it safely; otherwise a job that asked is
    /// refused, saying why.
    pub fn outbound_for(&self, spec: &GuestSpec, allowed: NetworkPolicy) -> Result<bool, GuestError> {
        if spec.network != Some(NetworkPolicy::Outbound) {
            return Ok(false);
        }
        if allowed != NetworkPolicy::Outbound {
            return Err(GuestError::Network("the job asks for outbound network and this machine's [guests] network = \"none\"".into()));
        }
        match self {
            Self::Namespaces { outbound: None, .. } => Ok(true),
            Self::Namespaces { outbound: Some(why), .. } => Err(GuestError::Network(format!("outbound network unavailable: {why}"))),
            Self::Landlock { why } => Err(GuestError::Network(format!("outbound network needs namespaces, unavailable here ({why})"))),
        }
    }

    /// The guest's work directory, as it sees it.
    fn work_in_view(&self, dir: &GuestDir) -> PathBuf {
        match self {
            Self::Namespaces { .. } => PathBuf::from(WORK_IN_VIEW),
            Self::Landlock { .. } => dir.work(),
        }
    }

    /// The guest's environment: PATH and LANG, the job's own, then HOME, TMPDIR and for a
    /// checkpointable job `LULL_CHECKPOINT`, as it sees them.
    fn env(&self, spec: &GuestSpec, dir: &GuestDir) -> Vec<(OsString, OsString)> {
        let work = self.work_in_view(dir);
        let tmp = match self {
            Self::Namespaces { .. } => PathBuf::from(TMP_IN_VIEW),
            Self::Landlock { .. } => dir.work().join("tmp"),
        };
        let mut env: Vec<(OsString, OsString)> = vec![("PATH".into(), GUEST_PATH.into()), ("LANG".into(), "C.UTF-8".into())];
        env.extend(spec.env.iter().map(|(k, v)| (k.into(), v.into())));
        env.push(("HOME".into(), work.clone().into()));
        env.push(("TMPDIR".into(), tmp.into()));
        if spec.checkpointable {
            env.push(("LULL_CHECKPOINT".into(), crate::checkpoint::path_in(&work).into()));
        }
        env
    }

    /// Checks that the job's program is in the guest's view.
    pub fn find_program(&self, spec: &GuestSpec, dir: &GuestDir) -> Result<(), GuestError> {
        let path = spec.env.iter().rev().find(|(k, _)| k == "PATH").map_or(GUEST_PATH, |(_, v)| v.as_str());
        let cwd = self.work_in_view(dir);
        let work = dir.work();
        match self {
            Self::Namespaces { .. } => bubblewrap::find_program(&spec.command, path, &cwd, |p| bubblewrap::host_path(&work, p)),
            Self::Landlock { .. } => bubblewrap::find_program(&spec.command, path, &cwd, |p| Some(p.to_path_buf())),
        }
    }

    /// Starts the guest in `dir` bound by `confinement` (cgroups, rlimits, account), with
    /// its output capped at `output_cap` bytes per stream; `outbound` from
    /// [`Self::outbound_for`].
    pub fn launch(
        &self,
        id: &str,
        spec: &GuestSpec,
        dir: &GuestDir,
        mut confinement: Confinement,
        outbound: bool,
        output_cap: u64,
    ) -> Result<Launched, GuestError> {
        let spawn_err = |source| GuestError::Spawn { id: id.into(), source };
        let (out_r, out_w) = spawn::pipe().map_err(spawn_err)?;
        let (err_r, err_w) = spawn::pipe().map_err(spawn_err)?;
        let files = [dir.stdout(), dir.stderr()]
            .map(|p| output::create(&p).map_err(|source| GuestError::Io { what: format!("creating {}", p.display()), source }));
        let [out_file, err_file] = files;
        let streams = vec![(out_r, out_file?), (err_r, err_file?)];
        let helper = confinement.like();
        let (program, args, cwd, gate) = match self {
            Self::Namespaces { bwrap, .. } => {
                let work = dir.work();
                let opts = bubblewrap::Options { work: &work, new_session: !confinement.procs_files.is_empty(), outbound };
                let (file, line) = bwrap.command_line(&opts, &spec.command, &spec.args);
                let args_fd = spawn::memfd_with("lull-bwrap-args", &file).map_err(spawn_err)?;
                confinement.hand(args_fd, bubblewrap::ARGS_FD).map_err(spawn_err)?;
                let gate = if outbound { Some(outbound::Gate::new(&mut confinement).map_err(spawn_err)?) } else { None };
                (bwrap.program.clone().into_os_string(), line, work, gate)
            }
            Self::Landlock { .. } => {
                confinement.landlock = sandbox::prepare(&dir.work())?;
                (spec.command.clone().into(), spec.args.iter().map(Into::into).collect(), dir.work(), None)
            }
        };
        let exec = Exec { program, args, cwd, env: self.env(spec, dir), stdout: Stdio::from(out_w), stderr: Stdio::from(err_w) };
        let mut child = spawn::spawn(exec, confinement).map_err(spawn_err)?;
        let mut helpers = Vec::new();
        if self.namespaces() {
            helpers.push(child.id() as i32);
        }
        let link = match gate.map(|g| g.open(helper)) {
            Some(Ok(link)) => {
                helpers.push(link.child.id() as i32);
                Some(link)
            }
            Some(Err(why)) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(GuestError::Network(why));
            }
            None => None,
        };
        match output::Pump::start(id, streams, output_cap) {
            Ok(pump) => Ok(Launched { child, helpers, link, pump }),
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                Err(spawn_err(e))
            }
        }
    }

    /// A guest's end as (exit code, signal): in namespaces bwrap reports a job killed by
    /// signal N as exit code 128+N, read back here as the signal (a job that exits with
    /// 129–192 itself reads the same).
    pub fn decode(&self, status: Option<ExitStatus>) -> (Option<i32>, Option<i32>) {
        let (code, signal) = (status.and_then(|s| s.code()), status.and_then(|s| s.signal()));
        match (self, code) {
            (Self::Namespaces { .. }, Some(c)) if (129..=128 + 64).contains(&c) => (None, Some(c - 128)),
            _ => (code, signal),
        }
    }
}
