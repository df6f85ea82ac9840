//! Resumable sweeps: a sweep folder says, in its `sweep.json` (rewritten after every finished
//! run) and its copy of the matrix (`matrix.toml`), what the night was and which runs finished.
//! `sweep --resume DIR` runs only the others: a run interrupted mid-way (by a signal, or by a
//! sweep killed outright, which leaves no record of it) is run again from scratch; a finished
//! one is never re-run. The night ends with the summary, JUnit and trends an uninterrupted one
//! would have written.
//!
//! A lock (`.flc-sweep.lock`, held with flock for as long as a sweep works in the folder) keeps
//! a resume away from a sweep still running there; the kernel drops it when that sweep dies.

use super::matrix::{Cell, Matrix};
use super::record::SweepRecord;
use crate::exit::bad_input;
use anyhow::{Context, Result};
use nix::fcntl::{Flock, FlockArg};
use std::path::{Path, PathBuf};

/// The copy of the matrix file in every sweep folder.
pub const MATRIX_COPY: &str = "matrix.toml";
/// The lock file a working sweep holds.
pub const LOCK: &str = ".flc-sweep.lock";

/// What is left of an unfinished sweep.
pub struct Unfinished {
    /// The lock on the folder, taken before anything in it was read or removed.
    pub held: Held,
    /// The sweep folder (canonical).
    pub dir: PathBuf,
    /// OUT, the folder the sweep folder is in (`OUT/sweeps/<matrix>/<time>`).
    pub out: PathBuf,
    pub matrix: Matrix,
    /// The record as the sweep left it, holding only its finished runs.
    pub record: SweepRecord,
    /// The runs of its slice still to run, in matrix order.
    pub left: Vec<Cell>,
}

/// A sweep's hold on its folder; dropping it removes the lock file.
pub struct Held {
    lock: Option<Flock<std::fs::File>>,
    path: PathBuf,
}

impl Drop for Held {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
        drop(self.lock.take());
    }
}

/// Takes the folder's lock, or says that a sweep is working in it.
pub fn hold(dir: &Path) -> Result<Held> {
    try_hold(dir)?.ok_or_else(|| {
        bad_input(format!(
            "{}: a sweep is still running in it; wait for it to end, or stop it, then resume",
            dir.display()
        ))
    })
}

/// Takes the folder's lock; None when a sweep holds it.
pub fn try_hold(dir: &Path) -> Result<Option<Held>> {
    let path = dir.join(LOCK);
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .with_context(|| format!("cannot create {}", path.display()))?;
    match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
        Ok(lock) => Ok(Some(Held {
            lock: Some(lock),
            path,
        })),
        Err((_, nix::errno::Errno::EWOULDBLOCK)) => Ok(None),
        Err((_, e)) => Err(e).with_context(|| format!("cannot lock {}", path.display())),
    }
}

/// Reads the sweep folder `dir` and works out what is left to run; nothing in it changes yet
/// (see `remove_torn`).
pub fn open(dir: &Path) -> Result<Unfinished> {
    let dir = dir.canonicalize().map_err(|e| {
        bad_input(format!(
            "--resume {}: {e}; give a sweep folder (OUT/sweeps/NAME/TIME)",
            dir.display()
        ))
    })?;
    if !dir.join(super::record::FILE).is_file() {
        return Err(bad_input(format!(
            "--resume {}: no {} in it; give a sweep folder (OUT/sweeps/NAME/TIME)",
            dir.display(),
            super::record::FILE
        )));
    }
    let held = hold(&dir)?;
    let mut record = SweepRecord::read(&dir)?;
    if !record.merged_from.is_empty() {
        return Err(bad_input(format!(
            "--resume {}: a merged folder is not resumed; resume the unfinished shard folders, then merge again",
            dir.display()
        )));
    }
    let copy = dir.join(MATRIX_COPY);
    let text = std::fs::read_to_string(&copy).map_err(|e| {
        bad_input(format!(
            "--resume {}: cannot read {MATRIX_COPY} ({e}): the sweep was made by an older \
             fle-chaos; run the night again",
            dir.display()
        ))
    })?;
    let matrix = Matrix::parse(&record.matrix, &record.origin, &text)
        .map_err(|e| bad_input(format!("--resume {}: {MATRIX_COPY}: {e}", dir.display())))?;
    let ids: Vec<&str> = matrix.cells.iter().map(|c| c.id.as_str()).collect();
    if ids
        != record
            .matrix_ids
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>()
    {
        return Err(bad_input(format!(
            "--resume {}: {MATRIX_COPY} does not expand to the runs sweep.json lists; run the \
             night again",
            dir.display()
        )));
    }
    record.runs.retain(|r| !r.unfinished());
    let done: std::collections::HashSet<&str> =
        record.runs.iter().map(|r| r.cell.id.as_str()).collect();
    let left: Vec<Cell> = matrix
        .slice(record.shard)
        .into_iter()
        .filter(|c| !done.contains(c.id.as_str()))
        .collect();
    // Killed after its last run (while shrinking or writing its pages): nothing left to run,
    // but the night's pages are still to write.
    if left.is_empty() && !record.in_progress {
        return Err(bad_input(format!(
            "--resume {}: every run of it finished; nothing to resume",
            dir.display()
        )));
    }
    let sweeps = dir.parent().and_then(Path::parent);
    let out = sweeps
        .filter(|s| s.file_name().is_some_and(|n| n == "sweeps"))
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .ok_or_else(|| {
            bad_input(format!(
                "--resume {}: not a folder OUT/sweeps/NAME/TIME as `sweep` writes them; resume it where it was written",
                dir.display()
            ))
        })?;
    Ok(Unfinished {
        held,
        dir,
        out,
        matrix,
        record,
        left,
    })
}

/// Removes what earlier attempts left of the runs about to run again (their run folders), so
/// the night holds one folder per run. Called once the resume is sure to go ahead.
pub fn remove_torn(dir: &Path, left: &[Cell]) -> Result<()> {
    for cell in left {
        let attempt = dir.join("runs").join(&cell.id);
        if attempt.exists() {
            std::fs::remove_dir_all(&attempt)
                .with_context(|| format!("cannot remove {}", attempt.display()))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const MATRIX: &str =
        "time_limit = \"5s\"\nschedules = [\"none\"]\nnodes = [3]\nseeds = [1, 2]\n";

    /// A sweep folder OUT/sweeps/small/T whose record holds `runs` (id, code, interrupted).
    fn folder(out: &Path, runs: &[(&str, i32, bool)], in_progress: bool) -> PathBuf {
        let m = Matrix::parse("small", "test", MATRIX).unwrap();
        let dir = out.join("sweeps/small/T");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(MATRIX_COPY), MATRIX).unwrap();
        let runs: Vec<serde_json::Value> = runs
            .iter()
            .map(|(id, code, interrupted)| {
                let cell = m.cells.iter().find(|c| c.id == *id).unwrap();
                let mut r = serde_json::to_value(cell).unwrap();
                r["code"] = (*code).into();
                r["outcome"] = (*code).into();
                r["log"] = "logs/x.log".into();
                r["started_at"] = "2026-12-01T00:00:00Z".into();
                r["duration_s"] = 1.0.into();
                r["interrupted"] = (*interrupted).into();
                r
            })
            .collect();
        let record = serde_json::json!({
            "format": super::super::record::FORMAT, "matrix": "small", "origin": "test",
            "matrix_ids": m.cells.iter().map(|c| c.id.clone()).collect::<Vec<_>>(),
            "started_at": "2026-12-01T00:00:00Z", "finished_at": "2026-12-01T00:00:00Z",
            "parallel": 1, "runs": runs, "exit_code": 0, "in_progress": in_progress,
        });
        let record: SweepRecord = serde_json::from_value(record).unwrap();
        record.write(&dir).unwrap();
        dir
    }

    fn left(u: &Unfinished) -> Vec<&str> {
        u.left.iter().map(|c| c.id.as_str()).collect()
    }

    #[test]
    fn what_is_left_is_what_did_not_reach_a_verdict() {
        let tmp = tempfile::tempdir().unwrap();
        let out = tmp.path().canonicalize().unwrap();
        let (one, two) = ("fle-writes-none-n3-s1", "fle-writes-none-n3-s2");
        // Killed outright: the second run has no record at all.
        let dir = folder(&out, &[(one, 0, false)], true);
        let u = open(&dir).unwrap();
        assert_eq!(left(&u), [two]);
        assert_eq!(u.out, out);
        assert_eq!(u.record.runs.len(), 1);
        drop(u);
        // Stopped by the sweep, whatever code it then exited with.
        let dir = folder(&out, &[(one, 1, false), (two, 137, true)], false);
        assert_eq!(left(&open(&dir).unwrap()), [two]);
        let dir = folder(&out, &[(one, 143, false), (two, 2, false)], false);
        assert_eq!(left(&open(&dir).unwrap()), [one]);
        // Killed after its last run: nothing to run, but its pages are still to write.
        let dir = folder(&out, &[(one, 0, false), (two, 0, false)], true);
        assert!(open(&dir).unwrap().left.is_empty());
        // Finished: nothing to resume.
        let dir = folder(&out, &[(one, 0, false), (two, 0, false)], false);
        let e = open(&dir).err().unwrap().to_string();
        assert!(e.contains("nothing to resume"), "{e}");
    }

    #[test]
    fn a_folder_out_of_place_or_merged_or_busy_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let out = tmp.path().canonicalize().unwrap();
        let dir = folder(&out, &[], true);
        let moved = out.join("copied");
        std::fs::rename(&dir, &moved).unwrap();
        let e = open(&moved).err().unwrap().to_string();
        assert!(e.contains("not a folder OUT/sweeps/NAME/TIME"), "{e}");
        let dir = folder(&out, &[], true);
        let held = hold(&dir).unwrap();
        let e = open(&dir).err().unwrap().to_string();
        assert!(e.contains("still running"), "{e}");
        drop(held);
        assert!(!dir.join(LOCK).exists());
        let mut r = SweepRecord::read(&dir).unwrap();
        r.merged_from = vec!["../x".into()];
        r.write(&dir).unwrap();
        let e = open(&dir).err().unwrap().to_string();
        assert!(e.contains("merged folder"), "{e}");
    }
}
