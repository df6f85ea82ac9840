//! Zab inside real `fle-node` processes on loopback: FLE elects, Zab recovers and replicates,
//! clients write over HTTP. SIGKILL, SIGSTOP and wiped or damaged data dirs are the faults.

use crate::support;

use std::collections::BTreeMap;
use std::time::Duration;

use crate::support::Cluster;
use nix::sys::signal::Signal::{self, SIGKILL, SIGSTOP};
use serde_json::{json, Value};

const LIMIT: Duration = Duration::from_secs(60);

fn signal(c: &Cluster, sid: u64, sig: Signal) {
    let pid = nix::unistd::Pid::from_raw(c.pid(sid).unwrap() as i32);
    nix::sys::signal::kill(pid, sig).unwrap();
}

/// The leader of `among` once it and every other server in `among` are in broadcast.
fn settled(c: &Cluster, among: &[u64]) -> Option<u64> {
    let leader = c.quorum_leader(among)?;
    among
        .iter()
        .all(|&s| {
            c.status(s).is_some_and(|st| {
                st["leader"].as_u64() == Some(leader) && st["zab_phase"] == "broadcast"
            })
        })
        .then_some(leader)
}

/// Writes fresh values named `{tag}-{i}` until one is acknowledged (200); returns (zxid, value).
/// Refusals and unknown outcomes (503/504) are retried with a new value: an unknown one may
/// commit too, which is allowed, but no acknowledged one may be lost.
fn write_acked(c: &Cluster, to: &[u64], tag: &str, i: u64) -> (u64, Value) {
    let mut attempt = 0;
    c.wait_for(LIMIT, &format!("write {tag}-{i} to be acknowledged"), |c| {
        attempt += 1;
        let value = json!(format!("{tag}-{i}-try{attempt}"));
        let target = to[attempt as usize % to.len()];
        match c.write(target, value.clone())? {
            (200, body) => Some((body["zxid"].as_u64()?, value)),
            _ => None,
        }
    })
}

/// Every server's committed log, once all of `sids` report the same one.
fn identical_logs(c: &Cluster, sids: &[u64]) -> Vec<(u64, Value)> {
    c.wait_for(LIMIT, "identical committed logs", |c| {
        let logs: Vec<Vec<(u64, Value)>> = sids
            .iter()
            .map(|&s| c.log_entries(s))
            .collect::<Option<_>>()?;
        logs.windows(2)
            .all(|w| w[0] == w[1])
            .then(|| logs[0].clone())
    })
}

fn assert_has_every_acked(log: &[(u64, Value)], acked: &[(u64, Value)]) {
    let at: BTreeMap<u64, &Value> = log.iter().map(|(z, v)| (*z, v)).collect();
    for (zxid, value) in acked {
        assert_eq!(
            at.get(zxid),
            Some(&value),
            "acknowledged {value} at {zxid:#x} lost"
        );
    }
    let zxids: Vec<u64> = log.iter().map(|(z, _)| *z).collect();
    assert!(zxids.windows(2).all(|w| w[0] < w[1]), "log out of order");
}

fn epoch(c: &Cluster, sid: u64) -> u64 {
    c.status(sid).unwrap()["peer_epoch"].as_u64().unwrap()
}

#[test]
fn acknowledged_writes_survive_leader_kill_and_whole_cluster_restart() {
    let mut c = Cluster::new(3);
    let all = [1, 2, 3];
    for s in all {
        c.start(s);
    }
    let mut acked = Vec::new();
    let mut leader_epochs = Vec::new();
    let first = c.wait_for(LIMIT, "a settled cluster", |c| settled(c, &all));
    leader_epochs.push(epoch(&c, first));
    // To the leader and through followers (which forward), alike.
    for i in 0..30 {
        acked.push(write_acked(&c, &all, "a", i));
    }
    c.kill(first);
    let rest: Vec<u64> = all.iter().copied().filter(|&s| s != first).collect();
    let second = c.wait_for(LIMIT, "a new leader", |c| settled(c, &rest));
    leader_epochs.push(epoch(&c, second));
    for i in 0..30 {
        acked.push(write_acked(&c, &rest, "b", i));
    }
    c.start(first);
    c.wait_for(LIMIT, "the old leader to rejoin", |c| settled(c, &all));
    for i in 0..10 {
        acked.push(write_acked(&c, &all, "c", i));
    }
    let before: Vec<u64> = all.iter().map(|&s| epoch(&c, s)).collect();
    for s in all {
        c.kill(s);
    }
    for s in all {
        c.start(s);
    }
    let third = c.wait_for(LIMIT, "a settled cluster after a full restart", |c| {
        settled(c, &all)
    });
    leader_epochs.push(epoch(&c, third));
    for (i, &s) in all.iter().enumerate() {
        assert!(epoch(&c, s) > before[i], "n{s}'s epoch did not move on");
    }
    assert!(
        leader_epochs.windows(2).all(|w| w[0] < w[1]),
        "every new leader's epoch is larger: {leader_epochs:?}"
    );
    let log = identical_logs(&c, &all);
    assert_has_every_acked(&log, &acked);
}

#[test]
fn an_old_leader_loses_exactly_its_uncommitted_txn() {
    let mut c = Cluster::new(3);
    let all = [1, 2, 3];
    for s in all {
        c.start(s);
    }
    let old = c.wait_for(LIMIT, "a settled cluster", |c| settled(c, &all));
    let committed = write_acked(&c, &[old], "ok", 0);
    let followers: Vec<u64> = all.iter().copied().filter(|&s| s != old).collect();
    // Paused followers cannot log the next proposal; it reaches only their socket buffers,
    // which die with them below. So the txn is logged by the leader alone.
    for &f in &followers {
        signal(&c, f, SIGSTOP);
    }
    let port = c.nodes[&old].admin_port;
    let writer = std::thread::spawn(move || {
        support::http_request(port, "POST", "/write", r#"{"value":"lonely"}"#)
    });
    let lonely = c.wait_for(LIMIT, "the leader to log the lonely txn", |c| {
        let st = c.status(old)?;
        let (logged, done) = (
            st["last_zxid"].as_u64()?,
            st["last_committed_zxid"].as_u64()?,
        );
        (logged > done).then_some(logged)
    });
    signal(&c, old, SIGKILL);
    let answer = writer.join().unwrap();
    assert_ne!(answer.map(|a| a.0), Some(200), "never acknowledged");
    // SIGKILL while still stopped: they never read the proposal waiting in their sockets.
    for &f in &followers {
        c.kill(f);
    }
    c.kill(old);
    for &f in &followers {
        c.start(f);
    }
    let new = c.wait_for(LIMIT, "the others to elect", |c| settled(c, &followers));
    let after = write_acked(&c, &followers, "after", 0);
    c.start(old);
    c.wait_for(LIMIT, "the old leader to rejoin", |c| settled(c, &all));
    let log = identical_logs(&c, &all);
    assert!(
        log.iter().all(|(z, _)| *z != lonely),
        "TRUNC dropped {lonely:#x}"
    );
    assert!(!log.iter().any(|(_, v)| v == "lonely"));
    assert_has_every_acked(&log, &[committed, after]);
    assert_eq!(
        c.status(old).unwrap()["sync_mode"],
        "trunc",
        "{}",
        c.describe()
    );
    assert!(c.log_of(old).contains("TRUNC: dropped 1 txns"));
    assert!(epoch(&c, new) > lonely >> 32);
}

#[test]
fn a_follower_down_for_many_writes_catches_up_by_diff_and_by_snap_when_wiped() {
    let mut c = Cluster::new(3);
    let all = [1, 2, 3];
    for s in all {
        c.start(s);
    }
    let leader = c.wait_for(LIMIT, "a settled cluster", |c| settled(c, &all));
    let lagger = all.iter().copied().find(|&s| s != leader).unwrap();
    acked_burst(&c, leader, "before", 10);
    c.kill(lagger);
    let mut acked = acked_burst(&c, leader, "missed", 300);
    c.start(lagger);
    c.wait_for(LIMIT, "the follower to rejoin", |c| settled(c, &all));
    assert_eq!(c.status(lagger).unwrap()["sync_mode"], "diff");
    assert_has_every_acked(&identical_logs(&c, &all), &acked);

    c.kill(lagger);
    let dir = c.nodes[&lagger].data_dir.clone();
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        if p.file_name().unwrap() != "myid" {
            std::fs::remove_file(p).unwrap();
        }
    }
    acked.extend(acked_burst(&c, leader, "wiped", 20));
    c.start(lagger);
    c.wait_for(LIMIT, "the wiped follower to rejoin", |c| settled(c, &all));
    assert_eq!(c.status(lagger).unwrap()["sync_mode"], "snap");
    assert_has_every_acked(&identical_logs(&c, &all), &acked);
}

fn acked_burst(c: &Cluster, to: u64, tag: &str, n: u64) -> Vec<(u64, Value)> {
    (0..n).map(|i| write_acked(c, &[to], tag, i)).collect()
}

#[test]
fn a_corrupt_log_tail_is_cut_on_start_with_a_clear_line() {
    let mut c = Cluster::new(3);
    let all = [1, 2, 3];
    for s in all {
        c.start(s);
    }
    let leader = c.wait_for(LIMIT, "a settled cluster", |c| settled(c, &all));
    let victim = all.iter().copied().find(|&s| s != leader).unwrap();
    let acked = acked_burst(&c, leader, "v", 20);
    identical_logs(&c, &all);
    c.kill(victim);
    let log_file = c.nodes[&victim].data_dir.join("txnlog");
    let mut bytes = std::fs::read(&log_file).unwrap();
    bytes.extend_from_slice(b"\x00\x00\x00\x40garbage that is no record");
    std::fs::write(&log_file, bytes).unwrap();
    c.start(victim);
    c.wait_for(LIMIT, "the damaged follower to rejoin", |c| {
        settled(c, &all)
    });
    let line = c
        .log_of(victim)
        .lines()
        .find(|l| l.contains("WARN") && l.contains("truncated a torn or corrupt tail"))
        .map(str::to_string);
    assert!(line.is_some(), "{}", c.log_of(victim));
    assert_has_every_acked(&identical_logs(&c, &all), &acked);
}

#[test]
fn a_write_to_a_looking_server_is_refused_and_bad_requests_are_explained() {
    let mut c = Cluster::new(3);
    c.start(1);
    c.wait_for(LIMIT, "n1 to answer", |c| c.status(1));
    let (code, body) = c.write(1, json!("x")).unwrap();
    assert_eq!((code, body["outcome_unknown"].clone()), (503, json!(false)));
    let (code, body) =
        support::http_request(c.nodes[&1].admin_port, "POST", "/write", "not json").unwrap();
    assert_eq!(code, 400);
    assert!(body["error"].as_str().unwrap().contains("value"), "{body}");
    let (code, body) =
        support::http_request(c.nodes[&1].admin_port, "GET", "/log?from=abc", "").unwrap();
    assert_eq!(code, 400);
    assert!(body["error"].as_str().unwrap().contains("from"), "{body}");
}

#[test]
fn a_follower_forwards_writes_to_the_leader_and_refuses_a_forward_it_cannot_serve() {
    let mut c = Cluster::new(3);
    let all = [1, 2, 3];
    for s in all {
        c.start(s);
    }
    let leader = c.wait_for(LIMIT, "a settled cluster", |c| settled(c, &all));
    let follower = all.iter().copied().find(|&s| s != leader).unwrap();
    let (code, body) = c.write(follower, json!("via-follower")).unwrap();
    assert_eq!(code, 200, "{body}");
    let zxid = body["zxid"].as_u64().unwrap();
    let log = identical_logs(&c, &all);
    assert!(log.contains(&(zxid, json!("via-follower"))), "{log:?}");
    // A write already forwarded once is not forwarded again (no loops between followers).
    let port = c.nodes[&follower].admin_port;
    let raw = format!(
        "POST /write HTTP/1.0\r\nHost: x\r\nx-fle-forwarded-by: 1\r\nContent-Length: 13\r\n\r\n{}",
        r#"{"value":"y"}"#
    );
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    std::io::Write::write_all(&mut s, raw.as_bytes()).unwrap();
    let mut answer = String::new();
    std::io::Read::read_to_string(&mut s, &mut answer).unwrap();
    assert!(
        answer.starts_with("HTTP/1.0 503") || answer.starts_with("HTTP/1.1 503"),
        "{answer}"
    );
    assert!(answer.contains(&format!("\"leader\":{leader}")), "{answer}");
}

#[test]
fn a_disk_failure_in_zab_ends_the_node_with_exit_1_and_a_clear_message() {
    let mut c = Cluster::new(3);
    // A directory where n1 writes its acceptedEpoch temp file: persisting a new epoch fails.
    std::fs::create_dir(c.nodes[&1].data_dir.join("acceptedEpoch.tmp")).unwrap();
    for s in [1, 2, 3] {
        c.start(s);
    }
    let mut n1 = c.take_process(1).unwrap();
    let code = c.wait_for(LIMIT, "n1 to exit", |_| {
        n1.try_wait().unwrap().map(|st| st.code())
    });
    assert_eq!(code, Some(1), "{}", c.log_of(1));
    let log = c.log_of(1);
    assert!(
        log.contains("Zab failed on this server") && log.contains("acceptedEpoch"),
        "{log}"
    );
    // The others carry on without it.
    c.wait_for(LIMIT, "2 and 3 to settle", |c| settled(c, &[2, 3]));
}

#[test]
fn the_seeded_quorum_minority_bug_lets_a_lone_leader_commit_writes() {
    let mut c = Cluster::new(3);
    c.extra_args = vec!["--bug".into(), "quorum-minority".into()];
    c.start(1);
    c.wait_for(LIMIT, "n1 to lead alone and serve", |c| {
        let st = c.status(1)?;
        (st["state"] == "LEADING" && st["zab_phase"] == "broadcast").then_some(())
    });
    // Zab's quorum shrinks with FLE's: one server commits on its own fsync.
    let (code, body) = c.write(1, json!("alone")).unwrap();
    assert_eq!(code, 200, "{body}");
    let zxid = body["zxid"].as_u64().unwrap();
    assert_eq!(c.log_entries(1).unwrap(), vec![(zxid, json!("alone"))]);
}
