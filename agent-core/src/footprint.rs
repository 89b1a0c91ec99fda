//! The agent's own memory footprint after start-up (Linux).
//!
//! Start-up (argument parsing, config, opening and migrating the ledger, the first
//! sensor readings, choosing input backends) runs much more of the binary than the
//! once-a-second loop does, and with the kernel's fault-around every page touched maps
//! its 64 KiB neighbourhood. Those pages stay mapped, and counted in the agent's RSS,
//! for the life of the process. [`release_startup_pages`] asks the kernel to unmap the
//! clean, read-only, file-backed pages once start-up is over (`MADV_DONTNEED`): they stay
//! in the page cache, shared and reclaimable, and whatever the loop runs faults straight
//! back in from there (no disk read, no change in behaviour). Mappings with any private
//! (copy-on-write) page, such as relocated read-only data, are left alone, as is every
//! writable or anonymous mapping. Then `malloc_trim` returns free heap to the OS.
//!
//! The choice of what to release is [`releasable`], a pure function of `/proc/self/smaps`.

use std::ops::Range;

/// A mapping that may be released: its address range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Releasable {
    pub range: Range<usize>,
    pub rss_kib: u64,
}

/// What [`release_startup_pages`] did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Released {
    pub mappings: usize,
    pub kib: u64,
}

/// The mappings of an smaps text that hold only clean file pages: file-backed (a path,
/// not `[heap]`/`[vdso]`/anonymous), not writable, no private `Anonymous` page (a
/// copy-on-write page would revert to the file's contents), and something resident.
pub fn releasable(smaps: &str) -> Vec<Releasable> {
    struct Cur {
        range: Range<usize>,
        ok: bool,
        rss: u64,
        anon: u64,
    }
    let mut out = Vec::new();
    let mut cur: Option<Cur> = None;
    let flush = |c: Option<Cur>, out: &mut Vec<Releasable>| {
        if let Some(c) = c.filter(|c| c.ok && c.anon == 0 && c.rss > 0) {
            out.push(Releasable { range: c.range, rss_kib: c.rss });
        }
    };
    for line in smaps.lines() {
        let mut f = line.split_whitespace();
        let first = f.next().unwrap_or("");
        if let Some((a, b)) = first.split_once('-').filter(|(a, _)| !a.ends_with(':')) {
            if let (Ok(a), Ok(b)) = (usize::from_str_radix(a, 16), usize::from_str_radix(b, 16)) {
                flush(cur.take(), &mut out);
                let perms = f.next().unwrap_or("");
                let path = f.nth(3).unwrap_or("");
                let ok = perms.starts_with('r') && perms.as_bytes().get(1) == Some(&b'-') && perms.ends_with('p') && path.starts_with('/');
                cur = Some(Cur { range: a..b, ok, rss: 0, anon: 0 });
                continue;
            }
        }
        if let Some(c) = cur.as_mut() {
            let kib = || f.clone().next().and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
            match first {
                "Rss:" => c.rss = kib(),
                "Anonymous:" => c.anon = kib(),
                _ => {}
            }
        }
    }
    flush(cur, &mut out);
    out
}

/// Unmaps this process's clean read-only file pages (see the module doc) and trims the
/// heap. Returns what was released; an error only if smaps cannot be read.
pub fn release_startup_pages() -> std::io::Result<Released> {
    let smaps = std::fs::read_to_string("/proc/self/smaps")?;
    let mut done = Released::default();
    for r in releasable(&smaps) {
        // SAFETY: the range is a whole mapping of this process, read-only, file-backed
        // and without private pages, as smaps listed it a moment ago: dropping its pages
        // only makes the next access fault them in again from the page cache, with the
        // same contents. No Rust object lives in such a mapping's writable state.
        if unsafe { crate::sys::memory::drop_pages(r.range.clone()) } {
            done.mappings += 1;
            done.kib += r.rss_kib;
        }
    }
    crate::sys::memory::trim_heap();
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMAPS: &str = "\
55d0c0000000-55d0c04c8000 r--p 00000000 08:01 1234 /usr/bin/lull
Size:               4900 kB
Rss:                1664 kB
Anonymous:             0 kB
55d0c04c8000-55d0c12a7000 r-xp 004c8000 08:01 1234 /usr/bin/lull
Size:              14208 kB
Rss:                8764 kB
Anonymous:             0 kB
55d0c12a7000-55d0c1315000 r--p 012a7000 08:01 1234 /usr/bin/lull
Size:                444 kB
Rss:                 444 kB
Anonymous:           444 kB
55d0c1315000-55d0c131c000 rw-p 01315000 08:01 1234 /usr/bin/lull
Rss:                  28 kB
Anonymous:            28 kB
55d0c2000000-55d0c2063000 rw-p 00000000 00:00 0    [heap]
Rss:                 364 kB
Anonymous:           364 kB
7f0000000000-7f0000001000 r--s 00000000 00:05 99   /tmp/x/ledger.db-shm
Rss:                   4 kB
Anonymous:             0 kB
7f0000100000-7f0000200000 r-xp 00000000 08:01 77   /usr/lib/x86_64-linux-gnu/libc.so.6
Rss:                1000 kB
Anonymous:             0 kB
7f0000300000-7f0000301000 r--p 00000000 08:01 78   /usr/lib/libunused.so
Rss:                   0 kB
Anonymous:             0 kB
7ffd00000000-7ffd00002000 r-xp 00000000 00:00 0    [vdso]
Rss:                   4 kB
Anonymous:             0 kB
";

    #[test]
    fn only_clean_read_only_private_file_mappings_are_released() {
        let got = releasable(SMAPS);
        let starts: Vec<usize> = got.iter().map(|r| r.range.start).collect();
        // The binary's headers/rodata and text, and libc's text; not the relocated
        // read-only data (private pages), .data, the heap, a shared mapping, an unmapped
        // library or the vDSO.
        assert_eq!(starts, vec![0x55d0c0000000, 0x55d0c04c8000, 0x7f0000100000]);
        assert_eq!(got[1].range.end, 0x55d0c12a7000);
        assert_eq!(got.iter().map(|r| r.rss_kib).sum::<u64>(), 1664 + 8764 + 1000);
    }

    #[test]
    fn garbage_releases_nothing() {
        assert!(releasable("").is_empty());
        assert!(releasable("not smaps at all\nRss: 12 kB\n").is_empty());
    }

    #[test]
    fn releasing_keeps_the_process_working_and_lowers_file_rss() {
        if !crate::sys::LINUX {
            return;
        }
        fn rss_file() -> u64 {
            let s = std::fs::read_to_string("/proc/self/status").unwrap();
            s.lines().find_map(|l| l.strip_prefix("RssFile:")).and_then(|v| v.split_whitespace().next()?.parse().ok()).unwrap()
        }
        let before = rss_file();
        let done = release_startup_pages().unwrap();
        assert!(done.mappings > 0 && done.kib > 0, "{done:?}");
        // Code and read-only data fault back in: the process keeps working.
        let v: Vec<String> = (0..1000).map(|i| format!("{i:x}")).collect();
        assert_eq!(v[255], "ff");
        assert!(rss_file() < before, "RssFile {before} kB did not go down");
    }
}
