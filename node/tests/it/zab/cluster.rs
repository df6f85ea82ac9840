//! Zab's shells for real: several `lead`/`follow` tasks in one process, talking over loopback TCP
//! on free ports, each with its own data directory on disk (real fsync). Roles are assigned by
//! hand here (the election is another module); the process-level tests come with the node.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use fle_node::api::{make_zxid, ZabPhase};
use fle_node::txnlog::{Txn, TxnLog};
use fle_node::zab::store::lock;
use fle_node::zab::{
    follow, lead, ClientWrite, SharedStore, Store, SyncMode, WriteOutcome, ZabConfig, ZabProgress,
};
use serde_json::json;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;

const DEADLINE: Duration = Duration::from_secs(30);

struct Node {
    dir: PathBuf,
    store: SharedStore,
    progress: watch::Receiver<ZabProgress>,
    progress_tx: watch::Sender<ZabProgress>,
    role: Option<JoinHandle<anyhow::Result<String>>>,
}

struct Cluster {
    _tmp: tempfile::TempDir,
    voters: BTreeMap<u64, SocketAddr>,
    nodes: BTreeMap<u64, Node>,
}

/// A free loopback port no other test of this binary was handed (`support::free_ports`).
fn free_addr() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], crate::support::free_ports(1)[0]))
}

impl Cluster {
    fn new(n: u64) -> Cluster {
        // Under target/, on the real disk: /tmp may be tmpfs, where fsync proves nothing.
        let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
        let voters: BTreeMap<u64, SocketAddr> = (1..=n).map(|s| (s, free_addr())).collect();
        let mut c = Cluster {
            _tmp: tmp,
            voters,
            nodes: BTreeMap::new(),
        };
        for sid in 1..=n {
            let dir = c._tmp.path().join(format!("n{sid}"));
            c.open(sid, dir);
        }
        c
    }

    fn open(&mut self, sid: u64, dir: PathBuf) {
        let (store, repair) = Store::open_shared(&dir).unwrap();
        assert!(repair.is_none(), "{repair:?}");
        let (progress_tx, progress) = watch::channel(ZabProgress::from_store(
            &lock(&store),
            ZabPhase::Election,
            None,
        ));
        self.nodes.insert(
            sid,
            Node {
                dir,
                store,
                progress,
                progress_tx,
                role: None,
            },
        );
    }

    fn cfg(&self, sid: u64) -> ZabConfig {
        ZabConfig::new(
            sid,
            self.voters.clone(),
            Default::default(),
            Duration::from_millis(100),
            30,
            10,
        )
    }

    fn lead(&mut self, sid: u64) -> mpsc::Sender<ClientWrite> {
        let (tx, rx) = mpsc::channel(1024);
        let cfg = self.cfg(sid);
        let n = self.nodes.get_mut(&sid).unwrap();
        n.role = Some(tokio::spawn(lead(
            cfg,
            n.store.clone(),
            n.progress_tx.clone(),
            rx,
        )));
        tx
    }

    fn follow(&mut self, sid: u64, leader: u64) {
        let cfg = self.cfg(sid);
        let n = self.nodes.get_mut(&sid).unwrap();
        n.role = Some(tokio::spawn(follow(
            cfg,
            leader,
            n.store.clone(),
            n.progress_tx.clone(),
        )));
    }

    /// Ends a role as a crash would: its task is dropped, its sockets close.
    async fn stop(&mut self, sid: u64) {
        if let Some(h) = self.nodes.get_mut(&sid).unwrap().role.take() {
            h.abort();
            let _ = h.await;
        }
    }

    fn store(&self, sid: u64) -> &SharedStore {
        &self.nodes[&sid].store
    }

    fn txns(&self, sid: u64) -> Vec<Txn> {
        lock(self.store(sid)).txns().to_vec()
    }

    fn progress(&self, sid: u64) -> ZabProgress {
        self.nodes[&sid].progress.borrow().clone()
    }

    async fn wait_phase(&self, sid: u64, phase: ZabPhase) {
        let mut rx = self.nodes[&sid].progress.clone();
        let r = tokio::time::timeout(DEADLINE, rx.wait_for(|p| p.zab_phase == phase)).await;
        assert!(
            r.is_ok(),
            "n{sid} did not reach {phase:?}: {:?}",
            self.progress(sid)
        );
    }

    /// Polls until every listed node holds exactly `sid`'s log, all of it committed.
    async fn wait_same_log(&self, leader: u64, sids: &[u64]) {
        let deadline = Instant::now() + DEADLINE;
        loop {
            let want = self.txns(leader);
            let ok = sids.iter().all(|s| {
                let st = lock(self.store(*s));
                st.txns() == want.as_slice()
                    && st.last_committed_zxid() == want.last().map_or(0, |t| t.zxid)
            });
            if ok {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "logs did not converge on n{leader}'s: {:?}",
                sids.iter()
                    .map(|s| (s, self.progress(*s)))
                    .collect::<Vec<_>>()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for n in self.nodes.values_mut() {
            if let Some(h) = n.role.take() {
                h.abort();
            }
        }
    }
}

async fn write(w: &mpsc::Sender<ClientWrite>, value: serde_json::Value) -> WriteOutcome {
    let (reply, rx) = oneshot::channel();
    w.send(ClientWrite { value, reply }).await.unwrap();
    tokio::time::timeout(DEADLINE, rx)
        .await
        .expect("no answer to a write")
        .expect("reply dropped")
}

async fn write_ok(w: &mpsc::Sender<ClientWrite>, value: serde_json::Value) -> u64 {
    match write(w, value.clone()).await {
        WriteOutcome::Committed(z) => z,
        other => panic!("write {value} not committed: {other:?}"),
    }
}

/// Retries a write while the leader is still establishing its epoch (Rejected).
async fn write_when_ready(w: &mpsc::Sender<ClientWrite>, value: serde_json::Value) -> u64 {
    let deadline = Instant::now() + DEADLINE;
    loop {
        match write(w, value.clone()).await {
            WriteOutcome::Committed(z) => return z,
            WriteOutcome::Rejected(_) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(20)).await
            }
            other => panic!("write {value} not committed: {other:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_commit_in_order_and_are_in_every_store() {
    let mut c = Cluster::new(3);
    let w = c.lead(1);
    c.follow(2, 1);
    c.follow(3, 1);
    c.wait_phase(1, ZabPhase::Broadcast).await;
    let first = write_when_ready(&w, json!(0)).await;
    assert_eq!(first, make_zxid(1, 1));
    // Concurrent writes: each answered with its own zxid, all in order.
    let mut handles = Vec::new();
    for i in 1..40 {
        let w = w.clone();
        handles.push(tokio::spawn(async move { write_ok(&w, json!(i)).await }));
    }
    let mut zxids = vec![first];
    for h in handles {
        zxids.push(h.await.unwrap());
    }
    zxids.sort();
    zxids.dedup();
    assert_eq!(zxids.len(), 40);
    assert_eq!(*zxids.last().unwrap(), make_zxid(1, 40));
    c.wait_same_log(1, &[2, 3]).await;
    for sid in 1..=3 {
        let s = lock(c.store(sid));
        assert_eq!((s.accepted_epoch(), s.current_epoch()), (1, 1), "n{sid}");
        assert_eq!(s.committed_from(make_zxid(1, 31)).len(), 10);
    }
    // What the stores hold is on disk: reopen a copy of one.
    let reopened = TxnLog::open(&c.nodes[&3].dir.join("txnlog")).unwrap().0;
    assert_eq!(reopened.txns(), c.txns(1).as_slice());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lagging_follower_catches_up_with_diff() {
    let mut c = Cluster::new(3);
    let w = c.lead(1);
    c.follow(2, 1);
    c.follow(3, 1);
    c.wait_phase(3, ZabPhase::Broadcast).await;
    for i in 0..5 {
        write_when_ready(&w, json!(i)).await;
    }
    c.wait_same_log(1, &[2, 3]).await;
    c.stop(3).await;
    for i in 5..25 {
        write_ok(&w, json!(i)).await;
    }
    assert_eq!(c.txns(3).len(), 5);
    c.follow(3, 1);
    c.wait_same_log(1, &[2, 3]).await;
    assert_eq!(c.progress(3).sync_mode, Some(SyncMode::Diff));
    assert_eq!(c.txns(3).len(), 25);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follower_without_history_gets_snap() {
    let mut c = Cluster::new(3);
    let w = c.lead(1);
    c.follow(2, 1);
    for i in 0..10 {
        write_when_ready(&w, json!(i)).await;
    }
    c.follow(3, 1);
    c.wait_same_log(1, &[2, 3]).await;
    assert_eq!(c.progress(3).sync_mode, Some(SyncMode::Snap));
}

/// Seeds the logs of an epoch-1 history where n3 logged a txn nobody else got.
fn seed(c: &Cluster, sid: u64, counters: &[u64], committed: u64) {
    let mut s = lock(c.store(sid));
    s.set_accepted_epoch(1).unwrap();
    s.set_current_epoch(1).unwrap();
    let txns: Vec<Txn> = counters
        .iter()
        .map(|&k| Txn {
            zxid: make_zxid(1, k),
            value: json!(format!("e1-{k}")),
        })
        .collect();
    s.log_mut().append(&txns).unwrap();
    s.log_mut().commit(committed).unwrap();
    s.log().sync().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn divergent_uncommitted_txn_is_truncated() {
    let mut c = Cluster::new(3);
    seed(&c, 1, &[1, 2], make_zxid(1, 1));
    seed(&c, 2, &[1, 2], make_zxid(1, 1));
    seed(&c, 3, &[1, 2, 3], make_zxid(1, 2));
    let w = c.lead(1);
    c.follow(2, 1);
    let z = write_when_ready(&w, json!("e2-1")).await;
    assert_eq!(z, make_zxid(2, 1));
    write_ok(&w, json!("e2-2")).await;
    c.follow(3, 1);
    c.wait_same_log(1, &[2, 3]).await;
    assert_eq!(c.progress(3).sync_mode, Some(SyncMode::Trunc));
    let zxids: Vec<u64> = c.txns(3).iter().map(|t| t.zxid).collect();
    assert_eq!(
        zxids,
        vec![
            make_zxid(1, 1),
            make_zxid(1, 2),
            make_zxid(2, 1),
            make_zxid(2, 2)
        ]
    );
    assert_eq!(lock(c.store(3)).current_epoch(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_leader_keeps_every_committed_write_and_raises_the_epoch() {
    let mut c = Cluster::new(3);
    let w = c.lead(1);
    c.follow(2, 1);
    c.follow(3, 1);
    let mut acked = Vec::new();
    for i in 0..10 {
        write_when_ready(&w, json!(i)).await;
        acked.push(json!(i));
    }
    // The leader "crashes"; its followers notice the closed connection and end.
    c.stop(1).await;
    for sid in [2, 3] {
        let h = c.nodes.get_mut(&sid).unwrap().role.take().unwrap();
        let why = tokio::time::timeout(DEADLINE, h).await.unwrap().unwrap();
        assert!(why.unwrap().contains("connection to leader 1 ended"));
    }
    // n2 leads epoch 2 with n3; every acknowledged write is there.
    let w2 = c.lead(2);
    c.follow(3, 2);
    for i in 10..15 {
        let z = write_when_ready(&w2, json!(i)).await;
        assert_eq!(fle_node::api::epoch_of(z), 2);
        acked.push(json!(i));
    }
    // The old leader comes back as a follower.
    c.follow(1, 2);
    c.wait_same_log(2, &[1, 3]).await;
    let values: Vec<_> = c.txns(1).into_iter().map(|t| t.value).collect();
    assert_eq!(values, acked);
    for sid in 1..=3 {
        let s = lock(c.store(sid));
        assert_eq!((s.accepted_epoch(), s.current_epoch()), (2, 2), "n{sid}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_steps_down_and_closes_its_port_without_a_quorum() {
    let mut c = Cluster::new(3);
    let w = c.lead(1);
    c.follow(2, 1);
    write_when_ready(&w, json!(1)).await;
    c.stop(2).await;
    // syncLimit is 10 ticks of 100 ms: the leader gives up, and pending writes learn so.
    let outcome = write(&w, json!(2)).await;
    assert!(
        matches!(outcome, WriteOutcome::Unknown(_)),
        "a write without quorum must be unknown: {outcome:?}"
    );
    let h = c.nodes.get_mut(&1).unwrap().role.take().unwrap();
    let why = tokio::time::timeout(DEADLINE, h)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(why.contains("heard within syncLimit"), "{why}");
    assert_eq!(c.progress(1).zab_phase, ZabPhase::Election);
    // The quorum port is closed: nobody listens there any more.
    assert!(std::net::TcpStream::connect(c.voters[&1]).is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_on_the_quorum_port_closes_only_that_connection() {
    use tokio::io::AsyncWriteExt;
    let mut c = Cluster::new(3);
    let w = c.lead(1);
    c.follow(2, 1);
    write_when_ready(&w, json!(1)).await;
    let junk: Vec<Vec<u8>> = vec![
        vec![0xff; 64],
        vec![0, 0, 0, 0],
        vec![0, 0, 0, 2, 99, 1],
        // A valid frame that is not FOLLOWERINFO, and a FOLLOWERINFO of an unknown sid.
        fle_node::zab::messages::Msg::Ping.to_frame(),
        fle_node::zab::messages::Msg::FollowerInfo {
            sid: 77,
            accepted_epoch: 0,
            last_zxid: 0,
        }
        .to_frame(),
    ];
    for bytes in junk {
        let mut s = tokio::net::TcpStream::connect(c.voters[&1]).await.unwrap();
        s.write_all(&bytes).await.unwrap();
        // The leader closes it: the read sees EOF (or a reset).
        let mut b = [0u8; 16];
        let r = tokio::time::timeout(DEADLINE, tokio::io::AsyncReadExt::read(&mut s, &mut b))
            .await
            .expect("leader kept a garbage connection open");
        assert!(matches!(r, Ok(0) | Err(_)), "{r:?}");
    }
    write_ok(&w, json!(2)).await;
    c.follow(3, 1);
    c.wait_same_log(1, &[2, 3]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corrupt_tail_is_cut_on_open_and_the_node_catches_up() {
    let mut c = Cluster::new(3);
    let w = c.lead(1);
    c.follow(2, 1);
    c.follow(3, 1);
    for i in 0..8 {
        write_when_ready(&w, json!(i)).await;
    }
    c.wait_same_log(1, &[2, 3]).await;
    c.stop(3).await;
    let dir = c.nodes[&3].dir.clone();
    c.nodes.remove(&3);
    // Tear the end, as a crash mid-write would. The file ends with the last txn (18 bytes) and
    // up to two commit records (17 bytes each): 40 bytes always tear into the last txn.
    let path = dir.join("txnlog");
    let len = std::fs::metadata(&path).unwrap().len();
    let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    f.set_len(len - 40).unwrap();
    drop(f);
    let (store, repair) = Store::open(&dir).unwrap();
    let repair = repair.expect("the torn tail must be reported");
    assert!(repair
        .to_string()
        .contains("truncated a torn or corrupt tail"));
    assert!(store.txns().len() < 8);
    drop(store);
    // Reopened clean, it rejoins and gets back what it lost.
    let (store, again) = Store::open(&dir).unwrap();
    assert!(again.is_none());
    drop(store);
    c.open(3, dir);
    c.follow(3, 1);
    write_ok(&w, json!(8)).await;
    c.wait_same_log(1, &[2, 3]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn old_leader_loses_exactly_its_uncommitted_proposal() {
    let mut c = Cluster::new(3);
    let w = c.lead(1);
    c.follow(2, 1);
    c.follow(3, 1);
    for i in 0..5 {
        write_when_ready(&w, json!(i)).await;
    }
    c.wait_same_log(1, &[2, 3]).await;
    // Both followers vanish; the leader logs one more proposal that nobody else gets.
    c.stop(2).await;
    c.stop(3).await;
    let lost = write(&w, json!("never committed")).await;
    assert!(matches!(lost, WriteOutcome::Unknown(_)), "{lost:?}");
    let h = c.nodes.get_mut(&1).unwrap().role.take().unwrap();
    tokio::time::timeout(DEADLINE, h)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(c.txns(1).len(), 6);
    assert_eq!(c.txns(2).len(), 5);
    // n2 and n3 form epoch 2 and commit new txns; n1 rejoins.
    let w2 = c.lead(2);
    c.follow(3, 2);
    for i in 5..8 {
        write_when_ready(&w2, json!(i)).await;
    }
    c.follow(1, 2);
    c.wait_same_log(2, &[1, 3]).await;
    assert_eq!(c.progress(1).sync_mode, Some(SyncMode::Trunc));
    let values: Vec<_> = c.txns(1).into_iter().map(|t| t.value).collect();
    assert_eq!(values, (0..8).map(|i| json!(i)).collect::<Vec<_>>());
    let s = lock(c.store(1));
    assert_eq!((s.accepted_epoch(), s.current_epoch()), (2, 2));
}

/// A fake leader on n1's quorum port: one that never speaks, one that speaks garbage.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follower_ends_on_a_silent_or_garbage_speaking_leader() {
    use fle_node::zab::messages::{decode_frame, Msg};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut c = Cluster::new(3);
    let fake = tokio::net::TcpListener::bind(c.voters[&1]).await.unwrap();
    for (sid, garbage) in [(2u64, None), (3u64, Some(vec![0u8, 0, 0, 1, 200]))] {
        let started = Instant::now();
        c.follow(sid, 1);
        let (mut s, from) = tokio::time::timeout(DEADLINE, fake.accept())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(from.ip(), c.voters[&sid].ip(), "dials from its own address");
        let mut buf = vec![0u8; 64];
        let n = s.read(&mut buf).await.unwrap();
        let (msg, _) = decode_frame(&buf[..n]).unwrap().unwrap();
        assert!(matches!(msg, Msg::FollowerInfo { sid: s, .. } if s == sid));
        if let Some(g) = &garbage {
            s.write_all(g).await.unwrap();
        }
        let h = c.nodes.get_mut(&sid).unwrap().role.take().unwrap();
        let why = tokio::time::timeout(DEADLINE, h)
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        match garbage {
            // initLimit is 30 ticks of 100 ms before UPTODATE.
            None => {
                assert!(why.contains("silent"), "{why}");
                assert!(started.elapsed() >= Duration::from_millis(3000));
            }
            Some(_) => assert!(why.contains("bad bytes"), "{why}"),
        }
        assert_eq!(c.progress(sid).zab_phase, ZabPhase::Election);
    }
}

/// A server that keeps its quorum port itself hands the leader what it accepts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_can_take_connections_the_server_accepts() {
    let mut c = Cluster::new(3);
    let port = tokio::net::TcpListener::bind(c.voters[&1]).await.unwrap();
    let (conn_tx, mut conn_rx) = mpsc::channel(16);
    let acceptor = tokio::spawn(async move {
        while let Ok((s, _)) = port.accept().await {
            if conn_tx.send(s).await.is_err() {
                return;
            }
        }
    });
    let (w, rx) = mpsc::channel(16);
    let cfg = c.cfg(1);
    let n = &c.nodes[&1];
    let (store, progress) = (n.store.clone(), n.progress_tx.clone());
    let leader = tokio::spawn(async move {
        fle_node::zab::lead_accepting(cfg, store, progress, rx, &mut conn_rx).await
    });
    c.follow(2, 1);
    c.follow(3, 1);
    let z = write_when_ready(&w, json!("via the server's port")).await;
    assert_eq!(WriteOutcome::Committed(z).http().0, 200);
    c.wait_same_log(1, &[2, 3]).await;
    leader.abort();
    acceptor.abort();
}

/// A follower that keeps the leader company (answers pings) but never acknowledges a proposal:
/// the write cannot commit, and the client learns the outcome is unknown, not a failure.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn write_without_a_quorum_of_acks_times_out_as_unknown() {
    use fle_node::zab::messages::{decode_frame, Msg};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let c = Cluster::new(3);
    let (w, rx) = mpsc::channel(16);
    let mut cfg = c.cfg(1);
    cfg.write_timeout = Duration::from_millis(500);
    let n = &c.nodes[&1];
    let leader = tokio::spawn(lead(cfg, n.store.clone(), n.progress_tx.clone(), rx));
    let addr = c.voters[&1];
    let fake = tokio::spawn(async move {
        let mut s = loop {
            match tokio::net::TcpStream::connect(addr).await {
                Ok(s) => break s,
                Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
            }
        };
        let hello = Msg::FollowerInfo {
            sid: 2,
            accepted_epoch: 0,
            last_zxid: 0,
        };
        s.write_all(&hello.to_frame()).await.unwrap();
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        let mut proposals = 0;
        loop {
            let n = s.read(&mut chunk).await.unwrap();
            if n == 0 {
                return proposals;
            }
            buf.extend_from_slice(&chunk[..n]);
            while let Some((m, used)) = decode_frame(&buf).unwrap() {
                buf.drain(..used);
                let reply = match m {
                    Msg::LeaderInfo { .. } => Some(Msg::AckEpoch {
                        current_epoch: 0,
                        last_zxid: 0,
                    }),
                    Msg::NewLeader { zxid } => Some(Msg::Ack { zxid }),
                    Msg::Ping => Some(Msg::Ping),
                    Msg::Proposal { .. } => {
                        proposals += 1;
                        None
                    }
                    _ => None,
                };
                if let Some(r) = reply {
                    s.write_all(&r.to_frame()).await.unwrap();
                }
            }
        }
    });
    c.wait_phase(1, ZabPhase::Broadcast).await;
    let started = Instant::now();
    let outcome = write(&w, json!("stuck")).await;
    assert!(matches!(outcome, WriteOutcome::Unknown(_)), "{outcome:?}");
    assert_eq!(outcome.http().0, 504);
    assert!(started.elapsed() >= Duration::from_millis(500));
    // Still leading (the follower answers pings), and the txn is logged but not committed.
    assert!(!leader.is_finished());
    assert_eq!(c.txns(1).len(), 1);
    assert_eq!(lock(c.store(1)).last_committed_zxid(), 0);
    leader.abort();
    assert_eq!(fake.await.unwrap(), 1, "the fake follower saw the proposal");
}
