//! The checkers' compact copy of a history (`Digest`): typed status reads, client writes, final
//! logs and nemesis actions in history order, plus each node's distinct decided elections,
//! built from `history::line::Line`s (the one decoder) by `DigestBuilder::line`.
//!
//! Why a copy: the checkers run side by side over the whole history, and a run's history is
//! millions of status reads. A `Digest` keeps only the fields the checkers judge (a status
//! read is ~64 bytes), and each election summary once per change instead of once per read.
//! Evidence points back to the history by position (`pos`), so the full original events can
//! be quoted in results.json.

use crate::api::{ElectionSummary, ServerState, ZabPhase};
use crate::history::line::{Body, Line};
use crate::history::read::Election as ReadElection;
use crate::history::register::RegisterValue;
use crate::history::view::{Fed, NodeRead};
use crate::history::{sid_of, EventType, FaultStep, FaultValue, F, NEMESIS};
use std::collections::HashMap;

/// Index of a node in `Digest::nodes`.
pub type NodeIx = u16;

/// One successful status read.
#[derive(Debug, Clone, Copy)]
pub struct Status {
    /// Position of the event in the history (line number, blank lines skipped).
    pub pos: u32,
    pub index: u64,
    pub time: u64,
    pub node: NodeIx,
    pub state: ServerState,
    pub phase: ZabPhase,
    pub leader: Option<u64>,
    pub peer_epoch: u64,
    pub accepted_epoch: u64,
    /// The last zxid in the node's log (leader-completeness compares a new leader's log with
    /// the writes acknowledged before its epoch).
    pub last_zxid: u64,
    /// The view judges catching up by it (as the controller's settle wait does).
    pub last_committed_zxid: u64,
}

impl Status {
    /// The epoch this server leads, when it has established it: a leader's `peer_epoch` is its
    /// old currentEpoch during discovery and the epoch it leads only from sync on.
    pub fn leads(&self) -> Option<u64> {
        crate::history::line::leads(self.state, self.phase, self.peer_epoch)
    }

    /// (leader sid, epoch) this server follows, once its epoch is its leader's: a follower
    /// takes the new currentEpoch at NEWLEADER (inside sync), so only broadcast is certain.
    pub fn follows(&self) -> Option<(u64, u64)> {
        crate::history::line::follows(self.state, self.phase, self.leader, self.peer_epoch)
    }

    /// This read as the view takes it.
    pub fn read(&self) -> NodeRead {
        NodeRead {
            time: self.time,
            pos: self.pos,
            state: self.state,
            phase: self.phase,
            leader: self.leader,
            peer_epoch: self.peer_epoch,
            accepted_epoch: self.accepted_epoch,
            last_committed_zxid: self.last_committed_zxid,
        }
    }
}

/// A client write's invocation or completion.
#[derive(Debug, Clone)]
pub struct WriteOp {
    pub pos: u32,
    pub time: u64,
    pub process: String,
    pub kind: EventType,
    /// The node the client sent the write to (the one that acknowledged it, for an `ok`).
    pub node: Option<NodeIx>,
    /// The written value, canonical JSON text (the key writes and log entries are matched on).
    pub value: Option<String>,
    pub zxid: Option<u64>,
}

/// A register operation's invocation or completion (workload `register`: `f` read, set, cas or
/// create), for the client-view checkers (linearizable, session-order).
#[derive(Debug, Clone)]
pub struct RegisterOp {
    pub pos: u32,
    pub time: u64,
    /// The client (a number as text): one session, never reused after an `info`.
    pub process: String,
    pub kind: EventType,
    pub f: F,
    /// The server that served it.
    pub node: Option<NodeIx>,
    pub value: RegisterValue,
}

/// A node's final committed log, or why it could not be read.
#[derive(Debug, Clone)]
pub struct FinalLog {
    pub pos: u32,
    pub time: u64,
    pub node: NodeIx,
    /// (zxid, canonical value), or Err(reason) when the log could not be read.
    pub entries: Result<Vec<(u64, String)>, String>,
}

/// A `node-exit` event: a node process ended unasked.
#[derive(Debug, Clone)]
pub struct NodeExit {
    pub pos: u32,
    pub time: u64,
    pub node: NodeIx,
    pub value: crate::history::NodeExitValue,
}

/// One nemesis event.
#[derive(Debug, Clone)]
pub struct NemesisOp {
    pub pos: u32,
    pub index: u64,
    pub time: u64,
    pub kind: EventType,
    pub f: F,
    /// The event's `node`, if any.
    pub node: Option<NodeIx>,
    pub value: FaultValue,
}

impl NemesisOp {
    /// A fault that starts (not the action that undoes one), as done (`info`).
    pub fn starts_fault(&self) -> bool {
        self.kind == EventType::Info
            && matches!(self.value.step(self.f), Some(FaultStep::Starts(_)))
    }
}

// The memory budget: 5 M records must fit well under 1 GiB.
const _: () = assert!(std::mem::size_of::<Rec>() <= 72);

/// One record of the digest, in history order.
#[derive(Debug, Clone)]
pub enum Rec {
    Status(Status),
    /// A status read that failed or timed out: what the observer knew of the node is stale.
    Unreachable {
        pos: u32,
        time: u64,
        node: NodeIx,
    },
    Write(Box<WriteOp>),
    Register(Box<RegisterOp>),
    FinalLog(Box<FinalLog>),
    Nemesis(Box<NemesisOp>),
    /// A node process that ended unasked (its `node-exit` event; details in `node_exits`).
    Exit {
        pos: u32,
        time: u64,
        node: NodeIx,
    },
    /// Any other event (an interruption, a client read, an unknown `f`): kept
    /// so that the digest has a record per event and its view sees every event's time.
    Other {
        pos: u32,
        time: u64,
    },
}

impl Rec {
    /// Moves a record parsed in a later part of a file into the whole: its position shifts by
    /// the lines before the part, its node indices go through `map`.
    pub fn shift(&mut self, by: u32, map: &[NodeIx]) {
        match self {
            Rec::Status(s) => {
                s.pos += by;
                s.node = map[s.node as usize];
            }
            Rec::Unreachable { pos, node, .. } | Rec::Exit { pos, node, .. } => {
                *pos += by;
                *node = map[*node as usize];
            }
            Rec::Write(w) => {
                w.pos += by;
                w.node = w.node.map(|x| map[x as usize]);
            }
            Rec::Register(r) => {
                r.pos += by;
                r.node = r.node.map(|x| map[x as usize]);
            }
            Rec::FinalLog(l) => {
                l.pos += by;
                l.node = map[l.node as usize];
            }
            Rec::Nemesis(n) => {
                n.pos += by;
                n.node = n.node.map(|x| map[x as usize]);
            }
            Rec::Other { pos, .. } => *pos += by,
        }
    }

    /// The record's position in the history and its time.
    pub fn at(&self) -> (u32, u64) {
        match self {
            Rec::Status(s) => (s.pos, s.time),
            Rec::Unreachable { pos, time, .. }
            | Rec::Exit { pos, time, .. }
            | Rec::Other { pos, time } => (*pos, *time),
            Rec::Write(w) => (w.pos, w.time),
            Rec::Register(r) => (r.pos, r.time),
            Rec::FinalLog(l) => (l.pos, l.time),
            Rec::Nemesis(n) => (n.pos, n.time),
        }
    }

    /// This record as a view takes it (`map`: digest node index -> view index): the same
    /// event `View::of_line` makes of the line it came from.
    pub fn fed(&self, map: &[usize]) -> Fed<'_> {
        match self {
            Rec::Status(s) => Fed::Status {
                node: map[s.node as usize],
                read: s.read(),
            },
            Rec::Unreachable { pos, time, node } => Fed::Unreachable {
                node: map[*node as usize],
                time: *time,
                pos: *pos,
            },
            Rec::Exit { pos, time, node } => Fed::Exit {
                node: map[*node as usize],
                time: *time,
                pos: *pos,
            },
            Rec::Nemesis(op) => Fed::Fault {
                node: op.node.map(|n| map[n as usize]),
                pos: op.pos,
                index: op.index,
                time: op.time,
                kind: op.kind,
                f: op.f,
                value: &op.value,
            },
            Rec::Write(w) => Fed::Other {
                time: w.time,
                pos: w.pos,
            },
            Rec::Register(r) => Fed::Other {
                time: r.time,
                pos: r.pos,
            },
            Rec::FinalLog(l) => Fed::Other {
                time: l.time,
                pos: l.pos,
            },
            Rec::Other { pos, time } => Fed::Other {
                time: *time,
                pos: *pos,
            },
        }
    }
}

/// A decided election a node reported, recorded when it first appeared.
#[derive(Debug, Clone)]
pub struct Election {
    pub pos: u32,
    pub node: NodeIx,
    pub summary: ElectionSummary,
}

/// A server's config as a status read first reported it (after a reconfig changed it).
#[derive(Debug, Clone)]
pub struct ConfigSeen {
    pub pos: u32,
    pub node: NodeIx,
    /// What it reported, or why that is not a config (a damaged history).
    pub config: Result<crate::api::ConfigView, String>,
}

/// The checkers' view of a whole history.
#[derive(Debug, Default)]
pub struct Digest {
    /// Node names, those of test.json first, then any other the history names.
    pub nodes: Vec<String>,
    /// The records, in history order, as the parts they were parsed in (a file parsed in
    /// parallel keeps its parts rather than copying them into one vector: half the peak memory).
    pub parts: Vec<Vec<Rec>>,
    pub elections: Vec<Election>,
    /// Each server's config, once per change (none under the static zoo.cfg).
    pub configs: Vec<ConfigSeen>,
    /// Node processes that exited without the controller causing it (`node-exit` events).
    pub node_exits: Vec<NodeExit>,
    /// Successful status reads per node.
    pub reads: Vec<u64>,
    /// Status reads that carried a `last_election` (None or not).
    pub reads_with_election: u64,
    /// Events seen, of any kind.
    pub events: u64,
    /// Register operations whose value is not a `RegisterValue`: (position, why). The
    /// client-view checkers cannot judge around them (unknown, never a silent pass).
    pub bad_register_values: Vec<(u32, String)>,
    /// Where each node was started afresh (`started_afresh`), in history order: found on
    /// first use.
    fresh_starts: std::sync::OnceLock<Vec<FreshStart>>,
}

/// A node's refusal to start on a file a `corrupt` fault damaged: it exited of itself (no
/// signal, not a Rust panic's 101; a status or, over SSH, an unknown one) before it answered a
/// status read after the damage and a restart (a read landing before the restart was sent to
/// the killed process; a later restart on the same file that exits so is a refusal again). The one definition: `crash` records it as an outcome, durability does not wait for
/// its log, recovery owes no leader to a cluster it left without a quorum.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refusal {
    /// The `node-exit` event's position.
    pub pos: u32,
    pub node: NodeIx,
    /// When the corrupt fault damaged its file.
    pub damaged_at: u64,
}

/// A node started afresh on a wiped data dir (`Digest::started_afresh`): the start's invoke.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FreshStart {
    pub node: NodeIx,
    pub pos: u32,
    pub time: u64,
}

/// The exit status of a Rust panic: a crash on bad bytes, never a refusal.
const PANIC_STATUS: i32 = 101;

impl Digest {
    /// The node exits that were refusals to start on a damaged file, in history order.
    pub fn refusals(&self) -> Vec<Refusal> {
        self.scan_refusals().0
    }

    /// The nodes whose last refusal (`refusals`) was their last word: no status read after it.
    /// They are out of the cluster for good, their logs not owed.
    pub fn refused_at_end(&self) -> Vec<NodeIx> {
        let (_, out) = self.scan_refusals();
        (0..out.len() as NodeIx)
            .filter(|&n| out[n as usize])
            .collect()
    }

    /// One pass: the refusals, and per node whether it refused since its last status read.
    fn scan_refusals(&self) -> (Vec<Refusal>, Vec<bool>) {
        let mut damaged: Vec<Option<u64>> = vec![None; self.nodes.len()];
        // Started since the damage: only a read of the restarted process says it runs on the
        // damaged files (a read sent before the kill can land after it, over SSH often).
        let mut started = vec![true; self.nodes.len()];
        let mut out = vec![false; self.nodes.len()];
        let mut exits = self.node_exits.iter();
        let mut refusals = Vec::new();
        let ix = |name: &String| self.nodes.iter().position(|n| n == name);
        for rec in self.records() {
            match rec {
                Rec::Status(s) if started[s.node as usize] => {
                    damaged[s.node as usize] = None;
                    out[s.node as usize] = false;
                }
                Rec::Nemesis(op) if op.f == F::Corrupt && op.kind == EventType::Info => {
                    for i in op.value.nodes.iter().filter_map(ix) {
                        damaged[i] = Some(op.time);
                        started[i] = false;
                    }
                }
                Rec::Nemesis(op) if op.f == F::Start && op.kind == EventType::Info => {
                    for i in op.value.nodes.iter().filter_map(ix) {
                        started[i] = true;
                    }
                }
                Rec::Exit { pos, node, .. } => {
                    let Some(e) = exits.find(|e| e.pos == *pos) else {
                        continue;
                    };
                    // Over SSH the status is not known (None): the log lines the refusal
                    // quotes are then what says why.
                    let clean = e.value.signal.is_none() && e.value.status != Some(PANIC_STATUS);
                    if let (true, Some(at)) = (clean, damaged[*node as usize]) {
                        out[*node as usize] = true;
                        refusals.push(Refusal {
                            pos: *pos,
                            node: *node,
                            damaged_at: at,
                        });
                    }
                }
                _ => {}
            }
        }
        (refusals, out)
    }

    /// The nodes a record starts afresh: a `start` on a wiped data dir (a reconfig's
    /// `replace`) begins the node again, its epochs, log and config from nothing, so the rules
    /// that a node's own state never goes back judge it from there as a new server. Its
    /// invoke is the mark: the fresh process can answer a read before the start is recorded
    /// done (over SSH by most of a second), and the killed one answers none after its kill.
    /// Empty for any other record.
    pub fn started_afresh(&self, rec: &Rec) -> Vec<NodeIx> {
        match rec {
            Rec::Nemesis(op)
                if op.f == F::Start && op.kind == EventType::Invoke && op.value.wiped =>
            {
                let ix = |name: &String| self.nodes.iter().position(|n| n == name);
                (op.value.nodes.iter().filter_map(ix))
                    .map(|i| i as NodeIx)
                    .collect()
            }
            _ => Vec::new(),
        }
    }

    /// Where each node was started afresh, in history order.
    pub fn fresh_starts(&self) -> &[FreshStart] {
        self.fresh_starts.get_or_init(|| {
            let at = |r: &Rec| {
                let (pos, time) = r.at();
                let start = move |node| FreshStart { node, pos, time };
                self.started_afresh(r).into_iter().map(start)
            };
            self.records().flat_map(at).collect()
        })
    }

    /// When `node` was next started afresh after `time`, if it was.
    pub fn next_fresh_start(&self, node: NodeIx, time: u64) -> Option<u64> {
        let after = |f: &&FreshStart| f.node == node && f.time > time;
        self.fresh_starts().iter().find(after).map(|f| f.time)
    }

    /// Every record, in history order.
    pub fn records(&self) -> impl Iterator<Item = &Rec> + '_ {
        self.parts.iter().flatten()
    }

    pub fn statuses(&self) -> impl Iterator<Item = &Status> + '_ {
        self.records().filter_map(|r| match r {
            Rec::Status(s) => Some(s),
            _ => None,
        })
    }

    /// The register operations, in history order.
    pub fn register_ops(&self) -> impl Iterator<Item = &RegisterOp> + '_ {
        self.records().filter_map(|r| match r {
            Rec::Register(op) => Some(op.as_ref()),
            _ => None,
        })
    }

    /// The config after `c`: the lowest version above its that any server reported (a
    /// reconfig proposes one at a time).
    pub fn next_config(&self, c: &crate::api::ConfigView) -> Option<&crate::api::ConfigView> {
        let reported = self.configs.iter().filter_map(|s| s.config.as_ref().ok());
        reported
            .filter(|n| n.version > c.version)
            .min_by_key(|n| n.version)
    }

    /// The configs `node` reported around its read at `pos`: the one in force at its previous
    /// read and the one at that read (None: the static config, before it reported any; an
    /// unreadable one is skipped). A decision a read first shows was made between the two.
    pub fn configs_around(&self, node: NodeIx, pos: u32) -> [Option<&crate::api::ConfigView>; 2] {
        let (mut before, mut at) = (None, None);
        // A node started afresh runs the first config again: what it reported before is gone.
        let fresh = self.fresh_starts().iter();
        let since = (fresh.rev())
            .find(|f| f.node == node && f.pos <= pos)
            .map(|f| f.pos);
        for c in self
            .configs
            .iter()
            .filter(|c| c.node == node && c.pos <= pos && since.is_none_or(|s| c.pos > s))
        {
            let Ok(view) = &c.config else { continue };
            if c.pos < pos {
                before = Some(view);
            }
            at = Some(view);
        }
        [before, at]
    }

    pub fn sid(&self, node: NodeIx) -> Option<u64> {
        sid_of(&self.nodes[node as usize])
    }

    pub fn node_of_sid(&self, sid: u64) -> Option<NodeIx> {
        (0..self.nodes.len())
            .find_map(|i| (self.sid(i as NodeIx) == Some(sid)).then_some(i as NodeIx))
    }

    pub fn name(&self, node: NodeIx) -> &str {
        &self.nodes[node as usize]
    }
}

/// The fields of a status read the checkers use.
#[derive(Debug, Clone, Copy)]
pub struct StatusCore {
    pub state: ServerState,
    pub phase: ZabPhase,
    pub leader: Option<u64>,
    pub peer_epoch: u64,
    pub accepted_epoch: u64,
    pub last_zxid: u64,
    pub last_committed_zxid: u64,
}

/// Builds a `Digest` one event at a time (from `Event`s or from the fast JSONL parser).
pub struct DigestBuilder {
    digest: Digest,
    node_ix: HashMap<String, NodeIx>,
    last_election: Vec<Option<ElectionSummary>>,
    /// Each node's last raw `config`, to record it once per change.
    last_config: Vec<Option<String>>,
}

impl DigestBuilder {
    pub fn new(nodes: &[String]) -> Self {
        let mut b = DigestBuilder {
            digest: Digest::default(),
            node_ix: HashMap::new(),
            last_election: Vec::new(),
            last_config: Vec::new(),
        };
        for n in nodes {
            b.node(n);
        }
        b
    }

    pub fn node(&mut self, name: &str) -> NodeIx {
        if let Some(&ix) = self.node_ix.get(name) {
            return ix;
        }
        let ix = self.digest.nodes.len() as NodeIx;
        self.digest.nodes.push(name.to_string());
        self.digest.reads.push(0);
        self.last_election.push(None);
        self.last_config.push(None);
        self.node_ix.insert(name.to_string(), ix);
        ix
    }

    fn push(&mut self, r: Rec) {
        if self.digest.parts.is_empty() {
            self.digest.parts.push(Vec::new());
        }
        self.digest.parts[0].push(r);
    }

    /// Reserves room for about `n` records: a vector that doubles as it grows copies itself
    /// and, at its peak, holds both copies.
    pub fn reserve(&mut self, n: usize) {
        if self.digest.parts.is_empty() {
            self.digest.parts.push(Vec::new());
        }
        self.digest.parts[0].reserve(n);
    }

    /// A known node by its name's bytes; a linear look among a handful of names beats hashing.
    pub fn find_node(&self, name: &[u8]) -> Option<NodeIx> {
        let ix = self
            .digest
            .nodes
            .iter()
            .position(|n| n.as_bytes() == name)?;
        Some(ix as NodeIx)
    }

    pub fn node_bytes(&mut self, name: &[u8]) -> NodeIx {
        match self.find_node(name) {
            Some(ix) => ix,
            None => self.node(&String::from_utf8_lossy(name)),
        }
    }

    pub fn status(&mut self, pos: u32, index: u64, time: u64, node: NodeIx, core: StatusCore) {
        self.digest.events += 1;
        self.digest.reads[node as usize] += 1;
        self.push(Rec::Status(Status {
            pos,
            index,
            time,
            node,
            state: core.state,
            phase: core.phase,
            leader: core.leader,
            peer_epoch: core.peer_epoch,
            accepted_epoch: core.accepted_epoch,
            last_zxid: core.last_zxid,
            last_committed_zxid: core.last_committed_zxid,
        }));
    }

    /// A status read that failed or timed out (of `node`, when the event names one).
    pub fn unreachable(&mut self, pos: u32, time: u64, node: Option<NodeIx>) {
        self.digest.events += 1;
        self.push(match node {
            Some(node) => Rec::Unreachable { pos, time, node },
            None => Rec::Other { pos, time },
        });
    }

    /// A client write's invocation or completion.
    pub fn write(&mut self, w: WriteOp) {
        self.digest.events += 1;
        self.push(Rec::Write(Box::new(w)));
    }

    /// A node's final log: (zxid, canonical value) entries, or why it could not be read.
    pub fn final_log(
        &mut self,
        pos: u32,
        time: u64,
        node: NodeIx,
        entries: Result<Vec<(u64, String)>, String>,
    ) {
        self.digest.events += 1;
        self.push(Rec::FinalLog(Box::new(FinalLog {
            pos,
            time,
            node,
            entries,
        })));
    }

    /// Any other event: it only moves time on.
    pub fn other(&mut self, pos: u32, time: u64) {
        self.digest.events += 1;
        self.push(Rec::Other { pos, time });
    }

    /// Records the `last_election` a status read carried, once per change.
    pub fn election(&mut self, pos: u32, node: NodeIx, summary: Option<ElectionSummary>) {
        let Some(summary) = summary else { return };
        self.digest.reads_with_election += 1;
        let last = &mut self.last_election[node as usize];
        if last.as_ref() == Some(&summary) {
            return;
        }
        *last = Some(summary.clone());
        self.digest.elections.push(Election { pos, node, summary });
    }

    /// Records the `config` (raw JSON) a status read carried, once per change.
    pub fn config(&mut self, pos: u32, node: NodeIx, raw: &str) {
        let last = &mut self.last_config[node as usize];
        if last.as_deref() == Some(raw) {
            return;
        }
        *last = Some(raw.to_string());
        let config = crate::history::line::config(raw);
        self.digest.configs.push(ConfigSeen { pos, node, config });
    }

    /// A status read's `last_election` was present (used by the fast parser, which skips
    /// unchanged summaries without parsing them).
    pub fn note_election_present(&mut self) {
        self.digest.reads_with_election += 1;
    }

    /// Adds one decoded line at position `pos` (`election`: what the reader made of its
    /// `last_election`).
    pub fn line(&mut self, pos: u32, l: &Line<'_>, election: ReadElection) {
        // Every node an event names is a node of the digest.
        let node = l.node.as_deref().map(|n| self.node_bytes(n.as_bytes()));
        match (&l.body, node) {
            (Body::Status(s), Some(node)) => {
                let core = StatusCore {
                    state: s.state,
                    phase: s.phase,
                    leader: s.leader,
                    peer_epoch: s.peer_epoch,
                    accepted_epoch: s.accepted_epoch,
                    last_zxid: s.last_zxid,
                    last_committed_zxid: s.last_committed_zxid,
                };
                self.status(pos, l.index, l.time, node, core);
                if let Some(raw) = s.config {
                    self.config(pos, node, raw);
                }
                match election {
                    ReadElection::None => {}
                    ReadElection::Same => self.note_election_present(),
                    ReadElection::New(summary) => self.election(pos, node, Some(summary)),
                }
            }
            (Body::Unreachable, node) => self.unreachable(pos, l.time, node),
            (Body::Write(w), node) => self.write(WriteOp {
                pos,
                time: l.time,
                process: l.process.to_string(),
                kind: l.kind,
                node,
                value: w.value.as_deref().map(str::to_string),
                zxid: w.zxid,
            }),
            (Body::FinalLog(log), Some(node)) => {
                self.final_log(pos, l.time, node, Ok(log.entries.clone()))
            }
            (Body::FinalLogError(why), Some(node)) => {
                self.final_log(pos, l.time, node, Err(why.clone()))
            }
            (Body::Fault(v), node) if l.process == NEMESIS => {
                self.digest.events += 1;
                self.push(Rec::Nemesis(Box::new(NemesisOp {
                    pos,
                    index: l.index,
                    time: l.time,
                    kind: l.kind,
                    f: l.f,
                    node,
                    value: v.clone(),
                })));
            }
            (Body::NodeExit(v), Some(node)) => {
                self.digest.node_exits.push(NodeExit {
                    pos,
                    time: l.time,
                    node,
                    value: v.clone(),
                });
                self.digest.events += 1;
                self.push(Rec::Exit {
                    pos,
                    time: l.time,
                    node,
                });
            }
            (Body::Other(raw), node) if is_register(l.f) => self.register(pos, l, node, raw),
            _ => self.other(pos, l.time),
        }
    }

    /// A register operation: its value decoded, or the reason it is not one kept.
    fn register(&mut self, pos: u32, l: &Line<'_>, node: Option<NodeIx>, raw: &str) {
        match serde_json::from_str::<RegisterValue>(raw) {
            Ok(value) => {
                self.digest.events += 1;
                self.push(Rec::Register(Box::new(RegisterOp {
                    pos,
                    time: l.time,
                    process: l.process.to_string(),
                    kind: l.kind,
                    f: l.f,
                    node,
                    value,
                })));
            }
            Err(e) => {
                let why = format!("a {} value is not a register value: {e}", l.f_name);
                self.digest.bad_register_values.push((pos, why));
                self.other(pos, l.time);
            }
        }
    }

    pub fn finish(self) -> Digest {
        self.digest
    }
}

/// The `f`s of the register workload's operations.
pub fn is_register(f: F) -> bool {
    matches!(f, F::Read | F::Set | F::Cas | F::Create)
}

/// Builds a digest from events in memory: each is written as a history line and read back
/// through the one decoder, exactly as a file would be.
pub fn digest_events(events: &[crate::history::Event], nodes: &[String]) -> Result<Digest, String> {
    let texts = events
        .iter()
        .map(serde_json::to_string)
        .collect::<Result<Vec<String>, _>>()
        .map_err(|x| x.to_string())?;
    let lines: Vec<&str> = texts.iter().map(String::as_str).collect();
    digest_lines(&lines, nodes)
}

/// Digests a history held in memory as its lines.
pub fn digest_lines(lines: &[&str], nodes: &[String]) -> Result<Digest, String> {
    let mut d = LineDigester::new(nodes);
    for text in lines {
        d.line(text, |_, _| ())?;
    }
    Ok(d.finish())
}

/// Digests history lines one at a time as they are written (the simulator's), decoding each
/// once, with the one decoder a file's lines go through: a node's `last_election` is decoded
/// when it changes, as the file reader does.
pub struct LineDigester {
    builder: DigestBuilder,
    /// Each node's last raw `last_election`: (node, JSON).
    last: Vec<(String, String)>,
    pos: u32,
}

impl LineDigester {
    pub fn new(nodes: &[String]) -> Self {
        LineDigester {
            builder: DigestBuilder::new(nodes),
            last: Vec::new(),
            pos: 0,
        }
    }

    /// Decodes one line (without its newline) into the digest, and hands the decoded line and
    /// its position to `also` (the simulator's live view reads the same decode).
    pub fn line<R>(
        &mut self,
        text: &str,
        also: impl FnOnce(u32, &Line<'_>) -> R,
    ) -> Result<R, String> {
        let last = &self.last;
        let previous = |node: &[u8]| {
            (last.iter())
                .find(|(n, _)| n.as_bytes() == node)
                .map(|(_, raw)| raw.as_bytes())
        };
        let pos = self.pos;
        let l = crate::history::line::decode_after(text, previous)
            .map_err(|why| format!("history line {}: {why}", pos + 1))?;
        let mut changed = None;
        let election = match (&l.body, &l.node) {
            (Body::Status(s), Some(n)) => match s.last_election {
                None => ReadElection::None,
                Some(raw) if previous(n.as_bytes()) == Some(raw.as_bytes()) => ReadElection::Same,
                Some(raw) => {
                    let summary = crate::history::line::election(raw)
                        .map_err(|why| format!("history event {}: {why}", l.index))?;
                    changed = Some((n.to_string(), raw.to_string()));
                    ReadElection::New(summary)
                }
            },
            _ => ReadElection::None,
        };
        self.builder.line(pos, &l, election);
        let r = also(pos, &l);
        if let Some((node, raw)) = changed {
            match self.last.iter_mut().find(|(n, _)| *n == node) {
                Some(slot) => slot.1 = raw,
                None => self.last.push((node, raw)),
            }
        }
        self.pos += 1;
        Ok(r)
    }

    pub fn finish(self) -> Digest {
        self.builder.finish()
    }
}
