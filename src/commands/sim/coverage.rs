//! What a simulated run reached, for exploration (`explore.rs`): the transitions the servers
//! took and the cluster states they passed through, each as a small key. A run that reaches a
//! key no earlier run reached is worth mutating; one that reaches only known keys is not.
//!
//! - A **transition** is one event a server handled: where it stood before (its process's life,
//!   its role, its Zab phase), what it handled (a notification, a Zab message by its frame's
//!   type byte, a timer, a closed connection, a client's write, ...) and where it stood after.
//!   `(Following, Sync) --NEWLEADER--> (Following, Broadcast)` is one; the same message in
//!   another phase is another.
//! - A **cluster state** is every server's place at once, with its epoch next to the newest
//!   epoch (the same, one behind, further behind) and its log next to the established leader's
//!   (the same, behind, ahead, no leader), as a sorted multiset: which server is which does
//!   not matter, so five permutations of one picture are one state.
//!
//! Both are cheap enough to take after every event of an explored run (a 60 s run of 5 nodes
//! handles about 45,000); a plain `simulate` run takes none.

use super::server::{Life, Server};
use super::world::{Ev, Wire};
use crate::checker::fxhash::{FastMap, FastSet, FxHasher};
use fle_node::api::{ServerState, ZabPhase};
use std::collections::BTreeMap;
use std::hash::Hasher;

/// The top byte of a key: what kind of coverage it is.
const TRANSITION: u64 = 1 << 56;
const CLUSTER: u64 = 2 << 56;

/// What one run reached, as keys.
#[derive(Debug, Default, Clone)]
pub struct Coverage {
    keys: FastSet<u64>,
    /// Per server: the facts its cluster-state summary is made of, as last seen.
    last: BTreeMap<u64, Facts>,
}

/// What a server's part of a cluster state depends on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct Facts {
    place: u8,
    epoch: u64,
    last_zxid: u64,
    leads: Option<u64>,
}

impl Coverage {
    /// The keys reached, in no particular order.
    pub fn keys(&self) -> impl Iterator<Item = u64> + '_ {
        self.keys.iter().copied()
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Server `sid` went from `before` (its [`place`] before the event) to where it stands
    /// now, on `input` ([`input_of`]).
    pub fn transition(&mut self, before: u8, input: u16, after: u8) {
        let key =
            TRANSITION | (u64::from(before) << 24) | (u64::from(input) << 8) | u64::from(after);
        self.keys.insert(key);
    }

    /// After an event: the cluster's state, when any server's facts changed.
    pub fn cluster(&mut self, servers: &BTreeMap<u64, Server>) {
        let mut changed = false;
        for (&sid, s) in servers {
            let now = Facts {
                place: place(s),
                epoch: s.disk.current_epoch,
                last_zxid: s.disk.last_zxid(),
                leads: s.established_epoch(),
            };
            if self.last.get(&sid) != Some(&now) {
                self.last.insert(sid, now);
                changed = true;
            }
        }
        if changed {
            self.keys.insert(CLUSTER | (cluster_state(&self.last) >> 8));
        }
    }
}

/// A server's place: its process's life, its role and its Zab phase, in one byte.
pub fn place(s: &Server) -> u8 {
    let life = match s.life {
        Life::Up => 0,
        Life::Paused => 1,
        Life::Down => 2,
    };
    let state = match s.state() {
        ServerState::Looking => 0,
        ServerState::Following => 1,
        ServerState::Leading => 2,
        ServerState::Observing => 3,
    };
    let phase = match s.zab_phase() {
        ZabPhase::Election => 0,
        ZabPhase::Discovery => 1,
        ZabPhase::Sync => 2,
        ZabPhase::Broadcast => 3,
    };
    (life << 4) | (state << 2) | phase
}

/// What an event gives the server that handles it, as a number: Zab messages by their frame's
/// type byte (`fle_node::zab::messages::frame_type`), every other event by its kind.
pub fn input_of(ev: &Ev) -> u16 {
    match ev {
        Ev::Deliver { wire, .. } => match wire {
            Wire::Note { .. } => 1,
            Wire::Zab { frame, .. } => {
                0x100 | u16::from(fle_node::zab::messages::frame_type(frame).unwrap_or(0))
            }
            Wire::Closed { .. } => 2,
            Wire::Write { .. } => 3,
            Wire::Reply { .. } => 4,
        },
        Ev::ElectionTimer { .. } => 5,
        Ev::Beat { .. } => 6,
        Ev::Dial { .. } => 7,
        Ev::Read { .. } => 8,
        Ev::ReadTimedOut { .. } => 9,
        Ev::Client { .. } => 10,
        Ev::ClientTimeout { .. } => 11,
        Ev::NoteRedial { .. } => 12,
        Ev::SlotWrite { .. } => 13,
        Ev::Pump { .. } => 14,
    }
}

/// The cluster state of `facts` as a hash: each server's place, its epoch next to the
/// newest and its log next to the established leader's, sorted (servers are interchangeable).
fn cluster_state(facts: &BTreeMap<u64, Facts>) -> u64 {
    let newest = facts.values().map(|f| f.epoch).max().unwrap_or(0);
    let leader = (facts.values())
        .filter(|f| f.leads.is_some())
        .max_by_key(|f| f.leads);
    let mut each: Vec<u16> = facts
        .values()
        .map(|f| {
            let epoch = newest.saturating_sub(f.epoch).min(2) as u16;
            let log = match leader {
                None => 0,
                Some(l) => match f.last_zxid.cmp(&l.last_zxid) {
                    std::cmp::Ordering::Equal => 1,
                    std::cmp::Ordering::Less => 2,
                    std::cmp::Ordering::Greater => 3,
                },
            };
            (u16::from(f.place) << 4) | (epoch << 2) | log
        })
        .collect();
    each.sort_unstable();
    let mut h = FxHasher::default();
    for e in each {
        h.write_u16(e);
    }
    h.finish()
}

/// How many runs reached each key so far, over a whole exploration.
#[derive(Debug, Default)]
pub struct Seen {
    runs: FastMap<u64, u32>,
}

impl Seen {
    /// Counts `run`'s keys; returns those no run reached before, sorted.
    pub fn add(&mut self, run: &Coverage) -> Vec<u64> {
        let mut new = Vec::new();
        for k in run.keys() {
            let n = self.runs.entry(k).or_insert(0);
            if *n == 0 {
                new.push(k);
            }
            *n += 1;
        }
        new.sort_unstable();
        new
    }

    /// How many runs reached `key`.
    pub fn runs(&self, key: u64) -> u32 {
        self.runs.get(&key).copied().unwrap_or(0)
    }

    /// Every key reached, transitions and cluster states.
    pub fn len(&self) -> usize {
        self.runs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.runs.is_empty()
    }

    /// How many distinct transitions were reached.
    pub fn transitions(&self) -> usize {
        self.runs
            .keys()
            .filter(|k| *k >> 56 == TRANSITION >> 56)
            .count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_transition_is_told_apart_by_where_it_started_what_came_and_where_it_ended() {
        let mut c = Coverage::default();
        c.transition(0b0000_0110, 0x108, 0b0000_0111);
        c.transition(0b0000_0110, 0x108, 0b0000_0111);
        assert_eq!(c.len(), 1, "the same transition twice is one key");
        c.transition(0b0000_0101, 0x108, 0b0000_0111);
        c.transition(0b0000_0110, 0x109, 0b0000_0111);
        c.transition(0b0000_0110, 0x108, 0b0000_0110);
        assert_eq!(c.len(), 4);
    }

    #[test]
    fn a_cluster_state_does_not_depend_on_which_server_is_which() {
        let f = |place, epoch, last_zxid, leads| Facts {
            place,
            epoch,
            last_zxid,
            leads,
        };
        let a: BTreeMap<u64, Facts> = [
            (1, f(0b1011, 3, 9, Some(3))),
            (2, f(0b0111, 3, 7, None)),
            (3, f(0, 2, 5, None)),
        ]
        .into();
        let b: BTreeMap<u64, Facts> = [
            (1, f(0, 2, 5, None)),
            (2, f(0b0111, 3, 7, None)),
            (3, f(0b1011, 3, 9, Some(3))),
        ]
        .into();
        assert_eq!(cluster_state(&a), cluster_state(&b));
        // A follower that caught up with its leader is another state.
        let c: BTreeMap<u64, Facts> = [
            (1, f(0, 2, 5, None)),
            (2, f(0b0111, 3, 9, None)),
            (3, f(0b1011, 3, 9, Some(3))),
        ]
        .into();
        assert_ne!(cluster_state(&a), cluster_state(&c));
    }

    #[test]
    fn seen_names_only_the_keys_no_run_reached_before() {
        let mut seen = Seen::default();
        let mut one = Coverage::default();
        one.transition(1, 1, 1);
        one.transition(1, 2, 1);
        assert_eq!(seen.add(&one).len(), 2);
        let mut two = Coverage::default();
        two.transition(1, 2, 1);
        two.transition(1, 3, 1);
        let new = seen.add(&two);
        assert_eq!(new.len(), 1);
        assert_eq!(seen.runs(new[0]), 1);
        assert_eq!(seen.transitions(), 3);
    }
}
