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
use super::record::{RunRecord, SweepRecord};
use crate::exit::{self, bad_input};
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
    let path = dir.join(LOCK);
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .with_context(|| format!("cannot create {}", path.display()))?;
    match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
        Ok(lock) => Ok(Held {
            lock: Some(lock),
            path,
        }),
        Err((_, nix::errno::Errno::EWOULDBLOCK)) => Err(bad_input(format!(
            "{}: a sweep is still running in it; wait for it to end, or stop it, then resume",
            dir.display()
        ))),
        Err((_, e)) => Err(e).with_context(|| format!("cannot lock {}", path.display())),
    }
}

/// Whether a run needs running again: it was interrupted before it reached a verdict.
fn unfinished(r: &RunRecord) -> bool {
    exit::is_interrupted(r.code)
}

/// Reads the sweep folder `dir` and works out what is left to run. Anything a previous
/// attempt left of an unfinished run (its run folder) is removed, so the night holds one
/// folder per run.
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
    record.runs.retain(|r| !unfinished(r));
    let done: std::collections::HashSet<&str> =
        record.runs.iter().map(|r| r.cell.id.as_str()).collect();
    let left: Vec<Cell> = matrix
        .slice(record.shard)
        .into_iter()
        .filter(|c| !done.contains(c.id.as_str()))
        .collect();
    if left.is_empty() {
        return Err(bad_input(format!(
            "--resume {}: every run of it finished; nothing to resume",
            dir.display()
        )));
    }
    for cell in &left {
        let attempt = dir.join("runs").join(&cell.id);
        if attempt.exists() {
            std::fs::remove_dir_all(&attempt)
                .with_context(|| format!("cannot remove {}", attempt.display()))?;
        }
    }
    let out = dir
        .ancestors()
        .nth(3)
        .map(Path::to_path_buf)
        .ok_or_else(|| {
            bad_input(format!(
                "--resume {}: not under OUT/sweeps/NAME/",
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
