//! The driver's view of a guest runtime: [`GuestHost`], what the agent loop needs from
//! whatever runs guest work ([`crate::guest::linux::LinuxRuntime`] on Linux), and
//! [`NoGuests`] where none runs. The driver owns one and calls it on its own thread.

use super::{ContainmentStatus, GuestInfo, GuestSpec, GuestsMemory, OwnerMemoryStatus, RestoreReport};
use crate::ledger::GuestTotals;
use crate::policy::GuestDirective;
use crate::sensors::GuestReading;
use std::sync::Arc;
use std::time::Duration;

/// A synchronous "freeze all guests now" hook for the input thread.
pub type FastFreeze = Arc<dyn Fn() + Send + Sync>;

/// What the agent needs from a guest runtime. The Linux cgroup runtime implements it;
/// [`NoGuests`] stands in where no guest work is run.
pub trait GuestHost: Send {
    /// Name and mode for `lull status` ("cgroup v2", "none", …).
    fn describe(&self) -> String;
    /// Carry out the policy's directive.
    fn apply(&mut self, directive: GuestDirective);
    /// Whether any guest work is present (running or frozen).
    fn present(&mut self) -> bool;
    /// The guests' cumulative CPU and current memory, for owner figures.
    fn reading(&mut self) -> GuestReading;
    /// Per-guest cumulative totals, for the ledger.
    fn totals(&mut self) -> Vec<GuestTotals>;
    /// A hook that freezes every guest at once, callable from any thread.
    fn fast_freeze(&self) -> Option<FastFreeze>;
    /// The restore after the last eviction (anonymous pages and file cache, each timed),
    /// once, when one ran.
    fn take_restore(&mut self) -> Option<RestoreReport>;
    /// How the owner's memory is kept (protection, last restore), for `lull status`.
    fn owner_memory(&mut self) -> Option<OwnerMemoryStatus> {
        None
    }
    /// How guests are contained and what they lack, for `lull status`.
    fn containment_status(&self) -> Option<ContainmentStatus> {
        None
    }
    /// T_migr for the present guest work (suspend + checkpoint size / bandwidth +
    /// resume), when the runtime can estimate it; the policy's `T_lingr` uses it.
    fn migration_cost(&mut self) -> Option<Duration> {
        None
    }
    /// Queues a guest job (it starts at the next Accept directive once admitted) and
    /// returns its id; `None` when this host runs no guest work.
    fn start_guest(&mut self, _spec: GuestSpec) -> Option<String> {
        None
    }
    /// A snapshot of one guest this host has started (queued, running or ended).
    fn guest_info(&mut self, _id: &str) -> Option<GuestInfo> {
        None
    }
    /// Stops one guest as an eviction would (queued: dropped). False if unknown or ended.
    fn stop_guest(&mut self, _id: &str) -> bool {
        false
    }
    /// Kills one guest at once, checkpointable or not (queued: dropped). False if
    /// unknown or ended.
    fn kill_guest(&mut self, _id: &str) -> bool {
        false
    }
    /// Freezes (`hold`) or thaws one running guest on its own, whatever the directive:
    /// its gang is halted while a lost member is replaced. Not the policy's (no
    /// interruption, no eviction). False if unknown, ended or not supported.
    fn hold_guest(&mut self, _id: &str, _hold: bool) -> bool {
        false
    }

    /// The guests' memory for the coordinator (seed 001), measured now; `None` when this
    /// host cannot measure it.
    fn memory(&mut self) -> Option<GuestsMemory> {
        None
    }

    /// The guests' cgroup as `/proc/PID/cgroup` names it: the control socket refuses
    /// processes inside it. `None` without cgroups.
    fn guest_cgroup(&self) -> Option<String> {
        None
    }
    /// Why this runtime must not run the pool's guests (strangers' code), if it must not:
    /// it cannot keep them from the owner's files. The owner's own `lull run` jobs still
    /// run; an agent linked to a coordinator refuses to start ([`crate::assembly`]).
    fn pool_refusal(&self) -> Option<String> {
        None
    }
}

/// No guest runtime: the agent senses, decides and accounts, but runs nothing.
#[derive(Debug, Default)]
pub struct NoGuests;

impl GuestHost for NoGuests {
    fn describe(&self) -> String {
        "none (no guest work runs on this agent)".into()
    }
    fn apply(&mut self, _: GuestDirective) {}
    fn present(&mut self) -> bool {
        false
    }
    fn reading(&mut self) -> GuestReading {
        GuestReading::default()
    }
    fn totals(&mut self) -> Vec<GuestTotals> {
        Vec::new()
    }
    fn fast_freeze(&self) -> Option<FastFreeze> {
        None
    }
    fn take_restore(&mut self) -> Option<RestoreReport> {
        None
    }
}
