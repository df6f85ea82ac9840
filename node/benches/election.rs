//! Benchmark: SIGKILL the leader of a 3- and a 5-node `fle-node` cluster many times and print
//! min/median/max time from the kill to a new leader decided by a quorum, plus RSS per node.
//! Then (issue 18) SIGSTOP the leader of 5 servers (tickTime 200, syncLimit 5, as in
//! `side_by_side`): time to a new quorum leader and, after SIGCONT, to the old one following;
//! and isolate the leader of 3 servers for 5 s / 30 s / 120 s in a private network namespace
//! (root): time from the heal to the cut-off server FOLLOWING the current leader, synced.
//!
//! `cargo bench --bench election` (optional args: rounds, default 20). Env: FLC_BENCH_PARTS
//! (default kill,pause,rejoin), FLC_REJOIN_PLAN (partition seconds:repetitions, default
//! 5:5,30:5,120:5), FLC_NODE_BIN (another fle-node build, for before/after figures). Goal at
//! finalizeWait = 200 ms: median <= 230 ms at 5 nodes, RSS <= 16 MiB per node; paused leader
//! near syncLimit·tickTime + finalizeWait (1.2 s); rejoin <= 1 s after any partition.
#![allow(
    clippy::too_many_lines,
    reason = "tests and benches read as scripts, top to bottom"
)]

/// The tests' cluster starter (tests/it/support), borrowed whole: this bench uses part of it.
#[allow(dead_code)]
#[path = "../tests/it/support/mod.rs"]
mod node_support;

use std::time::{Duration, Instant};

use node_support::{rss_kib, Cluster, PrivateNet};

const LIMIT: Duration = Duration::from_secs(60);
/// A rejoin slower than this is reported as such (the sample is this long).
const REJOIN_GIVE_UP: Duration = Duration::from_secs(60);

fn main() {
    let rounds: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(20);
    let parts = std::env::var("FLC_BENCH_PARTS").unwrap_or_else(|_| "kill,pause,rejoin".into());
    println!(
        "fle-node election benchmark, {} UTC, binary {}",
        chrono::Utc::now().format("%Y-%m-%d %H:%M"),
        node_support::node_bin()
    );
    if parts.contains("kill") {
        println!("{rounds} leader kills per cluster size, finalizeWait 200 ms");
        for n in [3u64, 5] {
            bench(n, rounds);
        }
    }
    if parts.contains("pause") {
        pause(rounds.min(10));
    }
    if parts.contains("rejoin") {
        let plan = std::env::var("FLC_REJOIN_PLAN").unwrap_or_else(|_| "5:5,30:5,120:5".into());
        let plan: Vec<(u64, usize)> = plan
            .split(',')
            .filter_map(|p| {
                let (secs, reps) = p.split_once(':')?;
                Some((secs.trim().parse().ok()?, reps.trim().parse().ok()?))
            })
            .collect();
        // The namespace belongs to one thread (and the nodes it starts).
        std::thread::spawn(move || rejoin(&plan)).join().unwrap();
    }
}

fn print_row(label: &str, mut v: Vec<Duration>) {
    if v.is_empty() {
        println!("{label}: no samples");
        return;
    }
    v.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "{label}: min {:.0} ms, median {:.0} ms, max {:.0} ms (n={})",
        ms(v[0]),
        ms(v[v.len() / 2]),
        ms(v[v.len() - 1]),
        v.len()
    );
}

/// Whether `sid` follows `leader`, synced.
fn follows(c: &Cluster, sid: u64, leader: u64) -> bool {
    c.status(sid).is_some_and(|s| {
        s["state"] == "FOLLOWING"
            && s["leader"].as_u64() == Some(leader)
            && s["zab_phase"] == "broadcast"
    })
}

/// SIGSTOP the leader of 5 (tickTime 200, syncLimit 5): to a new quorum leader among the
/// others (only they are polled: the paused one accepts but never answers), then SIGCONT to
/// the old leader following.
fn pause(rounds: usize) {
    use nix::sys::signal::{kill, Signal};
    use nix::unistd::Pid;
    let mut c = Cluster::new(5);
    c.set_tick(200);
    let all: Vec<u64> = (1..=5).collect();
    for &s in &all {
        c.start(s);
    }
    let (mut to_leader, mut back) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        let leader = c.wait_for(LIMIT, "a stable cluster", |c| stable(c, &all));
        let pid = Pid::from_raw(c.pid(leader).unwrap() as i32);
        let rest: Vec<u64> = all.iter().copied().filter(|&s| s != leader).collect();
        let t0 = Instant::now();
        kill(pid, Signal::SIGSTOP).unwrap();
        let new = c.wait_for(LIMIT, "a new leader", |c| {
            c.quorum_leader(&rest).filter(|&l| l != leader)
        });
        to_leader.push(t0.elapsed());
        let t1 = Instant::now();
        kill(pid, Signal::SIGCONT).unwrap();
        c.wait_for(LIMIT, "the old leader to follow", |c| {
            follows(c, leader, new).then_some(())
        });
        back.push(t1.elapsed());
    }
    println!("5 nodes, tickTime 200 ms, syncLimit 5, finalizeWait 200 ms:");
    print_row("  leader SIGSTOP -> new quorum leader", to_leader);
    print_row("  SIGCONT -> old leader following", back);
}

/// Isolates the leader of 3 (tickTime 200) for each planned length, heals, and times the
/// cut-off server's return to FOLLOWING the current leader (synced).
fn rejoin(plan: &[(u64, usize)]) {
    let mut net = match PrivateNet::enter(3) {
        Ok(n) => n,
        Err(e) => {
            println!("rejoin rows skipped: {e} (needs root)");
            return;
        }
    };
    let hosts = net.hosts.clone();
    let mut c = Cluster::with_hosts(3, |sid| hosts[&sid].clone());
    c.set_tick(200);
    let all: Vec<u64> = (1..=3).collect();
    for &s in &all {
        c.start(s);
    }
    println!("3 nodes, tickTime 200 ms, isolate-leader partition (silent drop both ways):");
    for &(secs, reps) in plan {
        let mut took = Vec::new();
        for _ in 0..reps {
            let old = c.wait_for(LIMIT, "a stable cluster", |c| stable(c, &all));
            net.isolate(old);
            std::thread::sleep(Duration::from_secs(secs));
            net.heal();
            let healed = Instant::now();
            let back = loop {
                let l = c.quorum_leader(&all);
                if l.is_some_and(|l| l != old && follows(&c, old, l)) {
                    break true;
                }
                if healed.elapsed() > REJOIN_GIVE_UP {
                    break false;
                }
                std::thread::sleep(Duration::from_millis(20));
            };
            if !back {
                println!(
                    "  n{old} still not following {} s after the heal of a {secs} s partition",
                    REJOIN_GIVE_UP.as_secs()
                );
            }
            took.push(healed.elapsed());
        }
        print_row(
            &format!("  heal of a {secs} s partition -> cut-off leader FOLLOWING"),
            took,
        );
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
