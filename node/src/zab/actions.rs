//! What the pure state machines ask their shell to do: send, persist, fsync, report.
//!
//! The contract, as raft-rs's `Ready`: the shell performs outputs in order, except that a `Send`
//! placed after a `Sync` is released only once that fsync is done (so an ACK never precedes the
//! durability it claims), and an epoch write waits for any fsync before it (txns before epoch:
//! ZOOKEEPER-4785). Sends before the first `Sync` go out at once, which lets a leader's proposals
//! travel while its own fsync runs.

use serde::{Deserialize, Serialize};

use crate::txnlog::Txn;
use crate::zab::messages::Msg;

/// A change to the server's durable state.
#[derive(Debug, Clone, PartialEq)]
pub enum PersistOp {
    AcceptedEpoch(u64),
    CurrentEpoch(u64),
    /// Write txns to the log (durable at the next `Sync`).
    Append(Vec<Txn>),
    /// Drop every txn after this zxid (durable at once).
    Truncate(u64),
    /// Replace the whole log (durable at once).
    Reset(Vec<Txn>),
    /// Raise the commit watermark.
    Commit(u64),
}

#[derive(Debug, Clone, PartialEq)]
pub enum Output {
    /// Send to a server (a follower sends only to its leader).
    Send(u64, Msg),
    /// Drop the connection to a follower.
    Close(u64, String),
    Persist(PersistOp),
    /// fsync the log; then tell the leader machine its own log is durable up to `self_ack`.
    Sync {
        self_ack: Option<u64>,
    },
    /// The log needs an fsync, but it may wait for the follower's batch (flushed when it is a
    /// tick old or full): only the seeded ack-before-fsync / epoch-before-txns bugs ask for it,
    /// after the ACK has already gone (ZooKeeper's SyncRequestProcessor flushes in batches).
    BatchSync,
    /// Everything up to this zxid is committed: answer the clients waiting on it.
    Committed(u64),
    /// The role is over: back to LOOKING.
    StepDown(String),
}

/// How a follower was brought to the leader's history.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SyncMode {
    Diff,
    Trunc,
    Snap,
}
