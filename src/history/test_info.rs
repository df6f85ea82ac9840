//! `test.json`: the settings of a run, written by the controller before the run starts and read by
//! the checkers (cluster size and timing) and the report (settings, seed, replay command).

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::path::Path;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TestInfo {
    /// The test's name (the folder under reports/).
    pub name: String,
    /// "fle" or "zookeeper".
    pub target: String,
    /// Node names, "n1".."nN" (sid = number).
    pub nodes: Vec<String>,
    /// Workload name ("election", "writes", ...).
    pub workload: String,
    /// Fault kinds in the schedule ("kill", "pause", "partition", "clock"); empty = none.
    pub nemesis: Vec<String>,
    pub seed: u64,
    pub time_limit_s: f64,
    /// The cluster's timing, as in zoo.cfg.
    pub tick_ms: u64,
    pub init_limit: u32,
    pub sync_limit: u32,
    /// When the run started (wall clock, for people; the history uses monotonic time).
    pub started_at: chrono::DateTime<chrono::Utc>,
    /// A command line that replays the run (same settings, same seed).
    pub replay_command: String,
    /// fle-chaos version that made the run.
    pub version: String,
    /// Every other setting, as given.
    #[serde(default)]
    pub settings: serde_json::Value,
}

impl TestInfo {
    pub fn quorum(&self) -> usize {
        self.nodes.len() / 2 + 1
    }

    pub fn read(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        serde_json::from_str(&text)
            .with_context(|| format!("{} is not a valid test.json", path.display()))
    }

    pub fn write(&self, path: &Path) -> Result<()> {
        let text = serde_json::to_string_pretty(self)?;
        std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))
    }
}
