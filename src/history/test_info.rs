//! `test.json`: the settings of a run, written by the controller before the run starts and read by
//! the checkers (cluster size and timing) and the report (settings, seed, replay command).

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

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

/// The run's other settings, each typed. Files of older versions load with what they lack left
/// at its default; keys this version does not know are kept (`unknown`), so that a file of a
/// newer version loads and is written back whole, but nothing reads them.
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
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub zookeeper_config: BTreeMap<String, String>,
    /// What the target said about the software it ran (`Target::software`), after the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub software: Option<Software>,
    /// How many faults the run's seeded plan held (the faults checker's "asked for").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub faults_planned: Option<u64>,
    /// What only a run of `fle-chaos test` records.
    #[serde(flatten)]
    pub test: TestSettings,
    /// What only a run of `fle-chaos simulate` records.
    #[serde(flatten)]
    pub simulated: SimulatedSettings,
    /// Keys this version does not know (a newer version's), kept as read.
    #[serde(flatten)]
    pub unknown: serde_json::Map<String, serde_json::Value>,
}

/// The settings of a run of `fle-chaos test`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TestSettings {
    /// The command's arguments (a replay runs with them again).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<TestArgsRecord>,
    /// The nemesis's settings as `nemesis::NemesisSettings` writes them (for people and
    /// scripts: a replay takes the run's from `args`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nemesis: Option<serde_json::Value>,
    /// `--net`: how the nodes were networked ("netns", "loopback").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub net: Option<String>,
    /// The fle-node binary the nodes (or lazyfs) ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_binary: Option<std::path::PathBuf>,
    /// Whether the servers ran under libfaketime.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub faketime: Option<bool>,
    /// Whether libfaketime moved the servers' monotonic clock too (a schedule's
    /// `fake_monotonic`): clock faults then skew their timeouts.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub fake_monotonic: bool,
    /// `--real-clock-skew`: clock faults stepped the hosts' system clocks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub real_clock_skew: Option<bool>,
    /// The run's id, in the names of what it created (`fle-chaos clean` finds them by it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
}

/// `fle-chaos test`'s arguments as the run was given them: `commands::run::TestArgs` (a layer
/// above this one) as it serializes, which a replay reads back whole; the one argument the
/// checkers read is typed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TestArgsRecord {
    /// `--finalize-wait-ms`; None: the node's default.
    #[serde(default)]
    pub finalize_wait_ms: Option<u64>,
    /// The other arguments, as `TestArgs` wrote them.
    #[serde(flatten)]
    pub others: serde_json::Map<String, serde_json::Value>,
}

/// The settings of a run of `fle-chaos simulate`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SimulatedSettings {
    /// Always true in a simulated run's test.json.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub simulated: bool,
    /// The `simulate` flags that make the run's settings (`shrink` rebuilds them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub simulate_args: Option<Vec<String>>,
    /// The seeded bugs the simulated servers ran with.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bugs: Vec<String>,
    /// The schedule's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<String>,
}

/// What makes a run's test.json, as `test` and `simulate` both describe their run before it
/// starts: [`TestInfo::new`] is the one place a test.json is made.
#[derive(Debug, Clone)]
pub struct RunSpec {
    pub name: String,
    /// "fle", "zookeeper" or "sim".
    pub target: String,
    pub nodes: Vec<String>,
    pub observers: Vec<String>,
    /// The workload's name, and its settings as configured.
    pub workload: String,
    pub workload_settings: WorkloadSettings,
    /// The fault kinds the schedule holds.
    pub nemesis: Vec<String>,
    pub seed: u64,
    pub time_limit: Duration,
    pub tick_ms: u64,
    pub init_limit: u32,
    pub sync_limit: u32,
    pub started_at: chrono::DateTime<chrono::Utc>,
    pub replay_command: String,
    pub status_timeout: Duration,
    pub recovery_timeout: Duration,
    pub faults_planned: usize,
    pub zookeeper_config: BTreeMap<String, String>,
    /// The command's own settings.
    pub made_by: MadeBy,
}

/// Which command made a run, with its own settings.
#[derive(Debug, Clone)]
pub enum MadeBy {
    Test(TestSettings),
    Simulate(SimulatedSettings),
}

/// The software a target ran: the version each node reported (ZooKeeper's `srvr`, e.g.
/// "3.8.0-<commit>"), and whatever else the target says about it (install, epoch files).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Software {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub versions: BTreeMap<String, String>,
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
pub fn zookeeper_ms(config: &BTreeMap<String, String>, key: &str, default: u64) -> u64 {
    config
        .get(key)
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

impl TestInfo {
    /// Its file's name in a run folder: the one spelling of it.
    pub const FILE: &'static str = "test.json";

    /// The test.json of the run `spec` describes, made by this version (its version and
    /// history format).
    pub fn new(spec: RunSpec) -> TestInfo {
        let (test, simulated) = match spec.made_by {
            MadeBy::Test(t) => (t, SimulatedSettings::default()),
            MadeBy::Simulate(s) => (TestSettings::default(), s),
        };
        TestInfo {
            name: spec.name,
            target: spec.target,
            nodes: spec.nodes,
            observers: spec.observers,
            workload: spec.workload,
            nemesis: spec.nemesis,
            seed: spec.seed,
            time_limit_s: spec.time_limit.as_secs_f64(),
            tick_ms: spec.tick_ms,
            init_limit: spec.init_limit,
            sync_limit: spec.sync_limit,
            started_at: spec.started_at,
            replay_command: spec.replay_command,
            version: env!("CARGO_PKG_VERSION").into(),
            history_format: super::FORMAT_VERSION,
            settings: Settings {
                status_timeout_ms: Some(spec.status_timeout.as_millis() as u64),
                recovery_timeout_s: Some(spec.recovery_timeout.as_secs_f64()),
                workload: Some(spec.workload_settings),
                zookeeper_config: spec.zookeeper_config,
                software: None,
                faults_planned: Some(spec.faults_planned as u64),
                test,
                simulated,
                unknown: Default::default(),
            },
        }
    }

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
        (self.settings.test.args.as_ref())
            .and_then(|a| a.finalize_wait_ms)
            .unwrap_or(fle_node::election::INITIAL_NOTIFICATION_TIMEOUT.as_millis() as u64)
    }

    /// Whether a status read's `last_zxid` is the last zxid the server logged: fle-node's is;
    /// ZooKeeper's (its zabstate) is the last it applied, which a txn reaches only at its
    /// commit, and a server that does not serve reports the last one seen.
    pub fn reads_show_logged_zxid(&self) -> bool {
        self.target != "zookeeper"
    }

    /// Whether a server's election counts the votes of the voters of the config it has seen
    /// proposed besides its own: ZooKeeper's does (`QuorumPeer.getCurrentAndNextConfigVoters`,
    /// with a quorum of each); fle-node's counts its own config's voters only.
    pub fn counts_next_config_votes(&self) -> bool {
        self.target == "zookeeper"
    }

    /// Whether the run faked the servers' monotonic clock too (test.json
    /// `settings.fake_monotonic`, a schedule's `fake_monotonic`): clock faults then skew
    /// their timeouts.
    pub fn fake_monotonic(&self) -> bool {
        self.settings.test.fake_monotonic
    }

    pub fn write(&self, path: &Path) -> Result<()> {
        let text = serde_json::to_string_pretty(self)?;
        std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::TestInfo;
    use serde_json::json;
    use std::path::Path;

    fn fixture(name: &str) -> TestInfo {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures")
            .join(name);
        TestInfo::read(&dir.join(TestInfo::FILE)).unwrap()
    }

    /// A test.json as earlier versions wrote it: the settings only readers typed, every other
    /// one beside them by name.
    fn written_before(settings: serde_json::Value) -> serde_json::Value {
        let mut info = serde_json::to_value(TestInfo::for_tests(&["n1", "n2", "n3"])).unwrap();
        info["settings"] = settings;
        info
    }

    #[test]
    fn the_fixtures_settings_are_read_typed() {
        let planned = fixture("faults-planned-none-injected");
        assert_eq!(planned.settings.faults_planned, Some(3));
        assert!(!planned.fake_monotonic());
        assert!(fixture("stepdown-zombie-under-clock-fault").fake_monotonic());
        assert_eq!(fixture("valid-writes").settings.faults_planned, None);
    }

    #[test]
    fn a_real_runs_test_json_of_an_earlier_version_loads_typed_and_saves_whole() {
        let old = written_before(json!({
            "status_timeout_ms": 500, "recovery_timeout_s": 12.0,
            "args": {"nodes": 3, "finalize_wait_ms": 321, "bug": "quorum-minority"},
            "nemesis": {"kinds": ["kill"], "met_before": null},
            "net": "loopback", "node_binary": "/bin/fle-node", "faketime": true,
            "fake_monotonic": true, "real_clock_skew": false, "run_id": "a1b2c3",
            "faults_planned": 7,
        }));
        let info: TestInfo = serde_json::from_value(old.clone()).unwrap();
        let t = &info.settings.test;
        assert_eq!(info.finalize_wait_ms(), 321);
        assert!(info.fake_monotonic());
        assert_eq!(info.settings.faults_planned, Some(7));
        assert_eq!(
            (t.net.as_deref(), t.run_id.as_deref()),
            (Some("loopback"), Some("a1b2c3"))
        );
        assert_eq!((t.faketime, t.real_clock_skew), (Some(true), Some(false)));
        assert_eq!(t.node_binary.as_deref(), Some(Path::new("/bin/fle-node")));
        assert_eq!(t.nemesis.as_ref().unwrap()["kinds"], json!(["kill"]));
        let args = t.args.as_ref().unwrap();
        assert_eq!(args.others["bug"], json!("quorum-minority"));
        assert!(
            info.settings.unknown.is_empty(),
            "{:?}",
            info.settings.unknown
        );
        // Written again, it is the file it was.
        assert_eq!(serde_json::to_value(&info).unwrap(), old);
    }

    #[test]
    fn a_simulated_runs_test_json_loads_typed_and_an_unknown_key_is_kept() {
        let old = written_before(json!({
            "simulated": true, "simulate_args": ["--nodes", "3"], "bugs": ["follow-single-leading"],
            "schedule": "default", "faults_planned": 2, "from_a_newer_version": {"x": 1},
        }));
        let info: TestInfo = serde_json::from_value(old.clone()).unwrap();
        let s = &info.settings.simulated;
        assert!(s.simulated);
        assert_eq!(
            s.simulate_args.as_deref(),
            Some(&["--nodes".into(), "3".into()][..])
        );
        assert_eq!((s.bugs.len(), s.schedule.as_deref()), (1, Some("default")));
        assert_eq!(
            info.settings.unknown["from_a_newer_version"],
            json!({"x": 1})
        );
        assert_eq!(serde_json::to_value(&info).unwrap(), old);
    }
}
