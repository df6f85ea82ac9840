//! The aiming nemesis on a real 3-node cluster, through `fle-chaos test`: a fault triggered by an
//! election fires at a node the observers saw LOOKING, and records the read that fired it; a
//! composed fault applies its part `after` its main fault's start, inside it, marked with the
//! group's name; a fault's `quiet_after` holds back the next one even when that one is
//! triggered, and a part's `watch` lets only the named nodes' reads fire it.

use crate::support;

use crate::support::run::{
    leftovers, nemesis_done, resources, root_or_skip, run_dir, spawn_test, wait_exit,
};
use fle_chaos::history::store::read_history;
use fle_chaos::history::{Event, EventType, F};
use std::time::Duration;

const SEC: u64 = 1_000_000_000;

/// Each fault cuts one node off (the one an election read names), and pauses another a second
/// in. The heal of one fault sets off the election the next one waits for (the cut-off node
/// went LOOKING).
const SCHEDULE: &str = r#"
interval = "2s"
duration = "3s"

[[fault]]
kind = "partition"
shape = "isolate-one"
target = "trigger"
when = "election"
wait = "3s"
compose = "cut+pause"

[[fault.with]]
kind = "pause"
target = "random"
after = "1s"
duration = "1s"
"#;

/// Runs `schedule` on 3 nodes for `time_limit` seconds with `seed`, checks that the run ended
/// with a verdict and left nothing behind, and returns its history and what the nemesis did
/// (for the failure messages).
fn run_schedule(schedule: &str, time_limit: &str, seed: &str) -> (Vec<Event>, String) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("schedule.toml");
    std::fs::write(&file, schedule).unwrap();
    let out = dir.path().join("reports");
    let args = [
        "--nodes",
        "3",
        "--time-limit",
        time_limit,
        "--seed",
        seed,
        "--nemesis-file",
        file.to_str().unwrap(),
    ];
    let mut child = spawn_test(&args, &out, &support::run::fle_node());
    let code = wait_exit(&mut child, Duration::from_secs(180));
    let stderr = std::fs::read_to_string(out.with_extension("stderr")).unwrap_or_default();
    assert!(matches!(code, Some(0..=2)), "exit {code:?}: {stderr}");
    let run = run_dir(&out).expect("the run folder");
    assert!(leftovers(&resources(&run)).is_empty());
    let h = read_history(&fle_chaos::history::file::in_run(&run)).unwrap();
    let story: Vec<String> = h
        .iter()
        .filter(|e| e.process == fle_chaos::history::NEMESIS && e.kind != EventType::Invoke)
        .map(|e| format!("{:.2}s {:?} {}", e.time as f64 / 1e9, e.f, e.value))
        .collect();
    (h, story.join("\n"))
}

#[test]
fn triggered_and_composed_faults_fire_where_and_when_they_aim() {
    if !root_or_skip("triggered_and_composed_faults_fire_where_and_when_they_aim") {
        return;
    }
    let (h, story) = run_schedule(SCHEDULE, "20", "2");

    let cuts = nemesis_done(&h, F::Partition);
    let fired: Vec<&&Event> = cuts
        .iter()
        .filter(|e| e.value["trigger"] == "election" && e.value.get("trigger_index").is_some())
        .collect();
    assert!(
        !fired.is_empty(),
        "no partition fired on an election:\n{story}"
    );
    for cut in &fired {
        // The read that fired it: a status read of the named node, showing it LOOKING, before
        // the fault; the fault cut off that node.
        let index = cut.value["trigger_index"].as_u64().unwrap();
        let read = h
            .iter()
            .find(|e| e.index == index)
            .expect("the trigger's read");
        let node = cut.value["trigger_node"].as_str().unwrap();
        assert_eq!(read.f, F::Status);
        assert_eq!(read.kind, EventType::Ok);
        assert_eq!(read.node.as_deref(), Some(node));
        assert_eq!(read.value["state"], "LOOKING", "{read:?}");
        assert!(read.index < cut.index && read.time <= cut.time);
        // isolate-one cut off exactly that node.
        let alone = serde_json::json!([node]);
        assert!(
            cut.value["components"].as_array().unwrap().contains(&alone),
            "{cut:?}"
        );
        assert_eq!(cut.value["composed"], "cut+pause");
    }
    // Every composed part: a pause marked with the group, about 1 s after its partition was
    // asked for (its invoke: applying the rules may take a while on a loaded machine) and
    // before that partition's heal.
    let heals = nemesis_done(&h, F::Heal);
    let pauses = nemesis_done(&h, F::Pause);
    assert!(!pauses.is_empty(), "no composed pause:\n{story}");
    let asked: Vec<&Event> = h
        .iter()
        .filter(|e| e.f == F::Partition && e.kind == EventType::Invoke)
        .collect();
    for pause in &pauses {
        assert_eq!(pause.value["composed"], "cut+pause", "{pause:?}");
        let cut = asked
            .iter()
            .rev()
            .find(|c| c.time < pause.time)
            .expect("a partition before the pause");
        let heal = heals
            .iter()
            .find(|e| e.time > cut.time)
            .expect("the partition's heal");
        let gap = pause.time - cut.time;
        assert!(
            (SEC * 8 / 10..SEC * 3).contains(&gap),
            "pause {gap} ns after its partition:\n{story}"
        );
        assert!(
            pause.time < heal.time,
            "the pause came after the heal:\n{story}"
        );
    }
}

/// The leader paused 2.5 s (after an election read, else at its time) and, while it is out, a
/// pause fired by a read of n2 only. A resumed leader finds its followers gone and steps down:
/// `quiet_after` keeps 3 s after that, where without it the next fault would fire on the
/// election it starts.
const WATCHED: &str = r#"
interval = "1s"
duration = "2500ms"

[[fault]]
kind = "pause"
target = "leader"
when = "election"
wait = "1s"
quiet_after = "3s"
compose = "pause+watched-pause"

[[fault.with]]
kind = "pause"
target = "trigger"
when = "election"
watch = "n2"
after = "500ms"
wait = "1500ms"
duration = "1800ms"
"#;

#[test]
fn a_triggered_fault_keeps_the_quiet_and_a_watch_fires_on_its_nodes_only() {
    if !root_or_skip("a_triggered_fault_keeps_the_quiet_and_a_watch_fires_on_its_nodes_only") {
        return;
    }
    let (h, story) = run_schedule(WATCHED, "30", "3");

    // Each main pause (target leader) comes no sooner than its predecessor's 2.5 s plus the
    // 3 s quiet.
    let pauses = nemesis_done(&h, F::Pause);
    let mains: Vec<&Event> = pauses
        .iter()
        .filter(|e| e.value["target"] == "leader")
        .copied()
        .collect();
    assert!(mains.len() >= 3, "{} main pauses:\n{story}", mains.len());
    for pair in mains.windows(2) {
        let gap = pair[1].time - pair[0].time;
        assert!(
            gap >= SEC * 54 / 10,
            "a pause {gap} ns after the one before, inside its quiet:\n{story}"
        );
    }
    // Every part a read fired was fired by a read of n2, which showed it LOOKING.
    let fired: Vec<&Event> = pauses
        .iter()
        .filter(|e| e.value["target"] != "leader" && e.value.get("trigger_index").is_some())
        .copied()
        .collect();
    assert!(!fired.is_empty(), "no part fired on a read:\n{story}");
    for pause in &fired {
        let index = pause.value["trigger_index"].as_u64().unwrap();
        let read = h.iter().find(|e| e.index == index).expect("the read");
        assert_eq!(read.node.as_deref(), Some("n2"), "{pause:?}\n{story}");
        assert_eq!(read.value["state"], "LOOKING", "{read:?}");
        assert_eq!(pause.value["nodes"], serde_json::json!(["n2"]), "{pause:?}");
    }
}
