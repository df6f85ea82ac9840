//! What a client sees of the data tree, as a ZooKeeper client does: `POST /data` (an op the
//! leader proposes as a txn, answered from the leader's tree once committed), `GET /data/KEY`
//! (this server's own applied tree, possibly stale) and `POST /sync` (catch up with what the
//! leader had committed, so a read after it is not stale).
//!
//! Ops go where `/write`s go ([`Writes`]: proposed when leading, forwarded when following,
//! refused when looking), with the same promises: 200 done, 409 certainly refused, 503
//! certainly not applied, 504 maybe. Reads and syncs are served only in Zab's broadcast phase,
//! as ZooKeeper serves clients only once synced with a leader. Three seeded bugs live here:
//! `reads-without-quorum`, `sync-before-applied` and `cas-on-stale-version` (see `bugs`).

use std::time::Duration;

use serde_json::Value;
use tokio::sync::watch;

use crate::api::{DataOp, DataRead, DataWritten, NodeStatus, ServerState, Synced, ZabPhase};
use crate::bugs::{Bug, Bugs};
use crate::data::{self, check_key, Outcome, SharedTree, Tree};
use crate::write_route::{error, Route, Writes};
use crate::zab::store::{lock, SharedStore};

/// What the data handlers need; cheap to clone.
#[derive(Clone)]
pub struct Data {
    pub writes: Writes,
    pub tree: SharedTree,
    pub store: SharedStore,
    /// This server's published status: whether it serves, and its leader.
    pub status: watch::Receiver<NodeStatus>,
    pub bugs: Bugs,
}

/// Whether this server answers reads and syncs, and as what.
#[derive(Debug, PartialEq, Eq)]
enum Serving {
    Leader,
    Learner { leader: u64 },
    Not(String),
}

fn ok<T: serde::Serialize>(body: T) -> (u16, Value) {
    (200, serde_json::to_value(body).unwrap_or_default())
}

/// A `POST /data` body as an op with a valid key, or the one line saying what is wrong.
pub fn parse_op(body: &[u8]) -> Result<DataOp, String> {
    let op: DataOp = serde_json::from_slice(body).map_err(|e| {
        format!(
            "the body must be JSON {{\"op\": \"create\"|\"set\"|\"cas\", \"key\": K, \"value\": \
             INTEGER[, \"version\": INTEGER for cas]}}: {e}"
        )
    })?;
    check_key(op.key())?;
    Ok(op)
}

/// The op a follower forwards to its leader. Correct: the op as the client sent it, checked
/// by the leader against the one order of txns.
pub fn forwarded_op(op: DataOp, tree: &Tree, bugs: Bugs) -> Result<DataOp, Outcome> {
    if !bugs.has(Bug::CasOnStaleVersion) {
        return Ok(op);
    }
    // Seeded cas-on-stale-version: the version is checked against this follower's own,
    // possibly stale, tree, and a match goes on as an unconditional set.
    let DataOp::Cas {
        key,
        version,
        value,
    } = op
    else {
        return Ok(op);
    };
    match tree.get(&key) {
        Some(n) if n.version == version => Ok(DataOp::Set { key, value }),
        Some(n) => Err(Outcome::Refused(format!(
            "bad version: expected {version}, the key is at {}",
            n.version
        ))),
        None => Err(Outcome::Refused(format!("no node: {key}"))),
    }
}

impl Data {
    fn serving(&self) -> Serving {
        let s = self.status.borrow();
        match (s.state, s.zab_phase) {
            (ServerState::Leading, ZabPhase::Broadcast) => Serving::Leader,
            (ServerState::Following | ServerState::Observing, ZabPhase::Broadcast) => {
                Serving::Learner {
                    leader: s.leader.unwrap_or_default(),
                }
            }
            // Seeded reads-without-quorum: a leader gone back to LOOKING (its quorum lost)
            // still serves from its own state, as a leader without a lease would.
            (ServerState::Looking, _)
                if self.bugs.has(Bug::ReadsWithoutQuorum)
                    && s.last_election.as_ref().is_some_and(|e| e.leader == s.sid) =>
            {
                Serving::Leader
            }
            (ServerState::Looking, _) => Serving::Not("looking for a leader".into()),
            (state, phase) => Serving::Not(format!(
                "{} in Zab's {} phase, not yet synced with its leader",
                format!("{state:?}").to_lowercase(),
                format!("{phase:?}").to_lowercase()
            )),
        }
    }

    fn applied(&self) -> std::sync::MutexGuard<'_, Tree> {
        data::applied(&self.tree, &self.store)
    }

    /// `POST /data`: (HTTP status, JSON body).
    pub async fn write(&self, body: &[u8], forwarded: bool) -> (u16, Value) {
        let op = match parse_op(body) {
            Ok(op) => op,
            Err(e) => return error(400, e, None),
        };
        match self.writes.current() {
            Route::Looking => error(
                503,
                "looking for a leader; the op was not applied (retry later)".into(),
                None,
            ),
            Route::Leading(tx) => {
                let value = serde_json::to_value(&op).unwrap_or_default();
                match self.writes.commit(tx, value).await {
                    Ok(zxid) => self.answer_committed(zxid),
                    Err(answer) => answer,
                }
            }
            Route::Following { leader } if forwarded => error(
                503,
                format!("not the leader any more (following {leader}); not applied"),
                Some(leader),
            ),
            Route::Following { leader } => {
                let checked = forwarded_op(op, &self.applied(), self.bugs);
                match checked {
                    Ok(op) => self.forward_write(leader, &op).await,
                    Err(refused) => answer_outcome(refused, 0),
                }
            }
        }
    }

    /// A follower's op, through its leader. As a ZooKeeper follower answers its client only
    /// once it applied the txn itself, the leader's 200 is passed on once this server applied
    /// the op's zxid, so a read here right after sees it (read-your-writes on one server);
    /// 504 (outcome unknown to the client) if it cannot within the write's wait.
    async fn forward_write(&self, leader: u64, op: &DataOp) -> (u16, Value) {
        let deadline = tokio::time::Instant::now() + self.writes.wait;
        let (code, body) = self.writes.forward(leader, "/data", op).await;
        if code != 200 {
            return (code, body);
        }
        let Ok(DataWritten { zxid, .. }) = serde_json::from_value(body.clone()) else {
            return error(
                504,
                format!("leader {leader} answered the op with an unreadable body"),
                Some(leader),
            );
        };
        match self.applied_by(zxid, deadline).await {
            Ok(_) => (code, body),
            Err(applied) => error(
                504,
                format!(
                    "committed at {zxid:#x} by leader {leader}, but this server applied only \
                     {applied:#x} within {:?}; outcome unknown",
                    self.writes.wait
                ),
                Some(leader),
            ),
        }
    }

    /// The answer to an op committed at `zxid`: what it did in this leader's tree.
    fn answer_committed(&self, zxid: u64) -> (u16, Value) {
        let outcome = {
            let tree = self.applied();
            match tree.outcome(zxid) {
                Some(o) => Some(o.clone()),
                None => Tree::replay_outcome(lock(&self.store).log().committed_from(0), zxid),
            }
        };
        match outcome {
            Some(o) => answer_outcome(o, zxid),
            None => error(
                504,
                format!("committed at {zxid:#x} but the log no longer holds it; outcome unknown"),
                None,
            ),
        }
    }

    /// `GET /data/KEY`.
    pub fn read(&self, key: &str) -> (u16, Value) {
        if let Err(e) = check_key(key) {
            return error(400, e, None);
        }
        if let Serving::Not(why) = self.serving() {
            return error(503, format!("not serving reads: {why}"), None);
        }
        let tree = self.applied();
        let node = tree.get(key);
        ok(DataRead {
            key: key.to_string(),
            value: node.map(|n| n.value),
            version: node.map_or(-1, |n| n.version),
            zxid: tree.applied(),
        })
    }

    /// `POST /sync`: the leader answers at once; a learner asks its leader what it committed,
    /// then waits until it applied that much itself.
    pub async fn sync(&self, forwarded: bool) -> (u16, Value) {
        let leader = match self.serving() {
            Serving::Not(why) => return error(503, format!("not serving syncs: {why}"), None),
            Serving::Leader => {
                return ok(Synced {
                    zxid: self.applied().applied(),
                })
            }
            Serving::Learner { leader } if forwarded => {
                return error(
                    503,
                    format!("not the leader any more (following {leader})"),
                    Some(leader),
                )
            }
            Serving::Learner { leader } => leader,
        };
        if self.bugs.has(Bug::SyncBeforeApplied) {
            // Seeded sync-before-applied: answered from what this server applied, without
            // flushing the channel from the leader.
            return ok(Synced {
                zxid: self.applied().applied(),
            });
        }
        let deadline = tokio::time::Instant::now() + self.writes.wait;
        let (code, body) = self.writes.forward(leader, "/sync", &Value::Null).await;
        if code != 200 {
            return (code, body);
        }
        let Ok(Synced { zxid: target }) = serde_json::from_value(body) else {
            return error(
                504,
                format!("leader {leader} answered the sync with an unreadable body"),
                Some(leader),
            );
        };
        self.wait_applied(target, deadline, leader).await
    }

    /// Answers once this server applied `target`, or 504 at `deadline`.
    async fn wait_applied(
        &self,
        target: u64,
        deadline: tokio::time::Instant,
        leader: u64,
    ) -> (u16, Value) {
        match self.applied_by(target, deadline).await {
            Ok(applied) => ok(Synced { zxid: applied }),
            Err(applied) => {
                let limit: Duration = self.writes.wait;
                error(
                    504,
                    format!(
                        "leader {leader} had committed {target:#x}; this server applied only \
                         {applied:#x} within {limit:?}"
                    ),
                    Some(leader),
                )
            }
        }
    }

    /// Waits until this server applied `target`: Ok(what it applied), or Err(what it had
    /// applied) at `deadline`.
    async fn applied_by(&self, target: u64, deadline: tokio::time::Instant) -> Result<u64, u64> {
        let mut status = self.status.clone();
        let reached = status.wait_for(|s| s.last_committed_zxid >= target);
        let waited = tokio::time::timeout_at(deadline, reached).await;
        let applied = self.applied().applied();
        match matches!(waited, Ok(Ok(_))) && applied >= target {
            true => Ok(applied),
            false => Err(applied),
        }
    }
}

/// 200 [`DataWritten`] for a change, 409 for a refusal (certainly not applied).
fn answer_outcome(outcome: Outcome, zxid: u64) -> (u16, Value) {
    match outcome {
        Outcome::Changed { version } => ok(DataWritten { version, zxid }),
        Outcome::Refused(why) => error(409, why, None),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use serde_json::json;

    use super::*;
    use crate::api::ElectionSummary;
    use crate::membership::members_with_client;
    use crate::txnlog::Txn;
    use crate::zab::Store;

    fn status(state: ServerState, phase: ZabPhase, leader: Option<u64>) -> NodeStatus {
        NodeStatus {
            accepted_epoch: 1,
            config: None,
            election_epoch: 1,
            last_committed_zxid: 0,
            last_election: None,
            last_zxid: 0,
            last_zxid_hex: "0x0".into(),
            leader,
            peer_epoch: 1,
            peer_type: Default::default(),
            sid: 1,
            state,
            uptime_ms: 0,
            wall_clock_ms: 0,
            zab_phase: phase,
        }
    }

    /// Server 1 with `status`, its leader 2 at an address where nothing listens, and one
    /// committed create of `k`.
    fn server(status: NodeStatus, bugs: Bugs) -> (Data, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let (store, _) = Store::open_shared(dir.path()).unwrap();
        let create = DataOp::Create {
            key: "k".into(),
            value: 5,
        };
        {
            let mut s = lock(&store);
            let value = serde_json::to_value(create).unwrap();
            s.log_mut().append(&[Txn { zxid: 1, value }]).unwrap();
            s.log_mut().commit(1).unwrap();
        }
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = closed.local_addr().unwrap().to_string();
        drop(closed);
        let writes = Writes {
            route: Arc::new(Mutex::new(Route::Following { leader: 2 })),
            members: members_with_client(2, addr),
            wait: Duration::from_secs(2),
        };
        let (_tx, status) = watch::channel(status);
        let data = Data {
            writes,
            tree: SharedTree::default(),
            store,
            status,
            bugs,
        };
        (data, dir)
    }

    fn error_line(answer: &(u16, Value)) -> String {
        let e = answer.1["error"].as_str().unwrap().to_string();
        assert!(!e.contains('\n'), "{e}");
        e
    }

    #[test]
    fn bad_op_bodies_are_refused_with_one_line_and_never_a_panic() {
        let bad: &[&[u8]] = &[
            b"",
            b"not json",
            b"\xff\xfe\x00",
            b"{\"op\":\"delete\",\"key\":\"k\"}",
            b"{\"op\":\"create\",\"key\":\"k\"}",
            b"{\"op\":\"cas\",\"key\":\"k\",\"value\":1}",
            b"{\"op\":\"set\",\"key\":\"k\",\"value\":1.5}",
            b"{\"op\":\"set\",\"key\":\"k\",\"value\":9223372036854775808}",
            b"{\"op\":\"set\",\"key\":\"Upper\",\"value\":1}",
            b"{\"op\":\"set\",\"key\":\"\",\"value\":1}",
            b"[1,2]",
        ];
        for body in bad {
            let e = parse_op(body).unwrap_err();
            assert!(!e.contains('\n') && !e.is_empty(), "{e}");
        }
        let ok = parse_op(br#"{"op":"cas","key":"k1","version":3,"value":7}"#).unwrap();
        let expected = DataOp::Cas {
            key: "k1".into(),
            version: 3,
            value: 7,
        };
        assert_eq!(ok, expected);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let (data, _dir) = server(
            status(ServerState::Following, ZabPhase::Broadcast, Some(2)),
            Bugs::none(),
        );
        let answer = rt.block_on(data.write(b"{\"op\":1}", false));
        assert_eq!(answer.0, 400);
        assert!(error_line(&answer).contains("\"op\""));
        let answer = data.read("No Such/Key");
        assert_eq!(answer.0, 400);
        assert!(error_line(&answer).contains("1-64 characters"));
    }

    #[test]
    fn reads_are_served_only_in_broadcast_from_the_applied_tree() {
        let (data, _dir) = server(
            status(ServerState::Following, ZabPhase::Broadcast, Some(2)),
            Bugs::none(),
        );
        let answer = data.read("k");
        assert_eq!(answer.0, 200);
        let read: DataRead = serde_json::from_value(answer.1).unwrap();
        let expected = DataRead {
            key: "k".into(),
            value: Some(5),
            version: 0,
            zxid: 1,
        };
        assert_eq!(read, expected);
        let absent: DataRead = serde_json::from_value(data.read("nope").1).unwrap();
        assert_eq!((absent.value, absent.version, absent.zxid), (None, -1, 1));
        for (state, phase) in [
            (ServerState::Following, ZabPhase::Sync),
            (ServerState::Leading, ZabPhase::Discovery),
            (ServerState::Looking, ZabPhase::Election),
        ] {
            let (data, _dir) = server(status(state, phase, Some(2)), Bugs::none());
            let answer = data.read("k");
            assert_eq!(answer.0, 503, "{state:?} {phase:?}");
            assert!(error_line(&answer).starts_with("not serving reads"));
        }
    }

    /// A server that led (its last election named itself) and went back to LOOKING.
    fn deposed_leader() -> NodeStatus {
        let mut s = status(ServerState::Looking, ZabPhase::Election, None);
        s.last_election = Some(ElectionSummary {
            joined: false,
            leader: 1,
            own_round: None,
            peer_epoch: 1,
            received: Vec::new(),
            round: 1,
            took_ms: 200,
            votes: Vec::new(),
            zxid: 0,
        });
        s
    }

    #[test]
    fn seeded_reads_without_quorum_serves_reads_and_syncs_after_the_quorum_is_lost() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let (correct, _d1) = server(deposed_leader(), Bugs::none());
        assert_eq!(correct.read("k").0, 503);
        assert_eq!(rt.block_on(correct.sync(false)).0, 503);
        let (buggy, _d2) = server(deposed_leader(), Bugs::of(&[Bug::ReadsWithoutQuorum]));
        assert_eq!(buggy.read("k").0, 200);
        assert_eq!(rt.block_on(buggy.sync(false)), ok(Synced { zxid: 1 }));
        // A server that was following is not served by the bug.
        let (follower, _d3) = server(
            status(ServerState::Looking, ZabPhase::Election, None),
            Bugs::of(&[Bug::ReadsWithoutQuorum]),
        );
        assert_eq!(follower.read("k").0, 503);
    }

    #[test]
    fn a_follower_syncs_through_its_leader_unless_sync_before_applied_is_seeded() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let following = || status(ServerState::Following, ZabPhase::Broadcast, Some(2));
        // Its leader cannot be reached: the correct sync cannot know what was committed.
        let (correct, _d1) = server(following(), Bugs::none());
        let answer = rt.block_on(correct.sync(false));
        assert_eq!(answer.0, 503, "{answer:?}");
        assert!(error_line(&answer).contains("cannot reach leader 2"));
        // A sync forwarded to a follower is not forwarded again.
        assert_eq!(rt.block_on(correct.sync(true)).0, 503);
        let (buggy, _d2) = server(following(), Bugs::of(&[Bug::SyncBeforeApplied]));
        assert_eq!(rt.block_on(buggy.sync(false)), ok(Synced { zxid: 1 }));
    }

    #[test]
    fn seeded_cas_on_stale_version_turns_a_cas_matching_the_local_tree_into_a_set() {
        let mut tree = Tree::default();
        let create = json!({"op": "create", "key": "k", "value": 1});
        tree.apply(&Txn {
            zxid: 1,
            value: create,
        });
        let cas = |version| DataOp::Cas {
            key: "k".into(),
            version,
            value: 9,
        };
        let bug = Bugs::of(&[Bug::CasOnStaleVersion]);
        // Correct: the cas goes to the leader as it is, whatever this tree says.
        assert_eq!(forwarded_op(cas(0), &tree, Bugs::none()), Ok(cas(0)));
        assert_eq!(forwarded_op(cas(7), &tree, Bugs::none()), Ok(cas(7)));
        // Seeded: checked here (version 0 is this tree's, maybe stale) and sent as a set.
        let set = DataOp::Set {
            key: "k".into(),
            value: 9,
        };
        assert_eq!(forwarded_op(cas(0), &tree, bug), Ok(set));
        assert_eq!(
            forwarded_op(cas(7), &tree, bug),
            Err(Outcome::Refused(
                "bad version: expected 7, the key is at 0".into()
            ))
        );
        // The leader's tree, one set ahead, would have refused the cas the bug let through.
        let mut leader = Tree::default();
        leader.apply(&Txn {
            zxid: 1,
            value: json!({"op": "create", "key": "k", "value": 1}),
        });
        leader.apply(&Txn {
            zxid: 2,
            value: json!({"op": "set", "key": "k", "value": 2}),
        });
        let as_cas = Txn {
            zxid: 3,
            value: serde_json::to_value(cas(0)).unwrap(),
        };
        assert!(matches!(leader.apply(&as_cas), Some(Outcome::Refused(_))));
    }
}
