//! `fle-chaos simulate`'s figures: simulated 60 s runs per minute of wall time, and how fast
//! the simulator finds each seeded bug it can reach.
//!
//! `cargo bench --bench simulate` prints, dated, with the machine's load:
//! - speed: 3 and 5 nodes x the `election` and `writes` workloads under the default `mixed`,
//!   `FLC_RUNS` runs each (default 400) on every core: runs/min and CPU ms per run;
//! - detection (`-- detect`, or both with no argument): for every seeded bug of
//!   `fle-node --list-bugs` (5 nodes, writes, `mixed`), `FLC_TRIALS` trials (default 5) from
//!   seeds 1, 100 001, 200 001, …, each run until the first invalid run or `FLC_CAP` runs
//!   (default 3 000): the median wall time and runs to the first invalid run, how many trials
//!   found it, and the checkers that saw it (an observer bug with 5 voters and 2 observers;
//!   `FLC_BUGS=a,b` for only those bugs); then the correct node over `FLC_CORRECT` runs
//!   (default 10 000): how many invalid and unknown (the goals: 0 invalid, <= 0.1 % unknown).
//!
//! - exploration (`-- explore`, not in the default): random seeds against `--explore` for every
//!   reachable bug, `FLC_TRIALS` trials each way, `FLC_CAP` runs at most (default 600): how
//!   many trials found it and the median runs to the first invalid run.
//!
//! Nothing is written to disk: runs are judged in memory.
#![allow(
    clippy::too_many_lines,
    reason = "tests and benches read as scripts, top to bottom"
)]

mod support;
use support::{cpu_s, env_or, load_average, median};

use fle_chaos::checker::Validity;
use fle_chaos::commands::sim::batch::run_seeds;
use fle_chaos::commands::sim::cli::{cannot_reach, settings_of};
use fle_chaos::commands::sim::explore::explore;
use fle_chaos::commands::sim::run::SimSettings;
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

fn sim(flags: &[&str]) -> SimSettings {
    settings_of(flags).unwrap_or_else(|e| panic!("{flags:?}: {e:#}"))
}

fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

fn speed() {
    let runs: u64 = env_or("FLC_RUNS", 400);
    println!(
        "speed: {} runs each, 60 s simulated, default mixed, {} threads",
        runs,
        cores()
    );
    println!("| nodes | workload | runs/min | CPU ms/run | invalid | unknown |");
    println!("|---|---|---|---|---|---|");
    for nodes in ["3", "5"] {
        for workload in ["election", "writes"] {
            let s = sim(&["--nodes", nodes, "--workload", workload]);
            let bad = Mutex::new((0, 0));
            let (wall, cpu) = (Instant::now(), cpu_s());
            run_seeds(
                &s,
                1,
                runs,
                cores(),
                || true,
                |_, r| {
                    let mut b = bad.lock().unwrap();
                    match r.results.valid {
                        Validity::False => b.0 += 1,
                        Validity::Unknown => b.1 += 1,
                        Validity::True => {}
                    }
                },
            );
            let (wall, cpu) = (wall.elapsed().as_secs_f64(), cpu_s() - cpu);
            let (invalid, unknown) = *bad.lock().unwrap();
            println!(
                "| {nodes} | {workload} | {:.0} | {:.1} | {invalid} | {unknown} |",
                runs as f64 * 60.0 / wall,
                cpu * 1e3 / runs as f64
            );
        }
    }
}

/// One trial: seeds from `first` until an invalid run or `cap` runs. The wall time and runs
/// to the first invalid run, and its failed checkers.
fn first_invalid(s: &SimSettings, first: u64, cap: u64) -> Option<(f64, u64, Vec<String>)> {
    let found: Mutex<Option<(u64, Vec<String>)>> = Mutex::new(None);
    let stop = AtomicBool::new(false);
    let started = Instant::now();
    let took = Mutex::new(0.0);
    run_seeds(
        s,
        first,
        cap,
        cores(),
        || !stop.load(Ordering::Relaxed),
        |seed, r| {
            if r.results.valid == Validity::False {
                let mut f = found.lock().unwrap();
                // The lowest seed wins, so the figure does not depend on thread timing more
                // than the wall time does.
                if f.as_ref().is_none_or(|(s, _)| seed < *s) {
                    *f = Some((seed, r.failed()));
                    *took.lock().unwrap() = started.elapsed().as_secs_f64();
                }
                stop.store(true, Ordering::Relaxed);
            }
        },
    );
    let took = *took.lock().unwrap();
    found
        .into_inner()
        .unwrap()
        .map(|(seed, failed)| (took, seed - first + 1, failed))
}

/// [`first_invalid`] by `simulate --explore` from `first`: the wall time and runs to the
/// first invalid run, and its failed checkers.
fn first_invalid_explored(
    s: &SimSettings,
    first: u64,
    cap: u64,
) -> Option<(f64, u64, Vec<String>)> {
    let started = Instant::now();
    let mut found = None;
    explore(
        s,
        first,
        cap,
        cores(),
        || true,
        |e| {
            if e.run.results.valid != Validity::False {
                return true;
            }
            found = Some((started.elapsed().as_secs_f64(), e.index + 1, e.run.failed()));
            false
        },
    );
    found
}

/// Random seeds against `--explore`, bug by bug: `FLC_TRIALS` trials each way (seeds 1,
/// 100 001, ...), each until the first invalid run or `FLC_CAP` runs (default 600).
fn explore_table() {
    let trials: u64 = env_or("FLC_TRIALS", 5);
    let cap: u64 = env_or("FLC_CAP", 600);
    println!(
        "random seeds vs --explore: 5 nodes, writes, default mixed; {trials} trials each way, \
         at most {cap} runs each"
    );
    println!("| bug | random: found | median runs | explore: found | median runs |");
    println!("|---|---|---|---|---|");
    let only = std::env::var("FLC_BUGS").unwrap_or_default();
    let chosen = |name: &str| only.is_empty() || only.split(',').any(|b| b == name);
    for bug in fle_node::bugs::CATALOGUE.iter().filter(|b| chosen(b.name)) {
        if cannot_reach(bug.bug).is_some() {
            continue;
        }
        let s = if bug.bug.needs_observers() {
            sim(&["--bug", bug.name, "--nodes", "7", "--observers", "2"])
        } else {
            sim(&["--bug", bug.name])
        };
        let mut cells = Vec::new();
        for explored in [false, true] {
            let runs: Vec<f64> = (0..trials)
                .filter_map(|t| match explored {
                    false => first_invalid(&s, 1 + t * 100_000, cap),
                    true => first_invalid_explored(&s, 1 + t * 100_000, cap),
                })
                .map(|(_, n, _)| n as f64)
                .collect();
            cells.push(format!("{}/{trials}", runs.len()));
            cells.push(median(runs).map_or("-".into(), |m| format!("{m:.0}")));
        }
        println!("| {} | {} |", bug.name, cells.join(" | "));
    }
}

fn detect() {
    let trials: u64 = env_or("FLC_TRIALS", 5);
    let cap: u64 = env_or("FLC_CAP", 3000);
    println!(
        "detection: 5 nodes, writes, default mixed; {trials} trials per bug, at most {cap} runs each"
    );
    println!("| bug | found | median wall s to first invalid | median runs | checkers |");
    println!("|---|---|---|---|---|");
    // FLC_BUGS=a,b: only those bugs.
    let only = std::env::var("FLC_BUGS").unwrap_or_default();
    let chosen = |name: &str| only.is_empty() || only.split(',').any(|b| b == name);
    for bug in fle_node::bugs::CATALOGUE.iter().filter(|b| chosen(b.name)) {
        if let Some(why) = cannot_reach(bug.bug) {
            println!("| {} | not reachable: {why} | | | |", bug.name);
            continue;
        }
        // An observer bug needs observers: 5 voters and 2 observers.
        let s = if bug.bug.needs_observers() {
            sim(&["--bug", bug.name, "--nodes", "7", "--observers", "2"])
        } else {
            sim(&["--bug", bug.name])
        };
        let mut walls = Vec::new();
        let mut runs = Vec::new();
        let mut checkers = BTreeSet::new();
        for t in 0..trials {
            if let Some((wall, n, failed)) = first_invalid(&s, 1 + t * 100_000, cap) {
                walls.push(wall);
                runs.push(n as f64);
                checkers.extend(failed);
            }
        }
        println!(
            "| {} | {}/{trials} | {} | {} | {} |",
            bug.name,
            walls.len(),
            median(walls).map_or("-".into(), |m| format!("{m:.2}")),
            median(runs).map_or("-".into(), |m| format!("{m:.0}")),
            checkers.into_iter().collect::<Vec<_>>().join(", ")
        );
    }
    let n: u64 = env_or("FLC_CORRECT", 10_000);
    if n == 0 {
        return;
    }
    let s = sim(&[]);
    let (invalid, unknown) = (AtomicU64::new(0), AtomicU64::new(0));
    let seeds = Mutex::new(Vec::new());
    let started = Instant::now();
    run_seeds(
        &s,
        1,
        n,
        cores(),
        || true,
        |seed, r| match r.results.valid {
            Validity::False => {
                invalid.fetch_add(1, Ordering::Relaxed);
                seeds.lock().unwrap().push(seed);
            }
            Validity::Unknown => {
                unknown.fetch_add(1, Ordering::Relaxed);
            }
            Validity::True => {}
        },
    );
    let mut seeds = seeds.into_inner().unwrap();
    seeds.sort();
    println!(
        "correct node: {n} runs in {:.0} s: {} invalid{}, {} unknown ({:.3} %)",
        started.elapsed().as_secs_f64(),
        invalid.load(Ordering::Relaxed),
        if seeds.is_empty() {
            String::new()
        } else {
            format!(" (seeds {seeds:?})")
        },
        unknown.load(Ordering::Relaxed),
        unknown.load(Ordering::Relaxed) as f64 * 100.0 / n as f64
    );
}

fn main() {
    let which: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    println!(
        "fle-chaos simulate bench, {} UTC, load {}, {} cores",
        chrono::Utc::now().format("%Y-%m-%d %H:%M"),
        load_average(),
        cores()
    );
    let all = which.is_empty();
    if all || which.iter().any(|w| w == "speed") {
        speed();
    }
    if all || which.iter().any(|w| w == "detect") {
        detect();
    }
    // Not in `all`: 2 x 5 trials per bug, about 20 minutes on 2 cores.
    if which.iter().any(|w| w == "explore") {
        explore_table();
    }
}
