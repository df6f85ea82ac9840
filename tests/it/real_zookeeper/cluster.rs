//! A real 3-server Apache ZooKeeper ensemble driven through the `zookeeper` Target, each
//! server a JVM in its own network namespace: a leader is observed, SIGKILLed, a new one is
//! elected, the old one restarts and rejoins; acknowledged writes are in every server's final
//! read. Needs root (namespaces) and Debian's zookeeper package (installed when missing).

use crate::support::exclusive::{hold, Exclusive};
use fle_chaos::api::{NodeStatus, ServerState};
use fle_chaos::control::backend::local::{LocalCluster, NetMode};
use fle_chaos::control::backend::registry::Registry;
use fle_chaos::control::sut::zookeeper::{os_setup, ZooKeeper, ZooKeeperOptions};
use fle_chaos::control::sut::{Target, WriteOutcome};
use fle_chaos::control::Control;
use fle_chaos::history::view::quorum_leader_of as quorum_leader;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Tears the cluster down (JVMs, namespaces, bridge) however the test ends.
struct Teardown(Arc<LocalCluster>);

impl Drop for Teardown {
    fn drop(&mut self) {
        let report = self.0.teardown();
        if !report.errors.is_empty() {
            eprintln!("teardown left errors: {:?}", report.errors);
        }
    }
}

fn skip_reason() -> Option<String> {
    if !fle_chaos::control::is_root() {
        return Some("needs root (network namespaces); run as root, as CI does".into());
    }
    let mut say = |s: &str| eprintln!("setup: {s}");
    if let Err(e) = os_setup::ensure("java".as_ref(), &mut say) {
        return Some(format!(
            "no ZooKeeper/Java here and could not install: {e:#}"
        ));
    }
    None
}

fn run_id() -> String {
    use rand::Rng;
    // Interface names stay within 15 bytes: "flcv" + id + "n3".
    format!("z{:06x}", rand::thread_rng().gen_range(0..0xff_ffffu32))
}

async fn statuses(zk: &ZooKeeper, nodes: &[String]) -> HashMap<String, NodeStatus> {
    let mut out = HashMap::new();
    for n in nodes {
        if let Ok(s) = zk.status(n).await {
            out.insert(n.clone(), s);
        }
    }
    out
}

async fn wait_for_leader(
    zk: &ZooKeeper,
    nodes: &[String],
    all: usize,
    not: Option<u64>,
    deadline: Duration,
) -> (u64, u64, Duration) {
    let start = Instant::now();
    let mut last = HashMap::new();
    while start.elapsed() < deadline {
        last = statuses(zk, nodes).await;
        if let Some((sid, epoch)) = quorum_leader(last.values(), all) {
            if Some(sid) != not {
                return (sid, epoch, start.elapsed());
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!(
        "no quorum-backed leader (other than {not:?}) within {deadline:?}; last seen: {last:#?}"
    );
}

/// Writes `value` through `node`, retrying only certain failures (never applied).
async fn write_ok(zk: &ZooKeeper, node: &str, value: serde_json::Value) -> u64 {
    let start = Instant::now();
    loop {
        match zk.write(node, value.clone()).await {
            WriteOutcome::Ok { zxid } => return zxid,
            WriteOutcome::Fail { error, .. } if start.elapsed() < Duration::from_secs(30) => {
                eprintln!("write through {node} failed ({error}); retrying");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            other => panic!("write of {value} through {node}: {other:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zookeeper_leader_killed_new_one_elected_old_one_rejoins_writes_survive() {
    if let Some(why) = skip_reason() {
        crate::support::skip::skip("zookeeper_cluster", &why);
        return;
    }
    let _cores = hold(Exclusive::HeavyCluster);
    let dir = tempfile::Builder::new()
        .prefix("flc-zk-test")
        .tempdir()
        .unwrap();
    let nodes: Vec<String> = (1..=3).map(|i| format!("n{i}")).collect();
    let registry = Arc::new(Registry::create(&run_id(), dir.path()).unwrap());
    let cluster = Arc::new(
        LocalCluster::create(NetMode::Netns, nodes.clone(), dir.path(), registry).unwrap(),
    );
    let _teardown = Teardown(cluster.clone());
    let zk = ZooKeeper::new(cluster.clone(), ZooKeeperOptions::new(200, 10, 5)).unwrap();

    for n in &nodes {
        zk.setup(n).unwrap();
        zk.start(n).unwrap();
    }
    // JVM start-up on a shared 2-core machine: generous.
    let (leader, epoch, took) =
        wait_for_leader(&zk, &nodes, 3, None, Duration::from_secs(120)).await;
    eprintln!("cold start: n{leader} leads epoch {epoch} after {took:?}");
    assert!(epoch >= 1, "a leader's epoch starts at 1, saw {epoch}");

    let mut acked: Vec<(u64, serde_json::Value)> = Vec::new();
    let leader_node = format!("n{leader}");
    for i in 0..5 {
        let v = serde_json::json!({ "w": i });
        acked.push((write_ok(&zk, &leader_node, v.clone()).await, v));
    }

    let pid = zk.kill(&leader_node).unwrap();
    assert!(pid.is_some(), "the leader's JVM was running");
    assert!(!zk.is_running(&leader_node));
    let killed_at = Instant::now();

    let survivors: Vec<String> = nodes
        .iter()
        .filter(|n| **n != leader_node)
        .cloned()
        .collect();
    let (new_leader, new_epoch, _) =
        wait_for_leader(&zk, &survivors, 3, Some(leader), Duration::from_secs(60)).await;
    eprintln!(
        "after SIGKILL of n{leader}: n{new_leader} leads epoch {new_epoch} after {:?}",
        killed_at.elapsed()
    );
    assert!(new_epoch > epoch, "epoch must grow: {epoch} -> {new_epoch}");
    // By now the client has seen its session's server go: a write through the dead server is
    // certainly not sent, so it fails (right after the kill it could only be unknown).
    match zk
        .write(&leader_node, serde_json::json!({"w": "dead"}))
        .await
    {
        WriteOutcome::Fail { .. } => {}
        other => panic!("a write through a killed server must fail, got {other:?}"),
    }

    let new_leader_node = format!("n{new_leader}");
    for i in 5..10 {
        let v = serde_json::json!({ "w": i });
        acked.push((write_ok(&zk, &new_leader_node, v.clone()).await, v));
    }

    zk.start(&leader_node).unwrap();
    // Read at once, as the controller's final phase does right after its final heal: the
    // restarted server's read must wait for it to serve rather than count it unreadable.
    // Every server's final read holds every acknowledged write, in zxid order, once.
    for n in &nodes {
        let log = zk
            .read_log(n)
            .await
            .unwrap_or_else(|e| panic!("final read of {n}: {e:?}"));
        let got: Vec<(u64, serde_json::Value)> = log
            .entries
            .iter()
            .map(|e| (e.zxid, e.value.clone()))
            .collect();
        assert_eq!(got, acked, "final read of {n}");
        assert!(
            got.windows(2).all(|w| w[0].0 < w[1].0),
            "zxids increase on {n}"
        );
    }
    let start = Instant::now();
    loop {
        if let Ok(s) = zk.status(&leader_node).await {
            if s.state == ServerState::Following && s.leader == Some(new_leader) {
                assert_eq!(
                    s.peer_epoch, new_epoch,
                    "rejoined in the new leader's epoch"
                );
                break;
            }
        }
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "n{leader} did not rejoin under n{new_leader}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    zk.close_sessions().await;

    // ZooKeeper's own logs land in the run folder (slf4j-simple on the classpath).
    for n in &nodes {
        let log = std::fs::read_to_string(&zk.log_paths(n)[0]).unwrap();
        assert!(
            log.contains("QuorumPeer"),
            "{n}'s zookeeper.log has ZooKeeper's lines"
        );
    }
}
