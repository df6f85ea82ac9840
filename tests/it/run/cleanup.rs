//! Teardown on interruption: SIGINT/SIGTERM to the controller mid-run removes everything the
//! run created, records an `interrupted` event, exits 130/143 and starts no further
//! `--test-count` run; after a SIGKILL (no teardown possible) `fle-chaos clean` removes the
//! leftovers.

use crate::support::exclusive::{hold, Exclusive};
use crate::support::run::*;
use std::path::{Path, PathBuf};
use std::process::{Child, Output};
use std::time::Duration;

/// `clean` cleans every dead run of its registry: these tests' runs and cleans use one of their
/// own, so that a clean never meets another test's run that is tearing down.
fn registry() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("flc-registry-run-cleanup")
}

/// `spawn_test`, the run listed in `registry()`.
fn spawn(args: &[&str], out: &Path, node: &str) -> Child {
    test_command(args, out, node)
        .env("FLE_CHAOS_REGISTRY", registry())
        .spawn()
        .unwrap()
}

/// `fle-chaos clean` of `registry()`.
fn clean() -> Output {
    fle_chaos()
        .arg("clean")
        .env("FLE_CHAOS_REGISTRY", registry())
        .output()
        .unwrap()
}

/// Starts a long run and waits until all its nodes are started; returns (child, run dir).
fn start_run(out: &Path, node: &str) -> (Child, PathBuf) {
    let mut child = spawn(
        &[
            "--nodes",
            "3",
            "--time-limit",
            "300",
            "--nemesis",
            "none",
            "--test-count",
            "3",
        ],
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

/// Sends `signal` to a run mid-way and checks that it tore everything down.
fn signal_mid_run_tears_everything_down(signal: nix::sys::signal::Signal, name: &str, exit: i32) {
    // Serialized with the `clean` tests: a clean must not meet a run that is tearing down.
    let _dead_runs = hold(Exclusive::DeadRuns);
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("reports");
    let (mut child, dir) = start_run(&out, &fle_node());
    let recorded = resources(&dir);
    assert!(!leftovers(&recorded).is_empty(), "the run created nothing?");
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), signal).unwrap();
    let code = wait_exit(&mut child, Duration::from_secs(60));
    let stderr = std::fs::read_to_string(out.with_extension("stderr")).unwrap();
    assert_eq!(
        code,
        Some(exit),
        "{name} exits as shells report it: {stderr}"
    );
    assert_eq!(leftovers(&recorded), Vec::<String>::new());
    assert!(
        stderr.contains(&format!("interrupted by {name}")),
        "{stderr}"
    );
    // The partial history is readable and says why it ends.
    let history =
        fle_chaos::history::store::read_history(&fle_chaos::history::file::in_run(&dir)).unwrap();
    let last = history.last().expect("events");
    assert_eq!(last.f, fle_chaos::history::F::Interrupted, "{last:?}");
    assert_eq!(last.process, "controller");
    assert_eq!(last.value["signal"], name);
    // --test-count 3: the interrupted run was the last one.
    let runs = std::fs::read_dir(dir.parent().unwrap()).unwrap().count();
    assert_eq!(runs, 1, "a run started after the interruption");
}

#[test]
fn sigint_mid_run_tears_everything_down() {
    if root_or_skip("sigint_mid_run_tears_everything_down") {
        signal_mid_run_tears_everything_down(nix::sys::signal::Signal::SIGINT, "SIGINT", 130);
    }
}

#[test]
fn sigterm_mid_run_tears_everything_down() {
    if root_or_skip("sigterm_mid_run_tears_everything_down") {
        signal_mid_run_tears_everything_down(nix::sys::signal::Signal::SIGTERM, "SIGTERM", 143);
    }
}

/// A node binary that runs until killed (a real process standing in for a server): node
/// processes must outlive their controller for these tests to mean something.
fn sleeping_node(dir: &std::path::Path) -> std::path::PathBuf {
    let node = dir.join("node.sh");
    std::fs::write(&node, "#!/bin/sh\nexec sleep 1000\n").unwrap();
    std::fs::set_permissions(&node, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    node
}

#[test]
fn sigkill_leaves_resources_that_clean_removes() {
    if !root_or_skip("sigkill_leaves_resources_that_clean_removes") {
        return;
    }
    let _dead_runs = hold(Exclusive::DeadRuns);
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("reports");
    let node = sleeping_node(tmp.path());
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
    let clean = clean();
    let said = String::from_utf8_lossy(&clean.stdout);
    assert_eq!(clean.status.code(), Some(0), "{said}");
    assert_eq!(leftovers(&recorded), Vec::<String>::new(), "{said}");
    assert!(said.contains("removed namespace"), "{said}");
}

/// Power-loss runs put every node's dataDir on a lazyfs mount: a SIGKILLed controller leaves
/// the mounts (and their filesystem processes), and `clean` removes them. (netns: the
/// `power-loss` file partitions the leader off, which loopback cannot do.)
#[test]
fn sigkill_leaves_lazyfs_mounts_that_clean_removes() {
    if !root_or_skip("sigkill_leaves_lazyfs_mounts_that_clean_removes") {
        return;
    }
    let _dead_runs = hold(Exclusive::DeadRuns);
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("reports");
    let mut child = spawn(
        &[
            "--nodes",
            "3",
            "--net",
            "netns",
            "--time-limit",
            "300",
            "--nemesis-file",
            "power-loss",
        ],
        &out,
        &fle_node(),
    );
    let mut dir = None;
    let mounted = wait_for(Duration::from_secs(60), || {
        dir = run_dir(&out);
        // The mounts and the three nodes on them: a node's pid is recorded right after its
        // spawn, and a controller killed in between leaks that node (and, through its open
        // files, its mount's filesystem process). This test is about the mounts.
        dir.as_ref().is_some_and(|d| {
            let left = leftovers(&resources(d));
            let count = |p: &str| left.iter().filter(|l| l.starts_with(p)).count();
            count("lazyfs mount") == 3 && count("process ") >= 3
        })
    });
    child.kill().unwrap();
    child.wait().unwrap();
    let dir = dir.expect("no run folder");
    let recorded = resources(&dir);
    assert!(
        mounted,
        "3 lazyfs mounts never showed: {:?}\n{}",
        leftovers(&recorded),
        std::fs::read_to_string(out.with_extension("stderr")).unwrap_or_default()
    );
    let clean = clean();
    let said = String::from_utf8_lossy(&clean.stdout);
    assert_eq!(clean.status.code(), Some(0), "{said}");
    assert_eq!(leftovers(&recorded), Vec::<String>::new(), "{said}");
    assert_eq!(said.matches("removed lazyfs mount").count(), 3, "{said}");
    // Unmounted, the filesystem processes end by themselves (zombies until reaped count as gone).
    let alive = |pat: &str| {
        std::fs::read_dir("/proc").unwrap().flatten().any(|p| {
            let cmd = std::fs::read(p.path().join("cmdline")).unwrap_or_default();
            !cmd.is_empty() && String::from_utf8_lossy(&cmd).contains(pat)
        })
    };
    let mnt = dir.join("nodes").display().to_string();
    assert!(
        wait_for(Duration::from_secs(10), || !alive(&mnt)),
        "a process still uses {mnt}"
    );
}

#[test]
fn leave_running_keeps_the_cluster_until_clean() {
    if !root_or_skip("leave_running_keeps_the_cluster_until_clean") {
        return;
    }
    let _dead_runs = hold(Exclusive::DeadRuns);
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("reports");
    let node = sleeping_node(tmp.path());
    let mut child = spawn(
        &[
            "--nodes",
            "2",
            "--time-limit",
            "1",
            "--recovery-timeout",
            "1",
            "--nemesis",
            "none",
            "--leave-running",
        ],
        &out,
        node.to_str().unwrap(),
    );
    let code = wait_exit(&mut child, Duration::from_secs(120));
    let stderr = std::fs::read_to_string(out.with_extension("stderr")).unwrap_or_default();
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("fle-chaos clean"), "{stderr}");
    let recorded = resources(&run_dir(&out).unwrap());
    let left = leftovers(&recorded);
    assert!(
        left.iter().any(|l| l.starts_with("namespace"))
            && left.iter().filter(|l| l.starts_with("process")).count() == 2,
        "--leave-running left {left:?}"
    );
    let clean = clean();
    assert_eq!(clean.status.code(), Some(0));
    assert_eq!(leftovers(&recorded), Vec::<String>::new());
}

/// Every process a run starts is reaped before the controller exits, the lazyfs filesystems
/// (forked off by `fle-node lazyfs mount`, so not the controller's children by birth)
/// included: right after exit no `<defunct>` fle-node is left for PID 1 to reap.
#[test]
fn nothing_is_left_defunct_right_after_a_run_exits() {
    if !root_or_skip("nothing_is_left_defunct_right_after_a_run_exits") {
        return;
    }
    // Not beside a test whose `clean` kills a SIGKILLed run's nodes (PID 1's orphans).
    let _dead_runs = hold(Exclusive::DeadRuns);
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("reports");
    // This test process's own start time: every process of the run starts at or after it.
    let since =
        fle_chaos::control::backend::registry::process_start_time(std::process::id()).unwrap();
    let mut child = spawn(
        &[
            "--nodes",
            "3",
            "--time-limit",
            "14",
            "--nemesis-file",
            "power-loss",
        ],
        &out,
        &fle_node(),
    );
    // A blocking wait: the process table is read the moment the controller is gone.
    let status = child.wait().unwrap();
    let zombies = orphaned_zombies(since);
    let stderr = std::fs::read_to_string(out.with_extension("stderr")).unwrap_or_default();
    assert_eq!(status.code(), Some(0), "{stderr}");
    let dir = run_dir(&out).expect("no run folder");
    let mounts = resources(&dir)
        .iter()
        .filter(|r| {
            matches!(
                r,
                fle_chaos::control::backend::registry::Resource::LazyFs { .. }
            )
        })
        .count();
    assert_eq!(mounts, 3, "the run must have had its lazyfs filesystems");
    assert_eq!(zombies, Vec::<String>::new(), "{stderr}");
}

/// The same right after a sweep exits: it runs each cell as a `fle-chaos test` child and
/// waits for it, so neither the children nor their nodes are left for PID 1.
#[test]
fn nothing_is_left_defunct_right_after_a_sweep_exits() {
    if !root_or_skip("nothing_is_left_defunct_right_after_a_sweep_exits") {
        return;
    }
    let _dead_runs = hold(Exclusive::DeadRuns);
    let tmp = tempfile::tempdir().unwrap();
    let matrix = tmp.path().join("zombies.toml");
    let cell = "time_limit = \"14s\"\nschedules = [\"power-loss\"]\nnodes = [3]\nseeds = [1]\n";
    std::fs::write(&matrix, cell).unwrap();
    let out = tmp.path().join("reports");
    let since =
        fle_chaos::control::backend::registry::process_start_time(std::process::id()).unwrap();
    let mut child = fle_chaos()
        .arg("sweep")
        .arg(&matrix)
        .arg("--out")
        .arg(&out)
        .arg("--node-binary")
        .arg(fle_node())
        .env("FLE_CHAOS_REGISTRY", registry())
        .stderr(std::fs::File::create(tmp.path().join("stderr")).unwrap())
        .spawn()
        .unwrap();
    // A blocking wait: the process table is read the moment the sweep is gone.
    let status = child.wait().unwrap();
    let zombies = orphaned_zombies(since);
    let stderr = std::fs::read_to_string(tmp.path().join("stderr")).unwrap_or_default();
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert_eq!(zombies, Vec::<String>::new(), "{stderr}");
}
