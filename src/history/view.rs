//! `history::view`: the facts derived from a history, each defined once, pure (no I/O) and
//! incremental: feed it every event in history order through [`View::feed`], the one way in,
//! from a file (the report, from decoded lines; the checkers, from their digest) or live (the
//! run's `Recorder` feeds every line it writes, and the controller's recovery wait asks the
//! same questions).
//!
//! Derived facts:
//! - per node, now: its latest successful read (forgotten when a read fails or the node is
//!   killed), whether it is down (killed or paused and not yet restarted or resumed), and
//!   which nodes it cannot hear (an active partition's drops);
//! - fault intervals: each fault's start paired with its undo (kill/start, pause/resume,
//!   partition/heal, clock/clock reset), the final phase's undo closing whatever is open;
//! - THE quorum-backed leader ([`View::quorum_leader`]): a node LEADING an epoch it has
//!   established (Zab sync or broadcast) plus nodes FOLLOWING it in broadcast in that epoch,
//!   a quorum counting itself, none of them cut off from it by an active partition (either
//!   direction), none down, every read counted taken at or after `since`;
//! - leaderless windows (no quorum-backed leader), leader overlaps (two or more nodes claim to
//!   lead established epochs at once), and per fault the time until a quorum-backed leader is
//!   observed again, counting only reads taken after the fault started;
//! - THE calm group ([`View::calm_group`]): the largest quorum of nodes that are up, have
//!   answered a read since they (re)started, are under no fault but clock steps (a correct
//!   server times on the monotonic clock), are mutually connected and cleanly separated from
//!   the rest; and stalls: stretches in which one calm group stood unchanged and no
//!   quorum-backed leader existed (the availability checker judges their length).
//!
//! Times are the history's (ns since the run started); lines appended concurrently may step
//! back a little, so the view keeps a running maximum as "now".

use super::line::{Body, Line, StatusRead};
use super::{sid_of, ClockLead, EventType, FaultKind, FaultStep, FaultValue};
use crate::api::{ServerState, ZabPhase};
use serde::{Deserialize, Serialize};

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
        super::line::leads(self.state, self.phase, self.peer_epoch)
    }

    /// (leader sid, epoch) this node follows in broadcast (see `line::follows`).
    pub fn follows(&self) -> Option<(u64, u64)> {
        super::line::follows(self.state, self.phase, self.leader, self.peer_epoch)
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

/// A stretch without a quorum-backed leader.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Window {
    pub start_ns: u64,
    pub end_ns: u64,
    pub ms: u64,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub open_at_end: bool,
}

/// A node claiming to lead an established epoch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaderClaim {
    pub node: String,
    pub epoch: u64,
}

/// A stretch in which two or more nodes claimed to lead at once.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Overlap {
    pub start_ns: u64,
    pub end_ns: u64,
    pub ms: u64,
    /// Who claimed when the overlap began.
    pub leaders: Vec<LeaderClaim>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub open_at_end: bool,
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

/// A stretch in which one calm group ([`View::calm_group`]) stood unchanged and there was no
/// quorum-backed leader.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Stall {
    pub start_ns: u64,
    pub end_ns: u64,
    pub ms: u64,
    /// The calm group's nodes.
    pub group: Vec<String>,
    /// Successful reads of each group member during the stall, fewest first: a stall seen
    /// through too few reads cannot be told from observers that could not reach the nodes.
    pub fewest_reads: u32,
    /// How long the group had stood unchanged when the stall began.
    pub calm_for_ms: u64,
    /// When that group formed: the stalls of one calm stretch share it.
    #[serde(default)]
    pub calm_since_ns: u64,
    /// The quorum-backed leader (sid, epoch) this group had before the stall, if any: a
    /// leader lost while nothing touched its quorum.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<(u64, u64)>,
    /// The quorum-backed leader (sid, epoch) that ended it, if one did while the group stood.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<(u64, u64)>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub open_at_end: bool,
    /// History positions where it began and ended (for evidence).
    #[serde(skip)]
    pub start_pos: u32,
    #[serde(skip)]
    pub end_pos: u32,
}

/// A node of the calm group that stayed LOOKING while that group had a quorum-backed leader:
/// it was up, answering, under no fault but clock steps and connected to every member, so it
/// had nothing to do but join (ZOOKEEPER-1732's restarted server that cannot join looks
/// like this). Open from the first such read to the first read that is not, or to a change of
/// the group or its leader.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Stray {
    pub node: String,
    /// The standing leader and its epoch.
    pub leader: (u64, u64),
    pub start_ns: u64,
    pub end_ns: u64,
    pub ms: u64,
    /// Successful reads of the node that showed it LOOKING meanwhile.
    pub looking_reads: u32,
    /// Still open when the history ends.
    pub open_at_end: bool,
    pub start_pos: u32,
    pub end_pos: u32,
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

/// The derived facts of a history, fed in order.
#[derive(Debug, Clone)]
pub struct View {
    nodes: Vec<NodeNow>,
    quorum: usize,
    /// "Now": the running maximum of the times fed.
    now: u64,
    /// Reads older than this do not count for fault recovery (the latest fault's start, or
    /// the final heal).
    fresh_since: u64,
    intervals: Vec<FaultInterval>,
    pending: Vec<FaultRecovery>,
    recoveries: Vec<FaultRecovery>,
    window_start: Option<u64>,
    windows: Vec<Window>,
    overlap: Option<Overlap>,
    overlaps: Vec<Overlap>,
    final_heal: Option<FinalHeal>,
    /// Events fed.
    events: u64,
    /// Faults (recovered from or not) whose every-node rejoin is not yet measured.
    awaiting_rejoin: usize,
    /// The calm group now (bit i: node i) and whether it must be recomputed.
    calm: u64,
    calm_dirty: bool,
    /// When the calm group last changed, and its latest quorum-backed leader since.
    calm_since: u64,
    calm_leader: Option<(u64, u64)>,
    /// The run faked the monotonic clock too (a schedule's `fake_monotonic`): then a clock
    /// fault skews the servers' timeouts, and touches its nodes like any other fault, for its
    /// lead past its end too ([`FaultInterval::moves_ticks_at`]).
    clock_touches: bool,
    /// When a clock fault's lead runs out: the calm group is computed again then.
    calm_recheck_at: Option<u64>,
    /// The open stall, with each node's successful reads since it began.
    stall: Option<(Stall, Vec<u32>)>,
    stalls: Vec<Stall>,
    /// Per node (index): its open stray, if any.
    straying: Vec<Option<Stray>>,
    strays: Vec<Stray>,
}

impl View {
    /// A view of a cluster of `nodes` (test.json's; others are added as lines name them).
    pub fn new(nodes: &[String]) -> Self {
        let mut v = View {
            nodes: Vec::new(),
            quorum: crate::api::quorum(nodes.len()),
            now: 0,
            fresh_since: 0,
            intervals: Vec::new(),
            pending: Vec::new(),
            recoveries: Vec::new(),
            window_start: None,
            windows: Vec::new(),
            overlap: None,
            overlaps: Vec::new(),
            final_heal: None,
            events: 0,
            awaiting_rejoin: 0,
            calm: 0,
            calm_dirty: true,
            calm_since: 0,
            calm_leader: None,
            clock_touches: false,
            calm_recheck_at: None,
            stall: None,
            stalls: Vec::new(),
            straying: Vec::new(),
            strays: Vec::new(),
        };
        for n in nodes {
            v.node_ix(n);
        }
        v
    }

    /// Whether clock faults keep their nodes out of the calm group ([`View::calm_group`]):
    /// only when the run faked the monotonic clock as well as the wall clock.
    pub fn set_clock_faults_touch(&mut self, yes: bool) {
        self.clock_touches = yes;
        self.calm_dirty = true;
    }

    /// The quorum size: a majority of the configured cluster.
    pub fn quorum(&self) -> usize {
        self.quorum
    }

    pub fn nodes(&self) -> &[NodeNow] {
        &self.nodes
    }

    /// The index of node `name`, if the view knows it (`node_ix` adds it otherwise).
    pub fn index_of(&self, name: &str) -> Option<usize> {
        self.nodes.iter().position(|n| n.name == name)
    }

    /// The index of `name`, added when new.
    pub fn node_ix(&mut self, name: &str) -> usize {
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

    /// "Now": the latest time fed.
    pub fn now(&self) -> u64 {
        self.now
    }

    /// THE way to feed a view: every event of a history, in history order, each exactly once,
    /// whatever it is (an event that is neither a read nor a nemesis action, a final log, a
    /// node exit or an unknown `f`, still moves time on). Readers of lines build the event with
    /// [`View::of_line`]; the checkers' digest with `checker::model::Rec::fed`; both classify
    /// an event the same way (a test feeds every fixture both ways and compares).
    pub fn feed(&mut self, e: Fed<'_>) {
        match e {
            Fed::Status { node, read } => self.status(node, read),
            Fed::Unreachable { node, time, pos } => self.unreachable(node, time, pos),
            Fed::Fault {
                node,
                pos,
                index,
                time,
                kind,
                f,
                value,
            } => self.fault(pos, index, time, kind, f, value, node),
            Fed::Other { time, pos } => self.other(time, pos),
        }
    }

    /// What the decoded line at history position `pos` is to this view (node names become
    /// this view's indices, new ones are added): `let e = view.of_line(pos, l); view.feed(e)`.
    pub fn of_line<'a>(&mut self, pos: u32, l: &'a Line<'_>) -> Fed<'a> {
        let node = l.node.as_deref().map(|n| self.node_ix(n));
        match (&l.body, node) {
            (Body::Status(s), Some(node)) => Fed::Status {
                node,
                read: NodeRead::of(l.time, pos, s),
            },
            (Body::Unreachable, Some(node)) => Fed::Unreachable {
                node,
                time: l.time,
                pos,
            },
            // Only the nemesis's actions are faults (a process of the workload never is).
            (Body::Fault(value), node) if l.process == super::NEMESIS => Fed::Fault {
                node,
                pos,
                index: l.index,
                time: l.time,
                kind: l.kind,
                f: l.f,
                value,
            },
            _ => Fed::Other { time: l.time, pos },
        }
    }

    /// Advances time to `time` (the running maximum) and counts the event.
    fn at(&mut self, time: u64) -> u64 {
        self.events += 1;
        self.now = time.max(self.now);
        self.now
    }

    /// A successful status read of node `ix` (its `time` is the event's).
    fn status(&mut self, ix: usize, mut read: NodeRead) {
        read.time = self.at(read.time);
        self.nodes[ix].read = Some(read);
        if !self.nodes[ix].answered {
            self.nodes[ix].answered = true;
            self.calm_dirty = true;
        }
        if let Some((_, reads)) = &mut self.stall {
            // A node first seen after the stall opened has no count yet.
            if reads.len() <= ix {
                reads.resize(ix + 1, 0);
            }
            reads[ix] += 1;
        }
        if let Some(Some(stray)) = self.straying.get_mut(ix) {
            if read.state == ServerState::Looking {
                stray.looking_reads += 1;
            }
        }
        self.judge(read.time, read.pos);
    }

    /// A failed or timed-out read of node `ix`: what was known of it is stale.
    fn unreachable(&mut self, ix: usize, time: u64, pos: u32) {
        let time = self.at(time);
        self.nodes[ix].read = None;
        self.judge(time, pos);
    }

    /// Any other event (it only moves time on).
    fn other(&mut self, time: u64, pos: u32) {
        let time = self.at(time);
        self.judge(time, pos);
    }

    /// A nemesis action (`f` a fault or its undo); only done actions (`info`) change the view.
    #[allow(clippy::too_many_arguments)]
    fn fault(
        &mut self,
        pos: u32,
        index: u64,
        time: u64,
        kind: EventType,
        f: super::F,
        v: &FaultValue,
        node: Option<usize>,
    ) {
        let time = self.at(time);
        if kind == EventType::Info {
            self.apply(pos, index, time, f, v, node);
        }
        self.judge(time, pos);
    }

    fn apply(
        &mut self,
        pos: u32,
        index: u64,
        time: u64,
        f: super::F,
        v: &FaultValue,
        node: Option<usize>,
    ) {
        let mut nodes: Vec<usize> = v.nodes.iter().map(|n| self.node_ix(n)).collect();
        if nodes.is_empty() {
            nodes.extend(node);
        }
        let names = |v: &View, ns: &[usize]| ns.iter().map(|&i| v.nodes[i].name.clone()).collect();
        match v.step(f) {
            Some(FaultStep::Starts(kind)) => {
                match kind {
                    FaultKind::Kill | FaultKind::PowerLoss | FaultKind::Corrupt => {
                        nodes.iter().for_each(|&i| {
                            self.nodes[i].down = true;
                            self.nodes[i].read = None;
                            self.nodes[i].answered = false;
                        })
                    }
                    FaultKind::Pause => nodes.iter().for_each(|&i| self.nodes[i].down = true),
                    FaultKind::Partition => {
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
                    // Packet faults slow or thin links; they cut nothing.
                    FaultKind::Clock | FaultKind::Packet | FaultKind::Frames => {}
                }
                let nodes: Vec<String> = names(self, &nodes);
                self.intervals.push(FaultInterval {
                    kind,
                    nodes: nodes.clone(),
                    start_index: index,
                    start_ns: time,
                    end_ns: None,
                    start_pos: pos,
                    end_pos: None,
                    clock_lead: (kind == FaultKind::Clock).then(|| v.clock_lead()),
                });
                self.pending.push(FaultRecovery {
                    fault_index: index,
                    kind,
                    nodes,
                    start_ns: time,
                    ms_to_quorum_leader: None,
                    ms_to_all_rejoined: None,
                    leader: None,
                    epoch: None,
                    pos,
                });
                self.awaiting_rejoin += 1;
                self.fresh_since = time;
            }
            Some(FaultStep::Undoes(kind)) => {
                if kind.stops_node() {
                    let all = nodes.is_empty();
                    for n in self.nodes.iter_mut().enumerate() {
                        if all || nodes.contains(&n.0) {
                            n.1.down = false;
                        }
                    }
                } else if kind == FaultKind::Partition {
                    self.nodes.iter_mut().for_each(|n| n.drops.clear());
                }
                // Clock, packet and frames faults cut nothing: nothing to undo here.
                let undone: Vec<String> = names(self, &nodes);
                for i in self.intervals.iter_mut().filter(|i| i.end_ns.is_none()) {
                    let hits = v.r#final
                        || kind == FaultKind::Partition
                        || kind == FaultKind::Packet
                        || undone.is_empty()
                        || i.nodes.iter().any(|n| undone.contains(n));
                    if i.kind == kind && hits {
                        i.end_ns = Some(time);
                        i.end_pos = Some(pos);
                    }
                }
            }
            None => {}
        }
        self.calm_dirty = true;
        if v.r#final && self.final_heal.is_none() {
            self.final_heal = Some(FinalHeal {
                time,
                pos,
                recovered: None,
                rejoined: None,
            });
            self.fresh_since = time;
        }
    }

    /// Updates windows, overlaps and recoveries after an event at `time`.
    fn judge(&mut self, time: u64, pos: u32) {
        let leader = self.quorum_leader(0);
        match (leader.is_some(), self.window_start) {
            (true, Some(start)) => {
                self.windows.push(Window {
                    start_ns: start,
                    end_ns: time,
                    ms: (time - start) / 1_000_000,
                    open_at_end: false,
                });
                self.window_start = None;
            }
            (false, None) => self.window_start = Some(time),
            _ => {}
        }
        // Counted without allocating: this runs for every event of a history.
        let claiming = self
            .nodes
            .iter()
            .filter(|n| n.read.is_some_and(|r| r.leads().is_some()))
            .count();
        match (&mut self.overlap, claiming >= 2) {
            (None, true) => {
                self.overlap = Some(Overlap {
                    start_ns: time,
                    end_ns: time,
                    ms: 0,
                    leaders: self.claims(),
                    open_at_end: false,
                })
            }
            (Some(o), false) => {
                o.end_ns = time;
                o.ms = (time - o.start_ns) / 1_000_000;
                self.overlaps
                    .push(self.overlap.take().expect("matched Some"));
            }
            _ => {}
        }
        self.judge_rejoin(time);
        self.judge_stall(time, pos, leader.map(|l| (l.sid, l.epoch)));
        self.judge_strays(time, pos, leader.as_ref());
        let waiting =
            !self.pending.is_empty() || self.final_heal.is_some_and(|h| h.recovered.is_none());
        if !waiting {
            return;
        }
        let Some(mut fresh) = self.quorum_leader(self.fresh_since) else {
            return;
        };
        fresh.pos = pos;
        let name = self.nodes[fresh.node].name.clone();
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

    /// The first end of a clock fault's lead after `time`, while clock faults touch their nodes.
    fn next_lead_end(&self, time: u64) -> Option<u64> {
        if !self.clock_touches {
            return None;
        }
        self.intervals
            .iter()
            .filter(|f| f.kind == FaultKind::Clock)
            .filter_map(|f| Some(f.end_ns?.saturating_add(f.stalls_after_end_ns()?)))
            .filter(|&at| at >= time)
            .min()
    }

    /// Opens, extends or closes the stall (a calm group without a quorum-backed leader).
    fn judge_stall(&mut self, time: u64, pos: u32, leader: Option<(u64, u64)>) {
        let before = self.calm;
        if self.calm_dirty || self.calm_recheck_at.is_some_and(|at| time > at) {
            self.calm = self.calm_group();
            self.calm_dirty = false;
            self.calm_recheck_at = self.next_lead_end(time);
        }
        let stalled = leader.is_none() && self.calm != 0;
        let same = self.calm == before;
        if !same {
            self.calm_since = time;
            self.calm_leader = None;
        }
        if self.stall.is_some() && (!stalled || !same) {
            let (mut s, reads) = self.stall.take().expect("checked");
            s.end_ns = time;
            s.end_pos = pos;
            s.ms = (time - s.start_ns) / 1_000_000;
            s.after = if same { leader } else { None };
            s.fewest_reads = self
                .members(before)
                .map(|i| reads.get(i).copied().unwrap_or(0))
                .min()
                .unwrap_or(0);
            self.stalls.push(s);
        }
        if stalled && self.stall.is_none() {
            let group = self
                .members(self.calm)
                .map(|i| self.nodes[i].name.clone())
                .collect();
            let stall = Stall {
                start_ns: time,
                end_ns: time,
                ms: 0,
                group,
                fewest_reads: 0,
                calm_for_ms: (time - self.calm_since.min(time)) / 1_000_000,
                calm_since_ns: self.calm_since.min(time),
                before: self.calm_leader,
                after: None,
                open_at_end: false,
                start_pos: pos,
                end_pos: pos,
            };
            self.stall = Some((stall, vec![0; self.nodes.len()]));
        }
        if self.calm != 0 && leader.is_some() {
            self.calm_leader = leader;
        }
    }

    /// Opens, extends or closes each node's stray (see [`Stray`]): a calm-group member LOOKING
    /// while the group's quorum-backed leader stands.
    fn judge_strays(&mut self, time: u64, pos: u32, leader: Option<&QuorumLeader>) {
        let standing = leader.filter(|l| self.calm & (1 << l.node.min(63)) != 0);
        if self.straying.len() < self.nodes.len() {
            self.straying.resize(self.nodes.len(), None);
        }
        for i in 0..self.nodes.len() {
            let looking = self.calm & (1 << i.min(63)) != 0
                && self.nodes[i]
                    .read
                    .is_some_and(|r| r.state == ServerState::Looking);
            let now = standing.filter(|_| looking).map(|l| (l.sid, l.epoch));
            let open = self.straying[i].as_ref().map(|s| s.leader);
            if open.is_some() && open != now {
                let mut s = self.straying[i].take().expect("checked");
                s.end_ns = time;
                s.end_pos = pos;
                s.ms = (time - s.start_ns) / 1_000_000;
                self.strays.push(s);
            }
            if let (Some(leader), None) = (now, &self.straying[i]) {
                self.straying[i] = Some(Stray {
                    node: self.nodes[i].name.clone(),
                    leader,
                    start_ns: time,
                    end_ns: time,
                    ms: 0,
                    looking_reads: 0,
                    open_at_end: false,
                    start_pos: pos,
                    end_pos: pos,
                });
            }
        }
    }

    /// The nodes (indices) of a group's bitmask.
    fn members(&self, group: u64) -> impl Iterator<Item = usize> {
        (0..self.nodes.len().min(64)).filter(move |i| group & (1 << i) != 0)
    }

    /// THE calm group now, as a bitmask of node indices (0: none): the largest set of at
    /// least a quorum of nodes that are up (not killed, paused or powered off), have answered
    /// a read since they last started, are in no active fault but a clock step (the servers
    /// time elections and Zab on the monotonic clock, which the clock faults leave alone unless
    /// the run faked it too: then a clock fault holds its nodes until its lead after the reset
    /// runs out, [`FaultInterval::moves_ticks_at`]), are
    /// mutually connected under the active partition, and are cleanly separated from every
    /// other node (each other node is either cut from all of them or from none: a node that
    /// bridges the group and the rest makes the election's inputs the partition's). Such a
    /// group must have a quorum-backed leader (see the availability checker). Clusters of
    /// more than 16 nodes are not searched (no group).
    pub fn calm_group(&self) -> u64 {
        let n = self.nodes.len();
        if n > 16 {
            return 0;
        }
        let faulted = |i: usize| {
            self.intervals.iter().any(|f| {
                let touches = match f.kind {
                    FaultKind::Partition => false,
                    FaultKind::Clock => self.clock_touches && f.moves_ticks_at(self.now),
                    _ => f.end_ns.is_none(),
                };
                touches && f.nodes.iter().any(|x| *x == self.nodes[i].name)
            })
        };
        let mut eligible = 0u64;
        for (i, node) in self.nodes.iter().enumerate() {
            if !node.down && node.answered && !faulted(i) {
                eligible |= 1 << i;
            }
        }
        let mut best = 0u64;
        // Every subset of the eligible nodes (at most 2^16), largest wins.
        let mut sub = eligible;
        while sub != 0 {
            let size = sub.count_ones();
            if size as usize >= self.quorum && size > best.count_ones() && self.clean(sub) {
                best = sub;
            }
            sub = (sub - 1) & eligible;
        }
        best
    }

    /// Whether the nodes of `group` are mutually connected and every other node is cut from
    /// all of them or from none.
    fn clean(&self, group: u64) -> bool {
        let inside: Vec<usize> = self.members(group).collect();
        let mutual = inside
            .iter()
            .all(|&a| inside.iter().all(|&b| a == b || !self.cut(a, b)));
        mutual
            && (0..self.nodes.len())
                .filter(|o| group & (1 << o) == 0)
                .all(|o| {
                    let cuts = inside.iter().filter(|&&a| self.cut(a, o)).count();
                    cuts == 0 || cuts == inside.len()
                })
    }

    /// Measures, for faults and the final heal still waiting for it, the time until every node
    /// had rejoined the leader (reads since the latest fault or the final heal).
    fn judge_rejoin(&mut self, time: u64) {
        let heal_waits = self.final_heal.is_some_and(|h| h.rejoined.is_none());
        if self.awaiting_rejoin == 0 && !heal_waits {
            return;
        }
        if !self.settled(self.fresh_since).is_settled() {
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

    /// THE definition of a settled cluster (the controller waits for it before its final
    /// reads; the recovery checker measures it): a quorum-backed leader, and every node that
    /// is up (not killed or paused) is that leader or FOLLOWS it in broadcast in its epoch,
    /// not cut off from it, with its last committed zxid at least the leader's; every read
    /// counted taken at or after `since_ns`.
    pub fn settled(&self, since_ns: u64) -> Settle {
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
        let stragglers = (0..self.nodes.len())
            .filter(|&i| i != leader.node && !self.nodes[i].down)
            .filter(|&i| {
                let joined = fresh(&self.nodes[i]).is_some_and(|r| {
                    r.follows() == Some((leader.sid, leader.epoch))
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

    /// THE quorum-backed leader now, counting only reads taken at or after `since_ns`
    /// (see [`quorum_leader_among`]).
    pub fn quorum_leader(&self, since_ns: u64) -> Option<QuorumLeader> {
        quorum_leader_among(&self.nodes, self.quorum, since_ns)
    }

    /// Every node whose latest read claims to lead an established epoch.
    pub fn claims(&self) -> Vec<LeaderClaim> {
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

    /// Whether `a` and `b` (indices) cannot talk under the active partition.
    pub fn cut(&self, a: usize, b: usize) -> bool {
        self.nodes[a].drops.contains(&b) || self.nodes[b].drops.contains(&a)
    }

    /// Fault intervals so far (open ones have no end).
    pub fn intervals(&self) -> &[FaultInterval] {
        &self.intervals
    }

    /// Faults in force now.
    pub fn active_faults(&self) -> impl Iterator<Item = &FaultInterval> + '_ {
        self.intervals.iter().filter(|i| i.end_ns.is_none())
    }

    /// Faults recovered from so far, in the order they were.
    pub fn recoveries(&self) -> &[FaultRecovery] {
        &self.recoveries
    }

    pub fn final_heal(&self) -> Option<FinalHeal> {
        self.final_heal
    }

    pub fn windows(&self) -> &[Window] {
        &self.windows
    }

    pub fn overlaps(&self) -> &[Overlap] {
        &self.overlaps
    }

    /// Stalls closed so far.
    pub fn stalls(&self) -> &[Stall] {
        &self.stalls
    }

    pub fn events(&self) -> u64 {
        self.events
    }

    /// Ends the history: open windows and overlaps end now, pending faults never recovered.
    pub fn finish(mut self) -> Finished {
        let end = self.now;
        if let Some(start) = self.window_start.take() {
            self.windows.push(Window {
                start_ns: start,
                end_ns: end,
                ms: (end - start) / 1_000_000,
                open_at_end: true,
            });
        }
        if let Some((mut s, reads)) = self.stall.take() {
            s.end_ns = end;
            s.ms = (end - s.start_ns) / 1_000_000;
            s.fewest_reads = self
                .members(self.calm)
                .map(|i| reads.get(i).copied().unwrap_or(0))
                .min()
                .unwrap_or(0);
            s.open_at_end = true;
            self.stalls.push(s);
        }
        for mut s in self.straying.drain(..).flatten() {
            s.end_ns = end;
            s.ms = (end - s.start_ns) / 1_000_000;
            s.open_at_end = true;
            self.strays.push(s);
        }
        if let Some(mut o) = self.overlap.take() {
            o.end_ns = end;
            o.ms = (end - o.start_ns) / 1_000_000;
            o.open_at_end = true;
            self.overlaps.push(o);
        }
        // Who had not rejoined when the history ends, if the final heal never settled.
        let final_stragglers = match self.final_heal {
            Some(h) if h.rejoined.is_none() => self
                .settled(h.time)
                .stragglers
                .into_iter()
                .map(|i| (self.nodes[i].name.clone(), self.nodes[i].read))
                .collect(),
            _ => Vec::new(),
        };
        let mut recoveries = self.recoveries;
        recoveries.append(&mut self.pending);
        recoveries.sort_by_key(|r| r.start_ns);
        Finished {
            end_ns: end,
            quorum: self.quorum,
            intervals: self.intervals,
            recoveries,
            windows: self.windows,
            overlaps: self.overlaps,
            stalls: self.stalls,
            strays: self.strays,
            final_heal: self.final_heal,
            final_stragglers,
        }
    }
}

/// THE definition of a quorum-backed leader, over nodes as known at one moment: a node
/// LEADING an epoch it has established (Zab sync or broadcast), plus nodes FOLLOWING it in
/// broadcast in that epoch, at least `quorum` with itself, none down (killed or paused), none
/// cut off from it by an active partition (in either direction), every read counted taken at
/// or after `since_ns`. Every stage calls this (through [`View::quorum_leader`], or directly
/// for a snapshot of statuses, see [`quorum_leader_of`]).
pub fn quorum_leader_among(
    nodes: &[NodeNow],
    quorum: usize,
    since_ns: u64,
) -> Option<QuorumLeader> {
    let counts = |n: &NodeNow| -> Option<NodeRead> {
        let r = n.read?;
        (!n.down && r.time >= since_ns).then_some(r)
    };
    nodes.iter().enumerate().find_map(|(li, l)| {
        let lr = counts(l)?;
        let epoch = lr.leads()?;
        let sid = l.sid?;
        let mut backers = 1;
        let mut last = lr.pos;
        for (fi, f) in nodes.iter().enumerate() {
            if fi == li {
                continue;
            }
            let Some(fr) = counts(f) else { continue };
            let cut = f.drops.contains(&li) || l.drops.contains(&fi);
            if !cut && fr.follows() == Some((sid, epoch)) {
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
    })
}

/// [`quorum_leader_among`] for a snapshot of status reads (all taken now, none down, no
/// partition known) of a cluster of `cluster_size`: the leader's sid and epoch. For live
/// polls outside a run (benches, node tests).
pub fn quorum_leader_of<'a>(
    statuses: impl IntoIterator<Item = &'a crate::api::NodeStatus>,
    cluster_size: usize,
) -> Option<(u64, u64)> {
    let nodes: Vec<NodeNow> = statuses
        .into_iter()
        .map(|s| NodeNow {
            name: super::node_name(s.sid),
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
        })
        .collect();
    quorum_leader_among(&nodes, crate::api::quorum(cluster_size), 0).map(|l| (l.sid, l.epoch))
}

/// One history event as a view takes it (see [`View::feed`]): a node's status read, a failed
/// read of a node, a nemesis action, or anything else (which only moves time on). Node
/// numbers are the view's indices.
#[derive(Debug, Clone, Copy)]
pub enum Fed<'a> {
    Status {
        node: usize,
        read: NodeRead,
    },
    Unreachable {
        node: usize,
        time: u64,
        pos: u32,
    },
    Fault {
        node: Option<usize>,
        pos: u32,
        index: u64,
        time: u64,
        kind: EventType,
        f: super::F,
        value: &'a FaultValue,
    },
    Other {
        time: u64,
        pos: u32,
    },
}

/// What a whole history showed.
#[derive(Debug, Clone)]
pub struct Finished {
    /// The latest time in the history.
    pub end_ns: u64,
    pub quorum: usize,
    pub intervals: Vec<FaultInterval>,
    /// Every fault, in start order, recovered or not.
    pub recoveries: Vec<FaultRecovery>,
    pub windows: Vec<Window>,
    pub overlaps: Vec<Overlap>,
    /// Stretches a calm group had no quorum-backed leader ([`View::calm_group`]).
    pub stalls: Vec<Stall>,
    /// Stretches a calm-group member stayed LOOKING beside its standing leader ([`Stray`]).
    pub strays: Vec<Stray>,
    pub final_heal: Option<FinalHeal>,
    /// After a final heal that never settled: the nodes that had not rejoined the leader when
    /// the history ends, with their latest read (None: no read since... or never).
    pub final_stragglers: Vec<(String, Option<NodeRead>)>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::test_feed::{Feed, MS};

    /// A node the view first hears of while a stall is open (a live recorder's view learns
    /// nodes as their lines arrive) is counted, not indexed past the stall's read counts.
    #[test]
    fn a_node_first_seen_during_a_stall_is_counted() {
        let mut f = Feed::new();
        f.read(10, 1, "?", 0)
            .read(11, 2, "?", 0)
            .read(12, 3, "?", 0);
        f.read(20, 4, "?", 0);
        for (ms, n) in [(30, 1), (31, 2), (32, 3), (33, 4)] {
            f.read(ms, n, "?", 0);
        }
        let stalls = f.view.stalls().len();
        f.read(40, 1, "L", 1)
            .read(41, 2, "F1", 1)
            .read(42, 3, "F1", 1);
        f.read(43, 4, "F1", 1);
        assert!(
            f.view.stalls().len() > stalls,
            "the stall closed when n1 led"
        );
        let s = f.view.stalls().last().expect("a stall");
        assert!(s.group.len() >= 3 && s.fewest_reads >= 1, "{s:?}");
    }

    /// n1 leads epoch 1, followed by n2 and n3.
    fn settled() -> Feed {
        let mut f = Feed::new();
        f.read(10, 1, "L", 1)
            .read(11, 2, "F1", 1)
            .read(12, 3, "F1", 1);
        f
    }

    #[test]
    fn a_leader_and_a_quorum_in_broadcast_of_its_epoch() {
        let mut f = settled();
        assert_eq!(f.leader(0), Some((1, 1)));
        // Reads older than `since` do not count.
        assert_eq!(f.leader(11), None);
        // A follower of another epoch does not back it; one is not enough of three.
        f.read(20, 2, "F1", 0).read(21, 3, "?", 1);
        assert_eq!(f.leader(0), None);
        // A leader still in discovery has not established its epoch.
        let mut g = Feed::new();
        g.read(10, 1, "L-discovery", 1)
            .read(11, 2, "F1", 1)
            .read(12, 3, "F1", 1);
        assert_eq!(g.leader(0), None);
    }

    #[test]
    fn settled_needs_every_up_node_to_rejoin_and_catch_up() {
        let mut f = Feed::new();
        f.nemesis(5, "kill", r#"{"nodes":["n3"]}"#)
            .read(10, 1, "L", 1)
            .read(11, 2, "F1", 1);
        // A quorum-backed leader, and n3 is down: nobody up is missing.
        assert!(f.view.settled(0).is_settled());
        assert_eq!(f.view.recoveries()[0].ms_to_all_rejoined, Some(6));
        // The final phase restarts n3, which is still looking: a straggler.
        f.nemesis(20, "start", r#"{"nodes":["n3"],"final":true}"#)
            .read(21, 1, "L", 1)
            .read(22, 2, "F1", 1)
            .read(23, 3, "?", 0);
        let s = f.view.settled(20 * MS);
        assert_eq!(
            (s.leader.map(|l| l.sid), s.stragglers.clone()),
            (Some(1), vec![2])
        );
        assert_eq!(f.view.final_heal().and_then(|h| h.rejoined), None);
        // Following in broadcast but behind the leader's commits: still a straggler.
        fn read(f: &mut Feed, ms: u64, node: u64, state: &str, zxid: u64) {
            let text = format!(
                r#"{{"index":0,"time":{},"process":"n{node}","type":"ok","f":"status","node":"n{node}","value":{{"state":"{state}","leader":1,"peer_epoch":1,"accepted_epoch":1,"zab_phase":"broadcast","last_zxid":{zxid},"last_committed_zxid":{zxid}}}}}"#,
                ms * MS
            );
            f.line(text);
        }
        read(&mut f, 30, 1, "LEADING", 9);
        read(&mut f, 31, 3, "FOLLOWING", 4);
        assert_eq!(f.view.settled(20 * MS).stragglers, vec![1, 2]);
        read(&mut f, 32, 2, "FOLLOWING", 9);
        read(&mut f, 33, 3, "FOLLOWING", 9);
        assert!(f.view.settled(20 * MS).is_settled());
        // Measured from the final heal: 13 ms.
        assert_eq!(f.view.final_heal().and_then(|h| h.rejoined), Some(13 * MS));
    }

    #[test]
    fn isolate_leader_the_cut_off_leader_is_not_quorum_backed() {
        let mut f = settled();
        f.nemesis(
            100,
            "partition",
            r#"{"nodes":["n1","n2","n3"],"shape":"isolate-leader","drops":{"n1":["n2","n3"],"n2":["n1"],"n3":["n1"]}}"#,
        );
        // Its followers have not noticed yet: still FOLLOWING n1 in broadcast, read after the
        // cut. Not a quorum-backed leader: they cannot hear it.
        f.read(101, 1, "L", 1)
            .read(102, 2, "F1", 1)
            .read(103, 3, "F1", 1);
        assert_eq!(f.leader(0), None);
        assert_eq!(f.view.recoveries().len(), 0, "no recovery in 3 ms");
        // n2 and n3 elect n2 (epoch 2): that is the recovery, 1.4 s after the cut.
        f.read(1000, 2, "?", 1)
            .read(1400, 2, "L", 2)
            .read(1500, 3, "F2", 2);
        assert_eq!(f.leader(100), Some((2, 2)));
        let r = &f.view.recoveries()[0];
        assert_eq!(
            (r.kind, r.ms_to_quorum_leader),
            (FaultKind::Partition, Some(1400))
        );
        assert_eq!(r.leader.as_deref(), Some("n2"));
        // The old leader still claims epoch 1: an overlap, open until it steps down.
        assert_eq!(f.view.claims().len(), 2);
        f.nemesis(2000, "heal", r#"{"nodes":["n1","n2","n3"],"final":true}"#);
        f.read(2100, 1, "F2", 2);
        let done = f.view.clone().finish();
        assert_eq!(done.overlaps.len(), 1);
        assert_eq!(done.overlaps[0].ms, 2100 - 1400);
        assert_eq!(done.intervals[0].end_ns, Some(2000 * MS));
        // After the final heal only reads after it count: n1 (read at 2100) following n2,
        // and n2 read leading at 2200, make a quorum then.
        f.read(2200, 2, "L", 2).read(2300, 3, "F2", 2);
        let h = f.view.final_heal().unwrap();
        assert_eq!(h.recovered.map(|r| (r.0 / MS, r.1.sid)), Some((200, 2)));
    }

    #[test]
    fn a_killed_leader_does_not_count_until_restarted() {
        let mut f = settled();
        f.nemesis(100, "kill", r#"{"nodes":["n1"]}"#);
        // Its followers' reads still name it, but its own read is forgotten and it is down.
        f.read(101, 2, "F1", 1).read(102, 3, "F1", 1);
        assert_eq!(f.leader(0), None);
        assert!(f.view.nodes()[0].down);
        f.read(600, 3, "L", 2).read(700, 2, "F3", 2);
        assert_eq!(f.leader(100), Some((3, 2)));
        assert_eq!(f.view.recoveries()[0].ms_to_quorum_leader, Some(600));
        f.nemesis(800, "start", r#"{"nodes":["n1"]}"#);
        assert!(!f.view.nodes()[0].down);
        assert_eq!(f.view.intervals()[0].end_ns, Some(800 * MS));
    }

    #[test]
    fn a_paused_leader_does_not_count_until_resumed() {
        let mut f = settled();
        f.nemesis(100, "pause", r#"{"nodes":["n1"]}"#);
        // Even a late read that still shows it leading does not make it a leader.
        f.read(101, 1, "L", 1)
            .read(102, 2, "F1", 1)
            .read(103, 3, "F1", 1);
        assert_eq!(f.leader(0), None);
        f.nemesis(200, "resume", r#"{"nodes":["n1"]}"#);
        assert_eq!(f.leader(0), Some((1, 1)));
        assert_eq!(f.view.recoveries()[0].ms_to_quorum_leader, Some(100));
    }

    #[test]
    fn leaderless_windows_and_overlaps() {
        let mut f = Feed::new();
        f.read(0, 1, "?", 0)
            .read(10, 1, "L", 1)
            .read(20, 2, "F1", 1)
            .read(30, 3, "L", 2)
            .read(40, 3, "?", 2)
            .read(50, 2, "?", 1);
        let done = f.view.finish();
        let windows: Vec<(u64, u64, bool)> = done
            .windows
            .iter()
            .map(|w| (w.start_ns / MS, w.end_ns / MS, w.open_at_end))
            .collect();
        assert_eq!(windows, vec![(0, 20, false), (50, 50, true)]);
        let overlaps: Vec<(u64, u64, usize)> = done
            .overlaps
            .iter()
            .map(|o| (o.start_ns / MS, o.end_ns / MS, o.leaders.len()))
            .collect();
        assert_eq!(overlaps, vec![(30, 40, 2)]);
    }

    #[test]
    fn clock_faults_pair_with_their_reset_and_unknown_events_pass() {
        let mut f = settled();
        f.nemesis(100, "clock", r#"{"nodes":["n2"],"mode":"bump","offset_ms":5000}"#)
            .nemesis(150, "packet", r#"{"nodes":["n3"]}"#)
            .line(r#"{"index":9,"time":160000000,"process":"x","type":"info","f":"future-thing","value":{"a":[1]}}"#.into())
            .nemesis(180, "heal", r#"{"nodes":["n3"],"undoes":"packet"}"#)
            .nemesis(200, "clock", r#"{"nodes":["n2"],"mode":"reset"}"#);
        let i = &f.view.intervals()[0];
        assert_eq!((i.kind, i.end_ns), (FaultKind::Clock, Some(200 * MS)));
        // A packet fault pairs with the heal that says it undoes packets.
        let p = &f.view.intervals()[1];
        assert_eq!((p.kind, p.end_ns), (FaultKind::Packet, Some(180 * MS)));
        assert_eq!(f.view.active_faults().count(), 0);
    }

    fn group(f: &Feed) -> Vec<&str> {
        let g = f.view.calm_group();
        (0..f.view.nodes().len())
            .filter(|i| g & (1 << i) != 0)
            .map(|i| f.view.nodes()[i].name.as_str())
            .collect()
    }

    #[test]
    fn the_calm_group_is_a_clean_quorum_under_no_fault_but_clock_steps() {
        let mut f = Feed::new();
        // Nobody answered yet: no group.
        assert!(group(&f).is_empty());
        f.read(1, 1, "?", 0).read(2, 2, "?", 0);
        assert_eq!(group(&f), vec!["n1", "n2"]);
        f.read(3, 3, "?", 0);
        assert_eq!(group(&f), vec!["n1", "n2", "n3"]);
        // A clock step touches nothing (the servers time on the monotonic clock)...
        f.nemesis(
            10,
            "clock",
            r#"{"nodes":["n2"],"mode":"bump","offset_ms":5000}"#,
        );
        assert_eq!(group(&f), vec!["n1", "n2", "n3"]);
        // ... unless the run fakes the monotonic clock too.
        f.view.set_clock_faults_touch(true);
        assert_eq!(group(&f), vec!["n1", "n3"]);
        f.view.set_clock_faults_touch(false);
        // A killed node is out until it answers again after its restart.
        f.nemesis(20, "kill", r#"{"nodes":["n3"]}"#);
        assert_eq!(group(&f), vec!["n1", "n2"]);
        f.nemesis(30, "start", r#"{"nodes":["n3"]}"#);
        assert_eq!(group(&f), vec!["n1", "n2"]);
        f.read(31, 3, "?", 0);
        assert_eq!(group(&f), vec!["n1", "n2", "n3"]);
        // A packet fault touches its nodes: one of three left, no quorum.
        f.nemesis(40, "packet", r#"{"nodes":["n1","n2"]}"#);
        assert!(group(&f).is_empty());
        f.nemesis(50, "heal", r#"{"nodes":["n1","n2"],"undoes":"packet"}"#);
        // A clean cut: the majority side is calm.
        f.nemesis(
            60,
            "partition",
            r#"{"nodes":["n1","n2","n3"],"drops":{"n1":["n2","n3"],"n2":["n1"],"n3":["n1"]}}"#,
        );
        assert_eq!(group(&f), vec!["n2", "n3"]);
        f.nemesis(70, "heal", r#"{"nodes":["n1","n2","n3"]}"#);
        // A bridge: n2 hears both, n1 and n3 do not hear each other. {n1,n2} is connected
        // but n3 is cut from only part of it: not cleanly separated, no calm group.
        f.nemesis(
            80,
            "partition",
            r#"{"nodes":["n1","n2","n3"],"drops":{"n1":["n3"],"n3":["n1"]}}"#,
        );
        assert!(group(&f).is_empty());
    }

    #[test]
    fn a_faked_monotonic_clock_holds_its_node_for_the_fault_s_lead_after_the_reset() {
        // A clock fault on n2 from `at` ms, reset at `reset` ms.
        fn skew_n2(f: &mut Feed, at: u64, reset: u64, how: &str) {
            f.nemesis(at, "clock", &format!(r#"{{"nodes":["n2"],{how}}}"#))
                .nemesis(reset, "clock", r#"{"nodes":["n2"],"mode":"reset"}"#);
        }
        let mut f = Feed::new();
        f.view.set_clock_faults_touch(true);
        f.read(1, 1, "?", 0).read(2, 2, "?", 0).read(3, 3, "?", 0);
        // Ahead by 500 ms, reset at 20 ms: n2's timers may stall until 520 ms.
        skew_n2(&mut f, 10, 20, r#""mode":"bump","offset_ms":500"#);
        f.read(400, 1, "?", 0);
        assert_eq!(group(&f), vec!["n1", "n3"]);
        f.read(600, 1, "?", 0);
        assert_eq!(group(&f), vec!["n1", "n2", "n3"]);
        // The stall of the group without n2 ended when its lead ran out, not at the reset.
        let held = f.view.stalls().iter().find(|s| s.group == ["n1", "n3"]);
        assert_eq!(held.map(|s| s.end_ns), Some(600 * MS));
        // A clock set back is moved forward by its reset: no lead.
        skew_n2(&mut f, 700, 710, r#""mode":"bump","offset_ms":-5000"#);
        f.read(720, 1, "?", 0);
        assert_eq!(group(&f), vec!["n1", "n2", "n3"]);
        // A rate of 3 for 100 ms puts the clock 200 ms ahead.
        skew_n2(&mut f, 800, 900, r#""mode":"rate","factor":3.0"#);
        f.read(1050, 1, "?", 0);
        assert_eq!(group(&f), vec!["n1", "n3"]);
        f.read(1150, 1, "?", 0);
        assert_eq!(group(&f), vec!["n1", "n2", "n3"]);
    }

    #[test]
    fn stalls_measure_a_calm_group_without_a_leader_and_name_a_deposed_one() {
        let mut f = settled();
        // Calm and led from 12 ms: n1 loses its quorum at 6100 ms (n2 alone looking leaves
        // it two of three), n2 leads epoch 2 at 6310.
        f.read(6000, 2, "?", 1)
            .read(6100, 3, "?", 1)
            .read(6200, 1, "?", 1)
            .read(6250, 2, "?", 1)
            .read(6300, 2, "L", 2)
            .read(6310, 3, "F2", 2);
        // A kill: the two left elect within 2 s; the group changed, so nothing was deposed.
        f.nemesis(7000, "kill", r#"{"nodes":["n2"]}"#)
            .read(8000, 1, "L", 3)
            .read(9000, 3, "F1", 3);
        let done = f.view.finish();
        type Leader = Option<(u64, u64)>;
        let stalls: Vec<(u64, u64, Leader, Leader)> = done
            .stalls
            .iter()
            .filter(|s| s.ms > 0)
            .map(|s| (s.start_ns / MS, s.ms, s.before, s.after))
            .collect();
        assert_eq!(
            stalls,
            vec![
                (6100, 210, Some((1, 1)), Some((2, 2))),
                (7000, 2000, None, Some((1, 3)))
            ]
        );
        let deposed = done
            .stalls
            .iter()
            .find(|s| s.start_ns == 6100 * MS)
            .unwrap();
        assert_eq!(deposed.calm_for_ms, 6100 - 12);
        assert_eq!(deposed.group, vec!["n1", "n2", "n3"]);
        assert!(deposed.fewest_reads >= 1);
    }
    /// A calm member LOOKING beside the group's standing leader is a stray until it follows;
    /// one cut off by a partition is not (it cannot join); after the heal it is again, until
    /// it follows.
    #[test]
    fn strays_are_calm_members_looking_beside_a_standing_leader() {
        let mut f = settled();
        f.read(1000, 3, "?", 1)
            .read(1010, 1, "L", 1)
            .read(1020, 2, "F1", 1)
            .read(2500, 3, "?", 1)
            .read(4000, 3, "F1", 1);
        f.nemesis(
            5000,
            "partition",
            r#"{"nodes":["n1","n2","n3"],"drops":{"n3":["n1","n2"],"n1":["n3"],"n2":["n3"]}}"#,
        );
        f.read(5100, 3, "?", 1).read(9000, 3, "?", 1);
        f.nemesis(9500, "heal", r#"{"nodes":["n1","n2","n3"]}"#)
            .read(9550, 3, "?", 1)
            .read(9600, 3, "F1", 1);
        let done = f.view.finish();
        type Row<'a> = (&'a str, u64, u64, u32, (u64, u64));
        let strays: Vec<Row> = done
            .strays
            .iter()
            .map(|s| {
                let at = s.start_ns / MS;
                (s.node.as_str(), at, s.ms, s.looking_reads, s.leader)
            })
            .collect();
        assert_eq!(
            strays,
            vec![("n3", 1000, 3000, 1, (1, 1)), ("n3", 9500, 100, 1, (1, 1))]
        );
    }
}
