//! `Target` for fle-node: writes `zoo.cfg` and `myid` as ZooKeeper expects them, starts
//! `fle-node --config DIR/zoo.cfg` through the cluster's `Control` (optionally under
//! libfaketime), and speaks its HTTP API (`/status`, `/write`, `/log`; the data tree through
//! `fle_data`).

use crate::api::{ApiError, LogResponse, NodeStatus, ReconfigDone, WriteCommitted, WriteRequest};
use crate::api::{DataOp, DataRead, DataWritten};
use crate::control::fault::clock::Clock;
use crate::control::sut::clock_of;
use crate::control::sut::{
    fle_data, BoxFuture, DataOutcome, Member, ReadError, Target, WriteOutcome,
};
use crate::control::{fault::faketime, fault::lazyfs, Control, DaemonSpec};
use crate::history::sid_of;
use anyhow::{Context, Result};
use std::collections::HashMap;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// How to run fle-node.
#[derive(Debug, Clone)]
pub struct FleNodeOptions {
    pub binary: PathBuf,
    pub tick_ms: u64,
    pub init_limit: u32,
    pub sync_limit: u32,
    /// Start nodes under libfaketime (the clock nemesis needs it).
    pub faketime: bool,
    /// Under libfaketime, fake the monotonic clock too (a schedule's `fake_monotonic`).
    pub fake_monotonic: bool,
    /// `--bug NAME` for fle-node (deliberate bugs the checkers must catch).
    pub bug: Option<String>,
    pub finalize_wait_ms: Option<u64>,
    /// The dataDir on lazyfs (the schedule has power-loss faults).
    pub power_loss: bool,
    /// Nodes written as `:observer` in every zoo.cfg (`--observers`).
    pub observers: std::collections::BTreeSet<String>,
    /// Per status read; a paused node costs its observer this long per read, nobody else.
    pub status_timeout: Duration,
    /// Per write, client side (fle-node answers 504 on its own timeout before this).
    pub write_timeout: Duration,
}

#[derive(Debug, Clone, Copy)]
struct Ports {
    quorum: u16,
    election: u16,
    http: u16,
}

pub struct FleNode {
    control: Arc<dyn Control>,
    opts: FleNodeOptions,
    ports: HashMap<String, Ports>,
    /// One keep-alive client per node for status reads (short timeout) and one for the rest.
    status_clients: HashMap<String, reqwest::Client>,
    client: reqwest::Client,
    /// The nodes' clocks when they run under libfaketime.
    faketime: Option<faketime::FaketimeClock>,
}

impl FleNode {
    pub fn new(control: Arc<dyn Control>, opts: FleNodeOptions) -> Result<Self> {
        let mut ports = HashMap::new();
        let mut status_clients = HashMap::new();
        for node in control.nodes() {
            ports.insert(
                node.clone(),
                Ports {
                    quorum: control.node_port(node, 2888)?,
                    election: control.node_port(node, 3888)?,
                    http: control.node_port(node, 8080)?,
                },
            );
            status_clients.insert(
                node.clone(),
                reqwest::Client::builder()
                    .timeout(opts.status_timeout)
                    .connect_timeout(opts.status_timeout)
                    .tcp_nodelay(true)
                    .pool_max_idle_per_host(1)
                    .no_proxy()
                    .build()?,
            );
        }
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_millis(500))
            .tcp_nodelay(true)
            .no_proxy()
            .build()?;
        Ok(FleNode {
            faketime: opts
                .faketime
                .then(|| faketime::FaketimeClock::new(control.clone())),
            control,
            opts,
            ports,
            status_clients,
            client,
        })
    }

    fn ports(&self, node: &str) -> Result<Ports> {
        self.ports
            .get(node)
            .copied()
            .with_context(|| format!("no node named {node}"))
    }

    fn http_base(&self, node: &str) -> Result<String> {
        let addr = SocketAddr::new(self.control.node_host(node)?, self.ports(node)?.http);
        Ok(format!("http://{addr}"))
    }

    fn config_path(&self, node: &str) -> Result<PathBuf> {
        Ok(self.control.node_dir(node)?.join("zoo.cfg"))
    }

    /// `peer`'s `server.N=host:quorumPort:electionPort[:observer];host:httpPort` line: the
    /// `;host:port` is its client (here: HTTP) address, so followers can forward writes to
    /// the leader as ZooKeeper's do.
    fn server_line(&self, peer: &str, observer: bool) -> Result<String> {
        let sid = sid_of(peer).with_context(|| format!("node name {peer} has no sid"))?;
        let p = self.ports(peer)?;
        let host = self.control.node_host(peer)?;
        let kind = if observer { ":observer" } else { "" };
        Ok(format!(
            "server.{sid}={host}:{}:{}{kind};{host}:{}",
            p.quorum, p.election, p.http
        ))
    }

    /// zoo.cfg in ZooKeeper's own terms.
    fn zoo_cfg(&self, node: &str) -> Result<String> {
        let dir = self.control.node_dir(node)?;
        let mut cfg = String::new();
        writeln!(cfg, "tickTime={}", self.opts.tick_ms)?;
        writeln!(cfg, "initLimit={}", self.opts.init_limit)?;
        writeln!(cfg, "syncLimit={}", self.opts.sync_limit)?;
        writeln!(cfg, "dataDir={}", dir.join("data").display())?;
        for peer in self.control.nodes() {
            let observer = self.opts.observers.contains(peer);
            writeln!(cfg, "{}", self.server_line(peer, observer)?)?;
        }
        if self.opts.observers.contains(node) {
            writeln!(cfg, "peerType=observer")?;
        }
        writeln!(cfg, "admin.serverAddress={}", self.control.node_host(node)?)?;
        writeln!(cfg, "admin.serverPort={}", self.ports(node)?.http)?;
        Ok(cfg)
    }
}

/// Where fle-node is built beside a program of this workspace: `target/<profile>/fle-node`,
/// for `fle-chaos` itself and for the test and bench executables in `target/<profile>/deps/`
/// (fle-node is another package of the workspace, so cargo gives tests no path to it).
pub fn binary_beside(exe: &Path) -> PathBuf {
    let dir = exe.parent().unwrap_or(Path::new("."));
    let dir = if dir.file_name().is_some_and(|d| d == "deps") {
        dir.parent().unwrap_or(dir)
    } else {
        dir
    };
    dir.join("fle-node")
}

/// The fle-node built beside the running program (see `binary_beside`).
pub fn built_binary() -> PathBuf {
    let exe = std::env::current_exe().unwrap_or_default();
    binary_beside(&exe)
}

fn read_error(e: reqwest::Error) -> ReadError {
    if e.is_connect() {
        ReadError::Unreachable(format!("cannot connect: {e}"))
    } else if e.is_timeout() {
        ReadError::Timeout(format!("timed out: {e}"))
    } else {
        ReadError::Timeout(format!("{e}"))
    }
}

impl Target for FleNode {
    fn name(&self) -> &'static str {
        "fle"
    }

    fn nodes(&self) -> Vec<String> {
        self.control.nodes().to_vec()
    }

    fn setup(&self, node: &str) -> Result<()> {
        let sid = sid_of(node).with_context(|| format!("node name {node} has no sid"))?;
        let lazyfs_binary = self.opts.power_loss.then_some(self.opts.binary.as_path());
        lazyfs::data_dir_with_myid(
            self.control.as_ref(),
            node,
            lazyfs_binary,
            format!("{sid}\n").as_bytes(),
        )?;
        self.control
            .write_file(node, "zoo.cfg".as_ref(), self.zoo_cfg(node)?.as_bytes())?;
        if self.opts.faketime {
            // Through the Control, so that it lands where the node runs (a remote host too).
            self.control
                .write_file(node, "faketime".as_ref(), b"+0\n")?;
        }
        Ok(())
    }

    fn start(&self, node: &str) -> Result<u32> {
        let mut args = vec![
            "--config".to_string(),
            self.config_path(node)?.display().to_string(),
        ];
        if let Some(bug) = &self.opts.bug {
            args.extend(["--bug".to_string(), bug.clone()]);
        }
        if let Some(ms) = self.opts.finalize_wait_ms {
            args.extend(["--finalize-wait-ms".to_string(), ms.to_string()]);
        }
        let dir = self.control.node_dir(node)?;
        let env = match self.clock_file(node) {
            Some(file) => faketime::env_with(&file, self.opts.fake_monotonic),
            None => Vec::new(),
        };
        self.control.spawn(
            node,
            &DaemonSpec {
                program: self.opts.binary.clone(),
                args,
                env,
                log: dir.join("node.log"),
            },
        )
    }

    /// The dataDir down to myid: the dynamic configs lived there, so zoo.cfg's static
    /// config is the first one again.
    fn wipe(&self, node: &str) -> Result<()> {
        let sid = sid_of(node).with_context(|| format!("node name {node} has no sid"))?;
        lazyfs::wipe_data_dir(self.control.as_ref(), node, format!("{sid}\n").as_bytes())
    }

    fn power_loss(
        &self,
        node: &str,
        tear_seed: Option<u64>,
    ) -> Result<::fle_node::lazyfs::DropReport> {
        let binary = self.opts.power_loss.then_some(self.opts.binary.as_path());
        lazyfs::power_loss(self.control.as_ref(), node, binary, tear_seed)
    }

    fn corrupt_file(
        &self,
        node: &str,
        file: &str,
        seed: u64,
    ) -> Result<crate::control::fault::corrupt::Damage> {
        let name = format!("data/{file}");
        let rel = Path::new(&name);
        // A missing epoch file means epoch 0: there is nothing written yet to damage.
        let mut bytes = self.control.read_file(node, rel).unwrap_or_default();
        if bytes.is_empty() {
            anyhow::bail!("{node}: {name} is missing or empty, nothing to damage");
        }
        let d = crate::control::fault::corrupt::damage(&name, &mut bytes, seed);
        self.control.write_file(node, rel, &bytes)?;
        Ok(d)
    }

    fn control(&self) -> &dyn Control {
        self.control.as_ref()
    }

    fn status(&self, node: &str) -> BoxFuture<'_, Result<NodeStatus, ReadError>> {
        let url = self.http_base(node).map(|b| format!("{b}/status"));
        let client = self.status_clients.get(node).cloned();
        Box::pin(async move {
            let url = url.map_err(|e| ReadError::Unreachable(format!("{e:#}")))?;
            let client = client.ok_or_else(|| ReadError::Unreachable("no such node".into()))?;
            let resp = client.get(&url).send().await.map_err(read_error)?;
            if !resp.status().is_success() {
                return Err(ReadError::Unreachable(format!("HTTP {}", resp.status())));
            }
            resp.json::<NodeStatus>()
                .await
                .map_err(|e| ReadError::Timeout(format!("bad status body: {e}")))
        })
    }

    fn write(&self, node: &str, value: serde_json::Value) -> BoxFuture<'_, WriteOutcome> {
        let url = self.http_base(node).map(|b| format!("{b}/write"));
        Box::pin(async move {
            let url = match url {
                Ok(u) => u,
                Err(e) => {
                    return WriteOutcome::Fail {
                        error: format!("{e:#}"),
                        leader_hint: None,
                    }
                }
            };
            let sent = self
                .client
                .post(&url)
                .timeout(self.opts.write_timeout)
                .json(&WriteRequest { value })
                .send()
                .await;
            let resp = match sent {
                Ok(r) => r,
                // Never connected: the node never saw the request.
                Err(e) if e.is_connect() => {
                    return WriteOutcome::Fail {
                        error: format!("cannot connect: {e}"),
                        leader_hint: None,
                    }
                }
                Err(e) => {
                    return WriteOutcome::Info {
                        error: format!("{e}"),
                    }
                }
            };
            let code = resp.status().as_u16();
            match code {
                200 => match resp.json::<WriteCommitted>().await {
                    Ok(c) => WriteOutcome::Ok { zxid: c.zxid },
                    // Committed, but we could not read the zxid: the outcome is not in doubt,
                    // the evidence is; record it as unknown rather than invent a zxid.
                    Err(e) => WriteOutcome::Info {
                        error: format!("200 with unreadable body: {e}"),
                    },
                },
                503 => {
                    let err = resp.json::<ApiError>().await.ok();
                    WriteOutcome::Fail {
                        error: err
                            .as_ref()
                            .map(|e| e.error.clone())
                            .unwrap_or_else(|| "503".into()),
                        leader_hint: err.and_then(|e| e.leader),
                    }
                }
                _ => {
                    let err = resp.json::<ApiError>().await.ok();
                    WriteOutcome::Info {
                        error: err
                            .map(|e| e.error)
                            .unwrap_or_else(|| format!("HTTP {code}")),
                    }
                }
            }
        })
    }

    fn data_write(&self, node: &str, op: DataOp) -> BoxFuture<'_, DataOutcome<DataWritten>> {
        let base = self.http_base(node);
        Box::pin(async move {
            match base {
                Ok(b) => fle_data::write(&self.client, &b, &op, self.opts.write_timeout).await,
                Err(e) => DataOutcome::Unavailable(format!("{e:#}")),
            }
        })
    }

    fn data_read(&self, node: &str, key: &str, sync: bool) -> BoxFuture<'_, DataOutcome<DataRead>> {
        let (base, key) = (self.http_base(node), key.to_string());
        Box::pin(async move {
            match base {
                Ok(b) => {
                    fle_data::read(&self.client, &b, &key, sync, self.opts.write_timeout).await
                }
                Err(e) => DataOutcome::Unavailable(format!("{e:#}")),
            }
        })
    }

    fn read_log(&self, node: &str) -> BoxFuture<'_, Result<LogResponse, ReadError>> {
        let url = self.http_base(node).map(|b| format!("{b}/log?from=0"));
        Box::pin(async move {
            let url = url.map_err(|e| ReadError::Unreachable(format!("{e:#}")))?;
            let resp = self
                .client
                .get(&url)
                .timeout(Duration::from_secs(10))
                .send()
                .await
                .map_err(read_error)?;
            if !resp.status().is_success() {
                return Err(ReadError::Unreachable(format!("HTTP {}", resp.status())));
            }
            resp.json::<LogResponse>()
                .await
                .map_err(|e| ReadError::Timeout(format!("bad log body: {e}")))
        })
    }

    fn log_paths(&self, node: &str) -> Vec<PathBuf> {
        self.control
            .node_dir(node)
            .map(|d| vec![d.join("node.log")])
            .unwrap_or_default()
    }

    fn clock_file(&self, node: &str) -> Option<PathBuf> {
        faketime::node_file(self.control.as_ref(), node, self.opts.faketime)
    }

    fn clock(&self) -> Option<&dyn Clock> {
        clock_of(self.control.as_ref(), self.faketime.as_ref())
    }

    fn reconfig(&self, via: &str, add: &[Member], remove: &[String]) -> DataOutcome<u64> {
        let line = |m: &Member| self.server_line(&m.node, m.observer);
        let lines: Result<Vec<String>> = add.iter().map(line).collect();
        let sids: Option<Vec<u64>> = remove.iter().map(|n| sid_of(n)).collect();
        let (Ok(add), Some(remove), Ok(base)) = (lines, sids, self.http_base(via)) else {
            return DataOutcome::Refused(format!("unknown node among {add:?} {remove:?} {via}"));
        };
        let change = fle_node::membership::Change { add, remove };
        // Committing waits for a quorum of each config: as long as a write may take.
        let sent = self
            .client
            .post(format!("{base}/reconfig"))
            .timeout(self.opts.write_timeout)
            .json(&change)
            .send();
        let done = crate::control::block_on(fle_data::outcome::<ReconfigDone>(sent));
        match done.map_ok(|d| u64::from_str_radix(&d.version, 16)) {
            DataOutcome::Ok(Ok(version)) => DataOutcome::Ok(version),
            DataOutcome::Ok(Err(e)) => {
                DataOutcome::Info(format!("committed, version unreadable: {e}"))
            }
            DataOutcome::Refused(e) => DataOutcome::Refused(e),
            DataOutcome::Unavailable(e) => DataOutcome::Unavailable(e),
            DataOutcome::Info(e) => DataOutcome::Info(e),
        }
    }

    fn election_addr(&self, node: &str) -> Option<SocketAddr> {
        let host = self.control.node_host(node).ok()?;
        Some(SocketAddr::new(host, self.ports(node).ok()?.election))
    }
}
