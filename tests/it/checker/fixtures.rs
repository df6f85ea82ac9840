//! Every fixture under tests/fixtures/<case>/ (test.json + history.jsonl, written by
//! tests/fixtures/gen.py) is checked, through the file fast path (`check_run`, which also writes
//! results.json) and through events in memory (`check_history`); each checker's verdict must
//! be the one in expected.txt, on both paths, and every false verdict must quote its evidence.

use fle_chaos::checker::{check_history, check_run, names, CheckOptions, Results, Validity};
use fle_chaos::history::store::read_history;
use fle_chaos::history::test_info::TestInfo;
use std::path::{Path, PathBuf};

fn parse_validity(s: &str) -> Validity {
    match s {
        "true" => Validity::True,
        "false" => Validity::False,
        "unknown" => Validity::Unknown,
        other => panic!("expected.txt: bad verdict {other:?}"),
    }
}

/// (checker, verdict) lines, (checker, measurement key, number) lines, the known findings
/// that cover the run ("ZOOKEEPER-2846"; empty: none) and the known bugs it resembles on a
/// release where they are fixed (empty: none).
type Expected = (
    Vec<(String, Validity)>,
    Vec<(String, String, u64)>,
    String,
    String,
);

fn read_expected(dir: &Path) -> Expected {
    let text = std::fs::read_to_string(dir.join("expected.txt")).expect("expected.txt");
    let mut verdicts = Vec::new();
    let mut measures = Vec::new();
    let mut known = String::new();
    let mut resembles = String::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        if let Some(ids) = line.strip_prefix("known ") {
            known = ids.to_string();
        } else if let Some(ids) = line.strip_prefix("resembles ") {
            resembles = ids.to_string();
        } else if let Some((key, n)) = line.split_once(" = ") {
            let (checker, field) = key.split_once('/').expect("checker/key = N");
            measures.push((checker.to_string(), field.to_string(), n.parse().unwrap()));
        } else {
            let (checker, v) = line.split_once(' ').expect("checker verdict");
            verdicts.push((checker.to_string(), parse_validity(v)));
        }
    }
    (verdicts, measures, known, resembles)
}

fn verdict_of(results: &Results, checker: &str) -> Validity {
    results
        .checkers
        .iter()
        .find(|c| c.name == checker)
        .unwrap_or_else(|| panic!("no checker {checker}"))
        .valid
}

fn fixture_dirs() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    dirs
}

#[test]
fn every_fixture_gets_its_expected_verdicts() {
    let dirs = fixture_dirs();
    assert!(dirs.len() >= 20, "only {} fixtures found", dirs.len());
    let mut failures = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for dir in &dirs {
        let case = dir.file_name().unwrap().to_string_lossy().to_string();
        let run = tempfile::tempdir().unwrap();
        for f in ["test.json", "history.jsonl"] {
            std::fs::copy(dir.join(f), run.path().join(f)).unwrap();
        }
        let opts = CheckOptions::default();
        let from_file = check_run(run.path(), &opts).unwrap();
        let written: Results = serde_json::from_str(
            &std::fs::read_to_string(run.path().join("results.json")).unwrap(),
        )
        .unwrap();
        let info = TestInfo::read(&dir.join("test.json")).unwrap();
        let events = read_history(&dir.join("history.jsonl")).unwrap();
        let in_memory = check_history(&events, &info, &opts);

        let (verdicts, measures, known, resembles) = read_expected(dir);
        for (path, results) in [
            ("file", &from_file),
            ("memory", &in_memory),
            ("results.json", &written),
        ] {
            let got = fle_chaos::checker::known::ids(&results.known);
            if got != known {
                failures.push(format!(
                    "{case}: known findings via {path}: got {got:?}, want {known:?}"
                ));
            }
            let like: Vec<&str> = results.resembles.iter().map(|r| r.id.as_str()).collect();
            if like.join(", ") != resembles {
                failures.push(format!(
                    "{case}: resembles via {path}: got {like:?}, want {resembles:?}"
                ));
            }
        }
        assert_eq!(
            verdicts.len(),
            names().count(),
            "{case}: expected.txt names every checker"
        );
        let mut combined = Validity::True;
        for (checker, want) in &verdicts {
            // A checker the run cannot feed (durability of an observe-only workload) stays out.
            let applicable = from_file
                .checkers
                .iter()
                .any(|c| &c.name == checker && c.applicable);
            if applicable {
                combined = combined.and(*want);
            }
            seen.insert((checker.clone(), *want));
            for (path, results) in [
                ("file", &from_file),
                ("memory", &in_memory),
                ("results.json", &written),
            ] {
                let got = verdict_of(results, checker);
                if got != *want {
                    let c = results
                        .checkers
                        .iter()
                        .find(|c| &c.name == checker)
                        .unwrap();
                    failures.push(format!(
                        "{case}: {checker} via {path}: got {got:?}, want {want:?}: {}",
                        c.explanation
                    ));
                }
            }
        }
        // results.json reads back into the same typed measurements (none falls to `Other`).
        for (a, b) in from_file.checkers.iter().zip(&written.checkers) {
            let json = |m: &fle_chaos::checker::Measurements| serde_json::to_value(m).unwrap();
            if json(&a.measurements) != json(&b.measurements)
                || matches!(b.measurements, fle_chaos::checker::Measurements::Other(_))
            {
                failures.push(format!(
                    "{case}: {} measurements do not read back typed: {:?}",
                    a.name, b.measurements
                ));
            }
        }
        if from_file.valid != combined {
            failures.push(format!(
                "{case}: combined {:?}, want {combined:?}",
                from_file.valid
            ));
        }
        for c in &from_file.checkers {
            if c.valid == Validity::False {
                let quoted = c.evidence.iter().all(|e| e.event["index"].is_u64());
                if c.evidence.is_empty() || !quoted {
                    failures.push(format!(
                        "{case}: {} is false without quoted evidence",
                        c.name
                    ));
                }
            }
        }
        for (checker, key, n) in measures {
            let c = from_file
                .checkers
                .iter()
                .find(|c| c.name == checker)
                .unwrap();
            let all = serde_json::to_value(&c.measurements).unwrap();
            let m = &all[&key];
            let got = m.as_array().map(|a| a.len() as u64).or_else(|| m.as_u64());
            if got != Some(n) {
                failures.push(format!("{case}: {checker} {key} = {m}, want {n}"));
            }
        }
    }
    // Every checker must be seen with every verdict it can give across the fixtures (crash
    // is never unknown: an exit is seen or not; faults is never invalid, only unknown).
    for c in names() {
        let can_give: &[Validity] = match c {
            "crash" => &[Validity::True, Validity::False],
            "faults" => &[Validity::True, Validity::Unknown],
            _ => &[Validity::True, Validity::False, Validity::Unknown],
        };
        for &v in can_give {
            if !seen.contains(&(c.to_string(), v)) {
                failures.push(format!("no fixture where {c} is {v:?}"));
            }
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

/// Every fixture's history stored as a run stores it (zstd frames, here of about 2 KiB so that
/// parts, quotes and the report's scan cross many frames) is checked and reported exactly as
/// the plain one: the same results.json, byte for byte, and the same report and JUnit.
#[test]
fn every_fixture_checks_and_reports_the_same_compressed() {
    use fle_chaos::history::file;
    let mut failures = Vec::new();
    for dir in fixture_dirs() {
        let case = dir.file_name().unwrap().to_string_lossy().to_string();
        let root = tempfile::tempdir().unwrap();
        let (plain, zst) = (root.path().join("run"), root.path().join("run-zst"));
        for d in [&plain, &zst] {
            std::fs::create_dir_all(d).unwrap();
            std::fs::copy(dir.join("test.json"), d.join("test.json")).unwrap();
        }
        let text = std::fs::read(dir.join(file::PLAIN)).unwrap();
        std::fs::write(plain.join(file::PLAIN), &text).unwrap();
        let frames = fle_chaos::history::store::compress_lines(&text, 2048).unwrap();
        std::fs::write(zst.join(file::WRITTEN), frames).unwrap();
        assert_eq!(file::in_run(&zst), zst.join(file::WRITTEN));
        let opts = CheckOptions::default();
        for d in [&plain, &zst] {
            check_run(d, &opts).unwrap();
            fle_chaos::report::render_run(d).unwrap();
        }
        let read = |d: &Path, f: &str| std::fs::read_to_string(d.join(f)).unwrap();
        if read(&plain, "results.json") != read(&zst, "results.json") {
            failures.push(format!("{case}: results.json differs"));
        }
        if read(&plain, "junit.xml") != read(&zst, "junit.xml") {
            failures.push(format!("{case}: junit.xml differs"));
        }
        // The page differs in its link to the history file only (and in the folder's name).
        let page = |d: &Path| {
            read(d, "report.html")
                .lines()
                .filter(|l| !l.contains("the whole history"))
                .collect::<Vec<_>>()
                .join("\n")
                .replace("run-zst", "run")
        };
        if page(&plain) != page(&zst) {
            failures.push(format!("{case}: report.html differs"));
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

/// The end of a run (`finish_run`: one pass, the checkers, the report from what they hold)
/// and `fle-chaos report` on the stored folder (the thin loader) write the same page and
/// JUnit for every fixture, invalid ones (with their evidence moments) included.
#[test]
fn a_finished_runs_report_is_the_one_report_renders_from_its_folder() {
    let mut compared = 0;
    for dir in fixture_dirs() {
        let root = tempfile::tempdir().unwrap();
        let run = root.path().join("run");
        std::fs::create_dir_all(&run).unwrap();
        for f in ["test.json", "history.jsonl"] {
            std::fs::copy(dir.join(f), run.join(f)).unwrap();
        }
        let stored = fle_chaos::store::RunDir::open(&run).unwrap();
        fle_chaos::commands::run::finish::finish_run(&stored).unwrap();
        let read = |f: &str| std::fs::read_to_string(run.join(f)).unwrap();
        let (page, junit) = (read("report.html"), read("junit.xml"));
        fle_chaos::report::render_run(&run).unwrap();
        assert!(
            read("report.html") == page,
            "{}: the page differs",
            dir.display()
        );
        assert_eq!(read("junit.xml"), junit, "{}", dir.display());
        compared += page.contains("class=\"evidence\"") as usize;
    }
    assert!(compared > 0, "no fixture's page had evidence to compare");
}
