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
    /// The nodes that are observers (`--observers`): they vote for nothing and count toward no
    /// quorum. Left out when there are none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub observers: Vec<String>,
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
    /// The history line format (`history::FORMAT_VERSION`); absent in test.json = 1.
    #[serde(default = "format_v1")]
    pub history_format: u32,
    /// The run's other settings.
    #[serde(default)]
    pub settings: Settings,
}

fn format_v1() -> u32 {
    1
}

/// The settings readers use, typed; every other setting kept as given (`rest`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    /// The observers' per-read timeout: a read may be this much older than its recorded time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_timeout_ms: Option<u64>,
    /// How long the final phase waited for recovery.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recovery_timeout_s: Option<f64>,
    /// The workload as configured (its `kind`: "election", "writes", ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload: Option<WorkloadSettings>,
    /// `--zookeeper-config` lines the servers ran with (zoo.cfg key to value).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub zookeeper_config: std::collections::BTreeMap<String, String>,
    /// What the target said about the software it ran (`Target::software`), after the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub software: Option<Software>,
    #[serde(flatten)]
    pub rest: serde_json::Map<String, serde_json::Value>,
}

/// The software a target ran: the version each node reported (ZooKeeper's `srvr`, e.g.
/// "3.8.0-<commit>"), and whatever else the target says about it (install, epoch files).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Software {
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub versions: std::collections::BTreeMap<String, String>,
    #[serde(flatten)]
    pub rest: serde_json::Map<String, serde_json::Value>,
}

impl Settings {
    pub fn is_empty(&self) -> bool {
        *self == Settings::default()
    }
}

/// The workload's settings: its kind typed, the rest as given.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct WorkloadSettings {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(flatten)]
    pub rest: serde_json::Map<String, serde_json::Value>,
}

/// The `--zookeeper-config` value of `key` in milliseconds, else `default`: one reading, for a
/// run's test.json and for the plan that writes it.
pub fn zookeeper_ms(
    config: &std::collections::BTreeMap<String, String>,
    key: &str,
    default: u64,
) -> u64 {
    config
        .get(key)
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

impl TestInfo {
    /// Its file's name in a run folder: the one spelling of it.
    pub const FILE: &'static str = "test.json";

    /// A minimal fle-node election run of `nodes`, for unit tests of the checkers.
    #[cfg(test)]
    pub fn for_tests(nodes: &[&str]) -> TestInfo {
        serde_json::from_value(serde_json::json!({
            "name": "t", "target": "fle", "nodes": nodes, "workload": "election",
            "nemesis": ["kill"], "seed": 1, "time_limit_s": 10.0, "tick_ms": 100,
            "init_limit": 5, "sync_limit": 2, "started_at": "2026-11-30T00:00:00Z",
            "replay_command": "x", "version": "0"
        }))
        .expect("a valid test.json")
    }

    /// A majority of the voters (observers never count).
    pub fn quorum(&self) -> usize {
        crate::api::quorum(self.voters().len())
    }

    /// The nodes that vote, in node order.
    pub fn voters(&self) -> Vec<String> {
        let voting = |n: &&String| !self.observers.contains(n);
        self.nodes.iter().filter(voting).cloned().collect()
    }

    /// The view of this run's ensemble (its quorum counts voters only).
    pub fn view(&self) -> super::view::View {
        super::view::View::of_ensemble(&self.nodes, &self.observers)
    }

    pub fn read(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        let info: TestInfo = serde_json::from_str(&text)
            .with_context(|| format!("{} is not a valid test.json", path.display()))?;
        if info.history_format > super::FORMAT_VERSION {
            anyhow::bail!(
                "{}: history_format {} was written by a newer fle-chaos (this one reads up to {}): use that version",
                path.display(),
                info.history_format,
                super::FORMAT_VERSION
            );
        }
        if let Some(why) = info.nonsense() {
            anyhow::bail!("{}: {why}: use the test.json the run wrote", path.display());
        }
        Ok(info)
    }

    /// What no run can have written: the checkers would judge by it (a quorum of an empty
    /// ensemble, a bound of zero ticks, a sid read off a name).
    fn nonsense(&self) -> Option<String> {
        if self.nodes.is_empty() {
            return Some("\"nodes\" is empty (a run has servers n1..nN)".into());
        }
        for (i, n) in self.nodes.iter().enumerate() {
            let named = super::sid_of(n).is_some_and(|sid| sid >= 1 && super::node_name(sid) == *n);
            if !named {
                return Some(format!(
                    "\"nodes\" has {n:?}: servers are named n1..nN (the number is the server's myid)"
                ));
            }
            if self.nodes[..i].contains(n) {
                return Some(format!("\"nodes\" lists {n} twice"));
            }
        }
        if let Some(o) = self.observers.iter().find(|o| !self.nodes.contains(o)) {
            return Some(format!(
                "\"observers\" names {o}, which is not in \"nodes\""
            ));
        }
        if self.voters().is_empty() {
            return Some("every node is an observer (a run has at least one voter)".into());
        }
        let timing = [
            ("tick_ms", self.tick_ms),
            ("init_limit", self.init_limit.into()),
            ("sync_limit", self.sync_limit.into()),
        ];
        timing.iter().find(|(_, v)| *v == 0).map(|(k, _)| {
            format!("\"{k}\" is 0 (zoo.cfg's tickTime, initLimit and syncLimit are at least 1)")
        })
    }

    /// The workload's kind ("election", "writes", ...): the configured one, else the name.
    pub fn workload_kind(&self) -> &str {
        self.settings
            .workload
            .as_ref()
            .and_then(|w| w.kind.as_deref())
            .unwrap_or(&self.workload)
    }

    /// A ZooKeeper timeout of the run in milliseconds: its `--zookeeper-config KEY=VALUE`,
    /// else `default` (ZooKeeper's own).
    pub fn zookeeper_ms(&self, key: &str, default: u64) -> u64 {
        zookeeper_ms(&self.settings.zookeeper_config, key, default)
    }

    /// The election's finalize wait: `--finalize-wait-ms` as the run was given it (test.json
    /// `settings.args`), else the node's default.
    pub fn finalize_wait_ms(&self) -> u64 {
        self.settings
            .rest
            .get("args")
            .and_then(|a| a.get("finalize_wait_ms"))
            .and_then(|v| v.as_u64())
            .unwrap_or(fle_node::election::INITIAL_NOTIFICATION_TIMEOUT.as_millis() as u64)
    }

    /// Whether the run faked the servers' monotonic clock too (test.json
    /// `settings.fake_monotonic`, a schedule's `fake_monotonic`): clock faults then skew
    /// their timeouts.
    pub fn fake_monotonic(&self) -> bool {
        self.settings
            .rest
            .get("fake_monotonic")
            .and_then(|v| v.as_bool())
            .unwrap_or(false)
    }

    pub fn write(&self, path: &Path) -> Result<()> {
        let text = serde_json::to_string_pretty(self)?;
        std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))
    }
}
