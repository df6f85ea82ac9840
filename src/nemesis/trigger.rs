//! Faults triggered by what the observers see (`when = "election"` ...): instead of firing at its
//! planned time, a triggered fault waits (at most its `wait`) for the first status read after that
//! time that shows the moment it aims at, and fires then, at the node that read names. The read's
//! history index is recorded with the fault (`trigger`, `trigger_index`), so the report can show
//! what the nemesis reacted to.
//!
//! Observers read every node at >= 50 Hz, so a trigger fires within a read period (plus the
//! fault's own latency) of the cluster entering the state; states shorter than a read period
//! (a sync of a few ms) are caught only when a read happens to land in them.

use crate::api::{NodeStatus, ServerState, ZabPhase};
use crate::workload::observe::Observations;
use std::collections::HashMap;

/// The moments a fault can aim at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    /// A node is LOOKING (an election is under way): fires at that node.
    Election,
    /// A leader is in discovery or sync with its followers (or a follower reads as syncing):
    /// fires at the leader.
    LeaderInSync,
    /// A follower's last logged zxid rose since its previous read: it logged a proposal and
    /// ACKed it: fires at that follower.
    AfterWriteAck,
    /// A node leads that did not lead (in that epoch) when the wait began: fires at it.
    NewLeader,
    /// A leader in broadcast whose epoch is newer than its last logged zxid's epoch: it synced
    /// a quorum of followers into the new epoch and no write of it is logged yet (the only
    /// time synced servers and one that missed the epoch hold equal zxids with different
    /// peerEpochs, ZOOKEEPER-1419's state). Fires at the leader, on the leader's own read (a
    /// follower's would do sooner, but a leader killed before any read shows it leading leaves
    /// election-safety unable to tell who led that epoch).
    EpochWithoutWrite,
    /// A follower reads a currentEpoch above every epoch seen when the wait began: it was
    /// synced by a new leader and ACKed its NEWLEADER (ZOOKEEPER-4785's moment: a buggy
    /// follower's synced txns may not be durable yet): fires at that follower.
    FollowerSynced,
}

impl Trigger {
    pub const ALL: [Trigger; 6] = [
        Trigger::Election,
        Trigger::LeaderInSync,
        Trigger::AfterWriteAck,
        Trigger::NewLeader,
        Trigger::EpochWithoutWrite,
        Trigger::FollowerSynced,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Trigger::Election => "election",
            Trigger::LeaderInSync => "leader-in-sync",
            Trigger::AfterWriteAck => "after-write-ack",
            Trigger::NewLeader => "new-leader",
            Trigger::EpochWithoutWrite => "epoch-without-write",
            Trigger::FollowerSynced => "follower-synced",
        }
    }

    pub fn parse(s: &str) -> Option<Trigger> {
        Trigger::ALL.into_iter().find(|t| t.name() == s)
    }
}

/// What fired a trigger: the node to hit and the read that showed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fired {
    pub node: String,
    /// The history index of the status read.
    pub index: u64,
}

/// Watches the observers' reads for one trigger, from the moment it is made.
pub struct Watch {
    trigger: Trigger,
    /// The last read index handled per node (reads at or before the start are the baseline).
    seen: HashMap<String, u64>,
    /// Last logged zxid per node at its previous read (after-write-ack).
    zxid: HashMap<String, u64>,
    /// (node, epoch) of every node leading when the watch began (new-leader).
    leaders: Vec<(String, u64)>,
    /// The highest epoch any node read when the watch began (follower-synced).
    epoch: u64,
    /// Only these nodes' reads may fire it (None: any node's).
    among: Option<Vec<String>>,
}

impl Watch {
    pub fn new(trigger: Trigger, obs: &Observations) -> Watch {
        let mut w = Watch {
            trigger,
            seen: HashMap::new(),
            zxid: HashMap::new(),
            leaders: Vec::new(),
            epoch: 0,
            among: None,
        };
        for node in obs.nodes() {
            let v = obs.latest(node);
            w.seen.insert(node.clone(), v.index);
            if let Some(s) = v.status.filter(|_| v.error.is_none() && v.time > 0) {
                w.zxid.insert(node.clone(), s.last_zxid);
                w.epoch = w.epoch.max(s.peer_epoch);
                if s.state == ServerState::Leading {
                    w.leaders.push((node.clone(), s.peer_epoch));
                }
            }
        }
        w
    }

    /// Only `nodes`' reads fire it (a fault's `watch`, or a part aimed at its composition's main
    /// nodes: it waits for one of them, not for whichever node shows the moment first).
    pub fn among(mut self, nodes: Vec<String>) -> Watch {
        self.among = Some(nodes);
        self
    }

    /// Looks at the reads made since the last call; the first that shows the trigger fires it.
    pub fn poll(&mut self, obs: &Observations) -> Option<Fired> {
        for node in obs.nodes() {
            if self.among.as_ref().is_some_and(|a| !a.contains(node)) {
                continue;
            }
            let v = obs.latest(node);
            if v.time == 0 || self.seen.get(node).is_some_and(|i| *i >= v.index) {
                continue;
            }
            self.seen.insert(node.clone(), v.index);
            let Some(s) = v.status.filter(|_| v.error.is_none()) else {
                continue;
            };
            if let Some(hit) = self.shows(node, &s) {
                return Some(Fired {
                    node: hit,
                    index: v.index,
                });
            }
        }
        None
    }

    /// The node to hit if `node`'s fresh read `s` shows the trigger.
    fn shows(&mut self, node: &str, s: &NodeStatus) -> Option<String> {
        let syncing = matches!(s.zab_phase, ZabPhase::Discovery | ZabPhase::Sync);
        match self.trigger {
            Trigger::Election => (s.state == ServerState::Looking).then(|| node.to_string()),
            Trigger::LeaderInSync => match s.state {
                ServerState::Leading if syncing => Some(node.to_string()),
                ServerState::Following if syncing => s.leader.map(crate::history::node_name),
                _ => None,
            },
            Trigger::AfterWriteAck => {
                let before = self.zxid.insert(node.to_string(), s.last_zxid);
                (s.state == ServerState::Following && before.is_some_and(|z| s.last_zxid > z))
                    .then(|| node.to_string())
            }
            Trigger::NewLeader => (s.state == ServerState::Leading
                && !self
                    .leaders
                    .iter()
                    .any(|(n, e)| n == node && *e == s.peer_epoch))
            .then(|| node.to_string()),
            Trigger::EpochWithoutWrite => (s.state == ServerState::Leading
                && s.zab_phase == ZabPhase::Broadcast
                && s.peer_epoch > s.last_zxid >> 32)
                .then(|| node.to_string()),
            Trigger::FollowerSynced => (s.state == ServerState::Following
                && s.peer_epoch > self.epoch)
                .then(|| node.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::observe::NodeView;

    /// `zxid` counts within epoch 2 (the steady cluster's): the logged zxid is `2 << 32 | zxid`.
    fn status(sid: u64, state: ServerState, phase: ZabPhase, epoch: u64, zxid: u64) -> NodeStatus {
        NodeStatus {
            config: None,
            sid,
            state,
            leader: (state != ServerState::Looking).then_some(1),
            peer_epoch: epoch,
            accepted_epoch: epoch,
            election_epoch: 1,
            last_zxid: 2 << 32 | zxid,
            last_zxid_hex: String::new(),
            last_committed_zxid: 0,
            zab_phase: phase,
            wall_clock_ms: 0,
            uptime_ms: 0,
            last_election: None,
            peer_type: Default::default(),
        }
    }

    fn read(o: &Observations, node: &str, index: u64, s: NodeStatus) {
        o.set_view(
            node,
            NodeView {
                status: Some(s),
                time: index * 10,
                index,
                error: None,
            },
        );
    }

    fn steady(o: &Observations, base: u64) {
        use ServerState::*;
        read(o, "n1", base, status(1, Leading, ZabPhase::Broadcast, 2, 5));
        read(
            o,
            "n2",
            base + 1,
            status(2, Following, ZabPhase::Broadcast, 2, 5),
        );
        read(
            o,
            "n3",
            base + 2,
            status(3, Following, ZabPhase::Broadcast, 2, 5),
        );
    }

    fn cluster() -> Observations {
        let o = Observations::new(vec!["n1".into(), "n2".into(), "n3".into()]);
        steady(&o, 1);
        o
    }

    #[test]
    fn a_steady_cluster_fires_nothing() {
        let o = cluster();
        for t in Trigger::ALL {
            let mut w = Watch::new(t, &o);
            steady(&o, 10);
            assert_eq!(w.poll(&o), None, "{t:?}");
        }
    }

    #[test]
    fn each_trigger_fires_at_its_node_with_the_read_index() {
        use ServerState::*;
        let o = cluster();
        let mut w = Watch::new(Trigger::Election, &o);
        read(&o, "n3", 20, status(3, Looking, ZabPhase::Election, 2, 5));
        assert_eq!(
            w.poll(&o),
            Some(Fired {
                node: "n3".into(),
                index: 20
            })
        );
        let o = cluster();
        let mut w = Watch::new(Trigger::LeaderInSync, &o);
        read(&o, "n2", 21, status(2, Following, ZabPhase::Sync, 3, 5));
        assert_eq!(w.poll(&o).map(|f| f.node), Some("n1".into()));
        let o = cluster();
        let mut w = Watch::new(Trigger::AfterWriteAck, &o);
        // The leader's own zxid rising is not a follower's ACK.
        read(&o, "n1", 22, status(1, Leading, ZabPhase::Broadcast, 2, 6));
        assert_eq!(w.poll(&o), None);
        read(
            &o,
            "n2",
            23,
            status(2, Following, ZabPhase::Broadcast, 2, 6),
        );
        assert_eq!(
            w.poll(&o).map(|f| (f.node, f.index)),
            Some(("n2".into(), 23))
        );
        let o = cluster();
        let mut w = Watch::new(Trigger::NewLeader, &o);
        // The same leader read again is not new; a re-elected one (new epoch) is.
        read(&o, "n1", 24, status(1, Leading, ZabPhase::Broadcast, 2, 5));
        assert_eq!(w.poll(&o), None);
        read(&o, "n2", 25, status(2, Leading, ZabPhase::Discovery, 3, 5));
        assert_eq!(w.poll(&o).map(|f| f.node), Some("n2".into()));
        // epoch-without-write: a leader in broadcast in epoch 3 with a zxid of epoch 2; not
        // while it syncs, not a follower's read, not once a write of epoch 3 is logged.
        let o = cluster();
        let mut w = Watch::new(Trigger::EpochWithoutWrite, &o);
        read(&o, "n2", 26, status(2, Leading, ZabPhase::Sync, 3, 5));
        read(
            &o,
            "n3",
            27,
            status(3, Following, ZabPhase::Broadcast, 3, 5),
        );
        assert_eq!(w.poll(&o), None, "syncing, or a follower");
        let mut written = status(2, Leading, ZabPhase::Broadcast, 3, 5);
        written.last_zxid = 3 << 32 | 1;
        read(&o, "n2", 28, written);
        assert_eq!(w.poll(&o), None, "a write of the new epoch is logged");
        read(&o, "n2", 29, status(2, Leading, ZabPhase::Broadcast, 3, 5));
        assert_eq!(
            w.poll(&o).map(|f| (f.node, f.index)),
            Some(("n2".into(), 29))
        );
        // follower-synced:
        let o = cluster();
        let mut w = Watch::new(Trigger::FollowerSynced, &o);
        // A leader of a new epoch, or a follower still in the old one, is not a synced follower.
        read(&o, "n1", 26, status(1, Leading, ZabPhase::Sync, 3, 5));
        read(&o, "n2", 27, status(2, Following, ZabPhase::Sync, 2, 5));
        assert_eq!(w.poll(&o), None);
        read(&o, "n3", 28, status(3, Following, ZabPhase::Sync, 3, 9));
        assert_eq!(
            w.poll(&o).map(|f| (f.node, f.index)),
            Some(("n3".into(), 28))
        );
        // Watching only n2: n3's synced read does not fire it, n2's does.
        let o = cluster();
        let mut w = Watch::new(Trigger::FollowerSynced, &o).among(vec!["n2".into()]);
        read(&o, "n3", 30, status(3, Following, ZabPhase::Sync, 3, 9));
        assert_eq!(w.poll(&o), None);
        read(&o, "n2", 31, status(2, Following, ZabPhase::Sync, 3, 9));
        assert_eq!(w.poll(&o).map(|f| f.node), Some("n2".into()));
    }
}
