//! Observers on real `fle-node` processes (the seed's story: "the remaining non-Observer
//! servers go LOOKING"): 5 voters and 2 observers; the observers follow each leader, receive
//! every committed write, forward clients' writes, and are never counted in an election.

use std::time::Duration;

use serde_json::{json, Value};

use crate::support::Cluster;

const LIMIT: Duration = Duration::from_secs(30);
const OBSERVERS: [u64; 2] = [6, 7];

/// Every observer OBSERVING `leader` in broadcast, reporting its peer type.
fn observing(c: &Cluster, leader: u64) -> Option<()> {
    OBSERVERS.iter().try_for_each(|&o| {
        let s = c.status(o)?;
        let ok = s["state"] == "OBSERVING"
            && s["leader"] == leader
            && s["zab_phase"] == "broadcast"
            && s["peer_type"] == "observer";
        ok.then_some(())
    })
}

/// No server's last decision counted an observer's vote.
fn no_observer_counted(c: &Cluster, among: &[u64]) {
    for &sid in among {
        let s = c.status(sid).unwrap_or(Value::Null);
        for v in s["last_election"]["votes"].as_array().into_iter().flatten() {
            let who = v["sid"].as_u64().unwrap_or(0);
            assert!(
                !OBSERVERS.contains(&who),
                "n{sid} counted observer n{who}: {s}"
            );
        }
    }
}

/// The committed value `v` in server `sid`'s log.
fn has(c: &Cluster, sid: u64, v: &Value) -> Option<()> {
    c.log_entries(sid)?
        .iter()
        .any(|(_, x)| x == v)
        .then_some(())
}

#[test]
fn seed_story_with_observers_leader_killed() {
    let mut c = Cluster::new(7);
    c.set_observers(&OBSERVERS);
    for sid in 1..=7 {
        c.start(sid);
    }
    let voters = [1, 2, 3, 4, 5];
    let first = c.wait_for(LIMIT, "a quorum-backed leader of the voters", |c| {
        c.quorum_leader(&voters)
    });
    assert_eq!(
        first, 5,
        "equal logs: the largest voter sid wins, never an observer"
    );
    c.wait_for(LIMIT, "both observers observing n5", |c| {
        observing(c, first)
    });
    assert_eq!(
        c.status(1).unwrap()["peer_type"],
        Value::Null,
        "voters say nothing"
    );

    // A write through an observer is forwarded to the leader and reaches every observer.
    let a = json!("through-an-observer");
    let (code, body) = c.write(6, a.clone()).expect("observer answers");
    assert_eq!(code, 200, "{body}");
    for o in OBSERVERS {
        c.wait_for(LIMIT, "the write in the observer's log", |c| has(c, o, &a));
    }
    no_observer_counted(&c, &[1, 2, 3, 4, 5, 6, 7]);

    c.kill(first);
    let second = c.wait_for(LIMIT, "a new leader among the remaining voters", |c| {
        c.quorum_leader(&[1, 2, 3, 4]).filter(|l| *l != first)
    });
    assert_eq!(second, 4);
    c.wait_for(LIMIT, "both observers observing the new leader", |c| {
        observing(c, second)
    });
    let b = json!("after-the-kill");
    let (code, body) = c.write(second, b.clone()).expect("leader answers");
    assert_eq!(code, 200, "{body}");
    for o in OBSERVERS {
        c.wait_for(LIMIT, "the new write in the observer's log", |c| {
            has(c, o, &b)
        });
        c.wait_for(LIMIT, "the old write kept", |c| has(c, o, &a));
    }
    no_observer_counted(&c, &[1, 2, 3, 4, 6, 7]);
}

/// One voter of three with an observer is no quorum: nobody leads until a second voter comes,
/// and the observer then observes its leader.
#[test]
fn a_voter_alone_with_an_observer_never_leads() {
    let mut c = Cluster::new(4);
    c.set_observers(&[4]);
    c.start(1);
    c.start(4);
    for _ in 0..40 {
        assert_ne!(
            c.role(1).map(|r| r.0),
            Some("LEADING".into()),
            "one voter of three with an observer is no quorum"
        );
        std::thread::sleep(Duration::from_millis(25));
    }
    assert_eq!(c.role(4).map(|r| r.0), Some("LOOKING".into()));
    c.start(2);
    c.wait_for(LIMIT, "n4 observing n2", |c| {
        let (s, l) = c.role(4)?;
        (s == "OBSERVING" && l == Some(2)).then_some(())
    });
}
