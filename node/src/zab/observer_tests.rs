//! The leader and follower machines with observers: what an observer is sent, what it sends,
//! and that it counts toward nothing (and, under the seeded observer bugs, that it does).

use serde_json::json;

use crate::api::{make_zxid as z, ZabPhase};
use crate::bugs::{Bug, Bugs};
use crate::txnlog::Txn;
use crate::zab::actions::{Output, PersistOp};
use crate::zab::follower::{Follower, FollowerConfig};
use crate::zab::leader::{Leader, LeaderConfig};
use crate::zab::messages::Msg;

use Output::{Close, Persist, Send, Sync};

/// Leader 1 of voters 1-3 (quorum 2) and observer 4, history [(1,1),(1,2)] committed to (1,1).
fn leader(bugs: Bugs) -> Leader {
    Leader::new(
        LeaderConfig::for_tests(2, [4].into(), bugs),
        1,
        1,
        vec![txn(z(1, 1)), txn(z(1, 2))],
        z(1, 1),
    )
}

fn txn(zxid: u64) -> Txn {
    Txn {
        zxid,
        value: json!(zxid),
    }
}

fn observer_info(last: u64) -> Msg {
    Msg::ObserverInfo {
        sid: 4,
        accepted_epoch: 1,
        last_zxid: last,
    }
}

fn ack_epoch(last: u64) -> Msg {
    Msg::AckEpoch {
        current_epoch: 1,
        last_zxid: last,
    }
}

fn sends_to(out: &[Output], sid: u64) -> Vec<Msg> {
    out.iter()
        .filter_map(|o| match o {
            Send(to, m) if *to == sid => Some(m.clone()),
            _ => None,
        })
        .collect()
}

/// The observer joins first; voter 2 then makes the quorum and the term goes to broadcast.
fn established(bugs: Bugs) -> (Leader, Vec<Output>) {
    let mut l = leader(bugs);
    l.start();
    let mut seen = l.step(4, observer_info(z(1, 1)));
    assert!(seen.is_empty(), "an observer's epoch is no vote: {seen:?}");
    seen.extend(l.step(
        2,
        Msg::FollowerInfo {
            sid: 2,
            accepted_epoch: 1,
            last_zxid: z(1, 2),
        },
    ));
    seen.extend(l.step(4, ack_epoch(z(1, 1))));
    assert_eq!(
        l.phase(),
        ZabPhase::Discovery,
        "the observer's ACKEPOCH counts for nothing"
    );
    seen.extend(l.step(2, ack_epoch(z(1, 2))));
    assert_eq!(l.phase(), ZabPhase::Sync);
    seen.extend(l.step(4, Msg::Ack { zxid: z(2, 0) }));
    assert_eq!(
        l.phase(),
        ZabPhase::Sync,
        "the observer's NEWLEADER ack counts for nothing"
    );
    seen.extend(l.step(2, Msg::Ack { zxid: z(2, 0) }));
    assert_eq!(l.phase(), ZabPhase::Broadcast);
    (l, seen)
}

#[test]
fn an_observer_is_synced_with_committed_txns_and_informed_of_each_commit() {
    let (mut l, seen) = established(Bugs::none());
    // Synced up to the committed (1,1) only; (1,2) arrives as an INFORM once the term commits
    // it, before UPTODATE.
    assert_eq!(
        sends_to(&seen, 4),
        vec![
            Msg::LeaderInfo { epoch: 2 },
            Msg::Diff { last_zxid: z(1, 1) },
            Msg::NewLeader { zxid: z(2, 0) },
            Msg::Inform {
                zxid: z(1, 2),
                value: json!(z(1, 2))
            },
            Msg::UpToDate {
                committed_zxid: z(1, 2)
            },
        ]
    );
    // A proposal goes to the voter only; its commit reaches the observer as an INFORM.
    let (_, out) = l.propose(vec![json!("a")]).unwrap();
    assert_eq!(sends_to(&out, 4), vec![]);
    assert_eq!(sends_to(&out, 2).len(), 1);
    let out = l.self_durable(z(2, 1));
    assert_eq!(
        sends_to(&out, 4),
        vec![],
        "the leader's own ACK is not a quorum"
    );
    let out = l.step(2, Msg::Ack { zxid: z(2, 1) });
    assert_eq!(sends_to(&out, 2), vec![Msg::Commit { zxid: z(2, 1) }]);
    assert_eq!(
        sends_to(&out, 4),
        vec![Msg::Inform {
            zxid: z(2, 1),
            value: json!("a")
        }]
    );
    // An observer that ACKs a proposal is out of protocol.
    let out = l.step(4, Msg::Ack { zxid: z(2, 1) });
    assert!(matches!(out.as_slice(), [Close(4, _)]), "{out:?}");
}

#[test]
fn observers_do_not_keep_a_leader_alive() {
    let (mut l, _) = established(Bugs::none());
    l.disconnected(2);
    let mut ended = false;
    for _ in 0..3 {
        l.step(4, Msg::Ping);
        ended |= l.tick().iter().any(|o| matches!(o, Output::StepDown(_)));
    }
    assert!(ended, "a leader with only an observer has no quorum");
}

#[test]
fn a_learner_must_introduce_itself_as_what_it_is() {
    let mut l = leader(Bugs::none());
    let out = l.step(
        4,
        Msg::FollowerInfo {
            sid: 4,
            accepted_epoch: 1,
            last_zxid: 0,
        },
    );
    assert!(matches!(out.as_slice(), [Close(4, why)] if why.contains("an observer")));
    let out = l.step(
        2,
        Msg::ObserverInfo {
            sid: 2,
            accepted_epoch: 1,
            last_zxid: 0,
        },
    );
    assert!(matches!(out.as_slice(), [Close(2, why)] if why.contains("a participant")));
}

#[test]
fn seeded_observer_ack_counted_commits_on_the_leader_and_an_observer() {
    let (mut l, _) = established(Bugs::of(&[Bug::ObserverAckCounted]));
    l.disconnected(2);
    let (_, out) = l.propose(vec![json!("b")]).unwrap();
    assert_eq!(sends_to(&out, 4).len(), 1, "the observer gets the proposal");
    l.self_durable(z(2, 1));
    let out = l.step(4, Msg::Ack { zxid: z(2, 1) });
    assert!(
        out.contains(&Output::Committed(z(2, 1))),
        "committed with no voter but the leader: {out:?}"
    );
}

#[test]
fn seeded_observer_informed_early_tells_observers_of_a_mere_proposal() {
    let (mut l, _) = established(Bugs::of(&[Bug::ObserverInformedEarly]));
    let (_, out) = l.propose(vec![json!("c")]).unwrap();
    assert_eq!(
        sends_to(&out, 4),
        vec![Msg::Inform {
            zxid: z(2, 1),
            value: json!("c")
        }]
    );
    assert!(!out.iter().any(|o| matches!(o, Output::Committed(_))));
}

fn observer(bugs: Bugs) -> Follower {
    Follower::new(
        FollowerConfig::for_tests(4, 1, true, bugs),
        1,
        1,
        z(1, 1),
        z(1, 1),
    )
}

/// An observer through discovery and an empty DIFF into broadcast.
fn observing(bugs: Bugs) -> Follower {
    let mut f = observer(bugs);
    assert_eq!(f.start(), vec![Send(1, observer_info(z(1, 1)))]);
    f.step(Msg::LeaderInfo { epoch: 2 });
    f.step(Msg::Diff { last_zxid: z(1, 1) });
    let out = f.step(Msg::NewLeader { zxid: z(2, 0) });
    assert!(out.contains(&Send(1, Msg::Ack { zxid: z(2, 0) })));
    f.step(Msg::UpToDate {
        committed_zxid: z(1, 1),
    });
    assert_eq!(f.phase(), ZabPhase::Broadcast);
    f
}

#[test]
fn an_observer_logs_and_commits_informs_and_never_acks() {
    let mut f = observing(Bugs::none());
    let out = f.step(Msg::Inform {
        zxid: z(2, 1),
        value: json!("a"),
    });
    assert_eq!(
        out,
        vec![
            Persist(PersistOp::Append(vec![Txn {
                zxid: z(2, 1),
                value: json!("a")
            }])),
            Persist(PersistOp::Commit(z(2, 1))),
            Sync { self_ack: None },
        ]
    );
    // A proposal is not for an observer; nor is an INFORM out of order.
    let out = f.step(Msg::Proposal {
        zxid: z(2, 2),
        value: json!("b"),
    });
    assert!(matches!(out.as_slice(), [Output::StepDown(_)]), "{out:?}");
    let mut f = observing(Bugs::none());
    let out = f.step(Msg::Inform {
        zxid: z(1, 1),
        value: json!("old"),
    });
    assert!(matches!(out.as_slice(), [Output::StepDown(_)]), "{out:?}");
}

#[test]
fn a_follower_refuses_an_inform() {
    let mut f = Follower::new(
        FollowerConfig::for_tests(2, 1, false, Bugs::none()),
        1,
        1,
        z(1, 1),
        z(1, 1),
    );
    f.start();
    f.step(Msg::LeaderInfo { epoch: 2 });
    f.step(Msg::Diff { last_zxid: z(1, 1) });
    f.step(Msg::NewLeader { zxid: z(2, 0) });
    let out = f.step(Msg::Inform {
        zxid: z(2, 1),
        value: json!("a"),
    });
    assert!(matches!(out.as_slice(), [Output::StepDown(_)]), "{out:?}");
}
