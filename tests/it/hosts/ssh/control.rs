//! The SSH `Control` against fake VMs (namespaces running sshd): setup uploads the binary,
//! files are written remotely, a daemon is spawned detached with its pid recorded, paused,
//! resumed and killed by pid, iptables rules land in the host's own tables and really cut
//! traffic, and teardown (or `clean` after a "crashed" controller) leaves nothing on the hosts.

use crate::support::ssh::{can_run, process_alive, process_state, wait_for, FakeVms};
use fle_chaos::control::backend::os_setup::Needs;
use fle_chaos::control::backend::registry::{read_resources, Registry};
use fle_chaos::control::backend::ssh::{SshCluster, SshClusterConfig, SshOptions};
use fle_chaos::control::backend::teardown::remove_all;
use fle_chaos::control::{Control, DaemonSpec, Signal};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

fn options(vms: &FakeVms) -> SshOptions {
    SshOptions {
        user: Some("root".into()),
        port: Some(22),
        private_key: Some(vms.client_key.clone()),
        strict_host_key_checking: false,
        config_file: None,
        connect_timeout: Duration::from_secs(10),
        retries: 3,
    }
}

fn cluster(vms: &FakeVms, run_id: &str) -> (SshCluster, PathBuf) {
    let run_dir = vms.dir.path().join(format!("run-{run_id}"));
    std::fs::create_dir_all(&run_dir).unwrap();
    let registry = Registry::create_in(&vms.dir.path().join("registry"), run_id, &run_dir);
    let registry = Arc::new(registry.unwrap());
    let mut said = Vec::new();
    let c = SshCluster::create(
        SshClusterConfig {
            hosts: vms.hosts(),
            options: options(vms),
            binary: fle_chaos::control::sut::fle_node::built_binary(),
            needs: Needs {
                netns: false,
                iptables: true,
                faketime: false,
            },
            real_clock: false,
        },
        &run_dir,
        registry,
        &mut |s| said.push(s.to_string()),
    )
    .expect("ssh cluster");
    (c, run_dir)
}

fn sleeper(c: &SshCluster, node: &str) -> DaemonSpec {
    DaemonSpec {
        program: "/bin/sleep".into(),
        args: vec!["1000".into()],
        env: vec![("FLC_TEST_MARK".into(), "it's here".into())],
        log: c.node_dir(node).unwrap().join("node.log"),
    }
}

fn netns_of(pid: u32) -> String {
    let out = Command::new("ip")
        .args(["netns", "identify", &pid.to_string()])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// From inside VM `from`, whether a TCP connection to `to`:22 gets through.
fn reaches(vms: &FakeVms, from: usize, to: usize) -> bool {
    Command::new("ip")
        .args([
            "netns",
            "exec",
            &vms.vms[from].netns,
            "timeout",
            "2",
            "bash",
            "-c",
        ])
        .arg(format!("echo > /dev/tcp/{}/22", vms.addr(to)))
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

fn partition_chain(c: &SshCluster, node: &str, drop_from: std::net::IpAddr) {
    let src = drop_from.to_string();
    for args in [
        vec!["-w", "-N", "flc-partition"],
        vec!["-w", "-A", "flc-partition", "-s", &src, "-j", "DROP"],
        vec!["-w", "-I", "INPUT", "1", "-j", "flc-partition"],
    ] {
        c.exec(node, "iptables", &args).unwrap();
    }
}

fn nothing_left(vms: &FakeVms, run_id: &str, pids: &[u32]) {
    for n in 1..=3 {
        let dir = format!("/tmp/flc-{run_id}-n{n}");
        assert!(!Path::new(&dir).exists(), "{dir} is left on the host");
    }
    for pid in pids {
        assert!(!process_alive(*pid), "process {pid} is left running");
    }
    for i in 0..vms.vms.len() {
        let rules = vms.iptables_rules(i);
        assert!(!rules.contains("flc"), "vm {} keeps rules: {rules}", i + 1);
    }
}

#[test]
fn control_over_ssh_runs_signals_cuts_and_cleans_up() {
    if !can_run("control_over_ssh_runs_signals_cuts_and_cleans_up") {
        return;
    }
    let vms = FakeVms::create(3);
    let run_id = format!("t{}", vms.suffix);
    let (c, run_dir) = cluster(&vms, &run_id);

    assert!(c.net().is_some(), "every host has its own iptables");
    assert!(
        c.clock().is_none(),
        "host clocks only with --real-clock-skew"
    );
    assert_eq!(c.nodes(), ["n1", "n2", "n3"]);
    assert_eq!(c.node_host("n2").unwrap(), vms.addr(1));
    assert_eq!(c.controller_addr(), Some(vms.gateway().into()));
    // The uploaded binary is the controller's own fle-node without its debug info, byte for byte.
    let stripped = vms.dir.path().join("fle-node.stripped");
    let strip = Command::new("strip")
        .arg("--strip-debug")
        .arg("-o")
        .arg(&stripped)
        .arg(fle_chaos::control::sut::fle_node::built_binary())
        .status()
        .unwrap();
    assert!(strip.success());
    let sha = |out: &[u8]| {
        String::from_utf8_lossy(out)
            .split_whitespace()
            .next()
            .map(str::to_string)
    };
    let local = Command::new("sha256sum").arg(&stripped).output().unwrap();
    let remote = c
        .exec(
            "n1",
            "sha256sum",
            &[&format!("/tmp/flc-{run_id}-n1/fle-node")],
        )
        .unwrap();
    assert_eq!(sha(&remote.stdout), sha(&local.stdout));
    assert!(sha(&local.stdout).is_some());

    // Files are written remotely and read back through the host.
    let path = c
        .write_file("n1", Path::new("faketime"), b"+5.000\n")
        .unwrap();
    let out = c.exec("n1", "cat", &[path.to_str().unwrap()]).unwrap();
    assert_eq!(out.stdout, b"+5.000\n");

    // A daemon: detached, in the VM's namespace, with its environment, pid recorded.
    let pid = c.spawn("n1", &sleeper(&c, "n1")).unwrap();
    assert!(process_alive(pid));
    assert_eq!(netns_of(pid), vms.vms[0].netns, "the daemon runs on the VM");
    // The pid is recorded by the shell before it execs the daemon: its environment shows the
    // mark only once that exec is done.
    wait_for("the daemon's environment", Duration::from_secs(10), || {
        let environ = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
        String::from_utf8_lossy(&environ)
            .contains("FLC_TEST_MARK=it's here")
            .then_some(())
    });
    assert_eq!(c.pid("n1"), Some(pid));
    assert!(
        c.spawn("n1", &sleeper(&c, "n1")).is_err(),
        "one daemon per node"
    );

    assert_eq!(c.signal("n1", Signal::SIGSTOP).unwrap(), Some(pid));
    wait_for("SIGSTOP", Duration::from_secs(10), || {
        (process_state(pid) == Some('T')).then_some(())
    });
    assert_eq!(c.signal("n1", Signal::SIGCONT).unwrap(), Some(pid));
    wait_for("SIGCONT", Duration::from_secs(10), || {
        (process_state(pid) != Some('T')).then_some(())
    });
    assert_eq!(c.kill("n1").unwrap(), Some(pid));
    assert!(!process_alive(pid), "kill waits until the process is gone");
    assert_eq!(c.pid("n1"), None);
    assert_eq!(c.kill("n1").unwrap(), None);
    // Restart on the same folder.
    let pid2 = c.spawn("n1", &sleeper(&c, "n1")).unwrap();
    assert_ne!(pid, pid2);

    // A partition rule on n2 against n1: n1 can no longer reach n2, n3 and the controller can.
    assert!(reaches(&vms, 0, 1));
    partition_chain(&c, "n2", c.node_host("n1").unwrap());
    assert!(vms.iptables_rules(1).contains("-A INPUT -j flc-partition"));
    assert!(!reaches(&vms, 0, 1), "n2 drops n1's traffic");
    assert!(reaches(&vms, 2, 1), "n2 still hears n3");
    let pid3 = c.spawn("n3", &sleeper(&c, "n3")).unwrap();

    let report = c.teardown();
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    assert!(
        report
            .removed
            .iter()
            .any(|r| r.contains("iptables chain flc-partition")),
        "{:?}",
        report.removed
    );
    nothing_left(&vms, &run_id, &[pid2, pid3]);
    assert!(reaches(&vms, 0, 1), "the partition is gone");
    // The node folders were fetched into the run folder before they were removed.
    let record = std::fs::read_to_string(run_dir.join("nodes/n1/flc-resources")).unwrap();
    assert_eq!(record.matches("process ").count(), 2, "{record}");
    assert!(
        !run_dir.join("nodes/n1/fle-node").exists(),
        "the binary is not copied back"
    );
    assert!(
        c.spawn("n1", &sleeper(&c, "n1")).is_err(),
        "no start after teardown"
    );
}

#[test]
fn clean_removes_what_a_crashed_controller_left_on_the_hosts() {
    if !can_run("clean_removes_what_a_crashed_controller_left_on_the_hosts") {
        return;
    }
    let vms = FakeVms::create(3);
    let run_id = format!("c{}", vms.suffix);
    let (c, _run_dir) = cluster(&vms, &run_id);
    let pid = c.spawn("n2", &sleeper(&c, "n2")).unwrap();
    partition_chain(&c, "n3", c.node_host("n1").unwrap());
    let global = c.registry().global_path().to_path_buf();
    // The controller "dies": no teardown, only what the registry says survives.
    drop(c);
    assert!(process_alive(pid));
    assert!(vms.iptables_rules(2).contains("flc-partition"));

    // What `fle-chaos clean` does with the run's registry file.
    let report = remove_all(&read_resources(&global).unwrap());
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    assert!(
        report
            .removed
            .iter()
            .any(|r| r.contains(&format!("process {pid}"))),
        "{:?}",
        report.removed
    );
    nothing_left(&vms, &run_id, &[pid]);
}

#[test]
fn a_clock_record_that_cannot_be_undone_keeps_its_folder_and_names_the_cause() {
    if !can_run("a_clock_record_that_cannot_be_undone_keeps_its_folder_and_names_the_cause") {
        return;
    }
    let vms = FakeVms::create(3);
    let run_id = format!("k{}", vms.suffix);
    let (c, _run_dir) = cluster(&vms, &run_id);
    // A corrupt record of a real clock offset: setting the clock back fails before any clock
    // call (these fake VMs share this machine's clock, so nothing may step it).
    c.write_file("n2", Path::new("clock-offset"), b"3600000 garbage\n")
        .unwrap();
    let report = c.teardown();
    let errors = report.errors.join("\n");
    assert!(
        errors.contains("cannot set the host clock back from 3600000 ms")
            && errors.contains("OFFSET_MS BASE_NS")
            && errors.contains("fle-chaos clean"),
        "{errors}"
    );
    let kept = format!("/tmp/flc-{run_id}-n2");
    assert!(
        Path::new(&kept).join("clock-offset").is_file(),
        "the record was deleted"
    );
    assert!(!Path::new(&format!("/tmp/flc-{run_id}-n1")).exists());

    // Put right by hand, `clean` finishes the job.
    std::fs::remove_file(Path::new(&kept).join("clock-offset")).unwrap();
    let report = remove_all(&read_resources(c.registry().global_path()).unwrap());
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    nothing_left(&vms, &run_id, &[]);
}

/// Kills every sshd process serving a connection on VM `i` (not the listener we started):
/// for the controller, the connection is lost as if the network or the host had dropped it.
fn cut_connections(vms: &FakeVms, i: usize) -> usize {
    let listener = vms.vms[i].sshd_pid().unwrap();
    let out = Command::new("ip")
        .args(["netns", "pids", &vms.vms[i].netns])
        .output()
        .unwrap();
    let mut killed = 0;
    for pid in String::from_utf8_lossy(&out.stdout).split_whitespace() {
        let pid: u32 = pid.parse().unwrap();
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        if pid != listener && comm.trim() == "sshd" {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid as i32),
                nix::sys::signal::Signal::SIGKILL,
            );
            killed += 1;
        }
    }
    killed
}

#[test]
fn a_lost_connection_is_retried_recorded_and_the_partition_still_removed() {
    if !can_run("a_lost_connection_is_retried_recorded_and_the_partition_still_removed") {
        return;
    }
    let vms = FakeVms::create(3);
    let run_id = format!("l{}", vms.suffix);
    let (c, run_dir) = cluster(&vms, &run_id);
    partition_chain(&c, "n2", c.node_host("n1").unwrap());
    assert!(c.connection_events().is_empty());

    assert!(cut_connections(&vms, 1) > 0, "the connection to n2 existed");
    // The next command finds the connection gone, reconnects and succeeds.
    let out = wait_for("n2 to answer again", Duration::from_secs(60), || {
        c.exec("n2", "iptables", &["-w", "-S", "flc-partition"])
            .ok()
    });
    assert!(String::from_utf8_lossy(&out.stdout).contains("DROP"));
    let events = c.connection_events();
    assert!(
        events.iter().any(|e| e.contains(&vms.addr(1).to_string())),
        "{events:?}"
    );
    let recorded = std::fs::read_to_string(run_dir.join("ssh-connections.jsonl")).unwrap();
    assert!(recorded.contains("connection-lost"), "{recorded}");

    // Lost again just before teardown: teardown reconnects and still removes the partition.
    cut_connections(&vms, 1);
    let report = c.teardown();
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    nothing_left(&vms, &run_id, &[]);
    assert!(reaches(&vms, 0, 1));
}
