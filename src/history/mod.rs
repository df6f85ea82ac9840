//! The history: every observation, operation and fault of a run, in Jepsen's shape, one JSON
//! object per line (`history.jsonl`). The controller streams it to disk as it happens; the
//! checkers and the report read it back.
//!
//! `time` is nanoseconds since the run started on the controller's monotonic clock, never a
//! node's clock (nodes' clocks are what the clock nemesis breaks).

use serde::{Deserialize, Serialize};

pub mod recorder;
pub mod store;
pub mod test_info;

/// Jepsen's operation types: `invoke` starts an operation; `ok` it happened; `fail` it certainly
/// did not happen; `info` the outcome is unknown (or, for the nemesis, "this was done").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EventType {
    Invoke,
    Ok,
    Fail,
    Info,
}

/// What an event is about.
///
/// Conventions every writer and reader follows:
/// - Observers (`process` = node name) record one completed read per poll: `ok` with an
///   `api::NodeStatus` value, or `fail`/`info` with `{"error": "..."}` when unreachable / timed out.
/// - Clients (`process` = client number) record `invoke` then `ok`/`fail`/`info`; a write's invoke
///   value is `{"value": V}`, its ok value `{"value": V, "zxid": Z}`.
/// - The final read of each node's log is one `FinalLog` event per node: `ok` with
///   `{"entries": [{"zxid", "value"}..], "last_committed_zxid": Z}`, or `fail`/`info` with an error.
/// - The nemesis (`process` = "nemesis") records each action as `invoke` then `info` (done, with
///   exactly what was done: nodes, pids, rules, offsets) or `fail` (it could not be done).
///   A fault starts with `Kill`, `Pause`, `Partition` or `Clock` and is undone by `Start`, `Resume`,
///   `Heal` or a `Clock` whose value has `"mode": "reset"` respectively. Values carry `"nodes":
///   ["n1", ..]` (the affected nodes); partitions carry `"shape"` and `"drops": {"n1": ["n3"], ..}`
///   (n1 drops traffic from n3). The heal of the final phase has `"final": true` in its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum F {
    /// An observer's read of a node's `/status` (value: `api::NodeStatus`, or `{"error": ..}`).
    Status,
    /// A client write (invoke value: `{"value": V}`; ok value: `{"value": V, "zxid": Z}`).
    Write,
    /// A client read.
    Read,
    /// The final read of a node's committed log (value: `{"entries": [{zxid, value}..]}`).
    FinalLog,
    Kill,
    Start,
    Pause,
    Resume,
    Partition,
    Heal,
    Clock,
}

/// The `process` of an event: a node's observer ("n3"), the nemesis, or a client number.
pub const NEMESIS: &str = "nemesis";

/// One line of `history.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    pub index: u64,
    /// Nanoseconds since the run started (controller's monotonic clock).
    pub time: u64,
    pub process: String,
    #[serde(rename = "type")]
    pub kind: EventType,
    pub f: F,
    /// The node the event concerns ("n1".."nN"), when it concerns one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    #[serde(default)]
    pub value: serde_json::Value,
}

/// Node names are "n1".."nN"; the number is the node's sid (myid).
pub fn node_name(sid: u64) -> String {
    format!("n{sid}")
}

/// The sid in a node name ("n3" -> 3).
pub fn sid_of(node: &str) -> Option<u64> {
    node.strip_prefix('n')?.parse().ok()
}
