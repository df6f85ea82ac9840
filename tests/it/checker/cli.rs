//! `fle-chaos check RUN_DIR` as a user runs it: the real binary on copies of fixture runs.
//! Exit codes (0 valid, 1 invalid, 2 unknown, 254 bad input), results.json rewritten, the
//! per-checker summary printed, and a history torn by a killed controller still checked.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn fixture(case: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(case)
}

/// A copy of a fixture run in a fresh temporary folder.
fn run_copy(case: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for f in ["test.json", "history.jsonl"] {
        std::fs::copy(fixture(case).join(f), dir.path().join(f)).unwrap();
    }
    dir
}

fn check(args: &[&std::ffi::OsStr]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_fle-chaos"))
        .arg("check")
        .args(args)
        .output()
        .unwrap()
}

fn results(dir: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("results.json")).unwrap()).unwrap()
}

/// A ZooKeeper 3.8.0 run whose one violation is ZOOKEEPER-2846's mark: still invalid (exit 1),
/// named as known in the summary, the report's banner, the runs index and JUnit; without the versions the
/// servers reported, the same history is plainly invalid.
#[test]
fn a_known_finding_is_named_in_the_summary_the_report_and_junit() {
    // The run in a folder of its own: `report` also writes the parent's index.html.
    let root = tempfile::tempdir().unwrap();
    let run = root.path().join("run");
    std::fs::create_dir(&run).unwrap();
    for f in ["test.json", "history.jsonl"] {
        let from = fixture("known-zookeeper-2846-stale-tail").join(f);
        std::fs::copy(from, run.join(f)).unwrap();
    }
    let out = check(&[run.as_os_str()]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("verdict: invalid (known: ZOOKEEPER-2846)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("known: ZOOKEEPER-2846: a DIFF from a txn log"),
        "{stdout}"
    );
    assert_eq!(results(&run)["known"][0]["id"], "ZOOKEEPER-2846");
    let report = Command::new(env!("CARGO_BIN_EXE_fle-chaos"))
        .arg("report")
        .arg(&run)
        .output()
        .unwrap();
    assert!(report.status.success(), "{report:?}");
    let html = std::fs::read_to_string(run.join("report.html")).unwrap();
    assert!(
        html.contains("<h1>INVALID (KNOWN: ZOOKEEPER-2846) — "),
        "banner"
    );
    let index = std::fs::read_to_string(root.path().join("index.html")).unwrap();
    assert!(index.contains("(known: ZOOKEEPER-2846)"), "{index}");
    let junit = std::fs::read_to_string(run.join("junit.xml")).unwrap();
    assert!(junit.contains("type=\"known\""), "{junit}");
    assert!(
        junit.contains("<property name=\"known\" value=\"ZOOKEEPER-2846\"/>"),
        "{junit}"
    );

    let plain = run_copy("known-not-without-reported-versions");
    let out = check(&[plain.path().as_os_str()]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("verdict: invalid\n"), "{stdout}");
    assert!(!stdout.contains("known"), "{stdout}");
}

#[test]
fn exit_code_is_the_verdict() {
    for (case, code, valid, word) in [
        ("valid-writes", 0, "true", "valid"),
        ("quorum-minority-two-leaders", 1, "false", "invalid"),
        // An observe-only workload: durability is not applicable and left out.
        ("valid-election", 0, "true", "valid"),
        ("recovery-no-final-heal", 2, "unknown", "unknown"),
    ] {
        let dir = run_copy(case);
        let out = check(&[dir.path().as_os_str()]);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(code), "{case}: {stdout}");
        assert!(
            stdout.contains(&format!("verdict: {word}")),
            "{case}: {stdout}"
        );
        for name in [
            "election-safety",
            "durability",
            "vote-rule",
            "epoch-monotonic",
            "recovery",
        ] {
            assert!(
                stdout.contains(name),
                "{case}: summary lacks {name}: {stdout}"
            );
        }
        assert_eq!(results(dir.path())["valid"], valid, "{case}");
    }
}

#[test]
fn results_json_is_rewritten() {
    let dir = run_copy("quorum-minority-two-leaders");
    std::fs::write(
        dir.path().join("results.json"),
        "{\"valid\": \"true\", \"checkers\": []}",
    )
    .unwrap();
    let out = check(&[dir.path().as_os_str()]);
    assert_eq!(out.status.code(), Some(1));
    let r = results(dir.path());
    assert_eq!(r["valid"], "false");
    assert_eq!(
        r["checkers"].as_array().unwrap().len(),
        fle_chaos::checker::names().count()
    );
}

#[test]
fn recovery_bound_flag_changes_the_verdict() {
    // The cluster took 4.1 s to recover: invalid under the default 2.7 s bound, valid under 5 s.
    let dir = run_copy("recovery-too-slow");
    let out = check(&[dir.path().as_os_str()]);
    assert_eq!(out.status.code(), Some(1));
    let out = check(&[
        dir.path().as_os_str(),
        "--recovery-bound-ms".as_ref(),
        "5000".as_ref(),
    ]);
    let r = results(dir.path());
    let rec = r["checkers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "recovery")
        .unwrap();
    assert_eq!(rec["valid"], "true", "{rec}");
    assert_eq!(rec["measurements"]["bound_ms"], 5000);
    assert_eq!(
        out.status.code(),
        Some(0),
        "recovery is now true; durability is not applicable to an observe-only workload"
    );
}

#[test]
fn a_torn_last_line_is_skipped() {
    let dir = run_copy("valid-writes");
    let path = dir.path().join("history.jsonl");
    let mut text = std::fs::read_to_string(&path).unwrap();
    text.push_str("{\"index\":999,\"time\":12");
    std::fs::write(&path, text).unwrap();
    let out = check(&[dir.path().as_os_str()]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn bad_input_exits_254_naming_it() {
    let missing = tempfile::tempdir().unwrap().path().join("no-such-run");
    let out = check(&[missing.as_os_str()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(254), "{err}");
    assert!(
        err.contains("no-such-run") && err.contains("does not exist"),
        "{err}"
    );

    let dir = run_copy("valid-writes");
    std::fs::remove_file(dir.path().join("test.json")).unwrap();
    let out = check(&[dir.path().as_os_str()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(254), "{err}");
    assert!(err.contains("test.json"), "{err}");

    // A corrupt line in the middle is not a torn tail: refuse, naming the line.
    let dir = run_copy("valid-writes");
    let path = dir.path().join("history.jsonl");
    let mut lines: Vec<String> = std::fs::read_to_string(&path)
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    lines[3] = "{\"index\": 3, \"garbage\"".to_string();
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    let out = check(&[dir.path().as_os_str()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(254), "{err}");
    assert!(err.contains("line 4"), "{err}");

    let out = check(&[
        "--recovery-bound-ms".as_ref(),
        "soon".as_ref(),
        dir.path().as_os_str(),
    ]);
    assert_eq!(out.status.code(), Some(254));
}

/// A test.json no run can have written, or a history naming a node it does not list, is bad
/// input naming the file and the field, never judged (a quorum of an empty ensemble, a bound
/// of zero ticks, a node outside the quorum).
#[test]
fn a_test_json_no_run_wrote_exits_254_naming_the_field() {
    use serde_json::json;
    // (what, the field set, its value, what the refusal says)
    let cases = [
        ("no nodes", "nodes", json!([]), "\"nodes\" is empty"),
        ("a name", "nodes", json!(["n1", "alpha", "n3"]), "\"alpha\""),
        ("twice", "nodes", json!(["n1", "n1", "n3"]), "n1 twice"),
        ("zero tick", "tick_ms", json!(0), "\"tick_ms\" is 0"),
        (
            "a node short",
            "nodes",
            json!(["n1", "n2"]),
            "names node n3",
        ),
    ];
    for (what, field, value, says) in cases {
        let dir = run_copy("valid-writes");
        let path = dir.path().join("test.json");
        let mut t: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        t[field] = value;
        std::fs::write(&path, t.to_string()).unwrap();
        let out = check(&[dir.path().as_os_str()]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(254), "{what}: {err}");
        assert!(
            err.contains(says) && err.lines().count() == 1,
            "{what}: {err}"
        );
    }
}

#[test]
fn damaged_histories_exit_254_naming_file_line_and_column() {
    for case in support::history::damaged_runs() {
        let (code, err) = support::history::run(&["check"], &case);
        assert_eq!(code, Some(case.expect_check), "{}: {err}", case.name);
        if case.expect_check == 254 {
            assert!(
                err.contains("history.jsonl: line ") && err.contains(", column "),
                "{}: {err}",
                case.name
            );
            assert_eq!(
                err.trim().lines().count(),
                1,
                "{}: one line: {err}",
                case.name
            );
        }
    }
}

/// The combined verdict expected.txt implies: its checkers' verdicts, without those a run of
/// this workload cannot feed (the write checkers outside the writes workload's appends: under
/// the observe-only election workload and the register one; the client-view checkers outside
/// the register workload).
fn expected_exit(case: &str) -> i32 {
    let info: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fixture(case).join("test.json")).unwrap())
            .unwrap();
    let no_appends = info["workload"] == "election" || info["workload"] == "register";
    let needs_writes = [
        "durability",
        "leader-completeness",
        "ack-zxids",
        "log-order",
    ];
    let text = std::fs::read_to_string(fixture(case).join("expected.txt")).unwrap();
    let mut code = 0;
    let verdict_lines = |l: &&str| !l.contains(" = ") && !l.is_empty() && !l.starts_with("known ");
    for line in text.lines().filter(verdict_lines) {
        let (checker, v) = line.split_once(' ').unwrap();
        if no_appends && needs_writes.contains(&checker) {
            continue;
        }
        // The client-view checkers judge the register workload only.
        let needs_register = ["linearizable", "session-order"];
        if info["workload"] != "register" && needs_register.contains(&checker) {
            continue;
        }
        code = match (code, v) {
            (1, _) | (_, "false") => 1,
            (2, _) | (_, "unknown") => 2,
            _ => 0,
        };
    }
    code
}

#[test]
fn every_fixture_exits_with_its_expected_verdict() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut cases: Vec<String> = std::fs::read_dir(root)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().to_string())
        .collect();
    cases.sort();
    assert!(cases.len() >= 40, "only {} fixtures", cases.len());
    let mut wrong = Vec::new();
    for case in &cases {
        let dir = run_copy(case);
        let out = check(&[dir.path().as_os_str()]);
        let want = expected_exit(case);
        if out.status.code() != Some(want) {
            wrong.push(format!(
                "{case}: exit {:?}, want {want}\n{}",
                out.status.code(),
                String::from_utf8_lossy(&out.stdout)
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn read_slack_flag_is_used_as_given_below_the_observer_timeout() {
    // Reads reordered by 60-70 ms: within the observer's 500 ms timeout (the default slack)
    // the order is not trusted; with --read-slack-ms 50 it is, and a new leader is not newer.
    let case = "valid-reordered-reads-within-slack";
    let dir = run_copy(case);
    let out = check(&[dir.path().as_os_str()]);
    assert_eq!(out.status.code(), Some(0), "{case}: {:?}", out);
    let out = check(&[
        dir.path().as_os_str(),
        "--read-slack-ms".as_ref(),
        "50".as_ref(),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{case}: {stdout}");
    assert!(stdout.contains("epoch-monotonic     invalid"), "{stdout}");
}

#[test]
fn stepdown_slack_flag_changes_the_verdict() {
    // n5 stays LEADING without a quorum for ~2.9 s: beyond syncLimit·tickTime (200 ms) plus the
    // default slack, within it when the slack is 5 s.
    let case = "stepdown-zombie-leader";
    let dir = run_copy(case);
    let out = check(&[dir.path().as_os_str()]);
    assert_eq!(out.status.code(), Some(1));
    let r = results(dir.path());
    let c = r["checkers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "leader-stepdown")
        .unwrap();
    assert_eq!(c["valid"], "false");
    assert!(c["evidence"][0]["event"]["index"].is_u64(), "{c}");
    let out = check(&[
        dir.path().as_os_str(),
        "--stepdown-slack-ms".as_ref(),
        "5000".as_ref(),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("leader-stepdown     valid"), "{stdout}");
}

/// `check --list` is the registry: every checker once, in results order, with what it needs;
/// a run folder with it is refused.
#[test]
fn the_list_names_every_checker_with_what_it_needs() {
    let out = check(&["--list".as_ref()]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    let rows: Vec<Vec<&str>> = text.lines().map(|l| l.split('\t').collect()).collect();
    let names: Vec<&str> = rows.iter().map(|r| r[0]).collect();
    assert_eq!(names, fle_chaos::checker::names().collect::<Vec<_>>());
    let needs = |n: &str| rows.iter().find(|r| r[0] == n).unwrap()[1];
    assert_eq!(needs("durability"), "writes");
    assert_eq!(needs("vote-rule"), "votes");
    assert_eq!(needs("election-safety"), "any run");
    assert!(rows.iter().all(|r| r.len() == 3 && !r[2].is_empty()));
    let both = check(&["--list".as_ref(), fixture("recovery-too-slow").as_os_str()]);
    assert_eq!(both.status.code(), Some(254));
}
