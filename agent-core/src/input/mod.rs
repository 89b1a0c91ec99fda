//! Input activity sensing: a backend chosen at start-up turns the desktop's input (or its
//! idle notifications) into [`InputEvent`]s carrying only a time and a kind of signal.
//!
//! Backends run on their own thread and push into an [`InputSink`]. The sink forwards
//! events to the agent loop, coalescing bursts (a mouse move produces hundreds of events
//! a second; the policy only needs to know that input happened and when), and calls an
//! optional *fast path* on every activity so guest work can be frozen straight from the
//! input path, before the agent's next tick.

use crate::clock::{mono_now, MonoMs};
use crate::sample::{InputEvent, InputSignal};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tokio::sync::mpsc::UnboundedSender;

/// Forwarding bursts: an `Activity` within this many ms of the last forwarded one is
/// dropped (the fast path still runs for it).
pub const COALESCE_MS: u64 = 200;

/// A hook run synchronously on the input thread for every activity signal.
pub type FastPath = Arc<dyn Fn(MonoMs) + Send + Sync>;

/// Where backends deliver their events. Cheap to clone.
#[derive(Clone)]
pub struct InputSink {
    tx: UnboundedSender<InputEvent>,
    last_forwarded: Arc<AtomicU64>,
    fast_path: Option<FastPath>,
}

impl InputSink {
    /// A sink forwarding to `tx`, calling `fast_path` (if any) on each activity.
    pub fn new(tx: UnboundedSender<InputEvent>, fast_path: Option<FastPath>) -> Self {
        Self { tx, last_forwarded: Arc::new(AtomicU64::new(0)), fast_path }
    }

    /// Input happened now. Returns false once the receiving side is gone.
    pub fn activity(&self) -> bool {
        self.activity_at(mono_now())
    }

    /// Input happened at `at`.
    pub fn activity_at(&self, at: MonoMs) -> bool {
        if let Some(fp) = &self.fast_path {
            fp(at);
        }
        let last = self.last_forwarded.load(Ordering::Relaxed);
        if last != 0 && at.0 < last.saturating_add(COALESCE_MS) && !self.tx.is_closed() {
            return true;
        }
        self.last_forwarded.store(at.0.max(1), Ordering::Relaxed);
        self.tx.send(InputEvent { at, signal: InputSignal::Activity }).is_ok()
    }

    /// Any other signal, forwarded as is. `Resumed` also runs the fast path.
    pub fn signal(&self, event: InputEvent) -> bool {
        if matches!(event.signal, InputSignal::Resumed | InputSignal::Inhibited(true)) {
            if let Some(fp) = &self.fast_path {
                fp(event.at);
            }
        }
        if matches!(event.signal, InputSignal::Activity | InputSignal::Resumed) {
            self.last_forwarded.store(event.at.0.max(1), Ordering::Relaxed);
        }
        self.tx.send(event).is_ok()
    }

    /// True once nobody listens any more; backends stop then.
    pub fn is_closed(&self) -> bool {
        self.tx.is_closed()
    }
}

/// Why a backend could not start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    #[error("input backend {backend} is not available here: {why}")]
    Unavailable { backend: &'static str, why: String },
    #[error("input backend {backend} failed: {why}")]
    Failed { backend: &'static str, why: String },
}

/// An input backend. `run` blocks its thread until the sink closes or the source fails.
pub trait InputBackend: Send {
    /// Short name for logs and `lull status` ("x11-xrecord", "logind", …).
    fn name(&self) -> &'static str;
    /// What this backend cannot see, said once in the start-up log line.
    fn blind_spots(&self) -> &'static str;
    /// Deliver events into `sink` until it closes.
    fn run(self: Box<Self>, sink: InputSink) -> Result<(), InputError>;
}
