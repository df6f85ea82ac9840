//! Fast Leader Election (ZooKeeper's `lookForLeader`) as a deterministic state machine.
//!
//! No sockets, clocks or files: the shell feeds it notifications (`step`) and the time
//! (`tick`), and carries out what it returns (`Output`): notifications to send and the
//! decision. Time is passed in, so tests drive it with tables of messages and fake instants.
//!
//! Deliberate differences from ZooKeeper:
//! - a notification naming a leader that is not a configured voter is dropped and counted
//!   (robustness against bad peers);
//! - a LOOKING peer whose vote is worse than ours in our round is told ours at once
//!   (`answer_worse`); ZooKeeper answers only a lower round, which leaves a late joiner
//!   waiting for a re-send;
//! - a LOOKING notification that arrives while this server is still settled is answered (as
//!   in ZooKeeper) AND kept, then replayed when this server starts looking. ZooKeeper drops
//!   it, so when one server notices a dead leader a moment before the others, its vote is
//!   lost until its 200 ms re-send and the others can elect a worse leader without it.
//!   Replaying is the same as that message arriving a little later, which the protocol must
//!   tolerate anyway, so safety is unchanged.
//! - a FOLLOWING/LEADING notice that does not let this server join yet, and that says
//!   something new of its sender, brings the next re-send forward to a finalizeWait from now.
//!   The peers that settled with it hold what they sent before they settled: LOOKING votes for
//!   the same leader with the epoch before its term (the settled notices carry the new one,
//!   `update_peer_epoch`), which count with neither. They answer a re-send with where they
//!   stand, but ZooKeeper re-sends only when its notification timeout runs out, which grows
//!   while a server waits in a minority (up to maxNotificationInterval): such a server stayed
//!   LOOKING 5-7 s beside a standing leader after a heal (6 of 27,738 simulated runs,
//!   2026-12-05). A re-send is a duplicate vote, which the protocol tolerates; the answers it
//!   draws repeat what was heard, so they bring nothing forward again;
//! - a LOOKING vote of a higher round that finalizeWait drops (as ZooKeeper drops any vote
//!   that does not beat the proposal) is answered with the decision once this server decides,
//!   as a settled server answers a LOOKING peer: the same as that vote arriving a moment
//!   later. Otherwise its sender, back from an isolation in a higher round, heard nobody until
//!   its grown back-off ran out (a 5.1 s stall, simulated seed 18437).
//!
//! Observers (`server.N=...:observer`) take part only to learn the leader, as in ZooKeeper:
//! - a voter never counts an observer's notification (`validVoter`); it answers a LOOKING one
//!   with where it stands, and sends its own votes to voters only;
//! - an observer's vote is [`Vote::NONE`] (it proposes no one), it decides nothing from LOOKING
//!   votes, and it becomes OBSERVING once FOLLOWING/LEADING notices of a quorum of voters name a
//!   leader that says LEADING itself (the same rule by which a late voter joins a leader);
//! - unlike ZooKeeper, an observer asks again every finalizeWait without backing off: voters
//!   never tell it a result on their own, so a back-off grown during a long election (up to
//!   maxNotificationInterval) would be how late it finds the new leader, and its notices cost
//!   the voters one answer each.
//!
//! Like ZooKeeper 3.5+ (`QuorumPeer.updateElectionVote`, called by the Leader once its term
//! is up and by a Learner once synced): the vote a settled server answers LOOKING peers with
//! takes the epoch it now serves (`update_peer_epoch`). Followers of one leader can hold votes
//! of different rounds, zxids and epochs: one that joined on notices and reached the leader
//! only in its NEXT term, after the leader was restarted and re-elected by the others without
//! it (the follower was still dialing; ZooKeeper's comment on `updateElectionVote` tells that
//! sequence). Out of election only the leader and the epoch are compared (ZOOKEEPER-1732), so
//! with the epoch brought up to date a restarted server can still join them.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use crate::api::{CountedVote, ReceivedVote, ServerState};
use crate::bugs::{Bug, Bugs};
use crate::membership::Membership;
use crate::vote::Vote;
use crate::wire::{Notification, NOTIFICATION_VERSION};

/// ZooKeeper's first notification timeout (`finalizeWait` doubles as its start value).
pub const INITIAL_NOTIFICATION_TIMEOUT: Duration = Duration::from_millis(200);

/// Distinct votes kept per round for the decision's `received` list: a handful per voter in
/// practice; the cap only bounds what a misbehaving peer can make us hold.
const MAX_RECEIVED: usize = 256;

#[derive(Debug, Clone)]
pub struct ElectionConfig {
    pub sid: u64,
    pub voters: BTreeSet<u64>,
    /// Non-voting servers (`:observer`): they learn the leader and are never counted.
    pub observers: BTreeSet<u64>,
    pub finalize_wait: Duration,
    pub max_notification_interval: Duration,
    /// Seeded bugs (none by default); see `node::bugs`.
    pub bugs: Bugs,
    /// The config bytes carried in notifications.
    pub config_bytes: Vec<u8>,
    /// The version of the config in force: a peer's config with a higher one is adopted.
    pub config_version: u64,
    /// Voters of the previous config that this one removed. Never heard nor counted (ZooKeeper's
    /// `validVoter` checks the config in force), except under the seeded `removed-voter-counted`.
    pub removed: BTreeSet<u64>,
}

impl ElectionConfig {
    pub fn quorum(&self) -> usize {
        let n = self.voters.len();
        if self.bugs.has(Bug::QuorumMinority) {
            // Seeded bug: n/2 servers count as a quorum (two disjoint "quorums" can exist).
            (n / 2).max(1)
        } else {
            crate::api::quorum(n)
        }
    }

    pub fn is_observer(&self) -> bool {
        self.observers.contains(&self.sid)
    }

    /// Whose votes count toward a quorum: the voters (observers too under the seeded
    /// observer-vote-counted bug, which leaves out ZooKeeper's `validVoter` check).
    fn counts(&self, sid: u64) -> bool {
        self.voters.contains(&sid)
            || (self.bugs.has(Bug::ObserverVoteCounted) && self.observers.contains(&sid))
            || self.counts_removed(sid)
    }

    /// Seeded `removed-voter-counted`: a voter the last reconfig removed still counts, as if
    /// `validVoter` checked the config before it.
    fn counts_removed(&self, sid: u64) -> bool {
        self.bugs.has(Bug::RemovedVoterCounted) && self.removed.contains(&sid)
    }

    /// Whom notifications are taken from: the servers of the config in force.
    fn knows(&self, sid: u64) -> bool {
        self.voters.contains(&sid) || self.observers.contains(&sid) || self.counts_removed(sid)
    }

    /// An observer that only learns the leader (always, unless the seeded bug makes it vote).
    fn learns_only(&self) -> bool {
        self.is_observer() && !self.bugs.has(Bug::ObserverVoteCounted)
    }
}

/// The same servers with the same roles and ports (client addresses aside).
fn same_servers(a: &Membership, b: &Membership) -> bool {
    let key = |m: &Membership| -> Vec<_> {
        let of = |(s, x): (&u64, &crate::config::ServerAddr)| {
            (
                *s,
                x.host.clone(),
                x.quorum_port,
                x.election_port,
                x.peer_type,
            )
        };
        m.servers.iter().map(of).collect()
    };
    key(a) == key(b)
}

/// A vote as counted in recvset/outofelection (ZooKeeper's `Vote` with round and state).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Ballot {
    vote: Vote,
    election_epoch: u64,
    state: ServerState,
    version: i32,
}

impl Ballot {
    /// ZooKeeper's `Vote.equals`: out of election only the leader and its epoch must agree
    /// (ZOOKEEPER-1732), inside an election everything must.
    fn agrees(&self, other: &Ballot, bugs: Bugs) -> bool {
        if self.state == ServerState::Looking || other.state == ServerState::Looking {
            self.vote == other.vote && self.election_epoch == other.election_epoch
        } else if bugs.has(Bug::OutOfElectionWrongFields) {
            // Seeded ZOOKEEPER-1732: out of election, compared as inside one (zxid and round
            // too), so followers that joined in other rounds never add up to a quorum.
            self.vote == other.vote && self.election_epoch == other.election_epoch
        } else if (self.version > 0) ^ (other.version > 0) {
            self.vote.leader == other.vote.leader
        } else {
            self.vote.leader == other.vote.leader && self.vote.peer_epoch == other.vote.peer_epoch
        }
    }
}

/// What the state machine asks the shell to do.
#[derive(Debug, Clone, PartialEq)]
pub enum Output {
    Send {
        to: u64,
        notification: Notification,
    },
    Decided(Decision),
    /// A peer runs under a newer committed config with other servers (ZooKeeper's
    /// `processReconfig` from a notification): the shell activates it, then looks again.
    NewerConfig(Membership),
}

/// The end of an election.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    pub state: ServerState,
    pub vote: Vote,
    pub round: u64,
    /// My own round when I decided (`round` is the notices' round when I joined on them).
    pub own_round: u64,
    pub votes: Vec<CountedVote>,
    /// Every distinct vote heard in the deciding round (see `api::ElectionSummary`).
    pub received: Vec<ReceivedVote>,
    /// Joined an established leader (outofelection) rather than deciding the round.
    pub joined: bool,
    pub took: Duration,
}

impl Decision {
    /// What `/status` reports of this decision (`last_election`).
    pub fn summary(&self) -> crate::api::ElectionSummary {
        crate::api::ElectionSummary {
            round: self.round,
            leader: self.vote.leader,
            zxid: self.vote.zxid,
            peer_epoch: self.vote.peer_epoch,
            votes: self.votes.clone(),
            took_ms: self.took.as_millis() as u64,
            received: self.received.clone(),
            joined: self.joined,
            own_round: Some(self.own_round),
        }
    }
}

/// Messages dropped instead of processed, by reason (the shell adds its own wire counters).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct ElectionCounters {
    pub from_non_voter: u64,
    /// Observers' notifications: answered, never counted.
    pub from_observer: u64,
    pub unknown_leader: u64,
    pub stale_round: u64,
    pub dropped_while_finalizing: u64,
}

#[derive(Debug)]
pub struct Election {
    cfg: ElectionConfig,
    state: ServerState,
    logicalclock: u64,
    /// My own vote at the start of the round (what a higher round falls back to).
    initial: Vote,
    proposal: Vote,
    recvset: BTreeMap<u64, Ballot>,
    outofelection: BTreeMap<u64, Ballot>,
    /// While Some, a quorum agrees and we wait for silence (or a better vote) until then.
    finalize_deadline: Option<Instant>,
    not_timeout: Duration,
    poll_deadline: Instant,
    round_started: Instant,
    /// The vote this server stands by once decided (answered to LOOKING peers).
    current: Ballot,
    /// The latest LOOKING notification per peer received while settled, with when it came.
    parked: BTreeMap<u64, (Instant, Notification)>,
    /// A re-send brought forward by news of a settled peer we could not join yet.
    resend_at: Option<Instant>,
    /// Peers whose LOOKING vote of a higher round was dropped during finalizeWait: told where
    /// we stand once we decide.
    unanswered: BTreeSet<u64>,
    /// Distinct votes heard in the current round, mine included, in arrival order.
    received: Vec<ReceivedVote>,
    counters: ElectionCounters,
}

impl Election {
    pub fn new(cfg: ElectionConfig, now: Instant) -> Self {
        let me = Vote::new(cfg.sid, 0, 0);
        let ballot = Ballot {
            vote: me,
            election_epoch: 0,
            state: ServerState::Looking,
            version: NOTIFICATION_VERSION,
        };
        Election {
            cfg,
            state: ServerState::Looking,
            logicalclock: 0,
            initial: me,
            proposal: me,
            recvset: BTreeMap::new(),
            outofelection: BTreeMap::new(),
            finalize_deadline: None,
            not_timeout: INITIAL_NOTIFICATION_TIMEOUT,
            poll_deadline: now,
            round_started: now,
            current: ballot,
            parked: BTreeMap::new(),
            resend_at: None,
            unanswered: BTreeSet::new(),
            received: Vec::new(),
            counters: ElectionCounters::default(),
        }
    }

    pub fn state(&self) -> ServerState {
        self.state
    }
    pub fn logicalclock(&self) -> u64 {
        self.logicalclock
    }
    pub fn proposal(&self) -> Vote {
        self.proposal
    }
    pub fn counters(&self) -> ElectionCounters {
        self.counters
    }
    /// ZooKeeper 3.5+'s `updateElectionVote`: this server now serves `epoch` (it leads a term
    /// that a quorum acknowledged, or has synced with its leader), so the vote it answers
    /// LOOKING peers with says that epoch; round and zxid stay those of the decision (see the
    /// module doc). The seeded ZOOKEEPER-1732 bug keeps the pre-fix code path, which had no
    /// such update.
    pub fn update_peer_epoch(&mut self, epoch: u64) {
        if self.state == ServerState::Looking || self.cfg.bugs.has(Bug::OutOfElectionWrongFields) {
            return;
        }
        self.current.vote.peer_epoch = epoch;
    }

    /// The leader this server follows or leads, None while looking.
    pub fn leader(&self) -> Option<u64> {
        (self.state != ServerState::Looking).then_some(self.current.vote.leader)
    }

    /// Starts a new round with my own vote (lookForLeader's first step).
    pub fn start_looking(&mut self, now: Instant, last_zxid: u64, peer_epoch: u64) -> Vec<Output> {
        self.state = ServerState::Looking;
        self.logicalclock += 1;
        self.initial = if self.cfg.is_observer() {
            Vote::NONE
        } else {
            Vote::new(self.cfg.sid, last_zxid, peer_epoch)
        };
        self.recvset.clear();
        self.outofelection.clear();
        self.received.clear();
        self.finalize_deadline = None;
        self.resend_at = None;
        self.unanswered.clear();
        self.not_timeout = INITIAL_NOTIFICATION_TIMEOUT;
        self.poll_deadline = now + self.not_timeout;
        self.round_started = now;
        self.set_proposal(self.initial);
        // My own vote is the first one counted (ZooKeeper delivers it to itself).
        if self.count_agreeing(&self.recvset, &self.proposal_ballot(), true) >= self.cfg.quorum() {
            self.finalize_deadline = Some(now + self.cfg.finalize_wait);
        }
        let mut out = self.send_to_all();
        // Only votes from the handover moment: older ones describe a past the peer has left.
        for (from, (at, n)) in std::mem::take(&mut self.parked) {
            if now.saturating_duration_since(at) <= self.cfg.finalize_wait {
                out.extend(self.step(now, from, n));
            }
        }
        out
    }

    /// The next instant `tick` has something to do, if any.
    pub fn next_deadline(&self) -> Option<Instant> {
        if self.state != ServerState::Looking {
            return None;
        }
        let poll = self
            .resend_at
            .map_or(self.poll_deadline, |r| r.min(self.poll_deadline));
        Some(self.finalize_deadline.unwrap_or(poll))
    }

    pub fn tick(&mut self, now: Instant) -> Vec<Output> {
        if self.state != ServerState::Looking {
            return Vec::new();
        }
        if let Some(deadline) = self.finalize_deadline {
            if now >= deadline {
                return self.decide(now);
            }
            return Vec::new();
        }
        if now >= self.poll_deadline || self.resend_at.is_some_and(|r| now >= r) {
            self.resend_at = None;
            // Nothing arrived for notTimeout: re-send and back off (up to the maximum); an
            // observer asks again at the same pace (see the module doc).
            if !self.cfg.learns_only() {
                self.not_timeout = (self.not_timeout * 2).min(self.cfg.max_notification_interval);
            }
            self.poll_deadline = now + self.not_timeout;
            return self.send_to_all();
        }
        Vec::new()
    }

    /// Takes a new config (a reconfig activated): the next `start_looking` votes under it.
    /// Votes parked under the old config are dropped.
    pub fn reconfigure(&mut self, cfg: ElectionConfig) {
        self.cfg = cfg;
        self.parked.clear();
    }

    /// The config a LOOKING server adopts from notification `n`: a higher version that lists
    /// other servers, roles or ports than ours (the client addresses are not compared: a
    /// ZooKeeper peer lists its client port there, fle-node its HTTP API).
    fn newer_config(&self, n: &Notification) -> Option<Membership> {
        if self.state != ServerState::Looking || n.version < NOTIFICATION_VERSION {
            return None;
        }
        let text = std::str::from_utf8(&n.config).ok()?;
        if Membership::version_of(text)? <= self.cfg.config_version {
            return None;
        }
        let theirs = Membership::parse("a notification's config", text).ok()?;
        let ours = std::str::from_utf8(&self.cfg.config_bytes).ok();
        let ours = ours.and_then(|t| Membership::parse("our config", t).ok());
        let same = ours.is_some_and(|o| same_servers(&o, &theirs));
        (!same).then_some(theirs)
    }

    /// Handles one notification from peer `from`.
    pub fn step(&mut self, now: Instant, from: u64, n: Notification) -> Vec<Output> {
        if let Some(m) = self.newer_config(&n) {
            return vec![Output::NewerConfig(m)];
        }
        if !self.cfg.knows(from) || from == self.cfg.sid {
            self.counters.from_non_voter += 1;
            return Vec::new();
        }
        if !self.cfg.counts(from) {
            // ZooKeeper's validVoter: an observer is told where I stand, and never counted.
            self.counters.from_observer += 1;
            if n.state != ServerState::Looking {
                return Vec::new();
            }
            return vec![match self.state {
                ServerState::Looking => {
                    self.send(from, self.proposal, self.logicalclock, ServerState::Looking)
                }
                state => self.send(from, self.current.vote, self.current.election_epoch, state),
            }];
        }
        if !self.cfg.voters.contains(&n.leader) {
            self.counters.unknown_leader += 1;
            return Vec::new();
        }
        let mut out = Vec::new();
        if self.state != ServerState::Looking {
            // A settled server tells a looking one whom it follows, so newcomers can join.
            if n.state == ServerState::Looking {
                out.push(self.send(
                    from,
                    self.current.vote,
                    self.current.election_epoch,
                    self.state,
                ));
                // Kept for replay when we look again (see the module header).
                self.parked.insert(from, (now, n));
            }
            return out;
        }
        if self.cfg.learns_only() && n.state == ServerState::Looking {
            // An observer decides nothing from votes; it waits for FOLLOWING/LEADING notices.
            return out;
        }
        if n.state == ServerState::Looking && n.election_epoch < self.logicalclock {
            // A peer in an older round learns our round and vote (WorkerReceiver does this).
            out.push(self.send(from, self.proposal, self.logicalclock, ServerState::Looking));
        }
        let incoming = Vote::new(n.leader, n.zxid, n.peer_epoch);
        if self.finalize_deadline.is_some() {
            if incoming.beats_under(&self.proposal, self.cfg.bugs) {
                self.finalize_deadline = None;
            } else {
                if n.state != ServerState::Looking || n.election_epoch == self.logicalclock {
                    self.hear(from, incoming, n.election_epoch, n.state);
                }
                if n.state == ServerState::Looking && n.election_epoch > self.logicalclock {
                    // Dropped, as ZooKeeper drops it; its sender hears from us once we decide.
                    self.unanswered.insert(from);
                }
                if n.state == ServerState::Looking
                    && n.election_epoch == self.logicalclock
                    && self.proposal.beats_under(&incoming, self.cfg.bugs)
                {
                    out.push(self.answer_worse(from));
                }
                // finalizeWait restarts on every message that does not change our mind.
                self.counters.dropped_while_finalizing += 1;
                self.finalize_deadline = Some(now + self.cfg.finalize_wait);
                return out;
            }
        }
        self.poll_deadline = now + self.not_timeout;
        let ballot = Ballot {
            vote: incoming,
            election_epoch: n.election_epoch,
            state: n.state,
            version: n.version,
        };
        match n.state {
            ServerState::Looking => out.extend(self.on_looking(now, from, ballot)),
            ServerState::Following | ServerState::Leading => {
                out.extend(self.on_settled(now, from, ballot))
            }
            ServerState::Observing => {}
        }
        out
    }

    fn on_looking(&mut self, now: Instant, from: u64, b: Ballot) -> Vec<Output> {
        let mut out = Vec::new();
        if b.election_epoch > self.logicalclock {
            self.logicalclock = b.election_epoch;
            self.recvset.clear();
            self.received.clear();
            // My initial vote is what the round's first vote is weighed against: heard first,
            // so the proposals of the round show the comparison (vote-rule judges their order).
            self.hear(
                self.cfg.sid,
                self.initial,
                self.logicalclock,
                ServerState::Looking,
            );
            let best = if b.vote.beats_under(&self.initial, self.cfg.bugs) {
                b.vote
            } else {
                self.initial
            };
            self.set_proposal(best);
            out.extend(self.send_to_all());
        } else if b.election_epoch < self.logicalclock {
            self.counters.stale_round += 1;
            return out;
        } else if b.vote.beats_under(&self.proposal, self.cfg.bugs) {
            self.set_proposal(b.vote);
            out.extend(self.send_to_all());
        } else if self.proposal.beats_under(&b.vote, self.cfg.bugs) {
            out.push(self.answer_worse(from));
        }
        self.hear(from, b.vote, b.election_epoch, b.state);
        self.recvset.insert(from, b);
        let mine = self.proposal_ballot();
        if self.count_agreeing(&self.recvset, &mine, true) >= self.cfg.quorum() {
            self.finalize_deadline = Some(now + self.cfg.finalize_wait);
        }
        out
    }

    /// A FOLLOWING/LEADING notification: count it, and join its leader once a quorum
    /// stands behind it and the leader itself says it leads (checkLeader).
    fn on_settled(&mut self, now: Instant, from: u64, b: Ballot) -> Vec<Output> {
        self.hear(from, b.vote, b.election_epoch, b.state);
        if self.cfg.bugs.has(Bug::FollowSingleLeading) && b.state == ServerState::Leading {
            // Seeded ZOOKEEPER-975: one LEADING notice is taken for an established leader,
            // with no quorum of FOLLOWING notices behind it.
            self.outofelection.insert(from, b);
            return self.settle(now, b, Source::OutOfElection);
        }
        if b.election_epoch == self.logicalclock {
            self.recvset.insert(from, b);
            if self.count_agreeing(&self.recvset, &b, true) >= self.cfg.quorum()
                && self.check_leader(&self.recvset, b.vote.leader, b.election_epoch)
            {
                return self.settle(now, b, Source::Recvset);
            }
        }
        let news = self.outofelection.insert(from, b) != Some(b);
        if self.count_agreeing(&self.outofelection, &b, false) >= self.cfg.quorum()
            && self.check_leader(&self.outofelection, b.vote.leader, b.election_epoch)
        {
            return self.settle(now, b, Source::OutOfElection);
        }
        if news {
            // A peer settled and we cannot join yet: the others that settled with it may
            // have told us only their LOOKING votes (with the epoch before the new term's).
            // Ask again after a finalizeWait, not after the back-off grown meanwhile: they
            // answer with where they stand (see the module header).
            let soon = now + self.cfg.finalize_wait;
            self.resend_at = Some(self.resend_at.map_or(soon, |r| r.min(soon)));
        }
        Vec::new()
    }

    fn check_leader(&self, votes: &BTreeMap<u64, Ballot>, leader: u64, epoch: u64) -> bool {
        if leader != self.cfg.sid {
            votes
                .get(&leader)
                .is_some_and(|v| v.state == ServerState::Leading)
        } else if self.cfg.bugs.has(Bug::FollowOlderRound) {
            // Seeded ZOOKEEPER-1514: notices naming me from ANY round make me lead.
            true
        } else {
            self.logicalclock == epoch
        }
    }

    /// Counts voters whose ballot agrees with `target`. ZooKeeper's recvset holds my own vote
    /// (it sends to itself); here it is added explicitly with `with_mine`.
    fn count_agreeing(
        &self,
        votes: &BTreeMap<u64, Ballot>,
        target: &Ballot,
        with_mine: bool,
    ) -> usize {
        let others = votes
            .iter()
            .filter(|(sid, b)| self.cfg.counts(**sid) && b.agrees(target, self.cfg.bugs))
            .count();
        let mine = with_mine
            && self.cfg.counts(self.cfg.sid)
            && self.proposal_ballot().agrees(target, self.cfg.bugs);
        others + usize::from(mine)
    }

    fn proposal_ballot(&self) -> Ballot {
        Ballot {
            vote: self.proposal,
            election_epoch: self.logicalclock,
            state: ServerState::Looking,
            version: NOTIFICATION_VERSION,
        }
    }

    fn set_proposal(&mut self, v: Vote) {
        self.proposal = v;
        // ZooKeeper hears its own vote through its queue: my proposals are heard votes too
        // (an observer's empty vote proposes no one, so there is nothing to hear).
        if !v.is_none() {
            self.hear(self.cfg.sid, v, self.logicalclock, ServerState::Looking);
        }
    }

    /// Notes a vote heard in the current round (each distinct one once, bounded).
    fn hear(&mut self, sid: u64, vote: Vote, round: u64, state: ServerState) {
        let r = ReceivedVote {
            sid,
            leader: vote.leader,
            zxid: vote.zxid,
            peer_epoch: vote.peer_epoch,
            round,
            state,
        };
        if self.received.len() < MAX_RECEIVED && !self.received.contains(&r) {
            self.received.push(r);
        }
    }

    fn decide(&mut self, now: Instant) -> Vec<Output> {
        let b = self.proposal_ballot();
        self.settle(now, b, Source::Recvset)
    }

    fn settle(&mut self, now: Instant, b: Ballot, source: Source) -> Vec<Output> {
        let own_round = self.logicalclock;
        if matches!(source, Source::OutOfElection) {
            // Joining an established leader: take its round (ZooKeeper sets logicalclock).
            self.logicalclock = b.election_epoch;
        }
        self.state = if self.cfg.is_observer() {
            ServerState::Observing
        } else if b.vote.leader == self.cfg.sid {
            ServerState::Leading
        } else {
            ServerState::Following
        };
        self.finalize_deadline = None;
        self.current = Ballot {
            vote: b.vote,
            election_epoch: b.election_epoch,
            state: self.state,
            version: NOTIFICATION_VERSION,
        };
        let set = match source {
            Source::Recvset => &self.recvset,
            Source::OutOfElection => &self.outofelection,
        };
        let mut votes: Vec<CountedVote> = set
            .iter()
            .filter(|(_, v)| v.agrees(&b, self.cfg.bugs))
            .map(|(sid, v)| CountedVote {
                sid: *sid,
                leader: v.vote.leader,
                zxid: v.vote.zxid,
                peer_epoch: v.vote.peer_epoch,
                round: Some(v.election_epoch),
                state: Some(v.state),
            })
            .collect();
        if matches!(source, Source::Recvset)
            && self.cfg.counts(self.cfg.sid)
            && self.proposal_ballot().agrees(&b, self.cfg.bugs)
        {
            votes.push(CountedVote {
                sid: self.cfg.sid,
                leader: self.proposal.leader,
                zxid: self.proposal.zxid,
                peer_epoch: self.proposal.peer_epoch,
                round: Some(own_round),
                state: Some(ServerState::Looking),
            });
            votes.sort_by_key(|v| v.sid);
        }
        self.resend_at = None;
        let mut out = vec![Output::Decided(Decision {
            state: self.state,
            vote: b.vote,
            round: b.election_epoch,
            own_round,
            votes,
            received: self.received.clone(),
            joined: matches!(source, Source::OutOfElection),
            took: now.saturating_duration_since(self.round_started),
        })];
        // Those whose vote of a higher round finalizeWait dropped are answered as a settled
        // server answers a LOOKING peer: the same as their notification arriving a moment later.
        for peer in std::mem::take(&mut self.unanswered) {
            out.push(self.send(peer, b.vote, b.election_epoch, self.state));
        }
        out
    }

    /// A peer LOOKING in our round with a vote worse than ours is told ours at once. ZooKeeper
    /// 3.8 answers only a lower round, so such a peer learns the better vote at the next re-send
    /// of a server that holds it, and its peers learn its change at its own next re-send: with
    /// notification timeouts doubling from finalizeWait, a late joiner (a follower that waited
    /// out initLimit in sync) cost a quorum two re-send cycles, 3 s on a correct run where the
    /// liveness bound left 2.8 (2026-12-04, docs/node.md). One answer per notification: the
    /// peer takes our vote, which is then no longer worse, so no exchange follows. Votes are
    /// unchanged; an answer is one more copy of a notification the election already sent.
    fn answer_worse(&self, to: u64) -> Output {
        self.send(to, self.proposal, self.logicalclock, ServerState::Looking)
    }

    fn send(&self, to: u64, vote: Vote, election_epoch: u64, state: ServerState) -> Output {
        Output::Send {
            to,
            notification: Notification {
                state,
                leader: vote.leader,
                zxid: vote.zxid,
                election_epoch,
                peer_epoch: vote.peer_epoch,
                version: NOTIFICATION_VERSION,
                config: self.cfg.config_bytes.clone(),
            },
        }
    }

    /// My vote to every server that counts (voters; ZooKeeper never sends its votes to
    /// observers, which ask instead; removed voters only under `removed-voter-counted`).
    fn send_to_all(&self) -> Vec<Output> {
        self.cfg
            .voters
            .iter()
            .chain(&self.cfg.observers)
            .chain(&self.cfg.removed)
            .filter(|&&sid| sid != self.cfg.sid && self.cfg.counts(sid))
            .map(|&to| self.send(to, self.proposal, self.logicalclock, ServerState::Looking))
            .collect()
    }
}

#[derive(Clone, Copy)]
enum Source {
    Recvset,
    OutOfElection,
}

#[cfg(test)]
mod tests {
    //! Tables of messages through one state machine: no network, no sockets, no sleeps. The
    //! stories of a cluster (several machines exchanging notifications) run on the controller's
    //! simulator: `fle_chaos::sim::scenario`'s tests.
    use super::*;

    const FW: Duration = Duration::from_millis(200);

    fn cfg(sid: u64, n: u64) -> ElectionConfig {
        ElectionConfig {
            sid,
            voters: (1..=n).collect(),
            observers: BTreeSet::new(),
            finalize_wait: FW,
            max_notification_interval: Duration::from_secs(60),
            bugs: Bugs::none(),
            config_bytes: Vec::new(),
            config_version: 0,
            removed: BTreeSet::new(),
        }
    }

    use ServerState::*;

    fn note(state: ServerState, leader: u64, zxid: u64, round: u64) -> Notification {
        Notification {
            state,
            leader,
            zxid,
            election_epoch: round,
            peer_epoch: 0,
            version: 2,
            config: Vec::new(),
        }
    }

    fn sends(out: &[Output]) -> Vec<(u64, u64, u64)> {
        out.iter()
            .filter_map(|o| match o {
                Output::Send {
                    to,
                    notification: n,
                } => Some((*to, n.leader, n.election_epoch)),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn table_of_rounds_and_adoption() {
        let t = Instant::now();
        let mut e = Election::new(cfg(2, 3), t);
        e.start_looking(t, 5, 0);
        // Higher round with a worse vote: take the round, fall back to my initial vote.
        let out = e.step(t, 1, note(Looking, 1, 4, 7));
        assert_eq!(e.logicalclock(), 7);
        assert_eq!(e.proposal().leader, 2);
        assert_eq!(sends(&out), vec![(1, 2, 7), (3, 2, 7)]);
        // Lower round: ignored even when better, but the sender learns our round and vote.
        let out = e.step(t, 1, note(Looking, 1, 99, 3));
        assert_eq!(e.proposal(), Vote::new(2, 5, 0));
        assert_eq!(sends(&out), vec![(1, 2, 7)]);
        assert_eq!(e.counters().stale_round, 1);
        // Same round, better vote: adopt and re-send.
        let out = e.step(t, 3, note(Looking, 3, 6, 7));
        assert_eq!(e.proposal(), Vote::new(3, 6, 0));
        assert_eq!(sends(&out), vec![(1, 3, 7), (3, 3, 7)]);
        // Quorum (3 and me) agree on 3: finalizeWait, then decide.
        assert!(e.next_deadline().unwrap() <= t + FW);
        assert!(e.tick(t + FW / 2).is_empty());
        let out = e.tick(t + FW);
        assert!(
            matches!(&out[..], [Output::Decided(d)] if d.state == Following && d.vote.leader == 3)
        );
        // Settled: a looking peer is answered with the current vote and its round.
        let out = e.step(t + FW, 1, note(Looking, 1, 0, 9));
        assert_eq!(sends(&out), vec![(1, 3, 7)]);
    }

    /// A LOOKING peer in our round with a worse vote is told ours at once (`answer_worse`); one
    /// that holds our vote is not, so no exchange follows. The cluster's story (a late joiner
    /// the quorum needs) is `fle_chaos::sim::scenario`'s.
    #[test]
    fn a_looking_peer_with_a_worse_vote_in_our_round_is_told_ours_at_once() {
        let t = Instant::now();
        let mut e = Election::new(cfg(1, 5), t);
        e.start_looking(t, 10, 0);
        let out = e.step(t, 4, note(Looking, 4, 1, 1));
        assert_eq!(sends(&out), vec![(4, 1, 1)]);
        let out = e.step(t, 4, note(Looking, 1, 10, 1));
        assert!(sends(&out).is_empty(), "{out:?}");
        assert_eq!(e.proposal(), Vote::new(1, 10, 0));
    }

    /// Seed 9229's sequence (simulated, 2026-12-05): server 2, back from a minority with its
    /// back-off grown, hears 1, 3 and 4 vote for 4 at peerEpoch 1, then 3 and 4 settle (notices
    /// at the new epoch 2). Neither set holds a quorum; 1, settled too, said nothing since. It
    /// asks again a finalizeWait later, and 1's answer lets it join.
    #[test]
    fn a_settled_notice_it_cannot_join_yet_brings_the_next_re_send_forward() {
        let t = Instant::now();
        let mut e = Election::new(cfg(2, 5), t);
        e.start_looking(t, 0x1_0000_0120, 1);
        // Grown in the minority.
        e.not_timeout = Duration::from_secs(6);
        let at = |ms: u64| t + Duration::from_millis(ms);
        let epoch = |mut n: Notification, pe: u64| {
            n.peer_epoch = pe;
            n
        };
        let z = 0x1_0000_024f;
        e.step(at(0), 1, epoch(note(Looking, 4, z, 1), 1));
        e.step(at(100), 3, epoch(note(Looking, 4, z, 1), 1));
        e.step(at(101), 3, epoch(note(Following, 4, z, 1), 2));
        e.step(at(170), 4, epoch(note(Looking, 4, z, 1), 1));
        e.step(at(171), 4, epoch(note(Leading, 4, z, 1), 2));
        assert_eq!(e.state(), Looking, "no quorum at either epoch");
        // The same notice again (a reconnect re-sends it) does not push the re-send back.
        e.step(at(172), 4, epoch(note(Leading, 4, z, 1), 2));
        let next = e.next_deadline().unwrap();
        assert!(
            next <= at(171) + FW,
            "re-send a finalizeWait after the news"
        );
        let out = e.tick(next);
        assert_eq!(sends(&out).len(), 4, "asks everyone again: {out:?}");
        let out = e.step(next, 1, epoch(note(Following, 4, z, 1), 2));
        assert!(
            matches!(&out[..], [Output::Decided(d)] if d.state == Following && d.vote.leader == 4),
            "{out:?}"
        );
        // The same notice again says nothing new: the back-off stands.
        let mut e = Election::new(cfg(2, 5), t);
        e.start_looking(t, 0, 1);
        e.not_timeout = Duration::from_secs(6);
        e.step(at(0), 3, epoch(note(Following, 4, z, 1), 2));
        e.tick(e.next_deadline().unwrap());
        e.step(at(300), 3, epoch(note(Following, 4, z, 1), 2));
        assert!(e.next_deadline().unwrap() >= at(300) + Duration::from_secs(6));
    }

    /// Seed 18437's sequence (simulated, 2026-12-05): 4, back from an isolation in round 3,
    /// votes while the others finalize round 2. ZooKeeper drops a vote that does not beat the
    /// proposal during finalizeWait, whatever its round, and nobody tells 4 the outcome until
    /// its grown back-off runs out. Here the one that decides answers it then.
    #[test]
    fn a_higher_round_vote_dropped_while_finalizing_is_answered_once_decided() {
        let t = Instant::now();
        let mut e = Election::new(cfg(1, 5), t);
        e.start_looking(t, 0x3_0000_004e, 0);
        e.step(t, 2, note(Looking, 3, 0x3_0000_004e, 1));
        e.step(t, 3, note(Looking, 3, 0x3_0000_004e, 1));
        assert!(e.finalize_deadline.is_some(), "2, 3 and I agree on 3");
        // 4's vote of round 3 is worse: dropped, as ZooKeeper drops it.
        let out = e.step(t + FW / 2, 4, note(Looking, 4, 0x2_0000_0185, 3));
        assert!(sends(&out).is_empty());
        assert_eq!(e.logicalclock(), 1);
        let out = e.tick(t + FW / 2 + FW);
        assert!(matches!(&out[0], Output::Decided(d) if d.vote.leader == 3));
        let told: Vec<(u64, ServerState, u64)> = (out.iter().skip(1))
            .filter_map(|o| match o {
                Output::Send {
                    to,
                    notification: n,
                } => Some((*to, n.state, n.leader)),
                _ => None,
            })
            .collect();
        assert_eq!(told, vec![(4, Following, 3)]);
    }

    #[test]
    fn a_better_vote_during_finalize_wait_reopens_the_election() {
        let t = Instant::now();
        let mut e = Election::new(cfg(1, 3), t);
        e.start_looking(t, 0, 0);
        e.step(t, 2, note(Looking, 2, 0, 1));
        assert!(e.finalize_deadline.is_some(), "1 and 2 agree on 2");
        e.step(t + FW / 2, 3, note(Looking, 3, 0, 1));
        assert_eq!(e.proposal().leader, 3);
        assert!(e.finalize_deadline.is_some(), "1 and 3 now agree on 3");
        let out = e.tick(t + FW / 2 + FW);
        assert!(matches!(&out[..], [Output::Decided(d)] if d.vote.leader == 3));
    }

    #[test]
    fn joins_an_established_leader_through_outofelection_only_if_it_leads() {
        let t = Instant::now();
        let mut e = Election::new(cfg(3, 3), t);
        e.start_looking(t, 0, 0);
        // A follower's word alone is not enough (ZOOKEEPER-975): the leader must say it leads.
        e.step(t, 1, note(Following, 2, 0, 4));
        assert_eq!(e.state(), Looking);
        let out = e.step(t, 2, note(Leading, 2, 0, 4));
        assert_eq!(
            (e.state(), e.leader(), e.logicalclock()),
            (Following, Some(2), 4)
        );
        // The summary keeps both rounds and what each counted notice was.
        let [Output::Decided(d)] = &out[..] else {
            panic!("{out:?}")
        };
        assert_eq!((d.round, d.own_round, d.joined), (4, 1, true));
        let counted: Vec<_> = d.votes.iter().map(|v| (v.sid, v.round, v.state)).collect();
        assert_eq!(
            counted,
            vec![(1, Some(4), Some(Following)), (2, Some(4), Some(Leading))]
        );
    }

    #[test]
    fn a_vote_that_arrives_just_before_we_look_is_replayed_when_we_do() {
        let t = Instant::now();
        let mut e = Election::new(cfg(1, 3), t);
        e.start_looking(t, 0, 0);
        e.step(t, 2, note(Leading, 2, 0, 1));
        e.step(t, 3, note(Following, 2, 0, 1));
        assert_eq!(e.state(), Following);
        // 3 noticed the dead leader first; we still follow, answer, and keep its vote.
        let out = e.step(t, 3, note(Looking, 3, 0, 2));
        assert_eq!(sends(&out), vec![(3, 2, 1)]);
        let out = e.start_looking(t, 0, 0);
        assert_eq!(e.logicalclock(), 2);
        assert_eq!(e.proposal().leader, 3, "3's vote was replayed");
        assert!(sends(&out).contains(&(2, 3, 2)), "{out:?}");
        assert!(e.finalize_deadline.is_some(), "3 and I agree");
        // A vote parked long before we look again is not replayed.
        e.tick(t + FW);
        e.step(t + FW, 2, note(Looking, 2, 0, 3));
        let out = e.start_looking(t + FW * 3, 0, 0);
        assert_eq!(e.proposal().leader, 1);
        assert!(!sends(&out).iter().any(|s| s.1 == 2));
    }

    #[test]
    fn bad_peers_are_counted_not_obeyed() {
        let t = Instant::now();
        let mut e = Election::new(cfg(1, 3), t);
        e.start_looking(t, 0, 0);
        assert!(e.step(t, 9, note(Looking, 9, 0, 1)).is_empty());
        assert!(e.step(t, 2, note(Looking, 42, 0, 1)).is_empty());
        assert_eq!(e.counters().from_non_voter, 1);
        assert_eq!(e.counters().unknown_leader, 1);
        assert_eq!(e.proposal().leader, 1);
    }

    #[test]
    fn seeded_quorum_minority_bug_lets_a_lone_server_lead() {
        let t = Instant::now();
        let mut c = cfg(1, 3);
        c.bugs = Bugs::of(&[Bug::QuorumMinority]);
        let mut e = Election::new(c, t);
        e.start_looking(t, 5, 0);
        // Only my own vote backs me: a quorum of one under the bug.
        e.step(t, 2, note(Looking, 2, 0, 1));
        let out = e.tick(t + FW);
        assert!(matches!(&out[..], [Output::Decided(d)] if d.state == Leading));
    }
}
