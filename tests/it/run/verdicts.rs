//! Every run ends with a verdict it can defend (issue 14), on real processes and real
//! filesystems: a history that cannot be written aborts the run at once (255, the reason,
//! nothing left behind); `report` and `check` on a run copied elsewhere write only inside it
//! and the folder that holds it; a node binary that exits at start aborts the run (255, its
//! message, nothing left); a node killed from outside mid-run is the `crash` checker's finding;
//! a run whose planned faults were never injected is unknown (the `faults` checker).

use crate::support::run::*;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// A tiny tmpfs mounted for one test, unmounted (and its folder removed) however it ends.
struct SmallDisk {
    dir: tempfile::TempDir,
}

impl SmallDisk {
    fn mount(size: &str) -> SmallDisk {
        let dir = tempfile::Builder::new()
            .prefix("flc-disk-")
            .tempdir()
            .unwrap();
        let ok = Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size}"),
                "flc-test-disk",
            ])
            .arg(dir.path())
            .status()
            .unwrap()
            .success();
        assert!(ok, "cannot mount a tmpfs on {}", dir.path().display());
        SmallDisk { dir }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.dir.path()).status();
    }
}

/// Writes `path` until its filesystem has no space left.
fn fill(path: &Path) {
    use std::io::Write;
    let mut f = std::fs::File::create(path).unwrap();
    let chunk = vec![0u8; 64 << 10];
    loop {
        match f.write(&chunk) {
            Ok(0) => return,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::StorageFull => return,
            Err(e) => panic!("cannot fill {}: {e}", path.display()),
        }
    }
}

#[test]
fn a_history_that_cannot_be_written_aborts_the_run_at_once() {
    if !root_or_skip("a_history_that_cannot_be_written_aborts_the_run_at_once") {
        return;
    }
    // The disk fills once the run is under way (a filler file takes what is left), so the
    // next history frame, due within a second, cannot be written; the run must stop then.
    let disk = SmallDisk::mount("8m");
    let out = disk.path().join("reports");
    let log = tempfile::tempdir().unwrap();
    let mut child = fle_chaos()
        .args([
            "test",
            "--nodes",
            "3",
            "--time-limit",
            "120",
            "--nemesis",
            "none",
        ])
        .args([
            "--workload",
            "election",
            "--node-binary",
            &fle_node(),
            "--out",
        ])
        .arg(&out)
        .stderr(std::fs::File::create(log.path().join("stderr")).unwrap())
        .spawn()
        .unwrap();
    let observing = wait_for(Duration::from_secs(60), || {
        run_dir(&out).is_some_and(|d| {
            std::fs::metadata(d.join("history.jsonl.zst")).is_ok_and(|m| m.len() > 0)
        })
    });
    assert!(observing, "the run never wrote a history frame");
    fill(&disk.path().join("flc-filler"));
    let started = Instant::now();
    let o = wait_exit(&mut child, Duration::from_secs(90));
    let took = started.elapsed();
    let stderr = std::fs::read_to_string(log.path().join("stderr")).unwrap();
    assert_eq!(o, Some(255), "{stderr}");
    // At once: long before the 120 s of the run (and its recovery wait) would end.
    assert!(took < Duration::from_secs(30), "took {took:?}: {stderr}");
    assert!(
        stderr.contains("cannot write the history") && stderr.contains("No space left"),
        "{stderr}"
    );
    let dir = run_dir(&out).expect("the run folder");
    assert_eq!(leftovers(&resources(&dir)), Vec::<String>::new());
    assert!(
        !dir.join("results.json").exists(),
        "a verdict on a torn history"
    );
}

/// Every file and folder under `root`, relative.
fn tree(root: &Path) -> BTreeSet<PathBuf> {
    let mut all = BTreeSet::new();
    let mut todo = vec![root.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if e.file_type().unwrap().is_dir() {
                todo.push(p.clone());
            }
            all.insert(p.strip_prefix(root).unwrap().to_path_buf());
        }
    }
    all
}

#[test]
fn report_and_check_on_a_copied_run_write_nothing_outside_it() {
    // A run copied to BASE/x/run: its reports root is BASE/x (no `latest` or index.html in
    // BASE/x or BASE), so nothing may appear in BASE outside x.
    let base = tempfile::Builder::new()
        .prefix("flc-copy-")
        .tempdir()
        .unwrap();
    let run = base.path().join("x").join("run");
    std::fs::create_dir_all(&run).unwrap();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/valid-writes");
    for f in ["test.json", "history.jsonl"] {
        std::fs::copy(fixture.join(f), run.join(f)).unwrap();
    }
    let before = tree(base.path());
    for cmd in ["check", "report"] {
        let o = fle_chaos().arg(cmd).arg(&run).output().unwrap();
        assert_eq!(
            o.status.code(),
            Some(0),
            "{cmd}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    let after = tree(base.path());
    let new: Vec<&PathBuf> = after.difference(&before).collect();
    assert!(
        new.iter().any(|p| p.ends_with("run/report.html")),
        "{new:?}"
    );
    assert!(
        new.iter().any(|p| p.ends_with("run/results.json")),
        "{new:?}"
    );
    let outside: Vec<&&PathBuf> = new
        .iter()
        .filter(|p| !p.starts_with("x/run") && p.as_path() != Path::new("x/index.html"))
        .collect();
    assert!(outside.is_empty(), "written outside the run: {outside:?}");
    // The index of its root lists the run.
    let index = std::fs::read_to_string(base.path().join("x/index.html")).unwrap();
    assert!(index.contains("run/report.html"), "{index}");
}

#[test]
fn a_node_binary_that_exits_at_start_aborts_the_run_with_its_message() {
    if !root_or_skip("a_node_binary_that_exits_at_start_aborts_the_run_with_its_message") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let node = tmp.path().join("node.sh");
    std::fs::write(
        &node,
        "#!/bin/sh\necho 'starting'\necho 'flc-node: cannot open the data folder' >&2\nexit 3\n",
    )
    .unwrap();
    std::fs::set_permissions(&node, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let out = tmp.path().join("reports");
    let mut child = spawn_test(
        &["--nodes", "3", "--time-limit", "30", "--nemesis", "none"],
        &out,
        node.to_str().unwrap(),
    );
    let code = wait_exit(&mut child, Duration::from_secs(60));
    let stderr = std::fs::read_to_string(out.with_extension("stderr")).unwrap();
    assert_eq!(code, Some(255), "{stderr}");
    assert!(
        stderr.contains("exited during start")
            && stderr.contains("exit status 3")
            && stderr.contains("cannot open the data folder"),
        "{stderr}"
    );
    let dir = run_dir(&out).expect("the run folder");
    let recorded = resources(&dir);
    assert!(!recorded.is_empty(), "nothing was recorded");
    assert_eq!(leftovers(&recorded), Vec::<String>::new());
    let history =
        fle_chaos::history::store::read_history(&fle_chaos::history::file::in_run(&dir)).unwrap();
    let exit = history
        .iter()
        .find(|e| e.f == fle_chaos::history::F::NodeExit)
        .expect("a node-exit event");
    assert_eq!(exit.value["status"], 3, "{exit:?}");
    assert_eq!(exit.value["caused_by_controller"], false);
}

#[test]
fn a_node_killed_from_outside_mid_run_is_a_crash() {
    if !root_or_skip("a_node_killed_from_outside_mid_run_is_a_crash") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("reports");
    let mut child = spawn_test(
        &["--nodes", "3", "--time-limit", "10", "--nemesis", "none"],
        &out,
        &fle_node(),
    );
    // Once a leader has followers (the run is past its start), kill n2 as an outsider would.
    let mut dir = None;
    let running = wait_for(Duration::from_secs(60), || {
        dir = run_dir(&out);
        dir.as_ref().is_some_and(|d| {
            let h = fle_chaos::history::file::read_text(&fle_chaos::history::file::in_run(d))
                .unwrap_or_default();
            let in_broadcast = |state: &str| {
                h.lines()
                    .any(|l| l.contains(state) && l.contains("\"zab_phase\":\"broadcast\""))
            };
            in_broadcast("\"LEADING\"") && in_broadcast("\"FOLLOWING\"")
        })
    });
    assert!(running, "the cluster never elected a leader");
    let dir = dir.unwrap();
    let pid = resources(&dir)
        .iter()
        .find_map(|r| match r {
            fle_chaos::control::backend::registry::Resource::Process { pid, node, .. }
                if node == "n2" =>
            {
                Some(*pid)
            }
            _ => None,
        })
        .expect("n2's pid");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let code = wait_exit(&mut child, Duration::from_secs(120));
    let stderr = std::fs::read_to_string(out.with_extension("stderr")).unwrap();
    assert_eq!(code, Some(1), "{stderr}");
    let results: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("results.json")).unwrap()).unwrap();
    let crash = results["checkers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "crash")
        .expect("a crash checker");
    assert_eq!(crash["valid"], "false", "{crash}");
    let why = crash["explanation"].as_str().unwrap();
    assert!(
        why.contains("n2 exited by itself") && why.contains("SIGKILL"),
        "{why}"
    );
    assert!(!crash["evidence"].as_array().unwrap().is_empty());
    assert_eq!(leftovers(&resources(&dir)), Vec::<String>::new());
}

#[test]
fn a_run_whose_planned_faults_were_never_injected_is_unknown() {
    // A real run's history (a final heal, no fault) whose test.json says the plan held faults.
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/valid-writes");
    for (planned, code, faults) in [(3, 2, "unknown"), (0, 0, "true")] {
        let run = tempfile::tempdir().unwrap();
        std::fs::copy(
            fixture.join("history.jsonl"),
            run.path().join("history.jsonl"),
        )
        .unwrap();
        let mut info: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(fixture.join("test.json")).unwrap())
                .unwrap();
        info["settings"]["faults_planned"] = planned.into();
        std::fs::write(run.path().join("test.json"), info.to_string()).unwrap();
        let o = fle_chaos().arg("check").arg(run.path()).output().unwrap();
        let stdout = String::from_utf8_lossy(&o.stdout);
        assert_eq!(o.status.code(), Some(code), "planned {planned}: {stdout}");
        let results: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(run.path().join("results.json")).unwrap(),
        )
        .unwrap();
        let c = results["checkers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == "faults")
            .expect("a faults checker");
        assert_eq!(c["valid"], faults, "planned {planned}: {c}");
        if planned > 0 {
            assert!(
                c["explanation"]
                    .as_str()
                    .unwrap()
                    .contains("No fault was injected"),
                "{c}"
            );
        }
    }
}
