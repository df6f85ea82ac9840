//! [`RunDir`]: one run's folder as a value. Whoever holds one knows the folder is a run's
//! (made here, or opened and found to hold a test.json), and asks it for its files: their
//! paths, and test.json and results.json loaded and saved. The results' type is the
//! checker's (a layer above), so they are loaded and saved as any serde type.

use super::{CONTROLLER_LOG, JUNIT, LATEST, REPORT, RESULTS, SCHEDULE};
use crate::exit::bad_input;
use crate::history::test_info::TestInfo;
use anyhow::{Context, Result};
use std::path::{Path, PathBuf};

/// A run folder: `<out>/<test name>/<UTC timestamp>/`, or a simulated batch's `seed-S/`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunDir {
    path: PathBuf,
}

impl RunDir {
    /// Creates `out/name/<UTC timestamp>/` (unique even for runs started in the same
    /// millisecond) and points `out/latest` at it.
    pub fn create(out: &Path, name: &str) -> Result<RunDir> {
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
        let path = dir
            .canonicalize()
            .with_context(|| format!("cannot resolve {}", dir.display()))?;
        point_latest(out, &path)?;
        Ok(RunDir { path })
    }

    /// The folder `path`, created when missing, with no `latest` link: a run a batch names
    /// itself (a simulated batch's `seed-S`).
    pub fn create_at(path: PathBuf) -> Result<RunDir> {
        std::fs::create_dir_all(&path)
            .with_context(|| format!("cannot create {}", path.display()))?;
        Ok(RunDir { path })
    }

    /// The run folder at `path`: one that exists and holds a test.json. Anything else is the
    /// user's mistake, said in one line naming the folder and what to give instead.
    pub fn open(path: &Path) -> Result<RunDir> {
        const GIVE: &str = "give a run folder written by `fle-chaos test`, such as \
                            reports/<test>/<time>/ (reports/latest for the newest run)";
        let shown = path.display();
        if !path.exists() {
            return Err(bad_input(format!("{shown} does not exist: {GIVE}")));
        }
        if !path.is_dir() {
            return Err(bad_input(format!("{shown} is not a directory: {GIVE}")));
        }
        if !path.join(TestInfo::FILE).is_file() {
            let file = TestInfo::FILE;
            return Err(bad_input(format!(
                "{shown} is not a run folder: it has no {file}; {GIVE}"
            )));
        }
        Ok(RunDir {
            path: path.to_path_buf(),
        })
    }

    /// The folder itself.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The run's test.json, read and checked (`TestInfo::read`).
    pub fn info(&self) -> Result<TestInfo> {
        TestInfo::read(&self.path.join(TestInfo::FILE))
    }

    /// Writes the run's test.json.
    pub fn save_info(&self, info: &TestInfo) -> Result<()> {
        info.write(&self.path.join(TestInfo::FILE))
    }

    /// The run's history: the compressed file when there is one, else the plain one
    /// (`history::file::in_run`).
    pub fn history(&self) -> PathBuf {
        crate::history::file::in_run(&self.path)
    }

    /// Where a run writes its history (compressed).
    pub fn new_history(&self) -> PathBuf {
        self.path.join(crate::history::file::WRITTEN)
    }

    /// The checkers' results.json.
    pub fn results_path(&self) -> PathBuf {
        self.path.join(RESULTS)
    }

    /// results.json decoded as `T` (the checker's `Results`): None when the checkers have not
    /// run; a file that is there but does not decode is the user's to fix.
    pub fn results<T: serde::de::DeserializeOwned>(&self) -> Result<Option<T>> {
        let path = self.results_path();
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
        };
        serde_json::from_str(&text).map(Some).map_err(|e| {
            bad_input(format!(
                "{} is not valid {RESULTS} ({e}); re-run `fle-chaos check {}`",
                path.display(),
                self.path.display()
            ))
        })
    }

    /// Writes results.json through a temporary file, so that a reader never sees half of it.
    pub fn save_results<T: serde::Serialize>(&self, results: &T) -> Result<()> {
        let path = self.results_path();
        let tmp = self.path.join(format!("{RESULTS}.tmp"));
        let text = serde_json::to_string_pretty(results)?;
        std::fs::write(&tmp, text).with_context(|| format!("cannot write {}", tmp.display()))?;
        std::fs::rename(&tmp, &path).with_context(|| format!("cannot write {}", path.display()))
    }

    /// The HTML report.
    pub fn report(&self) -> PathBuf {
        self.path.join(REPORT)
    }

    /// The run's JUnit XML.
    pub fn junit(&self) -> PathBuf {
        self.path.join(JUNIT)
    }

    /// The run's faults as a timed schedule (`--replay` reads it).
    pub fn schedule(&self) -> PathBuf {
        self.path.join(SCHEDULE)
    }

    /// Writes the run's timed schedule.
    pub fn save_schedule(&self, text: &str) -> Result<()> {
        let path = self.schedule();
        std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))
    }

    /// The controller's own log of the run.
    pub fn controller_log(&self) -> PathBuf {
        self.path.join(CONTROLLER_LOG)
    }
}

impl std::fmt::Display for RunDir {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.path.display().fmt(f)
    }
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
    use super::{RunDir, LATEST};
    use crate::history::test_info::TestInfo;

    #[test]
    fn two_runs_of_one_name_get_two_folders_and_latest_names_the_second() {
        let out = tempfile::tempdir().unwrap();
        let first = RunDir::create(out.path(), "t").unwrap();
        let second = RunDir::create(out.path(), "t").unwrap();
        assert_ne!(first, second);
        let base = out.path().canonicalize().unwrap().join("t");
        assert!(first.path().starts_with(&base));
        let latest = std::fs::canonicalize(out.path().join(LATEST)).unwrap();
        assert_eq!(latest, second.path());
    }

    #[test]
    fn a_folder_that_is_not_a_run_is_one_line_naming_it_and_the_fix() {
        let out = tempfile::tempdir().unwrap();
        let empty = out.path().join("empty");
        std::fs::create_dir(&empty).unwrap();
        for (dir, says) in [
            (empty.clone(), "is not a run folder: it has no test.json"),
            (out.path().join("nope"), "does not exist"),
        ] {
            let e = RunDir::open(&dir).unwrap_err();
            let line = format!("{e:#}");
            assert_eq!(crate::exit::code_for(&e), crate::exit::BAD_ARGS);
            assert!(!line.contains('\n'), "{line}");
            assert!(line.starts_with(&dir.display().to_string()), "{line}");
            assert!(
                line.contains(says) && line.contains("reports/latest"),
                "{line}"
            );
        }
    }

    #[test]
    fn test_json_and_results_saved_are_loaded_as_they_were() {
        let out = tempfile::tempdir().unwrap();
        let made = RunDir::create(out.path(), "t").unwrap();
        assert_eq!(made.results::<serde_json::Value>().unwrap(), None);
        let mut info = TestInfo::for_tests(&["n1", "n2", "n3"]);
        info.settings.faults_planned = Some(4);
        made.save_info(&info).unwrap();
        made.save_results(&serde_json::json!({"valid?": true}))
            .unwrap();
        let run = RunDir::open(made.path()).unwrap();
        let back = run.info().unwrap();
        assert_eq!(
            serde_json::to_value(&back).unwrap(),
            serde_json::to_value(&info).unwrap()
        );
        let results: Option<serde_json::Value> = run.results().unwrap();
        assert_eq!(results, Some(serde_json::json!({"valid?": true})));
    }
}
