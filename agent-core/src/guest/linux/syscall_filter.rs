//! The system calls a guest may not make, as a seccomp filter installed in each process
//! Lull starts for a guest just before exec ([`super::spawn`]), so bubblewrap, the job and
//! all their children inherit it.
//!
//! Only `fallocate` is refused, with `EOPNOTSUPP` (what a file system without it answers):
//! one call could otherwise reserve gigabytes past `[guests] disk_mib` between two looks
//! of the disk guard ([`super::disk`]). Programs that preallocate fall back to writing
//! (glibc's `posix_fallocate` does so itself), and writes are what the guard's bound is
//! made for. System calls of another architecture's ABI (a 32-bit program's `int 0x80`)
//! end the process, as seccompiler's filters do; on x86-64 the x32 ABI's `fallocate` is
//! refused too.
//!
//! The filter is built with seccompiler (the rust-vmm project's, made for Firecracker's
//! jails) rather than hand-assembled BPF: it checks the architecture word first, which a
//! hand-written filter easily forgets.

use seccompiler::{BpfProgram, SeccompAction, SeccompFilter};
use std::collections::BTreeMap;

/// The x32 ABI's system call numbers on x86-64 carry this bit.
#[cfg(target_arch = "x86_64")]
const X32_SYSCALL_BIT: i64 = 0x4000_0000;

/// The guests' filter, compiled for this machine's architecture.
pub fn guest_filter() -> Result<BpfProgram, String> {
    let arch = std::env::consts::ARCH.try_into().map_err(|e| format!("seccomp: {e:?}"))?;
    let mut refused = vec![libc::SYS_fallocate];
    #[cfg(target_arch = "x86_64")]
    refused.push(libc::SYS_fallocate | X32_SYSCALL_BIT);
    let rules: BTreeMap<i64, Vec<seccompiler::SeccompRule>> = refused.into_iter().map(|nr| (nr, Vec::new())).collect();
    let filter = SeccompFilter::new(rules, SeccompAction::Allow, SeccompAction::Errno(libc::EOPNOTSUPP as u32), arch)
        .map_err(|e| format!("seccomp filter: {e}"))?;
    filter.try_into().map_err(|e: seccompiler::BackendError| format!("seccomp filter: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;
    use std::os::unix::process::CommandExt;

    #[test]
    fn a_filtered_process_cannot_preallocate_but_can_write() {
        let prog = guest_filter().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let script = "fallocate -l 8M pre; echo fallocate=$?; head -c 1048576 /dev/zero > written; echo written=$?";
        let mut cmd = std::process::Command::new("sh");
        cmd.args(["-c", script]).current_dir(dir.path());
        // SAFETY: apply_filter makes prctl and seccomp calls on a program built before the fork.
        unsafe { cmd.pre_exec(move || seccompiler::apply_filter(&prog).map_err(std::io::Error::other)) };
        let out = cmd.output().unwrap();
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(said.contains("fallocate=1") && said.contains("written=0"), "{said} {}", String::from_utf8_lossy(&out.stderr));
        assert!(String::from_utf8_lossy(&out.stderr).contains("not supported"), "{}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(std::fs::metadata(dir.path().join("pre")).map(|m| m.blocks()).unwrap_or(0), 0);
        assert_eq!(std::fs::metadata(dir.path().join("written")).unwrap().len(), 1 << 20);
        // Unfiltered, the same call works here (else this test proves nothing).
        let plain = std::process::Command::new("fallocate").args(["-l", "8M"]).arg(dir.path().join("plain")).status().unwrap();
        assert!(plain.success(), "fallocate works on this file system without the filter");
    }
}
