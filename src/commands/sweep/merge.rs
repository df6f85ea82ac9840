//! `fle-chaos merge DIR...`: combines the folders of a sharded sweep (`--shard I/N` on N
//! machines, copied back to one) into one record, summary page and JUnit file, and adds the
//! night to the trends. The run folders stay where they are; the merged pages link to them.
//! Runs of the matrix that no folder holds (a shard that failed or was not copied) are listed
//! as missing and make the exit code at least `unknown`: a lost shard never passes silently.

use super::matrix::slug;
use super::record::SweepRecord;
use super::summary;
use crate::exit::{self, bad_input};
use anyhow::{Context, Result};
use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};

/// `to` relative to the directory `from` (both absolute), with `..` where needed.
pub fn relative(from: &Path, to: &Path) -> PathBuf {
    let f: Vec<Component> = from.components().collect();
    let t: Vec<Component> = to.components().collect();
    let common = f.iter().zip(&t).take_while(|(a, b)| a == b).count();
    let mut out = PathBuf::new();
    for _ in common..f.len() {
        out.push("..");
    }
    for c in &t[common..] {
        out.push(c);
    }
    out
}

/// Reads the shard folders and combines them into one record whose paths are relative to
/// `into`. Shards of different matrices, or a run held twice, are bad input.
pub fn combine(dirs: &[PathBuf], into: &Path) -> Result<SweepRecord> {
    let into = into
        .canonicalize()
        .with_context(|| format!("cannot resolve {}", into.display()))?;
    let mut records = Vec::new();
    for d in dirs {
        let abs = d.canonicalize().map_err(|e| {
            bad_input(format!(
                "merge {}: {e}; give sweep folders (OUT/sweeps/NAME/TIME)",
                d.display()
            ))
        })?;
        let record = SweepRecord::read(&abs)?;
        if record.in_progress {
            return Err(bad_input(format!(
                "merge {}: this sweep did not finish (it is running, or was killed); finish it \
                 with `fle-chaos sweep --resume {}`, then merge",
                d.display(),
                d.display()
            )));
        }
        records.push((abs.clone(), record));
    }
    let Some((first_dir, first)) = records.first() else {
        return Err(bad_input("merge: no folders given; give sweep folders"));
    };
    let mut held: HashMap<String, PathBuf> = HashMap::new();
    let mut merged = SweepRecord {
        merged_from: Vec::new(),
        shard: None,
        runs: Vec::new(),
        skipped: Vec::new(),
        parallel: 0,
        interrupted: None,
        exit_code: exit::VALID,
        ..first.clone()
    };
    for (dir, r) in &records {
        if r.matrix != first.matrix || r.matrix_ids != first.matrix_ids {
            return Err(bad_input(format!(
                "merge: {} and {} are sweeps of different matrices ({} vs {}); merge the shards of one sweep",
                first_dir.display(),
                dir.display(),
                first.matrix,
                r.matrix
            )));
        }
        for run in &r.runs {
            if let Some(other) = held.insert(run.cell.id.clone(), dir.clone()) {
                return Err(bad_input(format!(
                    "merge: run {} is in both {} and {}; give each shard folder once",
                    run.cell.id,
                    other.display(),
                    dir.display()
                )));
            }
            let rebase = |p: &Path| relative(&into, &dir.join(p));
            let mut run = run.clone();
            run.run_dir = run.run_dir.as_deref().map(rebase);
            run.log = rebase(&run.log);
            run.minimal = run.minimal.as_deref().map(rebase);
            merged.runs.push(run);
        }
        merged.skipped.extend(r.skipped.iter().cloned());
        merged.started_at = merged.started_at.min(r.started_at);
        merged.finished_at = merged.finished_at.max(r.finished_at);
        merged.parallel += r.parallel;
        merged.interrupted = merged.interrupted.clone().or(r.interrupted.clone());
        merged.exit_code = exit::worse(merged.exit_code, r.exit_code);
        merged.merged_from.push(relative(&into, dir));
    }
    merged.in_matrix_order();
    merged.exit_code = exit::worse(merged.exit_code, merged.worst());
    if !summary::missing(&merged).is_empty() {
        merged.exit_code = exit::worse(merged.exit_code, exit::UNKNOWN);
    }
    Ok(merged)
}

/// `fle-chaos merge`: writes the merged folder and updates the trends; returns its exit code.
pub fn merge(dirs: &[PathBuf], out: &Path, into: Option<&Path>) -> Result<i32> {
    if dirs.is_empty() {
        return Err(bad_input("merge: no folders given; give sweep folders"));
    }
    // The folder is named after the first record (read again by `combine`, which checks all).
    let first = SweepRecord::read(&dirs[0])?;
    let into = match into {
        Some(d) => d.to_path_buf(),
        None => out.join("sweeps").join(slug(&first.matrix)).join(format!(
            "{}-merged",
            first.started_at.format("%Y%m%dT%H%M%SZ")
        )),
    };
    let existed = into.exists();
    std::fs::create_dir_all(&into).with_context(|| format!("cannot create {}", into.display()))?;
    let merged = match combine(dirs, &into) {
        Ok(m) => m,
        Err(e) => {
            // Bad input leaves nothing behind: the folder made for it goes again.
            if !existed {
                let _ = std::fs::remove_dir(&into);
            }
            return Err(e);
        }
    };
    merged.write(&into)?;
    let (page, junit) = summary::write(&into, &merged)?;
    let missing = summary::missing(&merged);
    let warn = &mut |w| eprintln!("fle-chaos merge: {w}");
    let trends = super::trends::update(out, &merged, &into, warn)?;
    super::carried::update(out, &merged, warn)?;
    eprintln!(
        "fle-chaos merge: {} run(s) from {} folder(s), {} failed, {} not started, {} missing{}",
        merged.runs.len(),
        dirs.len(),
        merged
            .runs
            .iter()
            .filter(|r| r.outcome != exit::VALID)
            .count(),
        merged.skipped.len(),
        missing.len(),
        if missing.is_empty() {
            String::new()
        } else {
            format!(" ({})", missing.join(", "))
        }
    );
    eprintln!("fle-chaos merge: summary {}", page.display());
    eprintln!("fle-chaos merge: junit {}", junit.display());
    eprintln!("fle-chaos merge: trends {}", trends.display());
    eprintln!("fle-chaos merge: exit {}", merged.exit_code);
    Ok(merged.exit_code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_paths_climb_and_descend() {
        assert_eq!(
            relative(
                Path::new("/r/sweeps/n/m"),
                Path::new("/r/sweeps/n/s1/runs/x")
            ),
            PathBuf::from("../s1/runs/x")
        );
        assert_eq!(
            relative(Path::new("/a"), Path::new("/a/b")),
            PathBuf::from("b")
        );
        assert_eq!(
            relative(Path::new("/a/b/c"), Path::new("/x")),
            PathBuf::from("../../../x")
        );
    }
}
