//! What the sensors hand the policy: a periodic [`Sample`] of the machine and
//! timestamped [`InputEvent`]s. Nothing here says *which* key or *where*: an input event
//! carries only its time and its kind of signal.

use crate::clock::MonoMs;
use serde::{Deserialize, Serialize};

/// One reading of the machine. Owner figures always exclude the guests' own usage, or a
/// guest would make the machine look busy.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// When it was taken.
    pub at: MonoMs,
    /// Owner CPU utilisation as a fraction of the whole machine (0.0–1.0), guests excluded.
    pub owner_cpu: f32,
    /// Memory used by the owner (everything but guests and the reclaimable cache), bytes.
    pub owner_mem_bytes: u64,
    /// Physical memory, bytes.
    pub mem_total_bytes: u64,
    /// Memory available for new work without swapping (MemAvailable), bytes.
    pub mem_available_bytes: u64,
    /// Swap size and free swap, bytes.
    pub swap_total_bytes: u64,
    pub swap_free_bytes: u64,
    /// CPU used by guests over the last interval as a fraction of the machine.
    pub guest_cpu: f32,
    /// Memory charged to guests, bytes.
    pub guest_mem_bytes: u64,
    /// `Some(true)` on battery, `Some(false)` on AC, `None` where the OS has no power
    /// supply information (desktops without a battery report AC).
    pub on_battery: Option<bool>,
    /// Hottest CPU sensor in °C, where the OS exposes one.
    pub cpu_temp_c: Option<f32>,
    /// A program the owner named in `rules.exclusive_programs` that is running now (the
    /// first one found, by the name the owner gave): while one runs, no guest does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exclusive_program: Option<String>,
}

/// The kinds of input signal a backend can deliver. Event-driven backends of the
/// "notify me when idle" kind (Wayland idle protocols, Mutter, logind) say `Idled` and
/// `Resumed`; raw-event backends (X11 XInput 2) say `Activity` for each input.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum InputSignal {
    /// Keyboard or pointer input happened at the event's time.
    Activity,
    /// No input for `idle_for_ms` up to the event's time (the owner went away then).
    Idled { idle_for_ms: u64 },
    /// Input resumed after an `Idled`; the owner counts as present until the next `Idled`.
    Resumed,
    /// An idle inhibitor (video, call) is held (`true`) or released (`false`); while
    /// held the owner counts as present.
    Inhibited(bool),
}

/// A timestamped input signal. Deliberately carries no key, button, position or window.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InputEvent {
    pub at: MonoMs,
    pub signal: InputSignal,
}
