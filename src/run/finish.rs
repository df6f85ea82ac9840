//! Check and report: the last step of a run, and the one `fle-chaos check`/`report` redo.
//!
//! `finish_run` reads a finished run folder (test.json, its history), runs the checkers,
//! writes results.json and the report, and returns the exit code of the verdict.

use crate::checker::{self, CheckOptions};
use anyhow::Result;
use std::path::Path;

/// Checks the run in `run_dir`, writes its results and report; returns the exit code.
/// A report that cannot be rendered is said loudly but does not change the verdict: the
/// results are in results.json and `fle-chaos report` can try again.
pub fn finish_run(run_dir: &Path) -> Result<i32> {
    let results = checker::check_run(run_dir, &CheckOptions::default())?;
    for c in &results.checkers {
        eprintln!("fle-chaos: {:<19} {}", c.name, c.shown());
    }
    if let Some(c) = &results.coverage {
        eprintln!("fle-chaos: {:<19} {}", "coverage", c.line());
    }
    match crate::report::render_run(run_dir) {
        Ok(()) => eprintln!(
            "fle-chaos: report {}",
            run_dir.join("report.html").display()
        ),
        Err(e) => eprintln!("fle-chaos: the report could not be rendered: {e:#}"),
    }
    Ok(results.valid.exit_code())
}
