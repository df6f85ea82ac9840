//! Real `fle-node` processes on loopback: the seed's stories and leader kills.

use std::time::Duration;

use crate::support::Cluster;

const LIMIT: Duration = Duration::from_secs(30);

fn role_is(c: &Cluster, sid: u64, state: &str, leader: Option<u64>) -> Option<()> {
    let (st, l) = c.role(sid)?;
    (st == state && l == leader).then_some(())
}

#[test]
fn seed_start_up_story_one_then_two_then_three() {
    let mut c = Cluster::new(3);
    c.start(1);
    // Server 1 alone: it answers, its round is running, and it never settles.
    c.wait_for(LIMIT, "n1 to answer LOOKING", |c| {
        role_is(c, 1, "LOOKING", None)
    });
    for _ in 0..25 {
        assert_eq!(
            c.role(1),
            Some(("LOOKING".into(), None)),
            "a lone server must not settle"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    c.start(2);
    c.wait_for(LIMIT, "2 leading, 1 following", |c| {
        role_is(c, 2, "LEADING", Some(2))?;
        role_is(c, 1, "FOLLOWING", Some(2))
    });
    let s2 = c.status(2).unwrap();
    let votes: Vec<u64> = s2["last_election"]["votes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["sid"].as_u64().unwrap())
        .collect();
    assert_eq!(votes, vec![1, 2], "2 was elected by the votes of 1 and 2");
    assert!(
        s2["last_election"]["took_ms"].as_u64().unwrap() >= 200,
        "finalizeWait"
    );
    c.start(3);
    c.wait_for(LIMIT, "3 to join as follower of 2", |c| {
        role_is(c, 3, "FOLLOWING", Some(2))
    });
    assert_eq!(
        c.role(2),
        Some(("LEADING".into(), Some(2))),
        "the leader stays 2"
    );
    assert_eq!(c.role(1), Some(("FOLLOWING".into(), Some(2))));
    let leader = c.get(2, "/commands/leader").unwrap();
    assert_eq!(leader["is_leader"], true);
    assert_eq!(leader["leader_id"], 2);
    assert_eq!(leader["leader_ip"], "127.0.0.1");
}

/// zxids 1..=last of epoch 0, all committed (the seed's histories are epoch-0 logs).
fn history(last: u64) -> Vec<u64> {
    (1..=last).collect()
}

#[test]
fn seed_running_cluster_story_best_zxid_then_largest_sid() {
    // 1, 2 and 4 (zxids 9, 9, 8) elect 2: best zxid, then the larger sid among 1 and 2.
    let mut c = Cluster::new(5);
    for (sid, last) in [(1, 9), (2, 9), (4, 8)] {
        c.seed_log(sid, &history(last), last);
    }
    for sid in [1, 2, 4] {
        c.start(sid);
    }
    c.wait_for(LIMIT, "2 to lead 1 and 4", |c| {
        (c.quorum_leader(&[1, 2, 4]) == Some(2)).then_some(())
    });
    let s2 = c.status(2).unwrap();
    assert_eq!(s2["last_election"]["zxid"], 9);
    // Zab then brings 4 up to the leader's history (DIFF of one txn).
    c.wait_for(LIMIT, "4 to catch up to zxid 9", |c| {
        (c.status(4)?["last_committed_zxid"].as_u64()? >= 9).then_some(())
    });
}

#[test]
fn seed_running_cluster_story_three_is_elected_by_three_four_five() {
    // The seed's cluster after 1 and 2 died: 3 logged zxid 9, 4 and 5 only 8 (the logs are
    // real txnlogs; a Zab sync under 1 or 2 would have evened them out, so they start here).
    let mut c = Cluster::new(5);
    for (sid, last) in [(1, 9), (2, 9), (3, 9), (4, 8), (5, 8)] {
        c.seed_log(sid, &history(last), last.min(8));
    }
    for sid in [3, 4, 5] {
        c.start(sid);
    }
    c.wait_for(LIMIT, "3 to be elected by 3, 4 and 5", |c| {
        role_is(c, 3, "LEADING", Some(3))?;
        role_is(c, 4, "FOLLOWING", Some(3))?;
        role_is(c, 5, "FOLLOWING", Some(3))
    });
    let s3 = c.status(3).unwrap();
    let e = &s3["last_election"];
    assert_eq!(e["leader"], 3);
    assert_eq!(e["zxid"], 9);
    let voters: Vec<u64> = e["votes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["sid"].as_u64().unwrap())
        .collect();
    assert_eq!(voters, vec![3, 4, 5]);
    assert_eq!(s3["last_zxid_hex"], "0x9");
    // 3's uncommitted txn 9 is in the new leader's history: Zab commits it everywhere.
    c.wait_for(LIMIT, "4 and 5 to commit 9 under 3", |c| {
        [3, 4, 5]
            .iter()
            .all(|&s| {
                c.log_entries(s)
                    .is_some_and(|l| l.len() == 9 && l[8].0 == 9)
            })
            .then_some(())
    });
}

fn kill_leader_elects_best_remaining(n: u64) {
    let mut c = Cluster::new(n);
    let all: Vec<u64> = (1..=n).collect();
    for &sid in &all {
        c.start(sid);
    }
    let first = c.wait_for(LIMIT, "a first leader", |c| c.quorum_leader(&all));
    assert_eq!(first, n, "equal zxids: the largest sid leads");
    // Following and connected to the leader (the role reports broadcast once in touch).
    let all_following = |c: &Cluster, leader: u64, among: &[u64]| {
        among
            .iter()
            .all(|&s| {
                c.status(s).is_some_and(|st| {
                    st["leader"].as_u64() == Some(leader) && st["zab_phase"] == "broadcast"
                })
            })
            .then_some(())
    };
    c.wait_for(LIMIT, "everyone to follow", |c| {
        all_following(c, first, &all)
    });
    c.kill(first);
    let rest: Vec<u64> = all.iter().copied().filter(|&s| s != first).collect();
    let second = c.wait_for(LIMIT, "a new leader after SIGKILL", |c| {
        c.quorum_leader(&rest)
    });
    // Equal (epoch, zxid): the largest sid among the servers whose votes decided leads. That is
    // n-1 unless n-1 noticed the kill too late to vote (a slow fsync under load can do that).
    let counted: Vec<u64> = c.status(second).unwrap()["last_election"]["votes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["sid"].as_u64().unwrap())
        .collect();
    assert_eq!(
        Some(second),
        counted.iter().copied().max(),
        "the best server among the voters leads: {counted:?}"
    );
    c.wait_for(LIMIT, "every survivor to follow it", |c| {
        all_following(c, second, &rest)
    });
    // A restarted server (the old leader, now a follower-to-be) joins without a new election.
    let round_before = c.status(second).unwrap()["election_epoch"]
        .as_u64()
        .unwrap();
    c.start(first);
    c.wait_for(LIMIT, "the restarted server to follow", |c| {
        role_is(c, first, "FOLLOWING", Some(second))
    });
    // Synced too: until then the leader's quorum is itself and the follower killed next, so
    // killing that follower first would (rightly) end the term.
    c.wait_for(LIMIT, "the restarted server to sync", |c| {
        all_following(c, second, &[first])
    });
    assert_eq!(c.role(second), Some(("LEADING".into(), Some(second))));
    assert_eq!(
        c.status(second).unwrap()["election_epoch"]
            .as_u64()
            .unwrap(),
        round_before,
        "the leader did not go through another election"
    );
    // And a restarted follower too.
    let follower = rest[0];
    c.kill(follower);
    c.start(follower);
    c.wait_for(LIMIT, "the restarted follower to rejoin", |c| {
        role_is(c, follower, "FOLLOWING", Some(second))
    });
    assert_eq!(c.role(second), Some(("LEADING".into(), Some(second))));
}

#[test]
fn killing_the_leader_of_three_elects_the_best_remaining() {
    kill_leader_elects_best_remaining(3);
}

#[test]
fn killing_the_leader_of_five_elects_the_best_remaining() {
    kill_leader_elects_best_remaining(5);
}

fn signal(c: &Cluster, sid: u64, sig: nix::sys::signal::Signal) {
    let pid = nix::unistd::Pid::from_raw(c.pid(sid).unwrap() as i32);
    nix::sys::signal::kill(pid, sig).unwrap();
}

#[test]
fn a_paused_leader_is_replaced_and_steps_down_when_resumed() {
    use nix::sys::signal::Signal::{SIGCONT, SIGSTOP};
    let mut c = Cluster::new(3);
    for sid in 1..=3 {
        c.start(sid);
    }
    c.wait_for(LIMIT, "3 to lead, everyone connected", |c| {
        (1..=3)
            .all(|s| {
                c.status(s).is_some_and(|st| {
                    st["leader"].as_u64() == Some(3) && st["zab_phase"] == "broadcast"
                })
            })
            .then_some(())
    });
    // A paused leader closes nothing: the followers notice only its silence (syncLimit ticks).
    signal(&c, 3, SIGSTOP);
    c.wait_for(LIMIT, "1 and 2 to elect 2", |c| {
        role_is(c, 2, "LEADING", Some(2))?;
        role_is(c, 1, "FOLLOWING", Some(2))
    });
    // Resumed, the old leader hears no quorum, steps down and joins the new leader.
    signal(&c, 3, SIGCONT);
    c.wait_for(LIMIT, "3 to follow 2", |c| {
        role_is(c, 3, "FOLLOWING", Some(2))
    });
    assert!(
        c.log_of(3)
            .contains("stopped leading: only 1 of the quorum 2"),
        "{}",
        c.log_of(3)
    );
    assert_eq!(c.role(2), Some(("LEADING".into(), Some(2))));
}
