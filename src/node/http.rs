//! The node's HTTP API: `GET /status` (the shared `api::NodeStatus`, plus read-only extras),
//! `POST /write` (see `write_route`), `GET /log?from=ZXID` (committed entries) and ZooKeeper's
//! AdminServer `GET /commands/leader`, so ZooKeeper tools read us too.
//!
//! Status handlers only read: the server publishes its state into one watch channel.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Serialize;
use tokio::sync::watch;

use crate::api::{ApiError, LogResponse, NodeStatus, ServerState};
use crate::node::bugs::Bugs;
use crate::node::election::ElectionCounters;
use crate::node::peers::{WireCounters, WireCountersSnapshot};
use crate::node::write_route::{Writes, FORWARDED_HEADER};
use crate::node::zab::store::{lock, OrderCounters, SharedStore};
use crate::node::zab::SyncMode;

/// What the handlers can see.
#[derive(Clone)]
pub struct HttpState {
    pub status: watch::Receiver<NodeStatus>,
    pub started: Instant,
    pub wire: Arc<WireCounters>,
    pub election: Arc<Mutex<ElectionCounters>>,
    /// Host of every server, by sid (for `leader_ip`).
    pub hosts: Arc<std::collections::BTreeMap<u64, String>>,
    /// Read by `/log`.
    pub store: SharedStore,
    pub writes: Writes,
    /// How this server was last synced as a follower (DIFF/TRUNC/SNAP), for diagnostics.
    pub sync_mode: Arc<Mutex<Option<SyncMode>>>,
    /// Seeded bugs this server runs with (`--bug`), shown in `/status`.
    pub bugs: Bugs,
}

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
        .route("/log", get(log))
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
            .and_then(|l| state.hosts.get(&l).cloned())
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

async fn write(State(state): State<HttpState>, headers: HeaderMap, body: Bytes) -> Answer {
    let forwarded = headers.contains_key(FORWARDED_HEADER);
    let (code, body) = state.writes.handle(&body, forwarded).await;
    answer(code, body)
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
