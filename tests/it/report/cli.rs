//! `fle-chaos report` and `fle-chaos serve` as real processes: re-rendering a run, bad
//! input exiting 254 with the path and the fix, and serve answering over real TCP (index,
//! report, plots, the whole history streamed, directory listings, no escape from the folder).

use crate::support;

use crate::support::report::fixture::{write_run, FixtureSpec};
use crate::support::report::*;
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_fle-chaos");

#[test]
fn report_rerenders_a_run_and_refuses_what_is_not_a_run_folder() {
    let root = tempfile::tempdir().unwrap();
    let fx = write_run(root.path(), &FixtureSpec::small("cli")).unwrap();
    assert!(!fx.run_dir.join("report.html").exists());
    let out = Command::new(BIN)
        .arg("report")
        .arg(&fx.run_dir)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("report.html"));
    for f in ["report.html", "junit.xml", "timeline.png", "timeline.svg"] {
        assert!(fx.run_dir.join(f).is_file(), "{f} not written");
    }
    assert!(root.path().join("index.html").is_file());

    let missing = root.path().join("no-such-run");
    let out = Command::new(BIN)
        .arg("report")
        .arg(&missing)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(254));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no-such-run") && err.contains("run folder"),
        "{err}"
    );

    let out = Command::new(BIN)
        .arg("report")
        .arg(root.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(254));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no test.json"));

    let out = Command::new(BIN).arg("report").output().unwrap();
    assert_eq!(out.status.code(), Some(254), "RUN_DIR is required");
}

#[test]
fn serve_browses_the_reports_folder_over_http() {
    let root = tempfile::tempdir().unwrap();
    let fx = write_run(root.path(), &FixtureSpec::small("served")).unwrap();
    fle_chaos::report::render_run(&fx.run_dir).unwrap();
    let rel = fx
        .run_dir
        .strip_prefix(root.path())
        .unwrap()
        .to_string_lossy()
        .into_owned();

    let (server, addr) = serve(root.path());
    assert!(
        addr.starts_with("127.0.0.1:"),
        "binds loopback by default: {addr}"
    );

    let (status, ctype, body) = http_get(&addr, "/");
    assert_eq!(status, 200);
    assert!(ctype.starts_with("text/html"));
    let index = String::from_utf8(body).unwrap();
    assert!(
        index.contains(&format!("href=\"{rel}/report.html\"")),
        "index lists the run"
    );

    let (status, ctype, body) = http_get(&addr, &format!("/{rel}/report.html"));
    assert_eq!((status, ctype.as_str()), (200, "text/html; charset=utf-8"));
    assert!(String::from_utf8_lossy(&body).contains("VALID — served"));

    let (status, ctype, body) = http_get(&addr, &format!("/{rel}/timeline.png"));
    assert_eq!((status, ctype.as_str()), (200, "image/png"));
    assert_eq!(&body[..8], b"\x89PNG\r\n\x1a\n");
    assert_eq!(
        body,
        std::fs::read(fx.run_dir.join("timeline.png")).unwrap()
    );

    let (status, _, body) = http_get(&addr, &format!("/{rel}/history.jsonl"));
    assert_eq!(status, 200);
    assert_eq!(
        body,
        std::fs::read(fx.run_dir.join("history.jsonl")).unwrap(),
        "whole history streamed"
    );

    // A compressed history (as a run writes it) is served as its plain text under the same
    // name, and its history view finds the same events.
    let plain = std::fs::read(fx.run_dir.join("history.jsonl")).unwrap();
    let view = |addr: &str| {
        let (status, _, body) = http_get(addr, &format!("/{rel}/history.jsonl?around=40&n=30"));
        assert_eq!(status, 200);
        String::from_utf8(body).unwrap()
    };
    let page_of_plain = view(&addr);
    assert!(page_of_plain.contains("id=\"ev-40\""), "{page_of_plain}");
    let frames = fle_chaos::history::store::compress_lines(&plain, 4096).unwrap();
    std::fs::write(fx.run_dir.join("history.jsonl.zst"), frames).unwrap();
    std::fs::remove_file(fx.run_dir.join("history.jsonl")).unwrap();
    let (status, ctype, body) = http_get(&addr, &format!("/{rel}/history.jsonl"));
    assert_eq!((status, ctype.as_str()), (200, "text/plain; charset=utf-8"));
    assert_eq!(body, plain, "the compressed history streamed as its text");
    assert_eq!(view(&addr), page_of_plain);

    let (status, _, body) = http_get(&addr, "/served/");
    assert_eq!(status, 200);
    let listing = String::from_utf8_lossy(&body).into_owned();
    let stamp = fx
        .run_dir
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    assert!(listing.contains(&format!("href=\"{stamp}/\"")), "{listing}");

    assert_eq!(http_get(&addr, "/%2e%2e/%2e%2e/etc/passwd").0, 400);
    assert_eq!(http_get(&addr, "/served/nothing-here").0, 404);
    drop(server);
}

#[test]
fn serve_refuses_a_missing_folder_and_a_busy_port() {
    let out = Command::new(BIN)
        .args(["serve", "--dir", "/nonexistent-flc-reports"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(254));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent-flc-reports"));

    let root = tempfile::tempdir().unwrap();
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = busy.local_addr().unwrap().port().to_string();
    let out = Command::new(BIN)
        .args(["serve", "--port", &port, "--out"])
        .arg(root.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(254));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&port) && err.contains("--port"), "{err}");
}

/// What `fle-chaos CMD DIR` did: its exit code and stderr.
fn run_cmd(cmd: &str, dir: &std::path::Path) -> (i32, String) {
    let out = Command::new(BIN).arg(cmd).arg(dir).output().unwrap();
    (
        out.status.code().expect("exited, not killed"),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// "line N, column M" in an error, as the history reader names a bad line.
fn position(stderr: &str) -> Option<String> {
    let at = stderr.find("line ")?;
    let rest = &stderr[at..];
    let end = rest.find(':')?;
    Some(rest[..end].to_string())
}

/// Issue 13's done-criterion: `check` and `report` read a history through the same reader,
/// so on every corrupt or torn history they agree: both reject it (254, naming the same line
/// and column) or both accept it (a verdict from `check`, 0 from `report`). The cases are the
/// damaged runs `check`'s own test uses (`support::history`: the four corruptions an older
/// scanner took for valid, other damage, torn tails), then 40 seeded random byte changes to a
/// synthetic run.
#[test]
fn check_and_report_give_the_same_exit_code_on_every_corrupt_or_torn_history() {
    use rand::{Rng, SeedableRng};
    let root = tempfile::tempdir().unwrap();
    // Only the run folders and the reports root holding them may be written: nothing above.
    let above = root.path().parent().unwrap().join("index.html");
    let existed = above.exists();
    let agree = |name: &str, dir: &std::path::Path, reject: Option<bool>| -> bool {
        let (report, report_err) = run_cmd("report", dir);
        let (check, check_err) = run_cmd("check", dir);
        let what = format!("{name}: check {check} ({check_err}), report {report} ({report_err})");
        if check == 254 {
            assert_eq!(report, 254, "{what}");
            let at = position(&check_err).unwrap_or_else(|| panic!("no position: {what}"));
            assert!(at.contains("column"), "{what}");
            assert_eq!(position(&report_err), Some(at), "{what}");
            assert!(report_err.contains("history.jsonl"), "{what}");
        } else {
            assert!([0, 1, 2].contains(&check), "{what}");
            assert_eq!(report, 0, "{what}");
        }
        if let Some(reject) = reject {
            assert_eq!(check == 254, reject, "{what}");
        }
        check == 254
    };

    let shared = support::history::damaged_runs();
    let mut rejected = 0;
    for case in &shared {
        rejected += agree(case.name, &case.dir(), Some(case.expect_check == 254)) as usize;
    }
    assert!(rejected >= 8, "only {rejected} shared cases rejected");

    let fx = write_run(
        root.path(),
        &FixtureSpec {
            duration_s: 6.0,
            results: false,
            ..FixtureSpec::small("damaged")
        },
    )
    .unwrap();
    let text = std::fs::read(fx.run_dir.join("history.jsonl")).unwrap();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(13);
    for k in 0..40 {
        let mut bytes = text.clone();
        let at = rng.gen_range(0..bytes.len());
        bytes[at] = b"0-+eE.\\\"{}[],:x \x01"[rng.gen_range(0..17)];
        let dir = root.path().join("cases").join(format!("c{k}"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::copy(fx.run_dir.join("test.json"), dir.join("test.json")).unwrap();
        std::fs::write(dir.join("history.jsonl"), bytes).unwrap();
        agree(&format!("random change {k} at byte {at}"), &dir, None);
    }
    // The index goes to a run folder's reports root at most (here: inside `root`), never above.
    assert_eq!(
        above.exists(),
        existed,
        "an index was written above the test folder"
    );
}
