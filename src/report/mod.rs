//! Reports: what people look at after a run.
//!
//! `render(run_dir, run, results, lines)` renders a run the check step loaded (`render_run`
//! loads one for `fle-chaos report`: test.json, the history, results.json when the checkers
//! have run) and writes, into the same folder:
//! - plots, each as PNG and SVG (`plot`): leader timeline, recovery, client operations,
//!   epochs and zxids, clock offsets;
//! - `report.html` (`html`): one self-contained page;
//! - `junit.xml` (`junit`): one testcase per checker;
//!
//! and rewrites the index of all runs in the reports root (`index`). The history is read once,
//! in the checkers' pass (`checker::load_run`), which the report's fold (`scan`) rides along
//! (so both accept and reject the same files), into per-pixel-column series (`series`), so a long
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

use crate::checker::{self, LoadedRun, Results};
use crate::store::RunDir;
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

/// `fle-chaos report`: renders the report of the run in the folder `run_dir` (its one read,
/// `checker::load_run`, with the report's fold riding along; its results.json when the
/// checkers have run) and updates the reports index. Returns the paths written.
pub fn render_run(run_dir: &Path) -> Result<Rendered> {
    let run_dir = RunDir::open(run_dir)?;
    let (run, lines) = checker::load_run::<scan::LineFold>(&run_dir)?;
    let results: Option<Results> = run_dir.results()?;
    render(&run_dir, &run, results.as_ref(), lines)
}

/// Renders the report of a loaded run (`results`: None when the checkers have not run) into
/// `run_dir`, and updates the reports index. Nothing the run wrote is read again.
pub fn render(
    run_dir: &RunDir,
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

    let plots = draw_plots(run_dir.path(), &data)?;
    let zooms = draw_zooms(run_dir.path(), &data)?;
    let html = html::report_html(&html::Page {
        run_dir: run_dir.path(),
        info,
        results,
        data: &data,
        plots: &plots,
        zooms: &zooms,
    });
    let report = run_dir.report();
    std::fs::write(&report, html).with_context(|| format!("cannot write {}", report.display()))?;
    let junit = run_dir.junit();
    let xml = junit::junit_xml(info, results, data.t_end_ns as f64 / 1e9);
    std::fs::write(&junit, xml).with_context(|| format!("cannot write {}", junit.display()))?;

    // Only the run folder and the reports root that holds it are written to.
    let index = match index::reports_root(run_dir.path()) {
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
