//! What a server does after an election: a MINIMAL leader/follower liveness protocol on the
//! quorum port (server.N's first port), until Zab replaces this file with the real one.
//!
//! - A follower dials the leader, says its sid (8 bytes), and waits for the first ping
//!   (initLimit ticks). After that, silence for syncLimit ticks or a closed connection ends
//!   the role.
//! - The leader pings every follower every tickTime/2 and each ping is answered. It steps
//!   down when fewer than a quorum (itself included) were heard within syncLimit ticks,
//!   once the initLimit ticks for followers to first connect have passed.
//!
//! All timers are tokio's (monotonic): a wall-clock jump must not end a role (ZOOKEEPER-1366).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, Mutex};
use tokio::task::JoinSet;
use tokio::time::{timeout, Instant};

use crate::api::{NodeStatus, ZabPhase};
use crate::node::peers::{self, Identity};
use crate::node::store::Store;

/// ZooKeeper's PING packet type, our only message.
const PING: u8 = 5;

/// What a role needs to know; built once by the server.
#[derive(Clone)]
pub struct RoleContext {
    pub sid: u64,
    pub tick: Duration,
    pub init_limit: u32,
    pub sync_limit: u32,
    /// Voters needed for a quorum, the leader itself included.
    pub quorum: usize,
    /// Quorum "host:port" of every server, by sid.
    pub quorum_addrs: BTreeMap<u64, String>,
    pub identity: Identity,
    /// Connections accepted on our quorum port, waiting for a leader to take them.
    pub accepted: Arc<Mutex<mpsc::Receiver<TcpStream>>>,
    /// The published status: a role reports its phase there.
    pub status: Arc<tokio::sync::watch::Sender<NodeStatus>>,
    /// The durable state (unused by this minimal role; Zab persists epochs through it).
    pub store: Arc<std::sync::Mutex<Store>>,
}

impl RoleContext {
    /// Discovery until the leader and a quorum are in touch, broadcast after (Zab's words;
    /// this minimal role has no sync step, so it skips from one to the other).
    fn set_phase(&self, phase: ZabPhase) {
        let changed = self.status.send_if_modified(|s| {
            let changed = s.zab_phase != phase;
            s.zab_phase = phase;
            changed
        });
        if changed {
            tracing::info!(sid = self.sid, zab_phase = ?phase, "state change");
        }
    }
}

/// Why a role ended (logged by the server, which then looks for a leader again).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RoleEnd {
    LostQuorum { heard: usize, needed: usize },
    LeaderUnreachable,
    LeaderSilent,
    LeaderClosed,
}

/// Leads until fewer than a quorum of followers answer.
pub async fn lead(ctx: Arc<RoleContext>) -> RoleEnd {
    let started = Instant::now();
    let sync_window = ctx.tick * ctx.sync_limit;
    let grace = ctx.tick * ctx.init_limit;
    let (heard_tx, mut heard_rx) = mpsc::channel::<(u64, Instant)>(64);
    // Dropping the set at the end of the role aborts every follower task.
    let mut followers = JoinSet::new();
    let mut last_heard: BTreeMap<u64, Instant> = BTreeMap::new();
    let mut check = tokio::time::interval(ctx.tick / 2);
    let mut accepted = ctx.accepted.lock().await;
    loop {
        tokio::select! {
            Some(stream) = accepted.recv() => {
                followers.spawn(serve_follower(stream, ctx.clone(), heard_tx.clone()));
            }
            Some((sid, at)) = heard_rx.recv() => {
                last_heard.insert(sid, at);
            }
            _ = check.tick() => {
                let now = Instant::now();
                let heard = 1 + last_heard
                    .iter()
                    .filter(|(sid, at)| **sid != ctx.sid && now.duration_since(**at) <= sync_window)
                    .count();
                if heard >= ctx.quorum {
                    ctx.set_phase(ZabPhase::Broadcast);
                } else if now.duration_since(started) > grace {
                    return RoleEnd::LostQuorum { heard, needed: ctx.quorum };
                }
            }
            Some(_) = followers.join_next(), if !followers.is_empty() => {}
        }
    }
}

/// One follower's connection, on the leader: ping it, report every answer.
async fn serve_follower(
    mut stream: TcpStream,
    ctx: Arc<RoleContext>,
    heard: mpsc::Sender<(u64, Instant)>,
) {
    let _ = stream.set_nodelay(true);
    let sid = match timeout(ctx.tick * ctx.init_limit, stream.read_u64()).await {
        Ok(Ok(sid)) if ctx.quorum_addrs.contains_key(&sid) => sid,
        _ => return,
    };
    let (mut rd, mut wr) = stream.into_split();
    let pinger = async move {
        let mut every = tokio::time::interval(ctx.tick / 2);
        loop {
            every.tick().await;
            if wr.write_all(&[PING]).await.is_err() {
                return;
            }
        }
    };
    let listener = async move {
        let mut buf = [0u8; 64];
        loop {
            match rd.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {
                    if heard.send((sid, Instant::now())).await.is_err() {
                        return;
                    }
                }
            }
        }
    };
    tokio::select! {
        _ = pinger => {}
        _ = listener => {}
    }
}

/// Follows `leader` until it goes silent or away.
pub async fn follow(ctx: Arc<RoleContext>, leader: u64) -> RoleEnd {
    let Some(addr) = ctx.quorum_addrs.get(&leader).cloned() else {
        return RoleEnd::LeaderUnreachable;
    };
    let deadline = Instant::now() + ctx.tick * ctx.init_limit;
    let mut stream = loop {
        if let Some(s) = connect_to_leader(&ctx, &addr, deadline).await {
            break s;
        }
        if Instant::now() >= deadline {
            return RoleEnd::LeaderUnreachable;
        }
        // The leader may not be leading yet: retry until initLimit runs out.
        tokio::time::sleep(ctx.tick / 4).await;
    };
    ctx.set_phase(ZabPhase::Broadcast);
    let silence = ctx.tick * ctx.sync_limit;
    let mut buf = [0u8; 64];
    loop {
        match timeout(silence, stream.read(&mut buf)).await {
            Err(_) => return RoleEnd::LeaderSilent,
            Ok(Ok(0)) | Ok(Err(_)) => return RoleEnd::LeaderClosed,
            Ok(Ok(_)) => {
                if stream.write_all(&[PING]).await.is_err() {
                    return RoleEnd::LeaderClosed;
                }
            }
        }
    }
}

/// One attempt: dial, say our sid, wait for the first ping (it proves the peer leads).
async fn connect_to_leader(ctx: &RoleContext, addr: &str, deadline: Instant) -> Option<TcpStream> {
    let attempt = async {
        let mut s = peers::dial_raw(&ctx.identity, addr).await.ok()?;
        s.write_all(&ctx.sid.to_be_bytes()).await.ok()?;
        let mut first = [0u8; 1];
        match s.read(&mut first).await {
            Ok(1) => {
                s.write_all(&[PING]).await.ok()?;
                Some(s)
            }
            _ => None,
        }
    };
    tokio::time::timeout_at(deadline, attempt)
        .await
        .ok()
        .flatten()
}
