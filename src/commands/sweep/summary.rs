//! The sweep folder's `summary.html` (every run: verdict, schedule, seed, recovery p50/p99,
//! link to its report; then what was skipped or missing) and `junit.xml` (one testcase per
//! run, so CI lists each run as a test). Both are written from the typed `SweepRecord` only.

use super::record::{ms_text, outcome_word, percentile, RunRecord, SweepRecord};
use crate::checker::Validity;
use crate::duration::span;
use crate::exit;
use crate::history::situation::{self, Situation};
use crate::report::html::CSS;
use crate::report::text::escape;
use anyhow::{Context, Result};
use std::fmt::Write;
use std::path::{Path, PathBuf};

pub const SUMMARY: &str = "summary.html";
use crate::store::JUNIT;

/// Writes summary.html and junit.xml into `dir` (the folder holding the record).
pub fn write(dir: &Path, r: &SweepRecord) -> Result<(PathBuf, PathBuf)> {
    let summary = dir.join(SUMMARY);
    std::fs::write(&summary, summary_html(r))
        .with_context(|| format!("cannot write {}", summary.display()))?;
    let junit = dir.join(JUNIT);
    std::fs::write(&junit, junit_xml(r))
        .with_context(|| format!("cannot write {}", junit.display()))?;
    Ok((summary, junit))
}

/// Runs the matrix listed that no record holds: a shard that was never merged in.
pub fn missing(r: &SweepRecord) -> Vec<&str> {
    let held: std::collections::HashSet<&str> = r
        .runs
        .iter()
        .map(|x| x.cell.id.as_str())
        .chain(r.skipped.iter().map(|c| c.id.as_str()))
        .collect();
    let in_shard = |i: usize| r.shard.is_none_or(|s| s.holds(i));
    r.matrix_ids
        .iter()
        .enumerate()
        .filter(|(i, id)| in_shard(*i) && !held.contains(id.as_str()))
        .map(|(_, id)| id.as_str())
        .collect()
}

/// Why the runs of `skipped` did not start.
fn not_started_because(r: &SweepRecord) -> &'static str {
    if r.interrupted.is_some() {
        "the sweep was interrupted"
    } else {
        "the budget ran out"
    }
}

fn class(r: &RunRecord) -> &'static str {
    match r.outcome {
        exit::VALID => "valid",
        exit::INVALID => "invalid",
        _ => "unknown",
    }
}

fn link(r: &RunRecord) -> String {
    match &r.run_dir {
        Some(d) if r.cell.is_sim() => format!(
            "<a href=\"{}/summary.html\">simulated runs</a>",
            escape(&d.to_string_lossy())
        ),
        Some(d) => format!(
            "<a href=\"{}/report.html\">report</a>{}",
            escape(&d.to_string_lossy()),
            if r.trimmed {
                " <span title=\"history and node folders removed (--keep)\">(trimmed)</span>"
            } else {
                ""
            }
        ),
        None => format!("<a href=\"{}\">log</a>", escape(&r.log.to_string_lossy())),
    }
}

/// The sweep's summary.html: a banner with the exit code, the matrix, one row per run, the
/// verdicts by release, the night's coverage, and the runs not started or missing.
pub fn summary_html(r: &SweepRecord) -> String {
    let count = |f: &dyn Fn(&RunRecord) -> bool| r.runs.iter().filter(|x| f(x)).count();
    let failed = count(&|x| x.outcome != exit::VALID);
    let banner = match r.exit_code {
        exit::VALID => "valid",
        exit::INVALID => "invalid",
        _ => "unknown",
    };
    let missing = missing(r);
    let mut h = String::new();
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>sweep {name}</title>\
         <style>{CSS}</style></head><body>\n<div class=\"banner {banner}\"><h1>sweep {name}: exit {code}</h1>\
         <div class=\"sub\">{runs} run(s), {failed} failed, {skipped} skipped, {miss} missing{shard}; \
         started {start} UTC, took {took}</div></div>\n<main>\n",
        name = escape(&r.matrix),
        code = r.exit_code,
        runs = r.runs.len(),
        skipped = r.skipped.len(),
        miss = missing.len(),
        shard = match r.shard {
            Some(s) => format!(" (shard {s})"),
            None if !r.merged_from.is_empty() =>
                format!(" (merged from {} shard folders)", r.merged_from.len()),
            None => String::new(),
        },
        start = r.started_at.format("%Y-%m-%d %H:%M:%S"),
        took = span((r.finished_at - r.started_at).num_milliseconds().max(0) as f64 / 1e3),
    );
    let _ = writeln!(
        h,
        "<p>Matrix <code>{}</code>, {} at once{}. Recovery is the time from a fault's start to \
         the first quorum-backed leader (p50/p99 over the run's faults), rejoin until every node \
         that was up had rejoined that leader. A seeded-bug run passes when it is caught \
         (invalid) and fails when it is missed (valid).{}</p>",
        escape(&r.origin),
        r.parallel,
        match r.budget_s {
            Some(b) => format!(", budget {}", span(b)),
            None => String::new(),
        },
        match &r.interrupted {
            Some(s) => format!(" <b>Interrupted by {}.</b>", escape(s)),
            None => String::new(),
        }
    );
    h.push_str(
        "<table id=\"runs\"><tr><th>run</th><th>result</th><th>target</th><th>workload</th>\
         <th>schedule</th><th>nodes</th><th>seed</th><th>bug</th><th>recovery p50 / p99</th>\
         <th>rejoin p50 / p99</th><th>situations</th><th>took</th><th>report</th><th>note</th></tr>\n",
    );
    for x in &r.runs {
        h += &run_row(x);
    }
    h.push_str("</table>\n");
    h += &by_release(r);
    h += &night_coverage(r);
    h += &not_run(r, &missing);
    h.push_str("</main></body></html>\n");
    h
}

/// Verdicts per target release ("zookeeper 3.9.6": runs, valid, invalid known, invalid new,
/// unknown, no verdict), when the matrix names releases: the first thing a version campaign
/// is read for.
fn by_release(r: &SweepRecord) -> String {
    if r.runs.iter().all(|x| x.cell.zookeeper_version.is_none()) {
        return String::new();
    }
    let mut rows: std::collections::BTreeMap<String, [usize; 6]> = Default::default();
    for x in &r.runs {
        let row = rows.entry(x.cell.target_label()).or_default();
        row[0] += 1;
        let at = match x.verdict {
            Some(Validity::True) => 1,
            Some(Validity::False) if !x.known.is_empty() => 2,
            Some(Validity::False) => 3,
            Some(Validity::Unknown) => 4,
            None => 5,
        };
        row[at] += 1;
    }
    let mut h = String::from(
        "<h2 id=\"by-release\">By release</h2>\n<table><tr><th>target</th><th>runs</th>\
         <th>valid</th><th>invalid, known</th><th>invalid, new</th><th>unknown</th>\
         <th>no verdict</th></tr>\n",
    );
    for (label, n) in rows {
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            escape(&label),
            n[0],
            n[1],
            n[2],
            n[3],
            n[4],
            n[5]
        );
    }
    h.push_str("</table>\n");
    h
}

/// The sweep's junit.xml: one testcase per run, and a skipped one per run not started or missing.
pub fn junit_xml(r: &SweepRecord) -> String {
    let failures = r.runs.iter().filter(|x| x.outcome == exit::INVALID).count();
    let errors = r
        .runs
        .iter()
        .filter(|x| !matches!(x.outcome, exit::VALID | exit::INVALID))
        .count();
    let missing = missing(r);
    let skipped = r.skipped.len() + missing.len();
    let tests = r.runs.len() + skipped;
    let time: f64 = r.runs.iter().map(|x| x.duration_s).sum();
    let mut x = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        x,
        "<testsuites name=\"fle-chaos sweep\" tests=\"{tests}\" failures=\"{failures}\" errors=\"{errors}\" skipped=\"{skipped}\">"
    );
    let _ = writeln!(
        x,
        "  <testsuite name=\"sweep {}\" tests=\"{tests}\" failures=\"{failures}\" errors=\"{errors}\" \
         skipped=\"{skipped}\" timestamp=\"{}\" time=\"{time:.3}\">",
        escape(&r.matrix),
        r.started_at.format("%Y-%m-%dT%H:%M:%S"),
    );
    for run in &r.runs {
        x += &testcase(run);
    }
    for (id, why) in r
        .skipped
        .iter()
        .map(|c| {
            (
                c.id.as_str(),
                format!("not started: {}", not_started_because(r)),
            )
        })
        .chain(
            missing
                .iter()
                .map(|id| (*id, "missing: its shard was not merged".to_string())),
        )
    {
        let _ = writeln!(
            x,
            "    <testcase name=\"{}\" classname=\"fle-chaos.sweep\" time=\"0\"><skipped message=\"{why}\"/></testcase>",
            escape(id)
        );
    }
    x.push_str("  </testsuite>\n</testsuites>\n");
    x
}

/// One run's row of the summary's table: its cell, verdict, recovery and rejoin, situations,
/// duration, links, and a note of what failed.
fn run_row(x: &RunRecord) -> String {
    let mut h = String::new();
    let mut note = x.note.clone().map(|n| escape(&n)).unwrap_or_default();
    if !x.failed_checkers.is_empty() {
        let _ = write!(note, "failed: {}", escape(&x.failed_checkers.join(", ")));
    }
    if !x.known.is_empty() {
        let _ = write!(note, " (known: {})", escape(&x.known.join(", ")));
    }
    if x.unrecovered > 0 {
        let _ = write!(note, " {} fault(s) never recovered from", x.unrecovered);
    }
    if let Some(m) = &x.minimal {
        let _ = write!(
            note,
            " <a href=\"{}\">minimal schedule</a>",
            escape(&m.to_string_lossy())
        );
    }
    let _ = writeln!(
        h,
        "<tr><td>{}</td><td class=\"{}\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>\
         <td>{}</td><td>{}</td><td>{} / {}</td><td>{} / {}</td><td title=\"{}\">{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
        escape(&x.cell.id),
        class(x),
        outcome_word(x),
        escape(&x.cell.target_label()),
        escape(&x.cell.workload),
        escape(&x.cell.schedule),
        x.cell.nodes,
        x.cell.seed,
        escape(x.cell.bug.as_deref().unwrap_or("-")),
        ms_text(percentile(&x.recovery_ms, 50.0)),
        ms_text(percentile(&x.recovery_ms, 99.0)),
        ms_text(percentile(&x.rejoin_ms, 50.0)),
        ms_text(percentile(&x.rejoin_ms, 99.0)),
        labels(&x.situations),
        x.situations.len(),
        span(x.duration_s),
        link(x),
        note.trim()
    );
    h
}

/// The runs not started (a budget, a signal) and the cells no merged shard held.
fn not_run(r: &SweepRecord, missing: &[&str]) -> String {
    let mut h = String::new();
    if !r.skipped.is_empty() {
        let _ = write!(
            h,
            "<h2>Not started ({}): {}</h2>\n<p>{}</p>\n",
            r.skipped.len(),
            not_started_because(r),
            r.skipped
                .iter()
                .map(|c| format!("<code>{}</code>", escape(&c.id)))
                .collect::<Vec<_>>()
                .join(" ")
        );
    }
    if !missing.is_empty() {
        let _ = write!(
            h,
            "<h2>Missing ({}): in the matrix, in no merged shard</h2>\n<p>{}</p>\n",
            missing.len(),
            missing
                .iter()
                .map(|id| format!("<code>{}</code>", escape(id)))
                .collect::<Vec<_>>()
                .join(" ")
        );
    }
    h
}

/// One run as a JUnit testcase: passed, a failure (invalid, or a seeded bug missed), or an
/// error (no verdict); a run invalid only for known bugs passes with a note.
fn testcase(run: &RunRecord) -> String {
    let mut x = String::new();
    let _ = write!(
        x,
        "    <testcase name=\"{}\" classname=\"fle-chaos.sweep.{}.{}\" time=\"{:.3}\">",
        escape(&run.cell.id),
        escape(&run.cell.target),
        escape(&super::matrix::slug(&run.cell.schedule)),
        run.duration_s
    );
    let where_ = match &run.run_dir {
        Some(d) => format!("run folder {}", d.display()),
        None => format!("log {}", run.log.display()),
    };
    let body = |what: &str| {
        escape(&format!(
            "{what}; {where_}{}",
            run.note
                .as_deref()
                .map(|n| format!("; {n}"))
                .unwrap_or_default()
        ))
    };
    let known = (!run.known.is_empty()).then(|| format!("known: {}", run.known.join(", ")));
    match (run.outcome, &known) {
        // Invalid only for known bugs, and the matrix does not fail on them.
        (exit::VALID, Some(k)) if run.code == exit::INVALID && run.cell.bug.is_none() => {
            let _ = write!(
                x,
                "\n      <system-out>{}</system-out>\n    </testcase>\n",
                body(&format!(
                    "{k}: invalid only for known bugs, not failed (fail_on_known = false)"
                ))
            );
        }
        (exit::VALID, _) => x.push_str("</testcase>\n"),
        (exit::INVALID, _) => {
            let what = if run.cell.bug.is_some() {
                format!(
                    "missed: the seeded bug {} was not caught (verdict valid)",
                    run.cell.bug.as_deref().unwrap_or_default()
                )
            } else {
                let k = known
                    .as_ref()
                    .map(|k| format!(" ({k})"))
                    .unwrap_or_default();
                format!("invalid{k}: {}", run.failed_checkers.join(", "))
            };
            let _ = write!(
                x,
                "\n      <failure message=\"{}\" type=\"invalid\">{}</failure>\n    </testcase>\n",
                escape(&what),
                body(&what)
            );
        }
        (code, _) => {
            let what = format!("{} (exit {code})", outcome_word(run));
            let _ = write!(
                x,
                "\n      <error message=\"{}\" type=\"{}\">{}</error>\n    </testcase>\n",
                escape(&what),
                escape(outcome_word(run)),
                body(&what)
            );
        }
    }
    x
}

/// The situations (`history::situation`) a run met, escaped, one per line of the cell's
/// tooltip (a character reference, so that each table row stays one line of the page).
fn labels(situations: &[Situation]) -> String {
    situations
        .iter()
        .map(|s| escape(&s.label()))
        .collect::<Vec<_>>()
        .join("&#10;")
}

/// What the night's faults met, over every run, and which values of whom and phase none did.
fn night_coverage(r: &SweepRecord) -> String {
    let met = super::trends::situations_met(&r.runs);
    let mut h = format!(
        "<h2 id=\"coverage\">Coverage</h2>\n<p>The night's faults met {} distinct situation(s) \
         (each run's report lists its own).",
        met.len()
    );
    let _ = writeln!(
        h,
        " Never met: {}.</p>",
        escape(&situation::never_met(met.iter().copied()))
    );
    if !met.is_empty() {
        h += "<table id=\"night-situations\"><tr><th>situation</th><th>runs</th></tr>\n";
        for s in &met {
            let runs = r.runs.iter().filter(|x| x.situations.contains(s)).count();
            let _ = writeln!(h, "<tr><td>{}</td><td>{runs}</td></tr>", escape(&s.label()));
        }
        h += "</table>\n";
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sweep of three ZooKeeper runs: 3.9.3 invalid (known) and invalid (new), 3.9.6 valid.
    fn record() -> SweepRecord {
        let run = |v: &str, verdict: &str, known: &[&str]| {
            let matrix = crate::commands::sweep::matrix::Cell::new(
                "zookeeper",
                "writes",
                "mixed",
                5,
                1,
                None,
            );
            let mut r = serde_json::to_value(matrix.with_zookeeper_version(v)).unwrap();
            let code = if verdict == "true" { 0 } else { 1 };
            for (k, x) in [
                ("code", serde_json::json!(code)),
                ("outcome", serde_json::json!(code)),
                ("verdict", serde_json::json!(verdict)),
                ("log", serde_json::json!("logs/x.log")),
                ("started_at", serde_json::json!("2026-12-06T00:00:00Z")),
                ("duration_s", serde_json::json!(60.0)),
                ("known", serde_json::json!(known)),
            ] {
                r[k] = x;
            }
            r
        };
        serde_json::from_value(serde_json::json!({
            "format": 1, "matrix": "zookeeper", "origin": "t", "matrix_ids": [],
            "started_at": "2026-12-06T00:00:00Z", "finished_at": "2026-12-06T01:00:00Z",
            "parallel": 1, "exit_code": 1,
            "runs": [run("3.9.3", "false", &["ZOOKEEPER-4925"]), run("3.9.3", "false", &[]),
                     run("3.9.6", "true", &[])],
        }))
        .unwrap()
    }

    #[test]
    fn verdicts_are_counted_per_release_on_the_page_and_in_the_trends() {
        let r = record();
        let table = by_release(&r);
        assert!(
            table.contains("<tr><td>zookeeper 3.9.3</td><td>2</td><td>0</td><td>1</td><td>1</td>"),
            "{table}"
        );
        assert!(
            table.contains("<tr><td>zookeeper 3.9.6</td><td>1</td><td>1</td><td>0</td><td>0</td>")
        );
        assert!(summary_html(&r).contains("id=\"by-release\""));
        let rows = crate::commands::sweep::trends::rows_of(&r, None);
        let series: Vec<(String, usize, usize)> = rows
            .iter()
            .map(|t| (t.series(), t.runs, t.invalid))
            .collect();
        assert_eq!(
            series,
            [
                ("zookeeper: mixed on zookeeper 3.9.3".to_string(), 2, 2),
                ("zookeeper: mixed on zookeeper 3.9.6".to_string(), 1, 0)
            ]
        );
        // A matrix without releases shows no such table.
        let mut plain = r.clone();
        plain
            .runs
            .iter_mut()
            .for_each(|x| x.cell.zookeeper_version = None);
        assert_eq!(by_release(&plain), "");
    }
}
