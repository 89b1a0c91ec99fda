//! The coordinator's side of Linger-Longer migration (seed 000 §3.1, §5.2): an agent
//! whose owner came back while its guest lingers asks whether to move the task; the
//! coordinator answers with [`decide_migration`].
//!
//! The agent decides *when* to ask (its `T_lingr`); the coordinator decides *whether*:
//! seed 000 §5.2 — "if there is a free node available, it is best to try to migrate a
//! foreign job onto that node", using the migration cost, the local CPU utilisation, the
//! predicted duration of the local activity and the predicted duration of the foreign job.
//! Here:
//! * the destination is the first free machine in placement order (fastest effective
//!   speed, then more interruptions left, then idle longer) that is eligible, has the
//!   memory, and is neither the source nor a machine of the task's gang;
//! * the owner's episode is predicted to last as long again as it has so far (the median
//!   remaining life of a process equals its age, Harchol-Balter and Downey, as seed 000
//!   uses it for the non-idle episode);
//! * the task's remaining normtime is its predicted normtime minus what it has done; once
//!   it has outlived its prediction (or has none), as much again as it has done;
//! * staying, the task runs at `S_b · (1 − h)` (floored at the minimum CPU share) for the
//!   rest of the episode, then at full speed; moving, it pays `T_migr` and runs at the
//!   destination's current speed — from its checkpoint when the job is checkpointable,
//!   else from the start (its work so far is lost).
//!
//! It moves only when it is predicted to finish sooner (seed 000 eq. 2: `t_f2 < t_f1`).

use super::ids::MachineId;
use super::machine::Machine;
use super::placement::{check_eligible, rank_key};
use super::predict::current_speed;
use serde::{Deserialize, Serialize};
use std::fmt;

/// What the coordinator knows when an agent asks to move one task.
#[derive(Clone, Debug, PartialEq)]
pub struct MigrateAsk {
    /// The asking machine, with `load` = the owner's utilisation `h` now.
    pub source: Machine,
    /// How long the owner has been back (the non-idle episode so far), seconds.
    pub owner_busy_for_s: f64,
    /// `T_migr`: suspend + checkpoint size / bandwidth + resume, seconds (the agent's).
    pub migration_cost_s: f64,
    /// The job resumes from a checkpoint (else a move restarts the task).
    pub checkpointable: bool,
    /// Normtime the task has done (its machine's `S_b` × CPU seconds, plus any credit
    /// from earlier checkpoints), seconds at speed 1.0.
    pub done_normtime_s: f64,
    /// The task's predicted normtime for its whole run, if there is a prediction.
    pub predicted_normtime_s: Option<f64>,
    /// Memory the task needs on the destination, bytes.
    pub memory_needed: u64,
    /// Machines it must not go to (its gang's other members).
    pub exclude: Vec<MachineId>,
}

/// The answer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "decision")]
pub enum MigrateDecision {
    /// Move it: give the task back with its checkpoint; it is placed again.
    Migrate {
        /// The free machine the decision counted on (the scheduler places the task
        /// again by its own rule; this one was free when asked).
        to: MachineId,
        /// Predicted seconds to finish if it stays.
        stay_s: f64,
        /// Predicted seconds to finish if it moves there (`T_migr` included).
        move_s: f64,
    },
    /// Keep it where it is.
    Stay(StayWhy),
}

/// Why a task stays.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "why")]
pub enum StayWhy {
    /// No other machine can take it now.
    NoFreeMachine,
    /// The best free machine would not finish it sooner.
    NotSooner {
        /// That machine.
        best: MachineId,
        /// Predicted seconds to finish if it stays.
        stay_s: f64,
        /// Predicted seconds to finish if it moves there (`T_migr` included).
        move_s: f64,
    },
}

impl fmt::Display for MigrateDecision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MigrateDecision::Migrate { to, stay_s, move_s } => {
                write!(
                    f,
                    "migrate: {to} is free and predicted to finish it in {move_s:.0} s (migration included) instead of {stay_s:.0} s here"
                )
            }
            MigrateDecision::Stay(StayWhy::NoFreeMachine) => f.write_str("stay: no other machine can take it now"),
            MigrateDecision::Stay(StayWhy::NotSooner { best, stay_s, move_s }) => write!(
                f,
                "stay: predicted to finish in {stay_s:.0} s here, {move_s:.0} s on the best free machine ({best}, migration included)"
            ),
        }
    }
}

impl MigrateDecision {
    /// Whether the answer is to move.
    pub fn migrates(&self) -> bool {
        matches!(self, MigrateDecision::Migrate { .. })
    }
}

/// The task's remaining normtime: predicted minus done, or as much again as done once
/// outlived (or with no prediction).
pub(crate) fn remaining_normtime_s(done_s: f64, predicted_s: Option<f64>) -> f64 {
    let done = if done_s.is_finite() { done_s.max(0.0) } else { 0.0 };
    match predicted_s.filter(|p| p.is_finite()) {
        Some(p) if p > done => p - done,
        _ => done,
    }
}

/// Seconds to do `work_s` of normtime staying on `source`: at the owner-loaded speed for
/// the predicted rest of the episode (`episode_s`), then at the idle speed.
pub(crate) fn stay_seconds(source: &Machine, work_s: f64, episode_s: f64, min_cpu_share: f64) -> f64 {
    let busy = current_speed(source, min_cpu_share);
    let idle = source.base_speed;
    let in_episode = busy * episode_s.max(0.0);
    if work_s <= in_episode {
        work_s / busy
    } else {
        episode_s.max(0.0) + (work_s - in_episode) / idle
    }
}

/// The coordinator's decision for `ask` among `candidates` (the machines with a free
/// slot now; their guests already accounted in `free_memory` and `slots`).
pub fn decide_migration<'a>(ask: &MigrateAsk, candidates: impl IntoIterator<Item = &'a Machine>, min_cpu_share: f64) -> MigrateDecision {
    let best = candidates
        .into_iter()
        .filter(|m| m.id != ask.source.id && !ask.exclude.contains(&m.id))
        .filter(|m| check_eligible(m, 0, 0, ask.memory_needed).is_ok())
        .filter(|m| m.base_speed.is_finite() && m.base_speed > 0.0)
        .min_by_key(|m| rank_key(m));
    let Some(best) = best else { return MigrateDecision::Stay(StayWhy::NoFreeMachine) };
    let remaining = remaining_normtime_s(ask.done_normtime_s, ask.predicted_normtime_s);
    let episode = if ask.owner_busy_for_s.is_finite() { ask.owner_busy_for_s.max(0.0) } else { 0.0 };
    let stay_s = stay_seconds(&ask.source, remaining, episode, min_cpu_share);
    let to_do = if ask.checkpointable { remaining } else { remaining + ask.done_normtime_s.max(0.0) };
    let t_migr = if ask.migration_cost_s.is_finite() { ask.migration_cost_s.max(0.0) } else { f64::INFINITY };
    let move_s = t_migr + to_do / current_speed(best, min_cpu_share);
    if move_s < stay_s {
        MigrateDecision::Migrate { to: best.id, stay_s, move_s }
    } else {
        MigrateDecision::Stay(StayWhy::NotSooner { best: best.id, stay_s, move_s })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: f64 = 0.05;

    /// `d` is a migration to `to` with these predicted times (to the microsecond).
    fn moves(d: &MigrateDecision, to: u64, stay: f64, mv: f64) -> bool {
        matches!(d, MigrateDecision::Migrate { to: t, stay_s, move_s }
            if *t == MachineId(to) && (stay_s - stay).abs() < 1e-6 && (move_s - mv).abs() < 1e-6)
    }

    fn ask(h: f64, busy_s: f64, done: f64, predicted: Option<f64>) -> MigrateAsk {
        MigrateAsk {
            source: Machine { load: h, ..Machine::new(1, "src", 1.0) },
            owner_busy_for_s: busy_s,
            migration_cost_s: 10.0,
            checkpointable: true,
            done_normtime_s: done,
            predicted_normtime_s: predicted,
            memory_needed: 0,
            exclude: Vec::new(),
        }
    }

    #[test]
    fn a_long_job_on_a_busy_machine_moves_to_a_free_one() {
        // 1000 s left; the owner uses 80 % and has been back 60 s (60 s more predicted):
        // staying, 60 s at 0.2 does 12, then 988 s: 1048 s. Moving: 10 + 1000 = 1010 s.
        let free = Machine::new(2, "dst", 1.0);
        let d = decide_migration(&ask(0.8, 60.0, 200.0, Some(1200.0)), [&free], MIN);
        assert!(moves(&d, 2, 1048.0, 1010.0), "{d:?}");
        assert!(d.migrates());
        assert!(d.to_string().starts_with("migrate: machine 2 is free"), "{d}");
    }

    #[test]
    fn a_short_episode_or_a_light_owner_keeps_it_lingering() {
        let free = Machine::new(2, "dst", 1.0);
        // The owner at 20 % for 10 s: 10 s at 0.8 then full speed — losing 2 s beats 10 s.
        let d = decide_migration(&ask(0.2, 10.0, 200.0, Some(1200.0)), [&free], MIN);
        assert!(matches!(d, MigrateDecision::Stay(StayWhy::NotSooner { best: MachineId(2), .. })), "{d:?}");
        assert!(d.to_string().starts_with("stay: predicted to finish in"));
        // Nearly done: 5 s left (10 s at half speed) cannot repay a 10-s migration.
        let d = decide_migration(&ask(0.5, 600.0, 1195.0, Some(1200.0)), [&free], MIN);
        assert!(!d.migrates());
    }

    #[test]
    fn no_free_eligible_machine_means_stay() {
        let a = ask(1.0, 600.0, 100.0, Some(10_000.0));
        assert_eq!(decide_migration(&a, [], MIN), MigrateDecision::Stay(StayWhy::NoFreeMachine));
        // The source itself, a gang peer, an unavailable, an out-of-budget and a
        // too-small machine do not count.
        let mut a = a;
        a.memory_needed = 1 << 30;
        a.exclude = vec![MachineId(3)];
        let ms = [
            Machine { free_memory: 4 << 30, ..Machine::new(1, "src", 1.0) },
            Machine { free_memory: 4 << 30, ..Machine::new(3, "peer", 1.0) },
            Machine { available: false, free_memory: 4 << 30, ..Machine::new(4, "x", 1.0) },
            Machine { interruptions_left: 0, free_memory: 4 << 30, ..Machine::new(5, "x", 1.0) },
            Machine { free_memory: 1 << 20, ..Machine::new(6, "x", 1.0) },
        ];
        assert_eq!(decide_migration(&a, &ms, MIN).to_string(), "stay: no other machine can take it now");
        let ok = Machine { free_memory: 2 << 30, ..Machine::new(7, "x", 1.0) };
        assert!(matches!(decide_migration(&a, ms.iter().chain([&ok]), MIN), MigrateDecision::Migrate { to: MachineId(7), .. }));
    }

    #[test]
    fn the_fastest_free_machine_is_the_target_and_a_restart_counts_the_lost_work() {
        let slow = Machine::new(2, "slow", 1.0);
        let fast = Machine::new(3, "fast", 2.0);
        let a = ask(0.9, 300.0, 500.0, Some(1000.0));
        let d = decide_migration(&a, [&slow, &fast], MIN);
        // Stay: 300 s at 0.1 does 30, then 470 s: 770 s. Move: 10 + 500 / 2 = 260 s.
        assert!(moves(&d, 3, 770.0, 260.0), "{d:?}");
        // Not checkpointable: the 500 done are redone: 10 + 1000 / 2 = 510 s, still sooner.
        let d = decide_migration(&MigrateAsk { checkpointable: false, ..a.clone() }, [&slow, &fast], MIN);
        assert!(moves(&d, 3, 770.0, 510.0), "{d:?}");
        // On the slow one only, a restart is not worth it: 10 + 1000 > 770.
        let d = decide_migration(&MigrateAsk { checkpointable: false, ..a }, [&slow], MIN);
        assert!(!d.migrates());
    }

    #[test]
    fn remaining_work_is_predicted_minus_done_or_as_much_again() {
        assert_eq!(remaining_normtime_s(30.0, Some(100.0)), 70.0);
        assert_eq!(remaining_normtime_s(130.0, Some(100.0)), 130.0);
        assert_eq!(remaining_normtime_s(40.0, None), 40.0);
        assert_eq!(remaining_normtime_s(f64::NAN, Some(f64::NAN)), 0.0);
        // A fully loaded owner still leaves the minimum share.
        let m = Machine { load: 1.0, ..Machine::new(1, "a", 2.0) };
        assert!((stay_seconds(&m, 1.0, 100.0, 0.05) - 10.0).abs() < 1e-9);
        assert!((stay_seconds(&m, 20.0, 100.0, 0.05) - 105.0).abs() < 1e-9);
    }
}
