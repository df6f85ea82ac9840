//! Check and report: the last step of a run, and the one `fle-chaos check`/`report` redo.
//!
//! `finish_run` reads the finished run folder once (`report::load`: the checkers' digest and
//! the report's fold of the same lines, in one pass), runs the checkers on what it read,
//! writes results.json, hands the report the loaded run and the results, and returns the exit
//! code of the verdict.

use crate::checker::{self, CheckOptions};
use anyhow::Result;
use std::path::Path;

/// Checks the run in `run_dir`, writes its results and report; returns the exit code.
/// A report that cannot be rendered is said loudly but does not change the verdict: the
/// results are in results.json and `fle-chaos report` can try again.
pub fn finish_run(run_dir: &Path) -> Result<i32> {
    let (run, lines) = crate::report::load(run_dir)?;
    let results = checker::check_loaded(&run, &CheckOptions::default());
    checker::write_results(run_dir, &results)?;
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
    match crate::report::render(run_dir, &run, Some(&results), lines) {
        Ok(_) => eprintln!(
            "fle-chaos: report {}",
            run_dir.join(crate::store::REPORT).display()
        ),
        Err(e) => eprintln!("fle-chaos: the report could not be rendered: {e:#}"),
    }
    Ok(results.valid.exit_code())
}
