//! Table-driven tests of the pure leader and follower machines: exact outputs for each input.

use serde_json::json;

use crate::api::{make_zxid as z, ZabPhase};
use crate::bugs::Bugs;
use crate::txnlog::Txn;
use crate::zab::actions::{Output, PersistOp, SyncMode};
use crate::zab::follower::{Follower, FollowerConfig};
use crate::zab::leader::{Leader, LeaderConfig, MAX_COUNTER};
use crate::zab::messages::Msg;

use Output::{Committed, Persist, Send, StepDown, Sync};

fn txn(zxid: u64) -> Txn {
    Txn {
        zxid,
        value: json!(zxid),
    }
}

fn leader(quorum: usize, accepted: u64, current: u64, hist: &[u64], committed: u64) -> Leader {
    Leader::new(
        LeaderConfig::for_tests(quorum, Default::default(), Bugs::none()),
        accepted,
        current,
        hist.iter().map(|&x| txn(x)).collect(),
        committed,
    )
}

fn info(sid: u64, accepted: u64, last: u64) -> Msg {
    Msg::FollowerInfo {
        sid,
        accepted_epoch: accepted,
        last_zxid: last,
    }
}

/// Leader 1 with follower 2 (quorum 2) in broadcast of epoch 2, history [(1,1),(1,2)].
fn leader_in_broadcast() -> Leader {
    let mut l = leader(2, 1, 1, &[z(1, 1), z(1, 2)], z(1, 1));
    assert_eq!(l.start(), vec![]);
    l.step(2, info(2, 1, z(1, 2)));
    l.step(
        2,
        Msg::AckEpoch {
            current_epoch: 1,
            last_zxid: z(1, 2),
        },
    );
    l.step(2, Msg::Ack { zxid: z(2, 0) });
    assert_eq!(l.phase(), ZabPhase::Broadcast);
    l
}

#[test]
fn leader_discovery_sync_broadcast_exact_outputs() {
    let mut l = leader(2, 1, 1, &[z(1, 1), z(1, 2)], z(1, 1));
    assert!(l.start().is_empty());
    assert_eq!(l.phase(), ZabPhase::Discovery);
    // A quorum of FOLLOWERINFO: epoch max(1, 1) + 1, persisted before it is sent.
    assert_eq!(
        l.step(2, info(2, 1, z(1, 2))),
        vec![
            Persist(PersistOp::AcceptedEpoch(2)),
            Send(2, Msg::LeaderInfo { epoch: 2 })
        ]
    );
    // A quorum of ACKEPOCH: currentEpoch, then sync (nothing missing: empty DIFF) and NEWLEADER.
    assert_eq!(
        l.step(
            2,
            Msg::AckEpoch {
                current_epoch: 1,
                last_zxid: z(1, 2)
            }
        ),
        vec![
            Persist(PersistOp::CurrentEpoch(2)),
            Send(2, Msg::Diff { last_zxid: z(1, 2) }),
            Send(2, Msg::NewLeader { zxid: z(2, 0) }),
        ]
    );
    assert_eq!(l.phase(), ZabPhase::Sync);
    // A quorum of NEWLEADER acks commits the whole initial history, then UPTODATE.
    assert_eq!(
        l.step(2, Msg::Ack { zxid: z(2, 0) }),
        vec![
            Persist(PersistOp::Commit(z(1, 2))),
            Committed(z(1, 2)),
            Send(
                2,
                Msg::UpToDate {
                    committed_zxid: z(1, 2)
                }
            ),
        ]
    );
    // Broadcast: proposals go out before our own fsync; commit needs our ACK and the follower's.
    let (zxids, out) = l.propose(vec![json!("a")]).unwrap();
    assert_eq!(zxids, vec![z(2, 1)]);
    assert_eq!(
        out,
        vec![
            Persist(PersistOp::Append(vec![Txn {
                zxid: z(2, 1),
                value: json!("a")
            }])),
            Send(
                2,
                Msg::Proposal {
                    zxid: z(2, 1),
                    value: json!("a")
                }
            ),
            Sync {
                self_ack: Some(z(2, 1))
            },
        ]
    );
    assert_eq!(l.step(2, Msg::Ack { zxid: z(2, 1) }), vec![]);
    assert_eq!(
        l.self_durable(z(2, 1)),
        vec![
            Persist(PersistOp::Commit(z(2, 1))),
            Send(2, Msg::Commit { zxid: z(2, 1) }),
            Committed(z(2, 1)),
        ]
    );
}

#[test]
fn leader_picks_one_past_the_highest_accepted_epoch() {
    let mut l = leader(3, 4, 3, &[], 0);
    l.start();
    assert!(l.step(2, info(2, 9, 0)).is_empty());
    let out = l.step(3, info(3, 2, 0));
    assert_eq!(out[0], Persist(PersistOp::AcceptedEpoch(10)));
    assert_eq!(l.epoch(), Some(10));
    assert!(out.contains(&Send(2, Msg::LeaderInfo { epoch: 10 })));
    assert!(out.contains(&Send(3, Msg::LeaderInfo { epoch: 10 })));
}

#[test]
fn follower_ahead_during_discovery_is_refused() {
    // (currentEpoch, zxid) compared with the leader's at election.
    let cases = [
        ((1, z(1, 3)), true),
        ((2, z(1, 1)), true),
        ((1, z(1, 2)), false),
        ((0, z(0, 9)), false),
    ];
    for ((cur, last), refused) in cases {
        let mut l = leader(2, 1, 1, &[z(1, 1), z(1, 2)], 0);
        l.step(2, info(2, 1, last));
        let out = l.step(
            2,
            Msg::AckEpoch {
                current_epoch: cur,
                last_zxid: last,
            },
        );
        assert_eq!(
            matches!(out.as_slice(), [Output::Close(2, _)]),
            refused,
            "{cur} {last:#x}: {out:?}"
        );
    }
}

#[test]
fn leader_gives_up_without_a_quorum_within_init_limit() {
    let mut l = leader(2, 0, 0, &[], 0);
    l.start();
    for _ in 0..10 {
        assert!(l.tick().is_empty());
    }
    assert!(matches!(l.tick().as_slice(), [StepDown(_)]));
    assert!(l.tick().is_empty(), "steps down once");
}

#[test]
fn leader_steps_down_when_the_quorum_goes_quiet() {
    let mut l = leader_in_broadcast();
    // Follower 2 answers pings: the leader stays.
    for _ in 0..20 {
        let out = l.tick();
        assert_eq!(out, vec![Send(2, Msg::Ping)]);
        l.step(2, Msg::Ping);
    }
    // Silence for more than syncLimit (4 beats): follower 2 is cut off, the quorum is gone.
    for _ in 0..4 {
        assert_eq!(l.tick(), vec![Send(2, Msg::Ping)]);
    }
    assert!(matches!(
        l.tick().as_slice(),
        [Output::Close(2, _), StepDown(_)]
    ));
    assert!(l.propose(vec![json!(1)]).is_err());
}

#[test]
fn silent_follower_is_cut_off_while_the_quorum_holds() {
    // Five voters, quorum 3: followers 2 and 3 answer, follower 4 stops answering.
    let mut l = leader(3, 0, 0, &[], 0);
    for s in [2, 3, 4] {
        l.step(s, info(s, 0, 0));
    }
    for s in [2, 3, 4] {
        l.step(
            s,
            Msg::AckEpoch {
                current_epoch: 0,
                last_zxid: 0,
            },
        );
    }
    for s in [2, 3, 4] {
        l.step(s, Msg::Ack { zxid: z(1, 0) });
    }
    assert_eq!(l.phase(), ZabPhase::Broadcast);
    let mut closed = Vec::new();
    for _ in 0..10 {
        for o in l.tick() {
            match o {
                Output::Close(s, _) => closed.push(s),
                StepDown(why) => panic!("stepped down with a quorum: {why}"),
                _ => {}
            }
        }
        l.step(2, Msg::Ping);
        l.step(3, Msg::Ping);
    }
    assert_eq!(closed, vec![4]);
    assert_eq!(l.synced_followers(), vec![2, 3]);
}

#[test]
fn counter_overflow_forces_a_new_election() {
    let mut l = leader_in_broadcast();
    l.force_last_zxid(z(2, MAX_COUNTER - 1));
    let (zxids, _) = l.propose(vec![json!(1)]).unwrap();
    assert_eq!(zxids, vec![z(2, MAX_COUNTER)]);
    let Err((why, out)) = l.propose(vec![json!(2)]) else {
        panic!("counter past {MAX_COUNTER:#x} accepted")
    };
    assert!(why.contains("exhausted"), "{why}");
    assert!(matches!(out.as_slice(), [StepDown(_)]));
}

#[test]
fn late_joiner_is_synced_with_outstanding_proposals_and_its_ack_counts() {
    let mut l = leader(2, 1, 1, &[z(1, 1)], z(1, 1));
    l.start();
    l.step(2, info(2, 1, z(1, 1)));
    l.step(
        2,
        Msg::AckEpoch {
            current_epoch: 1,
            last_zxid: z(1, 1),
        },
    );
    l.step(2, Msg::Ack { zxid: z(2, 0) });
    assert_eq!(l.phase(), ZabPhase::Broadcast);
    l.propose(vec![json!("x")]).unwrap();
    l.self_durable(z(2, 1));
    // Follower 2 went away before acking; follower 3 arrives with a divergent old txn.
    l.disconnected(2);
    assert_eq!(
        l.step(3, info(3, 1, z(1, 5))),
        vec![Send(3, Msg::LeaderInfo { epoch: 2 })]
    );
    let out = l.step(
        3,
        Msg::AckEpoch {
            current_epoch: 1,
            last_zxid: z(1, 5),
        },
    );
    assert_eq!(
        out,
        vec![
            Send(3, Msg::Trunc { zxid: z(1, 1) }),
            Send(
                3,
                Msg::Txn {
                    zxid: z(2, 1),
                    value: json!("x")
                }
            ),
            Send(3, Msg::NewLeader { zxid: z(2, 0) }),
        ]
    );
    let out = l.step(3, Msg::Ack { zxid: z(2, 0) });
    assert_eq!(
        out,
        vec![
            Send(
                3,
                Msg::UpToDate {
                    committed_zxid: z(1, 1)
                }
            ),
            Persist(PersistOp::Commit(z(2, 1))),
            Send(3, Msg::Commit { zxid: z(2, 1) }),
            Committed(z(2, 1)),
        ]
    );
}

#[test]
fn leader_closes_followers_that_break_the_protocol() {
    let mut l = leader_in_broadcast();
    let cases = [
        Msg::Proposal {
            zxid: 9,
            value: json!(1),
        },
        Msg::LeaderInfo { epoch: 3 },
        Msg::Ack { zxid: 1 },
    ];
    for m in cases {
        let out = l.step(4, m.clone());
        assert!(matches!(out.as_slice(), [Output::Close(4, _)]), "{m:?}");
    }
}

fn follower(accepted: u64, current: u64, last: u64) -> Follower {
    Follower::new(
        FollowerConfig::for_tests(2, 1, false, Bugs::none()),
        accepted,
        current,
        last,
        0,
    )
}

#[test]
fn follower_trunc_sync_is_durable_before_the_epoch_and_the_ack() {
    let mut f = follower(1, 1, z(1, 3));
    assert_eq!(f.start(), vec![Send(1, info(2, 1, z(1, 3)))]);
    assert_eq!(
        f.step(Msg::LeaderInfo { epoch: 2 }),
        vec![
            Persist(PersistOp::AcceptedEpoch(2)),
            Send(
                1,
                Msg::AckEpoch {
                    current_epoch: 1,
                    last_zxid: z(1, 3)
                }
            ),
        ]
    );
    assert!(f.step(Msg::Trunc { zxid: z(1, 2) }).is_empty());
    assert!(f.step(Msg::txn(&txn(z(2, 1)))).is_empty());
    assert_eq!(
        f.step(Msg::NewLeader { zxid: z(2, 0) }),
        vec![
            Persist(PersistOp::Truncate(z(1, 2))),
            Persist(PersistOp::Append(vec![txn(z(2, 1))])),
            Sync { self_ack: None },
            Persist(PersistOp::CurrentEpoch(2)),
            Send(1, Msg::Ack { zxid: z(2, 0) }),
        ]
    );
    assert_eq!(f.synced_by(), Some(SyncMode::Trunc));
    assert_eq!(f.phase(), ZabPhase::Sync);
    assert_eq!(
        f.step(Msg::UpToDate {
            committed_zxid: z(2, 1)
        }),
        vec![Persist(PersistOp::Commit(z(2, 1)))]
    );
    assert_eq!(f.phase(), ZabPhase::Broadcast);
    assert_eq!(
        f.step(Msg::Proposal {
            zxid: z(2, 2),
            value: json!(5)
        }),
        vec![
            Persist(PersistOp::Append(vec![Txn {
                zxid: z(2, 2),
                value: json!(5)
            }])),
            Sync { self_ack: None },
            Send(1, Msg::Ack { zxid: z(2, 2) }),
        ]
    );
    assert_eq!(
        f.step(Msg::Commit { zxid: z(2, 9) }),
        vec![Persist(PersistOp::Commit(z(2, 2)))]
    );
}

#[test]
fn follower_snap_replaces_its_log() {
    let mut f = follower(0, 0, 0);
    f.start();
    f.step(Msg::LeaderInfo { epoch: 1 });
    f.step(Msg::Snap { last_zxid: 7 });
    f.step(Msg::txn(&txn(3)));
    f.step(Msg::txn(&txn(7)));
    let out = f.step(Msg::NewLeader { zxid: z(1, 0) });
    assert_eq!(out[0], Persist(PersistOp::Reset(vec![txn(3), txn(7)])));
    assert_eq!(f.synced_by(), Some(SyncMode::Snap));
}

/// Each sequence must end the role (LOOKING), never panic or be accepted.
#[test]
fn follower_refuses_bad_sequences() {
    let v = json!(0);
    let cases: Vec<(&str, Vec<Msg>)> = vec![
        (
            "epoch older than accepted",
            vec![Msg::LeaderInfo { epoch: 4 }],
        ),
        (
            "proposal during discovery",
            vec![Msg::Proposal {
                zxid: z(5, 1),
                value: v.clone(),
            }],
        ),
        (
            "txn before a sync mode",
            vec![Msg::LeaderInfo { epoch: 6 }, Msg::txn(&txn(z(5, 9)))],
        ),
        (
            "trunc past my end",
            vec![Msg::LeaderInfo { epoch: 6 }, Msg::Trunc { zxid: z(5, 9) }],
        ),
        (
            "sync txns out of order",
            vec![
                Msg::LeaderInfo { epoch: 6 },
                Msg::Diff { last_zxid: 0 },
                Msg::txn(&txn(z(5, 2))),
            ],
        ),
        (
            "newleader of another epoch",
            vec![
                Msg::LeaderInfo { epoch: 6 },
                Msg::Diff { last_zxid: 0 },
                Msg::NewLeader { zxid: z(7, 0) },
            ],
        ),
        (
            "sync short of what DIFF announced",
            vec![
                Msg::LeaderInfo { epoch: 6 },
                Msg::Diff { last_zxid: z(5, 4) },
                Msg::NewLeader { zxid: z(6, 0) },
            ],
        ),
        (
            "proposal of an old epoch",
            vec![
                Msg::LeaderInfo { epoch: 6 },
                Msg::Diff { last_zxid: z(5, 3) },
                Msg::NewLeader { zxid: z(6, 0) },
                Msg::Proposal {
                    zxid: z(5, 9),
                    value: v.clone(),
                },
            ],
        ),
    ];
    for (name, msgs) in cases {
        let mut f = follower(5, 5, z(5, 3));
        f.start();
        let mut last = Vec::new();
        for m in msgs {
            last = f.step(m);
        }
        assert!(matches!(last.as_slice(), [StepDown(_)]), "{name}: {last:?}");
    }
}

#[test]
fn follower_goes_looking_on_leader_silence() {
    let mut f = follower(0, 0, 0);
    f.start();
    f.step(Msg::LeaderInfo { epoch: 1 });
    f.step(Msg::Diff { last_zxid: 0 });
    f.step(Msg::NewLeader { zxid: z(1, 0) });
    f.step(Msg::UpToDate { committed_zxid: 0 });
    for _ in 0..4 {
        assert!(f.tick().is_empty());
    }
    assert_eq!(f.step(Msg::Ping), vec![Send(1, Msg::Ping)]);
    for _ in 0..4 {
        assert!(f.tick().is_empty());
    }
    assert!(matches!(f.tick().as_slice(), [StepDown(_)]));
}

#[test]
fn write_outcomes_map_to_http() {
    use crate::zab::WriteOutcome;
    let (code, body) = WriteOutcome::Committed(7).http();
    assert_eq!((code, body), (200, json!({"zxid": 7})));
    let (code, body) = WriteOutcome::Rejected("not serving".into()).http();
    assert_eq!(code, 503);
    assert_eq!(body["outcome_unknown"], json!(false));
    let (code, body) = WriteOutcome::Unknown("timeout".into()).http();
    assert_eq!(code, 504);
    assert_eq!(body["outcome_unknown"], json!(true));
    assert_eq!(body["error"], json!("timeout"));
}

/// A quorum of one (a single server, or a seeded bug that shrinks the quorum) leads alone.
#[test]
fn quorum_of_one_establishes_and_commits_alone() {
    let mut l = leader(1, 3, 3, &[z(3, 1)], 0);
    assert_eq!(
        l.start(),
        vec![
            Persist(PersistOp::AcceptedEpoch(4)),
            Persist(PersistOp::CurrentEpoch(4)),
            Persist(PersistOp::Commit(z(3, 1))),
            Committed(z(3, 1)),
        ]
    );
    assert_eq!(l.phase(), ZabPhase::Broadcast);
    let (zxids, _) = l.propose(vec![json!(1), json!(2)]).unwrap();
    assert_eq!(zxids, vec![z(4, 1), z(4, 2)]);
    assert_eq!(
        l.self_durable(z(4, 2)),
        vec![Persist(PersistOp::Commit(z(4, 2))), Committed(z(4, 2))]
    );
    for _ in 0..50 {
        assert!(l.tick().is_empty(), "alone is a quorum of one");
    }
}

/// ZooKeeper's -1: an ACKEPOCH for an epoch the follower had already accepted is no promise.
#[test]
fn repeated_epoch_ack_does_not_count_but_is_synced() {
    use crate::zab::messages::REPEATED_EPOCH;
    let mut f = follower(6, 5, z(5, 3));
    f.start();
    assert_eq!(
        f.step(Msg::LeaderInfo { epoch: 6 }),
        vec![Send(
            1,
            Msg::AckEpoch {
                current_epoch: REPEATED_EPOCH,
                last_zxid: z(5, 3)
            }
        )]
    );
    // Quorum 2 of 3: follower 2's repeated ack does not establish the epoch; 3's fresh one does.
    let mut l = leader(2, 5, 5, &[z(5, 3)], 0);
    l.step(2, info(2, 5, z(5, 3)));
    l.step(3, info(3, 5, z(5, 3)));
    let out = l.step(
        2,
        Msg::AckEpoch {
            current_epoch: REPEATED_EPOCH,
            last_zxid: z(5, 3),
        },
    );
    assert!(out.is_empty(), "{out:?}");
    assert_eq!(l.phase(), ZabPhase::Discovery);
    let out = l.step(
        3,
        Msg::AckEpoch {
            current_epoch: 5,
            last_zxid: z(5, 3),
        },
    );
    assert_eq!(l.phase(), ZabPhase::Sync);
    for sid in [2, 3] {
        assert!(
            out.contains(&Send(sid, Msg::NewLeader { zxid: z(6, 0) })),
            "n{sid}"
        );
    }
}
