//! Benchmark: SIGKILL the leader of a 3- and a 5-node `fle-node` cluster many times and print
//! min/median/max time from the kill to a new leader decided by a quorum, plus RSS per node.
//!
//! `cargo bench --bench election` (optional args: rounds, default 20). Goal at
//! finalizeWait = 200 ms: median <= 230 ms at 5 nodes, RSS <= 16 MiB per node.

#[path = "../tests/node_support/mod.rs"]
mod node_support;

use std::time::{Duration, Instant};

use node_support::{rss_kib, Cluster};

const LIMIT: Duration = Duration::from_secs(60);

fn main() {
    let rounds: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(20);
    println!(
        "fle-node election benchmark: {rounds} leader kills per cluster size, finalizeWait 200 ms"
    );
    for n in [3u64, 5] {
        bench(n, rounds);
    }
}

/// Every node follows one leader and is connected to it (phase broadcast).
fn stable(c: &Cluster, all: &[u64]) -> Option<u64> {
    let leader = c.quorum_leader(all)?;
    all.iter()
        .all(|&s| {
            c.status(s).is_some_and(|st| {
                st["leader"].as_u64() == Some(leader) && st["zab_phase"] == "broadcast"
            })
        })
        .then_some(leader)
}

fn bench(n: u64, rounds: usize) {
    let mut c = Cluster::new(n);
    let all: Vec<u64> = (1..=n).collect();
    for &s in &all {
        c.start(s);
    }
    let mut times = Vec::new();
    let mut inside = Vec::new();
    let mut rss = Vec::new();
    for _ in 0..rounds {
        let leader = c.wait_for(LIMIT, "a stable cluster", |c| stable(c, &all));
        rss.extend(all.iter().filter_map(|&s| c.pid(s).and_then(rss_kib)));
        let rest: Vec<u64> = all.iter().copied().filter(|&s| s != leader).collect();
        let t0 = Instant::now();
        c.kill(leader);
        let new_leader = c.wait_for(LIMIT, "a new leader", |c| {
            // Poll as fast as HTTP allows: the resolution of the figure is one poll.
            c.quorum_leader(&rest)
        });
        times.push(t0.elapsed());
        if let Some(took) = c
            .status(new_leader)
            .and_then(|s| s["last_election"]["took_ms"].as_u64())
        {
            inside.push(Duration::from_millis(took));
        }
        c.start(leader);
    }
    times.sort();
    inside.sort();
    rss.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let median = |v: &[Duration]| v[v.len() / 2];
    println!(
        "{n} nodes: SIGKILL -> new quorum leader: min {:.1} ms, median {:.1} ms, max {:.1} ms ({} kills)",
        ms(times[0]),
        ms(median(&times)),
        ms(times[times.len() - 1]),
        times.len()
    );
    if !inside.is_empty() {
        println!(
            "{n} nodes: new leader's own election time (took_ms): min {} ms, median {} ms, max {} ms",
            inside[0].as_millis(),
            median(&inside).as_millis(),
            inside[inside.len() - 1].as_millis()
        );
    }
    println!(
        "{n} nodes: RSS per node: min {:.1} MiB, median {:.1} MiB, max {:.1} MiB ({} samples)",
        rss[0] as f64 / 1024.0,
        rss[rss.len() / 2] as f64 / 1024.0,
        rss[rss.len() - 1] as f64 / 1024.0,
        rss.len()
    );
}
