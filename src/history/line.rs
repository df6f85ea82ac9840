//! One line of `history.jsonl`, decoded: the single decoder every reader goes through.
//!
//! [`decode`] tries the fast byte scanner ([`super::fast`]) and, when it declines (any event
//! other than a plainly laid out status read or write, an escape, a float, a repeated key, a
//! malformed line), uses [`fallback`], serde_json with typed values. The fast path only ever
//! answers for lines the fallback accepts, with the same answer (a property test feeds both
//! mutated lines); so what a line means, and whether it is rejected, is the fallback's
//! decision alone. No `serde_json::Value` is built per status read.

use super::{EventType, FaultValue, InterruptedValue, NodeExitValue, F};
use crate::api::{ServerState, ZabPhase};
use serde::Deserialize;
use serde_json::value::RawValue;
use std::borrow::Cow;

/// One decoded line, borrowing from the line's text.
#[derive(Debug, Clone, PartialEq)]
pub struct Line<'a> {
    pub index: u64,
    pub time: u64,
    pub process: Cow<'a, str>,
    pub kind: EventType,
    pub f: F,
    /// The `f` as written (what [`F::Other`] stands for).
    pub f_name: Cow<'a, str>,
    pub node: Option<Cow<'a, str>>,
    pub body: Body<'a>,
}

/// A line's value, typed by what the event is.
#[derive(Debug, Clone, PartialEq)]
pub enum Body<'a> {
    /// A successful status read (`f` status, `type` ok).
    Status(StatusRead<'a>),
    /// A status read that failed or timed out: what the observer knew of the node is stale.
    Unreachable,
    /// A client write's invocation or completion.
    Write(WriteValue<'a>),
    /// A node's final committed log (`f` final-log, `type` ok).
    FinalLog(FinalLogValue),
    /// A final-log read that failed, and why.
    FinalLogError(String),
    /// A nemesis action: a fault or its undo.
    Fault(FaultValue),
    NodeExit(NodeExitValue),
    Interrupted(InterruptedValue),
    /// Anything else (client reads, unknown `f`): the value's raw JSON text ("null" if none).
    Other(&'a str),
}

/// The fields of a status read readers use (`api::NodeStatus` minus what nobody reads).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StatusRead<'a> {
    pub state: ServerState,
    pub phase: ZabPhase,
    pub leader: Option<u64>,
    /// currentEpoch.
    pub peer_epoch: u64,
    pub accepted_epoch: u64,
    pub last_zxid: u64,
    pub last_committed_zxid: u64,
    /// The node's wall clock, ms since the Unix epoch (absent in hand-made histories).
    pub wall_clock_ms: Option<i64>,
    /// The raw JSON of `last_election` (an object), None when absent or null. Decode it with
    /// [`election`] (readers do so once per change: it changes once per election).
    pub last_election: Option<&'a str>,
}

impl StatusRead<'_> {
    /// The epoch this server leads, when it has established it: a leader's `peer_epoch` is its
    /// old currentEpoch during discovery and the epoch it leads only from sync on.
    pub fn leads(&self) -> Option<u64> {
        leads(self.state, self.phase, self.peer_epoch)
    }

    /// (leader sid, epoch) this server follows, once its epoch is its leader's: a follower
    /// takes the new currentEpoch at NEWLEADER (inside sync), so only broadcast is certain.
    pub fn follows(&self) -> Option<(u64, u64)> {
        follows(self.state, self.phase, self.leader, self.peer_epoch)
    }
}

/// See [`StatusRead::leads`]; one definition for every status type.
pub fn leads(state: ServerState, phase: ZabPhase, peer_epoch: u64) -> Option<u64> {
    let established = matches!(phase, ZabPhase::Sync | ZabPhase::Broadcast);
    (state == ServerState::Leading && established).then_some(peer_epoch)
}

/// See [`StatusRead::follows`].
pub fn follows(
    state: ServerState,
    phase: ZabPhase,
    leader: Option<u64>,
    peer_epoch: u64,
) -> Option<(u64, u64)> {
    match (state, phase, leader) {
        (ServerState::Following, ZabPhase::Broadcast, Some(l)) => Some((l, peer_epoch)),
        _ => None,
    }
}

/// A write's `value.value` as canonical JSON text (serde_json's compact form: the key writes
/// and log entries are matched on) and `value.zxid`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct WriteValue<'a> {
    pub value: Option<Cow<'a, str>>,
    pub zxid: Option<u64>,
}

/// A final log: (zxid, canonical value) per entry.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FinalLogValue {
    pub entries: Vec<(u64, String)>,
    pub last_committed_zxid: Option<u64>,
}

/// Why a line is not a history event, and where (1-based column, in bytes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineError {
    pub column: usize,
    pub message: String,
}

impl std::fmt::Display for LineError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "column {}: {}", self.column, self.message)
    }
}

/// Decodes one line (without its newline): the fast path, else serde.
pub fn decode(text: &str) -> Result<Line<'_>, LineError> {
    decode_after(text, |_| None)
}

/// [`decode`] given the raw `last_election` of each node's previous read (`previous(node)`):
/// a summary with exactly those bytes was validated already and is not scanned again.
pub fn decode_after<'a, 'p>(
    text: &'a str,
    previous: impl Fn(&[u8]) -> Option<&'p [u8]>,
) -> Result<Line<'a>, LineError> {
    match super::fast::line(text, previous) {
        Some(l) => Ok(l),
        None => fallback(text),
    }
}

/// The canonical text of a JSON value: serde_json's compact form (object keys keep the
/// writer's order, so the same value written twice has the same text).
pub fn canonical(v: &serde_json::Value) -> String {
    v.to_string()
}

/// Decodes a status read's `last_election`.
pub fn election(raw: &str) -> Result<crate::api::ElectionSummary, String> {
    serde_json::from_str(raw).map_err(|e| format!("last_election is not an election summary: {e}"))
}

#[derive(Deserialize)]
struct RawLine<'a> {
    index: u64,
    time: u64,
    #[serde(borrow)]
    process: Cow<'a, str>,
    #[serde(rename = "type")]
    kind: EventType,
    #[serde(borrow)]
    f: Cow<'a, str>,
    #[serde(default, borrow)]
    node: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    value: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct StatusFields<'a> {
    state: ServerState,
    leader: Option<u64>,
    peer_epoch: u64,
    #[serde(default)]
    accepted_epoch: u64,
    #[serde(default = "election_phase")]
    zab_phase: ZabPhase,
    #[serde(default)]
    last_zxid: u64,
    #[serde(default)]
    last_committed_zxid: u64,
    #[serde(default)]
    wall_clock_ms: Option<i64>,
    #[serde(default, borrow)]
    last_election: Option<&'a RawValue>,
}

fn election_phase() -> ZabPhase {
    ZabPhase::Election
}

/// serde_json's decoding of a line: the reference the fast path agrees with.
pub fn fallback(text: &str) -> Result<Line<'_>, LineError> {
    let at_line = |e: serde_json::Error| LineError {
        column: e.column().max(1),
        message: format!("not a history event: {e}"),
    };
    let l: RawLine = serde_json::from_str(text).map_err(at_line)?;
    let raw = l.value.map(|v| v.get()).unwrap_or("null");
    // Errors inside the value point into the line: the value's offset plus serde's column.
    let value_col = l
        .value
        .map(|v| v.get().as_ptr() as usize - text.as_ptr() as usize)
        .unwrap_or(0);
    let in_value = |what: &str, e: serde_json::Error| LineError {
        column: value_col + e.column().max(1),
        message: format!("{what}: {e}"),
    };
    let plain = |what: &str| LineError {
        column: value_col.max(1),
        message: what.to_string(),
    };
    let f = F::parse(&l.f);
    let body = match (f, l.kind) {
        (F::Status, EventType::Ok) => {
            if l.node.is_none() {
                return Err(plain("a status read without \"node\""));
            }
            if l.value.is_none() {
                return Err(plain("a status read without a value"));
            }
            let s: StatusFields =
                serde_json::from_str(raw).map_err(|e| in_value("not a node status", e))?;
            Body::Status(StatusRead {
                state: s.state,
                phase: s.zab_phase,
                leader: s.leader,
                peer_epoch: s.peer_epoch,
                accepted_epoch: s.accepted_epoch,
                last_zxid: s.last_zxid,
                last_committed_zxid: s.last_committed_zxid,
                wall_clock_ms: s.wall_clock_ms,
                last_election: s.last_election.map(|r| r.get()).filter(|r| *r != "null"),
            })
        }
        (F::Status, _) => Body::Unreachable,
        (F::Write, _) => {
            let v: serde_json::Value =
                serde_json::from_str(raw).map_err(|e| in_value("not a write", e))?;
            Body::Write(WriteValue {
                value: v.get("value").map(|x| Cow::Owned(canonical(x))),
                zxid: v.get("zxid").and_then(|z| z.as_u64()),
            })
        }
        (F::FinalLog, kind) => {
            if l.node.is_none() {
                return Err(plain("a final-log event without \"node\""));
            }
            if kind == EventType::Ok {
                let log: crate::api::LogResponse =
                    serde_json::from_str(raw).map_err(|e| in_value("not a final log", e))?;
                Body::FinalLog(FinalLogValue {
                    entries: log
                        .entries
                        .iter()
                        .map(|en| (en.zxid, canonical(&en.value)))
                        .collect(),
                    last_committed_zxid: Some(log.last_committed_zxid),
                })
            } else {
                #[derive(Deserialize)]
                struct Why {
                    error: Option<String>,
                }
                let why = serde_json::from_str::<Option<Why>>(raw)
                    .ok()
                    .flatten()
                    .and_then(|w| w.error);
                Body::FinalLogError(why.unwrap_or_else(|| "no reason given".into()))
            }
        }
        (f, _) if f.is_fault_action() => Body::Fault(if raw == "null" {
            FaultValue::default()
        } else {
            serde_json::from_str(raw).map_err(|e| in_value("not a nemesis value", e))?
        }),
        (F::NodeExit, _) => Body::NodeExit(
            serde_json::from_str(raw).map_err(|e| in_value("not a node-exit value", e))?,
        ),
        (F::Interrupted, _) => Body::Interrupted(
            serde_json::from_str(raw).map_err(|e| in_value("not an interrupted value", e))?,
        ),
        _ => Body::Other(raw),
    };
    Ok(Line {
        index: l.index,
        time: l.time,
        process: l.process,
        kind: l.kind,
        f,
        f_name: l.f,
        node: l.node,
        body,
    })
}
