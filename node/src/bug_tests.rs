//! Table tests of each seeded bug's mechanism inside the pure state machines (election, Zab
//! leader and follower): the same messages with and without the bug, and what changes.
//! A bug's story on a cluster (servers exchanging notifications over a network) is a
//! `sim::scenario` test in the controller crate (`src/commands/sim/scenario/tests.rs`), and its
//! real-process side is in tests/it/bugs.rs.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::api::{make_zxid as z, ReceivedVote, ServerState};
use crate::bugs::{Bug, Bugs};
use crate::election::{Election, ElectionConfig, Output};
use crate::txnlog::Txn;
use crate::wire::Notification;
use crate::zab::actions::{Output as ZabOut, PersistOp};
use crate::zab::follower::{Follower, FollowerConfig};
use crate::zab::leader::{Leader, LeaderConfig};
use crate::zab::messages::Msg;

use ServerState::*;

const FW: Duration = Duration::from_millis(200);

fn election(sid: u64, n: u64, bugs: Bugs) -> Election {
    Election::new(config(sid, n, bugs), Instant::now())
}

fn config(sid: u64, n: u64, bugs: Bugs) -> ElectionConfig {
    ElectionConfig {
        sid,
        voters: (1..=n).collect(),
        observers: Default::default(),
        finalize_wait: FW,
        max_notification_interval: Duration::from_secs(60),
        bugs,
        config_bytes: Vec::new(),
        config_version: 0,
        removed: Default::default(),
    }
}

fn note(state: ServerState, leader: u64, zxid: u64, round: u64, epoch: u64) -> Notification {
    Notification {
        state,
        leader,
        zxid,
        election_epoch: round,
        peer_epoch: epoch,
        version: 2,
        config: Vec::new(),
    }
}

fn decided(out: &[Output]) -> Option<&crate::election::Decision> {
    out.iter().find_map(|o| match o {
        Output::Decided(d) => Some(d),
        _ => None,
    })
}

fn both(bug: Bug) -> [(Bugs, bool); 2] {
    [(Bugs::none(), false), (Bugs::of(&[bug]), true)]
}

/// ZOOKEEPER-1419 on a round jump: n1 (peerEpoch 2) hears n3's vote (same zxid, peerEpoch 1)
/// of a higher round, then n2's vote for n1. Its initial vote is heard first in the new round,
/// then what it adopted: the buggy n1's own proposals fall (what vote-rule reads; it comes
/// back to its own vote, heard once), the correct n1 keeps its own. Both decide n1.
#[test]
fn a_round_jump_shows_the_initial_vote_then_the_adopted_one() {
    for (bugs, buggy) in both(Bug::VoteOrderNotTotal) {
        let t = Instant::now();
        let mut e = election(1, 3, bugs);
        e.start_looking(t, z(1, 5), 2);
        e.step(t, 3, note(Looking, 3, z(1, 5), 4, 1));
        e.step(t, 2, note(Looking, 1, z(1, 5), 4, 2));
        let d = decided(&e.tick(t + FW)).cloned().expect("decided");
        assert_eq!(d.vote.leader, 1);
        let mine: Vec<(u64, u64, u64)> = d
            .received
            .iter()
            .filter(|r| r.sid == 1)
            .map(|r| (r.leader, r.peer_epoch, r.round))
            .collect();
        if buggy {
            assert_eq!(mine, vec![(1, 2, 4), (3, 1, 4)]);
        } else {
            assert_eq!(mine, vec![(1, 2, 4)]);
        }
    }
}

/// ZOOKEEPER-1514: FOLLOWING notices naming me, from a round older than mine.
#[test]
fn follow_older_round_leads_on_stale_notices() {
    for (bugs, buggy) in both(Bug::FollowOlderRound) {
        let t = Instant::now();
        let mut e = election(1, 3, bugs);
        e.start_looking(t, 0, 0);
        e.start_looking(t, 0, 0); // round 2
        e.step(t, 2, note(Following, 1, 0, 1, 0));
        let out = e.step(t, 3, note(Following, 1, 0, 1, 0));
        if buggy {
            assert_eq!(e.state(), Leading);
            let d = decided(&out).expect("decided");
            assert!(d.joined);
            // The evidence vote-rule judges: the notices' round (1), not my own (2).
            assert_eq!((d.round, d.own_round), (1, 2));
            let rounds: Vec<_> = d.votes.iter().map(|v| (v.sid, v.round, v.state)).collect();
            assert_eq!(
                rounds,
                vec![(2, Some(1), Some(Following)), (3, Some(1), Some(Following))]
            );
        } else {
            assert_eq!(e.state(), Looking, "{out:?}");
        }
    }
}

/// After a reconfig removed 4 from voters 1-4 (now 1-3, quorum 2), n1 hears only removed
/// n4's vote for 3: the correct n1 drops it, the buggy one adopts it and decides with it.
#[test]
fn removed_voter_counted_decides_with_a_removed_servers_vote() {
    for (bugs, buggy) in both(Bug::RemovedVoterCounted) {
        let t = Instant::now();
        let mut cfg = config(1, 3, bugs);
        cfg.removed = [4].into();
        let mut e = Election::new(cfg, t);
        e.start_looking(t, 0, 0);
        e.step(t, 4, note(Looking, 3, 0, 1, 0));
        let out = e.tick(t + FW);
        if buggy {
            let d = decided(&out).expect("decided");
            assert_eq!(d.vote.leader, 3);
            let sids: Vec<u64> = d.votes.iter().map(|v| v.sid).collect();
            assert_eq!(sids, vec![1, 4]);
        } else {
            assert!(decided(&out).is_none(), "{out:?}");
            assert_eq!(e.counters().from_non_voter, 1);
        }
    }
}

/// ZOOKEEPER-975: one LEADING notice, nobody following it.
#[test]
fn follow_single_leading_joins_without_a_quorum() {
    for (bugs, buggy) in both(Bug::FollowSingleLeading) {
        let t = Instant::now();
        let mut e = election(1, 5, bugs);
        e.start_looking(t, 0, 0);
        e.step(t, 4, note(Leading, 4, 0, 9, 0));
        let want = if buggy {
            (Following, Some(4))
        } else {
            (Looking, None)
        };
        assert_eq!((e.state(), e.leader()), want);
    }
}

/// ZOOKEEPER-1732: a leader and its follower report different rounds (the follower joined
/// later); the correct server joins them on (leader, peerEpoch), the buggy one never does.
#[test]
fn out_of_election_wrong_fields_cannot_join() {
    for (bugs, buggy) in both(Bug::OutOfElectionWrongFields) {
        let t = Instant::now();
        let mut e = election(1, 3, bugs);
        e.start_looking(t, 0, 0);
        e.step(t, 2, note(Leading, 2, z(1, 3), 5, 1));
        e.step(t, 3, note(Following, 2, z(1, 3), 4, 1));
        let want = if buggy {
            (Looking, None)
        } else {
            (Following, Some(2))
        };
        assert_eq!((e.state(), e.leader()), want);
    }
}

/// A follower of leader 5 that joined it on its notices `(5, zxid, round, epoch)`.
fn joined_follower(sid: u64, zxid: u64, round: u64, epoch: u64, bugs: Bugs) -> Election {
    let t = Instant::now();
    let mut e = election(sid, 5, bugs);
    e.start_looking(t, zxid, epoch);
    let others: Vec<u64> = (1..=4).filter(|&o| o != sid).take(2).collect();
    for o in others {
        e.step(t, o, note(Following, 5, zxid, round, epoch));
    }
    e.step(t, 5, note(Leading, 5, zxid, round, epoch));
    assert_eq!((e.state(), e.leader()), (Following, Some(5)));
    e
}

/// What `settled` answers a LOOKING notice from `to`.
fn answer(settled: &mut Election, to: u64, looking: &Notification) -> Notification {
    let out = settled.step(Instant::now(), to, looking.clone());
    out.into_iter()
        .find_map(|o| match o {
            Output::Send {
                to: t,
                notification,
            } if t == to => Some(notification),
            _ => None,
        })
        .expect("a settled server answers a looking one")
}

/// ZOOKEEPER-1732 in the sequence ZooKeeper's `updateElectionVote` comment tells: n1 and n2
/// joined leader n5 on its notices (round 3, zxid (1,9), epoch 1) but reached it only in its
/// next term: n5 was restarted and re-elected by n3, n4 (round 4, zxid (2,4), epoch 2) while
/// they were still dialing. Now all of them serve epoch 3, and n4 restarts. Correct (3.5+):
/// each settled server answers with epoch 3 (`update_peer_epoch`), leader and epoch agree, n4
/// joins. Bug (pre-fix path: no update, notices compared on round and zxid): 2 against 2, never
/// the quorum of 3 others, n4 looks for ever. Without the update even the correct comparison
/// splits them (epochs 1 and 2): why the correct path has it.
#[test]
fn out_of_election_wrong_fields_cannot_join_followers_of_two_terms() {
    for (bugs, buggy) in both(Bug::OutOfElectionWrongFields) {
        for update in [true, false] {
            let t = Instant::now();
            let (old, new) = ((z(1, 9), 3, 1), (z(2, 4), 4, 2));
            let mut n1 = joined_follower(1, old.0, old.1, old.2, bugs);
            let mut n2 = joined_follower(2, old.0, old.1, old.2, bugs);
            let mut n3 = joined_follower(3, new.0, new.1, new.2, bugs);
            // n5 leads round 4 on its own vote and n3's, n4's (n4 then restarts).
            let mut n5 = election(5, 5, bugs);
            n5.start_looking(t, new.0, new.2);
            n5.step(t, 3, note(Looking, 5, new.0, new.1, new.2));
            n5.step(t, 4, note(Following, 5, new.0, new.1, new.2));
            n5.step(t, 3, note(Following, 5, new.0, new.1, new.2));
            assert_eq!((n5.state(), n5.leader()), (Leading, Some(5)));
            if update {
                for e in [&mut n1, &mut n2, &mut n3, &mut n5] {
                    e.update_peer_epoch(3);
                }
            }
            let mut n4 = election(4, 5, bugs);
            n4.start_looking(t, new.0, new.2);
            let looking = note(Looking, 4, new.0, 1, new.2);
            for (sid, e) in [(1, &mut n1), (2, &mut n2), (3, &mut n3), (5, &mut n5)] {
                let a = answer(e, 4, &looking);
                n4.step(t, sid, a);
            }
            let joins = !buggy && update;
            let want = if joins {
                (Following, Some(5))
            } else {
                (Looking, None)
            };
            assert_eq!(
                (n4.state(), n4.leader()),
                want,
                "bug {buggy}, update {update}"
            );
        }
    }
}

/// The decision lists every vote heard in the deciding round, losing and superseded ones and
/// my own proposals included; votes of an earlier round are not in it.
#[test]
fn a_decision_reports_every_vote_heard_in_its_round() {
    let t = Instant::now();
    let mut e = election(2, 3, Bugs::none());
    e.start_looking(t, z(1, 5), 1);
    e.step(t, 1, note(Looking, 1, z(1, 4), 1, 1)); // round 1: forgotten at the round change
    e.step(t, 1, note(Looking, 1, z(1, 4), 2, 1)); // round 2, worse than my initial vote
    e.step(t, 3, note(Looking, 3, z(1, 6), 2, 1)); // better: adopted
    e.step(t, 1, note(Looking, 3, z(1, 6), 2, 1)); // 1 comes round to 3 (while I finalize)
    let out = e.tick(t + FW);
    let d = decided(&out).expect("decided");
    assert_eq!(
        (d.state, d.vote.leader, d.round, d.joined),
        (Following, 3, 2, false)
    );
    let heard: Vec<(u64, u64, u64)> = d
        .received
        .iter()
        .map(|r: &ReceivedVote| (r.sid, r.leader, r.zxid))
        .collect();
    assert_eq!(
        heard,
        vec![
            (2, 2, z(1, 5)),
            (1, 1, z(1, 4)),
            (2, 3, z(1, 6)),
            (3, 3, z(1, 6)),
            (1, 3, z(1, 6)),
        ]
    );
    assert!(d
        .received
        .iter()
        .all(|r| r.round == 2 && r.state == Looking));
    // The counted votes stay those that agree with the decision (1's came while finalizing).
    assert_eq!(
        d.votes.iter().map(|v| v.sid).collect::<Vec<_>>(),
        vec![2, 3]
    );
}

/// A join through outofelection is marked as such, with the notices heard.
#[test]
fn a_join_is_reported_as_joined() {
    let t = Instant::now();
    let mut e = election(3, 3, Bugs::none());
    e.start_looking(t, z(1, 9), 1);
    e.step(t, 1, note(Following, 2, z(1, 2), 4, 1));
    let out = e.step(t, 2, note(Leading, 2, z(1, 2), 4, 1));
    let d = decided(&out).expect("joined");
    assert!(d.joined);
    assert_eq!(d.received.len(), 3, "{:?}", d.received);
}

fn leader(bugs: Bugs, hist: &[u64]) -> Leader {
    Leader::new(
        LeaderConfig::for_tests(2, Default::default(), bugs),
        2,
        2,
        hist.iter()
            .map(|&zxid| Txn {
                zxid,
                value: json!(zxid),
            })
            .collect(),
        0,
    )
}

/// Leader 1 of three (quorum 2), follower 2 synced, in broadcast of epoch 3.
fn leader_in_broadcast(bugs: Bugs) -> Leader {
    let mut l = leader(bugs, &[]);
    l.start();
    l.step(
        2,
        Msg::FollowerInfo {
            sid: 2,
            accepted_epoch: 2,
            last_zxid: 0,
        },
    );
    l.step(
        2,
        Msg::AckEpoch {
            current_epoch: 2,
            last_zxid: 0,
        },
    );
    l.step(2, Msg::Ack { zxid: z(3, 0) });
    assert_eq!(l.phase(), crate::api::ZabPhase::Broadcast);
    l
}

/// Commit quorum off by one: the leader's own fsync alone commits a write.
#[test]
fn commit_quorum_minority_commits_on_the_leaders_own_ack() {
    for (bugs, buggy) in both(Bug::CommitQuorumMinority) {
        let mut l = leader_in_broadcast(bugs);
        let (zxids, _) = l.propose(vec![json!("a")]).unwrap();
        let out = l.self_durable(zxids[0]);
        assert_eq!(out.contains(&ZabOut::Committed(zxids[0])), buggy, "{out:?}");
        assert_eq!(l.committed() == zxids[0], buggy);
    }
}

/// ZOOKEEPER-1154: the follower's last txn (1,3) is a proposal the new leader never had,
/// between its (1,2) and (2,1): TRUNC to (1,2) then (2,1); the bug DIFFs and keeps (1,3).
#[test]
fn diff_without_trunc_keeps_a_diverged_txn() {
    for (bugs, buggy) in both(Bug::DiffWithoutTrunc) {
        let mut l = leader(bugs, &[z(1, 1), z(1, 2), z(2, 1)]);
        l.start();
        l.step(
            2,
            Msg::FollowerInfo {
                sid: 2,
                accepted_epoch: 1,
                last_zxid: z(1, 3),
            },
        );
        let out = l.step(
            2,
            Msg::AckEpoch {
                current_epoch: 1,
                last_zxid: z(1, 3),
            },
        );
        let sync = out.iter().find_map(|o| match o {
            ZabOut::Send(2, m @ (Msg::Diff { .. } | Msg::Trunc { .. } | Msg::Snap { .. })) => {
                Some(m.clone())
            }
            _ => None,
        });
        let want = if buggy {
            Msg::Diff { last_zxid: z(2, 1) }
        } else {
            Msg::Trunc { zxid: z(1, 2) }
        };
        assert_eq!(sync, Some(want));
        // The follower applies what it was sent: the bug leaves (1,3) in its log.
        let mut f = follower(Bugs::none(), 1, 1, z(1, 3));
        f.start();
        f.step(Msg::LeaderInfo { epoch: 3 });
        let mut applied = Vec::new();
        for o in out {
            if let ZabOut::Send(2, m) = o {
                applied.extend(f.step(m));
            }
        }
        let truncated = applied.contains(&ZabOut::Persist(PersistOp::Truncate(z(1, 2))));
        assert_eq!(truncated, !buggy, "{applied:?}");
    }
}

fn follower(bugs: Bugs, accepted: u64, current: u64, last: u64) -> Follower {
    Follower::new(
        FollowerConfig::for_tests(2, 1, false, bugs),
        accepted,
        current,
        last,
        0,
    )
}

/// A follower in broadcast of epoch 3 (synced by an empty DIFF).
fn follower_in_broadcast(bugs: Bugs) -> Follower {
    let mut f = follower(bugs, 2, 2, 0);
    f.start();
    f.step(Msg::LeaderInfo { epoch: 3 });
    f.step(Msg::Diff { last_zxid: 0 });
    f.step(Msg::NewLeader { zxid: z(3, 0) });
    f.step(Msg::UpToDate { committed_zxid: 0 });
    f
}

/// Where the ACK sits relative to the fsync in a follower's outputs.
fn ack_before_sync(out: &[ZabOut]) -> bool {
    let ack = out
        .iter()
        .position(|o| matches!(o, ZabOut::Send(_, Msg::Ack { .. })));
    let sync = out
        .iter()
        .position(|o| matches!(o, ZabOut::Sync { .. } | ZabOut::BatchSync));
    ack.unwrap() < sync.unwrap()
}

/// ZOOKEEPER-3911: the proposal's ACK is placed before its fsync.
#[test]
fn ack_before_fsync_acks_a_proposal_before_its_fsync() {
    for (bugs, buggy) in both(Bug::AckBeforeFsync) {
        let mut f = follower_in_broadcast(bugs);
        let out = f.step(Msg::Proposal {
            zxid: z(3, 1),
            value: json!("a"),
        });
        assert_eq!(ack_before_sync(&out), buggy, "{out:?}");
    }
}

/// ZOOKEEPER-4785: at NEWLEADER, currentEpoch and the ACK come before the synced txns' fsync.
#[test]
fn epoch_before_txns_writes_the_epoch_before_the_txns_are_durable() {
    for (bugs, buggy) in both(Bug::EpochBeforeTxns) {
        let mut f = follower(bugs, 2, 2, z(2, 1));
        f.start();
        f.step(Msg::LeaderInfo { epoch: 3 });
        f.step(Msg::Diff { last_zxid: z(2, 2) });
        f.step(Msg::Txn {
            zxid: z(2, 2),
            value: json!("b"),
        });
        let out = f.step(Msg::NewLeader { zxid: z(3, 0) });
        let epoch = out
            .iter()
            .position(|o| matches!(o, ZabOut::Persist(PersistOp::CurrentEpoch(3))))
            .unwrap();
        let sync = out
            .iter()
            .position(|o| matches!(o, ZabOut::Sync { .. } | ZabOut::BatchSync))
            .unwrap();
        assert_eq!(epoch < sync, buggy, "{out:?}");
        assert_eq!(ack_before_sync(&out), buggy, "{out:?}");
    }
}

/// A follower that already accepted epoch 3 (it followed that leader, then lost it) rejoins
/// the leader still leading epoch 3: the correct one acks with REPEATED_EPOCH and syncs, the
/// buggy one ends its attempt (and the next, until a new epoch).
#[test]
fn refuse_repeated_epoch_cannot_rejoin_a_leader_of_the_epoch_it_accepted() {
    for (bugs, buggy) in both(Bug::RefuseRepeatedEpoch) {
        let mut f = follower(bugs, 3, 3, z(3, 2));
        f.start();
        let out = f.step(Msg::LeaderInfo { epoch: 3 });
        let ended = out.iter().any(|o| matches!(o, ZabOut::StepDown(_)));
        let acked = out.iter().any(|o| {
            matches!(o, ZabOut::Send(_, Msg::AckEpoch { current_epoch, .. })
                if *current_epoch == crate::zab::messages::REPEATED_EPOCH)
        });
        assert_eq!((ended, acked), (buggy, !buggy), "{out:?}");
        // A new epoch is taken either way.
        let mut g = follower(bugs, 3, 3, z(3, 2));
        g.start();
        let out = g.step(Msg::LeaderInfo { epoch: 4 });
        assert!(
            !out.iter().any(|o| matches!(o, ZabOut::StepDown(_))),
            "{out:?}"
        );
    }
}

/// Histories written before `received`/`joined` existed still parse, and a summary without
/// them re-serializes as it was.
#[test]
fn election_summaries_without_the_new_fields_still_parse() {
    let old = r#"{"leader":2,"peer_epoch":2,"round":4,"took_ms":231,"votes":[{"leader":2,"peer_epoch":2,"sid":1,"zxid":5}],"zxid":5}"#;
    let s: crate::api::ElectionSummary = serde_json::from_str(old).unwrap();
    assert!(s.received.is_empty() && !s.joined && s.own_round.is_none());
    assert!(s
        .votes
        .iter()
        .all(|v| v.round.is_none() && v.state.is_none()));
    let again = serde_json::to_value(&s).unwrap();
    assert_eq!(
        again,
        serde_json::from_str::<serde_json::Value>(old).unwrap()
    );
}

/// leader-never-steps-down: its only follower goes silent past syncLimit; the correct leader
/// gives up, the buggy one keeps leading.
#[test]
fn leader_never_steps_down_keeps_leading_without_a_quorum() {
    for (bugs, buggy) in both(Bug::LeaderNeverStepsDown) {
        let mut l = leader_in_broadcast(bugs);
        let stepped_down =
            (0..20).any(|_| l.tick().iter().any(|o| matches!(o, ZabOut::StepDown(_))));
        assert_eq!(stepped_down, !buggy);
    }
}
