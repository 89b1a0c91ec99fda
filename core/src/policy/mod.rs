//! The availability, recruitment, social-contract and linger policy as a pure state
//! machine (sans-IO, in the style of quinn-proto): drivers feed it [`Event`]s with a
//! [`Now`] and act on the [`Action`]s it returns. It never reads the clock, the OS or the
//! network, so the live agent, the tray app and the simulator run the very same code.
//!
//! The rules, from seed 004 (§3.4–3.5) and seed 000:
//! - *Available* now iff owner CPU (guests excluded) is below the threshold, owner memory
//!   did not grow by more than a set fraction of memory over the window, no input is
//!   happening and no idle inhibitor is held.
//! - *Recruitable* once available continuously for the recruitment threshold (180 s).
//! - An *interruption* is counted when the owner returns (the machine stops being
//!   available) while recruited guest work is present, or within a window after such
//!   work finished. At most one per recruitment; never more than the daily limit; never
//!   during "Donate now". At the limit the machine leaves the pool until the next local
//!   day.
//! - On a return the guests are frozen, then handled by the eviction mode (IE, PM, LL,
//!   LF). Lingering lasts `T_lingr = ((1 − l)/(h − l)) · T_migr` (seed 000, eqs. 3–5).
//! - *Lend while light* (opt-in, seed 000's lingering that starts work): guest work may
//!   also start while the owner is present but has kept their CPU below `l` for a while.
//!   Such a guest counts one interruption only if it is later stopped (frozen or
//!   evicted) on account of the owner; lingering on is free.
//! - Durations run on the monotonic clock; the local day only moves forward, so setting
//!   the wall clock back neither resets nor re-counts a day.

mod config;
mod fields;
mod migration;
mod rules;
mod window;

use crate::clock::{MonoMs, Now};
use crate::sample::{InputEvent, InputSignal, Sample};
use chrono::{DateTime, NaiveDate, Utc};
pub use config::{
    numeric_fields, parse_range, AllowedHours, Availability, Budget, Eviction, EvictionMode, MinuteRange, PolicyConfig, Rules,
};
pub use migration::{MigrationDecision, StayReason};
pub use rules::NotAllowedReason;
use serde::{Deserialize, Serialize};
use std::ops::ControlFlow;
use std::time::Duration;
use window::{GrowthWindow, Window};

/// The states of the machine as the owner and the pool see them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "snake_case")]
pub enum StateKind {
    /// The owner is using the machine (input, CPU or memory activity).
    OwnerActive,
    /// Available, but not yet for the recruitment threshold.
    Idle,
    /// Available long enough: guest work may start.
    Recruitable,
    /// Guest work is running while the owner is away (or during "Donate now").
    Donating,
    /// The owner is back but only lightly active; guest work keeps running at lowest
    /// priority (Linger-Longer / Linger-Forever).
    Lingering,
    /// Guest work is frozen or being stopped because the owner came back.
    Evicting,
    /// The owner is present but light (`availability.lend_while_light`): guest work runs
    /// at lowest priority and new guest work may start.
    LendingLight,
    /// The owner paused Lull.
    Paused,
    /// The day's interruption budget is used up; back in the pool the next local day.
    OutOfBudget,
    /// Allowed hours, battery or heat rules forbid guest work now.
    NotAllowed,
}

impl StateKind {
    /// Stable lower-case name, as in `lull status` and the ledger.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::OwnerActive => "owner_active",
            Self::Idle => "idle",
            Self::Recruitable => "recruitable",
            Self::Donating => "donating",
            Self::Lingering => "lingering",
            Self::Evicting => "evicting",
            Self::LendingLight => "lending_light",
            Self::Paused => "paused",
            Self::OutOfBudget => "out_of_budget",
            Self::NotAllowed => "not_allowed",
        }
    }
}

/// What the guest runtime must do with guest work.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "snake_case")]
pub enum GuestDirective {
    /// Guests run (at lowest priority) and new ones may start.
    Accept,
    /// Present guests run at lowest priority; no new ones start.
    Linger,
    /// Present guests stay frozen; no new ones start.
    Freeze,
    /// No guest may be present: stop them (checkpoint signal, then kill after a grace).
    Evict,
}

/// How long a pause lasts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum PauseSpan {
    /// For a number of seconds (1 h and 3 h in the menus).
    For { secs: u64 },
    /// Until the next local day begins.
    UntilTomorrow,
    /// Until the owner resumes.
    UntilResumed,
}

/// How long an explicit "Donate now" offer lasts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum DonateSpan {
    /// For a number of seconds, whatever the owner does meanwhile.
    For { secs: u64 },
    /// Until the owner next uses the machine.
    UntilReturn,
}

/// The owner's commands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Command {
    Pause(PauseSpan),
    Resume,
    Donate(DonateSpan),
    SetLimit(u32),
}

/// Everything the policy reacts to.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Event {
    /// A periodic reading of the machine.
    Sample(Sample),
    /// An input signal from the input backend.
    Input(InputEvent),
    /// An owner command.
    Command(Command),
    /// The guest runtime says whether any guest work is present on the machine.
    GuestsPresent(bool),
    /// Time passed (lets deadlines expire between samples).
    Tick,
}

/// What made the owner count as back.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "snake_case")]
pub enum ReturnCause {
    Input,
    Inhibitor,
    OwnerCpu,
    OwnerMemory,
    /// The owner returned shortly after guest work finished.
    AfterGuest,
    /// A program named in `rules.exclusive_programs` runs. Guests make way as on a
    /// return, but this is never counted as an interruption.
    ExclusiveProgram,
}

/// A counted interruption.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Interruption {
    /// The local day it counts against.
    pub day: NaiveDate,
    /// 1-based: the n-th interruption of that day.
    pub number: u32,
    /// The limit in force when it was counted.
    pub limit: u32,
    pub cause: ReturnCause,
    pub at_utc: DateTime<Utc>,
    pub at_mono: MonoMs,
    pub mode: EvictionMode,
}

/// The policy's outputs, in order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Action {
    StateChanged {
        from: StateKind,
        to: StateKind,
        /// Why, for people and the ledger: one of the policy's fixed phrases (no
        /// allocation per transition), or a phrase naming an exclusive program.
        reason: std::borrow::Cow<'static, str>,
    },
    Directive(GuestDirective),
    InterruptionCounted(Interruption),
    /// Pause, donate-now or the limit changed: persist [`Policy::saved`].
    OwnerSettingsChanged,
    /// The wall clock was set by this many ms relative to the monotonic clock.
    ClockStepped {
        by_ms: i64,
    },
    /// A new local day began; the budget starts afresh.
    DayRolled {
        day: NaiveDate,
    },
}

/// A deadline kept on the monotonic clock and, for restarts after a reboot, the wall
/// clock.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct Deadline {
    pub mono: MonoMs,
    pub utc: DateTime<Utc>,
    /// The boot the monotonic reading belongs to.
    pub boot_id: String,
}

/// An active pause, as persisted.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum SavedPause {
    Until(Deadline),
    /// Until this local day begins.
    UntilDay {
        day: NaiveDate,
    },
    UntilResumed,
}

/// An active donate-now offer, as persisted.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum SavedDonate {
    Until(Deadline),
    UntilReturn,
}

/// What survives a restart (the ledger stores it; the day's interruption count comes
/// from the ledger's interruption rows).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Saved {
    pub pause: Option<SavedPause>,
    pub donate: Option<SavedDonate>,
    /// The latest local day the budget has counted against.
    pub budget_day: Option<NaiveDate>,
}

/// A snapshot for `lull status` and the tray.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct PolicyStatus {
    pub state: StateKind,
    pub not_allowed: Option<NotAllowedReason>,
    /// Seconds in the current state.
    pub state_for_s: u64,
    /// Seconds the machine has been continuously available (0 when not).
    pub idle_for_s: u64,
    pub available: bool,
    pub directive: GuestDirective,
    pub guests_present: bool,
    pub budget_day: NaiveDate,
    pub interruptions_today: u32,
    pub interruption_limit: u32,
    /// Seconds until the pause ends; `None` when not paused or paused until resumed.
    pub paused_for_s: Option<u64>,
    pub pause: Option<SavedPause>,
    pub donate_now: bool,
    /// Seconds left in a timed donate-now offer.
    pub donate_for_s: Option<u64>,
    /// Owner utilisation h over the linger window.
    pub owner_utilisation_h: f32,
    pub eviction_mode: EvictionMode,
    /// Last owner CPU reading (fraction of the machine).
    pub owner_cpu: f32,
    pub recruitment_threshold_s: u64,
    /// The program from `rules.exclusive_programs` running now, as the owner named it.
    #[serde(default)]
    pub exclusive_program: Option<String>,
    /// Seconds every reading has shown the owner light (CPU below
    /// `availability.light_cpu_max`, memory steady); 0 when the last one did not.
    #[serde(default)]
    pub light_for_s: u64,
    /// The owner lends while light (`availability.lend_while_light`).
    #[serde(default)]
    pub lend_while_light: bool,
    /// Why the policy entered the current state, in its own words ("owner returned",
    /// "donate-now offer ended by the owner", "idle for the recruitment threshold").
    #[serde(default)]
    pub reason: String,
    /// What keeps the machine from being available now (`None`: available): the owner's
    /// input, an idle inhibitor, CPU or memory beyond the definition, an exclusive program.
    #[serde(default)]
    pub busy: Option<ReturnCause>,
}

#[derive(Clone, Debug, PartialEq)]
enum Pause {
    Until(MonoMs),
    UntilDay(NaiveDate),
    UntilResumed,
}

#[derive(Clone, Debug, PartialEq)]
enum Donate {
    Until(MonoMs),
    /// `armed` once no input has come for [`DONATE_ARM`] since the offer (`since`): the
    /// click that made the offer is itself input and must not end it.
    UntilReturn {
        since: MonoMs,
        armed: bool,
    },
}

/// How long no input must come after a "Donate until I return" offer before the owner's
/// next input ends it. What ends it is the input rule of an owner's return (a key, a
/// button, pointer motion, a session that stops being idle), never owner CPU or memory:
/// the owner who offered the machine may leave a build running, and guests run below it.
pub const DONATE_ARM: Duration = Duration::from_secs(10);

/// How closely the driver must read the machine (owner CPU and memory, power, heat) in
/// the current state: see [`Policy::watch`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Watch {
    /// Guest work is present, an offer is running or a hardware rule must be seen to
    /// clear: a reading every sampling interval, since any reading may stop guests.
    Close,
    /// No guest work: readings only move the idle clock and the status, and a reading
    /// taken before guest work starts decides its start; a relaxed interval is enough.
    Relaxed,
}

/// How long one input event keeps the owner present. The input sink forwards at most
/// one event per 200 ms (`agent_core::input::COALESCE_MS`), so a longer hold keeps
/// continuous input in one `owner_active` span instead of flapping to `idle` between
/// forwarded events; the idle clock starts when the hold ends.
pub(crate) const INPUT_HOLD: Duration = Duration::from_millis(250);

/// The policy state machine.
#[derive(Clone, Debug)]
pub struct Policy {
    cfg: PolicyConfig,
    state: StateKind,
    state_since: MonoMs,
    /// Why the current state was entered (see [`PolicyStatus::reason`]).
    state_reason: std::borrow::Cow<'static, str>,
    not_allowed: Option<NotAllowedReason>,
    directive: GuestDirective,

    // Observations.
    last_sample: Option<Sample>,
    sample_after_return: bool,
    last_input: Option<MonoMs>,
    input_pending: bool,
    presence_hold: bool,
    inhibited: bool,
    not_available_at: MonoMs,
    available: bool,
    busy_cause: Option<ReturnCause>,
    mem: GrowthWindow,
    util: Window<f32>,

    // Guests.
    guests_present: bool,
    /// Guest work recruited while the owner was away finished at this time.
    unattended_guest_end: Option<MonoMs>,
    /// PM: evict at this time if the owner is still there.
    evict_at: Option<MonoMs>,
    linger_since: Option<MonoMs>,
    /// Since when every reading has shown the owner light (lend while light).
    light_since: Option<MonoMs>,
    /// The guest work present started while lending to a light owner and nothing has been
    /// counted for it yet: stopping it on the owner's account counts once.
    lent_uncounted: bool,
    /// What the driver knows of the pool for the migration decision.
    pool: PoolView,
    /// T_migr as the guest runtime estimates it from the checkpoint size; the configured
    /// `eviction.migration_cost_s` until it does.
    migration_cost: Option<Duration>,

    /// The allowed hours, parsed once per configuration.
    hours: rules::CompiledHours,

    // The owner's settings.
    pause: Option<Pause>,
    donate: Option<Donate>,
    /// The owner ended a donate-now offer with a command (resume, pause, a new offer):
    /// the guest work it covered must earn its place again, uncounted.
    offer_ended_by_owner: bool,
    /// The owner acted (a command, a new configuration) since the last event was
    /// handled: what the evaluation of this event stops, it stops on the owner's own
    /// account, and nothing is counted.
    owner_acted: bool,

    // The social contract.
    budget_day: NaiveDate,
    used_today: u32,

    last_now: Option<Now>,

    /// The quiet fast path of [`Self::handle`].
    quiet: QuietPath,
}

/// What the policy's evaluation branches on that a reading or the passing of time can
/// move. Between two evaluations with the same `Quiet` (and no event but a reading), the
/// evaluation takes the same branch and changes nothing but the idle clock's start: see
/// [`Policy::handle`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Quiet {
    /// Why the machine is not available now (`None`: available).
    busy: Option<ReturnCause>,
    recruitable: bool,
    light: bool,
    within_hours: bool,
    pause_over: bool,
    /// Pause-and-migrate: the pause before eviction is over (or none is set).
    evict_due: bool,
    hardware: Option<NotAllowedReason>,
}

/// The fast path's switch and its armed key. Its `Debug` shows neither, so two policies
/// fed the same events print the same with the fast path on or off (the equivalence test
/// compares them so).
#[derive(Clone)]
struct QuietPath {
    enabled: bool,
    /// The key of the last evaluation, when it settled and its state is one the fast
    /// path may keep.
    armed: Option<Quiet>,
    /// Readings taken in without an evaluation.
    taken: u64,
}

impl std::fmt::Debug for QuietPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("QuietPath")
    }
}

/// What the driver knows of the pool for seed 000's migration decision
/// (`migration::decide`). The default, knowing nothing, assumes a free machine at
/// utilisation 0 and a job that outlasts the owner's episode: plain `T_lingr` with l = 0.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PoolView {
    /// The owner utilisation l of the best free machine; `None`: no free machine.
    pub destination_load: Option<f32>,
    /// The guest job's predicted remaining time on an unloaded machine, if known.
    pub remaining: Option<Duration>,
    /// The guest work present is a pool's, and the pool (its coordinator) decides
    /// whether it moves when the driver asks: under Linger-Longer a "migrate" decision
    /// then keeps the guest lingering (no eviction, nothing counted) and only tells the
    /// driver, through [`Policy::migration_decision`], that it is time to ask.
    pub pool_decides: bool,
}

impl Default for PoolView {
    fn default() -> Self {
        Self { destination_load: Some(0.0), remaining: None, pool_decides: false }
    }
}

/// Wall-clock steps larger than this (relative to the monotonic clock) are reported.
const CLOCK_STEP_MS: i64 = 2_000;

impl Policy {
    /// A fresh policy at `now`, with the day's already-counted interruptions and the
    /// persisted owner settings from the ledger. `boot_id` names the current boot so a
    /// saved monotonic deadline is trusted only within the boot that wrote it.
    pub fn new(cfg: PolicyConfig, now: Now, saved: Saved, used_today: u32, boot_id: &str) -> Self {
        let today = now.local_date();
        let budget_day = saved.budget_day.map_or(today, |d| d.max(today));
        // Interruptions counted on an earlier day do not carry over.
        let used_today = if saved.budget_day.is_some_and(|d| d < budget_day) { 0 } else { used_today };
        let restore = |d: &Deadline| -> MonoMs {
            if !d.boot_id.is_empty() && d.boot_id == boot_id {
                d.mono
            } else {
                let left = (d.utc - now.utc).num_milliseconds().max(0) as u64;
                MonoMs(now.mono.0 + left)
            }
        };
        let pause = saved.pause.as_ref().map(|p| match p {
            SavedPause::Until(d) => Pause::Until(restore(d)),
            SavedPause::UntilDay { day } => Pause::UntilDay(*day),
            SavedPause::UntilResumed => Pause::UntilResumed,
        });
        let donate = saved.donate.as_ref().map(|d| match d {
            SavedDonate::Until(d) => Donate::Until(restore(d)),
            SavedDonate::UntilReturn => Donate::UntilReturn { since: now.mono, armed: false },
        });
        let mem = GrowthWindow::new(Duration::from_secs(cfg.availability.memory_window_s));
        let util = Window::new(Duration::from_secs(cfg.eviction.linger_window_s));
        Self {
            hours: rules::CompiledHours::new(&cfg.rules.hours),
            cfg,
            state: StateKind::OwnerActive,
            state_since: now.mono,
            state_reason: "agent started".into(),
            not_allowed: None,
            directive: GuestDirective::Evict,
            last_sample: None,
            sample_after_return: false,
            last_input: None,
            input_pending: false,
            presence_hold: false,
            inhibited: false,
            // Until told otherwise the owner may just have been here: the idle clock
            // starts at start-up.
            not_available_at: now.mono,
            available: false,
            busy_cause: None,
            mem,
            util,
            guests_present: false,
            unattended_guest_end: None,
            evict_at: None,
            linger_since: None,
            light_since: None,
            lent_uncounted: false,
            pool: PoolView::default(),
            migration_cost: None,
            pause,
            donate,
            offer_ended_by_owner: false,
            owner_acted: false,
            budget_day,
            used_today,
            last_now: None,
            quiet: QuietPath { enabled: true, armed: None, taken: 0 },
        }
    }

    /// Turns the quiet fast path of [`Self::handle`] on (the default) or off. It never
    /// changes an outcome; turning it off is for the test that proves so
    /// (`core/tests/policy_fast_path.rs`) and for measuring what it saves.
    pub fn set_fast_path(&mut self, enabled: bool) {
        self.quiet = QuietPath { enabled, armed: None, taken: self.quiet.taken };
    }

    /// How many readings the quiet fast path has taken in without an evaluation.
    pub fn quiet_readings(&self) -> u64 {
        self.quiet.taken
    }

    /// The configuration in force.
    pub fn config(&self) -> &PolicyConfig {
        &self.cfg
    }

    /// Replaces the configuration (thresholds, limit, mode, rules) keeping all state.
    /// It is the owner's own act: a driver feeds [`Event::Tick`] right after, and what that
    /// evaluation stops (a new threshold that makes the machine busy, a lower limit) is
    /// never counted as an interruption.
    pub fn set_config(&mut self, cfg: PolicyConfig) {
        self.owner_acted = true;
        self.mem = GrowthWindow::new(Duration::from_secs(cfg.availability.memory_window_s));
        self.util = Window::new(Duration::from_secs(cfg.eviction.linger_window_s));
        self.hours = rules::CompiledHours::new(&cfg.rules.hours);
        self.cfg = cfg;
        self.quiet.armed = None;
    }

    /// The current state.
    pub fn state(&self) -> StateKind {
        self.state
    }

    /// Sets T_migr as measured for the present guest work (`None`: the configured estimate).
    pub fn set_migration_cost(&mut self, t: Option<Duration>) {
        self.migration_cost = t;
        self.quiet.armed = None;
    }

    /// Tells the policy what is known of the pool (a free machine's load, the job's
    /// remaining time) for the Linger-Longer migration decision. Like
    /// [`Self::set_migration_cost`] it takes effect at the next event: a driver that
    /// changes it feeds one (a reading or [`Event::Tick`]).
    pub fn set_pool_view(&mut self, pool: PoolView) {
        self.pool = pool;
        self.quiet.armed = None;
    }

    /// Seed 000 §5.2's decision for guest work lingering under Linger-Longer now
    /// (`None` when not lingering under LL): what [`Self::handle`] acts on, or, when the
    /// pool decides ([`PoolView::pool_decides`]), when the driver asks the pool.
    pub fn migration_decision(&self, now: Now) -> Option<migration::MigrationDecision> {
        let since = self.linger_since?;
        (self.state == StateKind::Lingering && self.cfg.eviction.mode == EvictionMode::LingerLonger)
            .then(|| migration::decide(&self.migration_inputs(now.mono.since(since))))
    }

    /// How long guest work has lingered in this episode of owner activity (`None` when
    /// it is not lingering).
    pub fn lingered_for(&self, now: Now) -> Option<Duration> {
        let since = self.linger_since?;
        (self.state == StateKind::Lingering).then(|| now.mono.since(since))
    }

    fn migration_inputs(&self, lingered_for: Duration) -> migration::MigrationInputs {
        migration::MigrationInputs {
            here_load: self.util.mean(),
            lingered_for,
            migration_cost: self.migration_cost(),
            destination_load: self.pool.destination_load,
            remaining: self.pool.remaining,
        }
    }

    /// The T_migr in use.
    pub fn migration_cost(&self) -> Duration {
        self.migration_cost.unwrap_or(Duration::from_secs(self.cfg.eviction.migration_cost_s))
    }

    /// The current guest directive.
    pub fn directive(&self) -> GuestDirective {
        self.directive
    }

    /// True when guest work should be frozen the instant input arrives (the input
    /// thread's fast path consults this): guests are running and an owner return would
    /// not be ignored.
    pub fn freeze_on_input(&self) -> bool {
        self.guests_present
            && matches!(self.state, StateKind::Donating)
            && match self.donate {
                None => true,
                Some(Donate::UntilReturn { armed, .. }) => armed,
                Some(Donate::Until(_)) => false,
            }
    }

    /// What must be persisted to survive a restart.
    pub fn saved(&self, now: Now, boot_id: &str) -> Saved {
        let deadline = |m: MonoMs| Deadline {
            mono: m,
            utc: now.utc + chrono::Duration::milliseconds(m.0.saturating_sub(now.mono.0) as i64),
            boot_id: boot_id.to_owned(),
        };
        Saved {
            pause: self.pause.as_ref().map(|p| match p {
                Pause::Until(m) => SavedPause::Until(deadline(*m)),
                Pause::UntilDay(d) => SavedPause::UntilDay { day: *d },
                Pause::UntilResumed => SavedPause::UntilResumed,
            }),
            donate: self.donate.as_ref().map(|d| match d {
                Donate::Until(m) => SavedDonate::Until(deadline(*m)),
                Donate::UntilReturn { .. } => SavedDonate::UntilReturn,
            }),
            budget_day: Some(self.budget_day),
        }
    }

    /// The status snapshot.
    pub fn status(&self, now: Now) -> PolicyStatus {
        PolicyStatus {
            state: self.state,
            not_allowed: self.not_allowed,
            state_for_s: now.mono.since(self.state_since).as_secs(),
            idle_for_s: if self.available { now.mono.since(self.not_available_at).as_secs() } else { 0 },
            available: self.available,
            directive: self.directive,
            guests_present: self.guests_present,
            budget_day: self.budget_day,
            interruptions_today: self.used_today,
            interruption_limit: self.cfg.budget.interruptions_per_day,
            paused_for_s: match &self.pause {
                // Rounded up: a pause with 0.4 s left is not "0s" left.
                Some(Pause::Until(m)) => Some(m.0.saturating_sub(now.mono.0).div_ceil(1000)),
                _ => None,
            },
            pause: self.saved(now, "").pause,
            donate_now: self.donate.is_some(),
            donate_for_s: match &self.donate {
                Some(Donate::Until(m)) => Some(m.0.saturating_sub(now.mono.0).div_ceil(1000)),
                _ => None,
            },
            owner_utilisation_h: self.util.mean(),
            eviction_mode: self.cfg.eviction.mode,
            owner_cpu: self.last_sample.as_ref().map_or(0.0, |s| s.owner_cpu),
            recruitment_threshold_s: self.cfg.availability.recruitment_threshold_s,
            exclusive_program: self.exclusive_program().map(str::to_owned),
            light_for_s: self.light_since.map_or(0, |t| now.mono.since(t).as_secs()),
            lend_while_light: self.cfg.availability.lend_while_light,
            reason: self.state_reason.to_string(),
            busy: if self.available { None } else { self.busy_cause },
        }
    }

    /// The earliest moment after `now` at which the policy may decide differently with no
    /// new event (quinn-proto's `poll_timeout`): a timed pause or offer ending, the
    /// recruitment threshold or the donate-now arming delay being reached, a PM pause or
    /// a linger time running out, the allowed hours opening or closing, the next local
    /// day. A driver sleeps until then (or until an event or its next reading, see
    /// [`Self::watch`]) and feeds [`Event::Tick`]. `None` only if nothing is timed.
    ///
    /// Calendar times are converted with the current offset between the local and the
    /// monotonic clock; a wall clock set meanwhile makes the wake-up early or late, so
    /// drivers cap their sleep (the property test `sleeping_to_the_deadline_misses_nothing`
    /// checks that a tick before the deadline never changes anything).
    pub fn next_deadline(&self, now: Now) -> Option<MonoMs> {
        let mut next: Option<MonoMs> = None;
        let mut at = |m: MonoMs| {
            if m > now.mono {
                next = Some(next.map_or(m, |n| n.min(m)));
            }
        };
        // Rounded up to the next millisecond: a calendar moment less than a millisecond
        // away is still a deadline (rounded down it would be `now` and dropped, and the
        // driver would sleep past local midnight). A wake-up a fraction of a millisecond
        // early (`now.mono` is truncated) finds this deadline 1 ms ahead again.
        let local_to_mono = |t: chrono::NaiveDateTime| {
            let d = (t - now.local).to_std().unwrap_or_default();
            MonoMs(now.mono.0 + d.as_micros().div_ceil(1000) as u64)
        };
        let midnight = |d: NaiveDate| d.and_hms_opt(0, 0, 0).map(local_to_mono);
        match &self.pause {
            Some(Pause::Until(m)) => at(*m),
            Some(Pause::UntilDay(d)) => midnight(*d).into_iter().for_each(&mut at),
            _ => {}
        }
        match &self.donate {
            Some(Donate::Until(m)) => at(*m),
            Some(Donate::UntilReturn { since, armed: false }) if !self.presence_hold => {
                at(self.last_input.map_or(*since, |t| t.max(*since)).plus(DONATE_ARM))
            }
            _ => {}
        }
        if self.available {
            at(self.not_available_at.plus(self.threshold()));
        } else if let (Some(ReturnCause::Input), Some(t), false) = (self.busy_cause, self.last_input, self.presence_hold) {
            // The input hold ends; the machine may be available from then on.
            at(t.plus(INPUT_HOLD));
        }
        if let Some(t) = self.evict_at {
            at(t);
        }
        if let (StateKind::Lingering, EvictionMode::LingerLonger, Some(since)) = (self.state, self.cfg.eviction.mode, self.linger_since) {
            // Between events h and the pool view hold still, so the decision can only
            // turn to "migrate" when the linger time is reached.
            if let Some(limit) = self.pool.destination_load.and_then(|l| migration::linger_time(self.util.mean(), l, self.migration_cost()))
            {
                at(since.plus(limit));
            }
        }
        // Lend while light: the owner has been light long enough.
        if let (true, Some(since)) = (self.cfg.availability.lend_while_light, self.light_since) {
            at(since.plus(self.light_for()));
        }
        // The next local day: the budget starts afresh, a pause until tomorrow ends.
        if let Some(d) = now.local_date().succ_opt() {
            midnight(d).into_iter().for_each(&mut at);
        }
        if let Some(t) = self.hours.next_change(now.local) {
            at(local_to_mono(t));
        }
        next
    }

    /// How closely readings matter now. Anything that can stop guest work from a
    /// reading (owner CPU or memory, battery, heat) needs [`Watch::Close`]; with no
    /// guest work a reading can only move the idle clock, so [`Watch::Relaxed`].
    pub fn watch(&self) -> Watch {
        let close = self.guests_present
            || matches!(self.state, StateKind::Donating | StateKind::Lingering | StateKind::Evicting)
            || self.donate.is_some()
            || matches!(self.not_allowed, Some(NotAllowedReason::Battery | NotAllowedReason::Heat));
        if close {
            Watch::Close
        } else {
            Watch::Relaxed
        }
    }

    /// `T_lingr = ((1 − l)/(h − l)) · T_migr` (seed 000, eq. 4): how long to linger at
    /// owner utilisation `h` before moving to a machine at `l`. Infinite (None) when
    /// h ≤ l. See `migration::linger_time`.
    pub fn linger_time(h: f32, l: f32, t_migr: Duration) -> Option<Duration> {
        migration::linger_time(h, l, t_migr)
    }

    /// Feeds one event at `now`; returns what the driver must do, in order.
    ///
    /// **The quiet fast path.** Most readings change nothing: the owner stays away (or
    /// busy), guest work runs on. When an evaluation settles in a state whose next
    /// evaluation depends only on a small key (`Quiet`: not lingering, not a
    /// linger-mode eviction still deciding, no donate-now offer, no exclusive program),
    /// its key is armed; a later reading that leaves the key as it was (the same cause of
    /// unavailability, recruitability, lightness, allowed hours, pause and
    /// pause-and-migrate timers, hardware rules), with no clock step and no new day, is
    /// taken in (windows, last reading) and the evaluation is skipped, but for restarting
    /// the idle clock while the machine is busy, as the evaluation does. The outcome is the
    /// same as with the path off ([`Self::set_fast_path`]): the property test
    /// `core/tests/policy_fast_path.rs` feeds random events to both and compares every
    /// action and the whole state after each.
    pub fn handle(&mut self, now: Now, event: Event) -> Vec<Action> {
        let mut out = Vec::new();
        self.track_clock(now, &mut out);
        self.roll_day(now, &mut out);
        let reading = matches!(event, Event::Sample(_));
        match event {
            Event::Sample(s) => {
                self.mem.push(now.mono, s.owner_mem_bytes);
                self.util.push(now.mono, s.owner_cpu);
                // A limit of 1.0 (the whole machine) takes CPU out of the light test.
                let l = self.cfg.availability.light_cpu_max;
                let light = (l >= 1.0 || (s.owner_cpu as f64) < l) && self.memory_steady(s.mem_total_bytes);
                self.light_since = if light { Some(self.light_since.unwrap_or(now.mono)) } else { None };
                self.last_sample = Some(s);
                self.sample_after_return = true;
            }
            Event::Input(ev) => self.observe_input(ev),
            Event::Command(c) => self.command(now, c, &mut out),
            Event::GuestsPresent(p) => {
                if self.guests_present && !p && self.state == StateKind::Donating && self.donate.is_none() {
                    self.unattended_guest_end = Some(now.mono);
                }
                if !p {
                    // The lent guest work is gone: its episode ends uncounted.
                    self.lent_uncounted = false;
                }
                self.guests_present = p;
            }
            Event::Tick => {}
        }
        if let (true, true, false, Some(armed)) = (reading, out.is_empty(), self.owner_acted, self.quiet.armed) {
            if self.quiet_key(now) == Some(armed) {
                // What the skipped evaluation would have written: the rest it would
                // rewrite with the values it holds already.
                if let Some(cause) = armed.busy {
                    self.restart_idle_clock(now, cause);
                }
                self.quiet.taken += 1;
                return out;
            }
        }
        self.evaluate(now, &mut out);
        // One evaluation can leave a state the next one changes at once (an offer that
        // ended into `evicting` with no guest present becomes `owner_active` or
        // `out_of_budget`). Settle here, so the state `handle` leaves holds until the
        // next event or `next_deadline()`: a driver that sleeps until then misses nothing.
        let mut settled = false;
        for _ in 0..4 {
            let before = out.len();
            self.evaluate(now, &mut out);
            if out.len() == before {
                settled = true;
                break;
            }
        }
        self.quiet.armed = if self.quiet.enabled && settled { self.quiet_key(now) } else { None };
        self.owner_acted = false;
        out
    }

    /// The fast path's key now (see [`Self::handle`]), `None` in a state whose next
    /// evaluation may depend on more: lingering or a linger-mode eviction still deciding
    /// (the utilisation h of every reading counts there), a donate-now offer, an exclusive
    /// program, guest work that just ended while the owner is busy.
    fn quiet_key(&self, now: Now) -> Option<Quiet> {
        if self.donate.is_some() || self.exclusive_program().is_some() {
            return None;
        }
        let keeps = match self.state {
            StateKind::Lingering => false,
            StateKind::Evicting => {
                self.directive == GuestDirective::Evict
                    || matches!(self.cfg.eviction.mode, EvictionMode::ImmediateEviction | EvictionMode::PauseAndMigrate)
            }
            _ => true,
        };
        if !keeps {
            return None;
        }
        let busy = self.availability(now);
        if busy.is_some() && self.unattended_guest_end.is_some() {
            return None;
        }
        Some(Quiet {
            busy,
            recruitable: busy.is_none() && now.mono.since(self.not_available_at) >= self.threshold(),
            light: self.light(now),
            within_hours: self.hours.allows(now.local),
            pause_over: self.pause_over(now),
            evict_due: self.evict_at.is_none_or(|t| now.mono >= t),
            hardware: rules::hardware_block(&self.cfg.rules, self.last_sample.as_ref()),
        })
    }

    /// The machine is busy now: the idle clock starts again (input keeps the owner
    /// present until its hold ends, so then).
    fn restart_idle_clock(&mut self, now: Now, cause: ReturnCause) {
        self.not_available_at = match (cause, self.last_input) {
            (ReturnCause::Input, Some(t)) if !self.presence_hold => now.mono.max(t.plus(INPUT_HOLD)),
            _ => now.mono,
        };
        self.busy_cause = Some(cause);
    }

    /// A timed pause ran out, or the day a pause lasted until began.
    fn pause_over(&self, now: Now) -> bool {
        match self.pause {
            Some(Pause::Until(m)) => now.mono >= m,
            Some(Pause::UntilDay(d)) => self.budget_day >= d,
            _ => false,
        }
    }

    fn track_clock(&mut self, now: Now, out: &mut Vec<Action>) {
        if let Some(prev) = self.last_now {
            // Within one UTC day the date parts cancel: the time of day alone gives the
            // same difference, without the calendar arithmetic (this runs on every event).
            let (a, b) = (now.utc.naive_utc(), prev.utc.naive_utc());
            let wall = if a.date() == b.date() { a.time() - b.time() } else { a - b }.num_milliseconds();
            let mono = now.mono.0 as i64 - prev.mono.0 as i64;
            if (wall - mono).abs() > CLOCK_STEP_MS {
                out.push(Action::ClockStepped { by_ms: wall - mono });
            }
        }
        self.last_now = Some(now);
    }

    /// The budget day only moves forward: a clock set back keeps today's count, a new
    /// local day starts afresh.
    fn roll_day(&mut self, now: Now, out: &mut Vec<Action>) {
        let today = now.local_date();
        if today > self.budget_day {
            self.budget_day = today;
            self.used_today = 0;
            out.push(Action::DayRolled { day: today });
        }
    }

    fn observe_input(&mut self, ev: InputEvent) {
        match ev.signal {
            InputSignal::Activity => {
                self.last_input = Some(self.last_input.map_or(ev.at, |t| t.max(ev.at)));
                self.input_pending = true;
            }
            InputSignal::Resumed => {
                self.presence_hold = true;
                self.last_input = Some(self.last_input.map_or(ev.at, |t| t.max(ev.at)));
                self.input_pending = true;
            }
            InputSignal::Idled { idle_for_ms } => {
                self.presence_hold = false;
                let went = MonoMs(ev.at.0.saturating_sub(idle_for_ms));
                self.last_input = Some(self.last_input.map_or(went, |t| t.max(went)));
            }
            InputSignal::Inhibited(held) => {
                if held && !self.inhibited {
                    self.input_pending = true;
                }
                self.inhibited = held;
            }
        }
    }

    fn command(&mut self, now: Now, c: Command, out: &mut Vec<Action>) {
        self.owner_acted = true;
        let offered = self.donate.is_some();
        match c {
            Command::Pause(span) => {
                self.pause = Some(match span {
                    PauseSpan::For { secs } => Pause::Until(now.mono.plus(Duration::from_secs(secs))),
                    PauseSpan::UntilTomorrow => Pause::UntilDay(self.budget_day.succ_opt().unwrap_or(self.budget_day)),
                    PauseSpan::UntilResumed => Pause::UntilResumed,
                });
                self.donate = None;
            }
            Command::Resume => {
                self.pause = None;
                self.donate = None;
            }
            Command::Donate(span) => {
                self.pause = None;
                self.donate = Some(match span {
                    DonateSpan::For { secs } => Donate::Until(now.mono.plus(Duration::from_secs(secs))),
                    DonateSpan::UntilReturn => Donate::UntilReturn { since: now.mono, armed: false },
                });
            }
            Command::SetLimit(n) => self.cfg.budget.interruptions_per_day = n,
        }
        self.offer_ended_by_owner |= offered && self.donate.is_none();
        out.push(Action::OwnerSettingsChanged);
    }

    /// The owner is at the keyboard or mouse: input within its hold, or a session that
    /// said it stopped being idle.
    fn input_present(&self, now: Now) -> bool {
        self.presence_hold || self.input_pending || self.last_input.is_some_and(|t| t.plus(INPUT_HOLD) > now.mono)
    }

    /// The exclusive program the last reading found running, if any.
    fn exclusive_program(&self) -> Option<&str> {
        self.last_sample.as_ref().and_then(|s| s.exclusive_program.as_deref())
    }

    /// Availability now, and the cause when not available.
    fn availability(&self, now: Now) -> Option<ReturnCause> {
        // The owner's program holds the machine: not available, so the idle clock starts
        // again (and the recruitment threshold runs) only once it ends.
        if self.exclusive_program().is_some() {
            return Some(ReturnCause::ExclusiveProgram);
        }
        if self.inhibited {
            return Some(ReturnCause::Inhibitor);
        }
        if self.input_present(now) {
            return Some(ReturnCause::Input);
        }
        // No reading yet (the agent just started): the owner may be at work, so the
        // machine is not available until a reading says otherwise. Saying "available"
        // here made a busy machine flap owner_active → idle → owner_active at start-up.
        // No guest can be present before the first reading, so nothing is counted on it.
        let Some(s) = self.last_sample.as_ref() else { return Some(ReturnCause::OwnerCpu) };
        // A maximum of 1.0 (the whole machine) takes CPU out of the definition.
        let cpu_max = self.cfg.availability.owner_cpu_max;
        if cpu_max < 1.0 && s.owner_cpu as f64 >= cpu_max {
            return Some(ReturnCause::OwnerCpu);
        }
        if !self.memory_steady(s.mem_total_bytes) {
            return Some(ReturnCause::OwnerMemory);
        }
        None
    }

    /// The owner's memory grew by no more than `memory_growth_max` over its window.
    fn memory_steady(&self, mem_total_bytes: u64) -> bool {
        let allowed = (self.cfg.availability.memory_growth_max * mem_total_bytes as f64) as u64;
        self.mem.growth() <= allowed
    }

    fn light_for(&self) -> Duration {
        Duration::from_secs(self.cfg.availability.light_for_s)
    }

    /// Lend while light: the owner opted in and has been light (every reading below `l`,
    /// memory steady) for `light_for_s`, holds no idle inhibitor and runs no exclusive
    /// program.
    fn light(&self, now: Now) -> bool {
        self.cfg.availability.lend_while_light
            && !self.inhibited
            && self.exclusive_program().is_none()
            && self.light_since.is_some_and(|t| now.mono.since(t) >= self.light_for())
    }

    /// Why lent guest work must stop on the owner's account (`None`: the owner turned
    /// lending off, which is their choice and counts nothing).
    fn light_lost_cause(&self) -> Option<ReturnCause> {
        if !self.cfg.availability.lend_while_light {
            None
        } else if self.inhibited {
            Some(ReturnCause::Inhibitor)
        } else if self.last_sample.as_ref().is_some_and(|s| !self.memory_steady(s.mem_total_bytes)) {
            Some(ReturnCause::OwnerMemory)
        } else {
            Some(ReturnCause::OwnerCpu)
        }
    }

    /// Counts the one interruption of lent guest work stopped on the owner's account.
    fn count_lent(&mut self, now: Now, cause: ReturnCause, out: &mut Vec<Action>) {
        if std::mem::take(&mut self.lent_uncounted) {
            self.count_interruption(now, cause, out);
        }
    }

    /// Lent guest work whose owner is no longer light: it lingers on where the mode
    /// lingers and the owner's utilisation allows (nothing counted), else it is stopped
    /// as the mode stops guests on a return, which counts once.
    fn stop_lending(&mut self, now: Now, out: &mut Vec<Action>) {
        let cause = self.light_lost_cause();
        self.evict_at = None;
        self.linger_since = None;
        let mode = self.cfg.eviction.mode;
        let lingerable = self.util.mean() as f64 <= self.cfg.eviction.linger_cpu_max
            && matches!(cause, Some(ReturnCause::OwnerCpu | ReturnCause::Inhibitor));
        if lingerable && matches!(mode, EvictionMode::LingerLonger | EvictionMode::LingerForever) {
            self.linger_since = Some(now.mono);
            self.set(now, StateKind::Lingering, "owner no longer light: lingering", out);
            self.direct(GuestDirective::Linger, out);
            return;
        }
        let Some(cause) = cause else {
            self.lent_uncounted = false;
            self.set(now, StateKind::Evicting, "lend while light turned off", out);
            self.direct(GuestDirective::Evict, out);
            return;
        };
        self.count_lent(now, cause, out);
        self.set(now, StateKind::Evicting, "owner no longer light", out);
        let d = match mode {
            EvictionMode::ImmediateEviction | EvictionMode::LingerLonger => GuestDirective::Evict,
            EvictionMode::PauseAndMigrate => {
                self.evict_at = Some(now.mono.plus(Duration::from_secs(self.cfg.eviction.pause_s)));
                GuestDirective::Freeze
            }
            EvictionMode::LingerForever => GuestDirective::Freeze,
        };
        self.direct(d, out);
    }

    fn expire_settings(&mut self, now: Now, busy: bool, out: &mut Vec<Action>) {
        if self.pause_over(now) {
            self.pause = None;
            out.push(Action::OwnerSettingsChanged);
        }
        if let Some(Donate::Until(m)) = self.donate {
            if now.mono >= m {
                self.donate = None;
                out.push(Action::OwnerSettingsChanged);
                self.offer_over(now, busy, "donate-now offer ended", out);
            }
        }
        if std::mem::take(&mut self.offer_ended_by_owner) {
            self.offer_over(now, busy, "donate-now offer ended by the owner", out);
        }
    }

    /// A donate-now offer ended (it ran out, or the owner ended it): guest work present
    /// now was not recruited by the owner's absence, so unless the machine has been idle
    /// for the recruitment threshold it is stopped, without counting.
    fn offer_over(&mut self, now: Now, busy: bool, why: &'static str, out: &mut Vec<Action>) {
        if busy || !self.available || now.mono.since(self.not_available_at) < self.threshold() {
            self.unattended_guest_end = None;
            self.set(now, StateKind::Evicting, why, out);
        }
    }

    fn threshold(&self) -> Duration {
        Duration::from_secs(self.cfg.availability.recruitment_threshold_s)
    }

    fn set(&mut self, now: Now, to: StateKind, reason: impl Into<std::borrow::Cow<'static, str>>, out: &mut Vec<Action>) {
        if self.state != to {
            let reason = reason.into();
            self.state_reason = reason.clone();
            out.push(Action::StateChanged { from: self.state, to, reason });
            self.state = to;
            self.state_since = now.mono;
        }
    }

    fn direct(&mut self, d: GuestDirective, out: &mut Vec<Action>) {
        if self.directive != d {
            self.directive = d;
            out.push(Action::Directive(d));
        }
    }

    fn count_interruption(&mut self, now: Now, cause: ReturnCause, out: &mut Vec<Action>) {
        let limit = self.cfg.budget.interruptions_per_day;
        if self.used_today >= limit {
            return;
        }
        self.used_today += 1;
        out.push(Action::InterruptionCounted(Interruption {
            day: self.budget_day,
            number: self.used_today,
            limit,
            cause,
            at_utc: now.utc,
            at_mono: now.mono,
            mode: self.cfg.eviction.mode,
        }));
    }

    /// Decides the state and the guest directive from what the policy knows at `now`,
    /// in order of precedence: the first step that decides ends the evaluation.
    fn evaluate(&mut self, now: Now, out: &mut Vec<Action>) {
        let busy = self.update_availability(now, out);
        let idle_for = now.mono.since(self.not_available_at);
        let recruitable = self.available && idle_for >= self.threshold();
        self.not_allowed = None;
        if self.owner_commands_and_hard_rules(now, out).is_break()
            || self.owner_return(now, busy, out).is_break()
            || self.budget_used_up(now, out).is_break()
            || self.guest_work_after_return(now, recruitable, out).is_break()
        {
            return;
        }
        self.owner_activity_alone(now, recruitable, out);
    }

    /// Takes in whether the machine is available now: expired settings end, and the owner's
    /// activity restarts the idle clock. Returns why it is busy, if it is.
    fn update_availability(&mut self, now: Now, out: &mut Vec<Action>) -> Option<ReturnCause> {
        let busy = self.availability(now);
        self.expire_settings(now, busy.is_some(), out);
        self.input_pending = false;
        let was_available = self.available;
        self.available = busy.is_none();
        if let Some(cause) = busy {
            self.restart_idle_clock(now, cause);
            if was_available {
                self.sample_after_return = false;
            }
        }
        busy
    }

    /// Step 1, owner commands and hard rules first: a pause, a hardware rule, an exclusive
    /// program, "Donate now", the allowed hours.
    fn owner_commands_and_hard_rules(&mut self, now: Now, out: &mut Vec<Action>) -> ControlFlow<()> {
        if self.pause.is_some() {
            self.set(now, StateKind::Paused, "paused by owner", out);
            self.direct(GuestDirective::Evict, out);
            return ControlFlow::Break(());
        }
        if let Some(reason) = rules::hardware_block(&self.cfg.rules, self.last_sample.as_ref()) {
            self.not_allowed = Some(reason);
            self.set(now, StateKind::NotAllowed, reason.describe(), out);
            self.direct(GuestDirective::Evict, out);
            return ControlFlow::Break(());
        }
        if let Some(program) = self.exclusive_program() {
            // Guests make way as on the owner's return, but the owner chose this program:
            // nothing is counted, not even a guest that ended just before it started.
            let why = format!("exclusive program running: {program}");
            self.not_allowed = Some(NotAllowedReason::ExclusiveProgram);
            self.unattended_guest_end = None;
            self.evict_at = None;
            self.linger_since = None;
            self.set(now, StateKind::NotAllowed, why, out);
            self.direct(GuestDirective::Evict, out);
            return ControlFlow::Break(());
        }
        self.donate_now(now, out)?;
        if !self.hours.allows(now.local) {
            self.not_allowed = Some(NotAllowedReason::Hours);
            self.set(now, StateKind::NotAllowed, NotAllowedReason::Hours.describe(), out);
            self.direct(GuestDirective::Evict, out);
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    }

    /// "Donate now", while it lasts: guests are accepted and nothing counts. An offer
    /// until the owner's return arms after [`DONATE_ARM`] without input, and input once
    /// armed ends it.
    fn donate_now(&mut self, now: Now, out: &mut Vec<Action>) -> ControlFlow<()> {
        let input_now = self.input_present(now);
        let quiet_since = self.last_input;
        if let Some(Donate::UntilReturn { since, armed }) = &mut self.donate {
            let quiet_from = quiet_since.map_or(*since, |t| t.max(*since));
            if !input_now && now.mono.since(quiet_from) >= DONATE_ARM {
                *armed = true;
            }
        }
        let Some(d) = &self.donate else { return ControlFlow::Continue(()) };
        if matches!(d, Donate::UntilReturn { armed: true, .. }) && input_now {
            // The owner came back: the offer ends, and that is not an interruption.
            self.donate = None;
            out.push(Action::OwnerSettingsChanged);
            self.unattended_guest_end = None;
            self.set(now, StateKind::Evicting, "owner returned; donate-now offer ended", out);
            self.direct(GuestDirective::Evict, out);
            return ControlFlow::Break(());
        }
        // Donate-now never counts, so guest work it covered is not lent work.
        self.lent_uncounted = false;
        let to = if self.guests_present { StateKind::Donating } else { StateKind::Recruitable };
        self.set(now, to, "donate now", out);
        self.direct(GuestDirective::Accept, out);
        ControlFlow::Break(())
    }

    /// Step 2, the owner's return while recruited guest work is present (or finished
    /// shortly before): counted, unless the owner's own command made the machine busy.
    fn owner_return(&mut self, now: Now, busy: Option<ReturnCause>, out: &mut Vec<Action>) -> ControlFlow<()> {
        if self.state == StateKind::Recruitable && self.guests_present {
            self.set(now, StateKind::Donating, "guest work started", out);
        }
        if self.state == StateKind::Donating && self.guests_present {
            if let Some(cause) = busy {
                if self.owner_acted {
                    // The owner's own command or settings made the machine busy: the
                    // guest work makes way, on their account, and nothing is counted.
                    self.unattended_guest_end = None;
                    self.set(now, StateKind::Evicting, "owner changed the settings", out);
                    self.evicting(now, out);
                } else {
                    self.interrupt_guests(now, cause, out);
                }
                return ControlFlow::Break(());
            }
        }
        // Guest work that finished shortly before the owner came back.
        if !self.guests_present {
            if let (Some(end), Some(_)) = (self.unattended_guest_end, busy) {
                if now.mono.since(end) <= Duration::from_secs(self.cfg.budget.after_guest_window_s) && !self.owner_acted {
                    self.count_interruption(now, ReturnCause::AfterGuest, out);
                }
                self.unattended_guest_end = None;
            }
        }
        ControlFlow::Continue(())
    }

    /// The owner came back to donating guests: one interruption counted, the guests
    /// frozen or evicted by the eviction mode, and all evicted if that used up the budget.
    fn interrupt_guests(&mut self, now: Now, cause: ReturnCause, out: &mut Vec<Action>) {
        self.count_interruption(now, cause, out);
        self.unattended_guest_end = None;
        self.evict_at = None;
        self.linger_since = None;
        self.set(now, StateKind::Evicting, "owner returned", out);
        let d = match self.cfg.eviction.mode {
            EvictionMode::ImmediateEviction => GuestDirective::Evict,
            EvictionMode::PauseAndMigrate => {
                self.evict_at = Some(now.mono.plus(Duration::from_secs(self.cfg.eviction.pause_s)));
                GuestDirective::Freeze
            }
            EvictionMode::LingerLonger | EvictionMode::LingerForever => GuestDirective::Freeze,
        };
        self.direct(d, out);
        if self.used_today >= self.cfg.budget.interruptions_per_day {
            self.set(now, StateKind::OutOfBudget, "daily interruption budget used up", out);
            self.direct(GuestDirective::Evict, out);
        }
    }

    /// Step 3, the budget: at the daily limit the machine leaves the pool.
    fn budget_used_up(&mut self, now: Now, out: &mut Vec<Action>) -> ControlFlow<()> {
        if self.used_today < self.cfg.budget.interruptions_per_day {
            return ControlFlow::Continue(());
        }
        self.set(now, StateKind::OutOfBudget, "daily interruption budget used up", out);
        self.direct(GuestDirective::Evict, out);
        ControlFlow::Break(())
    }

    /// Step 4, guest work in progress after a return: re-recruited when the owner left
    /// again, else evicting, lingering or lending on by the state it is in.
    fn guest_work_after_return(&mut self, now: Now, recruitable: bool, out: &mut Vec<Action>) -> ControlFlow<()> {
        if !self.guests_present {
            return ControlFlow::Continue(());
        }
        match self.state {
            StateKind::Donating => self.direct(GuestDirective::Accept, out),
            StateKind::Evicting | StateKind::Lingering | StateKind::LendingLight
                if recruitable && self.directive != GuestDirective::Evict =>
            {
                // The owner left again for a whole recruitment threshold: re-recruited.
                self.linger_since = None;
                self.evict_at = None;
                self.lent_uncounted = false;
                self.set(now, StateKind::Donating, "owner away again", out);
                self.direct(GuestDirective::Accept, out);
            }
            StateKind::Evicting => self.evicting(now, out),
            StateKind::Lingering if self.light(now) && self.directive == GuestDirective::Linger => {
                // Light again for the whole window while lending is on: new guest
                // work may start beside what lingers.
                self.linger_since = None;
                self.set(now, StateKind::LendingLight, "owner light again: lending", out);
                self.direct(GuestDirective::Accept, out);
            }
            StateKind::Lingering => self.lingering(now, out),
            StateKind::LendingLight if self.light(now) => self.direct(GuestDirective::Accept, out),
            StateKind::LendingLight => self.stop_lending(now, out),
            _ => {
                // Guest work that no recruitment allowed (left over after a pause or
                // an offer): stop it, without counting.
                self.lent_uncounted = false;
                self.set(now, StateKind::Evicting, "guest work present without recruitment", out);
                self.direct(GuestDirective::Evict, out);
            }
        }
        ControlFlow::Break(())
    }

    /// Step 5, no guest work: the owner's activity alone (and, when lending while light,
    /// how light it is).
    fn owner_activity_alone(&mut self, now: Now, recruitable: bool, out: &mut Vec<Action>) {
        let (to, why) = if recruitable {
            (StateKind::Recruitable, "idle for the recruitment threshold")
        } else if self.light(now) {
            (StateKind::LendingLight, "owner light: lending")
        } else if !self.available {
            (StateKind::OwnerActive, "owner active")
        } else {
            (StateKind::Idle, "machine idle")
        };
        self.linger_since = None;
        self.evict_at = None;
        // Guest work that starts from here was lent, not recruited: it counts only if
        // the owner's activity later stops it.
        self.lent_uncounted = to == StateKind::LendingLight;
        self.set(now, to, why, out);
        let accept = matches!(to, StateKind::Recruitable | StateKind::LendingLight);
        self.direct(if accept { GuestDirective::Accept } else { GuestDirective::Evict }, out);
    }

    /// Guests are frozen after a return; the mode decides what follows.
    fn evicting(&mut self, now: Now, out: &mut Vec<Action>) {
        let h = self.util.mean();
        // Growing owner memory is never lingered on: the owner needs it back.
        let lingerable = h as f64 <= self.cfg.eviction.linger_cpu_max && self.busy_cause != Some(ReturnCause::OwnerMemory);
        match self.cfg.eviction.mode {
            EvictionMode::ImmediateEviction => self.direct(GuestDirective::Evict, out),
            EvictionMode::PauseAndMigrate => {
                if self.directive == GuestDirective::Evict || self.evict_at.is_none_or(|t| now.mono >= t) {
                    self.direct(GuestDirective::Evict, out);
                } else {
                    self.direct(GuestDirective::Freeze, out);
                }
            }
            EvictionMode::LingerLonger | EvictionMode::LingerForever => {
                if self.directive == GuestDirective::Evict {
                    return;
                }
                // Decide on a sample taken after the return, so h reflects it.
                if !self.sample_after_return {
                    self.direct(GuestDirective::Freeze, out);
                } else if lingerable {
                    self.linger_since = Some(now.mono);
                    self.set(now, StateKind::Lingering, "owner lightly active: lingering", out);
                    self.direct(GuestDirective::Linger, out);
                } else if self.cfg.eviction.mode == EvictionMode::LingerLonger {
                    self.direct(GuestDirective::Evict, out);
                } else {
                    self.direct(GuestDirective::Freeze, out);
                }
            }
        }
    }

    fn lingering(&mut self, now: Now, out: &mut Vec<Action>) {
        let h = self.util.mean();
        if h as f64 > self.cfg.eviction.linger_cpu_max {
            let (d, why) = match self.cfg.eviction.mode {
                EvictionMode::LingerForever => (GuestDirective::Freeze, "owner busy: frozen (linger-forever)"),
                _ => (GuestDirective::Evict, "owner utilisation above linger limit: migrating"),
            };
            self.linger_since = None;
            self.count_lent(now, ReturnCause::OwnerCpu, out);
            self.set(now, StateKind::Evicting, why, out);
            self.direct(d, out);
            return;
        }
        if self.cfg.eviction.mode == EvictionMode::LingerLonger {
            let since = *self.linger_since.get_or_insert(now.mono);
            let migrate = migration::decide(&self.migration_inputs(now.mono.since(since))) == migration::MigrationDecision::Migrate;
            // A pool's guest keeps lingering: the driver asks the pool, which moves it.
            if migrate && !self.pool.pool_decides {
                self.linger_since = None;
                self.count_lent(now, ReturnCause::OwnerCpu, out);
                self.set(now, StateKind::Evicting, "lingered T_lingr: migrating", out);
                self.direct(GuestDirective::Evict, out);
                return;
            }
        }
        self.direct(GuestDirective::Linger, out);
    }
}
