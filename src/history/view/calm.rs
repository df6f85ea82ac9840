//! `history::view::calm`: THE calm group (the largest quorum of nodes that are up, have
//! answered since they started, are under no fault but clock steps, mutually connected and
//! cleanly separated from the rest), the stalls in which one calm group stood without a
//! quorum-backed leader, and the strays: calm members not yet serving in broadcast beside a
//! standing leader, whatever they show (LOOKING, or FOLLOWING it in discovery or sync). The
//! availability checker judges both.

use super::super::FaultKind;
use super::cluster::{Cluster, NodeRead, QuorumLeader};
use super::faults::FaultInterval;
#[cfg(doc)]
use super::View;
use crate::api::{ServerState, ZabPhase};
use serde::{Deserialize, Serialize};

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

/// A node of the calm group that did not serve in broadcast under that group's quorum-backed
/// leader while it stood: it was up, answering, under no fault but clock steps and connected
/// to every member, so it had nothing to do but join. Whatever it showed counts: LOOKING
/// (ZOOKEEPER-1732's restarted server that cannot join), or FOLLOWING the leader in discovery
/// or sync and failing its handshake again and again (ZOOKEEPER-2164's server that cannot
/// rejoin: each failed attempt backs off in FOLLOWING/discovery, with LOOKING only for a
/// moment between). Open from the first such read to the first read that serves under the
/// leader (or fails), or to a change of the group or its leader.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Stray {
    pub node: String,
    /// The standing leader and its epoch.
    pub leader: (u64, u64),
    /// What the node's first read of the stray showed ("LOOKING", "FOLLOWING n2 in discovery").
    #[serde(default)]
    pub shown: String,
    pub start_ns: u64,
    pub end_ns: u64,
    pub ms: u64,
    /// Successful reads of the node meanwhile (each showed it not yet serving the leader).
    #[serde(alias = "looking_reads")]
    pub reads: u32,
    /// Still open when the history ends.
    pub open_at_end: bool,
    pub start_pos: u32,
    pub end_pos: u32,
}

impl Stray {
    /// Whether `read` shows the node not (yet) serving in broadcast under `leader`.
    fn apart(read: &NodeRead, leader: (u64, u64)) -> bool {
        read.serves_under() != Some(leader)
    }
}

/// A read's state in words, for a stray's evidence.
fn shown(read: &NodeRead) -> String {
    let state = match read.state {
        ServerState::Looking => return "LOOKING".into(),
        ServerState::Following => "FOLLOWING",
        ServerState::Leading => "LEADING",
        ServerState::Observing => "OBSERVING",
    };
    let phase = match read.phase {
        ZabPhase::Election => "election",
        ZabPhase::Discovery => "discovery",
        ZabPhase::Sync => "sync",
        ZabPhase::Broadcast => "broadcast",
    };
    let leader = read.leader.map_or(String::new(), |l| format!(" n{l}"));
    format!("{state}{leader} in {phase} (epoch {})", read.peer_epoch)
}

/// The calm sub-fold of a view: the calm group now, its stalls and its strays.
#[derive(Debug, Clone, Default)]
pub(super) struct Calm {
    /// The calm group now (bit i: node i) and whether it must be recomputed.
    group: u64,
    dirty: bool,
    /// When the calm group last changed, and its latest quorum-backed leader since.
    since: u64,
    leader: Option<(u64, u64)>,
    /// The run faked the monotonic clock too (a schedule's `fake_monotonic`): then a clock
    /// fault skews the servers' timeouts, and touches its nodes like any other fault, for its
    /// lead past its end too ([`FaultInterval::moves_ticks_at`]).
    pub(super) clock_touches: bool,
    /// A fault's start invoked and not yet done: its effect is under way (a rule set half
    /// applied, a kill not yet reaped; under load that took seconds), so until it is done no
    /// group is calm: a stall across it would be the nemesis's, not the servers'.
    applying: bool,
    /// When a clock fault's lead runs out: the calm group is computed again then.
    recheck_at: Option<u64>,
    /// The open stall, with each node's successful reads since it began.
    stall: Option<(Stall, Vec<u32>)>,
    pub(super) stalls: Vec<Stall>,
    /// Per node (index): its open stray, if any.
    straying: Vec<Option<Stray>>,
    pub(super) strays: Vec<Stray>,
}

impl Calm {
    pub(super) fn new() -> Self {
        Calm {
            dirty: true,
            ..Calm::default()
        }
    }

    /// Something the calm group depends on changed: compute it again at the next judgement.
    pub(super) fn touch(&mut self) {
        self.dirty = true;
    }

    /// A fault's start was invoked (true) or a nemesis action was done (false).
    pub(super) fn applying(&mut self, yes: bool) {
        if self.applying != yes {
            self.applying = yes;
            self.dirty = true;
        }
    }

    /// A successful read of node `ix`: counted for the open stall and the node's stray.
    pub(super) fn read(&mut self, ix: usize, read: &NodeRead) {
        if let Some((_, reads)) = &mut self.stall {
            // A node first seen after the stall opened has no count yet.
            if reads.len() <= ix {
                reads.resize(ix + 1, 0);
            }
            reads[ix] += 1;
        }
        if let Some(Some(stray)) = self.straying.get_mut(ix) {
            if Stray::apart(read, stray.leader) {
                stray.reads += 1;
            }
        }
    }

    /// THE calm group now, as a bitmask of node indices (0: none; none while a fault's start
    /// is under way): the largest set of at least a quorum of nodes that are up (not killed, paused or powered off), have answered
    /// a read since they last started, are in no active fault but a clock step (the servers
    /// time elections and Zab on the monotonic clock, which the clock faults leave alone unless
    /// the run faked it too: then a clock fault holds its nodes until its lead after the reset
    /// runs out, [`FaultInterval::moves_ticks_at`]), are
    /// mutually connected under the active partition, and are cleanly separated from every
    /// other node (each other node is either cut from all of them or from none: a node that
    /// bridges the group and the rest makes the election's inputs the partition's). Such a
    /// group must have a quorum-backed leader (see the availability checker). Clusters of
    /// more than 16 nodes are not searched (no group).
    pub(super) fn group_of(&self, cluster: &Cluster, intervals: &[FaultInterval], now: u64) -> u64 {
        let n = cluster.nodes.len();
        if n > 16 || self.applying {
            return 0;
        }
        let faulted = |i: usize| {
            intervals.iter().any(|f| {
                let touches = match f.kind {
                    FaultKind::Partition => false,
                    FaultKind::Clock => self.clock_touches && f.moves_ticks_at(now),
                    _ => f.end_ns.is_none(),
                };
                touches && f.nodes.iter().any(|x| *x == cluster.nodes[i].name)
            })
        };
        let mut eligible = 0u64;
        for (i, node) in cluster.nodes.iter().enumerate() {
            if !node.down && node.answered && !faulted(i) {
                eligible |= 1 << i;
            }
        }
        let mut best = 0u64;
        let voters = cluster.voter_mask();
        // Every subset of the eligible nodes (at most 2^16), largest wins; a quorum of voters.
        let mut sub = eligible;
        while sub != 0 {
            let size = sub.count_ones();
            let quorate = (sub & voters).count_ones() as usize >= cluster.quorum;
            if quorate && size > best.count_ones() && clean(cluster, sub) {
                best = sub;
            }
            sub = (sub - 1) & eligible;
        }
        best
    }

    /// After an event at `time`: recomputes the group when it may have changed, then opens,
    /// extends or closes the stall and each node's stray.
    pub(super) fn judge(
        &mut self,
        at: (u64, u32),
        leader: Option<&QuorumLeader>,
        cluster: &Cluster,
        intervals: &[FaultInterval],
    ) {
        let (time, pos) = at;
        let before = self.group;
        if self.dirty || self.recheck_at.is_some_and(|at| time > at) {
            self.group = self.group_of(cluster, intervals, time);
            self.dirty = false;
            self.recheck_at = self.next_lead_end(intervals, time);
        }
        self.judge_stall(at, before, leader.map(|l| (l.sid, l.epoch)), cluster);
        self.judge_strays(time, pos, leader, cluster);
    }

    /// The first end of a clock fault's lead after `time`, while clock faults touch their nodes.
    fn next_lead_end(&self, intervals: &[FaultInterval], time: u64) -> Option<u64> {
        if !self.clock_touches {
            return None;
        }
        intervals
            .iter()
            .filter(|f| f.kind == FaultKind::Clock)
            .filter_map(|f| Some(f.end_ns?.saturating_add(f.stalls_after_end_ns()?)))
            .filter(|&at| at >= time)
            .min()
    }

    /// Opens, extends or closes the stall (a calm group without a quorum-backed leader);
    /// `before` is the group before this event.
    fn judge_stall(
        &mut self,
        (time, pos): (u64, u32),
        before: u64,
        leader: Option<(u64, u64)>,
        cluster: &Cluster,
    ) {
        let stalled = leader.is_none() && self.group != 0;
        let same = self.group == before;
        if !same {
            self.since = time;
            self.leader = None;
        }
        if self.stall.is_some() && (!stalled || !same) {
            let (mut s, reads) = self.stall.take().expect("checked");
            s.end_ns = time;
            s.end_pos = pos;
            s.ms = (time - s.start_ns) / 1_000_000;
            s.after = if same { leader } else { None };
            s.fewest_reads = fewest(cluster, before, &reads);
            self.stalls.push(s);
        }
        if stalled && self.stall.is_none() {
            let group = cluster
                .members(self.group)
                .map(|i| cluster.nodes[i].name.clone())
                .collect();
            let stall = Stall {
                start_ns: time,
                end_ns: time,
                ms: 0,
                group,
                fewest_reads: 0,
                calm_for_ms: (time - self.since.min(time)) / 1_000_000,
                calm_since_ns: self.since.min(time),
                before: self.leader,
                after: None,
                open_at_end: false,
                start_pos: pos,
                end_pos: pos,
            };
            self.stall = Some((stall, vec![0; cluster.nodes.len()]));
        }
        if self.group != 0 && leader.is_some() {
            self.leader = leader;
        }
    }

    /// Opens, extends or closes each node's stray (see [`Stray`]): a calm-group member (not
    /// the leader) whose latest read shows it not serving in broadcast under the group's
    /// standing quorum-backed leader, and a member of that leader's config (a server a
    /// reconfig removed is owed nothing).
    fn judge_strays(
        &mut self,
        time: u64,
        pos: u32,
        leader: Option<&QuorumLeader>,
        cluster: &Cluster,
    ) {
        let standing = leader.filter(|l| self.group & (1 << l.node.min(63)) != 0);
        if self.straying.len() < cluster.nodes.len() {
            self.straying.resize(cluster.nodes.len(), None);
        }
        let config = standing.and_then(|l| cluster.nodes[l.node].config.as_deref());
        for i in 0..cluster.nodes.len() {
            let member = self.group & (1 << i.min(63)) != 0 && cluster.nodes[i].listed_in(config);
            let read = cluster.nodes[i].read.filter(|_| member);
            let now = standing
                .filter(|l| l.node != i)
                .map(|l| (l.sid, l.epoch))
                .filter(|&l| read.is_some_and(|r| Stray::apart(&r, l)));
            let open = self.straying[i].as_ref().map(|s| s.leader);
            if open.is_some() && open != now {
                let mut s = self.straying[i].take().expect("checked");
                s.end_ns = time;
                s.end_pos = pos;
                s.ms = (time - s.start_ns) / 1_000_000;
                self.strays.push(s);
            }
            if let (Some(leader), None, Some(r)) = (now, &self.straying[i], read) {
                self.straying[i] = Some(Stray {
                    node: cluster.nodes[i].name.clone(),
                    leader,
                    shown: shown(&r),
                    start_ns: time,
                    end_ns: time,
                    ms: 0,
                    reads: 0,
                    open_at_end: false,
                    start_pos: pos,
                    end_pos: pos,
                });
            }
        }
    }

    /// The history ends at `end`: the open stall and strays end then, marked open at the end.
    pub(super) fn finish(&mut self, end: u64, cluster: &Cluster) {
        if let Some((mut s, reads)) = self.stall.take() {
            s.end_ns = end;
            s.ms = (end - s.start_ns) / 1_000_000;
            s.fewest_reads = fewest(cluster, self.group, &reads);
            s.open_at_end = true;
            self.stalls.push(s);
        }
        for mut s in self.straying.drain(..).flatten() {
            s.end_ns = end;
            s.ms = (end - s.start_ns) / 1_000_000;
            s.open_at_end = true;
            self.strays.push(s);
        }
    }
}

/// The fewest successful reads of any member of `group` during a stall.
fn fewest(cluster: &Cluster, group: u64, reads: &[u32]) -> u32 {
    cluster
        .members(group)
        .map(|i| reads.get(i).copied().unwrap_or(0))
        .min()
        .unwrap_or(0)
}

/// Whether the nodes of `group` are mutually connected, every other node is cut from all of
/// them or from none, and no node that hears all of them also hears a running node cut from
/// all of them: such a node relays the other side's votes into the group's election (a bridge
/// that a member is not part of: the group elects a leader it cannot reach, again and again).
fn clean(cluster: &Cluster, group: u64) -> bool {
    let inside: Vec<usize> = cluster.members(group).collect();
    let mutual = inside
        .iter()
        .all(|&a| inside.iter().all(|&b| a == b || !cluster.cut(a, b)));
    if !mutual {
        return false;
    }
    let (mut heard, mut cut_off) = (Vec::new(), Vec::new());
    for o in (0..cluster.nodes.len()).filter(|o| group & (1 << o) == 0) {
        match inside.iter().filter(|&&a| cluster.cut(a, o)).count() {
            0 => heard.push(o),
            n if n == inside.len() => cut_off.push(o),
            _ => return false,
        }
    }
    let running = |i: usize| !cluster.nodes[i].down;
    !heard
        .iter()
        .any(|&o| running(o) && cut_off.iter().any(|&p| running(p) && !cluster.cut(o, p)))
}
