//! Teardown on interruption: SIGINT to the controller mid-run removes everything the run
//! created; after a SIGKILL (no teardown possible) `fle-chaos clean` removes the leftovers.

mod run_support;

use run_support::*;
use std::time::Duration;

/// Starts a long run and waits until all its nodes are started; returns (child, run dir).
fn start_run(out: &std::path::Path, node: &str) -> (std::process::Child, std::path::PathBuf) {
    let mut child = spawn_test(
        &["--nodes", "3", "--time-limit", "300", "--nemesis", "none"],
        out,
        node,
    );
    let mut dir = None;
    let started = wait_for(Duration::from_secs(60), || {
        dir = run_dir(out);
        dir.as_ref()
            .map(|d| started_processes(d) >= 3)
            .unwrap_or(false)
    });
    if !started {
        let _ = child.kill();
        let _ = child.wait();
        panic!(
            "the run did not start its 3 nodes: {}",
            std::fs::read_to_string(out.with_extension("stderr")).unwrap_or_default()
        );
    }
    (child, dir.unwrap())
}

#[test]
fn sigint_mid_run_tears_everything_down() {
    if !root_or_skip("sigint_mid_run_tears_everything_down") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("reports");
    let (mut child, dir) = start_run(&out, &fle_node());
    let recorded = resources(&dir);
    assert!(!leftovers(&recorded).is_empty(), "the run created nothing?");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let code = wait_exit(&mut child, Duration::from_secs(60));
    assert_eq!(code, Some(2), "an interrupted run's verdict is unknown");
    assert_eq!(leftovers(&recorded), Vec::<String>::new());
    let stderr = std::fs::read_to_string(out.with_extension("stderr")).unwrap();
    assert!(stderr.contains("interrupted by SIGINT"), "{stderr}");
    // The partial history is readable.
    fle_chaos::history::store::read_history(&dir.join("history.jsonl")).unwrap();
}

#[test]
fn sigkill_leaves_resources_that_clean_removes() {
    if !root_or_skip("sigkill_leaves_resources_that_clean_removes") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("reports");
    // Node processes must outlive their controller for this test to mean something: a node
    // that runs until killed (a real process standing in for a server).
    let node = tmp.path().join("node.sh");
    std::fs::write(&node, "#!/bin/sh\nexec sleep 1000\n").unwrap();
    std::fs::set_permissions(&node, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let (mut child, dir) = start_run(&out, node.to_str().unwrap());
    child.kill().unwrap();
    child.wait().unwrap();
    let recorded = resources(&dir);
    let left = leftovers(&recorded);
    assert!(
        left.iter().any(|l| l.starts_with("namespace"))
            && left.iter().any(|l| l.starts_with("process")),
        "a SIGKILLed controller cannot clean up, yet nothing is left: {left:?}"
    );
    let clean = fle_chaos().arg("clean").output().unwrap();
    let said = String::from_utf8_lossy(&clean.stdout);
    assert_eq!(clean.status.code(), Some(0), "{said}");
    assert_eq!(leftovers(&recorded), Vec::<String>::new(), "{said}");
    assert!(said.contains("removed namespace"), "{said}");
}
