//! The leader's async shell: binds the quorum port, runs [`Leader`] over real connections and
//! answers client writes once committed. Returns (closing the port) when leadership is lost.

use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

use anyhow::Context;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio::time::MissedTickBehavior;

use crate::api::ZabPhase;
use crate::zab::accept::Lobby;
use crate::zab::actions::Output;
use crate::zab::conn::{spawn_conn, Conn, ConnEvent};
use crate::zab::exec::execute;
use crate::zab::leader::{short_name, Leader};
use crate::zab::messages::Msg;
use crate::zab::store::{lock, SharedStore};
use crate::zab::{publish, ClientWrite, WriteOutcome, ZabConfig, ZabProgress};

type Pending = BTreeMap<u64, (tokio::sync::oneshot::Sender<WriteOutcome>, Instant)>;

/// Leads until leadership is lost; `Ok` carries why it ended, `Err` a local failure (port, disk).
/// Binds my quorum address for the term and closes it at the end.
pub async fn lead(
    cfg: ZabConfig,
    store: SharedStore,
    progress: watch::Sender<ZabProgress>,
    writes: mpsc::Receiver<ClientWrite>,
) -> anyhow::Result<String> {
    let addr = cfg.my_addr()?;
    let listener = TcpListener::bind(addr)
        .await
        .with_context(|| format!("binding the quorum port {addr} to lead"))?;
    run(cfg, store, progress, writes, Incoming::Listener(listener)).await
}

/// As [`lead`], for a server that keeps its quorum port open itself and hands over the
/// connections it accepts. Connections queued before the term are kept: a follower that
/// decided faster than this server dials before it leads (discarding it cost a whole new
/// election). A stale one is harmless: its follower closed it, or it goes through discovery.
pub async fn lead_accepting(
    cfg: ZabConfig,
    store: SharedStore,
    progress: watch::Sender<ZabProgress>,
    writes: mpsc::Receiver<ClientWrite>,
    accepted: &mut mpsc::Receiver<TcpStream>,
) -> anyhow::Result<String> {
    run(cfg, store, progress, writes, Incoming::Channel(accepted)).await
}

/// As [`lead`], taking followers' connections from the quorum port's [`Lobby`] (already
/// identified by their FOLLOWERINFO, whose bytes come along).
pub async fn lead_from_lobby(
    cfg: ZabConfig,
    store: SharedStore,
    progress: watch::Sender<ZabProgress>,
    writes: mpsc::Receiver<ClientWrite>,
    lobby: &Lobby,
) -> anyhow::Result<String> {
    run(cfg, store, progress, writes, Incoming::Lobby(lobby)).await
}

/// Where followers' connections come from.
enum Incoming<'a> {
    Listener(TcpListener),
    Channel(&'a mut mpsc::Receiver<TcpStream>),
    Lobby(&'a Lobby),
}

impl Incoming<'_> {
    /// The next connection and bytes already read from it; pending forever once the source is
    /// gone (cancel-safe).
    async fn next(&mut self) -> (TcpStream, Vec<u8>) {
        loop {
            match self {
                Incoming::Lobby(l) => {
                    let c = l.next().await;
                    return (c.stream, c.prefix);
                }
                Incoming::Listener(l) => match l.accept().await {
                    Ok((s, _)) => return (s, Vec::new()),
                    Err(e) => {
                        // Out of descriptors and the like: do not spin on it.
                        tracing::warn!("accepting on the quorum port: {e}");
                        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                    }
                },
                Incoming::Channel(rx) => match rx.recv().await {
                    Some(s) => return (s, Vec::new()),
                    None => std::future::pending::<()>().await,
                },
            }
        }
    }
}

/// The followers' connections of a term: each by its id, and the sid it identified as.
#[derive(Default)]
struct Followers {
    conns: HashMap<u64, Conn>,
    conn_sid: HashMap<u64, u64>,
    sid_conn: HashMap<u64, u64>,
    next_conn: u64,
}

impl Followers {
    /// A new connection, whose frames and close come on `events`.
    fn accept(
        &mut self,
        stream: TcpStream,
        prefix: Vec<u8>,
        events: &mpsc::UnboundedSender<ConnEvent>,
    ) {
        self.next_conn += 1;
        let conn = spawn_conn(stream, prefix, self.next_conn, events.clone());
        self.conns.insert(self.next_conn, conn);
    }

    /// One connection event for the machine: a frame of an identified follower; the first
    /// frame of a connection, which must be FOLLOWERINFO or OBSERVERINFO of another server
    /// (it replaces that server's older connection); or a close.
    fn on_event(
        &mut self,
        e: ConnEvent,
        sm: &mut Leader,
        cfg: &ZabConfig,
        outputs: &mut Vec<Output>,
    ) {
        match e {
            ConnEvent::Frame(id, msg) => match self.conn_sid.get(&id) {
                Some(&sid) => outputs.extend(sm.step(sid, msg)),
                None => match msg.learner_sid() {
                    Some(sid) if sid != cfg.my_sid && cfg.servers.contains_key(&sid) => {
                        if let Some(old) = self.sid_conn.insert(sid, id) {
                            self.conns.remove(&old);
                            self.conn_sid.remove(&old);
                            outputs.extend(sm.disconnected(sid));
                        }
                        self.conn_sid.insert(id, sid);
                        outputs.extend(sm.step(sid, msg));
                    }
                    _ => {
                        tracing::warn!(
                            "quorum connection {id}: first message is {} but must be FOLLOWERINFO or OBSERVERINFO of another server; closing it",
                            short_name(&msg)
                        );
                        self.conns.remove(&id);
                    }
                },
            },
            ConnEvent::Closed(id, why) => {
                self.conns.remove(&id);
                if let Some(sid) = self.conn_sid.remove(&id) {
                    tracing::info!("follower {sid} disconnected: {why}");
                    self.sid_conn.remove(&sid);
                    outputs.extend(sm.disconnected(sid));
                }
            }
        }
    }

    /// Sends `m` to follower `to`, if it is connected.
    fn send(&self, to: u64, m: Msg) {
        if let Some(c) = self.sid_conn.get(&to).and_then(|id| self.conns.get(id)) {
            let _ = c.tx.send(m);
        }
    }

    /// Closes follower `sid`'s connection, as the machine asked.
    fn close(&mut self, sid: u64) {
        if let Some(id) = self.sid_conn.remove(&sid) {
            self.conns.remove(&id);
            self.conn_sid.remove(&id);
        }
    }
}

/// The leader's term: one `select!` over the quorum port's new connections, the followers'
/// frames and closes, the clients' writes and the tick, driving the `Leader` machine, whose
/// outputs `carry_out` executes after each arm; the protocol's decisions are all in `leader`
/// (pure, unit-tested).
async fn run(
    cfg: ZabConfig,
    store: SharedStore,
    progress: watch::Sender<ZabProgress>,
    mut writes: mpsc::Receiver<ClientWrite>,
    mut incoming: Incoming<'_>,
) -> anyhow::Result<String> {
    let mut sm = {
        let s = lock(&store);
        Leader::new(
            cfg.leader_config(),
            s.accepted_epoch(),
            s.current_epoch(),
            s.txns().to_vec(),
            s.last_committed_zxid(),
        )
    };
    let (ev_tx, mut ev_rx) = mpsc::unbounded_channel();
    let mut followers = Followers::default();
    let mut pending: Pending = BTreeMap::new();
    let mut writes_open = true;
    let mut beat = tokio::time::interval(cfg.beat());
    beat.set_missed_tick_behavior(MissedTickBehavior::Delay);
    beat.tick().await;

    publish(&progress, &store, ZabPhase::Discovery, None);
    let mut outputs = sm.start();
    let ended = loop {
        tokio::select! {
            (stream, prefix) = incoming.next(), if outputs.is_empty() => {
                followers.accept(stream, prefix, &ev_tx);
            }
            Some(ev) = ev_rx.recv(), if outputs.is_empty() => {
                let mut ev = Some(ev);
                while let Some(e) = ev {
                    followers.on_event(e, &mut sm, &cfg, &mut outputs);
                    ev = ev_rx.try_recv().ok();
                }
            }
            w = writes.recv(), if writes_open && outputs.is_empty() => match w {
                None => writes_open = false,
                Some(w) => outputs.extend(propose(w, &mut writes, &mut sm, &mut pending, &cfg)),
            },
            _ = beat.tick(), if outputs.is_empty() => {
                outputs.extend(sm.tick());
                expire(&mut pending, cfg.write_timeout);
            }
            // Outputs left over from `start` or a previous round: run them below.
            _ = std::future::ready(()), if !outputs.is_empty() => {}
        }
        let end = carry_out(&store, &mut outputs, &mut followers, &mut pending, &mut sm).await?;
        publish(&progress, &store, sm.phase(), None);
        if let Some(why) = end {
            break why;
        }
    };
    for (_, (r, _)) in pending {
        let _ = r.send(WriteOutcome::Unknown(format!(
            "leadership ended before commit ({ended}); it may still commit under the next leader"
        )));
    }
    drop(followers);
    drop(incoming);
    publish(&progress, &store, ZabPhase::Election, None);
    tracing::info!("stopped leading: {ended}");
    Ok(ended)
}

/// Proposes client write `first` and those queued behind it (up to 4096 in one batch): each
/// proposed one waits in `pending` until committed or timed out; a refused batch is answered
/// at once. Returns the machine's outputs.
fn propose(
    first: ClientWrite,
    writes: &mut mpsc::Receiver<ClientWrite>,
    sm: &mut Leader,
    pending: &mut Pending,
    cfg: &ZabConfig,
) -> Vec<Output> {
    let mut batch = vec![first];
    while batch.len() < 4096 {
        match writes.try_recv() {
            Ok(w) => batch.push(w),
            Err(_) => break,
        }
    }
    let (values, replies): (Vec<_>, Vec<_>) = batch.into_iter().map(|w| (w.value, w.reply)).unzip();
    match sm.propose(values) {
        Ok((zxids, out)) => {
            let deadline = Instant::now() + cfg.write_timeout;
            for (z, r) in zxids.into_iter().zip(replies) {
                pending.insert(z, (r, deadline));
            }
            out
        }
        Err((why, out)) => {
            for r in replies {
                let _ = r.send(WriteOutcome::Rejected(why.clone()));
            }
            out
        }
    }
}

/// Answers the pending writes past their deadline: unknown, as they may still commit.
fn expire(pending: &mut Pending, write_timeout: std::time::Duration) {
    let now = Instant::now();
    let expired: Vec<u64> = pending
        .iter()
        .filter(|(_, (_, d))| *d <= now)
        .map(|(z, _)| *z)
        .collect();
    for z in expired {
        if let Some((r, _)) = pending.remove(&z) {
            let _ = r.send(WriteOutcome::Unknown(format!(
                "not committed within {write_timeout:?}; it may still commit"
            )));
        }
    }
}

/// Executes the machine's outputs, and those they lead to (the leader's own durable acks),
/// until none is left: sends, closes, committed writes answered. Returns why leadership
/// ended, if it did.
async fn carry_out(
    store: &SharedStore,
    outputs: &mut Vec<Output>,
    followers: &mut Followers,
    pending: &mut Pending,
    sm: &mut Leader,
) -> anyhow::Result<Option<String>> {
    let mut end = None;
    while !outputs.is_empty() {
        let batch = std::mem::take(outputs);
        let ex = execute(store, batch, &mut |to, m| followers.send(to, m)).await?;
        for (sid, why) in ex.closes {
            tracing::warn!("closing follower {sid}: {why}");
            followers.close(sid);
        }
        if let Some(z) = ex.committed {
            let rest = pending.split_off(&(z + 1));
            for (zxid, (r, _)) in std::mem::replace(pending, rest) {
                let _ = r.send(WriteOutcome::Committed(zxid));
            }
        }
        for z in ex.self_acks {
            outputs.extend(sm.self_durable(z));
        }
        if ex.step_down.is_some() {
            end = ex.step_down;
        }
    }
    Ok(end)
}
