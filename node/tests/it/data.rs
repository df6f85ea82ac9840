//! The data tree over real `fle-node` processes on loopback: ops through a follower (create,
//! set, cas with the right and the wrong version), a sync and a read on another follower, and
//! reads refused once a leader lost its quorum, unless `reads-without-quorum` is seeded.

use std::time::Duration;

use serde_json::{json, Value};

use crate::support::{http_request, Cluster};

const LIMIT: Duration = Duration::from_secs(30);

/// A running 3-server cluster (`--bug bug` when given), once all three are in broadcast:
/// (cluster, leader, followers).
fn settled_cluster(bug: Option<&str>) -> (Cluster, u64, Vec<u64>) {
    let mut c = Cluster::new(3);
    if let Some(b) = bug {
        c.extra_args = vec!["--bug".into(), b.into()];
    }
    for sid in 1..=3 {
        c.start(sid);
    }
    let leader = c.wait_for(LIMIT, "a leader with both followers in broadcast", |c| {
        let leader = c.quorum_leader(&[1, 2, 3])?;
        (1..=3)
            .all(|s| {
                c.status(s).is_some_and(|st| {
                    st["leader"].as_u64() == Some(leader) && st["zab_phase"] == "broadcast"
                })
            })
            .then_some(leader)
    });
    let followers = (1..=3).filter(|&s| s != leader).collect();
    (c, leader, followers)
}

fn post(c: &Cluster, sid: u64, path: &str, body: Value) -> (u16, Value) {
    let port = c.nodes[&sid].admin_port;
    http_request(port, "POST", path, &body.to_string()).expect("the node answers")
}

fn read(c: &Cluster, sid: u64, key: &str) -> (u16, Value) {
    let port = c.nodes[&sid].admin_port;
    http_request(port, "GET", &format!("/data/{key}"), "").expect("the node answers")
}

#[test]
fn ops_through_a_follower_then_sync_and_read_on_another() {
    let (mut c, leader, followers) = settled_cluster(None);
    let (f1, f2) = (followers[0], followers[1]);
    let (code, body) = post(
        &c,
        f1,
        "/data",
        json!({"op": "create", "key": "k1", "value": 1}),
    );
    assert_eq!((code, &body["version"]), (200, &json!(0)), "{body}");
    let (code, body) = post(
        &c,
        f1,
        "/data",
        json!({"op": "create", "key": "k1", "value": 2}),
    );
    assert_eq!(
        (code, &body["error"]),
        (409, &json!("node exists: k1")),
        "{body}"
    );
    let (code, body) = post(
        &c,
        f1,
        "/data",
        json!({"op": "set", "key": "k1", "value": 3}),
    );
    assert_eq!((code, &body["version"]), (200, &json!(1)), "{body}");
    // A follower passes its leader's answer on only once it applied the op itself, as
    // ZooKeeper's do: a read there right after sees it.
    let (_, body) = read(&c, f1, "k1");
    assert_eq!(
        (&body["value"], &body["version"]),
        (&json!(3), &json!(1)),
        "{body}"
    );
    let cas = |version| json!({"op": "cas", "key": "k1", "version": version, "value": 4});
    let (code, body) = post(&c, f1, "/data", cas(1));
    assert_eq!((code, &body["version"]), (200, &json!(2)), "{body}");
    let cas_zxid = body["zxid"].as_u64().unwrap();
    let (_, body) = read(&c, f1, "k1");
    assert_eq!(
        (&body["value"], &body["version"]),
        (&json!(4), &json!(2)),
        "{body}"
    );
    let (code, body) = post(&c, f1, "/data", cas(1));
    assert_eq!(code, 409, "{body}");
    assert_eq!(body["error"], "bad version: expected 1, the key is at 2");
    let (code, body) = post(
        &c,
        f1,
        "/data",
        json!({"op": "set", "key": "nope", "value": 1}),
    );
    assert_eq!(
        (code, &body["error"]),
        (409, &json!("no node: nope")),
        "{body}"
    );

    // The refused ops are txns too (the leader's tree refused them): the sync covers them.
    let (code, body) = post(&c, f2, "/sync", json!({}));
    assert_eq!(code, 200, "{body}");
    assert!(body["zxid"].as_u64().unwrap() > cas_zxid, "{body}");
    let (code, body) = read(&c, f2, "k1");
    assert_eq!(code, 200, "{body}");
    assert_eq!(
        (&body["value"], &body["version"]),
        (&json!(4), &json!(2)),
        "{body}"
    );
    assert!(body["zxid"].as_u64().unwrap() > cas_zxid, "{body}");
    let (code, body) = read(&c, f2, "absent");
    assert_eq!(
        (code, &body["value"], &body["version"]),
        (200, &Value::Null, &json!(-1))
    );
    let (code, body) = post(&c, leader, "/sync", json!({}));
    assert_eq!(code, 200, "{body}");

    // Bad input: one line, 400.
    for bad in ["Bad%20Key", "a/b", "", "%FF"] {
        let (code, body) = read(&c, f2, bad);
        assert_eq!(code, 400, "{bad}: {body}");
        assert!(!body["error"].as_str().unwrap().contains('\n'), "{body}");
    }
    let (code, body) = post(
        &c,
        f1,
        "/data",
        json!({"op": "cas", "key": "k1", "value": 1}),
    );
    assert_eq!(code, 400, "{body}");

    // The leader alone is LOOKING: no reads, no syncs.
    for f in followers {
        c.kill(f);
    }
    c.wait_for(LIMIT, "the leader to give up", |c| {
        (c.role(leader)?.0 == "LOOKING").then_some(())
    });
    let (code, body) = read(&c, leader, "k1");
    assert_eq!(code, 503, "{body}");
    assert_eq!(post(&c, leader, "/sync", json!({})).0, 503);
}

#[test]
fn seeded_reads_without_quorum_serves_reads_from_a_deposed_leader() {
    let (mut c, leader, followers) = settled_cluster(Some("reads-without-quorum"));
    let (code, body) = post(
        &c,
        followers[0],
        "/data",
        json!({"op": "create", "key": "k", "value": 1}),
    );
    assert_eq!(code, 200, "{body}");
    for f in followers {
        c.kill(f);
    }
    c.wait_for(LIMIT, "the leader to give up", |c| {
        (c.role(leader)?.0 == "LOOKING").then_some(())
    });
    let (code, body) = read(&c, leader, "k");
    assert_eq!((code, &body["value"]), (200, &json!(1)), "{body}");
    assert_eq!(post(&c, leader, "/sync", json!({})).0, 200);
}
