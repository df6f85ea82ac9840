//! Zab under kill -9, with real processes: each peer is this test binary re-run as a child
//! (`zab_peer_child`) holding its data directory; the test SIGKILLs them mid-write and restarts
//! them. Roles are handed out as FLE would pick them (highest (currentEpoch, last logged zxid)
//! leads), read from the stores between rounds; the election itself is another module.
//!
//! Child protocol: the leader reads one JSON value per stdin line and prints
//! `ZAB committed <zxid> <value>` once committed; every peer prints `ZAB progress <phase>
//! <last committed zxid>` and `ZAB ended <why>` before it exits.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use fle_node::api::ZabPhase;
use fle_node::zab::store::lock;
use fle_node::zab::{follow, lead, ClientWrite, Store, WriteOutcome, ZabConfig, ZabProgress};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(60);

#[derive(Serialize, Deserialize)]
struct Spec {
    sid: u64,
    leader: u64,
    dir: PathBuf,
    voters: BTreeMap<u64, SocketAddr>,
}

/// `zab_peer_child`'s module path; the test binary names it without the crate's own name.
const PEER_PATH: &str = concat!(module_path!(), "::zab_peer_child");

/// `zab_peer_child`'s name as `--exact` wants it: `PEER_PATH` after the first `::`.
fn peer_test() -> &'static str {
    PEER_PATH
        .split_once("::")
        .map_or(PEER_PATH, |(_, rest)| rest)
}

#[test]
#[ignore = "the peer process that zab_kill's tests start; it does nothing on its own"]
fn zab_peer_child() {
    let Ok(spec) = std::env::var("ZAB_PEER") else {
        return;
    };
    let spec: Spec = serde_json::from_str(&spec).expect("ZAB_PEER spec");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(child_main(spec));
    std::process::exit(0);
}

async fn child_main(spec: Spec) {
    let (store, repair) = Store::open_shared(&spec.dir).expect("open store");
    if let Some(r) = repair {
        println!("\nZAB repair {r}");
    }
    let cfg = ZabConfig::new(
        spec.sid,
        spec.voters.clone(),
        Default::default(),
        Duration::from_millis(50),
        40,
        10,
    );
    let start = ZabProgress::from_store(&lock(&store), ZabPhase::Election, None);
    let (ptx, mut prx) = tokio::sync::watch::channel(start);
    tokio::spawn(async move {
        while prx.changed().await.is_ok() {
            let p = prx.borrow_and_update().clone();
            let phase = serde_json::to_value(p.zab_phase).unwrap();
            println!(
                "\nZAB progress {} {}",
                phase.as_str().unwrap_or("?"),
                p.last_committed_zxid
            );
        }
    });
    let ended = if spec.leader == spec.sid {
        let (wtx, wrx) = tokio::sync::mpsc::channel::<ClientWrite>(4096);
        std::thread::spawn(move || {
            for line in std::io::stdin().lock().lines() {
                let Ok(line) = line else { return };
                let value: Value = serde_json::from_str(&line).expect("value line");
                let (reply, rx) = tokio::sync::oneshot::channel();
                if wtx
                    .blocking_send(ClientWrite {
                        value: value.clone(),
                        reply,
                    })
                    .is_err()
                {
                    return;
                }
                std::thread::spawn(move || {
                    if let Ok(WriteOutcome::Committed(z)) = rx.blocking_recv() {
                        println!("\nZAB committed {z} {value}");
                    }
                });
            }
        });
        lead(cfg, store, ptx, wrx).await
    } else {
        follow(cfg, spec.leader, store, ptx).await
    };
    println!("\nZAB ended {ended:?}");
}

/// A peer process; dropping it SIGKILLs and reaps it.
struct Peer {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
}

impl Peer {
    fn start(spec: &Spec) -> Peer {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["--ignored", "--exact", peer_test(), "--nocapture"])
            .env("ZAB_PEER", serde_json::to_string(spec).unwrap())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                if let Some(i) = line.find("ZAB ") {
                    let _ = tx.send(line[i + 4..].to_string());
                }
            }
        });
        Peer {
            stdin: child.stdin.take(),
            child,
            lines,
        }
    }

    fn send(&mut self, v: &Value) {
        let s = self.stdin.as_mut().unwrap();
        writeln!(s, "{v}").unwrap();
        s.flush().unwrap();
    }

    /// Waits for a line matching `f`, collecting every `committed` line seen on the way.
    fn wait(&self, acked: &mut Vec<(u64, Value)>, what: &str, f: impl Fn(&str) -> bool) {
        let deadline = Instant::now() + WAIT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(l) => {
                    note_ack(&l, acked);
                    if f(&l) {
                        return;
                    }
                }
                Err(RecvTimeoutError::Timeout) => panic!("no {what} within {WAIT:?}"),
                Err(RecvTimeoutError::Disconnected) => panic!("peer exited before {what}"),
            }
        }
    }

    /// SIGKILL, then collect the acks it printed before dying.
    fn kill(mut self, acked: &mut Vec<(u64, Value)>) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        while let Ok(l) = self.lines.recv_timeout(Duration::from_secs(5)) {
            note_ack(&l, acked);
        }
    }

    /// Waits for the process to end on its own (a follower whose leader died).
    fn exits(mut self) {
        let deadline = Instant::now() + WAIT;
        while self.child.try_wait().unwrap().is_none() {
            assert!(
                Instant::now() < deadline,
                "peer did not end with its leader"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn note_ack(line: &str, acked: &mut Vec<(u64, Value)>) {
    if let Some(rest) = line.strip_prefix("committed ") {
        let (z, v) = rest.split_once(' ').unwrap();
        acked.push((z.parse().unwrap(), serde_json::from_str(v).unwrap()));
    }
}

fn is_broadcast(l: &str) -> bool {
    l.starts_with("progress broadcast")
}

struct Ensemble {
    tmp: tempfile::TempDir,
    voters: BTreeMap<u64, SocketAddr>,
    /// Highest epochs seen per node, to check they never go back.
    epochs: BTreeMap<u64, (u64, u64)>,
}

impl Ensemble {
    fn dir(&self, sid: u64) -> PathBuf {
        self.tmp.path().join(format!("n{sid}"))
    }

    fn start(&self, sid: u64, leader: u64) -> Peer {
        Peer::start(&Spec {
            sid,
            leader,
            dir: self.dir(sid),
            voters: self.voters.clone(),
        })
    }

    /// The vote FLE would elect among `sids`: highest (currentEpoch, last logged zxid, sid).
    /// Also checks that no node's epochs went back.
    fn best(&mut self, sids: &[u64]) -> u64 {
        let mut best = (0, 0, 0);
        for &s in sids {
            let (st, _) = Store::open(&self.dir(s)).unwrap();
            let now = (st.accepted_epoch(), st.current_epoch());
            let before = self.epochs.insert(s, now).unwrap_or((0, 0));
            assert!(
                now.0 >= before.0 && now.1 >= before.1,
                "n{s} epochs went back"
            );
            best = best.max((st.current_epoch(), st.last_logged_zxid(), s));
        }
        best.2
    }

    fn max_epoch(&self) -> u64 {
        self.epochs.values().map(|e| e.0).max().unwrap_or(0)
    }
}

fn values(range: std::ops::Range<u64>) -> Vec<Value> {
    range.map(|i| json!({ "w": i })).collect()
}

#[test]
fn acknowledged_writes_survive_kill_9_of_leader_and_of_everyone() {
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let voters = (1..=3)
        .map(|s| {
            let port = crate::support::free_ports(1)[0];
            (s, SocketAddr::from(([127, 0, 0, 1], port)))
        })
        .collect();
    let mut e = Ensemble {
        tmp,
        voters,
        epochs: BTreeMap::new(),
    };
    let mut acked: Vec<(u64, Value)> = Vec::new();

    // Round 1: n1 leads; 20 writes acked, 20 more in flight when it is killed.
    let mut n1 = e.start(1, 1);
    let n2 = e.start(2, 1);
    let n3 = e.start(3, 1);
    n1.wait(&mut acked, "broadcast", is_broadcast);
    for v in values(0..20) {
        n1.send(&v);
        n1.wait(&mut acked, "commit", |l| l.starts_with("committed"));
    }
    for v in values(20..40) {
        n1.send(&v);
    }
    n1.wait(&mut acked, "a commit in flight", |l| l.contains("\"w\":21"));
    n1.kill(&mut acked);
    n2.exits();
    n3.exits();
    let e1 = e.max_epoch();

    // Round 2: the most up-to-date of n2, n3 leads; n1 rejoins later; then everyone is killed.
    let _ = e.best(&[1]);
    let l2 = e.best(&[2, 3]);
    let f2 = 5 - l2;
    assert!(e.max_epoch() >= e1);
    let mut lead2 = e.start(l2, l2);
    let fol2 = e.start(f2, l2);
    lead2.wait(&mut acked, "broadcast", is_broadcast);
    for v in values(40..60) {
        lead2.send(&v);
    }
    lead2.wait(&mut acked, "commit of w59", |l| l.contains("\"w\":59"));
    let old = e.start(1, l2);
    old.wait(&mut Vec::new(), "n1 rejoining", is_broadcast);
    for v in values(60..80) {
        lead2.send(&v);
    }
    lead2.wait(&mut acked, "a commit in flight", |l| l.contains("\"w\":61"));
    lead2.kill(&mut acked);
    drop(fol2);
    drop(old);

    // Round 3: restart everything; the best leads; one more write committed everywhere.
    let l3 = e.best(&[1, 2, 3]);
    assert!(e.max_epoch() > e1, "round 2 must have made a new epoch");
    let e2 = e.max_epoch();
    let mut lead3 = e.start(l3, l3);
    let others: Vec<Peer> = [1, 2, 3]
        .into_iter()
        .filter(|s| *s != l3)
        .map(|s| e.start(s, l3))
        .collect();
    lead3.wait(&mut acked, "broadcast", is_broadcast);
    let last = json!({ "w": "final" });
    lead3.send(&last);
    lead3.wait(&mut acked, "the final commit", |l| l.contains("final"));
    let final_zxid = acked.last().unwrap().0;
    for p in &others {
        p.wait(
            &mut Vec::new(),
            "a follower committing the final write",
            |l| {
                l.starts_with("progress broadcast")
                    && l.rsplit(' ').next().and_then(|z| z.parse::<u64>().ok()) >= Some(final_zxid)
            },
        );
    }
    lead3.kill(&mut acked);
    drop(others);
    e.best(&[1, 2, 3]);
    assert!(e.max_epoch() > e2);

    // Every acknowledged write is in every log at its zxid, and the logs are identical.
    let logs: Vec<Vec<(u64, Value)>> = (1..=3)
        .map(|s| {
            let (st, _) = Store::open(&e.dir(s)).unwrap();
            st.txns()
                .iter()
                .map(|t| (t.zxid, t.value.clone()))
                .collect()
        })
        .collect();
    assert_eq!(logs[0], logs[1]);
    assert_eq!(logs[1], logs[2]);
    acked.sort_by_key(|a| a.0);
    acked.dedup();
    println!(
        "{} writes acknowledged, logs of {} txns, leaders n1 then n{l2} then n{l3}",
        acked.len(),
        logs[0].len()
    );
    assert!(
        acked.len() >= 43,
        "only {} writes acknowledged",
        acked.len()
    );
    for a in &acked {
        assert!(logs[0].contains(a), "acknowledged write {a:?} lost");
    }
    let committed = |p: &Path| Store::open(p).unwrap().0.last_committed_zxid();
    assert_eq!(committed(&e.dir(l3)), final_zxid);
}
