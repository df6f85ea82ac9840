//! Zab for fle-node: what runs after Fast Leader Election decided (ZooKeeper's Leader/Follower).
//!
//! - [`store`]: epochs + the durable txnlog, shared with the election and the HTTP handlers;
//! - [`messages`]: the quorum-port protocol (frames and a strict decoder);
//! - [`leader`] / [`follower`]: pure state machines (messages and beats in, [`actions::Output`]s
//!   out), with [`plan`] choosing DIFF / TRUNC / SNAP;
//! - [`lead`] / [`follow`]: the async shells that run a machine over real TCP and real files;
//! - [`batch`]: the buggy follower's fsync batch (seeded ack-before-fsync / epoch-before-txns);
//! - [`accept`]: the quorum port's handshake deadline and cap, and the lobby the leader takes from.
//!
//! Both shells end (return) when the role ends; the server loop then goes back to LOOKING.

pub mod accept;
pub mod actions;
pub mod batch;
mod conn;
mod exec;
mod follow;
pub mod follower;
mod lead;
pub mod leader;
pub mod messages;
#[cfg(test)]
mod observer_tests;
pub mod plan;
#[cfg(test)]
mod reconfig_tests;
pub mod store;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::oneshot;

use crate::api::{ApiError, NodeStatus, WriteCommitted, ZabPhase};
pub use actions::SyncMode;
pub use follow::follow;
pub use lead::{lead, lead_accepting, lead_from_lobby};
pub use store::{SharedStore, Store};

/// What a role needs to know about the ensemble.
#[derive(Debug, Clone)]
pub struct ZabConfig {
    pub my_sid: u64,
    /// Every server's quorum address (server.N=host:quorumPort:electionPort), voters and
    /// observers, me included. Outgoing sockets bind to my own address's IP.
    pub servers: BTreeMap<u64, SocketAddr>,
    /// The servers that only observe (never counted toward a quorum).
    pub observers: BTreeSet<u64>,
    pub tick: Duration,
    pub init_limit: u32,
    pub sync_limit: u32,
    /// Voters needed for a quorum, myself included (normally voters/2 + 1; a seeded bug may
    /// shrink it).
    pub quorum: usize,
    /// A write not committed by then is answered `Unknown`.
    pub write_timeout: Duration,
    /// A follower missing more txns than this gets SNAP instead of DIFF.
    pub snap_threshold: usize,
    /// Seeded bugs (none by default); see `node::bugs`.
    pub bugs: crate::bugs::Bugs,
    /// The version of the config in force (0: the static zoo.cfg); a committed reconfig above
    /// it ends the role.
    pub config_version: u64,
}

impl ZabConfig {
    /// ZooKeeper's usual quorum (of the voters) and a write timeout of twice the leader's own
    /// give-up time.
    pub fn new(
        my_sid: u64,
        servers: BTreeMap<u64, SocketAddr>,
        observers: BTreeSet<u64>,
        tick: Duration,
        init_limit: u32,
        sync_limit: u32,
    ) -> ZabConfig {
        let voters = servers.keys().filter(|s| !observers.contains(s)).count();
        let quorum = crate::api::quorum(voters);
        ZabConfig {
            my_sid,
            servers,
            observers,
            tick,
            init_limit,
            sync_limit,
            quorum,
            write_timeout: tick * sync_limit * 2,
            snap_threshold: 10_000,
            bugs: crate::bugs::Bugs::none(),
            config_version: 0,
        }
    }

    /// One beat is half a tick: the ping period.
    pub(crate) fn beat(&self) -> Duration {
        (self.tick / 2).max(Duration::from_millis(1))
    }

    pub(crate) fn my_addr(&self) -> anyhow::Result<SocketAddr> {
        self.servers.get(&self.my_sid).copied().ok_or_else(|| {
            anyhow::anyhow!(
                "server {} has no quorum address in the server list; add server.{}=host:quorumPort:electionPort",
                self.my_sid, self.my_sid
            )
        })
    }
}

/// Why a learner's role ends: a reconfig above the config it runs under is committed in its
/// log (by COMMIT, INFORM or sync), so it elects again under the new config.
pub(crate) fn reconfigured(store: &SharedStore, cfg: &ZabConfig) -> Option<String> {
    if cfg.bugs.has(crate::bugs::Bug::RemovedLeaderKeepsLeading) {
        // Seeded removed-leader-keeps-leading: learners follow the leader that designated
        // itself, and activate the config in place (`server`).
        return None;
    }
    let m = store::lock(store).committed_config()?;
    (m.version > cfg.config_version).then(|| {
        format!(
            "config version {:#x} committed: electing again under it",
            m.version
        )
    })
}

/// How often per tick a follower checks its leader's silence. The follower only counts
/// silence (the leader pings each half tick), so a finer count costs a timer wake-up and gives
/// up on a silent (paused) leader within a tenth of a tick after syncLimit·tickTime, instead of
/// up to half a tick later (issue 18: part of the paused leader's "second second").
pub const SILENCE_CHECKS_PER_TICK: u32 = 10;

/// A follower whose dial of its leader failed dials again after this (the leader binds its
/// port only once it starts leading), until initLimit ticks have passed.
pub const DIAL_RETRY: Duration = Duration::from_millis(20);

impl ZabConfig {
    /// The leader machine's settings (its beat is half a tick).
    pub fn leader_config(&self) -> leader::LeaderConfig {
        leader::LeaderConfig {
            sid: self.my_sid,
            quorum: self.quorum,
            observers: self.observers.clone(),
            init_limit_beats: 2 * self.init_limit as u64,
            sync_limit_beats: 2 * self.sync_limit as u64,
            snap_threshold: self.snap_threshold,
            bugs: self.bugs,
            config_version: self.config_version,
        }
    }

    /// The follower machine's settings for following `leader` (its beat is
    /// [`SILENCE_CHECKS_PER_TICK`] a tick).
    pub fn follower_config(&self, leader: u64) -> follower::FollowerConfig {
        follower::FollowerConfig {
            sid: self.my_sid,
            leader,
            observer: self.observers.contains(&self.my_sid),
            init_limit_beats: SILENCE_CHECKS_PER_TICK as u64 * self.init_limit as u64,
            sync_limit_beats: SILENCE_CHECKS_PER_TICK as u64 * self.sync_limit as u64,
            bugs: self.bugs,
        }
    }

    /// The follower's beat: [`SILENCE_CHECKS_PER_TICK`] a tick.
    pub fn silence_check(&self) -> Duration {
        (self.tick / SILENCE_CHECKS_PER_TICK).max(Duration::from_millis(1))
    }
}

/// A role's view published for `/status` and the election (a tokio watch).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ZabProgress {
    pub zab_phase: ZabPhase,
    /// currentEpoch.
    pub peer_epoch: u64,
    pub accepted_epoch: u64,
    /// Last logged zxid (uncommitted included).
    pub last_zxid: u64,
    pub last_committed_zxid: u64,
    /// How this server was last synced as a follower.
    pub sync_mode: Option<SyncMode>,
}

impl ZabProgress {
    /// The store's figures with the given phase.
    pub fn from_store(s: &Store, zab_phase: ZabPhase, sync_mode: Option<SyncMode>) -> Self {
        ZabProgress {
            zab_phase,
            peer_epoch: s.current_epoch(),
            accepted_epoch: s.accepted_epoch(),
            last_zxid: s.last_logged_zxid(),
            last_committed_zxid: s.last_committed_zxid(),
            sync_mode,
        }
    }
}

impl ZabProgress {
    /// Copies these figures into a node's `/status`.
    pub fn apply_to(&self, status: &mut NodeStatus) {
        status.zab_phase = self.zab_phase;
        status.peer_epoch = self.peer_epoch;
        status.accepted_epoch = self.accepted_epoch;
        status.last_zxid = self.last_zxid;
        status.last_zxid_hex = format!("{:#x}", self.last_zxid);
        status.last_committed_zxid = self.last_committed_zxid;
    }
}

/// A client write handed to the leader.
#[derive(Debug)]
pub struct ClientWrite {
    pub value: serde_json::Value,
    pub reply: oneshot::Sender<WriteOutcome>,
}

/// The answer to a client write.
#[derive(Debug, Clone, PartialEq)]
pub enum WriteOutcome {
    /// Committed at this zxid (HTTP 200).
    Committed(u64),
    /// Certainly not applied (HTTP 503).
    Rejected(String),
    /// May or may not be applied (HTTP 504).
    Unknown(String),
}

impl WriteOutcome {
    /// The `POST /write` answer: 200 committed, 503 certainly not applied, 504 unknown.
    pub fn http(&self) -> (u16, serde_json::Value) {
        let err = |error: &str, outcome_unknown| {
            serde_json::to_value(ApiError {
                error: error.to_string(),
                leader: None,
                outcome_unknown,
            })
            .unwrap_or_default()
        };
        match self {
            WriteOutcome::Committed(zxid) => (
                200,
                serde_json::to_value(WriteCommitted { zxid: *zxid }).unwrap_or_default(),
            ),
            WriteOutcome::Rejected(why) => (503, err(why, false)),
            WriteOutcome::Unknown(why) => (504, err(why, true)),
        }
    }
}

/// Publishes progress, waking watchers only when something changed.
pub(crate) fn publish(
    progress: &tokio::sync::watch::Sender<ZabProgress>,
    store: &SharedStore,
    phase: ZabPhase,
    sync_mode: Option<SyncMode>,
) {
    let p = ZabProgress::from_store(&store::lock(store), phase, sync_mode);
    progress.send_if_modified(|old| {
        if *old != p {
            *old = p;
            true
        } else {
            false
        }
    });
}
