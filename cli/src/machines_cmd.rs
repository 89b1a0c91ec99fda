//! `lull machines`: the enrolled machines a key may see, over the coordinator's API (an
//! owner key: the owner's own; the admin key: all), with each one's state and when it
//! was last heard from. `lull coordinator machine list` prints the same table straight
//! from the database.

use crate::jobs_cmd::{check, Remote};
use crate::pool_files::runtime;
use anyhow::{Context, Result};
use clap::Args;
use coordinator::model::AgentInfo;

#[derive(Args, Debug)]
pub struct MachinesArgs {
    #[command(flatten)]
    pub remote: Remote,
    /// Print the coordinator's JSON.
    #[arg(long)]
    pub json: bool,
}

/// Prints machines as a table, or as JSON.
pub fn print(machines: &[AgentInfo], json: bool) -> Result<()> {
    if json {
        outln!("{}", serde_json::to_string(machines)?);
        return Ok(());
    }
    if machines.is_empty() {
        outln!("(no machines enrolled)");
        return Ok(());
    }
    // Names only: ids are in --json (and `lull coordinator machine rm` takes a name).
    outln!("{:<16} {:<20} {:>4}  {:<14} {}", "owner", "machine", "cpus", "state", "last heard");
    for m in machines {
        let state = m.heartbeat.as_ref().map_or("never_seen", |h| h.state.as_str());
        let cpus = m.heartbeat.as_ref().and_then(|h| h.cpus).map_or("?".to_string(), |c| c.to_string());
        let seen = m
            .last_seen_ms
            .and_then(chrono::DateTime::from_timestamp_millis)
            .map_or("never".to_string(), |t| t.with_timezone(&chrono::Local).format("%Y-%m-%d %H:%M:%S").to_string());
        outln!("{:<16} {:<20} {cpus:>4}  {:<14} {seen}", m.owner, m.machine, state);
    }
    Ok(())
}

pub fn run(a: MachinesArgs) -> Result<()> {
    let (url, key) = a.remote.resolve()?;
    let machines: Vec<AgentInfo> = runtime()?.block_on(async {
        let r = reqwest::Client::new()
            .get(format!("{url}/api/v1/agents"))
            .bearer_auth(&key)
            .send()
            .await
            .map_err(|e| crate::jobs_cmd::unreachable(&url, e))?;
        check(r).await?.json().await.context("reading the coordinator's machine list")
    })?;
    print(&machines, a.json)
}
