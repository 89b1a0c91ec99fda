//! The simulator's errors. Bad trace input always names the file and the 1-based line,
//! so a user pointing `lull sim` at a real archive learns exactly where it went wrong.

use std::path::PathBuf;

/// A trace file that could not be read or parsed.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// The file could not be opened or read.
    #[error("{file}: {source}")]
    Io {
        /// The file.
        file: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A line does not follow the format.
    #[error("{file}:{line}: {msg}")]
    Parse {
        /// The file (or a name for in-memory text).
        file: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong, naming the field.
        msg: String,
    },
    /// The file parsed but holds nothing usable.
    #[error("{file}: {msg}")]
    Empty {
        /// The file.
        file: PathBuf,
        /// What is missing.
        msg: String,
    },
}

impl TraceError {
    pub(crate) fn parse(file: &std::path::Path, line: usize, msg: impl Into<String>) -> TraceError {
        TraceError::Parse { file: file.to_path_buf(), line, msg: msg.into() }
    }
}

/// Any simulator failure.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// Reading a trace failed.
    #[error(transparent)]
    Trace(#[from] TraceError),
    /// The scheduler refused an event the driver fed it (a driver bug, reported rather
    /// than hidden).
    #[error("scheduler: {0}")]
    Sched(#[from] lull_core::sched::SchedError),
    /// No experiment of that name.
    #[error("unknown experiment {0:?}; known: {1}")]
    UnknownExperiment(String, String),
    /// A parameter outside its range.
    #[error("invalid parameter: {0}")]
    Invalid(String),
}

/// Result with [`SimError`].
pub type Result<T, E = SimError> = std::result::Result<T, E>;
