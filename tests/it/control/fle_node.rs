//! The fle-node `Target` and the observers on a real 3-node cluster in namespaces: status,
//! writes through the leader, log reads, kill/start, pause/resume; and a paused node slows
//! only its own observer.

use crate::support::run::{fle_node, leftovers, root_or_skip};
use fle_chaos::api::ServerState;
use fle_chaos::control::backend::local::{LocalCluster, NetMode};
use fle_chaos::control::backend::registry::Registry;
use fle_chaos::control::sut::fle_node::{FleNode, FleNodeOptions};
use fle_chaos::control::sut::{Target, WriteOutcome};
use fle_chaos::control::Control;
use fle_chaos::history::recorder::Recorder;
use fle_chaos::history::store::read_history;
use fle_chaos::history::{EventType, F};
use fle_chaos::workload::observe::{observe, Observations};
use std::sync::Arc;
use std::time::{Duration, Instant};

async fn poll<T>(timeout: Duration, mut f: impl AsyncFnMut() -> Option<T>) -> Option<T> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f().await {
            return Some(v);
        }
        if Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Tears the cluster down when dropped, also when an assertion fails.
struct Down(Arc<dyn Control>);

impl Drop for Down {
    fn drop(&mut self) {
        self.0.teardown();
    }
}

/// A started 3-node fle-node cluster in namespaces, and the node that leads it.
async fn cluster(
    dir: &std::path::Path,
) -> (Arc<dyn Control>, Arc<dyn Target>, Vec<String>, String) {
    let run_id = format!("{:06x}", rand::random::<u32>() & 0xff_ffff);
    let registry = Arc::new(Registry::create(&run_id, dir).unwrap());
    let nodes: Vec<String> = (1..=3).map(|i| format!("n{i}")).collect();
    let control: Arc<dyn Control> =
        Arc::new(LocalCluster::create(NetMode::Netns, nodes.clone(), dir, registry).unwrap());
    let down = Down(control.clone());
    let target: Arc<dyn Target> = Arc::new(
        FleNode::new(
            control.clone(),
            FleNodeOptions {
                binary: fle_node().into(),
                tick_ms: 200,
                init_limit: 10,
                sync_limit: 5,
                faketime: true,
                fake_monotonic: false,
                bug: None,
                finalize_wait_ms: None,
                power_loss: false,
                observers: Default::default(),
                status_timeout: Duration::from_millis(500),
                write_timeout: Duration::from_secs(5),
            },
        )
        .unwrap(),
    );
    for n in &nodes {
        target.setup(n).unwrap();
        assert_eq!(
            std::fs::read_to_string(target.clock_file(n).unwrap()).unwrap(),
            "+0\n"
        );
        target.start(n).unwrap();
    }

    // A leader emerges that everybody follows.
    let leader = poll(Duration::from_secs(60), async || {
        let mut leader = None;
        for n in &nodes {
            let s = target.status(n).await.ok()?;
            if s.state == ServerState::Leading {
                leader = Some(n.clone());
            }
            s.leader?;
        }
        leader
    })
    .await
    .expect("no leader within 60 s");

    std::mem::forget(down);
    (control, target, nodes, leader)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fle_node_target_and_observers_on_a_real_cluster() {
    if !root_or_skip("fle_node_target_and_observers_on_a_real_cluster") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (control, target, nodes, _leader) = cluster(dir.path()).await;
    let _down = Down(control.clone());
    // Observers while one node is paused: the others keep their rate.
    let recorder = Arc::new(Recorder::create(&dir.path().join("h.jsonl"), Instant::now()).unwrap());
    let obs = Arc::new(Observations::new(nodes.clone()));
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let paused = nodes[0].clone();
    assert!(target.pause(&paused).unwrap().is_some());
    let mut tasks = tokio::task::JoinSet::new();
    for n in &nodes {
        tasks.spawn(observe(
            n.clone(),
            target.clone(),
            recorder.clone(),
            obs.clone(),
            Duration::from_millis(20),
            stopped.clone(),
        ));
    }
    tokio::time::sleep(Duration::from_secs(3)).await; // the observation window itself
    stop.send(true).unwrap();
    while tasks.join_next().await.is_some() {}
    target.resume(&paused).unwrap();
    let history = read_history(&dir.path().join("h.jsonl")).unwrap();
    let count = |n: &str, k: EventType| {
        history
            .iter()
            .filter(|e| e.f == F::Status && e.node.as_deref() == Some(n) && e.kind == k)
            .count()
    };
    let paused_reads = count(&paused, EventType::Ok) + count(&paused, EventType::Info);
    assert_eq!(count(&paused, EventType::Ok), 0, "a paused node answered");
    assert!(
        count(&paused, EventType::Info) >= 1,
        "timeouts are recorded as info"
    );
    for n in nodes.iter().filter(|n| **n != paused) {
        let ok = count(n, EventType::Ok);
        assert!(
            ok > 5 * paused_reads.max(1),
            "{n}: {ok} reads vs {paused_reads} of the paused node: it was slowed down"
        );
    }

    // Kill and restart on the same data.
    let pid = target.kill(&nodes[1]).unwrap().expect("was running");
    assert!(!target.is_running(&nodes[1]));
    let pid2 = target.start(&nodes[1]).unwrap();
    assert_ne!(pid, pid2);
    assert!(poll(Duration::from_secs(60), async || target
        .status(&nodes[1])
        .await
        .ok())
    .await
    .is_some());

    let recorded = control.registry().resources();
    control.teardown();
    assert_eq!(leftovers(&recorded), Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_through_the_leader_commit_and_reach_the_logs() {
    if !root_or_skip("writes_through_the_leader_commit_and_reach_the_logs") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (control, target, nodes, leader) = cluster(dir.path()).await;
    let _down = Down(control.clone());
    // A write through the leader commits and shows up in the logs.
    let zxid = poll(Duration::from_secs(30), async || {
        match target.write(&leader, serde_json::json!(4242)).await {
            WriteOutcome::Ok { zxid } => Some(zxid),
            _ => None,
        }
    })
    .await
    .expect("no write committed");
    let follower = nodes.iter().find(|n| **n != leader).unwrap();
    // A follower forwards to the leader, as ZooKeeper's do (zoo.cfg names each HTTP address).
    match target.write(follower, serde_json::json!(1)).await {
        WriteOutcome::Ok { zxid: forwarded } => {
            assert!(forwarded > zxid, "{forwarded} after {zxid}")
        }
        other => panic!("a write through a follower must be forwarded and commit: {other:?}"),
    }
    let log = poll(Duration::from_secs(30), async || {
        let log = target.read_log(follower).await.ok()?;
        log.entries.iter().any(|e| e.zxid == zxid).then_some(log)
    })
    .await
    .expect("the committed write never reached a follower's log");
    assert!(log
        .entries
        .iter()
        .any(|e| e.value == serde_json::json!(4242)));
}
