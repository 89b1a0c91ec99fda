//! Each guest's directory under the agent's work root ([`crate::paths::Paths::work_root`]),
//! never anywhere a job or a request names: `guests/<id>` for `lull run`, or
//! `jobs/<job>-<rank>-<lease>` that the coordinator link prepared with the task's input
//! files. Checked here before anything is made or handed over: the directory must be one
//! level below `guests/` or `jobs/` of the work root, and nothing on the way a symbolic
//! link.
//!
//! Private: the directory is 0700 (0711 when guests run as the guests' account, which
//! must pass through it to reach its work directory), its `work/` 0700 and, for a root
//! agent, the guests' account's with everything in it (the agent, root, still reads the
//! results); the output files beside `work/` are the agent's, 0600 ([`super::output`]).

use super::account::{self, GuestAccount};
use crate::guest::{GuestDir, GuestError};
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Component, Path};

/// Makes `dir` ready for a guest (see the module doc).
pub fn prepare(work_root: &Path, dir: &GuestDir, account: Option<&GuestAccount>) -> Result<(), GuestError> {
    check_place(work_root, &dir.root)?;
    let io = |what: &Path| {
        let what = what.display().to_string();
        move |source| GuestError::Io { what: format!("preparing {what}"), source }
    };
    let work = dir.work();
    for d in [&dir.root, &work, &work.join("tmp")] {
        if std::fs::symlink_metadata(d).is_ok_and(|m| !m.is_dir()) {
            return Err(GuestError::OutsideWorkRoot(format!("{} (not a directory: a symbolic link or a file)", d.display())));
        }
    }
    let mut b = std::fs::DirBuilder::new();
    b.recursive(true).mode(0o700);
    b.create(work.join("tmp")).map_err(io(&work))?;
    // The guests' account passes through `guests/` or `jobs/` and the guest's directory
    // to its work directory; nobody else lists or enters them.
    // The work root too: made owner-only under the agent's umask 077 unless it is the
    // execute directory (`Paths::create_work_root`), e.g. one named by LULL_WORK_DIR.
    let root_mode = if account.is_some() { 0o711 } else { 0o700 };
    if let Some(parent) = dir.root.parent().filter(|_| account.is_some()) {
        for p in [parent, work_root] {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(root_mode)).map_err(io(p))?;
        }
    }
    std::fs::set_permissions(&dir.root, std::fs::Permissions::from_mode(root_mode)).map_err(io(&dir.root))?;
    std::fs::set_permissions(&work, std::fs::Permissions::from_mode(0o700)).map_err(io(&work))?;
    if let Some(a) = account {
        account::hand_over(&work, a)
            .map_err(|source| GuestError::Io { what: format!("handing {} to {}", work.display(), a.name), source })?;
    }
    Ok(())
}

/// `root` must be `<work_root>/guests/<name>` or `<work_root>/jobs/<name>`, with no
/// symbolic link on the way from the work root.
fn check_place(work_root: &Path, root: &Path) -> Result<(), GuestError> {
    let refuse = || GuestError::OutsideWorkRoot(root.display().to_string());
    let abs = |p: &Path| std::path::absolute(p).map_err(|_| refuse());
    let (work_root, root) = (abs(work_root)?, abs(root)?);
    let rel = root.strip_prefix(&work_root).map_err(|_| refuse())?;
    let parts: Vec<Component> = rel.components().collect();
    let plain = parts.len() == 2 && parts.iter().all(|c| matches!(c, Component::Normal(_)));
    if !plain || !crate::retention::WORK_PARENTS.iter().any(|p| parts[0].as_os_str() == *p) {
        return Err(refuse());
    }
    let parent = work_root.join(parts[0].as_os_str());
    if std::fs::symlink_metadata(&parent).is_ok_and(|m| !m.is_dir()) {
        return Err(GuestError::OutsideWorkRoot(format!("{} (not a directory: a symbolic link or a file)", parent.display())));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_directory_of_its_own_under_the_work_root_is_made() {
        let root = tempfile::tempdir().unwrap();
        let wr = root.path();
        let dir = GuestDir::new(wr.join("guests/g1"));
        prepare(wr, &dir, None).expect("a new guest directory");
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!((mode(&dir.root), mode(&dir.work())), (0o700, 0o700));
        assert!(dir.work().join("tmp").is_dir());
        prepare(wr, &GuestDir::new(wr.join("jobs/7-0-3")), None).expect("a leased task's directory");

        let outside = tempfile::tempdir().unwrap();
        for bad in [
            outside.path().to_path_buf(),
            wr.join("guests"),
            wr.join("guests/a/b"),
            wr.join("other/g1"),
            wr.join("guests/../../etc"),
            wr.join("../x/guests/g1"),
        ] {
            let e = prepare(wr, &GuestDir::new(&bad), None).unwrap_err();
            assert!(matches!(e, GuestError::OutsideWorkRoot(_)), "{}: {e}", bad.display());
        }
        // A link planted where a directory goes leads nowhere.
        std::os::unix::fs::symlink(outside.path(), wr.join("guests/planted")).unwrap();
        let e = prepare(wr, &GuestDir::new(wr.join("guests/planted")), None).unwrap_err();
        assert!(e.to_string().contains("symbolic link"), "{e}");
        assert!(!outside.path().join("work").exists(), "nothing was made through the link");
    }
}
