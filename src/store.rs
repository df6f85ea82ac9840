//! The run folder (`<out>/<test name>/<UTC timestamp>/`) and the reports folder above it, as
//! Jepsen's `store` owns them: every file a run leaves there is named here once (test.json is
//! `TestInfo::FILE`, the histories are `history::file`'s), and [`create_run_dir`] makes a new
//! folder and points `<out>/latest` at it. The files' contents are their own modules'
//! (`history::test_info`, `history::file`, `checker::Results`, `report`); what a sweep keeps of
//! a run is `commands::sweep::keep`'s.

use anyhow::{Context, Result};
use std::path::{Path, PathBuf};

/// The checkers' results, written by the check step.
pub const RESULTS: &str = "results.json";
/// The HTML report.
pub const REPORT: &str = "report.html";
/// The JUnit XML of a run, a sweep or a simulated batch.
pub const JUNIT: &str = "junit.xml";
/// The run's faults as they happened, a timed schedule next to its test.json (`--replay` reads
/// it).
pub const SCHEDULE: &str = "schedule.toml";
/// What the controller logged during the run (`tracing`).
pub const CONTROLLER_LOG: &str = "controller.log";
/// The link in a reports folder to its newest run.
pub const LATEST: &str = "latest";
/// A reports folder's index of its runs.
pub const INDEX: &str = "index.html";

/// Creates `out/name/<UTC timestamp>/` (unique even for runs started in the same millisecond)
/// and points `out/latest` at it; returns the folder.
pub fn create_run_dir(out: &Path, name: &str) -> Result<PathBuf> {
    let base = out.join(name);
    std::fs::create_dir_all(&base).with_context(|| {
        format!(
            "cannot create {} (choose another --out folder)",
            base.display()
        )
    })?;
    let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%S%.3fZ").to_string();
    let mut dir = base.join(&stamp);
    let mut n = 1;
    while std::fs::create_dir(&dir).is_err() {
        if n > 100 {
            anyhow::bail!("cannot create a run folder under {}", base.display());
        }
        dir = base.join(format!("{stamp}-{n}"));
        n += 1;
    }
    let dir = (dir.canonicalize()).with_context(|| format!("cannot resolve {}", dir.display()))?;
    point_latest(out, &dir)?;
    Ok(dir)
}

/// Replaces `out/latest` with a relative symlink to `run_dir`, atomically (rename over it).
fn point_latest(out: &Path, run_dir: &Path) -> Result<()> {
    let out = out.canonicalize()?;
    let relative = run_dir.strip_prefix(&out).unwrap_or(run_dir);
    let tmp = out.join(format!(".{LATEST}-{}", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    std::os::unix::fs::symlink(relative, &tmp)
        .with_context(|| format!("cannot create {}", tmp.display()))?;
    std::fs::rename(&tmp, out.join(LATEST))
        .with_context(|| format!("cannot update {}/{LATEST}", out.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{create_run_dir, LATEST};

    #[test]
    fn two_runs_of_one_name_get_two_folders_and_latest_names_the_second() {
        let out = tempfile::tempdir().unwrap();
        let first = create_run_dir(out.path(), "t").unwrap();
        let second = create_run_dir(out.path(), "t").unwrap();
        assert_ne!(first, second);
        assert!(first.starts_with(out.path().canonicalize().unwrap().join("t")));
        let latest = std::fs::canonicalize(out.path().join(LATEST)).unwrap();
        assert_eq!(latest, second);
    }
}
