//! Situations: what a fault met when it landed. A fault's start, once done (`info`), is
//! classified by the state the one [`View`] held just before it: which kind of fault, whom it
//! hit (the leader, a follower in sync, a quorum of followers, ...), in which phase of the
//! protocol (electing, sync, broadcast with writes in flight, right after an ACK, ...), and
//! what else was in force (the leader cut off, another fault). A run's coverage is the set of
//! situations its faults met: faults that landed, not faults planned. The checkers' pass
//! computes it (results.json's `coverage`), the report and a sweep's summary show it.
//!
//! Feed [`Situations::before`] every event just before the view takes it, and
//! [`Situations::write`] every client write event (the view does not see writes);
//! [`Situations::line`] does both for a decoded line. The run's recorder feeds one live (the
//! steering nemesis asks it, `nemesis::steer`); the checkers' view pass feeds another.

use super::line::{Body, Line};
use super::view::{Fed, NodeRead, View};
use super::{Effect, EventType, FaultKind, FaultStep};
use crate::api::{ServerState, ZabPhase};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::Path;

/// A node that answered its first read after a (re)start less than this long before a fault
/// is "just restarted": it is still catching up (an election round, a sync).
pub const RESTART_RECENT_NS: u64 = 3_000_000_000;
/// A fault within this long of a write's acknowledgement lands "right after an ACK": the
/// followers that acked it may not have made it durable yet (the ACK-before-fsync window).
pub const AFTER_ACK_NS: u64 = 300_000_000;
/// A fault within this long of a node entering broadcast lands "right after a NEWLEADER":
/// the new epoch's first commits are still being sent.
pub const AFTER_NEWLEADER_NS: u64 = 1_000_000_000;

/// Whom a fault hit, judged against the leader of the moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Who {
    /// The leader was among the nodes hit.
    Leader,
    /// One follower, in broadcast with the leader.
    Follower,
    /// A quorum or more of the nodes, the leader not among them (a quorum of followers).
    Quorum,
    /// Two or more nodes, fewer than a quorum, the leader not among them.
    Minority,
    /// One node that was behind: syncing, or LOOKING while a leader stood.
    Lagging,
    /// One node that had (re)started moments before.
    Restarted,
    /// One node while no node led (an election in progress).
    Voter,
    /// Only nodes that were already down.
    Down,
}

impl Who {
    pub const ALL: [Who; 8] = [
        Who::Leader,
        Who::Follower,
        Who::Quorum,
        Who::Minority,
        Who::Lagging,
        Who::Restarted,
        Who::Voter,
        Who::Down,
    ];

    pub fn word(self) -> &'static str {
        match self {
            Who::Leader => "leader",
            Who::Follower => "follower",
            Who::Quorum => "quorum",
            Who::Minority => "minority",
            Who::Lagging => "lagging",
            Who::Restarted => "restarted",
            Who::Voter => "voter",
            Who::Down => "down",
        }
    }
}

/// The protocol's phase when the fault landed, from the leader's latest read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Phase {
    /// No node led: an election.
    Electing,
    /// The leader was gathering its followers' epochs.
    Discovery,
    /// The leader was syncing its followers.
    Sync,
    /// Broadcast, no client write in flight.
    Broadcast,
    /// Broadcast with a client write invoked and not yet answered.
    WritesInFlight,
    /// Broadcast, a write acknowledged moments before ([`AFTER_ACK_NS`]).
    AfterAck,
    /// A node had entered broadcast moments before ([`AFTER_NEWLEADER_NS`]).
    AfterNewleader,
}

impl Phase {
    pub const ALL: [Phase; 7] = [
        Phase::Electing,
        Phase::Discovery,
        Phase::Sync,
        Phase::Broadcast,
        Phase::WritesInFlight,
        Phase::AfterAck,
        Phase::AfterNewleader,
    ];

    pub fn word(self) -> &'static str {
        match self {
            Phase::Electing => "electing",
            Phase::Discovery => "discovery",
            Phase::Sync => "sync",
            Phase::Broadcast => "broadcast",
            Phase::WritesInFlight => "writes in flight",
            Phase::AfterAck => "after an ACK",
            Phase::AfterNewleader => "after NEWLEADER",
        }
    }

    /// The name a schedule file uses (`phase = "after-ack"`), as results.json spells it.
    pub fn key(self) -> &'static str {
        match self {
            Phase::Electing => "electing",
            Phase::Discovery => "discovery",
            Phase::Sync => "sync",
            Phase::Broadcast => "broadcast",
            Phase::WritesInFlight => "writes-in-flight",
            Phase::AfterAck => "after-ack",
            Phase::AfterNewleader => "after-newleader",
        }
    }
}

/// What else was in force when the fault landed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "with", content = "kind")]
pub enum With {
    /// A partition in force cut the leader off from a quorum.
    LeaderCut,
    /// The last leader was down (killed, paused, powered off) and nobody led since.
    LeaderDown,
    /// Another fault of this kind was in force.
    Fault(FaultKind),
}

impl With {
    pub fn word(self) -> String {
        match self {
            With::LeaderCut => "leader cut off".into(),
            With::LeaderDown => "leader down".into(),
            With::Fault(k) => k.name().into(),
        }
    }
}

/// One situation a fault can meet.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Situation {
    pub kind: FaultKind,
    pub who: Who,
    pub phase: Phase,
    /// Sorted; empty: the fault was alone.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub with: Vec<With>,
}

impl Situation {
    /// "power-loss · quorum · after an ACK · with leader cut off".
    pub fn label(&self) -> String {
        label(self.kind, self.who.word(), self.phase.word(), &self.with)
    }
}

/// How a situation (or a pattern of them, `nemesis::goal`) reads: "kind · whom · phase · with
/// what else".
pub fn label(kind: FaultKind, who: &str, phase: &str, with: &[With]) -> String {
    let mut s = format!("{} · {who} · {phase}", kind.name());
    if !with.is_empty() {
        let with: Vec<String> = with.iter().map(|w| w.word()).collect();
        s.push_str(&format!(" · with {}", with.join(", ")));
    }
    s
}

/// One situation a run met: how often, and the first fault that met it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Met {
    #[serde(flatten)]
    pub situation: Situation,
    pub count: u64,
    /// The first fault's start: its `index` in the history and its time.
    pub first_index: u64,
    pub first_ns: u64,
}

/// The situations a run's faults met (results.json's `coverage`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Coverage {
    /// Fault starts that landed (done), the final phase's excluded.
    pub faults: u64,
    /// Each situation met, in situation order.
    pub met: Vec<Met>,
}

impl Coverage {
    /// Whom, phases and kinds that some fault met (one dimension each).
    pub fn whos(&self) -> BTreeSet<Who> {
        self.met.iter().map(|m| m.situation.who).collect()
    }

    pub fn phases(&self) -> BTreeSet<Phase> {
        self.met.iter().map(|m| m.situation.phase).collect()
    }

    pub fn kinds(&self) -> BTreeSet<FaultKind> {
        self.met.iter().map(|m| m.situation.kind).collect()
    }

    /// Why this coverage is thin, if it is: no fault landed, none hit the leader, or the
    /// faults met fewer than [`THIN_BELOW`] situations. A valid verdict over it says little.
    pub fn thin(&self) -> Option<String> {
        if self.faults == 0 {
            return Some("no fault landed".into());
        }
        if self.met.len() < THIN_BELOW {
            return Some(format!(
                "its {} fault(s) met only {} situation(s)",
                self.faults,
                self.met.len()
            ));
        }
        if !self.whos().contains(&Who::Leader) {
            return Some("no fault hit the leader".into());
        }
        None
    }

    /// `summary`, then why it is thin when it is: the console's line.
    pub fn line(&self) -> String {
        match self.thin() {
            Some(why) => format!("{}; thin: {why}", self.summary()),
            None => self.summary(),
        }
    }

    /// One line: "14 fault(s) met 9 situation(s) (whom: leader, follower; phase: ...)".
    pub fn summary(&self) -> String {
        let whos: Vec<&str> = self.whos().into_iter().map(Who::word).collect();
        let phases: Vec<&str> = self.phases().into_iter().map(Phase::word).collect();
        format!(
            "{} fault(s) met {} situation(s) (whom: {}; phase: {})",
            self.faults,
            self.met.len(),
            listed(&whos, "none"),
            listed(&phases, "none")
        )
    }
}

/// The values of whom and phase that none of `met` has: "whom quorum, down; phase sync".
pub fn never_met<'a>(met: impl IntoIterator<Item = &'a Situation>) -> String {
    let (mut whos, mut phases) = (BTreeSet::new(), BTreeSet::new());
    for s in met {
        whos.insert(s.who);
        phases.insert(s.phase);
    }
    let whom: Vec<&str> = (Who::ALL.iter())
        .filter(|w| !whos.contains(w))
        .map(|w| w.word())
        .collect();
    let phase: Vec<&str> = (Phase::ALL.iter())
        .filter(|p| !phases.contains(p))
        .map(|p| p.word())
        .collect();
    format!("whom {}; phase {}", listed(&whom, "—"), listed(&phase, "—"))
}

/// `words` joined by commas, or `empty`.
fn listed(words: &[&str], empty: &str) -> String {
    if words.is_empty() {
        empty.into()
    } else {
        words.join(", ")
    }
}

/// Coverage below this many situations is thin.
pub const THIN_BELOW: usize = 3;

/// The fold: fed every event just before the view takes it.
#[derive(Debug, Clone, Default)]
pub struct Situations {
    met: BTreeMap<Situation, Met>,
    faults: u64,
    /// Every fault start's situation, in history order (which fault met what: a goal is met
    /// by its own entry's faults, `nemesis::steer`).
    log: Vec<Situation>,
    /// Per view node index: when it last (re)started (a kill's undo), if it did.
    started_at: Vec<Option<u64>>,
    /// When a node last entered broadcast (from discovery or sync, or first since it started).
    entered_broadcast: Option<u64>,
    /// Per view node index: its latest successful read since it (re)started. Unlike the
    /// view, a failed or timed-out read keeps it: a read that did not come back in time
    /// (common mid-election) proves nothing of the node, and the nemesis aimed by the same
    /// latest answers.
    reads: Vec<Option<NodeRead>>,
    /// Processes with a client write invoked and not yet answered.
    in_flight: HashSet<String>,
    last_ack: Option<u64>,
    /// The last quorum-backed leader seen at a fault's start (view index).
    last_leader: Option<usize>,
}

impl Situations {
    pub fn new() -> Self {
        Self::default()
    }

    /// `e`, before `view` takes it.
    pub fn before(&mut self, view: &View, e: &Fed<'_>) {
        match *e {
            Fed::Status { node, read } => {
                self.grow(node);
                let was = self.reads[node].map(|r| r.phase);
                if read.phase == ZabPhase::Broadcast && was != Some(ZabPhase::Broadcast) {
                    self.entered_broadcast = Some(read.time);
                }
                self.reads[node] = Some(read);
            }
            Fed::Fault {
                node,
                index,
                time,
                kind: EventType::Info,
                f,
                value,
                ..
            } if !value.r#final => match value.step(f) {
                Some(FaultStep::Starts(kind)) => {
                    let targets = if kind.cuts_links() {
                        cut_off(view, value)
                    } else {
                        named(view, value, node)
                    };
                    let s = self.classify(view, kind, &targets, time);
                    self.count(s, index, time);
                }
                Some(FaultStep::Undoes(kind))
                    if kind.facts().effect == (Effect::Stops { forgets: true }) =>
                {
                    for ix in named(view, value, node) {
                        self.grow(ix);
                        self.started_at[ix] = Some(time);
                        self.reads[ix] = None;
                    }
                }
                _ => {}
            },
            _ => {}
        }
    }

    /// A decoded history line `l`, as `e` (what the view makes of it), before the view takes
    /// it: a client write goes to [`Self::write`], anything else to [`Self::before`].
    pub fn line(&mut self, view: &View, e: &Fed<'_>, l: &Line<'_>) {
        match l.body {
            Body::Write(_) => self.write(&l.process, l.kind, l.time),
            _ => self.before(view, e),
        }
    }

    /// The phase a fault landing at `now` would meet (the steering nemesis waits for its
    /// goal's phase by it).
    pub fn phase_now(&self, view: &View, now: u64) -> Phase {
        let leader = self.leader(view, view.quorum_leader(0).map(|l| l.node));
        self.phase(view, leader, now)
    }

    /// The situations met so far.
    pub fn met(&self) -> BTreeSet<Situation> {
        self.met.keys().cloned().collect()
    }

    /// How many fault starts were classified so far.
    pub fn classified(&self) -> usize {
        self.log.len()
    }

    /// The situations of the fault starts classified after the first `from`.
    pub fn since(&self, from: usize) -> &[Situation] {
        self.log.get(from..).unwrap_or_default()
    }

    /// A client write event of `process` (invoke, then ok, fail or info).
    pub fn write(&mut self, process: &str, kind: EventType, time: u64) {
        match kind {
            EventType::Invoke => {
                self.in_flight.insert(process.to_string());
            }
            _ => {
                self.in_flight.remove(process);
                if kind == EventType::Ok {
                    self.last_ack = Some(time);
                }
            }
        }
    }

    pub fn finish(self) -> Coverage {
        Coverage {
            faults: self.faults,
            met: self.met.into_values().collect(),
        }
    }

    fn grow(&mut self, ix: usize) {
        if self.reads.len() <= ix {
            self.reads.resize(ix + 1, None);
            self.started_at.resize(ix + 1, None);
        }
    }

    /// Node `ix`'s latest successful read, unless it is down.
    fn read(&self, view: &View, ix: usize) -> Option<NodeRead> {
        let down = view.nodes().get(ix).is_none_or(|n| n.down);
        (!down)
            .then(|| self.reads.get(ix).copied().flatten())
            .flatten()
    }

    fn count(&mut self, situation: Situation, index: u64, time: u64) {
        self.faults += 1;
        self.log.push(situation.clone());
        self.met
            .entry(situation.clone())
            .and_modify(|m| m.count += 1)
            .or_insert(Met {
                situation,
                count: 1,
                first_index: index,
                first_ns: time,
            });
    }

    /// The situation a fault of `kind` on `targets` (view indices) meets now.
    fn classify(&mut self, view: &View, kind: FaultKind, targets: &[usize], now: u64) -> Situation {
        let backed = view.quorum_leader(0).map(|l| l.node);
        let leader = self.leader(view, backed);
        let mut with: BTreeSet<With> = view.active_faults().map(|f| With::Fault(f.kind)).collect();
        match leader {
            Some(l) => {
                let nodes = view.nodes().len();
                let voting = |b: &usize| !view.is_observer(*b);
                let reach = (0..nodes)
                    .filter(voting)
                    .filter(|&b| b == l || !view.cut(l, b));
                let reach = reach.count();
                if reach < view.quorum() {
                    with.insert(With::LeaderCut);
                }
            }
            None if self.last_leader.is_some_and(|l| view.nodes()[l].down) => {
                with.insert(With::LeaderDown);
            }
            None => {}
        }
        if backed.is_some() {
            self.last_leader = backed;
        }
        Situation {
            kind,
            who: self.whom(view, leader, targets, now),
            phase: self.phase(view, leader, now),
            with: with.into_iter().collect(),
        }
    }

    /// The leader of the moment: the quorum-backed one (`backed`), else the last one while
    /// it still claims to lead (cut off, it keeps LEADING until its syncLimit runs out), else
    /// the node LEADING the highest epoch it is still discovering or syncing.
    fn leader(&self, view: &View, backed: Option<usize>) -> Option<usize> {
        let claiming =
            (self.last_leader).filter(|&l| self.read(view, l).and_then(|r| r.leads()).is_some());
        backed.or(claiming).or_else(|| {
            (0..view.nodes().len())
                .filter_map(|i| {
                    let r = self.read(view, i)?;
                    (r.state == ServerState::Leading).then_some((r.peer_epoch, i))
                })
                .max()
                .map(|(_, i)| i)
        })
    }

    /// The phase: the leader's Zab phase, broadcast told apart by what just happened.
    fn phase(&self, view: &View, leader: Option<usize>, now: u64) -> Phase {
        let within = |t: Option<u64>, ns: u64| t.is_some_and(|t| now.saturating_sub(t) <= ns);
        match leader.and_then(|l| self.read(view, l)).map(|r| r.phase) {
            None => Phase::Electing,
            Some(ZabPhase::Discovery) => Phase::Discovery,
            Some(ZabPhase::Sync) => Phase::Sync,
            _ if within(self.entered_broadcast, AFTER_NEWLEADER_NS) => Phase::AfterNewleader,
            _ if within(self.last_ack, AFTER_ACK_NS) => Phase::AfterAck,
            _ if !self.in_flight.is_empty() => Phase::WritesInFlight,
            _ => Phase::Broadcast,
        }
    }

    /// Whom a fault on `targets` hit, against `leader`.
    fn whom(&self, view: &View, leader: Option<usize>, targets: &[usize], now: u64) -> Who {
        let nodes = view.nodes();
        let up: Vec<usize> = targets
            .iter()
            .copied()
            .filter(|&t| !nodes[t].down)
            .collect();
        if leader.is_some_and(|l| targets.contains(&l)) {
            return Who::Leader;
        }
        match up[..] {
            [] => Who::Down,
            _ if up.iter().filter(|&&t| !view.is_observer(t)).count() >= view.quorum() => {
                Who::Quorum
            }
            [_, _, ..] => Who::Minority,
            [t] => {
                let restarted = (self.started_at.get(t).copied().flatten())
                    .is_some_and(|s| now.saturating_sub(s) <= RESTART_RECENT_NS);
                let leader_sid = leader.and_then(|l| nodes[l].sid);
                let follows = (self.read(view, t).and_then(|r| r.follows()))
                    .is_some_and(|(sid, _)| Some(sid) == leader_sid);
                match () {
                    _ if restarted => Who::Restarted,
                    _ if follows => Who::Follower,
                    _ if leader.is_some() => Who::Lagging,
                    _ => Who::Voter,
                }
            }
        }
    }
}

/// The nodes a fault's value names (view indices), else the event's own node.
fn named(view: &View, value: &super::FaultValue, node: Option<usize>) -> Vec<usize> {
    let mut ix: Vec<usize> = value
        .nodes
        .iter()
        .filter_map(|n| view.index_of(n))
        .collect();
    if ix.is_empty() {
        ix.extend(node);
    }
    ix
}

/// The nodes a partition cuts off: those that can no longer reach a quorum (counting
/// themselves) over links neither side drops; when every node still can (a ring of
/// majorities), those cut from the leader, or every node named.
fn cut_off(view: &View, value: &super::FaultValue) -> Vec<usize> {
    let nodes = view.nodes();
    let dropped = |a: usize, b: usize| {
        let drops = |x: usize, y: usize| {
            (value.drops.get(&nodes[x].name))
                .is_some_and(|from| from.iter().any(|f| *f == nodes[y].name))
        };
        drops(a, b) || drops(b, a)
    };
    let n = nodes.len();
    // Cut off: hearing fewer than a quorum of voters (itself included when it votes).
    let hears = |a: usize| {
        let voters = (0..n).filter(|&b| !view.is_observer(b));
        voters.filter(|&b| b == a || !dropped(a, b)).count()
    };
    let isolated: Vec<usize> = (0..n).filter(|&a| hears(a) < view.quorum()).collect();
    if !isolated.is_empty() {
        return isolated;
    }
    if let Some(l) = view.quorum_leader(0).map(|l| l.node) {
        let from_leader: Vec<usize> = (0..n).filter(|&b| b != l && dropped(l, b)).collect();
        if !from_leader.is_empty() {
            return from_leader;
        }
    }
    named(view, value, None)
}

/// Writes a `--met-before` file: the situations met before a run, as a JSON list (a sweep
/// hands each run one, `sweep::carried::hand_over`).
pub fn write_met_before(path: &Path, met: &BTreeSet<Situation>) -> anyhow::Result<()> {
    use anyhow::Context;
    let list: Vec<&Situation> = met.iter().collect();
    std::fs::write(path, serde_json::to_string(&list)?)
        .with_context(|| format!("cannot write {}", path.display()))
}

/// Reads a `--met-before` file (`write_met_before`'s list of situations).
pub fn read_met_before(path: &Path) -> Result<BTreeSet<Situation>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("--met-before {}: {e}", path.display()))?;
    let list: Vec<Situation> = serde_json::from_str(&text).map_err(|e| {
        format!(
            "--met-before {}: not a list of situations ({e}); sweeps write it as steer/ID.json",
            path.display()
        )
    })?;
    Ok(list.into_iter().collect())
}

#[cfg(test)]
mod tests {
    use crate::history::test_feed::Feed;

    /// n1 leads epoch 1, n2 and n3 follow it in broadcast, from 10 ms on (entering broadcast
    /// at 10 ms: faults from 1100 ms on are past "after NEWLEADER").
    fn settled() -> Feed {
        let mut f = Feed::new();
        f.read(10, 1, "L", 1)
            .read(10, 2, "F1", 1)
            .read(10, 3, "F1", 1);
        f
    }

    fn met(f: Feed) -> Vec<String> {
        f.situations
            .finish()
            .met
            .iter()
            .map(|m| m.situation.label())
            .collect()
    }

    #[test]
    fn a_single_kill_of_a_follower_meets_one_situation() {
        let mut f = settled();
        f.read(2000, 1, "L", 1)
            .nemesis(2100, "kill", r#"{"nodes":["n3"]}"#)
            .nemesis(4000, "start", r#"{"nodes":["n3"]}"#);
        let c = f.situations.clone().finish();
        assert_eq!(c.faults, 1);
        assert_eq!(met(f), ["kill · follower · broadcast"]);
        assert_eq!(c.met[0].first_ns, 2100 * 1_000_000);
    }

    #[test]
    fn whom_a_fault_hits_is_judged_against_the_leader_of_the_moment() {
        let mut f = settled();
        f.nemesis(2000, "pause", r#"{"nodes":["n1"]}"#)
            .nemesis(2500, "resume", r#"{"nodes":["n1"]}"#)
            .read(2600, 1, "L", 1)
            // Two of three nodes are a quorum: the followers both.
            .nemesis(3000, "kill", r#"{"nodes":["n2","n3"]}"#)
            .nemesis(3500, "start", r#"{"nodes":["n2","n3"]}"#)
            .read(3600, 2, "S1", 1)
            .read(3600, 3, "F1", 1);
        // n3 restarted 1.5 s ago; n2 is syncing.
        f.nemesis(5000, "kill", r#"{"nodes":["n3"]}"#)
            .nemesis(5100, "start", r#"{"nodes":["n3"]}"#)
            .nemesis(9000, "pause", r#"{"nodes":["n2"]}"#);
        assert_eq!(
            met(f),
            [
                "kill · quorum · broadcast",
                "kill · restarted · broadcast",
                "pause · leader · broadcast",
                "pause · lagging · broadcast",
            ]
        );
    }

    #[test]
    fn the_phase_comes_from_the_leader_and_the_writes_in_flight() {
        let mut f = Feed::new();
        f.read(10, 1, "?", 0)
            .read(10, 2, "?", 0)
            .nemesis(20, "kill", r#"{"nodes":["n3"]}"#)
            .nemesis(25, "start", r#"{"nodes":["n3"]}"#)
            .read(30, 1, "L-sync", 1)
            .read(30, 2, "S1", 1)
            .nemesis(40, "pause", r#"{"nodes":["n2"]}"#)
            .nemesis(50, "resume", r#"{"nodes":["n2"]}"#)
            .read(60, 1, "L", 1)
            .read(60, 2, "F1", 1)
            // n2 entered broadcast at 60 ms: within a second is right after NEWLEADER.
            .nemesis(
                500,
                "clock",
                r#"{"nodes":["n2"],"mode":"bump","delta_ms":100}"#,
            )
            .nemesis(
                600,
                "clock",
                r#"{"nodes":["n2"],"mode":"reset","offset_ms":0}"#,
            )
            .write(2000, 1, "invoke")
            .nemesis(2010, "pause", r#"{"nodes":["n2"]}"#)
            .nemesis(2020, "resume", r#"{"nodes":["n2"]}"#)
            .write(2030, 1, "ok")
            .nemesis(2100, "pause", r#"{"nodes":["n2"]}"#)
            .nemesis(2200, "resume", r#"{"nodes":["n2"]}"#);
        assert_eq!(
            met(f),
            [
                "kill · voter · electing",
                "pause · follower · writes in flight",
                "pause · follower · after an ACK",
                "pause · lagging · sync",
                "clock · follower · after NEWLEADER",
            ]
        );
    }

    /// The situation that exposes ACK-before-durable bugs: the followers that acked lose power
    /// while the leader is cut off (or down).
    #[test]
    fn power_loss_of_the_followers_that_acked_while_the_leader_is_cut_off() {
        let mut f = settled();
        f.write(2000, 1, "invoke")
            .write(2010, 1, "ok")
            .nemesis(
                2050,
                "partition",
                r#"{"nodes":["n1","n2","n3"],"drops":{"n1":["n2","n3"],"n2":["n1"],"n3":["n1"]}}"#,
            )
            .nemesis(2100, "power-loss", r#"{"nodes":["n2","n3"]}"#);
        assert_eq!(
            met(f),
            [
                "partition · leader · after an ACK",
                "power-loss · quorum · after an ACK · with leader cut off, partition",
            ]
        );

        let mut f = settled();
        f.read(2000, 1, "L", 1)
            .nemesis(2000, "kill", r#"{"nodes":["n1"]}"#)
            .nemesis(2100, "power-loss", r#"{"nodes":["n2","n3"]}"#);
        assert_eq!(
            met(f),
            [
                "kill · leader · broadcast",
                "power-loss · quorum · electing · with leader down, kill",
            ]
        );
    }

    #[test]
    fn only_faults_that_landed_count_and_the_final_heal_is_none() {
        let mut f = settled();
        let failed = r#"{"index":3,"time":2000000000,"process":"nemesis","type":"fail","f":"kill","value":{"nodes":["n2"],"error":"no such process"}}"#;
        f.line(failed.to_string()).nemesis(
            2100,
            "start",
            r#"{"nodes":["n1","n2","n3"],"final":true}"#,
        );
        let c = f.situations.finish();
        assert_eq!((c.faults, c.met.len()), (0, 0));
        assert_eq!(c.thin().as_deref(), Some("no fault landed"));
    }

    #[test]
    fn a_ring_of_majorities_cuts_the_leader_from_its_neighbours_only() {
        let mut f = Feed::of(5);
        f.read(10, 1, "L", 1);
        for n in 2..=5 {
            f.read(10, n, "F1", 1);
        }
        // Each node drops the two across the ring from it: everyone still reaches a quorum.
        let drops = r#"{"n1":["n3","n4"],"n2":["n4","n5"],"n3":["n5","n1"],"n4":["n1","n2"],"n5":["n2","n3"]}"#;
        f.nemesis(
            2000,
            "partition",
            &format!(r#"{{"nodes":["n1","n2","n3","n4","n5"],"drops":{drops}}}"#),
        );
        assert_eq!(met(f), ["partition · minority · broadcast"]);
    }
}
