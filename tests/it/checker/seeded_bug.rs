//! The checkers catch a real bug in a real cluster: fle-node started with the test-only
//! `--bug quorum-minority` (a quorum of n/2 instead of n/2+1) on 5 nodes, partitioned into
//! {n1,n2} {n3,n4} {n5}. The first leader, n5 (FLE's best vote), is cut off alone and steps
//! down; each pair, holding a "quorum" of 2, elects a leader, both picking the same next epoch
//! from the same accepted epochs: two servers lead one epoch, and election-safety says so. The
//! same run without the bug is judged safe, so the verdict is the bug's doing.

use crate::support;

use crate::support::run::{leftovers, resources, root_or_skip, run_dir, spawn_test, wait_exit};
use fle_chaos::checker::{Results, Validity};
use std::time::Duration;

const SPLIT: &str = "interval = \"2s\"\nduration = \"4s\"\n[[fault]]\nkind = \"partition\"\n\
    shape = \"groups\"\ngroups = [[\"n1\", \"n2\"], [\"n3\", \"n4\"]]\n";

/// Runs 5 nodes under the split; returns the exit code and results.json.
fn run(bug: bool, dir: &std::path::Path) -> (i32, Results) {
    let schedule = dir.join("split.toml");
    std::fs::write(&schedule, SPLIT).unwrap();
    let out = dir.join("reports");
    let mut args = vec![
        "--nodes",
        "5",
        "--time-limit",
        "10",
        "--seed",
        "3",
        "--nemesis-file",
        schedule.to_str().unwrap(),
    ];
    if bug {
        // Two leaders of one epoch never settle into one: the verdict is in the history
        // already, so the run need not wait the default 30 s for a recovery that cannot come.
        args.extend(["--bug", "quorum-minority", "--recovery-timeout", "5"]);
    }
    let mut child = spawn_test(&args, &out, &support::run::fle_node());
    let code = wait_exit(&mut child, Duration::from_secs(120)).expect("the run ends");
    let run = run_dir(&out).expect("the run folder");
    assert!(leftovers(&resources(&run)).is_empty());
    let results = std::fs::read_to_string(run.join("results.json")).expect("results.json");
    (code, serde_json::from_str(&results).unwrap())
}

fn verdict(results: &Results, checker: &str) -> Validity {
    results
        .checkers
        .iter()
        .find(|c| c.name == checker)
        .expect(checker)
        .valid
}

#[test]
fn a_minority_quorum_under_a_partition_is_caught_by_election_safety() {
    if !root_or_skip("a_minority_quorum_under_a_partition_is_caught_by_election_safety") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (code, results) = run(true, dir.path());
    assert_eq!(
        verdict(&results, "election-safety"),
        Validity::False,
        "{results:#?}"
    );
    let safety = results
        .checkers
        .iter()
        .find(|c| c.name == "election-safety")
        .unwrap();
    assert!(
        !safety.evidence.is_empty(),
        "the violation must come with evidence"
    );
    assert_eq!(code, fle_chaos::exit::INVALID);
}

#[test]
fn the_same_partition_without_the_bug_is_safe() {
    if !root_or_skip("the_same_partition_without_the_bug_is_safe") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (code, results) = run(false, dir.path());
    assert_eq!(
        verdict(&results, "election-safety"),
        Validity::True,
        "{results:#?}"
    );
    assert_eq!(
        verdict(&results, "epoch-monotonic"),
        Validity::True,
        "{results:#?}"
    );
    assert_ne!(code, fle_chaos::exit::INVALID, "{results:#?}");
}
