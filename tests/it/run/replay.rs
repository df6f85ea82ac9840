//! A default run replays: a steered `mixed` run (3 nodes, 20 s, writes) writes the faults it
//! applied as `schedule.toml`, and `fle-chaos test --replay RUN_DIR` runs it again with the
//! run's settings and those faults: the same kinds on the same nodes, each within
//! `REPLAY_TOLERANCE` of its recorded time and duration.

use crate::support::run::*;
use fle_chaos::history::test_info::TestInfo;
use fle_chaos::nemesis::schedule::PlannedFault;
use fle_chaos::nemesis::timed;
use fle_chaos::store::SCHEDULE;
use std::path::Path;
use std::time::Duration;

/// How far a replayed fault may start or end from its recorded time: the nemesis applies each
/// step when due, and a fault's own apply (a kill, a mount's power cut) takes some ms.
const REPLAY_TOLERANCE: Duration = Duration::from_millis(500);

/// What a step is, time aside: its kind, nodes, cut and clock or packet setting.
fn what(f: &PlannedFault) -> String {
    let t = &f.template;
    format!(
        "{} {:?} groups={:?} drops={:?} clock={:?} packet={:?}",
        t.kind.name(),
        t.target,
        t.groups,
        t.drops,
        f.clock_delta_ms,
        t.packet
    )
}

fn near(a: Duration, b: Duration) -> bool {
    a.abs_diff(b) <= REPLAY_TOLERANCE
}

fn run(args: &[&str], out: &Path) -> std::path::PathBuf {
    let mut child = spawn_test(args, out, &fle_node());
    let code = wait_exit(&mut child, Duration::from_secs(240));
    let stderr = std::fs::read_to_string(out.with_extension("stderr")).unwrap_or_default();
    assert!(matches!(code, Some(0..=2)), "exit {code:?}: {stderr}");
    run_dir(out).unwrap_or_else(|| panic!("no run folder: {stderr}"))
}

#[test]
fn a_default_run_replays_the_same_faults_on_the_same_nodes() {
    if !root_or_skip("a_default_run_replays_the_same_faults_on_the_same_nodes") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let first = run(
        &["--nodes", "3", "--time-limit", "20", "--seed", "11"],
        &tmp.path().join("first"),
    );
    let info = TestInfo::read(&first.join("test.json")).unwrap();
    assert_eq!(info.workload, "writes", "the default workload");
    assert_eq!(
        info.replay_command,
        format!("fle-chaos test --replay {}", first.display())
    );
    assert!(first.join(SCHEDULE).is_file());
    let recorded = timed::of_run(&first).unwrap().steps;
    assert!(
        recorded.len() >= 2,
        "a 20 s default run applies faults: {recorded:?}"
    );

    let first_arg = first.to_string_lossy().into_owned();
    let second = run(&["--replay", &first_arg], &tmp.path().join("second"));
    let again = TestInfo::read(&second.join("test.json")).unwrap();
    assert_eq!(
        (
            &again.nodes,
            &again.workload,
            again.seed,
            again.time_limit_s
        ),
        (&info.nodes, &info.workload, info.seed, info.time_limit_s)
    );
    assert_eq!(
        (again.tick_ms, again.init_limit, again.sync_limit),
        (info.tick_ms, info.init_limit, info.sync_limit)
    );
    assert_eq!(again.settings.workload, info.settings.workload);
    let replayed = timed::of_run(&second).unwrap().steps;
    let shown = |s: &[PlannedFault]| -> Vec<String> {
        s.iter()
            .map(|f| format!("{} at {:?} for {:?}", what(f), f.start, f.duration))
            .collect()
    };
    assert_eq!(
        recorded.len(),
        replayed.len(),
        "recorded {:#?}\nreplayed {:#?}",
        shown(&recorded),
        shown(&replayed)
    );
    for (a, b) in recorded.iter().zip(&replayed) {
        assert_eq!(what(a), what(b));
        assert!(
            near(a.start, b.start) && near(a.start + a.duration, b.start + b.duration),
            "recorded {:#?}\nreplayed {:#?}",
            shown(&recorded),
            shown(&replayed)
        );
    }
}
