//! The election transport, after ZooKeeper's QuorumCnxManager.
//!
//! - One TCP connection per pair of servers; only one dialed by the LARGER sid survives. The
//!   smaller side "pokes" (dials, says hello, hangs up) so the larger one dials back.
//! - Every peer has its own task, so a slow or blackholed peer (connect timeouts, full send
//!   buffers) never delays the election with the others (ZOOKEEPER-3756).
//! - The send slot holds one message (newer replaces older) and the last message is sent
//!   again on every new connection; duplicates are harmless to the election.
//! - Bad bytes (wrong hello, bad frame lengths, undecodable notifications) cost that
//!   connection or that message, are counted, and never stop the node (ZOOKEEPER-3769);
//!   warnings about them are rate-limited per source ([`WarnLimiter`]).
//! - Rejoin after a partition (issue 18): a connection whose peer stopped acknowledging (TCP
//!   keepalive + TCP_USER_TIMEOUT) is dropped within seconds instead of sitting out TCP's
//!   exponential retransmission back-off; a link that is down is re-dialed at least every
//!   `CONNECT_TIMEOUT + BACKOFF_MAX`; a poke from the smaller sid proves its side has no
//!   connection, so ours is stale and is replaced at once. The slot's last vote is sent on every
//!   new connection, and settled peers answer a LOOKING vote with their leader, so the cut-off
//!   server hears the current leader one round trip after the heal, whatever the partition's
//!   length and its notification back-off. Nothing about votes changes: a re-sent vote is a
//!   duplicate, which the election already tolerates.
//! - Connection hygiene: a hello must arrive within tickTime·initLimit (ZooKeeper's socket
//!   timeout), and at most `MAX_UNIDENTIFIED` connections may be waiting for theirs.

use std::collections::BTreeMap;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::{mpsc, watch, Notify, Semaphore};

use futures_util::FutureExt;

use crate::bugs::{Bug, Bugs};
use crate::warn_limit::WarnLimiter;
use crate::wire::{self, HelloStart, Notification};

/// One dial attempt. Shorter than ZooKeeper's cnxTimeout (5 s): a SYN dropped by a partition is
/// retransmitted only after 1 s anyway, and a fresh attempt notices a heal sooner.
pub const CONNECT_TIMEOUT: Duration = Duration::from_millis(500);
/// ZooKeeper's default election connect timeout (cnxTimeout), used by the seeded
/// `blocking-connect` bug so that it stalls as ZooKeeper did.
pub const ZOOKEEPER_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long an accepted connection may take to say hello unless the config says otherwise.
const HELLO_TIMEOUT: Duration = Duration::from_secs(5);
const BACKOFF_MIN: Duration = Duration::from_millis(50);
/// Re-dial period of a link that is down (with CONNECT_TIMEOUT, the worst delay after a heal).
const BACKOFF_MAX: Duration = Duration::from_millis(250);
/// A peer that acknowledges neither data nor keepalives for this long is gone: drop the
/// connection (TCP_USER_TIMEOUT) and re-dial rather than wait out TCP's retransmission back-off.
pub const DEAD_AFTER: Duration = Duration::from_secs(2);
/// Accepted connections that have not said hello yet, at most; more are closed at once.
pub const MAX_UNIDENTIFIED: usize = 64;

/// Keepalive every second and a bound on unacknowledged data: a partition ends the connection
/// within `DEAD_AFTER` (+1 s when idle), not after TCP's minutes of retransmissions.
pub fn watch_liveness(stream: &TcpStream) {
    let sock = socket2::SockRef::from(stream);
    let ka = socket2::TcpKeepalive::new()
        .with_time(Duration::from_secs(1))
        .with_interval(Duration::from_millis(500))
        .with_retries(2);
    let _ = sock.set_tcp_keepalive(&ka);
    let _ = sock.set_tcp_user_timeout(Some(DEAD_AFTER));
}

/// What the transport dropped, for /status: each is a peer misbehaving, not a node failure.
#[derive(Debug, Default)]
pub struct WireCounters {
    pub bad_hellos: AtomicU64,
    pub bad_frames: AtomicU64,
    pub bad_notifications: AtomicU64,
    pub connections_accepted: AtomicU64,
    /// Only the seeded `deaf-on-truncated` bug sets it: no notification is delivered since.
    pub receiver_dead: AtomicBool,
    /// Election connections closed at once: too many were waiting for their hello.
    pub refused_unidentified: AtomicU64,
    /// Quorum-port connections: accepted, closed for a bad or missing FOLLOWERINFO, refused
    /// at once (too many unidentified), and identified ones no leader took in time.
    pub quorum_accepted: AtomicU64,
    pub quorum_bad_handshakes: AtomicU64,
    pub quorum_refused: AtomicU64,
    pub quorum_expired: AtomicU64,
    /// HTTP connections refused (too many open) and closed for idleness.
    pub http_refused: AtomicU64,
    pub http_idle_closed: AtomicU64,
    /// `POST /write` bodies over jute.maxbuffer (answered 413).
    pub writes_too_large: AtomicU64,
}

#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct WireCountersSnapshot {
    pub bad_hellos: u64,
    pub bad_frames: u64,
    pub bad_notifications: u64,
    pub connections_accepted: u64,
    pub receiver_dead: bool,
    pub refused_unidentified: u64,
    pub quorum_accepted: u64,
    pub quorum_bad_handshakes: u64,
    pub quorum_refused: u64,
    pub quorum_expired: u64,
    pub http_refused: u64,
    pub http_idle_closed: u64,
    pub writes_too_large: u64,
}

impl WireCounters {
    pub fn snapshot(&self) -> WireCountersSnapshot {
        WireCountersSnapshot {
            bad_hellos: self.bad_hellos.load(Ordering::Relaxed),
            bad_frames: self.bad_frames.load(Ordering::Relaxed),
            bad_notifications: self.bad_notifications.load(Ordering::Relaxed),
            connections_accepted: self.connections_accepted.load(Ordering::Relaxed),
            receiver_dead: self.receiver_dead.load(Ordering::Relaxed),
            refused_unidentified: self.refused_unidentified.load(Ordering::Relaxed),
            quorum_accepted: self.quorum_accepted.load(Ordering::Relaxed),
            quorum_bad_handshakes: self.quorum_bad_handshakes.load(Ordering::Relaxed),
            quorum_refused: self.quorum_refused.load(Ordering::Relaxed),
            quorum_expired: self.quorum_expired.load(Ordering::Relaxed),
            http_refused: self.http_refused.load(Ordering::Relaxed),
            http_idle_closed: self.http_idle_closed.load(Ordering::Relaxed),
            writes_too_large: self.writes_too_large.load(Ordering::Relaxed),
        }
    }
}

pub fn bump(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

/// One other voter, as seen from here.
struct Link {
    /// Its election "host:port".
    addr: String,
    /// The task that dials and serves it; aborted when the link is dropped.
    task: tokio::task::JoinHandle<()>,
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
    /// Shared with the quorum port and HTTP: one warning per source per interval.
    pub warnings: Arc<WarnLimiter>,
    acceptor: tokio::task::JoinHandle<()>,
    /// The acceptor's way to each link, replaced when the links change.
    routes: Arc<std::sync::RwLock<BTreeMap<u64, Route>>>,
    spawn: LinkSpawner,
}

impl Drop for Peers {
    fn drop(&mut self) {
        self.acceptor.abort();
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// What every link task shares: who we are, where notifications go, counters and bugs.
struct LinkSpawner {
    me: Identity,
    inbound: mpsc::Sender<(u64, Notification)>,
    counters: Arc<WireCounters>,
    bugs: Bugs,
    /// Shared by every link; taken only under the seeded `blocking-connect` bug.
    dial_lock: Arc<tokio::sync::Mutex<()>>,
    warnings: Arc<WarnLimiter>,
}

impl LinkSpawner {
    /// Starts the task that keeps the connection to `peer` at `addr`.
    fn link(&self, peer: u64, addr: String) -> Link {
        let (outbox, outbox_rx) = watch::channel(None);
        let (incoming, incoming_rx) = mpsc::channel(4);
        let dial_now = Arc::new(Notify::new());
        let task = LinkTask {
            me: self.me.clone(),
            peer,
            peer_addr: addr.clone(),
            outbox: outbox_rx,
            incoming: incoming_rx,
            dial_now: dial_now.clone(),
            inbound: self.inbound.clone(),
            counters: self.counters.clone(),
            bugs: self.bugs,
            dial_lock: self.dial_lock.clone(),
            warnings: self.warnings.clone(),
        };
        Link {
            addr,
            task: tokio::spawn(task.run()),
            outbox,
            incoming,
            dial_now,
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
        Peers::start_with(me, listener, peers, inbound, HELLO_TIMEOUT, Bugs::none())
    }

    /// As [`Peers::start`], with the hello deadline (tickTime·initLimit in the server) and
    /// seeded bugs (`blocking-connect`, `deaf-on-truncated`).
    pub fn start_with(
        me: Identity,
        listener: TcpListener,
        peers: BTreeMap<u64, String>,
        inbound: mpsc::Sender<(u64, Notification)>,
        hello_timeout: Duration,
        bugs: Bugs,
    ) -> Peers {
        let counters = Arc::new(WireCounters::default());
        let warnings = Arc::new(WarnLimiter::default());
        let routes = Arc::new(std::sync::RwLock::new(BTreeMap::new()));
        let acceptor = Acceptor {
            my_sid: me.sid,
            routes: routes.clone(),
            counters: counters.clone(),
            warnings: warnings.clone(),
            hello_timeout,
            unidentified: Arc::new(Semaphore::new(MAX_UNIDENTIFIED)),
        };
        let acceptor = tokio::spawn(acceptor.run(listener));
        let mut started = Peers {
            links: BTreeMap::new(),
            counters: counters.clone(),
            warnings: warnings.clone(),
            acceptor,
            routes,
            spawn: LinkSpawner {
                me,
                inbound,
                counters,
                bugs,
                dial_lock: Arc::new(tokio::sync::Mutex::new(())),
                warnings,
            },
        };
        started.set_peers(peers);
        started
    }

    /// Makes the links match `peers` (sid -> election "host:port"), as a reconfig changes
    /// them: a link to a server no longer listed (or at a new address) is dropped with its
    /// connection, a new one is started. Unchanged links keep their connections.
    pub fn set_peers(&mut self, peers: BTreeMap<u64, String>) {
        let me = self.spawn.me.sid;
        let keep = |sid: &u64, link: &Link| peers.get(sid) == Some(&link.addr);
        self.links.retain(|sid, link| keep(sid, link));
        for (sid, addr) in peers {
            if sid != me && !self.links.contains_key(&sid) {
                self.links.insert(sid, self.spawn.link(sid, addr));
            }
        }
        *self.routes.write().unwrap_or_else(|e| e.into_inner()) = self
            .links
            .iter()
            .map(|(sid, l)| (*sid, (l.incoming.clone(), l.dial_now.clone())))
            .collect();
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
    routes: Arc<std::sync::RwLock<BTreeMap<u64, Route>>>,
    counters: Arc<WireCounters>,
    warnings: Arc<WarnLimiter>,
    hello_timeout: Duration,
    unidentified: Arc<Semaphore>,
}

impl Acceptor {
    async fn run(self, listener: TcpListener) {
        let me = Arc::new(self);
        loop {
            match listener.accept().await {
                Ok((stream, from)) => {
                    bump(&me.counters.connections_accepted);
                    let Ok(slot) = me.unidentified.clone().try_acquire_owned() else {
                        // Dropping closes it: a flood of silent dialers costs no memory.
                        bump(&me.counters.refused_unidentified);
                        if let Some(n) = me
                            .warnings
                            .allow(&from.ip().to_string(), std::time::Instant::now())
                        {
                            tracing::warn!(from = %from.ip(), suppressed = n, limit = MAX_UNIDENTIFIED, "election port: too many connections without a hello; closing new ones");
                        }
                        continue;
                    };
                    let me = me.clone();
                    // Each hello is read in its own task: a silent dialer blocks nobody.
                    tokio::spawn(async move {
                        me.handle(stream, from).await;
                        drop(slot);
                    });
                }
                Err(e) => {
                    tracing::warn!(error = %e, "election port accept failed");
                    tokio::time::sleep(BACKOFF_MIN).await;
                }
            }
        }
    }

    /// Logs a bad-input line unless `from` had one within the interval.
    fn warn(&self, from: &SocketAddr, what: &str, error: &dyn std::fmt::Display) {
        if let Some(n) = self
            .warnings
            .allow(&from.ip().to_string(), std::time::Instant::now())
        {
            tracing::warn!(from = %from, suppressed = n, error = %error, "{what}");
        }
    }

    async fn handle(&self, mut stream: TcpStream, from: SocketAddr) {
        let sid = match tokio::time::timeout(self.hello_timeout, read_hello(&mut stream)).await {
            Ok(Ok(sid)) => sid,
            Ok(Err(e)) => {
                bump(&self.counters.bad_hellos);
                self.warn(&from, "dropped an election connection with a bad hello", &e);
                return;
            }
            Err(_) => {
                bump(&self.counters.bad_hellos);
                self.warn(
                    &from,
                    "dropped an election connection that sent no hello",
                    &format_args!("no hello within {:?}", self.hello_timeout),
                );
                return;
            }
        };
        let route = self
            .routes
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&sid)
            .cloned();
        let Some((incoming, dial_now)) = route else {
            bump(&self.counters.bad_hellos);
            self.warn(
                &from,
                "dropped an election connection from an unknown server id",
                &format_args!("sid {sid}"),
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
    dial_within(me, addr, CONNECT_TIMEOUT).await
}

/// `dial`, giving up on the connect after `timeout`.
async fn dial_within(me: &Identity, addr: &str, timeout: Duration) -> io::Result<TcpStream> {
    let mut stream = dial_raw_within(me, addr, timeout).await?;
    stream
        .write_all(&wire::encode_hello(me.sid, &me.election_addr))
        .await?;
    Ok(stream)
}

/// Dials `addr` from our own configured address (ZooKeeper binds outgoing sockets too, so
/// per-address firewall rules see the server's address).
pub async fn dial_raw(me: &Identity, addr: &str) -> io::Result<TcpStream> {
    dial_raw_within(me, addr, CONNECT_TIMEOUT).await
}

async fn dial_raw_within(me: &Identity, addr: &str, timeout: Duration) -> io::Result<TcpStream> {
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
    let stream = tokio::time::timeout(timeout, socket.connect(target))
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
    warnings: Arc<WarnLimiter>,
}

impl LinkTask {
    async fn dial(&self) -> io::Result<TcpStream> {
        if self.bugs.has(Bug::BlockingConnect) {
            // Seeded ZOOKEEPER-3756: one connect at a time for all peers (a synchronized
            // connectOne), so a blackholed peer's connect timeout holds every other dial.
            // With ZooKeeper's own connect timeout (cnxTimeout, 5 s), not fle-node's short one.
            let _one_at_a_time = self.dial_lock.lock().await;
            return dial_within(&self.me, &self.peer_addr, ZOOKEEPER_CONNECT_TIMEOUT).await;
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
            if let Some(s) = stream {
                let served = std::time::Instant::now();
                match self.serve(s).await {
                    Ended::Replaced(s) => {
                        next = Some(s);
                        backoff = BACKOFF_MIN;
                        continue;
                    }
                    // The peer's poke says it has no connection: dial again at once.
                    Ended::Stale => {
                        backoff = BACKOFF_MIN;
                        continue;
                    }
                    Ended::Lost if served.elapsed() >= BACKOFF_MAX => {
                        backoff = BACKOFF_MIN;
                        continue;
                    }
                    // Hung up at once (a peer that does not know us: we were removed by a
                    // reconfig, or it has not activated the one that adds us): back off as
                    // after a failed dial, instead of dialing again in a loop.
                    Ended::Lost => {}
                }
            }
            tokio::select! {
                _ = tokio::time::sleep(backoff) => {}
                _ = self.dial_now.notified() => {}
                s = self.incoming.recv() => next = s,
            }
            backoff = (backoff * 2).min(BACKOFF_MAX);
        }
    }

    /// Runs one connection until it ends, and says why.
    async fn serve(&mut self, stream: TcpStream) -> Ended {
        let _ = stream.set_nodelay(true);
        watch_liveness(&stream);
        let (mut rd, mut wr) = stream.into_split();
        let peer = self.peer;
        let inbound = self.inbound.clone();
        let counters = self.counters.clone();
        let bugs = self.bugs;
        let warnings = self.warnings.clone();
        let key = format!("server {peer}");
        let warn = move |what: &str, e: &dyn std::fmt::Display| {
            if let Some(n) = warnings.allow(&key, std::time::Instant::now()) {
                tracing::warn!(peer, suppressed = n, error = %e, "{what}");
            }
        };
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
                        warn("closing election connection", &e);
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
                        warn("dropped a malformed notification", &e);
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
        // A poke from the smaller sid means it has no connection to us: ours is stale (its
        // side was lost in a partition or a restart) and waiting for TCP to notice costs seconds.
        // Pokes that came before this connection existed were answered by it: forget them, or
        // each one would end a fresh connection (with `blocking-connect`'s 5 s dials the smaller
        // side pokes many times per dial, and no connection outlived its first message).
        let (dial_now, larger) = (self.dial_now.clone(), self.me.sid > self.peer);
        let _ = dial_now.notified().now_or_never();
        let stale = async move {
            if larger {
                dial_now.notified().await
            } else {
                std::future::pending().await
            }
        };
        // Not `biased` toward the reader: a replaced connection's EOF would win over the
        // newer connection waiting in `incoming` every time, and the poke that follows makes
        // the larger sid dial again, and again (a connection storm, seen in CI 2026-12-05).
        tokio::select! {
            _ = reader => Ended::Lost,
            _ = writer => Ended::Lost,
            s = self.incoming.recv() => s.map_or(Ended::Lost, Ended::Replaced),
            _ = stale => Ended::Stale,
        }
    }
}

/// Why a served connection ended.
enum Ended {
    /// A newer connection from the peer took its place.
    Replaced(TcpStream),
    /// The smaller sid poked us: it has no connection, so ours is dead.
    Stale,
    /// Read or write failed: the peer hung up or the connection broke.
    Lost,
}
