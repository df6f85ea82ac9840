//! Timed schedules on a real cluster, and shrinking a real failure.
//!
//! - A timed schedule (`[[step]]`s) is run at its times on its nodes, and the steps read back
//!   from the run's history (`nemesis::timed::of_run`) are the same faults at the same times,
//!   a packet fault with its mode and links.
//! - Bad timed files and bad `shrink` input: one line, exit 254, nothing started.
//! - `fle-chaos shrink` on a run of the seeded `--bug quorum-minority` (FLE and Zab count n/2
//!   servers as a quorum) under the default mixed schedule: the minimal sequence has at most
//!   2 faults and reproduces leader-stepdown's failure (a leader alone counts itself a quorum and
//!   never steps down) in at least half of its final replays,
//!   as the replays' own results.json files say; no zombie is left once it exits.

use crate::support::exclusive::{hold, Exclusive};
use crate::support::run::{
    fle_chaos, fle_node, leftovers, orphaned_zombies, resources, root_or_skip, run_dir, spawn_test,
    wait_exit,
};
use fle_chaos::checker::Validity;
use fle_chaos::commands::shrink::{ShrinkOutcome, Status};
use fle_chaos::history::FaultKind;
use fle_chaos::nemesis::schedule::{PacketMode, Schedule, TargetSpec};
use fle_chaos::nemesis::timed;
use std::path::Path;
use std::time::Duration;

const STEPS: &str = r#"
[[step]]
at = "1.5s"
kind = "kill"
target = "n2"
duration = "1.5s"

[[step]]
at = "3.5s"
kind = "partition"
drops = { n1 = ["n3"], n2 = ["n3"] }
duration = "1.5s"

[[step]]
at = "5.2s"
kind = "packet"
links = [["n1", "n3"]]
mode = "loss"
percent = 50.0
duration = "1s"
"#;

#[test]
fn a_timed_schedule_runs_at_its_times_and_reads_back_from_the_history() {
    if !root_or_skip("a_timed_schedule_runs_at_its_times_and_reads_back_from_the_history") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("steps.toml");
    std::fs::write(&file, STEPS).unwrap();
    let out = tmp.path().join("out");
    let args = [
        "--nodes",
        "3",
        "--time-limit",
        "7",
        "--seed",
        "1",
        "--recovery-timeout",
        "10",
    ];
    let mut child = spawn_test(
        &[&args[..], &["--nemesis-file", file.to_str().unwrap()]].concat(),
        &out,
        &fle_node(),
    );
    let code = wait_exit(&mut child, Duration::from_secs(120));
    let stderr = std::fs::read_to_string(out.with_extension("stderr")).unwrap_or_default();
    assert!(matches!(code, Some(0) | Some(2)), "exit {code:?}: {stderr}");
    let dir = run_dir(&out).unwrap();
    assert!(leftovers(&resources(&dir)).is_empty());
    let rec = timed::of_run(&dir).unwrap();
    assert_eq!(rec.steps.len(), 3, "{:#?}", rec.steps);
    let (kill, cut, packet) = (&rec.steps[0], &rec.steps[1], &rec.steps[2]);
    assert_eq!(kill.template.kind, FaultKind::Kill);
    assert_eq!(kill.template.target, TargetSpec::Nodes(vec!["n2".into()]));
    assert_eq!(cut.template.kind, FaultKind::Partition);
    let drops = cut
        .template
        .drops
        .as_ref()
        .expect("a one-way cut is not groups");
    let drops: Vec<(String, Vec<String>)> = drops
        .iter()
        .map(|(n, f)| (n.clone(), f.iter().cloned().collect()))
        .collect();
    assert_eq!(
        drops,
        vec![
            ("n1".into(), vec!["n3".into()]),
            ("n2".into(), vec!["n3".into()])
        ]
    );
    // Times since the workload started, as written (the nemesis is late by a few ms at most
    // on an idle machine; a loaded one gets a generous margin).
    let near = |got: Duration, want_ms: u64| got.as_millis().abs_diff(want_ms.into()) < 400;
    assert!(
        near(kill.start, 1500) && near(cut.start, 3500),
        "{:?} {:?}",
        kill.start,
        cut.start
    );
    assert!(
        near(kill.duration, 1500) && near(cut.duration, 1500),
        "{:?} {:?}",
        kill.duration,
        cut.duration
    );
    // The packet fault as it was: its mode and its one link (n3 loses what n1 sends it).
    assert_eq!(packet.template.kind, FaultKind::Packet);
    assert_eq!(
        packet.template.packet,
        Some(PacketMode::Loss { percent: 50.0 })
    );
    let links = packet
        .template
        .drops
        .as_ref()
        .expect("the packet fault's links");
    assert_eq!(
        format!("{links:?}"),
        r#"{"n3": {"n1"}}"#,
        "{:#?}",
        packet.template
    );
    assert!(near(packet.start, 5200), "{:?}", packet.start);
    // Written back, it is a timed schedule with the same faults.
    let again = Schedule::from_toml("again", &timed::to_toml(&rec.steps, "x", false)).unwrap();
    let again = again.timed.unwrap();
    assert_eq!(again.len(), 3);
    assert_eq!(again[2].template.packet, packet.template.packet);
    assert_eq!(again[2].template.drops, packet.template.drops);
}

#[test]
fn bad_timed_files_and_bad_shrink_input_are_one_line_254() {
    let tmp = tempfile::tempdir().unwrap();
    let one_line = |args: &[&str], needle: &str| {
        let out = fle_chaos().args(args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(254), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(err.contains(needle), "{args:?}: {err}");
    };
    let bad = tmp.path().join("bad.toml");
    std::fs::write(
        &bad,
        "[[step]]\nat = \"1s\"\nkind = \"kill\"\ntarget = \"leader\"\nduration = \"1s\"\n",
    )
    .unwrap();
    let bad = bad.to_str().unwrap();
    one_line(
        &[
            "test",
            "--nodes",
            "3",
            "--net",
            "loopback",
            "--nemesis-file",
            bad,
        ],
        "line 1",
    );
    let late = tmp.path().join("late.toml");
    std::fs::write(
        &late,
        "[[step]]\nat = \"9s\"\nkind = \"kill\"\ntarget = \"n1\"\nduration = \"2s\"\n",
    )
    .unwrap();
    let late = late.to_str().unwrap();
    one_line(
        &[
            "test",
            "--nodes",
            "3",
            "--net",
            "loopback",
            "--time-limit",
            "10",
            "--nemesis-file",
            late,
        ],
        "raise --time-limit to at least 12",
    );
    one_line(&["shrink", "/nonexistent/run"], "/nonexistent/run");
    let not_a_run = tmp.path().join("empty");
    std::fs::create_dir(&not_a_run).unwrap();
    one_line(&["shrink", not_a_run.to_str().unwrap()], "not a run folder");
    one_line(
        &["shrink", not_a_run.to_str().unwrap(), "--budget", "soon"],
        "--budget",
    );
}

/// Runs the original: 3 nodes, kills, pauses and partitions (an explicit schedule, so that the
/// test does not change whenever `mixed` is retuned), the seeded bug.
fn original(out: &Path, seed: &str) -> (Option<i32>, std::path::PathBuf) {
    let args = [
        "--nodes",
        "3",
        "--time-limit",
        "12",
        "--recovery-timeout",
        "3",
        "--seed",
        seed,
        "--bug",
        "quorum-minority",
        "--nemesis",
        "kill,pause,partition",
        "--nemesis-interval",
        "2",
    ];
    let mut child = spawn_test(&args, out, &fle_node());
    let code = wait_exit(&mut child, Duration::from_secs(180));
    (code, run_dir(out).expect("the run folder"))
}

fn stepdown_failed(run: &Path) -> bool {
    let r = fle_chaos::commands::run::child::read_results(run).unwrap();
    r.checkers
        .iter()
        .any(|c| c.name == "leader-stepdown" && c.valid == Validity::False)
}

#[test]
fn a_quorum_minority_failure_shrinks_to_at_most_two_faults() {
    if !root_or_skip("a_quorum_minority_failure_shrinks_to_at_most_two_faults") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    // The seed fixes the faults: seeds 1 and 3 pause the first leader, which, alone a
    // "quorum" under the bug, never steps down after its resume (2026-12-01, both). Since
    // fle-node updates its election vote's epoch once serving (ZooKeeper 3.5+), these short
    // runs no longer show two leaders of one epoch (election-safety): the 5-minute default
    // runs still do. The next seed is tried if the machine hid it.
    let mut failing = None;
    for seed in ["1", "3", "2"] {
        let (code, run) = original(&tmp.path().join(format!("orig{seed}")), seed);
        if code == Some(1) && stepdown_failed(&run) {
            failing = Some(run);
            break;
        }
    }
    let run = failing.expect("an original run with leader-stepdown invalid");
    let shrink_out = tmp.path().join("shrink");
    // No zombie is left after the shrink exits (its replays are `fle-chaos test` children):
    // not beside a test whose `clean` leaves a SIGKILLed run's nodes to PID 1.
    let _dead_runs = hold(Exclusive::DeadRuns);
    let since =
        fle_chaos::control::backend::registry::process_start_time(std::process::id()).unwrap();
    let out = fle_chaos()
        .args([
            "shrink",
            run.to_str().unwrap(),
            "--checker",
            "leader-stepdown",
        ])
        .args(["--replays", "2", "--final-replays", "4", "--parallel", "6"])
        .args(["--budget", "6m", "--out", shrink_out.to_str().unwrap()])
        .output()
        .unwrap();
    let zombies = orphaned_zombies(since);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(zombies, Vec::<String>::new(), "{stderr}");
    let text = std::fs::read_to_string(shrink_out.join("shrink.json")).expect(&stderr);
    let o: ShrinkOutcome = serde_json::from_str(&text).unwrap();
    eprintln!("{stderr}");
    assert_eq!(o.status, Status::Shrunk, "{stderr}");
    assert!(o.minimal.faults <= 2, "{:#?}", o.minimal);
    assert!(o.minimal.faults <= o.original.faults);
    assert_eq!(o.final_replays, 4, "{stderr}");
    // The rate as the final replays' own results say it (the last candidate is the final one).
    let last = o.runs.iter().map(|r| r.candidate).max().unwrap();
    let finals: Vec<_> = o
        .runs
        .iter()
        .filter(|r| r.candidate == last && !r.cancelled)
        .collect();
    assert_eq!(finals.len(), 4);
    let reproduced = finals
        .iter()
        .filter(|r| stepdown_failed(r.run_dir.as_deref().unwrap()))
        .count();
    assert_eq!(reproduced as u32, o.reproduced);
    assert!(
        2 * o.reproduced >= o.final_replays,
        "{} of {}",
        o.reproduced,
        o.final_replays
    );
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    // The minimal file is a timed schedule holding exactly those faults (or none).
    let minimal = o.minimal_file.as_deref().unwrap();
    if o.minimal.faults > 0 {
        let s = Schedule::from_file(minimal).unwrap();
        assert_eq!(s.timed.unwrap().len(), o.minimal.faults);
    }
    assert!(
        o.replay_command.contains("--bug quorum-minority"),
        "{}",
        o.replay_command
    );
    // Every replay tore down what it made.
    for r in &o.runs {
        if let Some(d) = &r.run_dir {
            assert!(leftovers(&resources(d)).is_empty(), "{}", d.display());
        }
    }
}

/// A recorded packet fault is replayed with exactly its mode and links; one whose start does
/// not record them (a damaged line, an older run) is refused rather than replayed as another.
#[test]
fn a_packet_fault_replays_as_recorded_or_is_refused() {
    let fixture =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/quorum-minority-two-leaders");
    let tmp = tempfile::tempdir().unwrap();
    std::fs::copy(fixture.join("test.json"), tmp.path().join("test.json")).unwrap();
    let history = std::fs::read_to_string(fixture.join("history.jsonl")).unwrap();
    std::fs::write(tmp.path().join("history.jsonl"), &history).unwrap();
    // The partition run reads back as a partition step.
    let rec = timed::of_run(tmp.path()).unwrap();
    assert_eq!(rec.steps[0].template.kind, FaultKind::Partition);
    let as_packet = |fields: &str| {
        let text = history.replace(
            "\"f\":\"partition\",\"value\":{",
            &format!("\"f\":\"packet\",\"value\":{{{fields}"),
        );
        assert_ne!(text, history);
        std::fs::write(tmp.path().join("history.jsonl"), text).unwrap();
        timed::of_run(tmp.path())
    };
    // With its mode and links: the same packet fault.
    let rec = as_packet(r#""mode":"duplicate","percent":12.5,"links":[["n1","n2"],["n3","n2"]],"#)
        .unwrap();
    let step = &rec.steps[0].template;
    assert_eq!(step.kind, FaultKind::Packet);
    assert_eq!(step.packet, Some(PacketMode::Duplicate { percent: 12.5 }));
    assert_eq!(
        format!("{:?}", step.drops.as_ref().unwrap()),
        r#"{"n2": {"n1", "n3"}}"#
    );
    // Without its links: refused, naming the event.
    let Err(err) = as_packet(r#""mode":"loss","percent":30.0,"#) else {
        panic!("a packet fault without its links was turned into a step")
    };
    let err = format!("{err:#}");
    // Index 1: the fault's start as done (the nemesis's info event).
    assert!(
        err.contains("packet fault") && err.contains("history index 1") && err.contains("links"),
        "{err}"
    );
}
