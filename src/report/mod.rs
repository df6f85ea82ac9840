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
//! one streaming pass (`scan`) through `history::read`, the reader `fle-chaos check` uses (so
//! both accept and reject the same files), into per-pixel-column series (`series`), so a long
//! run renders in seconds with flat memory. Fault intervals and recovery times are
//! `history::view`'s or the recovery checker's typed measurements (`recovery`), never the
//! report's own. `cli` holds `fle-chaos report` and `fle-chaos serve`.
//!
//! Dependencies point one way: the report reads `history` and `checker`, nothing of `run`,
//! `nemesis`, `control` or `workload`.

pub mod account;
pub mod cli;
pub mod coverage;
pub mod evidence;
pub mod history_view;
pub mod html;
pub mod index;
pub mod interactive;
pub mod junit;
pub mod lane;
pub mod moment;
pub mod places;
pub mod plot;
pub mod recovery;
pub mod scan;
pub mod schedule;
pub mod series;
pub mod serve;
pub mod tables;
pub mod text;
pub mod view_pass;
pub mod violations;
pub mod window;

use crate::checker::{LoadedRun, Results, RunFiles};
use crate::exit::bad_input;
use crate::history;
use anyhow::{Context, Result};
use plot::Plot;
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

/// `fle-chaos report`'s loader: the stored run in one pass (`load`), its results.json when
/// the checkers have run, then `render`. Returns the paths written.
pub fn render_run_detailed(run_dir: &Path) -> Result<Rendered> {
    check_run_dir(run_dir)?;
    let (run, lines) = load(run_dir)?;
    let results = Results::read(run_dir)?;
    render(run_dir, &run, results.as_ref(), lines)
}

/// The one pass over a stored run: the checkers' digest and the report's fold of the same
/// lines (`scan::LineFold`, riding along). A damaged test.json or history is the input's
/// fault, said as `fle-chaos check` says it.
pub fn load(run_dir: &Path) -> Result<(LoadedRun, scan::Lines)> {
    let files = RunFiles::open(run_dir).map_err(|e| {
        bad_input(format!(
            "{e:#}; the run folder's test.json or history is damaged: re-run the test"
        ))
    })?;
    load_from(files)
}

/// `load` of opened run files (tests choose the number of parts with `RunFiles::parts`).
pub fn load_from(files: RunFiles) -> Result<(LoadedRun, scan::Lines)> {
    let t_end_ns = history::read::last_event_time(&files.history)
        .map_err(|e| bad_input(format!("{e:#} ({})", history::file::RUN_FOLDER_NEEDS)))?;
    let empty = scan::LineFold::new(
        t_end_ns,
        &files.info.nodes,
        files.info.started_at.timestamp_millis(),
    );
    let (run, parts) = files
        .load_with(|| empty.clone(), scan::LineFold::line)
        .map_err(|e| bad_input(format!("{e:#} ({})", history::file::RUN_FOLDER_NEEDS)))?;
    Ok((run, scan::LineFold::join(empty, parts)))
}

/// Renders the report of a loaded run (`results`: None when the checkers have not run) into
/// `run_dir`, and updates the reports index. Nothing the run wrote is read again.
pub fn render(
    run_dir: &Path,
    run: &LoadedRun,
    results: Option<&Results>,
    lines: scan::Lines,
) -> Result<Rendered> {
    let violations = violations::of(results);
    // The view is asked what held at every quoted evidence event.
    let wanted = results
        .iter()
        .flat_map(|r| &r.checkers)
        .flat_map(|c| &c.evidence)
        .filter_map(|e| violations::event_index(&e.event))
        .collect();
    let viewed = view_pass::of(run, &lines.places, &wanted);
    let data = scan::RunData::of(lines, viewed, violations);
    let info = &run.info;

    let plots = draw_plots(run_dir, &data)?;
    let zooms = draw_zooms(run_dir, &data)?;
    let html = html::report_html(&html::Page {
        run_dir,
        info,
        results,
        data: &data,
        plots: &plots,
        zooms: &zooms,
    });
    let report = run_dir.join(crate::store::REPORT);
    std::fs::write(&report, html).with_context(|| format!("cannot write {}", report.display()))?;
    let junit = run_dir.join(crate::store::JUNIT);
    let xml = junit::junit_xml(info, results, data.t_end_ns as f64 / 1e9);
    std::fs::write(&junit, xml).with_context(|| format!("cannot write {}", junit.display()))?;

    // Only the run folder and the reports root that holds it are written to.
    let index = match index::reports_root(run_dir) {
        Some(root) => Some(index::update_index(&root)?),
        None => None,
    };
    Ok(Rendered {
        report,
        junit,
        plots: plots
            .iter()
            .chain(&zooms)
            .flat_map(|p| [p.png.clone(), p.svg.clone()])
            .collect(),
        index,
    })
}

/// A run folder has test.json and a history; anything else is the user's mistake.
pub fn check_run_dir(run_dir: &Path) -> Result<()> {
    if !run_dir.is_dir() {
        return Err(bad_input(format!(
            "{} is not a directory: give a run folder such as reports/<test>/<time>/ \
             (reports/latest for the newest run)",
            run_dir.display()
        )));
    }
    let missing = if !run_dir
        .join(crate::history::test_info::TestInfo::FILE)
        .is_file()
    {
        Some(crate::history::test_info::TestInfo::FILE)
    } else if !history::file::exists_in(run_dir) {
        Some("history.jsonl.zst (or history.jsonl)")
    } else {
        None
    };
    if let Some(file) = missing {
        return Err(bad_input(format!(
            "{} is not a run folder: it has no {file}; give a folder written by \
             `fle-chaos test`, such as reports/<test>/<time>/",
            run_dir.display()
        )));
    }
    Ok(())
}

fn draw_plots(dir: &Path, data: &scan::RunData) -> Result<Vec<Plot>> {
    let recoveries = &data.recoveries;
    let timeline = plot::timeline::Timeline(data);
    let writes = plot::writes::Writes(data);
    let has_clock = data.nodes.values().any(|n| !n.clock_offset_s.is_empty());
    let recovery_note = Some(recovery::note(recoveries.len()));
    Ok(vec![
        plot::render(
            dir,
            PLOTS[0],
            "Leader timeline",
            timeline.size(),
            &timeline,
            None,
        )?,
        plot::render(
            dir,
            PLOTS[1],
            "Recovery after each fault",
            plot::recovery::SIZE,
            &plot::recovery::RecoveryPlot {
                recoveries,
                t_end_ns: data.t_end_ns,
                violations: &data.violations,
            },
            recovery_note,
        )?,
        plot::render(
            dir,
            PLOTS[2],
            "Client operations: latency and throughput",
            plot::writes::SIZE,
            &writes,
            (!writes.has_ops()).then(|| "no client operations in this run".to_string()),
        )?,
        plot::render(
            dir,
            PLOTS[3],
            "Epochs and last zxid per node",
            plot::epochs::SIZE,
            &plot::epochs::Epochs(data),
            None,
        )?,
        plot::render(
            dir,
            PLOTS[4],
            "Clock offset per node",
            plot::clock::SIZE,
            &plot::clock::Clock(data),
            (!has_clock).then(|| "no wall-clock readings in the status reads".to_string()),
        )?,
    ])
}

/// Seconds shown either side of a first violation in its zoomed plot.
const ZOOM_NS: u64 = 3_000_000_000;

/// One zoomed timeline per invalid checker, around its first violation: `zoom-<checker>`.
fn draw_zooms(dir: &Path, data: &scan::RunData) -> Result<Vec<Plot>> {
    let timeline = plot::timeline::Timeline(data);
    violations::firsts(&data.violations)
        .into_iter()
        .map(|v| {
            let zoomed = plot::timeline::Zoomed {
                data,
                from_ns: v.time_ns.saturating_sub(ZOOM_NS),
                to_ns: (v.time_ns + ZOOM_NS).min(data.t_end_ns.max(v.time_ns + 1)),
                title: format!(
                    "{}: first violation at {}, {} s either side",
                    v.checker,
                    crate::duration::moment(v.time_ns),
                    ZOOM_NS / 1_000_000_000
                ),
            };
            let title = format!("{}: its first violation, zoomed", v.checker);
            plot::render(
                dir,
                &format!("zoom-{}", v.checker),
                &title,
                timeline.size(),
                &zoomed,
                None,
            )
        })
        .collect()
}
