//! `fle-chaos prune REPORTS --older-than 14d --keep-last N`: retention for a reports folder.
//! Removes test run folders (`REPORTS/<test>/<time>/`, holding test.json) and sweep folders
//! (`REPORTS/sweeps/<matrix>/<time>/`, holding sweep.json) started longer ago than the age,
//! except the newest N of each test name and of each matrix. Never removed: the run `latest`
//! points to, a sweep still running (its lock is held), and a shard folder a kept merged
//! sweep links to. What points into a removed folder is updated: index.html is rebuilt and a
//! trends row loses its link to the night's summary (its figures stay). Nothing else under
//! REPORTS is touched.

use crate::commands::sweep::record::SweepRecord;
use crate::exit::{self, bad_input};
use anyhow::{Context, Result};
use clap::Args;
use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};

/// `fle-chaos prune` options.
#[derive(Args, Debug, Clone)]
pub struct PruneArgs {
    /// The reports folder (`--out` of `test` and `sweep`).
    #[arg(long, default_value = "reports", value_name = "DIR")]
    pub out: PathBuf,
    /// The reports folder as a positional argument (the older form of --out).
    #[arg(value_name = "REPORTS", hide = true, conflicts_with = "out")]
    pub root: Option<PathBuf>,
    /// Remove what started longer ago than this ("14d", "36h", "90m").
    #[arg(long, value_name = "AGE")]
    pub older_than: String,
    /// However old, keep the newest N runs of each test name and sweeps of each matrix.
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub keep_last: usize,
    /// Say what would be removed; remove nothing.
    #[arg(long)]
    pub dry_run: bool,
}

/// A folder prune may remove.
#[derive(Debug, Clone)]
struct Candidate {
    dir: PathBuf,
    /// The test name or the matrix: the newest N of each are kept.
    series: String,
    started_at: chrono::DateTime<chrono::Utc>,
    /// For a sweep: its record (None for a test run).
    sweep: Option<SweepRecord>,
}

/// Test run folders under `root`, by their test.json.
fn test_runs(root: &Path) -> Vec<Candidate> {
    crate::report::index::find_runs(root)
        .into_iter()
        .map(|e| Candidate {
            dir: root
                .join(&e.rel)
                .canonicalize()
                .unwrap_or_else(|_| root.join(&e.rel)),
            series: e.info.name.clone(),
            started_at: e.info.started_at,
            sweep: None,
        })
        .collect()
}

/// Sweep folders under `root/sweeps/`, by their sweep.json.
fn sweeps(root: &Path) -> Vec<Candidate> {
    let mut found = Vec::new();
    for matrix in subdirs(&root.join("sweeps")) {
        for dir in subdirs(&matrix) {
            let Ok(dir) = dir.canonicalize() else {
                continue;
            };
            if let Ok(r) = SweepRecord::read(&dir) {
                // A shard is kept among the same shard of other nights, a merge among merges:
                // counting a night's folders as nights would keep part of one night.
                let kind = match (r.shard, r.merged_from.is_empty()) {
                    (Some(s), _) => format!(" shard {s}"),
                    (None, false) => " merged".to_string(),
                    (None, true) => String::new(),
                };
                found.push(Candidate {
                    dir,
                    series: format!("{}{kind}", r.matrix),
                    started_at: r.started_at,
                    sweep: Some(r),
                });
            }
        }
    }
    found
}

fn subdirs(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path())
        .collect()
}

/// The folders to remove from `found`, with why each other old one stays.
fn choose(
    found: Vec<Candidate>,
    cutoff: chrono::DateTime<chrono::Utc>,
    keep_last: usize,
    protected: &HashSet<PathBuf>,
) -> (Vec<Candidate>, Vec<(PathBuf, &'static str)>) {
    // Which folders a merged sweep links (its shards'), should that sweep stay.
    let links: Vec<(PathBuf, Vec<PathBuf>)> = found
        .iter()
        .filter_map(|c| {
            let r = c.sweep.as_ref().filter(|r| !r.merged_from.is_empty())?;
            let shards = r
                .merged_from
                .iter()
                .filter_map(|p| c.dir.join(p).canonicalize().ok())
                .collect();
            Some((c.dir.clone(), shards))
        })
        .collect();
    let mut by_series: BTreeMap<(bool, String), Vec<Candidate>> = BTreeMap::new();
    for c in found {
        by_series
            .entry((c.sweep.is_some(), c.series.clone()))
            .or_default()
            .push(c);
    }
    let (mut remove, mut kept) = (Vec::new(), Vec::new());
    for (_, mut list) in by_series {
        list.sort_by_key(|c| std::cmp::Reverse(c.started_at));
        for (i, c) in list.into_iter().enumerate() {
            if c.started_at >= cutoff {
                continue;
            }
            if i < keep_last {
                kept.push((c.dir, "one of the newest --keep-last"));
            } else if protected.iter().any(|p| p.starts_with(&c.dir)) {
                kept.push((c.dir, "`latest` points to it"));
            } else {
                remove.push(c);
            }
        }
    }
    let removed: HashSet<PathBuf> = remove.iter().map(|c| c.dir.clone()).collect();
    let linked: HashSet<&PathBuf> = links
        .iter()
        .filter(|(merged, _)| !removed.contains(merged))
        .flat_map(|(_, shards)| shards)
        .collect();
    remove.retain(|c| {
        let keep = linked.contains(&c.dir);
        if keep {
            kept.push((c.dir.clone(), "a kept merged sweep links it"));
        }
        !keep
    });
    (remove, kept)
}

/// `fle-chaos prune`.
pub async fn prune(args: PruneArgs) -> Result<i32> {
    tokio::task::spawn_blocking(move || prune_blocking(&args)).await?
}

fn prune_blocking(args: &PruneArgs) -> Result<i32> {
    let age = crate::nemesis::units::parse_duration(&args.older_than)
        .map_err(|e| bad_input(format!("--older-than {}: {e}", args.older_than)))?;
    let given = args.root.as_ref().unwrap_or(&args.out);
    let root = given.canonicalize().map_err(|e| {
        bad_input(format!(
            "prune --out {}: {e}; give the reports folder of `fle-chaos test` or `sweep` (--out)",
            given.display()
        ))
    })?;
    let cutoff = chrono::Utc::now()
        - chrono::Duration::from_std(age)
            .map_err(|_| bad_input(format!("--older-than {}: too long", args.older_than)))?;
    let mut protected = HashSet::new();
    if let Ok(target) = std::fs::canonicalize(root.join(crate::store::LATEST)) {
        protected.insert(target);
    }
    let mut found = test_runs(&root);
    found.extend(sweeps(&root));
    // Only what lies inside REPORTS itself (a linked `sweeps` or test folder elsewhere is not
    // ours to empty).
    found.retain(|c| c.dir.starts_with(&root));
    let a_reports_folder = [
        crate::store::LATEST,
        crate::store::INDEX,
        "sweeps",
        crate::commands::sweep::trends::ROWS,
    ]
    .iter()
    .any(|n| root.join(n).symlink_metadata().is_ok());
    if found.is_empty() && !a_reports_folder {
        return Err(bad_input(format!(
            "prune {}: no run or sweep folder in it; give the reports folder of `fle-chaos test` or `sweep` (--out)",
            root.display()
        )));
    }
    let (remove, kept) = choose(found, cutoff, args.keep_last, &protected);
    for (dir, why) in &kept {
        eprintln!("fle-chaos prune: keeping {} ({why})", dir.display());
    }
    let verb = if args.dry_run {
        "would remove"
    } else {
        "removing"
    };
    let mut freed = 0u64;
    let mut gone_sweeps = Vec::new();
    let mut removed = 0usize;
    for c in &remove {
        // A sweep (or a resume of it) working in the folder holds its lock.
        let _hold = match &c.sweep {
            Some(_) if !args.dry_run => match crate::commands::sweep::resume::try_hold(&c.dir) {
                Ok(Some(h)) => Some(h),
                Ok(None) => {
                    eprintln!(
                        "fle-chaos prune: keeping {} (a sweep is running in it)",
                        c.dir.display()
                    );
                    continue;
                }
                Err(e) => {
                    eprintln!("fle-chaos prune: keeping {} ({e:#})", c.dir.display());
                    continue;
                }
            },
            _ => None,
        };
        let size = folder_size(&c.dir);
        eprintln!(
            "fle-chaos prune: {verb} {} (started {}, {})",
            c.dir.display(),
            c.started_at.format("%Y-%m-%d %H:%M"),
            megabytes(size)
        );
        if !args.dry_run {
            std::fs::remove_dir_all(&c.dir)
                .with_context(|| format!("cannot remove {}", c.dir.display()))?;
            // Its test's (or matrix's) folder goes with its last run; a folder with anything
            // else in it stays (remove_dir refuses).
            if let Some(parent) = c.dir.parent().filter(|p| *p != root) {
                let _ = std::fs::remove_dir(parent);
            }
        }
        freed += size;
        removed += 1;
        if let Some(r) = &c.sweep {
            gone_sweeps.push(r.clone());
        }
    }
    if !args.dry_run && removed > 0 {
        relink(&root, &gone_sweeps)?;
    }
    eprintln!(
        "fle-chaos prune: {} {removed} folder(s), {}; kept {} older than {}",
        if args.dry_run {
            "would remove"
        } else {
            "removed"
        },
        megabytes(freed),
        kept.len(),
        args.older_than
    );
    Ok(exit::VALID)
}

/// Updates what pointed into removed folders: index.html (when there is one) and the trends
/// rows of removed sweeps, which lose their summary link.
fn relink(root: &Path, gone: &[SweepRecord]) -> Result<()> {
    if root.join(crate::store::INDEX).is_file() {
        crate::report::index::update_index(root)?;
    }
    let trends = root.join(crate::commands::sweep::trends::ROWS);
    if gone.is_empty() || !trends.is_file() {
        return Ok(());
    }
    let names: HashSet<String> = gone
        .iter()
        .map(crate::commands::sweep::trends::sweep_name)
        .collect();
    let mut rows = crate::commands::sweep::trends::read_rows(&trends, &mut |w| {
        eprintln!("fle-chaos prune: {w}")
    })?;
    let mut changed = false;
    for r in &mut rows {
        if names.contains(&r.sweep) && r.summary.is_some() {
            r.summary = None;
            changed = true;
        }
    }
    if changed {
        crate::commands::sweep::trends::write_rows(root, &rows)?;
    }
    Ok(())
}

/// Bytes of the files under `dir` (not following links).
fn folder_size(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => folder_size(&e.path()),
            Ok(t) if t.is_file() => e.metadata().map(|m| m.len()).unwrap_or(0),
            _ => 0,
        })
        .sum()
}

fn megabytes(bytes: u64) -> String {
    format!("{:.1} MB", bytes as f64 / 1e6)
}
