//! Trends across nights: `OUT/trends.jsonl` keeps one row per sweep, matrix, schedule and
//! target (verdict counts, recovery p50/p99 to a quorum-backed leader and to every node
//! rejoined, pooled over the faults of that group's runs); `OUT/trends.html` and its PNGs
//! (`trends_plot`) show them by date, so a slower recovery is seen even when every verdict is
//! valid.
//!
//! The rows are the only state kept between nights: a CI job persists `trends.jsonl` (cache or
//! artifact) and the page is rebuilt from it. A sweep recorded again (a merge re-run) replaces
//! its own rows.

use super::record::{ms_text, percentile, SweepRecord};
use crate::checker::Validity;
use crate::history::situation::Situation;
use crate::report::html::CSS;
use crate::report::text::escape;
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::{Path, PathBuf};

pub const ROWS: &str = "trends.jsonl";
pub const PAGE: &str = "trends.html";

/// One group of one sweep.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrendRow {
    /// The sweep: its matrix and start time ("nightly@2026-11-30T02:00:00Z").
    pub sweep: String,
    pub started_at: chrono::DateTime<chrono::Utc>,
    pub matrix: String,
    pub schedule: String,
    pub target: String,
    pub runs: usize,
    pub valid: usize,
    pub invalid: usize,
    pub unknown: usize,
    /// Runs without a verdict (the tool failed, bad input, timed out).
    pub no_verdict: usize,
    pub recovery_p50_ms: Option<u64>,
    pub recovery_p99_ms: Option<u64>,
    pub rejoin_p50_ms: Option<u64>,
    pub rejoin_p99_ms: Option<u64>,
    /// Distinct situations the group's faults met (`history::situation`), over its runs.
    #[serde(default)]
    pub situations: usize,
    /// The night's summary page, relative to OUT (the page links it); None once `prune` removed
    /// the sweep folder (the row and its figures stay).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
}

impl TrendRow {
    /// "nightly: mixed on fle": the series a row belongs to.
    pub fn series(&self) -> String {
        format!("{}: {} on {}", self.matrix, self.schedule, self.target)
    }
}

/// A sweep's name in its rows: its matrix and start ("nightly@2026-11-30T02:00:00Z").
pub fn sweep_name(r: &SweepRecord) -> String {
    format!("{}@{}", r.matrix, r.started_at.format("%Y-%m-%dT%H:%M:%SZ"))
}

/// The rows of one sweep, one per (schedule, target and its release), in name order; `summary` is the night's
/// summary page relative to OUT.
pub fn rows_of(r: &SweepRecord, summary: Option<String>) -> Vec<TrendRow> {
    let sweep = sweep_name(r);
    // The target with its release ("zookeeper 3.9.6"): a version matrix trends per release.
    let mut groups: BTreeMap<(&str, String), Vec<&super::record::RunRecord>> = BTreeMap::new();
    for run in &r.runs {
        groups
            .entry((&run.cell.schedule, run.cell.target_label()))
            .or_default()
            .push(run);
    }
    groups
        .into_iter()
        .map(|((schedule, target), runs)| {
            let count = |v: Option<Validity>| runs.iter().filter(|x| x.verdict == v).count();
            let recovery: Vec<u64> = runs.iter().flat_map(|x| x.recovery_ms.clone()).collect();
            let rejoin: Vec<u64> = runs.iter().flat_map(|x| x.rejoin_ms.clone()).collect();
            TrendRow {
                sweep: sweep.clone(),
                started_at: r.started_at,
                matrix: r.matrix.clone(),
                schedule: schedule.to_string(),
                target,
                runs: runs.len(),
                valid: count(Some(Validity::True)),
                invalid: count(Some(Validity::False)),
                unknown: count(Some(Validity::Unknown)),
                no_verdict: count(None),
                recovery_p50_ms: percentile(&recovery, 50.0),
                recovery_p99_ms: percentile(&recovery, 99.0),
                rejoin_p50_ms: percentile(&rejoin, 50.0),
                rejoin_p99_ms: percentile(&rejoin, 99.0),
                situations: situations_met(runs.iter().copied()).len(),
                summary: summary.clone(),
            }
        })
        .collect()
}

/// The distinct situations some of `runs` met.
pub fn situations_met<'a>(
    runs: impl IntoIterator<Item = &'a super::record::RunRecord>,
) -> std::collections::BTreeSet<&'a Situation> {
    runs.into_iter().flat_map(|x| &x.situations).collect()
}

/// Reads `OUT/trends.jsonl`; a line that is not a row is left out, and said (a hand-edited or
/// truncated file must not lose every other night).
pub fn read_rows(path: &Path, warn: &mut dyn FnMut(String)) -> Result<Vec<TrendRow>> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
    };
    let mut rows = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str(line) {
            Ok(r) => rows.push(r),
            Err(e) => warn(format!(
                "{} line {}: not a trend row ({e}); left out",
                path.display(),
                i + 1
            )),
        }
    }
    Ok(rows)
}

/// Adds (or replaces) the rows of `record`, whose folder is `dir`, in `out/trends.jsonl` and
/// rebuilds the page and its plots; returns the page's path.
pub fn update(
    out: &Path,
    record: &SweepRecord,
    dir: &Path,
    warn: &mut dyn FnMut(String),
) -> Result<PathBuf> {
    std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
    let path = out.join(ROWS);
    let summary = out
        .canonicalize()
        .ok()
        .and_then(|o| {
            dir.canonicalize()
                .ok()?
                .strip_prefix(o)
                .ok()
                .map(Path::to_path_buf)
        })
        .map(|rel| {
            rel.join(super::summary::SUMMARY)
                .to_string_lossy()
                .into_owned()
        });
    let new = rows_of(record, summary);
    let mut rows = read_rows(&path, warn)?;
    let sweep = new.first().map(|r| r.sweep.clone());
    rows.retain(|r| Some(&r.sweep) != sweep.as_ref());
    rows.extend(new);
    write_rows(out, &rows)
}

/// Writes `rows` as `out/trends.jsonl` (sorted by night and series) and rebuilds the page.
pub fn write_rows(out: &Path, rows: &[TrendRow]) -> Result<PathBuf> {
    let path = out.join(ROWS);
    let mut rows = rows.to_vec();
    rows.sort_by_key(|r| (r.started_at, r.series()));
    let mut text = String::new();
    for r in &rows {
        text.push_str(&serde_json::to_string(r)?);
        text.push('\n');
    }
    let tmp = out.join(format!(".{ROWS}.{}.tmp", std::process::id()));
    std::fs::write(&tmp, text).with_context(|| format!("cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, &path).with_context(|| format!("cannot write {}", path.display()))?;
    render(out, &rows)
}

/// Writes trends.html and the plots from `rows`.
pub fn render(out: &Path, rows: &[TrendRow]) -> Result<PathBuf> {
    let plots = super::trends_plot::render(out, rows)?;
    let page = out.join(PAGE);
    let tmp = out.join(format!(".{PAGE}.{}.tmp", std::process::id()));
    std::fs::write(&tmp, page_html(rows, &plots))
        .with_context(|| format!("cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, &page).with_context(|| format!("cannot write {}", page.display()))?;
    Ok(page)
}

fn page_html(rows: &[TrendRow], plots: &[crate::report::plot::Plot]) -> String {
    let mut series: BTreeMap<String, Vec<&TrendRow>> = BTreeMap::new();
    for r in rows {
        series.entry(r.series()).or_default().push(r);
    }
    let mut h = String::new();
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>fle-chaos trends</title>\
         <style>{CSS}</style></head><body><main>\n<h1 style=\"margin-top:16px\">fle-chaos trends</h1>\n\
         <p>{} sweep(s), {} series (matrix: schedule on target). Recovery: from a fault's start to \
         the first quorum-backed leader; rejoin: until every node that was up had rejoined it; \
         p50/p99 over every fault of the series' runs that night.</p>\n",
        rows.iter()
            .map(|r| &r.sweep)
            .collect::<std::collections::HashSet<_>>()
            .len(),
        series.len()
    );
    for p in plots {
        let file = p.png.file_name().unwrap_or_default().to_string_lossy();
        let _ = writeln!(
            h,
            "<figure><img src=\"{}\" alt=\"{}\" width=\"{}\" height=\"{}\"><figcaption>{}{}</figcaption></figure>",
            escape(&file),
            escape(&p.title),
            p.width,
            p.height,
            escape(&p.title),
            p.note.as_deref().map(|n| format!(" ({})", escape(n))).unwrap_or_default()
        );
    }
    for (name, rows) in &series {
        let _ = write!(
            h,
            "<h2>{}</h2>\n<table class=\"series\"><tr><th>started (UTC)</th><th>runs</th><th>valid</th>\
             <th>invalid</th><th>unknown</th><th>no verdict</th><th>recovery p50 / p99</th>\
             <th>rejoin p50 / p99</th><th>situations met</th></tr>\n",
            escape(name)
        );
        for r in rows.iter().rev() {
            let _ = writeln!(
                h,
                "<tr><td>{}</td><td>{}</td><td class=\"valid\">{}</td><td class=\"invalid\">{}</td>\
                 <td class=\"unknown\">{}</td><td>{}</td><td>{} / {}</td><td>{} / {}</td><td>{}</td></tr>",
                match &r.summary {
                    Some(page) => format!(
                        "<a href=\"{}\">{}</a>",
                        escape(page),
                        r.started_at.format("%Y-%m-%d %H:%M")
                    ),
                    None => r.started_at.format("%Y-%m-%d %H:%M").to_string(),
                },
                r.runs,
                r.valid,
                r.invalid,
                r.unknown,
                r.no_verdict,
                ms_text(r.recovery_p50_ms),
                ms_text(r.recovery_p99_ms),
                ms_text(r.rejoin_p50_ms),
                ms_text(r.rejoin_p99_ms),
                r.situations,
            );
        }
        h.push_str("</table>\n");
    }
    h.push_str("</main></body></html>\n");
    h
}
