//! A real `lull coordinator serve` in a throw-away directory of its own, on a loopback
//! port it picks, for end-to-end tests and benchmarks; machines are enrolled to it with
//! `lull coordinator token create` and `lull enrol`. Stopped (SIGTERM) on drop.

use crate::lull_bin;
use crate::process::{end_with_us, terminate, wait_until};
use std::io::Error;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

pub struct Coordinator {
    pub child: Child,
    pub dir: tempfile::TempDir,
    /// `http://127.0.0.1:PORT`, as it wrote in `coordinator.url`.
    pub url: String,
}

impl Coordinator {
    /// Starts `lull coordinator serve --listen 127.0.0.1:0 EXTRA…` (stderr in
    /// `coordinator.log`) and waits until it has written its URL.
    pub fn try_start(extra: &[&str]) -> std::io::Result<Self> {
        Self::try_start_in(tempfile::tempdir()?, &crate::try_lull_bin()?, &[], extra)
    }

    /// [`Coordinator::try_start`] with the data directory `dir` (where a benchmark may
    /// have prepared its database), the binary `exe` (another build, to compare) and
    /// `env` set (e.g. the database URL, never on the command line).
    pub fn try_start_in(dir: tempfile::TempDir, exe: &Path, env: &[(&str, &str)], extra: &[&str]) -> std::io::Result<Self> {
        let log = std::fs::File::create(dir.path().join("coordinator.log"))?;
        let mut cmd = Command::new(exe);
        let child = end_with_us(&mut cmd, libc::SIGTERM)
            .args(["coordinator", "serve", "--listen", "127.0.0.1:0"])
            .args(extra)
            .envs(env.iter().copied())
            .env("LULL_DATA_DIR", dir.path())
            .env_remove("LULL_COORDINATOR_URL")
            .env_remove("LULL_KEY")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()?;
        let mut c = Self { child, dir, url: String::new() };
        let url_file = c.dir.path().join("coordinator.url");
        c.url = wait_until("the coordinator to write its URL", Duration::from_secs(30), || {
            std::fs::read_to_string(&url_file).ok().map(|s| s.trim().to_string()).filter(|s| !s.is_empty())
        })
        .map_err(|e| Error::new(e.kind(), format!("{e}; its log:\n{}", c.log())))?;
        Ok(c)
    }

    /// [`Coordinator::try_start`] for tests: panics on failure.
    pub fn start(extra: &[&str]) -> Self {
        Self::try_start(extra).unwrap_or_else(|e| panic!("starting lull coordinator serve: {e}"))
    }

    /// The command that runs `lull ARGS` on this coordinator's data directory.
    pub fn lull(&self, args: &[&str]) -> Command {
        let mut c = Command::new(lull_bin());
        c.args(args).env("LULL_DATA_DIR", self.dir.path()).env_remove("LULL_COORDINATOR_URL").env_remove("LULL_KEY");
        c
    }

    /// What the coordinator wrote to stderr.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("coordinator.log")).unwrap_or_default()
    }

    /// A fresh single-use join token (`lull coordinator token create`).
    pub fn token(&self) -> std::io::Result<String> {
        let out = self.lull(&["coordinator", "token", "create"]).output()?;
        if !out.status.success() {
            return Err(Error::other(format!("lull coordinator token create: {}", String::from_utf8_lossy(&out.stderr).trim())));
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    }

    /// Enrols the machine whose data directory is `data_dir` (laid out as
    /// [`crate::agent_env`] says) as `owner`'s `machine` (`lull enrol` with a fresh token).
    pub fn enrol(&self, data_dir: &Path, owner: &str, machine: &str) -> std::io::Result<()> {
        let token = self.token()?;
        let mut cmd = Command::new(crate::try_lull_bin()?);
        cmd.args(["enrol", "--url", &self.url, "--token", &token, "--owner", owner, "--machine", machine]);
        let out = crate::agent_env(&mut cmd, data_dir).output()?;
        if !out.status.success() {
            return Err(Error::other(format!("lull enrol: {}", String::from_utf8_lossy(&out.stderr).trim())));
        }
        Ok(())
    }
}

impl Drop for Coordinator {
    fn drop(&mut self) {
        terminate(&mut self.child, Duration::from_secs(20));
    }
}
