//! The run folder (`<out>/<test name>/<UTC timestamp>/`) and the reports folder above it, as
//! Jepsen's `store` owns them: every file a run leaves there is named here once (test.json is
//! `TestInfo::FILE`, the histories are `history::file`'s), and [`RunDir`] is the folder as a
//! value: made by [`RunDir::create`] (which points `<out>/latest` at it) or checked by
//! [`RunDir::open`], it gives each file's path and loads and saves the typed files (test.json,
//! results.json). The files' contents are their own modules' (`history::test_info`,
//! `history::file`, `checker::Results`, `report`); what a sweep keeps of a run is
//! `commands::sweep::keep`'s.

pub mod run_dir;

pub use run_dir::RunDir;

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
