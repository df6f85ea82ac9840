//! The disk faults on real clusters (fle-node, network namespaces, the writes workload): power
//! loss on lazyfs mounts (also over SSH, on fake VMs) and txnlog corruption. The correct node
//! must stay valid (no acknowledged write lost, one leader per epoch), each fault must be in the
//! history with what it did, and the run must leave no mount behind.

use crate::support;
use crate::support::exclusive::{hold, Exclusive};

use crate::support::run::*;
use fle_chaos::history::{store::read_history, Event, F};
use std::time::Duration;

/// Runs `fle-chaos test` with `schedule` in a folder of its own, requiring a valid verdict;
/// returns the folder (removed when dropped), the run dir and its history.
fn run(schedule: &str) -> (tempfile::TempDir, std::path::PathBuf, Vec<Event>) {
    let _cores = hold(Exclusive::HeavyCluster);
    let tmp = tempfile::Builder::new()
        .prefix("flc-faults-disk")
        .tempdir()
        .unwrap();
    let out = &tmp.path().join("reports");
    let mut child = spawn_test(
        &[
            "--nodes",
            "3",
            "--workload",
            "writes",
            "--time-limit",
            "14",
            "--nemesis-file",
            schedule,
        ],
        out,
        &fle_node(),
    );
    let code = wait_exit(&mut child, Duration::from_secs(240));
    let stderr = std::fs::read_to_string(out.with_extension("stderr")).unwrap_or_default();
    let dir = run_dir(out).unwrap_or_else(|| panic!("no run folder: {stderr}"));
    assert_eq!(code, Some(0), "the correct node must stay valid: {stderr}");
    let history = read_history(&fle_chaos::history::file::in_run(&dir)).unwrap();
    (tmp, dir, history)
}

#[test]
fn power_loss_runs_valid_records_what_was_lost_and_unmounts() {
    if !root_or_skip("power_loss_runs_valid_records_what_was_lost_and_unmounts") {
        return;
    }
    let (_tmp, dir, history) = run("power-loss");
    let losses = nemesis_done(&history, F::PowerLoss);
    assert!(!losses.is_empty(), "no power loss happened");
    for e in &losses {
        let lost = &e.value["lost"];
        assert!(
            lost.is_object() && !lost.as_object().unwrap().is_empty(),
            "{:?}",
            e.value
        );
    }
    let recorded = resources(&dir);
    assert_eq!(
        recorded
            .iter()
            .filter(|r| matches!(
                r,
                fle_chaos::control::backend::registry::Resource::LazyFs { .. }
            ))
            .count(),
        3,
        "one lazyfs mount per node, recorded"
    );
    assert_eq!(leftovers(&recorded), Vec::<String>::new());
}

#[test]
fn corrupted_txnlogs_are_cut_and_logged_never_served() {
    if !root_or_skip("corrupted_txnlogs_are_cut_and_logged_never_served") {
        return;
    }
    let (_tmp, dir, history) = run("corrupt-txnlog");
    let damages = nemesis_done(&history, F::Corrupt);
    assert!(!damages.is_empty(), "no corruption happened");
    let mut cuts_needed = 0;
    for e in &damages {
        for (node, d) in e.value["damage"].as_object().unwrap() {
            assert_eq!(d["file"], "data/txnlog");
            assert!(
                d["offset"].as_u64().unwrap() + d["length"].as_u64().unwrap()
                    <= d["size"].as_u64().unwrap()
            );
            // Damage inside the file (not a cut, which may land on a record boundary) must be
            // found on restart and cut with a logged warning.
            if d["op"] != "truncate" {
                cuts_needed += 1;
                let log =
                    std::fs::read_to_string(dir.join("nodes").join(node).join("node.log")).unwrap();
                assert!(
                    log.contains("truncated a torn or corrupt tail"),
                    "{node}: {d}"
                );
            }
        }
    }
    eprintln!(
        "{} corruptions, {cuts_needed} inside the file",
        damages.len()
    );
}

/// Power loss over SSH on fake VMs (namespaces running sshd on this kernel, which has FUSE):
/// lazyfs is mounted on each host through the uploaded fle-node, the power losses drop what was
/// not fsynced, the correct node stays valid, and teardown unmounts every mount (from the
/// hosts' own record) and removes the node folders.
#[test]
fn power_loss_runs_over_ssh_and_leaves_no_mount() {
    let name = "power_loss_runs_over_ssh_and_leaves_no_mount";
    if !support::ssh::can_run(name) {
        return;
    }
    let _cores = hold(Exclusive::HeavyCluster);
    let vms = support::ssh::FakeVms::create(3);
    let out_dir = vms.dir.path().join("reports");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_fle-chaos"))
        .env("FLE_CHAOS_REGISTRY", vms.dir.path().join("registry"))
        .args(["test", "--ssh", "--nodes", &vms.hosts().join(",")])
        .arg("--ssh-config")
        .arg(&vms.ssh_config)
        .args(["--workload", "writes", "--time-limit", "10"])
        .args(["--nemesis", "power-loss", "--nemesis-interval", "2"])
        .args(["--seed", "3", "--out"])
        .arg(&out_dir)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(0),
        "the correct node must stay valid: {stderr}"
    );
    let latest = out_dir.join("latest");
    let run = std::fs::canonicalize(&latest).unwrap_or(latest);
    let history = read_history(&fle_chaos::history::file::in_run(&run)).unwrap();
    let losses = nemesis_done(&history, F::PowerLoss);
    assert!(!losses.is_empty(), "no power loss happened: {stderr}");
    assert!(
        losses.iter().all(|e| e.value["lost"].is_object()),
        "{losses:?}"
    );
    // The hosts share this kernel, so their mounts would show here.
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap();
    let hosts_dirs: Vec<String> = (1..=3)
        .filter_map(|n| {
            std::fs::read_to_string(run.join(format!("nodes/n{n}/zoo.cfg")))
                .ok()
                .and_then(|c| {
                    c.lines()
                        .find_map(|l| l.strip_prefix("dataDir=").map(str::to_string))
                })
        })
        .collect();
    assert_eq!(hosts_dirs.len(), 3, "every node's config fetched");
    for d in &hosts_dirs {
        assert!(
            !mounts.contains(d.as_str()),
            "{d} is still mounted:\n{mounts}"
        );
        assert!(!std::path::Path::new(d).exists(), "{d} is left on the host");
    }
}
