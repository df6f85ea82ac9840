//! Two runs at once do not interfere: each gets its own subnet and names, each observes only
//! its own nodes (which elect their own leader), and each tears down only what it created.

use crate::support::run::*;
use fle_chaos::control::backend::registry::Resource;
use fle_chaos::history::store::read_history;
use fle_chaos::history::{EventType, F};
use std::time::Duration;

#[test]
fn two_runs_at_once_do_not_interfere() {
    if !root_or_skip("two_runs_at_once_do_not_interfere") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let outs = [tmp.path().join("a"), tmp.path().join("b")];
    let args = ["--nodes", "3", "--time-limit", "8", "--nemesis", "none"];
    let mut children: Vec<_> = outs
        .iter()
        .map(|o| spawn_test(&args, o, &fle_node()))
        .collect();
    let codes: Vec<_> = children
        .iter_mut()
        .map(|c| wait_exit(c, Duration::from_secs(180)))
        .collect();
    let mut subnets = Vec::new();
    let mut names = Vec::new();
    for (o, code) in outs.iter().zip(&codes) {
        let stderr = std::fs::read_to_string(o.with_extension("stderr")).unwrap_or_default();
        assert!(matches!(code, Some(0) | Some(2)), "exit {code:?}: {stderr}");
        let dir = run_dir(o).unwrap();
        let recorded = resources(&dir);
        for r in &recorded {
            match r {
                Resource::Subnet { cidr, .. } => subnets.push(cidr.clone()),
                Resource::Netns { name } | Resource::Link { name } => names.push(name.clone()),
                _ => {}
            }
        }
        assert_eq!(leftovers(&recorded), Vec::<String>::new());
        let history = read_history(&fle_chaos::history::file::in_run(&dir)).unwrap();
        for node in ["n1", "n2", "n3"] {
            assert!(
                history.iter().any(|e| e.f == F::Status
                    && e.kind == EventType::Ok
                    && e.node.as_deref() == Some(node)),
                "{}: {node} never answered",
                dir.display()
            );
        }
        // Each run's nodes elected a leader among themselves.
        let leaders: std::collections::BTreeSet<u64> = history
            .iter()
            .filter(|e| e.f == F::Status && e.kind == EventType::Ok)
            .filter_map(|e| e.value["leader"].as_u64())
            .collect();
        assert!(
            !leaders.is_empty() && leaders.iter().all(|l| (1..=3).contains(l)),
            "{}: leaders {leaders:?}",
            dir.display()
        );
    }
    assert_eq!(subnets.len(), 2);
    assert_ne!(subnets[0], subnets[1], "both runs used {}", subnets[0]);
    let unique: std::collections::BTreeSet<_> = names.iter().collect();
    assert_eq!(
        unique.len(),
        names.len(),
        "a name was used twice: {names:?}"
    );
    assert!(names.iter().all(|n| n.starts_with("flc")));
}
