//! The follower's Zab state machine, with no I/O: discovery, sync, broadcast and liveness.
//!
//! Sync txns are held until NEWLEADER and then applied in one go (append, TRUNC then append, or an
//! atomic SNAP reset), fsynced, and only then is currentEpoch written and NEWLEADER acked
//! (ZOOKEEPER-3911/4785). Any message out of place ends the role: better LOOKING than a wrong log.
//!
//! An observer runs the same machine: it introduces itself with OBSERVERINFO, syncs the same way
//! (and ACKs NEWLEADER, which the leader does not count), then takes INFORMs, committed txns it
//! logs and commits at once, and never ACKs one. A PROPOSAL or COMMIT sent to an observer is out
//! of place.

use crate::api::{epoch_of, ZabPhase};
use crate::bugs::{Bug, Bugs};
use crate::txnlog::Txn;
use crate::zab::actions::{Output, PersistOp, SyncMode};
use crate::zab::leader::short_name;
use crate::zab::messages::{Msg, REPEATED_EPOCH};

#[derive(Debug, Clone)]
pub struct FollowerConfig {
    pub sid: u64,
    pub leader: u64,
    /// This server only observes (zoo.cfg `:observer`).
    pub observer: bool,
    /// Leader silence tolerated before UPTODATE, in beats (tickTime/2).
    pub init_limit_beats: u64,
    /// Leader silence tolerated in broadcast, in beats.
    pub sync_limit_beats: u64,
    /// Seeded bugs (none by default); see `node::bugs`.
    pub bugs: Bugs,
}

#[cfg(test)]
impl FollowerConfig {
    /// The table tests' server `sid` following `leader`: initLimit 10 beats, syncLimit 4.
    pub(crate) fn for_tests(sid: u64, leader: u64, observer: bool, bugs: Bugs) -> Self {
        FollowerConfig {
            sid,
            leader,
            observer,
            init_limit_beats: 10,
            sync_limit_beats: 4,
            bugs,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Discovery,
    Sync,
    /// NEWLEADER acked; proposals and commits may already arrive.
    AwaitUpToDate,
    Broadcast,
}

pub struct Follower {
    cfg: FollowerConfig,
    phase: Phase,
    accepted_epoch: u64,
    current_epoch: u64,
    last_zxid: u64,
    committed: u64,
    epoch: Option<u64>,
    /// Sync mode and the zxid the sent txns must follow.
    mode: Option<(SyncMode, u64)>,
    /// Where DIFF/SNAP said the sync ends: checked at NEWLEADER.
    sync_end: Option<u64>,
    pending: Vec<Txn>,
    synced_by: Option<SyncMode>,
    silent_beats: u64,
    ended: bool,
}

impl Follower {
    pub fn new(
        cfg: FollowerConfig,
        accepted_epoch: u64,
        current_epoch: u64,
        last_zxid: u64,
        committed: u64,
    ) -> Follower {
        Follower {
            cfg,
            phase: Phase::Discovery,
            accepted_epoch,
            current_epoch,
            last_zxid,
            committed,
            epoch: None,
            mode: None,
            sync_end: None,
            pending: Vec::new(),
            synced_by: None,
            silent_beats: 0,
            ended: false,
        }
    }

    pub fn phase(&self) -> ZabPhase {
        match self.phase {
            Phase::Discovery => ZabPhase::Discovery,
            Phase::Sync | Phase::AwaitUpToDate => ZabPhase::Sync,
            Phase::Broadcast => ZabPhase::Broadcast,
        }
    }

    /// How the leader synced us, once NEWLEADER arrived.
    pub fn synced_by(&self) -> Option<SyncMode> {
        self.synced_by
    }

    pub fn start(&mut self) -> Vec<Output> {
        let (sid, accepted_epoch, last_zxid) = (self.cfg.sid, self.accepted_epoch, self.last_zxid);
        vec![self.send(if self.cfg.observer {
            Msg::ObserverInfo {
                sid,
                accepted_epoch,
                last_zxid,
            }
        } else {
            Msg::FollowerInfo {
                sid,
                accepted_epoch,
                last_zxid,
            }
        })]
    }

    /// Takes PROPOSALs and COMMITs and ACKs them: a follower (and an observer under the seeded
    /// observer-ack-counted bug, whose leader treats it as one).
    fn takes_proposals(&self) -> bool {
        !self.cfg.observer || self.cfg.bugs.has(Bug::ObserverAckCounted)
    }

    /// One message from the leader. One arm per (phase, message) of the protocol, as
    /// ZooKeeper's `Learner` handles its packets: the table read top to bottom is the
    /// protocol; the longer arms (LEADERINFO, NEWLEADER) are methods of their own.
    pub fn step(&mut self, msg: Msg) -> Vec<Output> {
        let mut out = Vec::new();
        if self.ended {
            return out;
        }
        self.silent_beats = 0;
        match (self.phase, msg) {
            (Phase::Discovery, Msg::LeaderInfo { epoch }) => {
                if let Err(end) = self.leader_info(epoch, &mut out) {
                    return end;
                }
            }
            (Phase::Sync, Msg::Diff { last_zxid }) if self.mode.is_none() => {
                self.mode = Some((SyncMode::Diff, self.last_zxid));
                self.sync_end = Some(last_zxid);
            }
            (Phase::Sync, Msg::Trunc { zxid }) if self.mode.is_none() => {
                if zxid > self.last_zxid {
                    return self.end(format!(
                        "protocol error: TRUNC to {zxid:#x}, past my last zxid {:#x}",
                        self.last_zxid
                    ));
                }
                self.mode = Some((SyncMode::Trunc, zxid));
            }
            (Phase::Sync, Msg::Snap { last_zxid }) if self.mode.is_none() => {
                self.mode = Some((SyncMode::Snap, 0));
                self.sync_end = Some(last_zxid);
            }
            (Phase::Sync, Msg::Txn { zxid, value }) if self.mode.is_some() => {
                let after = self
                    .pending
                    .last()
                    .map_or(self.mode.map_or(0, |m| m.1), |t| t.zxid);
                if zxid <= after {
                    return self.end(format!(
                        "protocol error: sync txn {zxid:#x} does not follow {after:#x}"
                    ));
                }
                self.pending.push(Txn { zxid, value });
            }
            (Phase::Sync, Msg::NewLeader { zxid })
                if self.mode.is_some() && Some(epoch_of(zxid)) == self.epoch =>
            {
                if let Err(end) = self.new_leader(zxid, &mut out) {
                    return end;
                }
            }
            (Phase::AwaitUpToDate, Msg::UpToDate { committed_zxid }) => {
                self.phase = Phase::Broadcast;
                self.commit(committed_zxid, &mut out);
            }
            (Phase::AwaitUpToDate | Phase::Broadcast, Msg::Inform { zxid, value })
                if self.cfg.observer =>
            {
                if let Err(end) = self.append_next("INFORM", zxid, value, &mut out) {
                    return end;
                }
                // Committed already: logged, committed and made durable, never ACKed.
                self.commit(zxid, &mut out);
                out.push(Output::Sync { self_ack: None });
            }
            (Phase::AwaitUpToDate | Phase::Broadcast, Msg::Proposal { zxid, value })
                if self.takes_proposals() =>
            {
                if let Err(end) = self.append_next("proposal", zxid, value, &mut out) {
                    return end;
                }
                if self.cfg.bugs.has(Bug::AckBeforeFsync) {
                    // Seeded ZOOKEEPER-3911: the ACK leaves at once, the txn waits for the next
                    // batch fsync (up to initLimit ticks later).
                    out.push(self.send(Msg::Ack { zxid }));
                    out.push(Output::BatchSync);
                } else {
                    out.push(Output::Sync { self_ack: None });
                    out.push(self.send(Msg::Ack { zxid }));
                }
            }
            (Phase::AwaitUpToDate | Phase::Broadcast, Msg::Commit { zxid })
                if self.takes_proposals() =>
            {
                self.commit(zxid, &mut out);
            }
            (_, Msg::Ping) => out.push(self.send(Msg::Ping)),
            (phase, other) => {
                return self.end(format!(
                    "protocol error: {} from the leader in phase {phase:?}",
                    short_name(&other)
                ))
            }
        }
        out
    }

    /// One beat (tickTime/2) without anything from the leader counts toward its silence limit.
    pub fn tick(&mut self) -> Vec<Output> {
        if self.ended {
            return Vec::new();
        }
        self.silent_beats += 1;
        let limit = if self.phase == Phase::Broadcast {
            self.cfg.sync_limit_beats
        } else {
            self.cfg.init_limit_beats
        };
        if self.silent_beats > limit {
            return self.end(format!(
                "leader {} silent for {} beats (limit {limit}) in phase {:?}",
                self.cfg.leader, self.silent_beats, self.phase
            ));
        }
        Vec::new()
    }

    /// LEADERINFO in discovery: an epoch older than my acceptedEpoch ends the role (`Err`, its
    /// outputs); a newer one is accepted (persisted), and ACKEPOCH answers with my epoch and
    /// last zxid, or REPEATED_EPOCH for the epoch already accepted.
    fn leader_info(&mut self, epoch: u64, out: &mut Vec<Output>) -> Result<(), Vec<Output>> {
        if epoch < self.accepted_epoch {
            return Err(self.end(format!(
                "leader {} offers epoch {epoch}, older than my acceptedEpoch {}",
                self.cfg.leader, self.accepted_epoch
            )));
        }
        // Seeded bug refuse-repeated-epoch: the epoch already accepted is refused as
        // if older, where ZooKeeper's Learner acks it with -1 (REPEATED_EPOCH): a
        // follower that lost a leader still leading that epoch cannot rejoin it.
        if epoch == self.accepted_epoch && self.cfg.bugs.has(Bug::RefuseRepeatedEpoch) {
            return Err(self.end(format!(
                "leader {} offers epoch {epoch}, not newer than my acceptedEpoch {}",
                self.cfg.leader, self.accepted_epoch
            )));
        }
        let current_epoch = if epoch > self.accepted_epoch {
            self.accepted_epoch = epoch;
            out.push(Output::Persist(PersistOp::AcceptedEpoch(epoch)));
            self.current_epoch
        } else {
            REPEATED_EPOCH
        };
        self.epoch = Some(epoch);
        self.phase = Phase::Sync;
        out.push(self.send(Msg::AckEpoch {
            current_epoch,
            last_zxid: self.last_zxid,
        }));
        Ok(())
    }

    /// NEWLEADER after the sync's txns: the sync applied to my log (truncated, reset or
    /// appended), made durable before the new epoch and the ACK (unless a seeded bug reorders
    /// them), then up-to-date is awaited. A sync that ended elsewhere than announced ends the
    /// role (`Err`, its outputs).
    fn new_leader(&mut self, zxid: u64, out: &mut Vec<Output>) -> Result<(), Vec<Output>> {
        let (mode, base) = self.mode.take().unwrap_or((SyncMode::Diff, 0));
        let txns = std::mem::take(&mut self.pending);
        let new_last = txns.last().map_or(base, |t| t.zxid);
        if let Some(end) = self.sync_end.take().filter(|e| *e != new_last) {
            return Err(self.end(format!(
                "protocol error: sync ended at {new_last:#x}, the leader announced {end:#x}"
            )));
        }
        match mode {
            SyncMode::Diff => {}
            SyncMode::Trunc => out.push(Output::Persist(PersistOp::Truncate(base))),
            SyncMode::Snap => {}
        }
        if mode == SyncMode::Snap {
            out.push(Output::Persist(PersistOp::Reset(txns)));
            self.committed = 0;
        } else if !txns.is_empty() {
            out.push(Output::Persist(PersistOp::Append(txns)));
        }
        self.committed = self.committed.min(new_last);
        self.last_zxid = new_last;
        let epoch = epoch_of(zxid);
        if self.cfg.bugs.has(Bug::EpochBeforeTxns) {
            // Seeded ZOOKEEPER-4785: the epoch and the ACK before the txns are durable;
            // the synced txns wait for the next batch fsync.
            out.push(Output::Persist(PersistOp::CurrentEpoch(epoch)));
            out.push(self.send(Msg::Ack { zxid }));
            out.push(Output::BatchSync);
        } else {
            // Txns durable, then the epoch, then the ACK (ZOOKEEPER-3911/4785).
            out.push(Output::Sync { self_ack: None });
            out.push(Output::Persist(PersistOp::CurrentEpoch(epoch)));
            out.push(self.send(Msg::Ack { zxid }));
        }
        self.current_epoch = epoch;
        self.synced_by = Some(mode);
        self.phase = Phase::AwaitUpToDate;
        Ok(())
    }

    /// Logs the leader's next txn (a PROPOSAL or an INFORM): it must come after my last zxid,
    /// in the epoch I synced to; else the role ends (`Err`, its outputs).
    fn append_next(
        &mut self,
        what: &str,
        zxid: u64,
        value: serde_json::Value,
        out: &mut Vec<Output>,
    ) -> Result<(), Vec<Output>> {
        if zxid <= self.last_zxid || Some(epoch_of(zxid)) != self.epoch {
            return Err(self.end(format!(
                "protocol error: {what} {zxid:#x} after {:#x} in epoch {:?}",
                self.last_zxid, self.epoch
            )));
        }
        self.last_zxid = zxid;
        out.push(Output::Persist(PersistOp::Append(vec![Txn {
            zxid,
            value,
        }])));
        Ok(())
    }

    fn commit(&mut self, zxid: u64, out: &mut Vec<Output>) {
        let upto = zxid.min(self.last_zxid);
        if upto > self.committed {
            self.committed = upto;
            out.push(Output::Persist(PersistOp::Commit(upto)));
        }
    }

    fn send(&self, m: Msg) -> Output {
        Output::Send(self.cfg.leader, m)
    }

    fn end(&mut self, why: String) -> Vec<Output> {
        self.ended = true;
        vec![Output::StepDown(why)]
    }
}
