//! Freezing every guest at once, from any thread (the input path's fast freeze): the
//! runtime's frozen state and the process groups it covers, signalled together.

use super::group;
use std::sync::Mutex;
use tracing::warn;

/// The guests' process groups and whether they are frozen.
#[derive(Debug, Default)]
pub struct Freezer {
    state: Mutex<(bool, Vec<i32>)>,
}

impl Freezer {
    fn lock(&self) -> std::sync::MutexGuard<'_, (bool, Vec<i32>)> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Adds a new guest's group, frozen at once if the guests are.
    pub fn add(&self, pgid: i32) {
        let mut state = self.lock();
        if state.0 {
            signal(pgid, true);
        }
        state.1.push(pgid);
    }

    /// Forgets an ended guest's group.
    pub fn remove(&self, pgid: i32) {
        self.lock().1.retain(|&p| p != pgid);
    }

    /// Freezes or thaws every group (only when that changes the state).
    pub fn set_frozen(&self, frozen: bool) {
        let mut state = self.lock();
        if state.0 == frozen {
            return;
        }
        state.0 = frozen;
        for &pgid in &state.1 {
            signal(pgid, frozen);
        }
    }

    pub fn frozen(&self) -> bool {
        self.lock().0
    }
}

fn signal(pgid: i32, frozen: bool) {
    if let Err(e) = group::freeze_group(pgid, frozen) {
        warn!(pgid, "could not {} a guest's process group: {e}", if frozen { "freeze" } else { "thaw" });
    }
}
