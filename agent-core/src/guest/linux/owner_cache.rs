//! The owner's file cache, recorded before a guest starts and read back after an eviction
//! (seed 004 §3.3, Table 2: a flushed file cache slowed the owner's programs by up to 31 %).
//!
//! **Snapshot**: the regular files the owner's processes have open (`/proc/PID/fd`) or
//! map (`/proc/PID/maps`), each once by (device, inode), and for each the runs of its
//! pages that are in memory, from `mincore(2)` over a `PROT_NONE` mapping (nothing of the
//! file is ever read or kept: only its identity — device, inode, path — and page runs,
//! in memory, never on disk). Bounded by `[memory] cache_snapshot_files` and
//! `cache_snapshot_mib` ([`SnapshotBudget`]) and by [`SNAPSHOT_TIME_CAP`]. Skipped: files
//! the agent could not open, files not owned by the agent's user unless it is root (the
//! kernel answers `mincore` truthfully only for files the caller owns or may write; for
//! others it says every page is in memory), pseudo files (`/proc`, `/sys`, `/dev`,
//! memfds) and deleted files.
//!
//! **Never a file of the agent's own process** ([`own_files`]): POSIX record locks
//! (`fcntl`) belong to the process, and closing *any* descriptor of a file drops every
//! lock the process holds on it. Opening and closing the coordinator's or the ledger's
//! SQLite files here (reached through an owner process that has them open, or recorded
//! before and reopened by the restore) dropped SQLite's locks on them; the next `lull
//! coordinator` command then took the `-shm` file as unused, truncated it under the
//! serving `lull up`, and `lull up` died of SIGBUS (the checkpoint_jobs e2e test's
//! "Connection refused", CI of 2026-12-07).
//!
//! **Restore**: for each recorded file still there (same device and inode), the pages
//! resident before and missing now ([`missing_ranges`]) are read back with `pread` in
//! reads of [`RESTORE_READ_BYTES`] (128 KiB) into one scratch buffer, overwritten by every
//! read and never inspected, logged or kept, from a thread at the lowest best-effort I/O
//! priority ([`RestoreIo`]), checking the owner's memory pressure every 4 MiB and
//! stopping if it rose ([`restore_gate`]; a stall seen while reading is looked at again
//! after [`RESTORE_IDLE_LOOK`] with nothing read, because a page read back soon after its
//! eviction counts as a memory stall of the reader itself: the owner-cache bench's restore
//! stopped itself at its first look in 9 of 20 rounds before this second look). Reading takes the kernel's ordinary
//! read path, so the pages come back as an owner's own reads bring them (readahead may
//! read up to one window past a range's end). **How** they are read decides how fast the
//! owner reads them afterwards, because it decides the page-cache folios they land in
//! (`lull bench owner-cache`, docs/BENCHMARKS.md): reads of 4 MiB left pages the owner
//! then read ~15–20 % slower (CPU time) than pages its own 1-MiB reads had brought in —
//! on every later read, not just the first — while reads of 64–512 KiB leave pages as
//! fast as the owner's own. Through `/proc/self/pagemap` and `/proc/kpageflags` (kernel
//! 6.18, ext4): 4-MiB reads left 4.5 pages per folio on average (a sixth of the pages
//! single), 1-MiB reads 13, 512-KiB reads 25, 128-KiB reads 46 — readahead grows the
//! folio order as it ramps up, and a large read skips the ramp.
//! `LULL_RESTORE_READ_KIB` overrides the read size (benchmarks compare the two). Two ways
//! that keep the bytes out of the agent were measured worse still:
//! `posix_fadvise(WILLNEED)` (single-page folios, at most one readahead window per call;
//! the owner's reads of its pages ~1.5× slower) and `sendfile` into `/dev/null` (the
//! owner's first read of the pages it brought back 2–3× slower than reading them from
//! this VM's disk). The pages are charged to the agent's memory cgroup, which read them.
//! The time counted is the whole step.

use lull_core::guest_memory::{owner_stall_pct, MemoryRules, StallReading};
use lull_core::owner_memory::{
    missing_ranges, pages_in, resident_ranges, restore_gate, truncate_ranges, PageRange, RestoreGate, SnapshotBudget, WarmRules,
    RESTORE_IDLE_LOOK,
};
use std::collections::HashSet;
use std::fs::File;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The longest a snapshot may take (it runs before a guest starts).
pub const SNAPSHOT_TIME_CAP: Duration = Duration::from_secs(2);
/// The largest span of one file looked at (the mincore vector is a byte per page).
const MAX_SPAN: u64 = 16 << 30;
/// Bytes read back between two looks at the owner's memory pressure (4 MiB).
const BATCH_BYTES: u64 = 4 << 20;
/// The size of one read of the restore: the kernel's usual readahead window, so the pages
/// land in the page cache as an owner's own sequential reads put them (see the module doc).
pub const RESTORE_READ_BYTES: u64 = 128 << 10;

/// The restore's read size: [`RESTORE_READ_BYTES`], or `LULL_RESTORE_READ_KIB` (4..=65536
/// KiB, a multiple of 4; anything else is ignored) for benchmarks that compare sizes.
pub fn restore_read_bytes() -> u64 {
    std::env::var("LULL_RESTORE_READ_KIB")
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .filter(|k| (4..=65536).contains(k) && k.is_multiple_of(4))
        .map_or(RESTORE_READ_BYTES, |k| k << 10)
}

/// The system's page size.
pub fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if n > 0 {
        n as u64
    } else {
        4096
    }
}

/// A file mapped `PROT_NONE` for `mincore`: no page of it can be read through the mapping.
struct Probe {
    addr: *mut libc::c_void,
    len: usize,
}

impl Probe {
    fn map(file: &File, len: u64) -> std::io::Result<Self> {
        use std::os::fd::AsRawFd;
        let len = len.min(MAX_SPAN) as usize;
        if len == 0 {
            return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, "empty file"));
        }
        // SAFETY: a fresh shared PROT_NONE mapping of an open file; checked for failure,
        // unmapped in Drop, and never dereferenced (only handed to mincore).
        let addr = unsafe { libc::mmap(std::ptr::null_mut(), len, libc::PROT_NONE, libc::MAP_SHARED, file.as_raw_fd(), 0) };
        if addr == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Self { addr, len })
    }

    /// The residency of pages `[first, first + count)` (bit 0 of each byte).
    fn residency(&self, first: u64, count: u64) -> std::io::Result<Vec<u8>> {
        let ps = page_size();
        let total = (self.len as u64).div_ceil(ps);
        let first = first.min(total);
        let count = count.min(total - first);
        let mut vec = vec![0u8; count as usize];
        if count == 0 {
            return Ok(vec);
        }
        let len = ((first + count) * ps).min(self.len as u64) - first * ps;
        // SAFETY: the range lies inside our mapping and vec has a byte per page of it.
        let r = unsafe { libc::mincore(self.addr.cast::<u8>().add((first * ps) as usize).cast(), len as usize, vec.as_mut_ptr()) };
        if r != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(vec)
    }

    fn pages(&self) -> u64 {
        (self.len as u64).div_ceil(page_size())
    }
}

impl Drop for Probe {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly the mapping made in `map`.
        unsafe { libc::munmap(self.addr, self.len) };
    }
}

/// The residency of a whole file (the first 16 GiB), a byte per page: what `vmtouch`
/// shows. Used by the snapshot, the restore and the tests.
pub fn file_residency(path: &Path) -> std::io::Result<Vec<u8>> {
    let f = open_quietly(path)?;
    let len = f.metadata()?.len();
    if len == 0 {
        return Ok(Vec::new());
    }
    let p = Probe::map(&f, len)?;
    p.residency(0, p.pages())
}

/// Opens for reading without touching the access time where allowed, never following a
/// final symlink, never blocking on a FIFO.
fn open_quietly(path: &Path) -> std::io::Result<File> {
    let base = libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC;
    let open = |flags| std::fs::OpenOptions::new().read(true).custom_flags(flags).open(path);
    open(base | libc::O_NOATIME).or_else(|_| open(base))
}

/// One recorded file: identity and resident page runs, nothing of its content.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CachedFile {
    pub dev: u64,
    pub ino: u64,
    pub path: PathBuf,
    pub resident: Vec<PageRange>,
}

/// What the owner had in the file cache before a guest started.
#[derive(Clone, Debug, Default)]
pub struct CacheSnapshot {
    pub files: Vec<CachedFile>,
    /// Resident bytes recorded.
    pub bytes: u64,
    /// Files looked at but not recorded (not readable, not the owner's, pseudo files).
    pub skipped: u32,
    /// The budget or the time cap cut it short.
    pub truncated: bool,
    pub took: Duration,
}

/// A regular file an owner process has open or mapped: path and identity.
fn candidates(pid: u32, out: &mut Vec<(PathBuf, u64, u64)>) {
    if let Ok(rd) = std::fs::read_dir(format!("/proc/{pid}/fd")) {
        for e in rd.flatten() {
            let Ok(target) = std::fs::read_link(e.path()) else { continue };
            // Stat through the fd link: the very file the process has open.
            let Ok(m) = std::fs::metadata(e.path()) else { continue };
            if m.is_file() {
                out.push((target, m.dev(), m.ino()));
            }
        }
    }
    if let Ok(maps) = std::fs::read_to_string(format!("/proc/{pid}/maps")) {
        for line in maps.lines() {
            // start-end perms offset dev inode path
            let mut it = line.splitn(6, ' ');
            let (Some(_), Some(_), Some(_), Some(_), Some(ino), Some(path)) =
                (it.next(), it.next(), it.next(), it.next(), it.next(), it.next())
            else {
                continue;
            };
            let path = path.trim_start();
            let Ok(ino) = ino.parse::<u64>() else { continue };
            if ino == 0 || !path.starts_with('/') {
                continue;
            }
            if let Ok(m) = std::fs::metadata(path) {
                if m.is_file() && m.ino() == ino {
                    out.push((PathBuf::from(path), m.dev(), ino));
                }
            }
        }
    }
}

fn pseudo(path: &Path) -> bool {
    let s = path.as_os_str().as_encoded_bytes();
    [&b"/proc/"[..], b"/sys/", b"/dev/", b"/memfd:", b"/run/user/"].iter().any(|p| s.starts_with(p)) || s.ends_with(b" (deleted)")
}

/// Records which of the owner's file pages are in memory (see the module doc): over the
/// files the processes `pids` have open or mapped, within `rules`' budget.
pub fn snapshot(pids: &[u32], rules: &WarmRules) -> CacheSnapshot {
    let t0 = Instant::now();
    let mut snap = CacheSnapshot::default();
    let mut budget = SnapshotBudget::of(rules);
    if !budget.open() {
        return snap;
    }
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    let ps = page_size();
    let mut seen: HashSet<(u64, u64)> = HashSet::new();
    let own = own_files();
    let mut found = Vec::new();
    'pids: for &pid in pids {
        found.clear();
        candidates(pid, &mut found);
        for (path, dev, ino) in found.drain(..) {
            if !seen.insert((dev, ino)) {
                continue;
            }
            if !budget.open() || t0.elapsed() > SNAPSHOT_TIME_CAP {
                snap.truncated = true;
                break 'pids;
            }
            let Some(file) = look(&path, dev, ino, euid, &own) else {
                snap.skipped += 1;
                continue;
            };
            let Ok(probe) = Probe::map(&file, file.metadata().map(|m| m.len()).unwrap_or(0)) else {
                snap.skipped += 1;
                continue;
            };
            let Ok(vec) = probe.residency(0, probe.pages()) else {
                snap.skipped += 1;
                continue;
            };
            let runs = resident_ranges(&vec);
            let resident = pages_in(&runs) * ps;
            match budget.take(resident) {
                Some(0) => {}
                Some(granted) => {
                    let runs = if granted < resident {
                        snap.truncated = true;
                        truncate_ranges(&runs, granted / ps)
                    } else {
                        runs
                    };
                    snap.bytes += pages_in(&runs) * ps;
                    snap.files.push(CachedFile { dev, ino, path, resident: runs });
                }
                None => {
                    snap.truncated = true;
                    break 'pids;
                }
            }
        }
    }
    snap.took = t0.elapsed();
    snap
}

/// The files this process has open or mapped, by (device, inode): never opened by the
/// snapshot or the restore, whose closing would drop this process's locks on them (see
/// the module doc).
pub fn own_files() -> HashSet<(u64, u64)> {
    let mut found = Vec::new();
    candidates(std::process::id(), &mut found);
    found.into_iter().map(|(_, dev, ino)| (dev, ino)).collect()
}

/// Whether `path` is still the file (`dev`, `ino`) and not one of `own`, looked at
/// without opening it.
fn same_and_not_own(path: &Path, dev: u64, ino: u64, own: &HashSet<(u64, u64)>) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.dev() == dev && m.ino() == ino) && !own.contains(&(dev, ino))
}

/// Opens a candidate if it is still the same regular file, not one of this process's
/// own (`own`), and its residency can be told truthfully (owned by the agent's user, or
/// the agent is root).
fn look(path: &Path, dev: u64, ino: u64, euid: u32, own: &HashSet<(u64, u64)>) -> Option<File> {
    if pseudo(path) || !same_and_not_own(path, dev, ino, own) {
        return None;
    }
    let f = open_quietly(path).ok()?;
    let m = f.metadata().ok()?;
    (m.is_file() && m.dev() == dev && m.ino() == ino && m.len() > 0 && (euid == 0 || m.uid() == euid)).then_some(f)
}

/// What one file-cache restore did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CacheRestore {
    /// Files recorded in the snapshot, and those with pages missing.
    pub files: u32,
    pub files_missing: u32,
    /// Bytes recorded resident before the guest, missing after it, and in memory again.
    pub recorded_bytes: u64,
    pub missing_bytes: u64,
    pub restored_bytes: u64,
    pub took: Duration,
    /// Why it stopped before the end, if it did.
    pub stopped: Option<String>,
    /// Stalls seen while reading that were looked at again with the restore idle
    /// ([`PressureGate`]), and how many of those second looks stopped it.
    pub idle_looks: u32,
    pub idle_stops: u32,
}

/// The I/O priority the restore reads at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RestoreIo {
    /// Best effort, lowest level (7): behind the owner's own reads under a scheduler that
    /// weighs levels (BFQ), never starved.
    Low,
    /// The idle class: the disk only when nobody else wants it. On a busy disk under
    /// mq-deadline it waits for the kernel's aging (seconds per batch): `LULL_RESTORE_IO=idle`.
    Idle,
}

impl RestoreIo {
    /// `LULL_RESTORE_IO=idle` chooses the idle class; anything else the low level.
    pub fn from_env() -> Self {
        match std::env::var("LULL_RESTORE_IO").as_deref() {
            Ok("idle") => Self::Idle,
            _ => Self::Low,
        }
    }
}

/// Sets the calling thread's I/O priority. False where the kernel refuses.
pub fn io_priority_for_this_thread(io: RestoreIo) -> bool {
    const IOPRIO_CLASS_BE: libc::c_long = 2;
    const IOPRIO_CLASS_IDLE: libc::c_long = 3;
    const IOPRIO_CLASS_SHIFT: libc::c_long = 13;
    const IOPRIO_WHO_PROCESS: libc::c_long = 1;
    let value = match io {
        RestoreIo::Low => (IOPRIO_CLASS_BE << IOPRIO_CLASS_SHIFT) | 7,
        RestoreIo::Idle => IOPRIO_CLASS_IDLE << IOPRIO_CLASS_SHIFT,
    };
    // SAFETY: ioprio_set with "who" 0 changes only the calling thread; no memory involved.
    unsafe { libc::syscall(libc::SYS_ioprio_set, IOPRIO_WHO_PROCESS, 0 as libc::c_long, value) == 0 }
}

/// The owner's memory pressure as the restore sees it: whether it may go on, from
/// `/proc/meminfo` and the system's memory stall (guests are gone by now), evaluated at
/// most every 100 ms; a stall seen while reading is looked at again with the restore idle
/// ([`RestoreGate::LookAgainIdle`]).
pub struct PressureGate {
    rules: MemoryRules,
    last: Option<StallReading>,
    ok: bool,
    /// Second looks taken, and how many of them stopped the restore.
    pub idle_looks: u32,
    pub idle_stops: u32,
}

impl PressureGate {
    pub fn new(rules: MemoryRules) -> Self {
        Self { rules, last: None, ok: true, idle_looks: 0, idle_stops: 0 }
    }

    fn reading() -> StallReading {
        StallReading { at: crate::clock::mono_now(), system_us: super::memory::system_stall_us().unwrap_or(0), guests_us: 0 }
    }

    /// Whether the restore may go on now.
    pub fn may_continue(&mut self) -> bool {
        let at = crate::clock::mono_now();
        if self.last.is_some_and(|l| at.since(l.at) < Duration::from_millis(100)) {
            return self.ok;
        }
        let cur = Self::reading();
        let pct = self.last.map_or(0.0, |prev| owner_stall_pct(prev, cur));
        self.last = Some(cur);
        let mut gate = restore_gate(&self.rules, super::memory::meminfo().available, pct, false);
        if gate == RestoreGate::LookAgainIdle {
            self.idle_looks += 1;
            std::thread::sleep(RESTORE_IDLE_LOOK);
            let idle = Self::reading();
            gate = restore_gate(&self.rules, super::memory::meminfo().available, owner_stall_pct(cur, idle), true);
            self.last = Some(idle);
            self.idle_stops += u32::from(gate == RestoreGate::Stop);
        }
        self.ok = gate == RestoreGate::Continue;
        self.ok
    }
}

/// Reads back the pages of `snap` that are missing now (see the module doc) in reads of
/// `read_bytes` ([`restore_read_bytes`]), asking `may_continue` before each 4 MiB; gives
/// up after `timeout`.
pub fn restore(snap: &CacheSnapshot, read_bytes: u64, mut may_continue: impl FnMut() -> bool, timeout: Duration) -> CacheRestore {
    let t0 = Instant::now();
    let ps = page_size();
    let read_bytes = read_bytes.max(ps);
    let mut r = CacheRestore { files: snap.files.len() as u32, recorded_bytes: snap.bytes, ..Default::default() };
    // One scratch buffer, overwritten by every read and never looked at: the bytes pass
    // through and are gone (nothing of them is inspected, logged or kept).
    let mut scratch = vec![0u8; read_bytes as usize];
    let mut since_look = BATCH_BYTES;
    // This process may have opened some of them since the snapshot.
    let own = own_files();
    'files: for cf in &snap.files {
        if !same_and_not_own(&cf.path, cf.dev, cf.ino, &own) {
            continue; // replaced since, or now one of this process's files
        }
        let Ok(f) = open_quietly(&cf.path) else { continue };
        let Ok(m) = f.metadata() else { continue };
        if m.dev() != cf.dev || m.ino() != cf.ino {
            continue; // replaced since: not the pages the owner had
        }
        let Ok(probe) = Probe::map(&f, m.len()) else { continue };
        let Ok(now) = probe.residency(0, probe.pages()) else { continue };
        let missing = missing_ranges(&cf.resident, &now);
        if missing.is_empty() {
            continue;
        }
        r.files_missing += 1;
        r.missing_bytes += pages_in(&missing) * ps;
        for &(start, len) in &missing {
            let (mut off, end) = (start * ps, ((start + len) * ps).min(m.len()));
            while off < end {
                if since_look >= BATCH_BYTES {
                    since_look = 0;
                    if !may_continue() {
                        r.stopped = Some("the owner's memory pressure rose".into());
                        break 'files;
                    }
                    if t0.elapsed() > timeout {
                        r.stopped = Some(format!("timed out after {} s", timeout.as_secs()));
                        break 'files;
                    }
                }
                // The kernel's ordinary read path, as the owner's own reads take it.
                let n = (end - off).min(read_bytes) as usize;
                match std::os::unix::fs::FileExt::read_at(&f, &mut scratch[..n], off) {
                    Ok(0) | Err(_) => break,
                    Ok(got) => {
                        off += got as u64;
                        since_look += got as u64;
                    }
                }
            }
        }
        if let Ok(after) = probe.residency(0, probe.pages()) {
            let back: u64 = missing
                .iter()
                .map(|&(s, l)| (s..s + l).filter(|&p| after.get(p as usize).is_some_and(|b| b & 1 != 0)).count() as u64)
                .sum();
            r.restored_bytes += back * ps;
        }
    }
    r.took = t0.elapsed();
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use lull_core::guest_memory::MIB;
    use std::io::Write;

    /// One at a time: each drops pages of its files, and would see the other's owners.
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

    /// An "owner": a process holding `files` open (fds 3, 4, …) until dropped. The test
    /// process itself cannot play the owner, as the snapshot skips its own files.
    struct Owner(std::process::Child);

    impl Owner {
        fn holding(files: &[&Path]) -> Self {
            let redirects: String = (0..files.len()).map(|i| format!("{}<\"${}\" ", i + 3, i + 1)).collect();
            let child = std::process::Command::new("sh")
                .arg("-c")
                .arg(format!("exec {redirects}; exec sleep 120"))
                .arg("sh")
                .args(files)
                .spawn()
                .expect("spawn the owner");
            let last = format!("/proc/{}/fd/{}", child.id(), files.len() + 2);
            let t0 = Instant::now();
            // Until the sleep runs with the files open (its exec replaced the shell's).
            while !(std::fs::read_link(&last).is_ok_and(|t| t == files[files.len() - 1])
                && std::fs::read_to_string(format!("/proc/{}/comm", child.id())).is_ok_and(|c| c.trim() == "sleep"))
            {
                assert!(t0.elapsed() < Duration::from_secs(10), "the owner process never opened its files");
                std::thread::sleep(Duration::from_millis(10));
            }
            Self(child)
        }

        fn pid(&self) -> u32 {
            self.0.id()
        }
    }

    impl Drop for Owner {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }

    /// Whether this process holds a POSIX record lock on the file `ino` (`/proc/locks`).
    fn holds_posix_lock(ino: u64) -> bool {
        let me = std::process::id().to_string();
        std::fs::read_to_string("/proc/locks").expect("/proc/locks").lines().any(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.len() >= 6 && f[1] == "POSIX" && f[4] == me && f[5].rsplit(':').next() == Some(ino.to_string().as_str())
        })
    }

    fn warm(max_bytes: u64, max_files: usize) -> WarmRules {
        WarmRules { protect: false, protect_bytes: None, cache_max_bytes: max_bytes, cache_max_files: max_files }
    }

    /// A file of `mib` MiB written and synced (so DONTNEED can drop its pages).
    fn data_file(dir: &Path, name: &str, mib: usize) -> PathBuf {
        let p = dir.join(name);
        let mut f = File::create(&p).expect("create");
        let chunk = vec![0x5au8; MIB as usize];
        for _ in 0..mib {
            f.write_all(&chunk).expect("write");
        }
        f.sync_all().expect("sync");
        p
    }

    fn drop_pages(path: &Path) {
        let f = File::open(path).expect("open");
        rustix::fs::fadvise(&f, 0, None, rustix::fs::Advice::DontNeed).expect("fadvise DONTNEED");
    }

    fn read_all(path: &Path) {
        let _ = std::fs::read(path).expect("read");
    }

    fn resident(path: &Path) -> u64 {
        file_residency(path).expect("mincore").iter().filter(|b| *b & 1 != 0).count() as u64 * page_size()
    }

    #[test]
    fn a_snapshot_records_what_the_owner_has_open_and_the_restore_brings_dropped_pages_back() {
        let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
        let dir = tempfile::tempdir_in(std::env::temp_dir()).expect("temp dir");
        let (a, b) = (data_file(dir.path(), "a", 8), data_file(dir.path(), "b", 32));
        // The owner holds both files open; a is in memory, b's first 2 MiB.
        let owner = Owner::holding(&[&a, &b]);
        read_all(&a);
        drop_pages(&b);
        {
            // No readahead past what is read: exactly half of b comes in.
            let fb = File::open(&b).expect("open b");
            rustix::fs::fadvise(&fb, 0, None, rustix::fs::Advice::Random).expect("fadvise RANDOM");
            let mut half = vec![0u8; 2 * MIB as usize];
            std::os::unix::fs::FileExt::read_exact_at(&fb, &mut half, 0).expect("read half of b");
        }
        let snap = snapshot(&[owner.pid()], &warm(1 << 30, 1000));
        let rec = |p: &Path| snap.files.iter().find(|f| f.path == p).map(|f| pages_in(&f.resident) * page_size());
        assert_eq!(rec(&a), Some(8 * MIB), "{snap:?}");
        assert!(rec(&b).is_some_and(|n| (2 * MIB..=3 * MIB).contains(&n)), "b: {:?}", rec(&b));
        // The guest pushes them out; the restore reads them back.
        drop_pages(&a);
        drop_pages(&b);
        assert!(resident(&a) < MIB, "DONTNEED dropped a");
        let r = restore(&snap, RESTORE_READ_BYTES, || true, Duration::from_secs(30));
        assert!(r.files_missing >= 2 && r.missing_bytes >= 10 * MIB, "{r:?}");
        assert_eq!(resident(&a), 8 * MIB, "{r:?}");
        // What was resident comes back, and little more (readahead may run one window,
        // at most 8 MiB here, past a range's end).
        assert!(resident(&b) >= 2 * MIB && resident(&b) <= 12 * MIB, "only what was resident before comes back: {}", resident(&b));
        assert!(r.restored_bytes >= 10 * MIB && r.stopped.is_none(), "{r:?}");
        // A restore told to stop reads nothing back.
        drop_pages(&a);
        let r = restore(&snap, RESTORE_READ_BYTES, || false, Duration::from_secs(30));
        assert_eq!(r.stopped.as_deref(), Some("the owner's memory pressure rose"));
        assert!(resident(&a) < MIB);
    }

    #[test]
    fn the_snapshot_keeps_to_its_budget_and_skips_replaced_files() {
        let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
        let dir = tempfile::tempdir_in(std::env::temp_dir()).expect("temp dir");
        let a = data_file(dir.path(), "a", 4);
        let owner = Owner::holding(&[&a]);
        read_all(&a);
        let snap = snapshot(&[owner.pid()], &warm(MIB, 1000));
        assert!(snap.bytes <= MIB && snap.truncated, "{} bytes", snap.bytes);
        let none = snapshot(&[owner.pid()], &warm(0, 1000));
        assert!(none.files.is_empty());
        // Replaced by another file of the same name: not restored.
        let snap = snapshot(&[owner.pid()], &warm(1 << 30, 1000));
        assert!(snap.files.iter().any(|f| f.path == a));
        std::fs::remove_file(&a).expect("rm");
        let a2 = data_file(dir.path(), "a", 4);
        drop_pages(&a2);
        let r = restore(&snap, RESTORE_READ_BYTES, || true, Duration::from_secs(10));
        assert_eq!(resident(&a2), 0, "{r:?}");
    }

    /// A file this process holds a POSIX lock on (as SQLite holds its database's) is
    /// neither recorded by the snapshot, though an owner process has it open, nor opened
    /// by a restore that has it recorded: the lock stays. Before the fix both opened and
    /// closed it, which dropped the lock.
    #[test]
    fn files_this_process_holds_are_never_opened_so_its_locks_stay() {
        use std::os::fd::AsRawFd;
        let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
        let dir = tempfile::tempdir_in(std::env::temp_dir()).expect("temp dir");
        let db = data_file(dir.path(), "db", 1);
        let held = std::fs::OpenOptions::new().read(true).write(true).open(&db).expect("open db");
        // SAFETY: a zeroed flock with its fields set, passed to fcntl on our open fd.
        let locked = unsafe {
            let mut fl: libc::flock = std::mem::zeroed();
            fl.l_type = libc::F_RDLCK as libc::c_short;
            fl.l_whence = libc::SEEK_SET as libc::c_short;
            libc::fcntl(held.as_raw_fd(), libc::F_SETLK, &fl)
        };
        assert_eq!(locked, 0, "fcntl F_SETLK: {}", std::io::Error::last_os_error());
        let ino = held.metadata().expect("stat").ino();
        assert!(holds_posix_lock(ino), "the lock shows in /proc/locks");
        // Through `held` only: opening and closing the file here would drop the lock too.
        let mut whole = Vec::new();
        std::io::Read::read_to_end(&mut &held, &mut whole).expect("read db");

        let owner = Owner::holding(&[&db]);
        let snap = snapshot(&[owner.pid()], &warm(1 << 30, 1000));
        assert!(holds_posix_lock(ino), "the snapshot dropped this process's lock on a file it holds");
        assert!(!snap.files.iter().any(|f| f.ino == ino), "a file of this process was recorded: {snap:?}");
        assert!(snap.skipped >= 1, "{snap:?}");

        // Recorded earlier (say, before this process opened it): the restore leaves it.
        let m = held.metadata().expect("stat");
        let recorded = CacheSnapshot {
            files: vec![CachedFile { dev: m.dev(), ino, path: db.clone(), resident: vec![(0, 256)] }],
            bytes: MIB,
            ..Default::default()
        };
        rustix::fs::fadvise(&held, 0, None, rustix::fs::Advice::DontNeed).expect("fadvise DONTNEED");
        let r = restore(&recorded, RESTORE_READ_BYTES, || true, Duration::from_secs(10));
        assert!(holds_posix_lock(ino), "the restore dropped this process's lock: {r:?}");
        assert_eq!((r.files_missing, r.restored_bytes), (0, 0), "{r:?}");
        drop(held);
    }
}
