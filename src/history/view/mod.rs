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
//!   quorum-backed leader existed (the availability checker judges their length);
//! - reigns: each quorum-backed leadership (sid, epoch) and the fault that ended it, if one
//!   did (leader-completeness bounds a later leader's writes by that fault's exact time).
//!
//! Each family of facts is a sub-fold of its own module, all fed by the one [`View::feed`]:
//! `cluster` (the nodes now; the quorum-backed leader and settled definitions), `faults`
//! (intervals and recoveries), `leadership` (windows and overlaps), `calm` (the calm
//! group, stalls and strays) and `reigns`. After every event the view judges them in that
//! order.
//!
//! Times are the history's (ns since the run started); lines appended concurrently may step
//! back a little, so the view keeps a running maximum as "now".

mod calm;
mod cluster;
mod faults;
mod leadership;
mod reigns;
#[cfg(test)]
mod tests;

pub use calm::{Stall, Stray};
pub use cluster::{
    quorum_backed, quorum_leader_among, quorum_leader_of, LeaderClaim, NodeNow, NodeRead,
    QuorumLeader, Settle,
};
pub use faults::{FaultInterval, FaultRecovery, FinalHeal};
pub use leadership::{Overlap, Window};
pub use reigns::{Ending, Reign};

use super::line::{Body, Line};
use super::{EventType, FaultStep, FaultValue};
use calm::Calm;
use cluster::Cluster;
use faults::{At, Faults};
use leadership::Leadership;
use reigns::Reigns;

/// The derived facts of a history, fed in order.
#[derive(Debug, Clone)]
pub struct View {
    cluster: Cluster,
    /// "Now": the running maximum of the times fed.
    now: u64,
    /// Events fed.
    events: u64,
    faults: Faults,
    leadership: Leadership,
    calm: Calm,
    reigns: Reigns,
}

impl View {
    /// A view of a cluster of `nodes` (test.json's; others are added as lines name them).
    pub fn new(nodes: &[String]) -> Self {
        View::of_ensemble(nodes, &[])
    }

    /// A view of `nodes` of which `observers` do not vote: the quorum is a majority of the rest.
    pub fn of_ensemble(nodes: &[String], observers: &[String]) -> Self {
        let voters = nodes.iter().filter(|n| !observers.contains(n)).count();
        let mut v = View {
            cluster: Cluster {
                observers: observers.to_vec(),
                ..Cluster::new(voters)
            },
            now: 0,
            events: 0,
            faults: Faults::default(),
            leadership: Leadership::default(),
            calm: Calm::new(),
            reigns: Reigns::default(),
        };
        for n in nodes {
            v.node_ix(n);
        }
        v
    }

    /// Whether clock faults keep their nodes out of the calm group ([`View::calm_group`]):
    /// only when the run faked the monotonic clock as well as the wall clock.
    pub fn set_clock_faults_touch(&mut self, yes: bool) {
        self.calm.clock_touches = yes;
        self.calm.touch();
    }

    /// Whether the node at index `i` is an observer (counts toward no quorum).
    pub fn is_observer(&self, i: usize) -> bool {
        let name = self.cluster.nodes.get(i).map(|n| &n.name);
        name.is_some_and(|n| self.cluster.observers.contains(n))
    }

    /// The voting nodes (every node but the observers), in node order.
    pub fn voters(&self) -> Vec<String> {
        let nodes = self.cluster.nodes.iter().map(|n| &n.name);
        let voting = nodes.filter(|n| !self.cluster.observers.contains(n));
        voting.cloned().collect()
    }

    /// The quorum size: a majority of the configured cluster's voters.
    pub fn quorum(&self) -> usize {
        self.cluster.quorum
    }

    pub fn nodes(&self) -> &[NodeNow] {
        &self.cluster.nodes
    }

    /// The index of node `name`, if the view knows it (`node_ix` adds it otherwise).
    pub fn index_of(&self, name: &str) -> Option<usize> {
        self.cluster.index_of(name)
    }

    /// The index of `name`, added when new.
    pub fn node_ix(&mut self, name: &str) -> usize {
        self.cluster.node_ix(name)
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
            } => self.fault(At { index, time, pos }, kind, f, value, node),
            Fed::Exit { node, time, pos } => self.exit(node, time, pos),
            Fed::Other { time, pos } => self.other(time, pos),
        }
    }

    /// What the decoded line at history position `pos` is to this view (node names become
    /// this view's indices, new ones are added): `let e = view.of_line(pos, l); view.feed(e)`.
    /// A status read that carries a config also makes it the node's ([`View::config_seen`]).
    pub fn of_line<'a>(&mut self, pos: u32, l: &'a Line<'_>) -> Fed<'a> {
        let node = l.node.as_deref().map(|n| self.node_ix(n));
        match (&l.body, node) {
            (Body::Status(s), Some(node)) => {
                // An unreadable config is the membership checker's to report.
                if let Some(Ok(config)) = s.config.map(super::line::config) {
                    self.config_seen(node, config);
                }
                Fed::Status {
                    node,
                    read: NodeRead::of(l.time, pos, s),
                }
            }
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
            (Body::NodeExit(_), Some(node)) => Fed::Exit {
                node,
                time: l.time,
                pos,
            },
            _ => Fed::Other { time: l.time, pos },
        }
    }

    /// Node `ix` reported `config` (once a reconfig changed it): from now on its config, and
    /// under its lead the voters that count toward a quorum (see [`quorum_leader_among`]).
    /// Called just before the status read that carried it is fed: by [`View::of_line`], and
    /// by the checkers from their digest's config changes.
    pub fn config_seen(&mut self, ix: usize, config: crate::api::ConfigView) {
        let now = &mut self.cluster.nodes[ix].config;
        if now.as_deref() != Some(&config) {
            *now = Some(std::sync::Arc::new(config));
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
        let node = &mut self.cluster.nodes[ix];
        node.read = Some(read);
        if !node.answered {
            node.answered = true;
            self.calm.touch();
        }
        self.calm.read(ix, &read);
        self.judge(read.time, read.pos);
    }

    /// A failed or timed-out read of node `ix`: what was known of it is stale.
    fn unreachable(&mut self, ix: usize, time: u64, pos: u32) {
        let time = self.at(time);
        self.cluster.nodes[ix].read = None;
        self.judge(time, pos);
    }

    /// Node `ix`'s process ended unasked: down, as after a kill, until it is started again.
    fn exit(&mut self, ix: usize, time: u64, pos: u32) {
        let time = self.at(time);
        let node = &mut self.cluster.nodes[ix];
        node.down = true;
        node.read = None;
        node.answered = false;
        self.judge(time, pos);
    }

    /// Any other event (it only moves time on).
    fn other(&mut self, time: u64, pos: u32) {
        let time = self.at(time);
        self.judge(time, pos);
    }

    /// A nemesis action (`f` a fault or its undo); only done actions (`info`) change the view,
    /// but no group is calm while a fault's start is under way (a clock step's only where
    /// clock faults touch their nodes), and a fault start's invoke and outcome tell the reigns
    /// which leadership it ends.
    fn fault(&mut self, at: At, kind: EventType, f: super::F, v: &FaultValue, node: Option<usize>) {
        let at = At {
            time: self.at(at.time),
            ..at
        };
        if let Some(FaultStep::Starts(k)) = v.step(f) {
            let nodes = self.fault_nodes(v, node);
            let start = (at, f, k);
            match kind {
                EventType::Invoke => self.reigns.invoked(start, &nodes, v, &self.cluster),
                _ => {
                    let done = kind == EventType::Info;
                    self.reigns.outcome(start, &nodes, v, done, &self.cluster);
                }
            }
        }
        if kind == EventType::Info {
            self.calm.applying(false);
            self.apply(at, f, v, node);
        } else if let Some(FaultStep::Starts(k)) = v.step(f) {
            if k != super::FaultKind::Clock || self.calm.clock_touches {
                self.calm.applying(true);
            }
        }
        self.judge(at.time, at.pos);
    }

    /// The nodes (indices) a nemesis action names: its value's, else its event's node.
    fn fault_nodes(&mut self, v: &FaultValue, node: Option<usize>) -> Vec<usize> {
        let mut nodes: Vec<usize> = v.nodes.iter().map(|n| self.node_ix(n)).collect();
        if nodes.is_empty() {
            nodes.extend(node);
        }
        nodes
    }

    /// A done nemesis action: what it does to the nodes, and to the fault intervals.
    fn apply(&mut self, at: At, f: super::F, v: &FaultValue, node: Option<usize>) {
        let nodes = self.fault_nodes(v, node);
        match v.step(f) {
            Some(FaultStep::Starts(kind)) => {
                self.cluster.fault_starts(kind, &nodes, v);
                let lead = (kind == super::FaultKind::Clock).then(|| v.clock_lead());
                self.faults
                    .starts(kind, self.cluster.names(&nodes), at, lead);
            }
            Some(FaultStep::Undoes(kind)) => {
                self.cluster.fault_undone(kind, &nodes);
                let undone = self.cluster.names(&nodes);
                self.faults.undone(kind, &undone, at, v.r#final);
            }
            None => {}
        }
        self.calm.touch();
        if v.r#final {
            self.faults.heals(at);
        }
    }

    /// Judges every sub-fold after an event at `time`: windows and overlaps, rejoins, the
    /// calm group's stall and strays, recoveries, then reigns.
    fn judge(&mut self, time: u64, pos: u32) {
        let leader = self.cluster.quorum_leader(0);
        self.leadership.judge(time, leader.is_some(), &self.cluster);
        self.faults.judge_rejoin(time, &self.cluster);
        self.calm.judge(
            (time, pos),
            leader.as_ref(),
            &self.cluster,
            &self.faults.intervals,
        );
        self.faults.judge_recovery(time, pos, &self.cluster);
        self.reigns.judge(time, leader.as_ref(), &self.cluster);
    }

    /// THE calm group now (see `calm::Calm::group_of`): a bitmask of node indices, 0 for none.
    pub fn calm_group(&self) -> u64 {
        self.calm
            .group_of(&self.cluster, &self.faults.intervals, self.now)
    }

    /// THE definition of a settled cluster (the controller waits for it before its final
    /// reads; the recovery checker measures it): a quorum-backed leader, and every node that
    /// is up (not killed or paused) is that leader or FOLLOWS it in broadcast in its epoch,
    /// not cut off from it, with its last committed zxid at least the leader's; every read
    /// counted taken at or after `since_ns`.
    pub fn settled(&self, since_ns: u64) -> Settle {
        self.cluster.settled(since_ns)
    }

    /// THE quorum-backed leader now, counting only reads taken at or after `since_ns`
    /// (see [`quorum_leader_among`]).
    pub fn quorum_leader(&self, since_ns: u64) -> Option<QuorumLeader> {
        self.cluster.quorum_leader(since_ns)
    }

    /// Node `ix` as a quorum-backed leader now, if it is one (see [`quorum_backed`]).
    pub fn backed(&self, ix: usize, since_ns: u64) -> Option<QuorumLeader> {
        quorum_backed(&self.cluster.nodes, ix, self.cluster.quorum, since_ns)
    }

    /// Every node whose latest read claims to lead an established epoch.
    pub fn claims(&self) -> Vec<LeaderClaim> {
        self.cluster.claims()
    }

    /// Whether `a` and `b` (indices) cannot talk under the active partition.
    pub fn cut(&self, a: usize, b: usize) -> bool {
        self.cluster.cut(a, b)
    }

    /// Fault intervals so far (open ones have no end).
    pub fn intervals(&self) -> &[FaultInterval] {
        &self.faults.intervals
    }

    /// Faults in force now.
    pub fn active_faults(&self) -> impl Iterator<Item = &FaultInterval> + '_ {
        self.faults.intervals.iter().filter(|i| i.end_ns.is_none())
    }

    /// Faults recovered from so far, in the order they were.
    pub fn recoveries(&self) -> &[FaultRecovery] {
        &self.faults.recoveries
    }

    pub fn final_heal(&self) -> Option<FinalHeal> {
        self.faults.final_heal
    }

    pub fn windows(&self) -> &[Window] {
        &self.leadership.windows
    }

    pub fn overlaps(&self) -> &[Overlap] {
        &self.leadership.overlaps
    }

    /// Stalls closed so far.
    pub fn stalls(&self) -> &[Stall] {
        &self.calm.stalls
    }

    pub fn events(&self) -> u64 {
        self.events
    }

    /// Ends the history: open windows, overlaps, stalls and strays end now, pending faults
    /// never recovered.
    pub fn finish(mut self) -> Finished {
        let end = self.now;
        self.leadership.finish(end);
        self.calm.finish(end, &self.cluster);
        // Who had not rejoined when the history ends, if the final heal never settled.
        let final_stragglers = match self.faults.final_heal {
            Some(h) if h.rejoined.is_none() => self
                .settled(h.time)
                .stragglers
                .into_iter()
                .map(|i| {
                    (
                        self.cluster.nodes[i].name.clone(),
                        self.cluster.nodes[i].read,
                    )
                })
                .collect(),
            _ => Vec::new(),
        };
        Finished {
            end_ns: end,
            quorum: self.cluster.quorum,
            recoveries: self.faults.all_recoveries(),
            intervals: self.faults.intervals,
            windows: self.leadership.windows,
            overlaps: self.leadership.overlaps,
            stalls: self.calm.stalls,
            strays: self.calm.strays,
            reigns: self.reigns.reigns,
            final_heal: self.faults.final_heal,
            final_stragglers,
        }
    }
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
    /// A node process ended unasked: the node is down until the nemesis starts it again.
    Exit {
        node: usize,
        time: u64,
        pos: u32,
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
    /// Stretches a calm-group member stayed out of broadcast beside its standing leader ([`Stray`]).
    pub strays: Vec<Stray>,
    /// Every quorum-backed leadership, in the order first seen, and the fault that ended it.
    pub reigns: Vec<Reign>,
    pub final_heal: Option<FinalHeal>,
    /// After a final heal that never settled: the nodes that had not rejoined the leader when
    /// the history ends, with their latest read (None: no read since... or never).
    pub final_stragglers: Vec<(String, Option<NodeRead>)>,
}
