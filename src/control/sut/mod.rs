//! `Target`: the system under test as the controller, workloads and nemesis see it (Jepsen's
//! `db` + `client` for one node). fle-node (`control::sut::fle_node`) and real Apache ZooKeeper
//! (`control::sut::zookeeper`) implement it; nothing here names either, and everything above this
//! trait goes through it.

pub mod fle_data;
pub mod fle_node;
pub mod zookeeper;

use crate::api::{DataOp, DataRead, DataWritten, LogResponse, NodeStatus};
use crate::control::fault::clock::Clock;
use crate::control::fault::faketime::FaketimeClock;
use crate::control::{Control, Signal};
use anyhow::Result;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;

/// A boxed future, so that `Target` can be used as `Arc<dyn Target>`.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Why a read did not return a value; decides Jepsen's `fail` (certainly not answered:
/// nothing reached the node) vs `info` (unknown: timed out or cut mid-way).
#[derive(Debug, Clone)]
pub enum ReadError {
    Unreachable(String),
    Timeout(String),
}

impl ReadError {
    pub fn message(&self) -> &str {
        match self {
            ReadError::Unreachable(m) | ReadError::Timeout(m) => m,
        }
    }
}

/// The outcome of one write, in Jepsen's terms.
#[derive(Debug, Clone)]
pub enum WriteOutcome {
    /// Committed at this zxid.
    Ok { zxid: u64 },
    /// Certainly not applied (refused, or never reached the node).
    Fail {
        error: String,
        leader_hint: Option<u64>,
    },
    /// May or may not have been applied.
    Info { error: String },
}

/// A server a reconfig lists (`reconfig -add`): the node, as a voter or as an observer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    pub node: String,
    pub observer: bool,
}

/// The outcome of one client operation on the data tree (the `register` workload). In
/// Jepsen's terms `Ok` happened, `Refused` and `Unavailable` are `fail` (certainly not
/// applied) and `Info` is unknown; the two failures differ for the client: a refusal is the
/// server's answer (the key exists, no such key, another version), an unavailable server is
/// one to leave for another (as ZooKeeper's client moves its session).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DataOutcome<T> {
    Ok(T),
    Refused(String),
    Unavailable(String),
    /// Unknown: a timeout, a connection cut mid-way.
    Info(String),
}

impl<T> DataOutcome<T> {
    /// The same outcome with its answer mapped.
    pub fn map_ok<U>(self, f: impl FnOnce(T) -> U) -> DataOutcome<U> {
        match self {
            DataOutcome::Ok(t) => DataOutcome::Ok(f(t)),
            DataOutcome::Refused(e) => DataOutcome::Refused(e),
            DataOutcome::Unavailable(e) => DataOutcome::Unavailable(e),
            DataOutcome::Info(e) => DataOutcome::Info(e),
        }
    }
}

/// One node of the system under test.
pub trait Target: Send + Sync {
    /// "fle" or "zookeeper".
    fn name(&self) -> &'static str;
    /// Node names, "n1".."nN"; the number is the server id.
    fn nodes(&self) -> Vec<String>;
    /// Writes the node's configuration (done once before the first start).
    fn setup(&self, node: &str) -> Result<()>;
    /// Starts the node on its existing data; returns its pid.
    fn start(&self, node: &str) -> Result<u32>;
    /// SIGKILLs the node; returns the pid it had, None when it was not running.
    fn kill(&self, node: &str) -> Result<Option<u32>> {
        self.control().kill(node)
    }
    /// SIGSTOPs the node; returns its pid.
    fn pause(&self, node: &str) -> Result<Option<u32>> {
        self.control().signal(node, Signal::SIGSTOP)
    }
    /// SIGCONTs the node; returns its pid.
    fn resume(&self, node: &str) -> Result<Option<u32>> {
        self.control().signal(node, Signal::SIGCONT)
    }
    /// The power loss of a stopped node: its un-fsynced writes are forgotten (the last torn at
    /// `tear_seed`). Only where its dataDir is on lazyfs (a schedule with `power-loss`).
    fn power_loss(
        &self,
        node: &str,
        _tear_seed: Option<u64>,
    ) -> Result<::fle_node::lazyfs::DropReport> {
        anyhow::bail!("{node}: this target does not put its data on lazyfs (power-loss)")
    }
    /// Damages one of a stopped node's data files as `seed` says (`corrupt`; `file`: a name
    /// from `nemesis::schedule::CORRUPT_FILES`); returns what was done.
    fn corrupt_file(
        &self,
        node: &str,
        file: &str,
        _seed: u64,
    ) -> Result<crate::control::fault::corrupt::Damage> {
        anyhow::bail!("{node}: this target cannot damage its {file}")
    }
    /// Wipes a stopped node's data, as a replaced machine or pod starts with an empty disk:
    /// its data dir holds only its myid, and its config is the first one again (the dynamic
    /// configs it wrote are gone). A reconfig with `replace = true`. No default: a target
    /// that wraps another must pass it on.
    fn wipe(&self, node: &str) -> Result<()>;
    /// Whether the node's process runs (paused counts as running).
    fn is_running(&self, node: &str) -> bool {
        self.control().pid(node).is_some()
    }
    /// Where the nodes run: the signals above go through it by default.
    fn control(&self) -> &dyn Control;
    /// One status read.
    fn status(&self, node: &str) -> BoxFuture<'_, Result<NodeStatus, ReadError>>;
    /// One write of `value` through this node (which should be the leader).
    fn write(&self, node: &str, value: serde_json::Value) -> BoxFuture<'_, WriteOutcome>;
    /// One create / set / compare-and-set of a key through this node (any server: a follower
    /// hands it to its leader, as ZooKeeper's do).
    fn data_write(&self, node: &str, op: DataOp) -> BoxFuture<'_, DataOutcome<DataWritten>>;
    /// One read of a key from this node's own state (possibly stale, as ZooKeeper's); with
    /// `sync`, after a sync on the same session (the node first catches up with its leader).
    fn data_read(&self, node: &str, key: &str, sync: bool) -> BoxFuture<'_, DataOutcome<DataRead>>;
    /// The node's committed log from the start.
    fn read_log(&self, node: &str) -> BoxFuture<'_, Result<LogResponse, ReadError>>;
    /// The node's log files (for the report).
    fn log_paths(&self, node: &str) -> Vec<PathBuf>;
    /// The libfaketime control file of the node, when it runs under libfaketime.
    fn clock_file(&self, node: &str) -> Option<PathBuf>;
    /// How the clock nemesis moves the nodes' clocks (see `clock_of`); None when it cannot.
    fn clock(&self) -> Option<&dyn Clock>;
    /// What the run records about the software under test once it ran (test.json
    /// `settings.software`: e.g. the version each ZooKeeper server reported); None: nothing.
    fn software(&self) -> Option<serde_json::Value> {
        None
    }
    /// One incremental reconfig asked of node `via` (ZooKeeper's `reconfig -add ... -remove
    /// ...`): the nodes `remove` leave the ensemble's config, the `add` members join it (or,
    /// listed already, take their new role) with their own server lines. Blocking (a fault's
    /// apply is synchronous, as `Control` is): the new config's version once committed, or why
    /// not, in Jepsen's terms. No default: a target that wraps another must pass it on.
    fn reconfig(&self, via: &str, add: &[Member], remove: &[String]) -> DataOutcome<u64>;
    /// Where the controller reaches the node's election port (the `frames` fault); None when
    /// it does not know it.
    fn election_addr(&self, _node: &str) -> Option<std::net::SocketAddr> {
        None
    }
}

/// The clock of a cluster: the hosts' own clocks when the control may step them
/// (`--real-clock-skew`), else the libfaketime files the target starts its nodes with.
pub fn clock_of<'a>(
    control: &'a dyn Control,
    faketime: Option<&'a FaketimeClock>,
) -> Option<&'a dyn Clock> {
    control
        .clock()
        .or_else(|| faketime.map(|f| f as &dyn Clock))
}
