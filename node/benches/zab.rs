//! Zab write throughput and latency through the leader, in-process peers over loopback TCP,
//! every peer with its own data directory on the real disk and fsync on (`cargo bench --bench zab`).
//!
//! Prints, for 3 and 5 peers: sequential latency (one client: p50/p99), then throughput and
//! latency with 32 concurrent clients (group commit batches their fsyncs), then the time from
//! the leader's crash (every role dropped) to the first write committed by a new leader, with
//! roles handed out at once as FLE would choose them among the survivors (Zab recovery alone:
//! the election's share and the crash detection come with the node).
//!
//! Then the same through real `fle-node` processes (3 and 5) over their HTTP API: one client's
//! latency, 16 concurrent clients' throughput and latency, and the time from SIGKILL of the
//! leader to the first write committed by the new leader (crash detection + FLE + Zab
//! recovery). `cargo bench --bench zab -- processes` runs only this part.
#![allow(
    clippy::too_many_lines,
    reason = "tests and benches read as scripts, top to bottom"
)]

/// The tests' cluster starter (tests/it/support), borrowed whole: this bench uses part of it.
#[allow(dead_code)]
#[path = "../tests/it/support/mod.rs"]
mod node_support;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use fle_node::api::ZabPhase;
use fle_node::zab::store::lock;
use fle_node::zab::{
    follow, lead, ClientWrite, SharedStore, Store, WriteOutcome, ZabConfig, ZabProgress,
};
use serde_json::json;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;

struct Peer {
    store: SharedStore,
    progress: watch::Sender<ZabProgress>,
    role: Option<JoinHandle<anyhow::Result<String>>>,
}

struct Cluster {
    _tmp: tempfile::TempDir,
    voters: BTreeMap<u64, SocketAddr>,
    peers: BTreeMap<u64, Peer>,
}

impl Cluster {
    fn new(n: u64) -> Cluster {
        let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
        let voters = (1..=n)
            .map(|s| {
                let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
                (s, l.local_addr().unwrap())
            })
            .collect();
        let peers = (1..=n)
            .map(|s| {
                let (store, _) = Store::open_shared(&tmp.path().join(format!("n{s}"))).unwrap();
                let p = ZabProgress::from_store(&lock(&store), ZabPhase::Election, None);
                let (progress, _) = watch::channel(p);
                (
                    s,
                    Peer {
                        store,
                        progress,
                        role: None,
                    },
                )
            })
            .collect();
        Cluster {
            _tmp: tmp,
            voters,
            peers,
        }
    }

    fn cfg(&self, sid: u64) -> ZabConfig {
        ZabConfig::new(
            sid,
            self.voters.clone(),
            Default::default(),
            Duration::from_millis(200),
            20,
            10,
        )
    }

    /// FLE's choice among `members`: the highest (currentEpoch, last logged zxid, sid).
    fn best(&self, members: &[u64]) -> u64 {
        members
            .iter()
            .map(|s| {
                let st = lock(&self.peers[s].store);
                (st.current_epoch(), st.last_logged_zxid(), *s)
            })
            .max()
            .unwrap()
            .2
    }

    /// `leader` leads, the other `members` follow; returns the write queue.
    async fn establish(&mut self, leader: u64, members: &[u64]) -> mpsc::Sender<ClientWrite> {
        let (tx, rx) = mpsc::channel(4096);
        let cfg = self.cfg(leader);
        for p in self.peers.values() {
            let fresh = ZabProgress::from_store(&lock(&p.store), ZabPhase::Election, None);
            p.progress.send_replace(fresh);
        }
        let p = self.peers.get_mut(&leader).unwrap();
        let mut phase = p.progress.subscribe();
        p.role = Some(tokio::spawn(lead(
            cfg,
            p.store.clone(),
            p.progress.clone(),
            rx,
        )));
        let sids: Vec<u64> = members.iter().copied().filter(|s| *s != leader).collect();
        for s in sids {
            let cfg = self.cfg(s);
            let p = self.peers.get_mut(&s).unwrap();
            p.role = Some(tokio::spawn(follow(
                cfg,
                leader,
                p.store.clone(),
                p.progress.clone(),
            )));
        }
        tokio::time::timeout(
            Duration::from_secs(30),
            phase.wait_for(|p| p.zab_phase == ZabPhase::Broadcast),
        )
        .await
        .unwrap_or_else(|_| {
            let views: Vec<_> = self
                .peers
                .iter()
                .map(|(s, p)| (*s, p.progress.borrow().clone()))
                .collect();
            panic!("no broadcast within 30 s: {views:?}")
        })
        .unwrap();
        tx
    }

    async fn stop_all(&mut self) {
        for p in self.peers.values_mut() {
            if let Some(h) = p.role.take() {
                h.abort();
                let _ = h.await;
            }
        }
    }
}

async fn write(w: &mpsc::Sender<ClientWrite>, i: u64) -> Duration {
    let t = Instant::now();
    let (reply, rx) = oneshot::channel();
    w.send(ClientWrite {
        value: json!({ "client_value": i, "pad": "0123456789abcdef0123456789abcdef" }),
        reply,
    })
    .await
    .unwrap();
    match rx.await.unwrap() {
        WriteOutcome::Committed(_) => t.elapsed(),
        other => panic!("write {i}: {other:?}"),
    }
}

fn pct(sorted: &[Duration], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i].as_secs_f64() * 1e3
}

async fn run(w: &mpsc::Sender<ClientWrite>, clients: u64, per_client: u64) -> (f64, Vec<Duration>) {
    let t = Instant::now();
    let mut hs = Vec::new();
    for c in 0..clients {
        let w = w.clone();
        hs.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            for i in 0..per_client {
                lat.push(write(&w, c * per_client + i).await);
            }
            lat
        }));
    }
    let mut lat = Vec::new();
    for h in hs {
        lat.extend(h.await.unwrap());
    }
    let secs = t.elapsed().as_secs_f64();
    lat.sort();
    (lat.len() as f64 / secs, lat)
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    if !std::env::args().any(|a| a == "processes") {
        in_process().await;
    }
    tokio::task::spawn_blocking(processes).await.unwrap();
}

async fn in_process() {
    println!("zab bench: in-process peers, loopback TCP, fsync on, data under target/");
    for n in [3u64, 5] {
        let mut c = Cluster::new(n);
        let all: Vec<u64> = (1..=n).collect();
        let w = c.establish(1, &all).await;
        run(&w, 4, 25).await; // warm-up
        let (tput, lat) = run(&w, 1, 300).await;
        println!(
            "{n} peers, 1 client:   {tput:8.0} writes/s  p50 {:6.2} ms  p99 {:6.2} ms  ({} writes)",
            pct(&lat, 0.5),
            pct(&lat, 0.99),
            lat.len()
        );
        let (tput, lat) = run(&w, 32, 100).await;
        println!(
            "{n} peers, 32 clients: {tput:8.0} writes/s  p50 {:6.2} ms  p99 {:6.2} ms  ({} writes)",
            pct(&lat, 0.5),
            pct(&lat, 0.99),
            lat.len()
        );
        // Leader crash -> new leader (roles handed out at once) -> first committed write.
        // The crashed leader stays down for the takeover (and is back as a follower the round
        // after); the new leader is the one FLE would elect among the rest.
        let mut takeovers = Vec::new();
        let mut old = 1;
        for round in 0..5u64 {
            let t = Instant::now();
            c.stop_all().await;
            let members: Vec<u64> = all.iter().copied().filter(|s| *s != old).collect();
            let new = c.best(&members);
            let w = c.establish(new, &members).await;
            loop {
                let (reply, rx) = oneshot::channel();
                w.send(ClientWrite {
                    value: json!({ "takeover": round, "from": old }),
                    reply,
                })
                .await
                .unwrap();
                match rx.await.unwrap() {
                    WriteOutcome::Committed(_) => break,
                    WriteOutcome::Rejected(_) => tokio::task::yield_now().await,
                    other => panic!("takeover write: {other:?}"),
                }
            }
            takeovers.push(t.elapsed());
            old = new;
        }
        takeovers.sort();
        println!(
            "{n} peers, leader crash to first commit by the new leader (no election): p50 {:6.2} ms  max {:6.2} ms  (5 takeovers)",
            pct(&takeovers, 0.5),
            takeovers.last().unwrap().as_secs_f64() * 1e3
        );
        c.stop_all().await;
    }
}

/// The leader once every server is in broadcast under it.
fn settled(c: &node_support::Cluster, among: &[u64]) -> Option<u64> {
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

/// One acknowledged HTTP write (fresh values on refusal), timed from the first attempt.
fn http_write(c: &node_support::Cluster, to: &[u64], tag: &str) -> Duration {
    let t = Instant::now();
    for attempt in 0u64.. {
        let sid = to[attempt as usize % to.len()];
        let value =
            json!({ "v": format!("{tag}-{attempt}"), "pad": "0123456789abcdef0123456789abcdef" });
        if let Some((200, _)) = c.write(sid, value) {
            return t.elapsed();
        }
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "no write acknowledged within 60 s"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    unreachable!()
}

fn http_run(
    c: &node_support::Cluster,
    leader: u64,
    clients: u64,
    per_client: u64,
) -> (f64, Vec<Duration>) {
    let t = Instant::now();
    let mut lat: Vec<Duration> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..clients)
            .map(|k| {
                s.spawn(move || {
                    (0..per_client)
                        .map(|i| http_write(c, &[leader], &format!("c{k}-{i}")))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        hs.into_iter().flat_map(|h| h.join().unwrap()).collect()
    });
    let secs = t.elapsed().as_secs_f64();
    lat.sort();
    (lat.len() as f64 / secs, lat)
}

fn processes() {
    println!(
        "zab bench: real fle-node processes, HTTP /write to the leader, fsync on, data in /tmp"
    );
    let limit = Duration::from_secs(60);
    for n in [3u64, 5] {
        let mut c = node_support::Cluster::new(n);
        let all: Vec<u64> = (1..=n).collect();
        for &s in &all {
            c.start(s);
        }
        let leader = c.wait_for(limit, "a settled cluster", |c| settled(c, &all));
        http_run(&c, leader, 4, 25); // warm-up
        let (tput, lat) = http_run(&c, leader, 1, 300);
        println!(
            "{n} nodes, 1 client:   {tput:8.0} writes/s  p50 {:6.2} ms  p99 {:6.2} ms  ({} writes)",
            pct(&lat, 0.5),
            pct(&lat, 0.99),
            lat.len()
        );
        let (tput, lat) = http_run(&c, leader, 16, 100);
        println!(
            "{n} nodes, 16 clients: {tput:8.0} writes/s  p50 {:6.2} ms  p99 {:6.2} ms  ({} writes)",
            pct(&lat, 0.5),
            pct(&lat, 0.99),
            lat.len()
        );
        let mut takeovers = Vec::new();
        for round in 0..5 {
            let old = c.wait_for(limit, "a settled cluster", |c| settled(c, &all));
            let rest: Vec<u64> = all.iter().copied().filter(|&s| s != old).collect();
            let t = Instant::now();
            c.kill(old);
            // Any survivor: followers forward to the new leader once they know it.
            http_write(&c, &rest, &format!("takeover{round}"));
            takeovers.push(t.elapsed());
            c.start(old);
        }
        takeovers.sort();
        println!(
            "{n} nodes, leader SIGKILL to first write committed by the new leader: p50 {:6.1} ms  max {:6.1} ms  (5 kills)",
            pct(&takeovers, 0.5),
            takeovers.last().unwrap().as_secs_f64() * 1e3
        );
    }
}
