//! `history::view::reigns`: each quorum-backed leadership the view saw, (sid, epoch) in the
//! order first seen, and the fault that ended it, if one did. A fault ends a reign when its
//! start, applied to the cluster as it stood when the start was invoked, leaves the standing
//! leader without its quorum (a kill or pause of the leader, a cut between it and its
//! followers, a follower killed out of a bare quorum), and the reign is never seen standing
//! again on reads taken after the fault was done. Its time is exact, unlike a read's (a read may
//! answer up to the read slack late): a write acknowledged before the fault's `invoke` was
//! committed before that leadership ended, so before any later one began (leader-completeness).

use super::super::{FaultKind, FaultValue, F};
use super::cluster::{Cluster, QuorumLeader};
use super::faults::At;

/// One quorum-backed leadership.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reign {
    pub sid: u64,
    pub epoch: u64,
    /// When it was first seen standing.
    pub since_ns: u64,
    /// The fault that ended it, if one did.
    pub ended_by: Option<Ending>,
}

/// The fault that ended a reign.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ending {
    /// The fault start's `invoke` (the earliest its effect can be) and its position.
    pub at_ns: u64,
    pub pos: u32,
    /// When the fault was done: a read taken after it that still shows the reign standing
    /// undoes the ending (a short pause of the leader its followers never noticed).
    pub done_ns: u64,
}

/// A fault start invoked and not yet done, and the reign it would end.
#[derive(Debug, Clone)]
struct Pending {
    f: F,
    nodes: Vec<usize>,
    at: At,
    ends: Option<(u64, u64)>,
}

/// The reign sub-fold of a view.
#[derive(Debug, Clone, Default)]
pub(super) struct Reigns {
    pub(super) reigns: Vec<Reign>,
    pending: Vec<Pending>,
}

impl Reigns {
    /// A fault start of `kind` on `nodes` was invoked: the reign it would end, if any.
    pub(super) fn invoked(
        &mut self,
        start: (At, F, FaultKind),
        nodes: &[usize],
        v: &FaultValue,
        cluster: &Cluster,
    ) {
        let (at, f, kind) = start;
        self.pending.push(Pending {
            f,
            nodes: nodes.to_vec(),
            at,
            ends: would_end(cluster, kind, nodes, v),
        });
    }

    /// A fault start was done (`done`) or failed: the reign its invoke would end is ended,
    /// at the invoke's time (or, with no invoke seen, the cluster now decides, at this time).
    pub(super) fn outcome(
        &mut self,
        start: (At, F, FaultKind),
        nodes: &[usize],
        v: &FaultValue,
        done: bool,
        cluster: &Cluster,
    ) {
        let (at, f, kind) = start;
        let same = |p: &Pending| p.f == f && p.nodes == nodes;
        let pending = match self.pending.iter().position(same) {
            Some(i) => Some(self.pending.remove(i)),
            None => self
                .pending
                .iter()
                .position(|p| p.f == f)
                .map(|i| self.pending.remove(i)),
        };
        if !done {
            return;
        }
        let (from, ends) = match pending {
            Some(p) => (p.at, p.ends),
            None => (at, would_end(cluster, kind, nodes, v)),
        };
        let Some(key) = ends else { return };
        let ending = Ending {
            at_ns: from.time,
            pos: from.pos,
            done_ns: at.time,
        };
        if let Some(r) = self
            .reigns
            .iter_mut()
            .rev()
            .find(|r| (r.sid, r.epoch) == key)
        {
            r.ended_by = Some(ending);
        }
    }

    /// After an event at `time`: the standing leader's reign, first seen now or seen again
    /// (on reads taken after the fault that ended it: then that fault did not).
    pub(super) fn judge(&mut self, time: u64, leader: Option<&QuorumLeader>, cluster: &Cluster) {
        let Some(l) = leader else { return };
        let key = (l.sid, l.epoch);
        match self
            .reigns
            .iter_mut()
            .rev()
            .find(|r| (r.sid, r.epoch) == key)
        {
            Some(r) => {
                let again = r.ended_by.is_some_and(|e| {
                    let fresh = cluster.quorum_leader(e.done_ns);
                    fresh.is_some_and(|f| (f.sid, f.epoch) == key)
                });
                if again {
                    r.ended_by = None;
                }
            }
            None => self.reigns.push(Reign {
                sid: l.sid,
                epoch: l.epoch,
                since_ns: time,
                ended_by: None,
            }),
        }
    }
}

/// The standing quorum-backed leader (sid, epoch) that a fault of `kind` on `nodes` would leave
/// without its quorum, if it would.
fn would_end(
    cluster: &Cluster,
    kind: FaultKind,
    nodes: &[usize],
    v: &FaultValue,
) -> Option<(u64, u64)> {
    let standing = cluster.quorum_leader(0)?;
    let mut after = cluster.clone();
    after.fault_starts(kind, nodes, v);
    let key = (standing.sid, standing.epoch);
    let still = after
        .quorum_leader(0)
        .is_some_and(|l| (l.sid, l.epoch) == key);
    (!still).then_some(key)
}
