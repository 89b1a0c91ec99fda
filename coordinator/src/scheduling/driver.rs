//! The leader's scheduler loop: `lull_core::sched::Scheduler` in memory, fed the
//! [`Msg`]s of this and the other replicas, one pass per batch of messages.
//!
//! The database is the truth; the scheduler mirrors it. A [`Msg::Job`] makes the driver
//! read that job again and bring the scheduler in line (`reconcile`): a new queued job is
//! submitted, a completed member finishes (its CPU time feeds the runtime prediction), a
//! job back in the queue is evicted in the scheduler, a cancelled or failed one leaves it.
//! Machines are the enrolled agents: *available* while at least one of their long polls
//! is open (one free slot per open poll), with the owner's budget, speed and load from
//! the latest heartbeat. Running jobs found at a rebuild (leased by an earlier leader)
//! are not re-placed: they hold their machines' slots until they end.
//!
//! Memory-centric placement (seed 001): a heartbeat's memory report goes to the
//! scheduler with the machine (M and each guest's measured working set, fault rate, age,
//! I/O), and after each one the driver asks [`Scheduler::memory_migration`] whether a job
//! must leave that machine. If so it re-queues the task in the database
//! ([`store::migrate_task`]: no retry used, not an eviction, the reason in the job's
//! placement), tells the scheduler (`Event::JobMigrated`, which prefers the target), and
//! the task's agent learns it from a 409 on its next renewal — a lease taken back — and
//! stops the guest; the next lease resumes from the checkpoint it last uploaded.

use super::sql::{self, JobRow, Planned};
use crate::app::App;
use crate::hub::{Ended, Msg, DELIVERY_WINDOW_MS};
use crate::model::{Heartbeat, MemoryReport};
use crate::store::{self, now_ms};
use lull_core::sched::{Event, JobId, JobSpec, Machine, MachineId, Millis, SchedConfig, Scheduler};
use lull_core::sched::{JobLoad, MachineMemory};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

/// A pass runs at least this often, to raise outlived predictions (Backfill's
/// reservations depend on them) even when nothing happens.
const IDLE_PASS: Duration = Duration::from_secs(30);

/// How the leader sees one agent.
#[derive(Clone, Debug)]
struct AgentView {
    name: String,
    owner: String,
    /// The machine's enrolled name.
    machine: String,
    base_speed: f64,
    load: f64,
    budget_left: u32,
    allowed: bool,
    /// Since when its heartbeats say it has been available (None: not available).
    idle_since: Option<i64>,
    /// Long polls open now: one free slot each.
    polls: u32,
    /// Leases assigned to it that no poll has taken yet.
    pending: u32,
    free_mem: u64,
    /// Slots held by running tasks the scheduler did not place (found at a rebuild).
    external: u32,
    /// Its latest memory report (seed 001), if its agent sends one.
    memory: Option<MachineMemory>,
}

/// A heartbeat's memory report as the scheduler keeps it (negative or non-finite figures,
/// which the API refuses, count as 0).
fn machine_memory(r: &MemoryReport) -> MachineMemory {
    let num = |v: f64| if v.is_finite() { v.max(0.0) } else { 0.0 };
    MachineMemory {
        guest_memory: r.guest_memory_bytes,
        guests: r
            .guests
            .iter()
            .filter(|g| g.job_id > 0)
            .map(|g| JobLoad {
                job: JobId(g.job_id as u64),
                age_s: num(g.age_s),
                working_set: g.working_set_bytes,
                fault_rate: num(g.major_faults_per_s),
                io_rate: num(g.io_bytes_per_s.unwrap_or(0.0)),
            })
            .collect(),
        pressure: r.pressure,
    }
}

impl AgentView {
    fn new(name: &str, owner: &str, machine: &str) -> AgentView {
        AgentView {
            name: name.to_string(),
            owner: owner.to_string(),
            machine: machine.to_string(),
            base_speed: 1.0,
            load: 0.0,
            budget_left: 1,
            allowed: true,
            idle_since: None,
            polls: 0,
            pending: 0,
            free_mem: 0,
            external: 0,
            memory: None,
        }
    }

    fn apply_heartbeat(&mut self, hb: &Heartbeat, now: i64) {
        self.base_speed = if hb.base_speed.is_finite() && hb.base_speed > 0.0 { hb.base_speed } else { 1.0 };
        self.load = if hb.current_speed.is_finite() { (1.0 - hb.current_speed / self.base_speed).clamp(0.0, 1.0) } else { 0.0 };
        self.budget_left = hb.budget_left;
        self.allowed = !matches!(hb.state.as_str(), "paused" | "not_allowed" | "out_of_budget");
        self.free_mem = self.free_mem.max(hb.free_mem_bytes);
        self.memory = hb.memory.as_ref().map(machine_memory);
        // Since when it has been available: as the agent counts it when it says (its own
        // idle time, across coordinator restarts), else since this leader first saw it so.
        self.idle_since = match (hb.available, hb.idle_for_s) {
            (false, _) => None,
            (true, Some(s)) => Some(now - (s.min(365 * 86_400) as i64) * 1000),
            (true, None) => Some(self.idle_since.unwrap_or(now)),
        };
    }
}

/// The running leader's state.
pub struct Driver {
    app: Arc<App>,
    sched: Scheduler,
    ids: HashMap<String, MachineId>,
    agents: HashMap<MachineId, AgentView>,
    /// Queued ranks of each job the scheduler holds, in rank order: a placement's
    /// machines take them in this order.
    ranks: HashMap<i64, Vec<u32>>,
    /// Running jobs the scheduler did not place (found at a rebuild) → their machines.
    external: HashMap<i64, Vec<MachineId>>,
    next_machine: u64,
    /// The jobs of the batch being applied, read from the database in one go before it
    /// (`None`: not found); each is used once, a second look reads again.
    prefetched: HashMap<i64, Option<JobRow>>,
    /// Jobs a memory migration re-queued → why, added to their next placement's reason.
    moved: HashMap<i64, String>,
}

impl Driver {
    /// Builds the scheduler state from the database.
    pub async fn rebuild(app: Arc<App>, config: SchedConfig) -> Result<Driver, crate::store::StoreError> {
        let sched = Scheduler::new(config).map_err(|e| crate::store::StoreError::Invalid(e.to_string()))?;
        let mut d = Driver {
            app: app.clone(),
            sched,
            ids: HashMap::new(),
            agents: HashMap::new(),
            ranks: HashMap::new(),
            external: HashMap::new(),
            next_machine: 1,
            prefetched: HashMap::new(),
            moved: HashMap::new(),
        };
        let now = now_ms();
        app.scheduling.recruiting.reset(app.config.recruit.clone());
        for a in sql::agents(&app.db).await? {
            let id = d.intern(&a.id, &a.owner, &a.machine);
            let v = d.agents.get_mut(&id).expect("just interned");
            if let Some((at, hb)) = app.live.latest(&a.id) {
                v.apply_heartbeat(&hb, at);
            } else {
                v.base_speed = a.base_speed.filter(|s| s.is_finite() && *s > 0.0).unwrap_or(1.0);
                v.budget_left = a.budget_left.map_or(1, |b| b.clamp(0, u32::MAX as i64) as u32);
                v.free_mem = a.free_mem.map_or(0, |m| m.max(0) as u64);
                v.allowed = !matches!(a.state.as_deref(), Some("paused" | "not_allowed" | "out_of_budget"));
                if let (Some(b), Some(c)) = (a.base_speed, a.current_speed) {
                    if b > 0.0 && c.is_finite() {
                        v.load = (1.0 - c / b).clamp(0.0, 1.0);
                    }
                }
            }
            d.update_machine(id, now);
        }
        // The runtime history the previous scheduler learnt (another replica's, or this
        // one's before a restart): predictions go on from it.
        let programs = sql::program_stats(&app.db).await?;
        for stats in &programs {
            d.sched.restore_program_stats(stats);
        }
        let jobs = sql::open_jobs(&app.db).await?;
        let n = jobs.len();
        for j in jobs {
            d.adopt(j, now);
        }
        tracing::info!(jobs = n, machines = d.agents.len(), programs = programs.len(), algorithm = %d.sched.config().algorithm, "scheduler state rebuilt");
        Ok(d)
    }

    fn intern(&mut self, name: &str, owner: &str, machine: &str) -> MachineId {
        if let Some(id) = self.ids.get(name) {
            return *id;
        }
        let id = MachineId(self.next_machine);
        self.next_machine += 1;
        self.ids.insert(name.to_string(), id);
        self.agents.insert(id, AgentView::new(name, owner, machine));
        id
    }

    /// Tells the scheduler the machine's current snapshot.
    fn update_machine(&mut self, id: MachineId, now: i64) {
        let Some(v) = self.agents.get(&id) else { return };
        let guests = self.sched.guests_on(id);
        // What the scheduler counts as in use by its guests (declared, or measured for a
        // job placed again), which the agent's free memory already excludes.
        let declared: u64 =
            guests.iter().filter_map(|j| self.sched.job(*j)).filter_map(|j| j.running.as_ref()).map(|r| r.memory_per_member).sum();
        let free_slots = v.polls.saturating_sub(v.pending);
        // Instant recruitment: a machine with a free slot, allowed and with budget left
        // may be lent; one lent is not the scheduler's to place on.
        let recruiting = &self.app.scheduling.recruiting;
        let eligible = free_slots > 0 && v.allowed && v.budget_left > 0;
        let idle_for_s = v.idle_since.map_or(0, |t| (now - t).max(0) as u64 / 1000);
        let lent = recruiting.set_standing(id, &v.name, &v.machine, &v.owner, idle_for_s, eligible);
        let m = Machine {
            id,
            owner: v.owner.clone(),
            base_speed: v.base_speed,
            load: v.load,
            free_memory: v.free_mem.saturating_add(declared),
            interruptions_left: v.budget_left,
            allowed: v.allowed,
            available: free_slots > 0 && !lent,
            idle_since: Millis(v.idle_since.unwrap_or(now).max(0) as u64),
            slots: (guests.len() as u32 + free_slots).max(1),
            memory: v.memory.clone(),
        };
        if let Err(e) = self.sched.handle(Millis(now.max(0) as u64), Event::MachineUpdated(m)) {
            tracing::warn!(machine = %v.name, error = %e, "scheduler refused a machine update");
        }
    }

    fn machine_of(&mut self, agent: &str) -> Option<MachineId> {
        self.ids.get(agent).copied()
    }

    /// Takes a job read at a rebuild into the scheduler (queued, or a halted gang) or as
    /// external (running).
    fn adopt(&mut self, j: JobRow, now: i64) {
        if j.halted_ms.is_some() && self.adopt_halted_gang(&j, now) {
            return;
        }
        if j.tasks.iter().any(|t| t.state == "leased") {
            let machines: Vec<MachineId> = j
                .tasks
                .iter()
                .filter(|t| t.state == "leased")
                .filter_map(|t| t.agent_id.as_deref())
                .filter_map(|a| self.ids.get(a).copied())
                .collect();
            for m in &machines {
                if let Some(v) = self.agents.get_mut(m) {
                    v.external += 1;
                }
            }
            self.external.insert(j.id, machines);
        } else if j.state == "queued" {
            self.submit(&j, now);
        }
    }

    /// A gang halted for a lost member when the previous leader stopped: its leased
    /// ranks hold their machines (frozen by their agents) and its queued ranks are
    /// vacancies the next pass fills first, as under the leader that saw the loss. False
    /// when the records do not describe such a gang (then it is adopted as usual, and
    /// the halt sweep's timeout still applies).
    fn adopt_halted_gang(&mut self, j: &JobRow, now: i64) -> bool {
        let leased: Vec<&sql::TaskRow> = j.tasks.iter().filter(|t| t.state == "leased").collect();
        let queued: Vec<u32> = j.tasks.iter().filter(|t| t.state == "queued").map(|t| t.rank).collect();
        let members: Option<Vec<MachineId>> = leased.iter().map(|t| t.agent_id.as_deref().and_then(|a| self.ids.get(a).copied())).collect();
        let Some(members) = members.filter(|m| !m.is_empty() && !queued.is_empty()) else { return false };
        let halted_since = Millis(j.halted_ms.unwrap_or(now).max(0) as u64);
        let spec = JobSpec {
            id: JobId(j.id as u64),
            program: j.program.clone(),
            width: (members.len() + queued.len()) as u32,
            memory_per_member: (j.mem_bytes > 0).then_some(j.mem_bytes),
            submitted_at: Millis(j.created_ms.max(0) as u64),
            user_estimate_s: j.estimate_s.filter(|e| e.is_finite() && *e >= 0.0),
            checkpointable: j.checkpointable,
        };
        let found = Event::HaltedGangFound {
            spec,
            members: members.clone(),
            vacancies: queued.len() as u32,
            started_at: halted_since,
            halted_since,
        };
        match self.sched.handle(Millis(now.max(0) as u64), found) {
            Ok(_) => {
                self.ranks.insert(j.id, queued);
                for m in members {
                    self.update_machine(m, now);
                }
                tracing::info!(job = j.id, "halted gang found at the rebuild: its lost ranks are placed first");
                true
            }
            Err(e) => {
                tracing::warn!(job = j.id, error = %e, "scheduler refused a halted gang; held as running until the halt times out");
                false
            }
        }
    }

    fn submit(&mut self, j: &JobRow, now: i64) {
        let ranks: Vec<u32> = j.tasks.iter().filter(|t| t.state == "queued").map(|t| t.rank).collect();
        if ranks.is_empty() {
            return;
        }
        let spec = JobSpec {
            id: JobId(j.id as u64),
            program: j.program.clone(),
            width: ranks.len() as u32,
            memory_per_member: (j.mem_bytes > 0).then_some(j.mem_bytes),
            submitted_at: Millis(j.created_ms.max(0) as u64),
            user_estimate_s: j.estimate_s.filter(|e| e.is_finite() && *e >= 0.0),
            checkpointable: j.checkpointable,
        };
        match self.sched.handle(Millis(now.max(0) as u64), Event::JobSubmitted(spec)) {
            Ok(_) => {
                self.ranks.insert(j.id, ranks);
            }
            Err(e) => tracing::warn!(job = j.id, error = %e, "scheduler refused a job"),
        }
    }

    /// Ends an external (rebuild-found) job's hold on its machines.
    fn drop_external(&mut self, job: i64) {
        if let Some(ms) = self.external.remove(&job) {
            for m in ms {
                if let Some(v) = self.agents.get_mut(&m) {
                    v.external = v.external.saturating_sub(1);
                }
            }
        }
    }

    /// Brings the scheduler's view of one job in line with the database.
    async fn reconcile(&mut self, job: i64, ended: Option<Ended>) {
        let now = now_ms();
        let t = Millis(now.max(0) as u64);
        let read = match self.prefetched.remove(&job) {
            Some(row) => Ok(row),
            None => sql::job(&self.app.db, job).await,
        };
        let row = match read {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(job, error = %e, "reading a job for the scheduler failed");
                return;
            }
        };
        if row.as_ref().is_none_or(|r| r.state != "running") {
            // A recruit group no longer running is released together.
            for m in self.app.scheduling.recruiting.job_left(job) {
                self.update_machine(m, now);
            }
        }
        let jid = JobId(job as u64);
        let held = self.sched.job(jid).map(|j| (j.running.is_some(), j.spec.width));
        let Some(row) = row else {
            if held.is_some() {
                let _ = self.sched.handle(t, Event::JobCancelled { job: jid });
            }
            self.ranks.remove(&job);
            self.drop_external(job);
            return;
        };
        if self.external.contains_key(&job) {
            if row.tasks.iter().any(|t| t.state == "leased") {
                return;
            }
            self.drop_external(job);
        }
        let touched: Vec<MachineId> = self.members(jid);
        match (row.state.as_str(), held) {
            ("queued", None) => self.submit(&row, now),
            ("queued", Some((false, width))) => {
                let queued = row.tasks.iter().filter(|t| t.state == "queued").count() as u32;
                if queued != width {
                    let _ = self.sched.handle(t, Event::JobCancelled { job: jid });
                    self.submit(&row, now);
                }
            }
            ("queued", Some((true, _))) => self.requeued(&row, ended.as_ref(), &touched, t, now),
            ("running" | "completed", Some((true, _))) => {
                self.members_lost(&row, ended.as_ref(), &touched, t, now);
                self.members_completed(&row, ended.as_ref(), t);
                if row.state == "completed" {
                    if self.sched.job(jid).is_some() {
                        let _ = self.sched.handle(t, Event::JobCancelled { job: jid });
                    }
                    self.ranks.remove(&job);
                    if let Some(stats) = self.sched.predictor().program_stats(&row.program) {
                        if let Err(e) = sql::save_program_stats(&self.app.db, &stats).await {
                            tracing::warn!(program = %row.program, error = %e, "saving prediction stats failed");
                        }
                    }
                }
            }
            ("running", None) => {
                // Leased by someone else (an earlier leader): hold its machines.
                self.adopt(row, now);
            }
            (_, Some(_)) => {
                // Completed while queued here, failed or cancelled: it leaves.
                let _ = self.sched.handle(t, Event::JobCancelled { job: jid });
                self.ranks.remove(&job);
            }
            (_, None) => {}
        }
        for m in touched {
            self.update_machine(m, now);
        }
    }

    /// A running job back in the queue: a member was evicted, failed or lost its lease (a
    /// gang restarts together). The scheduler re-queues the whole job at its place.
    fn requeued(&mut self, row: &JobRow, ended: Option<&Ended>, touched: &[MachineId], t: Millis, now: i64) {
        let (job, jid) = (row.id, JobId(row.id as u64));
        let (machine, cpu) = match ended {
            Some(e) if !e.completed => (self.machine_of(&e.agent), e.cpu_s),
            _ => (None, 0.0),
        };
        let machine = machine.filter(|m| touched.contains(m)).or_else(|| touched.first().copied());
        if let Some(machine) = machine {
            if let Err(e) = self.sched.handle(t, Event::TaskEvicted { job: jid, machine, cpu_seconds: cpu.max(0.0) }) {
                tracing::warn!(job, error = %e, "scheduler refused an eviction");
            }
        }
        let width = self.sched.job(jid).map(|j| j.spec.width);
        let queued = row.tasks.iter().filter(|t| t.state == "queued").count() as u32;
        if width != Some(queued) {
            let _ = self.sched.handle(t, Event::JobCancelled { job: jid });
            self.submit(row, now);
        } else {
            self.ranks.insert(job, row.tasks.iter().filter(|t| t.state == "queued").map(|t| t.rank).collect());
        }
    }

    /// Members of a running gang whose machine no longer holds their rank (leased or
    /// completed) were lost while the rest holds: the scheduler keeps the others placed
    /// (halted) and places a replacement for the queued rank.
    fn members_lost(&mut self, row: &JobRow, ended: Option<&Ended>, touched: &[MachineId], t: Millis, now: i64) {
        let (job, jid) = (row.id, JobId(row.id as u64));
        let holds = |m: MachineId, ids: &HashMap<String, MachineId>| {
            row.tasks
                .iter()
                .any(|t| (t.state == "leased" || t.state == "completed") && t.agent_id.as_deref().and_then(|a| ids.get(a)) == Some(&m))
        };
        let mut lost = false;
        for &m in touched {
            if holds(m, &self.ids) {
                continue;
            }
            let cpu = match ended {
                Some(e) if !e.completed && self.ids.get(&e.agent) == Some(&m) => e.cpu_s,
                _ => 0.0,
            };
            match self.sched.handle(t, Event::MemberLost { job: jid, machine: m, cpu_seconds: cpu.max(0.0) }) {
                Ok(_) => lost = true,
                Err(e) => tracing::warn!(job, error = %e, "scheduler refused a lost member"),
            }
        }
        let queued: Vec<u32> = row.tasks.iter().filter(|t| t.state == "queued").map(|t| t.rank).collect();
        let vacancies = self.sched.job(jid).and_then(|j| j.running.as_ref()).map_or(0, |r| r.vacancies);
        if lost || vacancies > 0 {
            if vacancies as usize == queued.len() {
                self.ranks.insert(job, queued);
            } else if self.sched.job(jid).is_some_and(|j| j.running.is_none()) {
                // Nothing left running: the scheduler re-queued the whole job.
                let _ = self.sched.handle(t, Event::JobCancelled { job: jid });
                self.submit(row, now);
            } else {
                tracing::warn!(job, vacancies, queued = queued.len(), "a halted gang's vacancies and queued ranks differ");
                self.ranks.insert(job, queued);
            }
        }
    }

    /// Completed members: finished in the scheduler (their CPU time goes into the
    /// program's runtime history when the last one ends).
    fn members_completed(&mut self, row: &JobRow, ended: Option<&Ended>, t: Millis) {
        let (job, jid) = (row.id, JobId(row.id as u64));
        for task in row.tasks.iter().filter(|t| t.state == "completed") {
            let Some(m) = task.agent_id.as_deref().and_then(|a| self.ids.get(a).copied()) else { continue };
            let still = self
                .sched
                .job(jid)
                .and_then(|j| j.running.as_ref())
                .is_some_and(|r| r.members.iter().any(|x| x.machine == m && !x.finished));
            if !still {
                continue;
            }
            let wall = self.sched.job(jid).and_then(|j| j.running.as_ref()).map_or(0.0, |r| t.secs_since(r.started_at));
            let cpu = match ended {
                Some(e) if e.completed && e.rank == task.rank => e.cpu_s,
                _ => task.cpu_s,
            };
            if let Err(e) = self.sched.handle(t, Event::JobFinished { job: jid, machine: m, cpu_seconds: cpu.max(0.0), wall_seconds: wall })
            {
                tracing::warn!(job, error = %e, "scheduler refused a completion");
            }
        }
    }

    fn members(&self, job: JobId) -> Vec<MachineId> {
        self.sched.job(job).and_then(|j| j.running.as_ref()).map(|r| r.unfinished_machines().collect()).unwrap_or_default()
    }

    /// Applies one message; returns whether a pass may now place something.
    pub async fn apply(&mut self, msg: Msg) {
        let now = now_ms();
        match msg {
            Msg::Job { job, ended } => self.reconcile(job, ended).await,
            Msg::Poll { agent, open, free_mem, delivered, hb } => {
                let id = match self.machine_of(&agent) {
                    Some(id) => id,
                    None => match sql::agent(&self.app.db, &agent).await {
                        Ok(Some(a)) => self.intern(&a.id, &a.owner, &a.machine),
                        _ => return,
                    },
                };
                let v = self.agents.get_mut(&id).expect("interned");
                if let Some(hb) = hb {
                    v.apply_heartbeat(&hb, now);
                }
                if open {
                    v.polls += 1;
                    v.free_mem = free_mem;
                    // An agent asks for work only while its policy accepts guest work, so
                    // an open poll outdates a heartbeat that said paused or not allowed
                    // (else a machine just resumed waited for its next heartbeat, up to
                    // an interval: `lull bench placements --real-agents`). Its budget
                    // still counts as last reported.
                    v.allowed = true;
                } else {
                    v.polls = v.polls.saturating_sub(1);
                    if delivered {
                        v.pending = v.pending.saturating_sub(1);
                    }
                    if v.polls == 0 {
                        v.pending = 0;
                    }
                }
                self.update_machine(id, now);
            }
            Msg::Heartbeat { agent, hb } => {
                let id = match self.machine_of(&agent) {
                    Some(id) => id,
                    None => match sql::agent(&self.app.db, &agent).await {
                        Ok(Some(a)) => self.intern(&a.id, &a.owner, &a.machine),
                        _ => return,
                    },
                };
                self.app.scheduling.recruiting.observe(id, &hb.owner_load);
                self.agents.get_mut(&id).expect("interned").apply_heartbeat(&hb, now);
                self.update_machine(id, now);
                // Once per report: a poll carries the latest heartbeat again, which must
                // not move a second job on the same reading.
                if hb.memory.is_some() {
                    self.migrate_for_memory(id).await;
                }
            }
            Msg::Machines { agents } => {
                for a in agents {
                    if let Some(id) = self.machine_of(&a) {
                        self.update_machine(id, now);
                    }
                }
            }
            Msg::AgentRemoved { agent } => {
                if let Some(id) = self.ids.remove(&agent) {
                    self.app.scheduling.recruiting.forget(id);
                    let jobs: Vec<JobId> = self.sched.guests_on(id).to_vec();
                    self.agents.remove(&id);
                    let _ = self.sched.handle(Millis(now.max(0) as u64), Event::MachineLost { machine: id });
                    // The store re-queued its tasks: read their jobs again (ranks to place).
                    for j in jobs {
                        self.reconcile(j.0 as i64, None).await;
                    }
                }
            }
        }
    }

    /// Carries out the memory migration due on `from` after its latest report, if any
    /// (see the module docs).
    async fn migrate_for_memory(&mut self, from: MachineId) {
        let Some(m) = self.sched.memory_migration(from) else { return };
        let (Some(from_agent), Some(to_agent)) =
            (self.agents.get(&m.from).map(|v| v.name.clone()), self.agents.get(&m.to).map(|v| v.name.clone()))
        else {
            return;
        };
        let job = m.job.0 as i64;
        let rank = match sql::job(&self.app.db, job).await {
            Ok(Some(row)) => {
                row.tasks.iter().find(|t| t.state == "leased" && t.agent_id.as_deref() == Some(from_agent.as_str())).map(|t| t.rank)
            }
            Ok(None) => None,
            Err(e) => {
                tracing::warn!(job, error = %e, "reading a job to migrate failed");
                return;
            }
        };
        let Some(rank) = rank else { return };
        let (from_name, to_name) = (self.machine_label(m.from), self.machine_label(m.to));
        let reason = m.describe(&from_name, &to_name);
        match store::migrate_task(&self.app.db, &from_agent, job, i64::from(rank), &reason).await {
            Ok(true) => {}
            Ok(false) => return,
            Err(e) => {
                tracing::warn!(job, error = %e, "re-queueing a job for a memory migration failed");
                return;
            }
        }
        let now = now_ms();
        let event = Event::JobMigrated { job: m.job, from: m.from, to: m.to, working_set: m.working_set };
        if let Err(e) = self.sched.handle(Millis(now.max(0) as u64), event) {
            tracing::warn!(job, error = %e, "scheduler refused a memory migration");
        }
        self.ranks.insert(job, vec![rank]);
        tracing::info!(job, rank, from = %from_agent, to = %to_agent, choice = %m.choice, oversize = m.oversize, pressure = m.pressure, working_set = m.working_set, "memory migration: task re-queued for another machine");
        self.moved.insert(job, reason);
        self.update_machine(m.from, now);
        self.app.metrics.requeued.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// A machine as people name it: its enrolled name, with its owner (ids are for JSON).
    fn machine_label(&self, id: MachineId) -> String {
        self.agents.get(&id).map_or_else(|| id.to_string(), |v| format!("{} ({})", v.machine, v.owner))
    }

    /// Applies a batch of messages: the jobs they name are read first, with a few
    /// statements for the whole batch.
    pub async fn apply_batch(&mut self, batch: Vec<Msg>) {
        let mut ids: Vec<i64> = batch.iter().filter_map(|m| if let Msg::Job { job, .. } = m { Some(*job) } else { None }).collect();
        ids.sort_unstable();
        ids.dedup();
        if ids.len() > 1 {
            match sql::jobs(&self.app.db, &ids).await {
                Ok(rows) => {
                    self.prefetched = ids.iter().map(|id| (*id, None)).collect();
                    for r in rows {
                        self.prefetched.insert(r.id, Some(r));
                    }
                }
                Err(e) => tracing::warn!(jobs = ids.len(), error = %e, "reading a batch's jobs failed; each is read on its own"),
            }
        }
        for m in batch {
            self.apply(m).await;
        }
        self.prefetched.clear();
    }

    /// Runs a pass and turns its assignments into leases; wakes the agents that got one.
    /// Returns how many jobs it placed.
    pub async fn pass(&mut self) -> usize {
        let now = now_ms();
        let started = std::time::Instant::now();
        let assignments = self.sched.pass(Millis(now.max(0) as u64));
        if assignments.is_empty() {
            return 0;
        }
        let mut placed_jobs = 0;
        let mut plans = Vec::with_capacity(assignments.len());
        let mut stale = Vec::new();
        for a in &assignments {
            let job = a.job.0 as i64;
            let ranks = self.ranks.remove(&job).unwrap_or_default();
            if ranks.len() < a.machines.len() {
                // The scheduler and the database disagree on this job's open ranks; the
                // placement is dropped and the job read again below.
                tracing::warn!(job, ranks = ranks.len(), machines = a.machines.len(), "placement without matching queued ranks");
                stale.push(job);
                continue;
            }
            let members: Vec<(u32, String)> =
                ranks.iter().zip(&a.machines).filter_map(|(r, m)| self.agents.get(m).map(|v| (*r, v.name.clone()))).collect();
            for m in &a.machines {
                if let Some(v) = self.agents.get_mut(m) {
                    v.pending += 1;
                }
            }
            let reason = match self.moved.remove(&job) {
                Some(why) => format!("{}; {why}", a.reason),
                None => a.reason.to_string(),
            };
            plans.push(Planned {
                job,
                replacement: a.is_replacement(),
                members,
                algorithm: a.algorithm.name().to_string(),
                reason,
                prediction_source: format!("{:?}", a.prediction.source).to_lowercase(),
                predicted_runtime_s: a.predicted_runtime_s,
            });
        }
        let placed = started.elapsed();
        match sql::assign(&self.app.db, &plans, DELIVERY_WINDOW_MS).await {
            Ok(conflicts) => {
                let mut woken: Vec<&str> = Vec::new();
                for p in plans.iter().filter(|p| !conflicts.contains(&p.job)) {
                    tracing::info!(job = p.job, agents = ?p.members.iter().map(|m| &m.1).collect::<Vec<_>>(), algorithm = %p.algorithm, reason = %p.reason, replacement = p.replacement, "job placed");
                    for (_, agent) in &p.members {
                        self.app.scheduling.wake(agent);
                        woken.push(agent);
                    }
                }
                super::lease_notice::announce_leases(&self.app, &woken);
                placed_jobs = plans.len() - conflicts.len();
                self.app.metrics.placements.fetch_add(placed_jobs as u64, std::sync::atomic::Ordering::Relaxed);
                self.app.metrics.placing_passes.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                for job in conflicts {
                    Box::pin(self.reconcile(job, None)).await;
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, jobs = plans.len(), "writing placements failed; the jobs are re-read");
                // The write may have been committed all the same: their next looks go to
                // the database.
                for (_, agent) in plans.iter().flat_map(|p| &p.members) {
                    self.app.scheduling.deliveries.may_wait(agent);
                }
                for p in &plans {
                    Box::pin(self.reconcile(p.job, None)).await;
                }
            }
        }
        for job in stale {
            let _ = self.sched.handle(Millis(now.max(0) as u64), Event::JobCancelled { job: JobId(job as u64) });
            Box::pin(self.reconcile(job, None)).await;
        }
        for m in assignments.iter().flat_map(|a| a.machines.iter()).copied().collect::<Vec<_>>() {
            self.update_machine(m, now);
        }
        self.app.metrics.last_pass_us.store(placed.as_micros() as u64, std::sync::atomic::Ordering::Relaxed);
        placed_jobs
    }
}

/// Runs the leader's loop until the task is aborted (leadership lost) or the inbox closes.
pub async fn run(app: Arc<App>, config: SchedConfig, mut inbox: mpsc::UnboundedReceiver<(u64, Msg)>) {
    let mut backoff = Duration::from_millis(200);
    let mut d = loop {
        match Driver::rebuild(app.clone(), config.clone()).await {
            Ok(d) => break d,
            Err(e) => {
                tracing::warn!(error = %e, "rebuilding the scheduler state failed; retrying");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(10));
            }
        }
    };
    let mut busy = d.pass().await > 0;
    loop {
        let Some((last, batch)) = next_batch(&mut inbox, busy).await else { return };
        d.apply_batch(batch).await;
        busy = d.pass().await > 0;
        app.scheduling.mark_passed(last);
    }
}

/// While the scheduler is placing (its last pass placed something), a batch gathers the
/// messages of this long after its first one before the pass: the polls that open in a
/// burst then share one pass and one transaction instead of one each.
pub const COALESCE: Duration = Duration::from_millis(1);

/// Waits for the next message (or [`IDLE_PASS`]: an empty batch), then takes everything
/// that arrived meanwhile — and, when `busy`, what arrives within [`COALESCE`] — into one
/// batch for one pass. Returns the number of its last message; `None` once the inbox
/// closed.
pub async fn next_batch(inbox: &mut mpsc::UnboundedReceiver<(u64, Msg)>, busy: bool) -> Option<(u64, Vec<Msg>)> {
    let (mut last, first) = tokio::select! {
        m = inbox.recv() => m?,
        _ = tokio::time::sleep(IDLE_PASS) => return Some((0, Vec::new())),
    };
    if busy {
        tokio::time::sleep(COALESCE).await;
    }
    let mut batch = vec![first];
    while let Ok((n, m)) = inbox.try_recv() {
        batch.push(m);
        last = n;
    }
    Some((last, batch))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn poll(agent: &str) -> Msg {
        Msg::Poll { agent: agent.into(), open: true, free_mem: 0, delivered: false, hb: None }
    }

    /// Sends `poll(a)`, then `poll(b)` from a task that runs as soon as the batching
    /// awaits anything (one thread: not before); returns the first batch.
    async fn first_batch(busy: bool) -> Vec<String> {
        let (tx, mut rx) = mpsc::unbounded_channel();
        tx.send((1, poll("a"))).unwrap();
        let later = tokio::spawn(async move {
            tx.send((2, poll("b"))).unwrap();
            tx
        });
        let (_, batch) = next_batch(&mut rx, busy).await.unwrap();
        let _tx = later.await.unwrap();
        batch.into_iter().map(|m| if let Msg::Poll { agent, .. } = m { agent } else { unreachable!() }).collect()
    }

    #[tokio::test]
    async fn while_placing_a_batch_waits_for_the_polls_that_follow() {
        assert_eq!(first_batch(true).await, ["a", "b"], "busy: the second poll shares the pass");
        assert_eq!(first_batch(false).await, ["a"], "idle: the first poll is passed on at once");
    }

    #[tokio::test]
    async fn a_batch_takes_what_is_queued_and_none_comes_once_the_inbox_closed() {
        let (tx, mut rx) = mpsc::unbounded_channel::<(u64, Msg)>();
        tx.send((7, poll("a"))).unwrap();
        tx.send((8, poll("b"))).unwrap();
        assert_eq!(next_batch(&mut rx, false).await.map(|(n, b)| (n, b.len())), Some((8, 2)));
        drop(tx);
        assert!(next_batch(&mut rx, false).await.is_none());
    }
}
