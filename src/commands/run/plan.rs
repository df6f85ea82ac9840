//! `fle-chaos test` options, and their validation into a `Plan` before anything is created:
//! every bad flag, file or missing privilege is reported here, as one line, exit 254.

use crate::control::backend::local::NetMode;
use crate::control::backend::os_setup::Needs;
use crate::control::backend::ssh::{NodesArg, SshArgs};
use crate::exit::bad_input;
use crate::nemesis::faults;
use crate::nemesis::steer::Strategy;
use crate::nemesis::{Nemesis, NemesisSettings};
use crate::workload::{self, Workload};
use anyhow::Result;
use clap::{Args, ValueEnum};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Net {
    /// One network namespace per node on a private bridge (root).
    Netns,
    /// All nodes on 127.x.y.z addresses of this host (no root; no partitions).
    Loopback,
}

/// The system under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TargetKind {
    /// fle-node, this crate's FLE + Zab.
    Fle,
    /// Apache ZooKeeper: Debian's `zookeeper` package (installed when missing), or the
    /// distribution folder of --zookeeper-home.
    Zookeeper,
}

impl Plan {
    /// `--zookeeper-config` as key to value (test.json's `settings.zookeeper_config`).
    pub fn zookeeper_settings(&self) -> std::collections::BTreeMap<String, String> {
        self.args
            .zookeeper_config
            .iter()
            .map(|s| (s.key.clone(), s.value.clone()))
            .collect()
    }
}

impl TargetKind {
    /// Its name on the command line and in test.json's `target`.
    pub fn name(self) -> &'static str {
        match self {
            TargetKind::Fle => "fle",
            TargetKind::Zookeeper => "zookeeper",
        }
    }
}

/// `fle-chaos test` options (kept in test.json `settings.args`; `shrink` reads them back).
#[derive(Args, Debug, Clone, Serialize, Deserialize)]
pub struct TestArgs {
    /// Number of local nodes (servers n1..nN; 1 to 31) [default: 5], or with --ssh the remote
    /// hosts, comma-separated (n1 runs on the first): `--ssh --nodes vm1,vm2,vm3`, or
    /// `--ssh --nodes-file FILE`.
    #[arg(long, value_name = "N|HOST,HOST,..")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodes: Option<NodesArg>,
    /// Observers (non-voting servers, ZooKeeper's `:observer`): the last K of --nodes, or
    /// names such as `n6,n7`. Quorums count the voters only.
    #[arg(long, value_name = "K|n6,n7,..")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observers: Option<String>,
    /// Seconds of workload and faults, before the final heal, recovery and final reads.
    #[arg(
        long,
        default_value_t = 60.0,
        value_name = "SECONDS",
        allow_negative_numbers = true
    )]
    pub time_limit: f64,
    /// Workload: a short name (writes: clients write through the leader, every checker
    /// applies; register: clients bound to servers read, sync, set and compare-and-set keys,
    /// checked for linearizability; election: observe only; workloads/NAME.toml) or a path to
    /// a TOML file.
    #[arg(long, default_value = "writes", value_name = "NAME|FILE")]
    pub workload: String,
    /// Faults: `none`, or a comma list of kill,pause,partition,clock,packet,power-loss,
    /// corrupt,frames,reconfig, one fault of each at a time [default: the `mixed` schedule,
    /// steered: every kind but reconfig, aimed faults and compositions; docs/faults.md].
    #[arg(long, value_name = "none|KIND,..")]
    pub nemesis: Option<String>,
    /// Mean seconds between faults [default: 10 with --nemesis KINDS; else the schedule's
    /// own `interval`, which this replaces].
    #[arg(long, value_name = "SECONDS", allow_negative_numbers = true)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nemesis_interval: Option<f64>,
    /// Order of the planned faults: `steered` brings forward those aimed at situations the
    /// run has not met yet (docs/faults.md, Steering); `random` keeps the seeded order.
    #[arg(long, value_enum, default_value_t = Strategy::Steered, value_name = "STRATEGY")]
    pub nemesis_strategy: Strategy,
    /// Situations met before this run (a JSON list; a sweep writes one per run from
    /// OUT/coverage.json and its finished runs): steering prefers faults aimed at what
    /// neither they nor this run met (docs/coverage.md).
    #[arg(long, value_name = "FILE")]
    pub met_before: Option<PathBuf>,
    /// A fault schedule: a file, or the name of a built-in one (`mixed`, `kill-leader`, ...:
    /// nemesis/NAME.toml); takes precedence over --nemesis.
    #[arg(long, value_name = "NAME|FILE")]
    pub nemesis_file: Option<PathBuf>,
    /// Seed of every random choice (same seed, same schedule) [default: random, printed].
    #[arg(long)]
    pub seed: Option<u64>,
    /// Concurrent clients of the writes workload [default: the workload file's `clients`].
    #[arg(long, value_name = "N")]
    pub concurrency: Option<usize>,
    /// Writes per second, all clients together [default: the workload file's `rate`].
    #[arg(long, value_name = "PER_SECOND", allow_negative_numbers = true)]
    pub rate: Option<f64>,
    /// Where runs are stored: OUT/<test-name>/<timestamp>/, OUT/latest links the newest.
    #[arg(long, default_value = "reports", value_name = "DIR")]
    pub out: PathBuf,
    /// Run the test this many times (seeds SEED, SEED+1, ...); the worst verdict is the exit code.
    #[arg(long, default_value_t = 1, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub test_count: u32,
    /// Keep the cluster running after the run (no teardown); `fle-chaos clean` removes it.
    #[arg(long)]
    pub leave_running: bool,
    /// How nodes are networked.
    #[arg(long, value_enum, default_value_t = Net::Netns)]
    pub net: Net,
    /// What runs on the nodes.
    #[arg(long, value_enum, default_value_t = TargetKind::Fle)]
    pub target: TargetKind,
    /// With --target zookeeper: a ZooKeeper distribution folder to run instead of Debian's
    /// package (Apache's layout: bin/ lib/ conf/, 3.5 to 3.9). With --ssh it is used where it
    /// is on each host, else uploaded from this machine.
    #[arg(long, value_name = "DIR")]
    pub zookeeper_home: Option<PathBuf>,
    /// With --target zookeeper: the release to run, fetched from Debian's package archive
    /// into a cache folder on first use (3.8.0, 3.9.3, 3.9.6, ...; `list` prints what it
    /// offers); every server must report it. With --zookeeper-home: the release DIR must report.
    #[arg(long, value_name = "VERSION|list")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zookeeper_version: Option<String>,
    /// With --target zookeeper: a line added to every server's zoo.cfg (repeatable). Keys
    /// ZooKeeper does not know become system properties `zookeeper.KEY`, e.g.
    /// `snapshotSizeFactor=-1` (no on-disk txn-log sync, ZOOKEEPER-2846's workaround) or
    /// `fastleader.maxNotificationInterval=5000`. Recorded in test.json.
    #[arg(long = "zookeeper-config", value_name = "KEY=VALUE")]
    #[serde(default)]
    pub zookeeper_config: Vec<crate::control::sut::zookeeper::config::Setting>,
    /// The fle-node executable [default: fle-node next to fle-chaos].
    #[arg(long, value_name = "FILE")]
    pub node_binary: Option<PathBuf>,
    /// The test's name (its folder under --out) [default: the workload's name].
    #[arg(long)]
    pub name: Option<String>,
    /// ZooKeeper tickTime in milliseconds.
    #[arg(long, default_value_t = 200, value_name = "MS")]
    pub tick_ms: u64,
    /// ZooKeeper initLimit, in ticks.
    #[arg(long, default_value_t = 10, value_name = "TICKS")]
    pub init_limit: u32,
    /// ZooKeeper syncLimit, in ticks.
    #[arg(long, default_value_t = 5, value_name = "TICKS")]
    pub sync_limit: u32,
    /// Seconds to wait, after the final heal, for the cluster to settle: every node that is up
    /// following one quorum-backed leader in broadcast and caught up to its commits.
    #[arg(
        long,
        default_value_t = 30.0,
        value_name = "SECONDS",
        allow_negative_numbers = true
    )]
    pub recovery_timeout: f64,
    /// Start nodes under libfaketime even without clock faults.
    #[arg(long)]
    pub faketime: bool,
    /// Pass `--bug NAME[,NAME...]` to fle-node: seeded bugs the checkers must catch (names:
    /// `fle-node --list-bugs`; docs/bugs.md).
    #[arg(long, value_name = "NAME[,NAME...]")]
    pub bug: Option<String>,
    /// Pass `--finalize-wait-ms N` to fle-node.
    #[arg(long, value_name = "MS")]
    pub finalize_wait_ms: Option<u64>,
    #[command(flatten)]
    pub ssh: SshArgs,
    /// Run the test of RUN_DIR again: every setting of its test.json and the faults it
    /// applied (its schedule.toml), at the same times on the same nodes. Goes with --out,
    /// --name, --test-count, --node-binary, --leave-running and --nemesis-file (another timed
    /// schedule, e.g. shrink's minimal.toml); the other settings are the run's.
    #[arg(long, value_name = "RUN_DIR", conflicts_with_all = super::replay::FIXED_BY_THE_RUN)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay: Option<PathBuf>,
}

/// Local nodes when `--nodes` is not given.
pub const DEFAULT_NODES: usize = 5;

impl TestArgs {
    /// `fle-chaos test`'s arguments parsed from words (a sweep's cell, a simulated failure's
    /// real replay); the error is clap's first line, without its "error: ".
    pub fn from_words(words: &[String]) -> Result<TestArgs, String> {
        #[derive(clap::Parser)]
        struct Test {
            #[command(flatten)]
            args: TestArgs,
        }
        let argv = std::iter::once("test".to_string()).chain(words.iter().cloned());
        <Test as clap::Parser>::try_parse_from(argv)
            .map(|t| t.args)
            .map_err(|e| first_line(&e))
    }
}

/// A clap error's first line, without its "error: ".
pub fn first_line(e: &clap::Error) -> String {
    let text = e.render().to_string();
    let first = text.lines().next().unwrap_or_default();
    first.strip_prefix("error: ").unwrap_or(first).to_string()
}

/// Validated settings of a run.
#[derive(Clone)]
pub struct Plan {
    pub args: TestArgs,
    pub name: String,
    pub nodes: Vec<String>,
    /// The nodes that are observers (`--observers`), in node order.
    pub observers: Vec<String>,
    pub workload: Workload,
    pub nemesis_settings: NemesisSettings,
    pub nemesis: Arc<dyn Nemesis>,
    /// The fault schedule the nemesis runs (its seeded plan is sized per run).
    pub schedule: crate::nemesis::schedule::Schedule,
    pub mode: NetMode,
    pub binary: PathBuf,
    /// The ZooKeeper distribution folder the servers run (`--zookeeper-home`, or the release of
    /// `--zookeeper-version`); None: Debian's package.
    pub zookeeper_home: Option<PathBuf>,
    pub faketime: bool,
    /// The schedule asks libfaketime to move monotonic clocks too.
    pub fake_monotonic: bool,
    pub seed: u64,
    pub time_limit: Duration,
    pub recovery_timeout: Duration,
    /// With --ssh: the hosts, one per node, in node order.
    pub hosts: Option<Vec<String>>,
}

/// `--observers K` (the last K nodes) or `--observers n6,n7`: the observers in node order, at
/// least one voter left.
pub(crate) fn observers_of(spec: Option<&str>, nodes: &[String]) -> Result<Vec<String>> {
    let Some(spec) = spec.map(str::trim) else {
        return Ok(Vec::new());
    };
    let chosen: Vec<String> = match spec.parse::<usize>() {
        Ok(k) => nodes[nodes.len().saturating_sub(k)..].to_vec(),
        Err(_) => {
            let named: Vec<&str> = spec.split(',').map(str::trim).collect();
            if let Some(bad) = named.iter().find(|n| !nodes.iter().any(|x| x == *n)) {
                return Err(bad_input(format!(
                    "--observers {spec}: {bad:?} is not one of the nodes n1..n{} (name nodes of --nodes, or give a count)",
                    nodes.len()
                )));
            }
            let chosen = nodes.iter().filter(|n| named.contains(&n.as_str()));
            chosen.cloned().collect()
        }
    };
    if chosen.len() >= nodes.len() {
        return Err(bad_input(format!(
            "--observers {spec}: leaves no voter among the {} nodes (keep at least one; a quorum counts voters only)",
            nodes.len()
        )));
    }
    Ok(chosen)
}

pub fn positive_seconds(flag: &str, v: f64) -> Result<Duration> {
    if v.is_finite() && v > 0.0 && v < 1e7 {
        Ok(Duration::from_secs_f64(v))
    } else {
        Err(bad_input(format!(
            "{flag} {v}: must be a positive number of seconds"
        )))
    }
}

/// `cargo run -- test` builds only fle-chaos: when cargo started us (it sets `CARGO` and
/// `CARGO_MANIFEST_DIR`) and fle-node is missing beside us, build it the same way, saying so.
fn build_node_with_cargo(expected: &std::path::Path) -> bool {
    let (Some(cargo), Some(manifest_dir)) = (
        std::env::var_os("CARGO"),
        std::env::var_os("CARGO_MANIFEST_DIR"),
    ) else {
        return false;
    };
    let release = expected
        .parent()
        .and_then(|d| d.file_name())
        .is_some_and(|d| d == "release");
    let mut cmd = std::process::Command::new(cargo);
    cmd.args([
        "build",
        "-p",
        "fle-node",
        "--bin",
        "fle-node",
        "--manifest-path",
    ])
    .arg(std::path::Path::new(&manifest_dir).join("Cargo.toml"));
    if release {
        cmd.arg("--release");
    }
    eprintln!(
        "fle-chaos: fle-node is not built yet; building it: cargo build{} -p fle-node",
        if release { " --release" } else { "" }
    );
    cmd.status().is_ok_and(|s| s.success()) && expected.is_file()
}

/// What `--real-clock-skew` cannot do: clock_settime steps a clock, it cannot change its rate,
/// and it moves only the wall clock.
fn real_clock_schedule_ok(schedule: &crate::nemesis::schedule::Schedule) -> Result<()> {
    use crate::nemesis::schedule::{ClockMode, FaultKind};
    let rate = schedule
        .faults
        .iter()
        .any(|f| f.kind == FaultKind::Clock && matches!(f.clock, Some(ClockMode::Rate { .. })));
    if rate {
        return Err(bad_input(
            "--real-clock-skew with a clock `rate` fault: clock_settime can step a host's clock \
             but not change its speed; use bump or strobe, or drop --real-clock-skew (libfaketime)",
        ));
    }
    if schedule.fake_monotonic {
        return Err(bad_input(
            "--real-clock-skew with fake_monotonic = true: a host's monotonic clock cannot be \
             stepped; drop fake_monotonic, or drop --real-clock-skew (libfaketime)",
        ));
    }
    Ok(())
}

/// The settings the ZooKeeper servers get (`config::with_defaults`: the tool's defaults, the
/// schedule's, `--zookeeper-config`), and a note for each default kept. They are written back
/// into the run's arguments, so test.json and a replay hold every setting the servers ran with.
fn zookeeper_config(
    schedule: &crate::nemesis::schedule::Schedule,
    given: &[crate::control::sut::zookeeper::config::Setting],
) -> Result<(
    Vec<crate::control::sut::zookeeper::config::Setting>,
    Vec<String>,
)> {
    use crate::control::sut::zookeeper::config;
    let from_schedule = (schedule.zookeeper_config.iter())
        .map(|s| s.parse::<config::Setting>())
        .collect::<Result<Vec<_>, String>>()
        .map_err(|e| bad_input(format!("{}: zookeeper_config: {e}", schedule.origin)))?;
    Ok(config::with_defaults(&from_schedule, given))
}

/// The distribution folder the servers run: `--zookeeper-home` (checked to report
/// `--zookeeper-version` when both are given), the release of `--zookeeper-version` (fetched
/// into the cache on first use), or None for Debian's package. Bad input (254) for a version
/// the archive does not offer, an archive out of reach, or a folder reporting another version.
fn zookeeper_home(args: &TestArgs, over_ssh: bool) -> Result<Option<PathBuf>> {
    use crate::control::sut::zookeeper::{launch::JvmOptions, os_setup, release};
    let Some(version) = &args.zookeeper_version else {
        return Ok(args.zookeeper_home.clone());
    };
    let java = JvmOptions::default().java;
    let mut say = |m: &str| eprintln!("fle-chaos: {m}");
    match &args.zookeeper_home {
        // On the hosts only: the servers' reported versions are checked when they start.
        Some(home) if over_ssh && !home.exists() => Ok(Some(home.clone())),
        Some(home) => {
            os_setup::ensure_java(&java, &mut say)?;
            release::verify(home, version, &java)?;
            Ok(Some(home.clone()))
        }
        None => {
            os_setup::ensure_java(&java, &mut say)?;
            Ok(Some(release::home_of(version, &java, &mut say)?))
        }
    }
}

/// `--zookeeper-home`, `--zookeeper-version` and `--zookeeper-config` belong to `--target
/// zookeeper`; a home given is checked here unless it is on the SSH hosts only (checked there
/// at setup).
fn check_zookeeper_flags(args: &TestArgs, over_ssh: bool) -> Result<()> {
    if let (Some(v), true) = (
        &args.zookeeper_version,
        args.target != TargetKind::Zookeeper,
    ) {
        return Err(bad_input(format!(
            "--zookeeper-version {v} without --target zookeeper: add --target zookeeper, or \
             drop --zookeeper-version"
        )));
    }
    if let Some(home) = &args.zookeeper_home {
        if args.target != TargetKind::Zookeeper {
            return Err(bad_input(
                "--zookeeper-home without --target zookeeper: add --target zookeeper, or \
                 drop --zookeeper-home",
            ));
        }
        // Over SSH the folder may be on the hosts only: checked there at setup.
        if !over_ssh || home.exists() {
            crate::control::sut::zookeeper::install::check_home(home)?;
        }
    }
    if let Some(s) = args.zookeeper_config.first() {
        if args.target != TargetKind::Zookeeper {
            return Err(bad_input(format!(
                "--zookeeper-config {s} without --target zookeeper: add --target zookeeper, \
                 or drop --zookeeper-config"
            )));
        }
    }
    Ok(())
}

/// The workload file with `--concurrency` and `--rate` applied.
fn workload_of(args: &TestArgs) -> Result<workload::Workload> {
    let mut workload = workload::load(&args.workload)?;
    if let Some(c) = args.concurrency {
        if c == 0 || c > 1000 {
            return Err(bad_input(format!(
                "--concurrency {c}: must be between 1 and 1000"
            )));
        }
        workload.clients = c;
    }
    if let Some(r) = args.rate {
        if !(r.is_finite() && r > 0.0 && r <= 100_000.0) {
            return Err(bad_input(format!(
                "--rate {r}: must be a positive number of writes per second"
            )));
        }
        workload.rate = r;
    }
    Ok(workload)
}

/// What this run's control and target can do, for choosing and checking the schedule.
fn abilities_of(args: &TestArgs, mode: NetMode, over_ssh: bool) -> crate::nemesis::Abilities {
    // Power loss mounts fle-node's lazyfs at every dataDir (fle-node's or ZooKeeper's);
    // locally it needs FUSE and root (over SSH each host's FUSE is probed at preflight:
    // `leave_out_power_loss`).
    let no_power_loss = if !over_ssh {
        crate::nemesis::local_power_loss_blocker()
    } else {
        None
    };
    crate::nemesis::Abilities {
        partitions: mode == NetMode::Netns,
        no_power_loss,
        // ZooKeeper's clocks move only for real (--real-clock-skew on throwaway VMs).
        no_clock: (args.target == TargetKind::Zookeeper && !args.ssh.real_clock_skew).then(|| {
            "--target zookeeper without --real-clock-skew (libfaketime stalls the JVM: \
                 every clock read takes its locks, the servers miss their sync deadlines and \
                 never serve; docs/zookeeper.md)"
                .into()
        }),
        no_local_packets: over_ssh.then(|| {
            "--ssh (the packet engine and qdiscs run in local namespaces; over SSH only \
             loss, an iptables rule, runs)"
                .into()
        }),
        no_snapshot_file: (args.target != TargetKind::Zookeeper)
            .then(|| "fle-node keeps no snapshot file (its txnlog is its whole state)".into()),
    }
}

/// A run's name becomes a folder name: letters, digits, '.', '_' and '-', not hidden.
fn check_name(name: &str) -> Result<()> {
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
        || name.starts_with('.')
    {
        return Err(bad_input(format!(
            "--name {name:?}: use letters, digits, '.', '_' and '-' only"
        )));
    }
    Ok(())
}

/// The fle-node binary (`--node-binary`, else the one built beside fle-chaos, built with cargo
/// when missing): the system under test, and for ZooKeeper the lazyfs its dataDirs
/// live on when `power_loss` (otherwise a ZooKeeper run does not need it).
fn node_binary(args: &TestArgs, power_loss: bool) -> Result<PathBuf> {
    let binary = match &args.node_binary {
        Some(b) => b.clone(),
        None => crate::control::sut::fle_node::built_binary(),
    };
    let why = match args.target {
        TargetKind::Fle => "",
        TargetKind::Zookeeper if power_loss => {
            " (--target zookeeper's power-loss faults put its dataDir on fle-node's lazyfs)"
        }
        TargetKind::Zookeeper => return Ok(binary),
    };
    if !binary.is_file() && (args.node_binary.is_some() || !build_node_with_cargo(&binary)) {
        return Err(bad_input(format!(
            "fle-node not found at {}{why}: build it (cargo build --release -p fle-node) or pass --node-binary FILE",
            binary.display()
        )));
    }
    Ok(binary)
}

/// How many nodes the run has (one per `--hosts` host, else `--nodes`), refused outside 1-31.
fn node_count(hosts: Option<&[String]>, args: &TestArgs) -> Result<usize> {
    let count = match (hosts, &args.nodes) {
        (Some(h), _) => h.len(),
        (None, Some(n)) => n.count(),
        (None, None) => DEFAULT_NODES,
    };
    if !(1..=31).contains(&count) {
        return Err(bad_input(format!(
            "--nodes {count}: between 1 and 31 nodes"
        )));
    }
    Ok(count)
}

/// `--time-limit`, `--nemesis-interval` and `--recovery-timeout` as durations, and the
/// ensemble's timing flags, each refused when not positive.
fn timing_of(args: &TestArgs) -> Result<(Duration, Option<Duration>, Duration)> {
    let time_limit = positive_seconds("--time-limit", args.time_limit)?;
    let interval = args
        .nemesis_interval
        .map(|s| positive_seconds("--nemesis-interval", s))
        .transpose()?;
    let recovery_timeout = positive_seconds("--recovery-timeout", args.recovery_timeout)?;
    if args.tick_ms == 0 || args.init_limit == 0 || args.sync_limit == 0 {
        return Err(bad_input(
            "--tick-ms, --init-limit and --sync-limit must be positive",
        ));
    }
    Ok((time_limit, interval, recovery_timeout))
}

/// What the nemesis is told of the run: its observers, the schedule's kinds and interval, the
/// kinds left out, the steering strategy and the situations met before (`--met-before`).
fn nemesis_settings_of(
    args: &TestArgs,
    schedule: &crate::nemesis::schedule::Schedule,
    observers: &[String],
    left_out: Vec<String>,
    workload: &Workload,
) -> Result<NemesisSettings> {
    Ok(NemesisSettings {
        observers: observers.to_vec(),
        kinds: schedule.kinds(),
        interval: schedule.interval,
        file: args.nemesis_file.clone(),
        left_out,
        steering: crate::nemesis::env::Steering {
            strategy: args.nemesis_strategy,
            writes: workload.kind.writes(),
            met_before: match &args.met_before {
                Some(f) => crate::history::situation::read_met_before(f).map_err(bad_input)?,
                None => Default::default(),
            },
        },
    })
}

impl Plan {
    /// The validated plan of `fle-chaos test`: every flag checked (one line naming it and the
    /// fix), the schedule chosen for what this run can do, the binary found.
    pub fn from_args(args: TestArgs) -> Result<Plan> {
        let mode = match args.net {
            Net::Netns => NetMode::Netns,
            Net::Loopback => NetMode::Loopback,
        };
        let hosts = args.ssh.hosts(args.nodes.as_ref())?;
        check_zookeeper_flags(&args, hosts.is_some())?;
        let count = node_count(hosts.as_deref(), &args)?;
        let (time_limit, interval, recovery_timeout) = timing_of(&args)?;
        let workload = workload_of(&args)?;
        let abilities = abilities_of(&args, mode, hosts.is_some());
        let crate::nemesis::Chosen {
            mut schedule,
            mut left_out,
        } = crate::nemesis::schedule_from_flags(
            args.nemesis.as_deref(),
            args.nemesis_file.as_deref(),
            interval,
            &abilities,
        )?;
        let default_schedule = args.nemesis.is_none() && args.nemesis_file.is_none();
        let mut args = args;
        let mut config_notes = Vec::new();
        if args.target == TargetKind::Zookeeper {
            (args.zookeeper_config, config_notes) =
                zookeeper_config(&schedule, &args.zookeeper_config)?;
        }
        if args.ssh.real_clock_skew {
            real_clock_schedule_ok(&schedule)?;
        }
        let nodes: Vec<String> = (1..=count).map(|i| format!("n{i}")).collect();
        let observers = observers_of(args.observers.as_deref(), &nodes)?;
        if default_schedule {
            left_out.extend(super::preflight::fit_default(&mut schedule, time_limit));
        }
        super::preflight::check_schedule(&schedule, time_limit, &nodes)?;
        super::preflight::check_reconfigs(&schedule, &nodes, &observers)?;
        let fake_monotonic = schedule.fake_monotonic;
        let nemesis_settings =
            nemesis_settings_of(&args, &schedule, &observers, left_out, &workload)?;
        let nemesis = crate::nemesis::build(schedule.clone());
        let name = args.name.clone().unwrap_or_else(|| workload.name.clone());
        check_name(&name)?;
        let fuse = (schedule.kinds().iter()).any(|k| faults::of(*k).needs().fuse);
        let binary = node_binary(&args, fuse)?;
        let zookeeper_home = zookeeper_home(&args, hosts.is_some())?;
        if let (TargetKind::Fle, Some(bug)) = (args.target, &args.bug) {
            super::preflight::check_bugs(&binary, bug)?;
        }
        if mode == NetMode::Netns && hosts.is_none() && !crate::control::is_root() {
            return Err(bad_input(
                "--net netns (the default) needs root to create network namespaces, veth links and \
                 a bridge: run as root, or use --net loopback (no partition faults then)",
            ));
        }
        // Said once the input is known good: a refused run prints its one line only.
        for note in config_notes {
            eprintln!("fle-chaos: --target zookeeper: {note}");
        }
        // With --real-clock-skew the hosts' clocks move, not libfaketime's.
        let moves_clocks = (nemesis_settings.kinds.iter()).any(|k| faults::of(*k).needs().clock);
        let faketime = args.faketime || (!args.ssh.real_clock_skew && moves_clocks);
        Ok(Plan {
            name,
            nodes,
            observers,
            hosts,
            workload,
            nemesis_settings,
            nemesis,
            schedule,
            mode,
            binary,
            zookeeper_home,
            faketime,
            fake_monotonic,
            seed: args.seed.unwrap_or_else(rand::random),
            time_limit,
            recovery_timeout,
            args,
        })
    }

    /// Whether the schedule is the default one (no --nemesis, no --nemesis-file).
    pub fn default_schedule(&self) -> bool {
        self.args.nemesis.is_none() && self.args.nemesis_file.is_none()
    }

    /// Whether the schedule has faults that need FUSE (power loss: every dataDir then is a
    /// lazyfs mount).
    pub fn power_loss(&self) -> bool {
        (self.nemesis_settings.kinds.iter()).any(|k| faults::of(*k).needs().fuse)
    }

    /// Whether the schedule changes the membership (`reconfig` faults).
    pub fn reconfig(&self) -> bool {
        (self.nemesis_settings.kinds).contains(&crate::history::FaultKind::Reconfig)
    }

    /// The schedule's fault kinds by name (test.json, the replay command).
    pub fn kind_names(&self) -> Vec<String> {
        self.nemesis_settings
            .kinds
            .iter()
            .map(|k| k.name().to_string())
            .collect()
    }

    /// What the run needs from the OS where its nodes run (this machine, or each SSH host):
    /// namespaces for local netns nodes, iptables for partitions and packet faults (NFQUEUE
    /// rules), libfaketime for faked clocks.
    pub fn needs(&self) -> Needs {
        let kinds = &self.nemesis_settings.kinds;
        Needs {
            netns: self.hosts.is_none() && self.mode == NetMode::Netns,
            iptables: kinds.iter().any(|k| faults::of(*k).needs().net),
            faketime: self.faketime,
        }
    }

    /// Drops the power-loss faults of the default schedule (hosts without FUSE), recording why.
    pub fn leave_out_power_loss(&mut self, why: String) {
        let only = crate::nemesis::Abilities {
            no_power_loss: Some(why),
            ..crate::nemesis::Abilities::all()
        };
        let lines = crate::nemesis::leave_out_unable(&mut self.schedule, &only);
        self.nemesis_settings.kinds = self.schedule.kinds();
        self.nemesis_settings.left_out.extend(lines);
        self.nemesis = crate::nemesis::build(self.schedule.clone());
    }

    /// How many faults the seeded plan of the run with `seed` holds (recorded in test.json, so
    /// that a run that injected none of them is not judged valid).
    pub fn faults_planned(&self, seed: u64) -> usize {
        use crate::nemesis::plan::{fault_window, plan};
        // A composed fault's parts are injected (and recorded) one by one.
        plan(&self.schedule, seed, fault_window(self.time_limit))
            .iter()
            .map(|f| 1 + f.parts.len())
            .sum()
    }
}
