//! Where Lull keeps things: the platform's conventional directories (via `directories`),
//! each overridable by an environment variable so several agents (and tests) can run
//! side by side.
//!
//! | what | default on Linux | override |
//! | --- | --- | --- |
//! | config file | `~/.config/lull/config.toml` | `LULL_CONFIG` |
//! | data (ledger, logs) | `~/.local/share/lull/` | `LULL_DATA_DIR` |
//! | control socket | `$XDG_RUNTIME_DIR/lull/agent.sock` (else in the data dir) | `LULL_SOCKET` |
//! | guests' work directories | the data dir (root: `/var/lib/lull/execute/<hash>`) | `LULL_WORK_DIR` |

use directories::ProjectDirs;
use std::path::PathBuf;

/// Lull's own directory under `/var/lib`, parent of [`EXECUTE_ROOT`].
pub const VAR_LIB: &str = "/var/lib/lull";
/// Where an agent running as root keeps its guests' work directories.
pub const EXECUTE_ROOT: &str = "/var/lib/lull/execute";

/// The resolved locations.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Paths {
    pub config_file: PathBuf,
    pub data_dir: PathBuf,
    pub ledger: PathBuf,
    pub log_dir: PathBuf,
    pub socket: PathBuf,
}

/// No home directory could be found and no override was given.
#[derive(Debug, thiserror::Error)]
#[error("cannot find a home directory for Lull's files; set LULL_CONFIG, LULL_DATA_DIR and LULL_SOCKET")]
pub struct NoHome;

impl Paths {
    /// Resolves from the environment and the platform's conventions.
    pub fn from_env() -> Result<Self, NoHome> {
        let env = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty()).map(PathBuf::from);
        let dirs = ProjectDirs::from("org", "Lull", "lull");
        let config_file = match env("LULL_CONFIG") {
            Some(p) => p,
            None => dirs.as_ref().ok_or(NoHome)?.config_dir().join("config.toml"),
        };
        let data_dir = match env("LULL_DATA_DIR") {
            Some(p) => p,
            None => dirs.as_ref().ok_or(NoHome)?.data_dir().to_path_buf(),
        };
        let socket = match env("LULL_SOCKET") {
            Some(p) => p,
            None => match dirs.as_ref().and_then(|d| d.runtime_dir()) {
                Some(r) => r.join("agent.sock"),
                None => data_dir.join("agent.sock"),
            },
        };
        Ok(Self { config_file, ledger: data_dir.join("ledger.db"), log_dir: data_dir.join("logs"), data_dir, socket })
    }

    /// Where guests' work directories go (`guests/`, `jobs/`): the data directory, except
    /// for an agent running as root. Root's data directory sits in a home no unprivileged
    /// guest can enter, so its guests work in `/var/lib/lull/execute/<16 hex digits>`
    /// (one per data directory, as HTCondor's execute directory), whose parents any
    /// account may pass through but not list. `LULL_WORK_DIR` overrides both.
    pub fn work_root(&self) -> PathBuf {
        if let Some(p) = std::env::var_os("LULL_WORK_DIR").filter(|v| !v.is_empty()) {
            return PathBuf::from(p);
        }
        if !crate::sys::id::is_root() {
            return self.data_dir.clone();
        }
        // FNV-1a: stable across builds, so an upgraded agent finds its old directories.
        let hash = self
            .data_dir
            .as_os_str()
            .as_encoded_bytes()
            .iter()
            .fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3));
        PathBuf::from(EXECUTE_ROOT).join(format!("{hash:016x}"))
    }

    /// Tightens the install at start ([`crate::private_files::tighten`]) and says once in
    /// the log what it had to tighten.
    pub fn tighten_install(&self) {
        let work_root = self.work_root();
        let done = crate::private_files::tighten(&self.data_dir, &self.config_file, &self.socket, &work_root);
        if !done.is_empty() {
            let shown: Vec<String> = done.iter().take(12).map(|p| p.display().to_string()).collect();
            let more = done.len().saturating_sub(shown.len());
            tracing::warn!(
                count = done.len(),
                "tightened Lull's files that other users could read or enter (now owner-only): {}{}",
                shown.join(", "),
                if more > 0 { format!(" and {more} more") } else { String::new() }
            );
        }
    }

    /// Creates the work root, passable (not listable) by any account when it is ours under
    /// [`EXECUTE_ROOT`].
    pub fn create_work_root(&self) -> std::io::Result<PathBuf> {
        let root = self.work_root();
        if root.starts_with(EXECUTE_ROOT) {
            let b = crate::sys::fs::dir_builder(0o711);
            for sub in ["guests", "jobs"] {
                b.create(root.join(sub))?;
            }
            // `/var/lib/lull` too: created with the rest by a first agent under umask 077
            // it would be 0700, and no guest account could reach its work directory
            // (found on a fresh Debian 12 in the VM bench, case 60-root-agent).
            make_passable(&root.join("guests"), std::path::Path::new(VAR_LIB))?;
            make_passable(&root.join("jobs"), &root)?;
        } else {
            crate::private_files::create_dir(&root)?;
        }
        Ok(root)
    }

    /// All paths under one directory (tests, portable installs).
    pub fn under(root: &std::path::Path) -> Self {
        Self {
            config_file: root.join("config.toml"),
            data_dir: root.to_path_buf(),
            ledger: root.join("ledger.db"),
            log_dir: root.join("logs"),
            socket: root.join("agent.sock"),
        }
    }
}

/// Sets mode 0711 (any account may pass through, none may list) on `dir` and each parent
/// up to and including `top`. Existing directories keep their mode otherwise: the umask
/// may have narrowed it when they were made, or an earlier version may have made them
/// 0755.
fn make_passable(dir: &std::path::Path, top: &std::path::Path) -> std::io::Result<()> {
    let mut p = dir.to_path_buf();
    while p.starts_with(top) {
        crate::sys::fs::set_mode(&p, 0o711)?;
        if !p.pop() {
            break;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::make_passable;
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};

    /// Directories made under umask 077 (as every Lull binary runs) become passable from
    /// `top` down, and nothing above `top` changes: a guest account can reach its work
    /// directory through them.
    #[test]
    fn the_chain_to_a_guests_work_directory_is_passable_from_the_top_down() {
        let tmp = tempfile::tempdir().unwrap();
        let above = tmp.path().join("var-lib");
        let top = above.join("lull");
        let dir = top.join("execute").join("0123456789abcdef").join("guests");
        std::fs::DirBuilder::new().recursive(true).mode(0o700).create(&dir).unwrap();
        std::fs::set_permissions(&above, std::fs::Permissions::from_mode(0o750)).unwrap();
        make_passable(&dir, &top).unwrap();
        let mut p = dir.clone();
        while p.starts_with(&top) {
            let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o711, "{} is {mode:o}", p.display());
            p.pop();
        }
        assert_eq!(std::fs::metadata(&above).unwrap().permissions().mode() & 0o777, 0o750, "above the top: unchanged");
    }
}
