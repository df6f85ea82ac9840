//! The election transport, after ZooKeeper's QuorumCnxManager.
//!
//! - One TCP connection per pair of servers; only one dialed by the LARGER sid survives. The
//!   smaller side "pokes" (dials, says hello, hangs up) so the larger one dials back.
//! - Every peer has its own task, so a slow or blackholed peer (connect timeouts, full send
//!   buffers) never delays the election with the others (ZOOKEEPER-3756).
//! - The send slot holds one message (newer replaces older) and the last message is sent
//!   again on every new connection; duplicates are harmless to the election.
//! - Bad bytes (wrong hello, bad frame lengths, undecodable notifications) cost that
//!   connection or that message, are counted, and never stop the node (ZOOKEEPER-3769).

use std::collections::BTreeMap;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::{mpsc, watch, Notify};

use crate::node::bugs::{Bug, Bugs};
use crate::node::wire::{self, HelloStart, Notification};

/// ZooKeeper's default connect timeout (cnxTimeout).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long an accepted connection may take to say hello.
const HELLO_TIMEOUT: Duration = Duration::from_secs(5);
const BACKOFF_MIN: Duration = Duration::from_millis(50);
const BACKOFF_MAX: Duration = Duration::from_secs(1);

/// What the transport dropped, for /status: each is a peer misbehaving, not a node failure.
#[derive(Debug, Default)]
pub struct WireCounters {
    pub bad_hellos: AtomicU64,
    pub bad_frames: AtomicU64,
    pub bad_notifications: AtomicU64,
    pub connections_accepted: AtomicU64,
    /// Only the seeded `deaf-on-truncated` bug sets it: no notification is delivered since.
    pub receiver_dead: AtomicBool,
}

#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct WireCountersSnapshot {
    pub bad_hellos: u64,
    pub bad_frames: u64,
    pub bad_notifications: u64,
    pub connections_accepted: u64,
    pub receiver_dead: bool,
}

impl WireCounters {
    pub fn snapshot(&self) -> WireCountersSnapshot {
        WireCountersSnapshot {
            bad_hellos: self.bad_hellos.load(Ordering::Relaxed),
            bad_frames: self.bad_frames.load(Ordering::Relaxed),
            bad_notifications: self.bad_notifications.load(Ordering::Relaxed),
            connections_accepted: self.connections_accepted.load(Ordering::Relaxed),
            receiver_dead: self.receiver_dead.load(Ordering::Relaxed),
        }
    }
}

fn bump(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

/// One other voter, as seen from here.
struct Link {
    /// The send slot: the latest framed notification for this peer.
    outbox: watch::Sender<Option<Arc<Vec<u8>>>>,
    /// Connections this peer dialed to us (only kept when its sid is larger).
    incoming: mpsc::Sender<TcpStream>,
    /// The peer poked us: dial it now instead of waiting out the back-off.
    dial_now: Arc<Notify>,
}

/// The running transport: hand it notifications, read incoming ones from `inbound`.
/// Dropping it stops the acceptor and every peer task, closing their connections.
pub struct Peers {
    links: BTreeMap<u64, Link>,
    pub counters: Arc<WireCounters>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for Peers {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// Who we are on the election network.
#[derive(Clone)]
pub struct Identity {
    pub sid: u64,
    /// Our configured host: outgoing sockets bind to it.
    pub host: String,
    /// Our election "host:port", sent in the hello.
    pub election_addr: String,
}

impl Peers {
    /// Starts the acceptor on `listener` and one task per peer in `peers` (sid -> election
    /// "host:port"). Decoded notifications arrive on `inbound` as (sender sid, notification).
    pub fn start(
        me: Identity,
        listener: TcpListener,
        peers: BTreeMap<u64, String>,
        inbound: mpsc::Sender<(u64, Notification)>,
    ) -> Peers {
        Peers::start_with(me, listener, peers, inbound, Bugs::none())
    }

    /// As `start`, with seeded bugs (`blocking-connect`, `deaf-on-truncated`).
    pub fn start_with(
        me: Identity,
        listener: TcpListener,
        peers: BTreeMap<u64, String>,
        inbound: mpsc::Sender<(u64, Notification)>,
        bugs: Bugs,
    ) -> Peers {
        let counters = Arc::new(WireCounters::default());
        let dial_lock = Arc::new(tokio::sync::Mutex::new(()));
        let mut links = BTreeMap::new();
        let mut tasks = Vec::new();
        for (sid, addr) in peers {
            if sid == me.sid {
                continue;
            }
            let (outbox, outbox_rx) = watch::channel(None);
            let (incoming, incoming_rx) = mpsc::channel(4);
            let dial_now = Arc::new(Notify::new());
            let task = LinkTask {
                me: me.clone(),
                peer: sid,
                peer_addr: addr,
                outbox: outbox_rx,
                incoming: incoming_rx,
                dial_now: dial_now.clone(),
                inbound: inbound.clone(),
                counters: counters.clone(),
                bugs,
                dial_lock: dial_lock.clone(),
            };
            tasks.push(tokio::spawn(task.run()));
            links.insert(
                sid,
                Link {
                    outbox,
                    incoming,
                    dial_now,
                },
            );
        }
        let acceptor = Acceptor {
            my_sid: me.sid,
            routes: links
                .iter()
                .map(|(sid, l)| (*sid, (l.incoming.clone(), l.dial_now.clone())))
                .collect(),
            counters: counters.clone(),
        };
        tasks.push(tokio::spawn(acceptor.run(listener)));
        Peers {
            links,
            counters,
            tasks,
        }
    }

    /// Puts `n` in the peer's send slot, replacing what was not yet sent.
    pub fn send(&self, to: u64, n: &Notification) {
        if let Some(link) = self.links.get(&to) {
            let bytes = Arc::new(wire::frame(&wire::encode_notification(n)));
            link.outbox.send_replace(Some(bytes));
        }
    }
}

type Route = (mpsc::Sender<TcpStream>, Arc<Notify>);

struct Acceptor {
    my_sid: u64,
    routes: BTreeMap<u64, Route>,
    counters: Arc<WireCounters>,
}

impl Acceptor {
    async fn run(self, listener: TcpListener) {
        let me = Arc::new(self);
        loop {
            match listener.accept().await {
                Ok((stream, _)) => {
                    bump(&me.counters.connections_accepted);
                    let me = me.clone();
                    // Each hello is read in its own task: a silent dialer blocks nobody.
                    tokio::spawn(async move { me.handle(stream).await });
                }
                Err(e) => {
                    tracing::warn!(error = %e, "election port accept failed");
                    tokio::time::sleep(BACKOFF_MIN).await;
                }
            }
        }
    }

    async fn handle(&self, mut stream: TcpStream) {
        let sid = match tokio::time::timeout(HELLO_TIMEOUT, read_hello(&mut stream)).await {
            Ok(Ok(sid)) => sid,
            Ok(Err(e)) => {
                bump(&self.counters.bad_hellos);
                tracing::warn!(error = %e, "dropped an election connection with a bad hello");
                return;
            }
            Err(_) => {
                bump(&self.counters.bad_hellos);
                tracing::warn!("dropped an election connection that sent no hello");
                return;
            }
        };
        let Some((incoming, dial_now)) = self.routes.get(&sid) else {
            bump(&self.counters.bad_hellos);
            tracing::warn!(
                sid,
                "dropped an election connection from an unknown server id"
            );
            return;
        };
        if sid < self.my_sid {
            // Only the larger sid's connection survives: hang up and dial back.
            drop(stream);
            dial_now.notify_one();
        } else {
            let _ = incoming.try_send(stream);
        }
    }
}

async fn read_hello(stream: &mut TcpStream) -> io::Result<u64> {
    let bad = |e: wire::WireError| io::Error::new(io::ErrorKind::InvalidData, e.to_string());
    let first = stream.read_i64().await?;
    match wire::hello_start(first).map_err(bad)? {
        HelloStart::LegacySid(sid) => Ok(sid),
        HelloStart::Versioned => {
            let sid = stream.read_i64().await?;
            let len = wire::check_hello_addr_len(stream.read_i32().await?).map_err(bad)?;
            let mut addr = vec![0u8; len];
            stream.read_exact(&mut addr).await?;
            if sid < 0 {
                return Err(bad(wire::WireError::BadHello(format!(
                    "negative sid {sid}"
                ))));
            }
            Ok(sid as u64)
        }
    }
}

/// Resolves `host` to a local address of the same family as `target`, port 0.
async fn local_bind_addr(host: &str, target: &SocketAddr) -> Option<SocketAddr> {
    let addrs = tokio::net::lookup_host((host, 0)).await.ok()?;
    addrs.into_iter().find(|a| a.is_ipv4() == target.is_ipv4())
}

/// Dials `addr` from our own configured address and says hello.
pub async fn dial(me: &Identity, addr: &str) -> io::Result<TcpStream> {
    let mut stream = dial_raw(me, addr).await?;
    stream
        .write_all(&wire::encode_hello(me.sid, &me.election_addr))
        .await?;
    Ok(stream)
}

/// Dials `addr` from our own configured address (ZooKeeper binds outgoing sockets too, so
/// per-address firewall rules see the server's address).
pub async fn dial_raw(me: &Identity, addr: &str) -> io::Result<TcpStream> {
    let target = tokio::net::lookup_host(addr).await?.next().ok_or_else(|| {
        io::Error::new(io::ErrorKind::NotFound, format!("{addr} does not resolve"))
    })?;
    let socket = if target.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    if let Some(local) = local_bind_addr(&me.host, &target).await {
        socket.bind(local)?;
    }
    let stream = tokio::time::timeout(CONNECT_TIMEOUT, socket.connect(target))
        .await
        .map_err(|_| {
            io::Error::new(
                io::ErrorKind::TimedOut,
                format!("connect to {addr} timed out"),
            )
        })??;
    stream.set_nodelay(true)?;
    Ok(stream)
}

struct LinkTask {
    me: Identity,
    peer: u64,
    peer_addr: String,
    outbox: watch::Receiver<Option<Arc<Vec<u8>>>>,
    incoming: mpsc::Receiver<TcpStream>,
    dial_now: Arc<Notify>,
    inbound: mpsc::Sender<(u64, Notification)>,
    counters: Arc<WireCounters>,
    bugs: Bugs,
    /// Shared by every link; taken only under the seeded `blocking-connect` bug.
    dial_lock: Arc<tokio::sync::Mutex<()>>,
}

impl LinkTask {
    async fn dial(&self) -> io::Result<TcpStream> {
        if self.bugs.has(Bug::BlockingConnect) {
            // Seeded ZOOKEEPER-3756: one connect at a time for all peers (a synchronized
            // connectOne), so a blackholed peer's connect timeout holds every other dial.
            let _one_at_a_time = self.dial_lock.lock().await;
            return dial(&self.me, &self.peer_addr).await;
        }
        dial(&self.me, &self.peer_addr).await
    }

    async fn run(mut self) {
        let mut backoff = BACKOFF_MIN;
        let mut next: Option<TcpStream> = None;
        loop {
            let stream = match next.take() {
                Some(s) => Some(s),
                None if self.me.sid > self.peer => self.dial().await.ok(),
                None => {
                    // The larger sid dials; poke it in case it is waiting out a back-off.
                    if let Ok(s) = self.dial().await {
                        drop(s);
                    }
                    tokio::select! {
                        s = self.incoming.recv() => s,
                        _ = tokio::time::sleep(backoff) => None,
                    }
                }
            };
            match stream {
                Some(s) => {
                    backoff = BACKOFF_MIN;
                    next = self.serve(s).await;
                }
                None => {
                    tokio::select! {
                        _ = tokio::time::sleep(backoff) => {}
                        _ = self.dial_now.notified() => {}
                        s = self.incoming.recv() => next = s,
                    }
                    backoff = (backoff * 2).min(BACKOFF_MAX);
                }
            }
        }
    }

    /// Runs one connection until it fails; returns a newer connection that replaced it.
    async fn serve(&mut self, stream: TcpStream) -> Option<TcpStream> {
        let _ = stream.set_nodelay(true);
        let (mut rd, mut wr) = stream.into_split();
        let peer = self.peer;
        let inbound = self.inbound.clone();
        let counters = self.counters.clone();
        let bugs = self.bugs;
        let reader = async move {
            loop {
                let len = match rd.read_i32().await {
                    Ok(len) => len,
                    Err(_) => return,
                };
                let len = match wire::check_frame_length(len) {
                    Ok(len) => len,
                    Err(e) => {
                        bump(&counters.bad_frames);
                        tracing::warn!(peer, error = %e, "closing election connection");
                        return;
                    }
                };
                let mut payload = vec![0u8; len];
                if rd.read_exact(&mut payload).await.is_err() {
                    return;
                }
                match wire::decode_notification(&payload) {
                    Ok(_) if counters.receiver_dead.load(Ordering::Relaxed) => {}
                    Ok(n) => {
                        if inbound.send((peer, n)).await.is_err() {
                            return;
                        }
                    }
                    Err(e @ wire::WireError::Truncated(_)) if bugs.has(Bug::DeafOnTruncated) => {
                        // Seeded ZOOKEEPER-3769: the receiver dies on a partial message and the
                        // server never hears an election message again.
                        bump(&counters.bad_notifications);
                        counters.receiver_dead.store(true, Ordering::Relaxed);
                        tracing::error!(peer, error = %e, "election receiver died (seeded bug deaf-on-truncated)");
                    }
                    Err(e) => {
                        bump(&counters.bad_notifications);
                        tracing::warn!(peer, error = %e, "dropped a malformed notification");
                    }
                }
            }
        };
        let outbox = &mut self.outbox;
        let writer = async move {
            // Re-send the last message on every new connection: it may never have arrived.
            let mut last = outbox.borrow_and_update().clone();
            loop {
                if let Some(bytes) = last.take() {
                    if wr.write_all(&bytes).await.is_err() {
                        return;
                    }
                }
                if outbox.changed().await.is_err() {
                    return;
                }
                last = outbox.borrow_and_update().clone();
            }
        };
        tokio::select! {
            _ = reader => None,
            _ = writer => None,
            s = self.incoming.recv() => s,
        }
    }
}
