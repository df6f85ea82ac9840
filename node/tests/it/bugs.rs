//! Each seeded bug (`fle-node --bug NAME`) shown at work on real processes: its mechanism,
//! next to the correct server doing the right thing under the same input. Not detection
//! rates (a benchmark's job). Election bugs are driven by fake peers speaking the election
//! protocol over TCP to one real node; Zab bugs run small real clusters.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::support::blackhole::Blackhole;
use crate::support::{Cluster, NODE_BIN};
use fle_node::api::{make_zxid as z, ServerState};
use fle_node::wire::{self, Notification};
use serde_json::{json, Value};

const LIMIT: Duration = Duration::from_secs(20);

/// A cluster of `n` whose nodes run with `--bug bug` (None: the correct server).
fn cluster(n: u64, bug: Option<&str>) -> Cluster {
    let mut c = Cluster::new(n);
    if let Some(b) = bug {
        c.extra_args = vec!["--bug".into(), b.into()];
    }
    c
}

/// The bug is announced loudly in the node's log and listed in its /status.
fn assert_announced(c: &Cluster, sid: u64, bug: &str) {
    c.wait_for(LIMIT, "the node to answer", |c| c.status(sid));
    let log = c.log_of(sid);
    assert!(
        log.contains(&format!("SEEDED BUG ENABLED: --bug {bug}")),
        "{log}"
    );
    let listed = c.status(sid).unwrap()["seeded_bugs"].clone();
    assert_eq!(listed, json!([bug]));
}

/// A fake voter: dials the node's election port as `sid` (larger than the node's, so the
/// node keeps the connection) and speaks notifications.
struct FakePeer {
    stream: TcpStream,
}

impl FakePeer {
    fn connect(port: u16, sid: u64) -> FakePeer {
        let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("election port");
        stream
            .write_all(&wire::encode_hello(sid, "127.0.0.1:1"))
            .unwrap();
        FakePeer { stream }
    }

    fn send(&mut self, n: &Notification) {
        self.send_raw(&wire::frame(&wire::encode_notification(n)));
    }

    fn send_raw(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).unwrap();
        self.stream.flush().unwrap();
    }

    /// Reads the node's notifications until one satisfies `pred` (or `limit` passes).
    fn wait_for(&mut self, limit: Duration, pred: impl Fn(&Notification) -> bool) -> bool {
        let end = Instant::now() + limit;
        while Instant::now() < end {
            let left = end.saturating_duration_since(Instant::now());
            self.stream
                .set_read_timeout(Some(left.max(Duration::from_millis(1))))
                .unwrap();
            let mut len = [0u8; 4];
            if self.stream.read_exact(&mut len).is_err() {
                return false;
            }
            let mut payload = vec![0u8; i32::from_be_bytes(len) as usize];
            if self.stream.read_exact(&mut payload).is_err() {
                return false;
            }
            if wire::decode_notification(&payload).is_ok_and(|n| pred(&n)) {
                return true;
            }
        }
        false
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

/// n1 running alone in a 3-server ensemble, with fake peers 2 and 3 connected.
fn lone_node(bug: Option<&str>) -> (Cluster, FakePeer, FakePeer) {
    lone_node_at_epoch(bug, 0)
}

/// `lone_node` with n1's acceptedEpoch and currentEpoch at `epoch` (files written before it
/// starts, as a server that led or followed in that epoch has them).
fn lone_node_at_epoch(bug: Option<&str>, epoch: u64) -> (Cluster, FakePeer, FakePeer) {
    let mut c = cluster(3, bug);
    if epoch > 0 {
        let d = &c.nodes[&1].data_dir;
        std::fs::write(d.join("acceptedEpoch"), format!("{epoch}\n")).unwrap();
        std::fs::write(d.join("currentEpoch"), format!("{epoch}\n")).unwrap();
    }
    c.start(1);
    c.wait_for(LIMIT, "n1 to answer", |c| c.status(1));
    let port = c.nodes[&1].election_port;
    let mut p2 = FakePeer::connect(port, 2);
    let p3 = FakePeer::connect(port, 3);
    // n1 greets a new connection with its current vote: the link is up.
    assert!(p2.wait_for(LIMIT, |n| n.leader == 1 && n.state == ServerState::Looking));
    (c, p2, p3)
}

/// Makes sure n1 has processed everything p2 sent before: a better LOOKING vote in its round
/// (for 3) must come back adopted within `limit`. (n1 then decides for 3 with p2's vote.)
fn barrier(p2: &mut FakePeer, limit: Duration) -> bool {
    p2.send(&note(ServerState::Looking, 3, 0, 1, 0));
    p2.wait_for(limit, |n| n.leader == 3 && n.state == ServerState::Looking)
}

fn last_election(c: &Cluster) -> Value {
    c.status(1)
        .map(|s| s["last_election"].clone())
        .unwrap_or(Value::Null)
}

#[test]
fn list_bugs_prints_the_catalogue_and_an_unknown_bug_exits_2_naming_it() {
    let out = Command::new(NODE_BIN).arg("--list-bugs").output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.lines().count() >= 10, "{text}");
    for line in text.lines() {
        let fields: Vec<&str> = line.split('\t').collect();
        assert_eq!(fields.len(), 4, "{line}");
        assert!(fields.iter().all(|f| !f.is_empty()), "{line}");
    }
    for name in [
        "ack-before-fsync",
        "commit-quorum-minority",
        "quorum-minority",
    ] {
        assert!(text.lines().any(|l| l.starts_with(&format!("{name}\t"))));
    }
    let out = Command::new(NODE_BIN)
        .args([
            "--bug",
            "quorum-minority,nosuch",
            "--config",
            "/nonexistent",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("\"nosuch\"") && err.contains("ack-before-fsync"),
        "{err}"
    );
}

/// quorum-minority: one server of three is a "quorum": it leads alone.
#[test]
fn quorum_minority_leads_alone() {
    let mut c = cluster(3, Some("quorum-minority"));
    c.start(1);
    assert_announced(&c, 1, "quorum-minority");
    c.wait_for(LIMIT, "n1 to lead alone", |c| {
        let s = c.status(1)?;
        (s["state"] == "LEADING" && s["zab_phase"] == "broadcast").then_some(())
    });
}

/// ZOOKEEPER-1419, forced: the real n1 (peerEpoch 2, zxid 0) alone with fake peers, so no
/// link re-sends a vote and the order of what n1 hears is the test's. n3 votes for itself with
/// the same zxid and the older peerEpoch 1. The buggy n1 adopts that older vote (its sid clause
/// skips the epoch check), which with n3's own makes a quorum: it elects n3, the server of the
/// older epoch. The correct n1 keeps its own vote against it and, when n3 next votes for n2
/// (zxid 5 of epoch 2, the better vote), adopts that one: on the wire it never votes for n3.
#[test]
fn vote_order_not_total_elects_the_older_epoch() {
    let older = note(ServerState::Looking, 3, 0, 1, 1);
    for bug in [None, Some("vote-order-not-total")] {
        let (c, mut p2, mut p3) = lone_node_at_epoch(bug, 2);
        p3.send(&older);
        if bug.is_some() {
            assert_announced(&c, 1, "vote-order-not-total");
            let e = c.wait_for(LIMIT, "n1 to elect n3", |c| {
                let e = last_election(c);
                (!e.is_null()).then_some(e)
            });
            assert_eq!(e["leader"], 3, "{e}\n{}", c.describe());
            let adopted_older = e["received"]
                .as_array()
                .unwrap()
                .iter()
                .any(|v| v["sid"] == 1 && v["leader"] == 3 && v["peer_epoch"] == 1);
            assert!(adopted_older, "{e}");
            // In adoption order: its own newer-epoch vote first, then the older one (what
            // vote-rule reads as a proposal that fell in the total order).
            let mine: Vec<_> = e["received"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|v| v["sid"] == 1)
                .map(|v| (v["leader"].as_u64(), v["peer_epoch"].as_u64()))
                .collect();
            assert_eq!(mine[..2], [(Some(1), Some(2)), (Some(3), Some(1))], "{e}");
            continue;
        }
        // Sent on the same connection after `older`, so n1 has judged `older` by the time it
        // answers this one.
        p3.send(&note(ServerState::Looking, 2, z(2, 5), 1, 2));
        let voted_for_3 = std::cell::Cell::new(false);
        let adopted_2 = p2.wait_for(LIMIT, |n| {
            if n.leader == 3 {
                voted_for_3.set(true);
            }
            n.leader == 2
        });
        assert!(adopted_2, "{}", c.describe());
        assert!(
            !voted_for_3.get(),
            "the correct n1 voted for n3 (older epoch)"
        );
        let e = c.wait_for(LIMIT, "n1 to elect n2", |c| {
            let e = last_election(c);
            (!e.is_null()).then_some(e)
        });
        assert_eq!(e["leader"], 2, "{e}");
    }
}

/// ZOOKEEPER-1514: FOLLOWING notices naming n1, from a round older than n1's.
#[test]
fn follow_older_round_leads_on_stale_following_notices() {
    for bug in [None, Some("follow-older-round")] {
        let (c, mut p2, mut p3) = lone_node(bug);
        p2.send(&note(ServerState::Following, 1, 0, 0, 0));
        p3.send(&note(ServerState::Following, 1, 0, 0, 0));
        if bug.is_some() {
            assert_announced(&c, 1, "follow-older-round");
            let e = c.wait_for(LIMIT, "n1 to lead on stale notices", |c| {
                let e = last_election(c);
                (e["leader"] == 1).then_some(e)
            });
            assert_eq!(e["joined"], true, "{e}");
            // What the decision acted on: notices of round 0 while n1 was in round 1.
            assert_eq!(
                (&e["round"], &e["own_round"]),
                (&json!(0), &json!(1)),
                "{e}"
            );
            let counted = e["votes"].as_array().unwrap();
            assert!(
                counted.len() >= 2
                    && counted
                        .iter()
                        .all(|v| v["round"] == 0 && v["state"] == "FOLLOWING"),
                "{e}"
            );
        } else {
            assert!(barrier(&mut p2, LIMIT), "{}", c.describe());
            assert_ne!(last_election(&c)["leader"], 1, "{}", c.describe());
            assert_ne!(c.role(1).unwrap().0, "LEADING");
        }
    }
}

/// ZOOKEEPER-975: a single LEADING notice, nobody following it.
#[test]
fn follow_single_leading_follows_a_lone_leading_notice() {
    for bug in [None, Some("follow-single-leading")] {
        let (c, mut p2, _p3) = lone_node(bug);
        p2.send(&note(ServerState::Leading, 2, 0, 5, 0));
        if bug.is_some() {
            assert_announced(&c, 1, "follow-single-leading");
            c.wait_for(LIMIT, "n1 to follow n2", |c| {
                (last_election(c)["leader"] == 2).then_some(())
            });
        } else {
            assert!(barrier(&mut p2, LIMIT), "{}", c.describe());
            assert_ne!(last_election(&c)["leader"], 2, "{}", c.describe());
        }
    }
}

/// ZOOKEEPER-1732: a leader (round 5) and its follower (round 4, it joined later) agree on
/// leader and peerEpoch; the correct server joins them, the buggy one never does.
#[test]
fn out_of_election_wrong_fields_cannot_join_a_running_leader() {
    for bug in [None, Some("out-of-election-wrong-fields")] {
        let (c, mut p2, mut p3) = lone_node(bug);
        p2.send(&note(ServerState::Leading, 2, z(1, 3), 5, 1));
        p3.send(&note(ServerState::Following, 2, z(1, 3), 4, 1));
        if bug.is_some() {
            assert_announced(&c, 1, "out-of-election-wrong-fields");
            assert!(barrier(&mut p2, LIMIT), "{}", c.describe());
            assert_ne!(last_election(&c)["leader"], 2, "{}", c.describe());
        } else {
            let e = c.wait_for(LIMIT, "n1 to join n2", |c| {
                let e = last_election(c);
                (e["leader"] == 2).then_some(e)
            });
            assert_eq!(e["joined"], true);
        }
    }
}

/// ZOOKEEPER-3769: one truncated notification (a frame of 20 bytes, shorter than any
/// layout), then a leader and its follower announce themselves. The correct server drops
/// the bad message and joins them; the buggy one is deaf from then on.
#[test]
fn deaf_on_truncated_stops_hearing_after_one_truncated_notification() {
    for bug in [None, Some("deaf-on-truncated")] {
        let (c, mut p2, mut p3) = lone_node(bug);
        p2.send_raw(&wire::frame(&[0u8; 20]));
        c.wait_for(LIMIT, "the bad message to be counted", |c| {
            (c.status(1)?["wire"]["bad_notifications"] == 1).then_some(())
        });
        p2.send(&note(ServerState::Leading, 2, 0, 5, 0));
        p3.send(&note(ServerState::Following, 2, 0, 5, 0));
        if bug.is_some() {
            assert_announced(&c, 1, "deaf-on-truncated");
            c.wait_for(LIMIT, "n1's election receiver to be marked dead", |c| {
                (c.status(1)?["wire"]["receiver_dead"] == true).then_some(())
            });
            // Deaf: a better vote in its own round is not adopted either.
            assert!(
                !barrier(&mut p2, Duration::from_secs(2)),
                "{}",
                c.describe()
            );
            assert_eq!(last_election(&c), Value::Null);
            assert_eq!(c.role(1).unwrap().0, "LOOKING");
        } else {
            c.wait_for(LIMIT, "n1 to join n2", |c| {
                (last_election(c)["leader"] == 2).then_some(())
            });
            assert_eq!(c.status(1).unwrap()["wire"]["receiver_dead"], false);
        }
    }
}

/// ZOOKEEPER-3756: n1's address is a blackhole. n3 starts first, so its dial to n1 is under
/// way (and hangs) when n2 starts. Correct: n3's link to n2 does not wait for it. Bug: every
/// dial queues behind the hanging one: nothing is elected until its 5 s timeout.
#[test]
fn blocking_connect_stalls_the_election_behind_a_blackholed_peer() {
    for bug in [None, Some("blocking-connect")] {
        let hole = Blackhole::new();
        let mut c = cluster(3, bug);
        c.set_election_port(1, hole.addr().port());
        c.start(3);
        c.wait_for(LIMIT, "n3 to answer", |c| c.status(3));
        let t0 = Instant::now();
        c.start(2);
        c.wait_for(LIMIT, "n2 and n3 to elect n3", |c| {
            (c.quorum_leader(&[2, 3]) == Some(3)).then_some(())
        });
        let took = t0.elapsed();
        if bug.is_some() {
            assert_announced(&c, 3, "blocking-connect");
            assert!(took >= Duration::from_secs(3), "{took:?}\n{}", c.describe());
        } else {
            assert!(
                took < Duration::from_millis(2500),
                "{took:?}\n{}",
                c.describe()
            );
        }
    }
}

/// ZOOKEEPER-1366, under libfaketime: a follower's wall clock jumps 30 s forward. Correct:
/// its leader's silence is timed on the monotonic clock, nothing happens. Bug: it drops its
/// healthy leader at once.
#[test]
fn wall_clock_timeouts_drop_a_healthy_leader_on_a_clock_jump() {
    let lib = fle_chaos::control::fault::faketime::LIBFAKETIME;
    if !std::path::Path::new(lib).exists() {
        eprintln!("SKIP wall_clock_timeouts: {lib} missing (apt-get install libfaketime)");
        return;
    }
    for bug in [None, Some("wall-clock-timeouts")] {
        let mut c = cluster(3, bug);
        // A 1.5 s silence limit: a loaded machine's stalls stay inside it, the 30 s jump not.
        c.set_tick(300);
        let file = c.dir.path().join("n1.faketime");
        std::fs::write(&file, "+0\n").unwrap();
        c.extra_env = fle_chaos::control::fault::faketime::env(&file);
        c.start(1);
        c.extra_env.clear();
        c.start(2);
        c.start(3);
        let following = |c: &Cluster| {
            let s = c.status(1)?;
            (s["state"] == "FOLLOWING" && s["zab_phase"] == "broadcast").then_some(s)
        };
        let before = c.wait_for(LIMIT, "n1 to follow in broadcast", following);
        std::fs::write(&file, "+30\n").unwrap();
        c.wait_for(LIMIT, "n1's clock to jump", |c| {
            let ahead =
                c.status(1)?["wall_clock_ms"].as_i64()? - chrono::Utc::now().timestamp_millis();
            (ahead > 25_000).then_some(())
        });
        if bug.is_some() {
            assert_announced(&c, 1, "wall-clock-timeouts");
            c.wait_for(LIMIT, "n1 to drop its leader", |c| {
                c.log_of(1).contains("by the wall clock").then_some(())
            });
        } else {
            // Over three times the follower's silence limit (syncLimit 5 x tickTime 300 ms).
            std::thread::sleep(Duration::from_secs(5));
            let after = following(&c).unwrap_or_else(|| panic!("{}", c.describe()));
            assert_eq!(after["election_epoch"], before["election_epoch"]);
            assert!(
                !c.log_of(1).contains("stopped following"),
                "{}",
                c.log_of(1)
            );
        }
    }
}

/// ZOOKEEPER-1154: n2 logged (1,3), a proposal of epoch 1 no quorum took; n1 went on in
/// epoch 2 from (1,2). Correct: n1 syncs n2 with TRUNC to (1,2), then (2,1). Bug: DIFF, and
/// n2's committed log keeps (1,3), which the leader never had.
#[test]
fn diff_without_trunc_leaves_a_follower_with_a_txn_the_leader_never_had() {
    for bug in [None, Some("diff-without-trunc")] {
        let mut c = cluster(3, bug);
        c.seed_log(1, &[z(1, 1), z(1, 2), z(2, 1)], z(2, 1));
        c.seed_log(2, &[z(1, 1), z(1, 2), z(1, 3)], z(1, 2));
        c.start(1);
        c.start(2);
        let s = c.wait_for(LIMIT, "n2 to be synced by n1", |c| {
            let s = c.status(2)?;
            (s["leader"] == 1
                && s["zab_phase"] == "broadcast"
                && s["last_committed_zxid"] == z(2, 1))
            .then_some(s)
        });
        let zxids: Vec<u64> = c.log_entries(2).unwrap().iter().map(|e| e.0).collect();
        let leader: Vec<u64> = c.log_entries(1).unwrap().iter().map(|e| e.0).collect();
        assert_eq!(leader, vec![z(1, 1), z(1, 2), z(2, 1)]);
        if bug.is_some() {
            assert_announced(&c, 1, "diff-without-trunc");
            assert_eq!(s["sync_mode"], "diff");
            assert_eq!(zxids, vec![z(1, 1), z(1, 2), z(1, 3), z(2, 1)]);
        } else {
            assert_eq!(s["sync_mode"], "trunc");
            assert_eq!(zxids, leader);
        }
    }
}

/// Starts n3 first, then n1 correct and n2 with `bug`: n3 leads (its vote beats any other),
/// n1 and n2 follow in broadcast.
fn leader_3_with_buggy_follower_2(bug: &str) -> Cluster {
    let mut c = Cluster::new(3);
    c.start(3);
    c.start(1);
    c.extra_args = vec!["--bug".into(), bug.into()];
    c.start(2);
    c.extra_args.clear();
    c.wait_for(LIMIT, "n1 and n2 to follow n3 in broadcast", |c| {
        [1, 2]
            .iter()
            .all(|&s| {
                c.status(s)
                    .is_some_and(|s| s["leader"] == 3 && s["zab_phase"] == "broadcast")
            })
            .then_some(())
    });
    assert_announced(&c, 2, bug);
    c
}

fn order_counters(c: &Cluster, sid: u64) -> (u64, u64) {
    let s = c.status(sid).unwrap();
    let o = &s["durability_order"];
    (
        o["acks_before_fsync"].as_u64().unwrap(),
        o["epochs_before_fsync"].as_u64().unwrap(),
    )
}

/// ZOOKEEPER-3911: the buggy follower's ACKs leave before its fsync (counted where the
/// executor sends them); the correct follower's never do. Issue 17's power-loss fault is what
/// turns this order into lost writes.
#[test]
fn ack_before_fsync_acks_proposals_before_they_are_durable() {
    let c = leader_3_with_buggy_follower_2("ack-before-fsync");
    for i in 0..5 {
        let (code, body) = c.write(3, json!(i)).unwrap();
        assert_eq!(code, 200, "{body}");
    }
    let (acks, _) = c.wait_for(LIMIT, "n2 to ACK the writes", |c| {
        let o = order_counters(c, 2);
        (o.0 >= 1).then_some(o)
    });
    assert!(acks <= 5);
    c.wait_for(LIMIT, "n1 to log the writes", |c| {
        (c.status(1)?["last_zxid"] == c.status(3)?["last_zxid"]).then_some(())
    });
    assert_eq!(order_counters(&c, 1), (0, 0), "the correct follower");
}

/// ZOOKEEPER-4785: n3 leads with (1,2), which n1 and n2 lack; syncing them by DIFF, the buggy
/// n2 writes its new currentEpoch and ACKs NEWLEADER before (1,2) is fsynced.
#[test]
fn epoch_before_txns_writes_the_epoch_before_the_synced_txns_are_durable() {
    let mut c = Cluster::new(3);
    c.seed_log(3, &[z(1, 1), z(1, 2)], z(1, 2));
    for sid in [1, 2] {
        c.seed_log(sid, &[z(1, 1)], z(1, 1));
    }
    c.start(3);
    c.start(1);
    c.extra_args = vec!["--bug".into(), "epoch-before-txns".into()];
    c.start(2);
    c.extra_args.clear();
    c.wait_for(LIMIT, "n1 and n2 synced by n3", |c| {
        [1, 2]
            .iter()
            .all(|&s| {
                c.status(s).is_some_and(|s| {
                    s["leader"] == 3 && s["zab_phase"] == "broadcast" && s["last_zxid"] == z(1, 2)
                })
            })
            .then_some(())
    });
    assert_announced(&c, 2, "epoch-before-txns");
    assert_eq!(order_counters(&c, 2), (1, 1), "the buggy follower");
    assert_eq!(order_counters(&c, 1), (0, 0), "the correct follower");
}

/// Commit quorum off by one: with both followers stopped (SIGSTOP), the buggy leader still
/// answers a write "committed" on its own fsync; the correct one cannot.
#[test]
fn commit_quorum_minority_commits_with_only_the_leader() {
    use nix::sys::signal::{kill, Signal};
    use nix::unistd::Pid;
    for bug in [None, Some("commit-quorum-minority")] {
        let mut c = cluster(3, bug);
        for sid in [3, 1, 2] {
            c.start(sid);
        }
        c.wait_for(LIMIT, "n3 to lead a synced quorum", |c| {
            [1, 2]
                .iter()
                .all(|&s| c.status(s).is_some_and(|s| s["zab_phase"] == "broadcast"))
                .then_some(())
        });
        assert_eq!(c.quorum_leader(&[1, 2, 3]), Some(3));
        let (code, _) = c.write(3, json!("with everyone")).unwrap();
        assert_eq!(code, 200);
        for sid in [1, 2] {
            kill(Pid::from_raw(c.pid(sid).unwrap() as i32), Signal::SIGSTOP).unwrap();
        }
        let (code, body) = c.write(3, json!("alone")).unwrap();
        for sid in [1, 2] {
            kill(Pid::from_raw(c.pid(sid).unwrap() as i32), Signal::SIGCONT).unwrap();
        }
        if bug.is_some() {
            assert_announced(&c, 3, "commit-quorum-minority");
            assert_eq!(code, 200, "{body}");
        } else {
            assert_ne!(code, 200, "{body}");
        }
    }
}

/// Issue 15: a real election's summary lists the losing votes too (here n1's and n2's own
/// first proposals), with round and state, and the counted votes stay those for the winner.
#[test]
fn last_election_lists_every_vote_heard_in_the_round() {
    let mut c = Cluster::new(3);
    for sid in [1, 2, 3] {
        c.start(sid);
    }
    let e = c.wait_for(LIMIT, "n1 to follow n3", |c| {
        let e = last_election(c);
        (e["leader"] == 3).then_some(e)
    });
    let received = e["received"].as_array().unwrap();
    assert!(
        received
            .iter()
            .any(|v| v["sid"] == 1 && v["leader"] == 1 && v["state"] == "LOOKING"),
        "n1's own first vote: {e}"
    );
    assert!(received.iter().all(|v| v["round"] == e["round"]), "{e}");
    assert!(received.iter().any(|v| v["leader"] == 3), "{e}");
    assert!(e["votes"]
        .as_array()
        .unwrap()
        .iter()
        .all(|v| v["leader"] == 3));
}

/// Whether `s` answers in broadcast.
fn in_broadcast(c: &Cluster, s: u64) -> bool {
    c.status(s).is_some_and(|s| s["zab_phase"] == "broadcast")
}

/// n1, n2, n3 (with `--bug bug`) started, n3 first: n3 leads n1 and n2 in broadcast.
fn n3_leading_a_synced_quorum(bug: Option<&str>) -> Cluster {
    let mut c = cluster(3, bug);
    for sid in [3, 1, 2] {
        c.start(sid);
    }
    c.wait_for(LIMIT, "n3 to lead a synced quorum", |c| {
        [1, 2].iter().all(|&s| in_broadcast(c, s)).then_some(())
    });
    assert_eq!(c.quorum_leader(&[1, 2, 3]), Some(3));
    c
}

/// leader-never-steps-down: both followers of n3 are killed. The correct leader goes back to
/// LOOKING after syncLimit (0.5 s here); the buggy one still says LEADING seconds later.
#[test]
fn leader_never_steps_down_leads_without_followers() {
    for bug in [None, Some("leader-never-steps-down")] {
        let mut c = n3_leading_a_synced_quorum(bug);
        c.kill(1);
        c.kill(2);
        let t0 = Instant::now();
        if bug.is_some() {
            assert_announced(&c, 3, "leader-never-steps-down");
            // Six times syncLimit x tickTime.
            while t0.elapsed() < Duration::from_secs(3) {
                assert_eq!(c.role(3).unwrap().0, "LEADING", "{}", c.describe());
                std::thread::sleep(Duration::from_millis(100));
            }
        } else {
            c.wait_for(LIMIT, "n3 to step down", |c| {
                (c.role(3)?.0 == "LOOKING").then_some(())
            });
            assert!(t0.elapsed() < Duration::from_secs(3));
        }
    }
}

/// refuse-repeated-epoch: n1, a follower of n3, is killed and restarted while n3 keeps leading
/// with n2. n1 accepted n3's epoch before it died, so n3 offers it that epoch again: the
/// correct n1 rejoins in broadcast at once; the buggy one refuses it at every attempt and stays
/// out of broadcast (FOLLOWING in discovery, LOOKING between attempts) beside the same leader.
#[test]
fn refuse_repeated_epoch_cannot_rejoin_a_standing_leader() {
    for bug in [None, Some("refuse-repeated-epoch")] {
        let mut c = n3_leading_a_synced_quorum(bug);
        let epoch = c.status(3).unwrap()["peer_epoch"].clone();
        c.kill(1);
        c.start(1);
        let t0 = Instant::now();
        if bug.is_some() {
            assert_announced(&c, 1, "refuse-repeated-epoch");
            // Five times syncLimit x tickTime, n3 leading its epoch all along.
            while t0.elapsed() < Duration::from_millis(2500) {
                assert!(!in_broadcast(&c, 1), "{}", c.describe());
                assert_eq!(c.quorum_leader(&[2, 3]), Some(3), "{}", c.describe());
                assert_eq!(c.status(3).unwrap()["peer_epoch"], epoch);
                std::thread::sleep(Duration::from_millis(100));
            }
        } else {
            c.wait_for(LIMIT, "n1 to rejoin n3", |c| {
                in_broadcast(c, 1).then_some(())
            });
            assert!(t0.elapsed() < Duration::from_millis(2500));
            assert_eq!(c.status(1).unwrap()["peer_epoch"], epoch);
        }
    }
}
