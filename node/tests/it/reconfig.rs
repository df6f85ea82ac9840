//! Membership changes on real `fle-node` processes (`POST /reconfig`, ZooKeeper's incremental
//! reconfig): an observer promoted to voter, a new server added, the leader removed, each
//! committed by the old and the new quorum and activated by every member, which elects again
//! under it; writes go on across every change, a removed server stays LOOKING (restarted too),
//! and added back it rejoins.

use std::time::Duration;

use serde_json::{json, Value};

use crate::support::{http_request, Cluster};

const LIMIT: Duration = Duration::from_secs(30);

/// `POST /reconfig` with `body` to server `sid`: (HTTP status, body).
fn reconfig(c: &Cluster, sid: u64, body: Value) -> (u16, Value) {
    let port = c.nodes[&sid].admin_port;
    http_request(port, "POST", "/reconfig", &body.to_string()).expect("the server answers")
}

/// The config version server `sid` reports (0 under its static zoo.cfg).
fn version(c: &Cluster, sid: u64) -> Option<u64> {
    let s = c.status(sid)?;
    Some(s["config"]["version"].as_u64().unwrap_or(0))
}

/// The leader of `members` once each of them runs config `v`, follows or leads one leader in
/// broadcast, and that leader says LEADING.
fn settled(c: &Cluster, members: &[u64], v: u64) -> Option<u64> {
    let mut leader = None;
    for &sid in members {
        let s = c.status(sid)?;
        let ok = s["zab_phase"] == "broadcast" && version(c, sid) == Some(v);
        let l = s["leader"].as_u64().filter(|_| ok)?;
        if leader.is_some_and(|x| x != l) {
            return None;
        }
        leader = Some(l);
    }
    let l = leader?;
    (c.status(l)?["state"] == "LEADING").then_some(l)
}

/// Writes `v` through server `via` and waits until every server of `members` logged it.
fn write_reaches(c: &Cluster, via: u64, v: &Value, members: &[u64]) {
    let (code, body) = c.write(via, v.clone()).expect("the server answers");
    assert_eq!(code, 200, "write through n{via}: {body}");
    for &sid in members {
        c.wait_for(LIMIT, "the write in every member's log", |c| {
            c.log_entries(sid)?
                .iter()
                .any(|(_, x)| x == v)
                .then_some(())
        });
    }
}

/// The version a 200 answer names (hex), checked against the leader's commit.
fn answered_version(code: u16, body: &Value) -> u64 {
    assert_eq!(code, 200, "{body}");
    u64::from_str_radix(body["version"].as_str().expect("a version"), 16).expect("hex")
}

#[test]
fn promote_add_and_remove_the_leader_under_writes() {
    // Voters 1-3 and observer 4; server 5 is not in the ensemble yet.
    let mut c = Cluster::new(5);
    c.set_observers(&[4]);
    for sid in 1..=4 {
        c.write_config_listing(sid, &[1, 2, 3, 4]);
    }
    for sid in 1..=4 {
        c.start(sid);
    }
    let l0 = c.wait_for(LIMIT, "a leader of 1-3 with observer 4", |c| {
        settled(c, &[1, 2, 3, 4], 0)
    });
    write_reaches(&c, 1, &json!("before"), &[1, 2, 3, 4]);

    // Refused, and certainly not applied: a server not in the config, a config whose new
    // voters are no quorum of the servers synced with the leader.
    let (code, body) = reconfig(&c, l0, json!({"remove": [9]}));
    assert_eq!(code, 400, "{body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("cannot remove server 9"),
        "{body}"
    );
    let far = |sid: u64| format!("server.{sid}=127.0.0.1:{}:{}", 1000 + sid, 1100 + sid);
    let (code, body) = reconfig(&c, l0, json!({"add": [far(7), far(8), far(9)]}));
    assert_eq!(code, 503, "{body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("NewConfigNoQuorum"),
        "{body}"
    );
    assert_eq!(
        version(&c, l0),
        Some(0),
        "a refused reconfig changes nothing"
    );

    // Observer 4 becomes a voter (asked of a follower, which forwards it to the leader).
    c.observers.clear();
    let follower = [1, 2, 3].into_iter().find(|&s| s != l0).unwrap();
    let (code, body) = reconfig(&c, follower, json!({"add": [c.server_line(4)]}));
    let v1 = answered_version(code, &body);
    let l1 = c.wait_for(LIMIT, "voters 1-4 under the promotion", |c| {
        settled(c, &[1, 2, 3, 4], v1)
    });
    let s4 = c.status(4).unwrap();
    assert_eq!(
        s4["peer_type"],
        Value::Null,
        "n4 is a participant now: {s4}"
    );
    assert_eq!(s4["config"]["voters"], json!([1, 2, 3, 4]), "{s4}");

    // Server 5 joins: it starts knowing the ensemble and itself, and takes part once added.
    c.write_config_listing(5, &[1, 2, 3, 4, 5]);
    c.start(5);
    let (code, body) = reconfig(&c, l1, json!({"add": [c.server_line(5)]}));
    let v2 = answered_version(code, &body);
    let l2 = c.wait_for(LIMIT, "voters 1-5 with the new server", |c| {
        let l = settled(c, &[1, 2, 3, 4], v2)?;
        let s5 = c.status(5)?;
        (s5["zab_phase"] == "broadcast" && s5["leader"] == l).then_some(l)
    });
    write_reaches(&c, 5, &json!("after-add"), &[1, 2, 3, 4, 5]);
    let log5 = c.log_entries(5).unwrap();
    assert!(
        log5.iter().any(|(_, v)| v == "before"),
        "the new server holds what was committed before it joined: {log5:?}"
    );

    // The leader removes itself: the others elect one of them, and it stays LOOKING.
    let (code, body) = reconfig(&c, l2, json!({"remove": [l2]}));
    let v3 = answered_version(code, &body);
    let rest: Vec<u64> = (1..=5).filter(|&s| s != l2).collect();
    let l3 = c.wait_for(
        LIMIT,
        "the others settled without the removed leader",
        |c| settled(c, &rest, v3),
    );
    assert_ne!(l3, l2);
    write_reaches(&c, rest[0], &json!("after-remove"), &rest);
    let removed = c.status(l2).unwrap();
    assert_eq!(removed["state"], "LOOKING", "{removed}");
    assert!(
        !removed["config"]["voters"]
            .as_array()
            .unwrap()
            .contains(&json!(l2)),
        "the removed server runs the config without itself: {removed}"
    );
    // Each member keeps the config it activated, as ZooKeeper's dynamic file.
    let file = c.nodes[&l3]
        .data_dir
        .join(format!("zoo.cfg.dynamic.{v3:x}"));
    let text = std::fs::read_to_string(&file).expect("the dynamic config file");
    assert!(!text.contains(&format!("server.{l2}=")), "{text}");
    assert!(text.contains(&format!("server.{l3}=")), "{text}");

    // Restarted, the removed server starts outside the ensemble (ZooKeeper's would refuse to
    // start), and once added back it learns the config from the others and catches up.
    c.kill(l2);
    c.start(l2);
    c.wait_for(LIMIT, "the removed server up again, LOOKING", |c| {
        let s = c.status(l2)?;
        (s["state"] == "LOOKING" && version(c, l2) == Some(v3)).then_some(())
    });
    let (code, body) = reconfig(&c, l3, json!({"add": [c.server_line(l2)]}));
    let v4 = answered_version(code, &body);
    let all: Vec<u64> = (1..=5).collect();
    c.wait_for(LIMIT, "all five settled with the server added back", |c| {
        settled(c, &all, v4)
    });
    write_reaches(&c, l2, &json!("after-readd"), &all);
}

/// Voters 1-3, each with seeded `bug` if any, settled under the static config: the leader.
fn three_settled(bug: Option<&str>) -> (Cluster, u64) {
    let mut c = Cluster::new(3);
    if let Some(b) = bug {
        c.extra_args = vec!["--bug".into(), b.into()];
    }
    for sid in 1..=3 {
        c.start(sid);
    }
    let l = c.wait_for(LIMIT, "a leader of 1-3", |c| settled(c, &[1, 2, 3], 0));
    (c, l)
}

/// The leader removes itself. Correct: the others elect one of them and it stays LOOKING.
/// Seeded `removed-leader-keeps-leading`: it goes on leading in broadcast under the config that
/// removed it (what the `membership` checker reads as a leader outside its config).
#[test]
fn a_removed_leader_keeps_leading_only_under_the_seeded_bug() {
    for bug in [None, Some("removed-leader-keeps-leading")] {
        let (c, l) = three_settled(bug);
        let (code, body) = reconfig(&c, l, json!({"remove": [l]}));
        let v = answered_version(code, &body);
        if bug.is_some() {
            c.wait_for(
                LIMIT,
                "the removed leader leading under the new config",
                |c| {
                    let s = c.status(l)?;
                    let outside = !s["config"]["voters"].as_array()?.contains(&json!(l));
                    (s["state"] == "LEADING" && s["zab_phase"] == "broadcast" && outside)
                        .then_some(())
                },
            );
        } else {
            let rest: Vec<u64> = (1..=3).filter(|&s| s != l).collect();
            c.wait_for(LIMIT, "the others settled without it", |c| {
                settled(c, &rest, v)
            });
            assert_eq!(c.status(l).unwrap()["state"], "LOOKING");
        }
    }
}

/// The leader removes itself, the others settle, and their new leader is killed: the last
/// member is alone with the removed server. Correct: it stays LOOKING (the removed server's
/// connections are refused as an unknown server's). Seeded `removed-voter-counted`: it counts
/// the removed server's vote as the second of a quorum of two and decides.
#[test]
fn a_removed_voters_vote_is_counted_only_under_the_seeded_bug() {
    for bug in [None, Some("removed-voter-counted")] {
        let (mut c, l) = three_settled(bug);
        let (code, body) = reconfig(&c, l, json!({"remove": [l]}));
        let v = answered_version(code, &body);
        let rest: Vec<u64> = (1..=3).filter(|&s| s != l).collect();
        let l1 = c.wait_for(LIMIT, "the others settled without it", |c| {
            settled(c, &rest, v)
        });
        let m = rest.into_iter().find(|&s| s != l1).unwrap();
        let refused = |c: &Cluster| c.status(m).and_then(|s| s["wire"]["bad_hellos"].as_u64());
        let refused_before = refused(&c).unwrap();
        let round = c.status(m).unwrap()["last_election"]["round"].clone();
        c.kill(l1);
        if bug.is_some() {
            let d = c.wait_for(
                LIMIT,
                "the last member deciding with the removed vote",
                |c| {
                    let e = c.status(m)?["last_election"].clone();
                    (e["round"] != round).then_some(e)
                },
            );
            let sids: Vec<u64> = d["votes"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|v| v["sid"].as_u64())
                .collect();
            assert!(sids.contains(&l), "votes {sids:?} of {d}");
        } else {
            // The removed server keeps dialing; each of its attempts is refused.
            c.wait_for(LIMIT, "the removed server's dials refused", |c| {
                (refused(c)? >= refused_before + 3).then_some(())
            });
            let s = c.status(m).unwrap();
            assert_eq!(s["state"], "LOOKING", "{s}");
            assert_eq!(s["last_election"]["round"], round, "{s}");
        }
    }
}
