//! `sweep --keep`: how much of each run's folder a night keeps. A valid run's history and node
//! folders are most of a night's disk (nearly all of a run folder is its history and `nodes/`)
//! and are rarely opened again: by default only the runs that
//! need a look (invalid, unknown, the tool failing) keep everything, and a valid run keeps what
//! says what it ran and what was found (test.json, results.json, the report and its plots,
//! junit.xml, resources.jsonl).

use super::record::RunRecord;
use crate::exit;
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// Which runs keep their whole folder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Keep {
    /// Only invalid runs (and runs the tool failed) keep everything.
    Invalid,
    /// Invalid and unknown runs (and runs the tool failed) keep everything.
    #[default]
    Unknown,
    /// Every run keeps everything.
    All,
}

/// What a trimmed run folder loses: the history, the nodes' logs and data, the controller's log.
pub const TRIMMED: [&str; 4] = [
    crate::history::file::WRITTEN,
    crate::history::file::PLAIN,
    "nodes",
    crate::store::CONTROLLER_LOG,
];

impl Keep {
    /// What sweeps recorded before `--keep` existed did: keep everything.
    pub fn everything() -> Keep {
        Keep::All
    }

    pub fn name(self) -> &'static str {
        match self {
            Keep::Invalid => "invalid",
            Keep::Unknown => "unknown",
            Keep::All => "all",
        }
    }

    /// Whether `run`'s folder is trimmed. Judged on what the run means for the sweep (a caught
    /// seeded bug is a pass), and never for an interrupted run (a resume runs it again).
    pub fn trims(self, run: &RunRecord) -> bool {
        // A simulated batch's folder holds only its summary and its failing runs already.
        if run.run_dir.is_none() || run.unfinished() || run.cell.is_sim() {
            return false;
        }
        match (self, run.outcome) {
            (Keep::All, _) => false,
            (_, exit::VALID) => true,
            (Keep::Invalid, exit::UNKNOWN) => true,
            _ => false,
        }
    }
}

/// Removes what a trimmed run folder loses (`TRIMMED`); what is already gone is fine.
pub fn trim(run_dir: &Path) -> Result<()> {
    for name in TRIMMED {
        let path = run_dir.join(name);
        let gone = match std::fs::symlink_metadata(&path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => Err(e),
            Ok(m) if m.is_dir() => std::fs::remove_dir_all(&path),
            Ok(_) => std::fs::remove_file(&path),
        };
        gone.with_context(|| format!("cannot trim {}", path.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::sweep::matrix::Cell;

    fn run(code: i32, bug: bool) -> RunRecord {
        let cell = Cell::new(
            "fle",
            "election",
            "mixed",
            3,
            1,
            bug.then(|| "quorum-minority".to_string()),
        );
        RunRecord {
            outcome: crate::commands::sweep::record::outcome(&cell, code, false),
            code,
            verdict: None,
            run_dir: Some("runs/x/1".into()),
            log: "logs/x.log".into(),
            started_at: chrono::Utc::now(),
            ended_at: None,
            duration_s: 1.0,
            recovery_ms: Vec::new(),
            rejoin_ms: Vec::new(),
            unrecovered: 0,
            situations: Vec::new(),
            failed_checkers: Vec::new(),
            known: Vec::new(),
            note: None,
            minimal: None,
            trimmed: false,
            interrupted: false,
            cell,
        }
    }

    #[test]
    fn each_mode_keeps_the_runs_it_names_and_never_an_interrupted_one() {
        let cases = [
            // (code, seeded bug, trimmed under invalid, unknown, all)
            (exit::VALID, false, true, true, false),
            (exit::UNKNOWN, false, true, false, false),
            (exit::INVALID, false, false, false, false),
            (exit::CRASHED, false, false, false, false),
            (exit::INVALID, true, true, true, false), // a caught bug is a pass
            (exit::VALID, true, false, false, false), // a missed bug is a failure
            (143, false, false, false, false),
        ];
        for (code, bug, invalid, unknown, all) in cases {
            let r = run(code, bug);
            assert_eq!(Keep::Invalid.trims(&r), invalid, "{code} {bug}");
            assert_eq!(Keep::Unknown.trims(&r), unknown, "{code} {bug}");
            assert_eq!(Keep::All.trims(&r), all, "{code} {bug}");
        }
        let mut no_folder = run(exit::VALID, false);
        no_folder.run_dir = None;
        assert!(!Keep::Invalid.trims(&no_folder));
    }

    #[test]
    fn trimming_leaves_the_results_and_the_report() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        for f in [
            "history.jsonl.zst",
            "history.jsonl",
            "controller.log",
            "results.json",
            "test.json",
            "report.html",
        ] {
            std::fs::write(d.join(f), "x").unwrap();
        }
        std::fs::create_dir_all(d.join("nodes/n1/data")).unwrap();
        std::fs::write(d.join("nodes/n1/node.log"), "x").unwrap();
        trim(d).unwrap();
        trim(d).unwrap();
        let mut left: Vec<String> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(left, ["report.html", "results.json", "test.json"]);
    }
}
