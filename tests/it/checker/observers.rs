//! The observers checker on hand-made histories of 3 voters (n1-n3) and one observer (n4): an
//! observer that leads, is counted in a quorum or serves a txn the voters never committed is
//! invalid; an observer LOOKING during an election or lagging behind is not; a run without
//! observers is not judged. Durability's quorums on the same histories count voters only.

use fle_chaos::checker::{check_history, CheckOptions, Validity};
use fle_chaos::history::test_info::TestInfo;
use fle_chaos::history::Event;
use serde_json::{json, Value};

fn info(observers: &[&str]) -> TestInfo {
    serde_json::from_value(json!({
        "name": "observers", "target": "fle", "nodes": ["n1", "n2", "n3", "n4"],
        "observers": observers, "workload": "writes", "nemesis": [], "seed": 1,
        "time_limit_s": 10.0, "tick_ms": 100, "init_limit": 5, "sync_limit": 2,
        "started_at": "2026-12-04T00:00:00Z", "replay_command": "fle-chaos test --seed 1",
        "version": "0.1.0", "settings": {}
    }))
    .unwrap()
}

/// A status read of node `sid` at `t` ms; `votes` the sids its last election counted.
fn status(t: u64, sid: u64, state: &str, leader: Option<u64>, votes: &[u64]) -> Value {
    let election = (!votes.is_empty()).then(|| {
        let v: Vec<Value> = votes
            .iter()
            .map(|s| json!({"sid": s, "leader": 3, "zxid": 0, "peer_epoch": 0}))
            .collect();
        json!({"round": 1, "leader": 3, "zxid": 0, "peer_epoch": 0, "took_ms": 200, "votes": v})
    });
    let phase = if state == "LOOKING" {
        "election"
    } else {
        "broadcast"
    };
    let mut value = json!({
        "sid": sid, "state": state, "leader": leader, "peer_epoch": 1, "accepted_epoch": 1,
        "election_epoch": 1, "last_zxid": 0, "last_zxid_hex": "0x0", "last_committed_zxid": 0,
        "zab_phase": phase, "wall_clock_ms": 0, "uptime_ms": t, "last_election": election
    });
    if sid == 4 {
        value["peer_type"] = json!("observer");
    }
    json!({"time": t * 1_000_000, "process": format!("n{sid}"), "type": "ok", "f": "status",
           "node": format!("n{sid}"), "value": value})
}

fn final_log(t: u64, sid: u64, values: &[&str]) -> Value {
    let entries: Vec<Value> = values
        .iter()
        .enumerate()
        .map(|(i, v)| json!({"zxid": (1u64 << 32) + i as u64 + 1, "value": v}))
        .collect();
    json!({"time": t * 1_000_000, "process": "final", "type": "ok", "f": "final-log",
           "node": format!("n{sid}"), "value": {"entries": entries, "last_committed_zxid": 0}})
}

/// A settled cluster: n3 leads n1 and n2, n4 LOOKs then observes; every log holds [a, b].
fn calm(observer_log: &[&str]) -> Vec<Value> {
    vec![
        status(1, 4, "LOOKING", None, &[]),
        status(10, 3, "LEADING", Some(3), &[1, 2, 3]),
        status(11, 1, "FOLLOWING", Some(3), &[1, 3]),
        status(12, 2, "FOLLOWING", Some(3), &[2, 3]),
        status(20, 4, "OBSERVING", Some(3), &[1, 2, 3]),
        final_log(100, 1, &["a", "b"]),
        final_log(101, 2, &["a", "b"]),
        final_log(102, 3, &["a", "b"]),
        final_log(103, 4, observer_log),
    ]
}

fn verdict(lines: Vec<Value>, observers: &[&str]) -> (Validity, String) {
    verdict_of("observers", lines, observers)
}

fn verdict_of(checker: &str, lines: Vec<Value>, observers: &[&str]) -> (Validity, String) {
    let events: Vec<Event> = lines
        .into_iter()
        .enumerate()
        .map(|(i, mut l)| {
            l["index"] = json!(i);
            serde_json::from_value(l).unwrap()
        })
        .collect();
    let results = check_history(&events, &info(observers), &CheckOptions::default());
    let c = results
        .checkers
        .iter()
        .find(|c| c.name == checker)
        .expect("the checker ran");
    (c.valid, c.explanation.clone())
}

#[test]
fn an_observer_looking_then_lagging_is_valid() {
    let (v, why) = verdict(calm(&["a"]), &["n4"]);
    assert_eq!(v, Validity::True, "{why}");
    assert!(why.contains("n4"), "{why}");
}

#[test]
fn an_observer_read_leading_is_invalid() {
    let mut lines = calm(&["a", "b"]);
    lines.insert(5, status(30, 4, "LEADING", Some(4), &[]));
    let (v, why) = verdict(lines, &["n4"]);
    assert_eq!(v, Validity::False, "{why}");
    assert!(why.contains("n4 was read LEADING"), "{why}");
}

#[test]
fn an_observer_counted_in_a_quorum_is_invalid() {
    let mut lines = calm(&["a", "b"]);
    lines.insert(5, status(30, 1, "FOLLOWING", Some(3), &[1, 4]));
    let (v, why) = verdict(lines, &["n4"]);
    assert_eq!(v, Validity::False, "{why}");
    assert!(why.contains("observer n4"), "{why}");
}

#[test]
fn an_observer_serving_an_uncommitted_txn_is_invalid() {
    let (v, why) = verdict(calm(&["a", "x"]), &["n4"]);
    assert_eq!(v, Validity::False, "{why}");
    assert!(why.contains("prefix"), "{why}");
}

#[test]
fn a_run_without_observers_is_not_judged_and_counts_n4_as_a_voter() {
    let results = check_history(&[], &info(&[]), &CheckOptions::default());
    let c = results
        .checkers
        .iter()
        .find(|c| c.name == "observers")
        .unwrap();
    assert!(c.explanation.contains("no observers"), "{}", c.explanation);
    assert_eq!(info(&[]).quorum(), 3);
    assert_eq!(info(&["n4"]).quorum(), 2);
}

#[test]
fn test_json_naming_an_observer_outside_the_nodes_is_refused() {
    let dir = tempfile::Builder::new()
        .prefix("flc-obs-")
        .tempdir()
        .unwrap();
    let path = dir.path().join("test.json");
    let mut bad = serde_json::to_value(info(&["n9"])).unwrap();
    std::fs::write(&path, bad.to_string()).unwrap();
    let e = TestInfo::read(&path).unwrap_err().to_string();
    assert!(e.contains("n9"), "{e}");
    bad["observers"] = json!(["n1", "n2", "n3", "n4"]);
    std::fs::write(&path, bad.to_string()).unwrap();
    let e = TestInfo::read(&path).unwrap_err().to_string();
    assert!(e.contains("at least one voter"), "{e}");
}

/// Writes `a` and `b` (zxids 0x100000001, 0x100000002) acknowledged by the leader n3.
fn acked_writes() -> Vec<Value> {
    let write = |t: u64, kind: &str, v: &str, zxid: Option<u64>| {
        let mut value = json!({"value": v});
        if let Some(z) = zxid {
            value["zxid"] = json!(z);
        }
        json!({"time": t * 1_000_000, "process": "0", "type": kind, "f": "write",
               "node": "n3", "value": value})
    };
    vec![
        write(30, "invoke", "a", None),
        write(31, "ok", "a", Some((1 << 32) + 1)),
        write(32, "invoke", "b", None),
        write(33, "ok", "b", Some((1 << 32) + 2)),
    ]
}

#[test]
fn durability_counts_neither_holders_nor_lackers_among_observers() {
    let logs = |n1: &[&str], n2: &[&str], n4: &[&str]| {
        let mut lines = calm(n4);
        lines.splice(5..5, acked_writes());
        let at = lines.len() - 4;
        lines[at] = final_log(100, 1, n1);
        lines[at + 1] = final_log(101, 2, n2);
        lines
    };
    // n1 lags one write behind, and so does the observer n4: two logs lack `b`, as many as a
    // quorum of the three voters, but only one of them is a voter's. n1 may yet catch up, and
    // the leader n3 holds `b`: not a lost write.
    let (v, why) = verdict_of("durability", logs(&["a"], &["a", "b"], &["a"]), &["n4"]);
    assert_ne!(v, Validity::False, "{why}");
    assert!(why.contains("n1's final log holds 1 of the 2"), "{why}");
    // Two voters lacking `b` are a quorum of voters: lost, whatever the observer holds.
    let (v, why) = verdict_of("durability", logs(&["a"], &["a"], &["a", "b"]), &["n4"]);
    assert_eq!(v, Validity::False, "{why}");
    assert!(
        why.contains("2 of the voters' final logs, a majority"),
        "{why}"
    );
}
