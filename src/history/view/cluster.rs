//! `history::view::cluster`: the cluster as the view knows it now, one entry per node (its
//! latest read, whether it is down, whom it cannot hear), and the two definitions every
//! stage asks of it: THE quorum-backed leader and THE settled cluster. Fault starts and undos
//! change these entries here; what a fault *was* (its interval) is `faults`' business.

use super::super::line::StatusRead;
use super::super::{sid_of, Effect, FaultKind, FaultValue};
use crate::api::{ConfigView, ServerState, ZabPhase};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// What a node's latest successful read said (the fields leadership depends on).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeRead {
    /// When the read completed (ns).
    pub time: u64,
    /// The event's position in the history (for evidence).
    pub pos: u32,
    pub state: ServerState,
    pub phase: ZabPhase,
    pub leader: Option<u64>,
    pub peer_epoch: u64,
    pub accepted_epoch: u64,
    /// 0 where the reader does not carry it (the checkers' digest leaves it out to keep its
    /// records small): then catching up is judged by the broadcast phase alone.
    pub last_committed_zxid: u64,
}

impl NodeRead {
    pub fn of(time: u64, pos: u32, s: &StatusRead<'_>) -> Self {
        NodeRead {
            time,
            pos,
            state: s.state,
            phase: s.phase,
            leader: s.leader,
            peer_epoch: s.peer_epoch,
            accepted_epoch: s.accepted_epoch,
            last_committed_zxid: s.last_committed_zxid,
        }
    }

    /// The epoch this node leads, once established (see `line::leads`).
    pub fn leads(&self) -> Option<u64> {
        super::super::line::leads(self.state, self.phase, self.peer_epoch)
    }

    /// (leader sid, epoch) this node follows in broadcast (see `line::follows`).
    pub fn follows(&self) -> Option<(u64, u64)> {
        super::super::line::follows(self.state, self.phase, self.leader, self.peer_epoch)
    }

    /// (leader sid, epoch) this node serves under in broadcast: as a follower or an observer.
    pub fn serves_under(&self) -> Option<(u64, u64)> {
        self.follows().or_else(|| {
            super::super::line::observes(self.state, self.phase, self.leader, self.peer_epoch)
        })
    }
}

/// A node as the view knows it now.
#[derive(Debug, Clone, Default)]
pub struct NodeNow {
    pub name: String,
    pub sid: Option<u64>,
    pub read: Option<NodeRead>,
    /// Killed or paused, not yet restarted or resumed.
    pub down: bool,
    /// Nodes (by index) whose traffic this node drops under the active partition.
    pub drops: Vec<usize>,
    /// Answered a read since it last started (a killed node has not until it answers again).
    pub answered: bool,
    /// The config this node last reported (once a reconfig changed it; None: the static
    /// config of test.json). A leader's decides whose following counts toward its quorum.
    pub config: Option<Arc<ConfigView>>,
}

impl NodeNow {
    /// Whether this node votes in `config` (None: the static config, where every node but an
    /// observer does; its reads say OBSERVING, so they never count as following).
    fn votes_in(&self, config: Option<&ConfigView>) -> bool {
        config.is_none_or(|c| self.sid.is_some_and(|s| c.voters.contains(&s)))
    }

    /// Whether this node is a member of `config`, voter or observer (None: the static one).
    pub(super) fn listed_in(&self, config: Option<&ConfigView>) -> bool {
        config.is_none_or(|c| self.sid.is_some_and(|s| c.lists(s)))
    }
}

/// A quorum-backed leader.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuorumLeader {
    pub sid: u64,
    pub epoch: u64,
    /// Index of the leader in [`View::nodes`].
    #[serde(skip)]
    pub node: usize,
    /// Position of the read that completed the quorum (for evidence).
    #[serde(skip)]
    pub pos: u32,
}

/// A node claiming to lead an established epoch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaderClaim {
    pub node: String,
    pub epoch: u64,
}

/// Where a cluster stands against [`View::settled`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settle {
    pub leader: Option<QuorumLeader>,
    /// Nodes (by index) that are up but have not rejoined the leader (all up nodes but the
    /// leader's backers when there is no leader).
    pub stragglers: Vec<usize>,
}

impl Settle {
    pub fn is_settled(&self) -> bool {
        self.leader.is_some() && self.stragglers.is_empty()
    }
}

/// Every node as known now, and the quorum size of the configured cluster.
#[derive(Debug, Clone)]
pub(super) struct Cluster {
    pub(super) nodes: Vec<NodeNow>,
    pub(super) quorum: usize,
    /// The nodes that only observe, by name (never part of a quorum).
    pub(super) observers: Vec<String>,
}

impl Cluster {
    /// A cluster of `voters` voting servers (observers are not counted).
    pub(super) fn new(voters: usize) -> Self {
        Cluster {
            nodes: Vec::new(),
            quorum: crate::api::quorum(voters),
            observers: Vec::new(),
        }
    }

    /// The voters among the first 64 nodes, as a bitmask of node indices.
    pub(super) fn voter_mask(&self) -> u64 {
        let voting = |(_, n): &(usize, &NodeNow)| !self.observers.contains(&n.name);
        let nodes = self.nodes.iter().enumerate().take(64);
        nodes.filter(voting).fold(0, |m, (i, _)| m | 1 << i)
    }

    /// The index of node `name`, if known.
    pub(super) fn index_of(&self, name: &str) -> Option<usize> {
        self.nodes.iter().position(|n| n.name == name)
    }

    /// The index of `name`, added when new.
    pub(super) fn node_ix(&mut self, name: &str) -> usize {
        if let Some(i) = self.index_of(name) {
            return i;
        }
        self.nodes.push(NodeNow {
            name: name.to_string(),
            sid: sid_of(name),
            ..NodeNow::default()
        });
        self.nodes.len() - 1
    }

    /// The names of nodes (indices).
    pub(super) fn names(&self, ixs: &[usize]) -> Vec<String> {
        ixs.iter().map(|&i| self.nodes[i].name.clone()).collect()
    }

    /// The nodes (indices) of a group's bitmask.
    pub(super) fn members(&self, group: u64) -> impl Iterator<Item = usize> {
        (0..self.nodes.len().min(64)).filter(move |i| group & (1 << i) != 0)
    }

    /// A fault of `kind` started on `nodes`: what its [`Effect`] does to them (a process that
    /// comes back new forgets what was known and waits for a new answer; a paused one is only
    /// down; a partition adds its drops).
    pub(super) fn fault_starts(&mut self, kind: FaultKind, nodes: &[usize], v: &FaultValue) {
        match kind.facts().effect {
            Effect::Stops { forgets } => {
                for &i in nodes {
                    self.nodes[i].down = true;
                    if forgets {
                        self.nodes[i].read = None;
                        self.nodes[i].answered = false;
                    }
                }
            }
            Effect::Cuts => {
                for (a, from) in &v.drops {
                    let a = self.node_ix(a);
                    for b in from {
                        let b = self.node_ix(b);
                        if !self.nodes[a].drops.contains(&b) {
                            self.nodes[a].drops.push(b);
                        }
                    }
                }
            }
            Effect::Neither => {}
        }
    }

    /// A fault of `kind` undone on `nodes` (none named: on all of them).
    pub(super) fn fault_undone(&mut self, kind: FaultKind, nodes: &[usize]) {
        if kind.stops_node() {
            let all = nodes.is_empty();
            for (i, n) in self.nodes.iter_mut().enumerate() {
                if all || nodes.contains(&i) {
                    n.down = false;
                }
            }
        } else if kind.cuts_links() {
            self.nodes.iter_mut().for_each(|n| n.drops.clear());
        }
    }

    /// Whether `a` and `b` (indices) cannot talk under the active partition.
    pub(super) fn cut(&self, a: usize, b: usize) -> bool {
        self.nodes[a].drops.contains(&b) || self.nodes[b].drops.contains(&a)
    }

    /// THE quorum-backed leader now (see [`quorum_leader_among`]).
    pub(super) fn quorum_leader(&self, since_ns: u64) -> Option<QuorumLeader> {
        quorum_leader_among(&self.nodes, self.quorum, since_ns)
    }

    /// How many nodes' latest reads claim to lead an established epoch (counted without
    /// allocating: the view asks after every event).
    pub(super) fn claiming(&self) -> usize {
        self.nodes
            .iter()
            .filter(|n| n.read.is_some_and(|r| r.leads().is_some()))
            .count()
    }

    /// Every node whose latest read claims to lead an established epoch.
    pub(super) fn claims(&self) -> Vec<LeaderClaim> {
        self.nodes
            .iter()
            .filter_map(|n| {
                let e = n.read?.leads()?;
                Some(LeaderClaim {
                    node: n.name.clone(),
                    epoch: e,
                })
            })
            .collect()
    }

    /// THE definition of a settled cluster (the controller waits for it before its final
    /// reads; the recovery checker measures it): a quorum-backed leader, and every node that
    /// is up (not killed or paused) and a member of the leader's config is that leader or
    /// FOLLOWS (or OBSERVES) it in broadcast in its epoch, not cut off from it, with its last
    /// committed zxid at least the leader's; every read counted taken at or after `since_ns`.
    /// A server a reconfig removed is owed nothing (a correct one stays LOOKING).
    pub(super) fn settled(&self, since_ns: u64) -> Settle {
        let fresh = |n: &NodeNow| n.read.filter(|r| r.time >= since_ns);
        let Some(leader) = self.quorum_leader(since_ns) else {
            return Settle {
                leader: None,
                stragglers: (0..self.nodes.len())
                    .filter(|&i| !self.nodes[i].down)
                    .collect(),
            };
        };
        let committed = fresh(&self.nodes[leader.node]).map_or(0, |r| r.last_committed_zxid);
        let config = self.nodes[leader.node].config.as_deref();
        let stragglers = (0..self.nodes.len())
            .filter(|&i| i != leader.node && !self.nodes[i].down)
            .filter(|&i| self.nodes[i].listed_in(config))
            .filter(|&i| {
                let joined = fresh(&self.nodes[i]).is_some_and(|r| {
                    r.serves_under() == Some((leader.sid, leader.epoch))
                        && r.last_committed_zxid >= committed
                });
                !joined || self.cut(i, leader.node)
            })
            .collect();
        Settle {
            leader: Some(leader),
            stragglers,
        }
    }
}

/// THE definition of a quorum-backed leader, over nodes as known at one moment: a node
/// LEADING an epoch it has established (Zab sync or broadcast), plus nodes FOLLOWING it in
/// broadcast in that epoch, at least `quorum` with itself, none down (killed or paused), none
/// cut off from it by an active partition (in either direction), every read counted taken at
/// or after `since_ns`. Once the leader reports a config of a reconfig's, only that config's
/// voters count (itself included), and the quorum is a majority of them instead of `quorum`
/// (test.json's): a leader of three voters left of five is backed by two. Every stage calls
/// this (through [`View::quorum_leader`], or directly for a snapshot of statuses, see
/// [`quorum_leader_of`]).
pub fn quorum_leader_among(
    nodes: &[NodeNow],
    quorum: usize,
    since_ns: u64,
) -> Option<QuorumLeader> {
    (0..nodes.len()).find_map(|li| quorum_backed(nodes, li, quorum, since_ns))
}

/// Node `li` as a quorum-backed leader by the definition of [`quorum_leader_among`], if it
/// is one. Two can be at once only where safety is already broken (two configs, say): a
/// question about one leader asks this rather than which one `quorum_leader_among` names.
pub fn quorum_backed(
    nodes: &[NodeNow],
    li: usize,
    quorum: usize,
    since_ns: u64,
) -> Option<QuorumLeader> {
    let counts = |n: &NodeNow| -> Option<NodeRead> {
        let r = n.read?;
        (!n.down && r.time >= since_ns).then_some(r)
    };
    let l = &nodes[li];
    let lr = counts(l)?;
    let epoch = lr.leads()?;
    let sid = l.sid?;
    let config = l.config.as_deref();
    let quorum = config.map_or(quorum, |c| crate::api::quorum(c.voters.len()));
    let mut backers = usize::from(l.votes_in(config));
    let mut last = lr.pos;
    for (fi, f) in nodes.iter().enumerate() {
        if fi == li {
            continue;
        }
        let Some(fr) = counts(f) else { continue };
        let cut = f.drops.contains(&li) || l.drops.contains(&fi);
        if !cut && fr.follows() == Some((sid, epoch)) && f.votes_in(config) {
            backers += 1;
            last = last.max(fr.pos);
        }
    }
    (backers >= quorum).then_some(QuorumLeader {
        sid,
        epoch,
        node: li,
        pos: last,
    })
}

/// [`quorum_leader_among`] for a snapshot of status reads (all taken now, none down, no
/// partition known) of a cluster of `cluster_size` voters under the static config (a
/// leader's reported config overrides it): the leader's sid and epoch. For live
/// polls outside a run (benches, node tests).
pub fn quorum_leader_of<'a>(
    statuses: impl IntoIterator<Item = &'a crate::api::NodeStatus>,
    cluster_size: usize,
) -> Option<(u64, u64)> {
    let nodes: Vec<NodeNow> = statuses
        .into_iter()
        .map(|s| NodeNow {
            name: super::super::node_name(s.sid),
            sid: Some(s.sid),
            read: Some(NodeRead {
                time: 0,
                pos: 0,
                state: s.state,
                phase: s.zab_phase,
                leader: s.leader,
                peer_epoch: s.peer_epoch,
                accepted_epoch: s.accepted_epoch,
                last_committed_zxid: s.last_committed_zxid,
            }),
            down: false,
            drops: Vec::new(),
            answered: true,
            config: s.config.clone().map(Arc::new),
        })
        .collect();
    quorum_leader_among(&nodes, crate::api::quorum(cluster_size), 0).map(|l| (l.sid, l.epoch))
}
