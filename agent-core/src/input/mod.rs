//! Input activity sensing: a backend chosen at start-up turns the desktop's input (or its
//! idle notifications) into [`InputEvent`]s carrying only a time and a kind of signal.
//!
//! Backends run on their own thread and push into an [`InputSink`]. The sink forwards
//! events to the agent loop, coalescing bursts (a mouse move produces hundreds of events
//! a second; the policy only needs to know that input happened and when), and calls an
//! optional *fast path* on every activity so guest work can be frozen straight from the
//! input path, before the agent's next tick.

pub mod last_input;
#[cfg(target_os = "linux")]
pub mod linux;
#[cfg(target_os = "linux")]
pub use linux::{logind, mutter, polled, terminal, wayland, x11};
#[cfg(target_os = "macos")]
pub mod macos;
#[cfg(target_os = "macos")]
pub mod macos_tap;
#[cfg(target_os = "windows")]
pub mod windows;
#[cfg(target_os = "windows")]
pub mod windows_hooks;

use crate::clock::{mono_now, monotonic_ns, MonoMs};
use crate::config::{Input, InputBackendChoice};
use crate::sample::{InputEvent, InputSignal};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::mpsc::UnboundedSender;

/// Forwarding bursts: an `Activity` within this many ms of the last forwarded one is
/// dropped (the fast path still runs for it).
pub const COALESCE_MS: u64 = 200;

/// A hook run synchronously on the input thread for every activity signal; true when it
/// froze the guests.
pub type FastPath = Arc<dyn Fn(MonoMs) -> bool + Send + Sync>;

/// How many owners' returns [`InputTimes`] keeps the timings of.
pub const TIMINGS_KEPT: usize = 8;

/// When one activity signal reached the agent and what its input thread did with it, on
/// `CLOCK_MONOTONIC` nanoseconds (the clock an outside observer times the owner's return
/// with). Times only: never which key or where.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct InputTiming {
    /// The backend's thread handed the signal to the agent.
    pub received_ns: u64,
    /// The fast path had frozen the guests, if it ran for this signal (it runs only while
    /// guests work and the owner's return should stop them; otherwise the agent's loop
    /// decides).
    pub froze_ns: Option<u64>,
}

/// A signal's timing is kept only when it ends at least this long a silence (an owner's
/// return) or the fast path froze guests on it. Privacy: the rhythm of typing can tell
/// what was typed, so the gaps between keys within a burst are never kept.
pub const TIMING_AFTER_SILENCE_NS: u64 = 1_000_000_000;

/// The timings of the latest [`TIMINGS_KEPT`] owner returns (see
/// [`TIMING_AFTER_SILENCE_NS`]), shared by the input threads and the status: what splits
/// the owner's return, measured from outside, into the way to the agent and the agent's
/// own part.
#[derive(Debug, Default)]
pub struct InputTimes {
    kept: Mutex<VecDeque<InputTiming>>,
    /// The last activity signal of any kind, for the silence before the next.
    last_ns: AtomicU64,
}

impl InputTimes {
    fn record(&self, t: InputTiming) {
        let before = self.last_ns.swap(t.received_ns, Ordering::Relaxed);
        if t.froze_ns.is_none() && t.received_ns.saturating_sub(before) < TIMING_AFTER_SILENCE_NS {
            return;
        }
        let mut q = self.kept.lock().unwrap_or_else(|p| p.into_inner());
        if q.len() == TIMINGS_KEPT {
            q.pop_front();
        }
        q.push_back(t);
    }

    /// The kept timings, oldest first.
    pub fn recent(&self) -> Vec<InputTiming> {
        self.kept.lock().unwrap_or_else(|p| p.into_inner()).iter().copied().collect()
    }
}

/// Where backends deliver their events. Cheap to clone.
#[derive(Clone)]
pub struct InputSink {
    tx: UnboundedSender<InputEvent>,
    last_forwarded: Arc<AtomicU64>,
    fast_path: Option<FastPath>,
    times: Arc<InputTimes>,
}

impl InputSink {
    /// A sink forwarding to `tx`, calling `fast_path` (if any) on each activity.
    pub fn new(tx: UnboundedSender<InputEvent>, fast_path: Option<FastPath>) -> Self {
        Self { tx, last_forwarded: Arc::new(AtomicU64::new(0)), fast_path, times: Arc::default() }
    }

    /// The timings of the latest activity signals through this sink (and its clones).
    pub fn times(&self) -> Arc<InputTimes> {
        self.times.clone()
    }

    /// Input happened now. Returns false once the receiving side is gone.
    pub fn activity(&self) -> bool {
        self.activity_at(mono_now())
    }

    /// Input happened at `at`.
    pub fn activity_at(&self, at: MonoMs) -> bool {
        let received_ns = monotonic_ns();
        let froze = self.fast_path.as_ref().is_some_and(|fp| fp(at));
        self.times.record(InputTiming { received_ns, froze_ns: froze.then(monotonic_ns) });
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
    /// Short name for logs and `lull status` ("x11-xi2", "logind", …).
    fn name(&self) -> &'static str;
    /// What this backend cannot see, said once in the start-up log line.
    fn blind_spots(&self) -> &'static str;
    /// Deliver events into `sink` until it closes.
    fn run(self: Box<Self>, sink: InputSink) -> Result<(), InputError>;
}

/// The environment variable that overrides `input.backend`: a comma-separated list of
/// backend names (`x11,logind`), or `auto` or `none`.
pub const OVERRIDE_ENV: &str = "LULL_INPUT";

/// Parses a backend name as in the config file and [`OVERRIDE_ENV`]: `None` for a name
/// unknown or another platform's.
pub fn parse_choice(name: &str) -> Option<InputBackendChoice> {
    InputBackendChoice::from_name(name.trim()).ok()
}

/// The backends asked for: [`OVERRIDE_ENV`] if set (and valid), else the config's choice.
pub fn requested(config: &Input, env: Option<&str>) -> Result<Vec<InputBackendChoice>, String> {
    let Some(list) = env.filter(|s| !s.trim().is_empty()) else { return Ok(vec![config.backend]) };
    list.split(',').map(|n| InputBackendChoice::from_name(n.trim()).map_err(|e| format!("{OVERRIDE_ENV}: {e}"))).collect()
}

/// The backends asked for at start-up, [`OVERRIDE_ENV`] read now: an invalid override
/// is logged and the config's choice used.
pub fn wanted(config: &Input) -> Vec<InputBackendChoice> {
    let env = std::env::var(OVERRIDE_ENV).ok();
    requested(config, env.as_deref()).unwrap_or_else(|e| {
        tracing::warn!("{e}; using input.backend from the config instead");
        vec![config.backend]
    })
}

/// Windows' and macOS' choice at start-up: for `auto` the event-by-event backend
/// (`hooks`: low-level hooks, an event tap) and the last-input poll beside it, for `hooks`
/// and `last-input` the one named (each once, however often it is asked for), nothing
/// for `none`.
#[cfg(any(target_os = "windows", target_os = "macos"))]
fn events_and_poll(
    config: &Input,
    platform: &str,
    events: impl FnOnce() -> Box<dyn InputBackend>,
    poll: impl FnOnce() -> Box<dyn InputBackend>,
) -> Vec<Box<dyn InputBackend>> {
    let (mut each_event, mut polled) = (false, false);
    for w in wanted(config) {
        match w {
            InputBackendChoice::Auto => (each_event, polled) = (true, true),
            InputBackendChoice::Hooks => each_event = true,
            InputBackendChoice::LastInput => polled = true,
            InputBackendChoice::None => {}
            // The config and LULL_INPUT refuse other platforms' backends; a config built
            // in code could still name one.
            other => tracing::warn!("input: {} is not an input backend on {platform}", other.name()),
        }
    }
    let mut out = Vec::new();
    if each_event {
        out.push(events());
    }
    if polled {
        out.push(poll());
    }
    out
}

/// The platform's input backends for `config` (none where Lull has none yet; the tray
/// and `lull` say so).
pub fn platform_backends(config: &Input) -> Vec<Box<dyn InputBackend>> {
    #[cfg(target_os = "linux")]
    return linux::choose_backends(config);
    #[cfg(target_os = "windows")]
    return events_and_poll(config, "Windows", || Box::new(windows_hooks::LowLevelHooks), || Box::new(windows::LastInputPolled));
    #[cfg(target_os = "macos")]
    return events_and_poll(config, "macOS", || Box::new(macos_tap::EventTap), || Box::new(macos::IdleTimePolled));
    #[cfg(not(any(target_os = "linux", target_os = "windows", target_os = "macos")))]
    {
        let _ = config;
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn override_names_backends_and_refuses_unknown_ones() {
        let cfg = Input::default();
        assert_eq!(requested(&cfg, None), Ok(vec![InputBackendChoice::Auto]));
        assert_eq!(requested(&cfg, Some("")), Ok(vec![InputBackendChoice::Auto]));
        assert_eq!(requested(&cfg, Some("x11, logind")), Ok(vec![InputBackendChoice::X11, InputBackendChoice::Logind]));
        assert_eq!(requested(&cfg, Some("none")), Ok(vec![InputBackendChoice::None]));
        assert_eq!(requested(&cfg, Some("x11,terminal")), Ok(vec![InputBackendChoice::X11, InputBackendChoice::Terminal]));
        let err = requested(&cfg, Some("x11,xinput")).unwrap_err();
        assert!(err.contains("\"xinput\"") && err.contains(OVERRIDE_ENV), "{err}");
        // Another platform's backend is refused by name, with what this one has.
        let (mine, theirs) = if crate::sys::WINDOWS || crate::sys::MACOS { ("last-input", "x11") } else { ("x11", "last-input") };
        assert_eq!(requested(&cfg, Some(mine)).map(|c| c[0].name()), Ok(mine));
        let err = requested(&cfg, Some(&format!("auto,{theirs}"))).unwrap_err();
        assert!(err.contains(OVERRIDE_ENV) && err.contains("not this platform's") && err.contains(&format!("\"{mine}\"")), "{err}");
        assert_eq!(parse_choice(theirs), None);
        // The event-by-event backend (low-level hooks, an event tap) is Windows' and macOS'.
        assert_eq!(parse_choice("hooks").is_some(), crate::sys::WINDOWS || crate::sys::MACOS);
        assert_eq!(parse_choice(" none "), Some(InputBackendChoice::None));
    }

    #[test]
    fn activity_is_coalesced_but_the_fast_path_sees_every_event() {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let hits = Arc::new(AtomicU64::new(0));
        let h = hits.clone();
        let sink = InputSink::new(tx, Some(Arc::new(move |_| h.fetch_add(1, Ordering::Relaxed).is_multiple_of(2))));
        for t in [1000, 1050, 1199, 1200, 1500] {
            assert!(sink.activity_at(MonoMs(t)));
        }
        assert_eq!(hits.load(Ordering::Relaxed), 5);
        let got: Vec<u64> = std::iter::from_fn(|| rx.try_recv().ok()).map(|e| e.at.0).collect();
        assert_eq!(got, vec![1000, 1200, 1500]);
        // The timings kept: the signals the fast path froze on (the 1st, 3rd and 5th);
        // the 2nd and 4th came within a burst, whose rhythm is never kept.
        let froze = |sink: &InputSink| sink.times().recent().iter().map(|t| t.froze_ns.is_some()).collect::<Vec<_>>();
        assert_eq!(froze(&sink), [true, true, true]);
        // A signal after a silence (an owner's return) is kept even where nothing froze.
        std::thread::sleep(std::time::Duration::from_nanos(TIMING_AFTER_SILENCE_NS + 50_000_000));
        assert!(sink.activity_at(MonoMs(3000)));
        assert_eq!(froze(&sink), [true, true, true, false]);
        let times = sink.times().recent();
        assert!(times.windows(2).all(|w| w[0].received_ns <= w[1].received_ns));
        assert!(times.iter().all(|t| t.froze_ns.is_none_or(|f| f >= t.received_ns)));
        // At most TIMINGS_KEPT, the latest.
        for t in 0..TIMINGS_KEPT as u64 * 2 {
            sink.activity_at(MonoMs(4000 + t));
        }
        assert_eq!(sink.times().recent().len(), TIMINGS_KEPT);
    }
}
