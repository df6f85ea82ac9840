//! From simulation to the real world: `fle-chaos simulate --confirm` finds the seeded
//! `quorum-minority` bug (FLE and Zab count n/2 servers as a quorum) in simulated runs under
//! partitions, replays the first failure's `schedule.toml` with `fle-chaos test` on real
//! fle-node processes, and the real run is invalid for a checker the simulated run failed, as
//! the real run's own results.json says; the real run leaves nothing behind.

use crate::support::run::{fle_chaos, leftovers, resources, root_or_skip};
use fle_chaos::checker::Validity;
use fle_chaos::commands::sim::summary::SimSummary;

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
    let folder = std::fs::read_dir(tmp.path())
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.join("summary.json").is_file())
        .expect("a simulate folder with its summary");
    let summary: SimSummary =
        serde_json::from_slice(&std::fs::read(folder.join("summary.json")).unwrap()).unwrap();
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
