//! One simulated fle-node server: the node's own election and Zab machines
//! (`fle_node::election::Election`, `zab::leader::Leader`, `zab::follower::Follower`, with
//! their sync planning and seeded bugs), its follow back-off (`fle_node::follow_streak`) and
//! fsync batch (`zab::batch`), over a simulated disk.
//!
//! What this file adds is the shell the real server's tokio loops are (`server.rs`, `lead.rs`,
//! `follow.rs`): which machine gets which input and what happens to its outputs. It decides
//! nothing itself; every protocol decision is the machines'. The world (`world.rs`) delivers
//! messages and timers and carries out the [`Effect`]s returned here.

use super::disk::Disk;
use crate::api::{ElectionSummary, NodeStatus, ServerState, ZabPhase};
use fle_node::bugs::Bugs;
use fle_node::election::{Election, ElectionConfig, ElectionCounters, Output as ElectionOutput};
use fle_node::follow_streak::FollowStreak;
use fle_node::vote::Vote;
use fle_node::wire::Notification;
use fle_node::zab::actions::Output as ZabOutput;
use fle_node::zab::batch::Batch;
use fle_node::zab::follower::Follower;
use fle_node::zab::leader::Leader;
use fle_node::zab::messages::Msg;
use fle_node::zab::ZabConfig;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// The cluster's timing and the seeded bugs, shared by every server.
#[derive(Debug, Clone)]
pub struct Timing {
    pub tick: Duration,
    pub init_limit: u32,
    pub sync_limit: u32,
    pub finalize_wait: Duration,
    pub max_notification_interval: Duration,
    pub bugs: Bugs,
}

/// What the world must do after a server handled an input.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// An election notification to another server.
    Notify { to: u64, n: Notification },
    /// A Zab message on one of this server's connections.
    Zab { conn: u64, msg: Msg },
    /// This server closes a connection.
    Close { conn: u64 },
    /// Dial the leader's quorum port at `at` (ns), for follow attempt `attempt`.
    Dial { leader: u64, attempt: u64, at: u64 },
    /// A client write is answered (op id, outcome).
    Reply { op: u64, outcome: WriteOutcome },
    /// Arm the election's timer for this instant (ns).
    ElectionTimer { at: u64 },
    /// Start the role's beat (a leader's every half tick, a follower's ten times a tick).
    Beat { period_ns: u64, attempt: u64 },
    /// The server's loop waits here for an fsync (`zab::exec` awaits it): what it sends,
    /// answers or closes after this goes out once the fsync is done.
    Fsync,
    /// The process exits: its store refused a write (as the node's `zab::exec` returns the
    /// store's error and the node exits), or its machine panicked (`World::handle`).
    Exit { why: String },
}

/// A client write's answer, as `POST /write` gives it.
#[derive(Debug, Clone, PartialEq)]
pub enum WriteOutcome {
    Committed(u64),
    /// Certainly not applied (503).
    Rejected(String),
    /// May or may not be applied (504).
    Unknown(String),
}

/// The process: running, stopped by SIGSTOP, or not running (one definition, the faults').
pub use crate::nemesis::faults::Life;

enum Role {
    Looking,
    Leading {
        sm: Box<Leader>,
        /// sid -> connection, once its FOLLOWERINFO arrived.
        conns: BTreeMap<u64, u64>,
        /// zxid -> (op, deadline ns): writes waiting for their commit.
        pending: BTreeMap<u64, (u64, u64)>,
    },
    Following {
        leader: u64,
        /// Which follow this is (a dial or beat of an earlier one is stale).
        attempt: u64,
        /// When dialing gives up (ns).
        dial_deadline: u64,
        link: Option<(u64, Box<Follower>)>,
        batch: Batch,
    },
}

pub struct Server {
    pub sid: u64,
    pub life: Life,
    pub disk: Disk,
    election: Election,
    role: Role,
    streak: FollowStreak,
    last_election: Option<ElectionSummary>,
    /// The role reached broadcast (reported once per role, as the real loop's progress watch).
    broadcast_seen: bool,
    started_ns: u64,
    attempts: u64,
    /// Connections whose FOLLOWERINFO arrived while this server did not lead: the real
    /// server's quorum-port lobby, taken by its next term: (conn, its FOLLOWERINFO).
    lobby: Vec<(u64, Msg)>,
    timing: Timing,
    /// Every server of the ensemble, voters and observers.
    members: Vec<u64>,
    observers: Vec<u64>,
    base: Instant,
    /// Election notifications this server's machine has sent, re-sends and answers included
    /// (a scenario's measure of back-off and silence).
    pub notifications_sent: u64,
    /// A test's stand-in for a machine bug that panics: the next Zab frame panics.
    #[cfg(test)]
    pub panics: bool,
}

impl Server {
    /// Server `sid` of `members`, of which `observers` only observe.
    pub fn new(
        sid: u64,
        members: &[u64],
        observers: &[u64],
        timing: &Timing,
        base: Instant,
    ) -> Server {
        let election = Election::new(Self::election_config(sid, members, observers, timing), base);
        Server {
            sid,
            life: Life::Down,
            disk: Disk::default(),
            election,
            role: Role::Looking,
            streak: FollowStreak::default(),
            last_election: None,
            broadcast_seen: false,
            started_ns: 0,
            attempts: 0,
            lobby: Vec::new(),
            timing: timing.clone(),
            members: members.to_vec(),
            observers: observers.to_vec(),
            base,
            notifications_sent: 0,
            #[cfg(test)]
            panics: false,
        }
    }

    fn election_config(sid: u64, members: &[u64], observers: &[u64], t: &Timing) -> ElectionConfig {
        ElectionConfig {
            sid,
            voters: members
                .iter()
                .filter(|s| !observers.contains(s))
                .copied()
                .collect(),
            observers: observers.iter().copied().collect(),
            finalize_wait: t.finalize_wait,
            max_notification_interval: t.max_notification_interval,
            bugs: t.bugs,
            config_bytes: Vec::new(),
            config_version: 0,
            removed: Default::default(),
        }
    }

    fn own_election_config(&self) -> ElectionConfig {
        Self::election_config(self.sid, &self.members, &self.observers, &self.timing)
    }

    fn at(&self, ns: u64) -> Instant {
        self.base + Duration::from_nanos(ns)
    }

    fn zab_config(&self) -> ZabConfig {
        let mut z = ZabConfig::new(
            self.sid,
            BTreeMap::new(),
            self.observers.iter().copied().collect(),
            self.timing.tick,
            self.timing.init_limit,
            self.timing.sync_limit,
        );
        z.quorum = self.own_election_config().quorum();
        z.bugs = self.timing.bugs;
        z
    }

    /// The process starts (or restarts) on what its disk holds, and looks for a leader.
    pub fn start(&mut self, now: u64) -> Vec<Effect> {
        let found = self.disk.open();
        self.life = Life::Up;
        self.started_ns = now;
        self.streak = FollowStreak::default();
        self.last_election = None;
        self.lobby.clear();
        self.election = Election::new(self.own_election_config(), self.at(now));
        let last = found.txns.last().map_or(0, |t| t.zxid);
        self.look(now, last, found.current_epoch)
    }

    /// SIGKILL: memory and connections are gone; the disk keeps its page cache.
    pub fn kill(&mut self) -> (Vec<u64>, Vec<u64>) {
        self.life = Life::Down;
        let (conns, ops) = self.drop_role();
        let mut conns = conns;
        conns.extend(self.lobby.drain(..).map(|(c, _)| c));
        (conns, ops)
    }

    /// The role's connections and the ops it still owed an answer, as it is dropped.
    fn drop_role(&mut self) -> (Vec<u64>, Vec<u64>) {
        let role = std::mem::replace(&mut self.role, Role::Looking);
        match role {
            Role::Leading { conns, pending, .. } => (
                conns.values().copied().collect(),
                pending.values().map(|(op, _)| *op).collect(),
            ),
            Role::Following { link, .. } => (link.map(|(c, _)| c).into_iter().collect(), vec![]),
            Role::Looking => (vec![], vec![]),
        }
    }

    fn look(&mut self, now: u64, zxid: u64, epoch: u64) -> Vec<Effect> {
        let out = self.election.start_looking(self.at(now), zxid, epoch);
        self.election_outputs(now, out)
    }

    pub fn on_notification(&mut self, now: u64, from: u64, n: Notification) -> Vec<Effect> {
        let out = self.election.step(self.at(now), from, n);
        self.election_outputs(now, out)
    }

    pub fn on_election_timer(&mut self, now: u64) -> Vec<Effect> {
        let out = self.election.tick(self.at(now));
        self.election_outputs(now, out)
    }

    fn election_outputs(&mut self, now: u64, out: Vec<ElectionOutput>) -> Vec<Effect> {
        let mut effects = Vec::new();
        for o in out {
            match o {
                ElectionOutput::Send { to, notification } => {
                    self.notifications_sent += 1;
                    effects.push(Effect::Notify {
                        to,
                        n: notification,
                    })
                }
                ElectionOutput::Decided(d) => {
                    self.last_election = Some(d.summary());
                    effects.extend(self.decided(now, d.state, d.vote.leader));
                }
                // A simulated ensemble never reconfigures: every config is version 0, and
                // no notification carries a newer one.
                ElectionOutput::NewerConfig(_) => {}
            }
        }
        if let Some(deadline) = self.election.next_deadline() {
            let at = deadline.saturating_duration_since(self.base).as_nanos() as u64;
            effects.push(Effect::ElectionTimer { at: at.max(now) });
        }
        effects
    }

    /// `server.rs`'s `decided`: start the role the election chose.
    fn decided(&mut self, now: u64, state: ServerState, leader: u64) -> Vec<Effect> {
        self.attempts += 1;
        self.broadcast_seen = false;
        let zab = self.zab_config();
        let now_t = tokio::time::Instant::from_std(self.at(now));
        let delay = self.streak.delay(zab.tick, zab.init_limit);
        self.streak
            .started(state != ServerState::Leading, now_t + delay);
        if state == ServerState::Leading {
            let sm = Leader::new(
                zab.leader_config(),
                self.disk.accepted_epoch,
                self.disk.current_epoch,
                self.disk.txns().to_vec(),
                self.disk.committed(),
            );
            self.role = Role::Leading {
                sm: Box::new(sm),
                conns: BTreeMap::new(),
                pending: BTreeMap::new(),
            };
            let mut effects = vec![Effect::Beat {
                period_ns: (zab.tick / 2).as_nanos() as u64,
                attempt: self.attempts,
            }];
            let out = self.leader().map(|l| l.start()).unwrap_or_default();
            effects.extend(self.leader_outputs(now, out));
            // Connections that came before the term (the lobby) are taken first.
            for (conn, info) in std::mem::take(&mut self.lobby) {
                effects.extend(self.on_leader_frame(now, conn, info));
            }
            effects
        } else {
            let dial_at = now + delay.as_nanos() as u64;
            self.role = Role::Following {
                leader,
                attempt: self.attempts,
                dial_deadline: dial_at + (zab.tick * zab.init_limit).as_nanos() as u64,
                link: None,
                batch: Batch::new(zab.tick * zab.init_limit),
            };
            vec![Effect::Dial {
                leader,
                attempt: self.attempts,
                at: dial_at,
            }]
        }
    }

    fn leader(&mut self) -> Option<&mut Leader> {
        match &mut self.role {
            Role::Leading { sm, .. } => Some(sm),
            _ => None,
        }
    }

    /// The leader this server follows and whether its Zab connection to it is up; None when
    /// it does not follow.
    #[cfg(test)]
    pub fn follows(&self) -> Option<(u64, bool)> {
        match &self.role {
            Role::Following { leader, link, .. } => Some((*leader, link.is_some())),
            _ => None,
        }
    }

    /// The follow attempt the world's dial or beat belongs to, if it is still this one.
    pub fn following(&self, attempt: u64) -> Option<(u64, u64)> {
        match &self.role {
            Role::Following {
                leader,
                attempt: a,
                dial_deadline,
                link: None,
                ..
            } if *a == attempt => Some((*leader, *dial_deadline)),
            _ => None,
        }
    }

    pub fn attempt(&self) -> u64 {
        self.attempts
    }

    /// The election machine's dropped-message counters (since the process last started).
    pub fn election_counters(&self) -> ElectionCounters {
        self.election.counters()
    }

    /// The vote the election machine proposes now (its last one once it decided).
    pub fn proposal(&self) -> Vote {
        self.election.proposal()
    }

    /// The dial succeeded: the follower machine starts on connection `conn`.
    pub fn connected(&mut self, now: u64, conn: u64) -> Vec<Effect> {
        let zab = self.zab_config();
        let (accepted, current, last, committed) = (
            self.disk.accepted_epoch,
            self.disk.current_epoch,
            self.disk.last_zxid(),
            self.disk.committed(),
        );
        let Role::Following {
            leader,
            link,
            attempt,
            ..
        } = &mut self.role
        else {
            return vec![Effect::Close { conn }];
        };
        let mut sm = Follower::new(
            zab.follower_config(*leader),
            accepted,
            current,
            last,
            committed,
        );
        let out = sm.start();
        let attempt = *attempt;
        *link = Some((conn, Box::new(sm)));
        let mut effects = vec![Effect::Beat {
            period_ns: zab.silence_check().as_nanos() as u64,
            attempt,
        }];
        effects.extend(self.follower_outputs(now, out));
        effects
    }

    /// Dialing gave up (`follow.rs`: could not reach the leader within initLimit ticks).
    pub fn dial_failed(&mut self, now: u64, leader: u64) -> Vec<Effect> {
        self.role_ended(now, format!("could not reach leader {leader}"))
    }

    /// A Zab frame arrived on `conn` (from a follower when leading, else from the leader).
    pub fn on_frame(&mut self, now: u64, conn: u64, msg: Msg) -> Vec<Effect> {
        #[cfg(test)]
        assert!(!self.panics, "a test's machine panic on {msg:?}");
        match &mut self.role {
            Role::Following {
                link: Some((c, sm)),
                ..
            } if *c == conn => {
                let out = sm.step(msg);
                self.follower_outputs(now, out)
            }
            Role::Leading { .. } => self.on_leader_frame(now, conn, msg),
            // The quorum port's lobby keeps an identified connection for the next term,
            // whatever this server's role (`accept.rs`: the port stays open for its whole life).
            Role::Following { .. } | Role::Looking => match msg {
                _ if msg
                    .learner_sid()
                    .is_some_and(|s| self.members.contains(&s) && s != self.sid) =>
                {
                    self.lobby.push((conn, msg));
                    vec![]
                }
                _ if matches!(self.role, Role::Following { .. }) => vec![],
                _ => vec![Effect::Close { conn }],
            },
        }
    }

    /// `lead.rs`: a frame on a follower connection (its first must be FOLLOWERINFO).
    fn on_leader_frame(&mut self, now: u64, conn: u64, msg: Msg) -> Vec<Effect> {
        let me = self.sid;
        let members = self.members.clone();
        let Role::Leading { sm, conns, .. } = &mut self.role else {
            return vec![];
        };
        let mut effects = Vec::new();
        let known = conns.iter().find(|(_, c)| **c == conn).map(|(s, _)| *s);
        let out = match (known, &msg) {
            (Some(s), _) => sm.step(s, msg),
            (None, m)
                if m.learner_sid()
                    .is_some_and(|s| s != me && members.contains(&s)) =>
            {
                let s = m.learner_sid().unwrap_or_default();
                let mut out = Vec::new();
                if let Some(old) = conns.insert(s, conn) {
                    effects.push(Effect::Close { conn: old });
                    out.extend(sm.disconnected(s));
                }
                out.extend(sm.step(s, msg));
                out
            }
            _ => return vec![Effect::Close { conn }],
        };
        effects.extend(self.leader_outputs(now, out));
        effects
    }

    /// The other end closed `conn`.
    pub fn on_closed(&mut self, now: u64, conn: u64) -> Vec<Effect> {
        self.lobby.retain(|(c, _)| *c != conn);
        match &mut self.role {
            Role::Following {
                link: Some((c, _)),
                leader,
                ..
            } if *c == conn => {
                let why = format!("connection to leader {leader} ended");
                self.role_ended(now, why)
            }
            Role::Leading { sm, conns, .. } => {
                let Some(sid) = conns.iter().find(|(_, c)| **c == conn).map(|(s, _)| *s) else {
                    return vec![];
                };
                conns.remove(&sid);
                let out = sm.disconnected(sid);
                self.leader_outputs(now, out)
            }
            _ => vec![],
        }
    }

    /// The role's beat; `missed` beats passed while the process was stopped (a follower counts
    /// them all, as `follow.rs`'s burst interval does; a leader's delayed interval fires once).
    pub fn on_beat(&mut self, now: u64, attempt: u64, missed: u64) -> Vec<Effect> {
        if attempt != self.attempts {
            return vec![];
        }
        match &mut self.role {
            Role::Leading { sm, pending, .. } => {
                let out = sm.tick();
                let expired: Vec<u64> = pending
                    .iter()
                    .filter(|(_, (_, d))| *d <= now)
                    .map(|(z, _)| *z)
                    .collect();
                let mut effects: Vec<Effect> = expired
                    .into_iter()
                    .filter_map(|z| pending.remove(&z))
                    .map(|(op, _)| Effect::Reply {
                        op,
                        outcome: WriteOutcome::Unknown(
                            "not committed in time; it may still commit".into(),
                        ),
                    })
                    .collect();
                effects.extend(self.leader_outputs(now, out));
                effects
            }
            Role::Following {
                link: Some((_, sm)),
                ..
            } => {
                let mut out = Vec::new();
                for _ in 0..missed.max(1) {
                    out.extend(sm.tick());
                }
                self.follower_outputs(now, out)
            }
            _ => vec![],
        }
    }

    /// A client write reaching this server (`write_route`): proposed when leading, sent on to
    /// the leader when following (`Err(leader)`), refused while looking.
    pub fn on_write(
        &mut self,
        now: u64,
        op: u64,
        value: serde_json::Value,
    ) -> Result<Vec<Effect>, u64> {
        let timeout = self.zab_config().write_timeout.as_nanos() as u64;
        match &mut self.role {
            Role::Leading { sm, pending, .. } => match sm.propose(vec![value]) {
                Ok((zxids, out)) => {
                    for z in zxids {
                        pending.insert(z, (op, now + timeout));
                    }
                    Ok(self.leader_outputs(now, out))
                }
                Err((why, out)) => {
                    let mut effects = vec![Effect::Reply {
                        op,
                        outcome: WriteOutcome::Rejected(why),
                    }];
                    effects.extend(self.leader_outputs(now, out));
                    Ok(effects)
                }
            },
            Role::Following { leader, .. } => Err(*leader),
            Role::Looking => Ok(vec![Effect::Reply {
                op,
                outcome: WriteOutcome::Rejected(
                    "this server is LOOKING: no leader to write to".into(),
                ),
            }]),
        }
    }

    /// `exec.rs` for the leader: outputs in order (a send after a `Sync` goes out once its
    /// fsync is done, `Effect::Fsync`), then the leader's own ACKs fed back.
    fn leader_outputs(&mut self, now: u64, mut out: Vec<ZabOutput>) -> Vec<Effect> {
        let mut effects = Vec::new();
        let mut ended = None;
        while !out.is_empty() {
            let (mut self_acks, mut fsynced) = (Vec::new(), false);
            let Role::Leading { conns, pending, .. } = &mut self.role else {
                break;
            };
            for o in std::mem::take(&mut out) {
                match o {
                    ZabOutput::Send(to, msg) => {
                        if let Some(conn) = conns.get(&to) {
                            effects.push(Effect::Zab { conn: *conn, msg })
                        }
                    }
                    ZabOutput::Close(sid, _) => {
                        if let Some(conn) = conns.remove(&sid) {
                            effects.push(Effect::Close { conn });
                        }
                    }
                    ZabOutput::Persist(op) => {
                        if let Err(why) = self.disk.persist(op) {
                            effects.push(Effect::Exit { why });
                            return effects;
                        }
                    }
                    ZabOutput::Sync { self_ack } => {
                        self.disk.sync();
                        // One fsync per batch of outputs, as `exec.rs` runs it.
                        if !fsynced {
                            effects.push(Effect::Fsync);
                            fsynced = true;
                        }
                        self_acks.extend(self_ack);
                    }
                    ZabOutput::BatchSync => {}
                    ZabOutput::Committed(z) => {
                        let rest = pending.split_off(&(z + 1));
                        for (zxid, (op, _)) in std::mem::replace(pending, rest) {
                            effects.push(Effect::Reply {
                                op,
                                outcome: WriteOutcome::Committed(zxid),
                            });
                        }
                    }
                    ZabOutput::StepDown(why) => ended = Some(why),
                }
            }
            if let Some(sm) = self.leader() {
                for z in self_acks {
                    out.extend(sm.self_durable(z));
                }
            }
        }
        self.progress();
        match ended {
            Some(why) => {
                effects.extend(self.role_ended(now, why));
                effects
            }
            None => effects,
        }
    }

    /// `follow.rs`'s loop body: outputs, the fsync batch of the seeded bugs, and the end.
    fn follower_outputs(&mut self, now: u64, out: Vec<ZabOutput>) -> Vec<Effect> {
        let now_t = self.at(now);
        let mut effects = Vec::new();
        let mut ended = None;
        let (mut synced, mut batched, mut appended) = (false, false, 0usize);
        let Role::Following {
            link: Some((conn, _)),
            batch,
            ..
        } = &mut self.role
        else {
            return effects;
        };
        for o in out {
            match o {
                ZabOutput::Send(_, msg) => effects.push(Effect::Zab { conn: *conn, msg }),
                ZabOutput::Persist(op) => {
                    if let fle_node::zab::actions::PersistOp::Append(t) = &op {
                        appended += t.len();
                    }
                    if let Err(why) = self.disk.persist(op) {
                        effects.push(Effect::Exit { why });
                        return effects;
                    }
                }
                ZabOutput::Sync { .. } => {
                    self.disk.sync();
                    // One fsync per batch of outputs, as `exec.rs` runs it.
                    if !synced {
                        effects.push(Effect::Fsync);
                    }
                    synced = true;
                }
                ZabOutput::BatchSync => batched = true,
                ZabOutput::StepDown(why) => ended = Some(why),
                ZabOutput::Close(..) | ZabOutput::Committed(_) => {}
            }
        }
        if synced {
            batch.flushed();
        }
        if batched {
            batch.add(appended.max(1), now_t);
        }
        if batch.due(now_t) || (ended.is_some() && !batch.is_empty()) {
            // Due, or the role's last batch flushed as it ends.
            self.disk.sync();
            effects.push(Effect::Fsync);
            batch.flushed();
        }
        self.progress();
        if let Some(why) = ended {
            effects.extend(self.role_ended(now, why));
        }
        effects
    }

    /// `server.rs`'s progress arm: a role in broadcast ends a follow streak and answers
    /// LOOKING peers with the epoch it now serves.
    fn progress(&mut self) {
        if !self.broadcast_seen && self.zab_phase() == ZabPhase::Broadcast {
            self.broadcast_seen = true;
            self.streak.reached_broadcast();
            self.election.update_peer_epoch(self.disk.current_epoch);
        }
    }

    /// `server.rs`'s `role_done`: the role ended; back to LOOKING.
    fn role_ended(&mut self, now: u64, why: String) -> Vec<Effect> {
        let (conns, ops) = self.drop_role();
        let mut effects: Vec<Effect> = conns
            .into_iter()
            .map(|conn| Effect::Close { conn })
            .collect();
        effects.extend(ops.into_iter().map(|op| Effect::Reply {
            op,
            outcome: WriteOutcome::Unknown(format!(
                "leadership ended before commit ({why}); it may still commit"
            )),
        }));
        let zab = self.zab_config();
        let now_t = tokio::time::Instant::from_std(self.at(now));
        self.streak.role_ended(self.sid, &why, now_t, &zab);
        self.attempts += 1;
        let (zxid, epoch) = (self.disk.last_zxid(), self.disk.current_epoch);
        effects.extend(self.look(now, zxid, epoch));
        effects
    }

    pub fn state(&self) -> ServerState {
        match self.role {
            Role::Looking => ServerState::Looking,
            Role::Leading { .. } => ServerState::Leading,
            Role::Following { .. } if self.observers.contains(&self.sid) => ServerState::Observing,
            Role::Following { .. } => ServerState::Following,
        }
    }

    /// The epoch this server leads once it is established (a quorum acked its NEWLEADER and
    /// it broadcasts), for the oracle.
    pub fn established_epoch(&self) -> Option<u64> {
        match &self.role {
            Role::Leading { sm, .. } if sm.phase() == ZabPhase::Broadcast => sm.epoch(),
            _ => None,
        }
    }

    pub fn zab_phase(&self) -> ZabPhase {
        match &self.role {
            Role::Looking => ZabPhase::Election,
            Role::Leading { sm, .. } => sm.phase(),
            Role::Following { link: None, .. } => ZabPhase::Discovery,
            Role::Following {
                link: Some((_, sm)),
                ..
            } => sm.phase(),
        }
    }

    /// `GET /status` now (`wall_ms`: the server's wall clock).
    pub fn status(&self, now: u64, wall_ms: i64) -> NodeStatus {
        let leader = match &self.role {
            Role::Looking => None,
            Role::Leading { .. } => Some(self.sid),
            Role::Following { leader, .. } => Some(*leader),
        };
        let last = self.disk.last_zxid();
        NodeStatus {
            sid: self.sid,
            state: self.state(),
            leader,
            peer_epoch: self.disk.current_epoch,
            accepted_epoch: self.disk.accepted_epoch,
            election_epoch: self.election.logicalclock(),
            last_zxid: last,
            last_zxid_hex: format!("{last:#x}"),
            last_committed_zxid: self.disk.committed(),
            zab_phase: self.zab_phase(),
            wall_clock_ms: wall_ms,
            uptime_ms: (now.saturating_sub(self.started_ns)) / 1_000_000,
            last_election: self.last_election.clone(),
            config: None,
            peer_type: if self.observers.contains(&self.sid) {
                fle_node::api::PeerType::Observer
            } else {
                fle_node::api::PeerType::Participant
            },
        }
    }
}
