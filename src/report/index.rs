//! `reports/index.html`: every run under the reports root (`<root>/<test-name>/<time>/`),
//! newest first, with name, time, nodes, faults and verdict by color, linking to each run's
//! report. Rewritten after every render; written to a temporary file and renamed so that two
//! runs finishing together never leave a torn page.

use super::html::{verdict_class, verdict_word, CSS};
use super::text::escape;
use crate::checker::{Results, Validity};
use crate::history::test_info::TestInfo;
use crate::store::{self, RunDir};
use anyhow::{Context, Result};
use std::fmt::Write;
use std::path::{Path, PathBuf};

/// One run as the index lists it.
#[derive(Debug)]
pub struct RunEntry {
    /// Relative to the reports root, with `/` separators.
    pub rel: String,
    pub info: TestInfo,
    pub verdict: Option<Validity>,
    /// The checkers that do not apply to the run (shown `n/a` beside the verdict).
    pub not_applicable: Vec<String>,
    /// The known bugs that cover every invalid verdict (`checker::known`), by id.
    pub known: Vec<String>,
    pub has_report: bool,
}

/// The reports root that holds `run_dir`: the folder with `latest` or `index.html` among its
/// parent (a run copied into a folder of runs) and grandparent (`<root>/<test-name>/<time>/`,
/// as `test` writes them), else the run folder's parent. Nothing above it is ever written: a run
/// copied to /tmp/x/run has its index in /tmp/x, not /tmp.
pub fn reports_root(run_dir: &Path) -> Option<PathBuf> {
    let run = run_dir.canonicalize().ok()?;
    let parent = run.parent()?;
    let is_root = |d: &Path| {
        d.join(store::LATEST).symlink_metadata().is_ok() || d.join(store::INDEX).is_file()
    };
    match parent.parent() {
        Some(grand) if !is_root(parent) && is_root(grand) => Some(grand.to_path_buf()),
        _ => Some(parent.to_path_buf()),
    }
}

/// Every run folder (a folder holding test.json) one or two levels below `root`
/// (`<root>/<test-name>/<time>/`, or a run copied straight into `root`). Symlinks such as
/// `latest` are skipped so no run is listed twice; unreadable runs are skipped.
pub fn find_runs(root: &Path) -> Vec<RunEntry> {
    let mut runs = Vec::new();
    for test in sorted_dirs(root) {
        let below = if test.join(TestInfo::FILE).is_file() {
            vec![test]
        } else {
            sorted_dirs(&test)
        };
        for run in below {
            let Ok(dir) = RunDir::open(&run) else {
                continue;
            };
            let Ok(info) = dir.info() else {
                continue;
            };
            // A run whose results.json is damaged is listed as not checked.
            let results: Option<Results> = dir.results().ok().flatten();
            let not_applicable = results
                .iter()
                .flat_map(|r| &r.checkers)
                .filter(|c| !c.applicable)
                .map(|c| c.name.clone())
                .collect();
            let known = results
                .iter()
                .flat_map(|r| &r.known)
                .map(|k| k.id.clone())
                .collect();
            let verdict = results.map(|r| r.valid);
            let rel = run
                .strip_prefix(root)
                .unwrap_or(&run)
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join("/");
            runs.push(RunEntry {
                rel,
                info,
                verdict,
                not_applicable,
                known,
                has_report: dir.report().is_file(),
            });
        }
    }
    runs.sort_by_key(|r| std::cmp::Reverse(r.info.started_at));
    runs
}

fn sorted_dirs(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut dirs: Vec<PathBuf> = entries
        .flatten()
        .filter(|e| e.file_type().map(|t| t.is_dir()).unwrap_or(false))
        .map(|e| e.path())
        .collect();
    dirs.sort();
    dirs
}

pub fn index_html(runs: &[RunEntry]) -> String {
    let mut h = String::new();
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>fle-chaos runs</title>\
         <style>{CSS}</style></head><body><main>\n<h1 style=\"margin-top:16px\">fle-chaos runs</h1>\n\
         <p>{} run(s), newest first.</p>\n<table id=\"runs\"><tr><th>test</th><th>started (UTC)</th>\
         <th>nodes</th><th>faults</th><th>workload</th><th>seed</th><th>verdict</th></tr>\n",
        runs.len()
    );
    for r in runs {
        let link = if r.has_report {
            format!("{}/report.html", r.rel)
        } else {
            format!("{}/", r.rel)
        };
        let _ = writeln!(
            h,
            "<tr><td><a href=\"{}\">{}</a></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>\
             <td class=\"{}\">{}{}{}</td></tr>",
            escape(&link),
            escape(&r.info.name),
            r.info.started_at.format("%Y-%m-%d %H:%M:%S"),
            r.info.nodes.len(),
            escape(&if r.info.nemesis.is_empty() {
                "none".to_string()
            } else {
                r.info.nemesis.join(", ")
            }),
            escape(&r.info.workload),
            r.info.seed,
            verdict_class(r.verdict),
            verdict_word(r.verdict),
            if r.known.is_empty() {
                String::new()
            } else {
                format!(" <b>(known: {})</b>", escape(&r.known.join(", ")))
            },
            if r.not_applicable.is_empty() {
                String::new()
            } else {
                format!(
                    " <small>({}: {})</small>",
                    crate::checker::NOT_APPLICABLE,
                    escape(&r.not_applicable.join(", "))
                )
            }
        );
    }
    h.push_str("</table>\n</main></body></html>\n");
    h
}

/// Rewrites `<root>/index.html` from the runs found under `root`.
pub fn update_index(root: &Path) -> Result<PathBuf> {
    let html = index_html(&find_runs(root));
    let path = root.join(store::INDEX);
    // Unique per call: runs finishing at once in one process (a sweep's, a test's threads)
    // each write their own file, and the last rename wins.
    static CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = root.join(format!(".index.html.{}.{call}.tmp", std::process::id()));
    std::fs::write(&tmp, html).with_context(|| format!("cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, &path).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(path)
}
