//! The node's HTTP API: `GET /status` (the shared `api::NodeStatus`, plus read-only extras)
//! and ZooKeeper's AdminServer `GET /commands/leader`, so ZooKeeper tools read us too.
//!
//! Handlers only read: the server publishes its state into one watch channel.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use serde::Serialize;
use tokio::sync::watch;

use crate::api::{NodeStatus, ServerState};
use crate::node::election::ElectionCounters;
use crate::node::peers::{WireCounters, WireCountersSnapshot};

/// What the handlers can see.
#[derive(Clone)]
pub struct HttpState {
    pub status: watch::Receiver<NodeStatus>,
    pub started: Instant,
    pub wire: Arc<WireCounters>,
    pub election: Arc<Mutex<ElectionCounters>>,
    /// Host of every server, by sid (for `leader_ip`).
    pub hosts: Arc<std::collections::BTreeMap<u64, String>>,
}

/// `/status`: the shared contract, flattened, plus fields only diagnostics need.
#[derive(Serialize)]
struct StatusBody {
    #[serde(flatten)]
    status: NodeStatus,
    pid: u32,
    wire: WireCountersSnapshot,
    election_drops: ElectionCounters,
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
