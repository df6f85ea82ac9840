//! Reports: what people look at after a run.
//!
//! `render_run(run_dir)` reads a run folder (test.json, history.jsonl, results.json when the
//! checkers have run) and writes, into the same folder:
//! - plots, each as PNG and SVG (`plot`): leader timeline, recovery, client operations,
//!   epochs and zxids, clock offsets;
//! - `report.html` (`html`): one self-contained page;
//! - `junit.xml` (`junit`): one testcase per checker;
//!
//! and rewrites the index of all runs in the reports root (`index`). The history is read in
//! one streaming pass (`scan`, `lite`) into per-pixel-column series (`series`), so a long run
//! renders in seconds with flat memory. `cli` holds `fle-chaos report` and `fle-chaos serve`.

pub mod cli;
pub mod fast;
pub mod faults;
pub mod fixture;
pub mod html;
pub mod index;
pub mod junit;
pub mod lite;
pub mod plot;
pub mod recovery;
pub mod scan;
pub mod series;
pub mod serve;
pub mod text;

use crate::checker::Results;
use crate::exit::bad_input;
use crate::history::test_info::TestInfo;
use anyhow::{Context, Result};
use plot::{render, Plot};
use recovery::RecoverySource;
use std::path::{Path, PathBuf};

/// Plot file names (without extension), in page order.
pub const PLOTS: [&str; 5] = ["timeline", "recovery", "operations", "epochs", "clock"];

/// What `render_run` wrote.
#[derive(Debug, Clone)]
pub struct Rendered {
    pub report: PathBuf,
    pub junit: PathBuf,
    pub plots: Vec<PathBuf>,
    pub index: Option<PathBuf>,
}

/// Renders the report of the run in `run_dir` and updates the reports index.
pub fn render_run(run_dir: &Path) -> Result<()> {
    render_run_detailed(run_dir).map(|_| ())
}

/// `render_run`, returning the paths written.
pub fn render_run_detailed(run_dir: &Path) -> Result<Rendered> {
    check_run_dir(run_dir)?;
    let info = TestInfo::read(&run_dir.join("test.json")).map_err(|e| {
        bad_input(format!(
            "{e:#}; the run folder's test.json is damaged: re-run the test"
        ))
    })?;
    let results = read_results(run_dir)?;
    let data = scan::scan(
        &run_dir.join("history.jsonl"),
        &info.nodes,
        info.started_at.timestamp_millis(),
        info.quorum(),
    )?;
    let (recoveries, recovery_source) = match results
        .as_ref()
        .and_then(|r| r.checkers.iter().find(|c| c.name.contains("recovery")))
        .and_then(|c| {
            recovery::from_checker(&serde_json::to_value(&c.measurements).unwrap_or_default())
        }) {
        Some(r) => (r, RecoverySource::Checker),
        None => (data.recoveries.clone(), RecoverySource::History),
    };

    let plots = draw_plots(run_dir, &data, &recoveries, recovery_source)?;
    let html = html::report_html(&html::Page {
        run_dir,
        info: &info,
        results: results.as_ref(),
        data: &data,
        plots: &plots,
        recoveries: &recoveries,
        recovery_source,
    });
    let report = run_dir.join("report.html");
    std::fs::write(&report, html).with_context(|| format!("cannot write {}", report.display()))?;
    let junit = run_dir.join("junit.xml");
    let xml = junit::junit_xml(&info, results.as_ref(), data.t_end_ns as f64 / 1e9);
    std::fs::write(&junit, xml).with_context(|| format!("cannot write {}", junit.display()))?;

    // The reports root is the parent of the test-name folder.
    let index = match run_dir
        .canonicalize()
        .ok()
        .and_then(|d| Some(d.parent()?.parent()?.to_path_buf()))
    {
        Some(root) => Some(index::update_index(&root)?),
        None => None,
    };
    Ok(Rendered {
        report,
        junit,
        plots: plots
            .iter()
            .flat_map(|p| [p.png.clone(), p.svg.clone()])
            .collect(),
        index,
    })
}

/// A run folder has test.json and history.jsonl; anything else is the user's mistake.
pub fn check_run_dir(run_dir: &Path) -> Result<()> {
    if !run_dir.is_dir() {
        return Err(bad_input(format!(
            "{} is not a directory: give a run folder such as reports/<test>/<time>/ \
             (reports/latest for the newest run)",
            run_dir.display()
        )));
    }
    for file in ["test.json", "history.jsonl"] {
        if !run_dir.join(file).is_file() {
            return Err(bad_input(format!(
                "{} is not a run folder: it has no {file}; give a folder written by \
                 `fle-chaos test`, such as reports/<test>/<time>/",
                run_dir.display()
            )));
        }
    }
    Ok(())
}

fn read_results(run_dir: &Path) -> Result<Option<Results>> {
    let path = run_dir.join("results.json");
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
    };
    serde_json::from_str(&text).map(Some).map_err(|e| {
        bad_input(format!(
            "{} is not valid results.json ({e}); re-run `fle-chaos check {}`",
            path.display(),
            run_dir.display()
        ))
    })
}

fn draw_plots(
    dir: &Path,
    data: &scan::RunData,
    recoveries: &[recovery::Recovery],
    source: RecoverySource,
) -> Result<Vec<Plot>> {
    let timeline = plot::timeline::Timeline(data);
    let writes = plot::writes::Writes(data);
    let has_clock = data.nodes.values().any(|n| !n.clock_offset_s.is_empty());
    let recovery_note = match (source, recoveries.is_empty()) {
        (_, true) => Some("no faults took effect in this run".to_string()),
        (RecoverySource::Checker, false) => Some("from the recovery checker".to_string()),
        (RecoverySource::History, false) => Some(
            "derived from the history: the recovery checker gave no per-fault times".to_string(),
        ),
    };
    Ok(vec![
        render(
            dir,
            PLOTS[0],
            "Leader timeline",
            timeline.size(),
            &timeline,
            None,
        )?,
        render(
            dir,
            PLOTS[1],
            "Recovery after each fault",
            plot::recovery::SIZE,
            &plot::recovery::RecoveryPlot {
                recoveries,
                t_end_ns: data.t_end_ns,
            },
            recovery_note,
        )?,
        render(
            dir,
            PLOTS[2],
            "Client operations: latency and throughput",
            plot::writes::SIZE,
            &writes,
            (!writes.has_ops()).then(|| "no client operations in this run".to_string()),
        )?,
        render(
            dir,
            PLOTS[3],
            "Epochs and last zxid per node",
            plot::epochs::SIZE,
            &plot::epochs::Epochs(data),
            None,
        )?,
        render(
            dir,
            PLOTS[4],
            "Clock offset per node",
            plot::clock::SIZE,
            &plot::clock::Clock(data),
            (!has_clock).then(|| "no wall-clock readings in the status reads".to_string()),
        )?,
    ])
}
