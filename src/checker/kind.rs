//! What kind of violation a checker found, counted per checker in results.json (`kinds`), so
//! that a known finding (`crate::known`) is matched on what the checker established, never on
//! the words of its explanation. A checker that classifies its violations classifies every
//! one of them (`Finding::judge_kinds`); one that does not leaves `kinds` empty, and no
//! known finding can then cover it.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// durability: an acknowledged write missing from the final leader or a quorum of voters.
    Lost,
    /// durability: an acknowledged write at another zxid than it was acknowledged with.
    Moved,
    /// durability: a value twice in a log.
    Duplicated,
    /// durability: a value no client wrote, or whose write failed, in a log.
    Phantom,
    /// durability: two final logs part, each with entries of its own.
    Fork,
    /// durability: a log skipped entries another holds, and holds nothing of its own.
    Hole,
    /// durability: a replica kept unacknowledged writes of an old epoch and lacks acknowledged
    /// ones of a newer one (a DIFF where a TRUNC was due: ZOOKEEPER-2846's mark).
    StaleTail,
    /// leader-completeness: a leader elected without a write acknowledged before its term.
    LeaderLacksWrite,
    /// crash: a server refused to start because its snapshot was gone and its txn log was not
    /// ("No snapshot found, but there are log entries").
    NoSnapshotAtRestart,
    /// crash: a server refused to start because its txn log skips a zxid ("Committed proposal
    /// cached out of order", ZooKeeper 3.9.4 and later): a hole in its own log.
    TxnLogGapAtRestart,
    /// crash: any other exit unasked.
    Exit,
    /// linearizable: a key's writes and sync reads that no order of the register allows.
    NotLinearizable,
    /// session-order: a client read a key at a version below one it had read before.
    ReadWentBack,
    /// session-order: a client read a key at a version below the one its own write left.
    ReadBelowOwnWrite,
    /// session-order: a client's write got a zxid not above its earlier writes' zxids.
    WritesOutOfOrder,
}

/// How many violations of each kind.
pub type Kinds = BTreeMap<Kind, usize>;

impl Kind {
    pub fn name(self) -> String {
        serde_json::to_value(self)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default()
    }
}
