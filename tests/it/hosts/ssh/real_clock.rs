//! The SSH backend on real VMs (qemu guests with a kernel, clock, filesystem and /proc of their
//! own, see support::vm), for what fake VMs cannot show: reads of a node's files and of its
//! stopped state go to the host, not to this machine; and `--real-clock-skew`: a clock bump
//! steps n2's host clock, which n2's own wall clock shows; the reset steps it back; and after a
//! controller SIGKILLed mid-skew, `fle-chaos clean` steps it back from the offset recorded on
//! the host. Nothing is left on the hosts either way.

use crate::support;

use crate::support::run::{
    leftovers, nemesis_done, resources, run_dir, wait_exit, wait_for, why_not_valid,
};
use crate::support::vm::{can_run, Guest, QemuVms};
use fle_chaos::api::NodeStatus;
use fle_chaos::control::backend::os_setup::Needs;
use fle_chaos::control::backend::registry::{Registry, Resource};
use fle_chaos::control::backend::ssh::{SshCluster, SshClusterConfig};
use fle_chaos::control::{Control, DaemonSpec, Signal};
use fle_chaos::history::store::read_history;
use fle_chaos::history::{Event, EventType, F, NEMESIS};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const HOUR_MS: i64 = 3_600_000;

fn fle_chaos_test(vms: &QemuVms, registry: &Path, schedule: &Path, time_limit: &str) -> Command {
    let mut cmd = support::run::fle_chaos();
    cmd.env("FLE_CHAOS_REGISTRY", registry)
        .args(["test", "--ssh", "--nodes", &vms.hosts().join(",")])
        .arg("--ssh-config")
        .arg(&vms.ssh_config)
        .args(["--real-clock-skew", "--nemesis-file"])
        .arg(schedule)
        .args(["--time-limit", time_limit, "--seed", "3", "--out"])
        .arg(vms.dir.path().join(format!("reports-{time_limit}")));
    cmd
}

/// A guest's clock minus ours, in whole seconds (`date +%s` is what the guest has).
fn guest_offset_s(vms: &QemuVms, i: usize) -> i64 {
    let guest: i64 = vms.ssh(i, "date +%s", b"").parse().unwrap();
    let ours = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    guest - ours.as_secs() as i64
}

/// n2's wall clock minus n1's, from status reads of both less than 50 ms apart, in [from, to).
fn skews(h: &[Event], from: u64, to: u64) -> Vec<i64> {
    skews_between(h, ("n2", "n1"), 50_000_000, from, to)
}

/// `node`'s wall clock minus `reference`'s, from status reads of both less than `within` ns
/// apart (their distance subtracted), in [from, to).
fn skews_between(
    h: &[Event],
    (node, reference): (&str, &str),
    within: u64,
    from: u64,
    to: u64,
) -> Vec<i64> {
    let mut r: Option<(u64, i64)> = None;
    let mut out = Vec::new();
    for e in h.iter().filter(|e| e.time >= from && e.time < to) {
        if e.f != F::Status || e.kind != EventType::Ok {
            continue;
        }
        let Ok(s) = serde_json::from_value::<NodeStatus>(e.value.clone()) else {
            continue;
        };
        match e.node.as_deref() {
            Some(n) if n == reference => r = Some((e.time, s.wall_clock_ms)),
            Some(n) if n == node => {
                if let Some((t, c)) = r.filter(|(t, _)| e.time - t < within) {
                    out.push(s.wall_clock_ms - c - ((e.time - t) / 1_000_000) as i64);
                }
            }
            _ => {}
        }
    }
    out
}

/// Nothing of ours on any guest: no node folder, no fle-node or java process.
fn nothing_left_on_hosts(vms: &QemuVms) {
    for i in 0..vms.vms.len() {
        let left = vms.ssh(
            i,
            "ls -d /tmp/flc-* 2>/dev/null; for c in /proc/[0-9]*/comm; do \
             read -r n < $c 2>/dev/null && case $n in fle-node|java) echo \"process $c $n\";; esac; done; true",
            b"",
        );
        assert_eq!(left, "", "left on vm {}", i + 1);
    }
}

/// Every guest's clock is where it was before (`date +%s`: whole seconds, so within 2 s).
fn clocks_back(vms: &QemuVms, before: &[i64], when: &str) {
    for (i, b) in before.iter().enumerate() {
        let moved = guest_offset_s(vms, i) - b;
        assert!(
            moved.abs() <= 2,
            "vm {} clock moved {moved} s {when}",
            i + 1
        );
    }
}

/// How many ssh processes use a control socket under `dir`, counted with pgrep (not the code
/// under test).
fn ssh_masters(dir: &Path) -> usize {
    let out = Command::new("pgrep")
        .args(["-f", &format!("^ssh .*-S {}/", dir.display())])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).lines().count()
}

fn registry_empty(registry: &Path) -> bool {
    std::fs::read_dir(registry)
        .map(|d| {
            d.flatten()
                .all(|e| e.path().extension().and_then(|x| x.to_str()) != Some("jsonl"))
        })
        .unwrap_or(true)
}

/// A node's files and its stopped state are read where it runs: this machine has neither the
/// guest's folder nor its pids.
fn files_and_stops_are_read_on_the_host(vms: &QemuVms, registry: &Path) {
    let run_dir = vms.dir.path().join("run-control");
    std::fs::create_dir_all(&run_dir).unwrap();
    let c = SshCluster::create(
        SshClusterConfig {
            hosts: vms.hosts(),
            options: fle_chaos::control::backend::ssh::SshOptions {
                user: None,
                port: None,
                private_key: None,
                strict_host_key_checking: true,
                config_file: Some(vms.ssh_config.clone()),
                connect_timeout: Duration::from_secs(20),
                retries: 3,
            },
            binary: fle_chaos::control::sut::fle_node::built_binary(),
            needs: Needs::default(),
            real_clock: false,
        },
        &run_dir,
        Arc::new(Registry::create_in(registry, "rvm", &run_dir).unwrap()),
        &mut |_| {},
    )
    .expect("an ssh cluster on the VMs");
    let written = c
        .write_file("n1", Path::new("probe"), b"on the guest\n")
        .unwrap();
    assert!(
        !written.exists(),
        "{} is on this machine",
        written.display()
    );
    assert_eq!(
        c.read_file("n1", Path::new("probe")).unwrap(),
        b"on the guest\n"
    );
    let spec = DaemonSpec {
        program: "/bin/sleep".into(),
        args: vec!["1000".into()],
        env: Vec::new(),
        log: c.node_dir("n1").unwrap().join("node.log"),
    };
    let pid = c.spawn("n1", &spec).unwrap();
    assert!(!c.is_stopped("n1").unwrap());
    assert_eq!(c.signal("n1", Signal::SIGSTOP).unwrap(), Some(pid));
    assert!(
        c.is_stopped("n1").unwrap(),
        "pid {pid} on the guest is stopped"
    );
    let state = vms.ssh(0, &format!("cut -d')' -f2 /proc/{pid}/stat | cut -c2"), b"");
    assert_eq!(state, "T", "the guest itself says so");
    c.signal("n1", Signal::SIGCONT).unwrap();
    assert!(!c.is_stopped("n1").unwrap());
    let report = c.teardown();
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    nothing_left_on_hosts(vms);
}

#[test]
fn real_clock_skew_steps_the_hosts_clock_and_always_steps_it_back() {
    if !can_run("real_clock_skew_steps_the_hosts_clock_and_always_steps_it_back") {
        return;
    }
    let vms = QemuVms::create(3);
    let registry = vms.dir.path().join("registry");
    let before: Vec<i64> = (0..3).map(|i| guest_offset_s(&vms, i)).collect();
    files_and_stops_are_read_on_the_host(&vms, &registry);

    // 1. A whole run: n2's host clock an hour ahead for 5 s, then back.
    let schedule = vms.dir.path().join("bump.toml");
    std::fs::write(
        &schedule,
        "interval = \"3s\"\nduration = \"5s\"\n[[fault]]\nkind = \"clock\"\nmode = \"bump\"\n\
         delta = \"+3600s\"\ntarget = \"n2\"\n",
    )
    .unwrap();
    let out: Output = fle_chaos_test(&vms, &registry, &schedule, "12")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let run = run_dir(&vms.dir.path().join("reports-12")).expect("a run folder");
    assert!(
        matches!(out.status.code(), Some(0) | Some(2)),
        "fle-chaos test: {:?}\n{stderr}\n{}",
        out.status,
        why_not_valid(&run)
    );
    assert!(stderr.contains("WARNING: --real-clock-skew"), "{stderr}");
    let h = read_history(&fle_chaos::history::file::in_run(&run)).unwrap();
    let clock = nemesis_done(&h, F::Clock);
    assert_eq!(
        clock.len(),
        3,
        "a bump, its reset, the final reset: {clock:?}"
    );
    assert_eq!(clock[2].value["final"], true);
    let (bump, reset) = (clock[0], clock[1]);
    assert_eq!(bump.value["mechanism"], "clock_settime", "{}", bump.value);
    assert_eq!(bump.value["steps_ms"]["n2"], HOUR_MS, "{}", bump.value);
    assert_eq!(reset.value["mode"], "reset");
    assert_eq!(reset.value["mechanism"], "clock_settime");
    // n2 itself saw its wall clock an hour ahead of n1's, and then back (the guests' clocks
    // started up to a few seconds apart: compare with the skew before the bump).
    let base = skews(&h, 0, bump.time);
    // Until the reset was sent: reads that complete while it runs may already see it.
    let reset_sent = h
        .iter()
        .filter(|e| e.process == NEMESIS && e.f == F::Clock && e.kind == EventType::Invoke)
        .rfind(|e| e.time <= reset.time)
        .unwrap()
        .time;
    let during = skews(&h, bump.time + 100_000_000, reset_sent);
    let after = skews(&h, reset.time + 100_000_000, u64::MAX);
    assert!(
        !base.is_empty() && !during.is_empty() && !after.is_empty(),
        "reads of n1 and n2 close together: {} {} {}",
        base.len(),
        during.len(),
        after.len()
    );
    let b = base[base.len() / 2];
    assert!(
        during.iter().all(|d| (d - b - HOUR_MS).abs() < 1_500),
        "skew during the bump (base {b} ms): {during:?}"
    );
    assert!(
        after.iter().all(|d| (d - b).abs() < 1_500),
        "skew after the reset (base {b} ms): {after:?}"
    );
    let verify = nemesis_done(&h, F::Heal)
        .into_iter()
        .find(|e| e.value["verify"] == true)
        .expect("the final verification passed");
    assert_eq!(verify.value["problems"], serde_json::json!([]));
    clocks_back(&vms, &before, "after the run");
    let left = leftovers(&resources(&run));
    assert!(left.is_empty(), "left behind here: {left:?}");
    nothing_left_on_hosts(&vms);
    assert!(registry_empty(&registry), "the run's registry was released");

    // 2. The controller dies while n2's clock is an hour ahead: `clean` steps it back.
    std::fs::write(
        &schedule,
        "interval = \"1s\"\nduration = \"60s\"\n[[fault]]\nkind = \"clock\"\nmode = \"bump\"\n\
         delta = \"+3600s\"\ntarget = \"n2\"\n",
    )
    .unwrap();
    // A fault is planned only when it fits in the run: 90 s for one of 60 s.
    let mut child = fle_chaos_test(&vms, &registry, &schedule, "90")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let out = vms.dir.path().join("reports-90");
    let bumped = wait_for(Duration::from_secs(90), || {
        assert!(child.try_wait().unwrap().is_none(), "fle-chaos ended early");
        run_dir(&out)
            .and_then(|r| read_history(&fle_chaos::history::file::in_run(&r)).ok())
            .is_some_and(|h| {
                nemesis_done(&h, F::Clock)
                    .iter()
                    .any(|e| e.value["mode"] == "bump")
            })
    });
    assert!(bumped, "the bump never happened");
    // By pid: the Child is exactly the controller we started.
    child.kill().unwrap();
    assert!(
        wait_exit(&mut child, Duration::from_secs(10)).is_some(),
        "the controller did not die"
    );
    // The dead controller's ssh masters are still there, for clean to end.
    let crashed = run_dir(&out).unwrap();
    let masters_dir = resources(&crashed)
        .into_iter()
        .find_map(|r| match r {
            Resource::SshControl { dir } => Some(dir),
            _ => None,
        })
        .expect("the run recorded its ssh control folder");
    assert!(
        ssh_masters(&masters_dir) > 0,
        "no ssh master outlived the controller"
    );
    let skewed = guest_offset_s(&vms, 1) - before[1];
    assert!(
        (skewed - 3600).abs() <= 2,
        "n2's host clock is {skewed} s off after the crash"
    );
    let clean = Command::new(env!("CARGO_BIN_EXE_fle-chaos"))
        .env("FLE_CHAOS_REGISTRY", &registry)
        .arg("clean")
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&clean.stdout);
    assert!(clean.status.success(), "clean: {said}");
    assert!(
        said.contains("removed clock offset of 3600000 ms"),
        "{said}"
    );
    clocks_back(&vms, &before, "after clean");
    // On this machine too: the dead controller's ssh masters and their folder.
    let left = leftovers(&resources(&crashed));
    assert!(left.is_empty(), "left behind here: {left:?}");
    assert_eq!(ssh_masters(&masters_dir), 0, "ssh masters outlived clean");
    nothing_left_on_hosts(&vms);
    assert!(registry_empty(&registry), "clean removed the registry file");
}

/// Real ZooKeeper on real VMs with `--real-clock-skew`: the host clock of the first node seen
/// leading is stepped an hour ahead and back while the writes workload runs; that JVM's clock
/// (the AdminServer's `Date` header, what the report's clock plot draws) shows the step against
/// another node's; every applicable checker is true; the clocks are back and nothing is left on
/// the guests.
#[test]
#[ignore = "minutes under TCG (three JVMs on two shared cores): run by hand, docs/testing.md"]
fn zookeeper_on_real_vms_stays_valid_through_a_real_clock_step() {
    if !can_run("zookeeper_on_real_vms_stays_valid_through_a_real_clock_step") {
        return;
    }
    let vms = QemuVms::create_with(3, Guest { zookeeper: true });
    let registry = vms.dir.path().join("registry");
    let before: Vec<i64> = (0..3).map(|i| guest_offset_s(&vms, i)).collect();
    let schedule = vms.dir.path().join("bump.toml");
    // Aimed at the first leader (`when = "new-leader"`), not at a time: under TCG the JVMs take
    // from ~25 s (quiet machine) to over a minute (load 16) to elect, and a bump before that
    // steps a clock nobody reads. The wait covers the whole run (`wait` is cut to the run).
    std::fs::write(
        &schedule,
        "interval = \"5s\"\nduration = \"15s\"\n[[fault]]\nkind = \"clock\"\nmode = \"bump\"\n\
         delta = \"+3600s\"\ntarget = \"trigger\"\nwhen = \"new-leader\"\nwait = \"600s\"\n",
    )
    .unwrap();
    let out = vms.dir.path().join("reports-zk");
    let o = support::run::fle_chaos()
        .env("FLE_CHAOS_REGISTRY", &registry)
        .args(["test", "--ssh", "--nodes", &vms.hosts().join(",")])
        .arg("--ssh-config")
        .arg(&vms.ssh_config)
        .args([
            "--target",
            "zookeeper",
            "--real-clock-skew",
            "--nemesis-file",
        ])
        .arg(&schedule)
        // TCG: a JVM runs ~10x slower than here, so ZooKeeper gets second-long ticks (and
        // with them a one-tick status timeout, see run::status_timeout).
        .args(["--tick-ms", "1000", "--recovery-timeout", "180"])
        .args(["--workload", "writes", "--concurrency", "1", "--rate", "2"])
        // The JVMs' start (up to ~60 s), the bump (15 s) and writes after it.
        .args(["--time-limit", "120", "--seed", "3", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    eprintln!("{stderr}");
    let run = run_dir(&out).expect("a run folder");
    // To look at the run after the test: FLC_TEST_KEEP=DIR keeps a copy there.
    if let Some(keep) = std::env::var_os("FLC_TEST_KEEP") {
        let _ = Command::new("cp").arg("-a").arg(&run).arg(&keep).status();
    }
    let results: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("results.json")).unwrap()).unwrap();
    // Every checker the run could feed (those marked `"applicable": false` are left out of
    // the verdict, as the clients' view under the writes workload).
    for c in results["checkers"].as_array().unwrap() {
        let (name, valid) = (c["name"].as_str().unwrap(), c["valid"].as_str().unwrap());
        if c["applicable"] != false {
            assert_eq!(valid, "true", "{name}: {}", c["explanation"]);
        }
    }
    assert_eq!(o.status.code(), Some(0), "judged valid:\n{stderr}");
    let h = read_history(&fle_chaos::history::file::in_run(&run)).unwrap();
    let clock = nemesis_done(&h, F::Clock);
    let bump = clock
        .iter()
        .find(|e| e.value["mode"] == "bump")
        .expect("the bump was done");
    assert_eq!(bump.value["mechanism"], "clock_settime", "{}", bump.value);
    let reset = clock
        .iter()
        .find(|e| e.time > bump.time)
        .expect("the bump was undone");
    assert_eq!(bump.value["trigger"], "new-leader", "{}", bump.value);
    let bumped = bump.value["nodes"][0].as_str().unwrap().to_string();
    let reference = if bumped == "n1" { "n2" } else { "n1" };
    // Under TCG reads are slow and few land close together: pairs up to 200 ms apart (the
    // Date header's 1 s resolution dominates anyway), and the base also from after the reset
    // (the clocks are back then) until the next clock fault.
    let pair = (bumped.as_str(), reference);
    let next = clock
        .iter()
        .find(|e| e.time > reset.time)
        .map_or(u64::MAX, |e| e.time);
    let mut base = skews_between(&h, pair, 200_000_000, 0, bump.time);
    base.extend(skews_between(
        &h,
        pair,
        200_000_000,
        reset.time + 1_000_000_000,
        next,
    ));
    base.sort();
    let during = skews_between(&h, pair, 200_000_000, bump.time + 1_000_000_000, reset.time);
    assert!(
        !base.is_empty() && !during.is_empty(),
        "reads of {bumped} and {reference} close together: {} {}",
        base.len(),
        during.len()
    );
    let b = base[base.len() / 2];
    // The Date header has whole seconds (up to 1 s each way), and it was written when the JVM
    // answered, which under TCG may be up to the status timeout before the read completed
    // (each way), plus the pairing distance.
    let test: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("test.json")).unwrap()).unwrap();
    let status_timeout = test["settings"]["status_timeout_ms"].as_i64().unwrap();
    let tolerance = 2_000 + 2 * status_timeout + 200;
    assert!(
        during.iter().all(|d| (d - b - HOUR_MS).abs() < tolerance),
        "{bumped}'s JVM clock during the bump (base {b} ms, tolerance {tolerance} ms): {during:?}"
    );
    eprintln!(
        "{bumped} against {reference}: {b} ms before the bump, {} ms during it ({} pairs of reads)",
        during[during.len() / 2],
        during.len()
    );
    assert!(run.join("report.html").is_file());
    clocks_back(&vms, &before, "after the run");
    nothing_left_on_hosts(&vms);
    assert!(registry_empty(&registry), "the run's registry was released");
}
