//! `sweep.json`: what a sweep (or one shard of it) ran, typed, so `merge`, the summary page,
//! the JUnit file and the trends all read one record instead of re-reading run folders.
//!
//! A run's `code` is its `fle-chaos test` exit code; its `outcome` is what it means for the
//! sweep: the same, except for a seeded-bug run, which is expected to be invalid (caught: 0)
//! and fails the sweep when it is valid (the checkers missed the bug: 1), and for a run
//! invalid only for known bugs when the matrix says `fail_on_known = false` (passed: 0).

use super::keep::Keep;
use super::matrix::{Cell, Shard};
use crate::checker::Validity;
use crate::exit;
use crate::history::situation::Situation;
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The record file in every sweep folder.
pub const FILE: &str = "sweep.json";
/// Bumped when a field changes meaning; `merge` refuses other versions.
pub const FORMAT: u32 = 1;

/// One finished run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    #[serde(flatten)]
    pub cell: Cell,
    /// `fle-chaos test`'s exit code.
    pub code: i32,
    /// What the run means for the sweep (see the module doc).
    pub outcome: i32,
    /// results.json's verdict, when the checkers ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<Validity>,
    /// The run folder, relative to the sweep folder it was recorded in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_dir: Option<PathBuf>,
    /// The child's stderr, relative to the sweep folder.
    pub log: PathBuf,
    /// When the sweep started the run (and handed it what was met so far).
    pub started_at: chrono::DateTime<chrono::Utc>,
    /// When the sweep saw the run end: what it met is handed to every run started after this.
    /// (Older records have none.)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<chrono::DateTime<chrono::Utc>>,
    pub duration_s: f64,
    /// Per fault: ms from its start to a quorum-backed leader (recovery checker's measurements).
    #[serde(default)]
    pub recovery_ms: Vec<u64>,
    /// Per fault: ms until every node that is up had rejoined that leader.
    #[serde(default)]
    pub rejoin_ms: Vec<u64>,
    /// Faults after which no quorum-backed leader was seen before the history ended.
    #[serde(default)]
    pub unrecovered: usize,
    /// The situations the run's faults met (results.json's coverage; empty when it has none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub situations: Vec<Situation>,
    /// Checkers whose verdict was false.
    #[serde(default)]
    pub failed_checkers: Vec<String>,
    /// The known bugs that cover every invalid verdict (results.json's `known`), by id.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub known: Vec<String>,
    /// Why the run has no verdict, when it has none (timed out, bad input, crashed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// A failing run's minimal fault sequence (`--shrink`), relative to the sweep folder; the
    /// summary links it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub minimal: Option<PathBuf>,
    /// The run folder holds only its results and report (`sweep --keep`, `keep::TRIMMED`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub trimmed: bool,
    /// The sweep stopped the run (a signal passed on) before it reached a verdict, whatever
    /// code it then exited with (a child that outlived the grace was killed: 137).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub interrupted: bool,
}

impl RunRecord {
    /// Whether a resume must run it again: stopped before its verdict.
    pub fn unfinished(&self) -> bool {
        self.interrupted || exit::is_interrupted(self.code)
    }
}

/// `sweep.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SweepRecord {
    pub format: u32,
    /// The matrix's name ("nightly") and where it was read.
    pub matrix: String,
    pub origin: String,
    /// Every run id of the whole matrix, in order: `merge` tells a missing shard from this.
    pub matrix_ids: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<Shard>,
    /// The shard folders a merged record was made from.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub merged_from: Vec<PathBuf>,
    pub started_at: chrono::DateTime<chrono::Utc>,
    pub finished_at: chrono::DateTime<chrono::Utc>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_s: Option<f64>,
    pub parallel: usize,
    pub runs: Vec<RunRecord>,
    /// Runs not started because the next would not have fit the budget.
    #[serde(default)]
    pub skipped: Vec<Cell>,
    /// The signal that stopped the sweep ("SIGINT"), if one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interrupted: Option<String>,
    /// The sweep's exit code.
    pub exit_code: i32,
    /// True while the sweep runs (the record is rewritten after every finished run): a folder
    /// a killed sweep left so is finished with `sweep --resume`, and `merge` refuses it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub in_progress: bool,
    /// The `fle-chaos test` flags the sweep gave every run (`--node-binary`, `--net`): a
    /// resumed sweep gives the same.
    #[serde(default)]
    pub pass_through: Vec<String>,
    /// Which runs kept their whole folder (`--keep`).
    #[serde(default = "Keep::everything")]
    pub keep: Keep,
}

impl SweepRecord {
    pub fn write(&self, dir: &Path) -> Result<()> {
        let path = dir.join(FILE);
        let tmp = dir.join(format!(".{FILE}.tmp"));
        std::fs::write(&tmp, serde_json::to_vec_pretty(self)?)
            .with_context(|| format!("cannot write {}", tmp.display()))?;
        std::fs::rename(&tmp, &path).with_context(|| format!("cannot write {}", path.display()))
    }

    pub fn read(dir: &Path) -> Result<SweepRecord> {
        let path = dir.join(FILE);
        let text = std::fs::read_to_string(&path).map_err(|e| {
            exit::bad_input(format!(
                "{}: cannot read it ({e}); give sweep folders written by `fle-chaos sweep`",
                path.display()
            ))
        })?;
        let r: SweepRecord = serde_json::from_str(&text).map_err(|e| {
            exit::bad_input(format!(
                "{}: not a sweep record ({e}); re-run the sweep",
                path.display()
            ))
        })?;
        if r.format != FORMAT {
            return Err(exit::bad_input(format!(
                "{}: sweep record format {} (this fle-chaos reads {FORMAT}); merge with the fle-chaos that ran it",
                path.display(),
                r.format
            )));
        }
        Ok(r)
    }

    /// Puts the runs and the runs not started in the matrix's order (`matrix_ids`).
    pub fn in_matrix_order(&mut self) {
        let order: std::collections::HashMap<&str, usize> = self
            .matrix_ids
            .iter()
            .enumerate()
            .map(|(i, id)| (id.as_str(), i))
            .collect();
        let place = |id: &str| order.get(id).copied().unwrap_or(usize::MAX);
        self.runs.sort_by_key(|r| place(&r.cell.id));
        self.skipped.sort_by_key(|c| place(&c.id));
    }

    /// The worst outcome of the runs (valid when none ran), with the interruption's code
    /// above all.
    pub fn worst(&self) -> i32 {
        self.runs
            .iter()
            .map(|r| r.outcome)
            .fold(exit::VALID, exit::worse)
    }
}

/// What a run's exit code means for the sweep (see the module doc); `known_passes`: the run
/// is invalid only for known bugs and the matrix does not fail on them.
pub fn outcome(cell: &Cell, code: i32, known_passes: bool) -> i32 {
    match (cell.bug.is_some(), code) {
        (true, exit::INVALID) => exit::VALID,
        (true, exit::VALID) => exit::INVALID,
        (false, exit::INVALID) if known_passes => exit::VALID,
        _ => code,
    }
}

/// A word for a run's result, as the summary and the progress lines say it.
pub fn outcome_word(r: &RunRecord) -> &'static str {
    match (r.cell.bug.is_some(), r.code) {
        (true, exit::INVALID) => "caught",
        (true, exit::VALID) => "missed",
        (_, exit::VALID) => "valid",
        (_, exit::INVALID) if !r.known.is_empty() => "known",
        (_, exit::INVALID) => "invalid",
        (_, exit::UNKNOWN) => "unknown",
        (_, exit::BAD_ARGS) => "bad input",
        (_, c) if exit::is_interrupted(c) => "interrupted",
        _ => "crashed",
    }
}

/// The nearest-rank percentile `p` (0..=100) of `values`; None when empty.
pub fn percentile(values: &[u64], p: f64) -> Option<u64> {
    if values.is_empty() {
        return None;
    }
    let mut v = values.to_vec();
    v.sort_unstable();
    let rank = ((p / 100.0) * v.len() as f64).ceil() as usize;
    Some(v[rank.clamp(1, v.len()) - 1])
}

/// "1.23 s" (`crate::duration::span`), or "-" when there is nothing to show.
pub fn ms_text(ms: Option<u64>) -> String {
    match ms {
        Some(ms) => crate::duration::span(ms as f64 / 1e3),
        None => "-".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank() {
        let v: Vec<u64> = (1..=100).rev().collect();
        assert_eq!(percentile(&v, 50.0), Some(50));
        assert_eq!(percentile(&v, 99.0), Some(99));
        assert_eq!(percentile(&v, 100.0), Some(100));
        assert_eq!(percentile(&[7], 99.0), Some(7));
        assert_eq!(percentile(&[3, 1], 50.0), Some(1));
        assert_eq!(percentile(&[], 50.0), None);
    }

    #[test]
    fn a_seeded_bug_run_passes_when_caught_and_fails_when_missed() {
        let plain = Cell::new("fle", "election", "mixed", 3, 1, None);
        let bug = Cell::new(
            "fle",
            "election",
            "mixed",
            3,
            1,
            Some("quorum-minority".into()),
        );
        assert_eq!(outcome(&plain, exit::INVALID, false), exit::INVALID);
        assert_eq!(outcome(&plain, exit::INVALID, true), exit::VALID);
        assert_eq!(outcome(&plain, exit::UNKNOWN, true), exit::UNKNOWN);
        assert_eq!(outcome(&plain, exit::VALID, false), exit::VALID);
        assert_eq!(outcome(&bug, exit::INVALID, false), exit::VALID);
        assert_eq!(outcome(&bug, exit::VALID, false), exit::INVALID);
        assert_eq!(outcome(&bug, exit::VALID, true), exit::INVALID);
        assert_eq!(outcome(&bug, exit::UNKNOWN, false), exit::UNKNOWN);
        assert_eq!(outcome(&bug, exit::CRASHED, false), exit::CRASHED);
    }
}
