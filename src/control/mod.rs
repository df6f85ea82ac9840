//! Where nodes run and how the controller drives them (Jepsen's `control` and `db`).
//!
//! Two seams:
//! - `Control`: *where* a node runs. A small interface: run a command in a node's context,
//!   spawn and track a daemon with its pid, signal it, write a file for a node, the node's
//!   address. `local::LocalCluster` implements it with network namespaces (or plain loopback
//!   addresses); `ssh::SshCluster` implements it on remote hosts over SSH.
//! - `target::Target`: *what* runs on a node (start, kill, pause, resume, status, write, read
//!   log, logs). `fle_node::FleNode` and `zookeeper::ZooKeeper` (real Apache ZooKeeper)
//!   implement it. Nothing above `Target` knows which one runs.
//!
//! Every resource a run creates is recorded in `registry` before it exists, and `teardown`
//! removes exactly those, on every exit path and from `clean`.

pub mod clean;
pub mod faketime;
pub mod fle_node;
pub mod host_clock;
pub mod local;
pub mod netns;
pub mod os_setup;
pub mod registry;
pub mod ssh;
pub mod target;
pub mod teardown;
pub mod zookeeper;

use anyhow::Result;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::Output;

pub use nix::sys::signal::Signal;

/// A long-running process to start for a node.
#[derive(Debug, Clone)]
pub struct DaemonSpec {
    pub program: PathBuf,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    /// stdout and stderr are appended here (restarts append to the same file).
    pub log: PathBuf,
}

/// Where the nodes of a cluster run.
pub trait Control: Send + Sync {
    /// "netns", "loopback" or "ssh".
    fn kind(&self) -> &'static str;
    /// Node names, "n1".."nN".
    fn nodes(&self) -> &[String];
    /// The address the node listens on and its peers and the controller reach it at.
    fn node_host(&self, node: &str) -> Result<IpAddr>;
    /// A port the node may listen on: `preferred` where the node has its own network stack,
    /// a currently free port where nodes share one.
    fn node_port(&self, node: &str, preferred: u16) -> Result<u16>;
    /// The controller's own address as nodes see it, when it has one (the netns bridge).
    fn controller_addr(&self) -> Option<IpAddr>;
    /// The node's folder (config, data, logs).
    fn node_dir(&self, node: &str) -> Result<PathBuf>;
    /// Runs a command in the node's context (its namespace) and waits for it.
    fn exec(&self, node: &str, program: &str, args: &[&str]) -> Result<Output>;
    /// Writes a file for the node (path relative to the node's folder); returns its full path.
    fn write_file(&self, node: &str, relative: &Path, contents: &[u8]) -> Result<PathBuf>;
    /// Reads a file of the node (path relative to the node's folder), wherever the node runs.
    fn read_file(&self, node: &str, relative: &Path) -> Result<Vec<u8>>;
    /// Starts the node's daemon (one per node) and returns its pid.
    fn spawn(&self, node: &str, spec: &DaemonSpec) -> Result<u32>;
    /// The daemon's pid while it runs (stopped counts as running).
    fn pid(&self, node: &str) -> Option<u32>;
    /// How the node's daemon ended, once it has (None while it runs, or where the backend
    /// cannot tell): the node watch records it in a `node-exit` event.
    fn exit_status(&self, node: &str) -> Option<std::process::ExitStatus> {
        let _ = node;
        None
    }
    /// Sends `signal` to the node's daemon; returns its pid, or None when none runs.
    fn signal(&self, node: &str, signal: Signal) -> Result<Option<u32>>;
    /// Whether the node's daemon is stopped (SIGSTOP); false when none runs. This default reads
    /// this machine's /proc, right for nodes that run here.
    fn is_stopped(&self, node: &str) -> Result<bool> {
        Ok(self.pid(node).is_some_and(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|s| {
                    s.rsplit_once(')')
                        .map(|(_, rest)| rest.trim_start().starts_with('T'))
                })
                .unwrap_or(false)
        }))
    }
    /// SIGKILLs the node's daemon and waits until it is gone; returns its pid if one ran.
    fn kill(&self, node: &str) -> Result<Option<u32>>;
    /// The namespaces of a local namespace cluster (for the partition nemesis).
    fn netns(&self) -> Option<&netns::NetnsCluster>;
    /// The run's resource registry (the nemesis records the chains and rules it creates).
    fn registry(&self) -> &registry::Registry;
    /// Removes everything the cluster created. Idempotent.
    fn teardown(&self) -> teardown::TeardownReport;
    /// Whether clock faults step the hosts' real system clocks (`--real-clock-skew` over SSH)
    /// instead of a libfaketime control file per node.
    fn real_clock(&self) -> bool {
        false
    }
    /// Steps the system clock of `node`'s host to `offset_ms` away from the true time (see
    /// `host_clock`); returns the step made, in ms.
    fn set_real_clock(&self, node: &str, offset_ms: i64) -> Result<i64> {
        let _ = offset_ms;
        anyhow::bail!(
            "{node}: this cluster does not step real clocks (only --ssh --real-clock-skew does)"
        )
    }
}

/// Whether the controller runs as root (namespaces, iptables, apt-get need it).
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}
