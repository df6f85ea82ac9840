//! The side-by-side figure: fle-node and real Apache ZooKeeper, each through its `Target`, in
//! their own network namespaces with the same tickTime/initLimit/syncLimit, in one invocation:
//! cold start to a stable (quorum-backed) leader, leader SIGKILL / SIGSTOP to a new
//! quorum-backed leader, the old leader's rejoin, RSS per server, one status read; the heal of
//! an isolate-leader partition (5 s, 30 s, 120 s) to the cut-off old leader FOLLOWING the
//! current leader in broadcast (issue 18); then a table of medians with the ratio fle-node /
//! ZooKeeper. Needs root (namespaces, iptables) and the zookeeper package (installed when
//! missing).
//!
//! `cargo bench --bench side_by_side` runs everything. Env: FLC_ZK_REPS=5, FLC_ZK_SIZES=3,5,
//! FLC_ZK_TICK_MS=200, FLC_TARGETS=fle,zookeeper, FLC_ZK_PARTS=kill,pause,rejoin,observer (which
//! fault rows to run; cold start, RSS and a status read always run; `observer` adds one observer
//! to each ensemble and times it OBSERVING the new leader after each leader SIGKILL),
//! FLC_ZK_REJOIN=5,30,120 (the
//! partition lengths, seconds), FLC_ZK_REJOIN_SIZES=5 (the cluster sizes that get rejoin rows:
//! five repetitions of 155 s of partitions per target are ~15 min each).
//! FLC_BACKEND=netns|ssh: with ssh each server runs on a fake VM (a namespace running sshd,
//! as the SSH tests use) and is driven over SSH: the same figures through the SSH backend.
#![allow(
    clippy::too_many_lines,
    reason = "tests and benches read as scripts, top to bottom"
)]

mod support;
use support::{env_or, median};

/// The SSH tests' fake VMs (tests/it/support), borrowed whole: this bench uses part of them.
#[allow(dead_code)]
#[path = "../tests/it/support"]
mod test_support {
    pub mod fixture;
    pub mod skip;
    pub mod ssh;
}

use fle_chaos::api::{NodeStatus, ServerState, ZabPhase};
use fle_chaos::control::backend::local::{LocalCluster, NetMode};
use fle_chaos::control::backend::os_setup::Needs;
use fle_chaos::control::backend::registry::Registry;
use fle_chaos::control::backend::ssh::{SshCluster, SshClusterConfig, SshOptions};
use fle_chaos::control::fault::iptables::Cut;
use fle_chaos::control::sut::fle_node::{FleNode, FleNodeOptions};
use fle_chaos::control::sut::zookeeper::{os_setup, ZooKeeper, ZooKeeperOptions};
use fle_chaos::control::sut::Target;
use fle_chaos::control::{Control, Net};
use fle_chaos::history::view::quorum_leader_of as quorum_leader;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

struct Teardown(Arc<dyn Control>);

impl Drop for Teardown {
    fn drop(&mut self) {
        let _ = self.0.teardown();
    }
}

/// A comma-separated list from the environment, else `default`.
fn list<T: std::str::FromStr>(name: &str, default: &str) -> Vec<T> {
    std::env::var(name)
        .unwrap_or_else(|_| default.into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect()
}

/// Every node's status, read concurrently: one read that hangs (a SIGSTOPped server accepts
/// the connection but never answers) must not delay the others' answers. A round still lasts
/// until its slowest read ends, so `until_leader` leaves the paused leader out (its 500 ms
/// timeout made every poll round last ~520 ms: a new leader seen up to half a second late).
async fn all_statuses(db: &dyn Target, nodes: &[String]) -> Vec<NodeStatus> {
    futures_util::future::join_all(nodes.iter().map(|n| db.status(n)))
        .await
        .into_iter()
        .filter_map(Result::ok)
        .collect()
}

/// Time until a quorum-backed leader other than `not` exists, polled at ~50 Hz. `not` (the
/// killed or paused leader) is not polled: a paused server accepts the connection but never
/// answers, so every poll round waited out its 500 ms status timeout and a new leader was
/// seen up to half a second late; it cannot be part of the new leader's quorum anyway.
async fn until_leader(
    db: &dyn Target,
    nodes: &[String],
    size: usize,
    not: Option<u64>,
) -> Option<(u64, u64, Duration)> {
    let start = Instant::now();
    let polled: Vec<String> = match not {
        Some(old) => nodes
            .iter()
            .filter(|n| **n != format!("n{old}"))
            .cloned()
            .collect(),
        None => nodes.to_vec(),
    };
    while start.elapsed() < Duration::from_secs(120) {
        let seen = all_statuses(db, &polled).await;
        if let Some((sid, epoch)) = quorum_leader(&seen, size) {
            if Some(sid) != not {
                return Some((sid, epoch, start.elapsed()));
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    None
}

/// Time until `node` follows `leader` in broadcast. Synced, not merely decided: ZooKeeper's
/// adapter reads a syncing server as LOOKING, and a fle-node follower paused by the next
/// repetition while still syncing waits out initLimit, not syncLimit, before it gives up on
/// the paused leader (every such repetition cost a second more: 2.2 s instead of 1.2 s).
async fn until_follows(db: &dyn Target, node: &str, leader: u64) -> Option<Duration> {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(120) {
        if let Ok(s) = db.status(node).await {
            if follows(&s, leader) {
                return Some(start.elapsed());
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    None
}

/// `s` FOLLOWS (or, an observer, OBSERVES) `leader` and has synced with it (Zab broadcast;
/// ZooKeeper: serving).
fn follows(s: &NodeStatus, leader: u64) -> bool {
    matches!(s.state, ServerState::Following | ServerState::Observing)
        && s.leader == Some(leader)
        && s.zab_phase == ZabPhase::Broadcast
}

/// A quorum-backed leader that every server reads as following (in broadcast): the settled
/// cluster a partition starts from. Its sid, or None after 120 s.
async fn until_stable(db: &dyn Target, nodes: &[String], size: usize) -> Option<u64> {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(120) {
        let seen = all_statuses(db, nodes).await;
        if let Some((sid, _)) = quorum_leader(&seen, size) {
            if seen.len() == nodes.len() && seen.iter().all(|s| s.sid == sid || follows(s, sid)) {
                return Some(sid);
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    None
}

/// Isolates the leader (every packet between it and the others dropped, both ways) for each
/// of `lengths` seconds, `reps` times each, heals, and times the heal to the old leader
/// FOLLOWING the current quorum-backed leader in broadcast (issue 18's rejoin rows).
async fn rejoin_rows(
    db: &dyn Target,
    net: &dyn Net,
    nodes: &[String],
    size: usize,
    reps: usize,
    lengths: &[u64],
) -> anyhow::Result<()> {
    for &secs in lengths {
        let mut took = Vec::new();
        for _ in 0..reps {
            let old = until_stable(db, nodes, size)
                .await
                .ok_or_else(|| anyhow::anyhow!("no settled cluster before the partition"))?;
            let cut_off = format!("n{old}");
            let rest: Vec<String> = nodes.iter().filter(|n| **n != cut_off).cloned().collect();
            net.drop_from(&cut_off, &rest, Cut::Every)?;
            for n in &rest {
                net.drop_from(n, std::slice::from_ref(&cut_off), Cut::Every)?;
            }
            tokio::time::sleep(Duration::from_secs(secs)).await;
            for n in nodes {
                net.heal(n)?;
            }
            let healed = Instant::now();
            loop {
                let seen = all_statuses(db, nodes).await;
                let now_leader = quorum_leader(&seen, size).map(|(sid, _)| sid);
                let back = now_leader.is_some_and(|l| {
                    l != old && seen.iter().any(|s| s.sid == old && follows(s, l))
                });
                if back {
                    took.push(healed.elapsed().as_secs_f64() * 1e3);
                    break;
                }
                if healed.elapsed() > Duration::from_secs(180) {
                    println!(
                        "  n{old} not following the leader ({now_leader:?}) 180 s after the heal of a {secs} s partition"
                    );
                    break;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        summary(
            &format!("isolate leader {secs:>3} s, heal -> old leader following (ms)"),
            took,
        );
    }
    Ok(())
}

fn rss_kb(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Medians by (size, measurement, target), for the closing table.
static MEDIANS: Mutex<BTreeMap<(usize, String, String), f64>> = Mutex::new(BTreeMap::new());

/// The (size, target) being measured, for `summary`.
static CURRENT: Mutex<(usize, String)> = Mutex::new((0, String::new()));

fn summary(label: &str, mut ms: Vec<f64>) {
    if ms.is_empty() {
        println!("{label:<56} no samples");
        return;
    }
    ms.sort_by(f64::total_cmp);
    let mid = median(ms.clone()).unwrap_or_default();
    let (size, target) = CURRENT.lock().unwrap().clone();
    MEDIANS
        .lock()
        .unwrap()
        .insert((size, label.to_string(), target), mid);
    // Nearest rank: the smallest sample at or above 90 % of them.
    let p90 = ms[(ms.len() * 9).div_ceil(10) - 1];
    println!(
        "{label:<56} min {:>8.1}  median {:>8.1}  p90 {:>8.1}  max {:>8.1}  (n={})",
        ms[0],
        mid,
        p90,
        ms[ms.len() - 1],
        ms.len()
    );
}

/// What one invocation measures (env FLC_ZK_*).
struct Plan {
    reps: usize,
    tick_ms: u64,
    /// Fault rows to run: "kill", "pause", "rejoin", "observer".
    parts: Vec<String>,
    /// Isolate-leader lengths (seconds) and the cluster sizes that get them.
    rejoin: Vec<u64>,
    rejoin_sizes: Vec<usize>,
}

async fn bench_size(target: &str, size: usize, plan: &Plan) -> anyhow::Result<()> {
    let (reps, tick_ms) = (plan.reps, plan.tick_ms);
    *CURRENT.lock().unwrap() = (size, target.to_string());
    let dir = tempfile::Builder::new().prefix("flc-db-bench").tempdir()?;
    // `size` voters, and one observer after them with the `observer` row.
    let with_observer = plan.parts.iter().any(|p| p == "observer");
    let all = size + usize::from(with_observer);
    let nodes: Vec<String> = (1..=all).map(|i| format!("n{i}")).collect();
    let observer = with_observer.then(|| format!("n{all}"));
    let observers: std::collections::BTreeSet<String> = observer.iter().cloned().collect();
    let run_id = format!("b{:06x}", rand::random::<u32>() & 0xff_ffff);
    let registry = Arc::new(Registry::create(&run_id, dir.path())?);
    // Declared before the teardown guard, so dropped after it: the hosts outlive the teardown.
    let mut _vms = None;
    let cluster: Arc<dyn Control> = if std::env::var("FLC_BACKEND").as_deref() == Ok("ssh") {
        let vms = test_support::ssh::FakeVms::create(all);
        let config = SshClusterConfig {
            hosts: vms.hosts(),
            options: SshOptions {
                user: None,
                port: None,
                private_key: None,
                strict_host_key_checking: true,
                config_file: Some(vms.ssh_config.clone()),
                connect_timeout: Duration::from_secs(10),
                retries: 3,
            },
            binary: fle_chaos::control::sut::fle_node::built_binary(),
            needs: Needs::default(),
            real_clock: false,
        };
        _vms = Some(vms);
        Arc::new(SshCluster::create(
            config,
            dir.path(),
            registry,
            &mut |m| eprintln!("setup: {m}"),
        )?)
    } else {
        Arc::new(LocalCluster::create(
            NetMode::Netns,
            nodes.clone(),
            dir.path(),
            registry,
        )?)
    };
    let _teardown = Teardown(cluster.clone());
    let mut zk_sessions = None;
    let db: Arc<dyn Target> = if target == "zookeeper" {
        let opts = ZooKeeperOptions {
            observers: observers.clone(),
            ..ZooKeeperOptions::new(tick_ms, 10, 5)
        };
        let zk = Arc::new(ZooKeeper::new(cluster.clone(), opts)?);
        zk_sessions = Some(zk.clone());
        zk
    } else {
        Arc::new(FleNode::new(
            cluster.clone(),
            FleNodeOptions {
                binary: fle_chaos::control::sut::fle_node::built_binary(),
                tick_ms,
                init_limit: 10,
                sync_limit: 5,
                faketime: false,
                fake_monotonic: false,
                bug: None,
                finalize_wait_ms: None,
                power_loss: false,
                observers,
                status_timeout: Duration::from_millis(500),
                write_timeout: Duration::from_secs(5),
            },
        )?)
    };
    let db = db.as_ref();
    println!(
        "--- {target}: {size} servers{}, tickTime {tick_ms} ms, initLimit 10, syncLimit 5, {}",
        observer
            .as_ref()
            .map_or(String::new(), |o| format!(" and observer {o}")),
        if _vms.is_some() {
            "over SSH on fake VMs"
        } else {
            "namespaces"
        }
    );
    for n in &nodes {
        db.setup(n)?;
    }
    let cold = Instant::now();
    for n in &nodes {
        db.start(n)?;
    }
    let (mut leader, epoch, _) = until_leader(db, &nodes, size, None)
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
        if db.status(&leader_node).await.is_ok() {
            reads.push(t.elapsed().as_secs_f64() * 1e3);
        }
    }
    summary("one status read (ms)", reads);

    for (fault, label) in [("kill", "SIGKILL"), ("pause", "SIGSTOP")] {
        if !plan.parts.iter().any(|p| p == fault) {
            continue;
        }
        let (mut to_leader, mut rejoin, mut observed) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..reps {
            let node = format!("n{leader}");
            let at = Instant::now();
            if fault == "kill" {
                db.kill(&node)?;
            } else {
                db.pause(&node)?;
            }
            let Some((new, _, _)) = until_leader(db, &nodes, size, Some(leader)).await else {
                println!("  no new leader after {label} of {node}");
                break;
            };
            to_leader.push(at.elapsed().as_secs_f64() * 1e3);
            if let Some(o) = observer.as_deref().filter(|_| fault == "kill") {
                if until_follows(db, o, new).await.is_some() {
                    observed.push(at.elapsed().as_secs_f64() * 1e3);
                }
            }
            let back = Instant::now();
            if fault == "kill" {
                db.start(&node)?;
            } else {
                db.resume(&node)?;
            }
            if until_follows(db, &node, new).await.is_some() {
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
        if observer.is_some() && fault == "kill" {
            summary(
                "leader SIGKILL to observer observing new leader (ms)",
                observed,
            );
        }
    }
    if plan.parts.iter().any(|p| p == "rejoin") && plan.rejoin_sizes.contains(&size) {
        let net = cluster
            .net()
            .ok_or_else(|| anyhow::anyhow!("rejoin rows need partitions; this backend has none"))?;
        rejoin_rows(db, net, &nodes, size, reps, &plan.rejoin).await?;
    }
    let rss: Vec<f64> = nodes
        .iter()
        .filter_map(|n| cluster.pid(n).and_then(rss_kb))
        .map(|kb| kb as f64 / 1024.0)
        .collect();
    summary("RSS per server at the end (MiB)", rss);
    if let Some(zk) = zk_sessions {
        zk.close_sessions().await;
    }
    Ok(())
}

/// The closing table: medians per target and the ratio fle-node / ZooKeeper.
fn print_table() {
    let medians = MEDIANS.lock().unwrap();
    println!(
        "\n{:<6} {:<56} {:>12} {:>12} {:>8}",
        "nodes", "median", "fle-node", "zookeeper", "ratio"
    );
    let rows: std::collections::BTreeSet<(usize, String)> =
        medians.keys().map(|(n, l, _)| (*n, l.clone())).collect();
    for (n, label) in rows {
        let get = |t: &str| medians.get(&(n, label.clone(), t.to_string())).copied();
        let (f, z) = (get("fle"), get("zookeeper"));
        let show = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.1}"));
        let ratio = match (f, z) {
            (Some(f), Some(z)) if z > 0.0 => format!("{:.2}", f / z),
            _ => "-".into(),
        };
        println!(
            "{n:<6} {label:<56} {:>12} {:>12} {ratio:>8}",
            show(f),
            show(z)
        );
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    if !fle_chaos::control::is_root() {
        println!("side-by-side bench skipped: needs root (network namespaces)");
        return;
    }
    if let Err(e) = os_setup::ensure("java".as_ref(), &mut |m| eprintln!("setup: {m}")) {
        println!("side-by-side bench skipped: {e:#}");
        return;
    }
    if std::env::var("FLC_BACKEND").as_deref() == Ok("ssh")
        && !test_support::ssh::can_run("side_by_side")
    {
        return;
    }
    let plan = Plan {
        reps: env_or("FLC_ZK_REPS", 5usize),
        tick_ms: env_or("FLC_ZK_TICK_MS", 200u64),
        parts: list("FLC_ZK_PARTS", "kill,pause,rejoin"),
        rejoin: list("FLC_ZK_REJOIN", "5,30,120"),
        rejoin_sizes: list("FLC_ZK_REJOIN_SIZES", "5"),
    };
    let sizes: Vec<usize> = list("FLC_ZK_SIZES", "3,5");
    let targets: Vec<String> = list("FLC_TARGETS", "fle,zookeeper");
    println!(
        "side_by_side, {} UTC: sizes {sizes:?}, targets {targets:?}, {} repetitions, rows {:?}, rejoin after {:?} s at sizes {:?}",
        chrono::Utc::now().format("%Y-%m-%d %H:%M"),
        plan.reps,
        plan.parts,
        plan.rejoin,
        plan.rejoin_sizes
    );
    for size in sizes {
        for target in &targets {
            if let Err(e) = bench_size(target, size, &plan).await {
                println!("--- {target}, {size} servers: failed: {e:#}");
            }
        }
    }
    print_table();
}
