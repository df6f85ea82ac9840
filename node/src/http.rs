//! The node's HTTP API: `GET /status` (the shared `api::NodeStatus`, plus read-only extras),
//! `POST /write` (see `write_route`), `GET /log?from=ZXID` (committed entries), the data tree's
//! `POST /data`, `GET /data/KEY` and `POST /sync` (see `data_route`) and ZooKeeper's
//! AdminServer `GET /commands/leader`, so ZooKeeper tools read us too.
//!
//! Status handlers only read: the server publishes its state into one watch channel.
//!
//! Hygiene (issue 18): [`Guarded`] caps open connections and closes one that makes no progress
//! for an idle timeout (slow or silent clients are not held forever); a write body larger than
//! jute.maxbuffer is refused with 413 naming the limit, before it is buffered whole.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::{get, post};
use axum::{Json, Router};
use futures_util::StreamExt;
use serde::Serialize;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};

use crate::api::{ApiError, LogResponse, NodeStatus, ServerState};
use crate::bugs::Bugs;
use crate::data_route::Data;
use crate::election::ElectionCounters;
use crate::peers::{bump, WireCounters, WireCountersSnapshot};
use crate::write_route::{Writes, FORWARDED_HEADER};
use crate::zab::store::{lock, OrderCounters, SharedStore};
use crate::zab::SyncMode;

/// What the handlers can see.
#[derive(Clone)]
pub struct HttpState {
    pub status: watch::Receiver<NodeStatus>,
    pub started: Instant,
    pub wire: Arc<WireCounters>,
    pub election: Arc<Mutex<ElectionCounters>>,
    /// The servers in force (the leader's host for `/commands/leader`).
    pub members: crate::membership::Members,
    /// Read by `/log`.
    pub store: SharedStore,
    pub writes: Writes,
    /// The data tree's ops, reads and syncs.
    pub data: Data,
    /// How this server was last synced as a follower (DIFF/TRUNC/SNAP), for diagnostics.
    pub sync_mode: Arc<Mutex<Option<SyncMode>>>,
    /// Seeded bugs this server runs with (`--bug`), shown in `/status`.
    pub bugs: Bugs,
    /// jute.maxbuffer: the largest write body accepted.
    pub max_body: usize,
}

/// A connection that moves no byte for this long is closed (at least; the server raises it
/// above its longest write wait so a write in flight is never cut).
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(10);
/// Open HTTP connections at most; more are closed at once.
pub const MAX_CONNECTIONS: usize = 256;

/// `/status`: the shared contract, flattened, plus fields only diagnostics need.
#[derive(Serialize)]
struct StatusBody {
    #[serde(flatten)]
    status: NodeStatus,
    pid: u32,
    wire: WireCountersSnapshot,
    election_drops: ElectionCounters,
    sync_mode: Option<SyncMode>,
    /// Names of the seeded bugs in force (empty on a correct server).
    seeded_bugs: Vec<&'static str>,
    durability_order: OrderCounters,
}

/// ZooKeeper AdminServer's answer to `leader`.
#[derive(Serialize)]
struct LeaderBody {
    command: &'static str,
    error: Option<String>,
    is_leader: bool,
    leader_id: i64,
    leader_ip: String,
}

pub fn router(state: HttpState) -> Router {
    Router::new()
        .route("/status", get(status))
        .route("/commands/leader", get(leader))
        .route("/write", post(write))
        .route("/reconfig", post(reconfig))
        .route("/log", get(log))
        .route("/data", post(data_write))
        // Any rest of the path is a key, so "a/b" or "" is refused as one (400), not a 404.
        .route("/data/", get(data_read_empty))
        .route("/data/{*key}", get(data_read))
        .route("/sync", post(sync))
        .with_state(state)
}

/// The published status with the clocks read now.
pub fn current(state: &HttpState) -> NodeStatus {
    let mut s = state.status.borrow().clone();
    s.wall_clock_ms = chrono::Utc::now().timestamp_millis();
    s.uptime_ms = state.started.elapsed().as_millis() as u64;
    s
}

async fn status(State(state): State<HttpState>) -> Json<serde_json::Value> {
    let body = StatusBody {
        status: current(&state),
        pid: std::process::id(),
        wire: state.wire.snapshot(),
        election_drops: *state.election.lock().unwrap_or_else(|e| e.into_inner()),
        sync_mode: *state.sync_mode.lock().unwrap_or_else(|e| e.into_inner()),
        seeded_bugs: state.bugs.iter().map(|i| i.name).collect(),
        durability_order: lock(&state.store).order_counters(),
    };
    Json(serde_json::to_value(body).unwrap_or_default())
}

async fn leader(State(state): State<HttpState>) -> Json<LeaderBody> {
    let s = current(&state);
    let leader = if s.state == ServerState::Looking {
        None
    } else {
        s.leader
    };
    Json(LeaderBody {
        command: "leader",
        error: None,
        is_leader: s.state == ServerState::Leading,
        leader_id: leader.map(|l| l as i64).unwrap_or(-1),
        leader_ip: leader
            .and_then(|l| Some(state.members.borrow().servers.get(&l)?.host.clone()))
            .unwrap_or_default(),
    })
}

type Answer = (StatusCode, Json<serde_json::Value>);

fn answer(code: u16, body: serde_json::Value) -> Answer {
    (
        StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        Json(body),
    )
}

async fn write(State(state): State<HttpState>, headers: HeaderMap, body: Body) -> Answer {
    let forwarded = headers.contains_key(FORWARDED_HEADER);
    let body = match body_of(&state, body).await {
        Ok(b) => b,
        Err(refused) => return refused,
    };
    let (code, body) = state.writes.handle(&body, forwarded).await;
    answer(code, body)
}

async fn reconfig(State(state): State<HttpState>, headers: HeaderMap, body: Body) -> Answer {
    let forwarded = headers.contains_key(FORWARDED_HEADER);
    let body = match body_of(&state, body).await {
        Ok(b) => b,
        Err(refused) => return refused,
    };
    let (code, body) =
        crate::reconfig_route::handle(&state.writes, &state.members, &body, forwarded).await;
    answer(code, body)
}

/// A write's body, or the answer refusing it (413 past jute.maxbuffer, 400 unreadable).
async fn body_of(state: &HttpState, body: Body) -> Result<Vec<u8>, Answer> {
    match read_limited(body, state.max_body).await {
        Ok(b) => Ok(b),
        Err(BodyError::TooLarge) => {
            bump(&state.wire.writes_too_large);
            Err(error(
                413,
                format!(
                    "the write body is larger than jute.maxbuffer ({} bytes); not applied (send a smaller value or raise jute.maxbuffer in zoo.cfg)",
                    state.max_body
                ),
            ))
        }
        Err(BodyError::Read(e)) => Err(error(400, format!("reading the write body failed: {e}"))),
    }
}

async fn data_write(State(state): State<HttpState>, headers: HeaderMap, body: Body) -> Answer {
    let forwarded = headers.contains_key(FORWARDED_HEADER);
    let body = match body_of(&state, body).await {
        Ok(b) => b,
        Err(refused) => return refused,
    };
    let (code, body) = state.data.write(&body, forwarded).await;
    answer(code, body)
}

async fn data_read(
    State(state): State<HttpState>,
    key: Result<Path<String>, PathRejection>,
) -> Answer {
    match key {
        Ok(Path(key)) => {
            let (code, body) = state.data.read(&key);
            answer(code, body)
        }
        Err(e) => error(400, format!("the key in /data/KEY is unreadable: {e}")),
    }
}

async fn data_read_empty(State(state): State<HttpState>) -> Answer {
    let (code, body) = state.data.read("");
    answer(code, body)
}

async fn sync(State(state): State<HttpState>, headers: HeaderMap) -> Answer {
    let forwarded = headers.contains_key(FORWARDED_HEADER);
    let (code, body) = state.data.sync(forwarded).await;
    answer(code, body)
}

fn error(code: u16, error: String) -> Answer {
    let e = ApiError {
        error,
        leader: None,
        outcome_unknown: false,
    };
    answer(code, serde_json::to_value(e).unwrap_or_default())
}

enum BodyError {
    TooLarge,
    Read(axum::Error),
}

/// The body, or TooLarge as soon as it passes `limit` bytes (never buffered beyond it).
async fn read_limited(body: Body, limit: usize) -> Result<Vec<u8>, BodyError> {
    let mut stream = body.into_data_stream();
    let mut buf = Vec::new();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(BodyError::Read)?;
        if buf.len() + chunk.len() > limit {
            return Err(BodyError::TooLarge);
        }
        buf.extend_from_slice(&chunk);
    }
    Ok(buf)
}

/// The HTTP listener with a connection cap and an idle timeout per connection.
pub struct Guarded {
    listener: TcpListener,
    slots: Arc<Semaphore>,
    idle: Duration,
    counters: Arc<WireCounters>,
}

impl Guarded {
    pub fn new(listener: TcpListener, idle: Duration, counters: Arc<WireCounters>) -> Guarded {
        Guarded {
            listener,
            slots: Arc::new(Semaphore::new(MAX_CONNECTIONS)),
            idle,
            counters,
        }
    }
}

impl axum::serve::Listener for Guarded {
    type Io = IdleStream;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (IdleStream, SocketAddr) {
        loop {
            match self.listener.accept().await {
                Ok((stream, addr)) => match self.slots.clone().try_acquire_owned() {
                    Ok(slot) => {
                        let deadline = Box::pin(tokio::time::sleep(self.idle));
                        return (
                            IdleStream {
                                stream,
                                idle: self.idle,
                                deadline,
                                counters: self.counters.clone(),
                                _slot: slot,
                            },
                            addr,
                        );
                    }
                    // Dropping closes it.
                    Err(_) => bump(&self.counters.http_refused),
                },
                Err(e) => {
                    tracing::warn!("accepting on the HTTP port: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }
}

/// A TCP stream that fails with TimedOut once no byte moved either way for `idle`.
pub struct IdleStream {
    stream: TcpStream,
    idle: Duration,
    deadline: Pin<Box<tokio::time::Sleep>>,
    counters: Arc<WireCounters>,
    _slot: OwnedSemaphorePermit,
}

impl IdleStream {
    fn progressed(&mut self) {
        let next = tokio::time::Instant::now() + self.idle;
        self.deadline.as_mut().reset(next);
    }

    fn timed_out(&mut self, cx: &mut Context<'_>) -> bool {
        if self.deadline.as_mut().poll(cx).is_ready() {
            bump(&self.counters.http_idle_closed);
            return true;
        }
        false
    }
}

fn idle_error() -> io::Error {
    io::Error::new(io::ErrorKind::TimedOut, "HTTP connection idle too long")
}

impl AsyncRead for IdleStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        match Pin::new(&mut self.stream).poll_read(cx, buf) {
            Poll::Ready(r) => {
                if buf.filled().len() > before {
                    self.progressed();
                }
                Poll::Ready(r)
            }
            Poll::Pending if self.timed_out(cx) => Poll::Ready(Err(idle_error())),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl AsyncWrite for IdleStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        match Pin::new(&mut self.stream).poll_write(cx, data) {
            Poll::Ready(Ok(n)) => {
                self.progressed();
                Poll::Ready(Ok(n))
            }
            Poll::Pending if self.timed_out(cx) => Poll::Ready(Err(idle_error())),
            other => other,
        }
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

/// `from` as a decimal or 0x-hex zxid.
fn parse_zxid(text: &str) -> Option<u64> {
    match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => text.parse().ok(),
    }
}

async fn log(
    State(state): State<HttpState>,
    Query(q): Query<std::collections::HashMap<String, String>>,
) -> Answer {
    let from = match q.get("from").map(|f| (f, parse_zxid(f))) {
        None => 0,
        Some((_, Some(z))) => z,
        Some((f, None)) => {
            let e = ApiError {
                error: format!("from={f:?} is not a zxid (give a decimal or 0x-hex number)"),
                leader: None,
                outcome_unknown: false,
            };
            return answer(400, serde_json::to_value(e).unwrap_or_default());
        }
    };
    let body = {
        let s = lock(&state.store);
        LogResponse {
            entries: s.committed_from(from),
            last_committed_zxid: s.last_committed_zxid(),
        }
    };
    answer(200, serde_json::to_value(body).unwrap_or_default())
}
