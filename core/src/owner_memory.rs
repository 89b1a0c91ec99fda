//! The owner's memory kept warm, as pure decisions (seed 000 §4: priority page pools,
//! "when the local job runs out of pages, it reclaims them from the foreign job prior to
//! paging out any of its pages"; seed 004 §3.3 / Table 2: a flushed file cache slowed the
//! owner's programs by up to 31 %).
//!
//! Two parts:
//! - **Protection**: how much of the owner's memory the kernel is asked to keep while
//!   guests run ([`protection_for`]: fixed, or the owner's recent working set plus
//!   headroom), which of the owner's session cgroups carries it ([`session_candidates`]
//!   on cgroup v1; on v2 [`protection_cover`], the cgroups the owner's programs run in,
//!   and [`plan_protection`]: `memory.low` only where it can take effect
//!   (`low_bound`), else `memory.high` on the guests sized from the owner's working
//!   set), and when a value already written is worth rewriting ([`protection_update`]).
//! - **File cache**: which of the owner's file pages were resident before a guest started
//!   (run-length [`resident_ranges`] of a `mincore` vector), within a [`SnapshotBudget`];
//!   which of them a guest pushed out ([`missing_ranges`]); and whether reading them back
//!   should go on while the owner's memory pressure is what it is ([`restore_gate`]).
//!
//! The Linux guest runtime reads cgroups, `/proc` and `mincore`, hands the readings in and
//! writes what comes back.

use crate::guest_memory::{MemoryRules, MIB};
use std::time::Duration;

/// The owner's memory settings, from `[memory]`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WarmRules {
    /// Protect the owner's session at all (`memory.protect_owner`).
    pub protect: bool,
    /// A fixed protection, bytes; `None`: the owner's recent working set plus
    /// `PROTECT_HEADROOM` (`memory.owner_protect_mib = 0`).
    pub protect_bytes: Option<u64>,
    /// Most bytes of the owner's resident file pages recorded before a guest starts
    /// (`memory.cache_snapshot_mib`; 0: no snapshot, no file-cache restore).
    pub cache_max_bytes: u64,
    /// Most files recorded (`memory.cache_snapshot_files`).
    pub cache_max_files: usize,
}

/// Automatic protection covers the working set and this fraction more (it grows while
/// guests run; the headroom keeps a growing owner inside it between readings).
pub(crate) const PROTECT_HEADROOM: f64 = 0.25;

/// The smallest protection worth writing: below it the kernel's own reserves dominate.
pub(crate) const MIN_PROTECT_BYTES: u64 = 16 * MIB;

/// The owner's working set from its cgroup's counters: what it uses minus the file pages
/// the kernel itself considers inactive (the kubelet's and systemd-oomd's measure).
pub fn working_set(usage: u64, inactive_file: u64) -> u64 {
    usage.saturating_sub(inactive_file)
}

/// The protection for the owner's session: the fixed value, or the recent working set
/// peak plus `PROTECT_HEADROOM`; never more than `total` less what the guests are
/// admitted with at least (`crate::guest_memory::MIN_GUEST_BYTES`), never less than
/// `MIN_PROTECT_BYTES`. `None` when protection is off.
pub fn protection_for(rules: &WarmRules, working_set_peak: u64, total: u64) -> Option<u64> {
    if !rules.protect {
        return None;
    }
    let want = rules.protect_bytes.unwrap_or((working_set_peak as f64 * (1.0 + PROTECT_HEADROOM)) as u64);
    let ceiling = total.saturating_sub(crate::guest_memory::MIN_GUEST_BYTES).max(MIN_PROTECT_BYTES);
    Some(want.clamp(MIN_PROTECT_BYTES, ceiling))
}

/// `Some(want)` when a protection already written (`current`) should become `want`:
/// always when nothing is written yet or it must grow by more than an eighth, and when
/// it may shrink by more than a quarter (no churn on small moves; a protection a little
/// too large costs the guests, not the owner).
pub fn protection_update(want: u64, current: Option<u64>) -> Option<u64> {
    match current {
        None => Some(want),
        Some(cur) if want > cur.saturating_add(cur / 8) || want < cur.saturating_sub(cur / 4) => Some(want),
        Some(_) => None,
    }
}

/// The cgroups (paths inside one hierarchy, `/user.slice/user-1000.slice/…`) that may
/// carry the owner's protection, best first, from the cgroups the owner's processes are
/// in: every ancestor from the owner's `user-UID.slice` down, except those holding the
/// guests (`guests`: the guests' cgroup path in the same hierarchy), ordered by how many
/// owner processes each holds (most first), then by depth (shallowest first). Paths
/// outside a `user-UID.slice` (system services, containers) are no owner session and
/// give nothing. The driver takes the first it can write.
pub fn session_candidates(owner_cgroups: &[String], guests: &str) -> Vec<String> {
    let holds = |outer: &str, inner: &str| inner == outer || inner.starts_with(&format!("{outer}/"));
    let mut out: Vec<(String, usize)> = Vec::new();
    for path in owner_cgroups {
        let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
        let Some(top) = parts.iter().position(|p| is_user_slice(p)) else { continue };
        for depth in top..parts.len() {
            let c = format!("/{}", parts[..=depth].join("/"));
            if !guests.is_empty() && holds(&c, guests) {
                continue;
            }
            if !out.iter().any(|(p, _)| p == &c) {
                let n = owner_cgroups.iter().filter(|o| holds(&c, o)).count();
                out.push((c, n));
            }
        }
    }
    out.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.matches('/').count().cmp(&b.0.matches('/').count())).then(a.0.cmp(&b.0)));
    out.into_iter().map(|(p, _)| p).collect()
}

/// The cgroups the owner's programs run in, as protection sees them (cgroup v2): for each
/// owner cgroup (paths inside one hierarchy), the shallowest cgroup from its
/// `user-UID.slice` down that does not hold the guests (`guests`: their cgroup, or the
/// delegated scope they are in). A root agent's guests are elsewhere, so this is the
/// owner's `user-UID.slice`; an owner's agent's guests are in a scope of the owner's user
/// manager, so these are the login session's scope and the user manager's slices
/// (`app.slice`, `session.slice`, …). Paths outside a `user-UID.slice` or inside the
/// guests' give nothing.
/// Sorted, each once.
pub fn protection_cover(owner_cgroups: &[String], guests: &str) -> Vec<String> {
    let holds = |outer: &str, inner: &str| inner == outer || inner.starts_with(&format!("{outer}/"));
    let mut out: Vec<String> = Vec::new();
    for path in owner_cgroups {
        let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
        let Some(top) = parts.iter().position(|p| is_user_slice(p)) else { continue };
        if !guests.is_empty() && holds(guests, path) {
            continue;
        }
        let cover = (top..parts.len()).map(|d| format!("/{}", parts[..=d].join("/"))).find(|c| guests.is_empty() || !holds(c, guests));
        if let Some(c) = cover.filter(|c| !out.contains(c)) {
            out.push(c);
        }
    }
    out.sort();
    out
}

/// The most `memory.low` protection a cgroup can have, whatever its own value, from its
/// ancestors' values (top-down, the root's children first; the root itself has none).
/// Without `memory_recursiveprot` (a cgroup2 mount option) a cgroup's effective
/// protection is bounded by each ancestor's, so one ancestor at 0 makes it worthless.
/// With it, an ancestor that claims nothing passes on what its parent has, but nothing
/// flows from a top-level cgroup at 0.
pub(crate) fn low_bound(ancestors: &[u64], recursiveprot: bool) -> u64 {
    match (ancestors.first(), recursiveprot) {
        (None, _) => u64::MAX,
        (Some(&top), true) => top,
        (Some(_), false) => ancestors.iter().copied().min().unwrap_or(u64::MAX),
    }
}

/// An ancestor of an owner cgroup, as read: its `memory.low` and whether the agent may
/// write it (a root agent may; an owner may not write the system manager's).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LowSetting {
    pub cgroup: String,
    pub low: u64,
    pub writable: bool,
}

/// One cgroup the owner's programs run in ([`protection_cover`]), as read while guests
/// run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OwnerGroup {
    pub cgroup: String,
    /// Its working set's peak while guests run.
    pub working_set: u64,
    /// Why the agent cannot write its `memory.low` (`None`: it can).
    pub write_error: Option<String>,
    /// Its ancestors below the root, top-down.
    pub ancestors: Vec<LowSetting>,
}

/// How the owner's memory is protected while guests run (cgroup v2).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProtectionPlan {
    /// `memory.low` values to write: owner cgroups, and ancestors raised so that theirs
    /// reaches down (only those the agent may write).
    pub low: Vec<(String, u64)>,
    /// The owner cgroups `memory.low` protects, with how much of it can take effect.
    pub protected: Vec<(String, u64)>,
    /// `memory.high` on the guests when some of the owner's memory is left unprotected:
    /// RAM less the owner's protection and reserve.
    pub guests_high: Option<u64>,
    /// Owner cgroups `memory.low` cannot protect (in full), each with why.
    pub unprotected: Vec<(String, String)>,
    /// The owner's working set, all groups together, and the protection it asks for.
    pub working_set: u64,
    pub want: u64,
}

/// The choice ([`ProtectionPlan`]): the owner's protection ([`protection_for`] of all
/// its groups' working sets together, split in proportion to each group's) goes on each
/// group as `memory.low` where that can take effect — the agent may write it, and its
/// ancestors' values (`low_bound`) let it through, ancestors the agent may write being
/// raised to what their owner groups need; wherever it cannot (in full), the guests get
/// `memory.high` = `total` − the protection − `reserve` (at least
/// `crate::guest_memory::MIN_GUEST_BYTES`), so they are reclaimed and throttled before
/// the owner's pages go. `None` when protection is off.
pub fn plan_protection(rules: &WarmRules, groups: &[OwnerGroup], recursiveprot: bool, total: u64, reserve: u64) -> Option<ProtectionPlan> {
    let working_set: u64 = groups.iter().map(|g| g.working_set).sum();
    let want = protection_for(rules, working_set, total)?;
    let share = |g: &OwnerGroup| match working_set {
        0 => want / groups.len().max(1) as u64,
        ws => (want as u128 * g.working_set as u128 / ws as u128) as u64,
    };
    let mut plan = ProtectionPlan { working_set, want, ..ProtectionPlan::default() };
    // Ancestors the agent may write are raised to what the groups below them need.
    // Only where that lets the protection through: every other ancestor carries some.
    let mut raised: Vec<(String, u64)> = Vec::new();
    for g in groups.iter().filter(|g| g.write_error.is_none() && g.ancestors.iter().all(|a| a.writable || a.low > 0)) {
        for a in g.ancestors.iter().filter(|a| a.writable) {
            match raised.iter_mut().find(|(c, _)| c == &a.cgroup) {
                Some((_, need)) => *need += share(g),
                None => raised.push((a.cgroup.clone(), share(g))),
            }
        }
    }
    raised.retain(|(c, need)| groups.iter().flat_map(|g| &g.ancestors).any(|a| &a.cgroup == c && a.low < *need));
    for g in groups {
        let want_g = share(g);
        let lows: Vec<u64> =
            g.ancestors.iter().map(|a| raised.iter().find(|(c, _)| c == &a.cgroup).map_or(a.low, |&(_, need)| need.max(a.low))).collect();
        let bound = low_bound(&lows, recursiveprot);
        let limiting = || {
            let i = if recursiveprot { 0 } else { lows.iter().enumerate().min_by_key(|(_, l)| **l).map_or(0, |(i, _)| i) };
            let a = &g.ancestors[i];
            let how = if recursiveprot { " (memory_recursiveprot passes down only what the top has)" } else { "" };
            format!("{} has memory.low {} MiB{how}", a.cgroup, lows[i] / crate::guest_memory::MIB)
        };
        if let Some(e) = &g.write_error {
            plan.unprotected.push((g.cgroup.clone(), format!("cannot write its memory.low: {e}")));
        } else if bound == 0 {
            plan.unprotected.push((g.cgroup.clone(), limiting()));
        } else {
            plan.low.push((g.cgroup.clone(), want_g));
            plan.protected.push((g.cgroup.clone(), want_g.min(bound)));
            if bound < want_g {
                plan.unprotected
                    .push((g.cgroup.clone(), format!("only {} MiB can take effect: {}", bound / crate::guest_memory::MIB, limiting())));
            }
        }
    }
    plan.low.extend(raised);
    if !plan.unprotected.is_empty() {
        plan.guests_high = Some(total.saturating_sub(want).saturating_sub(reserve).max(crate::guest_memory::MIN_GUEST_BYTES));
    }
    Some(plan)
}

fn is_user_slice(part: &str) -> bool {
    part.strip_prefix("user-")
        .and_then(|r| r.strip_suffix(".slice"))
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// A run of pages, `[start, start + len)`, in pages.
pub type PageRange = (u64, u64);

/// The resident runs of a `mincore` vector (bit 0 of each byte: the page is in memory).
pub fn resident_ranges(vec: &[u8]) -> Vec<PageRange> {
    let mut out: Vec<PageRange> = Vec::new();
    for (i, b) in vec.iter().enumerate() {
        if b & 1 == 0 {
            continue;
        }
        let i = i as u64;
        match out.last_mut() {
            Some((s, l)) if *s + *l == i => *l += 1,
            _ => out.push((i, 1)),
        }
    }
    out
}

/// Pages in `ranges`.
pub fn pages_in(ranges: &[PageRange]) -> u64 {
    ranges.iter().map(|r| r.1).sum()
}

/// The pages that were resident before (`before`, from [`resident_ranges`]) and are not
/// now (`now`: a `mincore` vector of the file as it is), as runs. Pages past the end of
/// `now` (the file shrank) are not asked for.
pub fn missing_ranges(before: &[PageRange], now: &[u8]) -> Vec<PageRange> {
    let mut out: Vec<PageRange> = Vec::new();
    for &(start, len) in before {
        for p in start..(start + len).min(now.len() as u64) {
            if now[p as usize] & 1 != 0 {
                continue;
            }
            match out.last_mut() {
                Some((s, l)) if *s + *l == p => *l += 1,
                _ => out.push((p, 1)),
            }
        }
    }
    out
}

/// What a file-cache snapshot may still record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SnapshotBudget {
    pub files_left: usize,
    pub bytes_left: u64,
}

impl SnapshotBudget {
    /// The budget of `rules`.
    pub fn of(rules: &WarmRules) -> Self {
        Self { files_left: rules.cache_max_files, bytes_left: rules.cache_max_bytes }
    }

    /// Whether another file may be looked at.
    pub fn open(&self) -> bool {
        self.files_left > 0 && self.bytes_left > 0
    }

    /// Takes a file with `resident` bytes in memory: the bytes it may record (all of
    /// them, or what is left), or `None` when the budget is spent. A file with nothing
    /// resident costs nothing (it is not recorded).
    pub fn take(&mut self, resident: u64) -> Option<u64> {
        if !self.open() {
            return None;
        }
        if resident == 0 {
            return Some(0);
        }
        let granted = resident.min(self.bytes_left);
        self.files_left -= 1;
        self.bytes_left -= granted;
        Some(granted)
    }
}

/// Keeps the first `max_pages` pages of `ranges` (a budget's grant).
pub fn truncate_ranges(ranges: &[PageRange], max_pages: u64) -> Vec<PageRange> {
    let mut left = max_pages;
    let mut out = Vec::new();
    for &(s, l) in ranges {
        if left == 0 {
            break;
        }
        let take = l.min(left);
        out.push((s, take));
        left -= take;
    }
    out
}

/// What the file-cache restore does after a look at the owner's memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RestoreGate {
    /// Read on.
    Continue,
    /// Stop: the owner is short of memory or stalled on it.
    Stop,
    /// The stall is above the bound, but it was measured while the restore was reading,
    /// and a page read back soon after its eviction counts as a memory stall of the reader
    /// (the kernel's refault accounting): the restore's own reads may be all of it. Read
    /// nothing for a moment and look again ([`RESTORE_IDLE_LOOK`]).
    LookAgainIdle,
}

/// How long the restore reads nothing before its second look at the stall.
pub const RESTORE_IDLE_LOOK: Duration = Duration::from_millis(100);

/// Whether reading the owner's file pages back may go on: not while available memory is
/// below the owner's reserve, nor while the owner's memory stall (% of wall time, the
/// guests' own excluded) is above half the freeze threshold — reading back is a favour
/// to the owner, never a cost. `idle`: the stall was measured while the restore read
/// nothing, so none of it is the restore's own.
pub fn restore_gate(rules: &MemoryRules, available: u64, owner_stall_pct: f64, idle: bool) -> RestoreGate {
    if available < rules.owner_reserve_bytes {
        RestoreGate::Stop
    } else if owner_stall_pct <= rules.pressure_freeze_pct / 2.0 {
        RestoreGate::Continue
    } else if idle {
        RestoreGate::Stop
    } else {
        RestoreGate::LookAgainIdle
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const GIB: u64 = 1 << 30;

    fn warm() -> WarmRules {
        WarmRules { protect: true, protect_bytes: None, cache_max_bytes: GIB, cache_max_files: 3 }
    }

    #[test]
    fn protection_is_the_working_set_plus_headroom_or_the_fixed_value_within_bounds() {
        let r = warm();
        assert_eq!(working_set(3 * GIB, GIB), 2 * GIB);
        assert_eq!(working_set(GIB, 2 * GIB), 0);
        assert_eq!(protection_for(&r, 2 * GIB, 16 * GIB), Some(2 * GIB + GIB / 2));
        // A tiny owner still gets the floor; a huge one never all of memory.
        assert_eq!(protection_for(&r, 0, 16 * GIB), Some(MIN_PROTECT_BYTES));
        assert_eq!(protection_for(&r, 16 * GIB, 16 * GIB), Some(16 * GIB - 16 * MIB));
        let fixed = WarmRules { protect_bytes: Some(4 * GIB), ..r };
        assert_eq!(protection_for(&fixed, 100 * MIB, 16 * GIB), Some(4 * GIB));
        assert_eq!(protection_for(&WarmRules { protect: false, ..r }, GIB, 16 * GIB), None);
    }

    #[test]
    fn protection_is_rewritten_on_first_use_on_real_growth_and_on_large_shrinks_only() {
        assert_eq!(protection_update(GIB, None), Some(GIB));
        assert_eq!(protection_update(GIB + GIB / 10, Some(GIB)), None);
        assert_eq!(protection_update(GIB + GIB / 4, Some(GIB)), Some(GIB + GIB / 4));
        assert_eq!(protection_update(GIB - GIB / 5, Some(GIB)), None);
        assert_eq!(protection_update(GIB / 2, Some(GIB)), Some(GIB / 2));
    }

    #[test]
    fn session_candidates_start_at_the_user_slice_skip_the_guests_and_prefer_where_the_owner_is() {
        let owner = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        // A root agent, guests at /lull: the whole user slice first.
        let paths =
            owner(&["/user.slice/user-1000.slice/session-2.scope", "/user.slice/user-1000.slice/user@1000.service/app.slice/a.scope"]);
        let c = session_candidates(&paths, "/lull/guests/a1-2-0");
        assert_eq!(c[0], "/user.slice/user-1000.slice");
        assert!(c.contains(&"/user.slice/user-1000.slice/session-2.scope".to_string()));
        // A delegated agent whose guests live inside the user's manager: nothing that holds
        // them, so the session scope and the app slice, the one with more processes first.
        let paths = owner(&[
            "/user.slice/user-1000.slice/session-2.scope",
            "/user.slice/user-1000.slice/session-2.scope",
            "/user.slice/user-1000.slice/user@1000.service/app.slice/firefox.scope",
        ]);
        let c = session_candidates(&paths, "/user.slice/user-1000.slice/user@1000.service/app.slice/lull.service/guests/a1-2-0");
        assert_eq!(
            c,
            vec![
                "/user.slice/user-1000.slice/session-2.scope".to_string(),
                "/user.slice/user-1000.slice/user@1000.service/app.slice/firefox.scope".to_string()
            ]
        );
        // No user session (a container, a system service): nothing to protect.
        assert!(session_candidates(&owner(&["/process_api/abc", "/"]), "/lull").is_empty());
        assert!(session_candidates(&owner(&["/user.slice/user-x.slice/s"]), "").is_empty());
    }

    #[test]
    fn resident_and_missing_ranges_are_runs_of_pages() {
        let before = resident_ranges(&[1, 1, 0, 1, 0, 0, 1, 1, 1]);
        assert_eq!(before, vec![(0, 2), (3, 1), (6, 3)]);
        assert_eq!(pages_in(&before), 6);
        // Other bits of a mincore byte are not residency.
        assert_eq!(resident_ranges(&[2, 3, 0x80]), vec![(1, 1)]);
        // Now pages 1, 6 and 7 are gone, 2 came in on its own, and the file ends at page 8.
        let missing = missing_ranges(&before, &[1, 0, 1, 1, 0, 0, 0, 0]);
        assert_eq!(missing, vec![(1, 1), (6, 2)]);
        assert!(missing_ranges(&before, &[1; 9]).is_empty());
        assert_eq!(truncate_ranges(&before, 4), vec![(0, 2), (3, 1), (6, 1)]);
    }

    #[test]
    fn the_snapshot_budget_caps_files_and_bytes() {
        let mut b = SnapshotBudget::of(&warm());
        assert_eq!(b.take(0), Some(0), "a file with nothing resident costs nothing");
        assert_eq!(b.take(GIB / 2), Some(GIB / 2));
        assert_eq!(b.take(GIB), Some(GIB / 2), "what is left of the bytes");
        assert!(!b.open());
        assert_eq!(b.take(1), None);
        let mut few = SnapshotBudget { files_left: 1, bytes_left: GIB };
        assert_eq!(few.take(MIB), Some(MIB));
        assert_eq!(few.take(MIB), None);
    }

    #[test]
    fn the_restore_stops_under_owner_pressure() {
        let rules = MemoryRules {
            owner_reserve_bytes: 512 * MIB,
            admission_owner_mem_max: 0.8,
            memory_cap_bytes: None,
            memory_share: 0.5,
            pressure_freeze_pct: 10.0,
            pressure_kill: Duration::from_secs(10),
        };
        assert_eq!(restore_gate(&rules, GIB, 0.0, false), RestoreGate::Continue);
        assert_eq!(restore_gate(&rules, GIB, 5.0, false), RestoreGate::Continue);
        // A stall measured while reading may be the restore's own refaults: look again idle.
        assert_eq!(restore_gate(&rules, GIB, 5.1, false), RestoreGate::LookAgainIdle);
        // Measured while idle, it is not the restore's: stop.
        assert_eq!(restore_gate(&rules, GIB, 5.1, true), RestoreGate::Stop);
        assert_eq!(restore_gate(&rules, GIB, 0.0, true), RestoreGate::Continue);
        // Short of memory stops at once, idle or not.
        assert_eq!(restore_gate(&rules, 100 * MIB, 0.0, false), RestoreGate::Stop);
        assert_eq!(restore_gate(&rules, 100 * MIB, 0.0, true), RestoreGate::Stop);
    }

    fn setting(cgroup: &str, low: u64, writable: bool) -> LowSetting {
        LowSetting { cgroup: cgroup.into(), low, writable }
    }

    const MANAGER: &str = "/user.slice/user-1000.slice/user@1000.service";

    fn owner_rules() -> WarmRules {
        WarmRules { protect: true, protect_bytes: None, cache_max_bytes: 0, cache_max_files: 0 }
    }

    #[test]
    fn the_cover_is_where_the_owners_programs_run_apart_from_the_guests() {
        let owner: Vec<String> = [
            "/user.slice/user-1000.slice/session-2.scope",
            &format!("{MANAGER}/app.slice/app-firefox-1.scope"),
            &format!("{MANAGER}/app.slice/lull-agent.service"),
            &format!("{MANAGER}/session.slice/org.gnome.Shell@x11.service"),
            &format!("{MANAGER}/lull-guests-a1-2-0.scope/watchdog"),
            "/system.slice/cron.service",
        ]
        .map(String::from)
        .to_vec();
        // An owner's agent: its guests in a scope of the owner's user manager.
        let guests = format!("{MANAGER}/lull-guests-a1-2-0.scope");
        assert_eq!(
            protection_cover(&owner, &guests),
            vec![
                "/user.slice/user-1000.slice/session-2.scope".to_string(),
                format!("{MANAGER}/app.slice"),
                format!("{MANAGER}/session.slice")
            ]
        );
        // A root agent: its guests outside the user slices: the owner's whole slice.
        assert_eq!(protection_cover(&owner[..4], "/lull/guests/a1-2-0"), vec!["/user.slice/user-1000.slice".to_string()]);
        assert!(protection_cover(&["/system.slice/x.service".into()], "/lull").is_empty());
    }

    #[test]
    fn memory_low_is_worthless_under_an_ancestor_at_zero() {
        assert_eq!(low_bound(&[], false), u64::MAX, "a top-level cgroup is bounded by nothing");
        assert_eq!(low_bound(&[0, 5 * GIB], false), 0);
        assert_eq!(low_bound(&[0, 5 * GIB], true), 0, "nothing flows from a top level at 0");
        assert_eq!(low_bound(&[4 * GIB, 0, 0], true), 4 * GIB, "recursiveprot passes it down");
        assert_eq!(low_bound(&[4 * GIB, 0], false), 0, "without it, the middle's 0 cuts it");
        assert_eq!(low_bound(&[4 * GIB, 2 * GIB], false), 2 * GIB);
    }

    fn debian_owner_groups(admin_low: u64) -> Vec<OwnerGroup> {
        let ancestors = vec![
            setting("/user.slice", admin_low, false),
            setting("/user.slice/user-1000.slice", admin_low, false),
            setting(MANAGER, admin_low, false),
        ];
        vec![
            OwnerGroup { cgroup: format!("{MANAGER}/app.slice"), working_set: GIB, write_error: None, ancestors: ancestors.clone() },
            OwnerGroup {
                cgroup: format!("{MANAGER}/session.slice"),
                working_set: GIB / 2,
                write_error: None,
                ancestors: ancestors.clone(),
            },
            OwnerGroup {
                cgroup: "/user.slice/user-1000.slice/session-2.scope".into(),
                working_set: GIB / 2,
                write_error: Some("Permission denied (os error 13)".into()),
                ancestors: ancestors[..2].to_vec(),
            },
        ]
    }

    #[test]
    fn an_ordinary_owner_on_a_stock_system_gets_memory_high_on_the_guests() {
        let plan = plan_protection(&owner_rules(), &debian_owner_groups(0), true, 8 * GIB, GIB).expect("on");
        assert!(plan.low.is_empty() && plan.protected.is_empty(), "no memory.low where it is worth nothing: {plan:?}");
        assert_eq!(plan.working_set, 2 * GIB);
        assert_eq!(plan.want, 2 * GIB + GIB / 2, "working set + 25 %");
        assert_eq!(plan.guests_high, Some(8 * GIB - plan.want - GIB), "RAM less the protection and the reserve");
        assert_eq!(plan.unprotected.len(), 3);
        assert!(plan.unprotected[0].1.contains("/user.slice has memory.low 0 MiB"), "{:?}", plan.unprotected);
        assert!(plan.unprotected[2].1.contains("cannot write its memory.low: Permission denied"), "{:?}", plan.unprotected);
        // A small machine: the guests keep at least the least a guest is admitted with.
        let small = plan_protection(&owner_rules(), &debian_owner_groups(0), false, 3 * GIB, GIB).expect("on");
        assert_eq!(small.guests_high, Some(crate::guest_memory::MIN_GUEST_BYTES));
        assert_eq!(plan_protection(&WarmRules { protect: false, ..owner_rules() }, &debian_owner_groups(0), true, GIB, 0), None);
    }

    #[test]
    fn memory_low_goes_where_the_administrator_let_it_through() {
        let plan = plan_protection(&owner_rules(), &debian_owner_groups(8 * GIB), true, 16 * GIB, GIB).expect("on");
        let app = format!("{MANAGER}/app.slice");
        let want_app = plan.want * 2 / 4;
        assert_eq!(plan.low[0], (app.clone(), want_app), "split by working set");
        assert_eq!(
            plan.protected.iter().map(|p| p.0.as_str()).collect::<Vec<_>>(),
            vec![app.as_str(), &format!("{MANAGER}/session.slice")]
        );
        // The login session's scope is root's: the guests still get memory.high for it.
        assert_eq!(plan.unprotected.len(), 1);
        assert!(plan.guests_high.is_some());
        // Only part of it can take effect: written, said, and covered by memory.high.
        let plan = plan_protection(&owner_rules(), &debian_owner_groups(256 << 20), false, 16 * GIB, GIB).expect("on");
        assert_eq!(plan.protected[0], (app, 256 << 20));
        assert!(plan.unprotected[0].1.starts_with("only 256 MiB can take effect"), "{:?}", plan.unprotected);
    }

    #[test]
    fn a_root_agent_raises_the_ancestors_it_may_write() {
        let slice = "/user.slice/user-1000.slice".to_string();
        let groups = vec![OwnerGroup {
            cgroup: slice.clone(),
            working_set: 2 * GIB,
            write_error: None,
            ancestors: vec![setting("/user.slice", 0, true)],
        }];
        let plan = plan_protection(&owner_rules(), &groups, false, 16 * GIB, GIB).expect("on");
        let want = 2 * GIB + GIB / 2;
        assert_eq!(plan.low, vec![(slice.clone(), want), ("/user.slice".into(), want)]);
        assert_eq!(plan.protected, vec![(slice, want)]);
        assert!(plan.unprotected.is_empty() && plan.guests_high.is_none(), "{plan:?}");
        // An ancestor already holding enough is left alone.
        let groups = vec![OwnerGroup { ancestors: vec![setting("/user.slice", 8 * GIB, true)], ..groups[0].clone() }];
        assert_eq!(plan_protection(&owner_rules(), &groups, false, 16 * GIB, GIB).expect("on").low.len(), 1);
    }
}
