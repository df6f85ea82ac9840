//! Where a client's `POST /write` goes, as in ZooKeeper: the leader proposes it through this
//! term's Zab write channel; a follower forwards it to the leader's HTTP API (when the config
//! names it) or refuses with the leader's sid; a server that is looking refuses.
//!
//! Every answer keeps the API's promise: 200 committed, 503 certainly not applied, 504 maybe.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

use crate::api::{ApiError, WriteRequest};
use crate::node::zab::ClientWrite;

/// Marks a forwarded write, so a server that lost leadership meanwhile does not forward again.
pub const FORWARDED_HEADER: &str = "x-fle-forwarded-by";

/// This server's part in the current term, set by the server loop.
#[derive(Debug, Clone, Default)]
pub enum Route {
    #[default]
    Looking,
    /// Leading: the write channel of this term (closed once the term ends).
    Leading(mpsc::Sender<ClientWrite>),
    Following {
        leader: u64,
    },
}

/// What the write handler needs; cheap to clone.
#[derive(Clone)]
pub struct Writes {
    pub route: Arc<Mutex<Route>>,
    /// Every server's HTTP address (`server.N=...;host:port`), for forwarding.
    pub http_addrs: Arc<BTreeMap<u64, String>>,
    pub client: reqwest::Client,
    /// How long to wait for an answer before saying 504 (longer than Zab's own write timeout,
    /// which answers first in the normal case).
    pub wait: Duration,
}

fn error(code: u16, error: String, leader: Option<u64>) -> (u16, Value) {
    let outcome_unknown = code == 504;
    let body = ApiError {
        error,
        leader,
        outcome_unknown,
    };
    (code, serde_json::to_value(body).unwrap_or_default())
}

impl Writes {
    pub fn set(&self, route: Route) {
        *self.route.lock().unwrap_or_else(|e| e.into_inner()) = route;
    }

    fn current(&self) -> Route {
        self.route.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Answers one write: (HTTP status, JSON body).
    pub async fn handle(&self, body: &[u8], forwarded: bool) -> (u16, Value) {
        let req: WriteRequest = match serde_json::from_slice(body) {
            Ok(r) => r,
            Err(e) => {
                return error(
                    400,
                    format!("the body must be JSON {{\"value\": V}}: {e}"),
                    None,
                )
            }
        };
        match self.current() {
            Route::Looking => error(
                503,
                "looking for a leader; the write was not applied (retry later)".into(),
                None,
            ),
            Route::Leading(tx) => self.propose(tx, req.value).await,
            Route::Following { leader } if forwarded => error(
                503,
                format!("not the leader any more (following {leader}); not applied"),
                Some(leader),
            ),
            Route::Following { leader } => self.forward(leader, &req).await,
        }
    }

    async fn propose(&self, tx: mpsc::Sender<ClientWrite>, value: Value) -> (u16, Value) {
        let (reply, answer) = oneshot::channel();
        match tokio::time::timeout(self.wait, tx.send(ClientWrite { value, reply })).await {
            Ok(Ok(())) => {}
            Ok(Err(_)) => {
                return error(
                    503,
                    "leadership ended before the write was proposed; not applied".into(),
                    None,
                )
            }
            Err(_) => {
                return error(
                    503,
                    "the leader's write queue stayed full; not applied".into(),
                    None,
                )
            }
        }
        match tokio::time::timeout(self.wait, answer).await {
            Ok(Ok(outcome)) => outcome.http(),
            // The term ended with the write queued or (if the node is failing) proposed.
            Ok(Err(_)) => error(
                504,
                "leadership ended with the write in flight; it may or may not commit".into(),
                None,
            ),
            Err(_) => error(
                504,
                format!(
                    "no outcome within {:?}; it may or may not commit",
                    self.wait
                ),
                None,
            ),
        }
    }

    async fn forward(&self, leader: u64, req: &WriteRequest) -> (u16, Value) {
        let Some(addr) = self.http_addrs.get(&leader) else {
            return error(
                503,
                format!("not the leader; write to server {leader} (no client address to forward to in the config)"),
                Some(leader),
            );
        };
        let sent = self
            .client
            .post(format!("http://{addr}/write"))
            .header(FORWARDED_HEADER, "1")
            .timeout(self.wait)
            .json(req)
            .send()
            .await;
        match sent {
            Ok(resp) => {
                let code = resp.status().as_u16();
                match resp.json::<Value>().await {
                    Ok(body) => (code, body),
                    Err(e) => error(
                        504,
                        format!("leader {leader} answered {code} with an unreadable body: {e}"),
                        Some(leader),
                    ),
                }
            }
            // Never connected: the leader never saw it.
            Err(e) if e.is_connect() => error(
                503,
                format!("cannot reach leader {leader} at {addr}: {e}; not applied"),
                Some(leader),
            ),
            Err(e) => error(
                504,
                format!(
                    "forwarding to leader {leader} at {addr} failed: {e}; it may or may not commit"
                ),
                Some(leader),
            ),
        }
    }
}
