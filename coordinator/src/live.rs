//! The heartbeat hot path: each agent's latest heartbeat lives in memory and is written
//! to the database in one batched transaction per flush interval, so a heartbeat costs a
//! hash, a map lookup and a mutex, never a write transaction. Availability time is
//! tallied per agent and local day between consecutive heartbeats (gaps longer than
//! three heartbeat intervals count as not observed).
//!
//! The cost: a crash loses at most one flush interval of "last seen" and availability
//! tallies — never accounting, which arrives as ledger records.

use crate::auth::Principal;
use crate::model::{AgentInfo, Heartbeat};
use crate::store::{day_of, Snapshot};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

#[derive(Debug)]
struct LiveAgent {
    hb: Heartbeat,
    at_ms: i64,
    dirty: bool,
    /// UTC day number → (available ms, observed ms) not yet flushed.
    pending: HashMap<i64, (i64, i64)>,
}

/// Live heartbeat state and the credential cache.
#[derive(Debug, Default)]
pub struct Live {
    shards: [Mutex<HashMap<String, LiveAgent>>; 16],
    /// SHA-256 of a secret → who it belongs to, and when it was looked up. An agent's
    /// secret stops working when its machine is re-enrolled or removed, perhaps through
    /// another replica or straight in the database: entries older than [`CRED_TTL`] are
    /// looked up again.
    creds: Mutex<HashMap<[u8; 32], CachedCred>>,
    /// API keys' uses since the last flush, per (key hash, address).
    key_uses: Mutex<crate::identity::KeyUses>,
    /// Every enrolled machine as the database last listed it, and when: the waiting
    /// explanations of each submission read it instead of every machine's row (see
    /// [`ENROLLED_TTL`]). Cleared when a machine is enrolled, replaced or removed here.
    enrolled: Mutex<Option<(Arc<Vec<AgentInfo>>, std::time::Instant)>>,
}

/// A cached principal and when it was looked up.
type CachedCred = (Arc<Principal>, std::time::Instant);

/// How long a cached credential is trusted without a database look-up.
pub const CRED_TTL: std::time::Duration = std::time::Duration::from_secs(30);

/// How long the list of enrolled machines is reused without a database read. Their
/// heartbeats are not taken from it (this replica's latest are laid over it), so what it
/// can miss is a machine enrolled or removed through another replica meanwhile.
pub const ENROLLED_TTL: std::time::Duration = std::time::Duration::from_secs(5);

const DAY_MS: i64 = 86_400_000;

/// Whether a heartbeat says the machine was there for guest work: available by the
/// definition, or lent all the same (an owner's "Donate now" while they work, lending
/// while light) — the time reports call "available".
fn offered(hb: &Heartbeat) -> bool {
    hb.available || matches!(hb.state.as_str(), "donating" | "lending_light")
}

fn shard(id: &str) -> usize {
    id.bytes().fold(0usize, |h, b| h.wrapping_mul(31).wrapping_add(b as usize)) % 16
}

impl Live {
    /// A cached principal for a secret hash.
    pub fn cred(&self, digest: &[u8; 32]) -> Option<Arc<Principal>> {
        let creds = self.creds.lock().unwrap_or_else(|e| e.into_inner());
        creds.get(digest).filter(|(_, at)| at.elapsed() < CRED_TTL).map(|(p, _)| p.clone())
    }

    /// Caches a principal for a secret hash.
    pub fn cache_cred(&self, digest: [u8; 32], p: Arc<Principal>) {
        self.creds.lock().unwrap_or_else(|e| e.into_inner()).insert(digest, (p, std::time::Instant::now()));
    }

    /// Forgets every cached credential (a machine was re-enrolled or removed here).
    pub fn forget_creds(&self) {
        self.creds.lock().unwrap_or_else(|e| e.into_inner()).clear();
        self.forget_enrolled();
    }

    /// The enrolled machines as last listed, if that was less than [`ENROLLED_TTL`] ago.
    pub fn enrolled(&self) -> Option<Arc<Vec<AgentInfo>>> {
        let e = self.enrolled.lock().unwrap_or_else(|e| e.into_inner());
        e.as_ref().filter(|(_, at)| at.elapsed() < ENROLLED_TTL).map(|(l, _)| l.clone())
    }

    /// Keeps the enrolled machines just listed from the database.
    pub fn cache_enrolled(&self, list: Arc<Vec<AgentInfo>>) {
        *self.enrolled.lock().unwrap_or_else(|e| e.into_inner()) = Some((list, std::time::Instant::now()));
    }

    /// Forgets the enrolled machines' list (a machine was enrolled, replaced or removed).
    pub fn forget_enrolled(&self) {
        *self.enrolled.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }

    /// Counts a use of the API key whose hash is `hash`, from `addr`, at `now_ms`.
    pub fn key_used(&self, hash: String, addr: String, now_ms: i64) {
        let mut uses = self.key_uses.lock().unwrap_or_else(|e| e.into_inner());
        let e = uses.entry((hash, addr)).or_insert((now_ms, now_ms, 0));
        e.0 = e.0.min(now_ms);
        e.1 = e.1.max(now_ms);
        e.2 = e.2.saturating_add(1);
    }

    /// Takes the key uses counted since the last take, for writing.
    pub fn take_key_uses(&self) -> crate::identity::KeyUses {
        std::mem::take(&mut *self.key_uses.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Puts key uses back after a failed write, merged with those counted meanwhile.
    pub fn restore_key_uses(&self, back: crate::identity::KeyUses) {
        let mut uses = self.key_uses.lock().unwrap_or_else(|e| e.into_inner());
        for (k, (first, last, n)) in back {
            let e = uses.entry(k).or_insert((first, last, 0));
            e.0 = e.0.min(first);
            e.1 = e.1.max(last);
            e.2 = e.2.saturating_add(n);
        }
    }

    /// Records a heartbeat received at `now_ms`; `interval_ms` is the expected spacing.
    pub fn heartbeat(&self, agent_id: &str, hb: Heartbeat, now_ms: i64, interval_ms: i64) {
        let mut map = self.shards[shard(agent_id)].lock().unwrap_or_else(|e| e.into_inner());
        match map.get_mut(agent_id) {
            Some(a) => {
                let dt = now_ms - a.at_ms;
                if dt > 0 && dt <= 3 * interval_ms {
                    let e = a.pending.entry(now_ms.div_euclid(DAY_MS)).or_insert((0, 0));
                    if offered(&a.hb) {
                        e.0 += dt;
                    }
                    e.1 += dt;
                }
                a.hb = hb;
                a.at_ms = now_ms.max(a.at_ms);
                a.dirty = true;
            }
            None => {
                map.insert(agent_id.to_string(), LiveAgent { hb, at_ms: now_ms, dirty: true, pending: HashMap::new() });
            }
        }
    }

    /// The latest heartbeat of an agent this replica has seen.
    pub fn latest(&self, agent_id: &str) -> Option<(i64, Heartbeat)> {
        let map = self.shards[shard(agent_id)].lock().unwrap_or_else(|e| e.into_inner());
        map.get(agent_id).map(|a| (a.at_ms, a.hb.clone()))
    }

    /// The CPUs machine `agent_id` reported in its latest heartbeat to this replica.
    pub fn cpus(&self, agent_id: &str) -> Option<u32> {
        let map = self.shards[shard(agent_id)].lock().unwrap_or_else(|e| e.into_inner());
        map.get(agent_id).and_then(|a| a.hb.cpus)
    }

    /// Takes every changed agent's snapshot for writing (clears the dirty marks).
    pub fn take_dirty(&self) -> Vec<Snapshot> {
        let mut out = Vec::new();
        for s in &self.shards {
            let mut map = s.lock().unwrap_or_else(|e| e.into_inner());
            for (id, a) in map.iter_mut().filter(|(_, a)| a.dirty) {
                a.dirty = false;
                out.push(Snapshot {
                    agent_id: id.clone(),
                    at_ms: a.at_ms,
                    hb: a.hb.clone(),
                    availability: a.pending.drain().map(|(d, (av, ob))| (day_of(d * DAY_MS), av, ob)).collect(),
                });
            }
        }
        out
    }

    /// Puts snapshots back after a failed flush, so the next flush retries them.
    pub fn restore(&self, snaps: Vec<Snapshot>) {
        for s in snaps {
            let mut map = self.shards[shard(&s.agent_id)].lock().unwrap_or_else(|e| e.into_inner());
            if let Some(a) = map.get_mut(&s.agent_id) {
                a.dirty = true;
                for (d, av, ob) in s.availability {
                    let day =
                        d.parse::<chrono::NaiveDate>().map_or(0, |d| d.and_hms_opt(12, 0, 0).map_or(0, |t| t.and_utc().timestamp_millis()));
                    let e = a.pending.entry(day.div_euclid(DAY_MS)).or_insert((0, 0));
                    e.0 += av;
                    e.1 += ob;
                }
            }
        }
    }

    /// How many agents this replica has heard from.
    pub fn len(&self) -> usize {
        self.shards.iter().map(|s| s.lock().unwrap_or_else(|e| e.into_inner()).len()).sum()
    }

    /// True if no agent has been heard from.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hb(available: bool) -> Heartbeat {
        Heartbeat {
            state: "idle".into(),
            available,
            budget_left: 5,
            free_mem_bytes: 1,
            base_speed: 1.0,
            current_speed: 1.0,
            interruption_limit: Some(5),
            idle_for_s: None,
            owner_load: Vec::new(),
            memory: None,
            busy: None,
            cpus: None,
        }
    }

    #[test]
    fn availability_is_tallied_between_heartbeats_and_gaps_are_not_observed() {
        let live = Live::default();
        let t0 = 1_700_000_000_000;
        live.heartbeat("a", hb(true), t0, 1000);
        live.heartbeat("a", hb(false), t0 + 1000, 1000); // 1 s available
        live.heartbeat("a", hb(true), t0 + 2000, 1000); // 1 s not available
        live.heartbeat("a", hb(true), t0 + 60_000, 1000); // a gap: not observed
        let snaps = live.take_dirty();
        assert_eq!(snaps.len(), 1);
        let total: (i64, i64) = snaps[0].availability.iter().fold((0, 0), |acc, (_, a, o)| (acc.0 + a, acc.1 + o));
        assert_eq!(total, (1000, 2000));
        assert!(live.take_dirty().is_empty(), "clean after a take");
        live.restore(snaps);
        assert_eq!(live.take_dirty().len(), 1, "restored after a failed flush");
    }

    #[test]
    fn time_lent_by_the_owner_counts_as_available() {
        let live = Live::default();
        let t0 = 1_700_000_000_000;
        // "Donate now" while the owner works: not available by the definition, yet lent.
        let offered = Heartbeat { state: "donating".into(), ..hb(false) };
        live.heartbeat("a", offered.clone(), t0, 1000);
        live.heartbeat("a", Heartbeat { state: "owner_active".into(), ..hb(false) }, t0 + 1000, 1000);
        live.heartbeat("a", hb(false), t0 + 2000, 1000);
        let snaps = live.take_dirty();
        let total: (i64, i64) = snaps[0].availability.iter().fold((0, 0), |acc, (_, a, o)| (acc.0 + a, acc.1 + o));
        assert_eq!(total, (1000, 2000), "the donated second counts, the owner's does not");
    }
}
