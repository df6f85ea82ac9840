//! Where nodes run and how the controller drives them (Jepsen's `control`, `net` and `db`).
//!
//! A backend is described by the capabilities it has, never by its name, so nothing above this
//! module asks which backend runs (Jepsen's `Net` protocol is the model):
//! - `Control`: process control, which every backend has. Run a command in a node's context,
//!   spawn and track a daemon with its pid, signal/kill it, read and write a node's files, the
//!   node's address and port, the run's registry and the teardown. `local::LocalCluster`
//!   (network namespaces, or plain loopback addresses) and `ssh::SshCluster` (one VM per node)
//!   implement it.
//! - `Net` (`Control::net`): cutting and healing the links between nodes. Present where every
//!   node has a network stack of its own (namespaces, SSH hosts), absent on loopback, where
//!   nodes share one stack and a cut of one would cut all; the partition nemesis asks for it.
//!   Both backends implement it with the same iptables chain (`iptables`), recorded in the
//!   registry before it is created, so teardown and `clean` remove it.
//! - `Clock` (`clock`): moving a node's clock. The control offers the hosts' real clocks
//!   (`Control::clock`, only `--ssh --real-clock-skew`); otherwise the target offers the
//!   libfaketime files it starts its nodes with (`Target::clock`, `faketime::FaketimeClock`).
//! - `sut::Target`: *what* runs on a node (setup, start, kill, pause, resume, status, write,
//!   read log, logs). `fle_node::FleNode` and `zookeeper::ZooKeeper` implement it; nothing above
//!   `Target` knows which one runs.
//!
//! Why three traits and not one: the old single trait answered "can I partition?" with
//! `kind() != "loopback"`, and "how do I move a clock?" with `real_clock()` and a backend's
//! namespace handle, so every new backend meant editing the nemesis. A capability that is an
//! `Option<&dyn Trait>` is checked by the compiler and by the one place that needs it.
//!
//! Blocking: `Control` is synchronous (std::process, `ip netns exec`, SSH round trips that wait
//! on a channel), and it is called from async tasks (nemesis, final phase), from `Drop` and from
//! plain threads (`clean`, tests). The implementations wrap their blocking work in `blocking`,
//! which on a multi-threaded tokio worker is `block_in_place`: the runtime moves the worker's
//! other tasks (observers, clients) to another thread while the call waits. `block_in_place`
//! rather than `spawn_blocking`, because a caller's future cannot be dropped half-way through
//! a call: a signal that cancels the run then never leaves a resource recorded-but-still-being-
//! created behind the teardown that already read the registry; and callers keep borrowing
//! (no `'static` clones). An async seam would have rippled through every target and test for
//! the same effect.
//!
//! Every resource a run creates is recorded in `registry` before it exists, and `teardown`
//! removes exactly those, on every exit path and from `clean`.

pub mod backend;
pub mod fault;
/// The host-side clock stepping lives in the node crate (it runs in `fle-node clock-offset`).
pub use ::fle_node::host_clock;
pub mod sut;

use anyhow::Result;
use backend::{registry, teardown};
use fault::{clock, iptables};
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

/// Where the nodes of a cluster run: process control, which every backend has.
pub trait Control: Send + Sync {
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
    /// Runs a command in the node's context (its namespace, its host) and waits for it.
    fn exec(&self, node: &str, program: &str, args: &[&str]) -> Result<Output>;
    /// Runs a command on the node's machine in that machine's own namespaces (not the node's
    /// network or mount namespace), so a mount it makes is seen by every later start of the node.
    fn exec_host(&self, node: &str, program: &str, args: &[&str]) -> Result<Output> {
        self.exec(node, program, args)
    }
    /// Writes a file for the node (path relative to the node's folder); returns its full path.
    fn write_file(&self, node: &str, relative: &Path, contents: &[u8]) -> Result<PathBuf>;
    /// Reads a file of the node (path relative to the node's folder), wherever the node runs.
    fn read_file(&self, node: &str, relative: &Path) -> Result<Vec<u8>>;
    /// The names in one of the node's folders (path relative to the node's folder), wherever
    /// the node runs.
    fn list_dir(&self, node: &str, relative: &Path) -> Result<Vec<String>> {
        let path = self.node_dir(node)?.join(relative);
        let p = path.to_string_lossy();
        let out = self.exec_host_ok(node, &format!("list {p}"), "ls", &["-1", "--", &p])?;
        Ok(String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_string)
            .collect())
    }
    /// Deletes everything in one of the node's folders (path relative to the node's folder),
    /// wherever the node runs, keeping the folder itself (a lazyfs mount stays mounted).
    fn empty_dir(&self, node: &str, relative: &Path) -> Result<()> {
        let path = self.node_dir(node)?.join(relative);
        let p = path.to_string_lossy();
        let args = [&*p, "-mindepth", "1", "-delete"];
        self.exec_host_ok(node, &format!("empty {p}"), "find", &args)
            .map(drop)
    }
    /// `exec_host` that fails unless the command succeeded: "cannot {what}: {its stderr}".
    fn exec_host_ok(&self, node: &str, what: &str, program: &str, args: &[&str]) -> Result<Output> {
        let out = self.exec_host(node, program, args)?;
        if !out.status.success() {
            anyhow::bail!(
                "cannot {what}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(out)
    }
    /// Whether the node's folder is on this machine (`node_dir` can be read directly, in
    /// microseconds), rather than behind a round trip to a remote host.
    fn reads_are_local(&self) -> bool {
        true
    }
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
    /// A process a command of ours left running for the node on this machine (the lazyfs
    /// filesystem, which outlives the command that mounted it): a local backend reaps it once
    /// it has ended at teardown (`reaper`); a remote one has nothing to do.
    fn adopt(&self, node: &str, pid: u32) {
        let _ = (node, pid);
    }
    /// SIGKILLs the node's daemon and waits until it is gone; returns its pid if one ran.
    fn kill(&self, node: &str) -> Result<Option<u32>>;
    /// The run's resource registry (everything created is recorded here first).
    fn registry(&self) -> &registry::Registry;
    /// Removes everything the cluster created. Idempotent.
    fn teardown(&self) -> teardown::TeardownReport;
    /// Cutting links between nodes; None where nodes share one network stack.
    fn net(&self) -> Option<&dyn Net> {
        None
    }
    /// The hosts' own clocks, when this cluster may step them (`--real-clock-skew`); None
    /// otherwise (a target may still move its nodes' clocks with libfaketime: `Target::clock`).
    fn clock(&self) -> Option<&dyn clock::Clock> {
        None
    }
}

/// Cutting and healing links between nodes (Jepsen's `Net`). A cut node drops every packet
/// from the nodes it is cut from; the controller's own traffic always passes.
pub trait Net: Send + Sync {
    /// Makes `node` drop every packet from `sources` (node names), or only their Zab
    /// connections' (`iptables::Cut`), recording what it creates before creating it; returns
    /// the rules installed, as text.
    fn drop_from(&self, node: &str, sources: &[String], cut: iptables::Cut) -> Result<Vec<String>>;
    /// Removes every cut on `node` (nothing to remove is fine); an error when one is still
    /// there afterwards.
    fn heal(&self, node: &str) -> Result<()>;
    /// Whether a cut of the tool's is in force on `node`.
    fn is_cut(&self, node: &str) -> Result<bool>;
    /// The node's network namespace on this machine (`/run/netns/NAME`), when it has one the
    /// controller can join (local clusters): packet faults' engine and qdiscs need it. None on
    /// SSH hosts.
    fn netns(&self, node: &str) -> Option<String> {
        let _ = node;
        None
    }
}

/// Runs blocking work (a process, an SSH round trip) from wherever a `Control` is called:
/// on a multi-threaded tokio worker through `block_in_place`, so the worker's other tasks move
/// to another thread meanwhile; elsewhere (plain threads, a current-thread runtime) directly.
/// See the module doc for why not `spawn_blocking`.
pub fn blocking<T>(f: impl FnOnce() -> T) -> T {
    use tokio::runtime::{Handle, RuntimeFlavor};
    match Handle::try_current() {
        Ok(h) if h.runtime_flavor() == RuntimeFlavor::MultiThread => tokio::task::block_in_place(f),
        _ => f(),
    }
}

/// Runs a future to its end from synchronous code (a fault's apply, as `Control`, is): on a
/// multi-threaded tokio worker through `block_in_place` on that runtime; elsewhere on a
/// current-thread runtime of its own, on a thread of its own when a runtime already runs here.
pub fn block_on<F>(fut: F) -> F::Output
where
    F: std::future::Future + Send,
    F::Output: Send,
{
    use tokio::runtime::{Builder, Handle, RuntimeFlavor};
    let own = |fut: F| {
        let rt = Builder::new_current_thread().enable_all().build();
        rt.expect("a current-thread tokio runtime").block_on(fut)
    };
    match Handle::try_current() {
        Ok(h) if h.runtime_flavor() == RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(|| h.block_on(fut))
        }
        Ok(_) => std::thread::scope(|s| s.spawn(|| own(fut)).join())
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
        Err(_) => own(fut),
    }
}

/// Whether the controller runs as root (namespaces, iptables, apt-get need it).
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}
