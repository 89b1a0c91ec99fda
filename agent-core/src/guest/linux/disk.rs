//! A guest's disk use, held to `[guests] disk_mib`. No single file may grow past the limit
//! (RLIMIT_FSIZE, set in [`super::spawn`]: the write fails and SIGXFSZ ends the writer); no
//! call may reserve space in one go (`fallocate` is refused, [`super::syscall_filter`]); and
//! while the guest runs its [`DiskGuard`] thread looks at the file system's free space every
//! [`POLL`]. The guest cannot have added more than the space the file system lost since its
//! work directory was last measured, summed look by look (space others free meanwhile is
//! not subtracted, so it cannot hide the guest's growth), so while that measurement plus
//! the loss stays under the limit nothing else is done (one `statvfs`). When it could be over, its directory is
//! walked: blocks allocated (a sparse file counts what it holds; a file linked twice
//! once), plus files the guest deleted but still holds open (`/proc/PID/fd` of its
//! processes), which take disk no walk sees. Over, it is killed and the runtime reports
//! why. When it could be over by more than [`SLACK`], it is first frozen (its own freeze,
//! [`super::hold`]) until the walk has said, and thawed if within. So a guest passes its
//! limit by at most [`SLACK`] plus what it writes in one [`POLL`]; and a guest sitting at
//! its limit is not kept frozen by everyone else's writes to the same disk (the owner's, a
//! build's), which the free space counts too — only walked.
//!
//! A walk is also made every [`WALK_AT_LEAST_EVERY`] (space freed by others within the same
//! look as the guest's writes hides them), and repeats at most every [`WALK_COST_FACTOR`] times its own duration,
//! so the agent spends at most ~2 % of a core on it even while the owner fills the same
//! disk; until the next walk is allowed, a guest that could be over stays frozen. Without
//! cgroups (the fallback) nothing can freeze it alone: it writes on until the walk.

pub use super::super::caps::{Over, MAX_ENTRIES};
use super::hold::{Hold, Reason};
use std::collections::HashSet;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How often a guest's [`DiskGuard`] reads the free space of its file system.
pub const POLL: Duration = Duration::from_millis(10);
/// How far past its limit a guest could be, by the free space alone, before it is frozen
/// to be measured (below that it is measured while it runs).
pub const SLACK: u64 = 16 << 20;

/// A walk that took t waits this many times t (at least [`WALK_MIN_GAP`]) before the next.
const WALK_COST_FACTOR: u32 = 50;
/// The shortest time between two walks.
const WALK_MIN_GAP: Duration = Duration::from_millis(50);
/// A walk is made at least this often all the same: space the owner frees within the same
/// look as the guest writes hides the guest's growth from the free-space bound.
const WALK_AT_LEAST_EVERY: Duration = Duration::from_secs(30);

/// One guest's disk watch.
#[derive(Debug)]
pub struct DiskWatch {
    work: PathBuf,
    limit: u64,
    /// Use at the last walk.
    measured: u64,
    /// Space the file system lost since the last walk, summed look by look, and its free
    /// bytes at the last look.
    lost: u64,
    free_last: u64,
    next_walk: Instant,
    last_walk: Instant,
    /// The directories Lull made before the guest started (`tmp/`): their own blocks are
    /// not the guest's.
    lulls_dirs: HashSet<u64>,
    /// Walks made (for tests and figures).
    pub walks: u32,
}

impl DiskWatch {
    /// Starts watching `work` (its inputs and checkpoint count from the start; the
    /// directories already there, which Lull made, do not).
    pub fn new(work: &Path, limit_bytes: u64) -> Self {
        let now = Instant::now();
        let lulls_dirs = std::fs::read_dir(work)
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| e.metadata().ok().filter(|m| m.is_dir()).map(|m| m.ino()))
            .collect();
        let mut w = Self {
            work: work.to_path_buf(),
            limit: limit_bytes,
            measured: 0,
            lost: 0,
            free_last: 0,
            next_walk: now,
            last_walk: now,
            lulls_dirs,
            walks: 0,
        };
        w.walk(&[]);
        w
    }

    /// How far past its limit the guest could be now, from the free space alone (0:
    /// within it for sure). Each call is a look: what was lost since the last one adds up.
    fn could_exceed_by(&mut self) -> u64 {
        if let Some(free) = free_bytes(&self.work) {
            self.lost += self.free_last.saturating_sub(free);
            self.free_last = free;
        }
        (self.measured + self.lost).saturating_sub(self.limit)
    }

    /// One look at `now` (`could_be`: [`Self::could_exceed_by`] just said more than 0):
    /// walks when it could be over or the periodic walk is due, and the cost bound allows.
    fn step(&mut self, now: Instant, could_be: bool, pids: impl FnOnce() -> Vec<i32>) -> Step {
        let due = could_be || now >= self.last_walk + WALK_AT_LEAST_EVERY;
        if !due {
            return Step::Within;
        }
        if now < self.next_walk {
            return if could_be { Step::Unsure } else { Step::Within };
        }
        match self.walk(&pids()) {
            Some(over) => Step::Over(over),
            None => Step::Within,
        }
    }

    fn walk(&mut self, pids: &[i32]) -> Option<Over> {
        let t0 = Instant::now();
        let free = free_bytes(&self.work).unwrap_or(0);
        let (mut used, complete, dev) = allocated(&self.work, &self.lulls_dirs);
        used += held_deleted(pids, dev);
        self.walks += 1;
        self.last_walk = t0;
        self.measured = used;
        self.lost = 0;
        self.free_last = free;
        self.next_walk = Instant::now() + (t0.elapsed() * WALK_COST_FACTOR).max(WALK_MIN_GAP);
        (used > self.limit || !complete).then_some(Over { used_bytes: used, limit_bytes: self.limit, too_many_files: !complete })
    }
}

/// What one look found.
#[derive(Debug, PartialEq, Eq)]
enum Step {
    /// Within the limit, or nothing to look at.
    Within,
    /// It could be over, and the next walk is not yet allowed.
    Unsure,
    Over(Over),
}

/// How the guard reaches its guest.
pub struct GuardedGuest {
    /// Its own freeze; `None` without cgroups.
    pub hold: Option<Arc<Hold>>,
    /// Its processes (for files deleted but held open).
    pub pids: Box<dyn Fn() -> Vec<i32> + Send>,
    /// Kills it, all of it.
    pub kill: Box<dyn Fn() + Send>,
}

/// A running guest's disk guard: a thread that ends with the guard (or once it has
/// stopped its guest).
pub struct DiskGuard {
    stop: Arc<AtomicBool>,
    over: Arc<Mutex<Option<Over>>>,
}

impl DiskGuard {
    /// Starts guarding `watch`'s work directory for `guest`.
    pub fn start(mut watch: DiskWatch, guest: GuardedGuest) -> std::io::Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let over = Arc::new(Mutex::new(None));
        let (stop2, over2) = (stop.clone(), over.clone());
        std::thread::Builder::new().name("lull-disk".into()).spawn(move || {
            let hold = |on: bool| {
                if let Some(h) = &guest.hold {
                    if let Err(e) = h.set(Reason::Disk, on) {
                        tracing::warn!("disk guard: could not {} the guest: {e}", if on { "freeze" } else { "thaw" });
                    }
                }
            };
            while !stop2.load(Ordering::Acquire) {
                std::thread::sleep(POLL);
                let excess = watch.could_exceed_by();
                if excess > SLACK {
                    hold(true);
                }
                match watch.step(Instant::now(), excess > 0, &guest.pids) {
                    // Written only when it was held (see `Hold::set`).
                    Step::Within => hold(false),
                    // Held if it could be far over; else it runs until the walk.
                    Step::Unsure => {}
                    Step::Over(o) => {
                        // Said first: the runtime that finds the guest gone finds why.
                        *over2.lock().unwrap_or_else(|p| p.into_inner()) = Some(o);
                        (guest.kill)();
                        return;
                    }
                }
            }
        })?;
        Ok(Self { stop, over })
    }

    /// Why the guard stopped its guest, once it has.
    pub fn over(&self) -> Option<Over> {
        self.over.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

impl Drop for DiskGuard {
    fn drop(&mut self) {
        // The thread sees it within one POLL; nobody waits for it.
        self.stop.store(true, Ordering::Release);
    }
}

/// Free bytes for unprivileged users on the file system holding `path`.
fn free_bytes(path: &Path) -> Option<u64> {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).ok()?;
    // SAFETY: statvfs writes into a zeroed struct of the right type.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: a valid NUL-terminated path and a valid out pointer.
    (unsafe { libc::statvfs(c.as_ptr(), &mut st) } == 0).then(|| st.f_bavail * st.f_frsize)
}

/// Bytes allocated under `dir` (each inode once, links not followed; the own blocks of
/// `dir` and of the directories `not_counted` are Lull's, not the guest's), whether the
/// walk saw everything (at most [`MAX_ENTRIES`]), and the directory's device.
fn allocated(dir: &Path, not_counted: &HashSet<u64>) -> (u64, bool, u64) {
    let Ok(top) = std::fs::symlink_metadata(dir) else { return (0, true, 0) };
    let dev = top.dev();
    let (mut total, mut seen, mut stack) = (0, 0usize, vec![dir.to_path_buf()]);
    let mut inodes = HashSet::new();
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else { continue };
        for e in rd.flatten() {
            seen += 1;
            if seen > MAX_ENTRIES {
                return (total, false, dev);
            }
            let Ok(m) = e.metadata() else { continue };
            if m.nlink() > 1 && !m.is_dir() && !inodes.insert(m.ino()) {
                continue;
            }
            if !(m.is_dir() && not_counted.contains(&m.ino())) {
                total += m.blocks() * 512;
            }
            if m.is_dir() && m.dev() == dev {
                stack.push(e.path());
            }
        }
    }
    (total, true, dev)
}

/// Bytes of deleted files on device `dev` that the processes `pids` still hold open.
fn held_deleted(pids: &[i32], dev: u64) -> u64 {
    let mut inodes = HashSet::new();
    let mut total = 0;
    for pid in pids {
        let Ok(rd) = std::fs::read_dir(format!("/proc/{pid}/fd")) else { continue };
        for e in rd.flatten() {
            let deleted = std::fs::read_link(e.path()).is_ok_and(|t| t.as_os_str().as_encoded_bytes().ends_with(b" (deleted)"));
            if !deleted {
                continue;
            }
            // The descriptor's own file, through its /proc link.
            if let Ok(m) = std::fs::metadata(e.path()) {
                if m.is_file() && m.dev() == dev && inodes.insert(m.ino()) {
                    total += m.blocks() * 512;
                }
            }
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn look(w: &mut DiskWatch, now: Instant, pids: impl FnOnce() -> Vec<i32>) -> Option<Over> {
        let could_be = w.could_exceed_by() > 0;
        match w.step(now, could_be, pids) {
            Step::Over(o) => Some(o),
            Step::Within | Step::Unsure => None,
        }
    }

    fn write_mib(path: &Path, mib: usize) -> std::fs::File {
        let mut f = std::fs::File::create(path).unwrap();
        let block = vec![7u8; 1 << 20];
        for _ in 0..mib {
            f.write_all(&block).unwrap();
        }
        f.sync_all().unwrap();
        f
    }

    #[test]
    fn the_reason_says_by_how_much_even_when_it_is_less_than_a_mib() {
        let over = |used| Over { used_bytes: used, limit_bytes: 64 << 20, too_many_files: false }.to_string();
        assert_eq!(over((64 << 20) + 5_000), "disk limit: the work directory used 64.0 MiB, 5 KiB over [guests] disk_mib = 64");
        assert_eq!(over(70 << 20), "disk limit: the work directory used 70.0 MiB, 6.0 MiB over [guests] disk_mib = 64");
    }

    #[test]
    fn a_guest_that_could_be_over_before_the_next_walk_is_allowed_is_unsure_until_it() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = DiskWatch::new(dir.path(), 1 << 20);
        // As if the file system had lost 4 MiB since the walk.
        w.free_last += 4 << 20;
        assert_eq!(w.could_exceed_by() >> 20, 3, "4 MiB lost, 1 MiB allowed");
        let now = Instant::now();
        w.next_walk = now + Duration::from_secs(1);
        assert_eq!(w.step(now, true, Vec::new), Step::Unsure, "held until it can be measured");
        assert_eq!(w.walks, 1);
        assert_eq!(w.step(now + Duration::from_secs(2), true, Vec::new), Step::Within, "the walk finds it within");
        assert_eq!(w.walks, 2);
        assert_eq!(w.could_exceed_by(), 0);
    }

    #[test]
    fn space_others_free_does_not_hide_the_guests_growth() {
        // On a file system of its own where there is one (tmpfs): the look spans the whole
        // write, and space that this test's neighbours (other tests, a compiler) free on a
        // shared disk meanwhile would hide the growth from it, as designed.
        let shm = Path::new("/dev/shm");
        let temp = || if shm.is_dir() { tempfile::tempdir_in(shm) } else { tempfile::tempdir() }.unwrap();
        let outside = temp();
        let others = write_mib(&outside.path().join("others"), 32);
        let dir = temp();
        let mut w = DiskWatch::new(dir.path(), 4 << 20);
        drop(write_mib(&dir.path().join("guests"), 8));
        let before = w.could_exceed_by();
        assert!(before >= 4 << 20, "8 MiB written against a 4-MiB limit: {before}");
        drop(others);
        std::fs::remove_file(outside.path().join("others")).unwrap();
        // SAFETY: sync has no preconditions (the freed blocks show in statvfs).
        unsafe { libc::sync() };
        assert!(w.could_exceed_by() >= before, "32 MiB freed elsewhere hid the guest's 8");
    }

    #[test]
    fn use_is_measured_only_when_it_could_be_over_and_counts_deleted_files_held_open() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = DiskWatch::new(dir.path(), 8 << 20);
        assert_eq!(w.walks, 1);
        // Well under the limit: nothing is found however often it is asked.
        write_mib(&dir.path().join("a"), 2);
        for _ in 0..5 {
            assert_eq!(look(&mut w, Instant::now() + Duration::from_secs(60), Vec::new), None);
        }
        assert_eq!(w.measured >> 20, 2, "the periodic walk measured it");
        // A sparse file holds nothing.
        std::fs::File::create(dir.path().join("sparse")).unwrap().set_len(1 << 40).unwrap();
        // Over: written, then deleted while held open (no walk sees it).
        let held = write_mib(&dir.path().join("hidden"), 8);
        std::fs::remove_file(dir.path().join("hidden")).unwrap();
        let me = std::process::id() as i32;
        let over = look(&mut w, Instant::now() + Duration::from_secs(60), || vec![me]).expect("over the limit");
        assert!(over.used_bytes >= 10 << 20 && over.used_bytes < 11 << 20, "{over}");
        assert!(over.to_string().contains("disk_mib = 8"), "{over}");
        assert!(w.walks >= 2);
        drop(held);
        // Not counted without its holder: 2 MiB is under the limit again.
        let before = w.walks;
        let later = Instant::now() + Duration::from_secs(3600);
        w.next_walk = later;
        assert_eq!(w.walk(&[me]), None);
        assert_eq!(w.walks, before + 1);
    }
}
