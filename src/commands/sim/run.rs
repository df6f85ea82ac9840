//! One simulated run from settings and a seed to its history and verdict: the cluster starts,
//! observers read every node at the workload's rate, clients write, the nemesis works through
//! its plan until the time limit, then the final heal, the wait for the cluster to settle (the
//! real run's rule: `View::settled` on reads after the heal) and the final reads. The history is
//! judged in memory by the same checkers a real run's is (`checker::check_digest`).

use super::coverage::Coverage;
use super::nemesis::SimNemesis;
use super::record::SimRecorder;
use super::server::{Server, Timing};
use super::streams::Streams;
use super::world::{Ev, World};
use crate::checker::model::Digest;
use crate::checker::{CheckOptions, Results};
use crate::history::test_info::{MadeBy, RunSpec, SimulatedSettings, TestInfo, WorkloadSettings};
use crate::history::{node_name, sid_of, EventType, F};
use crate::nemesis::env::Steering;
use crate::nemesis::plan::{fault_window, plan};
use crate::nemesis::schedule::Schedule;
use crate::workload::{Kind, Workload};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::{Duration, Instant};

/// What every run of a `simulate` shares.
#[derive(Debug, Clone)]
pub struct SimSettings {
    pub nodes: usize,
    /// The nodes that only observe (`--observers`), by name.
    pub observers: Vec<String>,
    pub time_limit: Duration,
    pub workload: Workload,
    pub schedule: Schedule,
    /// How the nemesis orders its faults, as a real run's (`--nemesis-strategy`).
    pub steering: Steering,
    pub timing: Timing,
    pub recovery_timeout: Duration,
    /// Events a run may handle before it is cut short (`world::MAX_EVENTS`).
    pub max_events: u64,
    /// The command line, for the run's test.json.
    pub command: String,
    /// `simulate`'s flags that make these settings (test.json keeps them, so that `shrink`
    /// rebuilds them from a run folder).
    pub argv: Vec<String>,
    /// `fle-chaos test`'s arguments for the same nodes, workload, timing and bugs: a failing
    /// run's schedule replays on real processes with these and `--nemesis-file <schedule>`.
    pub real_args: Vec<String>,
}

impl SimSettings {
    /// The command that replays a failing run's schedule on real processes.
    pub fn real_command(&self) -> String {
        format!("fle-chaos test {} --nemesis-file", self.real_args.join(" "))
    }
}

/// A finished simulated run.
pub struct SimRun {
    pub info: TestInfo,
    /// history.jsonl, byte for byte.
    pub history: String,
    pub results: Results,
    /// What it reached, for exploration (`simulate_covered` only).
    pub coverage: Option<Coverage>,
}

impl SimRun {
    /// The checkers behind the verdict: those that applied and said it (an invalid run's
    /// false ones, not the unknown ones beside them; an unknown run's unknown ones).
    pub fn failed(&self) -> Vec<String> {
        let verdict = self.results.valid;
        (self.results.checkers.iter())
            .filter(|c| c.applicable && verdict != crate::checker::Validity::True)
            .filter(|c| c.valid == verdict)
            .map(|c| c.name.clone())
            .collect()
    }
}

/// The moment the simulated history's wall clock starts: fixed, so a seed gives the same bytes.
const WALL_START_MS: i64 = 1_800_000_000_000;

pub fn simulate_one(s: &SimSettings, seed: u64) -> SimRun {
    simulate(s, seed, false)
}

/// [`simulate_one`], also taking what the run reached after every event (`coverage.rs`).
pub fn simulate_covered(s: &SimSettings, seed: u64) -> SimRun {
    simulate(s, seed, true)
}

fn simulate(s: &SimSettings, seed: u64, covered: bool) -> SimRun {
    let names: Vec<String> = (1..=s.nodes as u64).map(node_name).collect();
    let sids: Vec<u64> = (1..=s.nodes as u64).collect();
    let observers: Vec<u64> = s.observers.iter().filter_map(|o| sid_of(o)).collect();
    let base = Instant::now();
    let servers: BTreeMap<u64, Server> = sids
        .iter()
        .map(|&sid| (sid, Server::new(sid, &sids, &observers, &s.timing, base)))
        .collect();
    let rec = SimRecorder::new(&names, &s.observers);
    let mut w = World::new(servers, Streams::new(seed ^ 0x005e_ed51_u64), rec);
    w.observers = s.observers.clone();
    w.client_timeout_ns = s.workload.timeout_ms * 1_000_000;
    w.client_period_ns = (s.workload.clients as f64 / s.workload.rate * 1e9) as u64;
    w.read_period_ns = (1e9 / s.workload.observe_hz) as u64;
    // Status reads and their invokes are most of the history: reserved at once, its text is
    // not copied again as it grows (a 15 MB copy, 3 % of a run's time). A read's two
    // lines take about 300 bytes per node (the election's votes), 1.6 KB at 5 nodes (23.4 MB
    // in a default run); reserved with some room.
    let reads = s.time_limit.as_secs_f64() * s.workload.observe_hz * s.nodes as f64;
    let per_read = 150.0 + 350.0 * s.nodes as f64;
    w.rec.text.reserve((reads * per_read) as usize);
    w.status_timeout_ns = crate::commands::run::STATUS_TIMEOUT.as_nanos() as u64;
    w.wall_start_ms = WALL_START_MS;
    w.max_events = s.max_events;
    w.coverage = covered.then(Default::default);

    for &sid in &sids {
        w.start(sid);
        let offset = w.read_period_ns * sid / s.nodes as u64;
        w.at(offset, Ev::Read { node: sid });
    }
    if s.workload.kind == Kind::Writes {
        w.start_clients(s.workload.clients);
    }
    let window = fault_window(s.time_limit);
    let faults_planned: usize = (plan(&s.schedule, seed, window).iter())
        .map(|f| 1 + f.parts.len())
        .sum();
    let end = s.time_limit.as_nanos() as u64;
    let world = Rc::new(RefCell::new(w));
    let (time_limit, steering) = (s.time_limit, s.steering.clone());
    let mut nemesis = SimNemesis::new(Rc::clone(&world), &s.schedule, seed, time_limit, steering);
    let mut nemesis_at = Some(0);
    // The run proper: events and the nemesis in time order.
    loop {
        let due = nemesis_at.filter(|t| *t <= end);
        let ev = world.borrow_mut().pop(due.unwrap_or(end).min(end));
        match (ev, due) {
            (Some(ev), _) => world.borrow_mut().handle(ev),
            (None, Some(t)) if t < end => {
                let now = world.borrow().rec.now.max(t);
                world.borrow_mut().rec.now = now;
                nemesis_at = nemesis.step();
            }
            _ => break,
        }
    }
    world.borrow_mut().rec.now = end;
    nemesis.stop();
    let mut w = world.borrow_mut();
    w.clients_stopped = true;
    // Writes in flight run to their outcome (the real clients' do, to their timeout).
    let drain_until = end + w.client_timeout_ns + 1;
    while w.writes_in_flight() {
        match w.pop(drain_until) {
            Some(ev) => w.handle(ev),
            None => break,
        }
    }
    nemesis.final_heal(&mut w);
    let healed = w.rec.view.final_heal().map_or(w.now(), |h| h.time);
    let give_up = w.now() + s.recovery_timeout.as_nanos() as u64;
    loop {
        if w.rec.view.settled(healed).is_settled() {
            break;
        }
        match w.pop(give_up) {
            Some(ev) => w.handle(ev),
            None => break,
        }
    }
    final_reads(&mut w);
    let info = test_info(s, seed, &names, faults_planned);
    let digest = w.rec.digest();
    let mut results = judge(digest, &w.rec.text, &info);
    with_oracle(&mut results, w.oracle.result());
    if let Some(at) = w.runaway {
        cut_short(&mut results, at, w.handled);
    }
    SimRun {
        info,
        history: std::mem::take(&mut w.rec.text),
        results,
        coverage: w.coverage.take(),
    }
}

/// One `final-log` per node: its committed log, or why it could not be read.
fn final_reads(w: &mut World) {
    let sids: Vec<u64> = w.servers.keys().copied().collect();
    for sid in sids {
        let name = node_name(sid);
        if w.life(sid) == super::server::Life::Up {
            let d = &w.servers[&sid].disk;
            let entries: Vec<serde_json::Value> = d
                .txns()
                .iter()
                .take_while(|t| t.zxid <= d.committed())
                .map(|t| serde_json::json!({ "zxid": t.zxid, "value": t.value }))
                .collect();
            let v = serde_json::json!({ "entries": entries, "last_committed_zxid": d.committed() });
            w.rec
                .record(&name, EventType::Ok, F::FinalLog, Some(&name), v);
        } else {
            let v = serde_json::json!({ "error": "not running" });
            w.rec
                .record(&name, EventType::Fail, F::FinalLog, Some(&name), v);
        }
    }
}

fn test_info(s: &SimSettings, seed: u64, names: &[String], faults_planned: usize) -> TestInfo {
    let kinds = s.schedule.kinds();
    TestInfo::new(RunSpec {
        name: "sim".into(),
        target: "sim".into(),
        nodes: names.to_vec(),
        observers: s.observers.clone(),
        workload: s.workload.name.clone(),
        workload_settings: WorkloadSettings {
            kind: Some(s.workload.kind.name().into()),
            rest: Default::default(),
        },
        nemesis: kinds.iter().map(|k| k.name().to_string()).collect(),
        seed,
        time_limit: s.time_limit,
        tick_ms: s.timing.tick.as_millis() as u64,
        init_limit: s.timing.init_limit,
        sync_limit: s.timing.sync_limit,
        started_at: chrono::DateTime::from_timestamp_millis(WALL_START_MS).unwrap_or_default(),
        replay_command: format!("{} --runs 1 --seed {seed}", s.command),
        status_timeout: crate::commands::run::STATUS_TIMEOUT,
        recovery_timeout: s.recovery_timeout,
        faults_planned,
        zookeeper_config: Default::default(),
        made_by: MadeBy::Simulate(SimulatedSettings {
            simulated: true,
            simulate_args: Some(s.argv.clone()),
            bugs: s.timing.bugs.iter().map(|b| b.name.to_string()).collect(),
            schedule: Some(s.schedule.name.clone()),
        }),
    })
}

/// The oracle's verdict (`oracle.rs`) as one more result, in the combined verdict.
fn with_oracle(results: &mut Results, oracle: crate::checker::CheckResult) {
    results.valid = results.valid.and(oracle.valid);
    results.checkers.push(oracle);
}

/// A run cut short (`world::MAX_EVENTS`) cannot show what it did not reach: a checker that
/// found nothing is unknown, not valid; a violation it found stands.
fn cut_short(results: &mut Results, at_ns: u64, events: u64) {
    use crate::checker::Validity;
    for c in results.checkers.iter_mut() {
        if c.applicable && c.valid == Validity::True {
            c.valid = Validity::Unknown;
            c.explanation = format!(
                "The simulation was cut short at {:.3} s after {events} events (more than the \
                 simulator handles in a run: a message storm, which real processes pace with \
                 their CPU and TCP and virtual time does not); replay the schedule on real \
                 processes. Before that: {}",
                at_ns as f64 / 1e9,
                c.explanation
            );
        }
    }
    results.valid = (results.checkers.iter())
        .filter(|c| c.applicable)
        .fold(Validity::True, |v, c| v.and(c.valid));
}

/// The checkers on the history's digest (`text` gives an evidence line by position), as
/// `fle-chaos check` would judge the same lines.
pub fn judge(digest: Result<Digest, String>, text: &str, info: &TestInfo) -> Results {
    let opts = CheckOptions::default().for_run(info);
    match digest {
        Ok(d) => {
            // Split only when a checker asks for an evidence line: a valid run never does.
            let lines = std::cell::OnceCell::new();
            crate::checker::check_digest(&d, info, &opts, |pos| {
                (lines.get_or_init(|| text.lines().collect::<Vec<&str>>()))
                    .get(pos as usize)
                    .and_then(|l| serde_json::from_str(l).ok())
                    .unwrap_or_default()
            })
        }
        Err(why) => crate::checker::unreadable(why),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::sim::cli::{settings, settings_of, SimulateArgs};

    fn sim(flags: &[&str]) -> SimSettings {
        settings_of(flags).expect("settings")
    }

    /// The fault kinds the simulator models.
    const MODELLED: [&str; 7] = [
        "kill",
        "pause",
        "partition",
        "clock",
        "power-loss",
        "packet",
        "corrupt",
    ];

    /// Same seed, same bytes, for every fault kind the simulator models (and the default).
    #[test]
    fn a_seed_gives_the_same_history_bytes_under_every_fault_kind() {
        for kinds in MODELLED {
            let s = sim(&[
                "--nodes",
                "3",
                "--time-limit",
                "12",
                "--nemesis",
                kinds,
                "--nemesis-interval",
                "2",
            ]);
            for seed in [1, 2] {
                let (a, b) = (simulate_one(&s, seed), simulate_one(&s, seed));
                assert!(
                    a.history == b.history,
                    "{kinds} seed {seed}: histories differ"
                );
                assert!(
                    a.history.contains(&format!("\"f\":\"{kinds}\"")),
                    "{kinds}: no such fault in the history"
                );
                // Whatever the kinds, the run ends with the final heal's verify, so recovery
                // is judged (a kill-only run once came out unknown for want of it).
                assert!(a.history.contains(r#""verify":true"#), "{kinds}: no verify");
                assert_eq!(
                    a.results.valid,
                    crate::checker::Validity::True,
                    "{kinds} seed {seed}: {:?}",
                    a.failed()
                );
            }
            assert_ne!(
                simulate_one(&s, 1).history,
                simulate_one(&s, 2).history,
                "{kinds}: seeds do not matter"
            );
        }
    }

    /// The correct node under the default schedule: judged valid (a simulated run's checkers
    /// see what a real run's see).
    #[test]
    fn the_correct_node_is_valid_with_writes_under_kills_and_partitions() {
        let s = sim(&[
            "--nodes",
            "3",
            "--time-limit",
            "20",
            "--nemesis",
            "kill,pause,partition,power-loss",
            "--nemesis-interval",
            "3",
        ]);
        for seed in 1..=5 {
            let run = simulate_one(&s, seed);
            let bad: Vec<_> = run
                .results
                .checkers
                .iter()
                .filter(|c| c.valid != crate::checker::Validity::True)
                .map(|c| format!("{}: {}", c.name, c.explanation))
                .collect();
            assert_eq!(
                run.results.valid,
                crate::checker::Validity::True,
                "seed {seed}: {bad:?}"
            );
            assert!(run.history.contains("\"f\":\"write\""), "no writes");
            let injected = run
                .history
                .lines()
                .filter(|l| {
                    l.contains(r#""process":"nemesis","type":"info""#)
                        && !l.contains(r#""final":true"#)
                })
                .count();
            assert!(injected > 0, "seed {seed}: no fault injected");
        }
    }

    /// A seeded bug of fle-node's election is found: the quorum of n/2 elects two leaders.
    #[test]
    fn the_quorum_minority_bug_is_found_under_partitions() {
        let s = sim(&[
            "--nodes",
            "4",
            "--time-limit",
            "30",
            "--nemesis",
            "partition",
            "--nemesis-interval",
            "3",
            "--bug",
            "quorum-minority",
        ]);
        let found = (1..=10).find_map(|seed| {
            let run = simulate_one(&s, seed);
            (run.results.valid == crate::checker::Validity::False).then_some(run)
        });
        let run = found.expect("quorum-minority not found in 10 simulated runs");
        // The digest fed line by line as the run wrote them judges as the written file would.
        let from_text = crate::checker::model::digest_lines(
            &run.history.lines().collect::<Vec<_>>(),
            &run.info.nodes,
        );
        let again = judge(from_text, &run.history, &run.info);
        // The history's checkers, that is: the oracle judges the servers, not the lines.
        let of_history = (run.results.checkers.iter())
            .filter(|c| c.name != crate::commands::sim::oracle::NAME)
            .collect::<Vec<_>>();
        assert_eq!(
            serde_json::to_string(&again.checkers).unwrap(),
            serde_json::to_string(&of_history).unwrap()
        );
    }

    /// A composed part with its own trigger waits for it, as on real nodes, and a part aimed
    /// at `main` hits the nodes its main fault hit: `epoch-before-txns`'s power loss fires on a
    /// read showing one of the paused followers synced, and cuts the power of those followers.
    #[test]
    fn a_composed_part_waits_for_its_own_trigger_and_aims_at_the_main_nodes() {
        let s = sim(&["--nemesis-file", "epoch-before-txns", "--time-limit", "30"]);
        let (mut fired, mut seen) = (0, 0);
        for seed in 1..=5 {
            let run = simulate_one(&s, seed);
            let values: Vec<serde_json::Value> = (run.history.lines())
                .filter(|l| l.contains(r#""process":"nemesis","type":"info""#))
                .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["value"].clone())
                .collect();
            let nodes = |v: &serde_json::Value| v["nodes"].clone();
            for (i, v) in values.iter().enumerate() {
                if v["trigger"] != "follower-synced" {
                    continue;
                }
                seen += 1;
                // The main fault (the pause) is the last record before its parts that has no
                // `after`: its nodes are the followers the power loss must hit.
                let main = (values[..i].iter().rev())
                    .find(|m| m["target"] == "followers-low")
                    .expect("the composition's main fault before its part");
                assert_eq!(v["watched"], nodes(main), "seed {seed}: watched {v}");
                if v.get("trigger_index").is_some() {
                    fired += 1;
                    let node = v["trigger_node"].as_str().unwrap();
                    assert!(nodes(main).as_array().unwrap().iter().any(|n| n == node));
                    assert_eq!(nodes(v), nodes(main), "seed {seed}: {v}");
                } else {
                    assert_eq!(v["trigger_missed"], true, "{v}");
                }
            }
        }
        assert!(seen >= 5, "the triggered part was dealt {seen} times");
        assert!(fired * 2 >= seen, "fired {fired} of {seen}");
    }

    /// fle-node's Zab recovery bugs are found by `durability` within a few seeds of the default
    /// schedule: the leader's sync plan, the follower's fsync before ACK and the commit quorum
    /// all run here as on real nodes. (This replaced the node crate's own partial Zab simulator,
    /// `zab/sim_tests.rs`, which drove the bare machines with a hand-written election; the
    /// smoke below is its correct-node half, judged by the checkers.)
    #[test]
    fn zab_recovery_bugs_are_found_by_durability() {
        for bug in [
            "diff-without-trunc",
            "ack-before-fsync",
            "commit-quorum-minority",
        ] {
            let s = sim(&["--bug", bug]);
            let found = (1..=10).find(|&seed| {
                simulate_one(&s, seed)
                    .failed()
                    .contains(&"durability".to_string())
            });
            assert!(
                found.is_some(),
                "{bug}: durability found nothing in 10 seeds"
            );
        }
    }

    /// Observers in simulation: the correct node with 2 observers is valid and repeatable, and
    /// each seeded observer bug is found within a few seeds, by the observers checker.
    #[test]
    fn observers_are_simulated_and_their_seeded_bugs_found() {
        let args = ["--nodes", "5", "--observers", "2", "--time-limit", "30"];
        let s = sim(&args);
        assert_eq!(s.observers, ["n4", "n5"]);
        for seed in 1..=4 {
            let run = simulate_one(&s, seed);
            assert_eq!(
                run.results.valid,
                crate::checker::Validity::True,
                "seed {seed}: {:?}",
                run.failed()
            );
            assert!(run.history.contains(r#""state":"OBSERVING""#));
            assert_eq!(run.history, simulate_one(&s, seed).history);
        }
        for bug in [
            "observer-vote-counted",
            "observer-ack-counted",
            "observer-informed-early",
        ] {
            let s = sim(&[&args[..], &["--bug", bug]].concat());
            let found = (1..=12).any(|seed| {
                let run = simulate_one(&s, seed);
                run.failed().contains(&"observers".to_string())
            });
            assert!(
                found,
                "{bug}: the observers checker found nothing in 12 seeds"
            );
        }
    }

    /// The smoke: 2,000 seeded runs of 3 correct nodes under writes and the default mixed
    /// schedule, 20 simulated seconds each (about 10 s on 2 cores): none invalid or unknown,
    /// every fault kind of the default met in the first 100, and every 20th seed's history
    /// the same twice.
    #[test]
    fn a_smoke_of_two_thousand_runs_of_the_correct_node_is_valid_and_repeatable() {
        let s = sim(&["--nodes", "3", "--time-limit", "20"]);
        let bad = std::sync::Mutex::new(Vec::new());
        let kinds = std::sync::Mutex::new(std::collections::BTreeSet::new());
        crate::commands::sim::batch::run_seeds(
            &s,
            1,
            2000,
            2,
            || true,
            |seed, run| {
                if run.results.valid != crate::checker::Validity::True {
                    bad.lock().unwrap().push((seed, run.failed()));
                }
                if seed % 20 == 0 {
                    assert!(
                        simulate_one(&s, seed).history == run.history,
                        "seed {seed}: two histories"
                    );
                }
                if seed > 100 {
                    return;
                }
                let mut k = kinds.lock().unwrap();
                for kind in crate::history::FaultKind::ALL {
                    if run.history.contains(&format!(r#""f":"{}""#, kind.name())) {
                        k.insert(kind.name());
                    }
                }
            },
        );
        assert_eq!(bad.into_inner().unwrap(), vec![], "(seed, failed checkers)");
        let kinds = kinds.into_inner().unwrap();
        let default: Vec<&str> = (s.schedule.faults.iter())
            .flat_map(|f| f.self_and_parts())
            .map(|f| f.kind.name())
            .collect();
        assert!(default.len() >= 5, "the default mixed: {default:?}");
        for kind in default {
            assert!(kinds.contains(kind), "{kind} never injected: {kinds:?}");
        }
    }

    /// A run cut short (a message storm, here a tiny event budget) is unknown, never valid:
    /// it did not reach what it would have checked.
    #[test]
    fn a_run_cut_short_is_unknown_not_valid() {
        let s = SimSettings {
            max_events: 5_000,
            ..sim(&["--nodes", "3", "--time-limit", "20"])
        };
        let run = simulate_one(&s, 1);
        assert_eq!(run.results.valid, crate::checker::Validity::Unknown);
        let safety = (run.results.checkers.iter())
            .find(|c| c.name == "election-safety")
            .unwrap();
        assert_eq!(safety.valid, crate::checker::Validity::Unknown);
        assert!(
            safety.explanation.contains("cut short"),
            "{}",
            safety.explanation
        );
        assert_eq!(
            simulate_one(&sim(&["--nodes", "3", "--time-limit", "20"]), 1)
                .results
                .valid,
            crate::checker::Validity::True,
            "the same run in full is valid"
        );
    }

    #[test]
    fn bad_input_is_one_line_naming_it() {
        let epoch = std::env::temp_dir().join(format!("flc-sim-epoch-{}.toml", std::process::id()));
        std::fs::write(
            &epoch,
            "[[fault]]\nkind = \"corrupt\"\nfile = \"currentEpoch\"\n",
        )
        .unwrap();
        let epoch_file = epoch.display().to_string();
        for (flags, needle) in [
            (
                vec!["--nemesis-file", epoch_file.as_str()],
                "cannot model corrupt of an epoch file",
            ),
            (vec!["--runs", "0"], "--test-count 0"),
            (vec!["--test-count", "0"], "--test-count 0"),
            (vec!["--budget", "0s"], "--budget 0"),
            (vec!["--nemesis", "frames"], "cannot model frames"),
            (vec!["--bug", "no-such-bug"], "--bug no-such-bug"),
            (vec!["--bug", "blocking-connect"], "cannot reach it"),
            (vec!["--nodes", "0"], "--nodes 0"),
            (
                vec!["--zookeeper-version", "3.9.6"],
                "the simulator runs fle-node",
            ),
        ] {
            let words: Vec<String> = flags.iter().map(|w| w.to_string()).collect();
            let err = settings(&SimulateArgs::from_words(&words).unwrap()).expect_err("refused");
            let text = format!("{err:#}");
            assert!(text.contains(needle) && !text.contains('\n'), "{text}");
            assert_eq!(crate::exit::code_for(&err), crate::exit::BAD_ARGS, "{text}");
        }
        let _ = std::fs::remove_file(&epoch);
    }
}
