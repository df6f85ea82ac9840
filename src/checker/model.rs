//! The checkers' compact view of a history (`Digest`): typed status reads, client writes, final
//! logs and nemesis actions in history order, plus each node's distinct decided elections.
//!
//! Why not check `Event`s directly: a run's history is millions of status reads, and a
//! `serde_json::Value` per read costs both time and memory. A `Digest` keeps only the fields the
//! checkers judge (a status read is ~64 bytes), and each election summary once per change
//! instead of once per read. Evidence points back to the history by position (`pos`), so the
//! full original events can be quoted in results.json.

use crate::api::{ElectionSummary, ServerState, ZabPhase};
use crate::history::{sid_of, Event, EventType, F, NEMESIS};
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
}

impl Status {
    /// The epoch this server leads, when it has established it: a leader's `peer_epoch` is its
    /// old currentEpoch during discovery and the epoch it leads only from sync on.
    pub fn leads(&self) -> Option<u64> {
        let established = matches!(self.phase, ZabPhase::Sync | ZabPhase::Broadcast);
        (self.state == ServerState::Leading && established).then_some(self.peer_epoch)
    }

    /// (leader sid, epoch) this server follows, once its epoch is its leader's: a follower
    /// takes the new currentEpoch at NEWLEADER (inside sync), so only broadcast is certain.
    pub fn follows(&self) -> Option<(u64, u64)> {
        match (self.state, self.phase, self.leader) {
            (ServerState::Following, ZabPhase::Broadcast, Some(l)) => Some((l, self.peer_epoch)),
            _ => None,
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
    /// The written value, canonical JSON text (the key writes and log entries are matched on).
    pub value: Option<String>,
    pub zxid: Option<u64>,
}

/// A node's final committed log, or why it could not be read.
#[derive(Debug, Clone)]
pub struct FinalLog {
    pub pos: u32,
    pub node: NodeIx,
    /// (zxid, canonical value), or Err(reason) when the log could not be read.
    pub entries: Result<Vec<(u64, String)>, String>,
}

/// One nemesis event.
#[derive(Debug, Clone)]
pub struct NemesisOp {
    pub pos: u32,
    pub index: u64,
    pub time: u64,
    pub kind: EventType,
    pub f: F,
    pub nodes: Vec<NodeIx>,
    /// The final phase's heal.
    pub is_final: bool,
    /// A `Clock` with `"mode": "reset"` (undoes a clock fault).
    pub is_reset: bool,
}

impl NemesisOp {
    /// A fault that starts (not the action that undoes one), as done (`info`).
    pub fn starts_fault(&self) -> bool {
        self.kind == EventType::Info
            && match self.f {
                F::Kill | F::Pause | F::Partition => true,
                F::Clock => !self.is_reset,
                _ => false,
            }
    }
}

// The memory budget: 5 M records must fit well under 1 GiB.
const _: () = assert!(std::mem::size_of::<Rec>() <= 64);

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
    FinalLog(Box<FinalLog>),
    Nemesis(Box<NemesisOp>),
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
            Rec::Unreachable { pos, node, .. } => {
                *pos += by;
                *node = map[*node as usize];
            }
            Rec::Write(w) => w.pos += by,
            Rec::FinalLog(l) => {
                l.pos += by;
                l.node = map[l.node as usize];
            }
            Rec::Nemesis(n) => {
                n.pos += by;
                n.nodes.iter_mut().for_each(|x| *x = map[*x as usize]);
            }
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

/// The checkers' view of a whole history.
#[derive(Debug, Default)]
pub struct Digest {
    /// Node names, those of test.json first, then any other the history names.
    pub nodes: Vec<String>,
    /// The records, in history order, as the parts they were parsed in (a file parsed in
    /// parallel keeps its parts rather than copying them into one vector: half the peak memory).
    pub parts: Vec<Vec<Rec>>,
    pub elections: Vec<Election>,
    /// Successful status reads per node.
    pub reads: Vec<u64>,
    /// Status reads that carried a `last_election` (None or not).
    pub reads_with_election: u64,
    /// Events seen, of any kind.
    pub events: u64,
}

impl Digest {
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
}

/// Builds a `Digest` one event at a time (from `Event`s or from the fast JSONL parser).
pub struct DigestBuilder {
    digest: Digest,
    node_ix: HashMap<String, NodeIx>,
    last_election: Vec<Option<ElectionSummary>>,
}

impl DigestBuilder {
    pub fn new(nodes: &[String]) -> Self {
        let mut b = DigestBuilder {
            digest: Digest::default(),
            node_ix: HashMap::new(),
            last_election: Vec::new(),
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
        }));
    }

    /// A status read that failed or timed out (of `node`, when the event names one).
    pub fn unreachable(&mut self, pos: u32, time: u64, node: Option<NodeIx>) {
        self.digest.events += 1;
        if let Some(node) = node {
            self.push(Rec::Unreachable { pos, time, node });
        }
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
        node: NodeIx,
        entries: Result<Vec<(u64, String)>, String>,
    ) {
        self.digest.events += 1;
        self.push(Rec::FinalLog(Box::new(FinalLog { pos, node, entries })));
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

    /// A status read's `last_election` was present (used by the fast parser, which skips
    /// unchanged summaries without parsing them).
    pub fn note_election_present(&mut self) {
        self.digest.reads_with_election += 1;
    }

    /// Adds any event. Status reads whose value is not a valid `NodeStatus` are an error naming
    /// the event: a history the checkers cannot read is not evidence of anything.
    pub fn event(&mut self, pos: u32, e: &Event) -> Result<(), String> {
        let node = e.node.as_deref().map(|n| self.node(n));
        match (e.f, e.kind) {
            (F::Status, EventType::Ok) => {
                let node = node.ok_or("a status read without \"node\"")?;
                let s: crate::api::NodeStatus = serde_deser(&e.value)?;
                let core = StatusCore {
                    state: s.state,
                    phase: s.zab_phase,
                    leader: s.leader,
                    peer_epoch: s.peer_epoch,
                    accepted_epoch: s.accepted_epoch,
                };
                self.status(pos, e.index, e.time, node, core);
                self.election(pos, node, s.last_election);
            }
            (F::Status, _) => self.unreachable(pos, e.time, node),
            (F::Write, kind) => {
                let value = e.value.get("value").map(canonical);
                let zxid = e.value.get("zxid").and_then(|z| z.as_u64());
                self.write(WriteOp {
                    pos,
                    time: e.time,
                    process: e.process.clone(),
                    kind,
                    value,
                    zxid,
                });
            }
            (F::FinalLog, kind) => {
                let node = node.ok_or("a final-log event without \"node\"")?;
                let entries = if kind == EventType::Ok {
                    Ok(log_entries(serde_deser(&e.value)?))
                } else {
                    let why = e.value.get("error").and_then(|v| v.as_str());
                    Err(why.unwrap_or("no reason given").to_string())
                };
                self.final_log(pos, node, entries);
            }
            (F::Read, _) => self.digest.events += 1,
            (f, kind) => {
                self.digest.events += 1;
                if e.process != NEMESIS {
                    return Ok(());
                }
                let mut nodes = Vec::new();
                if let Some(list) = e.value.get("nodes").and_then(|v| v.as_array()) {
                    for n in list.iter().filter_map(|n| n.as_str()) {
                        nodes.push(self.node(n));
                    }
                } else if let Some(n) = node {
                    nodes.push(n);
                }
                let flag = |k: &str| e.value.get(k);
                self.push(Rec::Nemesis(Box::new(NemesisOp {
                    pos,
                    index: e.index,
                    time: e.time,
                    kind,
                    f,
                    nodes,
                    is_final: flag("final").and_then(|v| v.as_bool()) == Some(true),
                    is_reset: flag("mode").and_then(|v| v.as_str()) == Some("reset"),
                })));
            }
        }
        Ok(())
    }

    pub fn finish(self) -> Digest {
        self.digest
    }
}

/// The text a value is matched on: serde_json's compact form (object keys keep their order,
/// which is the writer's, so the same value written twice has the same text).
pub fn canonical(v: &serde_json::Value) -> String {
    v.to_string()
}

/// A final log's entries as the checkers match them: (zxid, canonical value).
pub fn log_entries(log: crate::api::LogResponse) -> Vec<(u64, String)> {
    log.entries
        .iter()
        .map(|en| (en.zxid, canonical(&en.value)))
        .collect()
}

fn serde_deser<T: serde::de::DeserializeOwned>(v: &serde_json::Value) -> Result<T, String> {
    T::deserialize(v).map_err(|e| e.to_string())
}

/// Builds a digest from events in memory.
pub fn digest_events(events: &[Event], nodes: &[String]) -> Result<Digest, String> {
    let mut b = DigestBuilder::new(nodes);
    for (pos, e) in events.iter().enumerate() {
        b.event(pos as u32, e)
            .map_err(|why| format!("history event {}: {why}", e.index))?;
    }
    Ok(b.finish())
}
