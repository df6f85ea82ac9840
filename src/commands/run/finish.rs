//! Check and report: the last step of a run, and the one `fle-chaos check`/`report` redo.
//!
//! `finish_run` goes down the run's layers once: the run folder is read once
//! (`checker::load_run`: test.json, and the history in one pass that digests it for the
//! checkers while the report's fold rides along), the checkers judge what was loaded, the
//! folder keeps their results (results.json), and the report gets the loaded run and the
//! results. It returns the exit code of the verdict.

use crate::checker::{self, CheckOptions};
use crate::report;
use crate::store::RunDir;
use anyhow::Result;

/// Checks the run in `run_dir`, writes its results and report; returns the exit code.
/// A report that cannot be rendered is said loudly but does not change the verdict: the
/// results are in results.json and `fle-chaos report` can try again.
pub fn finish_run(run_dir: &RunDir) -> Result<i32> {
    let (run, lines) = checker::load_run::<report::scan::LineFold>(run_dir)?;
    let results = checker::check_loaded(&run, &CheckOptions::default());
    run_dir.save_results(&results)?;
    for c in &results.checkers {
        eprintln!("fle-chaos: {:<19} {}", c.name, c.shown());
    }
    if let Some(c) = &results.coverage {
        eprintln!("fle-chaos: {:<19} {}", "coverage", c.line());
    }
    for k in &results.known {
        eprintln!("fle-chaos: {:<19} {k}", "known");
    }
    for r in &results.resembles {
        eprintln!("fle-chaos: {:<19} {r}", "resembles");
    }
    match report::render(run_dir, &run, Some(&results), lines) {
        Ok(r) => eprintln!("fle-chaos: report {}", r.report.display()),
        Err(e) => eprintln!("fle-chaos: the report could not be rendered: {e:#}"),
    }
    Ok(results.valid.exit_code())
}
