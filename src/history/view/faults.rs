//! `history::view::faults`: what the nemesis did, as intervals (each fault's start paired
//! with its undo, the final phase's undo closing whatever is open), and per fault the time
//! until a quorum-backed leader was observed again and until every node had rejoined it,
//! counting only reads taken after the latest fault started (or after the final heal).

use super::super::{ClockLead, FaultKind};
use super::cluster::{Cluster, QuorumLeader};
use serde::{Deserialize, Serialize};

/// A fault from its start to its undo.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FaultInterval {
    pub kind: FaultKind,
    pub nodes: Vec<String>,
    /// The start's `index` in the history.
    pub start_index: u64,
    pub start_ns: u64,
    /// None: still in force when the history ends.
    pub end_ns: Option<u64>,
    #[serde(skip)]
    pub start_pos: u32,
    #[serde(skip)]
    pub end_pos: Option<u32>,
    /// A clock fault's lead ([`FaultValue::clock_lead`]); None for other kinds.
    #[serde(skip)]
    pub clock_lead: Option<ClockLead>,
}

impl FaultInterval {
    /// How long after its end a clock fault may still stall timers that a faked monotonic
    /// clock drives, in ns; None when that cannot be bounded (an unknown mode, a rate still in
    /// force). 0 for other kinds.
    pub fn stalls_after_end_ns(&self) -> Option<u64> {
        match self.clock_lead {
            None => Some(0),
            Some(ClockLead::Ms(ms)) => Some(ms * 1_000_000),
            Some(ClockLead::Rate(gain)) => {
                let lasted = self.end_ns?.saturating_sub(self.start_ns);
                Some((gain * lasted as f64) as u64)
            }
            Some(ClockLead::Unknown) => None,
        }
    }

    /// A clock fault that may be moving its nodes' ticks at `t` (when the run faked the
    /// monotonic clock): in force, or ended less than its lead ago, since a reset that sets a
    /// clock back stalls the timers set while it was ahead. False for other kinds.
    pub fn moves_ticks_at(&self, t: u64) -> bool {
        self.kind == FaultKind::Clock
            && self.start_ns <= t
            && self.end_ns.is_none_or(|end| {
                self.stalls_after_end_ns()
                    .is_none_or(|lead| t <= end.saturating_add(lead))
            })
    }
}

/// One fault and how long until a quorum-backed leader was observed again.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FaultRecovery {
    pub fault_index: u64,
    pub kind: FaultKind,
    pub nodes: Vec<String>,
    pub start_ns: u64,
    /// None: no quorum-backed leader before the history ends.
    pub ms_to_quorum_leader: Option<u64>,
    /// Until every node that is up had rejoined that leader ([`View::settled`]); None: not
    /// before the history ends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ms_to_all_rejoined: Option<u64>,
    /// The leader then ("n3") and its epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leader: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub epoch: Option<u64>,
    #[serde(skip)]
    pub pos: u32,
}

/// The final phase's heal and when a quorum-backed leader was observed after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FinalHeal {
    pub time: u64,
    pub pos: u32,
    /// (ns after the heal, the leader) once observed.
    pub recovered: Option<(u64, QuorumLeader)>,
    /// ns after the heal until every node that is up had rejoined the leader
    /// ([`View::settled`]), once observed.
    pub rejoined: Option<u64>,
}

/// The fault sub-fold of a view: intervals, and the recoveries measured from them.
#[derive(Debug, Clone, Default)]
pub(super) struct Faults {
    /// Reads older than this do not count for fault recovery (the latest fault's start, or
    /// the final heal).
    pub(super) fresh_since: u64,
    pub(super) intervals: Vec<FaultInterval>,
    /// Faults not yet recovered from.
    pub(super) pending: Vec<FaultRecovery>,
    pub(super) recoveries: Vec<FaultRecovery>,
    pub(super) final_heal: Option<FinalHeal>,
    /// Faults (recovered from or not) whose every-node rejoin is not yet measured.
    awaiting_rejoin: usize,
}

impl Faults {
    /// A fault of `kind` on `nodes` began: it opens an interval and waits for its recovery.
    pub(super) fn starts(
        &mut self,
        kind: FaultKind,
        nodes: Vec<String>,
        at: At,
        clock_lead: Option<ClockLead>,
    ) {
        self.intervals.push(FaultInterval {
            kind,
            nodes: nodes.clone(),
            start_index: at.index,
            start_ns: at.time,
            end_ns: None,
            start_pos: at.pos,
            end_pos: None,
            clock_lead,
        });
        self.pending.push(FaultRecovery {
            fault_index: at.index,
            kind,
            nodes,
            start_ns: at.time,
            ms_to_quorum_leader: None,
            ms_to_all_rejoined: None,
            leader: None,
            epoch: None,
            pos: at.pos,
        });
        self.awaiting_rejoin += 1;
        self.fresh_since = at.time;
    }

    /// A fault of `kind` was undone on `undone` (none named: wherever it is in force; a final
    /// undo, a heal and a packet fault's undo close every open interval of their kind).
    pub(super) fn undone(&mut self, kind: FaultKind, undone: &[String], at: At, last: bool) {
        for i in self.intervals.iter_mut().filter(|i| i.end_ns.is_none()) {
            let hits = last
                || kind.facts().undo_ends_all
                || undone.is_empty()
                || i.nodes.iter().any(|n| undone.contains(n));
            if i.kind == kind && hits {
                i.end_ns = Some(at.time);
                i.end_pos = Some(at.pos);
            }
        }
    }

    /// The final phase healed everything (the first such action counts).
    pub(super) fn heals(&mut self, at: At) {
        if self.final_heal.is_none() {
            self.final_heal = Some(FinalHeal {
                time: at.time,
                pos: at.pos,
                recovered: None,
                rejoined: None,
            });
            self.fresh_since = at.time;
        }
    }

    /// After an event at `time` (history position `pos`): the recoveries of faults and of
    /// the final heal that a fresh quorum-backed leader now ends.
    pub(super) fn judge_recovery(&mut self, time: u64, pos: u32, cluster: &Cluster) {
        let waiting =
            !self.pending.is_empty() || self.final_heal.is_some_and(|h| h.recovered.is_none());
        if !waiting {
            return;
        }
        let Some(mut fresh) = cluster.quorum_leader(self.fresh_since) else {
            return;
        };
        fresh.pos = pos;
        let name = cluster.nodes[fresh.node].name.clone();
        for mut p in self.pending.drain(..) {
            p.ms_to_quorum_leader = Some((time - p.start_ns) / 1_000_000);
            p.leader = Some(name.clone());
            p.epoch = Some(fresh.epoch);
            self.recoveries.push(p);
        }
        if let Some(h) = &mut self.final_heal {
            if h.recovered.is_none() {
                h.recovered = Some((time - h.time, fresh));
            }
        }
    }

    /// Measures, for faults and the final heal still waiting for it, the time until every node
    /// had rejoined the leader (reads since the latest fault or the final heal).
    pub(super) fn judge_rejoin(&mut self, time: u64, cluster: &Cluster) {
        let heal_waits = self.final_heal.is_some_and(|h| h.rejoined.is_none());
        if self.awaiting_rejoin == 0 && !heal_waits {
            return;
        }
        if !cluster.settled(self.fresh_since).is_settled() {
            return;
        }
        for r in self.recoveries.iter_mut().chain(self.pending.iter_mut()) {
            if r.ms_to_all_rejoined.is_none() {
                r.ms_to_all_rejoined = Some((time - r.start_ns.min(time)) / 1_000_000);
            }
        }
        self.awaiting_rejoin = 0;
        if let Some(h) = &mut self.final_heal {
            if h.rejoined.is_none() {
                h.rejoined = Some(time - h.time.min(time));
            }
        }
    }

    /// Every fault, in start order, recovered from or not.
    pub(super) fn all_recoveries(&mut self) -> Vec<FaultRecovery> {
        let mut all = std::mem::take(&mut self.recoveries);
        all.append(&mut self.pending);
        all.sort_by_key(|r| r.start_ns);
        all
    }
}

/// Where a nemesis action stands in the history.
#[derive(Debug, Clone, Copy)]
pub(super) struct At {
    pub(super) index: u64,
    pub(super) time: u64,
    pub(super) pos: u32,
}
