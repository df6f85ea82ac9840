//! Where a client's `POST /write` goes, as in ZooKeeper: the leader proposes it through this
//! term's Zab write channel; a follower forwards it to the leader's HTTP API (when the config
//! names it) or refuses with the leader's sid; a server that is looking refuses. `data_route`
//! sends the data tree's ops and syncs the same ways ([`Writes::commit`], [`Writes::forward`]).
//!
//! Every answer keeps the API's promise: 200 committed, 503 certainly not applied, 504 maybe.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

use crate::api::{ApiError, WriteCommitted, WriteRequest};
use crate::membership::Members;
use crate::zab::{ClientWrite, WriteOutcome};

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
    /// The servers in force: their HTTP addresses (`server.N=...;host:port`) for forwarding.
    pub members: Members,
    /// How long to wait for an answer before saying 504 (longer than Zab's own write timeout,
    /// which answers first in the normal case).
    pub wait: Duration,
}

/// An [`ApiError`] answer; a 504 is `outcome_unknown`.
pub fn error(code: u16, error: String, leader: Option<u64>) -> (u16, Value) {
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

    pub fn current(&self) -> Route {
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
            Route::Following { leader } => self.forward(leader, "/write", &req).await,
        }
    }

    async fn propose(&self, tx: mpsc::Sender<ClientWrite>, value: Value) -> (u16, Value) {
        match self.commit(tx, value).await {
            Ok(zxid) => (
                200,
                serde_json::to_value(WriteCommitted { zxid }).unwrap_or_default(),
            ),
            Err(answer) => answer,
        }
    }

    /// Proposes `value` through this term's write channel: `Ok(zxid)` once committed, or the
    /// answer to give (503 certainly not applied, 504 maybe).
    pub async fn commit(
        &self,
        tx: mpsc::Sender<ClientWrite>,
        value: Value,
    ) -> Result<u64, (u16, Value)> {
        let (reply, answer) = oneshot::channel();
        match tokio::time::timeout(self.wait, tx.send(ClientWrite { value, reply })).await {
            Ok(Ok(())) => {}
            Ok(Err(_)) => {
                return Err(error(
                    503,
                    "leadership ended before the write was proposed; not applied".into(),
                    None,
                ))
            }
            Err(_) => {
                return Err(error(
                    503,
                    "the leader's write queue stayed full; not applied".into(),
                    None,
                ))
            }
        }
        match tokio::time::timeout(self.wait, answer).await {
            Ok(Ok(WriteOutcome::Committed(zxid))) => Ok(zxid),
            Ok(Ok(outcome)) => Err(outcome.http()),
            // The term ended with the write queued or (if the node is failing) proposed.
            Ok(Err(_)) => Err(error(
                504,
                "leadership ended with the write in flight; it may or may not commit".into(),
                None,
            )),
            Err(_) => Err(error(
                504,
                format!(
                    "no outcome within {:?}; it may or may not commit",
                    self.wait
                ),
                None,
            )),
        }
    }

    /// Sends `req` to the leader's `path` (marked as forwarded) and relays its answer; a leader
    /// never reached is 503 (certainly not applied), one that did not answer is 504.
    pub async fn forward<T: Serialize>(&self, leader: u64, path: &str, req: &T) -> (u16, Value) {
        let addr = (self.members.borrow().servers.get(&leader)).and_then(|a| a.client.clone());
        let Some(addr) = addr else {
            return error(
                503,
                format!("not the leader; write to server {leader} (no client address to forward to in the config)"),
                Some(leader),
            );
        };
        let sent = tokio::time::timeout(self.wait, post_json(&addr, path, req)).await;
        match sent {
            Ok(Ok((code, body))) => match serde_json::from_slice::<Value>(&body) {
                Ok(body) => (code, body),
                Err(e) => error(
                    504,
                    format!("leader {leader} answered {code} with an unreadable body: {e}"),
                    Some(leader),
                ),
            },
            // Never connected: the leader never saw it.
            Ok(Err(Forward::Connect(e))) => error(
                503,
                format!("cannot reach leader {leader} at {addr}: {e}; not applied"),
                Some(leader),
            ),
            Ok(Err(Forward::Exchange(e))) => error(
                504,
                format!(
                    "forwarding to leader {leader} at {addr} failed: {e}; it may or may not commit"
                ),
                Some(leader),
            ),
            Err(_) => error(
                504,
                format!(
                    "forwarding to leader {leader} at {addr}: no answer within {:?}; it may or may not commit",
                    self.wait
                ),
                Some(leader),
            ),
        }
    }
}

/// Why a forwarded write got no answer: before the request could be sent (certainly not
/// applied) or after (maybe applied).
enum Forward {
    Connect(String),
    Exchange(String),
}

/// How long a forward may take to connect: a leader that does not accept within this is
/// unreachable, and the write certainly was not applied.
const CONNECT_TIMEOUT: Duration = Duration::from_millis(500);

/// POSTs `req` as JSON to `http://addr{path}` (marked as forwarded) over one HTTP/1.1
/// connection; returns the status and the body.
async fn post_json<T: Serialize>(
    addr: &str,
    path: &str,
    req: &T,
) -> Result<(u16, Vec<u8>), Forward> {
    use http_body_util::{BodyExt, Full};
    let stream =
        match tokio::time::timeout(CONNECT_TIMEOUT, tokio::net::TcpStream::connect(addr)).await {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => return Err(Forward::Connect(e.to_string())),
            Err(_) => {
                return Err(Forward::Connect(format!(
                    "no connection within {CONNECT_TIMEOUT:?}"
                )))
            }
        };
    let io = hyper_util::rt::TokioIo::new(stream);
    let (mut sender, conn) = hyper::client::conn::http1::handshake(io)
        .await
        .map_err(|e| Forward::Connect(e.to_string()))?;
    // The connection task ends when the exchange is over or the future is dropped (timeout).
    let conn = tokio::spawn(conn);
    let body = serde_json::to_vec(req).map_err(|e| Forward::Connect(e.to_string()))?;
    let request = hyper::Request::post(path)
        .header(hyper::header::HOST, addr)
        .header(hyper::header::CONTENT_TYPE, "application/json")
        .header(FORWARDED_HEADER, "1")
        .body(Full::new(hyper::body::Bytes::from(body)))
        .map_err(|e| Forward::Connect(e.to_string()))?;
    let result = async {
        let resp = sender
            .send_request(request)
            .await
            .map_err(|e| Forward::Exchange(e.to_string()))?;
        let code = resp.status().as_u16();
        let body = resp
            .into_body()
            .collect()
            .await
            .map_err(|e| Forward::Exchange(e.to_string()))?
            .to_bytes();
        Ok((code, body.to_vec()))
    }
    .await;
    conn.abort();
    result
}
