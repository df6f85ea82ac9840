//! `Target` for real Apache ZooKeeper (Debian's `zookeeper` package, or any 3.5-3.9
//! distribution folder with `--zookeeper-home`): one JVM per node, started through the
//! cluster's `Control` exactly like fle-node (same namespaces or SSH hosts, same kill/pause
//! signals, same libfaketime control file), observed through the AdminServer from the
//! controller and written to with a real ZooKeeper client.
//!
//! - `config`: `zoo.cfg` and `myid`;
//! - `install`: which ZooKeeper, and getting it onto a remote host;
//! - `release`, `jar`: a release on demand (`--zookeeper-version`), from Debian's archive;
//! - `launch`: the JVM command line;
//! - `observe`: AdminServer answers and Zab's epoch files → `api::NodeStatus`;
//! - `epochs`: when the epoch files are read (every observation here, cached over SSH);
//! - `fle_log`, `election_log`: each server's elections as its zookeeper.log tells them, read
//!   into the summary fle-node reports, so vote-rule judges ZooKeeper too;
//! - `client`: sessions, sequential-znode writes with Jepsen outcomes, the final read;
//! - `data`: the register workload's keys as znodes (create, setData, versioned setData,
//!   sync + getData) through the same sessions;
//! - `membership`: dynamic reconfiguration (server lines, `conf`, `reconfig` through a
//!   session) for runs with `reconfig` faults;
//! - `os_setup`: installs the package and a JRE on this machine when missing.

pub mod client;
pub mod config;
pub mod data;
pub mod election_log;
pub mod epochs;
pub mod files;
pub mod fle_log;
pub mod install;
pub mod jar;
pub mod launch;
pub mod membership;
pub mod observe;
pub mod os_setup;
pub mod release;

use crate::api::{
    DataOp, DataRead, DataWritten, ElectionSummary, LogResponse, NodeStatus, ServerState,
};
use crate::control::fault::clock::Clock;
use crate::control::sut::{
    clock_of, BoxFuture, DataOutcome, Member, ReadError, Target, WriteOutcome,
};
use crate::control::{fault::faketime, Control, DaemonSpec};
use crate::history::sid_of;
use anyhow::{Context, Result};
use client::{ClientOptions, Sessions};
use config::{Ports, Server, Timing};
use epochs::{Cadence, EpochFiles, Seen};
use install::Install;
use launch::JvmOptions;
use observe::{LeaderAnswer, Observation, ZabAnswer};
use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
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
    /// Debian's package or a distribution folder (`--zookeeper-home`).
    pub install: Install,
    pub jvm: JvmOptions,
    /// Per status read (both AdminServer requests); a paused server costs its observer this.
    pub status_timeout: Duration,
    /// Per write, end to end.
    pub write_timeout: Duration,
    /// `--zookeeper-config` lines, written last into every server's zoo.cfg.
    pub config: Vec<config::Setting>,
    /// The fle-node binary whose lazyfs holds every dataDir, when the schedule has power-loss
    /// faults (ZooKeeper fsyncs its txnlog and epoch files; a power loss drops the rest).
    pub lazyfs: Option<PathBuf>,
    /// The nodes that only observe (`--observers`).
    pub observers: std::collections::BTreeSet<String>,
    /// The release every server must report (`--zookeeper-version`).
    pub expected_version: Option<String>,
    /// The schedule changes the membership (`reconfig` faults): zoo.cfg enables reconfig, and
    /// every status read asks the server's config too (`membership`).
    pub reconfig: bool,
}

impl ZooKeeperOptions {
    /// Defaults matching fle-node's for the same tick/limits.
    pub fn new(tick_ms: u64, init_limit: u32, sync_limit: u32) -> Self {
        ZooKeeperOptions {
            tick_ms,
            init_limit,
            sync_limit,
            faketime: false,
            install: Install::Debian,
            jvm: JvmOptions::default(),
            status_timeout: Duration::from_millis(500),
            write_timeout: Duration::from_secs(5),
            config: Vec::new(),
            lazyfs: None,
            observers: Default::default(),
            expected_version: None,
            reconfig: false,
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
    /// Zab's epoch files, read as the control's reads allow (see `epochs`).
    epoch_files: EpochFiles,
    /// Where a `--zookeeper-home` is on each remote host (absent: its local path).
    homes: Mutex<HashMap<String, String>>,
    /// The version each server reported (AdminServer `srvr`), once it answered.
    versions: Mutex<BTreeMap<String, String>>,
    /// Each server's elections, from its log.
    elections: election_log::ElectionLogs,
    /// The configs the servers reported, when the run reconfigures.
    configs: membership::Configs,
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
            let observer = opts.observers.contains(node);
            let server = Server {
                sid,
                host,
                ports,
                observer,
            };
            servers.insert(node.clone(), server);
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
        let cadence = if control.reads_are_local() {
            Cadence::EveryObservation
        } else {
            Cadence::OnChange {
                refresh: epochs::REMOTE_REFRESH,
            }
        };
        Ok(ZooKeeper {
            elections: election_log::ElectionLogs::new(cadence != Cadence::EveryObservation),
            epoch_files: EpochFiles::new(cadence),
            homes: Mutex::new(HashMap::new()),
            versions: Mutex::new(BTreeMap::new()),
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
            configs: membership::Configs::default(),
        })
    }

    fn server(&self, node: &str) -> Result<&Server> {
        self.servers
            .get(node)
            .with_context(|| format!("no node named {node}"))
    }

    /// Writes the node's zoo.cfg as the run starts it: every server, the run's timing and
    /// settings.
    fn write_first_config(&self, node: &str) -> Result<()> {
        let me = self.server(node)?;
        let mut servers: Vec<Server> = self.servers.values().cloned().collect();
        servers.sort_by_key(|s| s.sid);
        let timing = Timing {
            tick_ms: self.opts.tick_ms,
            init_limit: self.opts.init_limit,
            sync_limit: self.opts.sync_limit,
        };
        let cfg = config::zoo_cfg(
            me,
            &servers,
            timing,
            &self.data_dir(node)?,
            &self.opts.config,
            self.opts.reconfig,
        );
        self.control
            .write_file(node, "zoo.cfg".as_ref(), cfg.as_bytes())
            .map(drop)
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

    /// The JVM classpath on `node`'s host.
    fn classpath(&self, node: &str) -> String {
        let homes = self.homes.lock().unwrap();
        install::classpath(&self.opts.install, homes.get(node).map(String::as_str))
    }

    /// The epochs of a node on a remote host for an observation that saw `seen` (see `epochs`):
    /// kept, or read and confirmed by asking the AdminServer again; an error when they cannot
    /// be vouched for this observation.
    async fn remote_epochs(
        &self,
        node: &str,
        http: &reqwest::Client,
        base: &str,
        seen: Seen,
    ) -> Result<observe::Epochs, String> {
        if seen.role.is_none() {
            // Not serving: read now, never kept (see `epochs`); `observe::looking_epoch` says
            // whether the read vouches for the epoch reported.
            let control = self.control.as_ref();
            return Ok(crate::control::blocking(|| {
                self.epoch_files.get(control, node, seen)
            }));
        }
        if seen.serving_since.is_none() {
            return Err(
                "srvr unanswered: which serving instance, so which epoch, is unknown".into(),
            );
        }
        if let Some(e) = self.epoch_files.cached(node, &seen) {
            return Ok(e);
        }
        // An SSH round trip blocks; `blocking` lets the worker's other tasks run meanwhile.
        let epochs =
            crate::control::blocking(|| self.epoch_files.read(self.control.as_ref(), node));
        if epochs.current.is_none() {
            return Err("its currentEpoch file could not be read over SSH".into());
        }
        let (leader, srvr) = tokio::join!(
            admin_get(http, format!("{base}/commands/leader")),
            srvr_get(http, base),
        );
        let role = leader
            .ok()
            .and_then(|(body, _)| observe::parse_leader(&body).ok())
            .and_then(|l| match l {
                LeaderAnswer::Serving {
                    is_leader,
                    leader_id,
                } => Some((is_leader, leader_id)),
                LeaderAnswer::NotServing(_) => None,
            });
        let after = Seen {
            role,
            serving_since: srvr.and_then(|(_, start)| start),
            zxid_epoch: seen.zxid_epoch,
        };
        if !epochs::same_instance(&seen, &after) {
            return Err("the server changed role while its epoch files were read".into());
        }
        self.epoch_files.keep(node, epochs, seen);
        Ok(epochs)
    }

    /// `node`'s latest decided election, from its log (see `election_log`).
    fn last_election(&self, node: &str, role: Option<(bool, u64)>) -> Option<ElectionSummary> {
        let log = self.control.node_dir(node).ok()?.join("zookeeper.log");
        let quorum = crate::api::quorum(self.servers.len());
        self.elections
            .last_election(self.control.as_ref(), node, &log, role, |span| {
                fle_log::summary(span, quorum, |addr| self.sid_at(addr))
            })
    }

    /// The server whose quorum (Zab) port is at `addr` (`ip:port`, as a follower's log names
    /// its leader).
    fn sid_at(&self, addr: &str) -> Option<u64> {
        let addr: SocketAddr = addr.parse().ok()?;
        self.servers
            .values()
            .find(|s| SocketAddr::new(s.host, s.ports.quorum) == addr)
            .map(|s| s.sid)
    }

    /// One status read of `node`: its AdminServer's leader and zabstate answers (and srvr when
    /// needed), its epoch files, and what is remembered of it between reads.
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
        // srvr: the version, and over SSH the serving instance's uptime (see `epochs`); locally
        // asked only until the version is known.
        let want_srvr = self.epoch_files.cadence() != Cadence::EveryObservation
            || !self.versions.lock().unwrap().contains_key(node);
        let srvr = async {
            if want_srvr {
                srvr_get(http, &base).await
            } else {
                None
            }
        };
        // Locally the epoch files are read on both sides of the answers (see
        // `observe::unchanged_epochs`): read only after them, a file could already hold the
        // epoch of an election that ended while a slow answer was awaited.
        let local = self.epoch_files.cadence() == Cadence::EveryObservation;
        let files_before = local.then(|| self.epoch_files.read(self.control.as_ref(), node));
        let conf = async {
            let client = SocketAddr::new(server.host, server.ports.client);
            let timeout = self.opts.status_timeout;
            match self.opts.reconfig {
                true => Some(membership::read_config(client, timeout).await),
                false => None,
            }
        };
        let (leader, zab, srvr, conf) = tokio::join!(
            admin_get(http, format!("{base}/commands/leader")),
            admin_get(http, format!("{base}/commands/zabstate")),
            srvr,
            conf,
        );
        let (leader_body, date) = leader?;
        let leader = observe::parse_leader(&leader_body).map_err(ReadError::Timeout)?;
        let role = match &leader {
            LeaderAnswer::Serving {
                is_leader,
                leader_id,
            } => Some((*is_leader, *leader_id)),
            LeaderAnswer::NotServing(_) => None,
        };
        let (srvr, start) = srvr.unwrap_or_default();
        if let (Some(v), Some(_)) = (&srvr.version, role) {
            self.versions
                .lock()
                .unwrap()
                .entry(node.to_string())
                .or_insert_with(|| v.clone());
        }
        // zabstate is secondary evidence: a failed read of it alone does not hide the role.
        let zab = match zab {
            Ok((body, _)) => observe::parse_zabstate(&body).unwrap_or_default(),
            Err(_) => ZabAnswer::default(),
        };
        let seen = Seen {
            role,
            serving_since: start,
            zxid_epoch: zab.last_zxid.map(crate::api::epoch_of),
        };
        let epochs = match self.epoch_files.cadence() {
            Cadence::EveryObservation => {
                let after = self.epoch_files.get(self.control.as_ref(), node, seen);
                observe::unchanged_epochs(files_before.unwrap_or(after), after)
                    .map_err(ReadError::Timeout)?
            }
            Cadence::OnChange { .. } => self
                .remote_epochs(node, http, &base, seen)
                .await
                .map_err(ReadError::Timeout)?,
        };
        let (previous_zxid, uptime_ms, last_served_epoch) = self.remembered(node);
        let wall_clock_ms = date.unwrap_or_else(|| chrono::Utc::now().timestamp_millis());
        let mut status = observe::to_status(&Observation {
            sid: server.sid,
            observer: server.observer,
            leader,
            zab,
            previous_zxid,
            last_served_epoch,
            epochs,
            wall_clock_ms,
            uptime_ms,
        })
        .map_err(ReadError::Timeout)?;
        status.last_election = self.last_election(node, role);
        let conf = conf.map(|answer| answer.or_else(|e| self.config_on_disk(node, e)));
        status.config = conf.and_then(|answer| self.configs.reported(node, answer));
        // A voter a reconfig made an observer observes: its own zoo.cfg still says voter.
        let demoted = (status.config.as_ref()).is_some_and(|c| c.observers.contains(&server.sid));
        if demoted && status.state == ServerState::Following {
            status.state = ServerState::Observing;
            status.peer_type = crate::api::PeerType::Observer;
        }
        self.remember(node, zab.last_zxid, &status);
        Ok(status)
    }

    /// The config `node` runs as its dynamic files say (`membership::newest_dynamic_config`),
    /// for a server that answered `conf` with none (`why`); over SSH none is read.
    fn config_on_disk(&self, node: &str, why: String) -> Result<crate::api::ConfigView, String> {
        if !self.control.reads_are_local() {
            return Err(why);
        }
        let dir = self
            .control
            .node_dir(node)
            .map_err(|e| format!("{why}; {e:#}"))?;
        membership::newest_dynamic_config(&dir).map_err(|e| format!("{why}; {e}"))
    }

    /// What is remembered of `node` between reads: its last zxid read, its uptime since this
    /// controller started it (ms), and the highest epoch it was read serving.
    fn remembered(&self, node: &str) -> (u64, u64, u64) {
        let previous_zxid = self
            .last_zxid
            .lock()
            .unwrap()
            .get(node)
            .copied()
            .unwrap_or(0);
        let uptime_ms = self
            .started
            .lock()
            .unwrap()
            .get(node)
            .map(|t| t.elapsed().as_millis() as u64)
            .unwrap_or(0);
        let last_served_epoch = self
            .served_epoch
            .lock()
            .unwrap()
            .get(node)
            .copied()
            .unwrap_or(0);
        (previous_zxid, uptime_ms, last_served_epoch)
    }

    /// Remembers what a read that counted showed of `node`: its zxid, and the epoch it serves.
    fn remember(&self, node: &str, last_zxid: Option<u64>, status: &NodeStatus) {
        // Kept only from a read that counted: a refused one's zxid must not travel on.
        if let Some(z) = last_zxid {
            self.last_zxid.lock().unwrap().insert(node.to_string(), z);
        }
        if status.state != ServerState::Looking {
            let mut served = self.served_epoch.lock().unwrap();
            let e = served.entry(node.to_string()).or_insert(0);
            *e = (*e).max(status.peer_epoch);
        }
    }
}

/// `/commands/srvr`: what it said, and where it places the serving instance's start (see
/// `epochs::Start`); None when unanswered.
async fn srvr_get(
    http: &reqwest::Client,
    base: &str,
) -> Option<(observe::SrvrAnswer, Option<epochs::Start>)> {
    let sent = Instant::now();
    let (body, _) = admin_get(http, format!("{base}/commands/srvr"))
        .await
        .ok()?;
    let received = Instant::now();
    let answer = observe::parse_srvr(&body);
    let start = answer
        .uptime_ms
        .and_then(|ms| epochs::Start::from_uptime(sent, received, ms));
    Some((answer, start))
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
        // This machine's install is checked before the run (`os_setup`); a remote host's here.
        if !self.control.reads_are_local() {
            let (home, note) =
                install::prepare_host(self.control.as_ref(), node, &self.opts.install)?;
            if let Some(note) = note {
                eprintln!("fle-chaos: {note}");
                tracing::info!("{note}");
            }
            if let Some(home) = home {
                self.homes.lock().unwrap().insert(node.to_string(), home);
            }
        }
        crate::control::fault::lazyfs::data_dir_with_myid(
            self.control.as_ref(),
            node,
            self.opts.lazyfs.as_deref(),
            config::myid(self.server(node)?.sid).as_bytes(),
        )?;
        self.write_first_config(node)?;
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
                args: launch::jvm_args(
                    &self.opts.jvm,
                    &self.classpath(node),
                    &self.config_path(node)?,
                ),
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

    /// The dataDir down to myid, and zoo.cfg the first config again: the dynamic files
    /// ZooKeeper wrote beside it are removed (a replaced pod starts from the StatefulSet's
    /// zoo.cfg, listing every server).
    fn wipe(&self, node: &str) -> Result<()> {
        let myid = config::myid(self.server(node)?.sid);
        crate::control::fault::lazyfs::wipe_data_dir(self.control.as_ref(), node, myid.as_bytes())?;
        let dir = self.control.node_dir(node)?;
        let written = |name: &String| {
            name.starts_with(membership::DYNAMIC_FILE_PREFIX) || name == "zoo.cfg.bak"
        };
        let paths: Vec<String> = (self.control.list_dir(node, ".".as_ref())?.iter())
            .filter(|n| written(n))
            .map(|n| dir.join(n).to_string_lossy().into_owned())
            .collect();
        if !paths.is_empty() {
            // One command for them all: over SSH each is a round trip.
            let args: Vec<&str> = ["-f", "--"]
                .into_iter()
                .chain(paths.iter().map(String::as_str))
                .collect();
            (self.control).exec_host_ok(node, "remove ZooKeeper's dynamic configs", "rm", &args)?;
        }
        self.write_first_config(node)
    }

    fn power_loss(
        &self,
        node: &str,
        tear_seed: Option<u64>,
    ) -> Result<::fle_node::lazyfs::DropReport> {
        let Some(binary) = &self.opts.lazyfs else {
            anyhow::bail!("{node}: its dataDir is not on lazyfs (no power-loss in the schedule)");
        };
        crate::control::fault::lazyfs::drop_unsynced(self.control.as_ref(), node, binary, tear_seed)
    }

    fn corrupt_file(
        &self,
        node: &str,
        file: &str,
        seed: u64,
    ) -> Result<crate::control::fault::corrupt::Damage> {
        let dir = Path::new(files::VERSION_DIR);
        let names = self.control.list_dir(node, dir)?;
        let Some(name) = files::pick(&names, file) else {
            anyhow::bail!(
                "{node}: {} has no {file} yet, nothing to damage",
                files::VERSION_DIR
            );
        };
        let rel = dir.join(&name);
        let mut bytes = self.control.read_file(node, &rel)?;
        if bytes.is_empty() {
            anyhow::bail!("{node}: {} is empty, nothing to damage", rel.display());
        }
        let d = files::damage(&rel.to_string_lossy(), &mut bytes, seed);
        self.control.write_file(node, &rel, &bytes)?;
        Ok(d)
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

    fn data_write(&self, node: &str, op: DataOp) -> BoxFuture<'_, DataOutcome<DataWritten>> {
        let node = node.to_string();
        Box::pin(async move { self.sessions.data_write(&node, &op).await })
    }

    fn data_read(&self, node: &str, key: &str, sync: bool) -> BoxFuture<'_, DataOutcome<DataRead>> {
        let (node, key) = (node.to_string(), key.to_string());
        Box::pin(async move { self.sessions.data_read(&node, &key, sync).await })
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

    /// ZooKeeper's incremental `reconfig` through `via`'s session (see `membership`).
    fn reconfig(&self, via: &str, add: &[Member], remove: &[String]) -> DataOutcome<u64> {
        let line = |m: &Member| {
            let server = self.servers.get(&m.node)?;
            let as_asked = Server {
                observer: m.observer,
                ..server.clone()
            };
            Some(membership::server_line(&as_asked, true))
        };
        let lines: Option<Vec<String>> = add.iter().map(line).collect();
        let sids: Option<Vec<u64>> = remove.iter().map(|n| sid_of(n)).collect();
        let (Some(lines), Some(sids), true) = (lines, sids, self.opts.reconfig) else {
            return DataOutcome::Refused(format!(
                "unknown node among {add:?} {remove:?}, or a run without reconfig faults"
            ));
        };
        self.configs.reconfig_asked();
        crate::control::block_on(self.sessions.reconfig(via, &lines, &sids))
    }

    fn election_addr(&self, node: &str) -> Option<SocketAddr> {
        let s = self.servers.get(node)?;
        Some(SocketAddr::new(s.host, s.ports.election))
    }

    fn software(&self) -> Option<serde_json::Value> {
        let mut software = serde_json::json!({
            "install": self.opts.install.describe(),
            "versions": *self.versions.lock().unwrap(),
            "epoch_files": self.epoch_files.describe(),
        });
        // Over SSH with --zookeeper-home: where each host ran it from, and whether it was
        // uploaded (into the node's folder, so removed with it) or already there.
        if let install::Install::Home(local) = &self.opts.install {
            let homes = self.homes.lock().unwrap();
            if !homes.is_empty() {
                let local = local.to_string_lossy();
                let on_hosts: BTreeMap<&String, serde_json::Value> = homes
                    .iter()
                    .map(|(node, path)| {
                        let how = if *path == local { "there" } else { "uploaded" };
                        (node, serde_json::json!({ "path": path, "how": how }))
                    })
                    .collect();
                software["homes"] = serde_json::json!(on_hosts);
            }
        }
        Some(software)
    }
}
