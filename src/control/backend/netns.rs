//! Network-namespace plumbing for a local cluster: one namespace per node, a host bridge
//! holding the controller's address, a veth pair per node, all in a private /24.
//!
//! Everything is named `flc…` and recorded in the run's registry *before* it is created. The
//! nemesis calls `exec_in` (iptables inside a node's namespace), `node_addr` and `bridge_addr`
//! (to spare the controller's own traffic when it partitions).

use crate::control::backend::registry::{Registry, Resource};
use anyhow::{bail, Context, Result};
use std::net::Ipv4Addr;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A run's private 10.a.b.0/24.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Subnet {
    pub a: u8,
    pub b: u8,
}

impl Subnet {
    pub fn cidr(&self) -> String {
        format!("10.{}.{}.0/24", self.a, self.b)
    }
    /// The controller's address on the bridge.
    pub fn bridge_addr(&self) -> Ipv4Addr {
        Ipv4Addr::new(10, self.a, self.b, 1)
    }
    /// Node `index` (0-based) lives at .11, .12, ...
    pub fn node_addr(&self, index: usize) -> Ipv4Addr {
        Ipv4Addr::new(10, self.a, self.b, 11 + index as u8)
    }
}

/// The names of a run's network objects. Interface names must stay within 15 bytes.
#[derive(Debug, Clone)]
pub struct NetNames {
    pub run_id: String,
}

impl NetNames {
    pub fn bridge(&self) -> String {
        format!("flcb{}", self.run_id)
    }
    pub fn netns(&self, node: &str) -> String {
        format!("flc-{}-{}", self.run_id, node)
    }
    pub fn veth_host(&self, node: &str) -> String {
        format!("flcv{}{}", self.run_id, node)
    }
}

/// The namespaces and addresses of one local cluster (what the nemesis needs to reach nodes).
#[derive(Debug, Clone)]
pub struct NetnsCluster {
    pub names: NetNames,
    pub subnet: Subnet,
    /// Node names in order ("n1".."nN"); node i has address `subnet.node_addr(i)`.
    pub nodes: Vec<String>,
}

impl NetnsCluster {
    /// Claims a subnet and builds bridge, namespaces and veth pairs, recording each first.
    pub fn create(registry: &Registry, nodes: &[String]) -> Result<Self> {
        let names = NetNames {
            run_id: registry.run_id().to_string(),
        };
        let subnet = claim_subnet(registry)?;
        let cluster = NetnsCluster {
            names,
            subnet,
            nodes: nodes.to_vec(),
        };
        let bridge = cluster.names.bridge();
        registry.record(Resource::Link {
            name: bridge.clone(),
        })?;
        ip(&["link", "add", &bridge, "type", "bridge"])?;
        ip(&[
            "addr",
            "add",
            &format!("{}/24", subnet.bridge_addr()),
            "dev",
            &bridge,
        ])?;
        ip(&["link", "set", &bridge, "up"])?;
        for (i, node) in nodes.iter().enumerate() {
            let ns = cluster.names.netns(node);
            let veth = cluster.names.veth_host(node);
            registry.record(Resource::Netns { name: ns.clone() })?;
            ip(&["netns", "add", &ns])?;
            registry.record(Resource::Link { name: veth.clone() })?;
            ip(&[
                "link", "add", &veth, "type", "veth", "peer", "name", "eth0", "netns", &ns,
            ])?;
            ip(&["link", "set", &veth, "master", &bridge, "up"])?;
            ip(&["-n", &ns, "link", "set", "lo", "up"])?;
            ip(&[
                "-n",
                &ns,
                "addr",
                "add",
                &format!("{}/24", subnet.node_addr(i)),
                "dev",
                "eth0",
            ])?;
            ip(&["-n", &ns, "link", "set", "eth0", "up"])?;
        }
        Ok(cluster)
    }

    pub fn index_of(&self, node: &str) -> Result<usize> {
        self.nodes
            .iter()
            .position(|n| n == node)
            .with_context(|| format!("no node named {node} in this cluster"))
    }

    /// The node's address on the cluster network.
    pub fn node_addr(&self, node: &str) -> Result<Ipv4Addr> {
        Ok(self.subnet.node_addr(self.index_of(node)?))
    }

    /// The controller's address on the bridge (never partition it away).
    pub fn bridge_addr(&self) -> Ipv4Addr {
        self.subnet.bridge_addr()
    }

    /// The namespace of a node.
    pub fn netns_of(&self, node: &str) -> Result<String> {
        self.index_of(node)?;
        Ok(self.names.netns(node))
    }

    /// Runs a command inside a node's namespace and waits for it.
    pub fn exec_in(&self, node: &str, program: &str, args: &[&str]) -> Result<Output> {
        exec_in(&self.netns_of(node)?, program, args)
    }
}

/// Runs `program args` inside namespace `ns` (via `ip netns exec`) and returns its output;
/// a non-zero exit is an error quoting the command and its stderr.
pub fn exec_in(ns: &str, program: &str, args: &[&str]) -> Result<Output> {
    let out = Command::new("ip")
        .args(["netns", "exec", ns, program])
        .args(args)
        .output()
        .with_context(|| format!("cannot run `ip netns exec {ns} {program}`"))?;
    if !out.status.success() {
        bail!(
            "`ip netns exec {ns} {program} {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(out)
}

/// Makes `cmd` join namespace `ns` between fork and exec, so the spawned pid is the daemon
/// itself (unlike `ip netns exec`, which would have to exec it and remounts /sys).
pub fn enter_netns_on_spawn(cmd: &mut Command, ns: &str) -> Result<()> {
    let path = Path::new("/run/netns").join(ns);
    let file =
        std::fs::File::open(&path).with_context(|| format!("no namespace {}", path.display()))?;
    // The file must outlive the fork: the closure owns it.
    unsafe {
        cmd.pre_exec(move || {
            use std::os::fd::AsRawFd;
            if libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    Ok(())
}

/// Runs `ip ARGS`, turning a failure into an error quoting the command and its stderr.
pub fn ip(args: &[&str]) -> Result<()> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .context("cannot run `ip` (install iproute2)")?;
    if !out.status.success() {
        bail!(
            "`ip {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// Deletes a namespace; one that is already gone, before or while we try (its run tearing
/// itself down, a concurrent `clean`), is not an error: gone is what was wanted. No look
/// first: the namespace could vanish between the look and the removal anyway.
pub fn delete_netns(name: &str) -> Result<()> {
    match ip(&["netns", "delete", name]) {
        Err(e) if netns_was_gone(&format!("{e:#}")) => Ok(()),
        Err(_) if !Path::new("/run/netns").join(name).exists() => Ok(()),
        r => r,
    }
}

/// Deletes a host link; one that is already gone (removed in between by its run, by a
/// concurrent `clean`, or by the kernel finishing a deleted namespace's veth, whose sysfs entry
/// can outlive the device a moment) is not an error.
pub fn delete_link(name: &str) -> Result<()> {
    match ip(&["link", "delete", name]) {
        Err(e) if link_was_gone(&format!("{e:#}")) => Ok(()),
        Err(_) if !Path::new("/sys/class/net").join(name).exists() => Ok(()),
        r => r,
    }
}

/// `ip netns delete`'s words for a namespace that is not there.
fn netns_was_gone(message: &str) -> bool {
    message.contains("Cannot remove namespace file")
        && message.contains("No such file or directory")
}

/// `ip link delete`'s words for a device that is not there.
fn link_was_gone(message: &str) -> bool {
    message.contains("Cannot find device")
}

/// Every /24 that has an IPv4 address or route on the host right now.
fn subnets_in_use() -> Vec<(u8, u8)> {
    let mut used = Vec::new();
    for args in [
        &["-o", "-4", "addr", "show"][..],
        &["-4", "route", "show"][..],
    ] {
        let Ok(out) = Command::new("ip").args(args).output() else {
            continue;
        };
        for word in String::from_utf8_lossy(&out.stdout).split_whitespace() {
            let addr = word.split('/').next().unwrap_or("");
            if let Ok(a) = addr.parse::<Ipv4Addr>() {
                let o = a.octets();
                if o[0] == 10 {
                    used.push((o[1], o[2]));
                }
            }
        }
    }
    used
}

/// Chooses a free 10.a.b.0/24 (a in 200..=249) and claims it with a lock file created
/// exclusively in the registry directory, so two runs starting at once never pick the same.
fn claim_subnet(registry: &Registry) -> Result<Subnet> {
    use rand::Rng;
    let dir: PathBuf = crate::control::backend::registry::registry_dir().join("subnets");
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let used = subnets_in_use();
    let mut rng = rand::thread_rng();
    for _ in 0..500 {
        let subnet = Subnet {
            a: rng.gen_range(200..=249),
            b: rng.gen_range(0..=255),
        };
        if used.contains(&(subnet.a, subnet.b)) {
            continue;
        }
        let claim = dir.join(format!("10.{}.{}", subnet.a, subnet.b));
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&claim)
        {
            Ok(mut f) => {
                use std::io::Write;
                let _ = writeln!(f, "{}", registry.run_id());
                registry.record(Resource::Subnet {
                    claim,
                    cidr: subnet.cidr(),
                })?;
                return Ok(subnet);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e).with_context(|| format!("cannot create {}", claim.display())),
        }
    }
    bail!("no free 10.200-249.x.0/24 subnet for the cluster network; run `fle-chaos clean`")
}
