//! vote-rule: for each election a node reports deciding (`last_election`), the decided leader
//! beats or equals every vote it counted, in ZooKeeper's total order (peerEpoch, zxid, sid),
//! and the votes for the decided leader come from a quorum of distinct servers.
//!
//! Why "every counted vote": FLE adopts any better vote of its round as its proposal, so a
//! decided proposal that some counted vote beats was decided without looking at it. Counted
//! FOLLOWING/LEADING notices for the decided leader itself are not ranked: followers of one
//! leader may answer with votes of two of its terms (a follower that reached the leader's next
//! term without an election), which ZooKeeper compares on leader and epoch only (ZOOKEEPER-1732). The
//! decided leader's own rank is (decided peer_epoch, decided zxid, leader sid): what it was
//! elected with. Each distinct summary a node reports is judged once.
//!
//! Only configured voters count (test.json's nodes; after a reconfig, the voters of the config
//! the deciding server reported at the read that showed the election or at the one before),
//! each once: a quorum made up with a vote from a server outside the configuration, or with
//! one server's vote twice, is invalid.
//!
//! The whole round: fle-node's `last_election.received` lists every vote the server heard in
//! its deciding round, agreeing or not, so a vote that should have won but lost is evidence
//! too: the decided leader must beat or equal every LOOKING vote of the same round (FLE adopts
//! each better one). A server that joined an established leader (`joined`, ZooKeeper's
//! outofelection), or that heard FOLLOWING/LEADING notices for the winner in its round (it may
//! have followed a leader a quorum elected without it), need not beat the votes it heard, and
//! is not judged on them.
//!
//! The decision's inputs (fle-node's `own_round` and each counted vote's `round`/`state`):
//! - a server that decided to LEAD on FOLLOWING/LEADING notices must have decided in its own
//!   round: ZooKeeper's checkLeader lets notices of any round name *another* server as leader
//!   (a late server joins an established ensemble), but for itself requires
//!   `logicalclock == electionEpoch` (ZOOKEEPER-1514: without it, stale FOLLOWING notices of an
//!   older round make a server lead without an election). A leader's `round` (the notices')
//!   differing from its `own_round` is that decision.
//! - within its deciding round a server's own proposals (its entries in `received`, in the
//!   order it adopted them) only rise in the total order: FLE adopts a vote only when it beats
//!   the current proposal, so a later proposal that an earlier one beats shows an order that is
//!   not ZooKeeper's (ZOOKEEPER-1419), whatever was decided in the end. (`received` keeps each
//!   distinct vote once; under a total order no proposal repeats, so that loses nothing.)
//!
//! - a LOOKING vote it counted is of its deciding round: FLE ignores LOOKING notices of older
//!   rounds and clears its tally when it moves to a newer one.
//!
//! These hold by construction on a correct server, so neither can false-alarm on lost
//! notifications, restarts or joins; histories without the fields are judged as before.
//!
//! ZooKeeper does not report its elections; its log does (`control::sut::zookeeper::
//! fle_log`): each notification received and each proposal made, from which the same summary
//! is read, so the same rules judge it.
//!
//! What it cannot see: elections a ZooKeeper log does not pin down (left out, see `fle_log`);
//! histories from before `received` existed (only the counted votes are judged); and votes a
//! server never received (lost notifications are the network's, not the rule's).

use super::finding::{EvRef, Finding, Item};
use super::model::Digest;
use crate::api::{ElectionSummary, ServerState};
use crate::history::sid_of;
use crate::history::test_info::TestInfo;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

pub const NAME: &str = "vote-rule";

pub fn check(d: &Digest, info: &TestInfo) -> Finding {
    let quorum = info.quorum();
    let voters: BTreeSet<u64> = info.voters().iter().filter_map(|n| sid_of(n)).collect();
    // After a reconfig, a decision is backed by a quorum of the config it was made under: the
    // deciding server's at the read that showed it, or at the read before.
    let under = |el: &super::model::Election| {
        d.configs_around(el.node, el.pos).map(|c| match c {
            Some(c) => c.voters.iter().copied().collect(),
            None => voters.clone(),
        })
    };
    let mut violations: Vec<Item> = Vec::new();
    let mut heard = 0usize;
    for el in &d.elections {
        let e = Decided::of(&el.summary, d.name(el.node));
        // The rules in order; an election is reported for the first it breaks.
        let mut broken = e
            .leads_out_of_its_round()
            .or_else(|| e.counts_a_stale_looking_vote())
            .or_else(|| e.proposals_fell())
            .or_else(|| e.beaten_by_a_counted_vote());
        if broken.is_none() {
            heard += e.s.received.len();
            let [before, at] = under(el);
            let short = |v: &BTreeSet<u64>| e.short_of_a_quorum(v, crate::api::quorum(v.len()));
            broken = e
                .beaten_by_a_heard_vote()
                .or_else(|| short(&before).and(short(&at)));
        }
        if let Some(why) = broken {
            let at = format!("{}'s election of round {}", e.name, e.s.round);
            violations.push((why, vec![EvRef::new(el.pos, at)]));
        }
    }
    let mut gaps: Vec<Item> = Vec::new();
    if d.elections.is_empty() {
        let why = if d.reads.iter().sum::<u64>() == 0 {
            "No node was ever read, so no election can be judged."
        } else if info.target == "zookeeper" {
            "No election was read from the servers' zookeeper.log: ZooKeeper 3.5-3.9 log each notification at INFO (other versions' lines are not understood), and an election whose decision the log does not pin down is left out, so the rule cannot be judged."
        } else {
            "No status read carried a decided election (`last_election`): this target does not expose the votes it counted, so the rule cannot be judged."
        };
        gaps.push((why.to_string(), vec![]));
    }
    let ok = format!(
        "Each of the {} elections reported was decided for a leader that beats or equals every vote counted and every vote heard in its round ({heard} heard), backed by a quorum ({quorum}) of distinct configured voters.",
        d.elections.len()
    );
    let took: Vec<u64> = d.elections.iter().map(|e| e.summary.took_ms).collect();
    let m = VoteRuleMeasurements {
        elections_judged: d.elections.len(),
        election_took_ms_max: took.iter().max().copied(),
        election_took_ms_mean: (!took.is_empty())
            .then(|| took.iter().sum::<u64>() as f64 / took.len() as f64),
    };
    Finding::judge(violations, gaps, ok).with_measurements(super::Measurements::VoteRule(m))
}

/// One decided election as a node reported it, and the rules it must keep; each rule says
/// how the election broke it, or None.
struct Decided<'a> {
    s: &'a ElectionSummary,
    name: &'a str,
    me: Option<u64>,
    /// (peerEpoch, zxid, leader): the decision, ordered as FLE orders votes.
    decided: (u64, u64, u64),
}

impl<'a> Decided<'a> {
    fn of(s: &'a ElectionSummary, name: &'a str) -> Self {
        Decided {
            s,
            name,
            me: sid_of(name),
            decided: (s.peer_epoch, s.zxid, s.leader),
        }
    }

    /// A server named leader by notices may lead only in its own round (checkLeader).
    fn leads_out_of_its_round(&self) -> Option<String> {
        let (s, name) = (self.s, self.name);
        let own = s
            .own_round
            .filter(|&own| self.me == Some(s.leader) && own != s.round)?;
        let notices: Vec<String> = s
            .votes
            .iter()
            .map(|v| match (v.state, v.round) {
                (Some(st), Some(r)) => format!("n{} {} round {r}", v.sid, state_name(st)),
                _ => format!("n{}", v.sid),
            })
            .collect();
        Some(format!(
            "{name} decided to lead on FOLLOWING/LEADING notices of round {} ({}) while its own round was {own}: a server named leader by notices may lead only in its own round (checkLeader, ZOOKEEPER-1514).",
            s.round,
            notices.join(", ")
        ))
    }

    /// A LOOKING vote counts only in its own round: FLE drops older rounds' notices and
    /// clears its tally when it moves to a newer round.
    fn counts_a_stale_looking_vote(&self) -> Option<String> {
        let (s, name) = (self.s, self.name);
        let v = s.votes.iter().find(|v| {
            v.state == Some(ServerState::Looking) && v.round.is_some_and(|r| r != s.round)
        })?;
        Some(format!(
            "{name} decided n{} in round {} counting n{}'s LOOKING vote of round {}: FLE counts a LOOKING vote only in its own round (it ignores older rounds and clears its tally for a newer one).",
            s.leader,
            s.round,
            v.sid,
            v.round.unwrap_or(0)
        ))
    }

    /// FLE only adopts a better vote: its own proposals in a round never fall.
    fn proposals_fell(&self) -> Option<String> {
        let (s, name) = (self.s, self.name);
        let mine = s.received.iter().filter(|v| {
            Some(v.sid) == self.me && v.round == s.round && v.state == ServerState::Looking
        });
        let (a, b) = mine
            .clone()
            .zip(mine.skip(1))
            .find(|(a, b)| (a.peer_epoch, a.zxid, a.leader) > (b.peer_epoch, b.zxid, b.leader))?;
        Some(format!(
            "{name}'s proposals fell in round {}: it proposed n{} (peerEpoch {}, zxid {:#x}) and later n{} (peerEpoch {}, zxid {:#x}), which the first beats; FLE only adopts a better vote, so the order it used is not (peerEpoch, zxid, sid) (ZOOKEEPER-1419). It decided n{}.",
            s.round, a.leader, a.peer_epoch, a.zxid, b.leader, b.peer_epoch, b.zxid, s.leader
        ))
    }

    /// No counted vote beats the decision. FOLLOWING/LEADING notices for the decided leader
    /// carry the zxid and round of whichever election their sender took part in: followers of
    /// one leader may hold votes of two of its terms (ZOOKEEPER-1732; ZooKeeper compares them
    /// on leader and epoch only), so those are not ranked against the decision.
    fn beaten_by_a_counted_vote(&self) -> Option<String> {
        let (s, name) = (self.s, self.name);
        let v = s.votes.iter().find(|v| {
            !v.settled_for(s.leader) && (v.peer_epoch, v.zxid, v.leader) > self.decided
        })?;
        Some(format!(
            "{name} decided n{} (peerEpoch {}, zxid {:#x}) in round {} although it counted n{}'s vote for n{} (peerEpoch {}, zxid {:#x}), which beats it.",
            s.leader, s.peer_epoch, s.zxid, s.round, v.sid, v.leader, v.peer_epoch, v.zxid
        ))
    }

    /// The whole round: every LOOKING vote of the deciding round heard by a server that
    /// decided it on LOOKING votes. One that joined a leader, or heard FOLLOWING/LEADING
    /// notices for the winner in its round (FLE then follows a leader a quorum already
    /// established, which a restarted server with a longer log need not beat), is not judged.
    fn beaten_by_a_heard_vote(&self) -> Option<String> {
        let (s, name) = (self.s, self.name);
        let on_notices = s.joined
            || s.received.iter().any(|v| {
                v.leader == s.leader
                    && v.round == s.round
                    && matches!(v.state, ServerState::Following | ServerState::Leading)
            });
        if on_notices {
            return None;
        }
        let v = s
            .received
            .iter()
            .filter(|v| v.round == s.round && v.state == ServerState::Looking)
            .find(|v| (v.peer_epoch, v.zxid, v.leader) > self.decided)?;
        Some(format!(
            "{name} decided n{} (peerEpoch {}, zxid {:#x}) in round {} on LOOKING votes although it heard n{}'s vote for n{} (peerEpoch {}, zxid {:#x}) in that round, which beats it.",
            s.leader, s.peer_epoch, s.zxid, s.round, v.sid, v.leader, v.peer_epoch, v.zxid
        ))
    }

    /// The leader's backers are a quorum of distinct configured voters.
    fn short_of_a_quorum(&self, voters: &BTreeSet<u64>, quorum: usize) -> Option<String> {
        let (s, name) = (self.s, self.name);
        let for_leader: Vec<u64> = s
            .votes
            .iter()
            .filter(|v| v.leader == s.leader)
            .map(|v| v.sid)
            .collect();
        let backers: BTreeSet<u64> = for_leader
            .iter()
            .copied()
            .filter(|sid| voters.contains(sid))
            .collect();
        if backers.len() >= quorum {
            return None;
        }
        let outsiders: BTreeSet<u64> = for_leader
            .iter()
            .copied()
            .filter(|sid| !voters.contains(sid))
            .collect();
        let from_voters = for_leader.iter().filter(|v| voters.contains(v)).count();
        let twice = from_voters - backers.len();
        let mut why = String::new();
        if !outsiders.is_empty() {
            why.push_str(&format!(
                " (votes of servers that are not voters {outsiders:?} do not count)"
            ));
        }
        if twice > 0 {
            why.push_str(&format!(
                " ({twice} repeated vote(s) of one server count once)"
            ));
        }
        Some(format!(
            "{name} decided n{} in round {} with the votes of {} configured voter(s) {:?}, short of a quorum of {quorum}{why}.",
            s.leader, s.round, backers.len(), backers
        ))
    }
}

/// A state as the wire and the logs spell it.
fn state_name(s: ServerState) -> &'static str {
    match s {
        ServerState::Looking => "LOOKING",
        ServerState::Following => "FOLLOWING",
        ServerState::Leading => "LEADING",
        ServerState::Observing => "OBSERVING",
    }
}

/// What vote-rule measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VoteRuleMeasurements {
    pub elections_judged: usize,
    pub election_took_ms_max: Option<u64>,
    pub election_took_ms_mean: Option<f64>,
}
