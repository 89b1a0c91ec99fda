//! A running coordinator's shared state ([`App`]) and its tunables ([`Config`]): what the
//! API's handlers and the scheduling tasks are all given, defined below them so that none
//! of them imports the crate root that starts them.

use crate::db::Db;
use crate::hub::{recruiting, Scheduling};
use crate::identity;
use crate::live::Live;
use crate::metrics::Metrics;
use std::time::Duration;
use tokio::sync::watch;

/// Tunables of a coordinator.
#[derive(Clone, Debug)]
pub struct Config {
    /// A lease not renewed (progress) for this long is lost: its task is re-queued.
    pub lease_ttl: Duration,
    /// The heartbeat interval agents are told to use.
    pub heartbeat_interval: Duration,
    /// How often heartbeat state is written to the database.
    pub flush_interval: Duration,
    /// How often expired leases are looked for.
    pub sweep_interval: Duration,
    /// When set, `/metrics` answers only `Authorization: Bearer <this key>` (401 otherwise);
    /// unset, it is open to anyone who can reach the coordinator.
    pub metrics_key: Option<String>,
    /// The scheduler's configuration (algorithm, prediction); `lull coordinator serve
    /// --scheduler`.
    pub scheduler: lull_core::sched::SchedConfig,
    /// How long a started gang that lost a member stays halted waiting for its
    /// replacement before the whole gang is re-queued (as the agents' gang fill timeout).
    pub gang_halt_timeout: Duration,
    /// Instant recruitment's settings (the reserve); `lull coordinator serve --reserve-pct`.
    pub recruit: lull_core::sched::RecruitConfig,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            lease_ttl: Duration::from_secs(60),
            heartbeat_interval: Duration::from_secs(10),
            flush_interval: Duration::from_secs(1),
            sweep_interval: Duration::from_secs(1),
            metrics_key: None,
            scheduler: lull_core::sched::SchedConfig::default(),
            gang_halt_timeout: Duration::from_secs(120),
            recruit: recruiting::config_with_reserve(recruiting::DEFAULT_RESERVE_PCT).expect("the default reserve is in range"),
        }
    }
}

/// A running coordinator's shared state.
pub struct App {
    pub db: Db,
    pub config: Config,
    pub live: Live,
    pub metrics: Metrics,
    /// The scheduler's inbox and the long polls' waiters.
    pub scheduling: Scheduling,
    /// Turns true when shutdown begins (long-polls return at once).
    pub shutdown: watch::Receiver<bool>,
}

impl App {
    /// Writes the API keys' uses counted since the last write (kept for the next on failure).
    pub(crate) async fn flush_key_uses(&self) {
        let uses = self.live.take_key_uses();
        if let Err(e) = identity::flush_key_uses(&self.db, &uses).await {
            tracing::warn!(error = %e, "writing API key uses failed; will retry");
            self.live.restore_key_uses(uses);
        }
    }
}
