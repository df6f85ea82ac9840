//! The sweep's matrix file (`workloads/sweeps/*.toml`) and its expansion into runs.
//!
//! A matrix names lists (targets, workloads, nemesis schedules, node counts, seeds, seeded
//! bugs); every combination is one run (`Cell`). The target `sim` makes a cell a batch of
//! `sim_runs` simulated runs (`fle-chaos simulate`, seeds from the cell's seed on) instead of
//! one real run (`fle-chaos test`). The expansion order is fixed, with the seed
//! outermost, so a budget that cuts the sweep short still covers every combination once
//! before it repeats one with the next seed; a shard (`--shard I/N`) is every N-th cell of that
//! order, so N machines given the same file run disjoint slices whose union is the matrix.
//! Everything is validated here, before any run starts (bad input: one line, exit 254).

use crate::exit::bad_input;
use crate::nemesis::units::parse_duration;
use anyhow::Result;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The default matrix, `workloads/sweeps/nightly.toml`, built in so `fle-chaos sweep` works
/// from any directory (a file of that path in the current directory wins).
pub const DEFAULT_FILE: &str = "workloads/sweeps/nightly.toml";
const NIGHTLY: &str = include_str!("../../../workloads/sweeps/nightly.toml");

/// A schedule entry meaning "no faults" (`--nemesis none`).
pub const NO_FAULTS: &str = "none";
/// The schedule entry meaning `test`'s default (no nemesis flag).
pub const DEFAULT_SCHEDULE: &str = "mixed";
/// A bug entry meaning "no seeded bug".
pub const NO_BUG: &str = "none";

/// The TOML file as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMatrix {
    /// Each run's `--time-limit` ("60s", "2m").
    time_limit: String,
    #[serde(default = "default_targets")]
    targets: Vec<String>,
    #[serde(default = "default_workloads")]
    workloads: Vec<String>,
    /// Nemesis schedules: built-in names (`nemesis/NAME.toml`), paths, or "none".
    schedules: Vec<String>,
    nodes: Vec<usize>,
    seeds: Vec<u64>,
    /// Seeded fle-node bugs (`fle-node --list-bugs`), or "none" for the real thing.
    #[serde(default = "default_bugs")]
    bugs: Vec<String>,
    /// How many of each run's nodes are observers (`--observers K`: the last K).
    #[serde(default = "default_observers")]
    observers: Vec<usize>,
    /// Each run's `--recovery-timeout`.
    #[serde(default)]
    recovery_timeout: Option<String>,
    /// `netns` (default) or `loopback`.
    #[serde(default)]
    net: Option<String>,
    /// Whether a run whose every invalid verdict is a known bug of the version it ran
    /// (`checker::known`) fails the sweep (default) or counts as passed, shown as known.
    #[serde(default = "fails_on_known")]
    fail_on_known: bool,
    /// `--zookeeper-config KEY=VALUE` settings given to every ZooKeeper run (zoo.cfg keys).
    #[serde(default)]
    zookeeper_config: Vec<String>,
    /// ZooKeeper releases (`--zookeeper-version`): every zookeeper cell runs once under each;
    /// none: Debian's package of this machine.
    #[serde(default)]
    zookeeper_versions: Vec<String>,
    /// Simulated runs per `sim` cell (`simulate --runs`).
    #[serde(default)]
    sim_runs: Option<usize>,
}

/// The target that makes a cell a batch of simulated runs.
pub const SIM: &str = "sim";
/// Simulated runs per `sim` cell unless the matrix says `sim_runs`.
pub const DEFAULT_SIM_RUNS: usize = 1000;

fn fails_on_known() -> bool {
    true
}

fn default_targets() -> Vec<String> {
    vec!["fle".into()]
}
fn default_workloads() -> Vec<String> {
    vec!["writes".into()]
}
fn default_bugs() -> Vec<String> {
    vec![NO_BUG.into()]
}
fn default_observers() -> Vec<usize> {
    vec![0]
}

/// A validated matrix.
#[derive(Debug, Clone)]
pub struct Matrix {
    /// The file's stem ("nightly"): names the sweep folder.
    pub name: String,
    /// Where it was read from ("(built-in) workloads/sweeps/nightly.toml" for the default).
    pub origin: String,
    pub time_limit: Duration,
    pub recovery_timeout: Option<Duration>,
    pub net: Option<String>,
    /// False: a run invalid only for known bugs does not fail the sweep (`fail_on_known`).
    pub fail_on_known: bool,
    /// Given to the ZooKeeper runs as `--zookeeper-config` (validated, as written).
    pub zookeeper_config: Vec<String>,
    /// Simulated runs per `sim` cell.
    pub sim_runs: usize,
    pub cells: Vec<Cell>,
    /// The file as read: a sweep keeps a copy (`matrix.toml`) so `--resume` runs the same
    /// matrix even after the file changed.
    pub text: String,
}

/// One run of the matrix.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cell {
    /// Unique within the matrix, usable as a test name: `fle-writes-mixed-n3-s1`.
    pub id: String,
    pub target: String,
    pub workload: String,
    pub schedule: String,
    pub nodes: usize,
    pub seed: u64,
    /// None: no seeded bug.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bug: Option<String>,
    /// Observers among the nodes (the last ones); 0 for none.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub observers: usize,
    /// The ZooKeeper release a zookeeper cell runs (`--zookeeper-version`); None: Debian's
    /// package of the machine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zookeeper_version: Option<String>,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// `--shard I/N`: the I-th of N slices (1-based, as CI matrix jobs count).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shard {
    pub index: usize,
    pub count: usize,
}

impl std::str::FromStr for Shard {
    type Err = String;
    fn from_str(s: &str) -> Result<Shard, String> {
        let bad = || format!("'{s}' is not a shard like 1/4 (I/N with 1 <= I <= N)");
        let (i, n) = s.split_once('/').ok_or_else(bad)?;
        let (index, count): (usize, usize) = (
            i.trim().parse().map_err(|_| bad())?,
            n.trim().parse().map_err(|_| bad())?,
        );
        if index == 0 || count == 0 || index > count {
            return Err(bad());
        }
        Ok(Shard { index, count })
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl Shard {
    /// Cell number `i` (0-based, in expansion order) belongs to this shard: round-robin, so
    /// every shard gets a similar mix of schedules and seeds.
    pub fn holds(&self, i: usize) -> bool {
        i % self.count == self.index - 1
    }
}

/// The matrix's lists are not empty and name known targets, workloads, schedules and node
/// counts; `sim_runs` and `net` make sense with them.
fn check_lists(raw: &RawMatrix) -> Result<(), String> {
    for (key, list) in [
        ("targets", raw.targets.len()),
        ("workloads", raw.workloads.len()),
        ("schedules", raw.schedules.len()),
        ("nodes", raw.nodes.len()),
        ("seeds", raw.seeds.len()),
        ("bugs", raw.bugs.len()),
        ("observers", raw.observers.len()),
    ] {
        if list == 0 {
            return Err(format!("{key} is empty; list at least one"));
        }
    }
    for t in &raw.targets {
        if t != "fle" && t != "zookeeper" && t != SIM {
            return Err(format!(
                "targets: \"{t}\" is unknown; use fle, zookeeper or sim"
            ));
        }
    }
    let sim = raw.targets.iter().any(|t| t == SIM);
    match raw.sim_runs {
        Some(0) => return Err("sim_runs = 0: give at least one simulated run".into()),
        Some(_) if !sim => {
            return Err("sim_runs is given but targets has no sim; add it or drop the key".into())
        }
        _ => {}
    }
    if let Some(n) = &raw.net {
        if n != "netns" && n != "loopback" {
            return Err(format!("net = \"{n}\" is unknown; use netns or loopback"));
        }
    }
    for w in &raw.workloads {
        crate::workload::load(w).map_err(|e| format!("workloads: {e:#}"))?;
    }
    for s in &raw.schedules {
        if s != NO_FAULTS {
            crate::nemesis::catalogue::load(s).map_err(|e| format!("schedules: {e:#}"))?;
        }
    }
    if let Some(n) = raw.nodes.iter().find(|n| !(1..=31).contains(*n)) {
        return Err(format!(
            "nodes: {n} is out of range; between 1 and 31 nodes"
        ));
    }
    let (fewest, most) = (raw.nodes.iter().min(), raw.observers.iter().max());
    if let (Some(&n), Some(&k)) = (fewest, most) {
        if k >= n {
            return Err(format!(
                "observers: {k} leaves no voter among nodes = {n}; keep every count below the smallest node count"
            ));
        }
    }
    Ok(())
}

/// ZooKeeper's settings and releases are well formed and given with its target; bugs are
/// names, seeded into fle-node only.
fn check_zookeeper_and_bugs(raw: &RawMatrix) -> Result<(), String> {
    for setting in &raw.zookeeper_config {
        setting
            .parse::<crate::control::sut::zookeeper::config::Setting>()
            .map_err(|e| format!("zookeeper_config: {e}"))?;
    }
    let zookeeper = raw.targets.iter().any(|t| t == "zookeeper");
    for (key, given) in [
        ("zookeeper_config", !raw.zookeeper_config.is_empty()),
        ("zookeeper_versions", !raw.zookeeper_versions.is_empty()),
    ] {
        if given && !zookeeper {
            return Err(format!(
                "{key} is given but targets has no zookeeper; add it or drop the key"
            ));
        }
    }
    if let Some(v) = raw
        .zookeeper_versions
        .iter()
        .find(|v| !crate::control::sut::zookeeper::release::is_release(v))
    {
        return Err(format!(
            "zookeeper_versions: \"{v}\" is not a release such as \"3.9.6\" \
             (`fle-chaos test --zookeeper-version list` prints what Debian offers)"
        ));
    }
    let has_bugs = raw.bugs.iter().any(|b| b != NO_BUG);
    if has_bugs && raw.targets.iter().any(|t| t == "zookeeper") {
        return Err("bugs are seeded into fle-node only; drop them or the zookeeper target".into());
    }
    for b in &raw.bugs {
        if b.is_empty()
            || !b
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-,_".contains(c))
        {
            return Err(format!(
                "bugs: \"{b}\" is not a bug name (see fle-node --list-bugs) or \"none\""
            ));
        }
    }
    Ok(())
}

/// Every combination of the lists as a cell (one per ZooKeeper release for that target),
/// refused when two would share a run name.
fn cells_of(raw: &RawMatrix) -> Result<Vec<Cell>, String> {
    let mut cells = Vec::new();
    for &seed in &raw.seeds {
        for target in &raw.targets {
            for workload in &raw.workloads {
                for schedule in &raw.schedules {
                    for &nodes in &raw.nodes {
                        for (bug, &k) in raw
                            .bugs
                            .iter()
                            .flat_map(|b| raw.observers.iter().map(move |k| (b, k)))
                        {
                            let bug = (bug != NO_BUG).then(|| bug.clone());
                            let cell = Cell::new(target, workload, schedule, nodes, seed, bug);
                            let cell = cell.with_observers(k);
                            match target.as_str() {
                                "zookeeper" if !raw.zookeeper_versions.is_empty() => cells.extend(
                                    raw.zookeeper_versions
                                        .iter()
                                        .map(|v| cell.clone().with_zookeeper_version(v)),
                                ),
                                _ => cells.push(cell),
                            }
                        }
                    }
                }
            }
        }
    }
    let mut ids: Vec<&str> = cells.iter().map(|c| c.id.as_str()).collect();
    ids.sort_unstable();
    if let Some(w) = ids.windows(2).find(|w| w[0] == w[1]) {
        return Err(format!(
            "two runs would both be named {}: a list repeats an entry (or two paths share a file name)",
            w[0]
        ));
    }
    Ok(cells)
}

impl Matrix {
    /// Reads the matrix at `path`; the default path falls back to the built-in copy.
    pub fn load(path: &Path) -> Result<Matrix> {
        let (text, origin) = match std::fs::read_to_string(path) {
            Ok(t) => (t, path.display().to_string()),
            Err(_) if path == Path::new(DEFAULT_FILE) => {
                (NIGHTLY.to_string(), format!("(built-in) {DEFAULT_FILE}"))
            }
            Err(e) => {
                return Err(bad_input(format!(
                    "sweep file {}: cannot read it ({e}); give a matrix TOML file such as {DEFAULT_FILE}",
                    path.display()
                )))
            }
        };
        let name = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "sweep".into());
        Matrix::parse(&name, &origin, &text)
            .map_err(|e| bad_input(format!("sweep file {origin}: {e}")))
    }

    /// Parses and validates a matrix; the error is one line naming the key and the fix.
    pub fn parse(name: &str, origin: &str, text: &str) -> Result<Matrix, String> {
        let raw: RawMatrix = toml::from_str(text).map_err(|e| {
            let line = e
                .span()
                .map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1);
            let msg = e.message().trim().to_string();
            match line {
                Some(l) => format!("line {l}: {msg}"),
                None => msg,
            }
        })?;
        let time_limit = parse_duration(&raw.time_limit).map_err(|e| format!("time_limit: {e}"))?;
        if time_limit.is_zero() {
            return Err("time_limit: must be positive, like \"60s\"".into());
        }
        let recovery_timeout = match &raw.recovery_timeout {
            Some(t) => Some(parse_duration(t).map_err(|e| format!("recovery_timeout: {e}"))?),
            None => None,
        };
        check_lists(&raw)?;
        check_zookeeper_and_bugs(&raw)?;
        let cells = cells_of(&raw)?;
        Ok(Matrix {
            name: name.to_string(),
            origin: origin.to_string(),
            time_limit,
            recovery_timeout,
            net: raw.net,
            fail_on_known: raw.fail_on_known,
            zookeeper_config: raw.zookeeper_config,
            sim_runs: raw.sim_runs.unwrap_or(DEFAULT_SIM_RUNS),
            cells,
            text: text.to_string(),
        })
    }

    /// The cells of `shard` (all without one), in expansion order.
    pub fn slice(&self, shard: Option<Shard>) -> Vec<Cell> {
        self.cells
            .iter()
            .enumerate()
            .filter(|(i, _)| shard.is_none_or(|s| s.holds(*i)))
            .map(|(_, c)| c.clone())
            .collect()
    }
}

/// A name part made of test-name characters (`[A-Za-z0-9._-]`): a schedule path's file stem.
pub fn slug(s: &str) -> String {
    let stem = Path::new(s)
        .file_stem()
        .map(|x| x.to_string_lossy().into_owned())
        .unwrap_or_else(|| s.to_string());
    stem.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect()
}

impl Cell {
    pub fn new(
        target: &str,
        workload: &str,
        schedule: &str,
        nodes: usize,
        seed: u64,
        bug: Option<String>,
    ) -> Cell {
        let mut id = format!(
            "{target}-{}-{}-n{nodes}-s{seed}",
            slug(workload),
            slug(schedule)
        );
        if let Some(b) = &bug {
            id.push_str(&format!("-bug-{}", slug(&b.replace(',', "+"))));
        }
        Cell {
            id,
            target: target.into(),
            workload: workload.into(),
            schedule: schedule.into(),
            nodes,
            seed,
            bug,
            observers: 0,
            zookeeper_version: None,
        }
    }

    /// The target as the summary and the trends name it: "fle", "zookeeper 3.9.6".
    pub fn target_label(&self) -> String {
        match &self.zookeeper_version {
            Some(v) => format!("{} {v}", self.target),
            None => self.target.clone(),
        }
    }

    /// This cell under ZooKeeper release `v`, named `zookeeper-3.9.6-...`.
    pub fn with_zookeeper_version(mut self, v: &str) -> Cell {
        self.id = format!("{}-{v}{}", self.target, &self.id[self.target.len()..]);
        self.zookeeper_version = Some(v.to_string());
        self
    }

    /// This cell with `k` observers (the last k nodes), named `...-o{k}` when k > 0.
    pub fn with_observers(mut self, k: usize) -> Cell {
        if k > 0 {
            self.id.push_str(&format!("-o{k}"));
        }
        self.observers = k;
        self
    }

    /// The `fle-chaos test` arguments of this run (without `--out`, `--name` and the sweep's
    /// own pass-through flags).
    /// Whether this cell is a batch of simulated runs (target `sim`).
    pub fn is_sim(&self) -> bool {
        self.target == SIM
    }

    /// The `fle-chaos` subcommand that runs this cell.
    pub fn subcommand(&self) -> &'static str {
        if self.is_sim() {
            "simulate"
        } else {
            "test"
        }
    }

    /// The flags of this cell's `fle-chaos` subcommand (`subcommand`): a simulated batch
    /// takes `sim_runs` runs from the cell's seed, and none of a real run's target, network,
    /// recovery or ZooKeeper flags.
    pub fn args(&self, m: &Matrix) -> Vec<String> {
        let mut a: Vec<String> = if self.is_sim() {
            vec!["--test-count".into(), m.sim_runs.to_string()]
        } else {
            vec!["--target".into(), self.target.clone()]
        };
        a.extend([
            "--workload".into(),
            self.workload.clone(),
            "--nodes".into(),
            self.nodes.to_string(),
            "--seed".into(),
            self.seed.to_string(),
            "--time-limit".into(),
            format!("{}", m.time_limit.as_secs_f64()),
        ]);
        if self.schedule == NO_FAULTS {
            a.extend(["--nemesis".into(), NO_FAULTS.into()]);
        } else if self.schedule != DEFAULT_SCHEDULE {
            // `mixed` is the default as `test` runs it: what a target cannot do is left out
            // and recorded (`left_out`), where an explicit `--nemesis-file mixed` is refused.
            a.extend(["--nemesis-file".into(), self.schedule.clone()]);
        }
        if let Some(b) = &self.bug {
            a.extend(["--bug".into(), b.clone()]);
        }
        if self.observers > 0 {
            a.extend(["--observers".into(), self.observers.to_string()]);
        }
        if self.is_sim() {
            return a;
        }
        if let Some(t) = m.recovery_timeout {
            a.extend(["--recovery-timeout".into(), format!("{}", t.as_secs_f64())]);
        }
        if let Some(n) = &m.net {
            a.extend(["--net".into(), n.clone()]);
        }
        if self.target == "zookeeper" {
            for s in &m.zookeeper_config {
                a.extend(["--zookeeper-config".into(), s.clone()]);
            }
            if let Some(v) = &self.zookeeper_version {
                a.extend(["--zookeeper-version".into(), v.clone()]);
            }
        }
        a
    }
}

/// The folder a matrix file's stem and a time name: `OUT/sweeps/<stem>/<stamp>[-shard-I-of-N]`.
pub fn sweep_folder(out: &Path, m: &Matrix, stamp: &str, shard: Option<Shard>) -> PathBuf {
    let leaf = match shard {
        Some(s) => format!("{stamp}-shard-{}-of-{}", s.index, s.count),
        None => stamp.to_string(),
    };
    out.join("sweeps").join(slug(&m.name)).join(leaf)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMALL: &str = r#"
        time_limit = "10s"
        schedules = ["kill-leader", "none"]
        nodes = [3, 5]
        seeds = [1, 2]
    "#;

    #[test]
    fn expands_every_combination_seed_outermost_with_unique_ids() {
        let m = Matrix::parse("small", "t", SMALL).unwrap();
        let ids: Vec<&str> = m.cells.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(
            ids,
            [
                "fle-writes-kill-leader-n3-s1",
                "fle-writes-kill-leader-n5-s1",
                "fle-writes-none-n3-s1",
                "fle-writes-none-n5-s1",
                "fle-writes-kill-leader-n3-s2",
                "fle-writes-kill-leader-n5-s2",
                "fle-writes-none-n3-s2",
                "fle-writes-none-n5-s2",
            ]
        );
        let args = m.cells[2].args(&m).join(" ");
        assert!(
            args.contains("--nemesis none") && args.contains("--time-limit 10"),
            "{args}"
        );
        let args = m.cells[0].args(&m).join(" ");
        assert!(args.contains("--nemesis-file kill-leader"), "{args}");
    }

    #[test]
    fn shards_are_disjoint_and_cover_the_matrix() {
        let m = Matrix::parse("small", "t", SMALL).unwrap();
        for n in 1..=5 {
            let mut seen: Vec<String> = Vec::new();
            for i in 1..=n {
                let part = m.slice(Some(Shard { index: i, count: n }));
                assert!(part.len() >= m.cells.len() / n, "shard {i}/{n} is short");
                seen.extend(part.into_iter().map(|c| c.id));
            }
            seen.sort();
            let mut all: Vec<String> = m.cells.iter().map(|c| c.id.clone()).collect();
            all.sort();
            assert_eq!(seen, all, "{n} shards");
        }
    }

    #[test]
    fn bad_matrices_name_the_key() {
        for (text, needle) in [
            ("time_limit = \"10s\"\nschedules = []\nnodes = [3]\nseeds = [1]", "schedules is empty"),
            ("time_limit = \"x\"\nschedules = [\"none\"]\nnodes = [3]\nseeds = [1]", "time_limit"),
            ("time_limit = \"1s\"\nschedules = [\"nope\"]\nnodes = [3]\nseeds = [1]", "schedules"),
            ("time_limit = \"1s\"\nschedules = [\"none\"]\nnodes = [0]\nseeds = [1]", "nodes: 0"),
            ("time_limit = \"1s\"\nschedules = [\"none\"]\nnodes = [3]\nseeds = [1]\ncolour = 1", "line 5"),
            ("time_limit = \"1s\"\nschedules = [\"none\", \"none\"]\nnodes = [3]\nseeds = [1]", "named"),
            ("time_limit = \"1s\"\nschedules = [\"none\"]\nnodes = [3]\nseeds = [1]\ntargets = [\"zookeeper\"]\nbugs = [\"quorum-minority\"]", "bugs"),
        ] {
            let e = Matrix::parse("t", "t", text).unwrap_err();
            assert!(e.contains(needle), "{text:?}: {e}");
        }
        assert!("0/2".parse::<Shard>().is_err());
        assert!("3/2".parse::<Shard>().is_err());
        assert!("x".parse::<Shard>().is_err());
        assert_eq!(
            "2/3".parse::<Shard>().unwrap(),
            Shard { index: 2, count: 3 }
        );
    }

    #[test]
    fn the_shipped_nightly_matrix_parses() {
        let m = Matrix::parse("nightly", "built-in", NIGHTLY).unwrap();
        assert!(m.cells.len() >= 10, "{} cells", m.cells.len());
        assert!(
            m.fail_on_known,
            "known findings fail a sweep unless it says otherwise"
        );
        let quiet = format!("{NIGHTLY}\nfail_on_known = false\n");
        assert!(!Matrix::parse("nightly", "t", &quiet).unwrap().fail_on_known);
        let e = Matrix::parse("nightly", "t", &format!("{NIGHTLY}\nfail_on_known = 1\n"));
        let e = e.unwrap_err();
        assert!(
            e.contains("line ") && e.contains("expected a boolean"),
            "{e}"
        );
    }

    #[test]
    fn observers_are_a_dimension_passed_as_test_flags() {
        let text = "time_limit = \"10s\"\nschedules = [\"none\"]\nnodes = [5]\nseeds = [1]\nobservers = [0, 2]\n";
        let m = Matrix::parse("t", "t.toml", text).unwrap();
        let ids: Vec<&str> = m.cells.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(ids, ["fle-writes-none-n5-s1", "fle-writes-none-n5-s1-o2"]);
        let args = m.cells[1].args(&m).join(" ");
        assert!(args.contains("--observers 2"), "{args}");
        assert!(!m.cells[0].args(&m).join(" ").contains("--observers"));
        let bad = "time_limit = \"10s\"\nschedules = [\"none\"]\nnodes = [3, 5]\nseeds = [1]\nobservers = [3]\n";
        let e = Matrix::parse("t", "t.toml", bad).unwrap_err();
        assert!(e.contains("observers: 3") && e.contains("no voter"), "{e}");
    }

    #[test]
    fn zookeeper_settings_go_to_the_zookeeper_runs_only() {
        let text = "time_limit = \"10s\"\ntargets = [\"fle\", \"zookeeper\"]\nschedules = [\"none\"]\nnodes = [3]\nseeds = [1]\nzookeeper_config = [\"snapshot.trust.empty=true\"]\n";
        let m = Matrix::parse("t", "t.toml", text).unwrap();
        let args = |target: &str| {
            let cell = m.cells.iter().find(|c| c.target == target).unwrap();
            cell.args(&m).join(" ")
        };
        assert!(
            args("zookeeper").contains("--zookeeper-config snapshot.trust.empty=true"),
            "{}",
            args("zookeeper")
        );
        assert!(!args("fle").contains("--zookeeper-config"));
        let mixed = text.replace("\"none\"", "\"mixed\"");
        let m = Matrix::parse("t", "t.toml", &mixed).unwrap();
        let args = m.cells[0].args(&m).join(" ");
        assert!(!args.contains("--nemesis"), "mixed is the default: {args}");
        let bad = text.replace("snapshot.trust.empty=true", "dataDir=/x");
        let e = Matrix::parse("t", "t.toml", &bad).unwrap_err();
        assert!(
            e.starts_with("zookeeper_config: ") && e.contains("dataDir"),
            "{e}"
        );
        let no_zk = text.replace("\"fle\", \"zookeeper\"", "\"fle\"");
        let e = Matrix::parse("t", "t.toml", &no_zk).unwrap_err();
        assert!(e.contains("no zookeeper"), "{e}");
    }

    #[test]
    fn zookeeper_versions_multiply_the_zookeeper_cells_and_name_them() {
        let text = "time_limit = \"10s\"\ntargets = [\"fle\", \"zookeeper\"]\nschedules = [\"none\"]\nnodes = [3]\nseeds = [1]\nzookeeper_versions = [\"3.8.0\", \"3.9.6\"]\n";
        let m = Matrix::parse("t", "t.toml", text).unwrap();
        let ids: Vec<&str> = m.cells.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(
            ids,
            vec![
                "fle-writes-none-n3-s1",
                "zookeeper-3.8.0-writes-none-n3-s1",
                "zookeeper-3.9.6-writes-none-n3-s1"
            ]
        );
        let args = m.cells[2].args(&m).join(" ");
        assert!(args.contains("--zookeeper-version 3.9.6"), "{args}");
        assert!(!m.cells[0]
            .args(&m)
            .join(" ")
            .contains("--zookeeper-version"));
        let bad = text.replace("\"3.9.6\"", "\"latest\"");
        let e = Matrix::parse("t", "t.toml", &bad).unwrap_err();
        assert!(e.starts_with("zookeeper_versions: \"latest\""), "{e}");
        let no_zk = text.replace("\"fle\", \"zookeeper\"", "\"fle\"");
        let e = Matrix::parse("t", "t.toml", &no_zk).unwrap_err();
        assert!(e.starts_with("zookeeper_versions is given"), "{e}");
    }

    #[test]
    fn a_sim_cell_is_a_batch_of_simulated_runs_with_simulate_flags() {
        let text = "time_limit = \"30s\"\ntargets = [\"sim\"]\nworkloads = [\"writes\"]\nschedules = [\"mixed\", \"kill-leader\", \"none\"]\nnodes = [5]\nseeds = [1001]\nbugs = [\"quorum-minority\"]\nobservers = [1]\nsim_runs = 500\nnet = \"loopback\"\n";
        let m = Matrix::parse("t", "t.toml", text).unwrap();
        let args: Vec<String> = m.cells.iter().map(|c| c.args(&m).join(" ")).collect();
        assert!(m.cells.iter().all(|c| c.subcommand() == "simulate"));
        assert_eq!(
            args[0],
            "--test-count 500 --workload writes --nodes 5 --seed 1001 --time-limit 30 --bug quorum-minority --observers 1"
        );
        assert!(
            args[1].contains("--nemesis-file kill-leader"),
            "{}",
            args[1]
        );
        assert!(args[2].contains("--nemesis none"), "{}", args[2]);
        assert!(args.iter().all(|a| !a.contains("--net")), "{args:?}");
        let no_runs = text.replace("sim_runs = 500", "sim_runs = 0");
        let e = Matrix::parse("t", "t.toml", &no_runs).unwrap_err();
        assert!(e.starts_with("sim_runs = 0"), "{e}");
        let no_sim = "time_limit = \"30s\"\nschedules = [\"none\"]\nnodes = [3]\nseeds = [1]\nsim_runs = 5\n";
        let e = Matrix::parse("t", "t.toml", no_sim).unwrap_err();
        assert!(e.contains("no sim"), "{e}");
        let m = Matrix::parse("t", "t.toml", &text.replace("sim_runs = 500\n", "")).unwrap();
        assert_eq!(m.sim_runs, DEFAULT_SIM_RUNS);
    }
}
