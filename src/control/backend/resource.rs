//! What a run can create, as the registry records it before it exists: one `Resource` per
//! namespace, link, subnet claim, process, iptables chain and rule, qdisc, file, lazyfs mount,
//! remote node folder and SSH master socket folder. Teardown and `clean` remove exactly these.
//! (The registry itself is generic over what it records: `registry::Registry<R>`.)

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// One thing a run created.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Resource {
    /// The controller that owns the run; `clean` leaves a run alone while it is alive.
    Controller {
        pid: u32,
        start_time: u64,
        run_dir: PathBuf,
    },
    /// A network namespace (`ip netns`).
    Netns { name: String },
    /// A host network link (bridge or host end of a veth pair).
    Link { name: String },
    /// A claimed /24 (a lock file in the registry directory).
    Subnet { claim: PathBuf, cidr: String },
    /// A process the run started; `start_time` (from /proc/PID/stat) proves a pid is still ours.
    Process {
        pid: u32,
        start_time: u64,
        comm: String,
        node: String,
    },
    /// A process about to be started: its environment carries `FLC_SPAWN=<token>` (`SPAWN_ENV`),
    /// so a controller killed between the spawn and the `Process` record (the exec included:
    /// milliseconds) leaves a process that teardown and `clean` still find, by that exact token.
    Spawn { node: String, token: String },
    /// An iptables chain (in a node's namespace when `netns` is set, else on the host).
    Chain {
        netns: Option<String>,
        table: String,
        chain: String,
    },
    /// An iptables rule, as the arguments after `-A` / `-D` (e.g. `["INPUT", "-j", "flc-x"]`).
    Rule {
        netns: Option<String>,
        table: String,
        spec: Vec<String>,
    },
    /// A root qdisc of the tool's (packet bandwidth faults), by its handle, on `dev` in a node's
    /// namespace (`netns`) or on a host.
    Qdisc {
        netns: Option<String>,
        dev: String,
        handle: String,
    },
    /// A file or directory outside the run folder.
    File { path: PathBuf },
    /// A lazyfs mount (a node's dataDir, power-loss faults); unmounting ends its process.
    /// `control` is its control socket as `fle-node lazyfs` takes it (`@NAME`: abstract, so
    /// nothing on disk to remove; older runs recorded a path).
    LazyFs {
        node: String,
        mount: PathBuf,
        control: String,
    },
    /// A node's folder on a remote host (SSH clusters); what it holds is listed on the host.
    SshNode(RemoteNode),
    /// The folder of a run's OpenSSH master sockets: the masters (`ssh -M -S DIR/...`) go with it.
    SshControl { dir: PathBuf },
}

/// A node's folder on a remote host, as the controller's registry records it: enough to
/// reconnect and clean up from `fle-chaos clean` after the controller died.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemoteNode {
    pub node: String,
    pub host: String,
    pub user: Option<String>,
    pub port: Option<u16>,
    pub private_key: Option<PathBuf>,
    pub strict_host_key_checking: bool,
    pub config_file: Option<PathBuf>,
    pub dir: PathBuf,
}
