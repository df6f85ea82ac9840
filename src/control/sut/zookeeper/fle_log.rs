//! ZooKeeper's Fast Leader Election as its own log tells it, read into the election summary
//! fle-node reports (`api::ElectionSummary`), so that `vote-rule` judges real ZooKeeper.
//!
//! ZooKeeper 3.5 to 3.9 log, at INFO, each election's start (`New election. My id = 1,
//! proposed zxid=0x0`), every notification the server receives, its own included (`Notification:
//! my state:LOOKING; n.sid:4, n.state:LOOKING, n.leader:4, n.round:0x1, n.peerEpoch:0x0,
//! n.zxid:0x0, ...`), the state it leaves the election in (`QuorumPeer - FOLLOWING`) and, for
//! a follower, whom it connected to (`Successfully connected to leader, using address:
//! /10.0.0.5:2888`). Only the decision itself (`About to leave FLE instance`) is at DEBUG.
//! Other versions' lines are not recognised: no election is read, and vote-rule says so.
//!
//! What is observed and what is reconstructed: the server's proposals are its own
//! notifications (it sends each new proposal to itself too), in the order it adopted them,
//! and the decided vote is its last proposal (a decision on LOOKING votes) or the leader a
//! quorum of FOLLOWING/LEADING notices named (a server joining an established leader). Only
//! the bookkeeping is rebuilt: the tally (each sender's latest vote of the deciding round) and
//! which of the notifications heard count. The decision rule itself is never recomputed, so a
//! server that broke it shows it.
//!
//! Two guards keep a correct server from looking wrong:
//! - notifications logged in the last `FINALIZE_WAIT_MS` before the decision are not listed
//!   as heard: ZooKeeper decides after that long without a better vote, so what it logged
//!   then was either worse (read and dropped) or arrived after its last look;
//! - an election whose decision cannot be pinned down (no proposal of its own logged, no
//!   quorum behind any candidate, two candidates and no leader address) is not reported at
//!   all, rather than reported with a guess.

use crate::api::{CountedVote, ElectionSummary, ReceivedVote, ServerState};
use std::collections::BTreeMap;

/// FastLeaderElection's `finalizeWait` (a constant in 3.5-3.9): how long a server waits
/// without a better vote once its proposal has a quorum.
pub const FINALIZE_WAIT_MS: i64 = 200;

/// The most notifications kept of one election (a server cut off for minutes keeps
/// re-sending; with back-off that is a few hundred).
const MAX_HEARD: usize = 20_000;

/// One line of zookeeper.log that the election is made of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FleLine {
    /// `New election. My id = ID, proposed zxid=0x..`: a new election instance.
    NewElection { at_ms: i64, myid: u64 },
    /// A notification received while in `my_state`.
    Notification {
        at_ms: i64,
        my_state: ServerState,
        vote: ReceivedVote,
    },
    /// `QuorumPeer - LEADING` (or FOLLOWING, OBSERVING, LOOKING): the server's new state.
    State { at_ms: i64, state: ServerState },
    /// A follower's connection to its leader (`ip:port`).
    ConnectedTo { addr: String },
}

/// Reads one log line (None: not one of the election's).
pub fn parse_line(line: &str) -> Option<FleLine> {
    let at_ms = || timestamp_ms(line);
    if let Some(rest) = after(line, "New election. My id = ") {
        let myid = rest.split(',').next()?.trim().parse().ok()?;
        return Some(FleLine::NewElection {
            at_ms: at_ms()?,
            myid,
        });
    }
    if let Some(rest) = after(line, "Notification: my state:") {
        let (my_state, fields) = rest.split_once(';')?;
        let field = |name: &str| -> Option<&str> {
            fields
                .split(',')
                .find_map(|f| f.trim().strip_prefix(name)?.strip_prefix(':'))
        };
        let vote = ReceivedVote {
            sid: field("n.sid")?.parse().ok()?,
            leader: field("n.leader")?.parse().ok()?,
            zxid: hex(field("n.zxid")?)?,
            peer_epoch: hex(field("n.peerEpoch")?)?,
            round: hex(field("n.round")?)?,
            state: state(field("n.state")?)?,
        };
        return Some(FleLine::Notification {
            at_ms: at_ms()?,
            my_state: state(my_state)?,
            vote,
        });
    }
    // QuorumPeer's run loop logs the bare state name as it enters each state.
    if line.contains("QuorumPeer") {
        if let Some((_, last)) = line.trim_end().rsplit_once(" - ") {
            if let Some(state) = state(last) {
                return Some(FleLine::State {
                    at_ms: at_ms()?,
                    state,
                });
            }
        }
    }
    if let Some(rest) = after(line, "Successfully connected to leader, using address: ") {
        let addr = rest.trim().rsplit('/').next()?.to_string();
        return Some(FleLine::ConnectedTo { addr });
    }
    None
}

/// The text after `marker`, if the line holds it.
fn after<'a>(line: &'a str, marker: &str) -> Option<&'a str> {
    line.find(marker).map(|i| &line[i + marker.len()..])
}

/// `0x1f` as a number.
fn hex(s: &str) -> Option<u64> {
    u64::from_str_radix(s.trim().strip_prefix("0x")?, 16).ok()
}

/// A state as ZooKeeper spells it.
fn state(s: &str) -> Option<ServerState> {
    match s.trim() {
        "LOOKING" => Some(ServerState::Looking),
        "FOLLOWING" => Some(ServerState::Following),
        "LEADING" => Some(ServerState::Leading),
        "OBSERVING" => Some(ServerState::Observing),
        _ => None,
    }
}

/// The line's leading time in ms: `2026-12-01T18:23:00.236+0000` (Debian's layout) or
/// `2026-12-01 18:23:00,236` (ZooKeeper's own `%d{ISO8601}`). The zone is left out: only
/// differences within one log are used.
fn timestamp_ms(line: &str) -> Option<i64> {
    let stamp: String = line
        .get(..23)?
        .chars()
        .map(|c| match c {
            'T' => ' ',
            ',' => '.',
            c => c,
        })
        .collect();
    chrono::NaiveDateTime::parse_from_str(&stamp, "%Y-%m-%d %H:%M:%S%.3f")
        .ok()
        .map(|t| t.and_utc().timestamp_millis())
}

/// One election instance: from `New election` to the state it ended in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Span {
    pub myid: u64,
    pub started_ms: i64,
    /// Notifications received while LOOKING, in the order logged (at most `MAX_HEARD`).
    pub heard: Vec<(i64, ReceivedVote)>,
    /// More were logged than are kept: the tally cannot be rebuilt.
    pub overflow: bool,
    /// When it left the election, and in which state.
    pub ended: Option<(i64, ServerState)>,
    /// The leader address a follower connected to next, if logged.
    pub leader_addr: Option<String>,
}

/// Election instances as lines arrive; a line cut by the end of what was read is the caller's
/// to hold back.
#[derive(Debug, Clone, Default)]
pub struct Spans {
    open: Option<Span>,
    /// The last span that ended (a follower's leader address may still follow it).
    pub last: Option<Span>,
}

impl Spans {
    pub fn line(&mut self, line: &str) {
        let Some(l) = parse_line(line) else { return };
        match l {
            FleLine::NewElection { at_ms, myid } => {
                self.open = Some(Span {
                    myid,
                    started_ms: at_ms,
                    heard: Vec::new(),
                    overflow: false,
                    ended: None,
                    leader_addr: None,
                })
            }
            FleLine::Notification {
                at_ms,
                my_state: ServerState::Looking,
                vote,
            } => {
                if let Some(s) = &mut self.open {
                    if s.heard.len() < MAX_HEARD {
                        s.heard.push((at_ms, vote));
                    } else {
                        s.overflow = true;
                    }
                }
            }
            FleLine::Notification { .. } => {}
            FleLine::State { at_ms, state } if state != ServerState::Looking => {
                if let Some(mut s) = self.open.take() {
                    s.ended = Some((at_ms, state));
                    self.last = Some(s);
                }
            }
            FleLine::State { .. } => {}
            FleLine::ConnectedTo { addr } => {
                if let Some(s) = &mut self.last {
                    s.leader_addr.get_or_insert(addr);
                }
            }
        }
    }

    /// Whether an election is under way (begun, not yet ended).
    pub fn electing(&self) -> bool {
        self.open.is_some()
    }
}

/// The decision a span ended in, as fle-node would have reported it: `quorum` of the
/// configured voters, `sid_at` naming the server at a leader address. Err says why the
/// decision cannot be pinned down.
pub fn summary(
    span: &Span,
    quorum: usize,
    sid_at: impl Fn(&str) -> Option<u64>,
) -> Result<ElectionSummary, String> {
    let (end, state) = span.ended.ok_or("the election has not ended")?;
    if span.overflow {
        return Err(format!("more than {MAX_HEARD} notifications were logged"));
    }
    if state == ServerState::Observing {
        return Err("an observer's election is not judged".into());
    }
    let me = span.myid;
    let own = span
        .heard
        .iter()
        .map(|(_, v)| v)
        .filter(|v| v.sid == me && v.state == ServerState::Looking);
    let proposal = own
        .clone()
        .next_back()
        .ok_or("no proposal of its own was logged")?;
    let round = own.map(|v| v.round).max().unwrap_or(proposal.round);
    let heard: Vec<&ReceivedVote> = span
        .heard
        .iter()
        .filter(|(at, _)| *at <= end - FINALIZE_WAIT_MS)
        .map(|(_, v)| v)
        .collect();
    let mut candidates = Vec::new();
    if let Some(s) = on_looking_votes(proposal, round, &heard, quorum) {
        candidates.push(s);
    }
    candidates.extend(on_notices(span, round, quorum));
    candidates.retain(|c| (c.leader == me) == (state == ServerState::Leading));
    let leader = match span.leader_addr.as_deref().and_then(&sid_at) {
        Some(sid) if state == ServerState::Following => Some(sid),
        _ => None,
    };
    if let Some(l) = leader {
        candidates.retain(|c| c.leader == l);
    }
    let mut seen = std::collections::BTreeSet::new();
    candidates.retain(|c| seen.insert(c.leader));
    let mut s = match candidates.len() {
        0 => return Err("no candidate had a quorum behind it in what was logged".into()),
        1 => candidates.remove(0),
        _ => return Err("two candidates had a quorum and no leader address says which".into()),
    };
    s.took_ms = (end - span.started_ms).max(0) as u64;
    s.received = distinct(heard.iter().copied());
    Ok(s)
}

/// Decided on LOOKING votes: its last proposal, with a quorum of the tally of its round
/// (each sender's latest vote of that round) agreeing. The counted votes are the round's
/// LOOKING votes and the FOLLOWING/LEADING notices for the proposed leader.
fn on_looking_votes(
    proposal: &ReceivedVote,
    round: u64,
    heard: &[&ReceivedVote],
    quorum: usize,
) -> Option<ElectionSummary> {
    let tally: BTreeMap<u64, &ReceivedVote> = heard
        .iter()
        .filter(|v| v.round == round)
        .map(|v| (v.sid, *v))
        .collect();
    let settled =
        |v: &ReceivedVote| matches!(v.state, ServerState::Following | ServerState::Leading);
    let counted: Vec<&ReceivedVote> = tally
        .values()
        .copied()
        .filter(|v| !settled(v) || v.leader == proposal.leader)
        .collect();
    let agree = counted
        .iter()
        .filter(|v| {
            v.leader == proposal.leader
                && v.peer_epoch == proposal.peer_epoch
                && (settled(v) || v.zxid == proposal.zxid)
        })
        .count();
    (agree >= quorum).then(|| ElectionSummary {
        round,
        leader: proposal.leader,
        zxid: proposal.zxid,
        peer_epoch: proposal.peer_epoch,
        votes: counted.into_iter().map(counted_vote).collect(),
        took_ms: 0,
        received: Vec::new(),
        joined: false,
        own_round: Some(round),
    })
}

/// Joined on notices: a quorum of senders whose latest FOLLOWING/LEADING notice names one
/// leader and epoch, the leader's own LEADING notice among them (ZooKeeper's checkLeader),
/// unless the leader is this server. The round is the notices' (the last one counted).
fn on_notices(span: &Span, own_round: u64, quorum: usize) -> Vec<ElectionSummary> {
    let latest: BTreeMap<u64, &ReceivedVote> = span
        .heard
        .iter()
        .map(|(_, v)| v)
        .filter(|v| matches!(v.state, ServerState::Following | ServerState::Leading))
        .map(|v| (v.sid, v))
        .collect();
    let mut named: Vec<(u64, u64)> = latest.values().map(|v| (v.leader, v.peer_epoch)).collect();
    named.sort_unstable();
    named.dedup();
    named
        .into_iter()
        .filter_map(|(leader, epoch)| {
            let backers: Vec<&ReceivedVote> = latest
                .values()
                .copied()
                .filter(|v| v.leader == leader && v.peer_epoch == epoch)
                .collect();
            let leads = backers
                .iter()
                .find(|v| v.sid == leader && v.state == ServerState::Leading);
            if backers.len() < quorum || (leads.is_none() && leader != span.myid) {
                return None;
            }
            let last = backers.iter().max_by_key(|v| position(span, v))?;
            Some(ElectionSummary {
                round: last.round,
                leader,
                zxid: leads.map_or(last.zxid, |l| l.zxid),
                peer_epoch: epoch,
                votes: backers.into_iter().map(counted_vote).collect(),
                took_ms: 0,
                received: Vec::new(),
                joined: true,
                own_round: Some(own_round),
            })
        })
        .collect()
}

/// Where a vote was last heard in the span.
fn position(span: &Span, v: &ReceivedVote) -> usize {
    span.heard.iter().rposition(|(_, h)| h == v).unwrap_or(0)
}

fn counted_vote(v: &ReceivedVote) -> CountedVote {
    CountedVote {
        sid: v.sid,
        leader: v.leader,
        zxid: v.zxid,
        peer_epoch: v.peer_epoch,
        round: Some(v.round),
        state: Some(v.state),
    }
}

/// Each distinct vote once, in the order first heard (as fle-node lists them).
fn distinct<'a>(votes: impl Iterator<Item = &'a ReceivedVote>) -> Vec<ReceivedVote> {
    let mut out: Vec<ReceivedVote> = Vec::new();
    for v in votes {
        if !out.contains(v) {
            out.push(v.clone());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checker::{check_history, CheckOptions, Validity};
    use crate::history::test_info::TestInfo;

    /// Server 1's first election in a 5-server ZooKeeper 3.8.0 ensemble, as it logged it
    /// (evidence/zookeeper-3.8.0-divergence-seed21, thread names shortened): it proposes
    /// itself, adopts n4's better vote, and follows n4 once n1, n3 and n4 agree.
    const FIRST: &str = "\
2026-12-01T18:23:00.236+0000 [QuorumPeer[myid=1]] INFO org.apache.zookeeper.server.quorum.QuorumPeer - LOOKING
2026-12-01T18:23:00.237+0000 [QuorumPeer[myid=1]] INFO org.apache.zookeeper.server.quorum.FastLeaderElection - New election. My id = 1, proposed zxid=0x0
2026-12-01T18:23:00.279+0000 [WorkerReceiver[myid=1]] INFO org.apache.zookeeper.server.quorum.FastLeaderElection - Notification: my state:LOOKING; n.sid:1, n.state:LOOKING, n.leader:1, n.round:0x1, n.peerEpoch:0x0, n.zxid:0x0, message format version:0x2, n.config version:0x0
2026-12-01T18:23:00.326+0000 [WorkerReceiver[myid=1]] INFO org.apache.zookeeper.server.quorum.FastLeaderElection - Notification: my state:LOOKING; n.sid:4, n.state:LOOKING, n.leader:4, n.round:0x1, n.peerEpoch:0x0, n.zxid:0x0, message format version:0x2, n.config version:0x0
2026-12-01T18:23:00.342+0000 [WorkerReceiver[myid=1]] INFO org.apache.zookeeper.server.quorum.FastLeaderElection - Notification: my state:LOOKING; n.sid:1, n.state:LOOKING, n.leader:4, n.round:0x1, n.peerEpoch:0x0, n.zxid:0x0, message format version:0x2, n.config version:0x0
2026-12-01T18:23:00.391+0000 [WorkerReceiver[myid=1]] INFO org.apache.zookeeper.server.quorum.FastLeaderElection - Notification: my state:LOOKING; n.sid:4, n.state:LOOKING, n.leader:4, n.round:0x1, n.peerEpoch:0x0, n.zxid:0x0, message format version:0x2, n.config version:0x0
2026-12-01T18:23:00.464+0000 [WorkerReceiver[myid=1]] INFO org.apache.zookeeper.server.quorum.FastLeaderElection - Notification: my state:LOOKING; n.sid:3, n.state:LOOKING, n.leader:4, n.round:0x1, n.peerEpoch:0x0, n.zxid:0x0, message format version:0x2, n.config version:0x0
2026-12-01T18:23:00.666+0000 [QuorumPeer[myid=1]] INFO org.apache.zookeeper.server.quorum.QuorumPeer - Peer state changed: following
2026-12-01T18:23:00.666+0000 [QuorumPeer[myid=1]] INFO org.apache.zookeeper.server.quorum.QuorumPeer - FOLLOWING
2026-12-01T18:23:00.686+0000 [QuorumPeer[myid=1]] INFO org.apache.zookeeper.server.quorum.Learner - FOLLOWING - LEADER ELECTION TOOK - 447 MS
2026-12-01T18:23:01.939+0000 [WorkerReceiver[myid=1]] INFO org.apache.zookeeper.server.quorum.FastLeaderElection - Notification: my state:FOLLOWING; n.sid:5, n.state:LOOKING, n.leader:5, n.round:0x1, n.peerEpoch:0x0, n.zxid:0x0, message format version:0x2, n.config version:0x0
";

    /// Its second: n5 leads epoch 1 (elected without it), and n1 joins on the FOLLOWING and
    /// LEADING notices of round 1 while its own round is 2.
    const JOINED: &str = "\
2026-12-01T18:23:02.705+0000 [QuorumPeer[myid=1]] INFO org.apache.zookeeper.server.quorum.QuorumPeer - LOOKING
2026-12-01T18:23:02.705+0000 [QuorumPeer[myid=1]] INFO org.apache.zookeeper.server.quorum.FastLeaderElection - New election. My id = 1, proposed zxid=0x0
2026-12-01T18:23:02.713+0000 [WorkerReceiver[myid=1]] INFO org.apache.zookeeper.server.quorum.FastLeaderElection - Notification: my state:LOOKING; n.sid:1, n.state:LOOKING, n.leader:1, n.round:0x2, n.peerEpoch:0x0, n.zxid:0x0, message format version:0x2, n.config version:0x0
2026-12-01T18:23:02.720+0000 [WorkerReceiver[myid=1]] INFO org.apache.zookeeper.server.quorum.FastLeaderElection - Notification: my state:LOOKING; n.sid:3, n.state:FOLLOWING, n.leader:5, n.round:0x1, n.peerEpoch:0x1, n.zxid:0x0, message format version:0x2, n.config version:0x0
2026-12-01T18:23:02.723+0000 [WorkerReceiver[myid=1]] INFO org.apache.zookeeper.server.quorum.FastLeaderElection - Notification: my state:LOOKING; n.sid:2, n.state:FOLLOWING, n.leader:5, n.round:0x1, n.peerEpoch:0x1, n.zxid:0x0, message format version:0x2, n.config version:0x0
2026-12-01T18:23:02.727+0000 [WorkerReceiver[myid=1]] INFO org.apache.zookeeper.server.quorum.FastLeaderElection - Notification: my state:LOOKING; n.sid:5, n.state:LEADING, n.leader:5, n.round:0x1, n.peerEpoch:0x1, n.zxid:0x0, message format version:0x2, n.config version:0x0
2026-12-01T18:23:02.728+0000 [QuorumPeer[myid=1]] INFO org.apache.zookeeper.server.quorum.QuorumPeer - FOLLOWING
2026-12-01T18:23:02.733+0000 [LeaderConnector-/10.238.221.15:2888] INFO org.apache.zookeeper.server.quorum.Learner - Successfully connected to leader, using address: /10.238.221.15:2888
";

    /// Made by hand: n1 proposes itself and leads, although n3's LOOKING vote of the same
    /// round, with a longer log, came 300 ms before it decided (at `at` ms past 12:00:00).
    fn lost_to_a_higher_vote(at: u32) -> String {
        let n = |ms: u32, sid: u64, leader: u64, zxid: &str| {
            format!("2026-12-01 12:00:00,{ms:03} [myid:1] - INFO  [WorkerReceiver[myid=1]:FastLeaderElection$Messenger$WorkerReceiver@390] - Notification: my state:LOOKING; n.sid:{sid}, n.state:LOOKING, n.leader:{leader}, n.round:0x3, n.peerEpoch:0x2, n.zxid:{zxid}, message format version:0x2, n.config version:0x0\n")
        };
        let mut heard = [
            (10, n(10, 1, 1, "0x200000005")),
            (20, n(20, 2, 1, "0x200000005")),
            (at, n(at, 3, 3, "0x200000009")),
            (40, n(40, 4, 1, "0x200000005")),
        ];
        heard.sort_by_key(|(ms, _)| *ms);
        let heard: String = heard.into_iter().map(|(_, l)| l).collect();
        format!(
            "2026-12-01 12:00:00,000 [myid:1] - INFO  [QuorumPeer[myid=1](plain=0.0.0.0:2181):FastLeaderElection@919] - New election. My id = 1, proposed zxid=0x200000005\n{heard}\
             2026-12-01 12:00:00,900 [myid:1] - INFO  [QuorumPeer[myid=1](plain=0.0.0.0:2181):QuorumPeer@1458] - LEADING\n"
        )
    }

    fn spans(log: &str) -> Spans {
        let mut s = Spans::default();
        log.lines().for_each(|l| s.line(l));
        s
    }

    fn read(log: &str) -> Result<ElectionSummary, String> {
        let s = spans(log);
        let last = s.last.as_ref().ok_or("no election ended")?;
        summary(last, 3, |addr| (addr == "10.238.221.15:2888").then_some(5))
    }

    /// vote-rule's verdict on one status read of n1 carrying `e`, in a 5-server ZooKeeper run.
    fn vote_rule(e: &ElectionSummary) -> (Validity, String) {
        let info: TestInfo = serde_json::from_value(serde_json::json!({
            "name": "t", "target": "zookeeper", "nodes": ["n1", "n2", "n3", "n4", "n5"],
            "workload": "election", "nemesis": [], "seed": 1, "time_limit_s": 10.0,
            "tick_ms": 200, "init_limit": 10, "sync_limit": 5,
            "started_at": "2026-12-01T12:00:00Z", "replay_command": "x", "version": "0"
        }))
        .unwrap();
        let status = crate::api::NodeStatus {
            config: None,
            sid: 1,
            state: if e.leader == 1 {
                ServerState::Leading
            } else {
                ServerState::Following
            },
            leader: Some(e.leader),
            peer_epoch: e.peer_epoch + 1,
            accepted_epoch: e.peer_epoch + 1,
            election_epoch: 0,
            last_zxid: 0,
            last_zxid_hex: "0x0".into(),
            last_committed_zxid: 0,
            zab_phase: crate::api::ZabPhase::Broadcast,
            wall_clock_ms: 0,
            uptime_ms: 0,
            last_election: Some(e.clone()),
            peer_type: Default::default(),
        };
        let event: crate::history::Event = serde_json::from_value(serde_json::json!({
            "index": 0, "time": 1, "process": "n1", "type": "ok", "f": "status", "node": "n1",
            "value": status,
        }))
        .unwrap();
        let r = check_history(&[event], &info, &CheckOptions::default());
        let c = r.checkers.iter().find(|c| c.name == "vote-rule").unwrap();
        (c.valid, c.explanation.clone())
    }

    #[test]
    fn an_election_decided_on_looking_votes_reads_as_fle_node_reports_it() {
        let e = read(FIRST).unwrap();
        assert_eq!((e.round, e.leader, e.zxid, e.peer_epoch), (1, 4, 0, 0));
        assert!(!e.joined);
        let mut backers: Vec<u64> = e
            .votes
            .iter()
            .filter(|v| v.leader == 4)
            .map(|v| v.sid)
            .collect();
        backers.sort_unstable();
        assert_eq!(backers, [1, 3, 4]);
        // Its own two proposals, in the order adopted, then what it heard.
        let mine: Vec<u64> = e
            .received
            .iter()
            .filter(|v| v.sid == 1)
            .map(|v| v.leader)
            .collect();
        assert_eq!(mine, [1, 4]);
        assert_eq!(e.took_ms, 429);
        assert_eq!(vote_rule(&e).0, Validity::True, "{}", vote_rule(&e).1);
    }

    #[test]
    fn a_server_joining_an_established_leader_reads_as_joined() {
        let e = read(JOINED).unwrap();
        assert_eq!(
            (e.leader, e.peer_epoch, e.round, e.own_round),
            (5, 1, 1, Some(2))
        );
        assert!(e.joined);
        assert_eq!(e.votes.len(), 3);
        assert_eq!(vote_rule(&e).0, Validity::True, "{}", vote_rule(&e).1);
    }

    #[test]
    fn a_leader_that_lost_to_a_higher_vote_is_invalid() {
        let e = read(&lost_to_a_higher_vote(30)).unwrap();
        assert_eq!(e.leader, 1);
        let (valid, why) = vote_rule(&e);
        assert_eq!(valid, Validity::False, "{why}");
        assert!(why.contains("n3's vote for n3"), "{why}");
    }

    /// A vote logged within finalizeWait of the decision may have come after the server's
    /// last look: it is not held against it.
    #[test]
    fn a_vote_logged_just_before_the_decision_is_not_held_against_it() {
        let e = read(&lost_to_a_higher_vote(850)).unwrap();
        assert!(e.received.iter().all(|v| v.sid != 3), "{:?}", e.received);
        assert_eq!(vote_rule(&e).0, Validity::True, "{}", vote_rule(&e).1);
    }

    #[test]
    fn an_election_the_log_does_not_pin_down_is_left_out() {
        // FOLLOWING with one agreeing vote of three needed.
        let short: String = FIRST
            .lines()
            .filter(|l| !l.contains("n.sid:3,") && !l.contains("n.sid:4,"))
            .map(|l| format!("{l}\n"))
            .collect();
        assert!(read(&short).unwrap_err().contains("quorum"));
        // No proposal of its own.
        let deaf: String = FIRST
            .lines()
            .filter(|l| !l.contains("n.sid:1,"))
            .map(|l| format!("{l}\n"))
            .collect();
        assert!(read(&deaf).unwrap_err().contains("proposal"));
        // Still electing.
        let open: String = FIRST.lines().take(6).map(|l| format!("{l}\n")).collect();
        assert!(spans(&open).electing() && spans(&open).last.is_none());
    }

    #[test]
    fn lines_of_other_shapes_are_not_the_elections() {
        for l in [
            "2026-12-01T18:23:00.666+0000 [QuorumPeer[myid=1]] INFO org.apache.zookeeper.server.quorum.QuorumPeer - Peer state changed: following - discovery",
            "2026-12-01T18:23:00.820+0000 [QuorumPeer[myid=5]] INFO org.apache.zookeeper.server.quorum.Leader - LEADING - LEADER ELECTION TOOK - 393 MS",
            "Notification: my state:LOOKING; n.sid:x",
            "garbage \u{fffd} - LEADING",
            "",
        ] {
            assert_eq!(parse_line(l), None, "{l}");
        }
    }
}
