//! The workload's ZooKeeper client: one session per server (connect string = that server
//! only, so an operation's outcome belongs to the node the workload chose), writes as
//! sequential znodes under a test path, and the final read of those znodes.
//!
//! Outcomes follow Jepsen: `ok` only when ZooKeeper acknowledged the create (its czxid is the
//! write's zxid); `fail` only when the request certainly was not applied (no session could be
//! opened, the session was not connected so nothing was sent, or ZooKeeper answered with an
//! error that means "not done"); `info` for everything else (connection lost or session
//! expired mid-request, timeouts), because ZooKeeper may still commit such a write.

use crate::api::{LogEntry, LogResponse};
use crate::control::sut::{DataOutcome, ReadError, WriteOutcome};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::sync::Mutex;
use zookeeper_client as zk;

/// Client-side timing.
#[derive(Debug, Clone, Copy)]
pub struct ClientOptions {
    /// Asked of the server, which clamps it to [2, 20] ticks.
    pub session_timeout: Duration,
    /// To open a session (TCP connect + handshake).
    pub connect_timeout: Duration,
    /// Per write, end to end.
    pub write_timeout: Duration,
    /// The whole final read of one node.
    pub read_timeout: Duration,
}

/// The parent of every written znode; the children are `w-<10-digit sequence>`.
pub const TEST_PATH: &str = "/fle-chaos";
const CHILD_PREFIX: &str = "w-";

pub struct Sessions {
    addrs: HashMap<String, SocketAddr>,
    sessions: HashMap<String, Mutex<Option<zk::Client>>>,
    parent_created: AtomicBool,
    pub(super) opts: ClientOptions,
}

/// Why no usable session exists; nothing was sent on its account.
pub(super) struct NoSession(pub(super) String);

impl Sessions {
    pub fn new(addrs: HashMap<String, SocketAddr>, opts: ClientOptions) -> Self {
        let sessions = addrs
            .keys()
            .map(|n| (n.clone(), Mutex::new(None)))
            .collect();
        Sessions {
            addrs,
            sessions,
            parent_created: AtomicBool::new(false),
            opts,
        }
    }

    /// The node's session, opened if there is none or the last one ended.
    pub(super) async fn session(&self, node: &str) -> Result<zk::Client, NoSession> {
        let slot = self
            .sessions
            .get(node)
            .ok_or_else(|| NoSession(format!("no node named {node}")))?;
        let mut slot = slot.lock().await;
        if let Some(client) = slot.as_ref() {
            if !client.state().is_terminated() {
                return Ok(client.clone());
            }
        }
        *slot = None;
        let addr = self.addrs[node];
        let connect_string = addr.to_string();
        let connecting = zk::Client::connector()
            .with_session_timeout(self.opts.session_timeout)
            .with_connection_timeout(self.opts.connect_timeout)
            // Refused = fail now, rather than retrying the one host until the session timeout.
            .with_fail_eagerly()
            .connect(&connect_string);
        let client = match tokio::time::timeout(self.opts.connect_timeout * 2, connecting).await {
            Ok(Ok(c)) => c,
            Ok(Err(e)) => {
                return Err(NoSession(format!(
                    "cannot open a session with {node} ({addr}): {e}"
                )))
            }
            Err(_) => {
                return Err(NoSession(format!(
                    "no session with {node} ({addr}) within {:?}",
                    self.opts.connect_timeout * 2
                )))
            }
        };
        *slot = Some(client.clone());
        Ok(client)
    }

    /// Forgets a session that ended, so the next operation opens a new one.
    pub(super) async fn drop_session(&self, node: &str) {
        if let Some(slot) = self.sessions.get(node) {
            *slot.lock().await = None;
        }
    }

    /// What a request through `node`'s session that ended with `e` did, in Jepsen's terms
    /// (the session dropped when `e` ended it): `Info` when ZooKeeper may have applied it
    /// ([`e_may_have_applied`]), else `not_done`: a refusal, or "not now", as the request's
    /// kind reads it.
    pub(super) async fn outcome_of_error<T>(
        &self,
        node: &str,
        e: zk::Error,
        not_done: fn(String) -> DataOutcome<T>,
    ) -> DataOutcome<T> {
        if e_ends_session(&e) {
            self.drop_session(node).await;
        }
        match e_may_have_applied(&e) {
            true => DataOutcome::Info(format!("{e}")),
            false => not_done(format!("{e}")),
        }
    }

    /// Creates one sequential znode holding `value` (JSON) through `node`.
    pub async fn write(&self, node: &str, value: serde_json::Value) -> WriteOutcome {
        let client = match self.session(node).await {
            Ok(c) => c,
            Err(NoSession(error)) => {
                return WriteOutcome::Fail {
                    error,
                    leader_hint: None,
                }
            }
        };
        let state = client.state();
        if state != zk::SessionState::SyncConnected {
            // The client would queue or refuse the request; either way it is not sent now.
            return WriteOutcome::Fail {
                error: format!("session with {node} is {state:?}; not sent"),
                leader_hint: None,
            };
        }
        let data = match serde_json::to_vec(&value) {
            Ok(d) => d,
            Err(e) => {
                return WriteOutcome::Fail {
                    error: format!("value not serializable: {e}"),
                    leader_hint: None,
                }
            }
        };
        let attempt = async {
            if !self.parent_created.load(Ordering::Relaxed) {
                // The parent's own outcome does not matter to this write: if it is unknown,
                // the write below is still the only one of this value.
                let options = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
                match client.create(TEST_PATH, b"", &options).await {
                    Ok(_) | Err(zk::Error::NodeExists) => {
                        self.parent_created.store(true, Ordering::Relaxed)
                    }
                    Err(e) => return Err((e, false)),
                }
            }
            let options = zk::CreateMode::PersistentSequential.with_acls(zk::Acls::anyone_all());
            let path = format!("{TEST_PATH}/{CHILD_PREFIX}");
            client
                .create(&path, &data, &options)
                .await
                .map(|(stat, _seq)| stat)
                .map_err(|e| (e, true))
        };
        match tokio::time::timeout(self.opts.write_timeout, attempt).await {
            Ok(Ok(stat)) => WriteOutcome::Ok {
                zxid: stat.czxid as u64,
            },
            Ok(Err((e, sent))) => {
                if e_ends_session(&e) {
                    self.drop_session(node).await;
                }
                if !sent {
                    // The parent create failed: the write itself was never sent.
                    WriteOutcome::Fail {
                        error: format!("creating {TEST_PATH}: {e}; write not sent"),
                        leader_hint: None,
                    }
                } else if e_may_have_applied(&e) {
                    WriteOutcome::Info {
                        error: format!("{e}"),
                    }
                } else {
                    WriteOutcome::Fail {
                        error: format!("{e}"),
                        leader_hint: None,
                    }
                }
            }
            Err(_) => WriteOutcome::Info {
                error: format!("no answer within {:?}", self.opts.write_timeout),
            },
        }
    }

    /// The node's view of every written znode, in sequence order, after a `sync` so a
    /// follower has caught up with its leader's commits.
    pub async fn read_log(&self, node: &str) -> Result<LogResponse, ReadError> {
        // The final read comes right after the final heal: a server restarted then is still
        // starting its JVM or syncing (it refuses sessions until it serves), so keep trying
        // for a while. A session held across a kill of its server expires once the server is
        // back: the first read learns that, a fresh session answers.
        let start = std::time::Instant::now();
        let mut retried_session = false;
        loop {
            match self.read_log_once(node).await {
                Err((e @ ReadError::Unreachable(_), _))
                    if start.elapsed() < self.opts.read_timeout =>
                {
                    tracing::debug!("{node}: {}; trying again", e.message());
                    tokio::time::sleep(Duration::from_millis(250)).await;
                }
                Err((e, true)) if !retried_session => {
                    tracing::info!("{node}: {}; reading again with a new session", e.message());
                    retried_session = true;
                }
                other => return other.map_err(|(e, _)| e),
            }
        }
    }

    /// One final read; on error also whether the session ended (worth one retry).
    async fn read_log_once(&self, node: &str) -> Result<LogResponse, (ReadError, bool)> {
        let client = self
            .session(node)
            .await
            .map_err(|NoSession(m)| (ReadError::Unreachable(m), false))?;
        let read = async {
            match client.sync(TEST_PATH).await {
                Ok(()) | Err(zk::Error::NoNode) => {}
                Err(e) => return Err(e),
            }
            let (children, _) = match client.get_children(TEST_PATH).await {
                Ok(c) => c,
                Err(zk::Error::NoNode) => return Ok(Vec::new()),
                Err(e) => return Err(e),
            };
            let mut ordered: Vec<(u64, String)> = children
                .into_iter()
                .filter_map(|name| Some((sequence_of(&name)?, name)))
                .collect();
            ordered.sort();
            let mut entries = Vec::with_capacity(ordered.len());
            for (_, name) in ordered {
                let (data, stat) = client.get_data(&format!("{TEST_PATH}/{name}")).await?;
                entries.push(LogEntry {
                    zxid: stat.czxid as u64,
                    value: decode_value(&data),
                });
            }
            Ok(entries)
        };
        match tokio::time::timeout(self.opts.read_timeout, read).await {
            Ok(Ok(entries)) => Ok(LogResponse {
                last_committed_zxid: entries.iter().map(|e| e.zxid).max().unwrap_or(0),
                entries,
            }),
            Ok(Err(e)) => {
                let ended = e_ends_session(&e);
                if ended {
                    self.drop_session(node).await;
                }
                let msg = format!("reading {TEST_PATH} on {node}: {e}");
                Err((ReadError::Timeout(msg), ended))
            }
            Err(_) => Err((
                ReadError::Timeout(format!(
                    "reading {TEST_PATH} on {node}: no answer within {:?}",
                    self.opts.read_timeout
                )),
                false,
            )),
        }
    }

    /// Closes every session (their ephemeral state on the servers goes with them).
    pub async fn close_all(&self) {
        for slot in self.sessions.values() {
            slot.lock().await.take();
        }
    }
}

/// Whether ZooKeeper may have applied a request that ended with `e`. Errors ZooKeeper returns
/// as a reply to a processed request mean it was not applied; losing the connection or the
/// session mid-request, or an error of the client itself, leave it unknown.
pub(super) fn e_may_have_applied(e: &zk::Error) -> bool {
    use zk::Error::*;
    !matches!(
        e,
        NoNode
            | NoAuth
            | BadVersion
            | NoChildrenForEphemerals
            | NodeExists
            | NotEmpty
            | InvalidAcl
            | AuthFailed
            | NotReadOnly
            | QuotaExceeded
            | Throttled
            | MarshallingError
            | Unimplemented
            | BadArguments(_)
            | ReconfigDisabled
    )
}

pub(super) fn e_ends_session(e: &zk::Error) -> bool {
    matches!(
        e,
        zk::Error::SessionExpired | zk::Error::ClientClosed | zk::Error::AuthFailed
    )
}

/// The sequence number ZooKeeper appended to a child's name (`w-0000000012` → 12).
pub fn sequence_of(name: &str) -> Option<u64> {
    name.strip_prefix(CHILD_PREFIX)?.parse().ok()
}

/// A znode's data as the JSON the workload wrote; anything else (written by someone else)
/// is kept as a string rather than dropped, so the checkers see it.
pub fn decode_value(data: &[u8]) -> serde_json::Value {
    serde_json::from_slice(data)
        .unwrap_or_else(|_| serde_json::Value::String(String::from_utf8_lossy(data).into_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequence_numbers_order_children_numerically() {
        assert_eq!(sequence_of("w-0000000012"), Some(12));
        assert_eq!(sequence_of("w-2147483648"), Some(2_147_483_648));
        assert_eq!(sequence_of("other"), None);
        assert_eq!(sequence_of("w-abc"), None);
    }

    #[test]
    fn values_round_trip_and_foreign_data_is_kept() {
        assert_eq!(decode_value(br#"{"v":3}"#), serde_json::json!({"v": 3}));
        assert_eq!(decode_value(b"\xffraw"), serde_json::json!("\u{fffd}raw"));
    }

    #[test]
    fn lost_connections_are_unknown_and_refusals_are_failures() {
        assert!(e_may_have_applied(&zk::Error::ConnectionLoss));
        assert!(e_may_have_applied(&zk::Error::SessionExpired));
        assert!(e_may_have_applied(&zk::Error::Timeout));
        assert!(!e_may_have_applied(&zk::Error::NoNode));
        assert!(!e_may_have_applied(&zk::Error::Throttled));
    }
}
