//! From simulation to the real world: `fle-chaos simulate --confirm` finds the seeded
//! `quorum-minority` bug (FLE and Zab count n/2 servers as a quorum) in simulated runs under
//! partitions, replays the first failure's `schedule.toml` with `fle-chaos test` on real
//! fle-node processes, and the real run is invalid for a checker the simulated run failed, as
//! the real run's own results.json says; the real run leaves nothing behind. And
//! `simulate --explore` keeps a failing input that its own replay command runs again.

use crate::support::run::{fle_chaos, leftovers, resources, root_or_skip};
use fle_chaos::checker::Validity;
use fle_chaos::commands::sim::explore::Made;
use fle_chaos::commands::sim::summary::SimSummary;
use fle_chaos::history::test_info::TestInfo;

/// The one `sim-*` folder `simulate --out OUT` made, and its summary.json.
fn summary_in(out: &std::path::Path) -> (std::path::PathBuf, SimSummary) {
    let folder = std::fs::read_dir(out)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.join("summary.json").is_file())
        .expect("a simulate folder with its summary");
    let summary = serde_json::from_slice(&std::fs::read(folder.join("summary.json")).unwrap());
    (folder, summary.unwrap())
}

#[test]
fn a_simulated_failure_replays_on_real_processes_invalid_for_the_same_checker() {
    if !root_or_skip("a_simulated_failure_replays_on_real_processes_invalid_for_the_same_checker") {
        return;
    }
    // No `HeavyCluster`: the simulated runs take under a second, and the real replay's
    // minority elects a leader of its own under any load (checked beside a ZooKeeper ensemble).
    let tmp = tempfile::tempdir().unwrap();
    let status = fle_chaos()
        .args([
            "simulate",
            "--runs",
            "50",
            "--bug",
            "quorum-minority",
            "--nemesis",
            "partition",
            "--nemesis-interval",
            "4",
            "--time-limit",
            "15",
            "--until-invalid",
            "--confirm",
            "1",
            "--out",
        ])
        .arg(tmp.path())
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(1), "the simulated verdict is invalid");
    let (folder, summary) = summary_in(tmp.path());
    let failure = summary.failures().next().expect("a failing simulated run");
    let [replay] = failure.replays.as_slice() else {
        panic!("the first failure replayed once: {:?}", failure.replays);
    };
    assert_eq!(replay.error, None);
    let real = replay.folder.as_ref().expect("the real run's folder");
    let results = fle_chaos::commands::run::child::read_results(real).expect("its results.json");
    let real_failed: Vec<&str> = (results.checkers.iter())
        .filter(|c| c.valid == Validity::False)
        .map(|c| c.name.as_str())
        .collect();
    assert!(
        real_failed
            .iter()
            .any(|c| failure.failed.iter().any(|f| f == c)),
        "simulated: {:?}, real: {real_failed:?}",
        failure.failed
    );
    assert!(replay.reproduced);
    assert!(leftovers(&resources(real)).is_empty(), "{}", real.display());
    for name in ["summary.html", "junit.xml"] {
        let text = std::fs::read_to_string(folder.join(name)).unwrap();
        assert!(
            text.contains("reproduced"),
            "{name} says nothing of the replay"
        );
    }
}

/// `simulate --explore` as a user runs it: it finds a seeded bug, says what it learnt, keeps
/// each failing input's folder under its own name; a fresh seed's failure replays as that seed,
/// a mutated input's from its schedule.toml, and that replay command fails it again (no root:
/// simulation only).
#[test]
fn an_explored_failure_keeps_its_input_and_its_replay_command_finds_it_again() {
    let tmp = tempfile::tempdir().unwrap();
    let out = fle_chaos()
        .args([
            "simulate",
            "--explore",
            "--runs",
            "48",
            "--nodes",
            "3",
            "--bug",
            "follow-single-leading",
            "--time-limit",
            "30",
            "--out",
        ])
        .arg(tmp.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("explored: "), "{stdout}");
    let (_, summary) = summary_in(tmp.path());
    let learnt = summary
        .exploration
        .as_ref()
        .expect("summary.json's exploration");
    assert!(
        learnt.corpus > 0 && !learnt.novelty.is_empty(),
        "{learnt:?}"
    );
    let replay_of = |fresh: bool| {
        let failure = summary
            .failures()
            .find(|f| (f.explored.as_ref()).is_some_and(|e| (e.made == Made::Fresh) == fresh))
            .unwrap_or_else(|| panic!("a failing input (fresh: {fresh}): {stdout}"));
        let run_dir = failure.folder.clone().expect("its folder");
        let name = run_dir.file_name().unwrap().to_string_lossy().into_owned();
        assert!(name.starts_with("explore-"), "{name}");
        let info = TestInfo::read(&run_dir.join("test.json")).unwrap();
        (failure.failed.clone(), info.replay_command)
    };
    let (_, fresh) = replay_of(true);
    assert!(
        !fresh.contains("--nemesis-file"),
        "a fresh seed replays as that seed: {fresh}"
    );
    let (failed, mutated) = replay_of(false);
    let words: Vec<&str> = mutated.split_whitespace().collect();
    assert_eq!(words[..2], ["fle-chaos", "simulate"], "{mutated}");
    assert!(words.contains(&"--nemesis-file"), "{mutated}");
    let again = tempfile::tempdir().unwrap();
    let replay = fle_chaos()
        .args(&words[1..])
        .arg("--out")
        .arg(again.path())
        .output()
        .unwrap();
    let replayed = String::from_utf8_lossy(&replay.stdout);
    assert_eq!(replay.status.code(), Some(1), "{mutated}: {replayed}");
    assert!(
        failed.iter().any(|c| replayed.contains(c.as_str())),
        "the replay fails {failed:?} again: {replayed}"
    );
}
