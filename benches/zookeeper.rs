//! Figures for real Apache ZooKeeper under the `zookeeper` Target: cold start to a stable
//! (quorum-backed) leader, time from a leader SIGKILL / SIGSTOP to a new quorum-backed
//! leader, the rejoin time of the old leader, RSS per server, and the cost of one status
//! read. Needs root (namespaces) and the zookeeper package.
//!
//! `cargo bench --bench zookeeper` (env: FLC_ZK_REPS=5, FLC_ZK_SIZES=3,5, FLC_ZK_TICK_MS=200).

use fle_chaos::api::NodeStatus;
use fle_chaos::control::local::{LocalCluster, NetMode};
use fle_chaos::control::registry::Registry;
use fle_chaos::control::target::Target;
use fle_chaos::control::zookeeper::observe::quorum_leader;
use fle_chaos::control::zookeeper::{os_setup, ZooKeeper, ZooKeeperOptions};
use fle_chaos::control::Control;
use std::sync::Arc;
use std::time::{Duration, Instant};

struct Teardown(Arc<LocalCluster>);

impl Drop for Teardown {
    fn drop(&mut self) {
        let _ = self.0.teardown();
    }
}

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

async fn all_statuses(zk: &ZooKeeper, nodes: &[String]) -> Vec<NodeStatus> {
    let mut out = Vec::new();
    for n in nodes {
        if let Ok(s) = zk.status(n).await {
            out.push(s);
        }
    }
    out
}

/// Time until a quorum-backed leader other than `not` exists, polled at ~50 Hz.
async fn until_leader(
    zk: &ZooKeeper,
    nodes: &[String],
    size: usize,
    not: Option<u64>,
) -> Option<(u64, u64, Duration)> {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(120) {
        let seen = all_statuses(zk, nodes).await;
        if let Some((sid, epoch)) = quorum_leader(&seen, size) {
            if Some(sid) != not {
                return Some((sid, epoch, start.elapsed()));
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    None
}

async fn until_follows(zk: &ZooKeeper, node: &str, leader: u64) -> Option<Duration> {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(120) {
        if let Ok(s) = zk.status(node).await {
            if s.leader == Some(leader) && s.sid != leader {
                return Some(start.elapsed());
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    None
}

fn rss_kb(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn summary(label: &str, mut ms: Vec<f64>) {
    if ms.is_empty() {
        println!("{label:<44} no samples");
        return;
    }
    ms.sort_by(|a, b| a.partial_cmp(b).unwrap());
    println!(
        "{label:<44} min {:>8.1}  median {:>8.1}  max {:>8.1}  (n={})",
        ms[0],
        ms[ms.len() / 2],
        ms[ms.len() - 1],
        ms.len()
    );
}

async fn bench_size(size: usize, reps: usize, tick_ms: u64) -> anyhow::Result<()> {
    let dir = tempfile::Builder::new().prefix("flc-zk-bench").tempdir()?;
    let nodes: Vec<String> = (1..=size).map(|i| format!("n{i}")).collect();
    let run_id = format!("b{:06x}", rand::random::<u32>() & 0xff_ffff);
    let registry = Arc::new(Registry::create(&run_id, dir.path())?);
    let cluster = Arc::new(LocalCluster::create(
        NetMode::Netns,
        nodes.clone(),
        dir.path(),
        registry,
    )?);
    let _teardown = Teardown(cluster.clone());
    let zk = ZooKeeper::new(cluster.clone(), ZooKeeperOptions::new(tick_ms, 10, 5))?;
    println!("--- {size} servers, tickTime {tick_ms} ms, initLimit 10, syncLimit 5, -Xmx128m");
    for n in &nodes {
        zk.setup(n)?;
    }
    let cold = Instant::now();
    for n in &nodes {
        zk.start(n)?;
    }
    let (mut leader, epoch, _) = until_leader(&zk, &nodes, size, None)
        .await
        .ok_or_else(|| anyhow::anyhow!("no leader after cold start"))?;
    summary(
        "cold start to stable leader (ms)",
        vec![cold.elapsed().as_secs_f64() * 1e3],
    );
    println!("  first leader n{leader}, epoch {epoch}");

    let rss: Vec<f64> = nodes
        .iter()
        .filter_map(|n| cluster.pid(n).and_then(rss_kb))
        .map(|kb| kb as f64 / 1024.0)
        .collect();
    summary("RSS per server after start (MiB)", rss);

    let mut reads = Vec::new();
    let leader_node = format!("n{leader}");
    for _ in 0..200 {
        let t = Instant::now();
        if zk.status(&leader_node).await.is_ok() {
            reads.push(t.elapsed().as_secs_f64() * 1e3);
        }
    }
    summary("one status read, 2 AdminServer GETs (ms)", reads);

    for (fault, label) in [("kill", "SIGKILL"), ("pause", "SIGSTOP")] {
        let (mut to_leader, mut rejoin) = (Vec::new(), Vec::new());
        for _ in 0..reps {
            let node = format!("n{leader}");
            let at = Instant::now();
            if fault == "kill" {
                zk.kill(&node)?;
            } else {
                zk.pause(&node)?;
            }
            let Some((new, _, _)) = until_leader(&zk, &nodes, size, Some(leader)).await else {
                println!("  no new leader after {label} of {node}");
                break;
            };
            to_leader.push(at.elapsed().as_secs_f64() * 1e3);
            let back = Instant::now();
            if fault == "kill" {
                zk.start(&node)?;
            } else {
                zk.resume(&node)?;
            }
            if until_follows(&zk, &node, new).await.is_some() {
                rejoin.push(back.elapsed().as_secs_f64() * 1e3);
            }
            leader = new;
        }
        summary(
            &format!("leader {label} to new quorum leader (ms)"),
            to_leader,
        );
        summary(
            &format!("old leader back to following (ms, {fault})"),
            rejoin,
        );
    }
    let rss: Vec<f64> = nodes
        .iter()
        .filter_map(|n| cluster.pid(n).and_then(rss_kb))
        .map(|kb| kb as f64 / 1024.0)
        .collect();
    summary("RSS per server at the end (MiB)", rss);
    zk.close_sessions().await;
    Ok(())
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    if !fle_chaos::control::is_root() {
        println!("zookeeper bench skipped: needs root (network namespaces)");
        return;
    }
    if let Err(e) = os_setup::ensure("java".as_ref(), &mut |m| eprintln!("setup: {m}")) {
        println!("zookeeper bench skipped: {e:#}");
        return;
    }
    let reps = env_or("FLC_ZK_REPS", 5usize);
    let tick_ms = env_or("FLC_ZK_TICK_MS", 200u64);
    let sizes: Vec<usize> = std::env::var("FLC_ZK_SIZES")
        .unwrap_or_else(|_| "3,5".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    for size in sizes {
        if let Err(e) = bench_size(size, reps, tick_ms).await {
            println!("--- {size} servers: failed: {e:#}");
        }
    }
}
