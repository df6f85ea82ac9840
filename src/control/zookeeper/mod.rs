//! `Target` for real Apache ZooKeeper 3.8 (Debian's `zookeeper` package): one JVM per node,
//! started through the cluster's `Control` exactly like fle-node (same namespaces, same
//! kill/pause signals, same libfaketime control file), observed through the AdminServer and
//! written to with a real ZooKeeper client.
//!
//! - `config`: `zoo.cfg` and `myid`;
//! - `launch`: the JVM command line;
//! - `observe`: AdminServer answers and Zab's epoch files → `api::NodeStatus`;
//! - `client`: sessions, sequential-znode writes with Jepsen outcomes, the final read;
//! - `os_setup`: installs the package and a JRE when missing.

pub mod client;
pub mod config;
pub mod launch;
pub mod observe;
pub mod os_setup;

use super::clock::Clock;
use super::target::{clock_of, BoxFuture, ReadError, Target, WriteOutcome};
use super::{faketime, Control, DaemonSpec};
use crate::api::{LogResponse, NodeStatus, ServerState};
use crate::history::sid_of;
use anyhow::{Context, Result};
use client::{ClientOptions, Sessions};
use config::{Ports, Server, Timing};
use launch::JvmOptions;
use observe::{Epochs, Observation, ZabAnswer};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How to run ZooKeeper.
#[derive(Debug, Clone)]
pub struct ZooKeeperOptions {
    pub tick_ms: u64,
    pub init_limit: u32,
    pub sync_limit: u32,
    /// Start servers under libfaketime (the clock nemesis needs it).
    pub faketime: bool,
    pub jvm: JvmOptions,
    /// Per status read (both AdminServer requests); a paused server costs its observer this.
    pub status_timeout: Duration,
    /// Per write, end to end.
    pub write_timeout: Duration,
}

impl ZooKeeperOptions {
    /// Defaults matching fle-node's for the same tick/limits.
    pub fn new(tick_ms: u64, init_limit: u32, sync_limit: u32) -> Self {
        ZooKeeperOptions {
            tick_ms,
            init_limit,
            sync_limit,
            faketime: false,
            jvm: JvmOptions::default(),
            status_timeout: Duration::from_millis(500),
            write_timeout: Duration::from_secs(5),
        }
    }
}

pub struct ZooKeeper {
    control: Arc<dyn Control>,
    opts: ZooKeeperOptions,
    servers: HashMap<String, Server>,
    /// One keep-alive HTTP client per node for the AdminServer (short timeouts).
    admin_clients: HashMap<String, reqwest::Client>,
    sessions: Sessions,
    /// When each server was last started (uptime is measured by the controller).
    started: Mutex<HashMap<String, Instant>>,
    /// The last zxid each server reported (ZooKeeper reports none while it elects).
    last_zxid: Mutex<HashMap<String, u64>>,
    /// The epoch each server last served in (see `observe`: reported while it does not serve).
    served_epoch: Mutex<HashMap<String, u64>>,
    /// The servers' clocks when they run under libfaketime.
    faketime: Option<faketime::FaketimeClock>,
}

impl ZooKeeper {
    pub fn new(control: Arc<dyn Control>, opts: ZooKeeperOptions) -> Result<Self> {
        let mut servers = HashMap::new();
        let mut admin_clients = HashMap::new();
        let mut client_addrs = HashMap::new();
        for node in control.nodes() {
            let sid = sid_of(node).with_context(|| format!("node name {node} has no sid"))?;
            let host = control.node_host(node)?;
            let ports = Ports {
                client: control.node_port(node, 2181)?,
                quorum: control.node_port(node, 2888)?,
                election: control.node_port(node, 3888)?,
                admin: control.node_port(node, 8080)?,
            };
            servers.insert(node.clone(), Server { sid, host, ports });
            client_addrs.insert(node.clone(), SocketAddr::new(host, ports.client));
            admin_clients.insert(
                node.clone(),
                reqwest::Client::builder()
                    .timeout(opts.status_timeout)
                    .connect_timeout(opts.status_timeout)
                    .tcp_nodelay(true)
                    .pool_max_idle_per_host(2)
                    .no_proxy()
                    .build()?,
            );
        }
        let sessions = Sessions::new(
            client_addrs,
            ClientOptions {
                // The longest the servers grant (20 ticks): a session should outlive a
                // leader change, as a real application's would.
                session_timeout: Duration::from_millis(opts.tick_ms * 20),
                connect_timeout: Duration::from_secs(1),
                write_timeout: opts.write_timeout,
                read_timeout: Duration::from_secs(30),
            },
        );
        Ok(ZooKeeper {
            faketime: opts
                .faketime
                .then(|| faketime::FaketimeClock::new(control.clone())),
            control,
            opts,
            servers,
            admin_clients,
            sessions,
            started: Mutex::new(HashMap::new()),
            last_zxid: Mutex::new(HashMap::new()),
            served_epoch: Mutex::new(HashMap::new()),
        })
    }

    fn server(&self, node: &str) -> Result<&Server> {
        self.servers
            .get(node)
            .with_context(|| format!("no node named {node}"))
    }

    fn data_dir(&self, node: &str) -> Result<PathBuf> {
        Ok(self.control.node_dir(node)?.join("data"))
    }

    fn config_path(&self, node: &str) -> Result<PathBuf> {
        Ok(self.control.node_dir(node)?.join("zoo.cfg"))
    }

    /// The address of the node's client port (for people and tests: `echo srvr | nc`).
    pub fn client_addr(&self, node: &str) -> Result<SocketAddr> {
        let s = self.server(node)?;
        Ok(SocketAddr::new(s.host, s.ports.client))
    }

    /// Closes the workload's sessions; call before teardown so no client retries a dead node.
    pub async fn close_sessions(&self) {
        self.sessions.close_all().await;
    }

    fn epochs(&self, node: &str) -> Epochs {
        let Ok(dir) = self.data_dir(node) else {
            return Epochs::default();
        };
        let v2 = dir.join("version-2");
        Epochs {
            current: observe::read_epoch_file(&v2.join("currentEpoch")),
            accepted: observe::read_epoch_file(&v2.join("acceptedEpoch")),
        }
    }

    async fn observe(&self, node: &str) -> Result<NodeStatus, ReadError> {
        let server = self
            .server(node)
            .map_err(|e| ReadError::Unreachable(format!("{e:#}")))?;
        let http = self
            .admin_clients
            .get(node)
            .ok_or_else(|| ReadError::Unreachable(format!("no node named {node}")))?;
        let base = format!(
            "http://{}",
            SocketAddr::new(server.host, server.ports.admin)
        );
        let (leader, zab) = tokio::join!(
            admin_get(http, format!("{base}/commands/leader")),
            admin_get(http, format!("{base}/commands/zabstate")),
        );
        let (leader_body, date) = leader?;
        let leader = observe::parse_leader(&leader_body).map_err(ReadError::Timeout)?;
        // zabstate is secondary evidence: a failed read of it alone does not hide the role.
        let zab = match zab {
            Ok((body, _)) => observe::parse_zabstate(&body).unwrap_or_default(),
            Err(_) => ZabAnswer::default(),
        };
        let previous_zxid = {
            let mut seen = self.last_zxid.lock().unwrap();
            let prev = seen.get(node).copied().unwrap_or(0);
            if let Some(z) = zab.last_zxid {
                seen.insert(node.to_string(), z);
            }
            prev
        };
        let uptime_ms = self
            .started
            .lock()
            .unwrap()
            .get(node)
            .map(|t| t.elapsed().as_millis() as u64)
            .unwrap_or(0);
        let wall_clock_ms = date.unwrap_or_else(|| chrono::Utc::now().timestamp_millis());
        let last_served_epoch = self
            .served_epoch
            .lock()
            .unwrap()
            .get(node)
            .copied()
            .unwrap_or(0);
        let status = observe::to_status(&Observation {
            sid: server.sid,
            leader,
            zab,
            previous_zxid,
            last_served_epoch,
            epochs: self.epochs(node),
            wall_clock_ms,
            uptime_ms,
        });
        if status.state != ServerState::Looking {
            let mut served = self.served_epoch.lock().unwrap();
            let e = served.entry(node.to_string()).or_insert(0);
            *e = (*e).max(status.peer_epoch);
        }
        Ok(status)
    }
}

/// One AdminServer GET: the body and the server's `Date` header in ms (its wall clock).
async fn admin_get(
    http: &reqwest::Client,
    url: String,
) -> Result<(Vec<u8>, Option<i64>), ReadError> {
    let resp = http.get(&url).send().await.map_err(|e| {
        if e.is_connect() {
            ReadError::Unreachable(format!("cannot connect to the AdminServer: {e}"))
        } else {
            ReadError::Timeout(format!("AdminServer: {e}"))
        }
    })?;
    let date = resp
        .headers()
        .get(reqwest::header::DATE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| chrono::DateTime::parse_from_rfc2822(v).ok())
        .map(|d| d.timestamp_millis());
    let status = resp.status();
    let body = resp
        .bytes()
        .await
        .map_err(|e| ReadError::Timeout(format!("AdminServer body: {e}")))?;
    if status.is_server_error() {
        // ZooKeeper 3.8 answers some commands with a 500 (a null server) while it elects.
        let not_serving = serde_json::json!({ "error": format!("HTTP {status} while electing") });
        return Ok((not_serving.to_string().into_bytes(), date));
    }
    Ok((body.to_vec(), date))
}

impl Target for ZooKeeper {
    fn name(&self) -> &'static str {
        "zookeeper"
    }

    fn nodes(&self) -> Vec<String> {
        self.control.nodes().to_vec()
    }

    fn setup(&self, node: &str) -> Result<()> {
        let me = self.server(node)?;
        let mut servers: Vec<Server> = self.servers.values().cloned().collect();
        servers.sort_by_key(|s| s.sid);
        let timing = Timing {
            tick_ms: self.opts.tick_ms,
            init_limit: self.opts.init_limit,
            sync_limit: self.opts.sync_limit,
        };
        let cfg = config::zoo_cfg(me, &servers, timing, &self.data_dir(node)?);
        self.control
            .write_file(node, "data/myid".as_ref(), config::myid(me.sid).as_bytes())?;
        self.control
            .write_file(node, "zoo.cfg".as_ref(), cfg.as_bytes())?;
        if self.opts.faketime {
            faketime::prepare(&self.control.node_dir(node)?)?;
        }
        Ok(())
    }

    fn start(&self, node: &str) -> Result<u32> {
        let dir = self.control.node_dir(node)?;
        let env = match self.clock_file(node) {
            Some(file) => faketime::env(&file),
            None => Vec::new(),
        };
        let pid = self.control.spawn(
            node,
            &DaemonSpec {
                program: self.opts.jvm.java.clone(),
                args: launch::jvm_args(&self.opts.jvm, &self.config_path(node)?),
                env,
                log: dir.join("zookeeper.log"),
            },
        )?;
        self.started
            .lock()
            .unwrap()
            .insert(node.to_string(), Instant::now());
        Ok(pid)
    }

    fn control(&self) -> &dyn Control {
        self.control.as_ref()
    }

    fn status(&self, node: &str) -> BoxFuture<'_, Result<NodeStatus, ReadError>> {
        let node = node.to_string();
        Box::pin(async move { self.observe(&node).await })
    }

    fn write(&self, node: &str, value: serde_json::Value) -> BoxFuture<'_, WriteOutcome> {
        let node = node.to_string();
        Box::pin(async move { self.sessions.write(&node, value).await })
    }

    fn read_log(&self, node: &str) -> BoxFuture<'_, Result<LogResponse, ReadError>> {
        let node = node.to_string();
        Box::pin(async move { self.sessions.read_log(&node).await })
    }

    fn log_paths(&self, node: &str) -> Vec<PathBuf> {
        self.control
            .node_dir(node)
            .map(|d| vec![d.join("zookeeper.log")])
            .unwrap_or_default()
    }

    fn clock_file(&self, node: &str) -> Option<PathBuf> {
        faketime::node_file(self.control.as_ref(), node, self.opts.faketime)
    }

    fn clock(&self) -> Option<&dyn Clock> {
        clock_of(self.control.as_ref(), self.faketime.as_ref())
    }
}
