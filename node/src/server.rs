//! The server loop: the thin tokio shell around the election state machine.
//!
//! It binds the three ports, feeds the election its notifications and timer deadlines,
//! carries out its outputs (sends, decisions), runs Zab after a decision (lead or follow)
//! and starts looking again when that role ends. Every state change is published to the
//! HTTP status and logged as one structured line.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::net::{SocketAddr, ToSocketAddrs};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use crate::api::{ConfigView, NodeStatus, ServerState, ZabPhase};
use crate::bugs::{Bug, Bugs};
use crate::config::Config;
use crate::data::SharedTree;
use crate::data_route::Data;
use crate::election::{Decision, Election, ElectionConfig, ElectionCounters, Output};
use crate::follow_streak::FollowStreak;
use crate::http::{self, HttpState};
use crate::membership::{self, Members, Membership};
use crate::peers::{Identity, Peers};
use crate::wire::Notification;
use crate::write_route::{Route, Writes};
use crate::zab::accept::{self, AcceptConfig, Lobby};
use crate::zab::store::{lock, SharedStore};
use crate::zab::{self, Store, SyncMode, ZabConfig, ZabProgress};

/// Flags beyond zoo.cfg.
#[derive(Debug, Clone)]
pub struct Options {
    pub finalize_wait: Duration,
    pub max_notification_interval: Duration,
    /// Seeded bugs (`--bug`); none by default.
    pub bugs: Bugs,
}

/// A Zab role: `Ok(why it ended)`, or `Err` for a local failure (port, disk) that ends the node.
type RoleFuture = Pin<Box<dyn Future<Output = anyhow::Result<String>> + Send>>;

/// Writes queued for the leader per term before senders wait.
const WRITE_QUEUE: usize = 4096;

/// The server's three listening sockets, bound before anything else starts.
struct Ports {
    election: TcpListener,
    quorum: TcpListener,
    http: TcpListener,
    /// admin.serverAddress:admin.serverPort, as logged.
    admin: String,
}

impl Ports {
    /// Binds the election, quorum and admin ports; a port taken is an error naming it.
    async fn bind(cfg: &Config) -> anyhow::Result<Ports> {
        let me = cfg.me();
        let election = TcpListener::bind(me.election()).await.with_context(|| {
            format!(
                "cannot listen on the election port {} (server.{})",
                me.election(),
                cfg.sid
            )
        })?;
        let quorum = TcpListener::bind(me.quorum()).await.with_context(|| {
            format!(
                "cannot listen on the quorum port {} (server.{})",
                me.quorum(),
                cfg.sid
            )
        })?;
        let admin = format!("{}:{}", cfg.admin_address, cfg.admin_port);
        let http = TcpListener::bind(&admin).await.with_context(|| {
            format!("cannot listen on admin.serverAddress:admin.serverPort {admin}")
        })?;
        Ok(Ports {
            election,
            quorum,
            http,
            admin,
        })
    }
}

/// Runs the server until SIGTERM/SIGINT: opens the store, binds the ports, starts the peers,
/// the HTTP API and the quorum port's accept loop, then serves (`serve`) until a signal.
pub async fn run(cfg: Config, opts: Options) -> anyhow::Result<()> {
    let started = std::time::Instant::now();
    let sid = cfg.sid;
    // A repaired (torn or corrupt) log tail is logged as a WARN line by open_logged.
    let (store, _repair) = Store::open_logged(&cfg.data_dir)
        .with_context(|| format!("opening dataDir {}", cfg.data_dir.display()))?;
    let on_disk = {
        let s = lock(&store);
        (s.current_epoch(), s.accepted_epoch(), s.last_logged_zxid())
    };
    let initial = initial_status(&cfg, &lock(&store));
    let me = cfg.me().clone();
    let ports = Ports::bind(&cfg).await?;

    let identity = Identity {
        sid: cfg.sid,
        host: me.host.clone(),
        election_addr: me.election(),
    };
    let (inbound_tx, inbound) = mpsc::channel(256);
    // ZooKeeper's socket timeout for a first packet on either server port.
    let handshake_deadline = Duration::from_millis(cfg.tick_time_ms * cfg.init_limit);
    let peers = Peers::start_with(
        identity,
        ports.election,
        election_addrs(&cfg),
        inbound_tx,
        handshake_deadline,
        opts.bugs,
    );
    let (members_tx, members) = watch::channel(cfg.membership());

    let ecfg = election_config(&cfg, &opts);
    let quorum = ecfg.quorum();
    let zab_cfg = zab_config(&cfg, &opts, quorum)?;
    let election = Election::new(ecfg, Instant::now().into_std());

    let (status_tx, status_rx) = watch::channel(initial);
    let status_tx = Arc::new(status_tx);
    let election_counters = Arc::new(Mutex::new(ElectionCounters::default()));
    let writes = writes_of(&zab_cfg, members.clone());
    let sync_mode = Arc::new(Mutex::new(None));
    let data = Data {
        writes: writes.clone(),
        tree: SharedTree::default(),
        store: store.clone(),
        status: status_rx.clone(),
        bugs: opts.bugs,
    };
    let http_state = HttpState {
        data,
        bugs: opts.bugs,
        sync_mode: sync_mode.clone(),
        store: store.clone(),
        writes: writes.clone(),
        status: status_rx,
        started,
        wire: peers.counters.clone(),
        election: election_counters.clone(),
        members: members.clone(),
        max_body: cfg.max_buffer,
    };
    spawn_http(ports.http, http_state, &writes, &peers);
    let lobby = Arc::new(Lobby::default());
    spawn_accept(
        ports.quorum,
        cfg.sid,
        members,
        handshake_deadline,
        &lobby,
        &peers,
    );
    log_started(&cfg, quorum, &ports.admin, on_disk);

    let shell = Shell {
        sid: cfg.sid,
        peers,
        status: status_tx,
        counters: election_counters,
        store,
        zab: zab_cfg,
        lobby,
        writes,
        role: None,
        progress: None,
        follow_streak: FollowStreak::default(),
        cfg,
        opts,
        members: members_tx,
    };
    serve(shell, election, inbound, &sync_mode).await?;
    tracing::info!(sid, "fle-node stopping");
    Ok(())
}

/// The election's settings from zoo.cfg and the flags.
fn election_config(cfg: &Config, opts: &Options) -> ElectionConfig {
    ElectionConfig {
        sid: cfg.sid,
        voters: cfg.voters(),
        observers: cfg.observers(),
        finalize_wait: opts.finalize_wait,
        max_notification_interval: opts.max_notification_interval,
        bugs: opts.bugs,
        config_bytes: cfg.membership().text().into_bytes(),
        config_version: cfg.version,
        removed: BTreeSet::new(),
    }
}

/// Zab's settings from zoo.cfg, with the election's `quorum`.
fn zab_config(cfg: &Config, opts: &Options, quorum: usize) -> anyhow::Result<ZabConfig> {
    let mut zab_cfg = ZabConfig::new(
        cfg.sid,
        resolve_quorum_addrs(cfg)?,
        cfg.observers(),
        Duration::from_millis(cfg.tick_time_ms),
        cfg.init_limit as u32,
        cfg.sync_limit as u32,
    );
    // The seeded quorum-minority bug shrinks Zab's quorum too, so a minority can commit as
    // well as elect.
    zab_cfg.quorum = quorum;
    zab_cfg.bugs = opts.bugs;
    zab_cfg.config_version = cfg.version;
    Ok(zab_cfg)
}

/// Where writes go: looking until a role starts, the servers' client addresses to forward
/// to (`members`), and how long a forwarded write waits (twice Zab's write timeout).
fn writes_of(zab_cfg: &ZabConfig, members: Members) -> Writes {
    Writes {
        route: Arc::new(Mutex::new(Route::Looking)),
        members,
        wait: zab_cfg.write_timeout * 2,
    }
}

/// Every server's election "host:port", by sid (the election transport's peers).
fn election_addrs(cfg: &Config) -> BTreeMap<u64, String> {
    cfg.servers
        .iter()
        .map(|(sid, a)| (*sid, a.election()))
        .collect()
}

/// Serves the HTTP API on `listener` (idle connections closed after the longer of the
/// API's idle timeout and twice a forwarded write's wait).
fn spawn_http(listener: TcpListener, state: HttpState, writes: &Writes, peers: &Peers) {
    let app = http::router(state);
    let guarded = http::Guarded::new(
        listener,
        http::IDLE_TIMEOUT.max(writes.wait * 2),
        peers.counters.clone(),
    );
    tokio::spawn(async move {
        if let Err(e) = axum::serve(guarded, app).await {
            tracing::error!(error = %e, "HTTP API stopped");
        }
    });
}

/// Accepts and identifies connections on the quorum port into `lobby`, where the leader of
/// a term takes its followers.
fn spawn_accept(
    listener: TcpListener,
    my_sid: u64,
    members: Members,
    deadline: Duration,
    lobby: &Arc<Lobby>,
    peers: &Peers,
) {
    tokio::spawn(accept::accept_loop(
        listener,
        AcceptConfig {
            my_sid,
            members,
            deadline,
        },
        lobby.clone(),
        peers.counters.clone(),
        peers.warnings.clone(),
    ));
}

/// The one "fle-node started" line: who it is, its ports, and its epochs and last zxid on
/// disk (`on_disk`).
fn log_started(cfg: &Config, quorum: usize, admin: &str, on_disk: (u64, u64, u64)) {
    let me = cfg.me();
    let (current_epoch, accepted_epoch, last_zxid) = on_disk;
    tracing::info!(
        sid = cfg.sid,
        peer_type = if cfg.me().peer_type.is_observer() { "observer" } else { "participant" },
        voters = cfg.voters().len(),
        observers = cfg.observers().len(),
        quorum,
        election = %me.election(),
        quorum_port = %me.quorum(),
        admin = %admin,
        current_epoch,
        accepted_epoch,
        last_zxid = format_args!("{last_zxid:#x}"),
        "fle-node started"
    );
}

/// Looks, then loops until SIGTERM/SIGINT: one `select!` over election notifications, the
/// election's deadline, the role's progress and its end, and the signals, which share the
/// server's state (store, election, role); each arm hands off to the machine that decides
/// (`election`, `zab`).
async fn serve(
    mut shell: Shell,
    mut election: Election,
    mut inbound: mpsc::Receiver<(u64, Notification)>,
    sync_mode: &Mutex<Option<SyncMode>>,
) -> anyhow::Result<()> {
    // A reconfig committed in the log but not activated before the server stopped.
    shell.activate_committed(&mut election)?;
    shell.look(&mut election)?;

    let mut sigterm = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    loop {
        let deadline = election.next_deadline().map(Instant::from_std);
        tokio::select! {
            Some((from, n)) = inbound.recv() => {
                let out = election.step(Instant::now().into_std(), from, n);
                shell.apply(&mut election, out)?;
            }
            _ = sleep_until_opt(deadline), if deadline.is_some() => {
                let out = election.tick(Instant::now().into_std());
                shell.apply(&mut election, out)?;
            }
            Some(p) = progress_changed(&mut shell.progress) => {
                if p.zab_phase == ZabPhase::Broadcast {
                    shell.follow_streak.reached_broadcast();
                    // Leading an acknowledged term or synced: answer with its epoch.
                    election.update_peer_epoch(p.peer_epoch);
                }
                shell.status.send_modify(|s| p.apply_to(s));
                shell.activate_in_role(&mut election)?;
                if p.sync_mode.is_some() {
                    *sync_mode.lock().unwrap_or_else(|e| e.into_inner()) = p.sync_mode;
                }
            }
            end = role_done(&mut shell.role), if shell.role.is_some() => {
                shell.role = None;
                shell.progress = None;
                let reason = end.context("Zab failed on this server (see the error; fix it and restart)")?;
                shell.follow_streak.role_ended(shell.sid, &reason, Instant::now(), &shell.zab);
                shell.activate_committed(&mut election)?;
                shell.look(&mut election)?;
            }
            _ = tokio::signal::ctrl_c() => break,
            _ = sigterm.recv() => break,
        }
    }
    Ok(())
}

async fn sleep_until_opt(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

async fn role_done(role: &mut Option<RoleFuture>) -> anyhow::Result<String> {
    match role.as_mut() {
        Some(f) => f.await,
        None => std::future::pending().await,
    }
}

/// The role's next progress; pending while no role runs (or once it dropped its sender).
async fn progress_changed(rx: &mut Option<watch::Receiver<ZabProgress>>) -> Option<ZabProgress> {
    if let Some(rx) = rx.as_mut() {
        if rx.changed().await.is_ok() {
            return Some(rx.borrow_and_update().clone());
        }
    }
    std::future::pending().await
}

/// server.N quorum addresses as socket addresses (Zab dials and binds them).
fn resolve_quorum_addrs(cfg: &Config) -> anyhow::Result<BTreeMap<u64, SocketAddr>> {
    cfg.servers
        .iter()
        .map(|(sid, a)| {
            let text = a.quorum();
            let addr = text
                .to_socket_addrs()
                .ok()
                .and_then(|mut it| it.next())
                .with_context(|| {
                    format!("server.{sid}: cannot resolve the quorum address {text} (use an IP or a resolvable host name)")
                })?;
            Ok((*sid, addr))
        })
        .collect()
}

/// The server's side effects, kept apart from the election state machine.
struct Shell {
    sid: u64,
    peers: Peers,
    status: Arc<watch::Sender<NodeStatus>>,
    counters: Arc<Mutex<ElectionCounters>>,
    /// Shared with Zab (which persists epochs and the log) and `/log`.
    store: SharedStore,
    zab: ZabConfig,
    /// Identified connections on our quorum port, for the leader of a term to take.
    lobby: Arc<Lobby>,
    writes: Writes,
    role: Option<RoleFuture>,
    /// The running role's progress, copied into `/status`.
    progress: Option<watch::Receiver<ZabProgress>>,
    follow_streak: FollowStreak,
    /// The config in force (its membership changes with each activated reconfig).
    cfg: Config,
    opts: Options,
    /// Tells the peers' acceptor, the quorum port and HTTP of each activated config.
    members: watch::Sender<Membership>,
}

impl Shell {
    /// (last logged zxid, currentEpoch): what my own vote is made of.
    fn vote_basis(&self) -> (u64, u64) {
        let store = lock(&self.store);
        (store.last_logged_zxid(), store.current_epoch())
    }

    fn apply(&mut self, election: &mut Election, out: Vec<Output>) -> anyhow::Result<()> {
        let mut newer = None;
        for o in out {
            match o {
                Output::Send { to, notification } => self.peers.send(to, &notification),
                Output::Decided(d) => self.decided(election, d),
                Output::NewerConfig(m) => newer = Some(m),
            }
        }
        *self.counters.lock().unwrap_or_else(|e| e.into_inner()) = election.counters();
        if let Some(m) = newer {
            tracing::info!(
                sid = self.sid,
                version = format_args!("{:#x}", m.version),
                "a peer runs under a newer config: adopting it"
            );
            self.activate(election, m)?;
            self.look(election)?;
        }
        Ok(())
    }

    /// Starts a new round of the election (after start-up, a role's end or an activation).
    fn look(&mut self, election: &mut Election) -> anyhow::Result<()> {
        let (zxid, epoch) = self.vote_basis();
        let out = election.start_looking(Instant::now().into_std(), zxid, epoch);
        self.looking(election);
        self.apply(election, out)
    }

    /// Activates the newest reconfig committed in the log, if it is newer than the config in
    /// force (a role ends when one commits; a restart finds one not yet activated).
    fn activate_committed(&mut self, election: &mut Election) -> anyhow::Result<()> {
        let committed = lock(&self.store).committed_config();
        match committed.filter(|m| m.version > self.cfg.version) {
            Some(m) => self.activate(election, m),
            None => Ok(()),
        }
    }

    /// Puts config `m` in force: saved as this server's dynamic config first, then the
    /// election, Zab's settings, the election peers and the readers of the members follow.
    /// The caller looks next (`look`), which shows it in `/status`.
    fn activate(&mut self, election: &mut Election, m: Membership) -> anyhow::Result<()> {
        let dir = self.cfg.data_dir.clone();
        membership::save(&dir, &m).with_context(|| {
            format!(
                "saving config version {:#x} in {}",
                m.version,
                dir.display()
            )
        })?;
        let next = self.cfg.with_membership(&m);
        let before = std::mem::replace(&mut self.cfg, next);
        let mut ecfg = election_config(&self.cfg, &self.opts);
        ecfg.removed = &before.voters() - &self.cfg.voters();
        self.zab = zab_config(&self.cfg, &self.opts, ecfg.quorum())?;
        let mut links = election_addrs(&self.cfg);
        if self.opts.bugs.has(Bug::RemovedVoterCounted) {
            // Seeded removed-voter-counted: the links to the removed voters stay up, so their
            // notifications still arrive (and the election counts them).
            let old = election_addrs(&before);
            links.extend(
                ecfg.removed
                    .iter()
                    .filter_map(|s| Some((*s, old.get(s)?.clone()))),
            );
        }
        election.reconfigure(ecfg);
        self.peers.set_peers(links);
        // `/status` shows the new config with the LOOKING that follows (`looking`), in one
        // change: a read must never see the old role under the new config.
        tracing::info!(
            sid = self.sid,
            version = format_args!("{:#x}", m.version),
            voters = ?m.voters(),
            observers = ?m.observers(),
            member = m.servers.contains_key(&self.sid),
            "config activated"
        );
        self.members.send_replace(m);
        Ok(())
    }

    /// Seeded removed-leader-keeps-leading: no role ends when a reconfig commits, so the
    /// server activates it while its role runs, and `/status` shows the new config beside the
    /// role (a correct server shows a new config only with the LOOKING that follows it).
    fn activate_in_role(&mut self, election: &mut Election) -> anyhow::Result<()> {
        if !self.opts.bugs.has(Bug::RemovedLeaderKeepsLeading) {
            return Ok(());
        }
        let version = self.cfg.version;
        self.activate_committed(election)?;
        if self.cfg.version != version {
            let config = config_view(&self.cfg);
            self.status.send_modify(|s| s.config = config);
        }
        Ok(())
    }

    fn looking(&mut self, election: &Election) {
        self.writes.set(Route::Looking);
        let p = ZabProgress::from_store(&lock(&self.store), ZabPhase::Election, None);
        let (epoch, zxid) = (p.peer_epoch, p.last_zxid);
        // The config in force with the state: an activation is always followed by a look.
        let config = config_view(&self.cfg);
        let peer_type = self.cfg.servers.get(&self.sid).map(|a| a.peer_type);
        self.status.send_modify(|s| {
            s.state = ServerState::Looking;
            s.leader = None;
            s.election_epoch = election.logicalclock();
            s.config = config;
            s.peer_type = peer_type.unwrap_or(s.peer_type);
            p.apply_to(s);
        });
        if !self.follow_streak.loud() {
            return;
        }
        tracing::info!(
            sid = self.sid,
            state = "LOOKING",
            round = election.logicalclock(),
            zxid = format_args!("{zxid:#x}"),
            peer_epoch = epoch,
            "state change"
        );
    }

    fn decided(&mut self, election: &Election, d: Decision) {
        if !self.cfg.servers.contains_key(&self.sid) {
            // Removed by a reconfig: no role to take (ZooKeeper's removed server follows as a
            // non-voter). It stays LOOKING, and looks again a while later, until a reconfig
            // adds it back (its new config arrives in the peers' notifications).
            let wait = self.zab.tick * self.zab.init_limit;
            let why = format!(
                "not in config version {:#x}: no role until a reconfig adds this server back",
                self.cfg.version
            );
            self.role = Some(Box::pin(async move {
                tokio::time::sleep(wait).await;
                Ok(why)
            }));
            return;
        }
        let state_name = match d.state {
            ServerState::Leading => "LEADING",
            ServerState::Following => "FOLLOWING",
            ServerState::Observing => "OBSERVING",
            ServerState::Looking => "LOOKING",
        };
        let took_ms = d.took.as_millis() as u64;
        if self.follow_streak.loud() {
            tracing::info!(
                sid = self.sid,
                state = state_name,
                leader = d.vote.leader,
                round = d.round,
                leader_zxid = format_args!("{:#x}", d.vote.zxid),
                leader_epoch = d.vote.peer_epoch,
                votes = ?d.votes.iter().map(|v| v.sid).collect::<Vec<_>>(),
                took_ms,
                "state change"
            );
        }
        let summary = d.summary();
        self.status.send_modify(|s| {
            s.state = d.state;
            s.leader = Some(d.vote.leader);
            s.election_epoch = election.logicalclock();
            // Zab moves it on (sync, broadcast) as leader and quorum get in touch.
            s.zab_phase = ZabPhase::Discovery;
            s.last_election = Some(summary);
        });
        let (progress_tx, progress_rx) = watch::channel(ZabProgress::from_store(
            &lock(&self.store),
            ZabPhase::Discovery,
            None,
        ));
        self.progress = Some(progress_rx);
        let (cfg, store) = (self.zab.clone(), self.store.clone());
        let delay = self.follow_streak.delay(cfg.tick, cfg.init_limit);
        self.follow_streak
            .started(d.state != ServerState::Leading, Instant::now() + delay);
        self.role = Some(match d.state {
            ServerState::Leading => {
                // A fresh channel per term: its senders fail once the term ends (503).
                let (tx, writes) = mpsc::channel(WRITE_QUEUE);
                self.writes.set(Route::Leading(tx));
                let lobby = self.lobby.clone();
                Box::pin(async move {
                    zab::lead_from_lobby(cfg, store, progress_tx, writes, &lobby).await
                })
            }
            _ => {
                self.writes.set(Route::Following {
                    leader: d.vote.leader,
                });
                let leader = d.vote.leader;
                Box::pin(async move {
                    tokio::time::sleep(delay).await;
                    zab::follow(cfg, leader, store, progress_tx).await
                })
            }
        });
    }
}

fn initial_status(cfg: &Config, store: &Store) -> NodeStatus {
    let zxid = store.last_logged_zxid();
    NodeStatus {
        sid: cfg.sid,
        state: ServerState::Looking,
        leader: None,
        peer_epoch: store.current_epoch(),
        accepted_epoch: store.accepted_epoch(),
        election_epoch: 0,
        last_zxid: zxid,
        last_zxid_hex: format!("{zxid:#x}"),
        last_committed_zxid: store.last_committed_zxid(),
        zab_phase: ZabPhase::Election,
        wall_clock_ms: 0,
        uptime_ms: 0,
        last_election: None,
        peer_type: cfg.me().peer_type,
        config: config_view(cfg),
    }
}

/// The config `/status` shows: none under the static zoo.cfg (version 0).
fn config_view(cfg: &Config) -> Option<ConfigView> {
    (cfg.version > 0).then(|| ConfigView {
        version: cfg.version,
        voters: cfg.voters().into_iter().collect(),
        observers: cfg.observers().into_iter().collect(),
    })
}
