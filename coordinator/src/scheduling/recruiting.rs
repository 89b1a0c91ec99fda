//! Instant recruitment (seed 003) on the coordinator: `POST /api/v1/recruit` answers at
//! once, from memory, with up to K machines predicted to stay idle for the next S
//! seconds, keeping a share of the idle machines in reserve for the next request.
//!
//! * The decision is `lull_core::sched::Recruiter`'s (windowed mean of recent
//!   owner-load readings, window chosen by the forecast; reserve; lending). The leader's
//!   scheduler driver feeds it: every heartbeat's owner-load readings
//!   (`Recruiting::observe`, a reading covering `secs` seconds counts as that many
//!   one-second readings of its mean) and each machine's standing
//!   (`Recruiting::set_standing`: a free slot, allowed, interruption budget left).
//!   It is rebuilt empty when a replica takes the lead and fills within a heartbeat
//!   interval.
//! * A grant lends its machines at once (two requests never share one); the group is
//!   then written as one gang job whose tasks are leased straight to those machines
//!   (the scheduler's own lease path, [`super::sql::assign`]), off the request's path
//!   ([`write_group`]), so the answer never waits for the database.
//! * The group is released together: when its job ends (completed, failed, cancelled,
//!   or given back to the queue), or through `POST /api/v1/recruit/{group}/release`.
//!
//! Only the leading replica answers (the others have no readings): elsewhere the request
//! is refused with 503 and is to be retried.

use super::sql::{self, Planned};
use crate::app::App;
use crate::auth::Principal;
use crate::hub::recruiting::submit_of;
use crate::hub::{Msg, DELIVERY_WINDOW_MS};
use crate::store;
use lull_core::sched::MachineId;
use std::sync::Arc;

// The pool's state and the request and grant types, defined below the tasks in
// `crate::hub::recruiting`; named here too, where the CLI and the API document find them.
pub use crate::hub::recruiting::{
    config_with, config_with_reserve, validate, RecruitError, RecruitGrant, RecruitGroup, RecruitRequest, RecruitedMachine, Recruiting,
    DEFAULT_IDLE_LOAD_PCT, DEFAULT_RESERVE_PCT,
};

/// `POST /api/v1/recruit`: the grant, at once; the group's job is written right after.
pub fn recruit(app: &Arc<App>, who: &Principal, req: RecruitRequest) -> Result<RecruitGrant, RecruitError> {
    validate(&req)?;
    if !app.scheduling.is_leader() {
        return Err(RecruitError::NotLeading);
    }
    let grant = app.scheduling.recruiting.grant(&req, &who.submitter())?;
    if let Some(group) = &grant.group {
        let agents: Vec<String> = grant.machines.iter().map(|m| m.agent_id.clone()).collect();
        // The scheduler places nothing else on them meanwhile.
        app.scheduling.send(Msg::Machines { agents: agents.clone() });
        tokio::spawn(write_group(app.clone(), who.clone(), group.clone(), req, agents));
        tracing::info!(
            group,
            machines = grant.machines.len(),
            idle = grant.idle,
            reserved = grant.reserved,
            us = grant.decided_us,
            "machines recruited"
        );
    }
    Ok(grant)
}

/// `POST /api/v1/recruit/{group}/release`: ends the group (its job is cancelled) and
/// gives its machines back.
pub async fn release(app: &Arc<App>, who: &Principal, id: &str) -> Result<RecruitGroup, RecruitError> {
    let (job, machines) = app.scheduling.recruiting.give_back(who, id)?;
    if let Some(j) = job {
        match store::cancel_job(&app.db, who, j).await {
            Ok(_) | Err(store::StoreError::Conflict(_)) => {}
            Err(e) => return Err(e.into()),
        }
        app.scheduling.send(Msg::Job { job: j, ended: None });
    }
    look_again(app, &machines);
    app.scheduling.recruiting.group(who, id)
}

/// Tells the driver to look at these machines again (lent or given back).
fn look_again(app: &App, machines: &[MachineId]) {
    if machines.is_empty() {
        return;
    }
    let agents = app.scheduling.recruiting.agents_of(machines);
    app.scheduling.send(Msg::Machines { agents });
}

/// Writes a granted group: one gang job, its ranks leased straight to the granted
/// machines (waiting for their long polls like any placement), then tells the scheduler.
/// A group released meanwhile is cancelled as soon as it is written; one that cannot be
/// written fails and gives its machines back.
async fn write_group(app: Arc<App>, who: Principal, group: String, req: RecruitRequest, agents: Vec<String>) {
    let fail = |app: &App, e: String| {
        tracing::warn!(group, error = %e, "writing a recruit group failed; its machines are given back");
        let machines = app.scheduling.recruiting.fail(&group, e);
        look_again(app, &machines);
    };
    let plan_of = |job| Planned {
        job,
        replacement: false,
        members: agents.iter().enumerate().map(|(r, a)| (r as u32, a.clone())).collect(),
        algorithm: "recruit".into(),
        reason: format!("instant recruitment {group}: predicted idle for {} s", req.seconds),
        prediction_source: "estimate".into(),
        predicted_runtime_s: req.seconds as f64,
    };
    let written = sql::insert_placed(&app.db, &who, &submit_of(&req, agents.len() as u32), plan_of, DELIVERY_WINDOW_MS).await;
    let job = match written {
        Ok(job) => job,
        Err(e) => return fail(&app, e.to_string()),
    };
    let released = app.scheduling.recruiting.written(&group, job);
    if released {
        let _ = store::cancel_job(&app.db, &who, job).await;
    } else {
        for a in &agents {
            app.scheduling.wake(a);
        }
        super::lease_notice::announce_leases(&app, &agents.iter().map(String::as_str).collect::<Vec<_>>());
    }
    app.scheduling.send(Msg::Job { job, ended: None });
}
