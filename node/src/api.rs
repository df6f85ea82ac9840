//! The JSON a node speaks over HTTP, shared by `fle-node` (which serves it), the controller
//! (which reads it and stores it in the history) and the checkers (which judge it).
//!
//! Field names are the wire contract: change them only together with every reader.
//!
//! The status types declare their fields in alphabetical order: the controller records a
//! status read through `serde_json::Value`, which sorts keys, and the simulator serializes
//! these types directly (15,000 reads a run), so both write the same bytes, the layout the
//! history's fast reader expects. A test in `history::fast` holds them to it.

use serde::{Deserialize, Serialize};

/// A server's role, as ZooKeeper names it (and numbers it on the election wire).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum ServerState {
    Looking,
    Following,
    Leading,
    Observing,
}

/// A server's kind in the ensemble, as zoo.cfg names it (`server.N=...:observer`, `peerType=`):
/// a participant votes and counts toward quorums; an observer only learns the leader and its
/// committed txns (ZooKeeper's `LearnerType`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PeerType {
    #[default]
    Participant,
    Observer,
}

impl PeerType {
    pub fn is_observer(self) -> bool {
        self == PeerType::Observer
    }
}

/// Where a server is in Zab: electing, or discovery/sync/broadcast under a leader.
/// A leader's `peer_epoch` is the epoch it leads only from `Sync` on (it is set after discovery).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ZabPhase {
    Election,
    Discovery,
    Sync,
    Broadcast,
}

/// One vote a server counted when it decided an election.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CountedVote {
    /// Whom the vote proposes as leader.
    pub leader: u64,
    pub peer_epoch: u64,
    /// The sender's election epoch (logicalclock) on the counted notice, and its state (see
    /// `state`): what the decision acted on (a FOLLOWING/LEADING notice may be of another
    /// round). Absent in histories before they existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub round: Option<u64>,
    /// Who sent the vote.
    pub sid: u64,
    /// The sender's state on the counted notice (see `round`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<ServerState>,
    pub zxid: u64,
}

impl CountedVote {
    /// A FOLLOWING/LEADING notice for `leader`: its sender already settled on that leader, in
    /// whichever election it took part in, so its zxid and round are that election's, not
    /// this one's (ZOOKEEPER-1732: such notices are compared on leader and epoch only).
    pub fn settled_for(&self, leader: u64) -> bool {
        self.leader == leader
            && matches!(
                self.state,
                Some(ServerState::Following | ServerState::Leading)
            )
    }
}

/// One vote a server heard in its deciding round, whether it agreed with the decision or not.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReceivedVote {
    /// Whom the vote proposes as leader.
    pub leader: u64,
    pub peer_epoch: u64,
    /// The sender's election epoch (logicalclock) when it sent the vote.
    pub round: u64,
    /// Who sent the vote (the deciding server itself for its own proposals).
    pub sid: u64,
    /// The sender's state when it sent the vote.
    pub state: ServerState,
    pub zxid: u64,
}

/// The last election a server decided.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ElectionSummary {
    /// True when the server joined an established leader on FOLLOWING/LEADING notices of a
    /// quorum (ZooKeeper's outofelection) instead of deciding its round: such a winner need
    /// not beat the votes heard (a restarted server with a longer log still follows it).
    /// Left out when false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub joined: bool,
    pub leader: u64,
    /// The deciding server's own round (logicalclock) when it decided, before it took the
    /// round of the notices it joined on: `round` differs from it only for a decision on
    /// FOLLOWING/LEADING notices of another round, which ZooKeeper's checkLeader allows for
    /// following another server but never for leading (ZOOKEEPER-1514). Absent in histories
    /// before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub own_round: Option<u64>,
    /// The decided vote's peer epoch (see `zxid`).
    pub peer_epoch: u64,
    /// Every distinct vote heard while in the deciding round, agreeing or not, superseded ones
    /// included, and this server's own successive proposals (sid = its own): what a checker
    /// needs to prove the winner beats each of them. In arrival order, so this server's own
    /// proposals of the round appear in the order it adopted them (each must beat the one
    /// before in the total order). Absent in histories before it existed
    /// (and left out when empty, so such summaries re-serialize byte for byte).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub received: Vec<ReceivedVote>,
    /// The election epoch (logicalclock) of the deciding round.
    pub round: u64,
    pub took_ms: u64,
    /// The votes counted for the decision (recvset, or outofelection when it joined a leader).
    pub votes: Vec<CountedVote>,
    /// The decided vote's zxid and peer epoch (what the leader was elected with).
    pub zxid: u64,
}

/// `GET /status` of a node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeStatus {
    /// acceptedEpoch (persisted).
    #[serde(default)]
    pub accepted_epoch: u64,
    /// The config in force once a reconfig changed it; left out under the static zoo.cfg
    /// (version 0), so histories without reconfigs keep their bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<ConfigView>,
    /// logicalclock: the election round.
    pub election_epoch: u64,
    #[serde(default)]
    pub last_committed_zxid: u64,
    pub last_election: Option<ElectionSummary>,
    /// Last logged zxid (logged but uncommitted included), as in ZooKeeper's votes.
    pub last_zxid: u64,
    pub last_zxid_hex: String,
    /// The leader this server leads/follows, or None while looking.
    pub leader: Option<u64>,
    /// currentEpoch (persisted).
    pub peer_epoch: u64,
    /// Participant or observer (zoo.cfg). Left out for a participant, so histories of
    /// ensembles without observers keep their bytes.
    #[serde(default, skip_serializing_if = "is_participant")]
    pub peer_type: PeerType,
    pub sid: u64,
    pub state: ServerState,
    pub uptime_ms: u64,
    /// The node's own wall clock (what libfaketime moves), ms since the Unix epoch.
    pub wall_clock_ms: i64,
    #[serde(default = "default_phase")]
    pub zab_phase: ZabPhase,
}

/// `POST /reconfig`'s answer once the change is committed: the new config's version (the
/// reconfig's zxid, hex as ZooKeeper writes it) and its server lines.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReconfigDone {
    pub config: String,
    pub version: String,
}

/// A server's config as `/status` shows it: its version (the reconfig's zxid) and members.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConfigView {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub observers: Vec<u64>,
    pub version: u64,
    pub voters: Vec<u64>,
}

impl ConfigView {
    /// Whether server `sid` is in this config, voter or observer.
    pub fn lists(&self, sid: u64) -> bool {
        self.voters.contains(&sid) || self.observers.contains(&sid)
    }
}

fn is_participant(t: &PeerType) -> bool {
    !t.is_observer()
}

fn default_phase() -> ZabPhase {
    ZabPhase::Election
}

/// `POST /write` body.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WriteRequest {
    pub value: serde_json::Value,
}

/// `POST /write` success (200): the write is committed at `zxid`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WriteCommitted {
    pub zxid: u64,
}

/// `POST /write` refusal or unknown outcome (503 / 504), and every other API error.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ApiError {
    pub error: String,
    /// Known leader, when the server is a follower that will not forward.
    #[serde(default)]
    pub leader: Option<u64>,
    /// True when the write may or may not have happened (timeouts).
    #[serde(default)]
    pub outcome_unknown: bool,
}

/// The data tree's operations, as ZooKeeper's create / setData / setData-with-version
/// (`POST /data` body; the txn a leader proposes carries the op itself, so every server
/// applies the same change in zxid order). Keys are 1-64 characters of `[a-z0-9_-]`; values
/// are integers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "lowercase")]
pub enum DataOp {
    /// Creates `key` at version 0; refused (409) when it exists.
    Create { key: String, value: i64 },
    /// Sets `key` whatever its version (ZooKeeper's setData with version -1); refused (409)
    /// when the key does not exist.
    Set { key: String, value: i64 },
    /// Sets `key` only if its version is `version` (ZooKeeper's setData with a version):
    /// compare-and-set; refused (409) on another version or no such key.
    Cas {
        key: String,
        version: i64,
        value: i64,
    },
}

impl DataOp {
    pub fn key(&self) -> &str {
        match self {
            DataOp::Create { key, .. } | DataOp::Set { key, .. } | DataOp::Cas { key, .. } => key,
        }
    }
}

/// `POST /data` success (200): the op is committed at `zxid` and left `key` at `version`.
/// A refusal (the key exists, no such key, another version) is a 409 [`ApiError`]: certainly
/// not applied.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DataWritten {
    pub version: i64,
    pub zxid: u64,
}

/// `GET /data/KEY` (200): the key as this server has applied it, possibly stale, as a
/// ZooKeeper server's local read. `value` None and `version` -1 when there is no such key;
/// `zxid` is the last txn this server applied. A server that is not serving (looking, or not
/// yet synced with a leader) answers 503.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DataRead {
    pub key: String,
    pub value: Option<i64>,
    pub version: i64,
    pub zxid: u64,
}

/// `POST /sync` (200): as ZooKeeper's sync, this server has applied every txn its leader had
/// committed when the sync reached the leader (`zxid`: the last one applied here); a read
/// after it sees at least that. 503 while looking; 504 when the leader did not answer in time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Synced {
    pub zxid: u64,
}

/// One committed entry of the replicated log (`GET /log?from=ZXID`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LogEntry {
    pub zxid: u64,
    pub value: serde_json::Value,
}

/// `GET /log` answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LogResponse {
    pub entries: Vec<LogEntry>,
    pub last_committed_zxid: u64,
}

/// The smallest majority of `voters` servers (ZooKeeper's QuorumMaj, `n / 2 + 1`): the one
/// definition of a quorum's size, for fle-node's election and Zab and for the controller's
/// checkers, view and nemesis. The most that can be lost while one remains is `voters - quorum`.
pub fn quorum(voters: usize) -> usize {
    voters / 2 + 1
}

/// ZooKeeper's epoch: the high 32 bits of a zxid.
pub fn epoch_of(zxid: u64) -> u64 {
    zxid >> 32
}

/// ZooKeeper's counter: the low 32 bits of a zxid.
pub fn counter_of(zxid: u64) -> u64 {
    zxid & 0xffff_ffff
}

pub fn make_zxid(epoch: u64, counter: u64) -> u64 {
    (epoch << 32) | (counter & 0xffff_ffff)
}
