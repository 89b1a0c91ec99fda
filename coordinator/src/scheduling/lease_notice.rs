//! Lease notices on PostgreSQL's `lull_lease` channel: the leader (or a replica that
//! wrote a recruit group) names the agents that got a lease, so their long polls, on
//! whichever replica they wait, look at once. Both ends of the format live here; the
//! listener is in [`super::replicas`], the senders are the driver and recruiting.

use crate::app::App;
use crate::db::Dialect;
use std::sync::Arc;

/// Agents named per lease notice (ids of 32 hex digits, one a line: well under
/// PostgreSQL's 8,000-byte payload).
const ANNOUNCE_CHUNK: usize = 100;

/// This process's name on the bus: a lease notice starts with its sender's, so a replica
/// skips its own (it woke its polls already; waking them again would only send their
/// next looks to the database for nothing).
static REPLICA: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| format!("from:{}", crate::auth::random_hex(8)));

/// The agents a lease notice names, unless this replica sent it.
pub(super) fn lease_notice_agents(payload: &str) -> impl Iterator<Item = &str> {
    let mut lines = payload.lines().peekable();
    let own = lines.peek() == Some(&REPLICA.as_str());
    lines.filter(move |l| !own && !l.starts_with("from:"))
}

/// Tells the other replicas that these agents have a lease waiting (PostgreSQL only): one
/// notice per hundred agents, not one per lease.
pub fn announce_leases(app: &Arc<App>, agents: &[&str]) {
    if app.db.dialect != Dialect::Postgres || agents.is_empty() {
        return;
    }
    let payloads: Vec<String> = agents.chunks(ANNOUNCE_CHUNK).map(|c| format!("{}\n{}", *REPLICA, c.join("\n"))).collect();
    let app = app.clone();
    tokio::spawn(async move {
        for p in payloads {
            let _ = sqlx::query("SELECT pg_notify('lull_lease', $1)").bind(p).execute(&app.db.pool).await;
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_notice_names_its_agents_unless_this_replica_sent_it() {
        let other = "from:0123456789abcdef\na1\na2";
        assert_eq!(lease_notice_agents(other).collect::<Vec<_>>(), ["a1", "a2"]);
        let own = format!("{}\na1\na2", *REPLICA);
        assert_eq!(lease_notice_agents(&own).count(), 0);
        assert_eq!(lease_notice_agents("a3").collect::<Vec<_>>(), ["a3"], "a notice without a sender still wakes");
    }
}
