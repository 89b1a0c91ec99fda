//! The coordinator's scheduling: `lull_core::sched` driven event by event.
//!
//! * Every change that can matter to placement — a job submitted, a task ended, released,
//!   re-queued or cancelled, an agent's long poll opening or closing, a heartbeat — is a
//!   [`Msg`] sent with [`Scheduling::send`]. The database stays the truth; a message only
//!   says *what to look at again*.
//! * One replica leads ([`replicas`]): it holds the scheduler state in memory, rebuilt from
//!   the database when it takes the lead, applies the messages in batches and runs a
//!   pass after each batch (no fixed cycle). A pass's assignments become leases in one
//!   transaction ([`sql::assign`]); each waits for its agent's long poll, which takes it
//!   in one transaction with the other polls asking meanwhile ([`delivery`]). A lease
//!   that is not taken within [`DELIVERY_WINDOW_MS`] goes back to the queue through the
//!   ordinary expiry sweep.
//! * With SQLite there is one replica and it leads. With PostgreSQL every replica tries a
//!   session advisory lock; the holder leads, the others forward their messages with
//!   `pg_notify` and learn of new leases the same way. A killed leader's session ends,
//!   its lock with it, and another replica takes the lead within a second or two.
//!
//! A task is leased only through `UPDATE … WHERE state = 'queued'`, so even two replicas
//! that both believed they led could never lease one task twice.

pub mod delivery;
pub mod driver;
pub mod lease_notice;
pub mod recruiting;
pub mod replicas;
pub mod sql;

// The shared state the tasks here run on, defined below them in `crate::hub`.
pub use crate::hub::{Ended, Msg, Scheduling, DELIVERY_WINDOW_MS};

/// Parses a scheduling algorithm name as configured (`fifo`, `first_fit`/`first-fit`,
/// `random`, `spt`, `lpt`, `backfill`).
pub fn parse_algorithm(s: &str) -> Result<lull_core::sched::Algorithm, String> {
    let norm = s.trim().to_ascii_lowercase().replace('-', "_");
    lull_core::sched::Algorithm::ALL.into_iter().find(|a| a.name() == norm).ok_or_else(|| {
        let names: Vec<&str> = lull_core::sched::Algorithm::ALL.iter().map(|a| a.name()).collect();
        format!("scheduler algorithm {s:?} is not one of {}", names.join(", "))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn algorithm_names_parse_and_a_wrong_one_lists_the_choices() {
        assert_eq!(parse_algorithm("first-fit").unwrap(), lull_core::sched::Algorithm::FirstFit);
        assert_eq!(parse_algorithm("Backfill").unwrap(), lull_core::sched::Algorithm::Backfill);
        let e = parse_algorithm("sjf").unwrap_err();
        assert!(e.contains("fifo, first_fit, random, spt, lpt, backfill"), "{e}");
    }
}
