//! A guest's stdout and stderr. The guest never holds a file: it writes into pipes, and a
//! thread of the agent copies them into `stdout.log` and `stderr.log` beside (not in) its
//! work directory, created 0600 and out of its reach. Each file keeps at most
//! `[guests] output_mib`; there it ends with a line saying so and the agent closes that
//! pipe, so the guest's further writes fail (EPIPE, or SIGPIPE where it does not handle
//! it) instead of filling the owner's disk or the agent's time.
//!
//! The thread runs at the lowest priority and reads in batches (waking at most every
//! [`BATCH`] while data flows, through pipes widened to 1 MiB), so a guest printing a byte
//! at a time costs the agent as little as one printing in blocks.

use std::io::Write;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The pause between reads while output flows.
pub const BATCH: Duration = Duration::from_millis(10);
/// The pipe size asked for (the unprivileged maximum by default).
const PIPE_BYTES: libc::c_int = 1 << 20;

/// Creates (or empties) an output file: the agent's, 0600, never through a link.
pub fn create(path: &Path) -> std::io::Result<std::fs::File> {
    std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).custom_flags(libc::O_NOFOLLOW).open(path)
}

/// Adds `line` to an output file (the agent's words in the job's own output: why it never
/// started), made as [`create`] makes it; nothing when its directory is not there (a work
/// directory refused before it was made).
pub fn note(path: &Path, line: &str) {
    let file = std::fs::OpenOptions::new().append(true).create(true).mode(0o600).custom_flags(libc::O_NOFOLLOW).open(path);
    if let Ok(mut f) = file {
        let _ = writeln!(f, "{line}");
    }
}

/// One stream: its pipe's read end and its file.
struct Stream {
    pipe: Option<OwnedFd>,
    file: std::fs::File,
    written: u64,
}

/// The thread copying one guest's output.
pub struct Pump {
    handle: JoinHandle<()>,
    cuts: Cuts,
}

/// Which of a pump's streams (by their place in [`Pump::start`]'s list) were cut at the
/// cap; shared with the copying thread.
#[derive(Clone, Debug, Default)]
pub struct Cuts(Arc<AtomicU32>);

impl Cuts {
    fn mark(&self, stream: usize) {
        self.0.fetch_or(1 << stream.min(31), Ordering::AcqRel);
    }
    /// The first stream cut so far, if any.
    pub fn first(&self) -> Option<usize> {
        let bits = self.0.load(Ordering::Acquire);
        (bits != 0).then(|| bits.trailing_zeros() as usize)
    }
}

impl Pump {
    /// Starts copying each (pipe read end, file) with at most `cap` bytes per file.
    pub fn start(guest: &str, streams: Vec<(OwnedFd, std::fs::File)>, cap: u64) -> std::io::Result<Self> {
        let streams: Vec<Stream> = streams.into_iter().map(|(pipe, file)| Stream { pipe: Some(pipe), file, written: 0 }).collect();
        for s in &streams {
            if let Some(p) = &s.pipe {
                // SAFETY: fcntl on a descriptor we own; a failure leaves the default size.
                unsafe {
                    libc::fcntl(p.as_raw_fd(), libc::F_SETPIPE_SZ, PIPE_BYTES);
                    let flags = libc::fcntl(p.as_raw_fd(), libc::F_GETFL);
                    libc::fcntl(p.as_raw_fd(), libc::F_SETFL, flags | libc::O_NONBLOCK);
                }
            }
        }
        let cuts = Cuts::default();
        let marks = cuts.clone();
        let handle = std::thread::Builder::new().name(format!("lull-out-{guest}")).stack_size(64 * 1024).spawn(move || {
            if let Err(e) = crate::sys::sched::lowest_for_this_thread() {
                tracing::debug!("output thread keeps its priority: {e}");
            }
            copy(streams, cap, &marks);
        })?;
        Ok(Self { handle, cuts })
    }

    /// Its streams cut at the cap (read it again once [`Self::finish`] has ended the copy).
    pub fn cuts(&self) -> Cuts {
        self.cuts.clone()
    }

    /// Waits up to `within` for the copy to end (every writer gone): true when it has. A
    /// pump still running (a writer outside the guest's cgroup, only possible without
    /// cgroups) is left to end by itself.
    pub fn finish(self, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        while !self.handle.is_finished() {
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        let _ = self.handle.join();
        true
    }
}

/// Copies until every pipe has ended or been closed at its cap.
fn copy(mut streams: Vec<Stream>, cap: u64, cuts: &Cuts) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let mut polls: Vec<libc::pollfd> = streams
            .iter()
            .filter_map(|s| s.pipe.as_ref())
            .map(|p| libc::pollfd { fd: p.as_raw_fd(), events: libc::POLLIN, revents: 0 })
            .collect();
        if polls.is_empty() {
            return;
        }
        // SAFETY: poll on valid pollfds we own, waiting without a timeout.
        if unsafe { libc::poll(polls.as_mut_ptr(), polls.len() as libc::nfds_t, -1) } < 0 {
            if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return;
        }
        for (i, s) in streams.iter_mut().enumerate() {
            if drain(s, &mut buf, cap) {
                cuts.mark(i);
            }
        }
        std::thread::sleep(BATCH);
    }
}

/// Reads what one pipe holds now into its file, closing the pipe at its end or its cap:
/// true when it closed it at its cap.
fn drain(s: &mut Stream, buf: &mut [u8], cap: u64) -> bool {
    while let Some(pipe) = &s.pipe {
        // SAFETY: reads into a valid buffer of its length from a descriptor we own.
        let n = unsafe { libc::read(pipe.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            if e.kind() != std::io::ErrorKind::WouldBlock {
                s.pipe = None;
            }
            return false;
        }
        if n == 0 {
            s.pipe = None;
            return false;
        }
        let keep = (n as u64).min(cap - s.written) as usize;
        // A full disk loses output, never the guest or the agent.
        let _ = s.file.write_all(&buf[..keep]);
        s.written += keep as u64;
        if s.written >= cap {
            let _ = write!(
                s.file,
                "\n[lull: output cut here at {} MiB ([guests] output_mib); the guest's further writes to it fail]\n",
                cap >> 20
            );
            s.pipe = None;
            return true;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_is_copied_and_cut_at_its_cap_after_which_writes_fail() {
        let dir = tempfile::tempdir().unwrap();
        let (out_r, out_w) = super::super::spawn::pipe().unwrap();
        let (err_r, err_w) = super::super::spawn::pipe().unwrap();
        let (out, err) = (dir.path().join("stdout.log"), dir.path().join("stderr.log"));
        let pump = Pump::start("t", vec![(out_r, create(&out).unwrap()), (err_r, create(&err).unwrap())], 1 << 20).unwrap();
        let cuts = pump.cuts();
        let mut out_w = std::fs::File::from(out_w);
        let mut err_w = std::fs::File::from(err_w);
        err_w.write_all(b"a warning\n").unwrap();
        drop(err_w);
        // 3 MiB into a 1-MiB cap: the writer is refused once the pipe is closed.
        let block = vec![b'x'; 64 * 1024];
        let mut refused = None;
        for _ in 0..48 {
            if let Err(e) = out_w.write_all(&block) {
                refused = Some(e);
                break;
            }
        }
        let e = refused.expect("writes past the cap fail");
        assert_eq!(e.kind(), std::io::ErrorKind::BrokenPipe, "{e}");
        drop(out_w);
        assert!(pump.finish(Duration::from_secs(10)), "the copy ends with its writers");
        assert_eq!(cuts.first(), Some(0), "stdout (the first stream) was cut, stderr was not");
        let text = std::fs::read(&out).unwrap();
        assert!(text.starts_with(&vec![b'x'; 1 << 20]), "the first MiB is kept");
        let tail = String::from_utf8_lossy(&text[1 << 20..]);
        assert!(tail.contains("output cut here at 1 MiB") && text.len() < (1 << 20) + 200, "{tail}");
        assert_eq!(std::fs::read_to_string(&err).unwrap(), "a warning\n");
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&out).unwrap().permissions().mode() & 0o777, 0o600);
    }
}
