//! crash: no node process dies by itself. The controller watches every node's process and
//! records a `node-exit` event for an exit it did not cause (not a nemesis kill, not the
//! teardown), with the exit status or signal and the last lines of the node's log. Any such
//! event makes the run invalid: a system under test that exits unasked (a panic, an abort, an
//! out-of-memory kill) is a bug, whatever the other checkers say. The log lines are the
//! evidence.

use super::finding::{secs, EvRef, Finding, KindedItem};
use super::kind::Kind;
use super::model::Digest;
use crate::history::test_info::TestInfo;

pub const NAME: &str = "crash";

/// ZooKeeper's refusal to start on a txn log without the snapshot under it (`FileTxnSnapLog`),
/// as a power loss leaves it (docs/zookeeper.md).
const NO_SNAPSHOT: &str = "No snapshot found, but there are log entries";

pub fn check(d: &Digest, _info: &TestInfo) -> Finding {
    let violations: Vec<KindedItem> = d
        .node_exits
        .iter()
        .map(|e| {
            let node = &d.nodes[e.node as usize];
            let how = match (&e.value.status, &e.value.signal) {
                (Some(code), _) => format!("with status {code}"),
                (None, Some(sig)) => format!("killed by {sig}"),
                (None, None) => "(status unknown)".to_string(),
            };
            let tail = match e.value.log_tail.as_slice() {
                [] => "its log is empty".to_string(),
                lines => format!("its log ends: \"{}\"", lines.join(" | ")),
            };
            let kind = if e.value.log_tail.iter().any(|l| l.contains(NO_SNAPSHOT)) {
                Kind::NoSnapshotAtRestart
            } else {
                Kind::Exit
            };
            (
                kind,
                (
                    format!("{node} exited by itself at {} {how}; {tail}.", secs(e.time)),
                    vec![EvRef::new(e.pos, format!("{node} exited unasked"))],
                ),
            )
        })
        .collect();
    let ok = "No node process exited without the controller stopping it.".to_string();
    Finding::judge_kinds(violations, Vec::new(), ok)
}
