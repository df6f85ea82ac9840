//! `Control` for nodes on this machine: each in its own network namespace (the default, root
//! only), or all on loopback addresses (no root; no partitions).
//!
//! Daemons are spawned in their own process group (a Ctrl-C at the terminal reaches only the
//! controller, which then tears down in order) and tracked by `std::process::Child`, so exited
//! ones are reaped and a pid is never signalled after it could have been reused.
//!
//! Capabilities: with namespaces every node has its own network stack, so the cluster is a
//! `Net` (iptables in the node's namespace); on loopback it is not. It never steps clocks.

use crate::control::backend::netns::{self, NetnsCluster};
use crate::control::backend::registry::{
    process_comm, process_start_time, Registry, Resource, SPAWN_ENV,
};
use crate::control::backend::teardown::{remove_all, TeardownReport};
use crate::control::{blocking, fault::iptables, Control, DaemonSpec, Net, Signal};
use anyhow::{bail, Context, Result};
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex};

/// How nodes are networked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NetMode {
    Netns,
    Loopback,
}

pub struct LocalCluster {
    nodes: Vec<String>,
    run_dir: PathBuf,
    registry: Arc<Registry>,
    net: Option<NetnsCluster>,
    /// Loopback mode: 127.x.y.z base chosen per run (less contention for ports between runs).
    loopback_base: Ipv4Addr,
    daemons: Mutex<HashMap<String, Child>>,
    /// Processes of ours that are not our children by birth (`Control::adopt`), reaped by pid
    /// at teardown.
    adopted: Mutex<Vec<crate::control::backend::reaper::Adopted>>,
    /// Spawns so far: numbers each spawn's token (`Resource::Spawn`).
    spawns: std::sync::atomic::AtomicU64,
    torn_down: Mutex<bool>,
}

impl LocalCluster {
    /// Builds the cluster network (namespaces or nothing) for `nodes`; node folders are
    /// `run_dir/nodes/<node>/`.
    pub fn create(
        mode: NetMode,
        nodes: Vec<String>,
        run_dir: &Path,
        registry: Arc<Registry>,
    ) -> Result<Self> {
        for n in &nodes {
            let dir = run_dir.join("nodes").join(n);
            std::fs::create_dir_all(&dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
        }
        let mut cluster = LocalCluster {
            nodes: nodes.clone(),
            run_dir: run_dir.to_path_buf(),
            registry: registry.clone(),
            net: None,
            loopback_base: {
                use rand::Rng;
                let mut rng = rand::thread_rng();
                Ipv4Addr::new(127, rng.gen_range(1..=250), rng.gen_range(0..=255), 0)
            },
            daemons: Mutex::new(HashMap::new()),
            adopted: Mutex::new(Vec::new()),
            spawns: Default::default(),
            torn_down: Mutex::new(false),
        };
        if mode == NetMode::Netns {
            // On failure part of the network may exist: the caller's teardown removes it, as
            // everything was recorded first.
            cluster.net = Some(NetnsCluster::create(&registry, &nodes)?);
        }
        Ok(cluster)
    }

    /// The namespaces of a netns cluster (None on loopback): for tests that enter them.
    pub fn netns(&self) -> Option<&NetnsCluster> {
        self.net.as_ref()
    }

    fn index_of(&self, node: &str) -> Result<usize> {
        self.nodes
            .iter()
            .position(|n| n == node)
            .with_context(|| format!("no node named {node} in this cluster"))
    }
}

/// Namespaces give every node its own iptables; the cuts are recorded with their namespace.
impl Net for LocalCluster {
    fn drop_from(&self, node: &str, sources: &[String], cut: iptables::Cut) -> Result<Vec<String>> {
        let netns = self.net.as_ref().map(|n| n.names.netns(node));
        iptables::drop_from(self, netns, node, sources, cut)
    }

    fn heal(&self, node: &str) -> Result<()> {
        iptables::heal(self, node)
    }

    fn is_cut(&self, node: &str) -> Result<bool> {
        iptables::is_cut(self, node)
    }

    fn netns(&self, node: &str) -> Option<String> {
        self.net.as_ref().and_then(|n| n.netns_of(node).ok())
    }
}

impl Control for LocalCluster {
    fn nodes(&self) -> &[String] {
        &self.nodes
    }

    fn node_host(&self, node: &str) -> Result<IpAddr> {
        match &self.net {
            Some(net) => Ok(IpAddr::V4(net.node_addr(node)?)),
            None => {
                let o = self.loopback_base.octets();
                Ok(IpAddr::V4(Ipv4Addr::new(
                    o[0],
                    o[1],
                    o[2],
                    11 + self.index_of(node)? as u8,
                )))
            }
        }
    }

    fn node_port(&self, node: &str, preferred: u16) -> Result<u16> {
        if self.net.is_some() {
            return Ok(preferred);
        }
        // Shared network stack: ask the kernel for a free port on the node's address.
        let host = self.node_host(node)?;
        let l = std::net::TcpListener::bind((host, 0))
            .with_context(|| format!("cannot find a free port on {host}"))?;
        Ok(l.local_addr()?.port())
    }

    fn controller_addr(&self) -> Option<IpAddr> {
        self.net.as_ref().map(|n| IpAddr::V4(n.bridge_addr()))
    }

    fn node_dir(&self, node: &str) -> Result<PathBuf> {
        self.index_of(node)?;
        Ok(self.run_dir.join("nodes").join(node))
    }

    fn exec(&self, node: &str, program: &str, args: &[&str]) -> Result<Output> {
        blocking(|| self.exec_now(node, program, args))
    }

    fn exec_host(&self, node: &str, program: &str, args: &[&str]) -> Result<Output> {
        self.index_of(node)?;
        // Not `ip netns exec`: that runs in a mount namespace of its own, whose mounts the
        // node's later starts would never see.
        blocking(|| {
            Command::new(program)
                .args(args)
                .output()
                .with_context(|| format!("cannot run {program}"))
        })
    }

    fn write_file(&self, node: &str, relative: &Path, contents: &[u8]) -> Result<PathBuf> {
        let path = self.node_dir(node)?.join(relative);
        blocking(|| {
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent)
                    .with_context(|| format!("cannot create {}", parent.display()))?;
            }
            std::fs::write(&path, contents)
                .with_context(|| format!("cannot write {}", path.display()))
        })?;
        Ok(path)
    }

    fn read_file(&self, node: &str, relative: &Path) -> Result<Vec<u8>> {
        let path = self.node_dir(node)?.join(relative);
        blocking(|| std::fs::read(&path).with_context(|| format!("cannot read {}", path.display())))
    }

    fn spawn(&self, node: &str, spec: &DaemonSpec) -> Result<u32> {
        blocking(|| self.spawn_now(node, spec))
    }
    fn pid(&self, node: &str) -> Option<u32> {
        let mut daemons = self.daemons.lock().unwrap();
        let child = daemons.get_mut(node)?;
        match child.try_wait() {
            Ok(None) => Some(child.id()),
            _ => None,
        }
    }

    fn exit_status(&self, node: &str) -> Option<std::process::ExitStatus> {
        // std keeps the status once reaped, so asking again gives the same answer.
        self.daemons
            .lock()
            .unwrap()
            .get_mut(node)?
            .try_wait()
            .ok()?
    }

    fn signal(&self, node: &str, signal: Signal) -> Result<Option<u32>> {
        let Some(pid) = self.pid(node) else {
            return Ok(None);
        };
        // Holding no lock across the signal is fine: only `kill`/`teardown` reap, and they
        // take the lock, so the pid cannot be reused before `pid()` would notice.
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), signal)
            .with_context(|| format!("cannot send {signal} to {node} (pid {pid})"))?;
        Ok(Some(pid))
    }

    fn kill(&self, node: &str) -> Result<Option<u32>> {
        let mut daemons = self.daemons.lock().unwrap();
        let Some(child) = daemons.get_mut(node) else {
            return Ok(None);
        };
        if child.try_wait()?.is_some() {
            return Ok(None);
        }
        let pid = child.id();
        let start_time = process_start_time(pid);
        child
            .kill()
            .with_context(|| format!("cannot kill {node}"))?;
        blocking(|| child.wait())?;
        // A SIGKILLed process under libfaketime leaves its /dev/shm pair behind.
        if let Some(start_time) = start_time {
            crate::control::fault::faketime_shm::remove_pair_of(pid, start_time);
        }
        Ok(Some(pid))
    }

    fn registry(&self) -> &Registry {
        &self.registry
    }

    fn adopt(&self, _node: &str, pid: u32) {
        if let Some(a) = crate::control::backend::reaper::Adopted::of(pid) {
            self.adopted.lock().unwrap().push(a);
        }
    }

    fn teardown(&self) -> TeardownReport {
        blocking(|| self.teardown_now())
    }

    fn net(&self) -> Option<&dyn Net> {
        self.net.as_ref().map(|_| self as &dyn Net)
    }
}

/// The blocking bodies of the `Control` calls above (run through `blocking`).
impl LocalCluster {
    fn teardown_now(&self) -> TeardownReport {
        *self.torn_down.lock().unwrap() = true;
        let mut report = remove_all(&self.registry.resources());
        // Reap what teardown killed.
        for (_, mut child) in self.daemons.lock().unwrap().drain() {
            let _ = child.kill();
            let _ = child.wait();
        }
        // The filesystems end once unmounted (by `remove_all`), within milliseconds.
        let adopted = std::mem::take(&mut *self.adopted.lock().unwrap());
        for a in crate::control::backend::reaper::reap(&adopted, std::time::Duration::from_secs(5))
        {
            report.errors.push(format!(
                "process {} (adopted) still runs after teardown",
                a.pid
            ));
        }
        if report.errors.is_empty() {
            self.registry.release();
        }
        report
    }

    fn exec_now(&self, node: &str, program: &str, args: &[&str]) -> Result<Output> {
        match &self.net {
            Some(net) => net.exec_in(node, program, args),
            None => {
                self.index_of(node)?;
                let out = Command::new(program)
                    .args(args)
                    .output()
                    .with_context(|| format!("cannot run {program}"))?;
                if !out.status.success() {
                    bail!(
                        "`{program} {}` failed: {}",
                        args.join(" "),
                        String::from_utf8_lossy(&out.stderr).trim()
                    );
                }
                Ok(out)
            }
        }
    }

    fn spawn_now(&self, node: &str, spec: &DaemonSpec) -> Result<u32> {
        if *self.torn_down.lock().unwrap() {
            bail!("the cluster is torn down; not starting {node}");
        }
        let mut daemons = self.daemons.lock().unwrap();
        if let Some(child) = daemons.get_mut(node) {
            if child.try_wait()?.is_none() {
                bail!("{node} is already running (pid {})", child.id());
            }
        }
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&spec.log)
            .with_context(|| format!("cannot open {}", spec.log.display()))?;
        let mut cmd = Command::new(&spec.program);
        cmd.args(&spec.args)
            .envs(spec.env.iter().map(|(k, v)| (k, v)))
            .current_dir(self.node_dir(node)?)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .process_group(0);
        if let Some(net) = &self.net {
            netns::enter_netns_on_spawn(&mut cmd, &net.netns_of(node)?)?;
        }
        // A pid cannot be known before the spawn, so the process is recorded first by a token
        // in its environment: a controller SIGKILLed between the spawn and the pid's record
        // leaves a process teardown and `clean` still find.
        let token = format!(
            "{}/{node}/{}",
            self.registry.run_id(),
            self.spawns
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        );
        self.registry.record(Resource::Spawn {
            node: node.to_string(),
            token: token.clone(),
        })?;
        cmd.env(SPAWN_ENV, &token);
        let child = cmd
            .spawn()
            .with_context(|| format!("cannot start {} for {node}", spec.program.display()))?;
        let pid = child.id();
        let start_time = process_start_time(pid).unwrap_or(0);
        let comm = process_comm(pid).unwrap_or_default();
        self.registry.record(Resource::Process {
            pid,
            start_time,
            comm,
            node: node.to_string(),
        })?;
        daemons.insert(node.to_string(), child);
        Ok(pid)
    }
}
