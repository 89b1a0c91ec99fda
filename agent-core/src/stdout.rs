//! Standard output that ends quietly on a closed pipe, as ripgrep does: `lull status
//! --json | head -c 1` must not panic with "failed printing to stdout". A report command
//! whose reader has gone exits at once with status 0 (nothing more it prints can be
//! read). A long-running command (`lull agent`, `lull up`, `lull run`) marks itself with
//! [`keep_running_when_closed`]: its agent and guests go on, it just stops printing.
//!
//! Shared by the `lull` command and `lull-bench` (which prints its reports the same
//! way); both take the macros with `#[macro_use] extern crate agent_core;`.

use std::io::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};

static KEEP_RUNNING: AtomicBool = AtomicBool::new(false);
static CLOSED: AtomicBool = AtomicBool::new(false);

/// This process runs an agent or a job: a closed stdout must not end it.
pub fn keep_running_when_closed() {
    KEEP_RUNNING.store(true, Ordering::Relaxed);
}

/// Writes `args` to stdout and flushes. On a closed pipe: exits 0, or for a long-running
/// command stops printing. Any other write error is said once on stderr, likewise.
pub fn write(args: std::fmt::Arguments<'_>) {
    if CLOSED.load(Ordering::Relaxed) {
        return;
    }
    let mut out = std::io::stdout().lock();
    let Err(e) = out.write_fmt(args).and_then(|()| out.flush()) else { return };
    CLOSED.store(true, Ordering::Relaxed);
    let broken_pipe = e.kind() == std::io::ErrorKind::BrokenPipe;
    if !broken_pipe {
        ewrite(format_args!("lull: cannot write to standard output: {e}\n"));
    }
    if !KEEP_RUNNING.load(Ordering::Relaxed) {
        std::process::exit(if broken_pipe { 0 } else { 1 });
    }
}

/// Writes `args` to stderr; a closed or failing stderr is ignored (never a panic, as
/// `eprintln!` would: `lull run … 2>&1 | head` must not kill the agent mid-job).
pub fn ewrite(args: std::fmt::Arguments<'_>) {
    let mut err = std::io::stderr().lock();
    let _ = err.write_fmt(args).and_then(|()| err.flush());
}

/// `eprintln!` through [`ewrite`].
#[macro_export]
macro_rules! errln {
    ($($arg:tt)*) => { $crate::stdout::ewrite(format_args!("{}\n", format_args!($($arg)*))) };
}

/// `println!` through [`write`].
#[macro_export]
macro_rules! outln {
    () => { $crate::stdout::write(format_args!("\n")) };
    ($($arg:tt)*) => { $crate::stdout::write(format_args!("{}\n", format_args!($($arg)*))) };
}

/// `print!` through [`write`].
#[macro_export]
macro_rules! out {
    ($($arg:tt)*) => { $crate::stdout::write(format_args!($($arg)*)) };
}
