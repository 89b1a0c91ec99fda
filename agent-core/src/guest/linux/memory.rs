//! Memory protection helpers: `/proc/meminfo`, system memory pressure (PSI), and the
//! restore step that brings the owner's swapped-out pages back after an eviction.
//!
//! Restore: for each of the owner's processes (same uid as the agent, or every process
//! when run as root) that has pages in swap, the swapped ranges are found in
//! `/proc/PID/smaps` and handed to `process_madvise(MADV_WILLNEED)` through a pidfd, which
//! starts swap-in readahead for all of them at once (into the swap cache; it needs
//! CAP_SYS_NICE, or is skipped). Then the ranges are read through `/proc/PID/mem`, which
//! maps the pages back into the owner's page tables (ptrace-read rights over the owner's
//! own processes: same uid, Yama scope 0, or CAP_SYS_PTRACE), so the owner's next touch
//! neither waits for the disk nor faults. The time counted is the whole step; the owner's
//! `VmSwap` before and after says how much came back.

use std::io::{Read, Seek, SeekFrom};
use std::path::Path;
use std::time::{Duration, Instant};

/// A few fields of `/proc/meminfo`, bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemInfo {
    pub total: u64,
    pub available: u64,
    pub swap_total: u64,
    pub swap_free: u64,
}

/// Reads `/proc/meminfo`.
pub fn meminfo() -> MemInfo {
    let text = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let mut m = MemInfo::default();
    for line in text.lines() {
        let mut it = line.split_whitespace();
        let (Some(k), Some(v)) = (it.next(), it.next().and_then(|v| v.parse::<u64>().ok())) else { continue };
        let v = v * 1024;
        match k {
            "MemTotal:" => m.total = v,
            "MemAvailable:" => m.available = v,
            "SwapTotal:" => m.swap_total = v,
            "SwapFree:" => m.swap_free = v,
            _ => {}
        }
    }
    m
}

/// System-wide "some" memory stall time, µs (None without PSI).
pub fn system_stall_us() -> Option<u64> {
    super::cgroup::psi_some_total(Path::new("/proc/pressure/memory"))
}

/// What one restore did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Restore {
    pub processes: u32,
    /// Owner bytes in swap before and after.
    pub swapped_before: u64,
    pub swapped_after: u64,
    pub took: Duration,
    /// Ranges advised through process_madvise / read through /proc/PID/mem.
    pub advised: u32,
    pub read: u32,
}

fn vm_swap_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("VmSwap:")).and_then(|l| l.split_whitespace().nth(1)?.parse().ok()))
        .unwrap_or(0)
}

/// The owner's processes: the agent's user's (every process's when it is root), not the
/// agent itself, none inside the guests' cgroups (`skip_cgroup`).
pub fn owner_pids(skip_cgroup: &str) -> Vec<u32> {
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    let me = std::process::id();
    let Ok(dir) = std::fs::read_dir("/proc") else { return Vec::new() };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| pid != me)
        .filter(|&pid| {
            use std::os::unix::fs::MetadataExt;
            uid == 0 || std::fs::metadata(format!("/proc/{pid}")).is_ok_and(|m| m.uid() == uid)
        })
        .filter(|&pid| {
            skip_cgroup.is_empty() || !std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap_or_default().contains(skip_cgroup)
        })
        .collect()
}

/// Swapped ranges (start, len) of a process, from smaps.
fn swapped_ranges(pid: u32) -> Vec<(u64, u64)> {
    let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/smaps")) else { return Vec::new() };
    let mut out = Vec::new();
    let mut cur: Option<(u64, u64)> = None;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("Swap:") {
            let kib: u64 = rest.split_whitespace().next().and_then(|v| v.parse().ok()).unwrap_or(0);
            if kib > 0 {
                out.extend(cur);
            }
        } else if let Some((range, _)) = line.split_once(' ') {
            if let Some((a, b)) = range.split_once('-') {
                if let (Ok(a), Ok(b)) = (u64::from_str_radix(a, 16), u64::from_str_radix(b, 16)) {
                    cur = Some((a, b - a));
                }
            }
        }
    }
    out
}

/// Total owner bytes in swap (processes outside `skip_cgroup`).
pub fn owner_swapped(skip_cgroup: &str) -> u64 {
    owner_pids(skip_cgroup).into_iter().map(vm_swap_kib).sum::<u64>() * 1024
}

fn madvise_willneed(pid: u32, ranges: &[(u64, u64)]) -> std::io::Result<()> {
    // SAFETY: pidfd_open and process_madvise with a valid iovec array; the fd is closed.
    unsafe {
        let fd = libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0u32) as i32;
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let iov: Vec<libc::iovec> =
            ranges.iter().map(|&(a, l)| libc::iovec { iov_base: a as *mut libc::c_void, iov_len: l as usize }).collect();
        let mut result = Ok(());
        for chunk in iov.chunks(512) {
            let r = libc::syscall(libc::SYS_process_madvise, fd, chunk.as_ptr(), chunk.len(), libc::MADV_WILLNEED, 0u32);
            if r < 0 {
                result = Err(std::io::Error::last_os_error());
                break;
            }
        }
        libc::close(fd);
        result
    }
}

fn read_through(pid: u32, ranges: &[(u64, u64)]) -> std::io::Result<()> {
    let mut f = std::fs::File::open(format!("/proc/{pid}/mem"))?;
    let mut buf = vec![0u8; 1 << 20];
    for &(a, len) in ranges {
        let mut off = 0;
        while off < len {
            let n = (len - off).min(buf.len() as u64) as usize;
            f.seek(SeekFrom::Start(a + off))?;
            if f.read(&mut buf[..n]).unwrap_or(0) == 0 {
                break;
            }
            off += n as u64;
        }
    }
    Ok(())
}

/// Brings the owner's swapped pages back (see the module doc). `skip_cgroup` is a path
/// fragment naming the guests' cgroups, whose processes are not the owner's.
pub fn restore_owner(skip_cgroup: &str, timeout: Duration) -> Restore {
    let t0 = Instant::now();
    let pids = owner_pids(skip_cgroup);
    let mut r = Restore::default();
    let swapped: Vec<(u32, u64)> = pids.iter().map(|&p| (p, vm_swap_kib(p))).filter(|&(_, k)| k > 0).collect();
    r.swapped_before = swapped.iter().map(|&(_, k)| k * 1024).sum();
    if r.swapped_before == 0 {
        return r;
    }
    // First WILLNEED on every range of every process: the kernel starts swap-in
    // readahead for all of them at once (into the swap cache).
    let ranges: Vec<(u32, Vec<(u64, u64)>)> = swapped.iter().map(|&(p, _)| (p, swapped_ranges(p))).filter(|(_, r)| !r.is_empty()).collect();
    for (pid, rs) in &ranges {
        r.processes += 1;
        if madvise_willneed(*pid, rs).is_ok() {
            r.advised += rs.len() as u32;
        }
    }
    // Then map the pages back into the owner's page tables by reading them through
    // /proc/PID/mem (mostly swap-cache hits by now), so the owner's next touch does not fault.
    for (pid, rs) in &ranges {
        if read_through(*pid, rs).is_ok() {
            r.read += rs.len() as u32;
        }
    }
    r.took = t0.elapsed();
    r.swapped_after = swapped.iter().map(|&(p, _)| vm_swap_kib(p)).sum::<u64>() * 1024;
    if r.swapped_after > 0 && r.read == 0 {
        // WILLNEED only: wait until the readahead has settled.
        let (mut last, mut progress_at) = (r.swapped_after, Instant::now());
        while t0.elapsed() < timeout && progress_at.elapsed() < Duration::from_millis(100) {
            std::thread::sleep(Duration::from_millis(2));
            let now: u64 = swapped.iter().map(|&(p, _)| vm_swap_kib(p)).sum::<u64>() * 1024;
            if now < last {
                (last, progress_at) = (now, Instant::now());
            }
        }
        r.swapped_after = last;
    }
    r
}
