//! The leader's Zab state machine, with no I/O: discovery, sync, broadcast and liveness.
//!
//! Time is counted in beats of tickTime/2 (the ping period), fed by `tick`. The shell feeds
//! messages (`step`), connection losses (`disconnected`), client writes (`propose`) and its own
//! fsyncs (`self_durable`), and performs the returned [`Output`]s.
//!
//! Observers (ZooKeeper's OBSERVERINFO learners) go through discovery and sync like followers
//! but count toward nothing: not the epoch, not NEWLEADER, not a commit, not the leader's
//! liveness. Their sync carries only committed txns, and each commit reaches them as INFORM
//! (txn and commit in one) after it is made; they receive no PROPOSAL or COMMIT.
//!
//! ACKs are cumulative: a follower logs in zxid order over one TCP stream and fsyncs in order, so
//! `Ack(z)` means "durable up to z". A late joiner's NEWLEADER ack covers everything its sync
//! carried, including proposals not yet committed.

use std::collections::{BTreeMap, BTreeSet};

use crate::api::{counter_of, epoch_of, make_zxid, ZabPhase};
use crate::bugs::{Bug, Bugs};
use crate::membership::reconfig_of;
use crate::txnlog::Txn;
use crate::zab::actions::SyncMode;
use crate::zab::actions::{Output, PersistOp};
use crate::zab::messages::{Msg, REPEATED_EPOCH};
use crate::zab::plan::plan_sync;

/// `propose`'s answer: the zxids given and the outputs, or why not (with outputs, e.g. a
/// step-down).
pub type Proposed = Result<(Vec<u64>, Vec<Output>), (String, Vec<Output>)>;

/// Counters run 1..=MAX_COUNTER; ZooKeeper never uses 0xffffffff and re-elects instead.
pub const MAX_COUNTER: u64 = 0xffff_fffe;

#[derive(Debug, Clone)]
pub struct LeaderConfig {
    pub sid: u64,
    /// Voters needed, myself included (observers never count).
    pub quorum: usize,
    /// The servers that may only observe.
    pub observers: BTreeSet<u64>,
    /// initLimit in beats: discovery + sync must reach a quorum within it.
    pub init_limit_beats: u64,
    /// syncLimit in beats: a follower not heard from within it does not count as alive.
    pub sync_limit_beats: u64,
    /// Above this many txns to send, SNAP instead of DIFF.
    pub snap_threshold: usize,
    /// Seeded bugs (none by default); see `node::bugs`.
    pub bugs: Bugs,
    /// The version of the config this term runs under: a reconfig txn above it that commits
    /// ends the term, so that every server elects again under the new config.
    pub config_version: u64,
}

#[cfg(test)]
impl LeaderConfig {
    /// The table tests' leader 1 needing `quorum` voters (initLimit 10 beats, syncLimit 4,
    /// SNAP above 100 txns), under the static config.
    pub(crate) fn for_tests(quorum: usize, observers: BTreeSet<u64>, bugs: Bugs) -> Self {
        LeaderConfig {
            sid: 1,
            quorum,
            observers,
            init_limit_beats: 10,
            sync_limit_beats: 4,
            snap_threshold: 100,
            bugs,
            config_version: 0,
        }
    }
}

/// A reconfig txn in the leader's history, not yet committed: until it is, a commit that
/// covers it needs a quorum of its new voters as well (ZooKeeper's `qvAcksetPairs`).
#[derive(Debug, Clone, PartialEq, Eq)]
struct PendingReconfig {
    zxid: u64,
    voters: BTreeSet<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// FOLLOWERINFO received, no LEADERINFO yet (epoch not chosen).
    Info,
    EpochSent,
    /// Sync and NEWLEADER sent; receives proposals from now on.
    Synced,
    /// NEWLEADER acked.
    Up,
}

#[derive(Debug, Clone)]
struct Peer {
    stage: Stage,
    /// ACKEPOCH received (fresh promise or not).
    epoch_acked: bool,
    last_heard: u64,
    last_zxid: u64,
    acked: u64,
    sync_last: u64,
    /// An observer: never counted, fed INFORMs.
    observer: bool,
    /// An observer's last txn sent (by sync or INFORM).
    informed: u64,
}

impl Peer {
    /// Whether this learner's promises and ACKs count (voters; observers too under the seeded
    /// observer-ack-counted bug, which treats them as followers in broadcast).
    fn counts(&self, bugs: Bugs) -> bool {
        !self.observer || bugs.has(Bug::ObserverAckCounted)
    }
}

pub struct Leader {
    cfg: LeaderConfig,
    phase: ZabPhase,
    beats: u64,
    /// (currentEpoch, last zxid) at election: a follower past this during discovery is refused.
    summary: (u64, u64),
    epoch: Option<u64>,
    history: Vec<Txn>,
    self_durable: u64,
    committed: u64,
    peers: BTreeMap<u64, Peer>,
    infos: BTreeMap<u64, u64>,
    epoch_acks: BTreeSet<u64>,
    newleader_acks: BTreeSet<u64>,
    reconfig: Option<PendingReconfig>,
    ended: bool,
}

impl Leader {
    /// `history` is the leader's whole durable log.
    pub fn new(
        cfg: LeaderConfig,
        accepted_epoch: u64,
        current_epoch: u64,
        history: Vec<Txn>,
        committed: u64,
    ) -> Leader {
        let last = history.last().map_or(0, |t| t.zxid);
        let mut infos = BTreeMap::new();
        infos.insert(cfg.sid, accepted_epoch);
        // A reconfig logged but not committed is still pending in the new term (ZooKeeper's
        // lastSeenQuorumVerifier): NEWLEADER must then reach its new quorum too.
        let reconfig = history
            .iter()
            .rev()
            .take_while(|t| t.zxid > committed)
            .filter(|t| t.zxid > cfg.config_version)
            .find_map(pending_reconfig);
        Leader {
            reconfig,
            summary: (current_epoch, last),
            cfg,
            phase: ZabPhase::Discovery,
            beats: 0,
            epoch: None,
            self_durable: last,
            committed,
            history,
            peers: BTreeMap::new(),
            infos,
            epoch_acks: BTreeSet::new(),
            newleader_acks: BTreeSet::new(),
            ended: false,
        }
    }

    pub fn phase(&self) -> ZabPhase {
        self.phase
    }

    /// The epoch being established or led, once chosen.
    pub fn epoch(&self) -> Option<u64> {
        self.epoch
    }

    pub fn committed(&self) -> u64 {
        self.committed
    }

    pub fn last_zxid(&self) -> u64 {
        self.history.last().map_or(0, |t| t.zxid)
    }

    /// Followers that acked NEWLEADER and are connected.
    pub fn synced_followers(&self) -> Vec<u64> {
        self.peers
            .iter()
            .filter(|(_, p)| p.stage == Stage::Up)
            .map(|(s, _)| *s)
            .collect()
    }

    /// First outputs: a quorum of one (a test may shrink it) needs no follower.
    pub fn start(&mut self) -> Vec<Output> {
        let mut out = Vec::new();
        self.try_pick_epoch(&mut out);
        out
    }

    /// One message from follower (or observer) `from`: its FOLLOWERINFO/OBSERVERINFO, its
    /// ACKEPOCH, an ACK (of NEWLEADER, or of proposals), or a PING; anything else is a
    /// protocol error that closes its connection.
    pub fn step(&mut self, from: u64, msg: Msg) -> Vec<Output> {
        let mut out = Vec::new();
        if self.ended {
            return out;
        }
        if let Some(p) = self.peers.get_mut(&from) {
            p.last_heard = self.beats;
        }
        let done = match msg {
            Msg::FollowerInfo {
                accepted_epoch,
                last_zxid,
                ..
            }
            | Msg::ObserverInfo {
                accepted_epoch,
                last_zxid,
                ..
            } => {
                let observer = matches!(msg, Msg::ObserverInfo { .. });
                self.learner_info(from, observer, (accepted_epoch, last_zxid), &mut out)
            }
            Msg::AckEpoch {
                current_epoch,
                last_zxid,
            } => self.ack_epoch(from, current_epoch, last_zxid, &mut out),
            Msg::Ack { zxid } => self.ack(from, zxid, &mut out),
            Msg::Ping => Ok(()),
            other => Err(self.protocol_error(
                from,
                &format!("a follower may not send {}", short_name(&other)),
            )),
        };
        match done {
            Ok(()) => out,
            Err(end) => end,
        }
    }

    /// FOLLOWERINFO or OBSERVERINFO (`observer`) with the learner's (acceptedEpoch, last zxid):
    /// it must match its type in my configuration (else `Err`, the outputs); the learner is
    /// registered, counted toward the epoch while none is picked, or sent LEADERINFO.
    fn learner_info(
        &mut self,
        from: u64,
        observer: bool,
        (accepted_epoch, last_zxid): (u64, u64),
        out: &mut Vec<Output>,
    ) -> Result<(), Vec<Output>> {
        if observer != self.cfg.observers.contains(&from) {
            let (said, is) = if observer {
                ("OBSERVERINFO", "a participant")
            } else {
                ("FOLLOWERINFO", "an observer")
            };
            return Err(self.protocol_error(
                from,
                &format!("server {from} sent {said} but is {is} in my configuration"),
            ));
        }
        self.peers.insert(
            from,
            Peer {
                stage: Stage::Info,
                epoch_acked: false,
                last_heard: self.beats,
                last_zxid,
                acked: 0,
                sync_last: 0,
                observer,
                informed: 0,
            },
        );
        match self.epoch {
            None => {
                // An observer's acceptedEpoch is no promise: it waits for a voters' epoch.
                if !observer {
                    self.infos.insert(from, accepted_epoch);
                }
                self.try_pick_epoch(out);
            }
            Some(epoch) => self.send_leader_info(from, epoch, out),
        }
        Ok(())
    }

    /// ACKEPOCH: in discovery a vote toward the epoch (a follower ahead of me is closed), or
    /// only its last zxid (a repeated epoch, an observer); once the epoch is established, the
    /// start of its sync. Before LEADERINFO it is a protocol error (`Err`, the outputs).
    fn ack_epoch(
        &mut self,
        from: u64,
        current_epoch: u64,
        last_zxid: u64,
        out: &mut Vec<Output>,
    ) -> Result<(), Vec<Output>> {
        if self.stage(from) != Some(Stage::EpochSent) {
            return Err(self.protocol_error(from, "ACKEPOCH before LEADERINFO"));
        }
        let counts = self.peers.get_mut(&from).is_some_and(|p| {
            p.epoch_acked = true;
            !p.observer
        });
        if self.phase == ZabPhase::Discovery && (current_epoch == REPEATED_EPOCH || !counts) {
            // Synced once the epoch is established, but no vote toward it.
            self.set_last_zxid(from, last_zxid);
        } else if self.phase == ZabPhase::Discovery {
            if (current_epoch, last_zxid) > self.summary {
                self.peers.remove(&from);
                out.push(Output::Close(
                    from,
                    format!(
                        "follower is ahead of the leader: its (epoch {current_epoch}, zxid {last_zxid:#x}) > ours (epoch {}, zxid {:#x})",
                        self.summary.0, self.summary.1
                    ),
                ));
                return Ok(());
            }
            self.set_last_zxid(from, last_zxid);
            self.epoch_acks.insert(from);
            self.try_finish_discovery(out);
        } else {
            self.set_last_zxid(from, last_zxid);
            self.sync_peer(from, out);
        }
        Ok(())
    }

    /// ACK: of NEWLEADER from a synced learner (it is up: counted toward the sync, or told
    /// UPTODATE), or of proposals from one that is up (counted toward commits). An ACK before
    /// sync, or from an observer, is a protocol error (`Err`, the outputs).
    fn ack(&mut self, from: u64, zxid: u64, out: &mut Vec<Output>) -> Result<(), Vec<Output>> {
        match self.stage(from) {
            Some(Stage::Synced) => {
                let expected = make_zxid(self.epoch.unwrap_or(0), 0);
                if zxid != expected {
                    return Err(self.protocol_error(from, "ACK before the NEWLEADER ack"));
                }
                if let Some(p) = self.peers.get_mut(&from) {
                    p.stage = Stage::Up;
                    p.acked = p.sync_last;
                }
                let observer = self.peers.get(&from).is_some_and(|p| p.observer);
                match self.phase {
                    ZabPhase::Sync if observer => {}
                    ZabPhase::Sync => {
                        self.newleader_acks.insert(from);
                        self.try_finish_sync(out);
                    }
                    _ => {
                        out.push(Output::Send(
                            from,
                            Msg::UpToDate {
                                committed_zxid: self.committed,
                            },
                        ));
                        self.maybe_commit(out);
                    }
                }
            }
            Some(Stage::Up) => {
                let last = self.last_zxid();
                let bugs = self.cfg.bugs;
                match self.peers.get_mut(&from) {
                    Some(p) if !p.counts(bugs) => {
                        return Err(self.protocol_error(from, "an observer ACKed a proposal"))
                    }
                    Some(p) => p.acked = p.acked.max(zxid.min(last)),
                    None => {}
                }
                self.maybe_commit(out);
            }
            _ => return Err(self.protocol_error(from, "ACK before sync")),
        }
        Ok(())
    }

    pub fn disconnected(&mut self, sid: u64) -> Vec<Output> {
        // Promises already counted (epoch, NEWLEADER acks) stay counted: they were durable.
        self.peers.remove(&sid);
        Vec::new()
    }

    /// One beat (tickTime/2): ping, and check that a quorum is still with us.
    pub fn tick(&mut self) -> Vec<Output> {
        let mut out = Vec::new();
        if self.ended {
            return out;
        }
        self.beats += 1;
        // As ZooKeeper's LearnerHandler: a silent follower is cut off, which also bounds what
        // queues up for it (a SIGSTOPped follower would otherwise grow the leader's memory).
        let silent: Vec<u64> = self
            .peers
            .iter()
            .filter(|(_, p)| {
                let limit = if p.stage == Stage::Up {
                    self.cfg.sync_limit_beats
                } else {
                    self.cfg.init_limit_beats
                };
                self.beats - p.last_heard > limit
            })
            .map(|(s, _)| *s)
            .collect();
        for sid in silent {
            self.peers.remove(&sid);
            out.push(Output::Close(
                sid,
                format!(
                    "follower silent for more than its limit ({} beats)",
                    self.beats
                ),
            ));
        }
        for (sid, p) in &self.peers {
            if matches!(p.stage, Stage::Synced | Stage::Up) {
                out.push(Output::Send(*sid, Msg::Ping));
            }
        }
        if self.phase != ZabPhase::Broadcast {
            if self.beats > self.cfg.init_limit_beats {
                self.step_down(
                    format!(
                        "no quorum of followers synced within initLimit ({} beats); phase {:?}",
                        self.cfg.init_limit_beats, self.phase
                    ),
                    &mut out,
                );
            }
        } else {
            // Silent followers were cut off above: every remaining synced voter is alive.
            let bugs = self.cfg.bugs;
            let alive = 1 + self
                .peers
                .values()
                .filter(|p| p.stage == Stage::Up && p.counts(bugs))
                .count();
            // Seeded leader-never-steps-down: the lost quorum goes unnoticed.
            let blind = self.cfg.bugs.has(Bug::LeaderNeverStepsDown);
            if alive < self.cfg.quorum && !blind {
                self.step_down(
                    format!(
                        "only {alive} of the quorum {} heard within syncLimit ({} beats)",
                        self.cfg.quorum, self.cfg.sync_limit_beats
                    ),
                    &mut out,
                );
            }
        }
        out
    }

    /// Client writes: their zxids, or why they were not proposed (certainly not applied).
    pub fn propose(&mut self, values: Vec<serde_json::Value>) -> Proposed {
        let mut out = Vec::new();
        if self.ended || self.phase != ZabPhase::Broadcast {
            return Err((
                format!("leader not serving yet (phase {:?})", self.phase),
                out,
            ));
        }
        let epoch = self.epoch.unwrap_or(0);
        let last = self.last_zxid();
        let first = if epoch_of(last) == epoch {
            counter_of(last) + 1
        } else {
            1
        };
        if first + values.len() as u64 - 1 > MAX_COUNTER {
            let why = format!("zxid counter of epoch {epoch} exhausted, forcing a new election");
            self.step_down(why.clone(), &mut out);
            return Err((why, out));
        }
        let txns: Vec<Txn> = values
            .into_iter()
            .enumerate()
            .map(|(i, value)| Txn {
                zxid: make_zxid(epoch, first + i as u64),
                value,
            })
            .collect();
        let reconfig = self
            .check_reconfigs(&txns)
            .map_err(|why| (why, Vec::new()))?;
        if reconfig.is_some() {
            self.reconfig = reconfig;
        }
        let zxids: Vec<u64> = txns.iter().map(|t| t.zxid).collect();
        let new_last = *zxids.last().unwrap_or(&last);
        out.push(Output::Persist(PersistOp::Append(txns.clone())));
        let early = self.cfg.bugs.has(Bug::ObserverInformedEarly);
        for (sid, p) in self.peers.iter_mut() {
            if !matches!(p.stage, Stage::Synced | Stage::Up) {
                continue;
            }
            if p.counts(self.cfg.bugs) {
                for t in &txns {
                    out.push(Output::Send(
                        *sid,
                        Msg::Proposal {
                            zxid: t.zxid,
                            value: t.value.clone(),
                        },
                    ));
                }
            } else if early {
                // Seeded observer-informed-early: observers learn a txn as committed when it
                // is only proposed; if no quorum takes it, they serve a txn nobody committed.
                for t in &txns {
                    out.push(Output::Send(*sid, inform(t)));
                }
                p.informed = new_last;
            }
        }
        self.history.extend(txns);
        out.push(Output::Sync {
            self_ack: Some(new_last),
        });
        Ok((zxids, out))
    }

    /// The shell's fsync of our own log reached `zxid`: our own ACK.
    pub fn self_durable(&mut self, zxid: u64) -> Vec<Output> {
        let mut out = Vec::new();
        self.self_durable = self.self_durable.max(zxid);
        self.maybe_commit(&mut out);
        out
    }

    fn stage(&self, sid: u64) -> Option<Stage> {
        self.peers.get(&sid).map(|p| p.stage)
    }

    fn set_last_zxid(&mut self, sid: u64, z: u64) {
        if let Some(p) = self.peers.get_mut(&sid) {
            p.last_zxid = z;
        }
    }

    fn protocol_error(&mut self, from: u64, what: &str) -> Vec<Output> {
        self.peers.remove(&from);
        vec![Output::Close(from, format!("protocol error: {what}"))]
    }

    fn step_down(&mut self, why: String, out: &mut Vec<Output>) {
        if !self.ended {
            self.ended = true;
            out.push(Output::StepDown(why));
        }
    }

    fn send_leader_info(&mut self, sid: u64, epoch: u64, out: &mut Vec<Output>) {
        if let Some(p) = self.peers.get_mut(&sid) {
            p.stage = Stage::EpochSent;
            out.push(Output::Send(sid, Msg::LeaderInfo { epoch }));
        }
    }

    fn try_pick_epoch(&mut self, out: &mut Vec<Output>) {
        if self.epoch.is_some() || self.infos.len() < self.cfg.quorum {
            return;
        }
        let epoch = self.infos.values().max().copied().unwrap_or(0) + 1;
        debug_assert!(self.infos.keys().all(|s| !self.cfg.observers.contains(s)));
        self.epoch = Some(epoch);
        // Persisted before any follower hears of it.
        out.push(Output::Persist(PersistOp::AcceptedEpoch(epoch)));
        self.epoch_acks.insert(self.cfg.sid);
        let waiting: Vec<u64> = self
            .peers
            .iter()
            .filter(|(_, p)| p.stage == Stage::Info)
            .map(|(s, _)| *s)
            .collect();
        for sid in waiting {
            self.send_leader_info(sid, epoch, out);
        }
        self.try_finish_discovery(out);
    }

    fn try_finish_discovery(&mut self, out: &mut Vec<Output>) {
        let Some(epoch) = self.epoch else { return };
        if self.phase != ZabPhase::Discovery || self.epoch_acks.len() < self.cfg.quorum {
            return;
        }
        self.phase = ZabPhase::Sync;
        out.push(Output::Persist(PersistOp::CurrentEpoch(epoch)));
        self.newleader_acks.insert(self.cfg.sid);
        let ready: Vec<u64> = self
            .peers
            .iter()
            .filter(|(_, p)| p.stage == Stage::EpochSent && p.epoch_acked)
            .map(|(s, _)| *s)
            .collect();
        for sid in ready {
            self.sync_peer(sid, out);
        }
        self.try_finish_sync(out);
    }

    fn sync_peer(&mut self, sid: u64, out: &mut Vec<Output>) {
        let Some(epoch) = self.epoch else { return };
        let Some(p) = self.peers.get_mut(&sid) else {
            return;
        };
        // An observer is sent only what is committed; the rest follows as INFORMs.
        let end = if p.counts(self.cfg.bugs) {
            self.history.len()
        } else {
            self.history.partition_point(|t| t.zxid <= self.committed)
        };
        let mut plan = plan_sync(&self.history, p.last_zxid, self.cfg.snap_threshold);
        if self.cfg.bugs.has(Bug::DiffWithoutTrunc)
            && plan.mode == SyncMode::Trunc
            && plan.send_from < self.history.len()
        {
            // Seeded ZOOKEEPER-1154/1156: the follower's last txn lies between two of ours (a
            // proposal of an old epoch no quorum took); DIFF from there keeps it in its log.
            plan.mode = SyncMode::Diff;
            plan.trunc_to = 0;
        }
        let sent = &self.history[plan.send_from.min(end)..end];
        // Where the learner's log ends after this sync (a DIFF of nothing leaves it as it is).
        let last = match (sent.last(), plan.mode) {
            (Some(t), _) => t.zxid,
            (None, SyncMode::Diff) => p.last_zxid,
            (None, SyncMode::Trunc) => plan.trunc_to,
            (None, SyncMode::Snap) => 0,
        };
        out.push(Output::Send(
            sid,
            match plan.mode {
                SyncMode::Diff => Msg::Diff { last_zxid: last },
                SyncMode::Trunc => Msg::Trunc {
                    zxid: plan.trunc_to,
                },
                SyncMode::Snap => Msg::Snap { last_zxid: last },
            },
        ));
        for t in sent {
            out.push(Output::Send(sid, Msg::txn(t)));
        }
        out.push(Output::Send(
            sid,
            Msg::NewLeader {
                zxid: make_zxid(epoch, 0),
            },
        ));
        p.stage = Stage::Synced;
        p.sync_last = last;
        p.informed = last;
    }

    fn try_finish_sync(&mut self, out: &mut Vec<Output>) {
        if self.phase != ZabPhase::Sync || self.newleader_acks.len() < self.cfg.quorum {
            return;
        }
        if let Some(r) = &self.reconfig {
            if !has_quorum(&r.voters, |sid| self.newleader_acks.contains(&sid)) {
                return;
            }
        }
        // A quorum holds our whole history durably: all of it is committed in the new epoch.
        self.phase = ZabPhase::Broadcast;
        let last = self.last_zxid();
        if last > self.committed {
            self.committed = last;
            out.push(Output::Persist(PersistOp::Commit(last)));
            out.push(Output::Committed(last));
        }
        self.inform_observers(out);
        for (sid, p) in &self.peers {
            if p.stage == Stage::Up {
                out.push(Output::Send(
                    *sid,
                    Msg::UpToDate {
                        committed_zxid: self.committed,
                    },
                ));
            }
        }
        self.end_if_reconfigured(out);
    }

    fn maybe_commit(&mut self, out: &mut Vec<Output>) {
        if self.phase != ZabPhase::Broadcast {
            return;
        }
        let bugs = self.cfg.bugs;
        let mut acks: Vec<u64> = std::iter::once(self.self_durable)
            .chain(
                self.peers
                    .values()
                    .filter(|p| p.stage == Stage::Up && p.counts(bugs))
                    .map(|p| p.acked),
            )
            .collect();
        let mut need = self.cfg.quorum;
        if self.cfg.bugs.has(Bug::CommitQuorumMinority) {
            // Seeded bug: commit with one ACK too few (the leader's own, alone, of three).
            need = need.saturating_sub(1).max(1);
        }
        if acks.len() < need || need == 0 {
            return;
        }
        acks.sort_unstable_by(|a, b| b.cmp(a));
        let upto = self.reconfig_cap(acks[need - 1].min(self.last_zxid()));
        if upto <= self.committed {
            return;
        }
        self.committed = upto;
        out.push(Output::Persist(PersistOp::Commit(upto)));
        for (sid, p) in &self.peers {
            if matches!(p.stage, Stage::Synced | Stage::Up) && p.counts(bugs) {
                out.push(Output::Send(*sid, Msg::Commit { zxid: upto }));
            }
        }
        self.inform_observers(out);
        out.push(Output::Committed(upto));
        self.end_if_reconfigured(out);
    }

    /// Sends each synced observer the committed txns it has not had yet, as INFORMs.
    fn inform_observers(&mut self, out: &mut Vec<Output>) {
        let (bugs, committed) = (self.cfg.bugs, self.committed);
        for (sid, p) in self.peers.iter_mut() {
            if !matches!(p.stage, Stage::Synced | Stage::Up) || p.counts(bugs) {
                continue;
            }
            if p.informed >= committed {
                continue;
            }
            let from = self.history.partition_point(|t| t.zxid <= p.informed);
            let to = self.history.partition_point(|t| t.zxid <= committed);
            for t in &self.history[from..to] {
                out.push(Output::Send(*sid, inform(t)));
            }
            p.informed = committed;
        }
    }
}

/// Reconfig: one at a time, proposed only when its new voters can commit it, and a commit
/// covering it only with a quorum of both configs; its commit ends the term.
impl Leader {
    /// The reconfig among `txns` about to be proposed, or why they are refused (ZooKeeper's
    /// ReconfigInProgress and NewConfigNoQuorum).
    fn check_reconfigs(&self, txns: &[Txn]) -> Result<Option<PendingReconfig>, String> {
        let mut found = None;
        for r in txns.iter().filter_map(pending_reconfig) {
            if self.reconfig.is_some() || found.is_some() {
                return Err(
                    "a reconfig is in progress (ZooKeeper's ReconfigInProgress): try again once it has committed"
                        .into(),
                );
            }
            let bugs = self.cfg.bugs;
            let synced = |sid: u64| {
                sid == self.cfg.sid
                    || self
                        .peers
                        .get(&sid)
                        .is_some_and(|p| p.stage == Stage::Up && p.counts(bugs))
            };
            if !has_quorum(&r.voters, synced) {
                return Err(format!(
                    "the new config's voters {:?} have no quorum among the servers synced with the leader (ZooKeeper's NewConfigNoQuorum): bring them up first",
                    r.voters
                ));
            }
            found = Some(r);
        }
        Ok(found)
    }

    /// The commit point `upto` allows, given a pending reconfig: at most the reconfig itself,
    /// and only once a quorum of its new voters holds it durably; else just before it.
    fn reconfig_cap(&self, upto: u64) -> u64 {
        let Some(r) = &self.reconfig else { return upto };
        if upto < r.zxid {
            return upto;
        }
        let bugs = self.cfg.bugs;
        let holds = |sid: u64| {
            if sid == self.cfg.sid {
                return self.self_durable >= r.zxid;
            }
            self.peers
                .get(&sid)
                .is_some_and(|p| p.stage == Stage::Up && p.counts(bugs) && p.acked >= r.zxid)
        };
        if has_quorum(&r.voters, holds) {
            return r.zxid;
        }
        let before = self.history.partition_point(|t| t.zxid < r.zxid);
        before
            .checked_sub(1)
            .map_or(self.committed, |i| self.history[i].zxid)
    }

    /// Once the pending reconfig is committed, the term ends: every server activates the new
    /// config and elects under it (a leader it removed never leads again under it).
    fn end_if_reconfigured(&mut self, out: &mut Vec<Output>) {
        let Some(r) = &self.reconfig else { return };
        if self.committed < r.zxid {
            return;
        }
        let version = r.zxid;
        self.reconfig = None;
        // Seeded removed-leader-keeps-leading: the term goes on whatever the new config says,
        // as if this leader had designated itself (ZooKeeper hands a removed leader's role to
        // a designated one).
        if !self.cfg.bugs.has(Bug::RemovedLeaderKeepsLeading) {
            let why = format!(
                "config version {version:#x} committed: every server elects again under it"
            );
            self.step_down(why, out);
        }
    }
}

/// A reconfig txn as the leader tracks it until it commits.
fn pending_reconfig(t: &Txn) -> Option<PendingReconfig> {
    reconfig_of(t).map(|m| PendingReconfig {
        zxid: t.zxid,
        voters: m.voters(),
    })
}

/// Whether the servers `holds` says yes of are a quorum (a majority) of `voters`.
fn has_quorum(voters: &BTreeSet<u64>, holds: impl Fn(u64) -> bool) -> bool {
    let n = voters.iter().filter(|s| holds(**s)).count();
    n >= crate::api::quorum(voters.len())
}

fn inform(t: &Txn) -> Msg {
    Msg::Inform {
        zxid: t.zxid,
        value: t.value.clone(),
    }
}

/// A message's name for logs (never its value, which may be large).
pub fn short_name(m: &Msg) -> &'static str {
    match m {
        Msg::FollowerInfo { .. } => "FOLLOWERINFO",
        Msg::LeaderInfo { .. } => "LEADERINFO",
        Msg::AckEpoch { .. } => "ACKEPOCH",
        Msg::Diff { .. } => "DIFF",
        Msg::Trunc { .. } => "TRUNC",
        Msg::Snap { .. } => "SNAP",
        Msg::Txn { .. } => "TXN",
        Msg::NewLeader { .. } => "NEWLEADER",
        Msg::Ack { .. } => "ACK",
        Msg::UpToDate { .. } => "UPTODATE",
        Msg::Proposal { .. } => "PROPOSAL",
        Msg::Commit { .. } => "COMMIT",
        Msg::Ping => "PING",
        Msg::ObserverInfo { .. } => "OBSERVERINFO",
        Msg::Inform { .. } => "INFORM",
    }
}

#[cfg(test)]
impl Leader {
    /// Pretends the log already ends at `zxid` (to reach the counter's end without 4G writes).
    pub(crate) fn force_last_zxid(&mut self, zxid: u64) {
        self.history.push(Txn {
            zxid,
            value: serde_json::Value::Null,
        });
        self.self_durable = zxid;
        self.committed = zxid;
    }
}
