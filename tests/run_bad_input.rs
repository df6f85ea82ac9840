//! Bad command lines and bad workload files: one clear line naming the problem, exit 254,
//! and nothing created (no run folder, nothing running).

mod run_support;

use run_support::fle_chaos;
use std::path::Path;

/// Runs `fle-chaos test ARGS --out OUT`; returns (exit code, stderr).
fn test_with(args: &[&str], out: &Path) -> (i32, String) {
    let o = fle_chaos()
        .arg("test")
        .args(args)
        .arg("--out")
        .arg(out)
        .output()
        .unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn assert_bad(args: &[&str], expect: &[&str]) {
    let out = tempfile::tempdir().unwrap();
    let (code, err) = test_with(args, out.path());
    assert_eq!(code, 254, "args {args:?}: exit {code}, stderr: {err}");
    for e in expect {
        assert!(err.contains(e), "args {args:?}: stderr lacks {e:?}: {err}");
    }
    assert!(
        std::fs::read_dir(out.path()).unwrap().next().is_none(),
        "args {args:?}: something was created under --out"
    );
}

#[test]
fn bad_flags_exit_254_naming_the_flag() {
    assert_bad(&["--nodes", "0"], &["--nodes"]);
    assert_bad(&["--nodes", "five"], &["--nodes"]);
    assert_bad(&["--time-limit=-3"], &["--time-limit", "positive"]);
    assert_bad(&["--nemesis", "kill,flood"], &["--nemesis", "flood"]);
    assert_bad(&["--workload", "nosuch"], &["nosuch", "election, writes"]);
    assert_bad(&["--net", "wifi"], &["--net"]);
    assert_bad(&["--bogus-flag"], &["--bogus-flag"]);
    assert_bad(
        &["--nemesis-file", "/nonexistent/schedule.toml"],
        &["--nemesis-file", "no such file"],
    );
    assert_bad(
        &["--node-binary", "/nonexistent/fle-node"],
        &["/nonexistent/fle-node", "--node-binary"],
    );
    assert_bad(
        &["--workload", "writes", "--concurrency", "0"],
        &["--concurrency"],
    );
}

#[test]
fn partitions_on_loopback_are_refused_with_the_reason() {
    assert_bad(
        &["--net", "loopback", "--nemesis", "partition"],
        &["partition", "--net netns"],
    );
}

#[test]
fn real_clock_skew_is_refused_where_it_cannot_work() {
    // Checked before any host is contacted (vm1 does not exist).
    assert_bad(&["--real-clock-skew"], &["--real-clock-skew", "--ssh"]);
    let dir = tempfile::tempdir().unwrap();
    for (schedule, expect) in [
        (
            "[[fault]]\nkind = \"clock\"\nmode = \"rate\"\nfactor = 2.0\n",
            &["--real-clock-skew", "rate", "bump or strobe"][..],
        ),
        (
            "fake_monotonic = true\n[[fault]]\nkind = \"clock\"\nmode = \"strobe\"\n",
            &["--real-clock-skew", "fake_monotonic"][..],
        ),
    ] {
        let file = dir.path().join("schedule.toml");
        std::fs::write(&file, schedule).unwrap();
        let file = file.to_str().unwrap();
        let args = [
            "--ssh",
            "--nodes",
            "vm1",
            "--real-clock-skew",
            "--nemesis-file",
            file,
        ];
        assert_bad(&args, expect);
    }
}

#[test]
fn bad_workload_file_names_file_line_and_fix() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("broken.toml");
    std::fs::write(&file, "name = \"broken\"\nkind = \"sing\"\n").unwrap();
    let f = file.to_str().unwrap();
    assert_bad(&["--workload", f], &["broken.toml:2", "kind"]);

    std::fs::write(&file, "name = \"broken\"\nkind = \"writes\"\nrate = 0.0\n").unwrap();
    assert_bad(&["--workload", f], &["broken.toml", "rate"]);

    std::fs::write(&file, "name = \"broken\"\nkind = \"election\"\nspeed = 3\n").unwrap();
    assert_bad(&["--workload", f], &["broken.toml:3", "speed"]);
}

#[test]
fn help_explains_every_option_with_its_default() {
    let o = fle_chaos().args(["test", "--help"]).output().unwrap();
    assert_eq!(o.status.code(), Some(0));
    let help = String::from_utf8_lossy(&o.stdout);
    for flag in [
        "--nodes",
        "--time-limit",
        "--workload",
        "--nemesis",
        "--nemesis-interval",
        "--nemesis-file",
        "--seed",
        "--concurrency",
        "--out",
        "--test-count",
        "--leave-running",
        "--net",
        "--node-binary",
    ] {
        assert!(help.contains(flag), "help lacks {flag}");
    }
    assert!(help.contains("[default: 5]") && help.contains("[default: 60]"));
}

#[test]
fn without_root_namespaces_are_refused_naming_what_needs_root() {
    // Drop to nobody (needs root to do so, and setpriv from util-linux).
    if !fle_chaos::control::is_root() || !std::path::Path::new("/usr/bin/setpriv").exists() {
        eprintln!(
            "SKIPPED without_root_...: needs root and setpriv to become an unprivileged user"
        );
        return;
    }
    let o = std::process::Command::new("/usr/bin/setpriv")
        .args(["--reuid", "65534", "--regid", "65534", "--clear-groups"])
        .arg(env!("CARGO_BIN_EXE_fle-chaos"))
        .args(["test", "--nodes", "3", "--out", "/nonexistent-flc-out"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(254), "{err}");
    assert!(
        err.contains("needs root") && err.contains("--net loopback"),
        "{err}"
    );
}
