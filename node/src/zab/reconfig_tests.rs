//! The leader's reconfig rules, table-driven: one reconfig at a time, proposed only when its
//! new voters have a quorum synced (ZooKeeper's ReconfigInProgress, NewConfigNoQuorum),
//! committed only by a quorum of the old voters and of the new ones (in broadcast and at
//! NEWLEADER), and the term ends once it commits.

use std::collections::BTreeMap;

use serde_json::json;

use crate::api::{make_zxid as z, ZabPhase};
use crate::bugs::{Bug, Bugs};
use crate::config::ServerAddr;
use crate::membership::{reconfig_value, Membership};
use crate::txnlog::Txn;
use crate::zab::actions::{Output, PersistOp};
use crate::zab::leader::{Leader, LeaderConfig};
use crate::zab::messages::Msg;

/// The servers of a config whose voters are `voters` (ports from the sid).
fn servers(voters: &[u64]) -> BTreeMap<u64, ServerAddr> {
    let lines: String = voters
        .iter()
        .map(|s| format!("server.{s}=127.0.0.1:{}:{}\n", 2000 + s, 3000 + s))
        .collect();
    Membership::parse("test", &lines).unwrap().servers
}

fn reconfig(voters: &[u64]) -> serde_json::Value {
    reconfig_value(&servers(voters))
}

/// Leader 1 of voters 1-3 (quorum 2), history `hist` committed to `committed`.
fn leader(hist: Vec<Txn>, committed: u64) -> Leader {
    leader_with(Bugs::none(), hist, committed)
}

fn leader_with(bugs: Bugs, hist: Vec<Txn>, committed: u64) -> Leader {
    Leader::new(
        LeaderConfig::for_tests(2, Default::default(), bugs),
        1,
        1,
        hist,
        committed,
    )
}

/// Brings `sid` (whose log ends at `last`) through discovery and sync; its NEWLEADER ACK
/// is `ack_newleader`'s to send.
fn join(l: &mut Leader, sid: u64, last: u64) -> Vec<Output> {
    let mut out = l.step(
        sid,
        Msg::FollowerInfo {
            sid,
            accepted_epoch: 1,
            last_zxid: last,
        },
    );
    out.extend(l.step(
        sid,
        Msg::AckEpoch {
            current_epoch: 1,
            last_zxid: last,
        },
    ));
    out
}

fn ack_newleader(l: &mut Leader, sid: u64) -> Vec<Output> {
    l.step(sid, Msg::Ack { zxid: z(2, 0) })
}

/// Leader 1 in broadcast of epoch 2 with `followers` synced, empty history.
fn in_broadcast(followers: &[u64]) -> Leader {
    in_broadcast_with(Bugs::none(), followers)
}

fn in_broadcast_with(bugs: Bugs, followers: &[u64]) -> Leader {
    let mut l = leader_with(bugs, Vec::new(), 0);
    l.start();
    for &f in followers {
        join(&mut l, f, 0);
        ack_newleader(&mut l, f);
    }
    assert_eq!(l.phase(), ZabPhase::Broadcast);
    l
}

fn commits(out: &[Output]) -> Vec<u64> {
    let of = |o: &Output| match o {
        Output::Persist(PersistOp::Commit(c)) => Some(*c),
        _ => None,
    };
    out.iter().filter_map(of).collect()
}

fn stepped_down(out: &[Output]) -> bool {
    out.iter().any(|o| matches!(o, Output::StepDown(_)))
}

#[test]
fn a_reconfig_commits_with_quorums_of_both_configs_and_ends_the_term() {
    // 3 voters to 5: the old quorum is 2 of {1,2,3}, the new one 3 of {1,2,3,4,5}.
    let mut l = in_broadcast(&[2, 3]);
    let (zxids, _) = l.propose(vec![reconfig(&[1, 2, 3, 4, 5])]).unwrap();
    let r = zxids[0];
    assert!(commits(&l.self_durable(r)).is_empty());
    // 1 and 2 are a quorum of the old voters only: not committed.
    let out = l.step(2, Msg::Ack { zxid: r });
    assert!(commits(&out).is_empty(), "{out:?}");
    // 1, 2 and 3 are a quorum of the new voters as well: committed, and the term ends.
    let out = l.step(3, Msg::Ack { zxid: r });
    assert_eq!(commits(&out), vec![r], "{out:?}");
    assert!(stepped_down(&out), "{out:?}");
    let sent = |to| out.contains(&Output::Send(to, Msg::Commit { zxid: r }));
    assert!(
        sent(2) && sent(3),
        "COMMIT goes out before the step-down: {out:?}"
    );
}

#[test]
fn removing_the_leader_needs_the_new_voters_without_it() {
    // {1,2,3} to {2,3}: the leader's own ACK counts for the old config only.
    let mut l = in_broadcast(&[2, 3]);
    let (zxids, _) = l.propose(vec![reconfig(&[2, 3])]).unwrap();
    let r = zxids[0];
    l.self_durable(r);
    assert!(commits(&l.step(2, Msg::Ack { zxid: r })).is_empty());
    let out = l.step(3, Msg::Ack { zxid: r });
    assert_eq!(commits(&out), vec![r]);
    assert!(stepped_down(&out));
}

/// Seeded removed-leader-keeps-leading: the leader's removal commits and its term goes on.
#[test]
fn a_removed_leader_keeps_leading_only_under_the_seeded_bug() {
    let buggy = Bugs::of(&[Bug::RemovedLeaderKeepsLeading]);
    for (bugs, keeps) in [(Bugs::none(), false), (buggy, true)] {
        let mut l = in_broadcast_with(bugs, &[2, 3]);
        let (zxids, _) = l.propose(vec![reconfig(&[2, 3])]).unwrap();
        let r = zxids[0];
        l.self_durable(r);
        l.step(2, Msg::Ack { zxid: r });
        let out = l.step(3, Msg::Ack { zxid: r });
        assert_eq!(commits(&out), vec![r], "{out:?}");
        assert_eq!(stepped_down(&out), !keeps, "{out:?}");
        assert_eq!(l.propose(vec![json!("after")]).is_ok(), keeps);
    }
}

#[test]
fn writes_before_a_pending_reconfig_commit_and_after_it_wait() {
    let mut l = in_broadcast(&[2, 3]);
    let (w, _) = l.propose(vec![json!("before")]).unwrap();
    let (r, _) = l.propose(vec![reconfig(&[1, 2, 3, 4, 5])]).unwrap();
    let (after, _) = l.propose(vec![json!("after")]).unwrap();
    l.self_durable(after[0]);
    // Follower 2 holds all three: the old quorum could commit up to "after", but the reconfig
    // lacks its new quorum, so only the write before it commits.
    let out = l.step(2, Msg::Ack { zxid: after[0] });
    assert_eq!(commits(&out), vec![w[0]], "{out:?}");
    // With 3, the reconfig commits, and the term ends there: "after" is left to the next.
    let out = l.step(3, Msg::Ack { zxid: after[0] });
    assert_eq!(commits(&out), vec![r[0]], "{out:?}");
    assert!(stepped_down(&out));
}

#[test]
fn one_reconfig_at_a_time_and_only_with_its_new_quorum_synced() {
    let mut l = in_broadcast(&[2, 3]);
    l.propose(vec![reconfig(&[1, 2, 3, 4])]).unwrap();
    let (why, _) = l.propose(vec![reconfig(&[1, 2])]).unwrap_err();
    assert!(why.contains("ReconfigInProgress"), "{why}");
    // Only 2 is synced: {1,2} is no quorum of {1,2,3,4,5}.
    let mut l = in_broadcast(&[2]);
    let (why, _) = l.propose(vec![reconfig(&[1, 2, 3, 4, 5])]).unwrap_err();
    assert!(why.contains("NewConfigNoQuorum"), "{why}");
    // Refused means not proposed: a plain write still goes through.
    assert!(l.propose(vec![json!("w")]).is_ok());
}

#[test]
fn a_reconfig_pending_in_the_history_needs_both_quorums_at_newleader() {
    // The new leader's log holds an uncommitted reconfig from {1,2,3} to {1,3,4}.
    let r = z(1, 2);
    let hist = vec![
        Txn {
            zxid: z(1, 1),
            value: json!("w"),
        },
        Txn {
            zxid: r,
            value: reconfig(&[1, 3, 4]),
        },
    ];
    let mut l = leader(hist, z(1, 1));
    l.start();
    join(&mut l, 2, r);
    join(&mut l, 3, r);
    // 1 and 2 are an old quorum, but only 1 of {1,3,4}: no broadcast yet.
    let out = ack_newleader(&mut l, 2);
    assert_eq!(l.phase(), ZabPhase::Sync, "{out:?}");
    // With 3 both quorums hold it: the history commits, the reconfig with it, and the term ends.
    let out = ack_newleader(&mut l, 3);
    assert_eq!(commits(&out), vec![r], "{out:?}");
    assert!(stepped_down(&out), "{out:?}");
}
