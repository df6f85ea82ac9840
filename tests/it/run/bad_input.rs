//! Bad command lines and bad workload files: one clear line naming the problem, exit 254,
//! and nothing created (no run folder, nothing running).

use crate::support;

use crate::support::run::fle_chaos;
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
    // A typo in a folder never runs the built-in schedule of the same name.
    assert_bad(
        &["--nemesis-file", "/nonexistent/typo/mixed.toml"],
        &["--nemesis-file /nonexistent/typo/mixed.toml: no such file"],
    );
    // clap's tip is the fix, kept in the one line.
    assert_bad(
        &["--nemesis-fle", "mixed"],
        &["a similar argument exists: '--nemesis-file'"],
    );
    // A timed schedule has no interval to replace.
    assert_bad(
        &[
            "--nemesis-file",
            "txnlog-diff-2846",
            "--nemesis-interval",
            "3",
        ],
        &[
            "--nemesis-interval",
            "timed schedule",
            "drop --nemesis-interval",
        ],
    );
    assert_bad(&["--nemesis-interval", "0"], &["--nemesis-interval 0"]);
    assert_bad(
        &["--replay", "/nonexistent/run", "--seed", "3"],
        &["'--replay <RUN_DIR>' cannot be used with '--seed <SEED>'"],
    );
    assert_bad(
        &["--replay", "/nonexistent/run"],
        &["--replay /nonexistent/run: not a run folder"],
    );
    assert_bad(
        &["--node-binary", "/nonexistent/fle-node"],
        &["/nonexistent/fle-node", "--node-binary"],
    );
    assert_bad(
        &["--workload", "writes", "--concurrency", "0"],
        &["--concurrency"],
    );
    assert_bad(
        &["--nodes", "3", "--observers", "n9"],
        &["--observers", "\"n9\"", "n1..n3"],
    );
    assert_bad(
        &["--nodes", "3", "--observers", "3"],
        &["--observers", "no voter"],
    );
    let zk = ["--target", "zookeeper", "--zookeeper-config"];
    assert_bad(
        &[&zk[..], &["tickTime=100"]].concat(),
        &["--zookeeper-config", "tickTime", "--tick-ms"],
    );
    assert_bad(
        &[&zk[..], &["snapshotSizeFactor"]].concat(),
        &["--zookeeper-config", "KEY=VALUE"],
    );
    assert_bad(
        &["--zookeeper-config", "snapshotSizeFactor=-1"],
        &["without --target zookeeper"],
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

/// The options of `fle-chaos SUBCOMMAND --help`: (flag, its description), in order.
fn options_of(subcommand: &str) -> Vec<(String, String)> {
    let o = fle_chaos().args([subcommand, "--help"]).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{subcommand} --help");
    let help = String::from_utf8_lossy(&o.stdout).into_owned();
    for line in help.lines() {
        assert!(
            line.len() <= 100,
            "{subcommand} --help: a {}-column line: {line}",
            line.len()
        );
    }
    let mut options: Vec<(String, String)> = Vec::new();
    for line in help.lines() {
        let t = line.trim_start();
        let indent = line.len() - t.len();
        if (t.starts_with("--") || t.starts_with('-')) && indent <= 6 {
            let flag = t
                .trim_start_matches("-h, ")
                .split([' ', ','])
                .next()
                .unwrap();
            let said = t.split_once("  ").map(|(_, d)| d.trim()).unwrap_or("");
            options.push((flag.to_string(), said.to_string()));
        } else if let Some(last) = options.last_mut().filter(|_| indent > 6) {
            last.1.push(' ');
            last.1.push_str(t);
        }
    }
    options
}

#[test]
fn every_subcommand_explains_every_option_in_wrapped_lines_with_shared_names() {
    let subcommands = [
        "test", "simulate", "sweep", "merge", "shrink", "check", "report", "serve", "prune",
        "clean",
    ];
    for sub in subcommands {
        let options = options_of(sub);
        assert!(!options.is_empty(), "{sub} --help: {options:?}");
        for (flag, said) in options {
            // What clap adds on its own ([default: 10], [possible values: ...]) is no description.
            let own = said.split(" [").next().unwrap_or("").trim();
            assert!(
                !own.is_empty() && !own.starts_with('['),
                "{sub} --help: {flag} has no description"
            );
        }
    }
    // One name per idea: the reports folder is --out, repetitions are --test-count.
    for sub in ["test", "simulate", "sweep", "merge", "serve", "prune"] {
        let flags: Vec<String> = options_of(sub).into_iter().map(|(f, _)| f).collect();
        assert!(flags.contains(&"--out".to_string()), "{sub}: {flags:?}");
        assert!(!flags.contains(&"--dir".to_string()), "{sub}: {flags:?}");
    }
    for sub in ["test", "simulate"] {
        let flags: Vec<String> = options_of(sub).into_iter().map(|(f, _)| f).collect();
        assert!(
            flags.contains(&"--test-count".to_string()),
            "{sub}: {flags:?}"
        );
        assert!(!flags.contains(&"--runs".to_string()), "{sub}: {flags:?}");
    }
    // The old names still work (hidden aliases).
    let o = fle_chaos()
        .args(["serve", "--dir", "/nonexistent-flc-reports"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(254));
    assert!(String::from_utf8_lossy(&o.stderr).contains("/nonexistent-flc-reports"));
    // --nemesis's default is the steered `mixed` schedule, not "all four" kinds.
    let (_, nemesis) = options_of("test")
        .into_iter()
        .find(|(f, _)| f == "--nemesis")
        .unwrap();
    assert!(
        nemesis.contains("mixed") && !nemesis.contains("all four"),
        "{nemesis}"
    );
}

#[test]
fn without_root_namespaces_are_refused_naming_what_needs_root() {
    // Drop to nobody (needs root to do so, and setpriv from util-linux).
    if !fle_chaos::control::is_root() || !std::path::Path::new("/usr/bin/setpriv").exists() {
        crate::support::skip::skip(
            "without_root_namespaces_are_refused_naming_what_needs_root",
            "needs root and setpriv to become an unprivileged user",
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

/// `assert_bad`, and the message is one line.
fn assert_bad_line(args: &[&str], expect: &[&str]) {
    assert_bad(args, expect);
    let out = tempfile::tempdir().unwrap();
    let (_, err) = test_with(args, out.path());
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "args {args:?}: not one line: {err}");
}

#[test]
fn bad_values_are_one_line_naming_the_flag() {
    assert_bad_line(&["--time-limit", "-5"], &["--time-limit -5", "positive"]);
    assert_bad_line(&["--time-limit", "soon"], &["--time-limit", "soon"]);
    assert_bad_line(&["--recovery-timeout", "-1"], &["--recovery-timeout"]);
    assert_bad_line(&["--test-count", "0"], &["--test-count"]);
    assert_bad_line(&["--bogus-flag"], &["--bogus-flag"]);
}

#[test]
fn a_schedule_that_cannot_fit_the_run_is_refused_naming_file_line_and_fix() {
    // 5 s of quiet, then a 6 s pause: 8 s leave no room to inject and undo it.
    assert_bad_line(
        &["--nemesis-file", "pause-leader", "--time-limit", "8"],
        &[
            "nemesis/pause-leader.toml: line 7",
            "--time-limit 8",
            "at least 12",
        ],
    );
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("long.toml");
    std::fs::write(
        &file,
        "interval = \"1s\"\n\n[[fault]]\nkind = \"kill\"\nduration = \"120s\"\n",
    )
    .unwrap();
    let f = file.to_str().unwrap();
    assert_bad_line(
        &["--nemesis-file", f, "--time-limit", "10"],
        &["long.toml: line 3", "120s", "--time-limit"],
    );
    // --nemesis with the default 10 s interval: 10 s of quiet and 10 s of fault.
    assert_bad_line(
        &["--nemesis", "kill", "--time-limit", "10"],
        &["--nemesis kill", "--nemesis-interval"],
    );
}

#[test]
fn a_schedule_naming_nodes_outside_the_cluster_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("n9.toml");
    std::fs::write(&file, "[[fault]]\nkind = \"kill\"\ntarget = \"n9\"\n").unwrap();
    assert_bad_line(
        &["--nodes", "3", "--nemesis-file", file.to_str().unwrap()],
        &["n9.toml: line 1", "n9 is not in the cluster", "n1..n3"],
    );
}

/// The bad input for membership changes: an unknown server, and a reconfig that would
/// leave no quorum.
#[test]
fn a_reconfig_of_an_unknown_server_or_of_a_quorum_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, target: &str| {
        let file = dir.path().join(name);
        let text = format!("[[fault]]\nkind = \"reconfig\"\ntarget = \"{target}\"\n");
        std::fs::write(&file, text).unwrap();
        file.to_str().unwrap().to_string()
    };
    let unknown = write("n9.toml", "n9");
    assert_bad_line(
        &["--nodes", "3", "--nemesis-file", &unknown],
        &["n9.toml: line 1", "n9 is not in the cluster"],
    );
    let quorum = write("quorum.toml", "n1,n2,n3");
    assert_bad_line(
        &["--nodes", "5", "--nemesis-file", &quorum],
        &[
            "quorum.toml: line 1",
            "removes 3 of the 5 voters",
            "no quorum",
        ],
    );
}

#[test]
fn a_bug_the_node_does_not_know_is_refused() {
    // The real fle-node is asked which bugs it has (`fle-node --list-bugs`): the message names
    // the unknown one and lists the known ones.
    let node = support::run::fle_node();
    assert_bad_line(
        &["--bug", "nosuch", "--node-binary", &node],
        &["--bug nosuch", "quorum-minority"],
    );
    assert_bad_line(
        &["--bug", "quorum-minority,nosuch", "--node-binary", &node],
        &["nosuch"],
    );
}

#[test]
fn an_unknown_key_in_a_nemesis_file_is_named_on_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("typo.toml");
    std::fs::write(
        &file,
        "interval = \"4s\"\n[[fault]]\nkind = \"kill\"\ntarjet = \"leader\"\n",
    )
    .unwrap();
    assert_bad(
        &["--nemesis-file", file.to_str().unwrap()],
        &["typo.toml: line 4", "tarjet"],
    );
}
