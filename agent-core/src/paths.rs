//! Where Lull keeps things: the platform's conventional directories (via `directories`),
//! each overridable by an environment variable so several agents (and tests) can run
//! side by side.
//!
//! | what | default on Linux | override |
//! | --- | --- | --- |
//! | config file | `~/.config/lull/config.toml` | `LULL_CONFIG` |
//! | data (ledger, logs) | `~/.local/share/lull/` | `LULL_DATA_DIR` |
//! | control socket | `$XDG_RUNTIME_DIR/lull/agent.sock` (else in the data dir) | `LULL_SOCKET` |

use directories::ProjectDirs;
use std::path::PathBuf;

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
