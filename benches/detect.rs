//! Detection power: every seeded bug of `fle-node --list-bugs` (and the correct node, for the
//! false-alarm rate) x N seeds, under the default schedule (`mixed`) and under the schedule named
//! for the bug, each run a real `fle-chaos test --workload writes` child process. Prints one
//! line per run, then per bug and schedule: runs, detected (invalid), unknown, the median time
//! from the run's start to the first violating event (the earliest evidence of an invalid
//! checker), the situations the runs' faults met (coverage, docs/coverage.md), and which
//! checkers saw it.
//!
//! `cargo bench --bench detect` (root: namespaces). Environment:
//! - FLC_TIME_LIMIT [60]: seconds of workload and faults per run;
//! - FLC_SEEDS [2]: seeds per bug and schedule (SEED, SEED+1, ...), FLC_SEED [1];
//! - FLC_BUGS [all, and `correct`]: a comma list of bug names (`correct` = no bug);
//! - FLC_SCHEDULES [default,named]: `default` (mixed), `named` (the bug's own, see `NAMED`),
//!   or schedule names to run every bug under;
//! - FLC_PARALLEL [2]: runs at once (each run picks its own subnet and names);
//! - FLC_WORKLOAD [writes]: the workload of every run (`election`: no writes, for states that
//!   writes close at once; `stale-voter` is aimed at the moment before the first write), but
//!   the clients' view bugs always run `register`;
//! - FLC_NODES [5]; FLC_OUT [a temporary folder, removed at the end; set it to keep the runs].
//!
//! The binaries are copied to the temporary folder first, so a rebuild during a long bench does
//! not change what it measures.
#![allow(
    clippy::too_many_lines,
    reason = "tests and benches read as scripts, top to bottom"
)]

mod support;
use support::{env_or, median};

use fle_chaos::checker::Validity;
use fle_chaos::commands::run::child::{run_child, ChildCommand, ChildPlace, ChildRun};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// The schedule named for each bug: the built-in schedules (`nemesis/NAME.toml`) whose faults
/// the bug's FAULT column (`fle-node --list-bugs`) says should expose it, best first; the first
/// one this build has is used (the aimed ones are newer than the plain ones).
const NAMED: &[(&str, &[&str])] = &[
    ("quorum-minority", &["partition-halves"]),
    // Equal zxids with different peerEpochs in one round: `stale-voter` kills everyone at the
    // first read of a new epoch with no write (under writes too).
    ("vote-order-not-total", &["stale-voter", "kill-leader"]),
    (
        "follow-older-round",
        &[
            "older-round-followers",
            "restart-in-election",
            "kill-leader",
        ],
    ),
    ("follow-single-leading", &["isolate-leader"]),
    (
        "out-of-election-wrong-fields",
        &["stale-joiners", "staggered-restarts"],
    ),
    (
        "blocking-connect",
        &["blackhole-restart", "partition-halves"],
    ),
    ("deaf-on-truncated", &["truncated-frames"]),
    (
        "wall-clock-timeouts",
        &["clock-strobe-majority", "clock-strobe"],
    ),
    (
        "diff-without-trunc",
        // A leader cut off with a minority logs proposals nobody else has (measured: mixed's
        // partitions caught it 2/2 where kill-leader-after-ack caught it 0/2).
        &["leader-minority", "kill-leader"],
    ),
    // The leader cut off while every node loses power (measured earlier: 3/3 and 3/4, see
    // docs/benchmarks.md#history; in `mixed` too).
    ("ack-before-fsync", &["power-loss", "power-loss-after-ack"]),
    // ZOOKEEPER-4785's sequence: lagging followers synced by DIFF into a new epoch lose power
    // (docs/bugs.md, "Synced too early: `epoch-before-txns`").
    (
        "epoch-before-txns",
        &["epoch-before-txns", "power-loss-after-ack"],
    ),
    (
        "commit-quorum-minority",
        &["leader-minority", "partition-halves"],
    ),
    ("leader-never-steps-down", &["isolate-leader"]),
    // The clients' view (run under the register workload, `REGISTER_BUGS`): a deposed leader
    // alone with its clients; a follower cut off or behind its leader.
    ("reads-without-quorum", &["isolate-leader"]),
    ("sync-before-applied", &["partition-halves", "packet-delay"]),
    (
        "cas-on-stale-version",
        &["packet-delay", "partition-halves"],
    ),
    // Membership changes: the leader (and followers) removed and added back.
    ("removed-voter-counted", &["membership"]),
    ("removed-leader-keeps-leading", &["membership"]),
    // A follower restarted while its leader stands, then a quiet longer than the stray bound.
    (
        "refuse-repeated-epoch",
        &["restart-follower", "staggered-restarts"],
    ),
];

/// The bugs only clients' reads and compare-and-sets show: run under `--workload register`
/// whatever FLC_WORKLOAD says (the writes workload cannot show them).
const REGISTER_BUGS: &[&str] = &[
    "reads-without-quorum",
    "sync-before-applied",
    "cas-on-stale-version",
];

/// One run to make.
#[derive(Clone)]
struct Job {
    bug: String,
    /// "mixed" or the named schedule.
    schedule: String,
    seed: u64,
}

/// What one run gave.
struct Outcome {
    job: Job,
    code: i32,
    /// Seconds from the run's start to the first violating event.
    first_violation_s: Option<f64>,
    /// The checkers that said invalid.
    checkers: Vec<String>,
    /// The checkers that said unknown.
    unknown: Vec<String>,
    /// Situations the run's faults met (results.json's coverage), when it has one.
    situations: Option<usize>,
    wall_s: f64,
    dir: Option<PathBuf>,
}

/// The built-in schedule exists in this build (a named schedule may be newer than the binary).
fn built_in(name: &str) -> bool {
    fle_chaos::nemesis::catalogue::BUILT_IN
        .iter()
        .any(|(n, _)| *n == name)
}

fn bugs_listed(node: &Path) -> Vec<String> {
    let out = Command::new(node)
        .arg("--list-bugs")
        .output()
        .expect("fle-node --list-bugs runs");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split('\t').next())
        .filter(|n| !n.is_empty())
        .map(str::to_string)
        .collect()
}

/// The schedule named for `bug` (mixed for the correct node or an unlisted bug).
fn named_for(bug: &str) -> String {
    NAMED
        .iter()
        .filter(|(b, _)| *b == bug)
        .flat_map(|(_, s)| s.iter())
        .find(|s| built_in(s))
        .map_or_else(|| "mixed".into(), |s| s.to_string())
}

/// Runs `job` as a child `fle-chaos test` (through `run::child`, as sweeps and shrink do), its
/// output in `dir`; a run that outlives `deadline` is stopped (SIGTERM: it tears down).
async fn run_job(
    bin: PathBuf,
    node: PathBuf,
    job: Job,
    dir: PathBuf,
    (time_limit, nodes, deadline): (u32, u32, Duration),
) -> Outcome {
    std::fs::create_dir_all(&dir).unwrap();
    let workload: String = match REGISTER_BUGS.contains(&job.bug.as_str()) {
        true => "register".to_string(),
        false => env_or("FLC_WORKLOAD", "writes".to_string()),
    };
    let mut args: Vec<String> = [
        "--workload",
        &workload,
        "--nodes",
        &nodes.to_string(),
        "--time-limit",
        &time_limit.to_string(),
        "--seed",
        &job.seed.to_string(),
        "--nemesis-file",
        &job.schedule,
        "--node-binary",
        &node.to_string_lossy(),
    ]
    .map(str::to_string)
    .to_vec();
    if job.bug != "correct" {
        args.extend(["--bug".to_string(), job.bug.clone()]);
    }
    let log = dir.join("stderr.log");
    let place = ChildPlace {
        out: &dir,
        name: "detect",
        log: &log,
        command: ChildCommand::Test,
    };
    let child = run_child(&bin, &args, place, Some(deadline), std::future::pending())
        .await
        .expect("fle-chaos starts");
    outcome(job, &child)
}

/// Reads a finished run's verdicts through the typed results.
fn outcome(job: Job, child: &ChildRun) -> Outcome {
    let mut checkers = Vec::new();
    let mut unknown = Vec::new();
    let mut first: Option<u64> = None;
    for c in child.results.iter().flat_map(|r| &r.checkers) {
        if !c.applicable {
            continue;
        }
        match c.valid {
            Validity::False => {
                checkers.push(c.name.clone());
                if let Some(t) = c.evidence.iter().filter_map(|e| e.time_ns).min() {
                    first = Some(first.map_or(t, |f| f.min(t)));
                }
            }
            Validity::Unknown => unknown.push(c.name.clone()),
            Validity::True => {}
        }
    }
    Outcome {
        job,
        code: child.code,
        first_violation_s: first.map(|t| t as f64 / 1e9),
        checkers,
        unknown,
        situations: (child.results.as_ref())
            .and_then(|r| r.coverage.as_ref())
            .map(|c| c.met.len()),
        wall_s: child.duration.as_secs_f64(),
        dir: child.run_dir.clone(),
    }
}

fn verdict_word(code: i32) -> &'static str {
    match code {
        0 => "valid",
        1 => "invalid",
        2 => "unknown",
        _ => "not judged",
    }
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    if !fle_chaos::control::is_root() {
        eprintln!("SKIPPED detect bench: needs root (network namespaces)");
        return;
    }
    let time_limit: u32 = env_or("FLC_TIME_LIMIT", 60);
    let seeds: u64 = env_or("FLC_SEEDS", 2);
    let seed: u64 = env_or("FLC_SEED", 1);
    let parallel: usize = env_or::<usize>("FLC_PARALLEL", 2).max(1);
    let nodes: u32 = env_or("FLC_NODES", 5);
    let tmp = tempfile::Builder::new()
        .prefix("flc-bench-detect-")
        .tempdir()
        .unwrap();
    let out: PathBuf = std::env::var("FLC_OUT")
        .map(PathBuf::from)
        .unwrap_or_else(|_| tmp.path().to_path_buf());
    // Copies, so that a rebuild while the bench runs does not swap the binaries under it.
    let bin = tmp.path().join("fle-chaos");
    let node = tmp.path().join("fle-node");
    std::fs::copy(env!("CARGO_BIN_EXE_fle-chaos"), &bin).expect("copy fle-chaos");
    std::fs::copy(fle_chaos::control::sut::fle_node::built_binary(), &node).expect("copy fle-node");
    let listed = bugs_listed(&node);
    let bugs: Vec<String> = match std::env::var("FLC_BUGS") {
        Ok(list) => list.split(',').map(|b| b.trim().to_string()).collect(),
        Err(_) => std::iter::once("correct".to_string())
            .chain(listed.iter().cloned())
            .collect(),
    };
    for b in &bugs {
        if b != "correct" && !listed.contains(b) {
            eprintln!("FLC_BUGS: '{b}' is not a bug of fle-node --list-bugs: {listed:?}");
            std::process::exit(254);
        }
    }
    let schedules: Vec<String> = std::env::var("FLC_SCHEDULES")
        .unwrap_or_else(|_| "default,named".into())
        .split(',')
        .map(|s| s.trim().to_string())
        .collect();
    let mut jobs = Vec::new();
    for bug in &bugs {
        let mut mine: Vec<String> = Vec::new();
        for s in &schedules {
            let name = match s.as_str() {
                "default" => "mixed".to_string(),
                "named" => named_for(bug),
                other => other.to_string(),
            };
            if !mine.contains(&name) {
                mine.push(name);
            }
        }
        for schedule in mine {
            for i in 0..seeds {
                jobs.push(Job {
                    bug: bug.clone(),
                    schedule: schedule.clone(),
                    seed: seed + i,
                });
            }
        }
    }
    println!(
        "detect bench, {} UTC: {} runs of `fle-chaos test --workload {} --nodes {nodes} \
         --time-limit {time_limit} --nemesis-file S --seed K [--bug B]`, {parallel} at once, \
         seeds {seed}..{}",
        chrono::Utc::now().format("%Y-%m-%d %H:%M"),
        jobs.len(),
        env_or("FLC_WORKLOAD", "writes".to_string()),
        seed + seeds.saturating_sub(1)
    );
    let deadline = Duration::from_secs(u64::from(time_limit) + 300);
    let runtime = tokio::runtime::Runtime::new().expect("a tokio runtime");
    let outcomes = runtime.block_on(async {
        let mut queue = jobs.into_iter().enumerate();
        let mut running = tokio::task::JoinSet::new();
        let mut outcomes = Vec::new();
        loop {
            while running.len() < parallel {
                let Some((i, job)) = queue.next() else { break };
                // A short folder: lazyfs's control socket lives under it, and a Unix socket
                // path must be shorter than 108 bytes.
                let dir = out.join(format!("{i:03}"));
                let run = run_job(bin.clone(), node.clone(), job, dir, (time_limit, nodes, deadline));
                running.spawn(async move { (i, run.await) });
            }
            let Some(done) = running.join_next().await else { break };
            let (i, o) = done.expect("a run task");
            println!(
                "run {:>3} {:<30} {:<20} seed {}: {:<10} first violation {:>6}  invalid: {}  unknown: {}  situations: {}  ({:.0} s) {}",
                i + 1,
                o.job.bug,
                o.job.schedule,
                o.job.seed,
                verdict_word(o.code),
                o.first_violation_s
                    .map_or("-".into(), |s| format!("{s:.1} s")),
                if o.checkers.is_empty() { "-".into() } else { o.checkers.join(",") },
                if o.unknown.is_empty() { "-".into() } else { o.unknown.join(",") },
                o.situations.map_or("-".into(), |n| n.to_string()),
                o.wall_s,
                o.dir.as_ref().map_or("no run folder".into(), |d| d.display().to_string()),
            );
            outcomes.push(o);
        }
        outcomes
    });
    // The table: per bug and schedule, in the order they were asked for.
    let mut table: BTreeMap<(usize, String), Vec<&Outcome>> = BTreeMap::new();
    for o in &outcomes {
        let order = bugs
            .iter()
            .position(|b| *b == o.job.bug)
            .unwrap_or(usize::MAX);
        table
            .entry((order, o.job.schedule.clone()))
            .or_default()
            .push(o);
    }
    println!();
    println!("| bug | schedule | detected | unknown | other | median first violation | situations met (median) | checkers |");
    println!("|---|---|---|---|---|---|---|---|");
    for ((order, schedule), runs) in &table {
        let bug = bugs.get(*order).map_or("?", String::as_str);
        let detected = runs.iter().filter(|o| o.code == 1).count();
        let unknown = runs.iter().filter(|o| o.code == 2).count();
        let other = runs.iter().filter(|o| !(0..=2).contains(&o.code)).count();
        let firsts: Vec<f64> = runs
            .iter()
            .filter(|o| o.code == 1)
            .filter_map(|o| o.first_violation_s)
            .collect();
        let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
        for o in runs {
            for c in &o.checkers {
                *seen.entry(c.as_str()).or_default() += 1;
            }
        }
        let checkers: Vec<String> = seen.iter().map(|(c, n)| format!("{c} ({n})")).collect();
        let situations: Vec<f64> = runs
            .iter()
            .filter_map(|o| o.situations)
            .map(|n| n as f64)
            .collect();
        println!(
            "| {bug} | {schedule} | {detected}/{} | {unknown} | {other} | {} | {} | {} |",
            runs.len(),
            median(firsts).map_or("-".into(), |m| format!("{m:.1} s")),
            median(situations).map_or("-".into(), |m| format!("{m:.0}")),
            if checkers.is_empty() {
                "-".into()
            } else {
                checkers.join(", ")
            },
        );
    }
}
