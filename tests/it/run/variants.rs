//! Variants of a run: as an unprivileged user on loopback addresses, and `--test-count`.

use crate::support::run::*;
use fle_chaos::history::store::read_history;
use fle_chaos::history::{EventType, F};
use std::time::Duration;

#[test]
fn loopback_run_works_without_root() {
    if !fle_chaos::control::is_root() || !std::path::Path::new("/usr/bin/setpriv").exists() {
        crate::support::skip::skip(
            "loopback_run_works_without_root",
            "needs root and setpriv to become nobody",
        );
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    std::fs::set_permissions(
        tmp.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    let out = tmp.path().join("reports");
    let o = std::process::Command::new("/usr/bin/setpriv")
        .args(["--reuid", "65534", "--regid", "65534", "--clear-groups"])
        .arg(env!("CARGO_BIN_EXE_fle-chaos"))
        .args([
            "test",
            "--net",
            "loopback",
            "--nodes",
            "3",
            "--time-limit",
            "4",
        ])
        .args(["--nemesis", "none", "--node-binary", &fle_node(), "--out"])
        .arg(&out)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(matches!(o.status.code(), Some(0) | Some(2)), "{err}");
    let dir = run_dir(&out).unwrap();
    let history = read_history(&fle_chaos::history::file::in_run(&dir)).unwrap();
    for node in ["n1", "n2", "n3"] {
        assert!(
            history.iter().any(|e| e.f == F::Status
                && e.kind == EventType::Ok
                && e.node.as_deref() == Some(node)
                && e.value["leader"].is_u64()),
            "{node} never reported a leader"
        );
    }
    let recorded = resources(&dir);
    assert!(recorded.iter().all(|r| !matches!(
        r,
        fle_chaos::control::backend::registry::Resource::Netns { .. }
    )));
    assert_eq!(leftovers(&recorded), Vec::<String>::new());
}

#[test]
fn test_count_runs_the_test_again_with_the_next_seed() {
    if !root_or_skip("test_count_runs_the_test_again_with_the_next_seed") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("reports");
    let mut child = spawn_test(
        &[
            "--nodes",
            "1",
            "--time-limit",
            "1",
            "--recovery-timeout",
            "1",
            "--nemesis",
            "none",
            "--test-count",
            "2",
            "--seed",
            "40",
            "--name",
            "twice",
        ],
        &out,
        &fle_node(),
    );
    let code = wait_exit(&mut child, Duration::from_secs(120));
    assert!(matches!(code, Some(0) | Some(2)), "exit {code:?}");
    let mut seeds: Vec<u64> = std::fs::read_dir(out.join("twice"))
        .unwrap()
        .map(|d| {
            let info =
                fle_chaos::history::test_info::TestInfo::read(&d.unwrap().path().join("test.json"))
                    .unwrap();
            info.seed
        })
        .collect();
    seeds.sort();
    assert_eq!(seeds, vec![40, 41]);
    let latest = run_dir(&out).unwrap();
    let info = fle_chaos::history::test_info::TestInfo::read(&latest.join("test.json")).unwrap();
    assert_eq!(info.seed, 41, "latest points at the last run");
}
