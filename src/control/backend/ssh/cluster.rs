//! `SshCluster`: the `Control` of nodes on remote hosts (VMs), one node per host, driven over
//! SSH the way Jepsen's control node drives its DB nodes.
//!
//! Every operation is a shell line on the node's host: `exec` runs the command there (iptables
//! rules land in the host's own tables, and are written into the host-side record first),
//! `write_file` uploads, `spawn` starts the daemon detached (setsid/nohup) and reads back the
//! pid it recorded, `signal`/`kill` act on that pid only while its start time still matches.
//! Teardown fetches each node's folder into the run folder, then removes what the record lists.

use super::bridge::Bridge;
use super::preflight::{preflight, HostFacts};
use super::remote;
use super::session::{ConnectionLog, HostSession, SshOptions};
use super::setup;
use super::shell::{command_line, quote};
use crate::control::backend::os_setup::Needs;
use crate::control::backend::registry::{Registry, Resource};
use crate::control::backend::resource::RemoteNode;
use crate::control::backend::teardown::{remove_all, TeardownReport};
use crate::control::fault::clock::{Clock, ClockChange, ClockSetting, Mechanism};
use crate::control::{blocking, fault::iptables, host_clock, Control, DaemonSpec, Net, Signal};
use anyhow::{bail, Context, Result};
use std::collections::HashMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::{Arc, Mutex};

/// What an SSH cluster is made of.
#[derive(Debug, Clone)]
pub struct SshClusterConfig {
    /// One host per node, in node order (n1 is the first).
    pub hosts: Vec<String>,
    pub options: SshOptions,
    /// The local fle-node binary to upload; a `DaemonSpec` naming it runs the uploaded copy.
    pub binary: PathBuf,
    /// The OS tools the chosen faults need on every host.
    pub needs: Needs,
    /// Clock faults step the hosts' real clocks (`--real-clock-skew`), not libfaketime's.
    pub real_clock: bool,
}

pub struct SshCluster {
    nodes: Vec<String>,
    hosts: Vec<Arc<HostSession>>,
    facts: Vec<HostFacts>,
    run_id: String,
    run_dir: PathBuf,
    registry: Arc<Registry>,
    binary: PathBuf,
    real_clock: bool,
    /// node -> (pid, start time) of its daemon.
    daemons: Mutex<HashMap<String, (u32, u64)>>,
    torn_down: Mutex<bool>,
    log: Arc<ConnectionLog>,
    bridge: Bridge,
}

/// The local folder of the run's SSH masters, recorded first (`clean` ends them after a
/// SIGKILLed controller), then made and given to every host session.
fn control_dir(registry: &Registry, hosts: &[Arc<HostSession>]) -> Result<PathBuf> {
    let control_dir = std::env::temp_dir().join(format!("flc-ssh-{}", registry.run_id()));
    registry.record(Resource::SshControl {
        dir: control_dir.clone(),
    })?;
    // create_dir, not create_dir_all: a folder already there is another run's (same id).
    std::fs::create_dir(&control_dir)
        .with_context(|| format!("cannot create {}", control_dir.display()))?;
    for h in hosts {
        h.set_control_dir(control_dir.clone());
    }
    Ok(control_dir)
}

/// Records each node's local and remote folder (teardown removes what is recorded), before
/// anything is made on a host.
fn record_nodes(
    config: &SshClusterConfig,
    run_dir: &Path,
    registry: &Registry,
    nodes: &[String],
) -> Result<()> {
    let run_id = registry.run_id();
    for (node, host) in nodes.iter().zip(&config.hosts) {
        let local = run_dir.join("nodes").join(node);
        std::fs::create_dir_all(&local)
            .with_context(|| format!("cannot create {}", local.display()))?;
        let o = &config.options;
        registry.record(Resource::SshNode(RemoteNode {
            node: node.clone(),
            host: host.clone(),
            user: o.user.clone(),
            port: o.port,
            private_key: o.private_key.clone(),
            strict_host_key_checking: o.strict_host_key_checking,
            config_file: o.config_file.clone(),
            dir: remote::node_dir(run_id, node),
        }))?;
    }
    Ok(())
}

impl SshCluster {
    /// Preflights every host (nothing is created on any host when one fails: a `BadInput`; the
    /// local folder for the SSH masters is recorded, so teardown removes it), then records and
    /// sets up each node's folder, binary and tools. Nodes are "n1".."nN" in host
    /// order; `say` hears what is being installed.
    pub fn create(
        config: SshClusterConfig,
        run_dir: &Path,
        registry: Arc<Registry>,
        say: &mut dyn FnMut(&str),
    ) -> Result<Self> {
        let bridge = Bridge::new()?;
        let log = Arc::new(ConnectionLog::new(Some(
            run_dir.join("ssh-connections.jsonl"),
        )));
        let hosts: Vec<Arc<HostSession>> = config
            .hosts
            .iter()
            .map(|h| Arc::new(HostSession::new(h, config.options.clone(), log.clone())))
            .collect();
        let control_dir = control_dir(&registry, &hosts)?;
        let probe = hosts.clone();
        let real_clock = config.real_clock;
        // FUSE for power-loss faults was checked by `check_hosts` before the run (run::mod).
        let facts = bridge.run(async move { preflight(&probe, real_clock, false).await })?;
        if real_clock {
            for (h, f) in hosts.iter().zip(&facts) {
                if let Some(warning) = f.time_daemon_warning(h.host()) {
                    say(&warning);
                }
            }
        }
        for (h, f) in hosts.iter().zip(&facts) {
            h.set_sudo(!f.root);
        }
        let nodes: Vec<String> = (1..=hosts.len()).map(|i| format!("n{i}")).collect();
        let run_id = registry.run_id().to_string();
        record_nodes(&config, run_dir, &registry, &nodes)?;
        let cluster = SshCluster {
            nodes,
            hosts,
            facts,
            run_id,
            run_dir: run_dir.to_path_buf(),
            registry,
            binary: config.binary.clone(),
            real_clock,
            daemons: Mutex::new(HashMap::new()),
            torn_down: Mutex::new(false),
            log,
            bridge,
        };
        cluster.set_up_nodes(&config, &control_dir, say)?;
        Ok(cluster)
    }

    /// Each node's folder made, the tools its faults need installed and the binary uploaded,
    /// on every host at once; what a host said it installed is passed to `say`.
    fn set_up_nodes(
        &self,
        config: &SshClusterConfig,
        control_dir: &Path,
        say: &mut dyn FnMut(&str),
    ) -> Result<()> {
        let stripped = setup::stripped_copy(&config.binary, control_dir);
        let upload = stripped.clone().unwrap_or_else(|| config.binary.clone());
        let tasks: Vec<_> = self
            .nodes
            .iter()
            .enumerate()
            .map(|(i, node)| {
                let host = self.hosts[i].clone();
                let facts = self.facts[i].clone();
                let dir = self.dir_str(node);
                let binary = upload.clone();
                let needs = config.needs;
                async move {
                    setup::make_dir(&host, &dir).await?;
                    let installed = setup::install_tools(&host, &facts, needs).await?;
                    setup::upload_binary(&host, &dir, &binary).await?;
                    anyhow::Ok(installed)
                }
            })
            .collect();
        let results = self.bridge.run(async move {
            let mut handles = Vec::new();
            for t in tasks {
                handles.push(tokio::spawn(t));
            }
            let mut results = Vec::new();
            for h in handles {
                results.push(h.await.map_err(anyhow::Error::from).and_then(|r| r));
            }
            results
        });
        if let Some(copy) = stripped {
            let _ = std::fs::remove_file(copy);
        }
        let mut errors = Vec::new();
        for r in results {
            match r {
                Ok(Some(note)) => say(&note),
                Ok(None) => {}
                Err(e) => errors.push(format!("{e:#}")),
            }
        }
        if !errors.is_empty() {
            // What was set up is recorded: the caller's teardown removes it.
            bail!("setting up the hosts failed:\n  {}", errors.join("\n  "));
        }
        Ok(())
    }

    fn index_of(&self, node: &str) -> Result<usize> {
        self.nodes
            .iter()
            .position(|n| n == node)
            .with_context(|| format!("no node named {node} in this cluster"))
    }

    fn host(&self, node: &str) -> Result<Arc<HostSession>> {
        Ok(self.hosts[self.index_of(node)?].clone())
    }

    fn dir_str(&self, node: &str) -> String {
        remote::node_dir(&self.run_id, node)
            .to_string_lossy()
            .into_owned()
    }

    /// Runs `script` on `node`'s host and waits.
    fn run(
        &self,
        node: &str,
        what: &str,
        script: String,
        stdin: Option<Vec<u8>>,
    ) -> Result<Output> {
        let host = self.host(node)?;
        let what = what.to_string();
        blocking(|| {
            self.bridge
                .run(async move { host.run(&what, &script, stdin.as_deref()).await })
        })
    }

    /// Steps the system clock of `node`'s host to `offset_ms` away from the true time (see
    /// `host_clock`); returns the step made, in ms.
    fn step_clock(&self, node: &str, offset_ms: i64) -> Result<i64> {
        if !self.real_clock {
            bail!("{node}: real clock skew is off (it needs --real-clock-skew)");
        }
        // Held for the whole step: teardown (which sets the clock back) waits for a step in
        // flight, and no step starts after it.
        let torn_down = self.torn_down.lock().unwrap();
        if *torn_down {
            bail!("the cluster is torn down; not stepping the clock of {node}");
        }
        let script = remote::clock_script(&self.dir_str(node), offset_ms);
        let out = self.run(node, "stepping the host clock", script, None)?;
        drop(torn_down);
        let text = String::from_utf8_lossy(&out.stdout);
        let step = text
            .split_whitespace()
            .find_map(|w| w.strip_prefix("step_ms="))
            .and_then(|v| v.parse::<i64>().ok());
        match step {
            Some(step) if out.status.success() => Ok(step),
            _ => bail!(
                "cannot step the clock of {} to {offset_ms} ms: {} {}",
                self.host(node)?.host(),
                String::from_utf8_lossy(&out.stderr).trim(),
                text.trim()
            ),
        }
    }

    /// The hosts in node order, as given.
    pub fn hosts(&self) -> Vec<String> {
        self.hosts.iter().map(|h| h.host().to_string()).collect()
    }

    /// Connection losses recorded so far (JSON lines).
    pub fn connection_events(&self) -> Vec<String> {
        self.log.events()
    }

    /// Where the node's folder is copied to on the controller at teardown.
    pub fn local_copy(&self, node: &str) -> PathBuf {
        self.run_dir.join("nodes").join(node)
    }

    /// Copies the node's remote folder (logs, data, record) into the run folder.
    async fn fetch(host: Arc<HostSession>, dir: String, local: PathBuf) -> Result<()> {
        let out = host
            .run_ok(
                "fetching the node folder",
                &remote::fetch_script(&dir),
                None,
            )
            .await?;
        if out.stdout.is_empty() {
            return Ok(());
        }
        tokio::fs::create_dir_all(&local).await?;
        let mut child = tokio::process::Command::new("tar")
            .arg("-xf")
            .arg("-")
            .arg("-C")
            .arg(&local)
            .stdin(std::process::Stdio::piped())
            .spawn()
            .context("cannot run tar")?;
        {
            use tokio::io::AsyncWriteExt;
            let mut stdin = child.stdin.take().expect("piped");
            stdin.write_all(&out.stdout).await?;
        }
        let status = child.wait().await?;
        if !status.success() {
            bail!(
                "tar could not unpack the folder of {} into {}",
                host.host(),
                local.display()
            );
        }
        Ok(())
    }
}

/// Each host has its own iptables; the cuts are recorded with no namespace (host-level), and
/// `exec` writes them into the host-side record too.
impl Net for SshCluster {
    fn drop_from(&self, node: &str, sources: &[String], cut: iptables::Cut) -> Result<Vec<String>> {
        iptables::drop_from(self, None, node, sources, cut)
    }

    fn heal(&self, node: &str) -> Result<()> {
        iptables::heal(self, node)
    }

    fn is_cut(&self, node: &str) -> Result<bool> {
        iptables::is_cut(self, node)
    }
}

/// `--real-clock-skew`: the host's system clock, stepped by the uploaded fle-node (`host_clock`).
impl Clock for SshCluster {
    fn mechanism(&self) -> Mechanism {
        Mechanism::ClockSettime
    }

    fn set(&self, node: &str, setting: ClockSetting) -> Result<ClockChange> {
        let ClockSetting::Offset(ms) = setting else {
            bail!(
                "{node}: a host's real clock can be stepped, not sped up (rate needs libfaketime)"
            );
        };
        Ok(ClockChange::StepMs(self.step_clock(node, ms)?))
    }

    fn skew_left(&self, node: &str) -> Result<Option<String>> {
        // No record: the tool never moved this host's clock.
        let state = self.node_dir(node)?.join(host_clock::STATE);
        let script = format!("cat '{}' 2>/dev/null || true", state.display());
        let text = self.exec(node, "sh", &["-c", &script])?.stdout;
        let ms = host_clock::offset_ms(&String::from_utf8_lossy(&text))?;
        Ok((ms != 0).then(|| format!("{ms} ms (host clock)")))
    }
}

impl Control for SshCluster {
    fn nodes(&self) -> &[String] {
        &self.nodes
    }

    fn node_host(&self, node: &str) -> Result<IpAddr> {
        Ok(self.facts[self.index_of(node)?].address)
    }

    fn node_port(&self, node: &str, preferred: u16) -> Result<u16> {
        self.index_of(node)?;
        Ok(preferred)
    }

    fn controller_addr(&self) -> Option<IpAddr> {
        self.facts.first().map(|f| f.controller)
    }

    fn node_dir(&self, node: &str) -> Result<PathBuf> {
        self.index_of(node)?;
        Ok(remote::node_dir(&self.run_id, node))
    }

    fn exec(&self, node: &str, program: &str, args: &[&str]) -> Result<Output> {
        let base = Path::new(program)
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or(program);
        let mut script = String::new();
        if matches!(base, "iptables" | "ip6tables") {
            if let Some(record) = remote::record_iptables(&self.dir_str(node), args) {
                script.push_str(&record);
            }
        }
        // The binary the controller was built with runs as the copy uploaded at setup.
        let uploaded = format!("{}/{}", self.dir_str(node), remote::BINARY);
        let program = if Path::new(program) == self.binary {
            if let Some(record) = remote::record_lazyfs(&self.dir_str(node), args) {
                script.push_str(&record);
            }
            uploaded.as_str()
        } else {
            program
        };
        script.push_str(&command_line(program, args));
        let out = self.run(node, &format!("running {program}"), script, None)?;
        if !out.status.success() {
            bail!(
                "`{}` on {} failed: {}",
                command_line(program, args),
                self.host(node)?.host(),
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(out)
    }

    fn write_file(&self, node: &str, relative: &Path, contents: &[u8]) -> Result<PathBuf> {
        let path = self.node_dir(node)?.join(relative);
        let host = self.host(node)?;
        let p = path.to_string_lossy().into_owned();
        let bytes = contents.to_vec();
        blocking(|| {
            self.bridge
                .run(async move { setup::write_remote(&host, &p, &bytes).await })
        })?;
        Ok(path)
    }

    fn read_file(&self, node: &str, relative: &Path) -> Result<Vec<u8>> {
        let path = self.node_dir(node)?.join(relative);
        let p = path.to_string_lossy().into_owned();
        let out = self.run(
            node,
            &format!("reading {p}"),
            format!("cat {}", quote(&p)),
            None,
        )?;
        if !out.status.success() {
            bail!(
                "cannot read {p} on {}: {}",
                self.host(node)?.host(),
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(out.stdout)
    }

    fn reads_are_local(&self) -> bool {
        false
    }

    fn spawn(&self, node: &str, spec: &DaemonSpec) -> Result<u32> {
        if *self.torn_down.lock().unwrap() {
            bail!("the cluster is torn down; not starting {node}");
        }
        if let Some(pid) = self.pid(node) {
            bail!("{node} is already running (pid {pid})");
        }
        let dir = self.dir_str(node);
        // The binary the controller was built with runs as the copy uploaded at setup.
        let program = if spec.program == self.binary {
            format!("{dir}/{}", remote::BINARY)
        } else {
            spec.program.to_string_lossy().into_owned()
        };
        let mut words = vec!["env".to_string()];
        words.extend(spec.env.iter().map(|(k, v)| format!("{k}={v}")));
        words.push(program);
        words.extend(spec.args.iter().cloned());
        let command = words.iter().map(|w| quote(w)).collect::<Vec<_>>().join(" ");
        let script = remote::spawn_script(&dir, &spec.log.to_string_lossy(), &command);
        let out = self.run(node, "starting the node", script, None)?;
        let text = String::from_utf8_lossy(&out.stdout);
        let parsed = text.lines().last().and_then(|l| {
            let mut w = l.split_whitespace();
            Some((
                w.next()?.parse::<u32>().ok()?,
                w.next()?.parse::<u64>().ok()?,
            ))
        });
        let Some((pid, start)) = parsed.filter(|_| out.status.success()) else {
            bail!(
                "cannot start {node} on {}: {} {}",
                self.host(node)?.host(),
                String::from_utf8_lossy(&out.stderr).trim(),
                text.trim()
            );
        };
        self.daemons
            .lock()
            .unwrap()
            .insert(node.to_string(), (pid, start));
        Ok(pid)
    }

    fn pid(&self, node: &str) -> Option<u32> {
        let (pid, start) = *self.daemons.lock().unwrap().get(node)?;
        match self.run(
            node,
            "checking the node",
            remote::alive_script(pid, start),
            None,
        ) {
            Ok(out) if out.status.success() && out.stdout.starts_with(b"gone") => {
                self.daemons.lock().unwrap().remove(node);
                None
            }
            // Alive, or the host did not answer plainly (no connection, a failing sudo or
            // shell): not known to be gone, so still ours to signal later.
            _ => Some(pid),
        }
    }

    fn signal(&self, node: &str, signal: Signal) -> Result<Option<u32>> {
        let Some((pid, start)) = self.daemons.lock().unwrap().get(node).copied() else {
            return Ok(None);
        };
        let name = signal.as_str().trim_start_matches("SIG");
        let out = self.run(
            node,
            &format!("sending {signal}"),
            remote::signal_script(pid, start, name, false),
            None,
        )?;
        if !out.status.success() {
            bail!(
                "cannot send {signal} to {node} (pid {pid}): {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout)
            .contains("sent")
            .then_some(pid))
    }

    fn is_stopped(&self, node: &str) -> Result<bool> {
        let Some((pid, start)) = self.daemons.lock().unwrap().get(node).copied() else {
            return Ok(false);
        };
        let script = remote::stopped_script(pid, start);
        let out = self.run(node, "checking whether the node is stopped", script, None)?;
        Ok(String::from_utf8_lossy(&out.stdout).contains("stopped"))
    }

    fn kill(&self, node: &str) -> Result<Option<u32>> {
        let Some((pid, start)) = self.daemons.lock().unwrap().get(node).copied() else {
            return Ok(None);
        };
        let out = self.run(
            node,
            "killing the node",
            remote::signal_script(pid, start, "KILL", true),
            None,
        )?;
        if !out.status.success() {
            bail!(
                "cannot kill {node} (pid {pid}): {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        self.daemons.lock().unwrap().remove(node);
        Ok(String::from_utf8_lossy(&out.stdout)
            .contains("sent")
            .then_some(pid))
    }

    fn registry(&self) -> &Registry {
        &self.registry
    }

    fn net(&self) -> Option<&dyn Net> {
        Some(self)
    }

    fn clock(&self) -> Option<&dyn Clock> {
        self.real_clock.then_some(self as &dyn Clock)
    }

    fn teardown(&self) -> TeardownReport {
        blocking(|| self.teardown_now())
    }
}

impl SshCluster {
    fn teardown_now(&self) -> TeardownReport {
        *self.torn_down.lock().unwrap() = true;
        let jobs: Vec<_> = self
            .nodes
            .iter()
            .enumerate()
            .map(|(i, node)| {
                (
                    self.hosts[i].clone(),
                    self.dir_str(node),
                    self.local_copy(node),
                )
            })
            .collect();
        let results = self.bridge.run(async move {
            let mut handles = Vec::new();
            for (host, dir, local) in jobs {
                handles.push(tokio::spawn(async move {
                    // Kill first so the copy is of a folder nobody writes any more.
                    let mut removal = remote::Removal::default();
                    let fetched = if remote::cleanup(&host, &dir, &mut removal).await {
                        SshCluster::fetch(host.clone(), dir.clone(), local)
                            .await
                            .err()
                    } else {
                        None
                    };
                    remote::remove_node(&host, &dir, &mut removal).await;
                    host.close().await;
                    (fetched, removal)
                }));
            }
            let mut out = Vec::new();
            for h in handles {
                out.push(h.await);
            }
            out
        });
        let mut report = TeardownReport::default();
        for r in results {
            match r {
                Ok((fetch_err, removal)) => {
                    report.removed.extend(removal.removed);
                    report.errors.extend(removal.errors);
                    if let Some(e) = fetch_err {
                        // The logs are lost, nothing is left behind: not a teardown error.
                        tracing::warn!("could not fetch a node folder: {e:#}");
                    }
                }
                Err(e) => report.errors.push(format!("ssh teardown task: {e}")),
            }
        }
        // Anything else the run recorded locally (see `local_resources`).
        let local = super::local_resources(&self.registry.resources());
        let rest = remove_all(&local);
        report.removed.extend(rest.removed);
        report.errors.extend(rest.errors);
        self.daemons.lock().unwrap().clear();
        if report.errors.is_empty() {
            self.registry.release();
        }
        report
    }
}
