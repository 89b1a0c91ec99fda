//! The owner's configuration, read from TOML in the platform config directory.
//!
//! Every field has a default, so an empty file is valid. A wrong value is rejected with
//! an error that names the field (as a dotted TOML path) and the allowed range; an
//! unknown field is rejected by name too, so a typo never silently does nothing.

use crate::config_fields as f;
use lull_core::field::fmt_bound;
pub use lull_core::policy::{parse_range, AllowedHours, Availability, Budget, Eviction, EvictionMode, MinuteRange, PolicyConfig, Rules};
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::time::Duration;

/// A configuration problem, naming the field at fault.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ConfigError {
    #[error("config field `{field}` = {value} is out of range: allowed {allowed}")]
    OutOfRange { field: String, value: String, allowed: String },
    #[error("config field `{field}`: {message}")]
    Invalid { field: String, message: String },
    #[error("config file {path}: {message}")]
    Parse { path: String, message: String },
    #[error("config file {path}{}: {error}", line.map(|l| format!(", line {l}")).unwrap_or_default())]
    InFile { path: String, line: Option<usize>, error: Box<ConfigError> },
    #[error("cannot read config file {path}: {message}")]
    Io { path: String, message: String },
    #[error("config file {path} is {} bytes, over the limit of {max} bytes (1 MiB) for a config file; nothing was read", size.map_or_else(|| format!("more than {max}"), |s| s.to_string()))]
    TooLarge { path: String, size: Option<u64>, max: u64 },
}

/// The largest config file read (1 MiB: a hand-written file is a few KiB).
pub const CONFIG_FILE_MAX: u64 = 1 << 20;
/// Most entries in `rules.exclusive_programs`.
pub const EXCLUSIVE_PROGRAMS_MAX: usize = 256;
/// Most ranges in one day of `rules.hours`.
pub const HOURS_RANGES_MAX: usize = 48;

/// The owner's config file as text, read only up to [`CONFIG_FILE_MAX`] (a larger
/// file, or a FIFO or device that never ends, is refused); `None` when there is none.
pub fn read_config_text(path: &Path) -> Result<Option<String>, ConfigError> {
    use std::io::Read;
    let shown = || path.display().to_string();
    let io = |e: std::io::Error| ConfigError::Io { path: shown(), message: e.to_string() };
    let file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io(e)),
    };
    let size = file.metadata().map_err(io)?.len();
    if size > CONFIG_FILE_MAX {
        return Err(ConfigError::TooLarge { path: shown(), size: Some(size), max: CONFIG_FILE_MAX });
    }
    let mut bytes = Vec::new();
    file.take(CONFIG_FILE_MAX + 1).read_to_end(&mut bytes).map_err(io)?;
    if bytes.len() as u64 > CONFIG_FILE_MAX {
        return Err(ConfigError::TooLarge { path: shown(), size: None, max: CONFIG_FILE_MAX });
    }
    String::from_utf8(bytes).map(Some).map_err(|e| io(std::io::Error::new(std::io::ErrorKind::InvalidData, e)))
}

/// Which input backend to use. Each but `auto` and `none` belongs to one platform; the
/// config file and `LULL_INPUT` refuse another platform's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "kebab-case", try_from = "String")]
pub enum InputBackendChoice {
    /// Pick the best one this session offers.
    Auto,
    X11,
    Wayland,
    Mutter,
    Logind,
    Polled,
    /// The owner's text consoles and terminals, local and remote (ssh): `/dev/tty*` and
    /// `/dev/pts/*` reads, by inotify. `auto` runs it beside the desktop's backend.
    Terminal,
    /// Windows: the session's last-input time (`GetLastInputInfo`), polled once a second;
    /// macOS: the session's idle time (`CGEventSourceSecondsSinceLastEventType`), likewise.
    LastInput,
    /// Windows: every keyboard and mouse event as it happens (low-level hooks,
    /// `WH_KEYBOARD_LL` and `WH_MOUSE_LL`); macOS: likewise, by a listen-only event tap,
    /// given the owner's Input Monitoring grant. `auto` runs it beside `last-input`.
    Hooks,
    /// No input sensing: availability rests on CPU and memory alone.
    None,
}

impl InputBackendChoice {
    /// Every choice, in the order the errors list them.
    pub const ALL: [Self; 10] = [
        Self::Auto,
        Self::X11,
        Self::Wayland,
        Self::Mutter,
        Self::Logind,
        Self::Polled,
        Self::Terminal,
        Self::LastInput,
        Self::Hooks,
        Self::None,
    ];

    /// The name in the config file and `LULL_INPUT`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::X11 => "x11",
            Self::Wayland => "wayland",
            Self::Mutter => "mutter",
            Self::Logind => "logind",
            Self::Polled => "polled",
            Self::Terminal => "terminal",
            Self::LastInput => "last-input",
            Self::Hooks => "hooks",
            Self::None => "none",
        }
    }

    /// The platform this backend is for (`None`: every platform), and whether this
    /// build is that platform.
    fn platform(self) -> Option<(&'static str, bool)> {
        match self {
            Self::Auto | Self::None => None,
            Self::LastInput => Some(("Windows' and macOS", crate::sys::WINDOWS || crate::sys::MACOS)),
            Self::Hooks => Some(("Windows' and macOS", crate::sys::WINDOWS || crate::sys::MACOS)),
            _ => Some(("Linux", crate::sys::LINUX)),
        }
    }

    /// The names this platform accepts, quoted and comma-separated.
    pub fn names_here() -> String {
        let here = Self::ALL.iter().filter(|c| c.platform().is_none_or(|(_, here)| here));
        here.map(|c| format!("\"{}\"", c.name())).collect::<Vec<_>>().join(", ")
    }

    /// The choice named `name` (as in the config file), if this platform has it.
    pub fn from_name(name: &str) -> Result<Self, String> {
        let Some(choice) = Self::ALL.into_iter().find(|c| c.name() == name) else {
            return Err(format!("unknown input backend {name:?}: expected one of {}", Self::names_here()));
        };
        match choice.platform() {
            Some((platform, false)) => {
                Err(format!("input backend {name:?} is {platform}'s, not this platform's: expected one of {}", Self::names_here()))
            }
            _ => Ok(choice),
        }
    }
}

impl TryFrom<String> for InputBackendChoice {
    type Error = String;

    fn try_from(value: String) -> Result<Self, Self::Error> {
        Self::from_name(&value)
    }
}

/// The whole configuration.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    pub sampling: Sampling,
    pub availability: Availability,
    pub budget: Budget,
    pub eviction: Eviction,
    pub rules: Rules,
    pub input: Input,
    pub guests: Guests,
    pub caps: Caps,
    /// Keeping the owner's memory warm.
    pub memory: Memory,
    pub notifications: Notifications,
    pub coordinator: Coordinator,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(default, deny_unknown_fields)]
pub struct Sampling {
    /// Milliseconds between samples while guest work is present, or an offer, a
    /// battery or heat rule is in force: anything a reading may stop (default 1000).
    pub interval_ms: u64,
    /// Milliseconds between samples with no guest work (default 10000): readings then
    /// only move the idle clock and the status, and a fresh one is taken before guest
    /// work starts. Set it to `interval_ms` for a dense calibration trace.
    pub relaxed_interval_ms: u64,
    /// Seconds between rows of the compact trace kept for calibration (default 2).
    pub trace_interval_s: u64,
    /// Days the trace is kept (default 30).
    pub trace_retention_days: u64,
}

/// A guest's network access: what the owner allows (`[guests] network`) and what a job
/// asks for. A guest has none unless its job asks for outbound network *and* the owner
/// allows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "kebab-case", try_from = "String")]
pub enum NetworkPolicy {
    /// No network: the guest has its own network namespace with only a loopback
    /// interface of its own (where namespaces are unavailable, Landlock denies TCP).
    None,
    /// Outbound connections to the internet through `slirp4netns
    /// --disable-host-loopback`: never to this machine's loopback services (its database,
    /// its coordinator); refused where user namespaces or slirp4netns are missing.
    Outbound,
}

impl TryFrom<String> for NetworkPolicy {
    type Error = String;

    fn try_from(value: String) -> Result<Self, Self::Error> {
        match value.as_str() {
            "none" => Ok(Self::None),
            "outbound" => Ok(Self::Outbound),
            "allowed" => Err("\"allowed\" was removed: guests never get unrestricted network; use \"outbound\" (the internet, \
                              never this machine's own services) or \"none\""
                .into()),
            other => Err(format!("unknown network policy {other:?}: expected \"none\" or \"outbound\"")),
        }
    }
}

/// The guest runtime: memory protection, containment and defaults for jobs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(default, deny_unknown_fields)]
pub struct Guests {
    /// Where guests' cgroups go: `auto` (a root agent: `lull` below each hierarchy's root;
    /// an owner's agent on cgroup v2: a delegated scope from the owner's systemd, else its
    /// own delegated cgroup); a subtree relative to each hierarchy's root; `self` for the
    /// agent's own (delegated, v2) cgroup; `none` for no cgroups (process groups +
    /// rlimits, weak). `LULL_CGROUP` overrides it.
    pub cgroup: String,
    /// Largest memory a guest may use, MiB (0: no configured cap; the owner reserve still applies).
    pub memory_cap_mib: u64,
    /// Memory always left to the owner, MiB: guests' caps leave this much available, no
    /// guest starts while less is free, and guests are frozen when available memory falls below it.
    pub owner_reserve_mib: u64,
    /// No guest starts while the owner's own memory use is above this fraction of the total.
    pub admission_owner_mem_max: f64,
    /// Guests are frozen while memory pressure (PSI "some", 10-s average, %) stays above this.
    pub pressure_freeze_pct: f64,
    /// Guests frozen for memory pressure are killed if it lasts this many seconds.
    pub pressure_kill_s: u64,
    /// Most processes and threads one guest may have.
    pub pids_max: u64,
    /// Whether guests may have outbound network when their job asks for it: `"none"`
    /// (default) or `"outbound"` (see [`NetworkPolicy`]).
    pub network: NetworkPolicy,
    /// Most disk a guest's work directory may use, MiB: no single file may grow past it
    /// (RLIMIT_FSIZE) and the agent stops the guest when the directory (with files it
    /// deleted but holds open) uses more.
    pub disk_mib: u64,
    /// Most output kept of each of a guest's stdout and stderr, MiB; past it the file ends
    /// with a truncation line and the guest's further writes there fail (EPIPE).
    pub output_mib: u64,
    /// Bandwidth for moving a checkpoint to another machine, MiB/s: with the checkpoint
    /// size (memory + work directory) it gives T_migr, until a coordinator measures it.
    pub migration_bandwidth_mib_s: f64,
    /// Most coordinator tasks this agent runs as guests at once (each leased only while
    /// the policy accepts guest work).
    pub max_jobs: u32,
    /// Days a finished guest's work directory (`guests/`, `jobs/` in the data directory,
    /// with its output) is kept; older ones are removed at start and once a day.
    pub retention_days: u32,
    /// The unprivileged account guests run as when the agent runs as root (an agent run
    /// by an ordinary owner runs them as that owner). Missing: `nobody`, with a warning.
    pub run_as: String,
}

impl Default for Guests {
    fn default() -> Self {
        Self {
            cgroup: "auto".into(),
            memory_cap_mib: f::MEMORY_CAP_MIB.default,
            owner_reserve_mib: f::OWNER_RESERVE_MIB.default,
            admission_owner_mem_max: f::ADMISSION_OWNER_MEM_MAX.default,
            pressure_freeze_pct: f::PRESSURE_FREEZE_PCT.default,
            pressure_kill_s: f::PRESSURE_KILL_S.default,
            pids_max: f::PIDS_MAX.default,
            network: NetworkPolicy::None,
            disk_mib: f::DISK_MIB.default,
            output_mib: f::OUTPUT_MIB.default,
            migration_bandwidth_mib_s: f::MIGRATION_BANDWIDTH_MIB_S.default,
            max_jobs: f::MAX_JOBS.default,
            retention_days: f::RETENTION_DAYS.default,
            run_as: "lull-guest".into(),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(default, deny_unknown_fields)]
pub struct Input {
    pub backend: InputBackendChoice,
    /// Idle-notification backends (Wayland, Mutter) report "idled" after this many
    /// seconds without input, and "resumed" at the next input (default 10).
    pub idle_notify_s: u64,
    /// The terminal backend counts every user's terminals and ssh sessions, not only the
    /// owner's (default false: the owner's alone).
    pub all_users: bool,
}

/// Caps on guest work, enforced by the guest runtime.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(default, deny_unknown_fields)]
pub struct Caps {
    /// Most CPU guest work may use, as a fraction of the machine (1 = every idle cycle).
    pub cpu_max: f64,
    /// Most memory guest work may use, as a fraction of total memory. Guests never use
    /// more than what is free either (seed 000: "foreign jobs can use only free memory").
    pub memory_max: f64,
}

/// Keeping the owner's memory warm while guests run and after they leave (seed 000 §4,
/// seed 004 §3.3): the owner's session is protected so the kernel reclaims from guests
/// first, and the owner's file cache is recorded before a guest starts and read back after
/// an eviction.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(default, deny_unknown_fields)]
pub struct Memory {
    /// Ask the kernel to keep the owner's memory while guests run: cgroup v2 `memory.low`
    /// on the owner's session, on cgroup v1 a soft limit of 0 on the guests and the
    /// protection as the owner's soft limit (default true).
    pub protect_owner: bool,
    /// How much to protect, MiB; 0 (default): the owner's recent working set plus a quarter.
    pub owner_protect_mib: u64,
    /// The owner's session cgroup to protect, a path inside the memory hierarchy
    /// (`/user.slice/user-1000.slice`); empty (default): found from the owner's processes.
    pub owner_cgroup: String,
    /// Most of the owner's resident file pages recorded before a guest starts and read
    /// back after an eviction, MiB (0: no file-cache snapshot or restore; default 2048).
    pub cache_snapshot_mib: u64,
    /// Most files recorded in that snapshot (default 4096).
    pub cache_snapshot_files: u64,
}

impl Default for Memory {
    fn default() -> Self {
        Self {
            protect_owner: true,
            owner_protect_mib: f::OWNER_PROTECT_MIB.default,
            owner_cgroup: String::new(),
            cache_snapshot_mib: f::CACHE_SNAPSHOT_MIB.default,
            cache_snapshot_files: f::CACHE_SNAPSHOT_FILES.default,
        }
    }
}

/// Desktop notifications from the tray app.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(default, deny_unknown_fields)]
pub struct Notifications {
    /// Show notifications at all.
    pub enabled: bool,
    /// At most one notification of a kind this often, seconds.
    pub min_interval_s: u64,
}

/// The pool this machine belongs to.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(default, deny_unknown_fields)]
pub struct Coordinator {
    /// The coordinator's address, `http://` or `https://`; empty when not enrolled.
    pub url: String,
    /// The join token the pool's coordinator handed out for enrolment.
    pub join_token: String,
}

impl Coordinator {
    fn validate(&self) -> Result<(), ConfigError> {
        let url = self.url.trim();
        if !url.is_empty() {
            let host = url.strip_prefix("https://").or_else(|| url.strip_prefix("http://"));
            let ok = host.is_some_and(|h| {
                let h = h.split('/').next().unwrap_or("");
                !h.is_empty() && !h.contains(char::is_whitespace)
            });
            if !ok {
                return Err(ConfigError::Invalid {
                    field: "coordinator.url".into(),
                    message: format!("{url:?} is not an address like \"https://pool.example.org\" (http:// or https:// and a host)"),
                });
            }
        }
        let t = &self.join_token;
        if t.len() > 512 || !t.chars().all(|c| c.is_ascii_graphic()) {
            return Err(ConfigError::Invalid {
                field: "coordinator.join_token".into(),
                message: "a join token is up to 512 printable characters without spaces".into(),
            });
        }
        Ok(())
    }
}

impl Default for Sampling {
    fn default() -> Self {
        Self {
            interval_ms: f::INTERVAL_MS.default,
            relaxed_interval_ms: f::RELAXED_INTERVAL_MS.default,
            trace_interval_s: f::TRACE_INTERVAL_S.default,
            trace_retention_days: f::TRACE_RETENTION_DAYS.default,
        }
    }
}
impl Default for Caps {
    fn default() -> Self {
        Self { cpu_max: f::CPU_MAX.default, memory_max: f::MEMORY_MAX.default }
    }
}
impl Default for Notifications {
    fn default() -> Self {
        Self { enabled: true, min_interval_s: f::MIN_INTERVAL_S.default }
    }
}
impl Default for Input {
    fn default() -> Self {
        Self { backend: InputBackendChoice::Auto, idle_notify_s: f::IDLE_NOTIFY_S.default, all_users: false }
    }
}

impl Config {
    /// Every numeric field with its value and allowed range: the single source of the
    /// ranges, used by validation and by error messages.
    fn numeric_fields(&self) -> Vec<(&'static str, f64, f64, f64)> {
        let (s, g, m) = (&self.sampling, &self.guests, &self.memory);
        let mut fields = vec![
            f::INTERVAL_MS.check(s.interval_ms),
            f::RELAXED_INTERVAL_MS.check(s.relaxed_interval_ms),
            f::TRACE_INTERVAL_S.check(s.trace_interval_s),
            f::TRACE_RETENTION_DAYS.check(s.trace_retention_days),
        ];
        // The policy's sections: default and range are one constant each in lull-core.
        fields.extend(lull_core::policy::numeric_fields(&self.availability, &self.budget, &self.eviction, &self.rules));
        fields.extend([
            f::IDLE_NOTIFY_S.check(self.input.idle_notify_s),
            f::MEMORY_CAP_MIB.check(g.memory_cap_mib),
            f::OWNER_RESERVE_MIB.check(g.owner_reserve_mib),
            f::ADMISSION_OWNER_MEM_MAX.check(g.admission_owner_mem_max),
            f::PRESSURE_FREEZE_PCT.check(g.pressure_freeze_pct),
            f::PRESSURE_KILL_S.check(g.pressure_kill_s),
            f::PIDS_MAX.check(g.pids_max),
            f::MAX_JOBS.check(g.max_jobs),
            f::DISK_MIB.check(g.disk_mib),
            f::OUTPUT_MIB.check(g.output_mib),
            f::RETENTION_DAYS.check(g.retention_days),
            f::MIGRATION_BANDWIDTH_MIB_S.check(g.migration_bandwidth_mib_s),
            f::CPU_MAX.check(self.caps.cpu_max),
            f::MEMORY_MAX.check(self.caps.memory_max),
            f::OWNER_PROTECT_MIB.check(m.owner_protect_mib),
            f::CACHE_SNAPSHOT_MIB.check(m.cache_snapshot_mib),
            f::CACHE_SNAPSHOT_FILES.check(m.cache_snapshot_files),
            f::MIN_INTERVAL_S.check(self.notifications.min_interval_s),
        ]);
        fields.into_iter().map(|c| (c.name, c.value, c.min, c.max)).collect()
    }

    /// The allowed range of a numeric field, e.g. `"0..=20"`.
    pub fn allowed_range(field: &str) -> Option<String> {
        Config::default()
            .numeric_fields()
            .into_iter()
            .find(|f| f.0 == field)
            .map(|(_, _, lo, hi)| format!("{}..={}", fmt_bound(lo), fmt_bound(hi)))
    }

    /// Every list with its length and the most entries it may hold.
    fn list_fields(&self) -> Vec<(String, usize, usize)> {
        let h = &self.rules.hours;
        let mut out = vec![("rules.exclusive_programs".to_string(), self.rules.exclusive_programs.len(), EXCLUSIVE_PROGRAMS_MAX)];
        for (name, ranges) in
            [("mon", &h.mon), ("tue", &h.tue), ("wed", &h.wed), ("thu", &h.thu), ("fri", &h.fri), ("sat", &h.sat), ("sun", &h.sun)]
        {
            out.push((format!("rules.hours.{name}"), ranges.as_ref().map_or(0, Vec::len), HOURS_RANGES_MAX));
        }
        out
    }

    /// Checks every field against its allowed range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        for (field, len, max) in self.list_fields() {
            if len > max {
                return Err(ConfigError::Invalid { field, message: format!("has {len} entries: at most {max} are allowed") });
            }
        }
        for (field, v, lo, hi) in self.numeric_fields() {
            if !(lo..=hi).contains(&v) {
                return Err(ConfigError::OutOfRange {
                    field: field.into(),
                    value: fmt_bound(v),
                    allowed: format!("{}..={}", fmt_bound(lo), fmt_bound(hi)),
                });
            }
        }
        if let Some((field, message)) = self.rules.hours.first_invalid() {
            return Err(ConfigError::Invalid { field, message });
        }
        if let Some((field, message)) = self.rules.first_invalid_program() {
            return Err(ConfigError::Invalid { field, message });
        }
        if self.guests.cgroup.is_empty() || self.guests.cgroup.split('/').any(|c| c == "..") {
            return Err(ConfigError::Invalid { field: "guests.cgroup".into(), message: "must be a non-empty path without `..`".into() });
        }
        let owner_cg = &self.memory.owner_cgroup;
        if !owner_cg.is_empty() && (!owner_cg.starts_with('/') || owner_cg.split('/').any(|c| c == "..")) {
            return Err(ConfigError::Invalid {
                field: "memory.owner_cgroup".into(),
                message: format!(
                    "{owner_cg:?} is not a cgroup path like \"/user.slice/user-1000.slice\" (absolute, without `..`), or empty to find it"
                ),
            });
        }
        let user = &self.guests.run_as;
        let user_ok = user.len() <= 32
            && user.bytes().next().is_some_and(|b| b.is_ascii_lowercase() || b == b'_')
            && user.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-');
        if !user_ok {
            return Err(ConfigError::Invalid {
                field: "guests.run_as".into(),
                message: format!("{user:?} is not a user name (1-32 of a-z, 0-9, _ and -, starting with a letter or _)"),
            });
        }
        self.coordinator.validate()?;
        Ok(())
    }

    /// Parses and validates TOML text; `origin` names the file in errors.
    pub fn from_toml(text: &str, origin: &str) -> Result<Self, ConfigError> {
        let cfg: Config = toml::from_str(text).map_err(|e| {
            let message = e.message().to_owned();
            ConfigError::Parse { path: origin.into(), message: describe_toml_error(text, &e, message) }
        })?;
        cfg.validate().map_err(|e| match e {
            ConfigError::OutOfRange { ref field, .. } | ConfigError::Invalid { ref field, .. } => {
                ConfigError::InFile { path: origin.into(), line: line_of(text, field), error: Box::new(e) }
            }
            other => other,
        })?;
        Ok(cfg)
    }

    /// Loads the file at `path`, or the defaults if it does not exist.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        match read_config_text(path)? {
            Some(text) => Self::from_toml(&text, &path.display().to_string()),
            None => Ok(Self::default()),
        }
    }

    /// Loads a file the user named (`--config`): unlike [`Config::load`], a missing file
    /// (or a link to nothing) is an error, not the defaults.
    pub fn load_named(path: &Path) -> Result<Self, ConfigError> {
        if !path.exists() {
            return Err(ConfigError::Io {
                path: path.display().to_string(),
                message: "no such file (a config file named on the command line must exist)".into(),
            });
        }
        Self::load(path)
    }

    /// The policy's own sections, as the pure core reads them.
    pub fn policy(&self) -> PolicyConfig {
        PolicyConfig {
            availability: self.availability.clone(),
            budget: self.budget.clone(),
            eviction: self.eviction.clone(),
            rules: self.rules.clone(),
        }
    }

    /// Sampling interval as a duration.
    pub fn sample_interval(&self) -> Duration {
        Duration::from_millis(self.sampling.interval_ms)
    }

    /// The interval between samples with no guest work (never shorter than
    /// [`Self::sample_interval`]).
    pub fn relaxed_sample_interval(&self) -> Duration {
        Duration::from_millis(self.sampling.relaxed_interval_ms.max(self.sampling.interval_ms))
    }
}

/// Names the field (as a dotted path) and its allowed range in a TOML error, with the
/// line number.
/// The dotted path (`rules.hours.mon[1]`) of the deepest key or array element whose
/// value spans byte `at` of the TOML text, from toml_edit's spans.
fn field_at(text: &str, at: usize) -> Option<String> {
    fn in_value(v: &toml_edit::Value, at: usize, path: &mut String) {
        if let toml_edit::Value::Array(a) = v {
            for (i, e) in a.iter().enumerate() {
                if e.span().is_some_and(|r| r.contains(&at) || r.end == at) {
                    path.push_str(&format!("[{i}]"));
                    in_value(e, at, path);
                    return;
                }
            }
        } else if let toml_edit::Value::InlineTable(t) = v {
            for (k, e) in t.iter() {
                if e.span().is_some_and(|r| r.contains(&at) || r.end == at) {
                    path.push('.');
                    path.push_str(k);
                    in_value(e, at, path);
                    return;
                }
            }
        }
    }
    fn in_table(t: &toml_edit::Table, at: usize, prefix: &str) -> Option<String> {
        let mut best = None;
        for (k, item) in t.iter() {
            let path = if prefix.is_empty() { k.to_string() } else { format!("{prefix}.{k}") };
            match item {
                toml_edit::Item::Table(sub) => {
                    if let Some(p) = in_table(sub, at, &path) {
                        return Some(p);
                    }
                }
                toml_edit::Item::Value(v) => {
                    let key_line = t.key(k).and_then(|key| key.span()).is_some_and(|r| r.contains(&at));
                    if key_line || v.span().is_some_and(|r| r.contains(&at) || r.end == at) {
                        let mut p = path.clone();
                        in_value(v, at, &mut p);
                        best = Some(p);
                    }
                }
                _ => {}
            }
        }
        best
    }
    let doc = toml_edit::ImDocument::parse(text).ok()?;
    in_table(doc.as_table(), at, "")
}

/// The 1-based line of the value of a dotted field (`budget.interruptions_per_day`,
/// `rules.hours.mon[0]`), from toml_edit's spans.
fn line_of(text: &str, field: &str) -> Option<usize> {
    let doc = toml_edit::ImDocument::parse(text).ok()?;
    let mut item: &toml_edit::Item = doc.as_item();
    for part in field.split('.') {
        let (key, index) = match part.split_once('[') {
            Some((k, i)) => (k, i.trim_end_matches(']').parse::<usize>().ok()),
            None => (part, None),
        };
        item = item.get(key)?;
        if let Some(i) = index {
            item = item.get(i)?;
        }
    }
    let at = item.span()?.start;
    Some(text[..at.min(text.len())].matches('\n').count() + 1)
}

fn describe_toml_error(text: &str, e: &toml::de::Error, message: String) -> String {
    let Some(span) = e.span() else { return message };
    let start = span.start.min(text.len());
    let line_no = text[..start].matches('\n').count() + 1;
    match field_at(text, start) {
        Some(field) => {
            let range = Config::allowed_range(&field).map(|r| format!(" (allowed {r})")).unwrap_or_default();
            format!("line {line_no}: field `{field}`{range}: {message}")
        }
        None => format!("line {line_no}: {message}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_file_gives_defaults() {
        assert_eq!(Config::from_toml("", "t").unwrap(), Config::default());
    }

    #[test]
    fn out_of_range_names_field_and_range() {
        let err = Config::from_toml("[budget]\ninterruptions_per_day = 50\n", "t").unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("budget.interruptions_per_day"), "{msg}");
        assert!(msg.contains("0..=20"), "{msg}");
        let err = Config::from_toml("[availability]\nowner_cpu_max = 1.5\n", "t").unwrap_err().to_string();
        assert!(err.contains("availability.owner_cpu_max") && err.contains("0.01..=1"), "{err}");
    }

    #[test]
    fn every_error_names_file_line_and_field() {
        // A comment after a header belongs to that header's section.
        let text = "[sampling]\ninterval_ms = 500\n[budget] # mine\ninterruptions_per_day = \"five\"\n";
        let err = Config::from_toml(text, "/home/o/lull.toml").unwrap_err().to_string();
        assert!(err.contains("/home/o/lull.toml") && err.contains("line 4") && err.contains("`budget.interruptions_per_day`"), "{err}");
        assert!(!err.contains("sampling."), "{err}");
        // Out of range: the file and line too.
        let err = Config::from_toml("# top\n\n[budget]\ninterruptions_per_day = 50\n", "/c.toml").unwrap_err().to_string();
        assert!(err.contains("/c.toml, line 4") && err.contains("budget.interruptions_per_day") && err.contains("0..=20"), "{err}");
        // A wrong element inside a multi-line array.
        let text = "[rules.hours]\nmon = [\n  \"09:00-12:00\",\n  42,\n]\n";
        let err = Config::from_toml(text, "/c.toml").unwrap_err().to_string();
        assert!(err.contains("line 4") && err.contains("rules.hours.mon[1]"), "{err}");
        let err = Config::from_toml("[rules.hours]\ntue = [\n  \"09:00-08:00\",\n]\n", "/c.toml").unwrap_err().to_string();
        assert!(err.contains("line 3") && err.contains("rules.hours.tue[0]"), "{err}");
    }

    #[test]
    fn type_errors_name_field_and_range() {
        let err = Config::from_toml("[availability]\nrecruitment_threshold_s = -5\n", "t").unwrap_err().to_string();
        assert!(err.contains("availability.recruitment_threshold_s") && err.contains("0..=86400"), "{err}");
        let err = Config::from_toml("[sampling]\ninterval_ms = \"fast\"\n", "t").unwrap_err().to_string();
        assert!(err.contains("sampling.interval_ms") && err.contains("100..=60000"), "{err}");
    }

    #[test]
    fn guests_section_is_range_checked() {
        let err = Config::from_toml("[guests]\npids_max = 2\n", "t").unwrap_err().to_string();
        assert!(err.contains("guests.pids_max") && err.contains("8..=1000000"), "{err}");
        let err = Config::from_toml("[guests]\nadmission_owner_mem_max = 1.5\n", "t").unwrap_err().to_string();
        assert!(err.contains("guests.admission_owner_mem_max"), "{err}");
        let err = Config::from_toml("[guests]\ncgroup = \"../x\"\n", "t").unwrap_err().to_string();
        assert!(err.contains("guests.cgroup"), "{err}");
        let c = Config::from_toml("[guests]\nmemory_cap_mib = 64\nnetwork = \"outbound\"\n", "t").unwrap();
        assert_eq!((c.guests.memory_cap_mib, c.guests.network), (64, NetworkPolicy::Outbound));
        assert_eq!(Config::default().guests.network, NetworkPolicy::None, "no network unless the owner allows it");
        let err = Config::from_toml("[guests]\ndisk_mib = 8\n", "t").unwrap_err().to_string();
        assert!(err.contains("guests.disk_mib") && err.contains("16..=1048576"), "{err}");
        let err = Config::from_toml("[guests]\noutput_mib = 0\n", "t").unwrap_err().to_string();
        assert!(err.contains("guests.output_mib") && err.contains("1..=1024"), "{err}");
        // A value an earlier version took: refused by name, saying what to use instead.
        let err = Config::from_toml("# mine\n[guests]\nnetwork = \"allowed\"\n", "/c.toml").unwrap_err().to_string();
        assert!(
            err.contains("guests.network") && err.contains("line 3") && err.contains("was removed") && err.contains("outbound"),
            "{err}"
        );
    }

    #[test]
    fn lend_while_light_is_off_by_default_and_range_checked() {
        let c = Config::default();
        assert!(!c.availability.lend_while_light);
        assert_eq!((c.availability.light_cpu_max, c.availability.light_for_s), (0.20, 60));
        let err = Config::from_toml(
            "[availability]
light_cpu_max = 1.5
",
            "t",
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("availability.light_cpu_max") && err.contains("0.01..=1"), "{err}");
        let err = Config::from_toml(
            "[availability]
light_for_s = 0
",
            "t",
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("availability.light_for_s") && err.contains("1..=3600"), "{err}");
        let err = Config::from_toml(
            "[availability]
lend_while_light = \"yes\"
",
            "t",
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("availability.lend_while_light"), "{err}");
        let c = Config::from_toml(
            "[availability]
lend_while_light = true
light_cpu_max = 0.1
light_for_s = 30
",
            "t",
        )
        .unwrap();
        assert!(c.policy().availability.lend_while_light);
    }

    #[test]
    fn memory_section_is_range_checked() {
        let err = Config::from_toml("[memory]\ncache_snapshot_mib = 100000\n", "t").unwrap_err().to_string();
        assert!(err.contains("memory.cache_snapshot_mib") && err.contains("0..=65536") && err.contains("line 2"), "{err}");
        let err = Config::from_toml("[memory]\ncache_snapshot_files = 0\n", "t").unwrap_err().to_string();
        assert!(err.contains("memory.cache_snapshot_files") && err.contains("1..=100000"), "{err}");
        let err = Config::from_toml("[memory]\nowner_protect_mib = -1\n", "t").unwrap_err().to_string();
        assert!(err.contains("memory.owner_protect_mib") && err.contains("0..=1048576"), "{err}");
        let err = Config::from_toml("[memory]\nowner_cgroup = \"user.slice/../x\"\n", "t").unwrap_err().to_string();
        assert!(err.contains("memory.owner_cgroup"), "{err}");
        let c = Config::from_toml("[memory]\nowner_protect_mib = 512\nowner_cgroup = \"/user.slice/user-1000.slice\"\n", "t").unwrap();
        assert_eq!((c.memory.owner_protect_mib, c.memory.owner_cgroup.as_str()), (512, "/user.slice/user-1000.slice"));
        assert!(c.memory.protect_owner);
    }

    #[test]
    fn unknown_field_is_named() {
        let err = Config::from_toml("[budget]\ninteruptions = 3\n", "t").unwrap_err().to_string();
        assert!(err.contains("interuptions"), "{err}");
    }

    #[test]
    fn bad_hours_name_the_day_and_index() {
        let err = Config::from_toml("[rules.hours]\nmon = [\"09:00-12:00\", \"18:00-17:00\"]\n", "t").unwrap_err().to_string();
        assert!(err.contains("rules.hours.mon[1]"), "{err}");
    }

    #[test]
    fn exclusive_programs_name_the_bad_entry() {
        let c = Config::from_toml("[rules]\nexclusive_programs = [\"steam\", \"/opt/blender/blender\"]\n", "t").unwrap();
        assert_eq!(c.rules.exclusive_programs, ["steam", "/opt/blender/blender"]);
        for (bad, why) in [("\"\"", "empty"), ("\" zoom\"", "blanks"), ("\"bin/zoom\"", "relative path"), ("\"/opt/\"", "directory")] {
            let text = format!("[rules]\nexclusive_programs = [\"steam\", {bad}]\n");
            let err = Config::from_toml(&text, "t").unwrap_err().to_string();
            assert!(err.contains("rules.exclusive_programs[1]") && err.contains(why), "{bad}: {err}");
        }
        let err = Config::from_toml("[rules]\nexclusive_programs = \"steam\"\n", "t").unwrap_err().to_string();
        assert!(err.contains("exclusive_programs"), "{err}");
        let c = Config::from_toml("[input]\nbackend = \"terminal\"\nall_users = true\n", "t").unwrap();
        assert!(c.input.all_users && c.input.backend == InputBackendChoice::Terminal);
        // Another platform's backend, or none at all: the field, the name and what is allowed here.
        let (mine, theirs) = if crate::sys::WINDOWS || crate::sys::MACOS { ("last-input", "x11") } else { ("x11", "last-input") };
        let c = Config::from_toml(&format!("[input]\nbackend = \"{mine}\"\n"), "t").unwrap();
        assert_eq!(c.input.backend.name(), mine);
        let err = Config::from_toml(&format!("[input]\nbackend = \"{theirs}\"\n"), "t").unwrap_err().to_string();
        assert!(
            err.contains("input.backend") && err.contains(&format!("\"{theirs}\" is ")) && err.contains("not this platform's"),
            "{err}"
        );
        assert!(err.contains(&format!("\"{mine}\"")) && err.contains("\"auto\"") && err.contains("\"none\""), "{err}");
        let err = Config::from_toml("[input]\nbackend = \"xinput\"\n", "t").unwrap_err().to_string();
        assert!(err.contains("input.backend") && err.contains("unknown input backend \"xinput\"") && err.contains("\"none\""), "{err}");
        // Each choice is written as it is read.
        for choice in InputBackendChoice::ALL {
            assert_eq!(serde_json::to_value(choice).unwrap(), choice.name());
        }
    }

    #[test]
    fn coordinator_address_and_token_are_checked() {
        let inner = |e: ConfigError| match e {
            ConfigError::InFile { error, line: Some(2), .. } => *error,
            other => other,
        };
        let err = inner(Config::from_toml("[coordinator]\nurl = \"pool.example.org\"\n", "t").unwrap_err());
        assert!(matches!(&err, ConfigError::Invalid { field, .. } if field == "coordinator.url"), "{err}");
        let err = inner(Config::from_toml("[coordinator]\njoin_token = \"a b\"\n", "t").unwrap_err());
        assert!(matches!(&err, ConfigError::Invalid { field, .. } if field == "coordinator.join_token"), "{err}");
        let ok = Config::from_toml("[coordinator]\nurl = \"https://pool.example.org:8443/\"\njoin_token = \"j-123\"\n", "t").unwrap();
        assert_eq!(ok.coordinator.url, "https://pool.example.org:8443/");
        let err = Config::from_toml("[caps]\nmemory_max = 0.95\n", "t").unwrap_err().to_string();
        assert!(err.contains("caps.memory_max") && err.contains("0.05..=0.9"), "{err}");
    }

    #[test]
    fn lists_longer_than_their_limit_are_refused_naming_file_line_field_and_limit() {
        let many = |n: usize, item: &str| vec![format!("\"{item}\""); n].join(", ");
        let text = format!("# mine\n[rules]\nexclusive_programs = [{}]\n", many(EXCLUSIVE_PROGRAMS_MAX + 1, "steam"));
        let err = Config::from_toml(&text, "/c.toml").unwrap_err().to_string();
        assert!(
            err.contains("/c.toml, line 3") && err.contains("rules.exclusive_programs") && err.contains("257 entries: at most 256"),
            "{err}"
        );
        let ok = format!("[rules]\nexclusive_programs = [{}]\n", many(EXCLUSIVE_PROGRAMS_MAX, "steam"));
        assert_eq!(Config::from_toml(&ok, "t").unwrap().rules.exclusive_programs.len(), EXCLUSIVE_PROGRAMS_MAX);
        let text = format!("[rules.hours]\nwed = [{}]\n", many(HOURS_RANGES_MAX + 1, "09:00-10:00"));
        let err = Config::from_toml(&text, "/c.toml").unwrap_err().to_string();
        assert!(err.contains("line 2") && err.contains("rules.hours.wed") && err.contains("at most 48"), "{err}");
    }

    #[test]
    fn a_config_file_over_1_mib_is_refused_unread_naming_file_and_limit() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        let mut text = "# padding\n".repeat((CONFIG_FILE_MAX as usize / 10) + 1);
        text.push_str("[budget]\ninterruptions_per_day = 3\n");
        std::fs::write(&path, &text).unwrap();
        let err = Config::load(&path).unwrap_err();
        assert!(matches!(err, ConfigError::TooLarge { size: Some(_), .. }), "{err:?}");
        let msg = err.to_string();
        assert!(msg.contains(&path.display().to_string()) && msg.contains("1048576 bytes (1 MiB)"), "{msg}");
        // Just under the limit is read.
        std::fs::write(&path, &text[text.len() - CONFIG_FILE_MAX as usize..]).unwrap();
        assert_eq!(Config::load(&path).unwrap().budget.interruptions_per_day, 3);
        // A FIFO (no size) is read only up to the limit.
        let fifo = dir.path().join("fifo.toml");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo with a valid C string.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let writer = std::thread::spawn({
            let fifo = fifo.clone();
            move || {
                use std::io::Write;
                let mut f = std::fs::OpenOptions::new().write(true).open(&fifo).unwrap();
                let chunk = vec![b'#'; 64 << 10];
                while f.write_all(&chunk).is_ok() {}
            }
        });
        let err = Config::load(&fifo).unwrap_err();
        assert!(matches!(err, ConfigError::TooLarge { size: None, .. }), "{err:?}");
        assert!(err.to_string().contains("more than 1048576 bytes"), "{err}");
        writer.join().unwrap();
    }

    #[test]
    fn round_trips_through_toml() {
        let mut c = Config::default();
        c.budget.interruptions_per_day = 3;
        c.rules.hours.sat = Some(vec![]);
        c.eviction.mode = EvictionMode::PauseAndMigrate;
        let text = toml::to_string_pretty(&c).unwrap();
        assert_eq!(Config::from_toml(&text, "t").unwrap(), c);
    }

    #[test]
    fn every_default_lies_inside_its_range_and_each_field_is_checked_once() {
        let rows = Config::default().numeric_fields();
        // 22 of the agent's own (config_fields.rs) and the policy's 14.
        assert_eq!(rows.len(), 22 + 14, "a field added to config_fields.rs is listed in numeric_fields");
        let mut names: Vec<&str> = rows.iter().map(|r| r.0).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), rows.len(), "each field once");
        for (name, v, lo, hi) in rows {
            assert!((lo..=hi).contains(&v), "{name}: default {v} outside {lo}..={hi}");
        }
        assert_eq!(Config::allowed_range("guests.disk_mib").as_deref(), Some("16..=1048576"));
    }
}
