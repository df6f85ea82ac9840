//! `fle-chaos sweep` and `merge` end to end (issue 19, items 1-3): a small sweep of real
//! clusters (2 schedules x 2 seeds, 3 nodes, 10 s each, --parallel 2) checked through its
//! summary, its JUnit file (parsed), its exit code and the trends; shards plus merge against the
//! whole matrix; a signal passed on to the runs in flight; bad input; and the nightly job files
//! (YAML parsed, systemd units verified, their command lines accepted by fle-chaos).

use crate::support::report::{distinct_colors, parse_xml, read_png};
use crate::support::run::*;
use fle_chaos::commands::sweep::carried::{Carried, CarriedCoverage};
use fle_chaos::commands::sweep::record::SweepRecord;
use fle_chaos::commands::sweep::trends::{read_rows, TrendRow};
use fle_chaos::history::situation::Situation;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

const KILL: &str =
    "interval = \"2s\"\nduration = \"2s\"\n[[fault]]\nkind = \"kill\"\ntarget = \"leader\"\n";
const PAUSE: &str =
    "interval = \"2s\"\nduration = \"2s\"\n[[fault]]\nkind = \"pause\"\ntarget = \"random\"\n";

/// A matrix file in `dir` with the two schedules above (written next to it).
fn small_matrix(dir: &Path, time_limit: &str, seeds: &str) -> PathBuf {
    std::fs::write(dir.join("kill.toml"), KILL).unwrap();
    std::fs::write(dir.join("pause.toml"), PAUSE).unwrap();
    let m = dir.join("small.toml");
    std::fs::write(
        &m,
        format!(
            "time_limit = \"{time_limit}\"\nschedules = [\"{}\", \"{}\"]\nnodes = [3]\nseeds = {seeds}\n",
            dir.join("kill.toml").display(),
            dir.join("pause.toml").display()
        ),
    )
    .unwrap();
    m
}

/// `fle-chaos ARGS`, stderr into `log`; waits up to `timeout`; returns the exit code.
fn run(args: &[&str], log: &Path, timeout: Duration) -> i32 {
    let mut child = fle_chaos()
        .args(args)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .unwrap();
    let code = wait_exit(&mut child, timeout);
    code.unwrap_or_else(|| {
        panic!(
            "fle-chaos {args:?} did not finish in {timeout:?}: {}",
            std::fs::read_to_string(log).unwrap_or_default()
        )
    })
}

/// The run ids `sweep --list` prints.
fn list(matrix: &Path, shard: Option<&str>) -> Vec<String> {
    let mut cmd = fle_chaos();
    cmd.arg("sweep").arg(matrix).arg("--list");
    if let Some(s) = shard {
        cmd.args(["--shard", s]);
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| l.split('\t').next().unwrap().to_string())
        .collect()
}

/// The single sweep folder under `out/sweeps/<matrix>/`.
fn sweep_dirs(out: &Path) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    for m in std::fs::read_dir(out.join("sweeps")).into_iter().flatten() {
        for d in std::fs::read_dir(m.unwrap().path()).unwrap() {
            dirs.push(d.unwrap().path());
        }
    }
    dirs.sort();
    dirs
}

fn no_leftovers(record: &SweepRecord, dir: &Path) {
    for r in &record.runs {
        if let Some(d) = &r.run_dir {
            assert_eq!(leftovers(&resources(&dir.join(d))), Vec::<String>::new());
        }
    }
}

#[test]
fn a_small_sweep_writes_its_summary_junit_exit_code_and_trends() {
    if !root_or_skip("a_small_sweep_writes_its_summary_junit_exit_code_and_trends") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let matrix = small_matrix(tmp.path(), "10s", "[1, 2]");
    let out = tmp.path().join("reports");
    std::fs::create_dir_all(&out).unwrap();
    // An earlier night, and a line that is no row: the night must stay, the line is left out.
    let earlier = TrendRow {
        sweep: "small@2026-11-29T02:00:00Z".into(),
        started_at: "2026-11-29T02:00:00Z".parse().unwrap(),
        matrix: "small".into(),
        schedule: tmp.path().join("kill.toml").display().to_string(),
        target: "fle".into(),
        runs: 2,
        valid: 1,
        invalid: 1,
        unknown: 0,
        no_verdict: 0,
        recovery_p50_ms: Some(900),
        recovery_p99_ms: Some(4000),
        rejoin_p50_ms: Some(1000),
        rejoin_p99_ms: Some(4500),
        situations: 0,
        summary: None,
    };
    std::fs::write(
        out.join("trends.jsonl"),
        format!("{}\n{{\"torn\n", serde_json::to_string(&earlier).unwrap()),
    )
    .unwrap();
    // And a situation an earlier night met, carried in OUT/coverage.json.
    let carried_before: Situation = serde_json::from_value(serde_json::json!(
        {"kind": "clock", "who": "down", "phase": "sync"}
    ))
    .unwrap();
    let mut carried = CarriedCoverage::default();
    carried.sweeps.push(earlier.sweep.clone());
    carried.met.push(Carried {
        situation: carried_before.clone(),
        runs: 3,
        first_sweep: earlier.sweep.clone(),
    });
    carried.write(&out).unwrap();
    let log = tmp.path().join("sweep.stderr");
    let node = fle_node();
    let code = run(
        &[
            "sweep",
            matrix.to_str().unwrap(),
            "--parallel",
            "2",
            "--budget",
            "10m",
            "--out",
            out.to_str().unwrap(),
            "--node-binary",
            &node,
        ],
        &log,
        Duration::from_secs(300),
    );
    let stderr = std::fs::read_to_string(&log).unwrap();
    let dirs = sweep_dirs(&out);
    assert_eq!(dirs.len(), 1, "{dirs:?}\n{stderr}");
    let dir = &dirs[0];
    let record = SweepRecord::read(dir).unwrap();
    no_leftovers(&record, dir);

    // Every run of the matrix ran, in matrix order, each with a verdict and its own report.
    let ids: Vec<&str> = record.runs.iter().map(|r| r.cell.id.as_str()).collect();
    assert_eq!(ids, list(&matrix, None), "{stderr}");
    assert!(record.skipped.is_empty(), "{stderr}");
    let mut worst = 0;
    for r in &record.runs {
        assert!(
            r.verdict.is_some(),
            "{}: no verdict: {r:?}\n{stderr}",
            r.cell.id
        );
        let d = dir.join(r.run_dir.as_ref().unwrap());
        assert!(d.join("report.html").is_file(), "{}", d.display());
        // Faults were injected and measured: the recovery checker's typed measurements.
        assert!(
            !r.recovery_ms.is_empty(),
            "{}: no recovery measured",
            r.cell.id
        );
        worst = fle_chaos::exit::worse(worst, r.code);
    }
    // Two at once: some pair of runs overlapped in time.
    let overlap = record.runs.iter().any(|a| {
        record.runs.iter().any(|b| {
            a.cell.id != b.cell.id
                && a.started_at <= b.started_at
                && (b.started_at - a.started_at).num_milliseconds() < (a.duration_s * 1e3) as i64
        })
    });
    assert!(overlap, "no two runs overlapped with --parallel 2");
    assert_eq!(code, worst, "exit code vs the runs' codes\n{stderr}");
    assert_eq!(record.exit_code, code);
    assert!(stderr.contains("4/4 done"), "{stderr}");

    // The summary lists every run with its result, schedule, seed, recovery and report link.
    let summary = std::fs::read_to_string(dir.join("summary.html")).unwrap();
    for r in &record.runs {
        let row = summary
            .lines()
            .find(|l| l.contains(&format!("<td>{}</td>", r.cell.id)))
            .unwrap_or_else(|| panic!("{} not in the summary", r.cell.id));
        let link = format!("{}/report.html", r.run_dir.as_ref().unwrap().display());
        assert!(row.contains(&link), "{row}");
        assert!(row.contains(&format!("<td>{}</td>", r.cell.seed)), "{row}");
        assert!(row.contains(&r.cell.schedule), "{row}");
        let p50 = fle_chaos::commands::sweep::record::percentile(&r.recovery_ms, 50.0);
        assert!(
            row.contains(&fle_chaos::commands::sweep::record::ms_text(p50)),
            "{row}"
        );
        // Each run's situations come from its results.json's coverage.
        let results: fle_chaos::checker::Results = serde_json::from_str(
            &std::fs::read_to_string(dir.join(r.run_dir.as_ref().unwrap()).join("results.json"))
                .unwrap(),
        )
        .unwrap();
        let met: Vec<_> = (results.coverage.unwrap().met.into_iter())
            .map(|m| m.situation)
            .collect();
        assert!(!met.is_empty(), "{}: a kill or a pause ran", r.cell.id);
        assert_eq!(r.situations, met, "{}", r.cell.id);
        assert!(row.contains(&format!(">{}</td>", met.len())), "{row}");
    }
    // The night's coverage: every situation some run met, once.
    let night: std::collections::BTreeSet<_> =
        record.runs.iter().flat_map(|r| &r.situations).collect();
    assert!(summary.contains("id=\"night-situations\""), "{summary}");
    for s in &night {
        assert_eq!(
            summary.matches(&format!("<td>{}</td>", s.label())).count(),
            1,
            "{summary}"
        );
    }

    // The JUnit file parses, with one testcase per run and failures for invalid ones.
    let xml = std::fs::read_to_string(dir.join("junit.xml")).unwrap();
    let doc = parse_xml(&xml).unwrap_or_else(|e| panic!("junit.xml: {e}\n{xml}"));
    let cases = doc.all("testcase");
    assert_eq!(cases.len(), 4, "{xml}");
    for r in &record.runs {
        let case = cases
            .iter()
            .find(|c| c.attr("name") == Some(r.cell.id.as_str()))
            .unwrap_or_else(|| panic!("{} has no testcase", r.cell.id));
        let failed = !case.all("failure").is_empty() || !case.all("error").is_empty();
        assert_eq!(failed, r.outcome != 0, "{}: {xml}", r.cell.id);
    }
    let suite = &doc.all("testsuite")[0];
    assert_eq!(suite.attr("tests"), Some("4"));

    // Trends: the earlier night kept, this night added per schedule, the torn line said.
    let rows = read_rows(&out.join("trends.jsonl"), &mut |_| {}).unwrap();
    assert!(rows.contains(&earlier), "{rows:?}");
    let tonight: Vec<&TrendRow> = rows.iter().filter(|r| r.sweep != earlier.sweep).collect();
    assert_eq!(tonight.len(), 2, "{rows:?}");
    for t in &tonight {
        assert_eq!(t.runs, 2);
        assert_eq!(t.valid + t.invalid + t.unknown + t.no_verdict, 2);
        assert!(t.recovery_p50_ms.is_some() && t.recovery_p99_ms >= t.recovery_p50_ms);
        let of_group = (record.runs.iter()).filter(|r| r.cell.schedule == t.schedule);
        let met: std::collections::BTreeSet<_> = of_group.flat_map(|r| &r.situations).collect();
        assert!(t.situations > 0 && t.situations == met.len(), "{t:?}");
    }
    assert!(stderr.contains("not a trend row"), "{stderr}");
    let page = std::fs::read_to_string(out.join("trends.html")).unwrap();
    assert!(page.contains("2 sweep(s), 2 series"), "{page}");

    // Carried coverage: each run was handed what earlier nights and the runs finished before
    // it met (its test.json records it); the file now holds both nights' situations.
    let mut handed_over = 0;
    for r in &record.runs {
        let test: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(dir.join(r.run_dir.as_ref().unwrap()).join("test.json"))
                .unwrap(),
        )
        .unwrap();
        let before: std::collections::BTreeSet<Situation> =
            serde_json::from_value(test["settings"]["nemesis"]["met_before"].clone())
                .unwrap_or_else(|e| panic!("{}: met_before: {e}: {test}", r.cell.id));
        assert!(
            before.contains(&carried_before),
            "{}: {before:?}",
            r.cell.id
        );
        for q in &record.runs {
            // Both stamps are the sweep's own: the end it saw, the start it handed over at.
            let q_end = q.ended_at.expect("a run of this sweep has its end");
            if q_end <= r.started_at {
                handed_over += 1;
                let missing: Vec<_> = q
                    .situations
                    .iter()
                    .filter(|s| !before.contains(s))
                    .collect();
                assert!(
                    missing.is_empty(),
                    "{} ran after {}: {missing:?}",
                    r.cell.id,
                    q.cell.id
                );
            }
        }
    }
    // Two at a time: the third and fourth runs start after one of the first two ended.
    assert!(handed_over >= 2, "no run started after another ended");
    let carried = CarriedCoverage::read(&out, &mut |w| panic!("{w}")).unwrap();
    assert_eq!(carried.sweeps.len(), 2, "{carried:?}");
    let mut expected = night
        .iter()
        .map(|s| (*s).clone())
        .collect::<std::collections::BTreeSet<_>>();
    expected.insert(carried_before.clone());
    assert_eq!(carried.situations(), expected);
    let old = carried
        .met
        .iter()
        .find(|c| c.situation == carried_before)
        .unwrap();
    assert_eq!(
        (old.runs, old.first_sweep.as_str()),
        (3, earlier.sweep.as_str())
    );
    for c in carried.met.iter().filter(|c| c.situation != carried_before) {
        let runs = record
            .runs
            .iter()
            .filter(|r| r.situations.contains(&c.situation))
            .count();
        assert_eq!(c.runs, runs as u64, "{c:?}");
    }
    for png in ["trends-verdicts.png", "trends-recovery.png"] {
        let (w, h, px) = read_png(&out.join(png));
        assert!(w >= 1000 && h >= 300, "{png}: {w}x{h}");
        assert!(distinct_colors(&px) > 20, "{png} looks blank");
        assert!(page.contains(png));
    }
}

/// Power loss needs a control socket per node; a sweep's run folders are deep by construction.
const POWER_LOSS: &str =
    "interval = \"2s\"\nduration = \"2s\"\n[[fault]]\nkind = \"power-loss\"\ntarget = \"random\"\n";

#[test]
fn a_sweep_with_power_loss_runs_from_a_folder_nested_200_bytes_deep() {
    if !root_or_skip("a_sweep_with_power_loss_runs_from_a_folder_nested_200_bytes_deep") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let mut deep = tmp.path().to_path_buf();
    while deep.as_os_str().len() < 200 {
        deep.push("a-folder-nested-deep-below-the-checkout");
    }
    std::fs::create_dir_all(&deep).unwrap();
    std::fs::write(deep.join("power.toml"), POWER_LOSS).unwrap();
    let matrix = deep.join("deep.toml");
    std::fs::write(
        &matrix,
        format!(
            "time_limit = \"10s\"\nschedules = [\"{}\"]\nworkloads = [\"writes\"]\nnodes = [3]\nseeds = [1]\n",
            deep.join("power.toml").display()
        ),
    )
    .unwrap();
    let out = deep.join("reports");
    let log = tmp.path().join("sweep.stderr");
    let code = run(
        &[
            "sweep",
            matrix.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--node-binary",
            &fle_node(),
            // The history is read below; a valid run keeps it only so.
            "--keep",
            "all",
        ],
        &log,
        Duration::from_secs(240),
    );
    let stderr = std::fs::read_to_string(&log).unwrap();
    assert_eq!(code, 0, "the correct node must be valid: {stderr}");
    let dirs = sweep_dirs(&out);
    assert_eq!(dirs.len(), 1, "{dirs:?}\n{stderr}");
    let record = SweepRecord::read(&dirs[0]).unwrap();
    no_leftovers(&record, &dirs[0]);
    assert_eq!(record.runs.len(), 1, "{stderr}");
    let run_dir = dirs[0].join(record.runs[0].run_dir.as_ref().unwrap());
    // The node folders are far past a Unix socket path's 107 bytes, and power was still lost.
    assert!(
        run_dir.join("nodes/n1").as_os_str().len() > 200,
        "{}",
        run_dir.display()
    );
    let history =
        fle_chaos::history::store::read_history(&fle_chaos::history::file::in_run(&run_dir))
            .unwrap();
    let losses = nemesis_done(&history, fle_chaos::history::F::PowerLoss);
    assert!(!losses.is_empty(), "no power loss happened: {stderr}");
}

#[test]
fn shards_and_merge_give_the_runs_of_the_whole_sweep() {
    // The slices of the small sweep's matrix are disjoint and make the whole (no run needed).
    let tmp = tempfile::tempdir().unwrap();
    let matrix = small_matrix(tmp.path(), "10s", "[1, 2]");
    let whole = list(&matrix, None);
    let (a, b) = (list(&matrix, Some("1/2")), list(&matrix, Some("2/2")));
    assert_eq!(whole.len(), 4);
    assert!(a.iter().all(|id| !b.contains(id)), "{a:?} {b:?}");
    let mut union: Vec<String> = a.iter().chain(&b).cloned().collect();
    union.sort();
    let mut sorted = whole.clone();
    sorted.sort();
    assert_eq!(union, sorted);

    if !root_or_skip("shards_and_merge_give_the_runs_of_the_whole_sweep") {
        return;
    }
    // Run the two shards at once (a shorter time limit: what is tested is the bookkeeping).
    let quick = tmp.path().join("quick");
    std::fs::create_dir_all(&quick).unwrap();
    let matrix = small_matrix(&quick, "5s", "[1]");
    let node = fle_node();
    let shard_out = |i: usize| tmp.path().join(format!("shard{i}"));
    let mut children: Vec<_> = (1..=2)
        .map(|i| {
            fle_chaos()
                .arg("sweep")
                .arg(&matrix)
                .args([
                    "--shard",
                    &format!("{i}/2"),
                    "--node-binary",
                    &node,
                    "--out",
                ])
                .arg(shard_out(i))
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(tmp.path().join(format!("shard{i}.stderr"))).unwrap())
                .spawn()
                .unwrap()
        })
        .collect();
    for (i, c) in children.iter_mut().enumerate() {
        let code = wait_exit(c, Duration::from_secs(240));
        let stderr =
            std::fs::read_to_string(tmp.path().join(format!("shard{}.stderr", i + 1))).unwrap();
        assert!(
            matches!(code, Some(0..=2)),
            "shard {}: {code:?}\n{stderr}",
            i + 1
        );
        // A shard alone adds nothing to the trends.
        assert!(!shard_out(i + 1).join("trends.jsonl").exists());
    }
    let shard_dirs: Vec<PathBuf> = (1..=2).flat_map(|i| sweep_dirs(&shard_out(i))).collect();
    assert_eq!(shard_dirs.len(), 2, "{shard_dirs:?}");
    for d in &shard_dirs {
        assert!(d.to_string_lossy().contains("-shard-"), "{}", d.display());
        no_leftovers(&SweepRecord::read(d).unwrap(), d);
    }
    let out = tmp.path().join("reports");
    let into = out.join("merged");
    let log = tmp.path().join("merge.stderr");
    let mut args = vec!["merge".to_string()];
    args.extend(shard_dirs.iter().map(|d| d.display().to_string()));
    args.extend([
        "--out".into(),
        out.display().to_string(),
        "--into".into(),
        into.display().to_string(),
    ]);
    let args_ref: Vec<&str> = args.iter().map(String::as_str).collect();
    let code = run(&args_ref, &log, Duration::from_secs(60));
    let stderr = std::fs::read_to_string(&log).unwrap();
    let merged = SweepRecord::read(&into).unwrap();
    let ids: Vec<String> = merged.runs.iter().map(|r| r.cell.id.clone()).collect();
    assert_eq!(ids, list(&matrix, None), "{stderr}");
    assert_eq!(code, merged.exit_code, "{stderr}");
    let worst = merged
        .runs
        .iter()
        .map(|r| r.outcome)
        .fold(0, fle_chaos::exit::worse);
    assert_eq!(code, worst, "{stderr}");
    // The merged pages link to the runs inside the shard folders.
    for r in &merged.runs {
        let report = into.join(r.run_dir.as_ref().unwrap()).join("report.html");
        assert!(report.is_file(), "{}", report.display());
    }
    let xml = std::fs::read_to_string(into.join("junit.xml")).unwrap();
    let doc = parse_xml(&xml).unwrap_or_else(|e| panic!("junit.xml: {e}"));
    assert_eq!(doc.all("testcase").len(), 2, "{xml}");
    let rows = read_rows(&out.join("trends.jsonl"), &mut |_| {}).unwrap();
    assert_eq!(rows.len(), 2, "{rows:?}");
    // Merging again replaces the night's rows instead of adding them twice.
    assert_eq!(run(&args_ref, &log, Duration::from_secs(60)), code);
    assert_eq!(
        read_rows(&out.join("trends.jsonl"), &mut |_| {})
            .unwrap()
            .len(),
        2
    );

    // One shard alone: the other's runs are missing, so the merge cannot say valid.
    let alone = tmp.path().join("alone");
    let code = run(
        &[
            "merge",
            shard_dirs[0].to_str().unwrap(),
            "--out",
            tmp.path().join("alone-reports").to_str().unwrap(),
            "--into",
            alone.to_str().unwrap(),
        ],
        &log,
        Duration::from_secs(60),
    );
    let stderr = std::fs::read_to_string(&log).unwrap();
    assert!(
        code != 0 && stderr.contains("1 missing"),
        "exit {code}: {stderr}"
    );
    let junit = parse_xml(&std::fs::read_to_string(alone.join("junit.xml")).unwrap()).unwrap();
    assert_eq!(junit.all("skipped").len(), 1);
    // The same shard twice is bad input.
    let code = run(
        &[
            "merge",
            shard_dirs[0].to_str().unwrap(),
            shard_dirs[0].to_str().unwrap(),
            "--out",
            tmp.path().join("twice-reports").to_str().unwrap(),
            "--into",
            tmp.path().join("twice").to_str().unwrap(),
        ],
        &log,
        Duration::from_secs(60),
    );
    let stderr = std::fs::read_to_string(&log).unwrap();
    assert_eq!(code, 254, "{stderr}");
    assert!(stderr.contains("is in both"), "{stderr}");
    assert!(
        !tmp.path().join("twice").exists(),
        "a failed merge left its folder"
    );
}

/// The record a sweep keeps on disk while it runs, if it has written one yet.
fn record_now(out: &Path) -> Option<SweepRecord> {
    SweepRecord::read(sweep_dirs(out).first()?).ok()
}

#[test]
fn a_signal_stops_the_sweep_after_its_runs_tore_down_and_resume_finishes_the_night() {
    if !root_or_skip(
        "a_signal_stops_the_sweep_after_its_runs_tore_down_and_resume_finishes_the_night",
    ) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let matrix = small_matrix(tmp.path(), "8s", "[1, 2]");
    let out = tmp.path().join("reports");
    let node = fle_node();
    let log = tmp.path().join("sweep.stderr");
    let mut child = fle_chaos()
        .arg("sweep")
        .arg(&matrix)
        .args(["--parallel", "2", "--node-binary", &node, "--out"])
        .arg(&out)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    // Halfway: a run has finished (the record on disk says so while the sweep runs) and one
    // that has not is up.
    let halfway = wait_for(Duration::from_secs(180), || {
        let Some(r) = record_now(&out) else {
            return false;
        };
        let runs = sweep_dirs(&out)[0].join("runs");
        r.in_progress
            && !r.runs.is_empty()
            && list(&matrix, None).iter().any(|id| {
                !r.runs.iter().any(|f| &f.cell.id == id)
                    && fle_chaos::commands::run::child::newest_run(&runs.join(id))
                        .is_some_and(|d| started_processes(&d) >= 3)
            })
    });
    assert!(
        halfway,
        "{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    );
    let code = wait_exit(&mut child, Duration::from_secs(120));
    let stderr = std::fs::read_to_string(&log).unwrap();
    assert_eq!(code, Some(143), "{stderr}");
    let dir = sweep_dirs(&out)[0].clone();
    let stopped = SweepRecord::read(&dir).unwrap();
    assert_eq!(stopped.interrupted.as_deref(), Some("SIGTERM"));
    assert!(!stopped.in_progress);
    // A run the signal reached is recorded interrupted and run again, whatever its code (it
    // may have finished valid just as the signal came): only the others count as finished.
    let finished: Vec<_> = stopped
        .runs
        .iter()
        .filter(|r| r.code != 143 && !r.interrupted)
        .collect();
    let torn: Vec<_> = stopped
        .runs
        .iter()
        .filter(|r| r.code == 143 || r.interrupted)
        .collect();
    assert!(!finished.is_empty() && !torn.is_empty(), "{stderr}");
    no_leftovers(&stopped, &dir);
    // An interrupted night is not a trend.
    assert!(!out.join("trends.jsonl").exists());

    // A record left in progress (a sweep killed outright) is no shard to merge.
    let copy = tmp.path().join("killed");
    std::fs::create_dir_all(&copy).unwrap();
    let mut killed = stopped.clone();
    killed.in_progress = true;
    killed.write(&copy).unwrap();
    let merge_log = tmp.path().join("merge.stderr");
    let merged = run(
        &[
            "merge",
            copy.to_str().unwrap(),
            "--out",
            tmp.path().join("m").to_str().unwrap(),
        ],
        &merge_log,
        Duration::from_secs(30),
    );
    let merge_err = std::fs::read_to_string(&merge_log).unwrap();
    assert_eq!(merged, 254, "{merge_err}");
    assert!(merge_err.contains("--resume"), "{merge_err}");

    // Resumed: only what did not finish runs; one record, summary and JUnit for the night.
    let resume_log = tmp.path().join("resume.stderr");
    let code = run(
        &[
            "sweep",
            "--resume",
            dir.to_str().unwrap(),
            "--parallel",
            "2",
        ],
        &resume_log,
        Duration::from_secs(300),
    );
    let stderr = std::fs::read_to_string(&resume_log).unwrap();
    let record = SweepRecord::read(&dir).unwrap();
    let ids: Vec<&str> = record.runs.iter().map(|r| r.cell.id.as_str()).collect();
    assert_eq!(ids, list(&matrix, None), "{stderr}");
    assert!(
        !record.in_progress && record.interrupted.is_none(),
        "{stderr}"
    );
    assert_eq!(record.started_at, stopped.started_at);
    assert_eq!(code, record.worst(), "{stderr}");
    for f in &finished {
        let now = record.runs.iter().find(|r| r.cell.id == f.cell.id).unwrap();
        assert_eq!(&now, f, "a finished run was run again");
    }
    for r in &record.runs {
        assert!(r.verdict.is_some(), "{}: {r:?}\n{stderr}", r.cell.id);
        // One folder per run: a torn attempt's folder is gone.
        let attempts = std::fs::read_dir(dir.join("runs").join(&r.cell.id))
            .unwrap()
            .count();
        assert_eq!(attempts, 1, "{}", r.cell.id);
        // --keep's default: a valid run keeps its results and report, not its history.
        let d = dir.join(r.run_dir.as_ref().unwrap());
        assert!(d.join("results.json").is_file() && d.join("report.html").is_file());
        assert_eq!(r.trimmed, r.outcome == 0, "{}", r.cell.id);
        assert_eq!(
            fle_chaos::history::file::exists_in(&d),
            !r.trimmed,
            "{}",
            r.cell.id
        );
    }
    no_leftovers(&record, &dir);
    let xml = std::fs::read_to_string(dir.join("junit.xml")).unwrap();
    let doc = parse_xml(&xml).unwrap();
    assert_eq!(doc.all("testcase").len(), 4, "{xml}");
    assert!(!dir.join(fle_chaos::commands::sweep::resume::LOCK).exists());
    let rows = read_rows(&out.join("trends.jsonl"), &mut |_| {}).unwrap();
    assert_eq!(rows.iter().map(|r| r.runs).sum::<usize>(), 4, "{rows:?}");

    // A finished night has nothing to resume.
    let again = run(
        &["sweep", "--resume", dir.to_str().unwrap()],
        &resume_log,
        Duration::from_secs(30),
    );
    let said = std::fs::read_to_string(&resume_log).unwrap();
    assert_eq!(again, 254, "{said}");
    assert!(said.contains("nothing to resume"), "{said}");
}

#[test]
fn bad_input_is_one_line_and_creates_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let matrix = small_matrix(tmp.path(), "10s", "[1]");
    let bad = tmp.path().join("bad.toml");
    std::fs::write(
        &bad,
        "time_limit = \"10s\"\nschedules = [\"none\"]\nnodes = [3]\nseeds = [1]\ncolor = 1\n",
    )
    .unwrap();
    let out = tmp.path().join("reports");
    for (args, needle) in [
        (vec![bad.to_str().unwrap()], "line 5"),
        (
            vec![matrix.to_str().unwrap(), "--budget", "20s"],
            "not even one run fits",
        ),
        (
            vec![matrix.to_str().unwrap(), "--budget", "soon"],
            "--budget soon",
        ),
        (vec![matrix.to_str().unwrap(), "--shard", "2/1"], "shard"),
        (
            vec![matrix.to_str().unwrap(), "--parallel", "0"],
            "--parallel",
        ),
        (
            vec![tmp.path().join("none.toml").to_str().unwrap()],
            "cannot read",
        ),
    ] {
        let o = fle_chaos()
            .arg("sweep")
            .args(&args)
            .arg("--out")
            .arg(&out)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(254), "{args:?}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
        assert!(!out.exists(), "{args:?} created {}", out.display());
    }
    let o = fle_chaos()
        .args(["merge", tmp.path().to_str().unwrap()])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(254), "{stderr}");
    assert!(stderr.contains("sweep.json"), "{stderr}");
}

/// The strings of a YAML file: its keys and string values.
fn yaml_strings(path: &Path) -> Vec<String> {
    fn walk(v: &serde_json::Value, out: &mut Vec<String>) {
        match v {
            serde_json::Value::String(s) => out.push(s.clone()),
            serde_json::Value::Array(a) => a.iter().for_each(|x| walk(x, out)),
            serde_json::Value::Object(o) => o.iter().for_each(|(k, x)| {
                out.push(k.clone());
                walk(x, out)
            }),
            _ => {}
        }
    }
    let mut out = Vec::new();
    for doc in yaml_documents(path) {
        walk(&doc, &mut out);
    }
    out
}

/// A `fle-chaos sweep|merge ...` command line of a job file, with CI variables filled in.
fn accepted(line: &str, job: &str) {
    let line = line
        .replace("${{ matrix.shard }}", "1")
        .replace("$CI_NODE_INDEX", "1")
        .replace("$CI_NODE_TOTAL", "4")
        .replace('"', "");
    let words: Vec<&str> = line.split_whitespace().collect();
    let at = words
        .iter()
        .position(|w| w.ends_with("fle-chaos"))
        .unwrap_or_else(|| panic!("{job}: no fle-chaos in {line}"));
    let args = &words[at + 1..];
    let o = fle_chaos()
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(args)
        .args(if args[0] == "sweep" {
            &["--list"][..]
        } else {
            &[][..]
        })
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    if args[0] == "sweep" {
        assert!(o.status.success(), "{job}: {line}: {stderr}");
        assert!(!o.stdout.is_empty(), "{job}: {line} lists no runs");
    } else {
        // The folders do not exist here: the flags must parse, the folders be what fails.
        assert_eq!(o.status.code(), Some(254), "{job}: {line}: {stderr}");
        assert!(
            !stderr.contains("see fle-chaos help"),
            "{job}: {line}: {stderr}"
        );
    }
}

#[test]
fn the_nightly_job_files_parse_and_their_commands_are_accepted() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/nightly");
    let mut checked = 0;
    for file in ["github-actions.yml", "gitlab-ci.yml"] {
        let strings = yaml_strings(&dir.join(file));
        let commands: Vec<&String> = strings
            .iter()
            .filter(|s| s.contains("fle-chaos sweep") || s.contains("fle-chaos merge"))
            .collect();
        assert_eq!(commands.len(), 2, "{file}: {commands:?}");
        for c in commands {
            accepted(c, file);
            checked += 1;
        }
    }
    let service = std::fs::read_to_string(dir.join("fle-chaos-nightly.service")).unwrap();
    let exec = service
        .lines()
        .find_map(|l| l.strip_prefix("ExecStart="))
        .expect("ExecStart");
    accepted(exec, "fle-chaos-nightly.service");
    checked += 1;
    // systemd-analyze checks that ExecStart exists: point it at the binary under test.
    if has_systemd_analyze() {
        let tmp = tempfile::tempdir().unwrap();
        let unit = tmp.path().join("fle-chaos-nightly.service");
        std::fs::write(
            &unit,
            service.replace(
                "/opt/fle-chaos/target/release/fle-chaos",
                env!("CARGO_BIN_EXE_fle-chaos"),
            ),
        )
        .unwrap();
        let timer = tmp.path().join("fle-chaos-nightly.timer");
        std::fs::copy(dir.join("fle-chaos-nightly.timer"), &timer).unwrap();
        let o = Command::new("systemd-analyze")
            .arg("verify")
            .arg(&unit)
            .arg(&timer)
            .current_dir(tmp.path())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success() && stderr.trim().is_empty(), "{stderr}");
    } else {
        let why = "systemd-analyze is not installed and installing it needs root (apt-get install systemd)";
        crate::support::skip::skip("systemd-analyze verify", why);
    }
    assert!(checked >= 1);
}

/// Whether `systemd-analyze` runs here, installing Debian's `systemd` for it when missing and
/// root.
fn has_systemd_analyze() -> bool {
    let runs = || {
        Command::new("systemd-analyze")
            .arg("--version")
            .output()
            .is_ok()
    };
    if runs() || !fle_chaos::control::is_root() {
        return runs();
    }
    let mut say = |s: &str| eprintln!("{s}");
    let _ =
        fle_chaos::control::backend::apt::install(&["systemd"], "the job files' test", &mut say);
    runs()
}

/// A test run folder `root/<name>/<stamp>/` started `days` ago.
fn old_run(root: &Path, name: &str, days: i64) -> PathBuf {
    let started = chrono::Utc::now() - chrono::Duration::days(days);
    let dir = root
        .join(name)
        .join(started.format("%Y%m%dT%H%M%S%.3fZ").to_string());
    std::fs::create_dir_all(&dir).unwrap();
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/ack-by-non-leader/test.json"),
    )
    .unwrap();
    let mut info: serde_json::Value = serde_json::from_str(&text).unwrap();
    info["name"] = name.into();
    info["started_at"] = started.to_rfc3339().into();
    std::fs::write(dir.join("test.json"), info.to_string()).unwrap();
    std::fs::write(dir.join("history.jsonl"), "x".repeat(1000)).unwrap();
    dir
}

/// A sweep folder `root/sweeps/<matrix>/<leaf>/` started `days` ago, merged from `shards`.
fn old_sweep(root: &Path, matrix: &str, leaf: &str, days: i64, shards: &[&Path]) -> PathBuf {
    old_shard(root, matrix, leaf, days, shards, None)
}

/// `old_sweep`, as shard `shard` ("1/2") when given.
fn old_shard(
    root: &Path,
    matrix: &str,
    leaf: &str,
    days: i64,
    shards: &[&Path],
    shard: Option<&str>,
) -> PathBuf {
    let started = chrono::Utc::now() - chrono::Duration::days(days);
    let dir = root.join("sweeps").join(matrix).join(leaf);
    std::fs::create_dir_all(dir.join("runs")).unwrap();
    let merged_from: Vec<PathBuf> = shards
        .iter()
        .map(|s| fle_chaos::commands::sweep::merge::relative(&dir, s))
        .collect();
    let record = serde_json::json!({
        "format": fle_chaos::commands::sweep::record::FORMAT, "matrix": matrix, "origin": "test",
        "matrix_ids": [], "started_at": started, "finished_at": started, "parallel": 1,
        "runs": [], "exit_code": 0, "merged_from": merged_from,
    });
    let mut record = record;
    if let Some(s) = shard {
        let (i, n) = s.split_once('/').unwrap();
        record["shard"] = serde_json::json!({"index": i.parse::<u64>().unwrap(), "count": n.parse::<u64>().unwrap()});
    }
    let record: SweepRecord = serde_json::from_value(record).unwrap();
    record.write(&dir).unwrap();
    dir
}

#[test]
fn prune_removes_old_folders_but_the_newest_latest_and_linked_ones_and_updates_their_links() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().canonicalize().unwrap().join("reports");
    let runs = [30, 20, 1].map(|d| old_run(&root, "election", d));
    let pointed = old_run(&root, "other", 40);
    let older_other = old_run(&root, "other", 50);
    std::os::unix::fs::symlink(pointed.strip_prefix(&root).unwrap(), root.join("latest")).unwrap();
    // `latest` also holds the newest "other" here; keep-last 0 below shows it still stays.
    let sweeps = [30, 20, 1].map(|d| old_sweep(&root, "small", &format!("s{d}"), d, &[]));
    // Two sharded nights and a newer lone shard: shards rank among shards, merges among merges.
    let shard_a = old_shard(&root, "sharded", "a-shard-1-of-2", 31, &[], Some("1/2"));
    let merged_a = old_sweep(&root, "sharded", "a-merged", 30, &[&shard_a]);
    let shard = old_shard(&root, "sharded", "b-shard-1-of-2", 21, &[], Some("1/2"));
    let merged = old_sweep(&root, "sharded", "b-merged", 20, &[&shard]);
    let lone = old_shard(&root, "sharded", "c-shard-1-of-2", 15, &[], Some("1/2"));
    let unrelated = root.join("notes");
    std::fs::create_dir_all(&unrelated).unwrap();
    fle_chaos::report::index::update_index(&root).unwrap();
    let rows: Vec<TrendRow> = sweeps
        .iter()
        .map(|d| {
            let r = SweepRecord::read(d).unwrap();
            TrendRow {
                sweep: fle_chaos::commands::sweep::trends::sweep_name(&r),
                started_at: r.started_at,
                matrix: "small".into(),
                schedule: "kill".into(),
                target: "fle".into(),
                runs: 1,
                valid: 1,
                invalid: 0,
                unknown: 0,
                no_verdict: 0,
                recovery_p50_ms: None,
                recovery_p99_ms: None,
                rejoin_p50_ms: None,
                rejoin_p99_ms: None,
                situations: 0,
                summary: Some(format!(
                    "{}/summary.html",
                    d.strip_prefix(&root).unwrap().display()
                )),
            }
        })
        .collect();
    fle_chaos::commands::sweep::trends::write_rows(&root, &rows).unwrap();
    let prune = |extra: &[&str]| {
        let out = fle_chaos()
            .args(["prune", "--out"])
            .arg(&root)
            .args(["--older-than", "14d"])
            .args(extra)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };

    // A dry run says what it would remove and removes nothing.
    let (code, said) = prune(&["--dry-run"]);
    assert_eq!(code, Some(0), "{said}");
    assert!(said.contains("would remove"), "{said}");
    assert!(runs.iter().chain(&sweeps).all(|d| d.exists()), "{said}");

    let (code, said) = prune(&["--keep-last", "1"]);
    assert_eq!(code, Some(0), "{said}");
    // Old ones go, except the newest of each series (here the young ones), what `latest`
    // points to, and a shard a kept merged sweep links.
    let gone = [
        &runs[0],
        &runs[1],
        &older_other,
        &sweeps[0],
        &sweeps[1],
        &merged_a,
        &shard_a,
    ];
    let stay = [
        &runs[2], &pointed, &sweeps[2], &merged, &shard, &lone, &unrelated,
    ];
    for d in gone {
        assert!(!d.exists(), "{} was kept: {said}", d.display());
    }
    for d in stay {
        assert!(d.exists(), "{} was removed: {said}", d.display());
    }
    // What pointed into removed folders no longer does.
    let index = std::fs::read_to_string(root.join("index.html")).unwrap();
    for d in [&runs[0], &runs[1], &older_other] {
        let rel = d.strip_prefix(&root).unwrap().display().to_string();
        assert!(!index.contains(&rel), "index still links {rel}");
    }
    assert!(index.contains(&runs[2].strip_prefix(&root).unwrap().display().to_string()));
    let rows = read_rows(&root.join("trends.jsonl"), &mut |_| {}).unwrap();
    assert_eq!(rows.len(), 3, "a night's figures stay");
    let linked: Vec<bool> = rows.iter().map(|r| r.summary.is_some()).collect();
    assert_eq!(linked, [false, false, true], "{rows:?}");

    // keep-last 0 removes the merged sweep and then its shard too; latest still stays.
    let (code, said) = prune(&["--keep-last", "0"]);
    assert_eq!(code, Some(0), "{said}");
    assert!(
        !merged.exists() && !shard.exists() && !lone.exists(),
        "{said}"
    );
    assert!(pointed.exists(), "{said}");

    let out = fle_chaos()
        .arg("prune")
        .arg(&root)
        .args(["--older-than", "2w"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(254), "{said}");
    assert_eq!(said.lines().count(), 1, "{said}");
    assert!(said.contains("--older-than"), "{said}");
}

/// The documents of a YAML file as JSON values (yaml-rust2, so no Python is needed).
fn yaml_documents(path: &Path) -> Vec<serde_json::Value> {
    fn json(y: &yaml_rust2::Yaml) -> serde_json::Value {
        use yaml_rust2::Yaml;
        match y {
            Yaml::String(s) | Yaml::Real(s) => serde_json::Value::String(s.clone()),
            Yaml::Integer(i) => (*i).into(),
            Yaml::Boolean(b) => (*b).into(),
            Yaml::Array(a) => a.iter().map(json).collect(),
            Yaml::Hash(h) => h
                .iter()
                .map(|(k, v)| {
                    (
                        k.as_str()
                            .map(str::to_string)
                            .unwrap_or_else(|| format!("{k:?}")),
                        json(v),
                    )
                })
                .collect::<serde_json::Map<_, _>>()
                .into(),
            _ => serde_json::Value::Null,
        }
    }
    let text = std::fs::read_to_string(path).unwrap();
    let docs = yaml_rust2::YamlLoader::load_from_str(&text)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    docs.iter().map(json).collect()
}

/// The image the job files name is built by docs/nightly/Containerfile: it installs every
/// package the tool would install at run time (so a pod never waits in apt), and copies what
/// the jobs run (the two binaries, the schedules and workloads, where the jobs look).
#[test]
fn the_container_image_holds_every_package_the_tool_installs() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/nightly");
    let file = std::fs::read_to_string(dir.join("Containerfile")).unwrap();
    let installed: Vec<&str> = file
        .split("apt-get install")
        .nth(1)
        .expect("an apt-get install in the Containerfile")
        .split("&&")
        .next()
        .unwrap()
        .split_whitespace()
        .filter(|w| !w.starts_with('-') && *w != "\\")
        .collect();
    let needed = fle_chaos::control::backend::os_setup::every_package()
        .into_iter()
        .chain(
            fle_chaos::control::sut::zookeeper::os_setup::PACKAGES
                .iter()
                .copied(),
        )
        .chain(["openssh-client"]);
    for package in needed {
        assert!(
            installed.contains(&package),
            "{package} not in {installed:?}"
        );
    }
    let k8s = std::fs::read_to_string(dir.join("kubernetes.yml")).unwrap();
    for (what, path) in [
        ("workingDir", "/opt/fle-chaos"),
        ("the binaries", "target/release/"),
        ("the sweep matrices", "workloads"),
    ] {
        assert!(k8s.contains(path) && file.contains(path), "{what}: {path}");
    }
}

#[test]
fn the_kubernetes_indexed_job_runs_every_slice_of_the_matrix_once() {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/nightly/kubernetes.yml");
    let docs = yaml_documents(&file);
    let job = |name: &str| {
        docs.iter()
            .find(|d| d["kind"] == "Job" && d["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("no Job {name}"))
    };
    let sweep = job("flc-nightly-sweep");
    assert_eq!(sweep["spec"]["completionMode"], "Indexed");
    let n = sweep["spec"]["completions"].as_u64().unwrap();
    let script = sweep["spec"]["template"]["spec"]["containers"][0]["args"][0]
        .as_str()
        .unwrap();
    let line = |start: &str| {
        script
            .lines()
            .map(str::trim)
            .find(|l| l.starts_with(start))
            .unwrap_or_else(|| panic!("no line starting {start}: {script}"))
            .to_string()
    };
    let shard_line = line("shard=");
    let fresh = line("exec target/release/fle-chaos sweep workloads");
    // Each pod's index, through the job's own shell line, names one slice: all N, once each.
    let mut shards = Vec::new();
    let mut runs: Vec<String> = Vec::new();
    for index in 0..n {
        let o = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "JOB_COMPLETION_INDEX={index}; {shard_line}; printf %s \"$shard\""
            ))
            .output()
            .unwrap();
        let shard = String::from_utf8(o.stdout).unwrap();
        let args: Vec<String> = fresh
            .replace("\"$shard\"", &shard)
            .replace("\"$out\"", "/nonexistent")
            .split_whitespace()
            .skip(2)
            .map(String::from)
            .collect();
        let o = fle_chaos()
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .args(&args)
            .arg("--list")
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        runs.extend(
            String::from_utf8(o.stdout)
                .unwrap()
                .lines()
                .map(|l| l.split('\t').next().unwrap().to_string()),
        );
        shards.push(shard);
    }
    let want: Vec<String> = (1..=n).map(|i| format!("{i}/{n}")).collect();
    assert_eq!(shards, want);
    let mut all = list(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("workloads/sweeps/nightly.toml"),
        None,
    );
    all.sort();
    runs.sort();
    assert_eq!(runs, all, "the slices together are not the matrix, once");
    // The merge Job's command parses (its folders do not exist here).
    let merge = job("flc-nightly-merge")["spec"]["template"]["spec"]["containers"][0]["args"][0]
        .as_str()
        .unwrap();
    let command = merge
        .lines()
        .find(|l| l.contains("fle-chaos merge"))
        .unwrap();
    accepted(command.split("||").next().unwrap(), "kubernetes.yml");
}

/// `targets = ["sim"]`: each cell is a batch of simulated runs (`fle-chaos simulate`), no
/// root, no cluster. The correct node's batch passes; a seeded bug's batch is caught (a
/// pass for the sweep), with the checkers that caught it; the summary links each batch's own
/// summary; a sim cell with an unknown bug is refused before anything runs.
#[test]
fn a_sweep_runs_simulated_batches_as_cells() {
    let dir = tempfile::tempdir().unwrap();
    let m = dir.path().join("sim.toml");
    std::fs::write(
        &m,
        "time_limit = \"20s\"\ntargets = [\"sim\"]\nworkloads = [\"writes\"]\nschedules = [\"mixed\"]\nnodes = [3]\nseeds = [1]\nbugs = [\"none\", \"quorum-minority\"]\nsim_runs = 20\n",
    )
    .unwrap();
    let out = dir.path().join("out");
    let log = dir.path().join("sweep.log");
    let code = run(
        &["sweep", m.to_str().unwrap(), "--out", out.to_str().unwrap()],
        &log,
        Duration::from_secs(300),
    );
    let said = std::fs::read_to_string(&log).unwrap();
    assert_eq!(code, fle_chaos::exit::VALID, "{said}");
    let sweep = &sweep_dirs(&out)[0];
    let record = SweepRecord::read(sweep).unwrap();
    assert_eq!(record.runs.len(), 2, "{said}");
    let correct = record.runs.iter().find(|r| r.cell.bug.is_none()).unwrap();
    let buggy = record.runs.iter().find(|r| r.cell.bug.is_some()).unwrap();
    assert_eq!(correct.verdict, Some(fle_chaos::checker::Validity::True));
    assert!(
        correct
            .note
            .as_deref()
            .unwrap_or("")
            .starts_with("20 simulated runs (seeds 1-20)"),
        "{:?}",
        correct.note
    );
    assert_eq!(buggy.verdict, Some(fle_chaos::checker::Validity::False));
    assert_eq!(buggy.outcome, fle_chaos::exit::VALID, "a caught bug passes");
    assert!(!buggy.failed_checkers.is_empty());
    for r in [correct, buggy] {
        let batch = sweep.join(r.run_dir.as_ref().unwrap());
        assert!(batch.join("summary.json").is_file(), "{}", batch.display());
    }
    let summary = std::fs::read_to_string(sweep.join("summary.html")).unwrap();
    assert!(
        summary.contains("/summary.html\">simulated runs</a>"),
        "{summary}"
    );
    // A sim cell is checked as `simulate` checks its flags, before anything runs.
    std::fs::write(
        &m,
        "time_limit = \"20s\"\ntargets = [\"sim\"]\nschedules = [\"mixed\"]\nnodes = [3]\nseeds = [1]\nbugs = [\"no-such-bug\"]\n",
    )
    .unwrap();
    let out2 = dir.path().join("out2");
    let code = run(
        &[
            "sweep",
            m.to_str().unwrap(),
            "--out",
            out2.to_str().unwrap(),
        ],
        &log,
        Duration::from_secs(60),
    );
    let said = std::fs::read_to_string(&log).unwrap();
    assert_eq!(code, 254, "{said}");
    assert!(said.contains("no-such-bug"), "{said}");
    assert!(sweep_dirs(&out2).is_empty(), "nothing created");
}
