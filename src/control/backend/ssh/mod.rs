//! Nodes on remote hosts (VMs) over SSH: the second `Control` beside the local namespaces, so
//! that `fle-chaos test --ssh --nodes vm1,vm2,vm3` runs the identical test on real machines.
//!
//! - `cli`: the `--ssh*` flags and `--nodes` as a count or a host list;
//! - `session`: one multiplexed OpenSSH connection per host, retried and recorded when lost;
//! - `bridge`: the synchronous `Control` calls onto the async SSH work;
//! - `preflight`: every host checked (login, sudo, tools, architecture) before anything starts;
//! - `setup`: node folder, uploaded fle-node binary, missing tools installed;
//! - `remote`: what the run leaves on a host (a folder with a record of its processes and
//!   iptables rules) and the shell that creates and removes it;
//! - `shell`: quoting;
//! - `cluster`: `SshCluster`, the `Control` implementation.

pub mod bridge;
pub mod cli;
pub mod cluster;
pub mod preflight;
pub mod remote;
pub mod session;
pub mod setup;
pub mod shell;

use crate::control::backend::resource::RemoteNode;
pub use cli::{NodesArg, SshArgs};
pub use cluster::{SshCluster, SshClusterConfig};
pub use session::SshOptions;

use crate::control::backend::registry::Resource;
use session::{ConnectionLog, HostSession};
use std::sync::Arc;

/// Preflights `hosts` (see `preflight`) from any thread: a `BadInput` naming every problem,
/// else what each host has, in `hosts` order.
pub fn check_hosts(
    hosts: &[String],
    options: &SshOptions,
    real_clock: bool,
    power_loss: bool,
) -> anyhow::Result<Vec<preflight::HostFacts>> {
    let log = Arc::new(ConnectionLog::new(None));
    let sessions: Vec<Arc<HostSession>> = hosts
        .iter()
        .map(|h| Arc::new(HostSession::new(h, options.clone(), log.clone())))
        .collect();
    bridge::run_detached(async move {
        let result = preflight::preflight(&sessions, real_clock, power_loss).await;
        for s in &sessions {
            s.close().await;
        }
        result
    })
}

/// The pids of OpenSSH masters whose control socket is under `dir` (`ssh ... -S DIR/...`):
/// the run's own, found by the folder only it uses.
pub fn masters_in(dir: &std::path::Path) -> Vec<u32> {
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let prefix = format!("{}/", dir.display());
    procs
        .flatten()
        .filter_map(|p| p.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
                return false;
            };
            let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
            args.first().is_some_and(|a| a.ends_with(b"ssh"))
                && args
                    .windows(2)
                    .any(|w| w[0] == b"-S" && w[1].starts_with(prefix.as_bytes()))
        })
        .collect()
}

/// `resources` without what lives on remote hosts: the SSH nodes, and, in a run that has SSH
/// nodes, the host-level (no namespace) iptables entries the nemesis records, which were made
/// on the remote hosts (their host-side record removes them) and must never be replayed on the
/// controller's own machine.
pub fn local_resources(resources: &[Resource]) -> Vec<Resource> {
    let remote_run = resources.iter().any(|r| matches!(r, Resource::SshNode(_)));
    resources
        .iter()
        .filter(|r| match r {
            Resource::SshNode(_) => false,
            Resource::Chain { netns: None, .. } | Resource::Rule { netns: None, .. } => !remote_run,
            // Mounted on the hosts; their host-side record unmounts them.
            Resource::LazyFs { .. } => !remote_run,
            _ => true,
        })
        .cloned()
        .collect()
}

/// Removes what the remote nodes among `resources` left on their hosts (`fle-chaos clean`
/// after a crashed controller): reconnects with the recorded settings, kills the recorded
/// processes, deletes the recorded iptables rules and chains and the node folders.
/// Returns (removed, errors).
pub fn remove_recorded(resources: &[Resource]) -> (Vec<String>, Vec<String>) {
    let nodes: Vec<RemoteNode> = resources
        .iter()
        .filter_map(|r| match r {
            Resource::SshNode(n) => Some(n.clone()),
            _ => None,
        })
        .collect();
    if nodes.is_empty() {
        return (Vec::new(), Vec::new());
    }
    bridge::run_detached(async move {
        let log = Arc::new(ConnectionLog::new(None));
        let mut handles = Vec::new();
        for n in nodes {
            let log = log.clone();
            handles.push(tokio::spawn(async move {
                let host = HostSession::new(&n.host, n.options(), log);
                // Whether to use sudo is learnt again: the user may differ per host.
                let facts = preflight::probe(&host).await;
                let mut removal = remote::Removal::default();
                match facts {
                    Ok(f) => {
                        host.set_sudo(!f.root);
                        remote::remove_node(&host, &n.dir.to_string_lossy(), &mut removal).await
                    }
                    Err(e) => removal.errors.push(format!("{}: {e:#}", n.host)),
                }
                host.close().await;
                removal
            }));
        }
        let (mut removed, mut errors) = (Vec::new(), Vec::new());
        for h in handles {
            match h.await {
                Ok(r) => {
                    removed.extend(r.removed);
                    errors.extend(r.errors);
                }
                Err(e) => errors.push(format!("ssh clean task: {e}")),
            }
        }
        (removed, errors)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chain(netns: Option<&str>) -> Resource {
        Resource::Chain {
            netns: netns.map(str::to_string),
            table: "filter".into(),
            chain: "flc-partition".into(),
        }
    }

    #[test]
    fn host_level_iptables_entries_of_an_ssh_run_are_not_replayed_locally() {
        let node = Resource::SshNode(RemoteNode {
            node: "n1".into(),
            host: "vm1".into(),
            user: None,
            port: None,
            private_key: None,
            strict_host_key_checking: true,
            config_file: None,
            dir: "/tmp/flc-x-n1".into(),
        });
        let file = Resource::File {
            path: "/tmp/x".into(),
        };
        let ssh_run = [node, chain(None), chain(Some("flc-x-n1")), file.clone()];
        assert_eq!(
            local_resources(&ssh_run),
            vec![chain(Some("flc-x-n1")), file.clone()]
        );
        // A local run keeps its host-level entries.
        let local_run = [chain(None), file];
        assert_eq!(local_resources(&local_run), local_run.to_vec());
    }
}
