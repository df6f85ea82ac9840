//! A 3-host fle-node cluster over SSH against fake VMs (namespaces running sshd): setup and
//! start through the SSH `Control`, a leader observed over HTTP on the hosts' addresses, the
//! leader killed by pid over SSH and a new one elected, the leader isolated with iptables rules
//! in the hosts' own tables and a new one elected, a clock skewed through the remote libfaketime
//! file, and teardown leaving nothing on the hosts; then the same through `fle-chaos test --ssh`.

use crate::support::exclusive::{hold, Exclusive};
use crate::support::ssh::{can_run, process_alive, wait_for, FakeVms};
use fle_chaos::api::{NodeStatus, ServerState};
use fle_chaos::control::backend::os_setup::Needs;
use fle_chaos::control::backend::registry::Registry;
use fle_chaos::control::backend::ssh::{SshCluster, SshClusterConfig, SshOptions};
use fle_chaos::control::sut::fle_node::{FleNode, FleNodeOptions};
use fle_chaos::control::sut::Target;
use fle_chaos::control::Control;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

fn node_binary() -> PathBuf {
    fle_chaos::control::sut::fle_node::built_binary()
}

/// fle-node is built by another branch; until it is merged the binary is a stub.
fn fle_node_implemented(test: &str) -> bool {
    let out = Command::new(node_binary()).arg("--help").output().unwrap();
    let stub = String::from_utf8_lossy(&out.stderr).contains("not yet implemented");
    if stub {
        crate::support::skip::skip(test, "fle-node is still the skeleton's stub in this build");
    }
    !stub
}

fn statuses(rt: &tokio::runtime::Runtime, t: &FleNode) -> BTreeMap<String, NodeStatus> {
    let mut map = BTreeMap::new();
    for node in t.nodes() {
        if let Ok(s) = rt.block_on(t.status(&node)) {
            map.insert(node, s);
        }
    }
    map
}

/// The leader (sid) that every node of `among` follows or is, once they agree.
fn agreed_leader(
    rt: &tokio::runtime::Runtime,
    t: &FleNode,
    among: &[&str],
    not: Option<u64>,
) -> u64 {
    wait_for(
        &format!("{among:?} to agree on a leader"),
        Duration::from_secs(90),
        || {
            let all = statuses(rt, t);
            let views: Vec<&NodeStatus> = among.iter().filter_map(|n| all.get(*n)).collect();
            if views.len() != among.len() {
                return None;
            }
            let leader = views[0].leader?;
            let agreed = views.iter().all(|s| {
                s.leader == Some(leader)
                    && matches!(s.state, ServerState::Leading | ServerState::Following)
            });
            (agreed && Some(leader) != not).then_some(leader)
        },
    )
}

fn isolate(c: &SshCluster, victim: &str) {
    let others: Vec<String> = c.nodes().iter().filter(|n| *n != victim).cloned().collect();
    let cut = |node: &str, from: &[String]| {
        c.exec(node, "iptables", &["-w", "-N", "flc-partition"])
            .unwrap();
        for f in from {
            let src = c.node_host(f).unwrap().to_string();
            c.exec(
                node,
                "iptables",
                &["-w", "-A", "flc-partition", "-s", &src, "-j", "DROP"],
            )
            .unwrap();
        }
        c.exec(
            node,
            "iptables",
            &["-w", "-I", "INPUT", "1", "-j", "flc-partition"],
        )
        .unwrap();
    };
    cut(victim, &others);
    for o in &others {
        cut(o, &[victim.to_string()]);
    }
}

fn nothing_left(vms: &FakeVms, run_id: &str, pids: &[u32]) {
    for n in 1..=vms.vms.len() {
        let dir = format!("/tmp/flc-{run_id}-n{n}");
        assert!(!Path::new(&dir).exists(), "{dir} is left on the host");
    }
    for pid in pids {
        assert!(!process_alive(*pid), "node process {pid} is left running");
    }
    for (i, vm) in vms.vms.iter().enumerate() {
        assert!(
            !vms.iptables_rules(i).contains("flc"),
            "rules left on vm {}",
            i + 1
        );
        let out = Command::new("ip")
            .args(["netns", "pids", &vm.netns])
            .output()
            .unwrap();
        for pid in String::from_utf8_lossy(&out.stdout).split_whitespace() {
            if let Ok(comm) = std::fs::read_to_string(format!("/proc/{pid}/comm")) {
                assert_eq!(comm.trim(), "sshd", "process {pid} left on vm {}", i + 1);
            }
        }
    }
}

#[test]
fn three_hosts_elect_fail_over_partition_and_leave_nothing() {
    let name = "three_hosts_elect_fail_over_partition_and_leave_nothing";
    if !can_run(name) || !fle_node_implemented(name) {
        return;
    }
    // Its nodes are daemons on the hosts: their teardown leaves them to PID 1 (`DeadRuns`).
    let _dead_runs = hold(Exclusive::DeadRuns);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let vms = FakeVms::create(3);
    let run_id = format!("f{}", vms.suffix);
    let run_dir = vms.dir.path().join("run");
    std::fs::create_dir_all(&run_dir).unwrap();
    let registry = Registry::create_in(&vms.dir.path().join("registry"), &run_id, &run_dir);
    let registry = Arc::new(registry.unwrap());
    let cluster = Arc::new(
        SshCluster::create(
            SshClusterConfig {
                hosts: vms.hosts(),
                options: SshOptions {
                    user: None,
                    port: None,
                    private_key: None,
                    strict_host_key_checking: true,
                    config_file: Some(vms.ssh_config.clone()),
                    connect_timeout: Duration::from_secs(10),
                    retries: 3,
                },
                binary: node_binary(),
                needs: Needs {
                    netns: false,
                    iptables: true,
                    faketime: true,
                },
                real_clock: false,
            },
            &run_dir,
            registry,
            &mut |_| {},
        )
        .expect("ssh cluster"),
    );
    let control: Arc<dyn Control> = cluster.clone();
    let target = FleNode::new(
        control,
        FleNodeOptions {
            binary: node_binary(),
            tick_ms: 100,
            init_limit: 10,
            sync_limit: 5,
            faketime: true,
            fake_monotonic: false,
            bug: None,
            finalize_wait_ms: None,
            power_loss: false,
            observers: Default::default(),
            status_timeout: Duration::from_millis(500),
            write_timeout: Duration::from_secs(2),
        },
    )
    .unwrap();
    let mut pids = Vec::new();
    for n in ["n1", "n2", "n3"] {
        target.setup(n).unwrap();
    }
    for n in ["n1", "n2", "n3"] {
        pids.push(target.start(n).unwrap());
    }

    // A leader, seen over HTTP on the hosts' own addresses.
    let all = ["n1", "n2", "n3"];
    let first = agreed_leader(&rt, &target, &all, None);
    let leader = format!("n{first}");

    // Kill it over SSH: its process is gone, the other two elect someone else.
    let pid = target.kill(&leader).unwrap().expect("the leader ran");
    assert!(!process_alive(pid));
    assert!(!target.is_running(&leader));
    let rest: Vec<&str> = all.iter().copied().filter(|n| *n != leader).collect();
    let second = agreed_leader(&rt, &target, &rest, Some(first));
    pids.push(target.start(&leader).unwrap());
    agreed_leader(&rt, &target, &all, None);

    // Isolate the current leader with iptables on every host: the majority moves on.
    let current = format!("n{}", agreed_leader(&rt, &target, &all, None));
    isolate(&cluster, &current);
    for i in 0..3 {
        assert!(vms.iptables_rules(i).contains("-A INPUT -j flc-partition"));
    }
    let majority: Vec<&str> = all.iter().copied().filter(|n| *n != current).collect();
    let after = agreed_leader(&rt, &target, &majority, sid(&current));
    assert_ne!(Some(after), sid(&current));
    let _ = second;

    // Skew a clock through the node's libfaketime file on its host.
    let victim = majority[0];
    cluster
        .write_file(victim, Path::new("faketime"), b"+600.000\n")
        .unwrap();
    wait_for("the skewed clock", Duration::from_secs(30), || {
        let s = rt.block_on(target.status(victim)).ok()?;
        let now = chrono::Utc::now().timestamp_millis();
        (s.wall_clock_ms - now > 500_000).then_some(())
    });

    let report = cluster.teardown();
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    nothing_left(&vms, &run_id, &pids);
    let log = std::fs::read_to_string(run_dir.join("nodes/n1/node.log")).unwrap();
    assert!(!log.is_empty(), "the node's log was fetched");
}

fn sid(node: &str) -> Option<u64> {
    node.trim_start_matches('n').parse().ok()
}

/// `fle-chaos test --ssh --seed 7 ARGS` on the hosts of `vms` (from a hosts file, as
/// docs/ssh.md shows: `--nodes` has no default to collide with): its output and its run folder.
fn fle_chaos_test_over_ssh(vms: &FakeVms, args: &[&str]) -> (std::process::Output, PathBuf) {
    let out_dir = vms.dir.path().join("reports");
    let nodes_file = vms.dir.path().join("hosts");
    std::fs::write(&nodes_file, vms.hosts().join("\n")).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_fle-chaos"))
        .env("FLE_CHAOS_REGISTRY", vms.dir.path().join("registry"))
        .args(["test", "--ssh", "--nodes-file"])
        .arg(&nodes_file)
        .arg("--ssh-config")
        .arg(&vms.ssh_config)
        .args(args)
        .args(["--seed", "7", "--out"])
        .arg(&out_dir)
        .output()
        .unwrap();
    let latest = out_dir.join("latest");
    let run = std::fs::canonicalize(&latest).unwrap_or(latest);
    (out, run)
}

#[test]
fn fle_chaos_test_runs_on_three_ssh_hosts() {
    let name = "fle_chaos_test_runs_on_three_ssh_hosts";
    if !can_run(name) || !fle_node_implemented(name) {
        return;
    }
    // Its nodes are daemons on the hosts: their teardown leaves them to PID 1 (`DeadRuns`).
    let _dead_runs = hold(Exclusive::DeadRuns);
    let vms = FakeVms::create(3);
    let (out, run) = fle_chaos_test_over_ssh(
        &vms,
        &[
            "--time-limit",
            "8",
            "--nemesis",
            "kill,partition",
            "--nemesis-interval",
            "3",
        ],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    // 0 valid; 2 unknown while the checkers are not merged yet (finish_run says unknown).
    // Invalid (1), bad input (254) or a crash (255) fail.
    assert!(
        matches!(out.status.code(), Some(0) | Some(2)),
        "fle-chaos test --ssh: {:?}\n{stderr}",
        out.status
    );
    let history =
        fle_chaos::history::file::read_text(&fle_chaos::history::file::in_run(&run)).unwrap();
    assert!(history.contains("\"status\""), "observed over HTTP");
    for n in 1..=3 {
        let log = run.join(format!("nodes/n{n}/node.log"));
        assert!(log.is_file(), "{} fetched", log.display());
    }
    let run_id_dirs: Vec<_> = std::fs::read_dir("/tmp")
        .unwrap()
        .flatten()
        .filter(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            n.starts_with("flc-") && n.ends_with("-n1")
        })
        .filter(|e| {
            std::fs::read_to_string(e.path().join("flc-resources")).is_ok()
                && std::fs::read_to_string(e.path().join("zoo.cfg"))
                    .unwrap_or_default()
                    .contains(&vms.addr(0).to_string())
        })
        .collect();
    assert!(run_id_dirs.is_empty(), "node folders left on the hosts");
    nothing_left(&vms, "none", &[]);
}

/// The membership schedule over SSH (docs/membership.md): servers removed from the config
/// through the leader and added back, on three fake hosts, judged valid, with nothing left
/// behind. Ignored in CI, whose SSH runs already cover the mechanism: a 20 s run to make by
/// hand, `cargo test --release --test it hosts::ssh::cluster::membership -- --ignored`.
#[test]
#[ignore = "a 20 s SSH run of the membership schedule, made by hand (docs/membership.md)"]
fn membership_schedule_runs_over_ssh() {
    let name = "membership_schedule_runs_over_ssh";
    if !can_run(name) || !fle_node_implemented(name) {
        return;
    }
    let _dead_runs = hold(Exclusive::DeadRuns);
    let vms = FakeVms::create(3);
    let (out, run) = fle_chaos_test_over_ssh(
        &vms,
        &[
            "--workload",
            "writes",
            "--nemesis-file",
            "membership",
            "--time-limit",
            "20",
        ],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "not valid:\n{stderr}");
    let history =
        fle_chaos::history::file::read_text(&fle_chaos::history::file::in_run(&run)).unwrap();
    let done = |f: &str| {
        history.lines().any(|l| {
            let e: serde_json::Value = serde_json::from_str(l).unwrap_or_default();
            e["process"] == "nemesis" && e["f"] == f && e["value"]["version"].is_u64()
        })
    };
    assert!(
        done("remove") && done("add"),
        "a committed remove and add:\n{stderr}"
    );
    nothing_left(&vms, "none", &[]);
}
