//! The agent's log files, shared by every binary that runs an agent (`lull` and
//! `lull-tray`): a daily-rotated file in the data directory (seven kept, level from
//! `LULL_LOG`, default `info`) plus warnings on stderr, level and words only (coloured only on a terminal). The
//! directory is made 0700; the files are created under the binaries' umask of 077.

use std::path::Path;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

/// The log directory or file could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum LoggingError {
    #[error("creating the log directory {dir}: {source}")]
    Dir { dir: String, source: std::io::Error },
    #[error("opening the log file in {dir}: {source}")]
    File { dir: String, source: tracing_appender::rolling::InitError },
}

/// Lines the log writer thread can have queued (see `init`).
pub const LOG_QUEUE_LINES: usize = 2048;

/// Installs the global subscriber logging to `<log_dir>/<name>.<date>.log`. Keep the
/// returned guard alive for as long as the process logs: dropping it flushes the file.
pub fn init(log_dir: &Path, name: &str) -> Result<tracing_appender::non_blocking::WorkerGuard, LoggingError> {
    let dir = || log_dir.display().to_string();
    // Owner-only: the directory here, the files by the binaries' umask (077).
    crate::private_files::create_dir(log_dir).map_err(|source| LoggingError::Dir { dir: dir(), source })?;
    let appender = tracing_appender::rolling::Builder::new()
        .rotation(tracing_appender::rolling::Rotation::DAILY)
        .filename_prefix(name)
        .filename_suffix("log")
        .max_log_files(7)
        .build(log_dir)
        .map_err(|source| LoggingError::File { dir: dir(), source })?;
    // The writer thread's queue is a preallocated array whose every slot is written at
    // creation: tracing-appender's default 128,000 lines is 4 MB resident for the life of
    // the process, a third of the idle agent's RSS budget. The agent logs a few lines a
    // minute; lines beyond a full queue are dropped (lossy), never blocking the caller.
    let (writer, guard) =
        tracing_appender::non_blocking::NonBlockingBuilder::default().buffered_lines_limit(LOG_QUEUE_LINES).finish(appender);
    let file_filter = EnvFilter::try_from_env("LULL_LOG").unwrap_or_else(|_| EnvFilter::new("info"));
    tracing_subscriber::registry()
        .with(tracing_subscriber::fmt::layer().with_writer(writer).with_ansi(false).with_filter(file_filter))
        .with(
            // For the person at the terminal: the level and the words, no timestamp or
            // module path (the file has those).
            tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                .without_time()
                .with_target(false)
                .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
                .with_filter(EnvFilter::new("warn")),
        )
        .try_init()
        .ok();
    Ok(guard)
}
