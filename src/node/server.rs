//! The server loop: the thin tokio shell around the election state machine.
//!
//! It binds the three ports, feeds the election its notifications and timer deadlines,
//! carries out its outputs (sends, decisions), runs the role after a decision and starts
//! looking again when the role ends. Every state change is published to the HTTP status
//! and logged as one structured line.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use crate::api::{ElectionSummary, NodeStatus, ServerState, ZabPhase};
use crate::node::config::Config;
use crate::node::election::{Decision, Election, ElectionConfig, ElectionCounters, Output};
use crate::node::http::{self, HttpState};
use crate::node::peers::{Identity, Peers};
use crate::node::role::{self, RoleContext, RoleEnd};
use crate::node::store::Store;

/// Flags beyond zoo.cfg.
#[derive(Debug, Clone)]
pub struct Options {
    pub finalize_wait: Duration,
    pub max_notification_interval: Duration,
    pub bug_quorum_minority: bool,
}

type RoleFuture = Pin<Box<dyn Future<Output = RoleEnd> + Send>>;

/// Runs the server until SIGTERM/SIGINT.
pub async fn run(cfg: Config, opts: Options) -> anyhow::Result<()> {
    let started = std::time::Instant::now();
    let opened = Store::open(&cfg.data_dir).map_err(|e| anyhow::anyhow!("{e}"))?;
    let (current_epoch, accepted_epoch, last_zxid) = (
        opened.current_epoch(),
        opened.accepted_epoch(),
        opened.last_logged_zxid(),
    );
    let initial = initial_status(&cfg, &opened);
    // Shared with the role: Zab persists epochs (and logs) while it runs.
    let store = Arc::new(Mutex::new(opened));
    let me = cfg.me().clone();
    let election_listener = TcpListener::bind(me.election()).await.with_context(|| {
        format!(
            "cannot listen on the election port {} (server.{})",
            me.election(),
            cfg.sid
        )
    })?;
    let quorum_listener = TcpListener::bind(me.quorum()).await.with_context(|| {
        format!(
            "cannot listen on the quorum port {} (server.{})",
            me.quorum(),
            cfg.sid
        )
    })?;
    let admin = format!("{}:{}", cfg.admin_address, cfg.admin_port);
    let http_listener = TcpListener::bind(&admin).await.with_context(|| {
        format!("cannot listen on admin.serverAddress:admin.serverPort {admin}")
    })?;

    let identity = Identity {
        sid: cfg.sid,
        host: me.host.clone(),
        election_addr: me.election(),
    };
    let (inbound_tx, mut inbound) = mpsc::channel(256);
    let peers = Peers::start(
        identity.clone(),
        election_listener,
        cfg.servers
            .iter()
            .map(|(sid, a)| (*sid, a.election()))
            .collect(),
        inbound_tx,
    );

    let ecfg = ElectionConfig {
        sid: cfg.sid,
        voters: cfg.servers.keys().copied().collect(),
        finalize_wait: opts.finalize_wait,
        max_notification_interval: opts.max_notification_interval,
        bug_quorum_minority: opts.bug_quorum_minority,
        config_bytes: config_string(&cfg).into_bytes(),
    };
    let quorum = ecfg.quorum();
    let mut election = Election::new(ecfg, Instant::now().into_std());

    let (status_tx, status_rx) = watch::channel(initial);
    let status_tx = Arc::new(status_tx);
    let election_counters = Arc::new(Mutex::new(ElectionCounters::default()));
    let http_state = HttpState {
        status: status_rx,
        started,
        wire: peers.counters.clone(),
        election: election_counters.clone(),
        hosts: Arc::new(
            cfg.servers
                .iter()
                .map(|(s, a)| (*s, a.host.clone()))
                .collect(),
        ),
    };
    let app = http::router(http_state);
    tokio::spawn(async move {
        if let Err(e) = axum::serve(http_listener, app).await {
            tracing::error!(error = %e, "HTTP API stopped");
        }
    });

    let (accepted_tx, accepted_rx) = mpsc::channel(64);
    tokio::spawn(async move {
        loop {
            if let Ok((s, _)) = quorum_listener.accept().await {
                // A full queue means nobody leads here: drop, the dialer retries or gives up.
                let _ = accepted_tx.try_send(s);
            }
        }
    });
    let role_ctx = Arc::new(RoleContext {
        sid: cfg.sid,
        tick: Duration::from_millis(cfg.tick_time_ms),
        init_limit: cfg.init_limit as u32,
        sync_limit: cfg.sync_limit as u32,
        quorum,
        quorum_addrs: cfg.servers.iter().map(|(s, a)| (*s, a.quorum())).collect(),
        identity,
        accepted: Arc::new(tokio::sync::Mutex::new(accepted_rx)),
        status: status_tx.clone(),
        store: store.clone(),
    });

    tracing::info!(
        sid = cfg.sid,
        voters = cfg.servers.len(),
        quorum,
        election = %me.election(),
        quorum_port = %me.quorum(),
        admin = %admin,
        current_epoch,
        accepted_epoch,
        last_zxid = format_args!("{last_zxid:#x}"),
        "fle-node started"
    );

    let mut shell = Shell {
        peers,
        status: status_tx,
        counters: election_counters,
        store,
        role_ctx,
        role: None,
    };
    let (zxid, epoch) = shell.vote_basis();
    let out = election.start_looking(Instant::now().into_std(), zxid, epoch);
    shell.looking(&election);
    shell.apply(&election, out);

    let mut sigterm = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    loop {
        let deadline = election.next_deadline().map(Instant::from_std);
        tokio::select! {
            Some((from, n)) = inbound.recv() => {
                let out = election.step(Instant::now().into_std(), from, n);
                shell.apply(&election, out);
            }
            _ = sleep_until_opt(deadline), if deadline.is_some() => {
                let out = election.tick(Instant::now().into_std());
                shell.apply(&election, out);
            }
            end = role_done(&mut shell.role), if shell.role.is_some() => {
                shell.role = None;
                tracing::info!(sid = cfg.sid, reason = ?end, "role ended");
                let (zxid, epoch) = shell.vote_basis();
                let out = election.start_looking(Instant::now().into_std(), zxid, epoch);
                shell.looking(&election);
                shell.apply(&election, out);
            }
            _ = tokio::signal::ctrl_c() => break,
            _ = sigterm.recv() => break,
        }
    }
    tracing::info!(sid = cfg.sid, "fle-node stopping");
    Ok(())
}

async fn sleep_until_opt(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

async fn role_done(role: &mut Option<RoleFuture>) -> RoleEnd {
    match role.as_mut() {
        Some(f) => f.await,
        None => std::future::pending().await,
    }
}

/// The server's side effects, kept apart from the election state machine.
struct Shell {
    peers: Peers,
    status: Arc<watch::Sender<NodeStatus>>,
    counters: Arc<Mutex<ElectionCounters>>,
    store: Arc<Mutex<Store>>,
    role_ctx: Arc<RoleContext>,
    role: Option<RoleFuture>,
}

impl Shell {
    /// (last logged zxid, currentEpoch): what my own vote is made of.
    fn vote_basis(&self) -> (u64, u64) {
        let store = self.store.lock().unwrap_or_else(|e| e.into_inner());
        (store.last_logged_zxid(), store.current_epoch())
    }

    fn apply(&mut self, election: &Election, out: Vec<Output>) {
        for o in out {
            match o {
                Output::Send { to, notification } => self.peers.send(to, &notification),
                Output::Decided(d) => self.decided(election, d),
            }
        }
        *self.counters.lock().unwrap_or_else(|e| e.into_inner()) = election.counters();
    }

    fn looking(&mut self, election: &Election) {
        let (epoch, accepted, zxid) = {
            let store = self.store.lock().unwrap_or_else(|e| e.into_inner());
            (
                store.current_epoch(),
                store.accepted_epoch(),
                store.last_logged_zxid(),
            )
        };
        self.status.send_modify(|s| {
            s.state = ServerState::Looking;
            s.leader = None;
            s.zab_phase = ZabPhase::Election;
            s.election_epoch = election.logicalclock();
            s.peer_epoch = epoch;
            s.accepted_epoch = accepted;
            s.last_zxid = zxid;
            s.last_zxid_hex = format!("{zxid:#x}");
        });
        tracing::info!(
            sid = self.role_ctx.sid,
            state = "LOOKING",
            round = election.logicalclock(),
            zxid = format_args!("{zxid:#x}"),
            peer_epoch = epoch,
            "state change"
        );
    }

    fn decided(&mut self, election: &Election, d: Decision) {
        let state_name = match d.state {
            ServerState::Leading => "LEADING",
            ServerState::Following => "FOLLOWING",
            ServerState::Observing => "OBSERVING",
            ServerState::Looking => "LOOKING",
        };
        let took_ms = d.took.as_millis() as u64;
        tracing::info!(
            sid = self.role_ctx.sid,
            state = state_name,
            leader = d.vote.leader,
            round = d.round,
            leader_zxid = format_args!("{:#x}", d.vote.zxid),
            leader_epoch = d.vote.peer_epoch,
            votes = ?d.votes.iter().map(|v| v.sid).collect::<Vec<_>>(),
            took_ms,
            "state change"
        );
        let summary = ElectionSummary {
            round: d.round,
            leader: d.vote.leader,
            zxid: d.vote.zxid,
            peer_epoch: d.vote.peer_epoch,
            votes: d.votes.clone(),
            took_ms,
        };
        self.status.send_modify(|s| {
            s.state = d.state;
            s.leader = Some(d.vote.leader);
            s.election_epoch = election.logicalclock();
            // The role moves it to broadcast once leader and quorum are in touch.
            s.zab_phase = ZabPhase::Discovery;
            s.last_election = Some(summary);
        });
        let ctx = self.role_ctx.clone();
        self.role = Some(match d.state {
            ServerState::Leading => Box::pin(role::lead(ctx)),
            _ => Box::pin(role::follow(ctx, d.vote.leader)),
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
        last_committed_zxid: 0,
        zab_phase: ZabPhase::Election,
        wall_clock_ms: 0,
        uptime_ms: 0,
        last_election: None,
    }
}

/// The membership as ZooKeeper puts it in notifications (its QuorumVerifier's text).
fn config_string(cfg: &Config) -> String {
    let mut s = String::new();
    let servers: &BTreeMap<u64, _> = &cfg.servers;
    for (sid, a) in servers {
        s.push_str(&format!(
            "server.{sid}={}:{}:{}:participant\n",
            a.host, a.quorum_port, a.election_port
        ));
    }
    s.push_str("version=0");
    s
}
